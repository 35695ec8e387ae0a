//! How to serve: the public [`ServeOptions`] embedders fill in, and the
//! per-concern parts `serve()` splits it into, so that each step of the
//! wiring takes only the concern it reads (the edge, the default auth
//! chain, models, MCP, timers, the embedder's Rust extensions).

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agentkit_manifest::{ModelSpec, Provider};
use agentkit_runtime::{Clock, SystemClock};

use super::edge::EdgeOptions;
use crate::error::{Error, Result};

/// How `${VAR}` references are resolved: the workspace's one lookup type
/// (an empty value counts as unset). The library never reads the process
/// environment itself; the binary passes [`EnvLookup::process`].
pub use agentkit_channels::{Env as EnvLookup, EnvFn};

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
    /// `0` picks a free port; [`ServeHandle::url`](crate::ServeHandle::url) tells which.
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
    /// The operator token (`--operator-token`, `AGENTKIT_OPERATOR_TOKEN`):
    /// its holder (`Authorization: Bearer <token>`) is the `operator`
    /// principal on every agent's built-in API and may list, stream,
    /// follow up, stop and resolve approvals on every session, whoever
    /// owns it. Under `dev` the direct loopback caller is an operator too.
    pub operator_token: Option<String>,
    /// An auth chain written in Rust (a [`agentkit_auth::Policy::Custom`]
    /// verifier, a `jwt` policy, any built-in one) in place of the
    /// default on channels that author none; it wins over
    /// `bearer_token` and `allow_anonymous`.
    pub auth: Option<Vec<agentkit_auth::Policy>>,
    /// OIDC sign-in for people (`--oidc-issuer` …): `/login` at the host,
    /// a session cookie for the playground and the API, and the
    /// provider's access tokens as bearer tokens on every agent's
    /// built-in API. See `docs/guides/sso.md`.
    pub oidc: Option<super::oidc::OidcOptions>,
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
    /// The secret provider for `${secret:name}` references
    /// (`--secret-command`), run once per secret at start.
    pub secret_command: Option<crate::secrets::SecretCommand>,
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
    /// Let A2A push notifications go to loopback, private, link-local and
    /// other non-public addresses (`--a2a-push-private-networks`). Off by
    /// default: a client names the URL the server calls.
    pub a2a_push_private_networks: bool,
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
    /// [`ServeHandle::dispatch_reminder`](crate::ServeHandle::dispatch_reminder)).
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
    /// Rust run-form reminder handlers by name, for reminders created
    /// with `ReminderAction::Named("<name>")` (every agent may use them).
    /// With `--database-url`, register the same names on every host: the
    /// host that claims a reminder calls its own handler of that name.
    pub reminder_handlers: agentkit_runtime::ReminderHandlers,
    /// How the HTTP edge bounds connections and requests: header-read
    /// and idle timeout, request timeout, write-stall timeout, the
    /// connection cap.
    pub edge: EdgeOptions,
    /// Serve the playground at `/<slug>/playground` (`/playground` in
    /// single mode); `--no-playground` turns it off. `/docs` is served
    /// either way.
    pub playground: bool,
    /// Traces (OTLP/HTTP), message-content capture and who may read
    /// `/metrics`; off unless configured (see
    /// [`TelemetryOptions::from_env`](crate::TelemetryOptions::from_env)).
    pub telemetry: super::telemetry::TelemetryOptions,
    /// A PostgreSQL URL (`--database-url`, `AGENTKIT_DATABASE_URL`):
    /// sessions, their event logs and leases are shared with every host
    /// started on the same database (see `docs/guides/scale-out.md`).
    /// Migrations are applied at start. `None`: this host's files.
    pub database_url: Option<String>,
    /// Called once the host has run no turn for a while after serving
    /// some, after each agent let go of its idle caches: the binary's
    /// allocator can give its free pages back (`agentkit serve` purges
    /// jemalloc's arenas and trims glibc's heap). `None`: nothing more.
    pub release_memory: Option<MemoryRelease>,
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

    /// Registers a Rust run-form reminder handler under `name`, for
    /// reminders created with `ReminderAction::Named("<name>")`.
    pub fn reminder_handler(
        mut self,
        name: impl Into<String>,
        handler: impl agentkit_runtime::ReminderHandler + 'static,
    ) -> ServeOptions {
        self.reminder_handlers.insert(name, handler);
        self
    }

    /// Registers a Rust tool for every agent.
    pub fn tool(mut self, tool: impl agentkit_harness::DynTool + 'static) -> ServeOptions {
        self.tools.push(Arc::new(tool));
        self
    }
}

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
            operator_token: None,
            auth: None,
            oidc: None,
            default_model: None,
            model: None,
            body_limit: 1024 * 1024,
            shutdown_grace: Duration::from_secs(10),
            env: EnvLookup::empty(),
            secret_command: None,
            providers: agentkit_harness::ProviderConfig::default(),
            mcp_max_wait: agentkit_mcp::DEFAULT_MAX_WAIT,
            max_hops: agentkit_mcp::DEFAULT_MAX_HOPS,
            a2a_push_private_networks: false,
            mcp_clients: agentkit_mcp::ClientOptions::default(),
            public_url: None,
            channels: Vec::new(),
            schedules: true,
            reminders: None,
            clock: None,
            hooks: Vec::new(),
            tools: Vec::new(),
            schedule_handlers: Default::default(),
            reminder_handlers: Default::default(),
            edge: EdgeOptions::default(),
            playground: true,
            telemetry: Default::default(),
            database_url: None,
            release_memory: None,
        }
    }
}

/// What [`ServeOptions::release_memory`] calls (on the blocking pool).
#[derive(Clone)]
pub struct MemoryRelease(pub Arc<dyn Fn() + Send + Sync>);

impl std::fmt::Debug for MemoryRelease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MemoryRelease")
    }
}

/// [`ServeOptions`] split by concern: what `serve()` hands each step.
#[derive(Debug)]
pub(crate) struct Parts {
    pub(crate) listen: Listen,
    pub(crate) edge: Edge,
    pub(crate) auth: AuthDefaults,
    pub(crate) state_root: Option<PathBuf>,
    pub(crate) models: Models,
    pub(crate) mcp: Mcp,
    pub(crate) timers: Timers,
    /// Serving with `--dev`: the dev routes answer, packs accept unsigned
    /// test deliveries, timers stay off unless asked for.
    pub(crate) dev: bool,
    /// The one `${VAR}` lookup, read once per agent by `resolve`.
    pub(crate) env: EnvLookup,
    /// `ServeOptions::secret_command`.
    pub(crate) secret_command: Option<crate::secrets::SecretCommand>,
    pub(crate) extensions: Extensions,
    /// Serve the playground (`ServeOptions::playground`).
    pub(crate) playground: bool,
    pub(crate) telemetry: super::telemetry::TelemetryOptions,
    /// `ServeOptions::database_url`.
    pub(crate) database_url: Option<String>,
}

/// Where to listen and how agents are mounted.
#[derive(Debug, Clone)]
pub(crate) struct Listen {
    pub(crate) host: IpAddr,
    pub(crate) port: u16,
    pub(crate) public_url: Option<String>,
    pub(crate) mode: Mode,
}

/// How the HTTP edge bounds requests and how long shutdown waits.
#[derive(Debug, Clone)]
pub(crate) struct Edge {
    pub(crate) options: EdgeOptions,
    pub(crate) body_limit: usize,
    pub(crate) shutdown_grace: Duration,
    /// `ServeOptions::release_memory`.
    pub(crate) release_memory: Option<MemoryRelease>,
}

/// What replaces the default `local_dev_strict` chain on channels that
/// author none.
#[derive(Debug, Clone, Default)]
pub(crate) struct AuthDefaults {
    pub(crate) bearer_token: Option<String>,
    pub(crate) allow_anonymous: bool,
    /// Who is an operator besides the loopback caller under `--dev`.
    pub(crate) operator_token: Option<String>,
    /// The embedder's chain (`ServeOptions::auth`), first of all.
    pub(crate) policies: Option<Vec<agentkit_auth::Policy>>,
    /// `ServeOptions::oidc`, as given.
    pub(crate) oidc_options: Option<super::oidc::OidcOptions>,
    /// The started OIDC client (set once discovery answered): its policy
    /// goes first in every built-in chain.
    pub(crate) oidc: Option<agentkit_auth::Oidc>,
}

/// The models agents run on, checked at startup.
#[derive(Debug, Clone)]
pub(crate) struct Models {
    /// For agents that name none (`AGENTKIT_MODEL`, else `test` under
    /// `--dev`).
    pub(crate) default: Option<ModelSpec>,
    /// Every agent's model instead of its own (`--model`).
    pub(crate) forced: Option<ModelSpec>,
    pub(crate) providers: Arc<agentkit_harness::ProviderConfig>,
}

/// The MCP server's waits and bounds and how client connections open.
#[derive(Debug, Clone)]
pub(crate) struct Mcp {
    pub(crate) max_wait: Duration,
    pub(crate) max_hops: u32,
    pub(crate) clients: agentkit_mcp::ClientOptions,
    /// A2A push notifications may reach non-public addresses.
    pub(crate) push_private_networks: bool,
}

/// Which timers run, on which clock.
#[derive(Debug, Clone)]
pub(crate) struct Timers {
    /// Schedules fire on their cron cadence (never under `--dev`).
    pub(crate) schedules: bool,
    /// Reminders fire on their timers.
    pub(crate) reminders: bool,
    pub(crate) clock: Arc<dyn Clock>,
}

/// What the embedder wrote in Rust: channels, hooks, tools and schedule
/// handlers.
#[derive(Debug, Clone)]
pub(crate) struct Extensions {
    pub(crate) channels: Vec<(String, agentkit_channels::ChannelDefinition)>,
    pub(crate) hooks: Vec<agentkit_runtime::HookSpec>,
    pub(crate) tools: Vec<Arc<dyn agentkit_harness::DynTool>>,
    pub(crate) schedule_handlers: agentkit_runtime::ScheduleHandlers,
    pub(crate) reminder_handlers: agentkit_runtime::ReminderHandlers,
}

impl ServeOptions {
    /// Splits the options by concern, parsing the model strings (an
    /// error names the option it came from).
    pub(crate) fn into_parts(self) -> Result<Parts> {
        let default = match &self.default_model {
            Some(s) => Some(parse_model("AGENTKIT_MODEL", s)?),
            None if self.dev => Some(ModelSpec {
                provider: Provider::Test,
                id: String::new(),
                params: Default::default(),
                context_window: None,
                max_output_tokens: None,
                pricing: None,
            }),
            None => None,
        };
        if self.operator_token.is_some() && self.operator_token == self.bearer_token {
            return Err(Error::Config {
                message: "the operator token must differ from the bearer token: every bearer holder would be an operator".into(),
            });
        }
        let forced = match &self.model {
            Some(s) => Some(parse_model("--model", s)?),
            None => None,
        };
        Ok(Parts {
            listen: Listen {
                host: self.host,
                port: self.port,
                public_url: self.public_url,
                mode: self.mode,
            },
            edge: Edge {
                options: self.edge,
                body_limit: self.body_limit,
                shutdown_grace: self.shutdown_grace,
                release_memory: self.release_memory,
            },
            auth: AuthDefaults {
                bearer_token: self.bearer_token,
                allow_anonymous: self.allow_anonymous,
                operator_token: self.operator_token,
                policies: self.auth,
                oidc_options: self.oidc,
                oidc: None,
            },
            state_root: self.state_root,
            models: Models {
                default,
                forced,
                providers: Arc::new(self.providers),
            },
            mcp: Mcp {
                max_wait: self.mcp_max_wait,
                max_hops: self.max_hops,
                clients: self.mcp_clients,
                push_private_networks: self.a2a_push_private_networks,
            },
            timers: Timers {
                schedules: self.schedules && !self.dev,
                reminders: self.reminders.unwrap_or(!self.dev),
                clock: self.clock.unwrap_or_else(|| Arc::new(SystemClock)),
            },
            dev: self.dev,
            playground: self.playground,
            telemetry: self.telemetry,
            database_url: self.database_url,
            env: self.env,
            secret_command: self.secret_command,
            extensions: Extensions {
                channels: self.channels,
                hooks: self.hooks,
                tools: self.tools,
                schedule_handlers: self.schedule_handlers,
                reminder_handlers: self.reminder_handlers,
            },
        })
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
