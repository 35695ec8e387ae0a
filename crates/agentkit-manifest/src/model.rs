//! The discovered project: plain data that later layers serve.
//!
//! Types that mirror a file format one-to-one deserialize straight from
//! TOML (snake_case keys) and serialize to JSON for `agentkit info --json`
//! and `GET /v1/info` (camelCase keys). Fields that discovery derives
//! (names from file stems, relative paths) are skipped when reading.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

/// Serializes a duration as whole milliseconds.
pub(crate) fn ser_ms<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

fn ser_opt_ms<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => ser_ms(d, s),
        None => s.serialize_none(),
    }
}

/// Everything found under one discovered folder: one project, or a folder
/// of projects served together.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Host {
    #[serde(skip)]
    pub root: PathBuf,
    pub layout: Layout,
    pub agents: Vec<Project>,
}

impl Host {
    /// The project with this slug.
    pub fn project(&self, slug: &str) -> Option<&Project> {
        self.agents.iter().find(|p| p.slug == slug)
    }
}

/// Whether the discovered folder was itself a project or a folder of them.
/// Both are served in the multi-agent layout (`/<slug>/v1/*`) unless the
/// host asks for single mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// The folder has an `agent/` folder of its own.
    Project,
    /// The folder's children are projects.
    Folder,
}

/// One agent project: `agent/` plus optional `evals/`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Project {
    pub slug: String,
    /// The project folder, relative to the discovered root (`.` when the
    /// root is the project).
    pub path: String,
    #[serde(skip)]
    pub dir: PathBuf,
    pub agent: Agent,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evals: Option<Evals>,
}

/// The root agent of a project (`agent/`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Agent {
    /// The `agent/` folder.
    #[serde(skip)]
    pub dir: PathBuf,
    pub config: AgentConfig,
    pub instructions: Option<Instructions>,
    pub tools: Vec<Tool>,
    pub skills: Vec<Skill>,
    pub mcp_connections: Vec<Connection>,
    pub subagents: Vec<Subagent>,
    pub channels: Vec<Channel>,
    pub hooks: Vec<Hook>,
    pub schedules: Vec<Schedule>,
    pub experiments: Vec<Experiment>,
    /// `artifacts.toml`: the kinds of records the agent keeps; `None`
    /// when the file is absent (kinds are then free-form).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Artifacts>,
    /// Files seeded into every session workspace, relative to
    /// `sandbox/workspace/`.
    pub sandbox_files: Vec<String>,
    /// Every `${VAR}` reference, recorded and not resolved.
    pub env_refs: Vec<EnvRef>,
}

impl Agent {
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }

    pub fn channel(&self, id: &str) -> Option<&Channel> {
        self.channels.iter().find(|c| c.id == id)
    }
}

/// `agent.toml`, resolved.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `None` means the host default (`AGENTKIT_MODEL`, or `test` under
    /// `--dev`); on a subagent, inherit the parent's.
    pub model: Option<ModelSpec>,
    pub runtime: Runtime,
    pub harness: HarnessConfig,
    pub local: LocalConfig,
    /// `[sessions]`: how long settled sessions are kept.
    pub sessions: SessionsConfig,
    /// `[memory]`: the shared journal of settled turns.
    pub memory: MemoryConfig,
    /// `[auth]`: the roles of the principals the agent's chain admits.
    #[serde(skip_serializing_if = "AuthConfig::is_empty")]
    pub auth: AuthConfig,
    /// `output_schema`: the final reply of every turn is a JSON value
    /// valid against this schema (`turn.completed.data.output`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
}

/// A model: `provider:id` or a `[model]` table.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelSpec {
    pub provider: Provider,
    /// The provider's model id; for `scripted`, the script path relative
    /// to `agent/`; empty for `test`.
    pub id: String,
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub params: serde_json::Map<String, Value>,
    /// `[model] context_window`: the model's window in tokens (`None`:
    /// known for common OpenAI and Anthropic models, else unbounded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// `[model] max_output_tokens`: what a reply may take of the window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// `[model.pricing]`: the model's prices (`None`: the built-in table's,
    /// if it knows the model).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pricing: Option<Pricing>,
}

/// A model's prices, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pricing {
    /// Input tokens neither read from nor written to the provider's cache.
    pub input: f64,
    pub output: f64,
    /// Input tokens read from the provider's prompt cache.
    pub cache_read: f64,
    /// Input tokens written to the provider's prompt cache.
    pub cache_write: f64,
}

impl Pricing {
    /// The keys of `[model.pricing]`.
    pub const KEYS: [&'static str; 4] = ["input", "output", "cache_read", "cache_write"];
}

/// The model providers this host knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    Openai,
    Anthropic,
    Scripted,
    Test,
}

impl Provider {
    pub const ALL: &'static [Provider] = &[
        Provider::Openai,
        Provider::Anthropic,
        Provider::Scripted,
        Provider::Test,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Openai => "openai",
            Provider::Anthropic => "anthropic",
            Provider::Scripted => "scripted",
            Provider::Test => "test",
        }
    }
}

/// Where turns run. Only `local` exists in this host; `cloud` is accepted
/// with a warning and runs locally.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    #[default]
    Local,
}

/// `[harness]`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HarnessConfig {
    /// Workspace tools the model gets (`read`, `write`, `edit`, `list`,
    /// `grep`, `glob`, `shell`).
    pub builtin_tools: Vec<String>,
    pub max_steps: u32,
    #[serde(serialize_with = "ser_ms", rename = "turnTimeoutMs")]
    pub turn_timeout: Duration,
    /// How long a call waiting for approval may wait before it is denied
    /// with the reason "timed out". `None`: it waits until someone decides.
    #[serde(serialize_with = "ser_opt_ms", rename = "approvalTimeoutMs")]
    pub approval_timeout: Option<Duration>,
    /// `[harness.sandbox]`: what the `shell` built-in's children may reach,
    /// and the defaults every server tool's sandbox starts from.
    pub sandbox: Sandbox,
    /// `compaction = "auto" | "off"`: summarise older turns when a request
    /// would cross `compaction_threshold` of the model's window.
    pub compaction: bool,
    /// The fraction of the window (minus the output reserve) a request may
    /// fill before older turns are compacted.
    pub compaction_threshold: f64,
    /// Token budgets (`None`: no limit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_input_tokens_per_turn: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_tokens_per_turn: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens_per_session: Option<u64>,
    /// Input plus output tokens of all the agent's turns in one UTC day.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens_per_day: Option<u64>,
    /// `[harness.budget]`: budgets in US dollars (`None`: no limit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cost_usd_per_session: Option<f64>,
    /// What all the agent's turns may cost in one UTC day.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cost_usd_per_day: Option<f64>,
}

/// How strictly a sandbox applies (`mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxMode {
    /// Sandboxed, and refused where the host cannot sandbox.
    Enforce,
    /// Sandboxed where the host can; elsewhere the child runs unsandboxed
    /// and the host says so loudly (startup log, `/v1/info`).
    #[default]
    Warn,
    /// Never sandboxed.
    Off,
}

impl SandboxMode {
    pub const ALL: [SandboxMode; 3] = [SandboxMode::Enforce, SandboxMode::Warn, SandboxMode::Off];

    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::Enforce => "enforce",
            SandboxMode::Warn => "warn",
            SandboxMode::Off => "off",
        }
    }
}

/// What a sandboxed child process may read, write and reach, beyond the
/// system folders, its workspace and its private temporary folder (the
/// harness adds those).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Sandbox {
    pub mode: SandboxMode,
    /// TCP connect and bind.
    pub network: bool,
    /// Extra read-only paths; relative ones were resolved against the
    /// project folder.
    pub read: Vec<PathBuf>,
    /// Extra read-write paths, resolved the same way.
    pub write: Vec<PathBuf>,
    pub limits: SandboxLimits,
}

impl Default for Sandbox {
    /// The `shell` built-in's default: no network.
    fn default() -> Self {
        Sandbox {
            mode: SandboxMode::default(),
            network: false,
            read: Vec::new(),
            write: Vec::new(),
            limits: SandboxLimits::default(),
        }
    }
}

/// Resource limits of a sandboxed child (`setrlimit`); 0 is no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxLimits {
    /// CPU time of each process (`RLIMIT_CPU`).
    pub cpu_seconds: u64,
    /// Address space of each process, in MiB (`RLIMIT_AS`).
    pub memory_mb: u64,
    /// Processes and threads the child may add to what its user already
    /// runs (`RLIMIT_NPROC`; root is exempt).
    pub processes: u64,
    /// Open files of each process (`RLIMIT_NOFILE`).
    pub open_files: u64,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            cpu_seconds: 600,
            memory_mb: 8192,
            processes: 512,
            open_files: 1024,
        }
    }
}

/// The workspace tools a harness can give the model.
/// `remind_me` is never on by default: it lets the model create reminders.
pub const BUILTIN_TOOLS: &[&str] = &[
    "read",
    "write",
    "edit",
    "list",
    "grep",
    "glob",
    "shell",
    "remind_me",
    "remember",
    "recall",
    "forget",
];

impl Default for HarnessConfig {
    fn default() -> Self {
        HarnessConfig {
            builtin_tools: ["read", "write", "edit", "list", "grep", "glob", "shell"]
                .map(String::from)
                .to_vec(),
            max_steps: 50,
            turn_timeout: Duration::from_secs(600),
            approval_timeout: None,
            sandbox: Sandbox::default(),
            compaction: true,
            compaction_threshold: 0.8,
            max_input_tokens_per_turn: None,
            max_output_tokens_per_turn: None,
            max_tokens_per_session: None,
            max_tokens_per_day: None,
            max_cost_usd_per_session: None,
            max_cost_usd_per_day: None,
        }
    }
}

/// `[sessions]`: settled sessions past `retention` (since their last
/// activity), and the least recently active beyond `max_sessions`, are
/// deleted with everything they kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionsConfig {
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser_opt_ms",
        rename = "retentionMs"
    )]
    pub retention: Option<Duration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_sessions: Option<u64>,
}

impl SessionsConfig {
    /// Whether anything is ever deleted by age or count.
    pub fn deletes(&self) -> bool {
        self.retention.is_some() || self.max_sessions.is_some()
    }
}

/// `[memory]`: with `journal`, one JSON line per settled turn is
/// appended to the agent's `memory/journal.jsonl` (under its state
/// folder), rotated past `journal_max_bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryConfig {
    pub journal: bool,
    pub journal_max_bytes: u64,
}

/// `[auth]` of `agent.toml`: `default_role`, `[auth.roles]` and
/// `tenant_claim`, checked (known role names, `<claim>:<value>` rules);
/// the facade turns them into the chain's role map.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_role: Option<String>,
    /// Role → rules, in file order of roles (sorted by name).
    pub roles: Vec<(String, Vec<String>)>,
    /// The token claim (a dotted path) that names a principal's tenant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant_claim: Option<String>,
}

impl AuthConfig {
    /// Nothing configured (every principal a `user`).
    pub fn is_empty(&self) -> bool {
        self.default_role.is_none() && self.roles.is_empty() && self.tenant_claim.is_none()
    }
}

/// The journal's default size before it is rotated: 1 MiB.
pub const JOURNAL_MAX_BYTES: u64 = 1024 * 1024;

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            journal: false,
            journal_max_bytes: JOURNAL_MAX_BYTES,
        }
    }
}

/// `[local]`.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalConfig {
    /// With `cwd`, sessions work in `<cwd>/<sessionId>` instead of under
    /// the state root.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
}

/// The always-on system prompt.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Instructions {
    /// The files it was composed from, relative to the discovered root.
    pub files: Vec<String>,
    /// The composed text (files joined by a blank line, in filename order).
    #[serde(skip)]
    pub text: String,
    pub bytes: usize,
}

/// A tool: `tools/<name>.toml`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    pub name: String,
    pub path: String,
    pub description: String,
    pub execution: Execution,
    /// Server tools: the program and its arguments, run in `cwd`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// The folder of the tool's file; relative commands resolve here.
    #[serde(skip)]
    pub cwd: PathBuf,
    /// Agent tools: the script written into the workspace.
    #[serde(skip)]
    pub script: Option<String>,
    #[serde(serialize_with = "ser_ms", rename = "timeoutMs")]
    pub timeout: Duration,
    pub max_output_bytes: u64,
    /// Environment variables passed through to the child (the rest of the
    /// host's environment is scrubbed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    pub needs_approval: Approval,
    pub annotations: ToolAnnotations,
    pub input_schema: Value,
    /// The sandbox of the tool's child: `[harness.sandbox]` with network
    /// on, then the tool's own `sandbox` (server tools only).
    pub sandbox: Sandbox,
    /// Who may call the tool: the model (the default), or only the host
    /// (routes, route handlers, schedules, `POST /v1/tools/:name`).
    pub expose: Expose,
    /// Server tools: the program runs as a long-lived worker (`worker =
    /// true` or a `[worker]` table) that answers calls one JSON line at a
    /// time, instead of one process per call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker: Option<Worker>,
}

/// `worker` of a server tool: how its worker process takes calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Worker {
    /// Calls one worker process has in flight at most (1 to
    /// [`MAX_WORKER_CONCURRENCY`]); more wait their turn, in order.
    pub concurrency: u32,
    /// A worker with no call in flight for this long is stopped; the next
    /// call starts a new one.
    #[serde(serialize_with = "ser_ms", rename = "idleTimeoutMs")]
    pub idle_timeout: Duration,
    /// Which calls share one worker process.
    pub scope: WorkerScope,
}

/// `[worker] scope`: which calls one worker process serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkerScope {
    /// One worker per tool of the agent, for every session (the default).
    #[default]
    Agent,
    /// One worker per session: it may keep the session's state between
    /// calls, and is confined like a spawned call of that session (its
    /// workspace writable).
    Session,
}

/// How long a worker may sit idle by default.
pub const DEFAULT_WORKER_IDLE: Duration = Duration::from_secs(600);

/// The highest `[worker] concurrency` a tool may ask for.
pub const MAX_WORKER_CONCURRENCY: u32 = 64;

impl Default for Worker {
    fn default() -> Worker {
        Worker {
            concurrency: 1,
            idle_timeout: DEFAULT_WORKER_IDLE,
            scope: WorkerScope::Agent,
        }
    }
}

impl Tool {
    /// Is the tool offered to the model (listed in provider requests and
    /// callable by a turn)?
    pub fn offered_to_model(&self) -> bool {
        self.execution == Execution::Server && self.expose == Expose::Model
    }
}

/// `expose` of a tool file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Expose {
    /// Offered to the model, and callable by the host.
    #[default]
    Model,
    /// Callable by the host only: never offered to a model.
    Host,
}

/// A program the host runs outside a turn (a route handler, a schedule
/// command): like a server tool's `command`, through the same runner,
/// sandbox, timeout and output cap, with a JSON document on stdin.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Command {
    /// The program and its arguments.
    pub command: Vec<String>,
    /// The agent folder (`agent/`): relative programs and paths resolve
    /// here.
    #[serde(skip)]
    pub cwd: PathBuf,
    #[serde(serialize_with = "ser_ms", rename = "timeoutMs")]
    pub timeout: Duration,
    pub max_output_bytes: u64,
    /// Environment variables passed through (the rest is scrubbed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
}

/// `[routes.handler]`: a program that answers the route.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteHandler {
    #[serde(flatten)]
    pub command: Command,
    /// Request headers (lowercase names) handed to the program; no other
    /// header reaches it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<String>,
}

/// Where a tool runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Execution {
    /// A subprocess on the host.
    #[default]
    Server,
    /// A script in the session workspace that the model runs itself.
    Agent,
}

/// When a tool call waits for a human.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "mode", content = "schema")]
pub enum Approval {
    Never,
    Always,
    /// When the validated input matches this JSON Schema.
    When(Value),
}

/// MCP-style behaviour hints. Dry-run sessions stub tools that are not
/// read-only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all(serialize = "camelCase"), deny_unknown_fields)]
pub struct ToolAnnotations {
    #[serde(default)]
    pub read_only: bool,
    #[serde(default)]
    pub destructive: bool,
    #[serde(default)]
    pub idempotent: bool,
    #[serde(default)]
    pub open_world: bool,
}

/// A skill: `skills/<name>.md` or `skills/<name>/SKILL.md`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Skill {
    pub name: String,
    pub path: String,
    pub description: String,
    pub packaged: bool,
    /// The skill's Markdown (without frontmatter).
    #[serde(skip)]
    pub body: String,
    /// Packaged skills: the other files of the package, relative to its
    /// folder.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    #[serde(skip)]
    pub dir: Option<PathBuf>,
}

/// An MCP connection: `mcp-connections/<name>.toml`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Connection {
    pub name: String,
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub transport: Transport,
    /// `oauth = true` (HTTP only): requests carry the access token that
    /// `agentkit mcp login` obtained and the host refreshes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub oauth: bool,
    /// `auth = "agent-identity"` (HTTP and A2A): each request carries a
    /// short-lived token the host signs, with this audience (`audience`,
    /// else the connection's URL; `${VAR}` kept).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_identity: Option<String>,
    /// How `agentkit mcp login` identifies itself to the authorization
    /// server when dynamic registration is not what it wants. Never
    /// serialized: the secret stays in the file.
    #[serde(skip)]
    pub oauth_client: OAuthClientSettings,
}

/// `oauth_client_id` / `oauth_client_secret` (a client registered with the
/// authorization server beforehand) and `oauth_client_metadata_url` (the
/// HTTPS URL of this client's metadata document, used as its client id
/// where the server supports client ID metadata documents). Strings keep
/// their `${VAR}` references.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OAuthClientSettings {
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    pub metadata_url: Option<String>,
}

/// How an MCP connection is reached. Strings keep their `${VAR}`
/// references; they are resolved when the connection opens.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "type")]
pub enum Transport {
    /// Streamable HTTP.
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
    /// A child process speaking MCP on stdio.
    Stdio {
        command: String,
        args: Vec<String>,
        #[serde(serialize_with = "redact_map")]
        env: BTreeMap<String, String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cwd: Option<String>,
    },
    /// Another agent on the same host, by slug.
    Peer { agent: String },
    /// A remote A2A agent, by the URL of its agent card: the model gets
    /// it as one tool.
    A2a {
        card: String,
        headers: BTreeMap<String, String>,
    },
}

/// A subagent: `subagents/<id>/`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Subagent {
    pub id: String,
    pub path: String,
    pub description: String,
    /// `None`: inherit the parent's model.
    pub model: Option<ModelSpec>,
    pub instructions: Option<Instructions>,
}

/// A channel: `channels/<id>.toml`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Channel {
    pub id: String,
    pub path: String,
    pub kind: ChannelKind,
    /// The authored auth chain; `None` means the host default.
    pub auth: Option<Vec<AuthPolicy>>,
    pub routes: Vec<Route>,
    /// Deliveries by event type (or `*`).
    pub events: BTreeMap<String, Delivery>,
    /// `max_body`: the largest request body the channel reads, in bytes
    /// (`None`: the pack's default, or the host's limit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_body: Option<u64>,
    /// Starting state of each new session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<Value>,
    /// Pack settings (`github`, `gitlab`, `bitbucket`, `slack`), read by
    /// the pack itself.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "redact_settings"
    )]
    pub settings: Option<Value>,
}

/// What a channel file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChannelKind {
    Webhook,
    /// Overrides the built-in HTTP channel (its auth chain).
    Http,
    Github,
    Gitlab,
    Bitbucket,
    Slack,
}

impl ChannelKind {
    pub fn is_pack(self) -> bool {
        matches!(
            self,
            ChannelKind::Github | ChannelKind::Gitlab | ChannelKind::Bitbucket | ChannelKind::Slack
        )
    }
}

/// One policy of an auth chain. The first policy that admits a request
/// wins; none admitting is a 401.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "policy")]
pub enum AuthPolicy {
    /// Direct loopback peer, loopback `Host`, no forwarding headers.
    LocalDevStrict,
    /// Direct loopback peer, no forwarding headers.
    LocalDev,
    /// Any loopback peer.
    LoopbackOnly,
    /// Every caller, as the anonymous principal.
    AllowAll,
    /// Every caller on a custom channel route; never on the built-in API.
    PublicEndpoint,
    /// `Authorization: Bearer <token>`; each token maps to a principal.
    Bearer { tokens: Vec<BearerToken> },
    /// A header that must equal a secret.
    SharedSecret {
        header: String,
        #[serde(serialize_with = "redact")]
        secret: String,
    },
    /// A hex HMAC-SHA256 signature of the raw body in a header.
    HmacSignature {
        header: String,
        #[serde(serialize_with = "redact")]
        secret: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        prefix: Option<String>,
    },
    /// `Authorization: Bearer <JWT>` signed by an identity provider whose
    /// keys are published at `jwks_url`.
    #[serde(rename_all = "camelCase")]
    Jwt {
        jwks_url: String,
        issuer: String,
        /// Accepted `aud` values; a token must carry one.
        audience: Vec<String>,
        /// Accepted `alg`s (asymmetric only).
        algorithms: Vec<String>,
        clock_skew_seconds: u64,
        /// The claim naming the principal, and what goes before it.
        principal_claim: String,
        principal_prefix: String,
        /// Context attributes from claims: attribute → claim.
        claims: std::collections::BTreeMap<String, String>,
        cache_seconds: u64,
        refetch_floor_seconds: u64,
    },
}

/// A bearer token and the principal it authenticates. The token is
/// redacted in JSON output.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BearerToken {
    #[serde(serialize_with = "redact")]
    pub token: String,
    pub principal: String,
}

/// Secrets never reach JSON output; `${VAR}` references are shown as-is
/// because they name, not contain, the secret.
pub(crate) fn redact<S: Serializer>(v: &str, s: S) -> Result<S::Ok, S::Error> {
    if v.starts_with("${") && v.ends_with('}') {
        s.serialize_str(v)
    } else {
        s.serialize_str("<redacted>")
    }
}

/// Does a header, variable or setting with this name carry a secret?
fn is_sensitive_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "authorization",
        "token",
        "secret",
        "key",
        "cookie",
        "password",
        "signature",
        "credential",
    ]
    .iter()
    .any(|s| n.contains(s))
}

/// Shows a sensitive value only when it names its secret through `${VAR}`
/// references instead of containing it.
fn redacted_value(name: &str, value: &str) -> String {
    if is_sensitive_name(name) && !value.contains("${") {
        "<redacted>".to_owned()
    } else {
        value.to_owned()
    }
}

fn redact_map<S: Serializer>(map: &BTreeMap<String, String>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(map.iter().map(|(k, v)| (k, redacted_value(k, v))))
}

fn redact_json(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = match v {
                        Value::String(text) => Value::String(redacted_value(k, text)),
                        other => redact_json(other),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(redact_json).collect()),
        other => other.clone(),
    }
}

fn redact_settings<S: Serializer>(v: &Option<Value>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => redact_json(v).serialize(s),
        None => s.serialize_none(),
    }
}

/// HTTP methods a route can take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Method {
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Patch => "PATCH",
            Method::Delete => "DELETE",
        }
    }
}

/// A webhook route.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Route {
    pub method: Method,
    /// Relative to `/v1/channels/<id>`, starting with `/`, with `:param`
    /// segments.
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_schema: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query_schema: Option<Value>,
    pub action: RouteAction,
    /// How to answer: a status and a body, both templates. Without it,
    /// the action's own answer is sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response: Option<RouteResponse>,
}

/// `[routes.response]`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteResponse {
    /// A status code, or a template that renders to one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
    /// The body; string values are templates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
}

impl Route {
    /// The `:param` names of the path, in order.
    pub fn params(&self) -> Vec<&str> {
        self.path
            .split('/')
            .filter_map(|s| s.strip_prefix(':'))
            .collect()
    }
}

/// What a route does once its input validates.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase", tag = "type")]
pub enum RouteAction {
    Send(SendAction),
    CallTool(CallToolAction),
    /// `call_tool`, then `send` with templates that also see the tool's
    /// envelope as `tool` (a tool error answers 502 and sends nothing).
    CallToolThenSend {
        call_tool: CallToolAction,
        send: SendAction,
    },
    /// `[routes.handler]`: a program answers.
    Handler(RouteHandler),
    /// Only answer, with `response`.
    Respond,
}

/// `[routes.send]`: a message into a session. Strings are minijinja
/// templates over `body`, `query`, `params` and `auth`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all(serialize = "camelCase"), deny_unknown_fields)]
pub struct SendAction {
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuation: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<Admission>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    /// Relative path → template of the file's content.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub workspace_files: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
    /// Answer only after the turn ends (200 with the reply) instead of at
    /// once (202).
    #[serde(default)]
    pub wait: bool,
    /// The final reply of a session this route starts is a JSON value
    /// validated against this schema (`reply.output` when `wait`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
}

/// What happens to a message that reaches a busy session (a wire type:
/// the HTTP API's `admission`).
pub use agentkit_protocol::Admission;

/// `[routes.call_tool]`: a deterministic tool call.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all(serialize = "camelCase"), deny_unknown_fields)]
pub struct CallToolAction {
    pub tool: String,
    /// The input; string values are templates.
    #[serde(default = "empty_object")]
    pub input: Value,
}

pub(crate) fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// An event delivery: POST to a URL when the channel's sessions record an
/// event.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all(serialize = "camelCase"), deny_unknown_fields)]
pub struct Delivery {
    pub post: String,
    /// A template for the body; the event itself when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        serialize_with = "redact_map"
    )]
    pub headers: BTreeMap<String, String>,
    /// Signs the body with HMAC-SHA256 into `signature_header`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "redact_opt"
    )]
    pub signature_secret: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature_header: Option<String>,
    /// After a successful delivery, these keys (templates over `event`,
    /// `state`, `session` and the target's JSON `response`) are merged
    /// into the session's channel state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<Value>,
}

fn redact_opt<S: Serializer>(v: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => redact(v, s),
        None => s.serialize_none(),
    }
}

/// A hook: `hooks/<name>.toml`. Observe-only.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hook {
    pub name: String,
    pub path: String,
    /// Event types, or `*`.
    pub events: Vec<String>,
    pub action: HookAction,
    #[serde(serialize_with = "ser_ms", rename = "timeoutMs")]
    pub timeout: Duration,
}

/// What a hook does with each event.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase", tag = "type")]
pub enum HookAction {
    /// Runs a command with the event JSON on stdin.
    Command {
        command: Vec<String>,
        #[serde(skip)]
        cwd: PathBuf,
    },
    /// POSTs the event JSON; with `secret`, signed with HMAC-SHA256.
    Url {
        url: String,
        headers: BTreeMap<String, String>,
        #[serde(serialize_with = "redact_opt", skip_serializing_if = "Option::is_none")]
        secret: Option<String>,
    },
}

/// A schedule: `schedules/<id>.md` or `schedules/<id>.toml`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Schedule {
    pub id: String,
    pub path: String,
    /// Standard 5-field cron, UTC.
    pub cron: String,
    pub action: ScheduleAction,
    /// `output_schema` of a `markdown` or `message` schedule: its turns'
    /// final replies are JSON values validated against it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
}

/// What a schedule does when it fires.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase", tag = "type")]
pub enum ScheduleAction {
    /// A task session with this prompt.
    Markdown { prompt: String },
    /// A message handed to a channel (the built-in HTTP channel when
    /// `channel` is absent).
    Message {
        message: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        channel: Option<String>,
    },
    /// A deterministic tool call.
    Tool { name: String, input: Value },
    /// A program run with the host bridge (send, tools, kv, MCP).
    Command(Command),
    /// A Rust handler the embedder registers under this name
    /// (`ServeOptions::schedule_handler`); serving without it is a
    /// startup error.
    Handler { name: String },
}

/// `artifacts.toml`: the kinds of artifacts an agent keeps.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifacts {
    pub path: String,
    /// Offer the model the built-in `tag_artifact` tool.
    pub agent_tool: bool,
    /// Keep at most this many (the least recently updated go first).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<u64>,
    /// The declared kinds, by name; tagging another kind is refused.
    pub kinds: Vec<ArtifactKind>,
}

impl Artifacts {
    pub fn kind(&self, name: &str) -> Option<&ArtifactKind> {
        self.kinds.iter().find(|k| k.name == name)
    }
}

/// One `[kinds.<name>]` of `artifacts.toml`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactKind {
    pub name: String,
    pub description: String,
    /// The JSON Schema (draft 2020-12) its data must match.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema: Option<serde_json::Value>,
}

/// An A/B experiment: `ab.toml` (id `ab`) or `ab/<id>.toml`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Experiment {
    pub id: String,
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The fraction of new sessions enrolled (0 to 1).
    pub traffic: f64,
    /// What keeps a variant: the continuation key, or the principal.
    pub sticky: Sticky,
    pub variants: Vec<Variant>,
}

/// `sticky` in an experiment file: what a variant sticks to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Sticky {
    /// The channel's continuation key (one conversation keeps its variant
    /// across sessions), else the session.
    #[default]
    Key,
    /// The admitted principal: every session of one caller gets one variant.
    Principal,
}

/// One arm of an experiment.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Variant {
    pub id: String,
    pub weight: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelSpec>,
    /// `instructions = "<file>"`: replaces the agent's instructions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<Instructions>,
    /// Appended to the instructions for sessions in this variant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions_append: Option<String>,
    /// The agent's authored tools this variant offers (all when `None`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Replaces `[harness] max_steps`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u32>,
}

/// `evals/`: the config and every eval file.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Evals {
    pub config: Option<EvalsConfig>,
    pub files: Vec<EvalFile>,
}

/// `evals/evals.toml`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all(serialize = "camelCase"), deny_unknown_fields)]
pub struct EvalsConfig {
    pub max_concurrency: u32,
    #[serde(default)]
    pub persist_runs: bool,
    #[serde(default = "default_max_playground_runs")]
    pub max_playground_runs: u32,
    /// Eval sessions stub the tools that are not `read_only` (a file or a
    /// case may say otherwise).
    #[serde(default)]
    pub dry_run: bool,
}

fn default_max_playground_runs() -> u32 {
    20
}

/// One `*.eval.toml`: one case, or several `[[cases]]`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EvalFile {
    /// The path under `evals/` without `.eval.toml` (`index.eval.toml`
    /// takes its folder's id).
    pub id: String,
    pub path: String,
    pub cases: Vec<EvalCase>,
}

/// One datapoint: a conversation and what to expect of it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EvalCase {
    /// The file id, or `<file id>/<case id>`.
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub tags: Vec<String>,
    #[serde(
        serialize_with = "ser_opt_ms",
        rename = "timeoutMs",
        skip_serializing_if = "Option::is_none"
    )]
    pub timeout: Option<Duration>,
    pub iterations: u32,
    /// `dry_run` of the case, else of its file; `None`: `evals.toml`'s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
    /// The session's output schema (`outputSchema` on its creation): the
    /// case's `output_schema`, else its file's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    pub turns: Vec<EvalTurn>,
}

/// One message of an eval and its expectations.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all(serialize = "camelCase"), deny_unknown_fields)]
pub struct EvalTurn {
    pub send: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub workspace_files: BTreeMap<String, String>,
    /// `approvals = [{ tool, approve, reason }]`: how the turn's calls
    /// parked for approval are decided, in the order they park (the
    /// decisions a stored session took, as `agentkit eval add` writes
    /// them). A call past the list, or of another tool, is denied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<EvalApproval>,
    #[serde(default)]
    pub expect: Expect,
}

/// One decision of an eval turn (`approvals`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all(serialize = "camelCase"), deny_unknown_fields)]
pub struct EvalApproval {
    /// The tool whose call this decides.
    pub tool: String,
    pub approve: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Expectations on a turn.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all(serialize = "camelCase"), deny_unknown_fields)]
pub struct Expect {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub succeeded: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub called_tool: Vec<CalledTool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_called_tool: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<TextMatch>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FileExpect>,
    /// These tools were called in this order (other calls may come
    /// between them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_order: Vec<String>,
    /// `[[expect.judge]]`: rubrics a model grades the reply against.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub judge: Vec<Judge>,
    /// `[expect.output]`: the turn's structured output (with an
    /// `output_schema`) holds these values: objects hold at least these
    /// keys, recursively; anything else is equal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
}

/// An LLM judge: a model grades the reply against a rubric with a score
/// from 0 to 1; the check passes at `threshold` or above.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Judge {
    pub rubric: String,
    /// `provider:model`; default: the model the eval runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
}

/// The score a judge must reach when its expectation names none.
pub const DEFAULT_JUDGE_THRESHOLD: f64 = 0.7;

impl Judge {
    pub fn threshold(&self) -> f64 {
        self.threshold.unwrap_or(DEFAULT_JUDGE_THRESHOLD)
    }
}

impl Expect {
    /// Every judge of the expectation: `reply.judge` first, then
    /// `[[expect.judge]]`.
    pub fn judges(&self) -> Vec<Judge> {
        let mut all = Vec::new();
        if let Some(reply) = &self.reply
            && let Some(rubric) = &reply.judge
        {
            all.push(Judge {
                rubric: rubric.clone(),
                model: reply.model.clone(),
                threshold: reply.threshold,
            });
        }
        all.extend(self.judge.iter().cloned());
        all
    }
}

/// `called_tool = ["name"]` or `[{ name, input = { field = "regex" } }]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CalledTool {
    Name(String),
    WithInput {
        name: String,
        /// Field → a regex its string form must match.
        #[serde(default)]
        input: BTreeMap<String, String>,
    },
}

impl CalledTool {
    pub fn name(&self) -> &str {
        match self {
            CalledTool::Name(n) | CalledTool::WithInput { name: n, .. } => n,
        }
    }
}

/// A check on text: a substring, a regex, or both.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextMatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<String>,
    /// The text parses as JSON and matches this JSON Schema (reply only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_schema: Option<Value>,
    /// A rubric an LLM judge grades the text against (reply only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<String>,
    /// The judge's model (with `judge`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The judge's passing score, 0 to 1 (with `judge`; default 0.7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
}

/// A check on a file in the session workspace after the turn.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all(serialize = "camelCase"), deny_unknown_fields)]
pub struct FileExpect {
    pub path: String,
    #[serde(default = "yes")]
    pub exists: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<String>,
}

fn yes() -> bool {
    true
}

fn is_env_kind(kind: &crate::vars::RefKind) -> bool {
    *kind == crate::vars::RefKind::Env
}

/// A `${VAR}` reference in a definition file (outside comments), or a
/// secret by reference (`${file:/path}`, `${secret:name}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvRef {
    /// `env`, `file` or `secret` (left out for `env`).
    #[serde(skip_serializing_if = "is_env_kind")]
    pub kind: crate::vars::RefKind,
    /// The variable's name; a file's path; a secret's name.
    pub name: String,
    pub path: String,
    pub line: u32,
    /// `${VAR:-default}`: what an unset or empty variable reads as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// `${VAR:?message}`: the variable must be set; `message` says why
    /// (empty when the reference gave none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<String>,
}
