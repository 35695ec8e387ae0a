//! `DELETE /v1/session/:id`: the session's owner (or an operator) deletes
//! it: a running turn is stopped first, then its log, workspace, index
//! row and artifacts go (`runtime.retention()`), and every route answers
//! `404` for it afterwards.

use agentkit_protocol::api::SessionDeleted;
use axum::extract::{Path, State};

use super::agent::AgentState;
use super::http::{ApiResult, Authed, json_ok};

pub(crate) async fn delete(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    state.agent.runtime.retention().delete(&id, &owner).await?;
    Ok(json_ok(SessionDeleted {
        ok: true,
        session_id: id,
    }))
}
