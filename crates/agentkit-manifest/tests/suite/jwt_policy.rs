//! The `jwt` auth policy as a channel file writes it: its settings read
//! into an `AuthPolicy::Jwt` with the defaults filled in, and each bad
//! setting a diagnostic with a hint (`none` and HS* are never accepted).

use agentkit_manifest::AuthPolicy;
use expect_test::{Expect, expect};

use super::*;

/// A project whose `channels/http.toml` has `auth = [<policy>]`; answers
/// the parsed chain (or nothing) and the diagnostics.
fn discover_auth(policy: &str) -> (Option<Vec<AuthPolicy>>, String) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("bot");
    write(&root.join("agent/agent.toml"), "model = \"test\"\n");
    write(&root.join("agent/instructions.md"), "Test.\n");
    write(
        &root.join("agent/channels/http.toml"),
        format!("kind = \"http\"\nauth = [{policy}]\n"),
    );
    let d = discover_ok(&root);
    let auth = d
        .host
        .agents
        .first()
        .and_then(|p| p.agent.channels.first())
        .and_then(|c| c.auth.clone());
    (auth, render(&d))
}

fn check(policy: &str, expected: Expect) {
    let (_, rendered) = discover_auth(policy);
    expected.assert_eq(&rendered);
}

#[test]
fn settings_and_defaults() {
    let (auth, diagnostics) = discover_auth(
        r#"{ jwt = { jwks_url = "${IDP_JWKS}", issuer = "https://idp.example/", audience = "bot" } }"#,
    );
    assert_eq!(diagnostics, "");
    let Some(
        [
            AuthPolicy::Jwt {
                jwks_url,
                audience,
                algorithms,
                clock_skew_seconds,
                principal_claim,
                principal_prefix,
                cache_seconds,
                refetch_floor_seconds,
                ..
            },
        ],
    ) = auth.as_deref()
    else {
        panic!("{auth:?}");
    };
    assert_eq!(jwks_url, "${IDP_JWKS}");
    assert_eq!(audience, &["bot"]);
    assert_eq!(algorithms, &["RS256", "ES256", "EdDSA"]);
    assert_eq!(
        (*clock_skew_seconds, *cache_seconds, *refetch_floor_seconds),
        (60, 600, 30)
    );
    assert_eq!(
        (principal_claim.as_str(), principal_prefix.as_str()),
        ("sub", "jwt:")
    );
}

#[test]
fn bad_settings_are_diagnosed() {
    check(
        r#"{ jwt = { jwks_url = "https://idp/jwks", issuer = "i" } }"#,
        expect![[r#"
            agent/channels/http.toml:2:1: error[invalid-auth]: `jwt` needs `jwks_url`, `issuer` and `audience` (hint: e.g. { jwt = { jwks_url = "https://idp.example/.well-known/jwks.json", issuer = "https://idp.example/", audience = "my-agent" } })
        "#]],
    );
    check(
        r#"{ jwt = { jwks_url = "https://idp/jwks", issuer = "i", audience = "a", algorithms = ["RS256", "HS256"] } }"#,
        expect![[r#"
            agent/channels/http.toml:2:1: error[invalid-auth]: `jwt` cannot accept algorithm `HS256` (hint: a JWKS publishes public keys: `none` and HMAC (HS*) are never accepted)
        "#]],
    );
    check(
        r#"{ jwt = { jwks_url = "https://idp/jwks", issuer = "i", audience = "a", algorithms = ["none"] } }"#,
        expect![[r#"
            agent/channels/http.toml:2:1: error[invalid-auth]: `jwt` cannot accept algorithm `none` (hint: a JWKS publishes public keys: `none` and HMAC (HS*) are never accepted)
        "#]],
    );
    check(
        r#"{ jwt = { jwks_url = "file:///etc/keys", issuer = "i", audience = "a" } }"#,
        expect![[r#"
            agent/channels/http.toml:2:1: error[invalid-auth]: `jwt.jwks_url` must be an http(s) URL, not `file:///etc/keys`
        "#]],
    );
    check(
        r#"{ jwt = { jwks_url = "https://idp/jwks", issuer = "i", audience = "a", audiance = "b" } }"#,
        expect![[r#"
            agent/channels/http.toml:2:1: error[invalid-auth]: unknown field `audiance` in `jwt` (hint: did you mean `audience`?)
        "#]],
    );
    check(
        r#"{ jwt = { jwks_url = "https://idp/jwks", issuer = "i", audience = "a", clock_skew_seconds = -5 } }"#,
        expect![[r#"
            agent/channels/http.toml:2:1: error[invalid-auth]: `jwt.clock_skew_seconds` must not be negative
        "#]],
    );
    check(
        r#"{ jwt = { jwks_url = "https://idp/jwks", issuer = "i", audience = "a", claims = ["email"] } }"#,
        expect![[r#"
            agent/channels/http.toml:2:1: error[invalid-auth]: `jwt.claims` must be a table of attribute = "claim" (hint: e.g. claims = { email = "email", groups = "groups" })
        "#]],
    );
}

/// `[auth]` of `agent.toml` (roles from claims): read in file order,
/// each unknown role and shapeless rule a diagnostic.
fn discover_roles(auth: &str) -> (agentkit_manifest::AuthConfig, String) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("bot");
    write(
        &root.join("agent/agent.toml"),
        format!("model = \"test\"\n{auth}"),
    );
    write(&root.join("agent/instructions.md"), "Test.\n");
    let d = discover_ok(&root);
    let config = d
        .host
        .agents
        .first()
        .map(|p| p.agent.config.auth.clone())
        .unwrap_or_default();
    (config, render(&d))
}

#[test]
fn roles_are_read_and_checked() {
    let (auth, diagnostics) = discover_roles(
        "[auth]\ndefault_role = \"viewer\"\n[auth.roles]\noperator = [\"groups:agents-ops\", \"principal:jwt:ops\"]\nuser = [\"realm_access.roles:staff\"]\n",
    );
    assert_eq!(diagnostics, "");
    assert_eq!(auth.default_role.as_deref(), Some("viewer"));
    assert_eq!(
        auth.roles,
        [
            (
                "operator".to_owned(),
                vec![
                    "groups:agents-ops".to_owned(),
                    "principal:jwt:ops".to_owned()
                ]
            ),
            (
                "user".to_owned(),
                vec!["realm_access.roles:staff".to_owned()]
            ),
        ]
    );
    let (_, diagnostics) = discover_roles(
        "[auth]\ndefault_role = \"root\"\n[auth.roles]\nowner = [\"groups:x\"]\noperator = [\"agents-ops\"]\n",
    );
    for expected in [
        "error[invalid-auth]: `default_role` names the role `root`",
        "error[invalid-auth]: `roles` names the role `owner`",
        "error[invalid-auth]: `auth.roles.operator`: `agents-ops` is not `<claim>:<value>`",
    ] {
        assert!(diagnostics.contains(expected), "{diagnostics}");
    }
}

#[test]
fn the_tenant_claim_is_read_and_checked() {
    let (auth, diagnostics) = discover_roles("[auth]\ntenant_claim = \"organization.id\"\n");
    assert_eq!(diagnostics, "");
    assert_eq!(auth.tenant_claim.as_deref(), Some("organization.id"));
    assert!(!auth.is_empty());
    for bad in ["", "org..id", ".org"] {
        let (auth, diagnostics) = discover_roles(&format!("[auth]\ntenant_claim = \"{bad}\"\n"));
        assert_eq!(auth.tenant_claim, None, "{bad}");
        assert!(
            diagnostics.contains(&format!(
                "error[invalid-auth]: `auth.tenant_claim` is `{bad}`, not a claim name"
            )),
            "{diagnostics}"
        );
    }
}
