//! What host code reaches from inside a Rust tool:
//! `ctx.services::<agentkit::HostServices>()`, the in-process twin of the
//! host bridge that subprocess tools call over loopback (`host.mcp`,
//! `host.kv`, `host.reminders`, `host.sessions`).

use std::sync::{Arc, OnceLock};

use agentkit_channels::{GithubClient, SlackClient};
use agentkit_runtime::{AgentRuntime, KvStore, NewReminder, Reminder, WeakRuntime};
use serde_json::Value;

use super::depths::Depths;
use crate::{Error, Result};

/// The services of the agent a Rust tool runs for. Cheap to clone.
///
/// ```no_run
/// # async fn tool(ctx: agentkit::ToolContext) -> Result<(), Box<dyn std::error::Error>> {
/// let host = ctx.services::<agentkit::HostServices>().expect("served by agentkit");
/// host.kv.set("last-run", &serde_json::json!(1), None).await?;
/// let names = host.mcp.names();
/// let time = host.mcp.in_session(&ctx.session_id)
///     .call_tool("time", "get_current_time", serde_json::json!({"timezone": "UTC"}))
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HostServices {
    /// The agent the call runs for.
    pub slug: String,
    /// The agent's key-value store (SQLite, or the shared database with
    /// `--database-url`; the host bridge's `/kv` routes use the same one).
    pub kv: KvStore,
    /// The agent's MCP client connections (`mcp-connections/`).
    pub mcp: HostMcp,
    /// The agent's durable reminders.
    pub reminders: HostReminders,
    /// GitHub API access with the credentials of the agent's
    /// `kind = "github"` channels.
    pub github: HostGithub,
    /// Sends into the agent's channels (create or continue a session),
    /// reads a session, appends an assistant message.
    pub sessions: HostSessions,
    /// Slack Web API access with the bot tokens of the agent's
    /// `kind = "slack"` channels.
    pub slack: HostSlack,
    /// The agent's artifacts: tag one in a session, list them.
    pub artifacts: HostArtifacts,
    /// A session's workspace: read, write and list its files.
    pub files: HostFiles,
    /// The agent's governed memories, as an operator sees them.
    pub memory: HostMemory,
}

/// The agent's runtime, bound once it is open and held weakly (the
/// runtime holds these services).
#[derive(Debug, Clone, Default)]
struct Attached(Arc<OnceLock<WeakRuntime>>);

impl Attached {
    fn set(&self, runtime: &AgentRuntime) {
        let _ = self.0.set(runtime.downgrade());
    }

    fn get(&self) -> std::result::Result<AgentRuntime, agentkit_runtime::Error> {
        self.0.get().and_then(WeakRuntime::upgrade).ok_or_else(|| {
            agentkit_runtime::Error::NotAvailable {
                message: "the agent's runtime has stopped".into(),
            }
        })
    }
}

impl HostServices {
    pub(crate) fn new(
        slug: &str,
        kv: KvStore,
        connections: agentkit_mcp::Connections,
        depths: Depths,
        github: HostGithub,
    ) -> HostServices {
        HostServices {
            slug: slug.to_owned(),
            kv,
            mcp: HostMcp {
                connections,
                depths,
                session: None,
            },
            reminders: HostReminders {
                runtime: Attached::default(),
            },
            github,
            sessions: HostSessions::default(),
            slack: HostSlack::default(),
            artifacts: HostArtifacts::default(),
            files: HostFiles::default(),
            memory: HostMemory::default(),
        }
    }

    /// With the agent's Slack clients.
    pub(crate) fn with_slack(mut self, slack: HostSlack) -> HostServices {
        self.slack = slack;
        self
    }

    /// Binds the reminders and sessions to the runtime once it is open
    /// (the runtime holds these services, so they hold it weakly).
    pub(crate) fn attach(&self, runtime: &AgentRuntime) {
        self.reminders.runtime.set(runtime);
        self.sessions.runtime.set(runtime);
        self.artifacts.runtime.set(runtime);
        self.files.runtime.set(runtime);
        self.memory.runtime.set(runtime);
    }

    /// Binds the sessions to the agent's mounted channels (so a send into
    /// a custom channel starts its sessions with the channel's state).
    pub(crate) fn attach_channels(&self, channels: &agentkit_channels::ChannelHost) {
        let _ = self.sessions.channels.set(channels.clone());
    }
}

/// What [`HostSessions::send`] is asked to do (the body of the host
/// bridge's `POST /v1/send`).
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[non_exhaustive]
pub struct HostSend {
    /// The channel id; the built-in HTTP channel (`http`) when absent.
    #[serde(default)]
    pub channel: Option<String>,
    pub message: String,
    /// The channel's continuation key: the session it maps to gets the
    /// message as a follow-up, a new one is started under it otherwise.
    /// `None` always starts a new session. Not on the HTTP channel.
    #[serde(default, alias = "continuationToken")]
    pub continuation: Option<String>,
    #[serde(default)]
    pub admission: Option<agentkit_protocol::Admission>,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub purpose: Option<String>,
    /// Relative path → content, written before the turn.
    #[serde(default)]
    pub workspace_files: std::collections::BTreeMap<String, String>,
    /// An absolute folder on the host, copied into the workspace before
    /// the turn (its regular files, recursively; symbolic links are
    /// skipped). `workspace_files` win over its files of the same path.
    /// At most 10,000 files and 64 MiB, each file at most
    /// [`agentkit_runtime::MAX_FILE_BYTES`].
    #[serde(default)]
    pub workspace_dir: Option<std::path::PathBuf>,
    #[serde(default)]
    pub dry_run: bool,
}

impl HostSend {
    /// `message` into `channel` (a new session unless a continuation key
    /// is set).
    pub fn new(channel: impl Into<String>, message: impl Into<String>) -> HostSend {
        HostSend {
            channel: Some(channel.into()),
            message: message.into(),
            ..HostSend::default()
        }
    }

    /// Into the session this channel key maps to (created on first use).
    pub fn continuation(mut self, key: impl Into<String>) -> HostSend {
        self.continuation = Some(key.into());
        self
    }
}

/// What a send answered.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HostSent {
    pub session_id: String,
    pub continuation_token: String,
    pub is_new: bool,
}

/// The principal host code acts as when nothing more specific is known
/// (the per-boot bridge token outside a session).
pub(crate) fn host_owner() -> agentkit_runtime::Owner {
    agentkit_runtime::Owner {
        principal_id: "host".to_owned(),
        principal_type: "app".to_owned(),
        authenticator: "host_bridge".to_owned(),
        ..Default::default()
    }
}

/// `host.sessions`: the one create-or-continue (`AgentRuntime::send`) for
/// host code (route handlers, schedule commands, tools, Rust embedders),
/// reading a session and appending an assistant message to one.
#[derive(Debug, Clone, Default)]
pub struct HostSessions {
    runtime: Attached,
    channels: Arc<OnceLock<agentkit_channels::ChannelHost>>,
}

impl HostSessions {
    fn runtime(&self) -> std::result::Result<AgentRuntime, agentkit_runtime::Error> {
        self.runtime.get()
    }

    /// Sends `req` as `owner` (the principal of a new session; a session
    /// continued by its key stays with the principal that started it).
    /// Into a custom channel it goes through that channel (its starting
    /// state); into the built-in HTTP channel straight to the runtime.
    pub async fn send(
        &self,
        req: HostSend,
        owner: &agentkit_runtime::Owner,
    ) -> std::result::Result<HostSent, agentkit_channels::Error> {
        let runtime = self.runtime().map_err(super::channels::channel_error)?;
        let files = send_files(&req)
            .await
            .map_err(super::channels::channel_error)?;
        let channel = req
            .channel
            .clone()
            .unwrap_or_else(|| agentkit_runtime::HTTP_CHANNEL.to_owned());
        if channel == agentkit_runtime::HTTP_CHANNEL {
            if req.continuation.is_some() {
                return Err(agentkit_channels::Error::BadRequest {
                    message: "the built-in HTTP channel mints its own continuation tokens; \
                              send into a channel with keys, or without `continuation`"
                        .into(),
                });
            }
            let accepted = runtime
                .send(agentkit_runtime::SendRequest {
                    client_tools: Vec::new(),
                    channel,
                    mode: agentkit_runtime::SessionMode::Chat,
                    owner: owner.clone(),
                    message: req.message,
                    continuation: None,
                    title: req.title,
                    purpose: req.purpose,
                    admission: req.admission.unwrap_or_default(),
                    workspace_files: files,
                    dry_run: req.dry_run,
                    as_of: None,
                    output_schema: None,
                })
                .await
                .map_err(super::channels::channel_error)?;
            return Ok(HostSent {
                session_id: accepted.session_id,
                continuation_token: accepted.continuation_token,
                is_new: accepted.is_new,
            });
        }
        let ctx = self.channels.get().and_then(|c| c.context(&channel));
        let Some(ctx) = ctx else {
            let known = runtime
                .agent()
                .channels
                .iter()
                .filter(|c| c.kind != agentkit_manifest::ChannelKind::Http)
                .map(|c| c.id.clone())
                .collect::<Vec<_>>();
            return Err(agentkit_channels::Error::NoRoute {
                status: 404,
                message: format!(
                    "the agent has no channel `{channel}` (channels: http{}{})",
                    if known.is_empty() { "" } else { ", " },
                    known.join(", ")
                ),
            });
        };
        let auth = agentkit_auth::AuthContext::new(
            owner.authenticator.clone(),
            owner.principal_id.clone(),
            serde_json::from_value(Value::String(owner.principal_type.clone()))
                .unwrap_or(agentkit_auth::PrincipalType::App),
        );
        let options = agentkit_channels::SendOptions {
            continuation_token: req.continuation,
            admission: req.admission.unwrap_or_default(),
            workspace_files: files,
            title: req.title,
            purpose: req.purpose,
            dry_run: req.dry_run,
            ..agentkit_channels::SendOptions::default()
        };
        let sent = ctx.send(req.message, options, &auth).await?;
        Ok(HostSent {
            session_id: sent.id,
            continuation_token: sent.continuation_token,
            is_new: sent.is_new,
        })
    }

    /// The metadata of session `id` (404 `session_not_found` when there is
    /// none).
    pub async fn get_session(
        &self,
        id: &str,
    ) -> std::result::Result<agentkit_runtime::SessionMeta, agentkit_runtime::Error> {
        self.runtime()?.session_meta(id).await
    }

    /// Is a turn running in session `id`?
    pub fn is_busy(&self, id: &str) -> bool {
        self.runtime().is_ok_and(|r| r.is_busy(id))
    }

    /// Appends final assistant text to session `id` without a model turn
    /// (a short turn with `kind: "emitted"`); the turn id. A session
    /// running a turn answers `409` `session_busy`.
    pub async fn emit_assistant_message(
        &self,
        id: &str,
        text: &str,
    ) -> std::result::Result<String, agentkit_runtime::Error> {
        self.runtime()?.emit_assistant_message(id, text).await
    }
}

/// `host.artifacts`: tag an artifact in a session (checked against
/// `artifacts.toml` as the model's `tag_artifact` is), list them (every
/// session's: host code is not a principal).
#[derive(Debug, Clone, Default)]
pub struct HostArtifacts {
    runtime: Attached,
}

impl HostArtifacts {
    fn runtime(&self) -> std::result::Result<AgentRuntime, agentkit_runtime::Error> {
        self.runtime.get()
    }

    /// Tags an artifact in session `session_id` (`400` for an undeclared
    /// kind or data that does not match its schema); an `artifact.tagged`
    /// event is recorded in the session's log.
    pub async fn tag(
        &self,
        session_id: &str,
        req: agentkit_runtime::TagRequest,
    ) -> std::result::Result<agentkit_protocol::api::Artifact, agentkit_runtime::Error> {
        self.runtime()?
            .retention()
            .artifacts()
            .tag(session_id, req)
            .await
    }

    /// One page of the agent's artifacts, newest first.
    pub async fn list(
        &self,
        filter: agentkit_runtime::ArtifactFilter,
    ) -> std::result::Result<agentkit_runtime::ArtifactPage, agentkit_runtime::Error> {
        self.runtime()?
            .retention()
            .artifacts()
            .list_all(filter)
            .await
    }
}

/// The most files a send's `workspace_dir` copies in.
pub(crate) const MAX_DIR_FILES: usize = 10_000;

/// The most bytes a send's `workspace_dir` copies in (64 MiB).
pub(crate) const MAX_DIR_BYTES: u64 = 64 * 1024 * 1024;

/// The files a send writes before its turn: the `workspace_dir` folder's,
/// then `workspace_files` (which win on the same path).
async fn send_files(
    req: &HostSend,
) -> std::result::Result<Vec<(String, Vec<u8>)>, agentkit_runtime::Error> {
    let mut files = match req.workspace_dir.clone() {
        Some(dir) => tokio::task::spawn_blocking(move || copy_in(&dir))
            .await
            .map_err(|e| agentkit_runtime::Error::Task {
                what: "workspaceDir copy",
                message: e.to_string(),
            })??,
        None => Vec::new(),
    };
    for (path, text) in &req.workspace_files {
        files.retain(|(p, _)| p != path);
        files.push((path.clone(), text.clone().into_bytes()));
    }
    Ok(files)
}

/// Every regular file under `dir` (an absolute folder), as workspace
/// paths and bytes, within the caps.
fn copy_in(
    dir: &std::path::Path,
) -> std::result::Result<Vec<(String, Vec<u8>)>, agentkit_runtime::Error> {
    use agentkit_runtime::Error as E;
    let bad = |message: String| E::BadRequest { message };
    if !dir.is_absolute() {
        return Err(bad(format!(
            "`workspaceDir` must be an absolute folder on the host, not `{}`",
            dir.display()
        )));
    }
    if !dir.is_dir() {
        return Err(bad(format!(
            "`workspaceDir` `{}` is not a folder",
            dir.display()
        )));
    }
    let mut out = Vec::new();
    let mut total = 0u64;
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((folder, prefix)) = stack.pop() {
        let read = std::fs::read_dir(&folder).map_err(|e| io_bad("list", &folder, e))?;
        for entry in read {
            let entry = entry.map_err(|e| io_bad("list", &folder, e))?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let rel = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            let kind = entry.file_type().map_err(|e| io_bad("list", &folder, e))?;
            if kind.is_dir() {
                stack.push((entry.path(), rel));
            } else if kind.is_file() {
                if out.len() == MAX_DIR_FILES {
                    return Err(E::TooLarge {
                        message: format!("`workspaceDir` has more than {MAX_DIR_FILES} files"),
                    });
                }
                let bytes =
                    std::fs::read(entry.path()).map_err(|e| io_bad("read", &entry.path(), e))?;
                agentkit_runtime::check_file_size(&rel, bytes.len())?;
                total += bytes.len() as u64;
                if total > MAX_DIR_BYTES {
                    return Err(E::TooLarge {
                        message: format!(
                            "`workspaceDir` holds more than {MAX_DIR_BYTES} bytes (64 MiB)"
                        ),
                    });
                }
                out.push((rel, bytes));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// A `workspaceDir` the host cannot read is the caller's to fix.
fn io_bad(action: &str, path: &std::path::Path, e: std::io::Error) -> agentkit_runtime::Error {
    agentkit_runtime::Error::BadRequest {
        message: format!("`workspaceDir`: cannot {action} `{}`: {e}", path.display()),
    }
}

/// `host.files`: a session's workspace for host code (any session of the
/// agent: host code is not a principal). Paths go through the one
/// workspace guard; a write is at most
/// [`agentkit_runtime::MAX_FILE_BYTES`]. On a shared store, this host's
/// copy of the workspace.
#[derive(Debug, Clone, Default)]
pub struct HostFiles {
    runtime: Attached,
}

impl HostFiles {
    fn runtime(&self) -> std::result::Result<AgentRuntime, agentkit_runtime::Error> {
        self.runtime.get()
    }

    /// The whole of file `path` of session `session_id`'s workspace
    /// (`404` when there is none, `400` for a folder or a path out).
    pub async fn read(
        &self,
        session_id: &str,
        path: &str,
    ) -> std::result::Result<Vec<u8>, agentkit_runtime::Error> {
        self.runtime()?
            .files()
            .read(session_id, agentkit_runtime::FilesCaller::Host, path)
            .await
    }

    /// Opens file `path` for streaming (the bridge's download).
    pub async fn open(
        &self,
        session_id: &str,
        path: &str,
    ) -> std::result::Result<agentkit_runtime::OpenedFile, agentkit_runtime::Error> {
        self.runtime()?
            .files()
            .open(session_id, agentkit_runtime::FilesCaller::Host, path)
            .await
    }

    /// Writes `bytes` as file `path`, creating its folders; the size
    /// written.
    pub async fn write(
        &self,
        session_id: &str,
        path: &str,
        bytes: Vec<u8>,
    ) -> std::result::Result<u64, agentkit_runtime::Error> {
        self.runtime()?
            .files()
            .write(session_id, agentkit_runtime::FilesCaller::Host, path, bytes)
            .await
    }

    /// One page of the workspace's entries after path `after`, depth
    /// first.
    pub async fn list(
        &self,
        session_id: &str,
        limit: usize,
        after: Option<String>,
    ) -> std::result::Result<agentkit_runtime::FilePage, agentkit_runtime::Error> {
        self.runtime()?
            .files()
            .list(
                session_id,
                agentkit_runtime::FilesCaller::Host,
                limit,
                after,
            )
            .await
    }
}

/// `host.memory`: the agent's governed memories (`remember` / `recall` /
/// `forget`), every principal's: host code is not a principal, so it
/// sees and changes them as an operator does.
#[derive(Debug, Clone, Default)]
pub struct HostMemory {
    runtime: Attached,
}

/// Who host code is when it reads or changes memories.
fn host_operator() -> agentkit_runtime::Owner {
    agentkit_runtime::Owner {
        principal_id: "host".to_owned(),
        principal_type: "operator".to_owned(),
        authenticator: "host".to_owned(),
        admin: true,
        ..Default::default()
    }
}

impl HostMemory {
    fn runtime(&self) -> std::result::Result<AgentRuntime, agentkit_runtime::Error> {
        self.runtime.get()
    }

    /// Keeps `text` as a memory of session `session_id`: its principal's
    /// (`scope` `"principal"`), or every session's (`"agent"`); a
    /// `memory.remembered` event is recorded in the session's log.
    pub async fn remember(
        &self,
        session_id: &str,
        text: &str,
        scope: &str,
    ) -> std::result::Result<agentkit_protocol::api::Memory, agentkit_runtime::Error> {
        self.runtime()?
            .retention()
            .memory()
            .remember_for_host(session_id, text, scope)
            .await
    }

    /// The memories `principal`'s sessions see that match `query` (any
    /// of its words), best first, at most `limit` (1 to 20).
    pub async fn recall(
        &self,
        principal: &str,
        query: &str,
        limit: usize,
    ) -> std::result::Result<Vec<agentkit_protocol::api::Memory>, agentkit_runtime::Error> {
        self.runtime()?
            .retention()
            .memory()
            .recall(principal, query, limit)
            .await
    }

    /// One page of every memory, newest first, after memory id `after`.
    pub async fn list(
        &self,
        limit: usize,
        after: Option<&str>,
    ) -> std::result::Result<agentkit_runtime::MemoryPage, agentkit_runtime::Error> {
        self.runtime()?
            .retention()
            .memory()
            .list(&host_operator(), limit, after)
            .await
    }

    /// Memory `id`.
    pub async fn get(
        &self,
        id: &str,
    ) -> std::result::Result<agentkit_protocol::api::Memory, agentkit_runtime::Error> {
        self.runtime()?
            .retention()
            .memory()
            .get(id, &host_operator())
            .await
    }

    /// Replaces memory `id`'s text.
    pub async fn edit(
        &self,
        id: &str,
        text: &str,
    ) -> std::result::Result<agentkit_protocol::api::Memory, agentkit_runtime::Error> {
        self.runtime()?
            .retention()
            .memory()
            .edit(id, &host_operator(), text)
            .await
    }

    /// Deletes memory `id`.
    pub async fn delete(&self, id: &str) -> std::result::Result<(), agentkit_runtime::Error> {
        self.runtime()?
            .retention()
            .memory()
            .delete(id, &host_operator())
            .await
    }
}

/// `host.mcp`: the agent's MCP connections. Calls made
/// [`in_session`](HostMcp::in_session) carry that session's delegation
/// depth, so a chain of agents calling each other from tools is stopped
/// by the hop limit like one driven by the model.
#[derive(Debug, Clone)]
pub struct HostMcp {
    pub(crate) connections: agentkit_mcp::Connections,
    pub(crate) depths: Depths,
    session: Option<String>,
}

impl HostMcp {
    /// The same connections, counting calls as made by `session_id`'s turn.
    pub fn in_session(&self, session_id: &str) -> HostMcp {
        HostMcp {
            session: Some(session_id.to_owned()),
            ..self.clone()
        }
    }

    fn hops(&self) -> u32 {
        self.session
            .as_deref()
            .map_or(0, |session| self.depths.get(session))
    }

    /// The connection names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.connections.names()
    }

    /// The tools of connection `name` (opening it if needed).
    pub async fn list_tools(
        &self,
        name: &str,
    ) -> std::result::Result<Vec<agentkit_mcp::McpTool>, agentkit_mcp::ClientError> {
        self.connections.list_tools(name, self.hops()).await
    }

    /// Calls `tool` of connection `name` with `args` (an object).
    pub async fn call_tool(
        &self,
        name: &str,
        tool: &str,
        args: Value,
    ) -> std::result::Result<agentkit_mcp::McpCallResult, agentkit_mcp::ClientError> {
        self.connections
            .call_tool(name, tool, args, self.hops())
            .await
    }
}

/// `host.reminders`: create, cancel and list the agent's reminders. They
/// are durable before `create` returns, exactly as through
/// [`ServeHandle::create_reminder`](crate::ServeHandle::create_reminder).
#[derive(Debug, Clone)]
pub struct HostReminders {
    runtime: Attached,
}

impl HostReminders {
    fn runtime(&self) -> Result<AgentRuntime> {
        self.runtime.get().map_err(|_| Error::Config {
            message: "the agent's runtime has stopped".into(),
        })
    }

    /// Creates a reminder, on disk before this returns.
    pub async fn create(&self, reminder: NewReminder) -> Result<Reminder> {
        Ok(self.runtime()?.reminders().create(reminder).await?)
    }

    /// Creates a reminder bound to the conversation of session
    /// `session_id` (its channel and continuation), as the built-in
    /// `remind_me` tool does: a tool reminding its own session passes
    /// `ctx.session_id`.
    pub async fn create_for_session(
        &self,
        session_id: &str,
        purpose: &str,
        when: agentkit_runtime::ReminderWhen,
        action: agentkit_runtime::ReminderAction,
    ) -> Result<Reminder> {
        let runtime = self.runtime()?;
        let meta = runtime.session_meta(session_id).await?;
        Ok(runtime
            .reminders()
            .create(NewReminder {
                purpose: purpose.to_owned(),
                channel_id: meta.channel,
                continuation_token: meta.continuation_token,
                when,
                action,
            })
            .await?)
    }

    /// Cancels a reminder.
    pub async fn cancel(&self, id: &str) -> Result<Reminder> {
        Ok(self.runtime()?.reminders().cancel(id).await?)
    }

    /// One reminder.
    pub async fn get(&self, id: &str) -> Result<Reminder> {
        Ok(self.runtime()?.reminders().get(id).await?)
    }

    /// Every reminder of the agent.
    pub async fn list(&self) -> Result<Vec<Reminder>> {
        Ok(self.runtime()?.reminders().list().await?)
    }
}

/// `host.github`: a [`GithubClient`] per `kind = "github"` channel of the
/// agent, with that channel's credentials (token or App installation).
#[derive(Debug, Clone, Default)]
pub struct HostGithub {
    clients: Arc<Vec<(String, GithubClient)>>,
}

impl HostGithub {
    /// The clients of `project`'s github channels. A channel whose
    /// settings cannot give one is left out (serving it fails anyway,
    /// saying why).
    pub(crate) fn of(
        project: &agentkit_manifest::Project,
        env: &agentkit_channels::Env,
    ) -> HostGithub {
        let mut clients = Vec::new();
        for c in &project.agent.channels {
            if c.kind != agentkit_manifest::ChannelKind::Github {
                continue;
            }
            match agentkit_channels::github_client(c, env, &project.agent.dir) {
                Ok(client) => clients.push((c.id.clone(), client)),
                Err(e) => tracing::debug!(channel = %c.id, error = %e, "no host.github client"),
            }
        }
        HostGithub {
            clients: Arc::new(clients),
        }
    }

    /// The github channels a client can be chosen by.
    pub fn names(&self) -> Vec<String> {
        self.clients.iter().map(|(n, _)| n.clone()).collect()
    }

    /// The client of github channel `channel`; with `None`, the only
    /// github channel's (an agent with several must name one).
    pub fn client(&self, channel: Option<&str>) -> Result<GithubClient> {
        pick(
            &self.clients,
            channel,
            "github",
            "the agent has no `kind = \"github\"` channel to take GitHub credentials from",
        )
    }
}

/// The client of pack channel `channel` among `clients` (named by their
/// channel id); with `None`, the only one (an agent with several must name
/// one).
fn pick<C: Clone>(
    clients: &[(String, C)],
    channel: Option<&str>,
    kind: &str,
    none: &str,
) -> Result<C> {
    let names = || {
        clients
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join("`, `")
    };
    match (channel, clients) {
        (Some(name), _) => clients
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, c)| c.clone())
            .ok_or_else(|| Error::Config {
                message: format!("no {kind} channel `{name}` (the agent has: `{}`)", names()),
            }),
        (None, [(_, only)]) => Ok(only.clone()),
        (None, []) => Err(Error::Config {
            message: none.to_owned(),
        }),
        (None, _) => Err(Error::Config {
            message: format!(
                "the agent has several {kind} channels: name one (`{}`)",
                names()
            ),
        }),
    }
}

/// `host.slack`: a [`SlackClient`] per `kind = "slack"` channel of the
/// agent, with that channel's bot token (post, update, react, any Web API
/// method).
#[derive(Debug, Clone, Default)]
pub struct HostSlack {
    clients: Arc<Vec<(String, SlackClient)>>,
}

impl HostSlack {
    /// The clients of `project`'s slack channels that have a bot token.
    pub(crate) fn of(
        project: &agentkit_manifest::Project,
        env: &agentkit_channels::Env,
    ) -> HostSlack {
        let mut clients = Vec::new();
        for c in &project.agent.channels {
            if c.kind != agentkit_manifest::ChannelKind::Slack {
                continue;
            }
            match agentkit_channels::slack_client(c, env) {
                Ok(client) => clients.push((c.id.clone(), client)),
                Err(e) => tracing::debug!(channel = %c.id, error = %e, "no host.slack client"),
            }
        }
        HostSlack {
            clients: Arc::new(clients),
        }
    }

    /// The slack channels a client can be chosen by.
    pub fn names(&self) -> Vec<String> {
        self.clients.iter().map(|(n, _)| n.clone()).collect()
    }

    /// The client of slack channel `channel`; with `None`, the only slack
    /// channel's (an agent with several must name one).
    pub fn client(&self, channel: Option<&str>) -> Result<SlackClient> {
        pick(
            &self.clients,
            channel,
            "slack",
            "the agent has no `kind = \"slack\"` channel with a bot token",
        )
    }
}
