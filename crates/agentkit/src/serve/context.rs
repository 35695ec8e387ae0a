//! `GET /v1/session/:id/context?turnId=…&step=…`: what the model was sent
//! at one step (the system prompt, the tools offered, the folded
//! conversation, their size), rebuilt from the log by the runtime. It
//! shows the agent's instructions and tool catalog, so it answers under
//! `--dev` or to an operator, and otherwise `403`.

use agentkit_protocol::ErrorCode;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::get;
use serde::Deserialize;

use super::agent::AgentState;
use super::http::{ApiError, ApiResult, Authed, json_ok};

pub(crate) fn routes() -> Router<AgentState> {
    Router::new().route("/v1/session/{id}/context", get(step_context))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Which {
    turn_id: String,
    step: u32,
}

async fn step_context(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    query: Result<Query<Which>, axum::extract::rejection::QueryRejection>,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    if !state.agent.dev && !owner.is_operator() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            "a step's context (instructions and tool catalog) is served under --dev or to an operator",
        ));
    }
    let Query(which) = query.map_err(|_| {
        ApiError::bad_request("give `turnId` and `step` (a positive integer) in the query")
    })?;
    let context = state
        .agent
        .runtime
        .step_context(&id, &owner, &which.turn_id, which.step)
        .await?;
    Ok(json_ok(context))
}
