//! A2A v1.0: every agent is an A2A server. Its card is at
//! `/.well-known/agent-card.json` under the agent's prefix; the
//! JSON-RPC binding answers `POST <prefix>/a2a`, the HTTP+JSON binding
//! the paths under it (`/a2a/message:send`, `/a2a/tasks/{id}`, …). Both
//! run the agent's HTTP auth chain over the raw body first, then the
//! same operations (`ops.rs`) over the runtime. A task is a turn of a
//! session (`turn_task/task.rs`); the wire shapes are in `turn_task/wire.rs`. `client.rs` is
//! the other direction: remote A2A agents as tools of the agent's turns.

mod card;
mod client;
mod jsonrpc;
mod legacy;
mod ops;
mod rest;
// The task fold and the wire shapes live in the leaf `turn_task/`, which
// the MCP tasks share; here under their old names.
use super::turn_task::{push, task, wire};

use std::convert::Infallible;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::{Stream, StreamExt};

use super::agent::AgentState;
use super::http::limit_by_address;

pub(crate) use client::{RemoteAgent, RemoteAgents};

/// The A2A routes of one agent (merged into its router).
pub(crate) fn routes() -> Router<AgentState> {
    Router::new()
        .route(
            "/.well-known/agent-card.json",
            get(agent_card).route_layer(axum::middleware::from_fn(limit_by_address)),
        )
        .route("/a2a", post(jsonrpc::handle))
        .route("/a2a/message:send", post(rest::send))
        .route("/a2a/message:stream", post(rest::stream))
        .route("/a2a/tasks", get(rest::list))
        .route("/a2a/tasks/{id}", get(rest::get).post(rest::post))
        .route(
            "/a2a/tasks/{id}/pushNotificationConfigs",
            post(rest::push_create).get(rest::push_list),
        )
        .route(
            "/a2a/tasks/{id}/pushNotificationConfigs/{config}",
            get(rest::push_one).delete(rest::push_one),
        )
        .route("/a2a/extendedAgentCard", get(rest::extended_card))
}

/// `GET /.well-known/agent-card.json`: public, as discovery needs (the
/// card names no secret), and held to the client address's fair share.
async fn agent_card(State(state): State<AgentState>, headers: HeaderMap) -> Response {
    let base = card::base_url(&headers);
    let mut resp = axum::Json(card::card(&state.agent, &base)).into_response();
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=60"),
    );
    resp
}

/// A stream of JSON values as server-sent events, one `data:` line each.
fn sse(events: impl Stream<Item = serde_json::Value> + Send + 'static) -> Response {
    let frames = events.map(|v| {
        let mut line = b"data: ".to_vec();
        line.extend_from_slice(&serde_json::to_vec(&v).unwrap_or_default());
        line.extend_from_slice(b"\n\n");
        Ok::<Bytes, Infallible>(Bytes::from(line))
    });
    let mut resp = Response::new(Body::from_stream(frames));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

/// Refuses a request whose `A2A-Version` header names a version other
/// than 1.x (none means the current one).
fn check_version(headers: &HeaderMap) -> Result<(), ops::A2aError> {
    match headers.get("a2a-version").and_then(|v| v.to_str().ok()) {
        None => Ok(()),
        Some(v) if v.trim().is_empty() || v.trim() == "1" || v.trim().starts_with("1.") => Ok(()),
        Some(v) => Err(ops::A2aError::version_not_supported(v.trim())),
    }
}
