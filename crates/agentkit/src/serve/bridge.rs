//! The host bridge: a loopback-only HTTP server that server tools (child
//! processes in any language) call back into, for the agent's MCP
//! connections and its key-value store.
//!
//! Tools find it in `AGENTKIT_HOST_URL` and authenticate with
//! `Authorization: Bearer $AGENTKIT_HOST_TOKEN`: a random token minted per
//! agent at every boot (useless after a restart, never logged, compared
//! in constant time). The token also says which agent calls, so one
//! agent's tools cannot read another's store.
//!
//! Routes (all JSON; errors are the API's `{ok: false, error}`):
//!
//! | method | path | does |
//! |---|---|---|
//! | GET | `/v1/kv?prefix=P&limit=N` | live entries by key prefix |
//! | GET | `/v1/kv/{key}` | one entry (404 `not_found`) |
//! | PUT | `/v1/kv/{key}` | `{value, ttlSeconds?}` stores it |
//! | DELETE | `/v1/kv/{key}` | removes it |
//! | GET | `/v1/mcp` | the agent's connections and their status |
//! | GET | `/v1/mcp/{conn}/tools` | a connection's tools |
//! | POST | `/v1/mcp/{conn}/tools/{tool}` | `{arguments}` calls a tool |
//! | GET | `/v1/reminders` | the agent's reminders, newest first |
//! | POST | `/v1/reminders` | a prompt-form reminder (`ReminderRequest` JSON) |
//! | DELETE | `/v1/reminders/{id}` | cancels one |

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use agentkit_runtime::KvStore;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use serde_json::{Value, json};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

use super::mcp::Depths;

/// The header a tool may send with its `AGENTKIT_SESSION_ID`, so MCP calls
/// it makes count towards its session's delegation depth.
pub(crate) const SESSION_HEADER: &str = "x-agentkit-session";

/// What the bridge serves for one agent.
#[derive(Clone)]
pub(crate) struct BridgeAgent {
    pub(crate) token: String,
    pub(crate) kv: KvStore,
    pub(crate) connections: agentkit_mcp::Connections,
    pub(crate) depths: Depths,
    /// The agent's runtime (its reminders).
    pub(crate) runtime: agentkit_runtime::AgentRuntime,
    /// GitHub access with the agent's github channels' credentials.
    pub(crate) github: super::HostGithub,
}

impl std::fmt::Debug for BridgeAgent {
    // The token never reaches a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BridgeAgent").finish_non_exhaustive()
    }
}

/// A fresh per-boot secret: 256 random bits, hex.
pub(crate) fn mint_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Binds the bridge on a free loopback port.
pub(crate) async fn bind() -> std::io::Result<(tokio::net::TcpListener, String)> {
    let listener =
        tokio::net::TcpListener::bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0)).await?;
    let url = format!("http://{}", listener.local_addr()?);
    Ok((listener, url))
}

/// Serves the bridge until `shutdown`.
pub(crate) fn spawn(
    listener: tokio::net::TcpListener,
    agents: Vec<BridgeAgent>,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let state = Arc::new(agents);
    let app = Router::new()
        .route("/v1/kv", get(kv_list))
        .route("/v1/kv/{*key}", get(kv_get).put(kv_put).delete(kv_delete))
        .route("/v1/mcp", get(mcp_list))
        .route("/v1/mcp/{conn}/tools", get(mcp_tools))
        .route("/v1/mcp/{conn}/tools/{tool}", axum::routing::post(mcp_call))
        .route("/v1/reminders", get(reminders_list).post(reminders_create))
        .route("/v1/github", axum::routing::post(github_request))
        .route(
            "/v1/reminders/{id}",
            axum::routing::delete(reminders_cancel),
        )
        .fallback(|| async { error(StatusCode::NOT_FOUND, "not_found", "no such bridge route") })
        .layer(axum::extract::DefaultBodyLimit::max(1024 * 1024))
        .with_state(state);
    tokio::spawn(async move {
        let served = axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await;
        if let Err(e) = served {
            tracing::warn!(error = %e, "host bridge ended with an error");
        }
    })
}

type Agents = Arc<Vec<BridgeAgent>>;

fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    (
        status,
        axum::Json(json!({"ok": false, "error": {"code": code, "message": message.into()}})),
    )
        .into_response()
}

/// The agent whose token the request carries (every token is compared,
/// each in constant time), from a loopback peer only.
fn caller<'a>(
    agents: &'a Agents,
    peer: SocketAddr,
    headers: &HeaderMap,
) -> Option<&'a BridgeAgent> {
    if !peer.ip().is_loopback() {
        return None;
    }
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .as_bytes();
    let mut found = None;
    for agent in agents.iter() {
        if bool::from(agent.token.as_bytes().ct_eq(presented)) {
            found = Some(agent);
        }
    }
    found
}

fn denied() -> Response {
    error(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "send `Authorization: Bearer $AGENTKIT_HOST_TOKEN`",
    )
}

fn kv_failed(e: agentkit_runtime::Error) -> Response {
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if status.is_server_error() {
        tracing::error!(error = %e, "host bridge: key-value store failed");
        return error(status, "internal", "internal error; see the server log");
    }
    error(status, e.code(), e.to_string())
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    #[serde(default)]
    prefix: String,
    #[serde(default)]
    limit: Option<usize>,
}

async fn kv_list(
    State(agents): State<Agents>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Query(q): Query<ListQuery>,
) -> Response {
    let Some(agent) = caller(&agents, peer, &headers) else {
        return denied();
    };
    let limit = q.limit.unwrap_or(100).min(1000);
    match agent.kv.list(&q.prefix, limit).await {
        Ok(entries) => axum::Json(json!({"ok": true, "entries": entries})).into_response(),
        Err(e) => kv_failed(e),
    }
}

async fn kv_get(
    State(agents): State<Agents>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(key): Path<String>,
) -> Response {
    let Some(agent) = caller(&agents, peer, &headers) else {
        return denied();
    };
    match agent.kv.get(&key).await {
        Ok(Some(entry)) => axum::Json(json!({"ok": true, "entry": entry})).into_response(),
        Ok(None) => error(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no key `{key}`"),
        ),
        Err(e) => kv_failed(e),
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PutBody {
    value: Value,
    #[serde(default)]
    ttl_seconds: Option<f64>,
}

async fn kv_put(
    State(agents): State<Agents>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(key): Path<String>,
    body: Bytes,
) -> Response {
    let Some(agent) = caller(&agents, peer, &headers) else {
        return denied();
    };
    let req: PutBody = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!("expected {{\"value\": …, \"ttlSeconds\"?: n}}: {e}"),
            );
        }
    };
    let ttl = match req.ttl_seconds {
        None => None,
        Some(s) if s.is_finite() && s > 0.0 && s < 1e12 => Some(Duration::from_secs_f64(s)),
        Some(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                "`ttlSeconds` must be a positive number",
            );
        }
    };
    match agent.kv.set(&key, &req.value, ttl).await {
        Ok(entry) => axum::Json(json!({"ok": true, "entry": entry})).into_response(),
        Err(e) => kv_failed(e),
    }
}

async fn kv_delete(
    State(agents): State<Agents>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(key): Path<String>,
) -> Response {
    let Some(agent) = caller(&agents, peer, &headers) else {
        return denied();
    };
    match agent.kv.delete(&key).await {
        Ok(deleted) => axum::Json(json!({"ok": true, "deleted": deleted})).into_response(),
        Err(e) => kv_failed(e),
    }
}

fn mcp_failed(e: agentkit_mcp::ClientError) -> Response {
    match &e {
        agentkit_mcp::ClientError::UnknownConnection { available, .. } => (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"ok": false, "error": {"code": "unknown_connection", "message": e.to_string(), "available": available}})),
        )
            .into_response(),
        agentkit_mcp::ClientError::Unavailable { .. } => {
            error(StatusCode::BAD_GATEWAY, "connection_unavailable", e.to_string())
        }
        agentkit_mcp::ClientError::Call { .. } => {
            error(StatusCode::BAD_GATEWAY, "mcp_call_failed", e.to_string())
        }
    }
}

fn depth(agent: &BridgeAgent, headers: &HeaderMap) -> u32 {
    headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map_or(0, |s| agent.depths.get(s))
}

async fn mcp_list(
    State(agents): State<Agents>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    match caller(&agents, peer, &headers) {
        Some(agent) => axum::Json(json!({
            "ok": true,
            "names": agent.connections.names(),
            "connections": agent.connections.status(),
        }))
        .into_response(),
        None => denied(),
    }
}

async fn mcp_tools(
    State(agents): State<Agents>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(conn): Path<String>,
) -> Response {
    let Some(agent) = caller(&agents, peer, &headers) else {
        return denied();
    };
    match agent
        .connections
        .list_tools(&conn, depth(agent, &headers))
        .await
    {
        Ok(tools) => axum::Json(json!({"ok": true, "tools": tools})).into_response(),
        Err(e) => mcp_failed(e),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CallBody {
    #[serde(default)]
    arguments: Option<Value>,
}

async fn mcp_call(
    State(agents): State<Agents>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path((conn, tool)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let Some(agent) = caller(&agents, peer, &headers) else {
        return denied();
    };
    let req: CallBody = if body.iter().all(u8::is_ascii_whitespace) {
        CallBody::default()
    } else {
        match serde_json::from_slice(&body) {
            Ok(b) => b,
            Err(e) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "bad_request",
                    format!("expected {{\"arguments\": {{…}}}}: {e}"),
                );
            }
        }
    };
    let args = req.arguments.unwrap_or_else(|| json!({}));
    match agent
        .connections
        .call_tool(&conn, &tool, args, depth(agent, &headers))
        .await
    {
        Ok(result) => axum::Json(json!({"ok": true, "result": result.to_json()})).into_response(),
        Err(e) => mcp_failed(e),
    }
}

fn runtime_error(e: agentkit_runtime::Error) -> Response {
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if status.is_server_error() {
        tracing::error!(error = %e, "bridge request failed");
        return error(status, "internal", "internal error; see the server log");
    }
    error(status, e.code(), e.to_string())
}

async fn reminders_list(
    State(agents): State<Agents>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    let Some(agent) = caller(&agents, peer, &headers) else {
        return denied();
    };
    match agent.runtime.reminders() {
        Ok(list) => axum::Json(json!({"ok": true, "reminders": list})).into_response(),
        Err(e) => runtime_error(e),
    }
}

async fn reminders_create(
    State(agents): State<Agents>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(agent) = caller(&agents, peer, &headers) else {
        return denied();
    };
    let req: agentkit_runtime::ReminderRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!(
                    "expected {{purpose, channelId, continuationToken, delay|every|cron|at, prompt, until?}}: {e}"
                ),
            );
        }
    };
    match req
        .into_new()
        .and_then(|r| agent.runtime.create_reminder(r))
    {
        Ok(r) => axum::Json(json!({"ok": true, "reminder": r})).into_response(),
        Err(e) => runtime_error(e),
    }
}

async fn reminders_cancel(
    State(agents): State<Agents>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some(agent) = caller(&agents, peer, &headers) else {
        return denied();
    };
    match agent.runtime.cancel_reminder(&id) {
        Ok(r) => axum::Json(json!({"ok": true, "reminder": r})).into_response(),
        Err(e) => runtime_error(e),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GithubBody {
    /// The github channel whose credentials to use; optional when the
    /// agent has one.
    #[serde(default)]
    channel: Option<String>,
    method: String,
    path: String,
    #[serde(default)]
    body: Option<Value>,
    /// The App installation to act as, when the channel fixes none.
    #[serde(default)]
    installation_id: Option<u64>,
}

/// `POST /v1/github` `{channel?, method, path, body?, installationId?}`:
/// one GitHub REST call with the credentials of the agent's github
/// channel; `{ok, result}` with GitHub's JSON answer. GitHub's refusals are
/// `502` `upstream_error` carrying its status and message.
async fn github_request(
    State(agents): State<Agents>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(agent) = caller(&agents, peer, &headers) else {
        return denied();
    };
    let req: GithubBody = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!(
                    "expected {{\"method\", \"path\", \"body\"?, \"channel\"?, \"installation_id\"?}}: {e}"
                ),
            );
        }
    };
    let client = match agent.github.client(req.channel.as_deref()) {
        Ok(c) => c,
        Err(e) => return error(StatusCode::NOT_FOUND, "not_found", e.to_string()),
    };
    let client = match req.installation_id {
        Some(id) => client.for_installation(id),
        None => client,
    };
    match client.request(&req.method, &req.path, req.body).await {
        Ok(result) => axum::Json(json!({"ok": true, "result": result})).into_response(),
        Err(e) => {
            let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_GATEWAY);
            error(status, e.code(), e.to_string())
        }
    }
}
