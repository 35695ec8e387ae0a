//! The HTTP surface: host routes, and each agent's built-in HTTP channel
//! (sessions, follow-ups, streams, stop, list, health, info).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;

use agentkit_auth::RequestParts;
use agentkit_manifest::Admission;
use agentkit_runtime::{FollowUp, HTTP_CHANNEL, NewSession, Owner, SessionMode};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{any, get, post};
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{Mode, Mounted};

/// An error answer: `{"ok": false, "error": {"code", "message"}}`.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    pub(crate) code: &'static str,
    pub(crate) message: String,
    /// Extra fields of the error object (`available`, `errors`).
    pub(crate) details: Option<serde_json::Map<String, Value>>,
}

impl ApiError {
    pub(super) fn new(
        status: StatusCode,
        code: &'static str,
        message: impl Into<String>,
    ) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            details: None,
        }
    }

    fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }
}

impl From<agentkit_runtime::Error> for ApiError {
    fn from(e: agentkit_runtime::Error) -> ApiError {
        let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if status.is_server_error() && status != StatusCode::NOT_IMPLEMENTED {
            // The detail (paths, OS errors) goes to the log, not the caller.
            tracing::error!(error = %e, source = ?std::error::Error::source(&e), "request failed");
            return ApiError::new(status, e.code(), "internal error; see the server log");
        }
        let details = match &e {
            agentkit_runtime::Error::UnknownTool { available, .. } => {
                Some(json!({"available": available}))
            }
            agentkit_runtime::Error::InvalidInput { errors, .. } => Some(json!({"errors": errors})),
            _ => None,
        };
        let mut err = ApiError::new(status, e.code(), e.to_string());
        err.details = details.and_then(|d| d.as_object().cloned());
        err
    }
}

/// A body that could not be read: too large (413) or cut off (400).
pub(crate) fn body_error(e: BytesRejection) -> ApiError {
    let status = e.status();
    let code = if status == StatusCode::PAYLOAD_TOO_LARGE {
        "payload_too_large"
    } else {
        "bad_request"
    };
    ApiError::new(status, code, e.body_text())
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut error = json!({"code": self.code, "message": self.message});
        if let (Some(obj), Some(details)) = (error.as_object_mut(), self.details) {
            obj.extend(details);
        }
        (
            self.status,
            axum::Json(json!({"ok": false, "error": error})),
        )
            .into_response()
    }
}

pub(super) type ApiResult<T = Response> = Result<T, ApiError>;

#[derive(Debug, Clone)]
pub(crate) struct AgentState {
    pub(crate) agent: Mounted,
    shutdown: CancellationToken,
}

pub(crate) fn router(
    agents: &[Mounted],
    mode: Mode,
    body_limit: usize,
    shutdown: CancellationToken,
) -> Router {
    let mut app = Router::new();
    match mode {
        Mode::Single => {
            if let Some(a) = agents.first() {
                app = app.merge(agent_router(a.clone(), Health::Public, shutdown.clone()));
            }
        }
        Mode::Multi => {
            let index: Vec<(String, Option<String>)> = agents
                .iter()
                .map(|a| (a.slug.clone(), a.project.agent.config.description.clone()))
                .collect();
            let index2 = index.clone();
            app = app
                .route("/", get(move || async move { Html(index_page(&index)) }))
                .route(
                    "/v1/agents",
                    get(move || async move {
                        let list: Vec<Value> =
                            index2.iter().map(|(slug, d)| json!({"slug": slug, "description": d, "url": format!("/{slug}")})).collect();
                        axum::Json(json!({"ok": true, "agents": list}))
                    }),
                )
                .route("/v1/health", get(|| async { axum::Json(json!({"ok": true})) }));
            for a in agents {
                app = app.nest(
                    &format!("/{}", a.slug),
                    agent_router(a.clone(), Health::Authenticated, shutdown.clone()),
                );
            }
        }
    }
    app.fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route") })
        .layer(DefaultBodyLimit::max(body_limit))
}

/// Who may ask an agent's `/v1/health`. It is the host's liveness probe in
/// single mode (where the agent is at the root), and a load balancer's
/// probe carries no credentials; under `/<slug>` it runs the chain, and
/// the host's own `/v1/health` is the public one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Health {
    Public,
    Authenticated,
}

fn agent_router(agent: Mounted, health_auth: Health, shutdown: CancellationToken) -> Router {
    let channels = super::channels::router(agent.channels.clone());
    let state = AgentState { agent, shutdown };
    let health_route = match health_auth {
        Health::Public => get(public_health),
        Health::Authenticated => get(health),
    };
    Router::new()
        .route("/v1/session", post(create))
        .route("/v1/session/{id}", post(follow_up).get(session_info))
        .route("/v1/session/{id}/stop", post(stop))
        .route("/v1/session/{id}/stream", get(stream))
        .route("/v1/session/{id}/events", get(events))
        .route("/v1/session/{id}/approvals", get(approvals))
        .route("/v1/session/{id}/approvals/{call}", post(resolve_approval))
        .route("/v1/tools/{name}", post(call_tool))
        .route("/v1/sessions", get(list))
        .route("/v1/health", health_route)
        .route("/v1/info", get(info))
        .route("/v1/mcp", any(super::mcp::route))
        .merge(super::schedules::routes())
        .with_state(state)
        .merge(channels)
}

fn index_page(agents: &[(String, Option<String>)]) -> String {
    let mut items = String::new();
    for (slug, description) in agents {
        let d = description.as_deref().map(html_escape).unwrap_or_default();
        items.push_str(&format!(
            "<li><a href=\"/{slug}/v1/info\"><code>/{slug}</code></a> {d}</li>\n"
        ));
    }
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>agentkit</title></head>\n<body><h1>agentkit</h1>\n<p>{} agent(s) on this host.</p>\n<ul>\n{items}</ul>\n</body></html>\n",
        agents.len()
    )
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A request that the agent's auth chain admitted: the caller's principal
/// and the raw body (read within the body limit, checked before parsing).
pub(super) struct Authed {
    pub(super) owner: Owner,
    pub(super) body: Bytes,
}

impl axum::extract::FromRequest<AgentState> for Authed {
    type Rejection = ApiError;

    async fn from_request(
        req: axum::extract::Request,
        state: &AgentState,
    ) -> Result<Self, ApiError> {
        let (parts, body) = req.into_parts();
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip());
        let headers = parts.headers.clone();
        let body = Bytes::from_request(axum::extract::Request::from_parts(parts, body), state)
            .await
            .map_err(body_error)?;
        let owner = authenticate(state, peer, &headers, &body)?;
        Ok(Authed { owner, body })
    }
}

/// Runs the agent's auth chain on the request, raw body included.
pub(crate) fn authenticate(
    state: &AgentState,
    peer: Option<std::net::IpAddr>,
    headers: &HeaderMap,
    body: &[u8],
) -> ApiResult<Owner> {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let mut parts = RequestParts::new(peer).with_body(body);
    if let Some(host) = host {
        parts = parts.with_host(host);
    }
    for (name, value) in headers {
        parts.headers.push((name.as_str(), value.as_bytes()));
    }
    match state.agent.chain.admit(&parts) {
        Ok(ctx) => Ok(Owner::from_auth(&ctx)),
        Err(denied) => {
            tracing::info!(peer = ?peer, reasons = ?denied.refusals(), "request denied");
            Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "no auth policy admitted the request",
            ))
        }
    }
}

fn parse_json<T: for<'de> Deserialize<'de>>(body: &[u8]) -> ApiResult<T> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid request body: {e}")))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MessageBody {
    message: String,
    #[serde(default)]
    continuation_token: Option<String>,
    #[serde(default)]
    admission: Option<Admission>,
    #[serde(default)]
    workspace_files: BTreeMap<String, String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    purpose: Option<String>,
    /// New sessions only: tools that are not read-only answer stubs.
    #[serde(default)]
    dry_run: bool,
}

fn accepted_json(state: &AgentState, accepted: &agentkit_runtime::Accepted) -> Value {
    let prefix = &state.agent.prefix;
    json!({
        "ok": true,
        "sessionId": accepted.session_id,
        "continuationToken": accepted.continuation_token,
        "isNew": accepted.is_new,
        "coalesced": accepted.coalesced,
        "streamUrl": format!("{prefix}/v1/session/{}/stream", accepted.session_id),
        "traceUrl": format!("{prefix}/v1/session/{}/events", accepted.session_id),
    })
}

async fn create(State(state): State<AgentState>, Authed { owner, body }: Authed) -> ApiResult {
    let req: MessageBody = parse_json(&body)?;
    if req.continuation_token.is_some() {
        return Err(ApiError::bad_request(
            "a new session takes no `continuationToken`; follow up with POST /v1/session/:sessionId",
        ));
    }
    let accepted = state
        .agent
        .runtime
        .create(NewSession {
            channel: HTTP_CHANNEL.to_owned(),
            mode: SessionMode::Chat,
            owner,
            message: req.message,
            continuation: None,
            title: req.title,
            purpose: req.purpose,
            admission: req.admission.unwrap_or_default(),
            workspace_files: req.workspace_files.into_iter().collect(),
            dry_run: req.dry_run,
            as_of: None,
        })
        .await?;
    Ok(axum::Json(accepted_json(&state, &accepted)).into_response())
}

async fn follow_up(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    Authed { owner, body }: Authed,
) -> ApiResult {
    let req: MessageBody = parse_json(&body)?;
    let accepted = state
        .agent
        .runtime
        .follow_up(
            &id,
            FollowUp {
                owner,
                message: req.message,
                continuation_token: req.continuation_token,
                admission: req.admission.unwrap_or_default(),
                workspace_files: req.workspace_files.into_iter().collect(),
            },
        )
        .await?;
    Ok(axum::Json(accepted_json(&state, &accepted)).into_response())
}

async fn stop(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    let interrupted = state.agent.runtime.stop(&id, &owner)?;
    Ok(
        axum::Json(json!({"ok": true, "sessionId": id, "interrupted": interrupted}))
            .into_response(),
    )
}

/// `GET /v1/session/:id`: the session's metadata (not its continuation
/// token, which only the last answer carries).
async fn session_info(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    let runtime = &state.agent.runtime;
    let meta = runtime.session(&id, &owner)?;
    Ok(axum::Json(json!({
        "ok": true,
        "sessionId": meta.id,
        "channel": meta.channel,
        "mode": meta.mode,
        "principalId": meta.owner.principal_id,
        "createdAt": meta.created_at,
        "title": meta.title,
        "purpose": meta.purpose,
        "dryRun": meta.dry_run,
        "asOf": meta.as_of,
        "busy": runtime.is_busy(&id),
    }))
    .into_response())
}

fn start_index(query: Option<&str>) -> ApiResult<u64> {
    let Some(query) = query else { return Ok(0) };
    for pair in query.split('&') {
        if let Some(v) = pair.strip_prefix("startIndex=") {
            return v.parse().map_err(|_| {
                ApiError::bad_request(format!(
                    "`startIndex` must be a non-negative integer, not `{v}`"
                ))
            });
        }
    }
    Ok(0)
}

/// `text=false`: the follower wants `message.appended` without its
/// cumulative `text` (the `delta` alone), so a long reply streams in
/// bytes linear in its length.
fn wants_text(query: Option<&str>) -> ApiResult<bool> {
    let Some(query) = query else { return Ok(true) };
    for pair in query.split('&') {
        if let Some(v) = pair.strip_prefix("text=") {
            return match v {
                "true" | "1" => Ok(true),
                "false" | "0" => Ok(false),
                _ => Err(ApiError::bad_request(format!(
                    "`text` must be `true` or `false`, not `{v}`"
                ))),
            };
        }
    }
    Ok(true)
}

fn ndjson(body: Body) -> Response {
    let mut resp = Response::new(body);
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

fn line(event: &agentkit_protocol::Event, text: bool) -> Bytes {
    let mut bytes = if !text
        && event.event_type == agentkit_protocol::EventType::MessageAppended
        && event.data.get("text").is_some()
    {
        let mut bare = event.clone_envelope();
        bare.data = json!({"delta": event.data.get("delta").cloned().unwrap_or(Value::Null)});
        serde_json::to_vec(&bare).unwrap_or_default()
    } else {
        serde_json::to_vec(event).unwrap_or_default()
    };
    bytes.push(b'\n');
    Bytes::from(bytes)
}

async fn stream(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    let start = start_index(query.as_deref())?;
    let text = wants_text(query.as_deref())?;
    let sub = state.agent.runtime.subscribe(&id, &owner, start).await?;
    // Each event is its own body frame, so hyper writes it at once; the
    // stream ends when the client goes away (the body is dropped) or the
    // server shuts down.
    let events = futures_util::stream::unfold(sub, move |mut sub| async move {
        match sub.next().await {
            Ok(event) => Some((Ok::<Bytes, Infallible>(line(&event, text)), sub)),
            Err(e) => {
                tracing::warn!(error = %e, "stream ended by a store error");
                None
            }
        }
    })
    .take_until(state.shutdown.clone().cancelled_owned());
    Ok(ndjson(Body::from_stream(events)))
}

async fn events(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    let start = start_index(query.as_deref())?;
    let text = wants_text(query.as_deref())?;
    let events = state.agent.runtime.events(&id, &owner, start).await?;
    let mut body = Vec::new();
    for e in &events {
        body.extend_from_slice(&line(e, text));
    }
    Ok(ndjson(Body::from(body)))
}

async fn list(State(state): State<AgentState>, Authed { owner, .. }: Authed) -> ApiResult {
    let sessions = state.agent.runtime.list(&owner).await?;
    Ok(axum::Json(json!({"ok": true, "sessions": sessions})).into_response())
}

async fn health(State(state): State<AgentState>, _auth: Authed) -> ApiResult {
    Ok(axum::Json(json!({"ok": true, "slug": state.agent.slug})).into_response())
}

/// Liveness without auth: the slug is no secret (multi mode lists every
/// slug at `/v1/agents`).
async fn public_health(State(state): State<AgentState>) -> Response {
    axum::Json(json!({"ok": true, "slug": state.agent.slug})).into_response()
}

async fn info(State(state): State<AgentState>, _auth: Authed) -> ApiResult {
    let project = serde_json::to_value(&*state.agent.project).unwrap_or(Value::Null);
    let mcp = super::mcp::info(&state);
    Ok(axum::Json(json!({
        "ok": true,
        "slug": state.agent.slug,
        "project": project,
        "mcp": mcp,
        "channels": state.agent.channels.describe(),
        "schedules": state.agent.runtime.schedule_status(),
        "reminders": {"armed": state.agent.runtime.armed_reminders()},
        "hooks": state.agent.hooks.stats(),
        "sandbox": agentkit_harness::sandbox_info(
            state.agent.project.agent.config.harness.sandbox.mode
        ),
    }))
    .into_response())
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ToolCallBody {
    #[serde(default = "empty_object")]
    input: Value,
    #[serde(default)]
    session_id: Option<String>,
}

fn empty_object() -> Value {
    json!({})
}

/// `POST /v1/tools/:toolName`: a deterministic call, no model turn.
async fn call_tool(
    State(state): State<AgentState>,
    Path(name): Path<String>,
    Authed { owner, body }: Authed,
) -> ApiResult {
    let req: ToolCallBody = if body.iter().all(u8::is_ascii_whitespace) {
        ToolCallBody {
            input: empty_object(),
            session_id: None,
        }
    } else {
        parse_json(&body)?
    };
    let session = req.session_id.as_deref().map(|id| (id, &owner));
    let outcome = state
        .agent
        .runtime
        .call_tool(&name, req.input, session)
        .await?;
    let mut doc = serde_json::to_value(&outcome).unwrap_or(Value::Null);
    if let Some(obj) = doc.as_object_mut() {
        obj.insert("ok".to_owned(), Value::Bool(true));
    }
    Ok(axum::Json(doc).into_response())
}

/// `GET /v1/session/:id/approvals`: the calls parked in the session,
/// including those a restart left waiting.
async fn approvals(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    let pending = state.agent.runtime.approvals(&id, &owner).await?;
    Ok(axum::Json(json!({"ok": true, "sessionId": id, "approvals": pending})).into_response())
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct DecisionBody {
    decision: String,
    #[serde(default)]
    reason: Option<String>,
}

/// `POST /v1/session/:id/approvals/:callId` with `{"decision":
/// "approve"|"deny", "reason"?}`; the caller's principal is recorded as
/// `by`.
async fn resolve_approval(
    State(state): State<AgentState>,
    Path((id, call)): Path<(String, String)>,
    Authed { owner, body }: Authed,
) -> ApiResult {
    let req: DecisionBody = parse_json(&body)?;
    let approved = match req.decision.as_str() {
        "approve" => true,
        "deny" => false,
        other => {
            return Err(ApiError::bad_request(format!(
                "`decision` must be \"approve\" or \"deny\", not \"{other}\""
            )));
        }
    };
    let decision = agentkit_runtime::Decision {
        approved,
        reason: req.reason,
        by: owner.principal_id.clone(),
    };
    let resolved = state
        .agent
        .runtime
        .resolve_approval(&id, &call, decision, &owner)
        .await?;
    let mut doc = serde_json::to_value(&resolved).unwrap_or(Value::Null);
    if let Some(obj) = doc.as_object_mut() {
        obj.insert("ok".to_owned(), Value::Bool(true));
        obj.insert("sessionId".to_owned(), Value::String(id));
    }
    Ok(axum::Json(doc).into_response())
}
