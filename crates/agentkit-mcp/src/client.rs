//! MCP client connections of one agent: stdio children, streamable-HTTP
//! servers and peer agents, opened lazily on first use.
//!
//! A stdio connection, once opened, is kept alive by a supervisor task
//! that owns the child: it notices the exit (`wait`), marks the connection
//! `restarting` (attempt count, how the child ended, when the next attempt
//! is), and starts it again with exponential backoff and jitter (the first
//! restart after a stable run is immediate; the count resets once a child
//! has run for [`ClientOptions::stable_after`]). An HTTP connection whose
//! transport closed is reopened on its next use, failed opens backing off
//! the same way. [`Connections::close`] stops the supervisors and kills the
//! children's process groups when the server shuts down.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use rmcp::service::{Peer, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde::Serialize;
use serde_json::Value;
use tokio::io::AsyncBufReadExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use agentkit_harness::{ChildSpec, LiveChild, spawn_child};

use crate::server::HOPS_HEADER;

/// Mints the bearer of an `auth = "agent-identity"` connection (the
/// facade signs it): a token for calls made in `session` (`None`: outside
/// any session), and how long it may be sent before a fresh one is due.
pub trait IdentitySource: Send + Sync {
    fn token(&self, session: Option<&str>) -> IdentityFuture<'_>;
}

/// What [`IdentitySource::token`] answers: the token and how long to use
/// it, or why there is none (a message without the token).
pub type IdentityFuture<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<(String, Duration), String>> + Send + 'a>,
>;

/// The most clients an agent-identity connection keeps open (one per
/// session and depth); the stalest goes first.
const MAX_IDENTITY_CLIENTS: usize = 64;

/// How a connection reaches its server, with every `${VAR}` resolved.
#[derive(Clone)]
pub enum Target {
    /// Streamable HTTP. `peer` connections forward the delegation depth
    /// in [`HOPS_HEADER`].
    Http {
        url: String,
        headers: Vec<(String, String)>,
        peer: bool,
        /// `oauth = true`: the file `agentkit mcp login` stores the
        /// connection's tokens in; each request carries its access token.
        oauth: Option<PathBuf>,
        /// `auth = "agent-identity"`: each client carries a token minted
        /// for the session it serves, renewed before it goes stale.
        identity: Option<Arc<dyn IdentitySource>>,
    },
    /// A child process speaking MCP on stdin/stdout.
    Stdio {
        command: PathBuf,
        args: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<PathBuf>,
    },
}

impl std::fmt::Debug for Target {
    // Headers and environment values hold secrets: never print them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Http { url, peer, .. } => f
                .debug_struct("Http")
                .field("url", url)
                .field("peer", peer)
                .finish_non_exhaustive(),
            Target::Stdio { command, args, .. } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .finish_non_exhaustive(),
        }
    }
}

impl Target {
    fn kind(&self) -> &'static str {
        match self {
            Target::Http { peer: true, .. } => "peer",
            Target::Http { .. } => "http",
            Target::Stdio { .. } => "stdio",
        }
    }
}

/// One connection to open.
#[derive(Debug, Clone)]
pub struct ConnectionSpec {
    pub name: String,
    pub description: Option<String>,
    pub target: Target,
}

/// A tool a connection's server offers.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct McpTool {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    /// The server's `readOnlyHint`.
    pub read_only: bool,
}

/// What a server answered to a tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct McpCallResult {
    pub is_error: bool,
    /// The content blocks, as MCP JSON (`[{"type": "text", "text": …}]`).
    pub content: Value,
    pub structured: Option<Value>,
}

impl McpCallResult {
    /// The MCP result object: `{content, structuredContent?, isError}`.
    pub fn to_json(&self) -> Value {
        let mut obj = serde_json::Map::new();
        obj.insert("content".into(), self.content.clone());
        if let Some(s) = &self.structured {
            obj.insert("structuredContent".into(), s.clone());
        }
        obj.insert("isError".into(), Value::Bool(self.is_error));
        Value::Object(obj)
    }

    /// What a model sees: the structured content when there is some, the
    /// text when every block is text, else the blocks.
    pub fn model_output(&self) -> Value {
        if let Some(s) = &self.structured {
            return s.clone();
        }
        let blocks = self.content.as_array().map(Vec::as_slice).unwrap_or(&[]);
        let texts: Option<Vec<&str>> = blocks
            .iter()
            .map(|b| {
                (b.get("type").and_then(Value::as_str) == Some("text"))
                    .then(|| b.get("text").and_then(Value::as_str))
                    .flatten()
            })
            .collect();
        match texts {
            Some(t) if !t.is_empty() => Value::String(t.join("\n")),
            _ => self.content.clone(),
        }
    }
}

/// Why a connection could not answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClientError {
    #[error("no MCP connection `{name}`; available: {}", if .available.is_empty() { "none".to_owned() } else { .available.join(", ") })]
    UnknownConnection {
        name: String,
        available: Vec<String>,
    },
    #[error("MCP connection `{name}` is unavailable: {message}")]
    Unavailable { name: String, message: String },
    #[error("MCP connection `{name}`: `{tool}` failed: {message}")]
    Call {
        name: String,
        tool: String,
        message: String,
    },
    /// The server answered `403` `insufficient_scope`: the token needs more
    /// scopes, which takes a new authorization (`agentkit mcp login`).
    #[error("MCP connection `{name}`: `{tool}` needs more OAuth scopes than the token has: log in again with `agentkit mcp login {name}{}`", .scope.as_deref().map(|s| format!(" --scope '{s}'")).unwrap_or_default())]
    InsufficientScope {
        name: String,
        tool: String,
        /// The `scope` of the server's challenge, when it names one.
        scope: Option<String>,
    },
}

/// The `scope` of a `403 insufficient_scope` challenge behind `e`
/// (`Some(None)` when it names none); `None` for any other failure.
fn insufficient_scope(e: &rmcp::ServiceError) -> Option<Option<String>> {
    let header = e.auth_challenge()?;
    header
        .contains("insufficient_scope")
        .then(|| crate::oauth::challenge_param(header, "scope"))
}

/// A connection's live state, as `GET /v1/info` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionStatus {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `http`, `stdio` or `peer`.
    pub transport: &'static str,
    /// `idle` (not opened yet), `starting`, `connected`, `restarting` (a
    /// stdio child that exited or failed to start, started again in the
    /// background), `error` (an HTTP open or call failed) or `closed`.
    pub state: &'static str,
    /// Why the connection is not connected (the last failure).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How many times the client was (re)opened.
    pub opens: u32,
    /// Tools seen at the last listing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<usize>,
    /// The stdio child's process id while it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// How many times a stdio child that had started exited.
    #[serde(skip_serializing_if = "is_zero")]
    pub exits: u32,
    /// Failed starts and early exits in a row (0 once a child has run for
    /// the stable period, or an HTTP connection opened).
    #[serde(skip_serializing_if = "is_zero")]
    pub attempt: u32,
    /// How the last stdio child ended (exit status and its last stderr
    /// line); kept after the restart.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_exit: Option<String>,
    /// Milliseconds until the next attempt to (re)open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_in_ms: Option<u64>,
    /// The MCP revision the open client speaks (`2026-07-28`, or
    /// `2025-11-25` with a server that does not offer it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// How connections are opened and kept alive.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// How long opening a connection (spawn + handshake) may take.
    pub open_timeout: Duration,
    /// The pause after the second failure in a row (doubling, with
    /// jitter, up to `max_backoff`); the first restart after a stable run
    /// is immediate.
    pub backoff: Duration,
    /// The longest pause between two attempts.
    pub max_backoff: Duration,
    /// How long a stdio child must run for its failure count to reset.
    pub stable_after: Duration,
    /// On shutdown, how long a stdio child may take to exit after its
    /// stdin closes before its process group is killed.
    pub stop_grace: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            open_timeout: Duration::from_secs(30),
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            stable_after: Duration::from_secs(60),
            stop_grace: Duration::from_secs(2),
        }
    }
}

impl ClientOptions {
    /// The pause before the next attempt after `failures` failures in a
    /// row: none after the first, then the harness's backoff
    /// ([`agentkit_harness::RetryPolicy::delay`]) from `backoff` doubling
    /// up to `max_backoff`, each a random time between half of it and all
    /// of it so children that died together do not restart in lockstep.
    fn pause(&self, failures: u32) -> Duration {
        if failures <= 1 {
            return Duration::ZERO;
        }
        // The policy's first ceiling is twice its base: start at `backoff`.
        let policy = agentkit_harness::RetryPolicy {
            base_delay: (self.backoff / 2).min(self.max_backoff / 2),
            max_delay: self.max_backoff,
            ..agentkit_harness::RetryPolicy::default()
        };
        policy.delay(failures - 2)
    }
}

type Client = RunningService<RoleClient, ()>;

#[derive(Default)]
struct Open {
    /// Keyed by delegation depth (always 0 except for peers, whose
    /// requests carry it in a header fixed per client) and, on
    /// agent-identity connections, the session (whose token the client
    /// carries), with the instant that token is due for renewal.
    clients: HashMap<(u32, String), (Client, Option<Instant>)>,
    /// The OAuth access token the open clients send.
    token: Option<String>,
    failures: u32,
    retry_at: Option<Instant>,
    last_error: Option<String>,
}

/// The status shown in `/v1/info`, with the instant of the next attempt
/// (rendered relative to the moment it is read).
struct StatusCell {
    status: ConnectionStatus,
    retry_at: Option<Instant>,
}

type SharedStatus = Arc<Mutex<StatusCell>>;

/// What a stdio connection's supervisor publishes to callers.
#[derive(Clone)]
enum Live {
    /// Not started yet (connections open lazily).
    Idle,
    /// A child is being spawned and greeted.
    Starting,
    Up(Peer<RoleClient>),
    /// Waiting to start again.
    Down {
        message: String,
        retry_at: Instant,
    },
    /// The server stopped.
    Closed,
}

/// The supervisor of one stdio connection: started on first use, it owns
/// the child and restarts it until [`Connections::close`].
struct Supervisor {
    live: tokio::sync::watch::Sender<Live>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

struct Conn {
    spec: ConnectionSpec,
    /// `oauth = true` connections: their access tokens.
    tokens: Option<crate::oauth::TokenSource>,
    /// HTTP clients (stdio connections use `child`).
    open: tokio::sync::Mutex<Open>,
    status: SharedStatus,
    child: Option<Supervisor>,
}

/// The MCP connections of one agent. Cheap to clone.
#[derive(Clone)]
pub struct Connections {
    conns: Arc<Vec<Conn>>,
    options: ClientOptions,
    stop: CancellationToken,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections")
            .field("names", &self.names())
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn edit(status: &SharedStatus, f: impl FnOnce(&mut StatusCell)) {
    f(&mut lock(status));
}

impl Connections {
    /// Nothing opens until first use.
    pub fn new(specs: Vec<ConnectionSpec>, options: ClientOptions) -> Connections {
        let conns = specs
            .into_iter()
            .map(|spec| Conn {
                tokens: match &spec.target {
                    Target::Http {
                        oauth: Some(file), ..
                    } => Some(crate::oauth::TokenSource::new(&spec.name, file.clone())),
                    _ => None,
                },
                status: Arc::new(Mutex::new(StatusCell {
                    status: ConnectionStatus {
                        name: spec.name.clone(),
                        description: spec.description.clone(),
                        transport: spec.target.kind(),
                        state: "idle",
                        error: None,
                        opens: 0,
                        tools: None,
                        pid: None,
                        exits: 0,
                        attempt: 0,
                        last_exit: None,
                        retry_in_ms: None,
                        protocol: None,
                    },
                    retry_at: None,
                })),
                child: matches!(spec.target, Target::Stdio { .. }).then(|| Supervisor {
                    live: tokio::sync::watch::Sender::new(Live::Idle),
                    task: Mutex::new(None),
                }),
                spec,
                open: tokio::sync::Mutex::new(Open::default()),
            })
            .collect();
        Connections {
            conns: Arc::new(conns),
            options,
            stop: CancellationToken::new(),
        }
    }

    /// The description of connection `name`.
    pub fn description(&self, name: &str) -> Option<String> {
        self.conn(name)
            .ok()
            .and_then(|c| c.spec.description.clone())
    }

    /// The connections' names, in file order.
    pub fn names(&self) -> Vec<String> {
        self.conns.iter().map(|c| c.spec.name.clone()).collect()
    }

    /// Every connection's live state.
    pub fn status(&self) -> Vec<ConnectionStatus> {
        let now = Instant::now();
        self.conns
            .iter()
            .map(|c| {
                let cell = lock(&c.status);
                let mut status = cell.status.clone();
                status.retry_in_ms = cell.retry_at.map(|at| {
                    u64::try_from(at.saturating_duration_since(now).as_millis()).unwrap_or(u64::MAX)
                });
                status
            })
            .collect()
    }

    fn conn(&self, name: &str) -> Result<&Conn, ClientError> {
        self.conns
            .iter()
            .find(|c| c.spec.name == name)
            .ok_or_else(|| ClientError::UnknownConnection {
                name: name.to_owned(),
                available: self.names(),
            })
    }

    /// The tools of connection `name` (opening it if needed).
    pub async fn list_tools(&self, name: &str, hops: u32) -> Result<Vec<McpTool>, ClientError> {
        self.list_tools_in(name, hops, None).await
    }

    /// [`Connections::list_tools`] for a turn of `session`: an
    /// agent-identity connection sends a token naming it.
    pub async fn list_tools_in(
        &self,
        name: &str,
        hops: u32,
        session: Option<&str>,
    ) -> Result<Vec<McpTool>, ClientError> {
        let conn = self.conn(name)?;
        let peer = self.peer(conn, hops, session).await?;
        let mut listed = peer.list_all_tools().await;
        if let Err(e) = &listed
            && self.refreshed_after_refusal(conn, &e.to_string()).await
        {
            listed = self.peer(conn, hops, session).await?.list_all_tools().await;
        }
        let tools = listed.map_err(|e| {
            if let Some(scope) = insufficient_scope(&e) {
                return ClientError::InsufficientScope {
                    name: name.to_owned(),
                    tool: "tools/list".into(),
                    scope,
                };
            }
            self.failed(conn, &e.to_string());
            ClientError::Call {
                name: name.to_owned(),
                tool: "tools/list".into(),
                message: e.to_string(),
            }
        })?;
        let tools: Vec<McpTool> = tools
            .into_iter()
            .map(|t| McpTool {
                name: t.name.to_string(),
                description: t.description.map(|d| d.to_string()).unwrap_or_default(),
                input_schema: Value::Object((*t.input_schema).clone()),
                read_only: t
                    .annotations
                    .as_ref()
                    .and_then(|a| a.read_only_hint)
                    .unwrap_or(false),
            })
            .collect();
        edit(&conn.status, |c| c.status.tools = Some(tools.len()));
        Ok(tools)
    }

    /// Calls `tool` of connection `name` with `args` (an object). `hops`
    /// is the delegation depth of the turn that calls (peers forward it
    /// plus one).
    pub async fn call_tool(
        &self,
        name: &str,
        tool: &str,
        args: Value,
        hops: u32,
    ) -> Result<McpCallResult, ClientError> {
        self.call_tool_in(name, tool, args, hops, None).await
    }

    /// [`Connections::call_tool`] for a turn of `session`: an
    /// agent-identity connection sends a token naming it.
    pub async fn call_tool_in(
        &self,
        name: &str,
        tool: &str,
        args: Value,
        hops: u32,
        session: Option<&str>,
    ) -> Result<McpCallResult, ClientError> {
        let conn = self.conn(name)?;
        let arguments = match args {
            Value::Object(map) => Some(map),
            Value::Null => None,
            other => {
                return Err(ClientError::Call {
                    name: name.to_owned(),
                    tool: tool.to_owned(),
                    message: format!("arguments must be a JSON object, not {other}"),
                });
            }
        };
        let mut peer = self.peer(conn, hops, session).await?;
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = arguments;
        // The calling span (the turn's `execute_tool`), while tracing is on.
        if let Some(tp) = agentkit_harness::trace::current() {
            let mut meta = rmcp::model::RequestMetaObject::new();
            meta.insert("traceparent".into(), Value::String(tp.to_string()));
            params.meta = Some(meta);
        }
        let mut called = call_rounds(&peer, params.clone()).await;
        if let Err(e) = &called
            && self.refreshed_after_refusal(conn, &e.to_string()).await
        {
            peer = self.peer(conn, hops, session).await?;
            called = call_rounds(&peer, params).await;
        }
        let call_error = |message: String| ClientError::Call {
            name: name.to_owned(),
            tool: tool.to_owned(),
            message,
        };
        let result = called
            .map_err(|e| {
                if let Some(scope) = insufficient_scope(&e) {
                    return ClientError::InsufficientScope {
                        name: name.to_owned(),
                        tool: tool.to_owned(),
                        scope,
                    };
                }
                if peer.is_transport_closed() {
                    self.failed(conn, &e.to_string());
                }
                call_error(e.to_string())
            })?
            .map_err(call_error)?;
        Ok(McpCallResult {
            is_error: result.is_error.unwrap_or(false),
            content: serde_json::to_value(&result.content).unwrap_or(Value::Null),
            structured: result.structured_content,
        })
    }

    /// After a failure that says the server refused the access token of an
    /// `oauth = true` connection: refreshes it and drops the clients that
    /// sent it, so the caller can retry once. False when there is nothing
    /// to refresh (not OAuth, not a refusal, or the refresh failed).
    async fn refreshed_after_refusal(&self, conn: &Conn, error: &str) -> bool {
        let Some(tokens) = &conn.tokens else {
            return false;
        };
        if !is_auth_refusal(error) {
            return false;
        }
        let mut open = conn.open.lock().await;
        let stale = open.token.take();
        open.clients.clear();
        match tokens.access_token(stale.as_deref()).await {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(connection = %conn.spec.name, error = %e, "MCP OAuth refresh after a refusal failed");
                false
            }
        }
    }

    /// Records a failed call on an HTTP connection (a stdio child's
    /// supervisor records its own exits).
    fn failed(&self, conn: &Conn, message: &str) {
        if conn.child.is_some() {
            return;
        }
        edit(&conn.status, |c| {
            c.status.state = "error";
            c.status.error = Some(message.to_owned());
        });
    }

    /// A live client of `conn`, opened (or reopened) if needed.
    async fn peer(
        &self,
        conn: &Conn,
        hops: u32,
        session: Option<&str>,
    ) -> Result<Peer<RoleClient>, ClientError> {
        match &conn.child {
            Some(supervisor) => self.child_peer(conn, supervisor).await,
            None => self.http_peer(conn, hops, session).await,
        }
    }

    /// The supervised child's client: starts the supervisor on first use,
    /// and waits (up to the open timeout) while a child is starting.
    async fn child_peer(
        &self,
        conn: &Conn,
        supervisor: &Supervisor,
    ) -> Result<Peer<RoleClient>, ClientError> {
        let unavailable = |message: String| ClientError::Unavailable {
            name: conn.spec.name.clone(),
            message,
        };
        {
            let mut task = lock(&supervisor.task);
            if task.is_none() && !self.stop.is_cancelled() {
                supervisor.live.send_replace(Live::Starting);
                *task = Some(tokio::spawn(supervise(
                    conn.spec.clone(),
                    self.options.clone(),
                    supervisor.live.clone(),
                    conn.status.clone(),
                    self.stop.clone(),
                )));
            }
        }
        let mut live = supervisor.live.subscribe();
        // Long enough for a start that is due now plus its handshake.
        let deadline = Instant::now() + self.options.open_timeout + Duration::from_secs(1);
        loop {
            let current = live.borrow_and_update().clone();
            match current {
                Live::Up(peer) if !peer.is_transport_closed() => return Ok(peer),
                // A restart due now is worth waiting for (the first one
                // after a crash is immediate).
                Live::Down { message, retry_at } if retry_at > Instant::now() => {
                    let wait = retry_at.saturating_duration_since(Instant::now());
                    return Err(unavailable(format!(
                        "{message} (restarting; next attempt in {}s)",
                        wait.as_secs_f64().ceil().max(1.0)
                    )));
                }
                Live::Closed => return Err(unavailable("the server is shutting down".into())),
                // Starting, or up with a closed transport: the supervisor
                // is about to publish what happens next.
                Live::Idle | Live::Starting | Live::Up(_) | Live::Down { .. } => {}
            }
            match tokio::time::timeout_at(deadline, live.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(unavailable("the server is shutting down".into())),
                Err(_) => {
                    return Err(unavailable(format!(
                        "did not come up within {}s",
                        self.options.open_timeout.as_secs()
                    )));
                }
            }
        }
    }

    async fn http_peer(
        &self,
        conn: &Conn,
        hops: u32,
        session: Option<&str>,
    ) -> Result<Peer<RoleClient>, ClientError> {
        let depth = match conn.spec.target {
            Target::Http { peer: true, .. } => hops.saturating_add(1),
            _ => 0,
        };
        let identity = match &conn.spec.target {
            Target::Http {
                identity: Some(identity),
                ..
            } => Some(identity),
            _ => None,
        };
        // Clients of an agent-identity connection carry their session's
        // token: one client per session.
        let key = (
            depth,
            match identity {
                Some(_) => session.unwrap_or_default().to_owned(),
                None => String::new(),
            },
        );
        let mut open = conn.open.lock().await;
        // An OAuth connection's token, refreshed when it nears expiry; a
        // new token means new clients.
        let token = match &conn.tokens {
            Some(tokens) => match tokens.access_token(None).await {
                Ok(t) => Some(t),
                Err(e) => {
                    let message = e.to_string();
                    edit(&conn.status, |c| {
                        c.status.state = "error";
                        c.status.error = Some(message.clone());
                    });
                    return Err(ClientError::Unavailable {
                        name: conn.spec.name.clone(),
                        message,
                    });
                }
            },
            None => None,
        };
        if open.token != token {
            open.clients.clear();
            open.token = token.clone();
        }
        if let Some((client, renew_at)) = open.clients.get(&key) {
            let fresh = renew_at.is_none_or(|at| Instant::now() < at);
            if fresh && !client.is_closed() && !client.peer().is_transport_closed() {
                return Ok(client.peer().clone());
            }
            if fresh {
                tracing::warn!(connection = %conn.spec.name, "MCP connection closed; reopening");
            }
            if let Some((stale, _)) = open.clients.remove(&key) {
                let _ = stale.cancel().await;
            }
        }
        if let Some(at) = open.retry_at
            && Instant::now() < at
        {
            let wait = at.saturating_duration_since(Instant::now());
            return Err(ClientError::Unavailable {
                name: conn.spec.name.clone(),
                message: format!(
                    "{} (next attempt in {}s)",
                    open.last_error.as_deref().unwrap_or("it failed to open"),
                    wait.as_secs_f64().ceil().max(1.0)
                ),
            });
        }
        if self.stop.is_cancelled() {
            return Err(ClientError::Unavailable {
                name: conn.spec.name.clone(),
                message: "the server is shutting down".into(),
            });
        }
        // An agent-identity connection's token for this session, fresh.
        let minted = match identity {
            Some(identity) => match identity.token(session).await {
                Ok((token, fresh_for)) => Some((token, Instant::now() + fresh_for)),
                Err(message) => {
                    return Err(ClientError::Unavailable {
                        name: conn.spec.name.clone(),
                        message,
                    });
                }
            },
            None => None,
        };
        let renew_at = minted.as_ref().map(|(_, at)| *at);
        let bearer = minted.map(|(token, _)| token).or_else(|| token.clone());
        let mut opened = match tokio::time::timeout(
            self.options.open_timeout,
            connect_http(&conn.spec, depth, bearer.as_deref()),
        )
        .await
        {
            Ok(r) => r,
            Err(_) => Err(format!(
                "did not answer the MCP handshake within {}s",
                self.options.open_timeout.as_secs()
            )),
        };
        // A refused token (revoked, or expired early): refresh once, retry.
        if let (Err(message), Some(tokens)) = (&opened, &conn.tokens)
            && is_auth_refusal(message)
            && let Ok(fresh) = tokens.access_token(token.as_deref()).await
        {
            open.token = Some(fresh.clone());
            opened = match tokio::time::timeout(
                self.options.open_timeout,
                connect_http(&conn.spec, depth, Some(&fresh)),
            )
            .await
            {
                Ok(r) => r,
                Err(_) => Err("did not answer the MCP handshake in time".to_owned()),
            };
        }
        match opened {
            Ok(client) => {
                let peer = client.peer().clone();
                if open.clients.len() >= MAX_IDENTITY_CLIENTS
                    && let Some(stalest) = open
                        .clients
                        .iter()
                        .min_by_key(|(_, (_, at))| *at)
                        .map(|(k, _)| k.clone())
                    && let Some((gone, _)) = open.clients.remove(&stalest)
                {
                    let _ = gone.cancel().await;
                }
                open.clients.insert(key, (client, renew_at));
                open.failures = 0;
                open.retry_at = None;
                open.last_error = None;
                edit(&conn.status, |c| {
                    c.status.protocol = protocol_of(&peer);
                    c.status.state = "connected";
                    c.status.error = None;
                    c.status.attempt = 0;
                    c.status.opens += 1;
                    c.retry_at = None;
                });
                Ok(peer)
            }
            Err(message) => {
                open.failures += 1;
                // The first failure already waits `backoff`: an HTTP open
                // is retried only when something uses the connection.
                let pause = self.options.pause(open.failures + 1);
                let retry_at = Instant::now() + pause;
                open.retry_at = Some(retry_at);
                open.last_error = Some(message.clone());
                tracing::warn!(connection = %conn.spec.name, error = %message, retry_in = ?pause, "MCP connection failed to open");
                edit(&conn.status, |c| {
                    c.status.state = "error";
                    c.status.error = Some(message.clone());
                    c.status.attempt = open.failures;
                    c.retry_at = Some(retry_at);
                });
                Err(ClientError::Unavailable {
                    name: conn.spec.name.clone(),
                    message,
                })
            }
        }
    }

    /// Stops every client: supervisors close their children's stdin, give
    /// them [`ClientOptions::stop_grace`] to exit and kill their process
    /// groups; HTTP clients are cancelled. Nothing opens afterwards.
    pub async fn close(&self) {
        self.stop.cancel();
        for conn in self.conns.iter() {
            if let Some(supervisor) = &conn.child {
                let task = lock(&supervisor.task).take();
                if let Some(task) = task {
                    let _ = task.await;
                }
                supervisor.live.send_replace(Live::Closed);
            }
            let clients: Vec<Client> = {
                let mut open = conn.open.lock().await;
                open.clients.drain().map(|(_, (c, _))| c).collect()
            };
            for client in clients {
                let _ = client.cancel().await;
            }
            edit(&conn.status, |c| {
                if c.status.state != "idle" {
                    c.status.state = "closed";
                }
                c.status.pid = None;
                c.retry_at = None;
            });
        }
    }
}

/// The most rounds of input requests one call answers.
const MAX_INPUT_ROUNDS: usize = 10;

/// One `tools/call`, with the rounds of a server that answers it with
/// input requests (MCP 2026-07-28's `InputRequiredResult`): the call is
/// sent again with the answers and the `requestState` echoed unchanged
/// (none when the server sent none). No person takes part in an agent's
/// call, so an elicitation is declined and a roots request answered with
/// no roots; a server that asks for sampling, or keeps asking, gets no
/// result (the inner error says why).
async fn call_rounds(
    peer: &Peer<RoleClient>,
    mut params: CallToolRequestParams,
) -> Result<Result<rmcp::model::CallToolResult, String>, rmcp::ServiceError> {
    use rmcp::model::{CallToolResponse, InputRequest, InputResponses};
    for _ in 0..MAX_INPUT_ROUNDS {
        let asked = match peer.call_tool_once(params.clone()).await? {
            CallToolResponse::Complete(result) => return Ok(Ok(result)),
            CallToolResponse::InputRequired(asked) => asked,
            _ => {
                return Ok(Err(
                    "the server answered with a task, which this client never asks for".into(),
                ));
            }
        };
        let mut answers = InputResponses::new();
        for (key, request) in asked.input_requests.iter().flatten() {
            let answer = match request {
                InputRequest::Elicitation(_) => serde_json::json!({"action": "decline"}),
                InputRequest::ListRoots(_) => serde_json::json!({"roots": []}),
                _ => {
                    return Ok(Err(format!(
                        "the server asks for input (`{key}`) that an agent's connection cannot give (sampling)"
                    )));
                }
            };
            answers.insert(key.clone(), answer);
        }
        params.input_responses = (!answers.is_empty()).then_some(answers);
        params.request_state = asked.request_state;
    }
    Ok(Err(format!(
        "the server still asks for input after {MAX_INPUT_ROUNDS} rounds"
    )))
}

/// Dials a streamable-HTTP server and runs the MCP handshake.
/// Does an error say the server refused the credentials (HTTP 401)?
fn is_auth_refusal(error: &str) -> bool {
    error.contains("Auth required") || error.contains("authorization required")
}

async fn connect_http(
    spec: &ConnectionSpec,
    hops: u32,
    token: Option<&str>,
) -> Result<Client, String> {
    let Target::Http {
        url, headers, peer, ..
    } = &spec.target
    else {
        return Err("not an HTTP connection".into());
    };
    let mut custom = HashMap::new();
    for (k, v) in headers {
        let name =
            http::HeaderName::try_from(k.as_str()).map_err(|e| format!("header `{k}`: {e}"))?;
        let value = http::HeaderValue::try_from(v.as_str())
            .map_err(|_| format!("header `{k}` has a value that cannot be sent"))?;
        custom.insert(name, value);
    }
    if *peer {
        custom.insert(
            http::HeaderName::from_static(HOPS_HEADER),
            http::HeaderValue::from(hops),
        );
    }
    let mut config =
        StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(custom);
    config.allow_stateless = true;
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    let transport = StreamableHttpClientTransport::from_config(config.clone());
    match ().serve_with_lifecycle(transport, lifecycle()).await {
        Ok(client) => Ok(client),
        Err(e) if e.is_authorization_required() => Err(format!("{url}: {e}")),
        // A server that refused `server/discover` in a way the SDK does
        // not read as "a 2025-11-25 server" (an HTTP error rather than a
        // JSON-RPC one): the 2025-11-25 handshake on a fresh transport.
        Err(modern) => {
            let transport = StreamableHttpClientTransport::from_config(config);
            ().serve_with_lifecycle(transport, ClientLifecycleMode::Initialize)
                .await
                .map_err(|e| format!("{url}: {e} (and server/discover: {modern})"))
        }
    }
}

/// MCP 2026-07-28 (`server/discover`, per-request `_meta`) with servers
/// that offer it; with one that answers the probe as a 2025-11-25 server
/// does (or not at all within the SDK's 10 s), the `initialize` handshake
/// of 2025-11-25.
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

/// The revision an open client speaks.
fn protocol_of(peer: &Peer<RoleClient>) -> Option<String> {
    peer.peer_info()
        .map(|info| info.protocol_version.as_str().to_owned())
}

/// A started stdio child and its MCP client.
struct Child {
    /// Its process group dies with it (or on `kill` / `close`).
    process: LiveChild,
    client: Client,
    stderr: StderrTail,
}

/// The last lines a child wrote on stderr (each also goes to the log at
/// `debug`), for the status of a child that died.
#[derive(Clone, Default)]
struct StderrTail(Arc<Mutex<(std::collections::VecDeque<String>, bool)>>);

impl StderrTail {
    const LINES: usize = 3;

    fn follow(&self, name: String, stderr: tokio::process::ChildStderr) {
        let tail = self.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(connection = %name, "{line}");
                let mut t = lock(&tail.0);
                if t.0.len() == Self::LINES {
                    t.0.pop_front();
                }
                t.0.push_back(line.chars().take(300).collect());
            }
            lock(&tail.0).1 = true;
        });
    }

    /// The tail, once the child's stderr closed (or after a short wait).
    async fn read(&self) -> String {
        for _ in 0..20 {
            if lock(&self.0).1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        let t = lock(&self.0);
        t.0.iter()
            .map(String::as_str)
            .filter(|l| !l.trim().is_empty())
            .collect::<Vec<_>>()
            .join(" | ")
    }
}

/// Spawns a stdio child (scrubbed environment, its own process group) and
/// runs the MCP handshake over its stdin/stdout: 2026-07-28 where the
/// server offers it ([`lifecycle`]). A server that answers the
/// `server/discover` probe with something the SDK cannot read as either
/// revision (a hand-written server that answers every method with `{}`)
/// is started again for the 2025-11-25 handshake alone.
async fn spawn_stdio(spec: &ConnectionSpec) -> Result<Child, String> {
    match handshake(spec, lifecycle()).await {
        Ok(child) => Ok(child),
        Err(Handshake::Spawn(message) | Handshake::Crashed(message)) => Err(message),
        Err(Handshake::Refused(modern)) => {
            tracing::debug!(connection = %spec.name, error = %modern, "MCP 2026-07-28 probe failed; starting the server again for 2025-11-25");
            handshake(spec, ClientLifecycleMode::Initialize)
                .await
                .map_err(|e| match e {
                    Handshake::Spawn(m) | Handshake::Crashed(m) | Handshake::Refused(m) => m,
                })
        }
    }
}

/// Why a stdio start failed (each message says how the child ended when
/// it did): it could not start, it failed (exited unsuccessfully), or its
/// handshake failed otherwise.
enum Handshake {
    Spawn(String),
    Crashed(String),
    Refused(String),
}

async fn handshake(
    spec: &ConnectionSpec,
    lifecycle: ClientLifecycleMode,
) -> Result<Child, Handshake> {
    let Target::Stdio {
        command,
        args,
        env,
        cwd,
    } = &spec.target
    else {
        return Err(Handshake::Spawn("not a stdio connection".into()));
    };
    let mut child_spec = ChildSpec::new(command).args(args).envs(env.iter().cloned());
    if let Some(cwd) = cwd {
        child_spec = child_spec.cwd(cwd);
    }
    let mut process = spawn_child(&child_spec)
        .map_err(|e| Handshake::Spawn(format!("cannot start `{}`: {e}", command.display())))?;
    let stderr = StderrTail::default();
    if let Some(err) = process.take_stderr() {
        stderr.follow(spec.name.clone(), err);
    }
    let (Some(stdout), Some(stdin)) = (process.take_stdout(), process.take_stdin()) else {
        return Err(Handshake::Spawn(format!(
            "`{}`: no stdio pipes",
            command.display()
        )));
    };
    match ().serve_with_lifecycle((stdout, stdin), lifecycle).await {
        Ok(client) => Ok(Child {
            process,
            client,
            stderr,
        }),
        Err(e) => {
            // Say how the child ended when it did (the usual reason).
            let ended = tokio::time::timeout(Duration::from_millis(500), process.wait()).await;
            match ended {
                Ok(Ok(status)) => {
                    let message = format!(
                        "`{}`: {e}; {}",
                        command.display(),
                        exit_text(status, &stderr.read().await)
                    );
                    Err(if status.success() {
                        Handshake::Refused(message)
                    } else {
                        Handshake::Crashed(message)
                    })
                }
                _ => {
                    process.kill();
                    Err(Handshake::Refused(format!("`{}`: {e}", command.display())))
                }
            }
        }
    }
}

/// `exited with status 3: <stderr tail>`, `killed by signal 9`.
fn exit_text(status: std::process::ExitStatus, stderr: &str) -> String {
    let how = agentkit_harness::ChildExit::Exited(status).to_string();
    if stderr.is_empty() {
        how
    } else {
        format!("{how}: {stderr}")
    }
}

/// Keeps one stdio connection alive until `stop`: start, watch the child,
/// record how it ended, wait out the backoff, start again.
async fn supervise(
    spec: ConnectionSpec,
    options: ClientOptions,
    live: tokio::sync::watch::Sender<Live>,
    status: SharedStatus,
    stop: CancellationToken,
) {
    let name = spec.name.clone();
    let mut failures: u32 = 0;
    loop {
        live.send_replace(Live::Starting);
        edit(&status, |c| {
            c.status.state = if c.status.opens == 0 && failures == 0 {
                "starting"
            } else {
                "restarting"
            };
            c.retry_at = None;
        });
        let started = tokio::select! {
            r = tokio::time::timeout(options.open_timeout, spawn_stdio(&spec)) => r,
            () = stop.cancelled() => break,
        };
        let message = match started {
            Ok(Ok(mut child)) => {
                let since = Instant::now();
                let pid = child.process.id();
                live.send_replace(Live::Up(child.client.peer().clone()));
                edit(&status, |c| {
                    c.status.protocol = protocol_of(child.client.peer());
                    c.status.state = "connected";
                    c.status.error = None;
                    c.status.opens += 1;
                    c.status.pid = pid;
                });
                tracing::info!(connection = %name, pid, "MCP stdio server started");
                let exited = tokio::select! {
                    s = child.process.wait() => Some(s),
                    () = stop.cancelled() => None,
                };
                let Some(exited) = exited else {
                    stop_child(child, options.stop_grace).await;
                    break;
                };
                let _ = child.client.cancel().await;
                child.process.kill();
                let message = match exited {
                    Ok(s) => exit_text(s, &child.stderr.read().await),
                    Err(e) => format!("cannot wait for the process: {e}"),
                };
                if since.elapsed() >= options.stable_after {
                    failures = 0;
                }
                tracing::warn!(connection = %name, pid, "MCP stdio server {message}; restarting");
                edit(&status, |c| {
                    c.status.exits += 1;
                    c.status.pid = None;
                    c.status.last_exit = Some(message.clone());
                });
                format!("the server {message}")
            }
            Ok(Err(message)) => message,
            Err(_) => format!(
                "did not answer the MCP handshake within {}s",
                options.open_timeout.as_secs()
            ),
        };
        failures = failures.saturating_add(1);
        let pause = options.pause(failures);
        let retry_at = Instant::now() + pause;
        if failures > 1 {
            tracing::warn!(connection = %name, error = %message, attempt = failures, retry_in = ?pause, "MCP stdio server failed; backing off");
        }
        edit(&status, |c| {
            c.status.state = "restarting";
            c.status.error = Some(message.clone());
            c.status.attempt = failures;
            c.retry_at = Some(retry_at);
        });
        live.send_replace(Live::Down { message, retry_at });
        tokio::select! {
            () = tokio::time::sleep_until(retry_at) => {}
            () = stop.cancelled() => break,
        }
    }
    live.send_replace(Live::Closed);
}

/// Shutdown: close the child's stdin (the MCP way to ask a stdio server
/// to exit), wait `grace`, then kill its process group and reap it.
async fn stop_child(child: Child, grace: Duration) {
    let _ = child.client.cancel().await;
    if !child.process.close(grace).await {
        tracing::warn!("MCP stdio server did not exit on shutdown; killed it");
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn model_output_prefers_structured_then_text() {
        let r = McpCallResult {
            is_error: false,
            content: json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]),
            structured: None,
        };
        assert_eq!(r.model_output(), json!("a\nb"));
        let s = McpCallResult {
            structured: Some(json!({"x": 1})),
            ..r.clone()
        };
        assert_eq!(s.model_output(), json!({"x": 1}));
        let img = McpCallResult {
            content: json!([{"type": "image", "data": "..", "mimeType": "image/png"}]),
            ..r
        };
        assert_eq!(img.model_output(), img.content);
    }

    #[tokio::test]
    async fn unknown_names_and_failed_opens_back_off() {
        let c = Connections::new(
            vec![ConnectionSpec {
                name: "broken".into(),
                description: None,
                target: Target::Stdio {
                    command: PathBuf::from("/nonexistent/agentkit-mcp-server"),
                    args: vec![],
                    env: vec![],
                    cwd: None,
                },
            }],
            ClientOptions {
                backoff: Duration::from_secs(60),
                ..ClientOptions::default()
            },
        );
        assert!(matches!(
            c.list_tools("nope", 0).await,
            Err(ClientError::UnknownConnection { .. })
        ));
        let first = c.list_tools("broken", 0).await.unwrap_err().to_string();
        assert!(first.contains("cannot start"), "{first}");
        let second = c.list_tools("broken", 0).await.unwrap_err().to_string();
        assert!(second.contains("next attempt in"), "{second}");
        let status = c.status();
        assert_eq!(status[0].state, "restarting");
        assert_eq!(status[0].transport, "stdio");
        assert_eq!(status[0].opens, 0);
        assert_eq!(status[0].attempt, 2);
        assert!(status[0].retry_in_ms.is_some_and(|ms| ms <= 60_000));
        c.close().await;
        let closed = c.list_tools("broken", 0).await.unwrap_err().to_string();
        assert!(closed.contains("shutting down"), "{closed}");
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn stdio_servers_do_not_see_the_hosts_secrets() {
        use agentkit_test_support::rerun::{SECRET, rerun_with_env};
        if !rerun_with_env(
            module_path!(),
            "stdio_servers_do_not_see_the_hosts_secrets",
            &[],
        ) {
            return;
        }
        assert_eq!(std::env::var(SECRET.0).as_deref(), Ok(SECRET.1));
        let dir = tempfile::tempdir().unwrap();
        // Not an MCP server: it records its environment and exits, so the
        // handshake fails once the file is written.
        let spec = ConnectionSpec {
            name: "env".into(),
            description: None,
            target: Target::Stdio {
                command: PathBuf::from("sh"),
                args: vec!["-c".into(), "env > env.txt".into()],
                env: vec![("LOG_LEVEL".into(), "warn".into())],
                cwd: Some(dir.path().to_path_buf()),
            },
        };
        let err = spawn_stdio(&spec).await.err().unwrap();
        assert!(err.contains("exited with status 0"), "{err}");
        let env = std::fs::read_to_string(dir.path().join("env.txt")).unwrap();
        assert!(env.contains("LOG_LEVEL=warn\n"), "{env}");
        assert!(env.contains("PATH="), "{env}");
        assert!(!env.contains(SECRET.0), "{env}");
        assert!(!env.contains(SECRET.1), "{env}");
    }

    #[test]
    fn pauses_double_with_jitter_up_to_the_bound() {
        let o = ClientOptions {
            backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(1000),
            ..ClientOptions::default()
        };
        assert_eq!(o.pause(1), Duration::ZERO);
        for (failures, full) in [
            (2, 100),
            (3, 200),
            (4, 400),
            (5, 800),
            (6, 1000),
            (40, 1000),
        ] {
            let p = o.pause(failures).as_millis();
            assert!(
                p >= full / 2 && p <= full,
                "{failures}: {p} not in [{}, {full}]",
                full / 2
            );
        }
        let many: std::collections::HashSet<u128> =
            (0..20).map(|_| o.pause(6).as_micros()).collect();
        assert!(many.len() > 1, "no jitter: {many:?}");
    }
}
