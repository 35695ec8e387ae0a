//! The rough edges a hand-ported project hit, over a real server: JSON
//! Schema `format` is asserted on route bodies and tool inputs, and
//! `--dev` admits unsigned pack deliveries from loopback but never wrongly
//! signed or stale ones (GitHub, GitLab, Bitbucket, Slack).

use agentkit::{EnvLookup, ServeOptions};
use agentkit_test_support::http::{Request, Response};
use serde_json::json;

use super::mcp::{Host, host};

#[test]
fn formats_are_asserted_on_route_bodies_and_tool_inputs() {
    let channel = r#"auth = ["local_dev_strict"]
[[routes]]
method = "POST"
path = "/signup"
[routes.body_schema]
type = "object"
required = ["email", "site"]
properties = { email = { type = "string", format = "email" }, site = { type = "string", format = "uri" } }
[routes.response]
body = { welcome = "{{ body.email }}" }
"#;
    let tool = r#"description = "Book a slot."
command = ["cat"]
read_only = true
[input_schema]
type = "object"
required = ["at", "id"]
properties = { at = { type = "string", format = "date-time" }, id = { type = "string", format = "uuid" } }
"#;
    let h = host(
        &[(
            "desk",
            &[
                ("agent.toml", "model = \"test\"\n"),
                ("instructions.md", "Desk.\n"),
                ("channels/intake.toml", channel),
                ("tools/book.toml", tool),
            ],
        )],
        ServeOptions::default(),
    );
    let signup = |body| h.send(Request::post("/desk/v1/channels/intake/signup").json(&body));
    let r = signup(json!({"email": "ada@example.com", "site": "https://example.com"}));
    assert_eq!(
        (r.status, r.json()["welcome"].clone()),
        (200, json!("ada@example.com")),
        "{}",
        r.body
    );
    let r = signup(json!({"email": "ada at example", "site": "https://example.com"}));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("/email"), "{}", r.body);
    let r = signup(json!({"email": "ada@example.com", "site": "example dot com"}));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("/site"), "{}", r.body);

    let book = |input| h.send(Request::post("/desk/v1/tools/book").json(&json!({"input": input})));
    let r =
        book(json!({"at": "2026-12-01T16:00:00Z", "id": "0193a8b2-7c4e-7d2a-9f1e-3b5c6d7e8f90"}));
    assert_eq!(
        (r.status, r.json()["isError"].clone()),
        (200, json!(false)),
        "{}",
        r.body
    );
    let r = book(json!({"at": "tomorrow at four", "id": "0193a8b2-7c4e-7d2a-9f1e-3b5c6d7e8f90"}));
    assert_eq!(
        (r.status, r.error_code()),
        (400, "invalid_input".to_owned()),
        "{}",
        r.body
    );
    let r = book(json!({"at": "2026-12-01T16:00:00Z", "id": "42"}));
    assert_eq!(
        (r.status, r.error_code()),
        (400, "invalid_input".to_owned()),
        "{}",
        r.body
    );
}

const SECRET: &str = "pack-secret";

/// One agent with a GitHub, a GitLab, a Bitbucket and a Slack channel,
/// each with a webhook (signing) secret.
fn packs(dev: bool) -> Host {
    host(
        &[(
            "bot",
            &[
                ("agent.toml", "model = \"test\"\n"),
                ("instructions.md", "Review.\n"),
                (
                    "channels/github.toml",
                    "kind = \"github\"\nwebhook_secret = \"${WEBHOOK_SECRET}\"\n",
                ),
                (
                    "channels/gitlab.toml",
                    "kind = \"gitlab\"\nwebhook_secret = \"${WEBHOOK_SECRET}\"\n",
                ),
                (
                    "channels/bitbucket.toml",
                    "kind = \"bitbucket\"\nwebhook_secret = \"${WEBHOOK_SECRET}\"\n",
                ),
                (
                    "channels/slack.toml",
                    "kind = \"slack\"\nmode = \"events\"\nsigning_secret = \"${WEBHOOK_SECRET}\"\n",
                ),
            ],
        )],
        ServeOptions {
            dev,
            env: EnvLookup::new(|n| (n == "WEBHOOK_SECRET").then(|| SECRET.to_owned())),
            ..ServeOptions::default()
        },
    )
}

/// How a delivery is signed.
#[derive(Clone, Copy, Debug)]
enum Signed {
    No,
    Right,
    Wrong,
    /// Rightly signed ten minutes ago (Slack signs its timestamp).
    Stale,
}

const GITHUB_PING: &[u8] = br#"{"zen": "Design for failure.", "hook_id": 7}"#;
const GITLAB_PUSH: &[u8] =
    br#"{"object_kind": "push", "user_username": "ada", "ref": "refs/heads/main"}"#;
const BITBUCKET_PING: &[u8] = br#"{"test": true}"#;
const SLACK_CHALLENGE: &[u8] =
    br#"{"token": "x", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", "type": "url_verification"}"#;

fn deliver(h: &Host, provider: &str, signed: Signed) -> Response {
    let secret = match signed {
        Signed::Wrong => "not-the-secret",
        _ => SECRET,
    };
    let sign = |body: &[u8]| format!("sha256={}", agentkit_channels::sign(secret, body));
    let (mut req, body) = match provider {
        "github" => (
            Request::post("/bot/v1/channels/github")
                .header("x-github-event", "ping")
                .header(
                    "x-github-delivery",
                    &format!("{signed:?}-{}", rand_suffix()),
                ),
            GITHUB_PING,
        ),
        "gitlab" => (
            Request::post("/bot/v1/channels/gitlab").header("x-gitlab-event", "Push Hook"),
            GITLAB_PUSH,
        ),
        "slack" => (Request::post("/bot/v1/channels/slack"), SLACK_CHALLENGE),
        _ => (
            Request::post("/bot/v1/channels/bitbucket").header("x-event-key", "diagnostics:ping"),
            BITBUCKET_PING,
        ),
    };
    if !matches!(signed, Signed::No) {
        req = match provider {
            "github" => req.header("x-hub-signature-256", &sign(body)),
            "gitlab" => req.header("x-gitlab-token", secret),
            "slack" => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_secs();
                let ts = if matches!(signed, Signed::Stale) {
                    now - 600
                } else {
                    now
                };
                let signed_text = [format!("v0:{ts}:").as_bytes(), body].concat();
                req.header("x-slack-request-timestamp", &ts.to_string())
                    .header(
                        "x-slack-signature",
                        &format!("v0={}", agentkit_channels::sign(secret, &signed_text)),
                    )
            }
            _ => req.header("x-hub-signature", &sign(body)),
        };
    }
    h.send(
        req.header("content-type", "application/json")
            .raw_body(body),
    )
}

/// A delivery id no other delivery of the test uses.
fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

#[test]
fn dev_admits_unsigned_pack_deliveries_from_loopback_but_never_wrongly_signed_ones() {
    let dev = packs(true);
    let plain = packs(false);
    for provider in ["github", "gitlab", "bitbucket", "slack"] {
        let got = |h: &Host, signed| deliver(h, provider, signed).status;
        assert_eq!(got(&dev, Signed::Right), 200, "{provider}: signed, --dev");
        assert_eq!(
            got(&dev, Signed::No),
            200,
            "{provider}: unsigned from loopback, --dev"
        );
        assert_eq!(
            got(&dev, Signed::Wrong),
            401,
            "{provider}: wrongly signed, --dev"
        );
        if provider == "slack" {
            assert_eq!(
                got(&dev, Signed::Stale),
                401,
                "{provider}: a stale timestamp, --dev"
            );
            assert_eq!(got(&plain, Signed::Stale), 401, "{provider}: stale");
        }
        assert_eq!(got(&plain, Signed::Right), 200, "{provider}: signed");
        assert_eq!(got(&plain, Signed::No), 401, "{provider}: unsigned");
        assert_eq!(
            got(&plain, Signed::Wrong),
            401,
            "{provider}: wrongly signed"
        );
    }
}
