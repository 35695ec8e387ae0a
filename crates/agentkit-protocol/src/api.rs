//! The HTTP API's bodies: what a client sends to the built-in HTTP
//! channel and what the server answers, and the error codes every layer
//! answers with. Field order is the wire order.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The machine-readable `code` of an error answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorCode {
    /// 400: the request is malformed.
    BadRequest,
    /// 400: a session id that is not one safe path segment.
    InvalidSessionId,
    /// 400: input that does not match its schema (`errors` says where).
    InvalidInput,
    /// 400: a template did not render.
    TemplateError,
    /// 401: no auth policy admitted the request.
    Unauthorized,
    /// 403: the session belongs to another principal.
    Forbidden,
    /// 404: no such route or thing.
    NotFound,
    /// 404: no such session.
    SessionNotFound,
    /// 404: no such tool (`available` lists the tools).
    UnknownTool,
    /// 404: no parked call with that id.
    ApprovalNotFound,
    /// 404: no MCP connection of that name (`available` lists them).
    UnknownConnection,
    /// 405: the route exists for another method.
    MethodNotAllowed,
    /// 408: the request did not produce its answer in time.
    RequestTimeout,
    /// 409: the continuation token is not the session's current one.
    StaleContinuation,
    /// 409: a task session takes no follow-ups.
    TaskSession,
    /// 409: the session is running a turn.
    SessionBusy,
    /// 409: the call was already decided.
    ApprovalResolved,
    /// 409: a fork's `atIndex` falls inside a turn (the message names the
    /// nearest turn boundaries).
    InsideTurn,
    /// An MCP request arrived through more agent-to-agent hops than the
    /// limit.
    HopLimit,
    /// 413: the body is over the limit.
    PayloadTooLarge,
    /// 429: the caller (a principal, a client address, a channel) is past
    /// its fair share (`--rate-limit`, `--max-turns-per-principal`,
    /// `--channel-rate-limit`); retry after `Retry-After` seconds.
    RateLimited,
    /// 500: a failure the server log details.
    Internal,
    /// 500: a schedule's run failed.
    ScheduleFailed,
    /// 503: the host is past a bound (turns in flight); retry after
    /// `Retry-After` seconds.
    Overloaded,
    /// 507: the volume holding the server's state is full (no space or
    /// no inodes left); retry after `Retry-After` seconds, once an
    /// operator has made room.
    StorageFull,
    /// 501: not available in this release.
    NotAvailable,
    /// 501: a channel capability this release does not have.
    NotImplemented,
    /// 502: a provider API (GitHub, a delivery URL) failed.
    UpstreamError,
    /// 502: an MCP connection could not be opened.
    ConnectionUnavailable,
    /// 502: an MCP connection's tool call failed.
    McpCallFailed,
    /// 404: a workspace file that does not exist.
    FileNotFound,
    /// 400: an eval selector names no case or file.
    UnknownSelector,
    /// A code this version does not know (a newer server's).
    #[serde(other)]
    Unknown,
}

impl ErrorCode {
    /// The code as it is spelled on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::InvalidSessionId => "invalid_session_id",
            ErrorCode::InvalidInput => "invalid_input",
            ErrorCode::TemplateError => "template_error",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::SessionNotFound => "session_not_found",
            ErrorCode::UnknownTool => "unknown_tool",
            ErrorCode::ApprovalNotFound => "approval_not_found",
            ErrorCode::UnknownConnection => "unknown_connection",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::RequestTimeout => "request_timeout",
            ErrorCode::StaleContinuation => "stale_continuation",
            ErrorCode::TaskSession => "task_session",
            ErrorCode::SessionBusy => "session_busy",
            ErrorCode::ApprovalResolved => "approval_resolved",
            ErrorCode::InsideTurn => "inside_turn",
            ErrorCode::HopLimit => "hop_limit",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::Internal => "internal",
            ErrorCode::ScheduleFailed => "schedule_failed",
            ErrorCode::Overloaded => "overloaded",
            ErrorCode::StorageFull => "storage_full",
            ErrorCode::NotAvailable => "not_available",
            ErrorCode::NotImplemented => "not_implemented",
            ErrorCode::UpstreamError => "upstream_error",
            ErrorCode::ConnectionUnavailable => "connection_unavailable",
            ErrorCode::McpCallFailed => "mcp_call_failed",
            ErrorCode::FileNotFound => "file_not_found",
            ErrorCode::UnknownSelector => "unknown_selector",
            ErrorCode::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `ok: false`, or `ok: true`, on every answer.
fn yes() -> bool {
    true
}

/// An error answer: `{"ok": false, "error": {"code", "message", ...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ErrorBody {
    pub ok: bool,
    pub error: ErrorObject,
}

/// The `error` of an [`ErrorBody`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ErrorObject {
    pub code: ErrorCode,
    pub message: String,
    /// Extra fields: `available` (tools, connections), `errors` (schema
    /// violations), `status` (an upstream's).
    #[serde(flatten)]
    pub details: Map<String, Value>,
}

impl ErrorBody {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ErrorBody {
        ErrorBody::with_details(code, message, Map::new())
    }

    pub fn with_details(
        code: ErrorCode,
        message: impl Into<String>,
        details: Map<String, Value>,
    ) -> ErrorBody {
        ErrorBody {
            ok: false,
            error: ErrorObject {
                code,
                message: message.into(),
                details,
            },
        }
    }

    /// The body as JSON.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// What happens to a message that reaches a busy session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Admission {
    /// Interrupt the running turn, then run this message.
    #[default]
    Preempt,
    /// Queue behind the running turn.
    Coalesce,
    /// Answer 409 `session_busy`.
    Reject,
}

/// Chat sessions wait for follow-ups; task sessions end after one turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum SessionMode {
    Chat,
    Task,
}

impl SessionMode {
    /// The wire spelling: `chat` or `task`.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionMode::Chat => "chat",
            SessionMode::Task => "task",
        }
    }
}

/// `POST /v1/session` (a new session) and `POST /v1/session/:id` (a
/// follow-up).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SendMessage {
    pub message: String,
    /// Follow-ups: the token of the last answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuation_token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<Admission>,
    /// Files written into the session's workspace before the turn.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub workspace_files: std::collections::BTreeMap<String, String>,
    /// New sessions only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// New sessions only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    /// New sessions only: tools that are not read-only answer stubs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// New sessions only: a JSON Schema every final reply must match
    /// (instead of the agent's `output_schema`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Tools the client declares for the turn that answers this message:
    /// offered to the model beside the agent's own; the client runs a
    /// call of one and answers on `POST /v1/session/:id/client-calls`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_tools: Vec<crate::ClientTool>,
}

impl SendMessage {
    /// `message` with nothing else set: a plain new session's first
    /// message, or a follow-up once its token is set.
    pub fn new(message: impl Into<String>) -> SendMessage {
        SendMessage {
            message: message.into(),
            ..SendMessage::default()
        }
    }
}

/// The answer to a message: where its session is and how to follow it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Accepted {
    #[serde(default = "yes")]
    pub ok: bool,
    pub session_id: String,
    /// The token the next follow-up must carry.
    pub continuation_token: String,
    pub is_new: bool,
    /// The message queued behind a running turn.
    #[serde(default)]
    pub coalesced: bool,
    pub stream_url: String,
    pub trace_url: String,
    /// The session in the playground, when the host serves it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub playground_url: Option<String>,
}

/// `POST /v1/session/:id/stop`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Stopped {
    pub ok: bool,
    pub session_id: String,
    /// A running turn was interrupted.
    pub interrupted: bool,
}

/// `GET /v1/session/:id`: the session's metadata (not its continuation
/// token, which only the last answer carries).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    pub ok: bool,
    pub session_id: String,
    pub channel: String,
    pub mode: SessionMode,
    pub principal_id: String,
    pub created_at: String,
    pub title: Option<String>,
    pub purpose: Option<String>,
    pub dry_run: bool,
    pub as_of: Option<String>,
    pub busy: bool,
    /// What the session's turns used so far (compaction requests included).
    #[serde(default)]
    pub usage: crate::Usage,
    /// The session this one was forked from, and where.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<ForkedFrom>,
    /// What the session's ended turns cost in US dollars; `null` when a
    /// turn's price was unknown.
    #[serde(default)]
    pub cost_usd: Option<f64>,
}

/// Where a fork came from: the original session and the index of the
/// first event it did not copy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ForkedFrom {
    pub session_id: String,
    pub at_index: u64,
}

/// `POST /v1/session/:id/fork`: a new session whose events are the
/// original's events `0..atIndex`, then `session.forked`; with `message`,
/// that message is sent in the fork at once ("edit and resend").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForkRequest {
    pub at_index: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// What forking answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Forked {
    pub ok: bool,
    pub session_id: String,
    pub continuation_token: String,
    pub forked_from: ForkedFrom,
}

/// A session as `GET /v1/sessions` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    pub session_id: String,
    pub channel: String,
    pub mode: SessionMode,
    pub created_at: String,
    /// The session's last activity (RFC 3339, UTC): its creation, an
    /// accepted HTTP follow-up, a call parked for approval or the last one
    /// decided, the end of each turn. (Empty from a server that does not
    /// keep it.)
    #[serde(default)]
    pub updated_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub busy: bool,
    /// The owning principal; listed for an operator, who sees every
    /// principal's sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal_id: Option<String>,
    /// What the session's ended turns cost in US dollars, as its index
    /// row keeps it; `null` when a turn's price was unknown (or the
    /// session predates cost tracking and has not run a turn since).
    #[serde(default)]
    pub cost_usd: Option<f64>,
}

/// `GET /v1/sessions`: one page of the caller's sessions (every
/// principal's, for an operator), newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SessionList {
    pub ok: bool,
    pub sessions: Vec<SessionSummary>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(
        default,
        rename = "nextCursor",
        skip_serializing_if = "Option::is_none"
    )]
    pub next_cursor: Option<String>,
}

/// The query of `GET /v1/sessions`: a page size, where to go on from, and
/// filters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionListQuery {
    /// How many sessions (at most): [`SESSION_PAGE_DEFAULT`] when absent,
    /// at most [`SESSION_PAGE_MAX`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// The previous page's `nextCursor` (opaque).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Only the sessions of this channel (`http`, a channel id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// Only the sessions created at or after this instant (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Only the sessions last active (`updatedAt`) at or after this
    /// instant (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_since: Option<String>,
    /// Only the sessions doing this: `waiting_approval` (a tool call waits
    /// for a human's decision), `running` (otherwise, a turn runs, on
    /// whichever host) or `idle` (neither).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// The query of every other list route (a session's approvals, eval runs,
/// log lines): a page size and where to go on from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PageQuery {
    /// How many items (at most): [`SESSION_PAGE_DEFAULT`] when absent, at
    /// most [`SESSION_PAGE_MAX`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// The previous page's `nextCursor` (opaque).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// One artifact: a record the agent keeps beyond its conversation,
/// tagged by the model (`tag_artifact`) or by host code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    pub id: String,
    pub kind: String,
    /// Tagging the same kind and key again updates this artifact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    pub data: Value,
    pub session_id: String,
    /// The turn that tagged it (or the session's last, for host code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// RFC 3339, UTC, milliseconds.
    pub created_at: String,
    pub updated_at: String,
}

/// `GET /v1/artifacts` and `GET /v1/session/:id/artifacts`: one page,
/// newest first (by creation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ArtifactList {
    pub ok: bool,
    pub artifacts: Vec<Artifact>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(
        default,
        rename = "nextCursor",
        skip_serializing_if = "Option::is_none"
    )]
    pub next_cursor: Option<String>,
}

/// The query of `GET /v1/artifacts` (a session's list takes `kind`,
/// `limit` and `cursor`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ArtifactListQuery {
    /// Only artifacts of this kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Only artifacts of this session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// How many (at most): [`SESSION_PAGE_DEFAULT`] when absent, at most
    /// [`SESSION_PAGE_MAX`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// The previous page's `nextCursor` (opaque).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// `DELETE /v1/session/:id`: the session and everything it kept are gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionDeleted {
    pub ok: bool,
    pub session_id: String,
}

/// Where a memory came from: the session, turn and event (`memory.remembered`)
/// of the `remember` call, and the principal owning that session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct MemoryProvenance {
    pub session_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// The index of the `memory.remembered` event in the session's log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_index: Option<u64>,
    pub principal: String,
}

/// One governed memory (`remember`): a short text kept for a principal's
/// sessions (`scope: "principal"`) or every session (`"agent"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Memory {
    pub id: String,
    pub text: String,
    /// `principal` or `agent`.
    pub scope: String,
    pub provenance: MemoryProvenance,
    /// RFC 3339, UTC, milliseconds.
    pub created_at: String,
    pub updated_at: String,
}

/// `GET /v1/memory`: one page, newest first (by creation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MemoryList {
    pub ok: bool,
    pub memories: Vec<Memory>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(
        default,
        rename = "nextCursor",
        skip_serializing_if = "Option::is_none"
    )]
    pub next_cursor: Option<String>,
}

/// `GET`, `PUT /v1/memory/:id`: the memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MemoryAnswer {
    pub ok: bool,
    pub memory: Memory,
}

/// The body of `PUT /v1/memory/:id`: the memory's new text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EditMemory {
    pub text: String,
}

/// `DELETE /v1/memory/:id`: the memory is gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct MemoryDeleted {
    pub ok: bool,
    pub memory_id: String,
}

/// One entry of a session's workspace (`GET /v1/session/:id/files`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceEntry {
    /// Relative to the workspace, `/`-separated.
    pub path: String,
    /// `file`, `dir` or `symlink` (a link is listed, never followed).
    #[serde(rename = "type")]
    pub kind: String,
    /// Bytes (0 for a folder).
    pub size: u64,
    /// Last modified, RFC 3339 UTC (milliseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified_at: Option<String>,
}

/// `GET /v1/session/:id/files`: one page of the workspace's entries,
/// depth first, names in byte order within a folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceList {
    pub ok: bool,
    pub session_id: String,
    pub files: Vec<WorkspaceEntry>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// `PUT /v1/session/:id/files/*path`: the file is written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct FileWritten {
    pub ok: bool,
    pub session_id: String,
    pub path: String,
    pub size: u64,
}

/// What host code tags (the host bridge's `POST /v1/artifacts`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TagArtifact {
    /// The session it belongs to; the calling tool's session when absent
    /// (a call credential's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// A declared kind (`artifacts.toml`), or any kind when none are
    /// declared (`artifact` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Tagging the same kind and key again updates that artifact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    pub data: Value,
}

/// The page size of `GET /v1/sessions` (and of every list) when the query
/// sets none.
pub const SESSION_PAGE_DEFAULT: u32 = 100;

/// The largest page `GET /v1/sessions` answers.
pub const SESSION_PAGE_MAX: u32 = 1000;

/// A parked call, as `GET /v1/session/:id/approvals` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PendingApproval {
    pub call_id: String,
    pub tool_name: String,
    pub input: Value,
    pub turn_id: String,
    pub requested_at: String,
    /// The turn that parked it is still running (otherwise a restart cut
    /// it short, and approving resumes the conversation in a new turn).
    pub live: bool,
}

/// `GET /v1/session/:id/approvals`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ApprovalList {
    pub ok: bool,
    pub session_id: String,
    /// Newest first (by `requestedAt`).
    pub approvals: Vec<PendingApproval>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(
        default,
        rename = "nextCursor",
        skip_serializing_if = "Option::is_none"
    )]
    pub next_cursor: Option<String>,
}

/// `POST /v1/session/:id/approvals/:callId`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ApprovalDecision {
    /// `approve` or `deny`.
    pub decision: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl ApprovalDecision {
    /// `approve` or `deny`, with an optional reason.
    pub fn new(approve: bool, reason: Option<String>) -> ApprovalDecision {
        ApprovalDecision {
            decision: if approve { "approve" } else { "deny" }.to_owned(),
            reason,
        }
    }

    /// Whether the decision approves; the refusal names what was sent.
    pub fn approved(&self) -> Result<bool, String> {
        match self.decision.as_str() {
            "approve" => Ok(true),
            "deny" => Ok(false),
            other => Err(format!(
                "`decision` must be \"approve\" or \"deny\", not \"{other}\""
            )),
        }
    }
}

/// What resolving a parked call answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ApprovalResolved {
    pub ok: bool,
    pub session_id: String,
    pub call_id: String,
    /// `approve` or `deny`.
    pub decision: String,
    /// The principal that decided.
    pub by: String,
    /// A new turn resumes the conversation (the call's turn had ended).
    pub resumed: bool,
}

/// A call of a tool the client declared, waiting for the client's
/// result, as `GET /v1/session/:id/client-calls` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WaitingClientCall {
    pub call_id: String,
    pub tool_name: String,
    pub input: Value,
    pub turn_id: String,
    pub requested_at: String,
    /// The turn that asked is still running and waits (otherwise a
    /// restart cut it short, and the result resumes the conversation in
    /// a new turn).
    pub live: bool,
}

/// `GET /v1/session/:id/client-calls`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ClientCallList {
    pub ok: bool,
    pub session_id: String,
    /// Oldest first.
    pub calls: Vec<WaitingClientCall>,
}

/// One result the client sends for a call of its tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientResult {
    pub call_id: String,
    /// What the model sees as the call's output (any JSON).
    pub output: Value,
    /// The call failed: the model sees an error result.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
}

/// `POST /v1/session/:id/client-calls`: the client's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ClientResults {
    pub results: Vec<ClientResult>,
}

/// What answering calls of client tools answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ClientResultsAccepted {
    pub ok: bool,
    pub session_id: String,
    /// The calls answered, in the order sent.
    pub answered: Vec<String>,
    /// A new turn resumes the conversation (the calls' turn had ended:
    /// a restart or a shutdown cut it short).
    pub resumed: bool,
}

/// `POST /v1/tools/:name`: a deterministic call, no model turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CallTool {
    #[serde(default = "empty_object")]
    pub input: Value,
    /// Run inside this session (recorded on its stream) instead of an
    /// ephemeral workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

impl Default for CallTool {
    fn default() -> Self {
        CallTool {
            input: empty_object(),
            session_id: None,
        }
    }
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// The envelope of a finished deterministic call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolCalled {
    pub tool_name: String,
    pub call_id: String,
    pub is_error: bool,
    pub result: Value,
    pub duration_ms: u64,
    #[serde(default = "yes")]
    pub ok: bool,
}

/// `GET /v1/health`: an agent's (with its slug) or the host's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Health {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slug: Option<String>,
}

/// One agent of `GET /v1/agents`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AgentEntry {
    pub slug: String,
    pub description: Option<String>,
    /// Its base path, `/<slug>`.
    pub url: String,
}

/// `GET /v1/agents`: the host's agents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct AgentList {
    pub ok: bool,
    pub agents: Vec<AgentEntry>,
}

/// `GET /v1/info`: what the agent is and serves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Info {
    pub ok: bool,
    pub slug: String,
    /// The discovered project, as `agentkit info --json` shows it.
    pub project: Value,
    pub mcp: McpInfo,
    /// Each mounted channel: id, kind, URL, routes, events, body limit,
    /// and what its pack adds.
    pub channels: Vec<ChannelInfo>,
    /// Each schedule: id, cron, next fire time, counters.
    pub schedules: Value,
    pub reminders: RemindersInfo,
    /// Each hook's counters.
    pub hooks: Value,
    /// Whether the model's shell and the tools run sandboxed here:
    /// `{available, abi, mode, networkRules, reason}`.
    pub sandbox: Value,
    /// Who is asking: the admitted principal and whether it is an
    /// operator (the playground shows the operator view then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<Caller>,
}

/// A channel as [`Info`] lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ChannelInfo {
    pub id: String,
    /// `webhook`, `github`, `gitlab`, `bitbucket`, `slack`, or an
    /// embedder's own kind.
    pub kind: String,
    pub description: Option<String>,
    /// The channel's base path: `<agent prefix>/v1/channels/<id>`.
    pub url: String,
    pub routes: Vec<ChannelRouteInfo>,
    /// The event types the channel's handlers receive (`turn.completed`).
    pub events: Vec<String>,
    /// The largest request body the channel reads, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_body: Option<u64>,
    /// What a pack channel adds; `None` for webhook and embedders'
    /// channels.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub pack: Option<PackInfo>,
}

/// A route of a [`ChannelInfo`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ChannelRouteInfo {
    /// `GET`, `POST`, ...
    pub method: String,
    /// Below the channel's base path (`/` for the base itself).
    pub path: String,
    /// The full path.
    pub url: String,
    pub description: Option<String>,
    pub body_schema: Option<Value>,
    pub query_schema: Option<Value>,
}

/// The fields a pack adds to its [`ChannelInfo`], beside the common ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum PackInfo {
    /// Slack (tried first: its `mode` and `state` tell it apart).
    Slack(SlackPackInfo),
    /// GitHub, GitLab and Bitbucket.
    Forge(ForgePackInfo),
}

/// What the GitHub, GitLab and Bitbucket packs add.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ForgePackInfo {
    /// The provider's event names the channel acts on.
    pub webhook_events: Vec<String>,
    /// Deliveries must carry the provider's signature.
    pub signed: bool,
    /// The provider API the pack calls.
    pub api_url: String,
}

/// What the Slack pack adds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SlackPackInfo {
    pub mode: SlackMode,
    pub state: ChannelState,
    /// The variables an idle channel lacks.
    pub missing: Vec<String>,
    pub api_url: String,
    /// Events API deliveries must carry Slack's signature.
    pub signed: bool,
    /// A parked call posts an approval card.
    pub tool_approvals: bool,
    /// Guests and users of other workspaces are refused.
    pub block_external: bool,
    /// The bot events the app subscribes to.
    pub slack_events: Vec<String>,
    /// The channels whose plain posts start a session; `None` when
    /// channel posts are off.
    pub slack_channel_posts: Option<Vec<String>>,
}

/// How a Slack channel receives events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum SlackMode {
    /// Socket Mode: the host opens a WebSocket to Slack.
    Socket,
    /// The Events API: Slack posts to the channel's URL.
    Events,
}

impl SlackMode {
    /// The wire spelling: `socket` or `events`.
    pub fn as_str(self) -> &'static str {
        match self {
            SlackMode::Socket => "socket",
            SlackMode::Events => "events",
        }
    }
}

/// `socket` or `events`.
impl std::fmt::Display for SlackMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether a pack channel can act.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum ChannelState {
    Ready,
    /// Credentials are missing (`missing` names them): deliveries are
    /// refused, the rest of the host serves.
    Idle,
}

/// The `caller` entry of [`Info`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Caller {
    pub principal_id: String,
    pub principal_type: String,
    pub authenticator: String,
    /// May act on every session of the agent, whoever owns it.
    pub operator: bool,
    /// `viewer`, `user`, `operator` or `admin` (the agent's
    /// `[auth.roles]`); absent from servers that predate roles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
}

/// `GET /v1/session/:id/context?turnId=…&step=…`: what the model was sent
/// at one step of a turn, rebuilt from the log (the log does not repeat
/// the system prompt and tool catalog per step).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct StepContext {
    pub ok: bool,
    pub session_id: String,
    pub turn_id: String,
    /// 1-based, as `step.started` numbers it.
    pub step: u32,
    /// The system prompt: instructions, the skills catalog, the frozen
    /// instant of an `asOf` session.
    pub system: String,
    /// The tools offered, in the order the providers list them.
    pub tools: Vec<OfferedTool>,
    /// The folded conversation: earlier turns, this turn's user message,
    /// and the steps of this turn before this one.
    pub conversation: Vec<crate::Message>,
    pub size: ContextSize,
}

/// A tool of a [`StepContext`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct OfferedTool {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// How big a [`StepContext`] is, in characters of its JSON and in the
/// harness's estimate of the request's input tokens (the one a turn checks
/// against the model's window; `step.completed` has the provider's count).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ContextSize {
    pub system_chars: u64,
    pub tools_chars: u64,
    pub conversation_chars: u64,
    pub messages: u64,
    pub approx_tokens: u64,
    /// Older tool results were trimmed to fit the model's window.
    #[serde(default)]
    pub trimmed: bool,
}

/// The `mcp` entry of [`Info`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct McpInfo {
    /// The endpoint's path.
    pub path: String,
    /// `ask`, `check`, and `call_tool` when the agent has server tools.
    pub tools: Vec<String>,
    /// The live status of each MCP client connection.
    pub connections: Value,
}

/// The `reminders` entry of [`Info`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RemindersInfo {
    /// Reminders waiting to fire.
    pub armed: usize,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn error_codes_are_spelled_on_the_wire_as_as_str_says() {
        for code in [
            ErrorCode::BadRequest,
            ErrorCode::SessionNotFound,
            ErrorCode::PayloadTooLarge,
            ErrorCode::McpCallFailed,
            ErrorCode::Unknown,
        ] {
            let wire = serde_json::to_value(code).unwrap();
            assert_eq!(wire, Value::String(code.as_str().to_owned()));
            assert_eq!(serde_json::from_value::<ErrorCode>(wire).unwrap(), code);
        }
        let newer: ErrorCode = serde_json::from_str("\"from_the_future\"").unwrap();
        assert_eq!(newer, ErrorCode::Unknown);
    }

    #[test]
    fn an_error_body_puts_its_details_beside_code_and_message() {
        let mut details = Map::new();
        details.insert("available".into(), serde_json::json!(["a"]));
        let body = ErrorBody::with_details(ErrorCode::UnknownTool, "no tool `x`", details);
        assert_eq!(
            serde_json::to_string(&body).unwrap(),
            r#"{"ok":false,"error":{"code":"unknown_tool","message":"no tool `x`","available":["a"]}}"#
        );
        let back: ErrorBody = serde_json::from_value(body.to_json()).unwrap();
        assert_eq!(back, body);
    }

    /// `entry` serialised, and read back to the same value.
    fn round_trip(entry: &ChannelInfo) -> String {
        let text = serde_json::to_string(entry).unwrap();
        let back: ChannelInfo = serde_json::from_str(&text).unwrap();
        assert_eq!(&back, entry, "{text}");
        text
    }

    fn channel(kind: &str, pack: Option<PackInfo>) -> ChannelInfo {
        ChannelInfo {
            id: "intake".into(),
            kind: kind.into(),
            description: None,
            url: "/a/v1/channels/intake".into(),
            routes: vec![ChannelRouteInfo {
                method: "POST".into(),
                path: "/".into(),
                url: "/a/v1/channels/intake".into(),
                description: Some("deliveries".into()),
                body_schema: Some(serde_json::json!({"type": "object"})),
                query_schema: None,
            }],
            events: vec!["turn.completed".into()],
            max_body: Some(1024),
            pack,
        }
    }

    #[test]
    fn channel_entries_have_the_documented_shape_for_every_kind_of_channel() {
        let route = r#""routes":[{"method":"POST","path":"/","url":"/a/v1/channels/intake","description":"deliveries","bodySchema":{"type":"object"},"querySchema":null}]"#;
        let webhook = channel("webhook", None);
        assert_eq!(
            round_trip(&webhook),
            format!(
                r#"{{"id":"intake","kind":"webhook","description":null,"url":"/a/v1/channels/intake",{route},"events":["turn.completed"],"maxBody":1024}}"#
            )
        );
        let github = channel(
            "github",
            Some(PackInfo::Forge(ForgePackInfo {
                webhook_events: vec!["pull_request".into()],
                signed: true,
                api_url: "https://api.github.com".into(),
            })),
        );
        assert!(
            round_trip(&github).ends_with(
                r#""maxBody":1024,"webhookEvents":["pull_request"],"signed":true,"apiUrl":"https://api.github.com"}"#
            ),
            "{}",
            round_trip(&github)
        );
        let slack = channel(
            "slack",
            Some(PackInfo::Slack(SlackPackInfo {
                mode: SlackMode::Socket,
                state: ChannelState::Idle,
                missing: vec!["SLACK_APP_TOKEN".into()],
                api_url: "https://slack.com/api".into(),
                signed: false,
                tool_approvals: true,
                block_external: false,
                slack_events: vec!["app_mention".into()],
                slack_channel_posts: None,
            })),
        );
        assert!(
            round_trip(&slack).ends_with(
                r#""maxBody":1024,"mode":"socket","state":"idle","missing":["SLACK_APP_TOKEN"],"apiUrl":"https://slack.com/api","signed":false,"toolApprovals":true,"blockExternal":false,"slackEvents":["app_mention"],"slackChannelPosts":null}"#
            ),
            "{}",
            round_trip(&slack)
        );
        // An entry without a body limit leaves the key out.
        let bare = ChannelInfo {
            max_body: None,
            ..webhook
        };
        assert!(!round_trip(&bare).contains("maxBody"));
    }

    #[test]
    fn client_bodies_send_only_what_is_set_and_answers_come_in_the_documented_order() {
        let resolved = ApprovalResolved {
            ok: true,
            session_id: "ses_1".into(),
            call_id: "c1".into(),
            decision: "approve".into(),
            by: "local".into(),
            resumed: false,
        };
        assert_eq!(
            serde_json::to_string(&resolved).unwrap(),
            r#"{"ok":true,"sessionId":"ses_1","callId":"c1","decision":"approve","by":"local","resumed":false}"#
        );
        assert_eq!(
            serde_json::to_value(ApprovalDecision::new(false, Some("no".into()))).unwrap(),
            serde_json::json!({"decision": "deny", "reason": "no"})
        );
        assert_eq!(
            serde_json::to_value(SendMessage::new("hi")).unwrap(),
            serde_json::json!({"message": "hi"})
        );
        let eval = SendMessage {
            purpose: Some("eval".into()),
            dry_run: true,
            workspace_files: [("a.txt".to_owned(), "x".to_owned())].into(),
            ..SendMessage::new("hi")
        };
        assert_eq!(
            serde_json::to_value(eval).unwrap(),
            serde_json::json!({"message": "hi", "workspaceFiles": {"a.txt": "x"}, "purpose": "eval", "dryRun": true})
        );
    }
}

/// One model step of a session, as `GET /v1/session/:id/steps` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct StepSummary {
    /// The step's number in the session (1-based, in log order): what
    /// `…/steps/:step/request` takes.
    pub step: u64,
    pub turn_id: String,
    /// The step's number within its turn (`step.started`'s `step`).
    pub turn_step: u32,
    /// The log index of its `step.started`.
    pub index: u64,
    /// `provider:id`, once the step completed.
    pub model: Option<String>,
    /// What the provider counted, once the step completed.
    pub usage: Option<crate::Usage>,
    /// What the step cost in US dollars (`null`: unknown price, or not
    /// completed).
    pub cost_usd: Option<f64>,
}

/// `GET /v1/session/:id/steps`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct StepList {
    pub ok: bool,
    pub session_id: String,
    pub steps: Vec<StepSummary>,
}

/// `GET /v1/session/:id/steps/:step/request`: the provider request of a
/// step as it was sent, rebuilt from the log, with its size by part and
/// what changed since the step before.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct StepRequestView {
    pub ok: bool,
    pub session_id: String,
    #[serde(flatten)]
    pub summary: StepSummary,
    /// `provider:id` of the model the request went to.
    pub request_model: Option<String>,
    /// The JSON body the provider received; `null` for the offline `test`
    /// and `scripted` models, which send no request.
    pub body: Option<Value>,
    pub tokens: TokenBreakdown,
    /// What differs from the previous step's request (`null` for the
    /// session's first step), at most [`STEP_DIFF_MAX`] entries.
    pub diff: Option<Vec<RequestChange>>,
    /// More changes than `diff` lists.
    #[serde(default)]
    pub diff_truncated: bool,
}

/// The most changes a [`StepRequestView`] lists.
pub const STEP_DIFF_MAX: usize = 100;

/// A step request's input tokens by part: the harness's estimates
/// (uncalibrated, about four characters a token) and what the provider
/// counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TokenBreakdown {
    pub system: u64,
    pub tools: u64,
    /// Earlier turns (or their compaction summary) and this turn's
    /// earlier replies, tool results aside.
    pub history: u64,
    pub tool_results: u64,
    /// The turn's user message (the last user message of the request).
    pub new_message: u64,
    /// The whole request, calibrated as the turn checked it against the
    /// window and the budgets.
    pub estimated_total: u64,
    /// The provider's counts, once the step completed.
    pub counted_input: Option<u64>,
    pub counted_cache_read: Option<u64>,
    pub counted_cache_write: Option<u64>,
    /// Older tool results were trimmed to fit the window.
    pub trimmed: bool,
}

/// One difference between two JSON request bodies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct RequestChange {
    /// A JSON Pointer (`/messages/4/content`).
    pub path: String,
    /// `added`, `removed` or `changed`.
    pub op: String,
    /// The value before, as JSON, cut to 200 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

/// The changes from `before` to `after`, objects key by key and arrays
/// index by index (an appended message is one `added` entry), at most
/// `max`; and whether there were more.
pub fn json_changes(before: &Value, after: &Value, max: usize) -> (Vec<RequestChange>, bool) {
    fn preview(v: &Value) -> String {
        let s = v.to_string();
        match s.char_indices().nth(200) {
            Some((i, _)) => format!("{}…", &s[..i]),
            None => s,
        }
    }
    fn escape(key: &str) -> String {
        key.replace('~', "~0").replace('/', "~1")
    }
    fn walk(path: &str, a: &Value, b: &Value, out: &mut Vec<RequestChange>, max: usize) -> bool {
        if a == b {
            return true;
        }
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                for (k, v) in x {
                    let p = format!("{path}/{}", escape(k));
                    let fits = match y.get(k) {
                        Some(w) => walk(&p, v, w, out, max),
                        None => walk_one(&p, "removed", v, out, max),
                    };
                    if !fits {
                        return false;
                    }
                }
                for (k, w) in y {
                    if !x.contains_key(k)
                        && !walk_one(&format!("{path}/{}", escape(k)), "added", w, out, max)
                    {
                        return false;
                    }
                }
                true
            }
            (Value::Array(x), Value::Array(y)) => {
                for i in 0..x.len().max(y.len()) {
                    let p = format!("{path}/{i}");
                    let fits = match (x.get(i), y.get(i)) {
                        (Some(v), Some(w)) => walk(&p, v, w, out, max),
                        (Some(v), None) => walk_one(&p, "removed", v, out, max),
                        (None, Some(w)) => walk_one(&p, "added", w, out, max),
                        (None, None) => true,
                    };
                    if !fits {
                        return false;
                    }
                }
                true
            }
            _ => {
                if out.len() >= max {
                    return false;
                }
                out.push(RequestChange {
                    path: path.to_owned(),
                    op: "changed".to_owned(),
                    before: Some(preview(a)),
                    after: Some(preview(b)),
                });
                true
            }
        }
    }
    fn walk_one(path: &str, op: &str, v: &Value, out: &mut Vec<RequestChange>, max: usize) -> bool {
        if out.len() >= max {
            return false;
        }
        let (before, after) = if op == "added" {
            (None, Some(preview(v)))
        } else {
            (Some(preview(v)), None)
        };
        out.push(RequestChange {
            path: path.to_owned(),
            op: op.to_owned(),
            before,
            after,
        });
        true
    }
    let mut out = Vec::new();
    let complete = walk("", before, after, &mut out, max);
    (out, !complete)
}

/// `GET /v1/session/:id/cassette`: one recording per model step of the
/// session, in the format of `agentkit eval --record`, so that
/// `agentkit eval --replay` answers a run that sends what the session
/// sent (what `agentkit eval add` writes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionCassette {
    pub ok: bool,
    pub session_id: String,
    pub files: Vec<CassetteFile>,
    /// Compaction summary requests of the session that have no recording
    /// here (their turn can no longer be rebuilt).
    #[serde(default)]
    pub compactions: u64,
    /// What of the session the recordings cannot answer (a subagent that
    /// took several steps), when anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsupported: Option<String>,
}

/// One recording: its file name (`<fingerprint>.json`) and content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CassetteFile {
    pub name: String,
    pub exchange: Value,
}
