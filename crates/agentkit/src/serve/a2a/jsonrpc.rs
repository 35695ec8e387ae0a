//! The JSON-RPC 2.0 binding: `POST <prefix>/a2a` with `SendMessage`,
//! `SendStreamingMessage`, `GetTask`, `CancelTask`, `SubscribeToTask`
//! (streams as server-sent events, one JSON-RPC response per event),
//! `ListTasks`, the push notification config methods and
//! `GetExtendedAgentCard`, and A2A 0.3's names for them (`legacy.rs`).
//! Malformed bodies and unknown methods get JSON-RPC errors (with HTTP
//! 200, as the binding says); a refused credential or a rate limit is
//! answered as on every route (`401`, `429`).

use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::super::agent::AgentState;
use super::super::edge::TurnGate;
use super::super::http::{Authed, json_ok};
use super::ops::{A2aError, Caller, params};
use super::wire::error_info;

pub(crate) async fn handle(
    State(state): State<AgentState>,
    gate: Option<axum::Extension<Arc<TurnGate>>>,
    headers: HeaderMap,
    Authed { owner, body, .. }: Authed,
) -> Response {
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return error(
                &Value::Null,
                A2aError::parse_error(format!("invalid JSON: {e}")),
            );
        }
    };
    let Value::Object(mut request) = request else {
        let why = if request.is_array() {
            "batch requests are not supported"
        } else {
            "the request must be a JSON-RPC 2.0 request object"
        };
        return error(&Value::Null, A2aError::invalid_request(why));
    };
    let id = match request.remove("id") {
        Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => id,
        None => Value::Null,
        Some(_) => {
            return error(
                &Value::Null,
                A2aError::invalid_request("`id` must be a string, a number or null"),
            );
        }
    };
    if request.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return error(&id, A2aError::invalid_request("`jsonrpc` must be \"2.0\""));
    }
    let Some(method) = request
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return error(&id, A2aError::invalid_request("`method` must be a string"));
    };
    // A2A 0.3's methods are served by 1.0's, their shapes translated.
    let legacy = super::legacy::method(&method);
    let method = legacy.unwrap_or(method.as_str());
    if legacy.is_none()
        && let Err(e) = super::check_version(&headers)
    {
        return error(&id, e);
    }
    let caller = Caller {
        agent: state.agent.clone(),
        owner,
        gate: gate.map(|axum::Extension(g)| g),
        shutdown: state.shutdown.clone(),
        hops: super::ops::hops(&headers),
        legacy: legacy.is_some(),
    };
    let mut params_value = request.remove("params");
    if legacy.is_some() {
        params_value = super::legacy::params(method, params_value);
    }
    let answer = match method {
        "SendMessage" => match params(params_value) {
            Ok(req) => caller.send_message(req).await,
            Err(e) => Err(e),
        },
        "GetTask" => match params(params_value) {
            Ok(req) => caller.get_task(req).await,
            Err(e) => Err(e),
        },
        "CancelTask" => match params(params_value) {
            Ok(req) => caller.cancel_task(req).await,
            Err(e) => Err(e),
        },
        "SendStreamingMessage" => {
            let stream = match params(params_value) {
                Ok(req) => caller.send_streaming(req).await,
                Err(e) => Err(e),
            };
            return match stream {
                Ok(s) => streamed(id, s, legacy.is_some()),
                Err(e) => error(&id, e),
            };
        }
        "SubscribeToTask" => {
            let stream = match params(params_value) {
                Ok(req) => caller.subscribe(req).await,
                Err(e) => Err(e),
            };
            return match stream {
                Ok(s) => streamed(id, s, legacy.is_some()),
                Err(e) => error(&id, e),
            };
        }
        "ListTasks" => match params(params_value) {
            Ok(req) => caller.list_tasks(req).await,
            Err(e) => Err(e),
        },
        "GetExtendedAgentCard" => caller.extended_card(&super::card::base_url(&headers)),
        "CreateTaskPushNotificationConfig" => match params(params_value) {
            Ok(req) => caller.create_push(req).await,
            Err(e) => Err(e),
        },
        "GetTaskPushNotificationConfig" => match params(params_value) {
            Ok(req) => caller.get_push(req).await,
            Err(e) => Err(e),
        },
        "ListTaskPushNotificationConfigs" => match params(params_value) {
            Ok(req) => caller.list_push(req).await,
            Err(e) => Err(e),
        },
        "DeleteTaskPushNotificationConfig" => match params(params_value) {
            Ok(req) => caller.delete_push(req).await,
            Err(e) => Err(e),
        },
        other => Err(A2aError::method_not_found(format!("no method `{other}`"))),
    };
    match answer {
        Ok(result) => {
            let result = match legacy {
                Some(_) => super::legacy::result(method, result),
                None => result,
            };
            json_ok(json!({"jsonrpc": "2.0", "id": id, "result": result}))
        }
        Err(e) => error(&id, e),
    }
}

fn streamed(
    id: Value,
    events: impl futures_util::Stream<Item = super::wire::StreamResponse> + Send + 'static,
    legacy: bool,
) -> Response {
    super::sse(events.map(move |event| {
        let mut result = serde_json::to_value(event).unwrap_or(Value::Null);
        if legacy {
            result = super::legacy::event(result);
        }
        json!({"jsonrpc": "2.0", "id": id.clone(), "result": result})
    }))
}

/// A JSON-RPC error response (HTTP 200), or the HTTP refusal itself.
fn error(id: &Value, e: A2aError) -> Response {
    match e {
        A2aError::Http(api) => api.into_response(),
        A2aError::Protocol {
            code,
            reason,
            message,
            metadata,
            ..
        } => json_ok(json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": code, "message": message, "data": [error_info(reason, metadata)]},
        })),
    }
}
