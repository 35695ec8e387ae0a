//! The dev routes, served only under `--dev`: `POST /v1/dev/schedules/:id`
//! dispatches a schedule once as the caller, `GET /v1/dev/reminders` lists
//! reminders, `POST /v1/dev/reminders/:id` fires one now.

use std::time::Duration;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::json;

use super::agent::AgentState;
use super::http::{ApiError, ApiResult, Authed, json_ok};

pub(crate) fn routes() -> Router<AgentState> {
    Router::new()
        .route("/v1/dev/schedules/{id}", post(dispatch_schedule))
        .route("/v1/dev/reminders", get(list_reminders))
        .route("/v1/dev/reminders/{id}", post(dispatch_reminder))
        .route("/v1/dev/evals/cases", post(add_eval_case))
}

fn dev_only(state: &AgentState) -> ApiResult<()> {
    if state.agent.dev {
        Ok(())
    } else {
        Err(ApiError::not_found("dev routes are served only with --dev"))
    }
}

/// `?wait=SECONDS` of a dispatch: how long to wait for the sessions it
/// started to settle before answering (at most [`MAX_DISPATCH_WAIT`]).
#[derive(Debug, Default, serde::Deserialize)]
struct DispatchQuery {
    #[serde(default)]
    wait: Option<u64>,
}

/// The longest a dispatch waits for its sessions.
const MAX_DISPATCH_WAIT: Duration = Duration::from_secs(300);

/// Dispatches one schedule exactly once, as the caller (so the caller can
/// follow the sessions it starts), and answers the run: the sessions it
/// started or sent into, each with its outcome so far (`sessions`), the
/// outcome of the whole (`outcome`: `failed` when a session's turn
/// failed, `running` while one still runs, else `ok`) and the run's record
/// (`lastRun`: when, outcome, error). With `?wait=SECONDS` the answer
/// waits (bounded) for those sessions to settle. A run that failed itself
/// answers 500 `schedule_failed` with its error and the same record.
async fn dispatch_schedule(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    Query(query): Query<DispatchQuery>,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    dev_only(&state)?;
    let runtime = &state.agent.runtime;
    match runtime.schedules().dispatch(&id, Some(owner.clone())).await {
        Ok(sessions) => {
            let wait = Duration::from_secs(query.wait.unwrap_or(0)).min(MAX_DISPATCH_WAIT);
            let deadline = tokio::time::Instant::now() + wait;
            while sessions.iter().any(|s| runtime.is_active(s))
                && tokio::time::Instant::now() < deadline
            {
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            let mut each = Vec::with_capacity(sessions.len());
            for session in &sessions {
                each.push(session_outcome(runtime, &owner, session).await);
            }
            let outcome = if each.iter().any(|s| s["outcome"] == "failed") {
                "failed"
            } else if each.iter().any(|s| s["outcome"] == "running") {
                "running"
            } else {
                "ok"
            };
            Ok(json_ok(json!({
                "ok": true,
                "scheduleId": id,
                "outcome": outcome,
                "sessionIds": sessions,
                "sessions": each,
                "lastRun": runtime.schedules().last_run(&id),
            })))
        }
        Err(agentkit_runtime::Error::ScheduleFailed { message, .. }) => {
            let mut e = ApiError::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                agentkit_protocol::ErrorCode::ScheduleFailed,
                format!("schedule `{id}` failed: {message}"),
            );
            let mut details = serde_json::Map::new();
            details.insert(
                "lastRun".into(),
                serde_json::to_value(runtime.schedules().last_run(&id)).unwrap_or_default(),
            );
            e.details = Some(details);
            Err(e)
        }
        Err(e) => Err(e.into()),
    }
}

/// The kind of the reminders list's cursor (`paging.rs`).
const REMINDER_CURSOR: &str = "r1";

/// `GET /v1/dev/reminders?limit&cursor`: the agent's reminders, newest
/// first, one page of them.
async fn list_reminders(
    State(state): State<AgentState>,
    uri: axum::http::Uri,
    _auth: Authed,
) -> ApiResult {
    dev_only(&state)?;
    let query = super::http::list_query(&uri, REMINDER_CURSOR)?;
    let mut reminders = state.agent.runtime.reminders().list().await?;
    let key = |r: &agentkit_runtime::Reminder| format!("{}\n{}", r.created_at, r.id);
    reminders.sort_by_cached_key(|r| std::cmp::Reverse(key(r)));
    let (reminders, next) = super::paging::page(reminders, REMINDER_CURSOR, &query, key);
    let mut doc = json!({"ok": true, "reminders": reminders});
    if let Some(next) = next {
        doc["nextCursor"] = next.into();
    }
    Ok(json_ok(doc))
}

/// The body of `POST /v1/dev/evals/cases`.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AddCase {
    session_id: String,
    name: String,
}

/// `POST /v1/dev/evals/cases` `{sessionId, name}`: writes the session
/// into the served project as eval case `name` (its turns, each turn's
/// tools, its recordings under `evals/cassettes`), as `agentkit eval add`
/// does; `{ok, id, caseFile, recordings, warnings}`. `409` when the case
/// exists. Under `--dev` only: it writes into the project.
async fn add_eval_case(
    State(state): State<AgentState>,
    Authed { owner, body, .. }: Authed,
) -> ApiResult {
    dev_only(&state)?;
    let req: AddCase = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("expected {{\"sessionId\", \"name\"}}: {e}")))?;
    let runtime = &state.agent.runtime;
    let events = runtime.events(&req.session_id, &owner, 0).await?;
    let cassette = runtime.steps().cassette(&req.session_id, &owner).await?;
    let project = state.agent.project.dir.clone();
    let written = tokio::task::spawn_blocking(move || {
        crate::replay::write_eval_case(&events, &cassette, &req.session_id, &req.name, &project)
    })
    .await
    .map_err(|e| {
        ApiError::new(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            agentkit_protocol::ErrorCode::Internal,
            format!("writing the eval case did not finish: {e}"),
        )
    })?;
    let added = written.map_err(|e| match e {
        crate::error::Error::WouldOverwrite { paths } => ApiError::new(
            axum::http::StatusCode::CONFLICT,
            agentkit_protocol::ErrorCode::BadRequest,
            format!(
                "the eval case exists ({}): pick another name",
                paths
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        other => ApiError::bad_request(other.to_string()),
    })?;
    Ok(json_ok(json!({
        "ok": true,
        "id": added.id,
        "caseFile": added.case_file,
        "recordings": added.recordings,
        "warnings": added.warnings,
    })))
}

async fn dispatch_reminder(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    _auth: Authed,
) -> ApiResult<Response> {
    dev_only(&state)?;
    let fired = state.agent.runtime.reminders().dispatch(&id).await?;
    let mut doc = serde_json::to_value(&fired).unwrap_or_default();
    if let Some(obj) = doc.as_object_mut() {
        obj.insert("ok".to_owned(), true.into());
    }
    Ok(json_ok(doc))
}

/// Where one session a dispatch started stands: `running` while it is
/// active, else how its last turn ended (`completed` or `failed`, with
/// the error; `completed` when it ran no turn).
async fn session_outcome(
    runtime: &agentkit_runtime::AgentRuntime,
    owner: &agentkit_runtime::Owner,
    id: &str,
) -> serde_json::Value {
    if runtime.is_active(id) {
        return json!({"sessionId": id, "outcome": "running"});
    }
    let events = runtime
        .events_stored(id, owner, 0)
        .await
        .unwrap_or_default();
    match events.iter().rev().find_map(agentkit_protocol::TurnEnd::of) {
        Some(end) if !end.ok => json!({"sessionId": id, "outcome": "failed", "error": end.text}),
        _ => json!({"sessionId": id, "outcome": "completed"}),
    }
}
