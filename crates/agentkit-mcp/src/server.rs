//! Every agent is an MCP server: `ask`, `check` and (when the agent has
//! server tools) `call_tool`, over stateless streamable HTTP.
//!
//! The server knows nothing of sessions: it parses arguments, bounds the
//! waits, enforces the delegation hop limit and turns a backend's answers
//! into MCP tool results. The facade implements [`AgentBackend`] over the
//! agent's runtime and mounts [`McpHttp`] behind the agent's auth chain.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use agentkit_protocol::{ErrorBody, ErrorCode};
use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, GetTaskParams,
    GetTaskResult, Implementation, InputResponses, JsonObject, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, Tool,
    UpdateTaskParams,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::tasks::{self, ApprovalAnswer, TaskReport, TaskState};

/// The request header that carries how many agent-to-agent delegations led
/// to this request (absent: none).
pub const HOPS_HEADER: &str = "x-agentkit-hops";

/// The default bound on how long `ask` and `check` wait for a turn.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(50);

/// The default limit on delegation chains.
pub const DEFAULT_MAX_HOPS: u32 = 4;

/// Where a session stands, as `ask` and `check` report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReplyStatus {
    /// A turn is still running (or queued): call `check` again.
    Running,
    /// The last turn completed; `reply` is its answer.
    Completed,
    /// The last turn failed or was interrupted; `reply` says why.
    Failed,
    /// A tool call of the running turn waits for a human's approval
    /// (`reply` says which and where to decide); call `check` later.
    #[serde(rename = "waiting_approval")]
    WaitingApproval,
}

/// The answer of `ask` and `check`: `{status, sessionId, reply}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reply {
    pub status: ReplyStatus,
    pub session_id: String,
    /// The last turn's answer (or failure message); `null` while running.
    pub reply: Option<String>,
}

/// A server tool as `call_tool` advertises it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerToolInfo {
    pub name: String,
    pub description: String,
}

/// What a caller asks for with `ask`.
#[derive(Debug, Clone)]
pub struct AskRequest {
    pub message: String,
    /// Follow up in this session; `None` starts a fresh one.
    pub session_id: Option<String>,
    /// How long to wait for the turn before answering `running`.
    pub wait: Duration,
    /// Delegations that led to this request (from [`HOPS_HEADER`]).
    pub hops: u32,
    /// A JSON Schema the fresh session's replies must match.
    pub output_schema: Option<serde_json::Value>,
    /// Where the turn's progress goes while `ask` waits (the caller sent
    /// a `progressToken`): each becomes a `notifications/progress`.
    pub progress: Option<ProgressSink>,
}

/// The progress of a running `ask`, as lines of text; each is sent to
/// the client as a `notifications/progress` before the call's result.
/// Cheap to clone.
#[derive(Debug, Clone)]
pub struct ProgressSink(tokio::sync::mpsc::Sender<String>);

/// Progress lines held for a slow client before more are dropped.
const PROGRESS_BUFFER: usize = 256;

impl ProgressSink {
    /// Reports `text`; dropped when the client is this far behind (the
    /// call's result is what counts).
    pub fn report(&self, text: &str) {
        let _ = self.0.try_send(text.to_owned());
    }
}

/// A deterministic call through `call_tool`.
#[derive(Debug, Clone)]
pub struct ToolCallRequest {
    pub name: String,
    pub input: Value,
    pub session_id: Option<String>,
    pub hops: u32,
}

/// A refusal the caller can read: an error code and a message, plus extra
/// fields (`available`, `errors`) like the HTTP API's error object.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct BackendError {
    pub code: ErrorCode,
    pub message: String,
    pub details: serde_json::Map<String, Value>,
}

impl BackendError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> BackendError {
        BackendError {
            code,
            message: message.into(),
            details: serde_json::Map::new(),
        }
    }

    /// The HTTP API's error body: `{ok: false, error: {code, message, ..}}`.
    fn to_json(&self) -> Value {
        ErrorBody::with_details(self.code, self.message.clone(), self.details.clone()).to_json()
    }
}

/// What the MCP server needs from the agent it serves. The facade
/// implements it over the agent's runtime; `Caller` is the principal the
/// route's auth chain admitted, handed back to every method.
pub trait AgentBackend: Send + Sync + 'static {
    type Caller: Clone + Send + Sync + 'static;

    /// The agent's server tools; `call_tool` is offered only when there is
    /// at least one.
    fn server_tools(&self) -> Vec<ServerToolInfo>;

    /// Sends a message (a fresh session on the `mcp` channel owned by
    /// `caller`, or a follow-up) and waits up to `req.wait` for the turn.
    fn ask(
        &self,
        caller: &Self::Caller,
        req: AskRequest,
    ) -> impl Future<Output = Result<Reply, BackendError>> + Send;

    /// Waits up to `wait` (zero: a poll) for the session to settle.
    fn check(
        &self,
        caller: &Self::Caller,
        session_id: &str,
        wait: Duration,
    ) -> impl Future<Output = Result<Reply, BackendError>> + Send;

    /// Runs a server tool deterministically and answers the HTTP route's
    /// envelope (`{ok, toolName, callId, isError, result, durationMs}`).
    fn call_tool(
        &self,
        caller: &Self::Caller,
        req: ToolCallRequest,
    ) -> impl Future<Output = Result<Value, BackendError>> + Send;

    /// Sends `ask`'s message as [`ask`](AgentBackend::ask) does, but answers at
    /// once with the task it started (the turn that answers the message),
    /// durably: [`task`](AgentBackend::task) finds it from then on.
    fn start_task(
        &self,
        caller: &Self::Caller,
        req: AskRequest,
    ) -> impl Future<Output = Result<TaskReport, BackendError>> + Send;

    /// The task `task_id` (one `caller` may see), once it ends or needs
    /// input, or as it is when `wait` passes (zero: at once); the
    /// progress of its turn's calls meanwhile goes to `progress`.
    fn task(
        &self,
        caller: &Self::Caller,
        task_id: &str,
        wait: Duration,
        progress: Option<&ProgressSink>,
    ) -> impl Future<Output = Result<TaskReport, BackendError>> + Send;

    /// Decides parked calls of task `task_id` (answers naming a call that
    /// does not wait are ignored) and answers the task once the decisions
    /// are recorded.
    fn decide(
        &self,
        caller: &Self::Caller,
        task_id: &str,
        answers: Vec<ApprovalAnswer>,
    ) -> impl Future<Output = Result<TaskReport, BackendError>> + Send;

    /// Stops the task's turn (a task that has ended is left as it is).
    fn cancel_task(
        &self,
        caller: &Self::Caller,
        task_id: &str,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;
}

/// How the MCP server bounds its callers.
#[derive(Debug, Clone)]
pub struct McpServerOptions {
    /// The longest `ask` / `check` wait (longer `waitSeconds` are cut).
    pub max_wait: Duration,
    /// Requests that arrive after more delegations than this are refused.
    pub max_hops: u32,
    /// The largest request body, in bytes.
    pub body_limit: usize,
    /// Cancelled when the server shuts down.
    pub shutdown: CancellationToken,
    /// The name and version the server introduces itself with.
    pub name: String,
}

impl Default for McpServerOptions {
    fn default() -> Self {
        McpServerOptions {
            max_wait: DEFAULT_MAX_WAIT,
            max_hops: DEFAULT_MAX_HOPS,
            body_limit: 1024 * 1024,
            shutdown: CancellationToken::new(),
            name: "agentkit".into(),
        }
    }
}

/// The response body of [`McpHttp::handle`].
pub type McpBody = BoxBody<Bytes, Infallible>;

/// The caller, carried from [`McpHttp::handle`] to the tool handlers in
/// the request's extensions.
#[derive(Clone)]
struct CallerSlot<C>(C);

/// One agent's MCP endpoint: a stateless streamable-HTTP service. Cheap to
/// clone.
pub struct McpHttp<B: AgentBackend> {
    service: StreamableHttpService<Handler<B>, LocalSessionManager>,
    /// The largest request body read.
    body_limit: usize,
}

impl<B: AgentBackend> Clone for McpHttp<B> {
    fn clone(&self) -> Self {
        McpHttp {
            service: self.service.clone(),
            body_limit: self.body_limit,
        }
    }
}

impl<B: AgentBackend> std::fmt::Debug for McpHttp<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHttp").finish_non_exhaustive()
    }
}

impl<B: AgentBackend> McpHttp<B> {
    pub fn new(backend: Arc<B>, options: McpServerOptions) -> McpHttp<B> {
        // The route's auth chain has already judged the request (the
        // default chain admits only loopback `Host`s), so rmcp's own Host
        // allow-list would only refuse hosts the chain chose to admit.
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_sse_keep_alive(None)
            .disable_allowed_hosts()
            .with_max_request_body_bytes(options.body_limit)
            .with_cancellation_token(options.shutdown.child_token());
        let body_limit = options.body_limit;
        let handler = Handler {
            backend,
            options: Arc::new(options),
        };
        let service = StreamableHttpService::new(
            move || Ok(handler.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        McpHttp {
            service,
            body_limit,
        }
    }

    /// Serves one HTTP request that `caller` made (after the route's auth
    /// chain admitted it).
    ///
    /// A JSON POST is read and checked here first, so that what is not a
    /// JSON-RPC message gets a JSON-RPC error (HTTP 400, `id` null or the
    /// message's): `-32700` when the body is not JSON, `-32600` when it is
    /// not a message this server takes. A batch (an array) is taken only
    /// under protocol 2025-03-26, the one version that has batches: each
    /// message is answered as if sent alone, the answers in one array.
    pub async fn handle<Body>(
        &self,
        req: http::Request<Body>,
        caller: B::Caller,
    ) -> http::Response<McpBody>
    where
        Body: http_body::Body + Send + 'static,
        Body::Error: std::fmt::Display,
    {
        let (parts, body) = req.into_parts();
        if parts.method != http::Method::POST || !is_json(&parts.headers) {
            // rmcp answers these itself (405, 406, 415 naming the type).
            let mut req = http::Request::from_parts(parts, body);
            req.extensions_mut().insert(CallerSlot(caller));
            return self.service.handle(req).await;
        }
        let bytes = match read_body(body, self.body_limit).await {
            Ok(b) => b,
            Err(refusal) => return refusal,
        };
        let message = match serde_json::from_slice::<Value>(&bytes) {
            Ok(v) => v,
            Err(e) => {
                return rpc_error(
                    http::StatusCode::BAD_REQUEST,
                    Value::Null,
                    PARSE_ERROR,
                    &format!("Parse error: the body is not JSON: {e}"),
                );
            }
        };
        let one = |parts: &http::request::Parts, message: Bytes| {
            let mut req = http::Request::builder()
                .method(parts.method.clone())
                .uri(parts.uri.clone())
                .version(parts.version)
                .body(http_body_util::Full::new(message))
                .unwrap_or_default();
            *req.headers_mut() = parts.headers.clone();
            req.extensions_mut().insert(CallerSlot(caller.clone()));
            req
        };
        match &message {
            Value::Array(items) => {
                let version = parts
                    .headers
                    .get("mcp-protocol-version")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or(BATCH_PROTOCOL);
                if version != BATCH_PROTOCOL {
                    return rpc_error(
                        http::StatusCode::BAD_REQUEST,
                        Value::Null,
                        INVALID_REQUEST,
                        &format!(
                            "Invalid Request: protocol {version} has no JSON-RPC batches (only {BATCH_PROTOCOL} has); send one message per request"
                        ),
                    );
                }
                if items.is_empty() {
                    return rpc_error(
                        http::StatusCode::BAD_REQUEST,
                        Value::Null,
                        INVALID_REQUEST,
                        "Invalid Request: an empty batch",
                    );
                }
                let answers = futures_util::future::join_all(items.iter().map(|item| async {
                    match invalid(item) {
                        Some(error) => Some(error),
                        None => {
                            let item = Bytes::from(item.to_string());
                            answer_of(self.service.handle(one(&parts, item)).await).await
                        }
                    }
                }))
                .await;
                let answers: Vec<Value> = answers.into_iter().flatten().collect();
                if answers.is_empty() {
                    // Notifications and responses only.
                    return http::Response::builder()
                        .status(http::StatusCode::ACCEPTED)
                        .body(http_body_util::Full::new(Bytes::new()).boxed())
                        .unwrap_or_default();
                }
                json_response(http::StatusCode::OK, &Value::Array(answers))
            }
            single => match invalid(single) {
                Some(error) => json_response(http::StatusCode::BAD_REQUEST, &error),
                None => self.service.handle(one(&parts, bytes.clone())).await,
            },
        }
    }
}

/// The protocol version that has JSON-RPC batches (2025-06-18 removed
/// them); a request without `MCP-Protocol-Version` is taken as it.
const BATCH_PROTOCOL: &str = "2025-03-26";

/// JSON-RPC's "the body is not JSON".
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's "not a valid request object".
const INVALID_REQUEST: i64 = -32600;

fn is_json(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("application/json")
        })
}

/// The whole body within `limit` bytes, or the JSON-RPC error to answer.
async fn read_body<Body>(body: Body, limit: usize) -> Result<Bytes, http::Response<McpBody>>
where
    Body: http_body::Body,
    Body::Error: std::fmt::Display,
{
    use bytes::Buf;
    let mut body = std::pin::pin!(body);
    let mut out = bytes::BytesMut::new();
    while let Some(frame) = body.as_mut().frame().await {
        let frame = frame.map_err(|e| {
            rpc_error(
                http::StatusCode::BAD_REQUEST,
                Value::Null,
                PARSE_ERROR,
                &format!("Parse error: cannot read the request body: {e}"),
            )
        })?;
        let Ok(mut data) = frame.into_data() else {
            continue;
        };
        if data.remaining() > limit.saturating_sub(out.len()) {
            return Err(rpc_error(
                http::StatusCode::PAYLOAD_TOO_LARGE,
                Value::Null,
                INVALID_REQUEST,
                &format!("Invalid Request: the request body is over {limit} bytes"),
            ));
        }
        while data.has_remaining() {
            let chunk = data.chunk();
            let n = chunk.len();
            out.extend_from_slice(chunk);
            data.advance(n);
        }
    }
    Ok(out.freeze())
}

/// The JSON-RPC error for a value that is not a message this server
/// takes (rmcp's own reading of it decides), with the message's `id`
/// when it has a usable one.
fn invalid(message: &Value) -> Option<Value> {
    let problem = match message {
        Value::Object(_) => {
            serde_json::from_value::<rmcp::model::ClientJsonRpcMessage>(message.clone())
                .err()?
                .to_string()
        }
        Value::Array(_) => "a batch inside a batch".to_owned(),
        _ => "a JSON-RPC message is an object".to_owned(),
    };
    let id = match message.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
        _ => Value::Null,
    };
    Some(rpc_error_body(
        id,
        INVALID_REQUEST,
        &format!("Invalid Request: {problem}"),
    ))
}

fn rpc_error_body(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn rpc_error(
    status: http::StatusCode,
    id: Value,
    code: i64,
    message: &str,
) -> http::Response<McpBody> {
    json_response(status, &rpc_error_body(id, code, message))
}

fn json_response(status: http::StatusCode, body: &Value) -> http::Response<McpBody> {
    http::Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(http_body_util::Full::new(Bytes::from(body.to_string())).boxed())
        .unwrap_or_default()
}

/// What one message of a batch answered: its JSON-RPC response, or
/// nothing (a notification or a response, `202`). An answer that is not
/// JSON (an HTTP-level refusal) becomes an internal error.
async fn answer_of(resp: http::Response<McpBody>) -> Option<Value> {
    let status = resp.status();
    if status == http::StatusCode::ACCEPTED {
        return None;
    }
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map(http_body_util::Collected::to_bytes)
        .unwrap_or_default();
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(v) => Some(v),
        Err(_) => Some(rpc_error_body(
            Value::Null,
            -32603,
            &format!(
                "Internal error: HTTP {}: {}",
                status.as_u16(),
                String::from_utf8_lossy(&bytes)
                    .chars()
                    .take(200)
                    .collect::<String>()
            ),
        )),
    }
}

struct Handler<B: AgentBackend> {
    backend: Arc<B>,
    options: Arc<McpServerOptions>,
}

impl<B: AgentBackend> Clone for Handler<B> {
    fn clone(&self) -> Self {
        Handler {
            backend: self.backend.clone(),
            options: self.options.clone(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AskArgs {
    message: String,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    output_schema: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CheckArgs {
    session_id: String,
    #[serde(default)]
    wait_seconds: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CallToolArgs {
    name: String,
    #[serde(default)]
    input: Option<Value>,
    #[serde(default)]
    session_id: Option<String>,
}

fn schema(value: Value) -> Arc<JsonObject> {
    Arc::new(value.as_object().cloned().unwrap_or_default())
}

impl<B: AgentBackend> Handler<B> {
    fn tools(&self) -> Vec<Tool> {
        let wait = self.options.max_wait.as_secs();
        let mut tools = vec![
            Tool::new(
                "ask",
                format!(
                    "Send a message to this agent. It runs a turn in the agent's own session, with its own instructions and tools, and returns {{status, sessionId, reply}}. Omit sessionId for a fresh session; pass it to follow up. Waits up to {wait}s: if status is \"running\", call `check` with the same sessionId."
                ),
                schema(json!({
                    "type": "object",
                    "properties": {
                        "message": {"type": "string", "description": "What to ask the agent."},
                        "sessionId": {"type": "string", "description": "A session from an earlier `ask`, to follow up."},
                        "outputSchema": {"type": "object", "description": "A fresh session only: a JSON Schema its replies must match; the reply is then that JSON value."}
                    },
                    "required": ["message"],
                    "additionalProperties": false
                })),
            ),
            Tool::new(
                "check",
                format!(
                    "Wait for (or, with waitSeconds 0, poll) a session started with `ask`; returns {{status, sessionId, reply}}. Waits are capped at {wait}s."
                ),
                schema(json!({
                    "type": "object",
                    "properties": {
                        "sessionId": {"type": "string"},
                        "waitSeconds": {"type": "number", "minimum": 0, "description": "0 polls without waiting."}
                    },
                    "required": ["sessionId"],
                    "additionalProperties": false
                })),
            ),
        ];
        let server_tools = self.backend.server_tools();
        if !server_tools.is_empty() {
            let names: Vec<&str> = server_tools.iter().map(|t| t.name.as_str()).collect();
            let catalog: Vec<String> = server_tools
                .iter()
                .map(|t| format!("- {}: {}", t.name, t.description))
                .collect();
            tools.push(Tool::new(
                "call_tool",
                format!(
                    "Call one of this agent's server tools directly, with no model turn. Returns {{ok, toolName, callId, isError, result, durationMs}}. Tools:\n{}",
                    catalog.join("\n")
                ),
                schema(json!({
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "enum": names},
                        "input": {"type": "object", "description": "The tool's input (checked against its schema)."},
                        "sessionId": {"type": "string", "description": "Run inside this session (recorded on its stream)."}
                    },
                    "required": ["name"],
                    "additionalProperties": false
                })),
            ));
        }
        tools
    }

    fn wait_for(&self, seconds: Option<f64>) -> Duration {
        match seconds {
            Some(s) if s.is_finite() && s > 0.0 => {
                Duration::from_secs_f64(s).min(self.options.max_wait)
            }
            Some(_) => Duration::ZERO,
            None => self.options.max_wait,
        }
    }

    async fn dispatch(
        &self,
        caller: &B::Caller,
        hops: u32,
        name: &str,
        args: Value,
        round: Round,
    ) -> Result<CallToolResponse, rmcp::ErrorData> {
        if hops > self.options.max_hops {
            return Ok(refusal(&BackendError::new(
                ErrorCode::HopLimit,
                format!(
                    "delegation chain too deep: this request arrived after {hops} agent-to-agent hops and the limit is {}; answer without delegating further",
                    self.options.max_hops
                ),
            )).into());
        }
        // Only `ask` asks for input: the other tools ignore
        // `inputResponses` and `requestState`, as unrecognized
        // information is.
        Ok(match name {
            "ask" => match parse::<AskArgs>(args) {
                Ok(a) => {
                    let req = AskRequest {
                        message: a.message,
                        session_id: a.session_id,
                        wait: self.options.max_wait,
                        hops,
                        output_schema: a.output_schema,
                        progress: round.progress.clone(),
                    };
                    return self.ask(caller, req, round).await;
                }
                Err(e) => refusal(&e),
            },
            "check" => match parse::<CheckArgs>(args) {
                Ok(a) => {
                    let wait = self.wait_for(a.wait_seconds);
                    reply(self.backend.check(caller, &a.session_id, wait).await)
                }
                Err(e) => refusal(&e),
            },
            "call_tool" if !self.backend.server_tools().is_empty() => {
                match parse::<CallToolArgs>(args) {
                    Ok(a) => {
                        let req = ToolCallRequest {
                            name: a.name,
                            input: a.input.unwrap_or_else(|| json!({})),
                            session_id: a.session_id,
                            hops,
                        };
                        match self.backend.call_tool(caller, req).await {
                            Ok(envelope) => {
                                let failed =
                                    envelope.get("isError").and_then(Value::as_bool) == Some(true);
                                if failed {
                                    CallToolResult::structured_error(envelope)
                                } else {
                                    CallToolResult::structured(envelope)
                                }
                            }
                            Err(e) => refusal(&e),
                        }
                    }
                    Err(e) => refusal(&e),
                }
            }
            other => refusal(&BackendError::new(
                ErrorCode::UnknownTool,
                format!("no MCP tool `{other}` on this agent"),
            )),
        }
        .into())
    }

    /// `ask`, by what the client can take: a task (it declared the tasks
    /// extension), a reply after multi-round-trip input requests for the
    /// approvals (protocol 2026-07-28 and form elicitation declared), or
    /// the reply as 2025-11-25 clients get it (a call parked for approval
    /// answers `waiting_approval`, to be decided through the approvals API
    /// and followed with `check`).
    async fn ask(
        &self,
        caller: &B::Caller,
        req: AskRequest,
        round: Round,
    ) -> Result<CallToolResponse, rmcp::ErrorData> {
        if let Some(state) = &round.request_state {
            // A retry: the state names the task whose input was asked for.
            let id = tasks::task_of_state(state)
                .map_err(|m| rmcp::ErrorData::invalid_params(m, None))?;
            let answers = match &round.input_responses {
                Some(responses) => tasks::answers(responses)
                    .map_err(|m| rmcp::ErrorData::invalid_params(m, None))?,
                None => Vec::new(),
            };
            let report = self
                .backend
                .task(caller, id, Duration::ZERO, None)
                .await
                .map_err(|e| protocol_error(&e))?;
            if report.message.as_deref() != Some(req.message.as_str()) {
                return Err(rmcp::ErrorData::invalid_params(
                    "requestState belongs to another call: retry with the same arguments and the requestState it was answered with",
                    None,
                ));
            }
            let report = if answers.is_empty() {
                report
            } else {
                self.backend
                    .decide(caller, id, answers)
                    .await
                    .map_err(|e| protocol_error(&e))?
            };
            return Ok(self.rounds(caller, report, req.progress).await);
        }
        if round.input_responses.is_some() {
            return Err(rmcp::ErrorData::invalid_params(
                "inputResponses answer an InputRequiredResult: send its requestState back with them",
                None,
            ));
        }
        if round.tasks {
            return Ok(match self.backend.start_task(caller, req).await {
                Ok(report) => CallToolResponse::Task(report.created()),
                Err(e) => refusal(&e).into(),
            });
        }
        if round.input_requests {
            let progress = req.progress.clone();
            return Ok(match self.backend.start_task(caller, req).await {
                Ok(report) => self.rounds(caller, report, progress).await,
                Err(e) => refusal(&e).into(),
            });
        }
        Ok(reply(self.backend.ask(caller, req).await).into())
    }

    /// Waits (bounded) for a task to end or ask for input: its reply, or
    /// the input requests for its parked calls.
    async fn rounds(
        &self,
        caller: &B::Caller,
        report: TaskReport,
        progress: Option<ProgressSink>,
    ) -> CallToolResponse {
        let report = if matches!(report.state, TaskState::Working) {
            match self
                .backend
                .task(
                    caller,
                    &report.task_id,
                    self.options.max_wait,
                    progress.as_ref(),
                )
                .await
            {
                Ok(r) => r,
                Err(e) => return refusal(&e).into(),
            }
        } else {
            report
        };
        if report.state == TaskState::InputRequired && !report.pending.is_empty() {
            return CallToolResponse::InputRequired(report.input_required());
        }
        tasks::reply_result(&report.reply()).into()
    }
}

/// What a `tools/call` carries besides its arguments, and what the client
/// declared it can take.
#[derive(Debug, Default)]
struct Round {
    /// The client declared the tasks extension on this request.
    tasks: bool,
    /// The client takes input requests (2026-07-28, form elicitation).
    input_requests: bool,
    input_responses: Option<InputResponses>,
    request_state: Option<String>,
    /// The caller sent a `progressToken`.
    progress: Option<ProgressSink>,
}

impl Round {
    fn of(request: &CallToolRequestParams, context: &RequestContext<RoleServer>) -> Round {
        let caps = context.client_capabilities();
        let modern = context
            .protocol_version()
            .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
        let form = caps
            .as_ref()
            .and_then(|c| c.elicitation.as_ref())
            .is_some_and(|e| e.form.is_some() || e.url.is_none());
        Round {
            tasks: caps.as_ref().is_some_and(|c| c.supports_tasks()),
            input_requests: modern && form,
            input_responses: request.input_responses.clone(),
            request_state: request.request_state.clone(),
            progress: None,
        }
    }
}

/// A backend's refusal of a `tasks/*` request (or a retried call) as a
/// JSON-RPC error: what names no task the caller may see, or carries a
/// bad argument, is invalid params; the rest is internal.
fn protocol_error(e: &BackendError) -> rmcp::ErrorData {
    let code = match e.code {
        ErrorCode::NotFound
        | ErrorCode::SessionNotFound
        | ErrorCode::InvalidSessionId
        | ErrorCode::Forbidden
        | ErrorCode::BadRequest
        | ErrorCode::InvalidInput
        | ErrorCode::StaleContinuation
        | ErrorCode::TaskSession
        | ErrorCode::SessionBusy
        | ErrorCode::ApprovalNotFound
        | ErrorCode::ApprovalResolved
        | ErrorCode::HopLimit => rmcp::model::ErrorCode::INVALID_PARAMS,
        _ => rmcp::model::ErrorCode::INTERNAL_ERROR,
    };
    rmcp::ErrorData::new(code, e.message.clone(), Some(e.to_json()))
}

fn parse<T: for<'de> Deserialize<'de>>(args: Value) -> Result<T, BackendError> {
    serde_json::from_value(args)
        .map_err(|e| BackendError::new(ErrorCode::BadRequest, format!("invalid arguments: {e}")))
}

fn reply(r: Result<Reply, BackendError>) -> CallToolResult {
    match r {
        Ok(reply) => tasks::reply_result(&reply),
        Err(e) => refusal(&e),
    }
}

fn refusal(e: &BackendError) -> CallToolResult {
    CallToolResult::structured_error(e.to_json())
}

/// The hop count a request carries (`0` when absent or unreadable).
fn hops_of(parts: Option<&http::request::Parts>) -> u32 {
    parts
        .and_then(|p| p.headers.get(HOPS_HEADER))
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The caller the route's auth chain admitted, carried in the request.
fn caller_of<C: Clone + Send + Sync + 'static>(
    context: &RequestContext<RoleServer>,
) -> Result<C, rmcp::ErrorData> {
    context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|p| p.extensions.get::<CallerSlot<C>>())
        .map(|c| c.0.clone())
        .ok_or_else(|| {
            rmcp::ErrorData::internal_error(
                "the request reached the MCP server without an authenticated caller",
                None,
            )
        })
}

impl<B: AgentBackend> ServerHandler for Handler<B> {
    fn get_info(&self) -> ServerConfig {
        // Tools only (no resources, prompts, logging or completions are
        // served), and `ask` as a task for clients that take tasks.
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new(
            self.options.name.clone(),
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(
            "An agentkit agent. `ask` runs a turn in the agent's own session; `check` waits for a running one.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, rmcp::ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, rmcp::ErrorData> {
        let caller = caller_of::<B::Caller>(&context)?;
        let parts = context.extensions.get::<http::request::Parts>();
        let hops = hops_of(parts);
        // The caller's trace: `_meta.traceparent` (an MCP client's, a
        // peer's), else the request's server span when the facade's HTTP
        // layer set it, else the HTTP `traceparent` header.
        let from_meta = request
            .meta
            .as_ref()
            .and_then(|m| m.get("traceparent"))
            .or_else(|| context.meta.get("traceparent"))
            .and_then(Value::as_str)
            .and_then(agentkit_protocol::trace::TraceParent::parse);
        let traceparent = from_meta
            .or_else(agentkit_harness::trace::incoming)
            .or_else(|| {
                parts
                    .and_then(|p| p.headers.get("traceparent"))
                    .and_then(|v| v.to_str().ok())
                    .and_then(agentkit_protocol::trace::TraceParent::parse)
            });
        let mut round = Round::of(&request, &context);
        // A `progressToken`: the turn's progress goes to the client as
        // progress notifications, all sent before the result.
        let token = request
            .meta
            .as_ref()
            .and_then(|m| m.get_progress_token())
            .or_else(|| context.meta.get_progress_token());
        let forward = token.map(|token| {
            let (tx, rx) = tokio::sync::mpsc::channel(PROGRESS_BUFFER);
            round.progress = Some(ProgressSink(tx));
            forward_progress(context.peer.clone(), token, rx)
        });
        let args = Value::Object(request.arguments.unwrap_or_default());
        // Boxed: moved into the trace scope, an inline future would be
        // held twice in this one (a stack overflow in debug builds).
        let run = Box::pin(self.dispatch(&caller, hops, &request.name, args, round));
        let run = async {
            match traceparent {
                Some(tp) => agentkit_harness::trace::with_incoming(tp, run).await,
                None => run.await,
            }
        };
        match forward {
            // The forwarder ends once the call dropped its sink: every
            // notification is out before the result.
            Some(forward) => tokio::join!(run, forward).0,
            None => run.await,
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, rmcp::ErrorData> {
        let caller = caller_of::<B::Caller>(&context)?;
        let report = self
            .backend
            .task(&caller, &request.task_id, Duration::ZERO, None)
            .await
            .map_err(|e| task_error(&request.task_id, &e))?;
        Ok(GetTaskResult::new(report.detailed()))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), rmcp::ErrorData> {
        let caller = caller_of::<B::Caller>(&context)?;
        let answers = tasks::answers(&request.input_responses)
            .map_err(|m| rmcp::ErrorData::invalid_params(m, None))?;
        let known = self
            .backend
            .task(&caller, &request.task_id, Duration::ZERO, None)
            .await
            .map_err(|e| task_error(&request.task_id, &e))?;
        // Answers to requests that are not outstanding are ignored.
        let answers: Vec<ApprovalAnswer> = answers
            .into_iter()
            .filter(|a| known.pending.iter().any(|p| p.call_id == a.call_id))
            .collect();
        if !answers.is_empty() {
            self.backend
                .decide(&caller, &request.task_id, answers)
                .await
                .map_err(|e| task_error(&request.task_id, &e))?;
        }
        Ok(())
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), rmcp::ErrorData> {
        let caller = caller_of::<B::Caller>(&context)?;
        self.backend
            .cancel_task(&caller, &request.task_id)
            .await
            .map_err(|e| task_error(&request.task_id, &e))
    }
}

/// Sends each progress line of `rx` to the client as a
/// `notifications/progress` on `token`, counting them, until every sink
/// is dropped.
async fn forward_progress(
    peer: rmcp::Peer<RoleServer>,
    token: rmcp::model::ProgressToken,
    mut rx: tokio::sync::mpsc::Receiver<String>,
) {
    let mut sent = 0_u32;
    while let Some(text) = rx.recv().await {
        sent += 1;
        let param = rmcp::model::ProgressNotificationParam::new(token.clone(), f64::from(sent))
            .with_message(text);
        if let Err(e) = peer.notify_progress(param).await {
            tracing::debug!(error = %e, "a progress notification was not sent");
            // Drain, so the call never waits on a full buffer.
            while rx.recv().await.is_some() {}
            return;
        }
    }
}

/// A refusal of a `tasks/*` request: a task the caller may not see is
/// not found, as the extension words it.
fn task_error(id: &str, e: &BackendError) -> rmcp::ErrorData {
    let mut error = protocol_error(e);
    if matches!(
        e.code,
        ErrorCode::NotFound
            | ErrorCode::SessionNotFound
            | ErrorCode::InvalidSessionId
            | ErrorCode::Forbidden
    ) {
        error.message = format!("Failed to retrieve task: Task not found (`{id}`)").into();
    }
    error
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn replies_serialise_as_the_wire_shape() {
        let r = Reply {
            status: ReplyStatus::Running,
            session_id: "ses_1".into(),
            reply: None,
        };
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"status": "running", "sessionId": "ses_1", "reply": null})
        );
    }

    #[test]
    fn errors_render_like_the_http_api() {
        let mut e = BackendError::new(ErrorCode::UnknownTool, "no tool `x`");
        e.details.insert("available".into(), json!(["a"]));
        assert_eq!(
            e.to_json(),
            json!({"ok": false, "error": {"code": "unknown_tool", "message": "no tool `x`", "available": ["a"]}})
        );
    }
}
