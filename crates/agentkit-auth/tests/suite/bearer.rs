//! Bearer tokens and shared secrets: missing, wrong, right, several
//! principals, empty secrets.

use futures_util::FutureExt;

use agentkit_auth::{BearerToken, Chain, Policy, PrincipalType, RequestParts, Surface};

use super::{REMOTE, outcome};

fn two_principals() -> Policy {
    Policy::Bearer {
        tokens: vec![
            BearerToken::new("token-alice", "alice"),
            BearerToken::new("token-bob", "bob"),
        ],
    }
}

fn with_auth(value: &str) -> RequestParts<'_> {
    RequestParts::new(REMOTE).with_header("authorization", value)
}

#[test]
fn bearer_missing_wrong_and_right() {
    let p = [two_principals()];
    let s = Surface::BuiltinApi;
    assert_eq!(
        outcome(&p, s, &RequestParts::new(REMOTE)),
        "denied(no-header)"
    );
    assert_eq!(
        outcome(&p, s, &with_auth("Bearer nope")),
        "denied(mismatch)"
    );
    assert_eq!(
        outcome(&p, s, &with_auth("Bearer token-alic")),
        "denied(mismatch)"
    );
    assert_eq!(
        outcome(&p, s, &with_auth("Bearer token-alice2")),
        "denied(mismatch)"
    );
    assert_eq!(
        outcome(&p, s, &with_auth("Basic token-alice")),
        "denied(not-bearer)"
    );
    assert_eq!(
        outcome(&p, s, &with_auth("token-alice")),
        "denied(not-bearer)"
    );
    assert_eq!(
        outcome(&p, s, &with_auth("Bearer token-alice")),
        "bearer/alice"
    );
    assert_eq!(outcome(&p, s, &with_auth("bearer token-bob")), "bearer/bob");
}

#[test]
fn bearer_token_in_another_header_does_not_count() {
    let p = [two_principals()];
    let req = RequestParts::new(REMOTE).with_header("x-api-key", "Bearer token-alice");
    assert_eq!(outcome(&p, Surface::BuiltinApi, &req), "denied(no-header)");
}

#[test]
fn repeated_authorization_header_is_refused() {
    let p = [two_principals()];
    let req = with_auth("Bearer token-alice").with_header("Authorization", "Bearer token-bob");
    assert_eq!(outcome(&p, Surface::BuiltinApi, &req), "denied(repeated)");
}

#[test]
fn bearer_context_is_a_user() {
    let chain = Chain::new(vec![two_principals()], Surface::CustomChannel);
    let ctx = chain
        .admit(&with_auth("Bearer token-bob"))
        .now_or_never()
        .unwrap()
        .unwrap();
    assert_eq!(ctx.principal_type, PrincipalType::User);
    assert_eq!(ctx.authenticator, "bearer");
    assert!(ctx.attributes.is_empty());
}

#[test]
fn bearer_token_flag_chain() {
    let chain = Chain::bearer_token("s3cret", Surface::BuiltinApi);
    assert_eq!(
        chain
            .admit(&with_auth("Bearer s3cret"))
            .now_or_never()
            .unwrap()
            .unwrap()
            .principal_id,
        "bearer"
    );
    assert!(
        chain
            .admit(&with_auth("Bearer other"))
            .now_or_never()
            .unwrap()
            .is_err()
    );
    assert!(
        chain
            .admit(&RequestParts::new(REMOTE))
            .now_or_never()
            .unwrap()
            .is_err()
    );
}

#[test]
fn empty_bearer_token_never_admits() {
    let p = [Policy::Bearer {
        tokens: vec![BearerToken::new("", "nobody")],
    }];
    for value in ["Bearer ", "Bearer", "Bearer \"\"", ""] {
        let req = with_auth(value);
        assert_eq!(
            outcome(&p, Surface::BuiltinApi, &req),
            "denied(empty-secret)",
            "{value:?}"
        );
    }
    assert_eq!(
        outcome(&p, Surface::BuiltinApi, &RequestParts::new(REMOTE)),
        "denied(empty-secret)"
    );
    let chain = Chain::bearer_token("", Surface::BuiltinApi);
    assert!(
        chain
            .admit(&with_auth("Bearer "))
            .now_or_never()
            .unwrap()
            .is_err()
    );
}

fn api_key() -> Policy {
    Policy::SharedSecret {
        header: "X-Api-Key".into(),
        secret: "k3y".into(),
    }
}

#[test]
fn shared_secret_missing_wrong_and_right() {
    let p = [api_key()];
    let s = Surface::CustomChannel;
    let with = |v: &'static str| RequestParts::new(REMOTE).with_header("x-api-key", v);
    assert_eq!(
        outcome(&p, s, &RequestParts::new(REMOTE)),
        "denied(no-header)"
    );
    assert_eq!(outcome(&p, s, &with("k3")), "denied(mismatch)");
    assert_eq!(outcome(&p, s, &with("K3Y")), "denied(mismatch)");
    assert_eq!(outcome(&p, s, &with("")), "denied(mismatch)");
    assert_eq!(
        outcome(&p, s, &with("k3y")),
        "sharedSecret/sharedSecret:x-api-key"
    );

    let ctx = Chain::new(vec![api_key()], s)
        .admit(&with("k3y"))
        .now_or_never()
        .unwrap()
        .unwrap();
    assert_eq!(ctx.principal_type, PrincipalType::Service);
    assert_eq!(ctx.attributes["header"], "x-api-key");
}

#[test]
fn empty_shared_secret_never_admits() {
    let p = [Policy::SharedSecret {
        header: "x-api-key".into(),
        secret: "".into(),
    }];
    for req in [
        RequestParts::new(REMOTE),
        RequestParts::new(REMOTE).with_header("x-api-key", ""),
        RequestParts::new(REMOTE).with_header("x-api-key", "anything"),
    ] {
        assert_eq!(
            outcome(&p, Surface::CustomChannel, &req),
            "denied(empty-secret)"
        );
    }
}
