//! `serve(dir, options)`: one agent or a folder of them on one port, each
//! with its durable sessions, behind its auth chain.
//!
//! Layout: in the default multi-agent layout every agent is mounted under
//! `/<slug>/v1/*`, with an HTML index at `/`, `/v1/agents` and host
//! liveness at `/v1/health`; single mode mounts the one agent at `/v1/*`,
//! where `/v1/health` is the public liveness probe. Connections are
//! accepted and bounded by the HTTP edge (`edge.rs`).
//! State lives under `<stateRoot>/<slug>/` (default stateRoot:
//! `<dir>/.agentkit`).

mod api;
mod auth;
mod bridge;
mod channels;
mod edge;
mod evals;
mod mcp;
mod playground;
mod schedules;
mod services;

pub use edge::{EdgeOptions, FdLimit, raise_fd_limit};
pub use services::{HostGithub, HostMcp, HostReminders, HostServices};

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agentkit_manifest::{Host, ModelSpec, Provider};
use agentkit_runtime::{AgentRuntime, Clock, RuntimeOptions, SystemClock};
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};

/// Where agents are mounted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Mode {
    /// Every agent under `/<slug>/v1/*` (the default, even for one agent).
    #[default]
    Multi,
    /// The only agent at `/v1/*`.
    Single,
}

/// How to serve.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub host: IpAddr,
    /// `0` picks a free port; [`ServeHandle::url`] tells which.
    pub port: u16,
    /// Defaults to `<dir>/.agentkit`.
    pub state_root: Option<PathBuf>,
    /// Development mode: the offline `test` model when no model is
    /// configured.
    pub dev: bool,
    pub mode: Mode,
    /// Replaces the default `local_dev_strict` chain with this bearer
    /// token on channels that do not author their own chain.
    pub bearer_token: Option<String>,
    /// Replaces the default chain with `allow_all` (shared `anonymous`
    /// principal) on channels that do not author their own chain.
    pub allow_anonymous: bool,
    /// The model for agents that name none (`AGENTKIT_MODEL`); the binary
    /// reads the environment, the library does not.
    pub default_model: Option<String>,
    /// A model string every agent runs on instead of its own `model`
    /// (`agentkit run --model`); checked like `default_model`.
    pub model: Option<String>,
    /// The largest request body accepted, in bytes.
    pub body_limit: usize,
    /// How long shutdown waits for interrupted turns to settle.
    pub shutdown_grace: Duration,
    /// Environment lookup for `${VAR}` references in auth chains.
    pub env: EnvLookup,
    /// Endpoints and keys of the remote model providers (the binary fills
    /// them from flags and the environment).
    pub providers: agentkit_harness::ProviderConfig,
    /// How long the MCP tools `ask` and `check` wait for a turn before
    /// answering `status: "running"` (about 50 s, below MCP clients'
    /// request timeouts).
    pub mcp_max_wait: Duration,
    /// The longest agent-to-agent delegation chain an MCP request may
    /// arrive through; deeper requests are refused.
    pub max_hops: u32,
    /// How MCP client connections open and how their stdio children are
    /// restarted (backoff, its bound, the stable period).
    pub mcp_clients: agentkit_mcp::ClientOptions,
    /// The URL peers reach this host at (`--public-url`), when its
    /// loopback address is not reachable from where turns run. Default:
    /// the bound address (loopback when bound to all interfaces).
    pub public_url: Option<String>,
    /// Channels defined in Rust, as `(agent slug, channel)`: mounted at
    /// `/v1/channels/<id>` next to the agent's channel files.
    pub channels: Vec<(String, agentkit_channels::ChannelDefinition)>,
    /// Fire schedules on their cron cadence (`--no-schedules` turns this
    /// off). Under `dev` they never fire by themselves either way.
    pub schedules: bool,
    /// Fire reminders on their timers; `None` means "not under `dev`".
    /// Without timers, reminders fire only by hand (the dev route,
    /// [`ServeHandle::dispatch_reminder`]).
    pub reminders: Option<bool>,
    /// The clock schedules and reminders run on (the system clock when
    /// `None`); tests pass an [`agentkit_runtime::ManualClock`].
    pub clock: Option<Arc<dyn Clock>>,
    /// Rust hooks: observers of every agent's recorded events (next to each
    /// agent's `hooks/*.toml`).
    pub hooks: Vec<agentkit_runtime::HookSpec>,
    /// Rust tools every agent gets beside its tool files (see
    /// [`agentkit_harness::RustTool`]). A tool file of the same name wins.
    pub tools: Vec<Arc<dyn agentkit_harness::DynTool>>,
    /// Rust schedule handlers by name, for `schedules/<id>.toml` files
    /// with `handler = "<name>"` (every agent may bind them). A schedule
    /// naming a handler missing here keeps the server from starting.
    pub schedule_handlers: agentkit_runtime::ScheduleHandlers,
    /// How the HTTP edge bounds connections and requests: header-read
    /// and idle timeout, request timeout, write-stall timeout, the
    /// connection cap.
    pub edge: EdgeOptions,
    /// Serve the playground at `/<slug>/playground` (`/playground` in
    /// single mode); `--no-playground` turns it off. `/docs` is served
    /// either way.
    pub playground: bool,
}

impl ServeOptions {
    /// Registers a Rust schedule handler under `name`, for schedule files
    /// with `handler = "<name>"`.
    pub fn schedule_handler(
        mut self,
        name: impl Into<String>,
        handler: impl agentkit_runtime::ScheduleHandler + 'static,
    ) -> ServeOptions {
        self.schedule_handlers.insert(name, handler);
        self
    }

    /// Registers a Rust tool for every agent.
    pub fn tool(mut self, tool: impl agentkit_harness::DynTool + 'static) -> ServeOptions {
        self.tools.push(Arc::new(tool));
        self
    }
}

/// How `${VAR}` references are resolved: the workspace's one lookup type
/// (an empty value counts as unset). The library never reads the process
/// environment itself; the binary passes [`EnvLookup::process`].
pub use agentkit_channels::{Env as EnvLookup, EnvFn};

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 3000,
            state_root: None,
            dev: false,
            mode: Mode::Multi,
            bearer_token: None,
            allow_anonymous: false,
            default_model: None,
            model: None,
            body_limit: 1024 * 1024,
            shutdown_grace: Duration::from_secs(10),
            env: EnvLookup::empty(),
            providers: agentkit_harness::ProviderConfig::default(),
            mcp_max_wait: agentkit_mcp::DEFAULT_MAX_WAIT,
            max_hops: agentkit_mcp::DEFAULT_MAX_HOPS,
            mcp_clients: agentkit_mcp::ClientOptions::default(),
            public_url: None,
            channels: Vec::new(),
            schedules: true,
            reminders: None,
            clock: None,
            hooks: Vec::new(),
            tools: Vec::new(),
            schedule_handlers: Default::default(),
            edge: EdgeOptions::default(),
            playground: true,
        }
    }
}

/// One mounted agent.
#[derive(Debug, Clone)]
pub(crate) struct Mounted {
    pub(crate) slug: String,
    pub(crate) runtime: AgentRuntime,
    pub(crate) chain: Arc<agentkit_auth::Chain>,
    pub(crate) project: Arc<agentkit_manifest::Project>,
    /// `/<slug>` or empty in single mode.
    pub(crate) prefix: String,
    /// The agent's MCP endpoint (`/v1/mcp`).
    pub(crate) mcp: mcp::Endpoint,
    /// The agent's MCP client connections (`mcp-connections/`).
    pub(crate) connections: agentkit_mcp::Connections,
    /// The custom channels (`/v1/channels/<id>`).
    pub(crate) channels: agentkit_channels::ChannelHost,
    /// Serving with `--dev` (the dev routes answer).
    pub(crate) dev: bool,
    /// The agent's running hooks (their counters show in `/v1/info`).
    pub(crate) hooks: agentkit_runtime::Hooks,
    /// Eval runs started through the dev routes.
    pub(crate) evals: Arc<evals::DevEvals>,
    /// The playground is served (`POST /v1/session` answers its URL).
    pub(crate) playground: bool,
}

/// A running server. Dropping it does not stop the server; call
/// [`ServeHandle::close`].
#[derive(Debug)]
pub struct ServeHandle {
    addr: SocketAddr,
    agents: Vec<Mounted>,
    mode: Mode,
    shutdown: CancellationToken,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    bridge: tokio::task::JoinHandle<()>,
    grace: Duration,
    host: Arc<Host>,
    playground: bool,
}

impl ServeHandle {
    /// The host URL, such as `http://127.0.0.1:3000`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL of one agent (`…/<slug>`, or the host URL in single
    /// mode).
    pub fn agent_url(&self, slug: &str) -> String {
        match self.mode {
            Mode::Multi => format!("{}/{slug}", self.url()),
            Mode::Single => self.url(),
        }
    }

    pub fn slugs(&self) -> Vec<String> {
        self.agents.iter().map(|a| a.slug.clone()).collect()
    }

    /// Calls server tool `tool` of agent `slug` deterministically (no
    /// model turn), in an ephemeral workspace or, with `session`, inside
    /// that session (recorded on its stream) as its owner.
    pub async fn call_tool(
        &self,
        slug: &str,
        tool: &str,
        input: serde_json::Value,
        session: Option<(&str, &agentkit_runtime::Owner)>,
    ) -> Result<agentkit_runtime::ToolCallOutcome> {
        let agent = self
            .agents
            .iter()
            .find(|a| a.slug == slug)
            .ok_or_else(|| Error::Config {
                message: format!("no agent `{slug}` on this host"),
            })?;
        Ok(agent.runtime.call_tool(tool, input, session).await?)
    }

    /// The MCP connections of agent `slug` (`host.mcp`): `names`,
    /// `list_tools` and `call_tool`, each opening its client lazily.
    pub fn mcp(&self, slug: &str) -> Result<&agentkit_mcp::Connections> {
        self.agents
            .iter()
            .find(|a| a.slug == slug)
            .map(|a| &a.connections)
            .ok_or_else(|| Error::Config {
                message: format!("no agent `{slug}` on this host"),
            })
    }

    /// The discovered projects being served.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// Stops accepting connections, ends open streams, interrupts running
    /// turns (recorded as `turn.failed`, reason `shutdown`), syncs every
    /// log, and waits for the server to finish.
    pub async fn close(self) {
        self.shutdown.cancel();
        for a in &self.agents {
            a.channels.stop(self.grace).await;
            a.runtime.shutdown(self.grace).await;
        }
        for a in &self.agents {
            a.connections.close().await;
        }
        let _ = self.bridge.await;
        match self.server.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "server ended with an error"),
            Err(e) => tracing::warn!(error = %e, "server task failed"),
        }
    }

    /// Resolves when the server stops for a reason of its own.
    pub async fn stopped(&self) {
        self.shutdown.cancelled().await;
    }
}

/// Discovers `dir`, refuses to start on error diagnostics, opens every
/// agent's sessions (recovering those a crash interrupted), binds, and
/// serves until [`ServeHandle::close`].
pub async fn serve(dir: &Path, options: ServeOptions) -> Result<ServeHandle> {
    let found = agentkit_manifest::discover(dir)?;
    if found.diagnostics.has_errors() {
        return Err(Error::Invalid {
            diagnostics: found.diagnostics,
        });
    }
    if options.mode == Mode::Single && found.host.agents.len() != 1 {
        return Err(Error::Config {
            message: format!(
                "single mode serves exactly one agent; `{}` holds {}",
                dir.display(),
                found.host.agents.len()
            ),
        });
    }
    schedules::check_handlers(&found.host, &options)?;
    let default_model = resolve_default_model(&options)?;
    let forced_model = match &options.model {
        Some(s) => Some(parse_model("--model", s)?),
        None => None,
    };
    let providers = Arc::new(options.providers.clone());
    let state_root = options
        .state_root
        .clone()
        .unwrap_or_else(|| found.host.root.join(".agentkit"));
    let listener = tokio::net::TcpListener::bind((options.host, options.port))
        .await
        .map_err(|source| Error::Bind {
            addr: format!("{}:{}", options.host, options.port),
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| Error::Bind {
        addr: format!("{}:{}", options.host, options.port),
        source,
    })?;
    let (bridge_listener, bridge_url) = bridge::bind().await.map_err(|source| Error::Bind {
        addr: "127.0.0.1:0 (host bridge)".into(),
        source,
    })?;
    let mut bridged = Vec::new();
    let peer_base = options
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{}", loopback_of(addr)));
    let mut agents = Vec::new();
    let shutdown = CancellationToken::new();
    for project in &found.host.agents {
        let state_dir = state_root.join(&project.slug);
        let token = bridge::mint_token();
        let kv = agentkit_runtime::KvStore::open(&state_dir)?;
        let depths = mcp::Depths::default();
        let calls = bridge::CallTokens::default();
        let connections = mcp::connections(project, &options, &peer_base);
        let mut tool_sources: Vec<Arc<dyn agentkit_harness::ToolSource>> =
            vec![Arc::new(options.tools.clone())];
        if !connections.names().is_empty() {
            tool_sources.push(Arc::new(agentkit_harness::ExtraToolsSource(Arc::new(
                mcp::ConnectionTools::new(connections.clone(), depths.clone()),
            ))));
        }
        let github = services::HostGithub::of(project, &options.env);
        let host_services = HostServices::new(
            &project.slug,
            kv.clone(),
            connections.clone(),
            depths.clone(),
            github.clone(),
        );
        let services: agentkit_harness::HostHandle = Arc::new(host_services.clone());
        let mut agent = project.agent.clone();
        if let Some(model) = &forced_model {
            agent.config.model = Some(model.clone());
        }
        let runtime = AgentRuntime::open(
            Arc::new(agent),
            RuntimeOptions {
                state_dir,
                default_model: default_model.clone(),
                store: Default::default(),
                providers: providers.clone(),
                host_bridge: Some(agentkit_harness::HostBridge {
                    url: bridge_url.clone(),
                    token: token.to_string(),
                    credentials: Some(Arc::new(bridge::Issuer {
                        secret: token.clone(),
                        calls: calls.clone(),
                        depths: depths.clone(),
                    })),
                }),
                clock: options
                    .clock
                    .clone()
                    .unwrap_or_else(|| Arc::new(SystemClock)),
                tool_sources,
                services: Some(services.clone()),
            },
        )
        .await?;
        host_services.attach(&runtime);
        runtime.set_schedule_handlers(options.schedule_handlers.clone());
        schedules::start_timers(&runtime, &options);
        let chain = auth::http_chain(project, &options)?;
        let prefix = match options.mode {
            Mode::Multi => format!("/{}", project.slug),
            Mode::Single => String::new(),
        };
        let mcp = mcp::endpoint(
            runtime.clone(),
            &project.slug,
            depths.clone(),
            agentkit_mcp::McpServerOptions {
                max_wait: options.mcp_max_wait,
                max_hops: options.max_hops,
                body_limit: options.body_limit,
                shutdown: shutdown.clone(),
                name: project.slug.clone(),
            },
        );
        let channels =
            channels::start(project, &runtime, &options, &prefix, Some(services.clone())).await?;
        bridged.push(bridge::BridgeAgent {
            token,
            kv,
            connections: connections.clone(),
            depths,
            runtime: runtime.clone(),
            github,
            calls,
        });
        let hooks = schedules::start_hooks(&runtime, project, &options);
        let evals = Arc::new(evals::DevEvals::new(
            Arc::new(project.clone()),
            runtime.state_dir(),
            format!("{peer_base}{prefix}"),
            providers.clone(),
            runtime
                .agent()
                .config
                .model
                .clone()
                .or(default_model.clone()),
        ));
        agents.push(Mounted {
            evals,
            slug: project.slug.clone(),
            hooks,
            runtime,
            mcp,
            connections,
            chain: Arc::new(chain),
            project: Arc::new(project.clone()),
            prefix,
            channels,
            dev: options.dev,
            playground: options.playground,
        });
    }
    let bridge_task = bridge::spawn(bridge_listener, bridged, shutdown.clone());
    let longest_tool = found
        .host
        .agents
        .iter()
        .flat_map(|p| p.agent.tools.iter().map(|t| t.timeout))
        .max()
        .unwrap_or_default();
    let bounds = edge::RequestBounds {
        default: options.edge.request_timeout,
        mcp: options.edge.request_timeout + options.mcp_max_wait,
        tools: options.edge.request_timeout + longest_tool,
    };
    let router = api::router(&agents, options.mode, options.body_limit, shutdown.clone())
        .merge(playground::router(
            &agents,
            options.mode,
            options.playground,
        ))
        .layer(axum::middleware::from_fn_with_state(
            bounds,
            edge::request_timeout,
        ));
    let max_connections = edge::connection_cap(&options.edge);
    tracing::debug!(max_connections, "connection cap");
    let server = tokio::spawn(edge::run(
        listener,
        edge::Edge {
            router,
            options: options.edge.clone(),
            max_connections,
            shutdown: shutdown.clone(),
            grace: options.shutdown_grace,
        },
    ));
    Ok(ServeHandle {
        addr,
        agents,
        mode: options.mode,
        shutdown,
        server,
        bridge: bridge_task,
        grace: options.shutdown_grace,
        host: Arc::new(found.host),
        playground: options.playground,
    })
}

/// The address peers dial: the bound one, with an unspecified IP (bound
/// to all interfaces) replaced by loopback.
fn loopback_of(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), addr.port())
        }
        IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::new(IpAddr::V6(std::net::Ipv6Addr::LOCALHOST), addr.port())
        }
        _ => addr,
    }
}

/// A model string from outside the project (`what` names its source).
fn parse_model(what: &str, s: &str) -> Result<ModelSpec> {
    agentkit_manifest::parse_model_string(s).map_err(|(message, hint)| Error::Config {
        message: format!(
            "{what}: {message}{}",
            hint.map(|h| format!(" ({h})")).unwrap_or_default()
        ),
    })
}

/// `AGENTKIT_MODEL` (passed in by the binary), else `test` under `--dev`.
fn resolve_default_model(options: &ServeOptions) -> Result<Option<ModelSpec>> {
    if let Some(s) = &options.default_model {
        return Ok(Some(parse_model("AGENTKIT_MODEL", s)?));
    }
    if options.dev {
        return Ok(Some(ModelSpec {
            provider: Provider::Test,
            id: String::new(),
            params: Default::default(),
        }));
    }
    Ok(None)
}

/// Resolves on Ctrl-C, or on SIGTERM (what container runtimes send) on
/// Unix: the signal both binaries stop serving on.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
