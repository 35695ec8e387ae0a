//! MCP client connections of one agent: stdio children, streamable-HTTP
//! servers and peer agents, opened lazily on first use.
//!
//! A connection whose client died (a stdio child that exited, a transport
//! that closed) is reopened on its next use; failed opens back off
//! exponentially (1 s, 2 s, 4 s … 30 s) so a broken server is not spawned
//! in a loop. [`Connections::close`] stops every client (children are
//! killed) when the server shuts down.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{Peer, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde::Serialize;
use serde_json::Value;
use tokio::io::AsyncBufReadExt;
use tokio::time::Instant;

use crate::server::HOPS_HEADER;

/// Host variables a stdio server always sees when the host has them; the
/// rest of the host's environment is scrubbed (`env` adds more).
const PASSED_ENV: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT"];

/// The longest pause between two attempts to open a failing connection.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// How a connection reaches its server, with every `${VAR}` resolved.
#[derive(Clone)]
pub enum Target {
    /// Streamable HTTP. `peer` connections forward the delegation depth
    /// in [`HOPS_HEADER`].
    Http {
        url: String,
        headers: Vec<(String, String)>,
        peer: bool,
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
    /// `idle` (not opened yet), `connected`, `error` or `closed`.
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How many times the client was (re)opened.
    pub opens: u32,
    /// Tools seen at the last listing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<usize>,
}

/// How connections are opened.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// How long opening a connection (spawn + handshake) may take.
    pub open_timeout: Duration,
    /// The first pause after a failed open (doubling up to 30 s).
    pub backoff: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            open_timeout: Duration::from_secs(30),
            backoff: Duration::from_secs(1),
        }
    }
}

type Client = RunningService<RoleClient, ()>;

#[derive(Default)]
struct Open {
    /// Keyed by delegation depth (always 0 except for peers, whose
    /// requests carry it in a header fixed per client).
    clients: HashMap<u32, Client>,
    failures: u32,
    retry_at: Option<Instant>,
    last_error: Option<String>,
}

struct Conn {
    spec: ConnectionSpec,
    open: tokio::sync::Mutex<Open>,
    status: Mutex<ConnectionStatus>,
}

/// The MCP connections of one agent. Cheap to clone.
#[derive(Clone)]
pub struct Connections {
    conns: Arc<Vec<Conn>>,
    options: ClientOptions,
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

impl Connections {
    /// Nothing opens until first use.
    pub fn new(specs: Vec<ConnectionSpec>, options: ClientOptions) -> Connections {
        let conns = specs
            .into_iter()
            .map(|spec| Conn {
                status: Mutex::new(ConnectionStatus {
                    name: spec.name.clone(),
                    description: spec.description.clone(),
                    transport: spec.target.kind(),
                    state: "idle",
                    error: None,
                    opens: 0,
                    tools: None,
                }),
                spec,
                open: tokio::sync::Mutex::new(Open::default()),
            })
            .collect();
        Connections {
            conns: Arc::new(conns),
            options,
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
        self.conns.iter().map(|c| lock(&c.status).clone()).collect()
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
        let conn = self.conn(name)?;
        let peer = self.peer(conn, hops).await?;
        let tools = peer.list_all_tools().await.map_err(|e| {
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
        lock(&conn.status).tools = Some(tools.len());
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
        let peer = self.peer(conn, hops).await?;
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = arguments;
        let result = peer.call_tool(params).await.map_err(|e| {
            if peer.is_transport_closed() {
                self.failed(conn, &e.to_string());
            }
            ClientError::Call {
                name: name.to_owned(),
                tool: tool.to_owned(),
                message: e.to_string(),
            }
        })?;
        Ok(McpCallResult {
            is_error: result.is_error.unwrap_or(false),
            content: serde_json::to_value(&result.content).unwrap_or(Value::Null),
            structured: result.structured_content,
        })
    }

    fn failed(&self, conn: &Conn, message: &str) {
        let mut status = lock(&conn.status);
        status.state = "error";
        status.error = Some(message.to_owned());
    }

    /// A live client of `conn`, opened (or reopened) if needed.
    async fn peer(&self, conn: &Conn, hops: u32) -> Result<Peer<RoleClient>, ClientError> {
        let key = match conn.spec.target {
            Target::Http { peer: true, .. } => hops.saturating_add(1),
            _ => 0,
        };
        let mut open = conn.open.lock().await;
        if let Some(client) = open.clients.get(&key) {
            if !client.is_closed() && !client.peer().is_transport_closed() {
                return Ok(client.peer().clone());
            }
            tracing::warn!(connection = %conn.spec.name, "MCP connection closed; reopening");
            if let Some(dead) = open.clients.remove(&key) {
                drop(dead);
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
                    wait.as_secs().max(1)
                ),
            });
        }
        let opened =
            match tokio::time::timeout(self.options.open_timeout, connect(&conn.spec, key)).await {
                Ok(r) => r,
                Err(_) => Err(format!(
                    "did not answer the MCP handshake within {}s",
                    self.options.open_timeout.as_secs()
                )),
            };
        match opened {
            Ok(client) => {
                let peer = client.peer().clone();
                open.clients.insert(key, client);
                open.failures = 0;
                open.retry_at = None;
                open.last_error = None;
                let mut status = lock(&conn.status);
                status.state = "connected";
                status.error = None;
                status.opens += 1;
                Ok(peer)
            }
            Err(message) => {
                open.failures += 1;
                let factor = 2u32.saturating_pow(open.failures.saturating_sub(1).min(16));
                let pause = self.options.backoff.saturating_mul(factor).min(MAX_BACKOFF);
                open.retry_at = Some(Instant::now() + pause);
                open.last_error = Some(message.clone());
                tracing::warn!(connection = %conn.spec.name, error = %message, retry_in = ?pause, "MCP connection failed to open");
                self.failed(conn, &message);
                Err(ClientError::Unavailable {
                    name: conn.spec.name.clone(),
                    message,
                })
            }
        }
    }

    /// Stops every client; stdio children are killed.
    pub async fn close(&self) {
        for conn in self.conns.iter() {
            let clients: Vec<Client> = {
                let mut open = conn.open.lock().await;
                open.clients.drain().map(|(_, c)| c).collect()
            };
            for client in clients {
                let _ = client.cancel().await;
            }
            let mut status = lock(&conn.status);
            if status.state == "connected" {
                status.state = "closed";
            }
        }
    }
}

/// Spawns or dials the server and runs the MCP handshake.
async fn connect(spec: &ConnectionSpec, hops: u32) -> Result<Client, String> {
    match &spec.target {
        Target::Http { url, headers, peer } => {
            let mut custom = HashMap::new();
            for (k, v) in headers {
                let name = http::HeaderName::try_from(k.as_str())
                    .map_err(|e| format!("header `{k}`: {e}"))?;
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
            let transport = StreamableHttpClientTransport::from_config(config);
            ().serve(transport).await.map_err(|e| format!("{url}: {e}"))
        }
        Target::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args).env_clear().kill_on_drop(true);
            for name in PASSED_ENV {
                if let Some(value) = std::env::var_os(name) {
                    cmd.env(name, value);
                }
            }
            for (k, v) in env {
                cmd.env(k, v);
            }
            if let Some(cwd) = cwd {
                cmd.current_dir(cwd);
            }
            #[cfg(unix)]
            cmd.process_group(0);
            let (child, stderr) = TokioChildProcess::builder(cmd)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot start `{}`: {e}", command.display()))?;
            if let Some(stderr) = stderr {
                let name = spec.name.clone();
                tokio::spawn(async move {
                    let mut lines = tokio::io::BufReader::new(stderr).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        tracing::debug!(connection = %name, "{line}");
                    }
                });
            }
            ().serve(child)
                .await
                .map_err(|e| format!("`{}`: {e}", command.display()))
        }
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
        assert_eq!(status[0].state, "error");
        assert_eq!(status[0].transport, "stdio");
        assert_eq!(status[0].opens, 0);
    }
}
