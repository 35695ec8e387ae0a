//! The `jwt` policy with keys and tokens the test makes: each algorithm,
//! expiry, wrong issuer, wrong audience, a bad signature, refused
//! algorithms (`none`, HS256), claims mapped, a rotated key picked up by
//! refetching on an unknown `kid`, the refetch floor, and operators.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentkit_auth::{
    Chain, JwksFetcher, JwksFuture, JwtAlgorithm, JwtConfig, JwtPolicy, Operators, Policy,
    PrincipalType, Refusal, RequestParts, Surface,
};
use agentkit_test_support::jwt::{TestKey, jwks, now};
use serde_json::{Value, json};

use super::{LOOPBACK, REMOTE};

const ISSUER: &str = "https://idp.example.test/";
const AUDIENCE: &str = "agentkit-tests";

/// A JWKS served from memory, counting fetches.
#[derive(Default)]
struct Keys {
    doc: Mutex<Value>,
    fetches: AtomicUsize,
}

struct Fetcher(Arc<Keys>);

impl JwksFetcher for Fetcher {
    fn fetch<'a>(&'a self, url: &'a str) -> JwksFuture<'a> {
        Box::pin(async move {
            assert_eq!(url, "https://idp.example.test/jwks");
            self.0.fetches.fetch_add(1, Ordering::SeqCst);
            Ok(self.0.doc.lock().unwrap().to_string().into_bytes())
        })
    }
}

fn policy(keys: &[&TestKey], tune: impl FnOnce(&mut JwtConfig)) -> (Arc<Keys>, JwtPolicy) {
    let shared = Arc::new(Keys::default());
    *shared.doc.lock().unwrap() = jwks(keys);
    let mut config = JwtConfig::new(
        "https://idp.example.test/jwks",
        ISSUER,
        vec![AUDIENCE.to_owned()],
    );
    config.refetch_floor = Duration::from_millis(300);
    tune(&mut config);
    let policy = JwtPolicy::new(config, Arc::new(Fetcher(shared.clone())));
    (shared, policy)
}

fn claims(sub: &str) -> Value {
    json!({"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "iat": now(), "exp": now() + 300})
}

async fn admit(policy: &JwtPolicy, token: &str) -> Result<String, Refusal> {
    let value = format!("Bearer {token}");
    let req = RequestParts::new(REMOTE).with_header("authorization", &value);
    let chain = Chain::new(vec![Policy::Jwt(policy.clone())], Surface::BuiltinApi);
    match chain.admit(&req).await {
        Ok(ctx) => Ok(format!("{}/{}", ctx.authenticator, ctx.principal_id)),
        Err(denied) => Err(denied.refusals()[0].1.clone()),
    }
}

fn reason(r: Result<String, Refusal>) -> String {
    match r {
        Ok(ok) => format!("admitted {ok}"),
        Err(Refusal::InvalidToken { reason }) => reason,
        Err(other) => format!("{other:?}"),
    }
}

#[tokio::test]
async fn each_default_algorithm_verifies() {
    let keys = [TestKey::rsa("r1"), TestKey::ec("e1"), TestKey::ed("d1")];
    let (_, p) = policy(&keys.iter().collect::<Vec<_>>(), |_| {});
    for key in &keys {
        let token = key.sign(&claims(&format!("user-{}", key.kid)));
        assert_eq!(
            admit(&p, &token).await,
            Ok(format!("jwt/jwt:user-{}", key.kid)),
            "{}",
            key.alg()
        );
    }
    // An algorithm left out of `algorithms` is refused, key or not.
    let (_, only_ed) = policy(&keys.iter().collect::<Vec<_>>(), |c| {
        c.algorithms = vec![JwtAlgorithm::EdDSA];
    });
    let rsa = keys[0].sign(&claims("u"));
    assert_eq!(
        reason(admit(&only_ed, &rsa).await),
        "algorithm RS256 is not allowed"
    );
}

#[tokio::test]
async fn bad_tokens_are_refused_with_their_reason() {
    let key = TestKey::ec("k1");
    let other = TestKey::ec("k1");
    let (_, p) = policy(&[&key], |c| c.clock_skew = Duration::from_secs(5));
    let with = |f: &dyn Fn(&mut Value)| {
        let mut c = claims("alice");
        f(&mut c);
        key.sign(&c)
    };
    let expired = with(&|c| c["exp"] = json!(now() - 60));
    assert_eq!(reason(admit(&p, &expired).await), "the token has expired");
    // Within the clock skew, a just-expired token still passes.
    let just = with(&|c| c["exp"] = json!(now() - 2));
    assert_eq!(admit(&p, &just).await, Ok("jwt/jwt:alice".into()));
    let early = with(&|c| c["nbf"] = json!(now() + 600));
    assert_eq!(
        reason(admit(&p, &early).await),
        "the token is not valid yet (`nbf`)"
    );
    let issuer = with(&|c| c["iss"] = json!("https://evil.example/"));
    assert_eq!(reason(admit(&p, &issuer).await), "wrong issuer");
    let audience = with(&|c| c["aud"] = json!("someone-else"));
    assert_eq!(reason(admit(&p, &audience).await), "wrong audience");
    let no_exp = with(&|c| {
        c.as_object_mut().unwrap().remove("exp");
    });
    assert_eq!(
        reason(admit(&p, &no_exp).await),
        "the token has no `exp` claim"
    );
    let no_sub = with(&|c| {
        c.as_object_mut().unwrap().remove("sub");
    });
    assert_eq!(
        reason(admit(&p, &no_sub).await),
        "the token has no `sub` claim"
    );
    // Same kid, another key: the signature does not verify.
    let forged = other.sign(&claims("alice"));
    assert_eq!(admit(&p, &forged).await, Err(Refusal::Mismatch));
    // A tampered payload under a genuine signature.
    let genuine = key.sign(&claims("alice"));
    let mut parts: Vec<&str> = genuine.split('.').collect();
    let evil = key.sign(&claims("admin"));
    parts[1] = evil.split('.').nth(1).unwrap();
    assert_eq!(admit(&p, &parts.join(".")).await, Err(Refusal::Mismatch));
}

#[tokio::test]
async fn none_and_hmac_never_verify() {
    let key = TestKey::rsa("r1");
    let (_, p) = policy(&[&key], |_| {});
    let b64 = |v: &Value| {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
    };
    let none = format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "typ": "JWT"})),
        b64(&claims("alice"))
    );
    assert_eq!(reason(admit(&p, &none).await), "malformed JWT header");
    // HS256 "signed" with the public key material: refused by name, before
    // any key is looked at.
    let hs = key.sign_with_header(
        &json!({"alg": "HS256", "typ": "JWT", "kid": "r1"}),
        &claims("alice"),
    );
    assert_eq!(
        reason(admit(&p, &hs).await),
        "algorithm HS256 is not allowed"
    );
    assert_eq!(reason(admit(&p, "not-a-jwt").await), "malformed JWT header");
    let req = RequestParts::new(REMOTE).with_header("authorization", "Basic abc");
    let chain = Chain::new(vec![Policy::Jwt(p.clone())], Surface::BuiltinApi);
    let denied = chain.admit(&req).await.unwrap_err();
    assert_eq!(denied.refusals()[0].1, Refusal::NotBearer);
}

#[tokio::test]
async fn claims_map_to_principal_and_attributes() {
    let key = TestKey::ed("d1");
    let (_, p) = policy(&[&key], |c| {
        c.principal_claim = "email".into();
        c.principal_prefix = String::new();
        c.attributes.insert("groups".into(), "groups".into());
        c.attributes.insert("tenant".into(), "tid".into());
    });
    let mut c = claims("u-1");
    c["email"] = json!("ada@example.test");
    c["groups"] = json!(["eng", "ops"]);
    c["tid"] = json!(42);
    let value = format!("Bearer {}", key.sign(&c));
    let req = RequestParts::new(REMOTE).with_header("authorization", &value);
    let chain = Chain::new(vec![Policy::Jwt(p)], Surface::BuiltinApi);
    let ctx = chain.admit(&req).await.unwrap();
    assert_eq!(ctx.principal_id, "ada@example.test");
    assert_eq!(ctx.principal_type, PrincipalType::User);
    assert_eq!(ctx.attributes["groups"], r#"["eng","ops"]"#);
    assert_eq!(ctx.attributes["tenant"], "42");
    assert_eq!(ctx.attributes["issuer"], ISSUER);
}

#[tokio::test]
async fn a_rotated_key_is_fetched_once_past_the_floor() {
    let old = TestKey::ec("2026-01");
    let new = TestKey::ec("2026-02");
    let (keys, p) = policy(&[&old], |_| {});
    assert_eq!(
        admit(&p, &old.sign(&claims("a"))).await,
        Ok("jwt/jwt:a".into())
    );
    assert_eq!(keys.fetches.load(Ordering::SeqCst), 1);
    // The cache answers the next token without a fetch.
    assert!(admit(&p, &old.sign(&claims("a"))).await.is_ok());
    assert_eq!(keys.fetches.load(Ordering::SeqCst), 1);

    // The provider rotates. Within the floor, an unknown kid does not
    // make the policy fetch again.
    *keys.doc.lock().unwrap() = jwks(&[&old, &new]);
    let token = new.sign(&claims("b"));
    assert_eq!(
        reason(admit(&p, &token).await),
        "no published key has kid `2026-02`"
    );
    assert_eq!(
        reason(admit(&p, &token).await),
        "no published key has kid `2026-02`"
    );
    assert_eq!(keys.fetches.load(Ordering::SeqCst), 1);
    // Past it, the unknown kid is one refetch, and the new key verifies.
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(admit(&p, &token).await, Ok("jwt/jwt:b".into()));
    assert_eq!(keys.fetches.load(Ordering::SeqCst), 2);
    assert_eq!(p.fetches(), 2);
    // A key the provider withdrew stays usable until the cache expires,
    // and the new one keeps working without fetches.
    assert!(admit(&p, &token).await.is_ok());
    assert_eq!(keys.fetches.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn an_expired_cache_is_refreshed() {
    let key = TestKey::ed("k");
    let (keys, p) = policy(&[&key], |c| {
        c.cache_ttl = Duration::from_millis(200);
        c.refetch_floor = Duration::from_millis(50);
    });
    assert!(admit(&p, &key.sign(&claims("a"))).await.is_ok());
    tokio::time::sleep(Duration::from_millis(250)).await;
    // The key is withdrawn; the stale cache is refetched, so it no longer
    // verifies.
    *keys.doc.lock().unwrap() = json!({"keys": []});
    assert_eq!(
        reason(admit(&p, &key.sign(&claims("a"))).await),
        "no published key has kid `k`"
    );
    assert_eq!(keys.fetches.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn symmetric_keys_in_a_jwks_are_ignored() {
    let key = TestKey::ec("e");
    let (keys, p) = policy(&[&key], |_| {});
    let mut doc = jwks(&[&key]);
    doc["keys"]
        .as_array_mut()
        .unwrap()
        .push(json!({"kty": "oct", "kid": "h", "k": "c2VjcmV0"}));
    *keys.doc.lock().unwrap() = doc;
    let hs = key.sign_with_header(&json!({"alg": "EdDSA", "kid": "h"}), &claims("a"));
    assert_eq!(reason(admit(&p, &hs).await), "no published key has kid `h`");
    assert!(admit(&p, &key.sign(&claims("a"))).await.is_ok());
}

#[test]
fn configurations_that_never_admit_are_reported() {
    let (_, p) = policy(&[], |c| {
        c.audience.clear();
        c.issuer.clear();
        c.algorithms.clear();
    });
    let chain = Chain::new(vec![Policy::Jwt(p)], Surface::BuiltinApi);
    let messages: Vec<String> = chain.validate().iter().map(ToString::to_string).collect();
    assert_eq!(
        messages,
        [
            "auth policy 0 (jwt) names no `issuer` and never admits a request",
            "auth policy 0 (jwt) needs a non-empty `audience` and never admits a request",
            "auth policy 0 (jwt) allows no algorithm and never admits a request",
        ]
    );
    assert!(chain.check_for_serving().is_err());
    assert_eq!(JwtAlgorithm::parse("none"), None);
    assert_eq!(JwtAlgorithm::parse("HS256"), None);
    assert_eq!(JwtAlgorithm::parse("EdDSA"), Some(JwtAlgorithm::EdDSA));
}

#[tokio::test]
async fn operators_by_token_and_by_loopback() {
    let ops = Operators {
        token: Some("op-s3cret".into()),
        loopback: true,
    };
    let chain = Chain::new(vec![Policy::LocalDevStrict], Surface::BuiltinApi).with_operators(ops);
    // The token admits from anywhere, before the chain's own policies.
    let remote = RequestParts::new(REMOTE).with_header("authorization", "Bearer op-s3cret");
    let ctx = chain.admit(&remote).await.unwrap();
    assert_eq!(
        (
            ctx.authenticator.as_str(),
            ctx.principal_id.as_str(),
            ctx.principal_type
        ),
        ("operatorToken", "operator", PrincipalType::Operator)
    );
    // A wrong token is no operator and the chain refuses the remote peer.
    let wrong = RequestParts::new(REMOTE).with_header("authorization", "Bearer op-s3creT");
    assert!(chain.admit(&wrong).await.is_err());
    // The strictly local caller is marked as an operator.
    let local = RequestParts::new(LOOPBACK).with_host("127.0.0.1:3000");
    let ctx = chain.admit(&local).await.unwrap();
    assert_eq!(ctx.principal_id, "local");
    assert!(ctx.is_operator());
    assert_eq!(ctx.attributes["operator"], "loopback");
    // Behind a proxy it is not, even when a looser chain admits it.
    let loose =
        Chain::new(vec![Policy::LoopbackOnly], Surface::BuiltinApi).with_operators(Operators {
            token: None,
            loopback: true,
        });
    let proxied = RequestParts::new(LOOPBACK)
        .with_host("127.0.0.1:3000")
        .with_header("x-forwarded-for", "203.0.113.9");
    let ctx = loose.admit(&proxied).await.unwrap();
    assert!(!ctx.is_operator());
    // Without `loopback`, the local caller is an ordinary user.
    let plain = Chain::new(vec![Policy::LocalDevStrict], Surface::BuiltinApi);
    assert!(!plain.admit(&local).await.unwrap().is_operator());
    // An empty operator token admits nobody.
    let empty = Chain::new(vec![], Surface::BuiltinApi).with_operators(Operators {
        token: Some("".into()),
        loopback: false,
    });
    let blank = RequestParts::new(REMOTE).with_header("authorization", "Bearer ");
    assert!(empty.admit(&blank).await.is_err());
}

#[tokio::test]
async fn a_custom_bearer_verifier_admits_what_it_vouches_for() {
    use agentkit_auth::{AuthContext, CustomPolicy};
    let checked = Arc::new(AtomicUsize::new(0));
    let seen = checked.clone();
    let custom = CustomPolicy::bearer("introspect", move |token: String| {
        let seen = seen.clone();
        async move {
            seen.fetch_add(1, Ordering::SeqCst);
            // An await stands for the embedder's own IO.
            tokio::task::yield_now().await;
            (token == "good")
                .then(|| AuthContext::new("introspect", "svc:billing", PrincipalType::Service))
        }
    });
    let chain = Chain::new(
        vec![Policy::Custom(custom.clone()), Policy::AllowAll],
        Surface::BuiltinApi,
    );
    let good = RequestParts::new(REMOTE).with_header("authorization", "Bearer good");
    assert_eq!(
        chain.admit(&good).await.unwrap().principal_id,
        "svc:billing"
    );
    let bad = RequestParts::new(REMOTE).with_header("authorization", "Bearer bad");
    assert_eq!(chain.admit(&bad).await.unwrap().principal_id, "anonymous");
    // No bearer header: declined before the callback runs.
    let none = RequestParts::new(REMOTE);
    let only = Chain::new(vec![Policy::Custom(custom)], Surface::BuiltinApi);
    let denied = only.admit(&none).await.unwrap_err();
    assert_eq!(denied.refusals()[0].0, "introspect");
    assert_eq!(checked.load(Ordering::SeqCst), 2);
    assert_eq!(
        only.admit(&bad).await.unwrap_err().refusals()[0].1,
        Refusal::Rejected {
            reason: "introspect declined the token".into()
        }
    );
}
