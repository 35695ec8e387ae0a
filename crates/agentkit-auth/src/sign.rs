//! HMAC-SHA256 signing, next to the verifiers that check it: webhook and
//! hook bodies (`sha256=<hex>` headers) and the host bridge's per-call
//! credentials. Every check is constant-time (`Mac::verify_slice`).

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// What separates the bridge credential's parts, so no two (call, session)
/// pairs feed the MAC the same bytes.
const BRIDGE_CALL_DOMAIN: &[u8] = b"agentkit-bridge-call";

/// An HMAC-SHA256 keyed with `key`.
pub(crate) fn keyed(key: &[u8]) -> Hmac<Sha256> {
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

/// How far a Slack request's signed timestamp may be from now (Slack's
/// own guidance: five minutes), so a captured request cannot be replayed.
pub const SLACK_MAX_AGE_SECS: i64 = 300;

/// Slack's `X-Slack-Signature` of a request: `v0=` and the hex
/// HMAC-SHA256 of `v0:{timestamp}:{raw body}` keyed with the app's
/// signing secret.
pub fn sign_slack(secret: &str, timestamp: &str, body: &[u8]) -> String {
    let mut mac = keyed(secret.as_bytes());
    slack_basestring(&mut mac, timestamp, body);
    format!("v0={}", hex::encode(mac.finalize().into_bytes()))
}

fn slack_basestring(mac: &mut Hmac<Sha256>, timestamp: &str, body: &[u8]) {
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
}

/// Why a Slack request's signature did not verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlackError {
    EmptySecret,
    /// The timestamp is not a number, or is outside the window.
    Stale,
    /// No `v0=` prefix.
    WrongVersion,
    NotHex,
    Mismatch,
}

/// Checks `X-Slack-Signature` (`signature`) against the raw body and
/// `X-Slack-Request-Timestamp` (`timestamp`), at `now` (Unix seconds):
/// the timestamp first (within [`SLACK_MAX_AGE_SECS`]), then the MAC in
/// constant time.
pub(crate) fn verify_slack_tag(
    secret: &[u8],
    timestamp: &[u8],
    body: &[u8],
    signature: &[u8],
    now: i64,
) -> Result<(), SlackError> {
    if secret.is_empty() {
        return Err(SlackError::EmptySecret);
    }
    let ts = std::str::from_utf8(timestamp)
        .ok()
        .and_then(|t| t.trim().parse::<i64>().ok())
        .ok_or(SlackError::Stale)?;
    if (now - ts).abs() > SLACK_MAX_AGE_SECS {
        return Err(SlackError::Stale);
    }
    let hex_tag = signature
        .trim_ascii()
        .strip_prefix(b"v0=")
        .ok_or(SlackError::WrongVersion)?;
    let tag = hex::decode(hex_tag).map_err(|_| SlackError::NotHex)?;
    let mut mac = keyed(secret);
    slack_basestring(&mut mac, &ts.to_string(), body);
    mac.verify_slice(&tag).map_err(|_| SlackError::Mismatch)
}

/// Whether a Slack request verifies at `now` (Unix seconds): see
/// [`sign_slack`].
pub fn verify_slack(secret: &str, timestamp: &str, body: &[u8], signature: &str, now: i64) -> bool {
    verify_slack_tag(
        secret.as_bytes(),
        timestamp.as_bytes(),
        body,
        signature.as_bytes(),
        now,
    ) == Ok(())
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
    fn slack_signatures_match_slacks_documented_example_and_expire() {
        // The example of Slack's "Verifying requests from Slack" page.
        let secret = "8f742231b10e8888abcd99yyyzzz85a5";
        let body = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        let ts = "1531420618";
        let sig = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
        assert_eq!(sign_slack(secret, ts, body), sig);
        let now = 1_531_420_618;
        assert!(verify_slack(secret, ts, body, sig, now));
        assert!(verify_slack(
            secret,
            ts,
            body,
            sig,
            now + SLACK_MAX_AGE_SECS
        ));
        assert!(!verify_slack(
            secret,
            ts,
            body,
            sig,
            now + SLACK_MAX_AGE_SECS + 1
        ));
        assert!(!verify_slack(
            secret,
            ts,
            body,
            sig,
            now - SLACK_MAX_AGE_SECS - 1
        ));
        assert!(!verify_slack(secret, "1531420619", body, sig, now));
        assert!(!verify_slack(secret, ts, b"token=x", sig, now));
        assert!(!verify_slack("other", ts, body, sig, now));
        assert!(!verify_slack(secret, ts, body, &sig[3..], now));
        assert!(!verify_slack(secret, "soon", body, sig, now));
        assert!(!verify_slack("", ts, body, &sign_slack("", ts, body), now));
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
