//! The artifact routes of each agent: `GET /v1/artifacts` (the caller's
//! artifacts, every one for an operator; `kind`, `session`, `limit`,
//! `cursor`) and `GET /v1/session/:id/artifacts` (one session's, for its
//! owner or an operator). Both run the agent's HTTP auth chain; a page is
//! cut by the store (keyset on the artifact id, newest first).

use agentkit_protocol::api::{ArtifactList, ArtifactListQuery};
use agentkit_runtime::ArtifactFilter;
use axum::Router;
use axum::extract::{Path, State};
use axum::routing::get;

use super::agent::AgentState;
use super::http::{ApiError, ApiResult, Authed, json_ok};
use super::paging;

/// The cursor kind of artifact pages.
const ARTIFACT_CURSOR: &str = "r1";

pub(crate) fn routes() -> Router<AgentState> {
    Router::new()
        .route("/v1/artifacts", get(list))
        .route("/v1/session/{id}/artifacts", get(of_session))
}

/// The filter the query asks for; `400` naming what is wrong.
fn filter(uri: &axum::http::Uri) -> ApiResult<ArtifactFilter> {
    let axum::extract::Query(q) = axum::extract::Query::<ArtifactListQuery>::try_from_uri(uri)
        .map_err(|e| ApiError::bad_request(format!("invalid query: {}", e.body_text())))?;
    let page = paging::page_query(ARTIFACT_CURSOR, q.limit, q.cursor.as_deref())?;
    Ok(ArtifactFilter {
        kind: q.kind.filter(|k| !k.is_empty()),
        session: q.session.filter(|s| !s.is_empty()),
        limit: page.limit,
        after: page.after,
    })
}

fn answer(page: agentkit_runtime::ArtifactPage) -> ApiResult {
    Ok(json_ok(ArtifactList {
        ok: true,
        artifacts: page.artifacts,
        next_cursor: page
            .next
            .as_deref()
            .map(|id| paging::cursor_of(ARTIFACT_CURSOR, id)),
    }))
}

async fn list(
    State(state): State<AgentState>,
    uri: axum::http::Uri,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    let filter = filter(&uri)?;
    answer(
        state
            .agent
            .runtime
            .retention()
            .artifacts()
            .list(&owner, filter)
            .await?,
    )
}

async fn of_session(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    uri: axum::http::Uri,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    let filter = filter(&uri)?;
    answer(
        state
            .agent
            .runtime
            .retention()
            .artifacts()
            .of_session(&id, &owner, filter)
            .await?,
    )
}
