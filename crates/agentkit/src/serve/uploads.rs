//! The body of a message (`POST /v1/session`, `POST /v1/session/:id`):
//! JSON ([`SendMessage`]), or `multipart/form-data` carrying files.
//!
//! A multipart message's parts:
//!
//! - a part with a file name is a file, written into the workspace at
//!   that name (a relative path: `notes/a.txt` lands in `notes/`) before
//!   the turn starts, at most [`MAX_FILE_BYTES`] each;
//! - a part named `json` is a JSON object of any of [`SendMessage`]'s
//!   fields (`dryRun`, `admission`, `workspaceFiles`, …);
//! - any other part is a string field of the same name (`message`,
//!   `continuationToken`, `title`, `purpose`, `admission`).
//!
//! The whole body is at most [`MAX_MULTIPART_BYTES`]; a JSON body keeps
//! the server's body limit. Both answer `413` naming the cap. The auth
//! chain sees the raw body either way.

use agentkit_protocol::ErrorCode;
use agentkit_protocol::api::SendMessage;
use agentkit_runtime::{MAX_FILE_BYTES, Owner};
use axum::body::Body;
use axum::extract::{FromRequest, Request};
use axum::http::{StatusCode, header};
use serde_json::{Map, Value};

use super::agent::AgentState;
use super::http::{ApiError, ApiResult, parse_json, read_authenticated};

/// The largest multipart message body (16 MiB).
pub(crate) const MAX_MULTIPART_BYTES: usize = 16 * 1024 * 1024;

/// Per-send files: workspace path and bytes.
type Files = Vec<(String, Vec<u8>)>;

fn too_large(what: &str, cap: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::PayloadTooLarge,
        format!("{what} is over the cap of {cap} bytes"),
    )
}

/// Is the request `multipart/form-data`?
fn is_multipart(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("multipart/form-data")
        })
}

/// Authenticates the request and reads its message: the caller, the
/// message and every file to write before the turn (`workspaceFiles`'
/// and the uploaded ones).
pub(crate) async fn message(
    state: &AgentState,
    request: Request,
) -> ApiResult<(Owner, SendMessage, Files)> {
    let (parts, body) = request.into_parts();
    let head = parts.clone();
    let multipart = is_multipart(&parts.headers);
    let limit = if multipart {
        MAX_MULTIPART_BYTES
    } else {
        state.body_limit
    };
    let (owner, bytes) = read_authenticated(Request::from_parts(parts, body), state)
        .await
        .map_err(|e| {
            if e.code == ErrorCode::PayloadTooLarge {
                too_large("the request body", limit)
            } else {
                e
            }
        })?;
    if bytes.len() > limit {
        return Err(too_large("the request body", limit));
    }
    if !multipart {
        let req: SendMessage = parse_json(&bytes)?;
        let files = text_files(&req);
        return Ok((owner, req, files));
    }
    let mut form =
        axum::extract::Multipart::from_request(Request::from_parts(head, Body::from(bytes)), &())
            .await
            .map_err(|e| {
                ApiError::bad_request(format!("invalid multipart body: {}", e.body_text()))
            })?;
    let mut fields = Map::new();
    let mut uploads: Files = Vec::new();
    let bad = |e: axum::extract::multipart::MultipartError| {
        ApiError::bad_request(format!("invalid multipart body: {}", e.body_text()))
    };
    while let Some(field) = form.next_field().await.map_err(bad)? {
        let name = field.name().unwrap_or_default().to_owned();
        match field.file_name().map(str::to_owned) {
            Some(path) => {
                if path.is_empty() {
                    return Err(ApiError::bad_request(
                        "a file part needs a file name: its path in the workspace",
                    ));
                }
                let data = field.bytes().await.map_err(bad)?;
                if data.len() > MAX_FILE_BYTES {
                    return Err(too_large(&format!("file `{path}`"), MAX_FILE_BYTES));
                }
                uploads.push((path, data.to_vec()));
            }
            None if name == "json" => {
                let text = field.text().await.map_err(bad)?;
                match serde_json::from_str::<Value>(&text) {
                    Ok(Value::Object(map)) => {
                        for (k, v) in map {
                            fields.entry(k).or_insert(v);
                        }
                    }
                    _ => {
                        return Err(ApiError::bad_request(
                            "the `json` part must be a JSON object of the message's fields",
                        ));
                    }
                }
            }
            None if name.is_empty() => {
                return Err(ApiError::bad_request(
                    "every multipart part needs a name (`message`, `json`, or a file)",
                ));
            }
            None => {
                let text = field.text().await.map_err(bad)?;
                fields.insert(name, Value::String(text));
            }
        }
    }
    let req: SendMessage = serde_json::from_value(Value::Object(fields))
        .map_err(|e| ApiError::bad_request(format!("invalid message fields: {e}")))?;
    let mut files = text_files(&req);
    for (path, data) in uploads {
        if files.iter().any(|(p, _)| *p == path) {
            return Err(ApiError::bad_request(format!(
                "`{path}` is sent twice: each workspace path once"
            )));
        }
        files.push((path, data));
    }
    Ok((owner, req, files))
}

/// `workspaceFiles` of a JSON message, as bytes.
fn text_files(req: &SendMessage) -> Files {
    req.workspace_files
        .iter()
        .map(|(p, t)| (p.clone(), t.clone().into_bytes()))
        .collect()
}
