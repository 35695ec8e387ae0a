//! The A/B routes of each agent: `POST /v1/session/:id/feedback` (an
//! outcome credited to the session's variants; the session's owner only)
//! and `GET /v1/ab` (every experiment's per-variant metrics with
//! confidence intervals). Both run the agent's HTTP auth chain. The report
//! holds aggregates only, never a session id or a principal.

use agentkit_protocol::ab::Feedback;
use axum::Router;
use axum::extract::{Path, State};
use axum::routing::{get, post};

use super::agent::AgentState;
use super::http::{ApiResult, Authed, json_ok, parse_json};

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

async fn report(State(state): State<AgentState>, Authed { .. }: Authed) -> ApiResult {
    Ok(json_ok(state.agent.runtime.ab().report().await?))
}
