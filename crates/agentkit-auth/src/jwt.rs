//! The `jwt` policy: `Authorization: Bearer <JWT>` signed by an identity
//! provider whose public keys are published as a JWKS. The keys are
//! fetched through a [`JwksFetcher`] the caller supplies (this crate does
//! no IO), cached, and fetched again when a token names an unknown `kid`
//! (a rotation), at most once per `refetch_floor`, or when the cache is
//! older than `cache_ttl`.
//!
//! Only asymmetric algorithms are accepted (RS*, PS*, ES256/384, EdDSA):
//! `none` and HS* never verify, and symmetric (`oct`) keys in a JWKS are
//! ignored, so a public key can never be used as an HMAC secret.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};

use crate::credential::{bearer_token, credential_header};
use crate::{AuthContext, PrincipalType, Refusal, RequestParts};

/// A signature algorithm a `jwt` policy may accept. There is no `none`
/// and no HMAC: a JWKS publishes public keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(clippy::upper_case_acronyms)]
pub enum JwtAlgorithm {
    RS256,
    RS384,
    RS512,
    PS256,
    PS384,
    PS512,
    ES256,
    ES384,
    EdDSA,
}

impl JwtAlgorithm {
    /// What a policy accepts when it names no `algorithms`.
    pub const DEFAULT: [JwtAlgorithm; 3] = [
        JwtAlgorithm::RS256,
        JwtAlgorithm::ES256,
        JwtAlgorithm::EdDSA,
    ];

    /// Every accepted spelling, for error messages.
    pub const ALL: [JwtAlgorithm; 9] = [
        JwtAlgorithm::RS256,
        JwtAlgorithm::RS384,
        JwtAlgorithm::RS512,
        JwtAlgorithm::PS256,
        JwtAlgorithm::PS384,
        JwtAlgorithm::PS512,
        JwtAlgorithm::ES256,
        JwtAlgorithm::ES384,
        JwtAlgorithm::EdDSA,
    ];

    /// The JOSE name (`RS256`, `EdDSA`); `None` for anything else,
    /// `none` and `HS256` included.
    pub fn parse(name: &str) -> Option<JwtAlgorithm> {
        JwtAlgorithm::ALL.into_iter().find(|a| a.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            JwtAlgorithm::RS256 => "RS256",
            JwtAlgorithm::RS384 => "RS384",
            JwtAlgorithm::RS512 => "RS512",
            JwtAlgorithm::PS256 => "PS256",
            JwtAlgorithm::PS384 => "PS384",
            JwtAlgorithm::PS512 => "PS512",
            JwtAlgorithm::ES256 => "ES256",
            JwtAlgorithm::ES384 => "ES384",
            JwtAlgorithm::EdDSA => "EdDSA",
        }
    }

    fn algorithm(self) -> Algorithm {
        match self {
            JwtAlgorithm::RS256 => Algorithm::RS256,
            JwtAlgorithm::RS384 => Algorithm::RS384,
            JwtAlgorithm::RS512 => Algorithm::RS512,
            JwtAlgorithm::PS256 => Algorithm::PS256,
            JwtAlgorithm::PS384 => Algorithm::PS384,
            JwtAlgorithm::PS512 => Algorithm::PS512,
            JwtAlgorithm::ES256 => Algorithm::ES256,
            JwtAlgorithm::ES384 => Algorithm::ES384,
            JwtAlgorithm::EdDSA => Algorithm::EdDSA,
        }
    }

    fn of(alg: Algorithm) -> Option<JwtAlgorithm> {
        JwtAlgorithm::ALL.into_iter().find(|a| a.algorithm() == alg)
    }
}

impl fmt::Display for JwtAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a `jwt` policy checks tokens and maps their claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtConfig {
    /// Where the identity provider publishes its keys (a JWKS document).
    pub jwks_url: String,
    /// The `iss` every token must carry.
    pub issuer: String,
    /// The `aud` values accepted; a token must carry one of them.
    pub audience: Vec<String>,
    /// The `alg`s accepted ([`JwtAlgorithm::DEFAULT`] unless set).
    pub algorithms: Vec<JwtAlgorithm>,
    /// Tolerance for `exp` and `nbf` against this host's clock.
    pub clock_skew: Duration,
    /// The claim that names the principal (`sub`).
    pub principal_claim: String,
    /// Put before the claim's value to make the principal id (`jwt:`), so
    /// a token's subject can never pose as `local` or `anonymous`.
    pub principal_prefix: String,
    /// Context attributes taken from claims: attribute name → claim name.
    /// A string claim is copied as is; any other value as its JSON.
    pub attributes: BTreeMap<String, String>,
    /// How long fetched keys are used before they are fetched again.
    pub cache_ttl: Duration,
    /// The shortest time between two fetches, whatever tokens arrive: an
    /// unknown `kid` cannot make this host hammer the identity provider.
    pub refetch_floor: Duration,
}

impl JwtConfig {
    /// A configuration with the defaults: RS256, ES256 and EdDSA, a
    /// minute of clock skew, the principal `jwt:<sub>`, keys kept ten
    /// minutes and fetched at most every thirty seconds.
    pub fn new(
        jwks_url: impl Into<String>,
        issuer: impl Into<String>,
        audience: Vec<String>,
    ) -> JwtConfig {
        JwtConfig {
            jwks_url: jwks_url.into(),
            issuer: issuer.into(),
            audience,
            algorithms: JwtAlgorithm::DEFAULT.to_vec(),
            clock_skew: Duration::from_secs(60),
            principal_claim: "sub".to_owned(),
            principal_prefix: "jwt:".to_owned(),
            attributes: BTreeMap::new(),
            cache_ttl: Duration::from_secs(600),
            refetch_floor: Duration::from_secs(30),
        }
    }

    /// What makes this configuration unable to admit anything.
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.jwks_url.is_empty() {
            out.push("names no `jwks_url`".to_owned());
        }
        if self.issuer.is_empty() {
            out.push("names no `issuer`".to_owned());
        }
        if self.audience.is_empty() || self.audience.iter().any(String::is_empty) {
            out.push("needs a non-empty `audience`".to_owned());
        }
        if self.algorithms.is_empty() {
            out.push("allows no algorithm".to_owned());
        }
        if self.principal_claim.is_empty() {
            out.push("names no principal claim".to_owned());
        }
        out
    }
}

/// What a [`JwksFetcher`] answers: the JWKS document's bytes, or why it
/// could not get them (logged; never shown to the caller).
pub type JwksFuture<'a> = Pin<Box<dyn Future<Output = Result<Vec<u8>, String>> + Send + 'a>>;

/// Fetches a JWKS document. The facade implements it over its HTTP
/// client; tests may serve keys from memory.
pub trait JwksFetcher: Send + Sync + 'static {
    fn fetch<'a>(&'a self, url: &'a str) -> JwksFuture<'a>;
}

/// The `jwt` policy: its configuration and its key cache. Clones share
/// the cache.
#[derive(Clone)]
pub struct JwtPolicy {
    inner: Arc<Inner>,
}

struct Inner {
    config: JwtConfig,
    fetcher: Arc<dyn JwksFetcher>,
    cache: Mutex<Cache>,
    /// Held over a fetch, so requests arriving meanwhile wait for its
    /// keys instead of finding none (one fetch in flight at a time).
    flight: futures_util::lock::Mutex<()>,
}

#[derive(Default)]
struct Cache {
    keys: Vec<Key>,
    fetched_at: Option<Instant>,
    last_attempt: Option<Instant>,
    fetches: u64,
}

#[derive(Clone)]
struct Key {
    kid: Option<String>,
    alg: Option<Algorithm>,
    key: Arc<DecodingKey>,
}

impl JwtPolicy {
    pub fn new(config: JwtConfig, fetcher: Arc<dyn JwksFetcher>) -> JwtPolicy {
        JwtPolicy {
            inner: Arc::new(Inner {
                config,
                fetcher,
                cache: Mutex::new(Cache::default()),
                flight: futures_util::lock::Mutex::new(()),
            }),
        }
    }

    pub fn config(&self) -> &JwtConfig {
        &self.inner.config
    }

    /// How many times the JWKS was fetched (for tests and diagnostics).
    pub fn fetches(&self) -> u64 {
        self.cache().fetches
    }

    fn cache(&self) -> MutexGuard<'_, Cache> {
        self.inner.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) async fn admit(
        &self,
        authenticator: &'static str,
        req: &RequestParts<'_>,
    ) -> Result<AuthContext, Refusal> {
        let config = &self.inner.config;
        let value = credential_header(req, "authorization")?;
        let token = bearer_token(value).ok_or(Refusal::NotBearer)?;
        let token = std::str::from_utf8(token).map_err(|_| token_refusal("not a JWT"))?;
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| token_refusal("malformed JWT header"))?;
        let allowed = JwtAlgorithm::of(header.alg).filter(|a| config.algorithms.contains(a));
        if allowed.is_none() {
            return Err(token_refusal(format!(
                "algorithm {:?} is not allowed",
                header.alg
            )));
        }
        let kid = header.kid.as_deref();
        let stale = self
            .cache()
            .fetched_at
            .is_none_or(|at| at.elapsed() >= config.cache_ttl);
        if stale {
            self.refresh().await;
        }
        let mut keys = self.keys_for(kid, header.alg);
        if keys.is_empty() && !stale {
            // An unknown `kid`: the provider may have rotated its keys.
            self.refresh().await;
            keys = self.keys_for(kid, header.alg);
        }
        if keys.is_empty() {
            return Err(token_refusal(match kid {
                Some(kid) => format!("no published key has kid `{}`", printable(kid)),
                None => "no published key fits the token".to_owned(),
            }));
        }
        let validation = self.validation(header.alg);
        let mut last = token_refusal("no key verified the token");
        for key in keys {
            match jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation) {
                Ok(data) => return self.context(authenticator, &data.claims),
                Err(e) => last = refusal_of(e.kind()),
            }
        }
        Err(last)
    }

    fn validation(&self, alg: Algorithm) -> Validation {
        let config = &self.inner.config;
        let mut v = Validation::new(alg);
        v.leeway = config.clock_skew.as_secs();
        v.validate_exp = true;
        v.validate_nbf = true;
        v.validate_aud = true;
        v.set_issuer(&[&config.issuer]);
        v.set_audience(&config.audience);
        v.set_required_spec_claims(&["exp", "iss", "aud"]);
        v
    }

    fn context(
        &self,
        authenticator: &'static str,
        claims: &Map<String, Value>,
    ) -> Result<AuthContext, Refusal> {
        let config = &self.inner.config;
        let principal = claims
            .get(&config.principal_claim)
            .and_then(claim_text)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                token_refusal(format!(
                    "the token has no `{}` claim",
                    config.principal_claim
                ))
            })?;
        let mut ctx = AuthContext::new(
            authenticator,
            format!("{}{principal}", config.principal_prefix),
            PrincipalType::User,
        )
        .with_attribute("issuer", config.issuer.clone());
        for (attribute, claim) in &config.attributes {
            if let Some(value) = claims.get(claim) {
                let text = claim_text(value).unwrap_or_else(|| value.to_string());
                ctx = ctx.with_attribute(attribute.clone(), text);
            }
        }
        ctx.claims = Some(Arc::new(claims.clone()));
        Ok(ctx)
    }

    /// The cached keys that may have signed a token with `kid` and `alg`.
    fn keys_for(&self, kid: Option<&str>, alg: Algorithm) -> Vec<Key> {
        let family = alg.family();
        self.cache()
            .keys
            .iter()
            .filter(|k| k.key.family() == family)
            .filter(|k| k.alg.is_none_or(|a| a == alg))
            .filter(|k| match kid {
                Some(kid) => k.kid.as_deref() == Some(kid),
                None => true,
            })
            .cloned()
            .collect()
    }

    /// Fetches the JWKS again unless the last attempt was within the
    /// floor. A failed fetch keeps the keys already held.
    async fn refresh(&self) {
        let config = &self.inner.config;
        let _flight = self.inner.flight.lock().await;
        {
            let mut cache = self.cache();
            if cache
                .last_attempt
                .is_some_and(|at| at.elapsed() < config.refetch_floor)
            {
                return;
            }
            cache.last_attempt = Some(Instant::now());
            cache.fetches += 1;
        }
        let url = &config.jwks_url;
        match self.inner.fetcher.fetch(url).await {
            Ok(bytes) => match parse_jwks(&bytes) {
                Ok(keys) => {
                    tracing::debug!(jwks = %url, keys = keys.len(), "fetched the JWKS");
                    let mut cache = self.cache();
                    cache.keys = keys;
                    cache.fetched_at = Some(Instant::now());
                }
                Err(e) => tracing::warn!(jwks = %url, "the JWKS is not usable: {e}"),
            },
            Err(e) => tracing::warn!(jwks = %url, "could not fetch the JWKS: {e}"),
        }
    }
}

impl fmt::Debug for JwtPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JwtPolicy")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

/// Two `jwt` policies are equal when they are configured alike.
impl PartialEq for JwtPolicy {
    fn eq(&self, other: &JwtPolicy) -> bool {
        self.inner.config == other.inner.config
    }
}

impl Eq for JwtPolicy {}

/// The signing keys of a JWKS document. Keys this policy cannot use
/// (symmetric, encryption-only, unknown types) are skipped, not errors:
/// providers publish such keys beside signing ones.
fn parse_jwks(bytes: &[u8]) -> Result<Vec<Key>, String> {
    let doc: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let Some(entries) = doc.get("keys").and_then(Value::as_array) else {
        return Err("no `keys` array".to_owned());
    };
    let mut keys = Vec::new();
    for entry in entries {
        let Ok(jwk) = serde_json::from_value::<Jwk>(entry.clone()) else {
            continue;
        };
        if matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_))
            || matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption))
        {
            continue;
        }
        let alg = match jwk.common.key_algorithm {
            Some(a) => match Algorithm::from_str(&a.to_string()) {
                Ok(alg) if JwtAlgorithm::of(alg).is_some() => Some(alg),
                _ => continue,
            },
            None => None,
        };
        let Ok(key) = DecodingKey::from_jwk(&jwk) else {
            continue;
        };
        keys.push(Key {
            kid: jwk.common.key_id.clone(),
            alg,
            key: Arc::new(key),
        });
    }
    Ok(keys)
}

/// A `kid` as the log may show it: the caller wrote it, so anything long
/// or with control characters is shortened and escaped.
fn printable(kid: &str) -> String {
    let short: String = kid.chars().take(64).collect();
    if short.chars().all(|c| !c.is_control()) && short.len() == kid.len() {
        short
    } else {
        format!("{short:?}…")
    }
}

fn claim_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn token_refusal(reason: impl Into<String>) -> Refusal {
    Refusal::InvalidToken {
        reason: reason.into(),
    }
}

/// Why a token failed, in words for the server log (never the token).
fn refusal_of(kind: &ErrorKind) -> Refusal {
    let reason = match kind {
        ErrorKind::InvalidSignature => return Refusal::Mismatch,
        ErrorKind::ExpiredSignature => "the token has expired",
        ErrorKind::ImmatureSignature => "the token is not valid yet (`nbf`)",
        ErrorKind::InvalidIssuer => "wrong issuer",
        ErrorKind::InvalidAudience => "wrong audience",
        ErrorKind::MissingRequiredClaim(claim) => {
            return token_refusal(format!("the token has no `{claim}` claim"));
        }
        ErrorKind::InvalidAlgorithm => "the algorithm does not fit the key",
        _ => "malformed token",
    };
    token_refusal(reason)
}
