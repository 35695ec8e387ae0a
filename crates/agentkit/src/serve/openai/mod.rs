//! The OpenAI-compatible front of each agent: `POST /v1/responses`, `GET
//! /v1/responses/:id` and `POST /v1/chat/completions`, so a client built
//! for OpenAI (its SDKs with `base_url = http://host/<slug>/v1`) talks to
//! the agent. The agent's slug is the `model`; its sessions live on the
//! `openai` channel, owned by the caller the agent's auth chain admitted
//! (the SDK's `api_key` is the bearer token), so every ownership rule of
//! the session API holds.
//!
//! A response id names a turn by where it starts in the session's log
//! (`resp_<sessionId>.<index>`: the index of its `message.received`, or of
//! the log's end before an approval decision), so ids survive a restart
//! and `GET /v1/responses/:id` folds the log again. `fold.rs` reads a
//! turn's events as pieces (text, calls, an approval wait, the end);
//! `responses.rs` and `chat.rs` render them in each format.

mod chat;
pub(crate) mod fold;
mod responses;

use agentkit_protocol::ErrorCode;
use agentkit_protocol::openai::{ErrorBody, ErrorDetail};
use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::Value;

use super::agent::AgentState;
use super::http::ApiError;

/// The channel the OpenAI-compatible routes' sessions live on.
pub(crate) const OPENAI_CHANNEL: &str = "openai";

pub(crate) fn routes() -> Router<AgentState> {
    Router::new()
        .route("/v1/responses", post(responses::create))
        .route("/v1/responses/{id}", get(responses::retrieve))
        .route("/v1/chat/completions", post(chat::create))
}

/// An error in OpenAI's shape: `{"error": {"message", "type", "param",
/// "code"}}` with the status the session API would answer.
#[derive(Debug)]
pub(crate) struct OaiError {
    status: StatusCode,
    code: String,
    param: Option<&'static str>,
    message: String,
    retry_after: Option<u64>,
}

impl OaiError {
    fn new(status: StatusCode, code: impl Into<String>, message: impl Into<String>) -> OaiError {
        OaiError {
            status,
            code: code.into(),
            param: None,
            message: message.into(),
            retry_after: None,
        }
    }

    /// `400 bad_request` about request field `param`.
    fn invalid(param: &'static str, message: impl Into<String>) -> OaiError {
        OaiError {
            param: Some(param),
            ..OaiError::new(
                StatusCode::BAD_REQUEST,
                code_name(ErrorCode::BadRequest),
                message,
            )
        }
    }

    fn not_found(code: &str, param: &'static str, message: impl Into<String>) -> OaiError {
        OaiError {
            param: Some(param),
            ..OaiError::new(StatusCode::NOT_FOUND, code, message)
        }
    }

    /// OpenAI's class of the error, by status (what the SDKs map to their
    /// exception types).
    fn kind(&self) -> &'static str {
        match self.status.as_u16() {
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            409 => "conflict_error",
            429 => "rate_limit_error",
            s if s >= 500 => "server_error",
            _ => "invalid_request_error",
        }
    }
}

/// The wire spelling of an [`ErrorCode`].
fn code_name(code: ErrorCode) -> String {
    match serde_json::to_value(code) {
        Ok(Value::String(s)) => s,
        _ => "internal".to_owned(),
    }
}

impl From<ApiError> for OaiError {
    fn from(e: ApiError) -> OaiError {
        OaiError {
            status: e.status(),
            code: code_name(e.code),
            param: None,
            message: e.message,
            retry_after: e.retry_after,
        }
    }
}

/// A refusal of request content, for the routes that answer in
/// agentkit's error shape (AG-UI).
impl From<OaiError> for ApiError {
    fn from(e: OaiError) -> ApiError {
        let code = if e.status == StatusCode::BAD_REQUEST {
            ErrorCode::BadRequest
        } else {
            ErrorCode::Internal
        };
        ApiError::new(e.status, code, e.message)
    }
}

impl From<agentkit_runtime::Error> for OaiError {
    fn from(e: agentkit_runtime::Error) -> OaiError {
        OaiError::from(ApiError::from(e))
    }
}

impl IntoResponse for OaiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                kind: self.kind().to_owned(),
                message: self.message,
                param: self.param.map(str::to_owned),
                code: Some(self.code),
            },
        };
        let mut response = (self.status, axum::Json(body)).into_response();
        let headers = response.headers_mut();
        match self.retry_after {
            Some(secs) => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
            }
            // The SDKs retry 409 and 5xx by default: a retried request
            // would send its message into the session again.
            None => {
                headers.insert("x-should-retry", HeaderValue::from_static("false"));
            }
        }
        response
    }
}

pub(crate) type OaiResult<T = Response> = Result<T, OaiError>;

/// Checks the request's `model` against the agent's slug.
fn check_model(model: Option<&str>, slug: &str) -> OaiResult<()> {
    match model {
        None => Ok(()),
        Some(m) if m == slug => Ok(()),
        Some(m) => Err(OaiError::not_found(
            "model_not_found",
            "model",
            format!(
                "the model `{m}` does not exist here: this endpoint serves the agent `{slug}`, whose slug is its model name"
            ),
        )),
    }
}

/// A JSON request body, or `400` in OpenAI's shape.
fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> OaiResult<T> {
    if super::http::is_blank(body) {
        return Err(OaiError::invalid(
            "body",
            "the request body must be a JSON object",
        ));
    }
    serde_json::from_slice(body)
        .map_err(|e| OaiError::invalid("body", format!("invalid request body: {e}")))
}

/// Who wrote a message of the history a request carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    User,
    Assistant,
}

/// One message of a request's history, as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Said {
    pub(crate) role: Role,
    pub(crate) text: String,
}

/// The role of a history message; `system` and `developer` text is
/// refused (the agent's instructions are its own), tool messages too (the
/// client declares no tools).
pub(crate) fn role(role: &str, param: &'static str, has_text: bool) -> OaiResult<Option<Role>> {
    match role {
        "user" => Ok(Some(Role::User)),
        "assistant" => Ok(Some(Role::Assistant)),
        "system" | "developer" if !has_text => Ok(None),
        "system" | "developer" => Err(OaiError::invalid(
            param,
            format!(
                "a `{role}` message is not supported: the agent's instructions are its own (instructions.md); send the text as a user message"
            ),
        )),
        "tool" | "function" => Err(OaiError::invalid(
            param,
            format!(
                "a `{role}` message is not supported: the agent's tools run on the server and the client declares none"
            ),
        )),
        other => Err(OaiError::invalid(
            param,
            format!("unknown message role `{other}`"),
        )),
    }
}

/// The text of a message's `content`: a string, or text parts
/// (`text`, `input_text`, `output_text`); other parts are refused.
pub(crate) fn content_text(content: &Value, param: &'static str) -> OaiResult<String> {
    match content {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut text = String::new();
            for part in parts {
                let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
                match (kind, part.get("text").and_then(Value::as_str)) {
                    ("text" | "input_text" | "output_text", Some(t)) => {
                        if !text.is_empty() {
                            text.push('\n');
                        }
                        text.push_str(t);
                    }
                    _ => {
                        return Err(OaiError::invalid(
                            param,
                            format!(
                                "content part `{kind}` is not supported: agents read text parts only"
                            ),
                        ));
                    }
                }
            }
            Ok(text)
        }
        _ => Err(OaiError::invalid(
            param,
            "`content` must be a string or an array of text parts",
        )),
    }
}

/// The one message a request sends into its session. Continuing a
/// session, it is the user text after the history's last assistant
/// message (the session remembers the rest). Starting one, an earlier
/// history is carried in the message as a transcript before the last
/// user text (the session's log records it as the user's message).
pub(crate) fn compose(
    history: &[Said],
    continuing: bool,
    param: &'static str,
) -> OaiResult<String> {
    let last_assistant = history.iter().rposition(|m| m.role == Role::Assistant);
    let tail = match last_assistant {
        Some(i) => &history[i + 1..],
        None => history,
    };
    let latest: Vec<&str> = tail
        .iter()
        .map(|m| m.text.trim())
        .filter(|t| !t.is_empty())
        .collect();
    if latest.is_empty() {
        return Err(OaiError::invalid(
            param,
            "the input must end with a user message that has text",
        ));
    }
    let latest = latest.join("\n\n");
    let earlier = match last_assistant {
        Some(i) if !continuing => &history[..=i],
        _ => return Ok(latest),
    };
    let mut text = String::from("The conversation so far:\n");
    for m in earlier {
        let who = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        text.push_str(&format!("\n[{who}]\n{}\n", m.text.trim()));
    }
    text.push_str(&format!("\n[user]\n{latest}"));
    Ok(text)
}

/// The request's client-declared tools are refused: the agent's tools
/// run on the server.
fn refuse_tools(tools: &[Value]) -> OaiResult<()> {
    if tools.is_empty() {
        return Ok(());
    }
    let kinds: Vec<&str> = tools
        .iter()
        .map(|t| t.get("type").and_then(Value::as_str).unwrap_or("?"))
        .collect();
    Err(OaiError {
        code: "unsupported_tools".to_owned(),
        ..OaiError::invalid(
            "tools",
            format!(
                "client-declared tools ({}) are not supported: the agent's own tools run on the server; send no `tools`",
                kinds.join(", ")
            ),
        )
    })
}

/// Seconds since the epoch of an event's `at` (now, if it does not
/// parse).
fn unix_time(at: Option<&str>) -> u64 {
    at.and_then(|at| chrono::DateTime::parse_from_rfc3339(at).ok())
        .map_or_else(chrono::Utc::now, |t| t.with_timezone(&chrono::Utc))
        .timestamp()
        .max(0)
        .unsigned_abs()
}

/// An `text/event-stream` answer over `body`.
pub(crate) fn sse(body: axum::body::Body) -> Response {
    let mut resp = Response::new(body);
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

/// Every answer names the session it belongs to.
fn with_session(mut resp: Response, session_id: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(session_id) {
        resp.headers_mut().insert(SESSION_HEADER, v);
    }
    resp
}

/// A conversation key of one principal (a chat `user`, an AG-UI
/// thread): the principal's id is length-prefixed, so no two principals'
/// keys meet whatever their ids hold.
pub(crate) fn principal_key(owner: &agentkit_runtime::Owner, name: &str) -> String {
    let principal = &owner.principal_id;
    format!("{}:{principal}:{name}", principal.len())
}

/// The header that names (and, on a chat request, continues) a session.
pub(crate) const SESSION_HEADER: &str = "x-agentkit-session-id";

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn said(role: Role, text: &str) -> Said {
        Said {
            role,
            text: text.to_owned(),
        }
    }

    #[test]
    fn a_new_session_carries_the_history_and_a_continued_one_the_last_user_text() {
        let h = [
            said(Role::User, "hi"),
            said(Role::Assistant, "hello"),
            said(Role::User, "and now?"),
        ];
        assert_eq!(compose(&h, true, "input").unwrap(), "and now?");
        assert_eq!(
            compose(&h, false, "input").unwrap(),
            "The conversation so far:\n\n[user]\nhi\n\n[assistant]\nhello\n\n[user]\nand now?"
        );
        assert_eq!(compose(&h[..1], false, "input").unwrap(), "hi");
        assert!(compose(&h[..2], false, "input").is_err());
    }

    #[test]
    fn errors_take_openai_classes_by_status() {
        let e = OaiError::from(ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            "not yours",
        ));
        assert_eq!(e.kind(), "permission_error");
        assert_eq!(e.code, "forbidden");
        assert_eq!(
            check_model(Some("other"), "bot").unwrap_err().code,
            "model_not_found"
        );
    }
}
