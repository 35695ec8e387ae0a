//! Secrets kept out of messages and logs: the user and password of a URL
//! a user configured, and `Basic` / `Bearer` credentials a server echoes
//! back. The one redaction every error message about a request goes
//! through.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

/// `text` without the user and password of any URL in it and without the
/// value of any `Basic` or `Bearer` credential: for messages and logs that
/// show a URL a user configured (it may carry credentials).
pub fn redact_credentials(text: &str) -> String {
    static USERINFO: LazyLock<Option<Regex>> =
        LazyLock::new(|| Regex::new(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^\s/?#@]*@").ok());
    static CREDENTIAL: LazyLock<Option<Regex>> =
        LazyLock::new(|| Regex::new(r"(?i)\b(basic|bearer)(\s+)[a-z0-9+/=._~\-]{6,}").ok());
    let mut text = Cow::Borrowed(text);
    if let Some(re) = USERINFO.as_ref() {
        text = Cow::Owned(re.replace_all(&text, "${1}").into_owned());
    }
    if let Some(re) = CREDENTIAL.as_ref() {
        text = Cow::Owned(re.replace_all(&text, "${1}${2}<redacted>").into_owned());
    }
    text.into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_user_and_password_and_credentials_their_value() {
        let text = "POST https://bot:s3cret@hooks.example.com/x?a=1 failed; \
                    Authorization: Basic dXNlcjpzM2NyZXQ= and bearer abcdefgh, \
                    see http://example.com/docs and Bearer abc";
        assert_eq!(
            redact_credentials(text),
            "POST https://hooks.example.com/x?a=1 failed; \
             Authorization: Basic <redacted> and bearer <redacted>, \
             see http://example.com/docs and Bearer abc"
        );
    }
}
