//! The HTTP+JSON binding: `POST /a2a/message:send`, `POST
//! /a2a/message:stream` (server-sent events), `GET /a2a/tasks/{id}`,
//! `POST /a2a/tasks/{id}:cancel`, `GET` or `POST /a2a/tasks/{id}:subscribe`.
//! Errors are `google.rpc.Status` bodies with an `ErrorInfo` detail.

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::super::agent::AgentState;
use super::super::edge::TurnGate;
use super::super::http::{Authed, is_blank, json_ok};
use super::ops::{A2aError, Caller};
use super::wire::{SendMessageRequest, TaskRequest, error_info};

fn caller(
    state: &AgentState,
    gate: Option<axum::Extension<Arc<TurnGate>>>,
    owner: agentkit_runtime::Owner,
    headers: &HeaderMap,
) -> Caller {
    Caller {
        agent: state.agent.clone(),
        owner,
        gate: gate.map(|axum::Extension(g)| g),
        shutdown: state.shutdown.clone(),
        hops: super::ops::hops(headers),
        legacy: false,
    }
}

fn body<T: for<'de> serde::Deserialize<'de> + Default>(bytes: &[u8]) -> Result<T, A2aError> {
    if is_blank(bytes) {
        return Ok(T::default());
    }
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| A2aError::parse_error(format!("invalid JSON: {e}")))?;
    super::ops::params(Some(value))
}

/// `POST /a2a/message:send`.
pub(crate) async fn send(
    State(state): State<AgentState>,
    gate: Option<axum::Extension<Arc<TurnGate>>>,
    headers: HeaderMap,
    Authed {
        owner, body: bytes, ..
    }: Authed,
) -> Response {
    let run = async {
        super::check_version(&headers)?;
        let req: SendMessageRequest = body(&bytes)?;
        caller(&state, gate, owner, &headers)
            .send_message(req)
            .await
    };
    answer(run.await)
}

/// `POST /a2a/message:stream`.
pub(crate) async fn stream(
    State(state): State<AgentState>,
    gate: Option<axum::Extension<Arc<TurnGate>>>,
    headers: HeaderMap,
    Authed {
        owner, body: bytes, ..
    }: Authed,
) -> Response {
    let run = async {
        super::check_version(&headers)?;
        let req: SendMessageRequest = body(&bytes)?;
        caller(&state, gate, owner, &headers)
            .send_streaming(req)
            .await
    };
    match run.await {
        Ok(events) => super::sse(events.map(|e| serde_json::to_value(e).unwrap_or(Value::Null))),
        Err(e) => error(e),
    }
}

/// The `historyLength` of a query.
fn history_length(query: Option<&str>) -> Result<Option<u32>, A2aError> {
    let Some(query) = query else { return Ok(None) };
    for pair in query.split('&') {
        if let Some(v) = pair
            .strip_prefix("historyLength=")
            .or_else(|| pair.strip_prefix("history_length="))
        {
            return v.parse().map(Some).map_err(|_| {
                A2aError::invalid_params(format!(
                    "`historyLength` must be a non-negative integer, not `{v}`"
                ))
            });
        }
    }
    Ok(None)
}

/// `GET /a2a/tasks/{id}` and `GET /a2a/tasks/{id}:subscribe`.
pub(crate) async fn get(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    Authed { owner, .. }: Authed,
) -> Response {
    if let Err(e) = super::check_version(&headers) {
        return error(e);
    }
    let caller = caller(&state, None, owner, &headers);
    if let Some(task) = id.strip_suffix(":subscribe") {
        return subscribe(&caller, task).await;
    }
    let run = async {
        let req = TaskRequest {
            id,
            history_length: history_length(query.as_deref())?,
            ..TaskRequest::default()
        };
        caller.get_task(req).await
    };
    answer(run.await)
}

/// `SubscribeToTask` (`GET` as the binding's table says, `POST` as the
/// SDKs send it).
async fn subscribe(caller: &Caller, task: &str) -> Response {
    let req = TaskRequest {
        id: task.to_owned(),
        ..TaskRequest::default()
    };
    match caller.subscribe(req).await {
        Ok(events) => super::sse(events.map(|e| serde_json::to_value(e).unwrap_or(Value::Null))),
        Err(e) => error(e),
    }
}

/// `POST /a2a/tasks/{id}:cancel` and `POST /a2a/tasks/{id}:subscribe`.
pub(crate) async fn post(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Authed { owner, .. }: Authed,
) -> Response {
    if let Err(e) = super::check_version(&headers) {
        return error(e);
    }
    if let Some(task) = id.strip_suffix(":subscribe") {
        return subscribe(&caller(&state, None, owner, &headers), task).await;
    }
    let Some(task) = id.strip_suffix(":cancel") else {
        return error(A2aError::method_not_found(format!(
            "no operation `POST /tasks/{id}`: cancel with `POST /tasks/{{id}}:cancel`"
        )));
    };
    let run = async {
        let req = TaskRequest {
            id: task.to_owned(),
            ..TaskRequest::default()
        };
        caller(&state, None, owner, &headers).cancel_task(req).await
    };
    answer(run.await)
}

/// `GET /a2a/tasks` (ListTasks): its filters and page in the query
/// (`contextId`, `status`, `pageSize`, `pageToken`, `historyLength`,
/// `statusTimestampAfter`, `includeArtifacts`).
pub(crate) async fn list(
    State(state): State<AgentState>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    Authed { owner, .. }: Authed,
) -> Response {
    if let Err(e) = super::check_version(&headers) {
        return error(e);
    }
    let caller = caller(&state, None, owner, &headers);
    let run = async {
        let axum::extract::Query(req) =
            axum::extract::Query::<super::wire::ListTasksRequest>::try_from_uri(&uri)
                .map_err(|e| A2aError::invalid_params(format!("the query: {}", e.body_text())))?;
        caller.list_tasks(req).await
    };
    answer(run.await)
}

/// `POST /a2a/tasks/{id}/pushNotificationConfigs`: the body is the
/// config (its `taskId` may be left out).
pub(crate) async fn push_create(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Authed {
        owner, body: bytes, ..
    }: Authed,
) -> Response {
    let run = async {
        super::check_version(&headers)?;
        let mut config: super::push::PushConfig = body(&bytes)?;
        if config.task_id.is_empty() {
            config.task_id = id.clone();
        } else if config.task_id != id {
            return Err(A2aError::invalid_params(format!(
                "the body's `taskId` `{}` is not the path's `{id}`",
                config.task_id
            )));
        }
        caller(&state, None, owner, &headers)
            .create_push(config)
            .await
    };
    answer(run.await)
}

/// `GET /a2a/tasks/{id}/pushNotificationConfigs` (`pageSize`,
/// `pageToken` in the query).
pub(crate) async fn push_list(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    Authed { owner, .. }: Authed,
) -> Response {
    let run = async {
        super::check_version(&headers)?;
        let axum::extract::Query(mut req) =
            axum::extract::Query::<super::push::ListConfigsRequest>::try_from_uri(&uri)
                .map_err(|e| A2aError::invalid_params(format!("the query: {}", e.body_text())))?;
        req.task_id = id;
        caller(&state, None, owner, &headers).list_push(req).await
    };
    answer(run.await)
}

/// `GET` and `DELETE /a2a/tasks/{id}/pushNotificationConfigs/{config}`.
pub(crate) async fn push_one(
    State(state): State<AgentState>,
    Path((task_id, id)): Path<(String, String)>,
    method: axum::http::Method,
    headers: HeaderMap,
    Authed { owner, .. }: Authed,
) -> Response {
    let run = async {
        super::check_version(&headers)?;
        let caller = caller(&state, None, owner, &headers);
        let req = super::push::ConfigRequest { task_id, id };
        if method == axum::http::Method::DELETE {
            caller.delete_push(req).await
        } else {
            caller.get_push(req).await
        }
    };
    answer(run.await)
}

/// `GET /a2a/extendedAgentCard`: the extended card, for an
/// authenticated caller.
pub(crate) async fn extended_card(
    State(state): State<AgentState>,
    headers: HeaderMap,
    Authed { owner, .. }: Authed,
) -> Response {
    let run = || {
        super::check_version(&headers)?;
        caller(&state, None, owner, &headers).extended_card(&super::card::base_url(&headers))
    };
    answer(run())
}

fn answer(result: Result<Value, A2aError>) -> Response {
    match result {
        Ok(v) => json_ok(v),
        Err(e) => error(e),
    }
}

/// The gRPC status name of a reason, as the binding's error body carries
/// it.
fn grpc_status(reason: &str) -> &'static str {
    match reason {
        "TASK_NOT_FOUND" | "METHOD_NOT_FOUND" => "NOT_FOUND",
        "TASK_NOT_CANCELABLE" | "UNSUPPORTED_OPERATION" | "VERSION_NOT_SUPPORTED" => {
            "FAILED_PRECONDITION"
        }
        "INTERNAL" => "INTERNAL",
        _ => "INVALID_ARGUMENT",
    }
}

fn error(e: A2aError) -> Response {
    match e {
        A2aError::Http(api) => api.into_response(),
        A2aError::Protocol {
            reason,
            status,
            message,
            metadata,
            ..
        } => {
            let body = json!({"error": {
                "code": status.as_u16(),
                "status": grpc_status(reason),
                "message": message,
                "details": [error_info(reason, metadata)],
            }});
            (status, axum::Json(body)).into_response()
        }
    }
}
