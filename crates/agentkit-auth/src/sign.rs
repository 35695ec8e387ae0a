//! HMAC-SHA256 signing, next to the verifiers that check it: webhook and
//! hook bodies (`sha256=<hex>` headers) and the host bridge's per-call
//! credentials. Every check is constant-time (`Mac::verify_slice`).

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// What separates the bridge credential's parts, so no two (call, session)
/// pairs feed the MAC the same bytes.
const BRIDGE_CALL_DOMAIN: &[u8] = b"agentkit-bridge-call";

/// An HMAC-SHA256 keyed with `key`.
fn keyed(key: &[u8]) -> Hmac<Sha256> {
    // HMAC takes a key of any length (longer keys are hashed first), so
    // this never fails.
    <Hmac<Sha256> as KeyInit>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC takes any key length"))
}

/// The hex HMAC-SHA256 of `body` keyed with `secret`: the value after
/// `sha256=` in `X-Hub-Signature-256`, `X-Agentkit-Signature` and the
/// signatures of event deliveries.
pub fn sign_body(secret: &str, body: &[u8]) -> String {
    let mut mac = keyed(secret.as_bytes());
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

/// Whether `hex_tag` (hex, either case) is the HMAC-SHA256 of `body` keyed
/// with `secret`, compared in constant time. An empty secret or a tag that
/// is not hex never verifies.
pub fn verify_body(secret: &str, body: &[u8], hex_tag: &[u8]) -> bool {
    verify_body_tag(secret.as_bytes(), body, hex_tag) == Ok(())
}

/// Why a body's tag did not verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TagError {
    EmptySecret,
    NotHex,
    Mismatch,
}

pub(crate) fn verify_body_tag(secret: &[u8], body: &[u8], hex_tag: &[u8]) -> Result<(), TagError> {
    if secret.is_empty() {
        return Err(TagError::EmptySecret);
    }
    let tag = hex::decode(hex_tag).map_err(|_| TagError::NotHex)?;
    let mut mac = keyed(secret);
    mac.update(body);
    mac.verify_slice(&tag).map_err(|_| TagError::Mismatch)
}

fn bridge_call_mac(secret: &str, call: &str, session: &str, hops: u32) -> Hmac<Sha256> {
    let mut mac = keyed(secret.as_bytes());
    for part in [BRIDGE_CALL_DOMAIN, call.as_bytes(), session.as_bytes()] {
        mac.update(part);
        mac.update(&[0]);
    }
    mac.update(&hops.to_be_bytes());
    mac
}

/// The hex MAC of a host bridge call credential: binds call id `call` to
/// its session and delegation depth under the agent's per-boot `secret`.
pub fn sign_bridge_call(secret: &str, call: &str, session: &str, hops: u32) -> String {
    hex::encode(
        bridge_call_mac(secret, call, session, hops)
            .finalize()
            .into_bytes(),
    )
}

/// Whether `hex_tag` is the bridge call credential MAC of (`call`,
/// `session`, `hops`) under `secret`, compared in constant time. An empty
/// secret never verifies.
pub fn verify_bridge_call(
    secret: &str,
    call: &str,
    session: &str,
    hops: u32,
    hex_tag: &str,
) -> bool {
    if secret.is_empty() {
        return false;
    }
    let Ok(tag) = hex::decode(hex_tag) else {
        return false;
    };
    bridge_call_mac(secret, call, session, hops)
        .verify_slice(&tag)
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_signatures_match_known_vectors() {
        // GitHub's documented example.
        assert_eq!(
            sign_body("It's a Secret to Everybody", b"Hello, World!"),
            "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
        );
        // RFC 4231, test case 2.
        assert_eq!(
            sign_body("Jefe", b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn body_signatures_round_trip_and_refuse_changes() {
        let tag = sign_body("s3cret", b"{\"a\":1}");
        assert!(verify_body("s3cret", b"{\"a\":1}", tag.as_bytes()));
        assert!(verify_body(
            "s3cret",
            b"{\"a\":1}",
            tag.to_ascii_uppercase().as_bytes()
        ));
        assert!(!verify_body("s3cret", b"{\"a\":2}", tag.as_bytes()));
        assert!(!verify_body("other", b"{\"a\":1}", tag.as_bytes()));
        assert!(!verify_body("s3cret", b"{\"a\":1}", &tag.as_bytes()[..62]));
        assert!(!verify_body("s3cret", b"{\"a\":1}", b"zz"));
        // An empty secret never verifies, even its own signature.
        assert!(!verify_body("", b"x", sign_body("", b"x").as_bytes()));
    }

    #[test]
    fn bridge_call_credentials_bind_call_session_and_depth() {
        let tag = sign_bridge_call("boot", "c1", "s1", 0);
        assert_eq!(tag.len(), 64);
        assert!(verify_bridge_call("boot", "c1", "s1", 0, &tag));
        assert!(!verify_bridge_call("boot", "c1", "s2", 0, &tag));
        assert!(!verify_bridge_call("boot", "c1", "s1", 1, &tag));
        assert!(!verify_bridge_call("boot", "c2", "s1", 0, &tag));
        assert!(!verify_bridge_call("other", "c1", "s1", 0, &tag));
        assert!(!verify_bridge_call(
            "",
            "c1",
            "s1",
            0,
            &sign_bridge_call("", "c1", "s1", 0)
        ));
        assert!(!verify_bridge_call("boot", "c1", "s1", 0, "not hex"));
        // The separators keep (call, session) pairs apart.
        assert_ne!(
            sign_bridge_call("boot", "ab", "c", 0),
            sign_bridge_call("boot", "a", "bc", 0)
        );
    }
}
