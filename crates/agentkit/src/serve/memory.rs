//! The memory routes of each agent: `GET /v1/memory` (the memories the
//! caller's sessions see: its own principal-scoped ones and every
//! agent-scoped one; all of them for an operator; `limit`, `cursor`),
//! `GET /v1/memory/:id`, `PUT /v1/memory/:id` (a new `text`) and
//! `DELETE /v1/memory/:id` (the principal that remembered it, or an
//! operator). All run the agent's HTTP auth chain.

use agentkit_protocol::api::{EditMemory, MemoryAnswer, MemoryDeleted, MemoryList, PageQuery};
use axum::Router;
use axum::extract::{Path, State};
use axum::routing::get;

use super::agent::AgentState;
use super::http::{ApiError, ApiResult, Authed, json_ok, parse_json};
use super::paging;

/// The cursor kind of memory pages.
const MEMORY_CURSOR: &str = "m1";

pub(crate) fn routes() -> Router<AgentState> {
    Router::new()
        .route("/v1/memory", get(list))
        .route("/v1/memory/{id}", get(read).put(edit).delete(delete))
}

async fn list(
    State(state): State<AgentState>,
    uri: axum::http::Uri,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    let axum::extract::Query(q) = axum::extract::Query::<PageQuery>::try_from_uri(&uri)
        .map_err(|e| ApiError::bad_request(format!("invalid query: {}", e.body_text())))?;
    let page = paging::page_query(MEMORY_CURSOR, q.limit, q.cursor.as_deref())?;
    let got = state
        .agent
        .runtime
        .retention()
        .memory()
        .list(&owner, page.limit, page.after.as_deref())
        .await?;
    Ok(json_ok(MemoryList {
        ok: true,
        memories: got.memories,
        next_cursor: got
            .next
            .as_deref()
            .map(|id| paging::cursor_of(MEMORY_CURSOR, id)),
    }))
}

async fn read(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    let memory = state
        .agent
        .runtime
        .retention()
        .memory()
        .get(&id, &owner)
        .await?;
    Ok(json_ok(MemoryAnswer { ok: true, memory }))
}

async fn edit(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    Authed { owner, body, .. }: Authed,
) -> ApiResult {
    let req: EditMemory = parse_json(&body)?;
    let memory = state
        .agent
        .runtime
        .retention()
        .memory()
        .edit(&id, &owner, &req.text)
        .await?;
    Ok(json_ok(MemoryAnswer { ok: true, memory }))
}

async fn delete(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    state
        .agent
        .runtime
        .retention()
        .memory()
        .delete(&id, &owner)
        .await?;
    Ok(json_ok(MemoryDeleted {
        ok: true,
        memory_id: id,
    }))
}
