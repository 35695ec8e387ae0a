//! The session core's entry points: one agent's sessions, created or
//! continued ([`AgentRuntime::send`], [`AgentRuntime::follow_up`]),
//! looked up (loaded from the session index when addressed, unloaded when
//! idle: `registry.rs`), followed, listed, stopped and shut down. The turns
//! themselves run in `worker.rs`; a session's turn state is the machine in
//! `session.rs`. Features (approvals, reminders, schedules, deterministic
//! calls, hooks) live in their own modules and own their state.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use agentkit_events::NewEvent;
use agentkit_events::{FileEventStore, StoreOptions};
use agentkit_manifest::{Admission, Agent, ModelSpec};
use agentkit_protocol::{AbAssigned, Event, EventData, SessionId, SessionStarted};
use serde::Serialize;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::clock::Clock;
#[cfg(doc)]
use crate::clock::SystemClock;
use crate::db::Db;
use crate::dispatch::SessionCommand;
use crate::error::{Error, Result};
use crate::log::{EventLog, Follow};
use crate::meta::{Owner, SessionMeta, SessionMode};
use crate::registry::Registry;
use crate::session::Session;
use crate::workspace;

/// The built-in HTTP channel's id.
pub const HTTP_CHANNEL: &str = "http";

/// How one agent's runtime is set up.
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    /// `<stateRoot>/<slug>`: sessions, traces and tool-call workspaces.
    pub state_dir: PathBuf,
    /// The model for agents whose `agent.toml` names none (the host's
    /// `AGENTKIT_MODEL`, or `test` under `--dev`). `None`: such turns fail
    /// with a message saying what to set.
    pub default_model: Option<ModelSpec>,
    pub store: StoreOptions,
    /// Endpoints and keys of the remote model providers.
    pub providers: Arc<agentkit_harness::ProviderConfig>,
    /// The host bridge server tools get in their environment
    /// (`AGENTKIT_HOST_URL`, `AGENTKIT_HOST_TOKEN`).
    pub host_bridge: Option<agentkit_harness::HostBridge>,
    /// The time schedules and reminders run on ([`SystemClock`] in
    /// production, a [`crate::ManualClock`] in tests).
    pub clock: Arc<dyn Clock>,
    /// Tools beyond the agent's files (Rust tools, MCP connections),
    /// resolved when a turn or a deterministic call needs them.
    pub tool_sources: Vec<Arc<dyn agentkit_harness::ToolSource>>,
    /// The host's services, handed to every tool call.
    pub services: Option<agentkit_harness::HostHandle>,
    /// Keep trace context in the log (`message.received`'s
    /// `traceparent`, `turn.started`'s `trace`) and send it on outgoing
    /// requests: set while the host exports traces.
    pub tracing: bool,
    /// The store several hosts share (PostgreSQL with `--database-url`):
    /// the event logs, the session index and the leases live there
    /// instead of in this host's files.
    pub shared: Option<Arc<dyn agentkit_store::SharedBackend>>,
}

/// Cron ticks fired (their lateness summed: the tick's time to its firing)
/// and skipped (the previous run was still going), and reminders fired
/// (lateness: the due time to the firing), since the runtime opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimerStats {
    pub schedule_ticks_fired: u64,
    pub schedule_ticks_skipped: u64,
    pub schedule_lateness_ms: u64,
    pub reminders_fired: u64,
    pub reminder_lateness_ms: u64,
}

/// A message to start (or, with a known continuation key, continue) a
/// session.
#[derive(Debug, Clone)]
pub struct SendRequest {
    pub channel: String,
    pub mode: SessionMode,
    pub owner: Owner,
    pub message: String,
    /// The channel's own key (such as `pr:owner/repo#1`); `None` mints an
    /// opaque rotating token (the built-in HTTP channel).
    pub continuation: Option<String>,
    pub title: Option<String>,
    pub purpose: Option<String>,
    pub admission: Admission,
    pub workspace_files: Vec<(String, String)>,
    /// A dry-run session: tools not annotated `read_only` answer stubs.
    pub dry_run: bool,
    /// Freeze the session at this instant: ISO-8601 with a time zone
    /// (`2025-01-15T09:30:00Z`, `2025-01-15T10:30:00+01:00`). The model is
    /// told it is the current time; tools get it. Ignored when the message
    /// continues an existing session.
    pub as_of: Option<String>,
    /// A JSON Schema this session's final replies must match, instead of
    /// the agent's `output_schema` (checked by [`AgentRuntime::send`]).
    pub output_schema: Option<serde_json::Value>,
}

/// A follow-up message to an existing session.
#[derive(Debug, Clone)]
pub struct FollowUp {
    pub owner: Owner,
    pub message: String,
    /// Required on the built-in HTTP channel: the current token.
    pub continuation_token: Option<String>,
    pub admission: Admission,
    pub workspace_files: Vec<(String, String)>,
}

/// What accepting a message answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Accepted {
    pub session_id: String,
    pub continuation_token: String,
    pub is_new: bool,
    /// The message queued behind a running turn.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub coalesced: bool,
    /// The index of this message's `message.received`: a follower that
    /// starts here sees the message and everything it caused.
    #[serde(skip)]
    pub start_index: u64,
}

/// A session as `GET /v1/sessions` lists it.
pub use agentkit_protocol::api::SessionSummary;

/// The sessions of one agent. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AgentRuntime {
    pub(crate) inner: Arc<Inner>,
}

/// A reference to an [`AgentRuntime`] that does not keep it alive: for
/// services the runtime itself holds (host services handed to tools), so
/// they do not form a cycle that outlives the server.
#[derive(Debug, Clone)]
pub struct WeakRuntime(std::sync::Weak<Inner>);

impl WeakRuntime {
    /// The runtime, or `None` once it has been dropped (the server stopped).
    pub fn upgrade(&self) -> Option<AgentRuntime> {
        self.0.upgrade().map(|inner| AgentRuntime { inner })
    }
}

impl AgentRuntime {
    /// A reference that does not keep the runtime alive.
    pub fn downgrade(&self) -> WeakRuntime {
        WeakRuntime(Arc::downgrade(&self.inner))
    }
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) agent: Arc<Agent>,
    pub(crate) options: RuntimeOptions,
    pub(crate) store: EventLog,
    /// The session index and leases in the shared database, when there is
    /// one.
    pub(crate) shared: Option<agentkit_store::AgentStores>,
    /// The loaded sessions and their keys.
    pub(crate) registry: Registry,
    pub(crate) shutdown: CancellationToken,
    pub(crate) tasks: TaskTracker,
    /// `agentkit.sqlite`: schedule ticks and reminders.
    pub(crate) db: Arc<Db>,
    /// The A/B rows: this host's (in `db`) or the shared store's.
    pub(crate) ab: Arc<dyn agentkit_store::SharedAb>,
    pub(crate) schedules: crate::schedules::ScheduleState,
    pub(crate) reminders: crate::reminders::ReminderState,
    /// Calls parked in running turns.
    waiters: Arc<crate::approvals::Waiters>,
}

impl Inner {
    /// The host's services, borrowed (for [`crate::ScheduleRun::services`]).
    pub(crate) fn options_services(&self) -> Option<&agentkit_harness::HostHandle> {
        self.options.services.as_ref()
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these short locks leaves plain data
    // behind; keep serving rather than poisoning every later request.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

pub(crate) fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
}

impl AgentRuntime {
    /// Opens the runtime over `options.state_dir`. Stored sessions are
    /// found through the session index in `agentkit.sqlite` when they are
    /// addressed; one a crash left mid-turn is recovered then (the
    /// interrupted turn is recorded as failed and the session waits for
    /// its next message), before anything else touches it.
    pub async fn open(agent: Arc<Agent>, options: RuntimeOptions) -> Result<AgentRuntime> {
        let (store, shared) = match &options.shared {
            None => (
                EventLog::File(FileEventStore::open(
                    &options.state_dir,
                    options.store.clone(),
                )?),
                None,
            ),
            Some(backend) => {
                // The agent's name in the shared tables: its state
                // folder's (`<stateRoot>/<slug>`), the same on every host.
                let slug = options
                    .state_dir
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let stores = backend.agent(&slug, options.store.tap_capacity);
                (EventLog::Shared(stores.log.clone()), Some(stores))
            }
        };
        let db = {
            let dir = options.state_dir.clone();
            tokio::task::spawn_blocking(move || Db::open(&dir))
                .await
                .map_err(|e| Error::task("opening the state database", e))??
        };
        let db = Arc::new(db);
        let ab: Arc<dyn agentkit_store::SharedAb> = match &shared {
            Some(stores) => stores.ab.clone(),
            None => Arc::new(crate::ab_local::LocalAb::new(db.clone())),
        };
        let runtime = AgentRuntime {
            inner: Arc::new(Inner {
                agent,
                options,
                store,
                shared,
                ab,
                registry: Registry::default(),
                shutdown: CancellationToken::new(),
                tasks: TaskTracker::new(),
                db,
                schedules: Default::default(),
                reminders: Default::default(),
                waiters: Arc::default(),
            }),
        };
        // Boot reads no session: the index answers lookups, and a session
        // is loaded (and, if a crash cut its turn short, recovered) when
        // it is first addressed. Only sessions that may have a call
        // waiting for approval are loaded now, to re-arm their timeouts.
        let indexer = runtime.clone();
        let imported = tokio::task::spawn_blocking(move || {
            indexer
                .inner
                .db
                .index_stored_sessions(&indexer.inner.options.state_dir.join("sessions"))
        })
        .await
        .map_err(|e| Error::task("indexing stored sessions", e))??;
        if imported > 0 {
            tracing::info!(
                imported,
                "indexed the sessions stored before the session index existed"
            );
        }
        // With a shared database, parked sessions are re-armed by the
        // host that takes their next message (see `shared.rs`).
        let parked = if runtime.inner.shared.is_some() {
            Vec::new()
        } else {
            runtime.inner.db.parked_sessions()?
        };
        for meta in parked {
            if let Ok(session) = runtime.get(&meta.id) {
                runtime.ready(&session).await?;
            }
        }
        runtime.start_sweeper();
        runtime.start_mailbox();
        let loader = runtime.clone();
        let armed = tokio::task::spawn_blocking(move || loader.load_reminders())
            .await
            .map_err(|e| Error::task("loading reminders", e))??;
        tracing::debug!(armed, "reminders loaded");
        // Loudly, when the shell and server tools would run unsandboxed.
        agentkit_harness::log_sandbox_status(&runtime.inner.agent);
        Ok(runtime)
    }

    pub fn agent(&self) -> &Arc<Agent> {
        &self.inner.agent
    }

    /// What the timers did since the runtime opened (for `/metrics`).
    pub fn timer_stats(&self) -> TimerStats {
        use std::sync::atomic::Ordering;
        let (s, r) = (&self.inner.schedules, &self.inner.reminders);
        TimerStats {
            schedule_ticks_fired: s.fired.load(Ordering::Relaxed),
            schedule_ticks_skipped: s.skipped.load(Ordering::Relaxed),
            schedule_lateness_ms: s.late_ms.load(Ordering::Relaxed),
            reminders_fired: r.fired.load(Ordering::Relaxed),
            reminder_lateness_ms: r.late_ms.load(Ordering::Relaxed),
        }
    }

    pub fn store(&self) -> &EventLog {
        &self.inner.store
    }

    /// The clock schedules and reminders run on.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.options.clock
    }

    /// Stops when the runtime shuts down.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.inner.shutdown.clone()
    }

    pub(crate) fn session_dir(&self, id: &SessionId) -> PathBuf {
        self.inner
            .options
            .state_dir
            .join("sessions")
            .join(id.as_str())
    }

    /// Makes `meta` a loaded session, or returns the one already loaded
    /// under its id (two callers may load one session at once).
    fn register(&self, id: SessionId, meta: SessionMeta, needs_recovery: bool) -> Arc<Session> {
        let workspace = meta
            .workspace_dir
            .as_ref()
            .map_or_else(|| self.session_dir(&id).join("workspace"), PathBuf::from);
        let fresh = Arc::new(Session::new(id, meta, workspace, needs_recovery));
        let session = self.inner.registry.insert(fresh);
        self.inner.registry.touch(&session);
        session
    }

    pub(crate) fn get_session(&self, id: &str) -> Result<Arc<Session>> {
        self.get(id)
    }

    fn get(&self, id: &str) -> Result<Arc<Session>> {
        let id = SessionId::parse(id)?;
        let not_found = || Error::SessionNotFound {
            id: id.as_str().to_owned(),
        };
        let loaded = self.inner.registry.peek(id.as_str());
        if let Some(shared) = &self.inner.shared {
            return self.get_shared(shared, id, loaded);
        }
        let session = match loaded {
            Some(session) => session,
            None => {
                let meta = match self.inner.db.session(id.as_str())? {
                    Some(meta) => meta,
                    // A folder written without the index (an older
                    // version, or by hand): its session.json joins it.
                    None => {
                        let path = self.session_dir(&id).join("session.json");
                        let meta = crate::meta::load(&path)
                            .ok()
                            .filter(|m| m.id == id.as_str())
                            .ok_or_else(not_found)?;
                        self.inner.db.put_session_detached(&meta);
                        meta
                    }
                };
                if !self.session_dir(&id).exists() {
                    self.inner.db.delete_session(id.as_str());
                    return Err(not_found());
                }
                self.register(id.clone(), meta, true)
            }
        };
        if self.deleted(&session) {
            return Err(not_found());
        }
        Ok(session)
    }

    /// [`get`](Self::get) on a shared database: the index there is the
    /// truth. A loaded session this host does not hold the lease of may
    /// have moved on elsewhere (a rotated token, a new title): its
    /// metadata is read again. Its fold cache stays (the log only grows).
    fn get_shared(
        &self,
        shared: &agentkit_store::AgentStores,
        id: SessionId,
        loaded: Option<Arc<Session>>,
    ) -> Result<Arc<Session>> {
        let not_found = || Error::SessionNotFound {
            id: id.as_str().to_owned(),
        };
        if let Some(session) = &loaded
            && (session.state().is_active() || shared.leases.holds(id.as_str()))
        {
            return Ok(session.clone());
        }
        let stored = crate::shared::block_on(async { Ok(shared.index.get(id.as_str()).await?) })?;
        let meta = stored
            .as_deref()
            .and_then(crate::shared::meta_of)
            .filter(|m| m.id == id.as_str())
            .ok_or_else(not_found)?;
        match loaded {
            Some(session) => {
                let old = {
                    let mut current = lock(&session.meta);
                    let old = current.continuation_token.clone();
                    *current = meta.clone();
                    old
                };
                if old != meta.continuation_token {
                    self.inner.registry.rekey(
                        &meta.channel,
                        &old,
                        &meta.continuation_token,
                        id.as_str(),
                    );
                }
                Ok(session)
            }
            None => Ok(self.register(id, meta, true)),
        }
    }

    /// Drops a loaded session from memory (it is loaded again when next
    /// addressed).
    pub(crate) fn unload(&self, session: &Arc<Session>) {
        self.inner.registry.remove(session);
    }

    /// Writes `meta` to the session index, answered once it is there.
    pub(crate) async fn index_put(&self, meta: &SessionMeta) -> Result<()> {
        match &self.inner.shared {
            Some(shared) => Ok(shared.index.put(&crate::shared::row_of(meta)?).await?),
            None => self.inner.db.put_session(meta).await,
        }
    }

    /// Writes `meta` to the session index without waiting.
    pub(crate) fn index_put_detached(&self, meta: &SessionMeta) {
        match &self.inner.shared {
            Some(shared) => {
                let index = shared.index.clone();
                let row = crate::shared::row_of(meta);
                tokio::spawn(async move {
                    let written = match row {
                        Ok(row) => index.put(&row).await.map_err(Error::from),
                        Err(e) => Err(e),
                    };
                    if let Err(e) = written {
                        tracing::warn!(error = %e, "cannot update the shared session index");
                    }
                });
            }
            None => self.inner.db.put_session_detached(meta),
        }
    }

    /// The loaded session `id`, if it is loaded (no index lookup).
    pub(crate) fn peek(&self, id: &str) -> Option<Arc<Session>> {
        self.inner.registry.peek(id)
    }

    /// Has someone deleted the session's folder? An idle session whose
    /// folder is gone is forgotten at once (listings, streams, keys), so
    /// deleting a folder deletes the session without a restart. A session
    /// with a turn in flight is forgotten once it settles.
    pub(crate) fn deleted(&self, session: &Arc<Session>) -> bool {
        // On a shared database a session's folder is only this host's
        // copy of its workspace: its absence deletes nothing.
        if self.inner.shared.is_some() || self.session_dir(&session.id).exists() {
            return false;
        }
        if session.state().is_active() {
            return false;
        }
        self.forget(session);
        true
    }

    /// Drops every trace of `session` from memory.
    fn forget(&self, session: &Arc<Session>) {
        if !self.inner.registry.remove(session) {
            return;
        }
        self.inner.store.close(&session.id);
        self.inner.db.delete_session(session.id.as_str());
        tracing::info!(session = %session.id, "forgot a session whose folder was deleted");
    }

    /// The session, if `owner` may use it.
    /// An operator may use every session; what it does is recorded (an
    /// approval's `by`, a message's `from`) and its reach logged.
    pub(crate) fn owned(&self, id: &str, owner: &Owner) -> Result<Arc<Session>> {
        let session = self.get(id)?;
        if session.meta().owner.principal_id != owner.principal_id {
            if !owner.is_operator() {
                return Err(Error::Forbidden { id: id.to_owned() });
            }
            tracing::info!(session = %id, operator = %owner.principal_id, "an operator addresses a session it does not own");
        }
        Ok(session)
    }

    /// Follows up session `id`, which continuation key `key` maps to, as
    /// the session's owner (the channel authenticated the sender).
    async fn continue_as_owner(&self, id: &str, key: String, req: SendRequest) -> Result<Accepted> {
        let owner = self.session_meta(id)?.owner;
        let follow = FollowUp {
            owner,
            message: req.message,
            continuation_token: Some(key),
            admission: req.admission,
            workspace_files: req.workspace_files,
        };
        self.follow_up(id, follow).await
    }

    /// Starts a session, or continues the one a channel key maps to: the
    /// one create-or-continue of every entry point (the HTTP API, MCP,
    /// channels, schedule handlers). With a continuation key it runs under
    /// that key's lock, so two first messages with one new key make one
    /// session and the second follows it up. A key continues its session
    /// whoever sends (the channel authenticated the sender), as the
    /// session's owner.
    pub async fn send(&self, req: SendRequest) -> Result<Accepted> {
        if req.message.trim().is_empty() {
            return Err(Error::BadRequest {
                message: "`message` must not be empty".into(),
            });
        }
        // Refuse bad input before anything is created or rotated.
        workspace::check_relative_paths(&req.workspace_files)?;
        if let Some(schema) = &req.output_schema {
            let usable = schema.is_object()
                && agentkit_manifest::schema_errors(schema, &serde_json::Value::Null).is_ok();
            if !usable {
                return Err(Error::BadRequest {
                    message:
                        "`outputSchema` must be a JSON Schema object (draft 2020-12) that compiles"
                            .into(),
                });
            }
        }
        let as_of = req.as_of.as_deref().map(parse_as_of).transpose()?;
        let Some(key) = req.continuation.clone() else {
            return self.create_new(req, as_of).await;
        };
        let _held = self.inner.registry.lock_key(&req.channel, &key).await;
        let existing = self.session_for(&req.channel, &key);
        match existing {
            Some(id) => self.continue_as_owner(&id, key, req).await,
            None => {
                let retry = self.inner.shared.is_some().then(|| req.clone());
                match (self.create_new(req, as_of).await, retry) {
                    // Another host made this key's session meanwhile: the
                    // message continues it, as it would have here.
                    (
                        Err(Error::Shared(agentkit_store::SharedError::KeyTaken { .. })),
                        Some(req),
                    ) => {
                        let id = self
                            .index_by_key(&req.channel, &key)?
                            .ok_or_else(|| Error::SessionNotFound { id: key.clone() })?;
                        self.continue_as_owner(&id, key, req).await
                    }
                    (other, _) => other,
                }
            }
        }
    }

    /// A new session for `req` (its key, if any, is free).
    async fn create_new(&self, req: SendRequest, as_of: Option<String>) -> Result<Accepted> {
        let id = SessionId::parse(&new_id("ses"))?;
        let token = req.continuation.clone().unwrap_or_else(mint_token);
        let workspace_dir = self
            .inner
            .agent
            .config
            .local
            .cwd
            .as_ref()
            .map(|cwd| cwd.join(id.as_str()).to_string_lossy().into_owned());
        let meta = SessionMeta {
            id: id.as_str().to_owned(),
            channel: req.channel.clone(),
            mode: req.mode,
            owner: req.owner.as_session_owner(),
            continuation_token: token.clone(),
            created_at: now(),
            title: req.title.clone(),
            purpose: req.purpose.clone(),
            dry_run: req.dry_run,
            workspace_dir,
            parked: false,
            as_of,
            output_schema: req.output_schema.clone(),
        };
        // The index row first (committed with whatever other sessions'
        // writes are queued), then the log, which makes the folder: a row
        // whose folder never came is dropped when it is next looked up.
        self.index_put(&meta).await?;
        let session = self.register(id.clone(), meta.clone(), false);
        // The log opens with `session.started` and the session's A/B
        // assignments, appended with its first message in one batch.
        let mut opening = vec![NewEvent::new(
            None,
            EventData::SessionStarted(SessionStarted {
                channel: meta.channel.clone(),
                mode: meta.mode.as_str().to_owned(),
                principal_id: meta.owner.principal_id.clone(),
                title: meta.title.clone(),
                purpose: meta.purpose.clone(),
                as_of: meta.as_of.clone(),
            }),
        )];
        // Enrolment: sticky per channel key (a conversation that starts a
        // new session keeps its variant), per principal where the
        // experiment says so, else per session. An eval session sticks to
        // its title (`eval <case> #<iteration>`), so a case's iteration
        // runs the same variant in every run and a recording replays.
        let eval_key = (meta.purpose.as_deref() == Some("eval"))
            .then_some(meta.title.as_deref())
            .flatten();
        let mut assignments = Vec::new();
        for experiment in &self.inner.agent.experiments {
            let sticky = crate::ab::sticky_key(
                experiment,
                &meta.owner.principal_id,
                req.continuation.as_deref().or(eval_key),
                id.as_str(),
            );
            let assigned = crate::ab::assign(experiment, &sticky);
            opening.push(NewEvent::new(
                None,
                EventData::AbAssigned(AbAssigned {
                    experiment: assigned.experiment.clone(),
                    variant: assigned.variant.clone(),
                }),
            ));
            assignments.push(assigned);
        }
        self.record_ab_assignments(
            id.as_str(),
            &meta.owner.principal_id,
            meta.purpose.as_deref(),
            chrono::Utc::now().timestamp_millis(),
            assignments,
        )
        .await?;
        let (coalesced, start_index) = self
            .accept_first(
                &session,
                opening,
                req.message,
                req.admission,
                req.workspace_files,
            )
            .await?;
        Ok(Accepted {
            session_id: id.as_str().to_owned(),
            continuation_token: token,
            is_new: true,
            coalesced,
            start_index,
        })
    }

    /// Accepts a follow-up: checks the owner, the mode and (on the HTTP
    /// channel) the token, rotates the HTTP token, and admits the message.
    /// On a shared database, a session another live host is running gets
    /// the message routed there (`mailbox.rs`), which applies it as its
    /// own request (admission, rotation, checks) and answers.
    pub async fn follow_up(&self, id: &str, req: FollowUp) -> Result<Accepted> {
        self.dispatch(id, SessionCommand::message(req))
            .await?
            .into_accepted()
    }

    /// [`follow_up`](Self::follow_up) on this host only (its
    /// [`SessionCommand::Message`]): [`agentkit_store::SharedError::Busy`] when
    /// another live host holds the session (nothing changed then).
    pub(crate) async fn admit_follow_up(&self, id: &str, req: FollowUp) -> Result<Accepted> {
        if req.message.trim().is_empty() {
            return Err(Error::BadRequest {
                message: "`message` must not be empty".into(),
            });
        }
        workspace::check_relative_paths(&req.workspace_files)?;
        let session = self.owned(id, &req.owner)?;
        self.ready(&session).await?;
        // On a shared database, a session held by another host is refused
        // before its token rotates (the client keeps a usable token); a
        // message refused after that lets the lease go again.
        self.hold_lease(&session).await?;
        let accepted = self.follow_up_held(id, &session, req).await;
        if accepted.is_err() {
            self.release_if_idle(&session).await;
        }
        accepted
    }

    /// [`follow_up`](Self::follow_up) once the session is ready (and, on
    /// a shared database, held by this host).
    async fn follow_up_held(
        &self,
        id: &str,
        session: &Arc<Session>,
        req: FollowUp,
    ) -> Result<Accepted> {
        let from = (req.owner.is_operator()
            && session.meta().owner.principal_id != req.owner.principal_id)
            .then(|| req.owner.operator_label());
        let (token, rotated) = {
            let mut meta = session.meta();
            if meta.mode == SessionMode::Task {
                return Err(Error::TaskSession { id: id.to_owned() });
            }
            // A rejected message is not accepted, so it must not rotate the
            // token: check before rotating.
            if req.admission == Admission::Reject && session.state().is_busy() {
                return Err(Error::SessionBusy { id: id.to_owned() });
            }
            if meta.channel == HTTP_CHANNEL && from.is_some() && req.continuation_token.is_none() {
                // An operator who does not hold the owner's token sends
                // without one, and the token is not rotated: the owner's
                // next follow-up still holds the current one.
                (meta.continuation_token.clone(), None)
            } else if meta.channel == HTTP_CHANNEL {
                if req.continuation_token.as_deref() != Some(meta.continuation_token.as_str()) {
                    return Err(Error::StaleContinuation);
                }
                let fresh = mint_token();
                self.inner
                    .registry
                    .rekey(&meta.channel, &meta.continuation_token, &fresh, id);
                meta.continuation_token = fresh;
                (meta.continuation_token.clone(), Some(meta.clone()))
            } else {
                (meta.continuation_token.clone(), None)
            }
        };
        // The new token is answered only once the index holds it.
        if let Some(meta) = rotated {
            self.index_put(&meta).await?;
        }
        let (coalesced, start_index) = self
            .accept_from(
                session,
                req.message,
                req.admission,
                req.workspace_files,
                from,
            )
            .await?;
        Ok(Accepted {
            session_id: id.to_owned(),
            continuation_token: token,
            is_new: false,
            coalesced,
            start_index,
        })
    }

    pub(crate) fn waiters(&self) -> &Arc<crate::approvals::Waiters> {
        &self.inner.waiters
    }

    /// Runs `task` on the runtime's tracker (shutdown waits for it).
    pub(crate) fn spawn_task<F>(&self, task: F)
    where
        F: std::future::Future<Output = Option<()>> + Send + 'static,
    {
        self.inner.tasks.spawn(task);
    }

    /// Sleeps for `d`; `None` when shutdown comes first.
    pub(crate) async fn sleep_or_shutdown(&self, d: Duration) -> Option<()> {
        tokio::select! {
            _ = tokio::time::sleep(d) => Some(()),
            _ = self.inner.shutdown.cancelled() => None,
        }
    }

    /// Interrupts the running turn (if any) and drops queued messages,
    /// wherever the session runs. Returns whether a turn was running.
    pub async fn stop(&self, id: &str, owner: &Owner) -> Result<bool> {
        let stop = SessionCommand::Stop {
            owner: owner.clone(),
        };
        self.dispatch(id, stop).await?.into_stopped()
    }

    /// [`stop`](Self::stop) from synchronous code (a channel pack's
    /// interrupt). Needs tokio's multi-threaded runtime when the turn runs
    /// on another host, as `agentkit serve` runs.
    pub fn stop_blocking(&self, id: &str, owner: &Owner) -> Result<bool> {
        let here = self.interrupt(id, owner);
        if self.inner.shared.is_some() && crate::dispatch::held_elsewhere(&here) {
            let stop = SessionCommand::Stop {
                owner: owner.clone(),
            };
            return crate::shared::block_on(async { self.route(id, stop).await?.into_stopped() });
        }
        here
    }

    /// [`stop`](Self::stop) on this host only (its
    /// [`SessionCommand::Stop`]).
    pub(crate) fn interrupt(&self, id: &str, owner: &Owner) -> Result<bool> {
        let session = self.owned(id, owner)?;
        let by = (owner.is_operator() && session.meta().owner.principal_id != owner.principal_id)
            .then(|| owner.operator_label());
        let stopped = session.state().stop_by(by);
        if stopped {
            tracing::info!(session = %id, by = %owner.principal_id, operator = owner.is_operator(), "turn stopped");
        } else if let Some(shared) = &self.inner.shared
            && let Some(holder) =
                crate::shared::block_on(async { Ok(shared.leases.holder(id).await?) })?
        {
            // The turn runs on another host: saying "nothing ran" here
            // would be wrong; `dispatch` routes the stop there.
            return Err(agentkit_store::SharedError::Busy {
                session: id.to_owned(),
                holder,
            }
            .into());
        }
        Ok(stopped)
    }

    /// Replay from `start_index`, then live events.
    pub async fn subscribe(&self, id: &str, owner: &Owner, start_index: u64) -> Result<Follow> {
        let session = self.owned(id, owner)?;
        self.ready(&session).await?;
        self.inner.store.subscribe(&session.id, start_index).await
    }

    /// Every stored event from `start_index`.
    pub async fn events(&self, id: &str, owner: &Owner, start_index: u64) -> Result<Vec<Event>> {
        let session = self.owned(id, owner)?;
        self.ready(&session).await?;
        self.inner.store.read(&session.id, start_index).await
    }

    /// Every stored event from `start_index`, as stored: deltas without
    /// their cumulative text (for readers that look only at outcomes).
    pub async fn events_stored(
        &self,
        id: &str,
        owner: &Owner,
        start_index: u64,
    ) -> Result<Vec<Event>> {
        let session = self.owned(id, owner)?;
        self.ready(&session).await?;
        self.inner.store.read_stored(&session.id, start_index).await
    }

    /// The conversation the session's next turn would hand the model
    /// (every message so far, folded from the log): for inspecting what a
    /// model sees.
    pub async fn conversation(
        &self,
        id: &str,
        owner: &Owner,
    ) -> Result<Vec<agentkit_protocol::Message>> {
        let session = self.owned(id, owner)?;
        self.ready(&session).await?;
        self.with_history(&session, |events| {
            crate::fold::conversation(events, &Default::default())
        })
        .await
    }

    /// Where the session's workspace is (`[local] cwd`, else beside its
    /// log), for `owner`. It may not exist yet: it is made when a turn or
    /// a call first needs it.
    pub fn workspace(&self, id: &str, owner: &Owner) -> Result<PathBuf> {
        Ok(self.owned(id, owner)?.workspace.clone())
    }

    /// The metadata of a session `owner` may see.
    pub fn session(&self, id: &str, owner: &Owner) -> Result<SessionMeta> {
        Ok(lock(&self.owned(id, owner)?.meta).clone())
    }

    /// What the session's turns used so far, read from its fold (no log
    /// read while the session is hot).
    pub async fn usage(&self, id: &str, owner: &Owner) -> Result<agentkit_protocol::Usage> {
        let session = self.owned(id, owner)?;
        self.ready(&session).await?;
        self.with_history(&session, crate::fold::usage).await
    }

    /// How many sessions of the agent are stored (the session index's
    /// count: this host's, or the shared database's).
    pub async fn stored_sessions(&self) -> Result<u64> {
        if let Some(shared) = &self.inner.shared {
            return Ok(shared.index.count().await?);
        }
        let runtime = self.clone();
        tokio::task::spawn_blocking(move || runtime.inner.db.count_sessions())
            .await
            .map_err(|e| Error::task("counting sessions", e))?
    }

    /// Is the session doing anything: a turn running, messages queued, or
    /// its worker settling?
    pub fn is_active(&self, id: &str) -> bool {
        self.peek(id).is_some_and(|s| s.state().is_active())
    }

    /// Wakes a chat session with `message` (a reminder firing), on this
    /// host (its [`SessionCommand::Wake`]): admitted with `coalesce`, so it
    /// never interrupts a turn in flight, and without rotating the
    /// session's continuation token.
    pub(crate) async fn admit_wake(&self, id: &str, message: String) -> Result<Accepted> {
        let session = self.get(id)?;
        let (mode, token) = {
            let meta = session.meta();
            (meta.mode, meta.continuation_token.clone())
        };
        if mode == SessionMode::Task {
            return Err(Error::TaskSession { id: id.to_owned() });
        }
        self.ready(&session).await?;
        self.hold_lease(&session).await?;
        let accepted = self
            .accept(&session, message, Admission::Coalesce, Vec::new())
            .await;
        if accepted.is_err() {
            self.release_if_idle(&session).await;
        }
        let (coalesced, start_index) = accepted?;
        Ok(Accepted {
            session_id: id.to_owned(),
            continuation_token: token,
            is_new: false,
            coalesced,
            start_index,
        })
    }

    /// Is a turn running in this session?
    pub fn is_busy(&self, id: &str) -> bool {
        self.peek(id).is_some_and(|s| s.state().is_running())
    }

    /// The metadata of any session, without an ownership check: for
    /// channels, which authenticate their callers themselves and continue
    /// a session by its channel key whoever sent the delivery.
    pub fn session_meta(&self, id: &str) -> Result<SessionMeta> {
        Ok(lock(&self.get(id)?.meta).clone())
    }

    /// The session a channel key maps to.
    pub fn session_for(&self, channel: &str, key: &str) -> Option<String> {
        let loaded = self.inner.registry.by_key(channel, key);
        let id = match loaded {
            Some(id) => id,
            None => match self.index_by_key(channel, key) {
                Ok(id) => id?,
                Err(e) => {
                    tracing::warn!(error = %e, "session index lookup failed");
                    return None;
                }
            },
        };
        let session = self.get(&id).ok()?;
        // The index may hold a key the session has since rotated away from.
        (session.meta().continuation_token == key).then_some(id)
    }

    /// The session a key maps to in the session index.
    fn index_by_key(&self, channel: &str, key: &str) -> Result<Option<String>> {
        match &self.inner.shared {
            Some(shared) => {
                crate::shared::block_on(async { Ok(shared.index.by_key(channel, key).await?) })
            }
            None => self.inner.db.session_by_key(channel, key),
        }
    }

    /// Interrupts every running turn (recorded as `turn.failed` with reason
    /// `shutdown`), waits for them to settle up to `grace`, and syncs every
    /// log.
    pub async fn shutdown(&self, grace: Duration) {
        self.inner.shutdown.cancel();
        self.inner.tasks.close();
        if tokio::time::timeout(grace, self.inner.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("turns did not settle within {grace:?}");
        }
        for s in self.inner.registry.loaded() {
            if let Err(e) = self.inner.store.sync(&s.id).await {
                tracing::warn!(session = %s.id, error = %e, "cannot sync on shutdown");
            }
        }
        // Bookkeeping written without waiting (a session's parked flag,
        // which a restart needs to re-arm approval timeouts) is committed
        // before shutdown returns.
        if let Err(e) = self.inner.db.flush().await {
            tracing::warn!(error = %e, "cannot flush the state database on shutdown");
        }
    }

    /// The host bridge server tools of this agent reach.
    pub(crate) fn host_bridge(&self) -> Option<agentkit_harness::HostBridge> {
        self.inner.options.host_bridge.clone()
    }

    /// Every tool the sources bring now, first name wins.
    pub async fn dynamic_tools(&self, session_id: &str) -> Vec<Arc<dyn agentkit_harness::DynTool>> {
        let mut out: Vec<Arc<dyn agentkit_harness::DynTool>> = Vec::new();
        for source in &self.inner.options.tool_sources {
            for tool in source.tools(session_id).await {
                if !out.iter().any(|t| t.spec().name == tool.spec().name) {
                    out.push(tool);
                }
            }
        }
        out
    }

    pub(crate) fn services_handle(&self) -> Option<agentkit_harness::HostHandle> {
        self.inner.options.services.clone()
    }

    /// The state folder of this agent.
    pub fn state_dir(&self) -> &Path {
        &self.inner.options.state_dir
    }
}

/// Checks an `as_of` instant: RFC 3339 (ISO-8601 with a time zone, `Z`
/// or an offset), normalised to `YYYY-MM-DDTHH:MM:SS[.fff]±HH:MM|Z` with
/// the offset kept (the session lives in that zone).
pub(crate) fn parse_as_of(text: &str) -> Result<String> {
    let t = text.trim();
    chrono::DateTime::parse_from_rfc3339(t)
        .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
        .map_err(|e| Error::BadRequest {
            message: format!(
                "`asOf` must be an ISO-8601 instant with a time zone, such as 2025-01-15T09:30:00Z or 2025-01-15T10:30:00+01:00; `{t}` is not one ({e})"
            ),
        })
}

/// An opaque, unguessable HTTP continuation token.
fn mint_token() -> String {
    format!("http:{}", uuid::Uuid::new_v4().simple())
}
