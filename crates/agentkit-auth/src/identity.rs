//! Agent identity: short-lived EdDSA (Ed25519) JSON Web Tokens the host
//! signs for the servers an agent calls (`auth = "agent-identity"` on an
//! MCP or A2A connection), so a server can tell which agent is calling,
//! in which session and on whose behalf, by checking the signature
//! against the host's published keys (`/.well-known/jwks.json`, from
//! [`IdentityIssuer::jwks`]) without a shared secret.
//!
//! Keys live in memory only: a new key pair is made at start and every
//! [`IdentityConfig::rotate_every`]; a retired key stays published until
//! every token it signed has expired (plus the skew verifiers allow), so
//! a verifier that refetches on an unknown `kid` always finds the key.
//! Private keys never leave this module and are never printed.
//!
//! Time is passed in (seconds since the epoch), so rotation is tested
//! without waiting.

use std::sync::Mutex;
use std::time::Duration;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// How tokens are minted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityConfig {
    /// The tokens' `iss`: the host's public URL.
    pub issuer: String,
    /// How long a token is valid (`exp - iat`).
    pub ttl: Duration,
    /// How often a new signing key replaces the current one.
    pub rotate_every: Duration,
    /// How long a retired key stays published after its last token
    /// expired: the clock skew a verifier may allow.
    pub skew: Duration,
}

impl IdentityConfig {
    /// Five-minute tokens, a new key every six hours, a minute of skew.
    pub fn new(issuer: impl Into<String>) -> IdentityConfig {
        IdentityConfig {
            issuer: issuer.into(),
            ttl: Duration::from_secs(300),
            rotate_every: Duration::from_secs(6 * 3600),
            skew: Duration::from_secs(60),
        }
    }
}

/// Who a token speaks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdentityClaims {
    /// The agent's slug (`agent`; `sub` is `agent:<slug>`).
    pub agent: String,
    /// The session the call is made in, when there is one.
    pub session: Option<String>,
    /// The principal the agent acts for (the session's owner), when known.
    pub principal: Option<String>,
    /// The server the token is for (`aud`).
    pub audience: String,
}

/// A minted token.
#[derive(Clone, PartialEq, Eq)]
pub struct MintedToken {
    /// The compact JWT, sent as `Authorization: Bearer <token>`.
    pub token: String,
    /// Its `exp`, in seconds since the epoch.
    pub expires_at: u64,
}

impl std::fmt::Debug for MintedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MintedToken")
            .field("token", &"<redacted>")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// Why a token could not be minted (the system's random source or the
/// signer failed; neither is expected).
#[derive(Debug, thiserror::Error)]
#[error("cannot mint an agent-identity token: {0}")]
pub struct IdentityError(String);

/// One signing key.
struct SigningKey {
    kid: String,
    /// The public key, 32 bytes (the JWK's `x`).
    public: Vec<u8>,
    encoding: EncodingKey,
    created: u64,
    /// When it stopped signing (`None`: the current key).
    retired: Option<u64>,
}

impl SigningKey {
    fn generate(now: u64) -> Result<SigningKey, IdentityError> {
        let rng = SystemRandom::new();
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng)
            .map_err(|_| IdentityError("no key pair from the random source".into()))?;
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref())
            .map_err(|e| IdentityError(format!("the new key pair is unusable: {e}")))?;
        let public = pair.public_key().as_ref().to_vec();
        Ok(SigningKey {
            kid: thumbprint(&public),
            public,
            encoding: EncodingKey::from_ed_der(pkcs8.as_ref()),
            created: now,
            retired: None,
        })
    }

    fn jwk(&self) -> Value {
        json!({
            "kty": "OKP",
            "crv": "Ed25519",
            "x": URL_SAFE_NO_PAD.encode(&self.public),
            "kid": self.kid,
            "alg": "EdDSA",
            "use": "sig",
        })
    }
}

/// The RFC 7638 thumbprint of an Ed25519 public key: the `kid`.
fn thumbprint(public: &[u8]) -> String {
    let canonical = format!(
        r#"{{"crv":"Ed25519","kty":"OKP","x":"{}"}}"#,
        URL_SAFE_NO_PAD.encode(public)
    );
    URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()))
}

/// The host's signer of agent-identity tokens. Cheap to share behind an
/// `Arc`; minting takes a short lock.
pub struct IdentityIssuer {
    config: IdentityConfig,
    /// The current key last; none until the first token or JWKS asks for
    /// one.
    keys: Mutex<Vec<SigningKey>>,
    /// When the issuer was made: the first key's creation time, so that
    /// it rotates on the same schedule as a key made at once would.
    made: u64,
}

impl std::fmt::Debug for IdentityIssuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdentityIssuer")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

#[derive(Serialize)]
struct Claims<'a> {
    iss: &'a str,
    sub: String,
    aud: &'a str,
    iat: u64,
    nbf: u64,
    exp: u64,
    jti: String,
    agent: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    principal: Option<&'a str>,
}

impl IdentityIssuer {
    /// An issuer whose first key dates from `now`. The key itself is made
    /// when first needed: the first draw from the system's random source
    /// seeds its generator from CPU jitter, about 30 ms of CPU that a host
    /// whose agents never mint a token should not spend at start.
    pub fn new(config: IdentityConfig, now: u64) -> Result<IdentityIssuer, IdentityError> {
        Ok(IdentityIssuer {
            config,
            keys: Mutex::new(Vec::new()),
            made: now,
        })
    }

    pub fn config(&self) -> &IdentityConfig {
        &self.config
    }

    /// Rotates when the current key is due, and forgets retired keys
    /// whose last token has expired past the skew.
    fn maintain(&self, keys: &mut Vec<SigningKey>, now: u64) -> Result<(), IdentityError> {
        if keys.is_empty() {
            keys.push(SigningKey::generate(self.made.min(now))?);
        }
        let due = keys
            .last()
            .is_none_or(|k| now >= k.created + self.config.rotate_every.as_secs());
        if due {
            let fresh = SigningKey::generate(now)?;
            if let Some(current) = keys.last_mut() {
                current.retired = Some(now);
            }
            keys.push(fresh);
        }
        let keep = self.config.ttl.as_secs() + self.config.skew.as_secs();
        keys.retain(|k| k.retired.is_none_or(|at| now <= at + keep));
        Ok(())
    }

    /// A token for `claims`, valid from `now` for the configured TTL,
    /// signed with the current key (rotated first when due).
    pub fn mint(&self, claims: &IdentityClaims, now: u64) -> Result<MintedToken, IdentityError> {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        self.maintain(&mut keys, now)?;
        let Some(key) = keys.last() else {
            return Err(IdentityError("no signing key".into()));
        };
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(key.kid.clone());
        header.typ = Some("JWT".into());
        let exp = now + self.config.ttl.as_secs();
        let mut jti = [0u8; 16];
        aws_lc_rs::rand::fill(&mut jti)
            .map_err(|_| IdentityError("no token id from the random source".into()))?;
        let body = Claims {
            iss: &self.config.issuer,
            sub: format!("agent:{}", claims.agent),
            aud: &claims.audience,
            iat: now,
            nbf: now,
            exp,
            jti: hex::encode(jti),
            agent: &claims.agent,
            session: claims.session.as_deref(),
            principal: claims.principal.as_deref(),
        };
        let token = jsonwebtoken::encode(&header, &body, &key.encoding)
            .map_err(|e| IdentityError(e.to_string()))?;
        Ok(MintedToken {
            token,
            expires_at: exp,
        })
    }

    /// The JWKS document: every key a valid token may name (the current
    /// one and those retired within a token's lifetime plus the skew).
    pub fn jwks(&self, now: u64) -> Value {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = self.maintain(&mut keys, now) {
            tracing::warn!(error = %e, "agent-identity key rotation failed; the current key stays");
        }
        json!({ "keys": keys.iter().map(SigningKey::jwk).collect::<Vec<_>>() })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use jsonwebtoken::{DecodingKey, Validation, decode, decode_header};

    fn issuer() -> IdentityIssuer {
        let mut config = IdentityConfig::new("https://agents.example.com");
        config.ttl = Duration::from_secs(300);
        config.rotate_every = Duration::from_secs(3600);
        config.skew = Duration::from_secs(60);
        IdentityIssuer::new(config, 1_000_000).unwrap()
    }

    fn claims() -> IdentityClaims {
        IdentityClaims {
            agent: "support".into(),
            session: Some("s-1".into()),
            principal: Some("jwt:alice".into()),
            audience: "https://billing.internal".into(),
        }
    }

    /// Verifies `token` with the published key it names, as a third party
    /// would, at the token's own issue time.
    fn verify(jwks: &Value, token: &str) -> Value {
        let kid = decode_header(token).unwrap().kid.unwrap();
        let jwk = jwks["keys"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["kid"] == kid.as_str())
            .expect("the token's key is published");
        let x = URL_SAFE_NO_PAD.decode(jwk["x"].as_str().unwrap()).unwrap();
        let mut validation = Validation::new(Algorithm::EdDSA);
        validation.set_audience(&["https://billing.internal"]);
        validation.set_issuer(&["https://agents.example.com"]);
        validation.validate_exp = false;
        decode::<Value>(token, &DecodingKey::from_ed_der(&x), &validation)
            .unwrap()
            .claims
    }

    #[test]
    fn tokens_name_agent_session_and_principal_and_verify_with_the_published_key() {
        let issuer = issuer();
        let minted = issuer.mint(&claims(), 1_000_010).unwrap();
        assert_eq!(minted.expires_at, 1_000_310);
        let got = verify(&issuer.jwks(1_000_010), &minted.token);
        assert_eq!(got["sub"], "agent:support");
        assert_eq!(got["agent"], "support");
        assert_eq!(got["session"], "s-1");
        assert_eq!(got["principal"], "jwt:alice");
        assert_eq!(got["iat"], 1_000_010);
        assert_eq!(got["exp"], 1_000_310);
        assert_eq!(got["jti"].as_str().unwrap().len(), 32);
        // Unknown claims are left out, not null.
        let bare = issuer
            .mint(
                &IdentityClaims {
                    session: None,
                    principal: None,
                    ..claims()
                },
                1_000_010,
            )
            .unwrap();
        let got = verify(&issuer.jwks(1_000_010), &bare.token);
        assert!(got.get("session").is_none() && got.get("principal").is_none());
        assert!(!format!("{bare:?}").contains(&bare.token));
    }

    /// The first key is made on first use but dates from the issuer's
    /// making: it rotates on the schedule a key made at once would keep.
    #[test]
    fn the_first_key_is_made_on_first_use_and_dates_from_the_issuer() {
        let issuer = issuer();
        assert!(issuer.keys.lock().unwrap().is_empty());
        let first = issuer.mint(&claims(), 1_003_000).unwrap();
        let first_kid = decode_header(&first.token).unwrap().kid.unwrap();
        assert_eq!(issuer.jwks(1_003_599)["keys"].as_array().unwrap().len(), 1);
        let next = issuer.mint(&claims(), 1_003_600).unwrap();
        assert_ne!(decode_header(&next.token).unwrap().kid.unwrap(), first_kid);
    }

    #[test]
    fn keys_rotate_and_retired_keys_stay_published_while_their_tokens_live() {
        let issuer = issuer();
        let old = issuer.mint(&claims(), 1_000_000).unwrap();
        let first_kid = decode_header(&old.token).unwrap().kid.unwrap();
        // Due at 1h: the next token is signed with a new key, and both
        // are published.
        let new = issuer.mint(&claims(), 1_003_600).unwrap();
        let second_kid = decode_header(&new.token).unwrap().kid.unwrap();
        assert_ne!(first_kid, second_kid);
        let jwks = issuer.jwks(1_003_600);
        assert_eq!(jwks["keys"].as_array().unwrap().len(), 2);
        verify(&jwks, &old.token);
        verify(&jwks, &new.token);
        // Until the old key's last token expired plus the skew.
        assert_eq!(
            issuer.jwks(1_003_600 + 360)["keys"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        let later = issuer.jwks(1_003_600 + 361);
        let kids: Vec<&str> = later["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["kid"].as_str().unwrap())
            .collect();
        assert_eq!(kids, [second_kid.as_str()]);
        // Only public parts are published.
        for key in later["keys"].as_array().unwrap() {
            assert!(key.get("d").is_none(), "{key}");
        }
    }

    #[test]
    fn a_forged_signature_does_not_verify() {
        let issuer = issuer();
        let other =
            IdentityIssuer::new(IdentityConfig::new("https://agents.example.com"), 1_000_000)
                .unwrap();
        let forged = other.mint(&claims(), 1_000_000).unwrap();
        let jwks = issuer.jwks(1_000_000);
        let kid = decode_header(&forged.token).unwrap().kid.unwrap();
        assert!(
            jwks["keys"]
                .as_array()
                .unwrap()
                .iter()
                .all(|k| k["kid"] != kid.as_str())
        );
        // Signed by another key, under this issuer's kid: refused.
        let mut parts: Vec<&str> = forged.token.split('.').collect();
        let genuine = issuer.mint(&claims(), 1_000_000).unwrap();
        let header = genuine.token.split('.').next().unwrap().to_owned();
        parts[0] = &header;
        let spliced = parts.join(".");
        let x = URL_SAFE_NO_PAD
            .decode(jwks["keys"][0]["x"].as_str().unwrap())
            .unwrap();
        let mut validation = Validation::new(Algorithm::EdDSA);
        validation.set_audience(&["https://billing.internal"]);
        validation.validate_exp = false;
        assert!(decode::<Value>(&spliced, &DecodingKey::from_ed_der(&x), &validation).is_err());
    }
}
