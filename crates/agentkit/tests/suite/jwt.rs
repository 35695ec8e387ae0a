//! The `jwt` policy end to end: `channels/http.toml` names a JWKS served
//! by a local identity provider (keys and tokens this test makes); tokens
//! are accepted or refused over HTTP (expiry, audience, issuer, a bad
//! signature), the principal and ownership follow the `sub` claim, a
//! rotated key is fetched on its first use, the same policy guards a
//! custom channel, and an embedder's own verifier (`ServeOptions::auth`)
//! runs in the chain.

use agentkit::ServeOptions;
use agentkit::auth::{AuthContext, CustomPolicy, Policy, PrincipalType};
use agentkit::channels::Env;
use agentkit_test_support::http::{Request, Response};
use agentkit_test_support::jwt::{JwksServer, TestKey, now};
use serde_json::{Value, json};

use super::http::{Server, server};

const ISSUER: &str = "https://idp.example.test/";

fn http_toml() -> String {
    r#"kind = "http"
auth = [{ jwt = { jwks_url = "${IDP_JWKS}", issuer = "https://idp.example.test/", audience = ["agentkit", "other"], refetch_floor_seconds = 0, claims = { email = "email" } } }]
"#
    .to_owned()
}

const INTAKE: &str = r#"auth = [{ jwt = { jwks_url = "${IDP_JWKS}", issuer = "https://idp.example.test/", audience = "agentkit", principal_claim = "email", principal_prefix = "" } }]
[[routes]]
method = "POST"
path = "/whoami"
[routes.body_schema]
type = "object"
[routes.response]
body = { principal = "{{ auth.principalId }}" }
"#;

fn host(jwks: &JwksServer) -> Server {
    let url = jwks.url();
    let http = http_toml();
    server(
        &[
            ("channels/http.toml", http.as_str()),
            ("channels/intake.toml", INTAKE),
        ],
        ServeOptions {
            env: Env::new(move |name| (name == "IDP_JWKS").then(|| url.clone())),
            ..ServeOptions::default()
        },
    )
}

fn claims(sub: &str) -> Value {
    json!({"iss": ISSUER, "aud": "agentkit", "sub": sub, "email": format!("{sub}@example.test"),
           "iat": now(), "exp": now() + 300})
}

fn get(s: &Server, path: &str, token: &str) -> Response {
    Request::get(path)
        .bearer(token)
        .host("agents.example")
        .header("x-forwarded-for", "203.0.113.9")
        .send(s.addr())
        .unwrap()
}

#[test]
fn jwt_tokens_are_checked_over_http() {
    let key = TestKey::rsa("2026-01");
    let idp = JwksServer::start(&[&key]);
    let s = host(&idp);
    let alice = key.sign(&claims("alice"));
    let info = get(&s, "/bot/v1/info", &alice);
    assert_eq!(info.status, 200, "{}", info.body);
    assert_eq!(info.json()["caller"]["principalId"], "jwt:alice");
    assert_eq!(info.json()["caller"]["authenticator"], "jwt");

    let bad = |f: &dyn Fn(&mut Value)| {
        let mut c = claims("alice");
        f(&mut c);
        key.sign(&c)
    };
    for (what, token) in [
        ("expired", bad(&|c| c["exp"] = json!(now() - 3600))),
        ("wrong audience", bad(&|c| c["aud"] = json!("elsewhere"))),
        (
            "wrong issuer",
            bad(&|c| c["iss"] = json!("https://evil.example/")),
        ),
        ("other key", TestKey::rsa("2026-01").sign(&claims("alice"))),
        ("not a jwt", "opaque-token".to_owned()),
    ] {
        let r = get(&s, "/bot/v1/sessions", &token);
        assert_eq!(
            (r.status, r.error_code()),
            (401, "unauthorized".to_owned()),
            "{what}: {}",
            r.body
        );
        // The refusal says nothing of why (that goes to the server log).
        assert!(!r.body.contains("audience") && !r.body.contains("expired"));
    }
    // The second audience is accepted too.
    let other = bad(&|c| c["aud"] = json!(["other"]));
    assert_eq!(get(&s, "/bot/v1/sessions", &other).status, 200);

    // Sessions belong to the token's subject.
    let r = Request::post("/bot/v1/session")
        .bearer(&alice)
        .json(&json!({"message": "hi"}))
        .send(s.addr())
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let bob = key.sign(&claims("bob"));
    let r = get(&s, &format!("/bot/v1/session/{id}/events"), &bob);
    assert_eq!(r.status, 403, "{}", r.body);
    let r = get(&s, &format!("/bot/v1/session/{id}"), &alice);
    assert_eq!(r.json()["principalId"], "jwt:alice");
    assert_eq!(idp.fetches(), 1, "one fetch serves every token");

    // The provider rotates to a new key: its first token fetches again.
    let next = TestKey::ec("2026-02");
    idp.set(&[&next]);
    let carol = next.sign(&claims("carol"));
    let r = get(&s, "/bot/v1/info", &carol);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["caller"]["principalId"], "jwt:carol");
    assert_eq!(idp.fetches(), 2);

    // The custom channel's own jwt chain maps the email claim.
    let r = Request::post("/bot/v1/channels/intake/whoami")
        .bearer(&carol)
        .json(&json!({}))
        .send(s.addr())
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["principal"], "carol@example.test");
}

#[test]
fn an_unreachable_jwks_admits_nobody() {
    let key = TestKey::ed("k");
    let idp = JwksServer::start(&[&key]);
    let url = idp.url();
    drop(idp);
    let http = http_toml();
    let s = server(
        &[("channels/http.toml", http.as_str())],
        ServeOptions {
            env: Env::new(move |name| (name == "IDP_JWKS").then(|| url.clone())),
            ..ServeOptions::default()
        },
    );
    let r = get(&s, "/bot/v1/info", &key.sign(&claims("alice")));
    assert_eq!(r.status, 401, "{}", r.body);
}

#[test]
fn an_embedders_verifier_guards_the_api() {
    let verifier = CustomPolicy::bearer("introspect", |token: String| async move {
        (token == "svc-good")
            .then(|| AuthContext::new("introspect", "svc:billing", PrincipalType::Service))
    });
    let s = server(
        &[],
        ServeOptions {
            auth: Some(vec![Policy::Custom(verifier)]),
            ..ServeOptions::default()
        },
    );
    let r = get(&s, "/bot/v1/info", "svc-good");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["caller"]["principalId"], "svc:billing");
    assert_eq!(r.json()["caller"]["principalType"], "service");
    assert_eq!(get(&s, "/bot/v1/info", "svc-bad").status, 401);
    // It replaces the loopback default: a local caller without a token is
    // refused too.
    let r = Request::get("/bot/v1/info").send(s.addr()).unwrap();
    assert_eq!(r.status, 401);
}
