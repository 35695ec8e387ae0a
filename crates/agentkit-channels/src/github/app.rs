//! GitHub App installation tokens: an RS256 JWT signed with the App's
//! private key (`iat` a minute in the past for clock drift, `exp` nine
//! minutes ahead, under GitHub's ten-minute limit, `iss` the App id)
//! buys an installation token at `POST /app/installations/{id}/access_tokens`;
//! tokens are cached per installation until five minutes before their
//! `expires_at`.
//!
//! RSA signing uses `aws-lc-rs`, already in the tree as rustls' crypto
//! provider, so the pack adds no crypto crate and no build time. The key
//! and the tokens never reach a log line or an error message.

use std::collections::HashMap;
use std::fmt;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};

use crate::error::{Error, Result};

/// Refresh a cached token this long before it expires.
const REFRESH_MARGIN_MINUTES: i64 = 5;

/// The App credentials of one channel and its token cache.
pub(crate) struct AppAuth {
    app_id: String,
    key: RsaKeyPair,
    /// The installation when the settings fix one; otherwise each
    /// delivery's `installation.id`.
    pub(crate) installation_id: Option<u64>,
    cache: tokio::sync::Mutex<HashMap<u64, Cached>>,
}

struct Cached {
    token: String,
    refresh_at: DateTime<Utc>,
}

impl fmt::Debug for AppAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AppAuth")
            .field("app_id", &self.app_id)
            .field("key", &"<redacted>")
            .field("installation_id", &self.installation_id)
            .finish_non_exhaustive()
    }
}

impl AppAuth {
    /// Reads a PEM private key (PKCS#1 `RSA PRIVATE KEY`, as GitHub hands
    /// them out, or PKCS#8 `PRIVATE KEY`). Errors never quote the key.
    pub(crate) fn new(
        app_id: String,
        private_key_pem: &str,
        installation_id: Option<u64>,
    ) -> std::result::Result<AppAuth, String> {
        let (label, der) = pem_body(private_key_pem).ok_or_else(|| {
            "`private_key` is not a PEM private key (expected `-----BEGIN RSA PRIVATE KEY-----`, as GitHub downloads it)".to_owned()
        })?;
        let key = match label.as_str() {
            "RSA PRIVATE KEY" => RsaKeyPair::from_der(&der),
            "PRIVATE KEY" => RsaKeyPair::from_pkcs8(&der),
            _ => {
                return Err(format!(
                    "`private_key` is a PEM `{label}`, not an RSA private key"
                ));
            }
        }
        .map_err(|e| format!("`private_key` is not a usable RSA key: {e}"))?;
        Ok(AppAuth {
            app_id,
            key,
            installation_id,
            cache: tokio::sync::Mutex::default(),
        })
    }

    /// The App JWT for `now`.
    pub(crate) fn jwt(&self, now: DateTime<Utc>) -> Result<String> {
        let iss = match self.app_id.parse::<u64>() {
            Ok(n) => json!(n),
            Err(_) => json!(self.app_id),
        };
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256","typ":"JWT"}"#);
        let claims = json!({
            "iat": (now - Duration::seconds(60)).timestamp(),
            "exp": (now + Duration::minutes(9)).timestamp(),
            "iss": iss,
        });
        let claims = URL_SAFE_NO_PAD.encode(claims.to_string());
        let signing_input = format!("{header}.{claims}");
        let mut signature = vec![0; self.key.public_modulus_len()];
        self.key
            .sign(
                &RSA_PKCS1_SHA256,
                &SystemRandom::new(),
                signing_input.as_bytes(),
                &mut signature,
            )
            .map_err(|_| Error::Upstream {
                message: "cannot sign the GitHub App JWT".into(),
            })?;
        Ok(format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature)
        ))
    }

    /// The installation token for `installation`, from the cache or
    /// minted at `base`.
    pub(crate) async fn token(&self, base: &str, installation: u64) -> Result<String> {
        let mut cache = self.cache.lock().await;
        let now = Utc::now();
        if let Some(c) = cache.get(&installation)
            && now < c.refresh_at
        {
            return Ok(c.token.clone());
        }
        let path = format!("/app/installations/{installation}/access_tokens");
        let resp = crate::deliver::request(reqwest::Method::POST, &format!("{base}{path}"))?
            .header("accept", "application/vnd.github+json")
            .header("x-github-api-version", "2022-11-28")
            .bearer_auth(self.jwt(now)?)
            .send()
            .await
            .map_err(|e| Error::Upstream {
                message: format!(
                    "GitHub API POST {path}: {}",
                    agentkit_plumbing::http_error_text(e)
                ),
            })?;
        let status = resp.status();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            let why = body
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("no message");
            return Err(Error::Upstream {
                message: format!(
                    "GitHub API POST {path}: HTTP {}: {why} (check `app_id`, `private_key` and that the App is installed)",
                    status.as_u16()
                ),
            });
        }
        let token = body
            .get("token")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::Upstream {
                message: format!("GitHub API POST {path}: the answer has no `token`"),
            })?
            .to_owned();
        // Without a readable expiry, assume GitHub's one hour.
        let expires = body
            .get("expires_at")
            .and_then(Value::as_str)
            .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
            .map_or(now + Duration::hours(1), |d| d.with_timezone(&Utc));
        cache.insert(
            installation,
            Cached {
                token: token.clone(),
                refresh_at: expires - Duration::minutes(REFRESH_MARGIN_MINUTES),
            },
        );
        Ok(token)
    }

    /// Forgets the cached token of `installation` if it is still `token`
    /// (GitHub answered 401 to it: revoked or expired early).
    pub(crate) async fn forget(&self, installation: u64, token: &str) {
        let mut cache = self.cache.lock().await;
        if cache.get(&installation).is_some_and(|c| c.token == token) {
            cache.remove(&installation);
        }
    }
}

/// The label and decoded body of the first PEM block in `text`.
fn pem_body(text: &str) -> Option<(String, Vec<u8>)> {
    let start = text.find("-----BEGIN ")?;
    let rest = &text[start + "-----BEGIN ".len()..];
    let label_end = rest.find("-----")?;
    let label = rest[..label_end].to_owned();
    let body_start = label_end + 5;
    let end_marker = format!("-----END {label}-----");
    let body_end = rest.find(&end_marker)?;
    let b64: String = rest
        .get(body_start..body_end)?
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    STANDARD.decode(b64).ok().map(|der| (label, der))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use aws_lc_rs::signature::{RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey};

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../fixtures/github/test-app")
                .join(name),
        )
        .unwrap()
    }

    #[test]
    fn the_app_jwt_verifies_with_the_public_key_and_carries_the_claims() {
        let app = AppAuth::new("12345".into(), &fixture("private-key.pem"), None).unwrap();
        let now = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let jwt = app.jwt(now).unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let (_, public) = pem_body(&fixture("public-key.pem")).unwrap();
        let signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, &public)
            .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &signature)
            .unwrap();
        let header: Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap();
        assert_eq!(header, json!({"alg": "RS256", "typ": "JWT"}));
        let claims: Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        let t = now.timestamp();
        assert_eq!(claims, json!({"iat": t - 60, "exp": t + 540, "iss": 12345}));
        // A tampered payload does not verify.
        assert!(
            UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, &public)
                .verify(format!("{}.{}x", parts[0], parts[1]).as_bytes(), &signature)
                .is_err()
        );
    }

    #[test]
    fn bad_keys_are_refused_without_quoting_them() {
        let e = AppAuth::new("1".into(), "not a key SECRETSTUFF", None).unwrap_err();
        assert!(
            e.contains("not a PEM private key") && !e.contains("SECRETSTUFF"),
            "{e}"
        );
        let bogus =
            "-----BEGIN RSA PRIVATE KEY-----\nU0VDUkVUU1RVRkY=\n-----END RSA PRIVATE KEY-----\n";
        let e = AppAuth::new("1".into(), bogus, None).unwrap_err();
        assert!(
            e.contains("not a usable RSA key") && !e.contains("U0VDUkVU"),
            "{e}"
        );
        let public = fixture("public-key.pem");
        let e = AppAuth::new("1".into(), &public, None).unwrap_err();
        assert!(e.contains("RSA PUBLIC KEY"), "{e}");
    }
}
