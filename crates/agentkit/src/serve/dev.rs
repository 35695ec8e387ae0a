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
/// follow the sessions it starts), and answers the run: the sessions it
/// started or sent into and its record (`lastRun`: when, outcome, error).
/// A run that failed answers 500 `schedule_failed` with its error and the
/// same record.
async fn dispatch_schedule(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    dev_only(&state)?;
    let runtime = &state.agent.runtime;
    match runtime.dispatch_schedule(&id, Some(owner)).await {
        Ok(sessions) => Ok(json_ok(json!({
            "ok": true,
            "scheduleId": id,
            "sessionIds": sessions,
            "lastRun": runtime.schedule_last_run(&id),
        }))),
        Err(agentkit_runtime::Error::ScheduleFailed { message, .. }) => {
            let mut e = ApiError::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                agentkit_protocol::ErrorCode::ScheduleFailed,
                format!("schedule `{id}` failed: {message}"),
            );
            let mut details = serde_json::Map::new();
            details.insert(
                "lastRun".into(),
                serde_json::to_value(runtime.schedule_last_run(&id)).unwrap_or_default(),
            );
            e.details = Some(details);
            Err(e)
        }
        Err(e) => Err(e.into()),
    }
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
