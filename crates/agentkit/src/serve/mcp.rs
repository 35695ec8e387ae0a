//! The MCP endpoint of each agent (`/<slug>/v1/mcp`, or `/v1/mcp` in single
//! mode): `agentkit-mcp`'s server over this agent's runtime, behind the
//! same auth chain as the other routes.
//!
//! `ask` runs a turn in a session on the `mcp` channel owned by the calling
//! principal and waits (bounded) for it by following the session's event
//! stream; `check` does the waiting alone; `call_tool` is the deterministic
//! call of `POST /v1/tools/:name`.

use std::net::SocketAddr;
use std::time::Duration;

use agentkit_manifest::{Admission, Execution};
use agentkit_mcp::{
    AgentBackend, AskRequest, BackendError, Reply, ReplyStatus, ServerToolInfo, ToolCallRequest,
};
use agentkit_protocol::{Event, EventData, EventType};
use agentkit_runtime::{AgentRuntime, FollowUp, NewSession, Owner, SessionMode};
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, FromRequest, Request, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::api::{AgentState, ApiError, authenticate, body_error};

/// The channel MCP sessions live on.
pub(crate) const MCP_CHANNEL: &str = "mcp";

/// One agent's MCP endpoint.
pub(crate) type Endpoint = agentkit_mcp::McpHttp<RuntimeBackend>;

/// Builds the endpoint of one agent.
pub(crate) fn endpoint(
    runtime: AgentRuntime,
    slug: &str,
    depths: Depths,
    options: agentkit_mcp::McpServerOptions,
) -> Endpoint {
    let shutdown = options.shutdown.clone();
    let backend = RuntimeBackend {
        runtime,
        shutdown,
        depths,
    };
    agentkit_mcp::McpHttp::new(
        std::sync::Arc::new(backend),
        agentkit_mcp::McpServerOptions {
            name: slug.to_owned(),
            ..options
        },
    )
}

/// `ANY /v1/mcp`: the auth chain first (over the raw body), then the MCP
/// server with the admitted principal.
pub(crate) async fn route(State(state): State<AgentState>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let peer = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let whole = Request::from_parts(parts.clone(), body);
    let bytes = match <Bytes as FromRequest<AgentState>>::from_request(whole, &state).await {
        Ok(b) => b,
        Err(e) => return body_error(e).into_response(),
    };
    let owner = match authenticate(&state, peer, &parts.headers, &bytes) {
        Ok(owner) => owner,
        Err(e) => return e.into_response(),
    };
    let req = axum::http::Request::from_parts(parts, Body::from(bytes));
    let resp = state.agent.mcp.handle(req, owner).await;
    resp.map(Body::new)
}

/// The delegation depth of each session that MCP `ask` drove: how many
/// agent-to-agent hops led to it. Its turns' calls to peers (and its
/// tools' calls through the host bridge) go one deeper.
#[derive(Debug, Clone, Default)]
pub(crate) struct Depths(std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, u32>>>);

impl Depths {
    pub(crate) fn get(&self, session_id: &str) -> u32 {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.get(session_id).copied().unwrap_or(0)
    }

    fn set(&self, session_id: &str, hops: u32) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if hops == 0 {
            map.remove(session_id);
        } else {
            map.insert(session_id.to_owned(), hops);
        }
    }
}

/// The MCP server's view of one agent's runtime.
#[derive(Debug, Clone)]
pub(crate) struct RuntimeBackend {
    runtime: AgentRuntime,
    shutdown: CancellationToken,
    depths: Depths,
}

fn refused(e: agentkit_runtime::Error) -> BackendError {
    let api = ApiError::from(e);
    let mut err = BackendError::new(api.code, api.message);
    if let Some(details) = api.details {
        err.details = details;
    }
    err
}

/// The last turn's outcome among `events`: its status and reply.
#[derive(Debug, Default)]
struct Outcome(Option<(ReplyStatus, Option<String>)>);

impl Outcome {
    fn see(&mut self, e: &Event) {
        if !e.is_turn_end() {
            return;
        }
        match e.payload() {
            EventData::TurnCompleted(done) => {
                self.0 = Some((ReplyStatus::Completed, Some(done.result)));
            }
            EventData::TurnFailed(failed) => {
                self.0 = Some((ReplyStatus::Failed, Some(failed.message)));
            }
            _ => {}
        }
    }

    fn reply(self, session_id: &str) -> Reply {
        let (status, reply) = self.0.unwrap_or((
            ReplyStatus::Failed,
            Some("the session settled without running a turn (stopped)".to_owned()),
        ));
        Reply {
            status,
            session_id: session_id.to_owned(),
            reply,
        }
    }
}

fn running(session_id: &str) -> Reply {
    Reply {
        status: ReplyStatus::Running,
        session_id: session_id.to_owned(),
        reply: None,
    }
}

impl RuntimeBackend {
    /// Follows the session from `start` until `done` says it settled, or
    /// the deadline passes (`running`).
    async fn follow(
        &self,
        owner: &Owner,
        session_id: &str,
        start: u64,
        wait: Duration,
        mut step: impl FnMut(&Event) -> Option<Reply> + Send,
    ) -> Result<Reply, BackendError> {
        let mut sub = self
            .runtime
            .subscribe(session_id, owner, start)
            .await
            .map_err(refused)?;
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let next = tokio::select! {
                e = tokio::time::timeout_at(deadline, sub.next()) => e,
                () = self.shutdown.cancelled() => return Ok(running(session_id)),
            };
            match next {
                Err(_) => return Ok(running(session_id)),
                Ok(Err(e)) => {
                    tracing::warn!(session = session_id, error = %e, "cannot follow a session for MCP");
                    return Err(BackendError::new(
                        "internal",
                        "cannot read the session's events; see the server log",
                    ));
                }
                Ok(Ok(event)) => {
                    if let Some(reply) = step(&event) {
                        return Ok(reply);
                    }
                    if let Some(reply) = self.parked(owner, session_id, &event).await {
                        return Ok(reply);
                    }
                }
            }
        }
    }
}

impl RuntimeBackend {
    /// `waiting_approval` when `event` parked a call that still waits: a
    /// human has to decide before the turn can go on, so waiting longer
    /// would only run into the deadline.
    async fn parked(&self, owner: &Owner, session_id: &str, event: &Event) -> Option<Reply> {
        if event.event_type != EventType::ActionApprovalRequested {
            return None;
        }
        let EventData::ApprovalRequested(requested) = event.payload() else {
            return None;
        };
        let (call, tool) = (requested.call_id.as_str(), requested.tool_name.as_str());
        let pending = self.runtime.approvals(session_id, owner).await.ok()?;
        pending.iter().any(|p| p.call_id == call).then(|| Reply {
            status: ReplyStatus::WaitingApproval,
            session_id: session_id.to_owned(),
            reply: Some(format!(
                "tool `{tool}` waits for a human's approval (call `{call}`): decide with POST /v1/session/{session_id}/approvals/{call}, then call `check`"
            )),
        })
    }
}

impl AgentBackend for RuntimeBackend {
    type Caller = Owner;

    fn server_tools(&self) -> Vec<ServerToolInfo> {
        self.runtime
            .agent()
            .tools
            .iter()
            .filter(|t| t.execution == Execution::Server)
            .map(|t| ServerToolInfo {
                name: t.name.clone(),
                description: t.description.clone(),
            })
            .collect()
    }

    async fn ask(&self, owner: &Owner, req: AskRequest) -> Result<Reply, BackendError> {
        let (session_id, start) = match &req.session_id {
            None => {
                let accepted = self
                    .runtime
                    .create(NewSession {
                        channel: MCP_CHANNEL.to_owned(),
                        mode: SessionMode::Chat,
                        owner: owner.clone(),
                        message: req.message.clone(),
                        continuation: None,
                        title: None,
                        purpose: None,
                        admission: Admission::default(),
                        workspace_files: Vec::new(),
                        dry_run: false,
                        as_of: None,
                    })
                    .await
                    .map_err(refused)?;
                self.depths.set(&accepted.session_id, req.hops);
                (accepted.session_id, 0)
            }
            Some(id) => {
                let meta = self.runtime.session(id, owner).map_err(refused)?;
                if meta.channel != MCP_CHANNEL {
                    return Err(BackendError::new(
                        "bad_request",
                        format!(
                            "session `{id}` is on the `{}` channel; `ask` follows up only sessions it started",
                            meta.channel
                        ),
                    ));
                }
                let accepted = self
                    .runtime
                    .follow_up(
                        id,
                        FollowUp {
                            owner: owner.clone(),
                            message: req.message.clone(),
                            continuation_token: None,
                            admission: Admission::default(),
                            workspace_files: Vec::new(),
                        },
                    )
                    .await
                    .map_err(refused)?;
                let start = accepted.start_index;
                self.depths.set(id, req.hops);
                (id.clone(), start)
            }
        };
        // Our message is the first `message.received` with its text from
        // `start` on; the first settle after it means its turn (or the
        // batch it joined) ended.
        let mut ours = false;
        let mut outcome = Outcome::default();
        let sid = session_id.clone();
        let message = req.message;
        self.follow(owner, &session_id, start, req.wait, move |e| {
            if !ours {
                ours = matches!(e.payload(), EventData::MessageReceived(m) if m.text == message);
                return None;
            }
            outcome.see(e);
            e.is_settle()
                .then(|| std::mem::take(&mut outcome).reply(&sid))
        })
        .await
    }

    async fn check(
        &self,
        owner: &Owner,
        session_id: &str,
        wait: Duration,
    ) -> Result<Reply, BackendError> {
        let events = self
            .runtime
            .events_stored(session_id, owner, 0)
            .await
            .map_err(refused)?;
        let mut outcome = Outcome::default();
        let mut settled = false;
        for e in &events {
            outcome.see(e);
            match e.event_type {
                _ if e.is_settle() => settled = true,
                EventType::MessageReceived | EventType::TurnStarted => settled = false,
                _ => {}
            }
        }
        if settled {
            return Ok(outcome.reply(session_id));
        }
        if wait.is_zero() {
            return Ok(running(session_id));
        }
        let sid = session_id.to_owned();
        self.follow(owner, session_id, events.len() as u64, wait, move |e| {
            outcome.see(e);
            e.is_settle()
                .then(|| std::mem::take(&mut outcome).reply(&sid))
        })
        .await
    }

    async fn call_tool(&self, owner: &Owner, req: ToolCallRequest) -> Result<Value, BackendError> {
        let session = req.session_id.as_deref().map(|id| (id, owner));
        // The tool's own MCP calls through the bridge go on from the
        // depth this request arrived at.
        let outcome = super::bridge::at_depth(
            req.hops,
            self.runtime.call_tool(&req.name, req.input, session),
        )
        .await
        .map_err(refused)?;
        let mut doc = serde_json::to_value(&outcome).unwrap_or(Value::Null);
        if let Some(obj) = doc.as_object_mut() {
            obj.insert("ok".to_owned(), Value::Bool(true));
        }
        Ok(doc)
    }
}

/// The `mcp` entry of `GET /v1/info`: where the endpoint is and what it
/// offers.
pub(crate) fn info(state: &AgentState) -> Value {
    let backend_tools = state
        .agent
        .project
        .agent
        .tools
        .iter()
        .any(|t| t.execution == Execution::Server);
    let mut tools = vec!["ask", "check"];
    if backend_tools {
        tools.push("call_tool");
    }
    json!({
        "path": format!("{}/v1/mcp", state.agent.prefix),
        "tools": tools,
        "connections": state.agent.connections.status(),
    })
}

/// The MCP connections of one agent, with `${VAR}`s resolved, relative
/// paths anchored in the agent folder, and peers pointed at this host
/// (`base`: the public URL, else the bound loopback address).
pub(crate) fn connections(
    project: &agentkit_manifest::Project,
    options: &super::ServeOptions,
    base: &str,
) -> agentkit_mcp::Connections {
    use agentkit_manifest::Transport;
    use agentkit_mcp::{ConnectionSpec, Target};
    let resolve = |s: &str| options.env.resolve(s);
    let agent_dir = &project.agent.dir;
    let specs = project
        .agent
        .mcp_connections
        .iter()
        .map(|c| {
            let target = match &c.transport {
                Transport::Http { url, headers } => Target::Http {
                    url: resolve(url),
                    headers: headers
                        .iter()
                        .map(|(k, v)| (k.clone(), resolve(v)))
                        .collect(),
                    peer: false,
                },
                Transport::Stdio {
                    command,
                    args,
                    env,
                    cwd,
                } => {
                    let command = resolve(command);
                    let path = std::path::Path::new(&command);
                    // `./server.py` or `bin/server` is the agent's own
                    // file; a bare name is looked up on PATH.
                    let command = if path.is_relative() && path.components().count() > 1 {
                        agent_dir.join(path)
                    } else {
                        path.to_path_buf()
                    };
                    Target::Stdio {
                        command,
                        args: args.iter().map(|a| resolve(a)).collect(),
                        env: env.iter().map(|(k, v)| (k.clone(), resolve(v))).collect(),
                        cwd: Some(
                            cwd.as_ref()
                                .map_or_else(|| agent_dir.clone(), |d| agent_dir.join(resolve(d))),
                        ),
                    }
                }
                Transport::Peer { agent } => {
                    let mut headers = Vec::new();
                    if let Some(token) = &options.bearer_token {
                        headers.push(("authorization".to_owned(), format!("Bearer {token}")));
                    }
                    Target::Http {
                        url: format!("{}/{agent}/v1/mcp", base.trim_end_matches('/')),
                        headers,
                        peer: true,
                    }
                }
            };
            ConnectionSpec {
                name: c.name.clone(),
                description: c.description.clone(),
                target,
            }
        })
        .collect();
    agentkit_mcp::Connections::new(specs, options.mcp_clients.clone())
}

/// The agent's MCP connection tools, offered to every turn as
/// `<connection>__<tool>` (opening each connection on first use). Calls a
/// turn makes to peers go one hop deeper than its session.
#[derive(Debug)]
pub(crate) struct ConnectionTools {
    pub(crate) connections: agentkit_mcp::Connections,
    pub(crate) depths: Depths,
    /// Model-facing name → (connection, tool), filled by `list`.
    names: std::sync::Mutex<std::collections::HashMap<String, (String, String)>>,
}

impl ConnectionTools {
    pub(crate) fn new(connections: agentkit_mcp::Connections, depths: Depths) -> ConnectionTools {
        ConnectionTools {
            connections,
            depths,
            names: Default::default(),
        }
    }
}

/// `<connection>__<tool>`, within what model APIs accept
/// (`[A-Za-z0-9_-]`, at most 64 characters).
pub(crate) fn model_tool_name(connection: &str, tool: &str) -> String {
    let name: String = format!("{connection}__{tool}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    name.chars().take(64).collect()
}

impl agentkit_harness::ExtraTools for ConnectionTools {
    fn list<'a>(
        &'a self,
        session_id: &'a str,
    ) -> agentkit_harness::BoxFuture<'a, Vec<agentkit_harness::ExtraTool>> {
        Box::pin(async move {
            let hops = self.depths.get(session_id);
            let mut out = Vec::new();
            for conn in self.connections.names() {
                let tools = match self.connections.list_tools(&conn, hops).await {
                    Ok(t) => t,
                    Err(e) => {
                        tracing::warn!(connection = %conn, error = %e, "MCP connection tools left out of the turn");
                        continue;
                    }
                };
                let about = self.connections.description(&conn);
                let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
                for t in tools {
                    let name = model_tool_name(&conn, &t.name);
                    names.insert(name.clone(), (conn.clone(), t.name.clone()));
                    let description = match &about {
                        Some(a) => format!("{} (MCP connection `{conn}`: {a})", t.description),
                        None => format!("{} (MCP connection `{conn}`)", t.description),
                    };
                    out.push(agentkit_harness::ExtraTool {
                        name,
                        description,
                        input_schema: t.input_schema,
                        read_only: t.read_only,
                    });
                }
            }
            out
        })
    }

    fn call<'a>(
        &'a self,
        name: &'a str,
        input: &'a Value,
        ctx: &'a agentkit_harness::ToolContext,
    ) -> agentkit_harness::BoxFuture<'a, agentkit_harness::ToolOutput> {
        Box::pin(async move {
            let target = {
                let names = self.names.lock().unwrap_or_else(|e| e.into_inner());
                names.get(name).cloned()
            };
            let Some((conn, tool)) = target else {
                return agentkit_harness::ToolOutput::error(format!("unknown tool `{name}`"));
            };
            let hops = self.depths.get(&ctx.session_id);
            let call = self
                .connections
                .call_tool(&conn, &tool, input.clone(), hops);
            tokio::select! {
                _ = ctx.cancel.cancelled() => agentkit_harness::ToolOutput::error("tool call cancelled"),
                r = call => match r {
                    Ok(result) => agentkit_harness::ToolOutput {
                        output: result.model_output(),
                        is_error: result.is_error,
                    },
                    Err(e) => agentkit_harness::ToolOutput::error(e.to_string()),
                },
            }
        })
    }
}
