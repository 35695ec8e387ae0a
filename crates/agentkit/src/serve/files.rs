//! A session's workspace over HTTP, for its owner or an operator (`403`
//! for another principal, `404` for no such session):
//!
//! | method | path | does |
//! |---|---|---|
//! | GET | `/v1/session/:id/files?limit=&cursor=` | one page of the workspace's entries, depth first |
//! | GET | `/v1/session/:id/files/*path` | the file, with a content type from its extension |
//! | PUT | `/v1/session/:id/files/*path` | writes the body as the file (at most 8 MiB) |
//!
//! The paths go through the runtime's one workspace guard
//! (`runtime.files()`, `files.rs` of agentkit-runtime). On a shared store
//! the answer is this host's copy of the workspace.

use agentkit_protocol::ErrorCode;
use agentkit_protocol::api::{FileWritten, WorkspaceList};
use agentkit_runtime::{FilesCaller, MAX_FILE_BYTES};
use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::get;

use super::agent::AgentState;
use super::http::{ApiError, ApiResult, Authed, json_ok, list_query, read_authenticated};

/// The cursor kind of workspace pages (a path after it).
const FILE_CURSOR: &str = "f1";

/// The body limit of a file write: the cap, plus one byte so that a body
/// over it reaches the handler's refusal, which names the cap.
pub(crate) const UPLOAD_BODY_LIMIT: usize = MAX_FILE_BYTES + 1;

pub(crate) fn routes() -> Router<AgentState> {
    Router::new()
        .route("/v1/session/{id}/files", get(list))
        .route(
            "/v1/session/{id}/files/{*path}",
            get(download)
                .put(upload)
                .layer(DefaultBodyLimit::max(UPLOAD_BODY_LIMIT)),
        )
}

async fn list(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    uri: axum::http::Uri,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    let page = list_query(&uri, FILE_CURSOR)?;
    let listed = state
        .agent
        .runtime
        .files()
        .list(&id, FilesCaller::Principal(&owner), page.limit, page.after)
        .await?;
    Ok(json_ok(WorkspaceList {
        ok: true,
        session_id: id,
        files: listed.files,
        next_cursor: listed
            .next
            .as_deref()
            .map(|p| super::paging::cursor_of(FILE_CURSOR, p)),
    }))
}

/// A file's bytes, streamed, with its content type. Sandboxed
/// (`Content-Security-Policy: sandbox`, `nosniff`): a page an agent wrote
/// runs no script on the API's origin.
pub(crate) fn file_response(opened: agentkit_runtime::OpenedFile) -> Response {
    use tokio::io::AsyncReadExt;
    let chunks = futures_util::stream::unfold(opened.file, |mut file| async move {
        let mut buf = vec![0u8; 64 * 1024];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok::<_, std::io::Error>(axum::body::Bytes::from(buf)), file))
            }
            Err(e) => Some((Err(e), file)),
        }
    });
    let mut resp = Response::new(Body::from_stream(chunks));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(opened.content_type),
    );
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(opened.size));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox"),
    );
    resp
}

async fn download(
    State(state): State<AgentState>,
    Path((id, path)): Path<(String, String)>,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    let opened = state
        .agent
        .runtime
        .files()
        .open(&id, FilesCaller::Principal(&owner), &path)
        .await?;
    Ok(file_response(opened))
}

/// `413` naming the cap, for a body the limit cut off.
pub(crate) fn over_cap(e: ApiError) -> ApiError {
    if e.code == ErrorCode::PayloadTooLarge {
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::PayloadTooLarge,
            format!("a workspace file is at most {MAX_FILE_BYTES} bytes (8 MiB)"),
        );
    }
    e
}

async fn upload(
    State(state): State<AgentState>,
    Path((id, path)): Path<(String, String)>,
    req: axum::extract::Request,
) -> ApiResult {
    let (owner, body) = read_authenticated(req, &state).await.map_err(over_cap)?;
    let size = state
        .agent
        .runtime
        .files()
        .write(&id, FilesCaller::Principal(&owner), &path, body.to_vec())
        .await?;
    Ok(json_ok(FileWritten {
        ok: true,
        session_id: id,
        path,
        size,
    }))
}
