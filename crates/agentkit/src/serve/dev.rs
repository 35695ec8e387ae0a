//! The dev routes, served only under `--dev`: `POST /v1/dev/schedules/:id`
//! dispatches a schedule once as the caller, `GET /v1/dev/reminders` lists
//! reminders, `POST /v1/dev/reminders/:id` fires one now.

use axum::Router;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::json;

use super::http::{ApiError, ApiResult, Authed, json_ok};
use super::mount::AgentState;

pub(crate) fn routes() -> Router<AgentState> {
    Router::new()
        .route("/v1/dev/schedules/{id}", post(dispatch_schedule))
        .route("/v1/dev/reminders", get(list_reminders))
        .route("/v1/dev/reminders/{id}", post(dispatch_reminder))
}

fn dev_only(state: &AgentState) -> ApiResult<()> {
    if state.agent.dev {
        Ok(())
    } else {
        Err(ApiError::not_found("dev routes are served only with --dev"))
    }
}

/// Dispatches one schedule exactly once, as the caller (so the caller can
/// follow the sessions it starts).
async fn dispatch_schedule(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    dev_only(&state)?;
    let sessions = state
        .agent
        .runtime
        .dispatch_schedule(&id, Some(owner))
        .await?;
    Ok(json_ok(
        json!({"ok": true, "scheduleId": id, "sessionIds": sessions}),
    ))
}

async fn list_reminders(State(state): State<AgentState>, _auth: Authed) -> ApiResult {
    dev_only(&state)?;
    let reminders = state.agent.runtime.reminders()?;
    Ok(json_ok(json!({"ok": true, "reminders": reminders})))
}

async fn dispatch_reminder(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    _auth: Authed,
) -> ApiResult<Response> {
    dev_only(&state)?;
    let fired = state.agent.runtime.dispatch_reminder(&id).await?;
    let mut doc = serde_json::to_value(&fired).unwrap_or_default();
    if let Some(obj) = doc.as_object_mut() {
        obj.insert("ok".to_owned(), true.into());
    }
    Ok(json_ok(doc))
}
