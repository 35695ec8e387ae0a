//! A secret value that never shows in `Debug` output or logs, compared in
//! constant time.

use std::fmt;

use sha2::{Digest, Sha256};
use subtle::{Choice, ConstantTimeEq};

/// A resolved secret: a bearer token, a shared secret or an HMAC key.
///
/// `Debug` prints `<redacted>`. Comparison hashes both sides with SHA-256
/// and compares the digests in constant time, so neither the content nor
/// the length of the secret leaks through timing.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself, for the few places that must use it (the HMAC key).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// An empty secret (for example an unset `${VAR}`) never admits.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `presented` equals this secret, in constant time. Always
    /// false for an empty secret.
    pub(crate) fn matches(&self, presented: &[u8]) -> Choice {
        let configured = Sha256::digest(self.0.as_bytes());
        let presented = Sha256::digest(presented);
        let non_empty = Choice::from(u8::from(!self.is_empty()));
        configured.as_slice().ct_eq(presented.as_slice()) & non_empty
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Secret(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Secret(value.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_only_the_exact_value() {
        let s = Secret::new("hunter2");
        assert!(bool::from(s.matches(b"hunter2")));
        assert!(!bool::from(s.matches(b"hunter")));
        assert!(!bool::from(s.matches(b"hunter22")));
        assert!(!bool::from(s.matches(b"")));
    }

    #[test]
    fn empty_secret_matches_nothing_not_even_empty() {
        let s = Secret::new("");
        assert!(!bool::from(s.matches(b"")));
        assert!(!bool::from(s.matches(b"x")));
    }

    #[test]
    fn debug_is_redacted() {
        assert_eq!(
            format!("{:?}", Secret::new("hunter2")),
            "Secret(<redacted>)"
        );
    }
}
