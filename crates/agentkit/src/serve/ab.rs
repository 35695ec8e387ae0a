//! The A/B routes of each agent: `POST /v1/session/:id/feedback` (an
//! outcome credited to the session's variants; the session's owner only)
//! and `GET /v1/ab` (every experiment's per-variant metrics with
//! confidence intervals). Both run the agent's HTTP auth chain. The report
//! holds aggregates only, never a session id or a principal; on an agent
//! with tenants it is `admin`'s only (its rows carry no tenant).

use agentkit_protocol::ab::Feedback;
use axum::Router;
use axum::extract::{Path, State};
use axum::routing::{get, post};

use agentkit_auth::Role;
use agentkit_protocol::ErrorCode;
use axum::http::StatusCode;

use super::agent::AgentState;
use super::http::{ApiError, ApiResult, Authed, json_ok, parse_json, require};

pub(crate) fn routes() -> Router<AgentState> {
    Router::new()
        .route("/v1/session/{id}/feedback", post(feedback))
        .route("/v1/ab", get(report))
}

async fn feedback(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    Authed { owner, body, .. }: Authed,
) -> ApiResult {
    let feedback: Feedback = parse_json(&body)?;
    let recorded = state
        .agent
        .runtime
        .ab()
        .feedback(&id, &owner, feedback)
        .await?;
    Ok(json_ok(recorded))
}

/// The report. On an agent with tenants (`[auth] tenant_claim`) it is
/// `admin`'s only: its rows (`ab_assignments`, `ab_turns`,
/// `ab_feedback`) carry no tenant, so totals cannot be cut by tenant and
/// would count every tenant's sessions.
async fn report(State(state): State<AgentState>, Authed { role, .. }: Authed) -> ApiResult {
    if state.agent.chain.tenant_claim.is_some() {
        require(role, Role::Admin).map_err(|_| {
            ApiError::new(
                StatusCode::FORBIDDEN,
                ErrorCode::Forbidden,
                format!(
                    "on an agent with tenants the A/B report counts every tenant's sessions: it needs the role `admin`; the caller is a `{role}`"
                ),
            )
        })?;
    }
    Ok(json_ok(state.agent.runtime.ab().report().await?))
}
