//! The session core's entry points: one agent's sessions, created or
//! continued ([`AgentRuntime::send`], [`AgentRuntime::follow_up`]),
//! looked up (loaded from the session index when addressed, unloaded when
//! idle: `registry.rs`), followed, listed, stopped and shut down. The turns
//! themselves run in `worker.rs`; a session's turn state is the machine in
//! `session.rs`. Features (approvals, reminders, schedules, deterministic
//! calls, hooks) live in their own modules and own their state.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agentkit_events::{FileEventStore, StoreOptions};
use agentkit_manifest::{Agent, ModelSpec};
use agentkit_protocol::Event;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::clock::Clock;
#[cfg(doc)]
use crate::clock::SystemClock;
use crate::db::Db;
use crate::error::{Error, Result};
use crate::log::{EventLog, Follow};
use crate::meta::{Owner, SessionMeta};
use crate::registry::Registry;
use crate::session_command::SessionCommand;
use crate::util::lock;
use crate::workspace;

pub use crate::meta::HTTP_CHANNEL;
pub use crate::requests::{Accepted, FollowUp, SendRequest};

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
/// (lateness: the due time to the firing), since the runtime opened; and
/// what the runtime holds now: its loaded sessions and the writes queued
/// for its state database (for `/metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RuntimeStats {
    pub schedule_ticks_fired: u64,
    pub schedule_ticks_skipped: u64,
    pub schedule_lateness_ms: u64,
    pub reminders_fired: u64,
    pub reminder_lateness_ms: u64,
    /// Sessions loaded in memory: the 512 most recently used idle ones,
    /// and those in use.
    pub loaded_sessions: u64,
    /// Writes (index rows, bookkeeping) queued for the state database's
    /// writer thread still waiting to run.
    pub index_writes_queued: u64,
    /// Transactions the state database's writer thread committed (each a
    /// batch of the writes queued at the time).
    pub index_commits: u64,
    /// Sessions deleted by this process, by reason.
    pub sessions_deleted: crate::session_counts::SessionsDeleted,
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

/// The stores the parts read and write through: this host's, or the
/// shared backend's.
struct Seams {
    index: Arc<dyn agentkit_store::SharedIndex>,
    ab: Arc<dyn agentkit_store::SharedAb>,
    ticks: Arc<dyn agentkit_store::SharedTicks>,
    reminders: Arc<dyn agentkit_store::SharedReminders>,
    artifacts: Arc<dyn agentkit_store::SharedArtifacts>,
    memories: Arc<dyn agentkit_store::SharedMemories>,
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
    /// The session index: this host's (in `db`) or the shared store's.
    pub(crate) index: Arc<dyn agentkit_store::SharedIndex>,
    /// The A/B rows: this host's (in `db`) or the shared store's.
    pub(crate) ab: Arc<dyn agentkit_store::SharedAb>,
    /// Once-only ticks and the day's usage and cost: this host's (in
    /// `db`) or the shared store's.
    pub(crate) ticks: Arc<dyn agentkit_store::SharedTicks>,
    /// The reminders: this host's (in `db`, the armed ones in memory) or
    /// the shared store's.
    pub(crate) reminder_store: Arc<dyn agentkit_store::SharedReminders>,
    /// The artifacts and governed memories: this host's (in `db`) or the
    /// shared store's.
    pub(crate) artifacts: Arc<dyn agentkit_store::SharedArtifacts>,
    pub(crate) memories: Arc<dyn agentkit_store::SharedMemories>,
    pub(crate) schedules: crate::schedule_state::ScheduleState,
    pub(crate) reminders: crate::reminder_types::ReminderState,
    /// Sessions deleted, by reason.
    pub(crate) deleted: crate::session_counts::DeletedCounts,
    /// The journal's writer (`[memory] journal = true`).
    pub(crate) journal: Option<crate::journal::Journal>,
    /// Calls parked in running turns.
    waiters: Arc<crate::approval_gate::Waiters>,
}

impl Inner {
    pub(crate) fn waiters(&self) -> &Arc<crate::approval_gate::Waiters> {
        &self.waiters
    }
    /// Runs `task` on the runtime's tracker (shutdown waits for it).
    pub(crate) fn spawn_task<F>(&self, task: F)
    where
        F: std::future::Future<Output = Option<()>> + Send + 'static,
    {
        self.tasks.spawn(task);
    }
    /// Sleeps for `d`; `None` when shutdown comes first.
    pub(crate) async fn sleep_or_shutdown(&self, d: Duration) -> Option<()> {
        tokio::select! {
            _ = tokio::time::sleep(d) => Some(()),
            _ = self.shutdown.cancelled() => None,
        }
    }
    /// The host bridge server tools of this agent reach.
    pub(crate) fn host_bridge(&self) -> Option<agentkit_harness::HostBridge> {
        self.options.host_bridge.clone()
    }
    pub(crate) fn services_handle(&self) -> Option<agentkit_harness::HostHandle> {
        self.options.services.clone()
    }

    /// The host's services, borrowed (for [`crate::ScheduleRun::services`]).
    pub(crate) fn options_services(&self) -> Option<&agentkit_harness::HostHandle> {
        self.options.services.as_ref()
    }
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
            tokio::task::spawn_blocking(move || Db::open_shared(&dir))
                .await
                .map_err(|e| Error::task("opening the state database", e))??
        };
        let seams = match &shared {
            Some(stores) => Seams {
                index: stores.index.clone(),
                ab: stores.ab.clone(),
                ticks: stores.ticks.clone(),
                reminders: stores.reminders.clone(),
                artifacts: stores.artifacts.clone(),
                memories: stores.memories.clone(),
            },
            None => {
                // The armed reminders are loaded into memory at open.
                let loading = db.clone();
                let reminders = tokio::task::spawn_blocking(move || {
                    crate::reminders_local::LocalReminders::open(loading)
                })
                .await
                .map_err(|e| Error::task("loading reminders", e))??;
                let artifacts = crate::artifacts_local::LocalArtifacts::open(db.clone())?;
                let memories = crate::memory_local::LocalMemories::open(db.clone())?;
                Seams {
                    index: Arc::new(crate::local::LocalIndex::new(
                        db.clone(),
                        &options.state_dir,
                        match &store {
                            EventLog::File(files) => Some(files.clone()),
                            EventLog::Shared(_) => None,
                        },
                    )),
                    ab: Arc::new(crate::ab_local::LocalAb::new(db.clone())),
                    ticks: Arc::new(crate::local::LocalTicks::new(db.clone())),
                    reminders: Arc::new(reminders),
                    artifacts: Arc::new(artifacts),
                    memories: Arc::new(memories),
                }
            }
        };
        let journal = agent.config.memory.journal.then(|| {
            crate::journal::Journal::start(
                &options.state_dir,
                agent.config.memory.journal_max_bytes,
                shared.as_ref().map(|stores| stores.journal.clone()),
            )
        });
        let runtime = AgentRuntime {
            inner: Arc::new(Inner {
                journal,
                agent,
                options,
                store,
                shared,
                index: seams.index,
                ab: seams.ab,
                ticks: seams.ticks,
                reminder_store: seams.reminders,
                artifacts: seams.artifacts,
                memories: seams.memories,
                registry: Registry::default(),
                shutdown: CancellationToken::new(),
                tasks: TaskTracker::new(),
                db,
                schedules: Default::default(),
                reminders: Default::default(),
                deleted: Default::default(),
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
            runtime.inner.index.parked().await?
        };
        for meta in parked.iter().filter_map(|m| crate::meta::meta_of(m)) {
            if let Ok(session) = runtime.sessions().get(&meta.id).await {
                runtime.turns().ready(&session).await?;
            }
        }
        runtime.commands().start_sweeper();
        runtime.commands().start_mailbox();
        runtime.sessions().start_unloader();
        tracing::debug!(
            armed = runtime.reminders().armed().await,
            "reminders loaded"
        );
        // Loudly, when the shell and server tools would run unsandboxed.
        agentkit_harness::log_sandbox_status(&runtime.inner.agent);
        Ok(runtime)
    }

    pub fn agent(&self) -> &Arc<Agent> {
        &self.inner.agent
    }

    /// What the timers did since the runtime opened, and what it holds
    /// now (for `/metrics`).
    pub fn stats(&self) -> RuntimeStats {
        use std::sync::atomic::Ordering;
        let (s, r) = (&self.inner.schedules, &self.inner.reminders);
        RuntimeStats {
            schedule_ticks_fired: s.fired.load(Ordering::Relaxed),
            schedule_ticks_skipped: s.skipped.load(Ordering::Relaxed),
            schedule_lateness_ms: s.late_ms.load(Ordering::Relaxed),
            reminders_fired: r.fired.load(Ordering::Relaxed),
            reminder_lateness_ms: r.late_ms.load(Ordering::Relaxed),
            loaded_sessions: self.inner.registry.loaded_count() as u64,
            index_writes_queued: self.inner.db.queued() as u64,
            index_commits: self.inner.db.commits(),
            sessions_deleted: self.inner.deleted.totals(),
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
            return self.turns().create_new(req, as_of).await;
        };
        let _held = self.inner.registry.lock_key(&req.channel, &key).await;
        let existing = self.session_for(&req.channel, &key).await;
        match existing {
            Some(id) => self.turns().continue_as_owner(&id, key, req).await,
            None => {
                let retry = self.inner.shared.is_some().then(|| req.clone());
                match (self.turns().create_new(req, as_of).await, retry) {
                    // Another host made this key's session meanwhile: the
                    // message continues it, as it would have here.
                    (
                        Err(Error::Shared(agentkit_store::SharedError::KeyTaken { .. })),
                        Some(req),
                    ) => {
                        let id = self
                            .sessions()
                            .index_by_key(&req.channel, &key)
                            .await?
                            .ok_or_else(|| Error::SessionNotFound { id: key.clone() })?;
                        self.turns().continue_as_owner(&id, key, req).await
                    }
                    (other, _) => other,
                }
            }
        }
    }

    /// Accepts a follow-up: checks the owner, the mode and (on the HTTP
    /// channel) the token, rotates the HTTP token, and admits the message.
    /// On a shared database, a session another live host is running gets
    /// the message routed there (`mailbox.rs`), which applies it as its
    /// own request (admission, rotation, checks) and answers.
    pub async fn follow_up(&self, id: &str, req: FollowUp) -> Result<Accepted> {
        self.commands()
            .dispatch(id, SessionCommand::message(req))
            .await?
            .into_accepted()
    }

    /// Interrupts the running turn (if any) and drops queued messages,
    /// wherever the session runs. Returns whether a turn was running.
    pub async fn stop(&self, id: &str, owner: &Owner) -> Result<bool> {
        let stop = SessionCommand::Stop {
            owner: owner.clone(),
        };
        self.commands().dispatch(id, stop).await?.into_stopped()
    }

    /// Replay from `start_index`, then live events.
    pub async fn subscribe(&self, id: &str, owner: &Owner, start_index: u64) -> Result<Follow> {
        let session = self.sessions().owned(id, owner).await?;
        self.turns().ready(&session).await?;
        self.inner.store.subscribe(&session.id, start_index).await
    }

    /// Every stored event from `start_index`.
    pub async fn events(&self, id: &str, owner: &Owner, start_index: u64) -> Result<Vec<Event>> {
        let session = self.sessions().owned(id, owner).await?;
        self.turns().ready(&session).await?;
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
        let session = self.sessions().owned(id, owner).await?;
        self.turns().ready(&session).await?;
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
        let session = self.sessions().owned(id, owner).await?;
        self.turns().ready(&session).await?;
        self.turns()
            .with_history(&session, |events| {
                crate::fold::conversation(events, &Default::default())
            })
            .await
    }

    /// The metadata of a session `owner` may see.
    pub async fn session(&self, id: &str, owner: &Owner) -> Result<SessionMeta> {
        Ok(lock(&self.sessions().owned(id, owner).await?.meta).clone())
    }

    /// What the session's turns used so far and what they cost in US
    /// dollars (`None` when a turn's price was unknown), read from its
    /// fold (no log read while the session is hot).
    pub async fn usage(
        &self,
        id: &str,
        owner: &Owner,
    ) -> Result<(agentkit_protocol::Usage, Option<f64>)> {
        let session = self.sessions().owned(id, owner).await?;
        self.turns().ready(&session).await?;
        self.turns()
            .with_history(&session, |events| {
                let (known, complete) = crate::fold::cost(events);
                (crate::fold::usage(events), complete.then_some(known))
            })
            .await
    }

    /// How many sessions of the agent are stored (the session index's
    /// count: this host's, or the shared database's).
    pub async fn stored_sessions(&self) -> Result<u64> {
        Ok(self.inner.index.count().await?)
    }

    /// Is the session doing anything: a turn running, messages queued, or
    /// its worker settling?
    pub fn is_active(&self, id: &str) -> bool {
        self.sessions()
            .peek(id)
            .is_some_and(|s| s.state().is_active())
    }

    /// Is a turn (or deterministic call) running in this session, or a
    /// message waiting for the next one? A session whose last turn ended
    /// is not busy while its worker records the settle and makes the log
    /// durable ([`is_active`](Self::is_active) still says so): what the
    /// HTTP turn gate counts, so a slot is free as soon as a client can
    /// see `session.waiting`.
    pub fn is_busy(&self, id: &str) -> bool {
        self.sessions()
            .peek(id)
            .is_some_and(|s| s.state().is_busy())
    }

    /// The metadata of any session, without an ownership check: for
    /// channels, which authenticate their callers themselves and continue
    /// a session by its channel key whoever sent the delivery.
    pub async fn session_meta(&self, id: &str) -> Result<SessionMeta> {
        Ok(lock(&self.sessions().get(id).await?.meta).clone())
    }

    /// The session a channel key maps to.
    pub async fn session_for(&self, channel: &str, key: &str) -> Option<String> {
        let loaded = self.inner.registry.by_key(channel, key);
        let id = match loaded {
            Some(id) => id,
            None => match self.sessions().index_by_key(channel, key).await {
                Ok(id) => id?,
                Err(e) => {
                    tracing::warn!(error = %e, "session index lookup failed");
                    return None;
                }
            },
        };
        let session = self.sessions().get(&id).await.ok()?;
        // The index may hold a key the session has since rotated away from.
        (session.meta().continuation_token == key).then_some(id)
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
        // The journal's queued lines reach its file.
        if let Some(journal) = &self.inner.journal {
            journal.flush().await;
        }
        // Bookkeeping written without waiting (a session's parked flag,
        // which a restart needs to re-arm approval timeouts) is committed
        // before shutdown returns.
        if let Err(e) = self.inner.db.flush().await {
            tracing::warn!(error = %e, "cannot flush the state database on shutdown");
        }
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
        out.extend(self.retention().artifacts().tool());
        out.extend(self.retention().memory().tools());
        out
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
