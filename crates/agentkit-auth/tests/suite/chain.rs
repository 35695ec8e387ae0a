//! Chain behaviour: first admitting policy wins, `publicEndpoint` and the
//! surface, the default and flag chains, the serialised context.

use futures_util::FutureExt;

use agentkit_auth::{BearerToken, Chain, Policy, PrincipalType, RequestParts, Surface};

use super::{LOOPBACK, REMOTE, outcome};

fn bearer_then_allow_all() -> Vec<Policy> {
    vec![
        Policy::Bearer {
            tokens: vec![BearerToken::new("t0ken", "ci")],
        },
        Policy::AllowAll,
    ]
}

#[test]
fn first_admitting_policy_wins() {
    let p = bearer_then_allow_all();
    let s = Surface::BuiltinApi;
    let right = RequestParts::new(REMOTE).with_header("authorization", "Bearer t0ken");
    let wrong = RequestParts::new(REMOTE).with_header("authorization", "Bearer nope");
    assert_eq!(outcome(&p, s, &right), "bearer/ci");
    assert_eq!(outcome(&p, s, &wrong), "allowAll/anonymous");
    assert_eq!(
        outcome(&p, s, &RequestParts::new(REMOTE)),
        "allowAll/anonymous"
    );

    // Reversed, allowAll shadows the bearer policy.
    let reversed: Vec<Policy> = p.into_iter().rev().collect();
    assert_eq!(outcome(&reversed, s, &right), "allowAll/anonymous");
}

#[test]
fn local_then_bearer() {
    let p = vec![
        Policy::LocalDevStrict,
        Policy::Bearer {
            tokens: vec![BearerToken::new("t0ken", "ci")],
        },
    ];
    let s = Surface::BuiltinApi;
    let local = RequestParts::new(LOOPBACK)
        .with_host("localhost:3000")
        .with_header("authorization", "Bearer t0ken");
    assert_eq!(outcome(&p, s, &local), "localDevStrict/local");
    let remote = RequestParts::new(REMOTE).with_header("authorization", "Bearer t0ken");
    assert_eq!(outcome(&p, s, &remote), "bearer/ci");
    let nobody = RequestParts::new(REMOTE).with_host("localhost");
    assert_eq!(outcome(&p, s, &nobody), "denied(peer,no-header)");
}

#[test]
fn public_endpoint_opens_custom_channels_only() {
    let p = [Policy::PublicEndpoint];
    let req = RequestParts::new(REMOTE).with_host("hooks.example.com");
    assert_eq!(
        outcome(&p, Surface::CustomChannel, &req),
        "publicEndpoint/anonymous"
    );
    assert_eq!(outcome(&p, Surface::BuiltinApi, &req), "denied(surface)");
    // On the built-in API the chain goes on to the next policy.
    let p = [Policy::PublicEndpoint, Policy::LocalDevStrict];
    let local = RequestParts::new(LOOPBACK).with_host("localhost");
    assert_eq!(
        outcome(&p, Surface::BuiltinApi, &local),
        "localDevStrict/local"
    );
}

#[test]
fn default_chain_is_local_dev_strict() {
    let chain = Chain::local_dev_strict(Surface::BuiltinApi);
    assert_eq!(chain.policies, [Policy::LocalDevStrict]);
    let local = RequestParts::new(LOOPBACK).with_host("127.0.0.1:3000");
    assert_eq!(
        chain
            .admit(&local)
            .now_or_never()
            .unwrap()
            .unwrap()
            .principal_id,
        "local"
    );
    assert!(
        chain
            .admit(&RequestParts::new(REMOTE).with_host("localhost"))
            .now_or_never()
            .unwrap()
            .is_err()
    );
}

#[test]
fn allow_anonymous_chain() {
    let chain = Chain::allow_anonymous(Surface::BuiltinApi);
    let ctx = chain
        .admit(&RequestParts::new(REMOTE))
        .now_or_never()
        .unwrap()
        .unwrap();
    assert_eq!(ctx.principal_id, "anonymous");
    assert_eq!(ctx.principal_type, PrincipalType::Anonymous);
    assert!(
        chain
            .admit(&RequestParts::new(None))
            .now_or_never()
            .unwrap()
            .is_ok()
    );
}

#[test]
fn empty_secrets_never_admit_anywhere_in_a_chain() {
    let p = vec![
        Policy::Bearer {
            tokens: vec![BearerToken::new("", "a")],
        },
        Policy::SharedSecret {
            header: "x-key".into(),
            secret: "".into(),
        },
        Policy::HmacSignature {
            header: "x-sig".into(),
            secret: "".into(),
            prefix: Some("sha256=".into()),
        },
    ];
    let req = RequestParts::new(LOOPBACK)
        .with_host("localhost")
        .with_header("authorization", "Bearer ")
        .with_header("x-key", "")
        .with_header("x-sig", "sha256=");
    assert_eq!(
        outcome(&p, Surface::CustomChannel, &req),
        "denied(empty-secret,empty-secret,empty-secret)"
    );
    assert_eq!(Chain::new(p, Surface::CustomChannel).validate().len(), 3);
}

#[test]
fn auth_context_json_shape() {
    let chain = Chain::local_dev_strict(Surface::BuiltinApi);
    let ctx = chain
        .admit(&RequestParts::new(LOOPBACK).with_host("localhost"))
        .now_or_never()
        .unwrap()
        .unwrap();
    let json = serde_json::to_value(&ctx).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "authenticator": "localDevStrict",
            "principalId": "local",
            "principalType": "user",
            "attributes": {}
        })
    );
}

#[test]
fn denied_message_reveals_nothing() {
    let chain = Chain::bearer_token("t0ken", Surface::BuiltinApi);
    let denied = chain
        .admit(&RequestParts::new(REMOTE))
        .now_or_never()
        .unwrap()
        .unwrap_err();
    assert_eq!(denied.to_string(), "no auth policy admitted the request");
    assert_eq!(denied.refusals().len(), 1);
    assert_eq!(denied.refusals()[0].0, "bearer");
}
