//! `GET /v1/session/:id/context?turnId=…&step=…`: what the model was sent
//! at one step (the system prompt, the tools offered, the folded
//! conversation, their size), rebuilt from the log by the runtime; and
//! the step view: `GET /v1/session/:id/steps` (the session's steps, to
//! its owner) and `GET /v1/session/:id/steps/:step/request` (the
//! provider request of one step as it was sent). What shows the agent's
//! instructions and tool catalog answers under `--dev` or to an
//! operator, and otherwise `403`.

use agentkit_protocol::ErrorCode;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::get;
use serde::Deserialize;

use super::agent::AgentState;
use super::http::{ApiError, ApiResult, Authed, json_ok};

pub(crate) fn routes() -> Router<AgentState> {
    Router::new()
        .route("/v1/session/{id}/context", get(step_context))
        .route("/v1/session/{id}/steps", get(steps))
        .route("/v1/session/{id}/steps/{step}/request", get(step_request))
        .route("/v1/session/{id}/cassette", get(cassette))
}

async fn cassette(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    shows_instructions(&state, &owner, "a session's cassette")?;
    let cassette = state.agent.runtime.steps().cassette(&id, &owner).await?;
    Ok(json_ok(cassette))
}

/// The `403` of a route that shows the instructions and tool catalog.
fn shows_instructions(
    state: &AgentState,
    owner: &agentkit_runtime::Owner,
    what: &str,
) -> ApiResult<()> {
    if state.agent.dev || owner.is_operator() {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::FORBIDDEN,
        ErrorCode::Forbidden,
        format!("{what} (instructions and tool catalog) is served under --dev or to an operator"),
    ))
}

async fn steps(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    let list = state.agent.runtime.steps().list(&id, &owner).await?;
    Ok(json_ok(list))
}

async fn step_request(
    State(state): State<AgentState>,
    Path((id, step)): Path<(String, String)>,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    let step: u64 = step
        .parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "`{step}` is not a step: give the step's number in the session (1-based, as `GET …/steps` lists it)"
            ))
        })?;
    shows_instructions(&state, &owner, "a step's request")?;
    let view = state
        .agent
        .runtime
        .steps()
        .request(&id, &owner, step)
        .await?;
    Ok(json_ok(view))
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
    shows_instructions(&state, &owner, "a step's context")?;
    let Query(which) = query.map_err(|_| {
        ApiError::bad_request("give `turnId` and `step` (a positive integer) in the query")
    })?;
    let context = state
        .agent
        .runtime
        .steps()
        .context(&id, &owner, &which.turn_id, which.step)
        .await?;
    Ok(json_ok(context))
}
