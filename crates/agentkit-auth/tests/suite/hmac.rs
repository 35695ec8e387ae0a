//! HMAC-SHA256 body signatures, including GitHub's `X-Hub-Signature-256`.

use futures_util::FutureExt;

use agentkit_auth::{Chain, Policy, PrincipalType, RequestParts, Surface};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::{REMOTE, outcome};

/// The example from GitHub's "Validating webhook deliveries" page.
const GITHUB_SECRET: &str = "It's a Secret to Everybody";
const GITHUB_PAYLOAD: &[u8] = b"Hello, World!";
const GITHUB_SIGNATURE: &str = "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

/// Computes the expected signature independently of the crate under test.
fn sign(secret: &str, body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

fn github(secret: &str) -> Policy {
    Policy::HmacSignature {
        header: "X-Hub-Signature-256".into(),
        secret: secret.into(),
        prefix: Some("sha256=".into()),
    }
}

fn signed<'a>(header_value: &'a str, body: &'a [u8]) -> RequestParts<'a> {
    RequestParts::new(REMOTE)
        .with_header("x-hub-signature-256", header_value)
        .with_body(body)
}

#[test]
fn github_documented_vector() {
    assert_eq!(sign(GITHUB_SECRET, GITHUB_PAYLOAD), GITHUB_SIGNATURE);
    let value = format!("sha256={GITHUB_SIGNATURE}");
    let chain = Chain::new(vec![github(GITHUB_SECRET)], Surface::CustomChannel);
    let ctx = chain
        .admit(&signed(&value, GITHUB_PAYLOAD))
        .now_or_never()
        .unwrap()
        .unwrap();
    assert_eq!(ctx.authenticator, "hmacSignature");
    assert_eq!(ctx.principal_id, "hmacSignature:x-hub-signature-256");
    assert_eq!(ctx.principal_type, PrincipalType::App);
}

#[test]
fn github_style_computed_signature() {
    let body = br#"{"action":"opened","number":1}"#;
    let value = format!("sha256={}", sign("webhook-secret", body));
    let p = [github("webhook-secret")];
    let admitted = "hmacSignature/hmacSignature:x-hub-signature-256";
    assert_eq!(
        outcome(&p, Surface::CustomChannel, &signed(&value, body)),
        admitted
    );
    // The signature is checked before anything parses the body, so even a
    // body that is not JSON is admitted when signed.
    let junk = b"\xff\xfenot json";
    let value = format!("sha256={}", sign("webhook-secret", junk));
    assert_eq!(
        outcome(&p, Surface::CustomChannel, &signed(&value, junk)),
        admitted
    );
}

#[test]
fn github_signature_refusals() {
    let body = br#"{"action":"opened"}"#;
    let good = sign("webhook-secret", body);
    let p = [github("webhook-secret")];
    let s = Surface::CustomChannel;
    let cases: Vec<(String, &[u8], &str)> = vec![
        (format!("sha256={good}"), body, "admitted"),
        (
            format!("sha256={}", sign("other-secret", body)),
            body,
            "denied(mismatch)",
        ),
        (
            format!("sha256={good}"),
            br#"{"action":"closed"}"#,
            "denied(mismatch)",
        ),
        (format!("sha256={good}"), b"", "denied(mismatch)"),
        (good.clone(), body, "denied(prefix)"),
        (format!("sha1={good}"), body, "denied(prefix)"),
        (format!("SHA256={good}"), body, "denied(prefix)"),
        (format!("sha256={}", &good[1..]), body, "denied(malformed)"),
        (
            format!("sha256={}zz", &good[2..]),
            body,
            "denied(malformed)",
        ),
        (format!("sha256={good}00"), body, "denied(mismatch)"),
        (format!("sha256={}", &good[..32]), body, "denied(mismatch)"),
        ("sha256=".to_owned(), body, "denied(mismatch)"),
    ];
    for (value, body, expected) in cases {
        let got = outcome(&p, s, &signed(&value, body));
        let got = if got.starts_with("hmacSignature/") {
            "admitted"
        } else {
            got.as_str()
        };
        assert_eq!(got, expected, "signature {value:?}");
    }
    assert_eq!(
        outcome(&p, s, &RequestParts::new(REMOTE).with_body(body)),
        "denied(no-header)"
    );
}

#[test]
fn unprefixed_signature() {
    let p = [Policy::HmacSignature {
        header: "x-signature".into(),
        secret: "k".into(),
        prefix: None,
    }];
    let body = b"payload";
    let sig = sign("k", body);
    let req = RequestParts::new(REMOTE)
        .with_header("X-Signature", &sig)
        .with_body(body);
    assert_eq!(
        outcome(&p, Surface::CustomChannel, &req),
        "hmacSignature/hmacSignature:x-signature"
    );
    let prefixed = format!("sha256={sig}");
    let req = RequestParts::new(REMOTE)
        .with_header("x-signature", &prefixed)
        .with_body(body);
    assert_eq!(
        outcome(&p, Surface::CustomChannel, &req),
        "denied(malformed)"
    );
}

#[test]
fn empty_hmac_secret_never_admits() {
    // Even a correct HMAC keyed with the empty string is refused: an unset
    // `${VAR}` must not let anyone who guesses that sign requests.
    let body = b"payload";
    let value = format!("sha256={}", sign("", body));
    assert_eq!(
        outcome(&[github("")], Surface::CustomChannel, &signed(&value, body)),
        "denied(empty-secret)"
    );
}
