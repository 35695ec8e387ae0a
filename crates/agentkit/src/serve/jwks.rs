//! The `jwt` auth policy's key fetches: the identity provider's JWKS over
//! the process's one HTTP client, with a timeout and a size cap, `200`
//! only. Errors name the status or the failure, never a credential.

use std::sync::Arc;
use std::time::Duration;

use agentkit_auth::{JwksFetcher, JwksFuture, JwtConfig, JwtPolicy, Policy};

/// The largest JWKS document read.
const MAX_JWKS_BYTES: usize = 256 * 1024;

/// How long one fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Fetches a JWKS over HTTP(S).
#[derive(Debug, Clone, Copy)]
struct HttpJwks;

impl JwksFetcher for HttpJwks {
    fn fetch<'a>(&'a self, url: &'a str) -> JwksFuture<'a> {
        Box::pin(get_json_capped(url, FETCH_TIMEOUT, MAX_JWKS_BYTES))
    }
}

/// GETs JSON at `url` over the process's one HTTP client: `200` only,
/// within `timeout`, at most `cap` bytes (the JWKS here, OIDC discovery).
pub(crate) async fn get_json_capped(
    url: &str,
    timeout: Duration,
    cap: usize,
) -> std::result::Result<Vec<u8>, String> {
    let client = agentkit_harness::http_client().map_err(|e| e.to_string())?;
    let resp = client
        .get(url)
        .header("accept", "application/json")
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| format!("request failed: {}", e.without_url()))?;
    read_capped(resp, cap).await
}

/// The body of a `200` answer, at most `cap` bytes; an error names the
/// status or the failure (never the URL, which may carry a credential).
pub(crate) async fn read_capped(
    mut resp: reqwest::Response,
    cap: usize,
) -> std::result::Result<Vec<u8>, String> {
    if resp.status() != reqwest::StatusCode::OK {
        return Err(format!("answered {}", resp.status()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| format!("reading failed: {}", e.without_url()))?
    {
        if body.len() + chunk.len() > cap {
            return Err(format!("larger than {cap} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A `jwt` policy fetching its keys over HTTP.
pub(crate) fn jwt_policy(config: JwtConfig) -> Policy {
    Policy::Jwt(JwtPolicy::new(config, Arc::new(HttpJwks)))
}

/// The HTTP key fetcher, for the OIDC client's keys.
pub(crate) fn fetcher() -> Arc<dyn JwksFetcher> {
    Arc::new(HttpJwks)
}
