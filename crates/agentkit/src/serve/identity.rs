//! Agent identity on the host: the one [`IdentityIssuer`] of the process
//! (its public keys at `GET /.well-known/jwks.json`), and
//! [`AgentIdentity`], the bearer of an `auth = "agent-identity"` MCP
//! connection or A2A peer: a fresh token naming the agent, the calling
//! session and the session's owner, for the connection's audience.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentkit_auth::{IdentityClaims, IdentityIssuer, MintedToken};
use agentkit_runtime::WeakRuntime;
use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

/// Seconds since the epoch, the issuer's clock.
pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `GET /.well-known/jwks.json`: the keys that verify this host's
/// agent-identity tokens. Public, like any JWKS; cacheable for a minute
/// (a verifier refetches on an unknown `kid` anyway).
pub(crate) fn routes(issuer: Arc<IdentityIssuer>) -> Router {
    Router::new().route(
        "/.well-known/jwks.json",
        get(move || {
            let issuer = issuer.clone();
            async move {
                (
                    [
                        (header::CONTENT_TYPE, "application/jwk-set+json"),
                        (header::CACHE_CONTROL, "public, max-age=60"),
                    ],
                    issuer.jwks(now_secs()).to_string(),
                )
                    .into_response()
            }
        }),
    )
}

/// Where an agent's tokens find its runtime (set once it is open), to
/// name a session's owner.
pub(crate) type RuntimeCell = Arc<OnceLock<WeakRuntime>>;

/// The bearer of one agent-identity connection.
pub(crate) struct AgentIdentity {
    pub(crate) issuer: Arc<IdentityIssuer>,
    pub(crate) agent: String,
    pub(crate) audience: String,
    pub(crate) runtime: RuntimeCell,
}

impl std::fmt::Debug for AgentIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentIdentity")
            .field("agent", &self.agent)
            .field("audience", &self.audience)
            .finish_non_exhaustive()
    }
}

impl AgentIdentity {
    /// A token for a call made in `session` (its owner as the principal
    /// when the session is known).
    pub(crate) async fn mint(&self, session: Option<&str>) -> Result<MintedToken, String> {
        let mut principal = None;
        if let (Some(id), Some(runtime)) = (session, self.runtime.get().and_then(|w| w.upgrade()))
            && let Ok(meta) = runtime.session_meta(id).await
        {
            principal = Some(meta.owner.principal_id);
        }
        let claims = IdentityClaims {
            agent: self.agent.clone(),
            session: session.map(str::to_owned),
            principal,
            audience: self.audience.clone(),
        };
        self.issuer
            .mint(&claims, now_secs())
            .map_err(|e| e.to_string())
    }
}

impl agentkit_mcp::IdentitySource for AgentIdentity {
    fn token(&self, session: Option<&str>) -> agentkit_mcp::IdentityFuture<'_> {
        let session = session.map(str::to_owned);
        Box::pin(async move {
            let minted = self.mint(session.as_deref()).await?;
            // Renewed at half its life: a call never carries a token about
            // to expire.
            let left = minted.expires_at.saturating_sub(now_secs());
            Ok((minted.token, Duration::from_secs(left / 2)))
        })
    }
}
