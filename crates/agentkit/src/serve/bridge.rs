//! The host bridge: a loopback-only HTTP server that server tools (child
//! processes in any language) call back into, for the agent's MCP
//! connections and its key-value store.
//!
//! Tools find it in `AGENTKIT_HOST_URL` and authenticate with
//! `Authorization: Bearer $AGENTKIT_HOST_TOKEN`. Each tool call gets its
//! own credential, `akc.<id>.<mac>`: the MAC is an HMAC-SHA256, keyed with
//! the agent's per-boot secret, over the id, the calling session and its
//! delegation depth; the credential is registered while the call runs and
//! revoked when it ends. So the bridge knows which session calls (MCP
//! calls to peers go one hop deeper than it, without the tool sending
//! anything) and a leaked credential dies with its call. The per-boot
//! secret itself (256 random bits, useless after a restart) still works
//! for host code, which may name its session in `x-agentkit-session`.
//! Secrets are never logged and are checked in constant time; either
//! kind also says which agent calls, so one agent's tools cannot read
//! another's store.
//!
//! Routes (all JSON; errors are the API's `{ok: false, error}`):
//!
//! | method | path | does |
//! |---|---|---|
//! | GET | `/v1/kv?prefix=P&limit=N&cursor=C` | live entries by key prefix, in key order; `nextCursor` |
//! | GET | `/v1/kv/{key}` | one entry (404 `not_found`) |
//! | PUT | `/v1/kv/{key}` | `{value, ttlSeconds?}` stores it |
//! | DELETE | `/v1/kv/{key}` | removes it |
//! | GET | `/v1/mcp` | the agent's connections and their status |
//! | GET | `/v1/mcp/{conn}/tools` | a connection's tools |
//! | POST | `/v1/mcp/{conn}/tools/{tool}` | `{arguments}` calls a tool |
//! | GET | `/v1/reminders?limit=N&cursor=C` | the agent's reminders, newest first; `nextCursor` |
//! | POST | `/v1/reminders` | a prompt-form reminder (`ReminderRequest` JSON) |
//! | DELETE | `/v1/reminders/{id}` | cancels one |
//! | POST | `/v1/github` | one GitHub REST call with a github channel's credentials |
//! | GET | `/v1/artifacts?kind=&session=&limit=&cursor=` | the agent's artifacts, newest first; `nextCursor` |
//! | GET | `/v1/memory?limit=&cursor=` | every memory of the agent, newest first; `nextCursor` |
//! | GET | `/v1/memory?principal=P&q=words&limit=N` | what `recall` finds for principal P |
//! | POST | `/v1/memory` | `{sessionId?, text, scope?}` remembers (the calling session's by default) |
//! | GET, PUT, DELETE | `/v1/memory/{id}` | one memory; `{text}` replaces its text; deletes it |
//! | POST | `/v1/artifacts` | `{sessionId?, kind?, key?, data}` tags one (the calling session's by default) |
//! | POST | `/v1/send` | `HostSend` JSON: create or continue a session; `{sessionId, continuationToken, isNew}` |
//! | GET | `/v1/sessions/{id}` | a session's channel, key, owner, title, busy |
//! | POST | `/v1/sessions/{id}/messages` | `{text}` appends an assistant message (no model turn) |
//! | GET | `/v1/sessions/{id}/files?limit=&cursor=` | a page of the session's workspace entries; `nextCursor` |
//! | GET | `/v1/sessions/{id}/files/{path}` | a workspace file's bytes, with its content type |
//! | PUT | `/v1/sessions/{id}/files/{path}` | the body written as the file (at most 8 MiB); `{path, size}` |
//! | POST | `/v1/tools/{name}` | `{input}` runs a server tool (host-only ones too); its envelope |
//!
//! A call credential also carries who the call acts for (`CallOrigin`):
//! `send` starts sessions as the route's admitted principal, the
//! schedule's app principal, or the calling session's owner, and the
//! sessions a schedule's tool or command reaches count as its run's.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentkit_protocol::ErrorCode;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, FromRequestParts, Path, Query};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

use super::depths::{Depths, call_depth};
use super::http::ApiError;
use super::services::{HostSend, host_owner};
use agentkit_harness::CallOrigin;

/// The header host code may send with the per-boot token to name the
/// session its MCP calls count towards (call credentials carry theirs).
pub(crate) const SESSION_HEADER: &str = "x-agentkit-session";

/// The prefix of a per-call credential.
const CALL_PREFIX: &str = "akc.";

/// What the bridge serves for one agent.
#[derive(Clone)]
pub(crate) struct BridgeAgent {
    pub(crate) token: Arc<str>,
    /// The agent's host services (kv, MCP, reminders, GitHub, Slack,
    /// sessions): the same ones Rust extensions get, so both doors reach
    /// one set.
    pub(crate) services: super::services::HostServices,
    /// The agent's runtime (its reminders).
    pub(crate) runtime: agentkit_runtime::AgentRuntime,
    /// The live per-call credentials.
    pub(crate) calls: CallTokens,
}

impl std::fmt::Debug for BridgeAgent {
    // The token never reaches a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BridgeAgent").finish_non_exhaustive()
    }
}

/// A fresh per-boot secret: 256 random bits, hex.
pub(crate) fn mint_token() -> Arc<str> {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
    .into()
}

/// One live call credential: the session it is bound to (empty outside a
/// session), its delegation depth, and who the call acts for.
#[derive(Debug, Clone)]
struct CallEntry {
    session: String,
    hops: u32,
    origin: CallOrigin,
}

/// One agent's live call credentials by id. The secret part is not
/// stored; it is recomputed from the per-boot secret when presented.
#[derive(Debug, Clone, Default)]
pub(crate) struct CallTokens(Arc<Mutex<HashMap<String, CallEntry>>>);

impl CallTokens {
    fn get(&self, id: &str) -> Option<CallEntry> {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.get(id).cloned()
    }

    fn insert(&self, id: String, session: String, hops: u32, origin: CallOrigin) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.insert(
            id,
            CallEntry {
                session,
                hops,
                origin,
            },
        );
    }

    fn remove(&self, id: &str) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.remove(id);
    }

    /// How many calls hold a credential now.
    #[cfg(test)]
    fn live(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// Issues one agent's call credentials (the harness asks for one per
/// server-tool call and drops it when the call ends).
#[derive(Clone)]
pub(crate) struct Issuer {
    pub(crate) secret: Arc<str>,
    pub(crate) calls: CallTokens,
    pub(crate) depths: Depths,
}

impl std::fmt::Debug for Issuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issuer").finish_non_exhaustive()
    }
}

impl agentkit_harness::BridgeCredentials for Issuer {
    fn issue(
        &self,
        session_id: &str,
        _call_id: &str,
        origin: &CallOrigin,
    ) -> agentkit_harness::CallCredential {
        let hops = self.depths.get(session_id).max(call_depth());
        let id = uuid::Uuid::new_v4().simple().to_string();
        let mac = agentkit_auth::sign_bridge_call(&self.secret, &id, session_id, hops);
        let token = format!("{CALL_PREFIX}{id}.{mac}");
        self.calls
            .insert(id.clone(), session_id.to_owned(), hops, origin.clone());
        let calls = self.calls.clone();
        agentkit_harness::CallCredential::new(token, move || calls.remove(&id))
    }
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
        .route("/v1/mcp/{conn}/tools/{tool}", post(mcp_call))
        .route("/v1/reminders", get(reminders_list).post(reminders_create))
        .route("/v1/reminders/{id}", delete(reminders_cancel))
        .route("/v1/github", post(github_request))
        .route("/v1/slack", post(slack_request))
        .route("/v1/artifacts", get(artifacts_list).post(artifacts_tag))
        .route("/v1/memory", get(memory_list).post(memory_remember))
        .route(
            "/v1/memory/{id}",
            get(memory_get).put(memory_edit).delete(memory_delete),
        )
        .route("/v1/send", post(send))
        .route("/v1/sessions/{id}", get(session_get))
        .route("/v1/sessions/{id}/messages", post(session_emit))
        .route("/v1/sessions/{id}/files", get(files_list))
        .route(
            "/v1/sessions/{id}/files/{*path}",
            get(files_read)
                .put(files_write)
                .layer(axum::extract::DefaultBodyLimit::max(
                    super::files::UPLOAD_BODY_LIMIT,
                )),
        )
        .route("/v1/tools/{name}", post(tool_call))
        .fallback(|| async {
            error(
                StatusCode::NOT_FOUND,
                ErrorCode::NotFound,
                "no such bridge route",
            )
            .into_response()
        })
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

/// Every handler answers this: a JSON body, or the API's error object.
type Reply = Result<Response, ApiError>;

fn error(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> ApiError {
    ApiError::new(status, code, message)
}

/// `{"ok": true, <key>: <value>}`.
fn ok(key: &str, value: impl serde::Serialize) -> Reply {
    let value = serde_json::to_value(value).map_err(|e| {
        tracing::error!(error = %e, "host bridge: cannot serialise an answer");
        error(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Internal,
            "internal error; see the server log",
        )
    })?;
    Ok(axum::Json(json!({"ok": true, key: value})).into_response())
}

/// A JSON body, or 400 with what was expected.
fn body<T: DeserializeOwned>(bytes: &Bytes, expected: &str) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| {
        error(
            StatusCode::BAD_REQUEST,
            ErrorCode::BadRequest,
            format!("expected {expected}: {e}"),
        )
    })
}

/// The authenticated caller of a bridge route: the agent whose secret the
/// request carries, and the delegation depth its MCP calls start from.
/// Rejects (401) anything but a loopback peer with a valid credential.
struct Caller {
    agents: Agents,
    index: usize,
    hops: u32,
    /// The session the credential is bound to (or the per-boot token's
    /// `x-agentkit-session`); empty when none.
    session: String,
    /// Who a call credential acts for; `None` for the per-boot token.
    origin: Option<CallOrigin>,
}

impl std::ops::Deref for Caller {
    type Target = BridgeAgent;

    fn deref(&self) -> &BridgeAgent {
        &self.agents[self.index]
    }
}

impl FromRequestParts<Agents> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, agents: &Agents) -> Result<Caller, ApiError> {
        let loopback = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .is_some_and(|c| c.0.ip().is_loopback());
        let found = if loopback {
            authenticate(agents, &parts.headers)
        } else {
            None
        };
        let found = found.ok_or_else(|| {
            error(
                StatusCode::UNAUTHORIZED,
                ErrorCode::Unauthorized,
                "send `Authorization: Bearer $AGENTKIT_HOST_TOKEN` (a call's credential is valid while the call runs)",
            )
        })?;
        Ok(Caller {
            agents: agents.clone(),
            index: found.index,
            hops: found.hops,
            session: found.session,
            origin: found.origin,
        })
    }
}

/// What a valid credential says about its caller.
struct Found {
    index: usize,
    hops: u32,
    session: String,
    origin: Option<CallOrigin>,
}

/// Which agent the presented secret belongs to, and the depth: a call
/// credential's own, or for the per-boot token the depth of the session
/// named in [`SESSION_HEADER`]. Every agent is tried, each comparison in
/// constant time.
fn authenticate(agents: &Agents, headers: &HeaderMap) -> Option<Found> {
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    if let Some(rest) = presented.strip_prefix(CALL_PREFIX) {
        // The id is not secret (a map key); the MAC is checked in
        // constant time.
        let (id, mac) = rest.split_once('.')?;
        return agents.iter().enumerate().find_map(|(i, agent)| {
            let entry = agent.calls.get(id)?;
            agentkit_auth::verify_bridge_call(&agent.token, id, &entry.session, entry.hops, mac)
                .then_some(Found {
                    index: i,
                    hops: entry.hops,
                    session: entry.session,
                    origin: Some(entry.origin),
                })
        });
    }
    let mut found = None;
    for (i, agent) in agents.iter().enumerate() {
        if bool::from(agent.token.as_bytes().ct_eq(presented.as_bytes())) {
            found = Some(i);
        }
    }
    let i = found?;
    let session = headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let hops = if session.is_empty() {
        0
    } else {
        agents[i].services.mcp.depths.get(&session)
    };
    Some(Found {
        index: i,
        hops,
        session,
        origin: None,
    })
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    #[serde(default)]
    prefix: String,
    #[serde(default)]
    limit: Option<u32>,
    #[serde(default)]
    cursor: Option<String>,
}

/// The cursor kinds of the bridge's kv and reminder pages.
const KV_CURSOR: &str = "k1";
const REMINDER_CURSOR: &str = "t1";
/// The cursor kind of the bridge's memory pages (the public route's).
const MEMORY_CURSOR: &str = "m1";

/// `GET /v1/kv?prefix=&limit=&cursor=`: live entries in key order, a page
/// at a time (`limit` 100 by default, at most 1,000); `nextCursor` while
/// more remain.
async fn kv_list(caller: Caller, Query(q): Query<ListQuery>) -> Reply {
    let page = super::paging::page_query(KV_CURSOR, q.limit, q.cursor.as_deref())?;
    let after = page.after.unwrap_or_default();
    let mut entries = caller
        .services
        .kv
        .list_after(&q.prefix, &after, page.limit + 1)
        .await?;
    let next = if entries.len() > page.limit {
        entries.truncate(page.limit);
        entries
            .last()
            .map(|e| super::paging::cursor_of(KV_CURSOR, &e.key))
    } else {
        None
    };
    let mut doc = json!({"ok": true, "entries": entries});
    if let Some(next) = next {
        doc["nextCursor"] = next.into();
    }
    Ok(axum::Json(doc).into_response())
}

async fn kv_get(caller: Caller, Path(key): Path<String>) -> Reply {
    match caller.services.kv.get(&key).await? {
        Some(entry) => ok("entry", entry),
        None => Err(error(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            format!("no key `{key}`"),
        )),
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PutBody {
    value: Value,
    #[serde(default)]
    ttl_seconds: Option<f64>,
}

async fn kv_put(caller: Caller, Path(key): Path<String>, bytes: Bytes) -> Reply {
    let req: PutBody = body(&bytes, "{\"value\": …, \"ttlSeconds\"?: n}")?;
    let ttl = match req.ttl_seconds {
        None => None,
        Some(s) if s.is_finite() && s > 0.0 && s < 1e12 => Some(Duration::from_secs_f64(s)),
        Some(_) => {
            return Err(error(
                StatusCode::BAD_REQUEST,
                ErrorCode::BadRequest,
                "`ttlSeconds` must be a positive number",
            ));
        }
    };
    let entry = caller.services.kv.set(&key, &req.value, ttl).await;
    ok("entry", entry?)
}

async fn kv_delete(caller: Caller, Path(key): Path<String>) -> Reply {
    ok("deleted", caller.services.kv.delete(&key).await?)
}

fn mcp_failed(e: agentkit_mcp::ClientError) -> ApiError {
    use agentkit_mcp::ClientError;
    match &e {
        ClientError::UnknownConnection { available, .. } => {
            let mut err = error(
                StatusCode::NOT_FOUND,
                ErrorCode::UnknownConnection,
                e.to_string(),
            );
            let mut details = serde_json::Map::new();
            details.insert("available".into(), json!(available));
            err.details = Some(details);
            err
        }
        ClientError::Unavailable { .. } => error(
            StatusCode::BAD_GATEWAY,
            ErrorCode::ConnectionUnavailable,
            e.to_string(),
        ),
        ClientError::Call { .. } | ClientError::InsufficientScope { .. } => error(
            StatusCode::BAD_GATEWAY,
            ErrorCode::McpCallFailed,
            e.to_string(),
        ),
    }
}

async fn mcp_list(caller: Caller) -> Reply {
    Ok(axum::Json(json!({
        "ok": true,
        "names": caller.services.mcp.connections.names(),
        "connections": caller.services.mcp.connections.status(),
    }))
    .into_response())
}

async fn mcp_tools(caller: Caller, Path(conn): Path<String>) -> Reply {
    let tools = caller
        .services
        .mcp
        .connections
        .list_tools(&conn, caller.hops)
        .await;
    ok("tools", tools.map_err(mcp_failed)?)
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CallBody {
    #[serde(default)]
    arguments: Option<Value>,
}

async fn mcp_call(
    caller: Caller,
    Path((conn, tool)): Path<(String, String)>,
    bytes: Bytes,
) -> Reply {
    let req: CallBody = if bytes.iter().all(u8::is_ascii_whitespace) {
        CallBody::default()
    } else {
        body(&bytes, "{\"arguments\": {…}}")?
    };
    let args = req.arguments.unwrap_or_else(|| json!({}));
    let result = caller
        .services
        .mcp
        .connections
        .call_tool(&conn, &tool, args, caller.hops)
        .await
        .map_err(mcp_failed)?;
    ok("result", result.to_json())
}

/// The cursor kind of the bridge's artifact pages (the public route's).
const ARTIFACT_CURSOR: &str = "r1";

/// `GET /v1/artifacts?kind=&session=&limit=&cursor=`: every artifact of
/// the agent (host code sees all sessions'), newest first.
async fn artifacts_list(caller: Caller, uri: axum::http::Uri) -> Reply {
    let Query(q) =
        Query::<agentkit_protocol::api::ArtifactListQuery>::try_from_uri(&uri).map_err(|e| {
            error(
                StatusCode::BAD_REQUEST,
                ErrorCode::BadRequest,
                format!("invalid query: {}", e.body_text()),
            )
        })?;
    let page = super::paging::page_query(ARTIFACT_CURSOR, q.limit, q.cursor.as_deref())?;
    let filter = agentkit_runtime::ArtifactFilter {
        kind: q.kind.filter(|k| !k.is_empty()),
        session: q.session.filter(|s| !s.is_empty()),
        limit: page.limit,
        after: page.after,
    };
    let page = caller.services.artifacts.list(filter).await?;
    let list = agentkit_protocol::api::ArtifactList {
        ok: true,
        artifacts: page.artifacts,
        next_cursor: page
            .next
            .as_deref()
            .map(|id| super::paging::cursor_of(ARTIFACT_CURSOR, id)),
    };
    Ok(axum::Json(list).into_response())
}

#[derive(Debug, Deserialize)]
struct MemoryQuery {
    #[serde(default)]
    limit: Option<u32>,
    #[serde(default)]
    cursor: Option<String>,
    /// With `q`: recall as this principal's sessions would.
    #[serde(default)]
    principal: Option<String>,
    #[serde(default)]
    q: Option<String>,
}

/// `GET /v1/memory`: every memory of the agent in pages (host code sees
/// all principals'), or with `q` what `recall` finds for `principal`.
async fn memory_list(caller: Caller, Query(q): Query<MemoryQuery>) -> Reply {
    let memory = &caller.services.memory;
    if let Some(query) = q.q {
        let Some(principal) = q.principal.filter(|p| !p.is_empty()) else {
            return Err(error(
                StatusCode::BAD_REQUEST,
                ErrorCode::BadRequest,
                "`q` needs `principal`: recall answers what that principal's sessions see",
            ));
        };
        let limit = q.limit.map_or(5, |n| n as usize);
        return ok("memories", memory.recall(&principal, &query, limit).await?);
    }
    let page = super::paging::page_query(MEMORY_CURSOR, q.limit, q.cursor.as_deref())?;
    let found = memory.list(page.limit, page.after.as_deref()).await?;
    let mut doc = json!({"ok": true, "memories": found.memories});
    if let Some(next) = found.next {
        doc["nextCursor"] = super::paging::cursor_of(MEMORY_CURSOR, &next).into();
    }
    Ok(axum::Json(doc).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Remember {
    #[serde(default)]
    session_id: Option<String>,
    text: String,
    #[serde(default)]
    scope: Option<String>,
}

/// `POST /v1/memory` `{sessionId?, text, scope?}`: a memory of the named
/// session, else the calling tool's (`scope` `principal` by default).
async fn memory_remember(caller: Caller, bytes: Bytes) -> Reply {
    let req: Remember = body(&bytes, "{\"sessionId\"?, \"text\", \"scope\"?}")?;
    let session = match req.session_id {
        Some(id) => id,
        None if !caller.session.is_empty() => caller.session.clone(),
        None => {
            return Err(error(
                StatusCode::BAD_REQUEST,
                ErrorCode::BadRequest,
                "`sessionId` is required outside a session's tool call",
            ));
        }
    };
    let scope = req
        .scope
        .as_deref()
        .unwrap_or(agentkit_runtime::PRINCIPAL_SCOPE);
    ok(
        "memory",
        caller
            .services
            .memory
            .remember(&session, &req.text, scope)
            .await?,
    )
}

async fn memory_get(caller: Caller, Path(id): Path<String>) -> Reply {
    ok("memory", caller.services.memory.get(&id).await?)
}

async fn memory_edit(caller: Caller, Path(id): Path<String>, bytes: Bytes) -> Reply {
    let req: agentkit_protocol::api::EditMemory = body(&bytes, "{\"text\"}")?;
    ok("memory", caller.services.memory.edit(&id, &req.text).await?)
}

async fn memory_delete(caller: Caller, Path(id): Path<String>) -> Reply {
    caller.services.memory.delete(&id).await?;
    ok("deleted", true)
}

/// `POST /v1/artifacts` `{sessionId?, kind?, key?, data}`: tags an
/// artifact in the named session, else the calling tool's; `{ok,
/// artifact}`. A kind not declared, or data not matching its schema, is
/// `400` naming why.
async fn artifacts_tag(caller: Caller, bytes: Bytes) -> Reply {
    let req: agentkit_protocol::api::TagArtifact =
        body(&bytes, "{\"sessionId\"?, \"kind\"?, \"key\"?, \"data\"}")?;
    let session = match req.session_id {
        Some(id) => id,
        None if !caller.session.is_empty() => caller.session.clone(),
        None => {
            return Err(error(
                StatusCode::BAD_REQUEST,
                ErrorCode::BadRequest,
                "`sessionId` is required outside a session's tool call",
            ));
        }
    };
    let tagged = caller
        .services
        .artifacts
        .tag(
            &session,
            agentkit_runtime::TagRequest {
                kind: req.kind,
                key: req.key,
                data: req.data,
            },
        )
        .await?;
    ok("artifact", tagged)
}

/// `GET /v1/reminders?limit=&cursor=`: the agent's reminders, newest
/// first, a page at a time; `nextCursor` while more remain.
async fn reminders_list(caller: Caller, Query(q): Query<ListQuery>) -> Reply {
    let page = super::paging::page_query(REMINDER_CURSOR, q.limit, q.cursor.as_deref())?;
    let mut reminders = caller.runtime.reminders().list().await?;
    let key = |r: &agentkit_runtime::Reminder| format!("{}\n{}", r.created_at, r.id);
    reminders.sort_by_cached_key(|r| std::cmp::Reverse(key(r)));
    let (reminders, next) = super::paging::page(reminders, REMINDER_CURSOR, &page, key);
    let mut doc = json!({"ok": true, "reminders": reminders});
    if let Some(next) = next {
        doc["nextCursor"] = next.into();
    }
    Ok(axum::Json(doc).into_response())
}

async fn reminders_create(caller: Caller, bytes: Bytes) -> Reply {
    let req: agentkit_runtime::ReminderRequest = body(
        &bytes,
        "{purpose, channelId, continuationToken, delay|every|cron|at, prompt, until?}",
    )?;
    let created = caller.runtime.reminders().create(req.into_new()?).await;
    ok("reminder", created?)
}

async fn reminders_cancel(caller: Caller, Path(id): Path<String>) -> Reply {
    ok("reminder", caller.runtime.reminders().cancel(&id).await?)
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
async fn github_request(caller: Caller, bytes: Bytes) -> Reply {
    let req: GithubBody = body(
        &bytes,
        "{\"method\", \"path\", \"body\"?, \"channel\"?, \"installation_id\"?}",
    )?;
    let client = caller
        .services
        .github
        .client(req.channel.as_deref())
        .map_err(|e| error(StatusCode::NOT_FOUND, ErrorCode::NotFound, e.to_string()))?;
    let client = match req.installation_id {
        Some(id) => client.for_installation(id),
        None => client,
    };
    match client.request(&req.method, &req.path, req.body).await {
        Ok(result) => ok("result", result),
        Err(e) => Err(error(
            StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_GATEWAY),
            e.code(),
            e.to_string(),
        )),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SlackBody {
    /// The slack channel file whose bot token to use (optional with one).
    #[serde(default)]
    channel: Option<String>,
    /// A Web API method (`chat.postMessage`, `reactions.add`, …).
    method: String,
    #[serde(default)]
    body: Value,
}

/// `POST /v1/slack` `{channel?, method, body}`: one Slack Web API call
/// with the bot token of the agent's slack channel (`host.slack` for
/// subprocess tools, route handlers, schedule commands and hooks);
/// `{ok, result}` with Slack's answer. Slack's refusals (`ok: false`,
/// `ratelimited`) are `502` `upstream_error` carrying Slack's error.
async fn slack_request(caller: Caller, bytes: Bytes) -> Reply {
    let req: SlackBody = body(&bytes, "{\"method\", \"body\"?, \"channel\"?}")?;
    let valid = !req.method.is_empty()
        && req
            .method
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_');
    if !valid {
        return Err(error(
            StatusCode::BAD_REQUEST,
            ErrorCode::BadRequest,
            format!(
                "`method` must be a Web API method like `chat.postMessage`, not `{}`",
                req.method
            ),
        ));
    }
    let client = caller
        .services
        .slack
        .client(req.channel.as_deref())
        .map_err(|e| error(StatusCode::NOT_FOUND, ErrorCode::NotFound, e.to_string()))?;
    let payload = match req.body {
        Value::Null => Value::Object(Default::default()),
        other => other,
    };
    match client.call(&req.method, &payload).await {
        Ok(result) => ok("result", result),
        Err(e) => Err(error(
            StatusCode::BAD_GATEWAY,
            ErrorCode::UpstreamError,
            format!("slack `{}`: {e}", req.method),
        )),
    }
}

/// A channel error as the bridge answers it.
fn channel_failed(e: agentkit_channels::Error) -> ApiError {
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = e.to_body();
    let message = body["error"]["message"]
        .as_str()
        .unwrap_or("the send failed")
        .to_owned();
    let mut err = error(status, e.code(), message);
    if let Some(obj) = body["error"].as_object() {
        let details: serde_json::Map<String, Value> = obj
            .iter()
            .filter(|(k, _)| !["code", "message"].contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !details.is_empty() {
            err.details = Some(details);
        }
    }
    err
}

impl Caller {
    /// Who a send acts as: the call's principal (a route's admitted one, a
    /// schedule's), else the calling session's owner, else the host.
    async fn owner(&self) -> agentkit_runtime::Owner {
        let session = if self.session.is_empty() {
            None
        } else {
            self.runtime.session_meta(&self.session).await.ok()
        };
        if let Some(p) = self.origin.as_ref().and_then(|o| o.principal.as_ref()) {
            // A call from a session stays in the session's tenant.
            return agentkit_runtime::Owner {
                principal_id: p.id.clone(),
                principal_type: p.kind.clone(),
                authenticator: p.authenticator.clone(),
                tenant: session.and_then(|m| m.owner.tenant),
                admin: false,
            };
        }
        if let Some(meta) = session {
            return meta.owner;
        }
        host_owner()
    }
}

/// `POST /v1/send` ([`HostSend`] JSON): creates or continues a session on
/// a channel, as [`Caller::owner`]; `{ok, sessionId, continuationToken,
/// isNew}`. A schedule's call counts the session as its run's.
async fn send(caller: Caller, bytes: Bytes) -> Reply {
    let mut req: HostSend = body(
        &bytes,
        "{\"message\", \"channel\"?, \"continuation\"?, \"admission\"?, \"title\"?, \"purpose\"?, \"workspaceFiles\"?, \"workspaceDir\"?, \"dryRun\"?}",
    )?;
    if req.purpose.is_none() {
        req.purpose = caller.origin.as_ref().and_then(|o| o.purpose.clone());
    }
    let sent = caller
        .services
        .sessions
        .send(req, &caller.owner().await)
        .await
        .map_err(channel_failed)?;
    if let Some(schedule) = caller.origin.as_ref().and_then(|o| o.schedule.as_deref()) {
        caller
            .runtime
            .schedules()
            .note_session(schedule, &sent.session_id);
    }
    let mut doc = serde_json::to_value(&sent).unwrap_or_default();
    if let Some(obj) = doc.as_object_mut() {
        obj.insert("ok".into(), Value::Bool(true));
    }
    Ok(axum::Json(doc).into_response())
}

/// `GET /v1/sessions/{id}`: `{ok, session: {id, channel, continuationToken,
/// principalId, createdAt, title?, purpose?, busy}}`.
async fn session_get(caller: Caller, Path(id): Path<String>) -> Reply {
    let meta = caller.services.sessions.get_session(&id).await?;
    let mut session = json!({
        "id": meta.id,
        "channel": meta.channel,
        "mode": meta.mode,
        "continuationToken": meta.continuation_token,
        "principalId": meta.owner.principal_id,
        "createdAt": meta.created_at,
        "busy": caller.services.sessions.is_busy(&id),
    });
    for (k, v) in [("title", meta.title), ("purpose", meta.purpose)] {
        if let Some(v) = v {
            session[k] = Value::String(v);
        }
    }
    ok("session", session)
}

/// The cursor kind of the bridge's workspace pages (the public route's).
const FILE_CURSOR: &str = "f1";

/// `GET /v1/sessions/{id}/files?limit=&cursor=`: `{ok, sessionId, files,
/// nextCursor?}`, any session of the agent.
async fn files_list(caller: Caller, Path(id): Path<String>, uri: axum::http::Uri) -> Reply {
    let page = super::http::list_query(&uri, FILE_CURSOR)?;
    let listed = caller
        .services
        .files
        .list(&id, page.limit, page.after)
        .await?;
    let list = agentkit_protocol::api::WorkspaceList {
        ok: true,
        session_id: id,
        files: listed.files,
        next_cursor: listed
            .next
            .as_deref()
            .map(|p| super::paging::cursor_of(FILE_CURSOR, p)),
    };
    Ok(axum::Json(list).into_response())
}

/// `GET /v1/sessions/{id}/files/{path}`: the file's bytes.
async fn files_read(caller: Caller, Path((id, path)): Path<(String, String)>) -> Reply {
    let opened = caller.services.files.open(&id, &path).await?;
    Ok(super::files::file_response(opened))
}

/// `PUT /v1/sessions/{id}/files/{path}`: writes the body; `{ok,
/// sessionId, path, size}`.
async fn files_write(
    caller: Caller,
    Path((id, path)): Path<(String, String)>,
    bytes: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Reply {
    let bytes = bytes
        .map_err(super::http::body_error)
        .map_err(super::files::over_cap)?;
    let size = caller
        .services
        .files
        .write(&id, &path, bytes.to_vec())
        .await?;
    Ok(axum::Json(agentkit_protocol::api::FileWritten {
        ok: true,
        session_id: id,
        path,
        size,
    })
    .into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EmitBody {
    text: String,
}

/// `POST /v1/sessions/{id}/messages` `{text}`: appends final assistant
/// text without a model turn; `{ok, turnId}`.
async fn session_emit(caller: Caller, Path(id): Path<String>, bytes: Bytes) -> Reply {
    let req: EmitBody = body(&bytes, "{\"text\": \"…\"}")?;
    let turn = caller
        .services
        .sessions
        .emit_assistant_message(&id, &req.text)
        .await?;
    ok("turnId", turn)
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolBody {
    #[serde(default)]
    input: Option<Value>,
}

/// `POST /v1/tools/{name}` `{input}`: a deterministic call of a server
/// tool (host-only tools included) in an ephemeral workspace, acting for
/// the caller's origin; `{ok, toolName, callId, isError, result,
/// durationMs}`.
async fn tool_call(caller: Caller, Path(name): Path<String>, bytes: Bytes) -> Reply {
    let req: ToolBody = if bytes.iter().all(u8::is_ascii_whitespace) {
        ToolBody::default()
    } else {
        body(&bytes, "{\"input\": {…}}")?
    };
    let origin = caller.origin.clone().unwrap_or_default();
    if origin.model_turn
        && caller
            .runtime
            .agent()
            .tool(&name)
            .is_some_and(|t| t.expose == agentkit_manifest::Expose::Host)
    {
        return Err(error(
            StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            format!(
                "tool `{name}` is host-only (`expose = \"host\"`): a tool the model runs cannot call it"
            ),
        ));
    }
    let outcome = caller
        .runtime
        .tool_calls()
        .call_from(&name, req.input.unwrap_or_else(|| json!({})), None, origin)
        .await?;
    let mut doc = serde_json::to_value(&outcome).unwrap_or_default();
    if let Some(obj) = doc.as_object_mut() {
        obj.insert("ok".into(), Value::Bool(true));
    }
    Ok(axum::Json(doc).into_response())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use agentkit_harness::BridgeCredentials;

    #[test]
    fn call_credentials_are_bound_to_their_session_and_revoked_on_drop() {
        let secret: Arc<str> = mint_token();
        let issuer = Issuer {
            secret: secret.clone(),
            calls: CallTokens::default(),
            depths: Depths::default(),
        };
        let credential = issuer.issue("s1", "call_1", &CallOrigin::default());
        let token = credential.token().to_owned();
        assert!(token.starts_with(CALL_PREFIX));
        assert!(!token.contains(&*secret));
        assert_eq!(issuer.calls.live(), 1);
        let (id, mac) = token[CALL_PREFIX.len()..].split_once('.').unwrap();
        assert!(agentkit_auth::verify_bridge_call(&secret, id, "s1", 0, mac));
        // Another session or depth does not match the MAC.
        assert!(!agentkit_auth::verify_bridge_call(
            &secret, id, "s2", 0, mac
        ));
        assert!(!agentkit_auth::verify_bridge_call(
            &secret, id, "s1", 1, mac
        ));
        assert!(!agentkit_auth::verify_bridge_call(
            &mint_token(),
            id,
            "s1",
            0,
            mac
        ));
        assert_eq!(format!("{credential:?}"), "CallCredential(<redacted>)");
        drop(credential);
        assert_eq!(issuer.calls.live(), 0);
    }
}
