//! The worker of a session: admitting a message into its turn state,
//! running turns through the harness while messages wait, recording every
//! step on the log (group commit: the harness's burst of events goes in one
//! append), settling the session (the fsync point), recovering a turn a
//! crash cut short, and lending an idle session to a deterministic call.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agentkit_events::NewEvent;
use agentkit_harness::{TurnInput, TurnOutcome};
use agentkit_manifest::Admission;
use agentkit_protocol::{
    Event, EventData, EventType, MessageReceived, SessionFailed, SessionId, TurnCompleted,
    TurnFailed, TurnStarted,
};
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::fold;
use crate::meta::{Owner, SessionMode};
use crate::requests::Incoming;
use crate::runtime::AgentRuntime;
use crate::session::{Claim, Interrupt, NextTurn, Queued, Session};
use crate::util::new_id;
use crate::workspace;

/// A session's fold snapshot, beside its log: the kept events of a prefix
/// of the log, so a restart reads that and the log's tail instead of the
/// whole log.
pub(crate) const SNAPSHOT_FILE: &str = "fold.ndjson";

/// Hands events the runtime just appended to the session's fold cache, if
/// nobody is refreshing it (a refresh reads them from the log instead).
fn feed(session: &Session, appended: &[Arc<Event>]) {
    if let Ok(mut cache) = session.fold.try_lock() {
        cache.push(appended);
    }
}

/// Builds a session's workspace when its turn first calls a tool.
#[derive(Debug)]
struct PrepareSession {
    runtime: AgentRuntime,
    session: Arc<Session>,
    /// The journal's copy was made for this turn.
    journal_offered: std::sync::atomic::AtomicBool,
}

impl agentkit_harness::PrepareWorkspace for PrepareSession {
    fn prepare(&self) -> agentkit_harness::BoxFuture<'_, std::result::Result<(), String>> {
        Box::pin(async move {
            self.runtime
                .turns()
                .ensure_workspace(&self.session)
                .await
                .map_err(|e| e.to_string())?;
            // Once per turn (this is asked before every step's calls).
            if let Some(journal) = &self.runtime.inner.journal
                && !self
                    .journal_offered
                    .swap(true, std::sync::atomic::Ordering::AcqRel)
            {
                journal.offer(&self.session.workspace).await;
            }
            Ok(())
        })
    }
}
/// The turn engine, a part of the runtime: a session made ready (a
/// crash's interrupted turn recovered), messages admitted under the
/// admission policy, turns run one at a time per session and settled,
/// the log appended and folded. Reached through [`AgentRuntime::turns`]
/// by the other parts; nothing outside the crate calls it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Turns<'a> {
    pub(crate) rt: &'a AgentRuntime,
}

impl AgentRuntime {
    /// The turn engine (crate-internal).
    pub(crate) fn turns(&self) -> Turns<'_> {
        Turns { rt: self }
    }
}

impl Turns<'_> {
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

    /// Runs the recovery of a session taken over from a dead host now,
    /// whether or not this host recovered it before.
    pub(crate) async fn recover_now(&self, session: &Arc<Session>) -> Result<()> {
        use std::sync::atomic::Ordering;
        session.needs_recovery.store(false, Ordering::Release);
        self.recover(session).await
    }

    /// Records the end of a turn that a crash cut short.
    async fn recover(&self, session: &Arc<Session>) -> Result<()> {
        if let Some(shared) = &self.rt.inner.shared
            && !shared.leases.holds(session.id.as_str())
        {
            // On a shared database, a turn in flight may be running on
            // another host: only the host that takes the lease (this
            // one, when the holder let go or died) records anything, and
            // it looks again once it holds it. What it read before may
            // predate the holder's last events (a turn that was just
            // ending): acting on that would record a second end.
            if !self.needs_recovery(session, false).await? {
                return Ok(());
            }
            match shared.leases.hold(session.id.as_str()).await {
                Ok(_) => {}
                Err(agentkit_store::SharedError::Busy { .. }) => return Ok(()),
                Err(e) => return Err(e.into()),
            }
            let result = match self.recover_files(session).await {
                Err(Error::Shared(agentkit_store::SharedError::Busy { .. })) => Ok(()),
                other => other,
            };
            self.rt.commands().release_if_idle(session).await;
            return result;
        }
        self.recover_files(session).await
    }

    /// Whether the log ends mid-turn or unsettled (what recovery would
    /// record something for); `arm` re-arms the timeouts of parked calls.
    async fn needs_recovery(&self, session: &Arc<Session>, arm: bool) -> Result<bool> {
        Ok(self.assess(session, arm).await?.is_some())
    }

    /// The turn a crash left open (with its trace), when the log does not
    /// end settled; `None` when there is nothing to record.
    async fn assess(
        &self,
        session: &Arc<Session>,
        arm: bool,
    ) -> Result<Option<(Option<String>, Option<agentkit_protocol::trace::TurnTrace>)>> {
        // Most stored sessions ended settled. Peeking at the last line
        // without the store keeps their logs closed: opening every log at
        // start would hold two descriptors per session ever created.
        let log = self
            .rt
            .sessions()
            .session_dir(&session.id)
            .join("events.ndjson");
        let parked = session.meta().parked;
        if !parked
            && tokio::task::spawn_blocking(move || ends_settled(&log))
                .await
                .unwrap_or(false)
        {
            return Ok(None);
        }
        let (open_turn, settled, trace, waits) = self
            .with_history(session, |events| {
                // What waits is read from the log: the parked flag, written
                // without waiting, may not have reached the index before a
                // crash.
                let waits = arm
                    && (!crate::approvals::pending(events).is_empty()
                        || !crate::approvals::waiting_client(events).is_empty());
                if waits {
                    self.rt.approvals().arm_timeouts(&session.id, events);
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
                let trace = open_turn
                    .as_deref()
                    .and_then(|turn| crate::trace::recorded(events, turn));
                (open_turn, settled, trace, waits)
            })
            .await?;
        if waits && !parked {
            self.mark_parked(session, true);
        }
        if open_turn.is_none() && settled {
            return Ok(None);
        }
        Ok(Some((open_turn, trace)))
    }

    /// [`recover`](Turns::recover) proper.
    async fn recover_files(&self, session: &Arc<Session>) -> Result<()> {
        let Some((open_turn, trace)) = self.assess(session, true).await? else {
            return Ok(());
        };
        if let Some(turn) = &open_turn {
            tracing::warn!(session = %session.id, turn = %turn, "recording a turn interrupted by a restart");
            let data = EventData::TurnFailed(TurnFailed {
                message: "turn interrupted".to_owned(),
                reason: Some("restart".to_owned()),
                trace,
                ..TurnFailed::default()
            });
            self.append(&session.id, Some(turn), data).await?;
        }
        let mode = session.meta().mode;
        match mode {
            SessionMode::Chat => {
                self.append(&session.id, None, EventData::SessionWaiting)
                    .await?
            }
            SessionMode::Task => {
                self.append(&session.id, None, session_failed("turn interrupted"))
                    .await?
            }
        };
        self.rt.inner.store.sync(&session.id).await?;
        Ok(())
    }

    pub(crate) async fn append(
        &self,
        id: &SessionId,
        turn: Option<&str>,
        data: EventData,
    ) -> Result<Arc<Event>> {
        let event = self.rt.inner.store.append(id, turn, data).await?;
        if let Some(session) = self.rt.sessions().peek(id.as_str()) {
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
        self.with_fold(session, |cache| f(cache.events())).await
    }

    /// [`with_history`](Turns::with_history) with the cache itself, for
    /// its memoised fold.
    pub(crate) async fn with_fold<T>(
        &self,
        session: &Arc<Session>,
        f: impl FnOnce(&mut fold::FoldCache) -> T,
    ) -> Result<T> {
        let mut cache = session.fold.lock().await;
        let was_loaded = cache.is_loaded();
        if !was_loaded && let Some((upto, events)) = self.read_snapshot(&session.id).await {
            cache.restore(upto, events);
        }
        // On a shared database, a cache that holds every event this
        // host appended under the lease it still holds is current: no
        // other host can have appended (one round trip fewer per turn).
        let current =
            cache.is_loaded() && self.rt.inner.store.known_len(&session.id) == Some(cache.upto());
        if !current {
            let read = self
                .rt
                .inner
                .store
                .read_stored(&session.id, cache.upto())
                .await?;
            cache.extend(read);
        }
        let out = f(&mut cache);
        drop(cache);
        if !was_loaded {
            self.rt.inner.registry.touch(session);
        }
        Ok(out)
    }
    /// The snapshot of a cold session's fold, if one is on disk and fits
    /// its log (a log shorter than the snapshot was replaced or cut: read
    /// the log instead).
    async fn read_snapshot(&self, id: &SessionId) -> Option<(u64, Vec<Event>)> {
        let path = self.rt.sessions().session_dir(id).join(SNAPSHOT_FILE);
        let session = id.as_str().to_owned();
        let (upto, events) = tokio::task::spawn_blocking(move || {
            let bytes = std::fs::read(&path).ok()?;
            fold::FoldCache::decode(&bytes, &session)
        })
        .await
        .ok()??;
        let len = self.rt.inner.store.len(id).await.ok()?;
        (upto <= len).then_some((upto, events))
    }

    /// Writes the snapshot of `session`'s fold when enough was appended
    /// since the last one. A cache, not a record: written to a temporary
    /// file and renamed (a crash leaves the old one or none), never synced.
    async fn save_snapshot(&self, session: &Session) {
        let encoded = {
            let Ok(cache) = session.fold.try_lock() else {
                return;
            };
            if !cache.snapshot_due() {
                return;
            }
            cache
                .encode(session.id.as_str())
                .map(|bytes| (cache.upto(), bytes))
        };
        let (upto, bytes) = match encoded {
            Ok(encoded) => encoded,
            Err(e) => {
                tracing::warn!(session = %session.id, error = %e, "cannot encode the fold snapshot");
                return;
            }
        };
        if let Err(e) = self.rt.inner.store.make_folder(&session.id).await {
            tracing::warn!(session = %session.id, error = %e, "cannot write the fold snapshot");
            return;
        }
        let dir = self.rt.sessions().session_dir(&session.id);
        // On a shared database no log file made the folder on this host.
        let make_dir = self.rt.inner.shared.is_some();
        let written = tokio::task::spawn_blocking(move || {
            if make_dir {
                std::fs::create_dir_all(&dir)?;
            }
            let tmp = dir.join(format!("{SNAPSHOT_FILE}.tmp"));
            std::fs::write(&tmp, &bytes)?;
            std::fs::rename(&tmp, dir.join(SNAPSHOT_FILE))
        })
        .await;
        match written {
            Ok(Ok(())) => session.fold.lock().await.mark_saved(upto),
            Ok(Err(e)) => {
                tracing::warn!(session = %session.id, error = %e, "cannot write the fold snapshot")
            }
            Err(e) => {
                tracing::warn!(session = %session.id, error = %e, "fold snapshot task failed")
            }
        }
    }

    /// Materialises the session's workspace if no turn or call did yet.
    pub(crate) async fn ensure_workspace(&self, session: &Session) -> Result<()> {
        use std::sync::atomic::Ordering;
        if session.workspace_ready.load(Ordering::Acquire) {
            return Ok(());
        }
        // The workspace is inside the session's folder (unless `[local]
        // cwd` puts it elsewhere): a new session's must be in place.
        self.rt.inner.store.make_folder(&session.id).await?;
        let agent = self.rt.inner.agent.clone();
        let dir = session.workspace.clone();
        let fresh = !dir.exists();
        // A workspace that exists already (a restart, or files a message
        // brought) keeps what is in it: seeds never overwrite a turn's work.
        if fresh {
            tokio::task::spawn_blocking(move || workspace::materialize(&agent, &dir))
                .await
                .map_err(|e| Error::task("workspace setup", e))??;
        }
        session.workspace_ready.store(true, Ordering::Release);
        Ok(())
    }
    /// Admits a message into a session under `admission`. Returns whether
    /// it was coalesced and the index of its `message.received`.
    pub(crate) async fn accept(
        &self,
        session: &Arc<Session>,
        text: String,
        admission: Admission,
        files: Vec<(String, Vec<u8>)>,
    ) -> Result<(bool, u64)> {
        let message = Incoming {
            text,
            client_tools: Vec::new(),
        };
        self.accept_from(session, message, admission, files, None)
            .await
    }

    /// [`accept`](Turns::accept), recording `from` (an operator who is not
    /// the owner) on `message.received`.
    pub(crate) async fn accept_from(
        &self,
        session: &Arc<Session>,
        text: Incoming,
        admission: Admission,
        files: Vec<(String, Vec<u8>)>,
        from: Option<String>,
    ) -> Result<(bool, u64)> {
        self.admit(session, Vec::new(), text, admission, files, from)
            .await
    }

    /// [`accept`](Turns::accept) of a new session's first message, with
    /// the events that open its log (`session.started`, its
    /// `ab.assigned`) appended in the same batch as `message.received`
    /// (one commit on a shared database where there were several).
    pub(crate) async fn accept_first(
        &self,
        session: &Arc<Session>,
        opening: Vec<NewEvent>,
        text: Incoming,
        admission: Admission,
        files: Vec<(String, Vec<u8>)>,
    ) -> Result<(bool, u64)> {
        self.admit(session, opening, text, admission, files, None)
            .await
    }

    async fn admit(
        &self,
        session: &Arc<Session>,
        opening: Vec<NewEvent>,
        message: Incoming,
        admission: Admission,
        files: Vec<(String, Vec<u8>)>,
        from: Option<String>,
    ) -> Result<(bool, u64)> {
        let Incoming { text, client_tools } = message;
        // A new session's first message had its tools checked before
        // the session was made.
        let checked = if opening.is_empty() {
            self.check_client_tools(session.id.as_str(), &client_tools)
                .await
        } else {
            Ok(())
        };
        let checked = match checked {
            Ok(()) => self.prepare_admission(session, admission, &files).await,
            Err(e) => Err(e),
        };
        if let Err(e) = checked {
            // The session exists even though its message was refused.
            if !opening.is_empty() {
                let store = &self.rt.inner.store;
                let appended = if files.is_empty() {
                    store.create(&session.id, opening).await?
                } else {
                    store.append_batch(&session.id, opening).await?
                };
                feed(session, &appended);
            }
            return Err(e);
        }
        let traceparent = if self.rt.inner.options.tracing {
            agentkit_harness::trace::incoming()
        } else {
            None
        };
        let images = crate::files::attached_images(&files);
        let data = EventData::MessageReceived(MessageReceived {
            text: text.to_owned(),
            images: images.clone(),
            from,
            traceparent: traceparent.as_ref().map(ToString::to_string),
            client_tools: client_tools.clone(),
        });
        // A new session's log needs no folder made here, unless the
        // message's files made the folder already.
        let new_log = !opening.is_empty() && files.is_empty();
        let mut events = opening;
        events.push(NewEvent::new(None, data));
        let store = &self.rt.inner.store;
        let appended = if new_log {
            store.create(&session.id, events).await?
        } else {
            store.append_batch(&session.id, events).await?
        };
        feed(session, &appended);
        let received = appended.last().ok_or_else(|| Error::BadRequest {
            message: "an append recorded no event".to_owned(),
        })?;
        let queued = Queued {
            text,
            images,
            index: received.index,
            traceparent,
            client_tools,
        };
        let (start_worker, coalesced) = session.state().enqueue(queued, admission);
        if start_worker {
            let runtime = self.rt.clone();
            let session = session.clone();
            self.rt
                .inner
                .tasks
                .spawn(async move { runtime.turns().work(session).await });
        }
        Ok((coalesced, received.index))
    }

    /// What admitting a message checks and prepares before recording it.
    async fn prepare_admission(
        &self,
        session: &Arc<Session>,
        admission: Admission,
        files: &[(String, Vec<u8>)],
    ) -> Result<()> {
        self.ready(session).await?;
        if admission == Admission::Reject && session.state().is_busy() {
            return Err(Error::SessionBusy {
                id: session.id.as_str().to_owned(),
            });
        }
        if !files.is_empty() {
            // Seeds first, so the files of the message win over them.
            self.ensure_workspace(session).await?;
            workspace::write_files(&session.workspace, files)?;
        }
        Ok(())
    }

    /// Runs turns while messages are queued, then settles the session.
    async fn work(&self, session: Arc<Session>) {
        let mut ok = false;
        // The last turn's end, not yet appended: it goes with the settle
        // event in one append (one commit fewer per turn on a shared
        // database), or alone before the next turn starts.
        let mut end: Option<NewEvent> = None;
        loop {
            let next = session.state().next_turn(&self.rt.inner.shutdown);
            if let Some(next) = next {
                if let Some(end) = end.take()
                    && let Err(e) = self.append_all(&session, vec![end]).await
                {
                    tracing::error!(session = %session.id, error = %e, "turn end could not be recorded");
                }
                ok = match self.run_turn(&session, next).await {
                    Ok((ok, ended)) => {
                        end = ended;
                        ok
                    }
                    Err(e) => {
                        tracing::error!(session = %session.id, error = %e, "turn could not be recorded");
                        false
                    }
                };
                session.state().end_turn();
                continue;
            }
            // Nothing queued: the turns ran, or `stop` dropped the messages
            // this worker was started for. Settle while still holding the
            // worker flag, so no other turn or call interleaves with the
            // settle event; then let go, unless a message arrived meanwhile.
            self.settle(&session, ok, end.take()).await;
            let released = {
                let mut state = session.state();
                let released = state.release();
                if released {
                    session.idle.notify_waiters();
                }
                released
            };
            if released {
                self.rt.commands().release_if_idle(&session).await;
                // Its folder went while the turn ran: forget it now.
                let _ = self.rt.sessions().deleted(&session);
                break;
            }
        }
    }

    /// Appends `events` in one batch, feeding the fold cache (the events
    /// that end a turn and settle the session; a fork's copied prefix).
    pub(crate) async fn append_all(&self, session: &Session, events: Vec<NewEvent>) -> Result<()> {
        let appended = self
            .rt
            .inner
            .store
            .append_batch(&session.id, events)
            .await?;
        feed(session, &appended);
        Ok(())
    }

    /// Records that the session is idle: `session.waiting` for chat
    /// sessions, `session.completed` / `session.failed` for task sessions,
    /// after `end` (the last turn's end, when it is not in the log yet),
    /// in one append, and makes the log durable (the fsync point).
    async fn settle(&self, session: &Session, ok: bool, end: Option<NewEvent>) {
        let mode = session.meta().mode;
        let data = match mode {
            SessionMode::Chat => EventData::SessionWaiting,
            SessionMode::Task if ok => EventData::SessionCompleted,
            SessionMode::Task => session_failed("the turn failed"),
        };
        let mut events: Vec<NewEvent> = end.into_iter().collect();
        let (dropped, by) = session.state().take_dropped();
        if !dropped.is_empty() {
            events.push(NewEvent::new(
                None,
                EventData::MessageDropped(agentkit_protocol::MessageDropped {
                    received: dropped,
                    by,
                }),
            ));
        }
        events.push(NewEvent::new(None, data));
        let settled = self.append_all(session, events).await;
        if let Err(e) = settled.and(self.rt.inner.store.sync(&session.id).await) {
            tracing::error!(session = %session.id, error = %e, "cannot settle session");
            return;
        }
        self.save_snapshot(session).await;
    }

    /// One turn: `turn.started`, the harness's step events, then
    /// `turn.completed` or `turn.failed`. Returns whether it completed,
    /// and its end when the caller is to append it (with the settle
    /// event, when nothing else is queued).
    async fn run_turn(
        &self,
        session: &Arc<Session>,
        next: NextTurn,
    ) -> Result<(bool, Option<NewEvent>)> {
        let NextTurn {
            batch,
            resume,
            cancel,
        } = next;
        let turn_id = new_id("turn");
        let id = &session.id;
        let began = std::time::Instant::now();
        let (mut tool_calls, mut tool_errors) = (0u64, 0u64);
        let received: Vec<u64> = batch.iter().map(|q| q.index).collect();
        let mut started = TurnStarted {
            messages: batch.len() as u64,
            received,
            resumes: resume.clone(),
            ..TurnStarted::default()
        };
        let trace = if self.rt.inner.options.tracing {
            let resumed = match &resume {
                Some(turn) => self
                    .with_history(session, |events| crate::trace::recorded(events, turn))
                    .await?
                    .and_then(|t| t.parsed()),
                None => None,
            };
            let incoming = batch.iter().find_map(|q| q.traceparent.as_ref());
            let trace = crate::trace::turn_trace(resumed.as_ref(), incoming);
            let parsed = trace.parsed();
            started.trace = Some(trace);
            parsed
        } else {
            None
        };
        self.append(id, Some(&turn_id), EventData::TurnStarted(started))
            .await?;
        // Calls of client tools a restart left waiting are answered by
        // this newer message instead (as a follow-up preempts a waiting
        // turn); a resumed turn goes on with them.
        if resume.is_none() && session.meta().parked {
            self.rt
                .approvals()
                .withdraw_client_calls(session, &turn_id)
                .await?;
        }
        let mut exclude: BTreeSet<u64> = batch.iter().map(|q| q.index).collect();
        let newest_answered = exclude.last().copied();
        // The session's usage is summed only for a budget that needs it.
        let budgeted = self
            .rt
            .inner
            .agent
            .config
            .harness
            .max_tokens_per_session
            .is_some();
        let money_budgeted = self
            .rt
            .inner
            .agent
            .config
            .harness
            .max_cost_usd_per_session
            .is_some();
        let (history, assignments, prior_usage, prior_sizing, prior_cost) = self
            .with_fold(session, |cache| {
                // A message recorded after this batch's newest is waiting
                // for the next turn (it was logged while this batch was
                // taken): not history yet.
                if let Some(newest) = newest_answered {
                    exclude.extend(
                        cache
                            .events()
                            .iter()
                            .filter(|e| {
                                e.index > newest && e.event_type == EventType::MessageReceived
                            })
                            .map(|e| e.index),
                    );
                }
                let history = cache.conversation(&exclude);
                let events = cache.events();
                (
                    history,
                    crate::ab::recorded(events),
                    if budgeted {
                        fold::usage(events)
                    } else {
                        Default::default()
                    },
                    fold::sizing(events),
                    if money_budgeted {
                        fold::cost(events).0
                    } else {
                        0.0
                    },
                )
            })
            .await?;
        // The session's experiment variants decide the agent it runs as,
        // and its own output schema replaces the agent's.
        let mut agent = crate::ab::agent_for(&self.rt.inner.agent, &assignments);
        let schema = session.meta().output_schema.clone();
        if let Some(schema) = schema {
            let mut own = (*agent).clone();
            own.config.output_schema = Some(schema);
            agent = Arc::new(own);
        }
        let Some(model) = agent
            .config
            .model
            .clone()
            .or_else(|| self.rt.inner.options.default_model.clone())
        else {
            let message = "no model configured: set `model` in agent.toml or AGENTKIT_MODEL, or serve with --dev for the offline `test` model";
            self.append(id, Some(&turn_id), turn_failed(message))
                .await?;
            return Ok((false, None));
        };
        let dry_run = session.meta().dry_run;
        let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
        // Every host's turns of the day count, on a shared store.
        let day_usage = if agent.config.harness.max_tokens_per_day.is_none() {
            Default::default()
        } else {
            let (input, output) = self.rt.inner.ticks.day_usage(&today).await?;
            agentkit_protocol::Usage {
                input_tokens: u64::try_from(input).unwrap_or(0),
                output_tokens: u64::try_from(output).unwrap_or(0),
                ..Default::default()
            }
        };
        let day_cost_usd = crate::cost::day_cost(self.rt, &agent, &today).await?;
        // Read before the literal: its other fields hold the meta lock.
        let origin = session.meta().call_origin();
        // The client's tools of the turn's messages (a later message's
        // declaration of a name wins).
        let mut client_tools: Vec<agentkit_protocol::ClientTool> = Vec::new();
        // A resumed turn offers the tools of the messages the turn it
        // resumes answered.
        let resumed_tools = match (&resume, batch.is_empty()) {
            (Some(turn), true) => {
                self.with_history(session, |events| fold::resumed_client_tools(events, turn))
                    .await?
            }
            _ => Vec::new(),
        };
        for tool in resumed_tools
            .iter()
            .chain(batch.iter().flat_map(|q| q.client_tools.iter()))
        {
            client_tools.retain(|t| t.name != tool.name);
            client_tools.push(tool.clone());
        }
        let input = TurnInput {
            agent,
            model,
            history,
            user_images: batch.iter().flat_map(|q| q.images.clone()).collect(),
            user_messages: batch.into_iter().map(|q| q.text).collect(),
            workspace: session.workspace.clone(),
            prepare_workspace: Some(Arc::new(PrepareSession {
                runtime: self.rt.clone(),
                session: session.clone(),
                journal_offered: Default::default(),
            })),
            session_id: id.as_str().to_owned(),
            turn_id: turn_id.clone(),
            cancel: cancel.clone(),
            providers: self.rt.inner.options.providers.clone(),
            dry_run,
            host: self.rt.inner.options.host_bridge.clone(),
            reminders: Some(Arc::new(crate::reminders::SessionReminders {
                runtime: self.rt.clone(),
            })),
            tools: self.rt.dynamic_tools(id.as_str()).await,
            client_tools,
            services: self.rt.inner.options.services.clone(),
            approvals: Some(self.rt.approvals().gate(id)),
            as_of: session.meta().as_of.clone(),
            origin,
            prior_usage,
            day_usage,
            prior_cost_usd: prior_cost,
            day_cost_usd,
            prior_sizing,
        };
        let journaled: Option<String> = self
            .rt
            .inner
            .journal
            .as_ref()
            .map(|_| input.user_messages.join("\n\n"));
        let (tx, mut rx) = tokio::sync::mpsc::channel(256);
        let harness = match trace {
            Some(tp) => tokio::spawn(agentkit_harness::trace::with_current(
                tp,
                agentkit_harness::run_turn(input, tx),
            )),
            None => tokio::spawn(agentkit_harness::run_turn(input, tx)),
        };
        // Group commit: whatever the harness produced since the last write
        // goes to the log in one batch.
        while let Some(first) = rx.recv().await {
            let mut batch = vec![first];
            while let Ok(more) = rx.try_recv() {
                batch.push(more);
            }
            if batch.iter().any(|e| {
                matches!(
                    e,
                    agentkit_harness::StepEvent::ApprovalRequested { .. }
                        | agentkit_harness::StepEvent::ClientActionsRequested { .. }
                )
            }) {
                self.mark_parked(session, true);
            }
            for e in &batch {
                if let agentkit_harness::StepEvent::ActionResult { is_error, .. } = e {
                    tool_calls += 1;
                    tool_errors += u64::from(*is_error);
                }
            }
            let events = batch
                .into_iter()
                .map(|e| NewEvent::new(Some(turn_id.clone()), e.payload()))
                .collect();
            let appended = self.rt.inner.store.append_batch(id, events).await?;
            feed(session, &appended);
        }
        let outcome = harness.await.unwrap_or_else(|e| TurnOutcome::Failed {
            message: format!("the turn crashed: {e}"),
        });
        let completed = matches!(outcome, TurnOutcome::Completed { .. });
        // The day's count is kept while a daily budget is set (one write
        // per turn otherwise spent for nothing).
        let daily = self
            .rt
            .inner
            .agent
            .config
            .harness
            .max_tokens_per_day
            .is_some();
        match &outcome {
            TurnOutcome::Completed { usage, .. } | TurnOutcome::OverBudget { usage, .. }
                if daily =>
            {
                let day = chrono::Utc::now().format("%Y-%m-%d").to_string();
                let added = self
                    .rt
                    .inner
                    .ticks
                    .add_day_usage(
                        &day,
                        i64::try_from(usage.input_tokens).unwrap_or(i64::MAX),
                        i64::try_from(usage.output_tokens).unwrap_or(i64::MAX),
                    )
                    .await;
                if let Err(e) = added {
                    tracing::warn!(session = %session.id, error = %e, "cannot count the turn's tokens in the day's usage");
                }
            }
            _ => {}
        }
        crate::cost::turn_ended(self.rt, session, &outcome).await;
        if !assignments.is_empty() {
            let (outcome, usage) = match &outcome {
                TurnOutcome::Completed { usage, .. } => ("completed", *usage),
                TurnOutcome::Failed { .. } => ("failed", Default::default()),
                TurnOutcome::OverBudget { usage, .. } => ("failed", *usage),
                TurnOutcome::Interrupted => ("interrupted", Default::default()),
            };
            self.rt
                .ab()
                .record_turn(crate::ab_metrics::TurnRow {
                    session_id: id.as_str().to_owned(),
                    turn_id: turn_id.clone(),
                    outcome,
                    usage,
                    latency_ms: u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX),
                    tool_calls,
                    tool_errors,
                    ended_at_ms: chrono::Utc::now().timestamp_millis(),
                })
                .await;
        }
        if let (Some(journal), Some(message)) = (&self.rt.inner.journal, journaled) {
            let (outcome, reply) = match &outcome {
                TurnOutcome::Completed { result, .. } => ("completed", result.clone()),
                TurnOutcome::Interrupted => ("interrupted", String::new()),
                _ => ("failed", String::new()),
            };
            let principal = session.meta().owner.principal_id.clone();
            journal
                .record(&crate::journal::JournalLine {
                    timestamp: chrono::Utc::now()
                        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                    session_id: id.as_str().to_owned(),
                    turn_id: turn_id.clone(),
                    principal,
                    message,
                    reply,
                    outcome,
                })
                .await;
        }
        let data = match outcome {
            TurnOutcome::Completed {
                result,
                usage,
                output,
                sizing,
                cost_usd,
            } => EventData::TurnCompleted(TurnCompleted {
                result,
                usage,
                output,
                sizing: (sizing.estimated_input_tokens > 0).then_some(sizing),
                kind: None,
                cost_usd,
            }),
            TurnOutcome::Failed { message } => turn_failed(message),
            TurnOutcome::OverBudget {
                limit,
                message,
                usage,
                cost_usd,
            } => EventData::TurnFailed(TurnFailed {
                message,
                reason: Some("budget".to_owned()),
                limit: Some(limit.to_owned()),
                usage: Some(usage),
                cost_usd,
                ..TurnFailed::default()
            }),
            TurnOutcome::Interrupted => {
                let (reason, stopped_by) = {
                    let mut state = session.state();
                    (state.interrupt(), state.take_stopped_by())
                };
                // A shutdown keeps parked calls waiting (they survive the
                // restart); a preempted or stopped turn withdraws them.
                if reason != Interrupt::Shutdown {
                    self.rt.approvals().withdraw_parked(id, &turn_id).await?;
                }
                EventData::TurnFailed(TurnFailed {
                    message: "turn interrupted".to_owned(),
                    reason: Some(reason.as_str().to_owned()),
                    by: stopped_by.filter(|_| reason == Interrupt::Stopped),
                    ..TurnFailed::default()
                })
            }
        };
        let end = NewEvent::new(Some(turn_id.clone()), data);
        // Calls this turn parked and a human then decided leave nothing
        // waiting: clear the flag so the next start need not read this log.
        // (A failed read only leaves the flag set: the end is still
        // recorded.)
        let parked = session.meta().parked;
        if parked {
            let none_pending = self
                .with_history(session, |events| {
                    crate::approvals::pending(events).is_empty()
                        && crate::approvals::waiting_client(events).is_empty()
                })
                .await;
            match none_pending {
                Ok(true) => self.mark_parked(session, false),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(session = %session.id, error = %e, "cannot look for parked calls")
                }
            }
        }
        // The durable point is when the session settles (`settle` syncs):
        // one fsync per burst of turns rather than one per turn.
        Ok((completed, Some(end)))
    }

    /// Marks an idle session busy for a deterministic call, so turns wait
    /// (or are admitted by their policy) until it ends.
    pub(crate) async fn claim_for_call(&self, id: &str, owner: &Owner) -> Result<Arc<Session>> {
        let session = self.rt.sessions().owned(id, owner).await?;
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
                let mut state = session.state();
                match state.claim(&self.rt.inner.shutdown) {
                    Claim::Busy => return Err(busy()),
                    // The worker is recording `session.waiting`; wait for
                    // it to let go (created under the lock, so the signal
                    // cannot slip past).
                    Claim::Settling => Some(signal.idle.notified()),
                    Claim::Claimed => None,
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
        session.state().running_token()
    }

    /// Ends a deterministic call: the session is idle again, or runs the
    /// messages that arrived during the call.
    pub(crate) fn release_after_call(&self, session: &Arc<Session>) {
        let needs_worker = session.state().release_call();
        if needs_worker {
            let runtime = self.rt.clone();
            let session = session.clone();
            self.rt
                .inner
                .tasks
                .spawn(async move { runtime.turns().work(session).await });
        } else if self.rt.inner.shared.is_some() {
            // The call's appends took the lease; nothing runs now: let
            // another host take the session's next message.
            let runtime = self.rt.clone();
            let session = session.clone();
            self.rt
                .inner
                .tasks
                .spawn(async move { runtime.commands().release_if_idle(&session).await });
        }
    }

    /// Resumes `turn` in a new turn when the session is released.
    pub(crate) fn set_resume(&self, session: &Session, turn: String) {
        session.state().set_resume(turn);
    }

    /// Records in `session.json` whether a call may be parked.
    pub(crate) fn mark_parked(&self, session: &Session, parked: bool) {
        let mut meta = session.meta();
        if meta.parked == parked {
            return;
        }
        meta.parked = parked;
        self.rt.sessions().index_put_detached(&meta);
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

/// `turn.failed` with only a message.
fn turn_failed(message: impl Into<String>) -> EventData {
    EventData::TurnFailed(TurnFailed {
        message: message.into(),
        ..TurnFailed::default()
    })
}

/// `session.failed` with a message.
fn session_failed(message: &str) -> EventData {
    EventData::SessionFailed(SessionFailed {
        message: Some(message.to_owned()),
    })
}
