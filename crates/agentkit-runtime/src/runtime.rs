//! One agent's sessions: creating them, accepting messages under an
//! admission policy, running one turn at a time through the harness, and
//! recording everything on the session's event stream.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use agentkit_events::{FileEventStore, NewEvent, StoreOptions, Subscription};
use agentkit_harness::{TurnInput, TurnOutcome};
use agentkit_manifest::{Admission, Agent, ModelSpec};
use agentkit_protocol::{Event, EventType, SessionId};
use serde::Serialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::clock::Clock;
#[cfg(doc)]
use crate::clock::SystemClock;
use crate::db::Db;
use crate::error::{Error, Result};
use crate::fold;
use crate::meta::{Owner, SessionMeta, SessionMode};
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
}

/// A message to start (or, with a known continuation key, continue) a
/// session.
#[derive(Debug, Clone)]
pub struct NewSession {
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
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    pub session_id: String,
    pub channel: String,
    pub mode: SessionMode,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub busy: bool,
}

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
    agent: Arc<Agent>,
    options: RuntimeOptions,
    store: FileEventStore,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// `(channel, key)` → session id, for channels that bring their own
    /// keys, and the current token of HTTP sessions.
    continuations: Mutex<HashMap<(String, String), String>>,
    shutdown: CancellationToken,
    pub(crate) tasks: TaskTracker,
    /// `agentkit.sqlite`: schedule ticks and reminders.
    pub(crate) db: Db,
    pub(crate) schedules: crate::schedules::ScheduleState,
    pub(crate) reminders: crate::reminders::ReminderState,
    /// Calls parked in running turns.
    waiters: Arc<crate::approvals::Waiters>,
    /// Sessions whose fold cache is loaded, least recently used first; a
    /// session pushed out of it drops its cache once idle.
    hot: Mutex<std::collections::VecDeque<Arc<Session>>>,
    /// Serialises create-or-continue per `(channel, key)`, so two first
    /// deliveries with one new key make one session.
    key_locks: Mutex<HashMap<ChannelKey, Arc<tokio::sync::Mutex<()>>>>,
}

/// Hands events the runtime just appended to the session's fold cache, if
/// nobody is refreshing it (a refresh reads them from the log instead).
fn feed(session: &Session, appended: &[Event]) {
    if let Ok(mut cache) = session.fold.try_lock() {
        cache.push(appended);
    }
}

/// Builds a session's workspace when its turn first calls a tool.
#[derive(Debug)]
struct PrepareSession {
    runtime: AgentRuntime,
    session: Arc<Session>,
}

impl agentkit_harness::PrepareWorkspace for PrepareSession {
    fn prepare(&self) -> agentkit_harness::BoxFuture<'_, std::result::Result<(), String>> {
        Box::pin(async move {
            self.runtime
                .ensure_workspace(&self.session)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

/// `(channel, continuation key)`.
type ChannelKey = (String, String);

/// A held create-or-continue lock; the last holder removes the entry.
struct KeyGuard {
    runtime: AgentRuntime,
    slot: ChannelKey,
    mutex: Arc<tokio::sync::Mutex<()>>,
    _guard: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Drop for KeyGuard {
    fn drop(&mut self) {
        self._guard = None;
        let mut locks = lock(&self.runtime.inner.key_locks);
        // The table's Arc and ours: nobody else waits on this key.
        if Arc::strong_count(&self.mutex) <= 2 {
            locks.remove(&self.slot);
        }
    }
}

/// How many sessions stay loaded (with their fold cache) while idle.
const LOADED_SESSIONS: usize = 512;

#[derive(Debug)]
pub(crate) struct Session {
    pub(crate) id: SessionId,
    meta: Mutex<SessionMeta>,
    state: Mutex<TurnState>,
    pub(crate) workspace: PathBuf,
    /// The workspace was materialised (it is, before the first turn or
    /// call that needs it, not at create).
    workspace_ready: std::sync::atomic::AtomicBool,
    /// Signalled when the session's worker lets go (the session is idle).
    idle: tokio::sync::Notify,
    /// What the fold, approvals and recovery read, kept incrementally
    /// (async: a refresh reads the log's new tail under it).
    fold: tokio::sync::Mutex<fold::FoldCache>,
    /// Loaded from the index: its log may end in a turn a crash cut short.
    needs_recovery: std::sync::atomic::AtomicBool,
    /// Done once the recovery ran.
    recovery: tokio::sync::OnceCell<()>,
}

/// Why a running turn was cut short (`turn.failed`'s `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Interrupt {
    /// A message arrived under the `preempt` policy.
    Preempted,
    /// `stop` was called.
    Stopped,
    /// The server is shutting down (nothing else cancelled it).
    Shutdown,
}

impl Interrupt {
    fn as_str(self) -> &'static str {
        match self {
            Interrupt::Preempted => "preempted",
            Interrupt::Stopped => "stopped",
            Interrupt::Shutdown => "shutdown",
        }
    }
}

#[derive(Debug, Default)]
struct TurnState {
    /// The running turn's cancellation, and why it was cancelled.
    running: Option<CancellationToken>,
    interrupt_reason: Option<Interrupt>,
    /// A turn cut short while a call waited for approval, to resume now
    /// that the call has its result.
    resume: Option<String>,
    /// Messages waiting for the next turn: text and the index of their
    /// `message.received` event.
    queue: Vec<(String, u64)>,
    worker: bool,
}

impl TurnState {
    /// A turn is running, or messages wait for one.
    fn is_busy(&self) -> bool {
        self.running.is_some() || !self.queue.is_empty() || self.resume.is_some()
    }
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
        let store = FileEventStore::open(&options.state_dir, options.store.clone())?;
        let db = {
            let dir = options.state_dir.clone();
            tokio::task::spawn_blocking(move || Db::open(&dir))
                .await
                .map_err(|e| Error::BadRequest {
                    message: format!("opening the state database failed: {e}"),
                })??
        };
        let runtime = AgentRuntime {
            inner: Arc::new(Inner {
                agent,
                options,
                store,
                sessions: Mutex::new(HashMap::new()),
                continuations: Mutex::new(HashMap::new()),
                shutdown: CancellationToken::new(),
                tasks: TaskTracker::new(),
                db,
                schedules: Default::default(),
                reminders: Default::default(),
                waiters: Arc::default(),
                hot: Mutex::default(),
                key_locks: Mutex::default(),
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
        .map_err(|e| Error::BadRequest {
            message: format!("indexing stored sessions failed: {e}"),
        })??;
        if imported > 0 {
            tracing::info!(
                imported,
                "indexed the sessions stored before the session index existed"
            );
        }
        for meta in runtime.inner.db.parked_sessions()? {
            if let Ok(session) = runtime.get(&meta.id) {
                runtime.ready(&session).await?;
            }
        }
        let loader = runtime.clone();
        let armed = tokio::task::spawn_blocking(move || loader.load_reminders())
            .await
            .map_err(|e| Error::BadRequest {
                message: format!("loading reminders failed: {e}"),
            })??;
        tracing::debug!(armed, "reminders loaded");
        // Loudly, when the shell and server tools would run unsandboxed.
        agentkit_harness::log_sandbox_status(&runtime.inner.agent);
        Ok(runtime)
    }

    pub fn agent(&self) -> &Arc<Agent> {
        &self.inner.agent
    }

    pub fn store(&self) -> &FileEventStore {
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

    fn session_dir(&self, id: &SessionId) -> PathBuf {
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
        let key = (meta.channel.clone(), meta.continuation_token.clone());
        let fresh = Arc::new(Session {
            id: id.clone(),
            meta: Mutex::new(meta),
            state: Mutex::new(TurnState::default()),
            workspace,
            workspace_ready: std::sync::atomic::AtomicBool::new(false),
            idle: tokio::sync::Notify::new(),
            fold: tokio::sync::Mutex::new(if needs_recovery {
                fold::FoldCache::default()
            } else {
                fold::FoldCache::new_session()
            }),
            needs_recovery: std::sync::atomic::AtomicBool::new(needs_recovery),
            recovery: tokio::sync::OnceCell::new(),
        });
        let session = {
            let mut sessions = lock(&self.inner.sessions);
            match sessions.get(id.as_str()) {
                Some(loaded) => return loaded.clone(),
                None => {
                    sessions.insert(id.as_str().to_owned(), fresh.clone());
                    fresh
                }
            }
        };
        lock(&self.inner.continuations).insert(key, id.as_str().to_owned());
        self.keep_loaded(&session);
        session
    }

    /// Runs the recovery a session loaded from the index may need, once,
    /// before anything reads or changes it.
    pub(crate) async fn ready(&self, session: &Arc<Session>) -> Result<()> {
        use std::sync::atomic::Ordering;
        if !session.needs_recovery.load(Ordering::Acquire) {
            return Ok(());
        }
        session
            .recovery
            .get_or_try_init(|| self.recover(session))
            .await?;
        Ok(())
    }

    /// Records the end of a turn that a crash cut short.
    async fn recover(&self, session: &Arc<Session>) -> Result<()> {
        // Most stored sessions ended settled. Peeking at the last line
        // without the store keeps their logs closed: opening every log at
        // start would hold two descriptors per session ever created.
        let log = self.session_dir(&session.id).join("events.ndjson");
        let parked = lock(&session.meta).parked;
        if !parked
            && tokio::task::spawn_blocking(move || ends_settled(&log))
                .await
                .unwrap_or(false)
        {
            return Ok(());
        }
        let (open_turn, settled) = self
            .with_history(session, |events| {
                if parked {
                    self.arm_approval_timeouts(&session.id, events);
                }
                let open_turn = events
                    .iter()
                    .rev()
                    .find(|e| {
                        matches!(
                            e.event_type,
                            EventType::TurnStarted
                                | EventType::TurnCompleted
                                | EventType::TurnFailed
                        )
                    })
                    .filter(|e| e.event_type == EventType::TurnStarted)
                    .and_then(|e| e.turn_id.clone());
                // The cache keeps the settle events, so its last event is
                // the log's last kept one; a log that ends in deltas ended
                // mid-turn and has an open turn anyway.
                let settled = events.last().is_some_and(|last| {
                    matches!(
                        last.event_type,
                        EventType::SessionWaiting
                            | EventType::SessionCompleted
                            | EventType::SessionFailed
                    )
                });
                (open_turn, settled)
            })
            .await?;
        if open_turn.is_none() && settled {
            return Ok(());
        }
        if let Some(turn) = &open_turn {
            tracing::warn!(session = %session.id, turn = %turn, "recording a turn interrupted by a restart");
            self.append(
                &session.id,
                EventType::TurnFailed,
                Some(turn),
                json!({"message": "turn interrupted", "reason": "restart"}),
            )
            .await?;
        }
        let mode = lock(&session.meta).mode;
        match mode {
            SessionMode::Chat => {
                self.append(&session.id, EventType::SessionWaiting, None, json!({}))
                    .await?
            }
            SessionMode::Task => {
                self.append(
                    &session.id,
                    EventType::SessionFailed,
                    None,
                    json!({"message": "turn interrupted"}),
                )
                .await?
            }
        };
        self.inner.store.sync(&session.id).await?;
        Ok(())
    }

    async fn append(
        &self,
        id: &SessionId,
        t: EventType,
        turn: Option<&str>,
        data: Value,
    ) -> Result<Event> {
        let event = self.inner.store.append(id, t, turn, data).await?;
        if let Some(session) = self.peek(id.as_str()) {
            feed(&session, std::slice::from_ref(&event));
        }
        Ok(event)
    }

    /// Brings `session`'s fold cache up to date (reading only the events
    /// appended since the last refresh, or the whole log once when the
    /// session was cold) and runs `f` over the kept events.
    pub(crate) async fn with_history<T>(
        &self,
        session: &Arc<Session>,
        f: impl FnOnce(&[Event]) -> T,
    ) -> Result<T> {
        let mut cache = session.fold.lock().await;
        let was_loaded = cache.is_loaded();
        let read = self
            .inner
            .store
            .read_stored(&session.id, cache.upto())
            .await?;
        cache.extend(read);
        let out = f(cache.events());
        drop(cache);
        if !was_loaded {
            self.keep_loaded(session);
        }
        Ok(out)
    }

    /// Records that `session` was used. Past [`LOADED_SESSIONS`], the
    /// least recently used idle sessions are unloaded (their fold cache
    /// with them): a stored session costs memory only while it is used.
    fn keep_loaded(&self, session: &Arc<Session>) {
        let unloaded: Vec<Arc<Session>> = {
            let mut hot = lock(&self.inner.hot);
            if hot.back().is_some_and(|s| Arc::ptr_eq(s, session)) {
                return;
            }
            hot.retain(|s| !Arc::ptr_eq(s, session));
            hot.push_back(session.clone());
            let mut out = Vec::new();
            let mut kept = 0;
            while hot.len() > LOADED_SESSIONS && kept < hot.len() {
                let Some(oldest) = hot.pop_front() else {
                    break;
                };
                let busy = {
                    let state = lock(&oldest.state);
                    state.worker || state.is_busy()
                };
                // Parked sessions keep their approval timers' state loaded.
                if busy || lock(&oldest.meta).parked {
                    hot.push_back(oldest);
                    kept += 1;
                } else {
                    out.push(oldest);
                }
            }
            out
        };
        for session in unloaded {
            self.unload(&session);
        }
    }

    /// Drops an idle session from memory; the index loads it again when it
    /// is next addressed.
    fn unload(&self, session: &Arc<Session>) {
        let mut sessions = lock(&self.inner.sessions);
        let idle = {
            let state = lock(&session.state);
            !(state.worker || state.is_busy())
        };
        // Ours and the table's: no task or request holds it.
        if !idle || Arc::strong_count(session) > 2 {
            return;
        }
        if sessions
            .get(session.id.as_str())
            .is_some_and(|s| Arc::ptr_eq(s, session))
        {
            sessions.remove(session.id.as_str());
            drop(sessions);
            self.drop_key(session);
        }
    }

    /// Removes the session's current key from the loaded keys, if it still
    /// names this session.
    fn drop_key(&self, session: &Session) {
        let key = {
            let meta = lock(&session.meta);
            (meta.channel.clone(), meta.continuation_token.clone())
        };
        let mut conts = lock(&self.inner.continuations);
        if conts.get(&key).map(String::as_str) == Some(session.id.as_str()) {
            conts.remove(&key);
        }
    }

    /// Materialises the session's workspace if no turn or call did yet.
    pub(crate) async fn ensure_workspace(&self, session: &Session) -> Result<()> {
        use std::sync::atomic::Ordering;
        if session.workspace_ready.load(Ordering::Acquire) {
            return Ok(());
        }
        let agent = self.inner.agent.clone();
        let dir = session.workspace.clone();
        let fresh = !dir.exists();
        // A workspace that exists already (a restart, or files a message
        // brought) keeps what is in it: seeds never overwrite a turn's work.
        if fresh {
            tokio::task::spawn_blocking(move || workspace::materialize(&agent, &dir))
                .await
                .map_err(|e| Error::BadRequest {
                    message: format!("workspace setup failed: {e}"),
                })??;
        }
        session.workspace_ready.store(true, Ordering::Release);
        Ok(())
    }

    pub(crate) fn get_session(&self, id: &str) -> Result<Arc<Session>> {
        self.get(id)
    }

    fn get(&self, id: &str) -> Result<Arc<Session>> {
        let id = SessionId::parse(id)?;
        let not_found = || Error::SessionNotFound {
            id: id.as_str().to_owned(),
        };
        let loaded = lock(&self.inner.sessions).get(id.as_str()).cloned();
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

    /// The loaded session `id`, if it is loaded (no index lookup).
    fn peek(&self, id: &str) -> Option<Arc<Session>> {
        lock(&self.inner.sessions).get(id).cloned()
    }

    /// Has someone deleted the session's folder? An idle session whose
    /// folder is gone is forgotten at once (listings, streams, keys), so
    /// deleting a folder deletes the session without a restart. A session
    /// with a turn in flight is forgotten once it settles.
    fn deleted(&self, session: &Arc<Session>) -> bool {
        if self.session_dir(&session.id).exists() {
            return false;
        }
        let active = {
            let state = lock(&session.state);
            state.worker || state.is_busy()
        };
        if active {
            return false;
        }
        self.forget(session);
        true
    }

    /// Drops every trace of `session` from memory.
    fn forget(&self, session: &Arc<Session>) {
        let removed = {
            let mut sessions = lock(&self.inner.sessions);
            match sessions.get(session.id.as_str()) {
                Some(s) if Arc::ptr_eq(s, session) => sessions.remove(session.id.as_str()),
                _ => None,
            }
        };
        if removed.is_none() {
            return;
        }
        self.drop_key(session);
        lock(&self.inner.hot).retain(|s| !Arc::ptr_eq(s, session));
        self.inner.store.close(&session.id);
        self.inner.db.delete_session(session.id.as_str());
        tracing::info!(session = %session.id, "forgot a session whose folder was deleted");
    }

    /// The session, if `owner` may use it.
    pub(crate) fn owned(&self, id: &str, owner: &Owner) -> Result<Arc<Session>> {
        let session = self.get(id)?;
        if lock(&session.meta).owner.principal_id != owner.principal_id {
            return Err(Error::Forbidden { id: id.to_owned() });
        }
        Ok(session)
    }

    /// Starts a session, or continues the one a channel key maps to: the
    /// one create-or-continue of every entry point (the HTTP API, MCP,
    /// channels, schedule handlers). With a continuation key it runs under
    /// that key's lock, so two first messages with one new key make one
    /// session and the second follows it up. A key continues its session
    /// whoever sends (the channel authenticated the sender), as the
    /// session's owner.
    pub async fn create(&self, req: NewSession) -> Result<Accepted> {
        if req.message.trim().is_empty() {
            return Err(Error::BadRequest {
                message: "`message` must not be empty".into(),
            });
        }
        // Refuse bad input before anything is created or rotated.
        workspace::check_relative_paths(&req.workspace_files)?;
        let as_of = req.as_of.as_deref().map(parse_as_of).transpose()?;
        let Some(key) = req.continuation.clone() else {
            return self.create_new(req, as_of).await;
        };
        let _held = self.lock_key(&req.channel, &key).await;
        let existing = self.session_for(&req.channel, &key);
        match existing {
            Some(id) => {
                let owner = self.meta_of(&id)?.owner;
                let follow = FollowUp {
                    owner,
                    message: req.message,
                    continuation_token: Some(key),
                    admission: req.admission,
                    workspace_files: req.workspace_files,
                };
                self.follow_up(&id, follow).await
            }
            None => self.create_new(req, as_of).await,
        }
    }

    /// Holds `(channel, key)`'s create-or-continue lock until dropped.
    async fn lock_key(&self, channel: &str, key: &str) -> KeyGuard {
        let slot = (channel.to_owned(), key.to_owned());
        let mutex = Arc::clone(lock(&self.inner.key_locks).entry(slot.clone()).or_default());
        let guard = mutex.clone().lock_owned().await;
        KeyGuard {
            runtime: self.clone(),
            slot,
            mutex,
            _guard: Some(guard),
        }
    }

    /// A new session for `req` (its key, if any, is free).
    async fn create_new(&self, req: NewSession, as_of: Option<String>) -> Result<Accepted> {
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
            owner: req.owner.clone(),
            continuation_token: token.clone(),
            created_at: now(),
            title: req.title.clone(),
            purpose: req.purpose.clone(),
            dry_run: req.dry_run,
            workspace_dir,
            parked: false,
            as_of,
        };
        // The index row first (committed with whatever other sessions'
        // writes are queued), then the log, which makes the folder: a row
        // whose folder never came is dropped when it is next looked up.
        self.inner.db.put_session(&meta).await?;
        let session = self.register(id.clone(), meta.clone(), false);
        self.append(
            &id,
            EventType::SessionStarted,
            None,
            json!({
                "channel": meta.channel,
                "mode": meta.mode,
                "principalId": meta.owner.principal_id,
                "title": meta.title,
                "purpose": meta.purpose,
                "asOf": meta.as_of,
            }),
        )
        .await?;
        let (coalesced, start_index) = self
            .accept(&session, req.message, req.admission, req.workspace_files)
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
    pub async fn follow_up(&self, id: &str, req: FollowUp) -> Result<Accepted> {
        if req.message.trim().is_empty() {
            return Err(Error::BadRequest {
                message: "`message` must not be empty".into(),
            });
        }
        workspace::check_relative_paths(&req.workspace_files)?;
        let session = self.owned(id, &req.owner)?;
        self.ready(&session).await?;
        let (token, rotated) = {
            let mut meta = lock(&session.meta);
            if meta.mode == SessionMode::Task {
                return Err(Error::TaskSession { id: id.to_owned() });
            }
            // A rejected message is not accepted, so it must not rotate the
            // token: check before rotating.
            if req.admission == Admission::Reject && lock(&session.state).is_busy() {
                return Err(Error::SessionBusy { id: id.to_owned() });
            }
            if meta.channel == HTTP_CHANNEL {
                if req.continuation_token.as_deref() != Some(meta.continuation_token.as_str()) {
                    return Err(Error::StaleContinuation);
                }
                let fresh = mint_token();
                let mut conts = lock(&self.inner.continuations);
                conts.remove(&(meta.channel.clone(), meta.continuation_token.clone()));
                conts.insert((meta.channel.clone(), fresh.clone()), id.to_owned());
                meta.continuation_token = fresh;
                (meta.continuation_token.clone(), Some(meta.clone()))
            } else {
                (meta.continuation_token.clone(), None)
            }
        };
        // The new token is answered only once the index holds it.
        if let Some(meta) = rotated {
            self.inner.db.put_session(&meta).await?;
        }
        let (coalesced, start_index) = self
            .accept(&session, req.message, req.admission, req.workspace_files)
            .await?;
        Ok(Accepted {
            session_id: id.to_owned(),
            continuation_token: token,
            is_new: false,
            coalesced,
            start_index,
        })
    }

    /// Admits a message into a session under `admission`. Returns whether
    /// it was coalesced and the index of its `message.received`.
    async fn accept(
        &self,
        session: &Arc<Session>,
        text: String,
        admission: Admission,
        files: Vec<(String, String)>,
    ) -> Result<(bool, u64)> {
        self.ready(session).await?;
        if admission == Admission::Reject && lock(&session.state).is_busy() {
            return Err(Error::SessionBusy {
                id: session.id.as_str().to_owned(),
            });
        }
        if !files.is_empty() {
            // Seeds first, so the files of the message win over them.
            self.ensure_workspace(session).await?;
            workspace::write_files(&session.workspace, &files)?;
        }
        let received = self
            .append(
                &session.id,
                EventType::MessageReceived,
                None,
                json!({"text": text}),
            )
            .await?;
        let (start_worker, coalesced) = {
            let mut state = lock(&session.state);
            let busy = state.running.is_some();
            state.queue.push((text, received.index));
            if busy && admission == Admission::Preempt {
                state.interrupt_reason = Some(Interrupt::Preempted);
                if let Some(cancel) = &state.running {
                    cancel.cancel();
                }
            }
            let start = !state.worker;
            state.worker = true;
            (start, busy && admission == Admission::Coalesce)
        };
        if start_worker {
            let runtime = self.clone();
            let session = session.clone();
            self.inner
                .tasks
                .spawn(async move { runtime.work(session).await });
        }
        Ok((coalesced, received.index))
    }

    /// Runs turns while messages are queued, then settles the session.
    async fn work(&self, session: Arc<Session>) {
        let mut ok = false;
        loop {
            let next = {
                let mut state = lock(&session.state);
                if state.queue.is_empty() && state.resume.is_none() {
                    None
                } else {
                    let cancel = self.inner.shutdown.child_token();
                    state.running = Some(cancel.clone());
                    state.interrupt_reason = None;
                    Some((
                        std::mem::take(&mut state.queue),
                        state.resume.take(),
                        cancel,
                    ))
                }
            };
            if let Some((batch, resume, cancel)) = next {
                ok = match self.run_turn(&session, batch, resume, cancel).await {
                    Ok(ok) => ok,
                    Err(e) => {
                        tracing::error!(session = %session.id, error = %e, "turn could not be recorded");
                        false
                    }
                };
                lock(&session.state).running = None;
                continue;
            }
            // Nothing queued: the turns ran, or `stop` dropped the messages
            // this worker was started for. Settle while still holding the
            // worker flag, so no other turn or call interleaves with the
            // settle event; then let go, unless a message arrived meanwhile.
            self.settle(&session, ok).await;
            let mut state = lock(&session.state);
            if state.queue.is_empty() && state.resume.is_none() {
                state.worker = false;
                session.idle.notify_waiters();
                drop(state);
                // Its folder went while the turn ran: forget it now.
                let _ = self.deleted(&session);
                break;
            }
        }
    }

    /// Records that the session is idle: `session.waiting` for chat
    /// sessions, `session.completed` / `session.failed` for task sessions,
    /// and makes the log durable (the fsync point).
    async fn settle(&self, session: &Session, ok: bool) {
        let mode = lock(&session.meta).mode;
        let (event, data) = match mode {
            SessionMode::Chat => (EventType::SessionWaiting, json!({})),
            SessionMode::Task if ok => (EventType::SessionCompleted, json!({})),
            SessionMode::Task => (
                EventType::SessionFailed,
                json!({"message": "the turn failed"}),
            ),
        };
        let settled = self.append(&session.id, event, None, data).await;
        if let Err(e) = settled.and(
            self.inner
                .store
                .sync(&session.id)
                .await
                .map_err(Error::from),
        ) {
            tracing::error!(session = %session.id, error = %e, "cannot settle session");
        }
    }

    /// One turn: `turn.started`, the harness's step events, then
    /// `turn.completed` or `turn.failed`. Returns whether it completed.
    async fn run_turn(
        &self,
        session: &Arc<Session>,
        batch: Vec<(String, u64)>,
        resume: Option<String>,
        cancel: CancellationToken,
    ) -> Result<bool> {
        let turn_id = new_id("turn");
        let id = &session.id;
        let mut started = json!({"messages": batch.len()});
        if let (Some(turn), Some(obj)) = (&resume, started.as_object_mut()) {
            obj.insert("resumes".into(), json!(turn));
        }
        self.append(id, EventType::TurnStarted, Some(&turn_id), started)
            .await?;
        let Some(model) = self
            .inner
            .agent
            .config
            .model
            .clone()
            .or_else(|| self.inner.options.default_model.clone())
        else {
            let message = "no model configured: set `model` in agent.toml or AGENTKIT_MODEL, or serve with --dev for the offline `test` model";
            self.append(
                id,
                EventType::TurnFailed,
                Some(&turn_id),
                json!({"message": message}),
            )
            .await?;
            return Ok(false);
        };
        let exclude: BTreeSet<u64> = batch.iter().map(|(_, i)| *i).collect();
        let history = self
            .with_history(session, |events| fold::conversation(events, &exclude))
            .await?;
        let dry_run = lock(&session.meta).dry_run;
        let input = TurnInput {
            agent: self.inner.agent.clone(),
            model,
            history,
            user_messages: batch.into_iter().map(|(t, _)| t).collect(),
            workspace: session.workspace.clone(),
            prepare_workspace: Some(Arc::new(PrepareSession {
                runtime: self.clone(),
                session: session.clone(),
            })),
            session_id: id.as_str().to_owned(),
            turn_id: turn_id.clone(),
            cancel: cancel.clone(),
            providers: self.inner.options.providers.clone(),
            dry_run,
            host: self.inner.options.host_bridge.clone(),
            reminders: Some(Arc::new(crate::reminders::SessionReminders {
                runtime: self.clone(),
            })),
            tools: self.dynamic_tools(id.as_str()).await,
            services: self.inner.options.services.clone(),
            approvals: Some(self.gate(id)),
            as_of: lock(&session.meta).as_of.clone(),
        };
        let (tx, mut rx) = tokio::sync::mpsc::channel(256);
        let harness = tokio::spawn(agentkit_harness::run_turn(input, tx));
        // Group commit: whatever the harness produced since the last write
        // goes to the log in one batch.
        while let Some(first) = rx.recv().await {
            let mut batch = vec![first];
            while let Ok(more) = rx.try_recv() {
                batch.push(more);
            }
            if batch
                .iter()
                .any(|e| matches!(e, agentkit_harness::StepEvent::ApprovalRequested { .. }))
            {
                self.mark_parked(session, true);
            }
            let events = batch
                .into_iter()
                .map(|e| NewEvent {
                    event_type: e.event_type(),
                    turn_id: Some(turn_id.clone()),
                    data: e.data(),
                })
                .collect();
            let appended = self.inner.store.append_batch(id, events).await?;
            feed(session, &appended);
        }
        let outcome = harness.await.unwrap_or_else(|e| TurnOutcome::Failed {
            message: format!("the turn crashed: {e}"),
        });
        let completed = matches!(outcome, TurnOutcome::Completed { .. });
        match outcome {
            TurnOutcome::Completed { result, usage } => {
                self.append(
                    id,
                    EventType::TurnCompleted,
                    Some(&turn_id),
                    json!({"result": result, "usage": usage}),
                )
                .await?;
            }
            TurnOutcome::Failed { message } => {
                self.append(
                    id,
                    EventType::TurnFailed,
                    Some(&turn_id),
                    json!({"message": message}),
                )
                .await?;
            }
            TurnOutcome::Interrupted => {
                let reason = lock(&session.state)
                    .interrupt_reason
                    .unwrap_or(Interrupt::Shutdown);
                // A shutdown keeps parked calls waiting (they survive the
                // restart); a preempted or stopped turn withdraws them.
                if reason != Interrupt::Shutdown {
                    self.withdraw_parked(id, &turn_id).await?;
                }
                self.append(
                    id,
                    EventType::TurnFailed,
                    Some(&turn_id),
                    json!({"message": "turn interrupted", "reason": reason.as_str()}),
                )
                .await?;
            }
        }
        // Calls this turn parked and a human then decided leave nothing
        // waiting: clear the flag so the next start need not read this log.
        let parked = lock(&session.meta).parked;
        if parked
            && self
                .with_history(session, |events| {
                    crate::approvals::pending(events).is_empty()
                })
                .await?
        {
            self.mark_parked(session, false);
        }
        // The durable point is when the session settles (`settle` syncs):
        // one fsync per burst of turns rather than one per turn.
        Ok(completed)
    }

    /// Marks an idle session busy for a deterministic call, so turns wait
    /// (or are admitted by their policy) until it ends.
    pub(crate) async fn claim_for_call(&self, id: &str, owner: &Owner) -> Result<Arc<Session>> {
        let session = self.owned(id, owner)?;
        self.claim_idle(&session).await
    }

    /// Marks an idle session busy (the caller releases it with
    /// `release_after_call`); `session_busy` when a turn runs.
    pub(crate) async fn claim_idle(&self, session: &Arc<Session>) -> Result<Arc<Session>> {
        self.ready(session).await?;
        let session = session.clone();
        let id = session.id.as_str().to_owned();
        let signal = session.clone();
        let busy = || Error::SessionBusy { id: id.clone() };
        loop {
            let settling = {
                let mut state = lock(&session.state);
                if state.is_busy() {
                    return Err(busy());
                }
                if state.worker {
                    // The worker is recording `session.waiting`; wait for
                    // it to let go (created under the lock, so the signal
                    // cannot slip past).
                    Some(signal.idle.notified())
                } else {
                    state.running = Some(self.inner.shutdown.child_token());
                    state.interrupt_reason = None;
                    state.worker = true;
                    None
                }
            };
            match settling {
                None => return Ok(session),
                Some(idle) => {
                    if tokio::time::timeout(Duration::from_secs(5), idle)
                        .await
                        .is_err()
                    {
                        return Err(busy());
                    }
                }
            }
        }
    }

    /// The cancellation of what runs in the session now.
    pub(crate) fn running_token(&self, session: &Session) -> Option<CancellationToken> {
        lock(&session.state).running.clone()
    }

    /// Ends a deterministic call: the session is idle again, or runs the
    /// messages that arrived during the call.
    pub(crate) fn release_after_call(&self, session: &Arc<Session>) {
        let mut state = lock(&session.state);
        state.running = None;
        if state.queue.is_empty() && state.resume.is_none() {
            state.worker = false;
        } else {
            drop(state);
            let runtime = self.clone();
            let session = session.clone();
            self.inner
                .tasks
                .spawn(async move { runtime.work(session).await });
        }
    }

    /// Resumes `turn` in a new turn when the session is released.
    pub(crate) fn set_resume(&self, session: &Session, turn: String) {
        lock(&session.state).resume = Some(turn);
    }

    /// Records in `session.json` whether a call may be parked.
    pub(crate) fn mark_parked(&self, session: &Session, parked: bool) {
        let mut meta = lock(&session.meta);
        if meta.parked == parked {
            return;
        }
        meta.parked = parked;
        self.inner.db.put_session_detached(&meta);
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

    /// Interrupts the running turn (if any) and drops queued messages.
    /// Returns whether a turn was running.
    pub fn stop(&self, id: &str, owner: &Owner) -> Result<bool> {
        let session = self.owned(id, owner)?;
        let mut state = lock(&session.state);
        state.queue.clear();
        match &state.running {
            Some(cancel) => {
                cancel.cancel();
                state.interrupt_reason = Some(Interrupt::Stopped);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Replay from `start_index`, then live events.
    pub async fn subscribe(
        &self,
        id: &str,
        owner: &Owner,
        start_index: u64,
    ) -> Result<Subscription> {
        let session = self.owned(id, owner)?;
        self.ready(&session).await?;
        Ok(self.inner.store.subscribe(&session.id, start_index).await?)
    }

    /// Every stored event from `start_index`.
    pub async fn events(&self, id: &str, owner: &Owner, start_index: u64) -> Result<Vec<Event>> {
        let session = self.owned(id, owner)?;
        self.ready(&session).await?;
        Ok(self.inner.store.read(&session.id, start_index).await?)
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
        Ok(self
            .inner
            .store
            .read_stored(&session.id, start_index)
            .await?)
    }

    /// The metadata of a session `owner` may see.
    pub fn session(&self, id: &str, owner: &Owner) -> Result<SessionMeta> {
        Ok(lock(&self.owned(id, owner)?.meta).clone())
    }

    /// The sessions `owner` created, newest first.
    pub async fn list(&self, owner: &Owner) -> Result<Vec<SessionSummary>> {
        let runtime = self.clone();
        let principal = owner.principal_id.clone();
        let stored = tokio::task::spawn_blocking(move || {
            runtime.inner.db.sessions_of(&principal).map(|metas| {
                // A folder deleted by hand deletes its session.
                metas
                    .into_iter()
                    .filter(|m| {
                        SessionId::parse(&m.id).is_ok_and(|id| {
                            let here = runtime.session_dir(&id).exists();
                            if !here {
                                runtime.inner.db.delete_session(&m.id);
                            }
                            here
                        })
                    })
                    .collect::<Vec<_>>()
            })
        })
        .await
        .map_err(|e| Error::BadRequest {
            message: format!("listing sessions failed: {e}"),
        })??;
        let mut out = Vec::with_capacity(stored.len());
        for stored in stored {
            // A loaded session's metadata is the current one.
            let (meta, busy) = match self.peek(&stored.id) {
                Some(s) => {
                    if self.deleted(&s) {
                        continue;
                    }
                    let busy = lock(&s.state).running.is_some();
                    (lock(&s.meta).clone(), busy)
                }
                None => (stored, false),
            };
            out.push(SessionSummary {
                session_id: meta.id,
                channel: meta.channel,
                mode: meta.mode,
                created_at: meta.created_at,
                title: meta.title,
                busy,
            });
        }
        out.sort_by(|a, b| b.session_id.cmp(&a.session_id));
        Ok(out)
    }

    /// Is the session doing anything: a turn running, messages queued, or
    /// its worker settling?
    pub fn is_active(&self, id: &str) -> bool {
        self.peek(id).is_some_and(|s| {
            let state = lock(&s.state);
            state.worker || state.is_busy()
        })
    }

    /// Wakes a chat session with `message` (a reminder firing): admitted
    /// with `coalesce`, so it never interrupts a turn in flight, and
    /// without rotating the session's continuation token.
    pub(crate) async fn wake(&self, id: &str, message: String) -> Result<Accepted> {
        let session = self.get(id)?;
        let (mode, token) = {
            let meta = lock(&session.meta);
            (meta.mode, meta.continuation_token.clone())
        };
        if mode == SessionMode::Task {
            return Err(Error::TaskSession { id: id.to_owned() });
        }
        let (coalesced, start_index) = self
            .accept(&session, message, Admission::Coalesce, Vec::new())
            .await?;
        Ok(Accepted {
            session_id: id.to_owned(),
            continuation_token: token,
            is_new: false,
            coalesced,
            start_index,
        })
    }

    /// The stored metadata of a session, whoever owns it (host-side use).
    pub(crate) fn meta_of(&self, id: &str) -> Result<SessionMeta> {
        Ok(lock(&self.get(id)?.meta).clone())
    }

    /// Is a turn running in this session?
    pub fn is_busy(&self, id: &str) -> bool {
        self.peek(id)
            .is_some_and(|s| lock(&s.state).running.is_some())
    }

    /// The metadata of any session, without an ownership check: for
    /// channels, which authenticate their callers themselves and continue
    /// a session by its channel key whoever sent the delivery.
    pub fn session_meta(&self, id: &str) -> Result<SessionMeta> {
        Ok(lock(&self.get(id)?.meta).clone())
    }

    /// The session a channel key maps to.
    pub fn session_for(&self, channel: &str, key: &str) -> Option<String> {
        let loaded = lock(&self.inner.continuations)
            .get(&(channel.to_owned(), key.to_owned()))
            .cloned();
        let id = match loaded {
            Some(id) => id,
            None => match self.inner.db.session_by_key(channel, key) {
                Ok(id) => id?,
                Err(e) => {
                    tracing::warn!(error = %e, "session index lookup failed");
                    return None;
                }
            },
        };
        let session = self.get(&id).ok()?;
        // The index may hold a key the session has since rotated away from.
        (lock(&session.meta).continuation_token == key).then_some(id)
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
        let sessions: Vec<Arc<Session>> = lock(&self.inner.sessions).values().cloned().collect();
        for s in sessions {
            if let Err(e) = self.inner.store.sync(&s.id).await {
                tracing::warn!(session = %s.id, error = %e, "cannot sync on shutdown");
            }
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

/// Does the log at `path` end with a complete line recording a settled
/// session (`session.waiting`, `session.completed`, `session.failed`)?
/// Reads only the tail of the file.
fn ends_settled(path: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    let Ok(len) = file.metadata().map(|m| m.len()) else {
        return false;
    };
    let start = len.saturating_sub(64 * 1024);
    let mut tail = Vec::new();
    if file.seek(SeekFrom::Start(start)).is_err() || file.read_to_end(&mut tail).is_err() {
        return false;
    }
    let Some(body) = tail.strip_suffix(b"\n") else {
        return false;
    };
    let last = body.rsplit(|b| *b == b'\n').next().unwrap_or_default();
    serde_json::from_slice::<Event>(last).is_ok_and(|e| {
        matches!(
            e.event_type,
            EventType::SessionWaiting | EventType::SessionCompleted | EventType::SessionFailed
        )
    })
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
