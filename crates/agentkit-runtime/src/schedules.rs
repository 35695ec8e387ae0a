//! Schedules (`schedules/*.md|toml`): fired on their cron cadence (UTC,
//! minute granularity) by [`Schedules::run`], or once by hand
//! with [`AgentRuntime::dispatch_schedule`] (the dev route), through the
//! same path.
//!
//! Firing uses croner (the manifest's [`CronSchedule`], classic cron
//! semantics: when both day fields are restricted, a day matching either
//! fires) for the next instant and the runtime's [`Clock`] to wait for it.
//! Not tokio-cron-scheduler: it ANDs day-of-month with day-of-week
//! (`0 0 13 * FRI` would fire only on Friday the 13th), and it cannot run on
//! an injected clock.
//!
//! Each fired tick is recorded in SQLite before the run starts, so a
//! restart within the same minute does not fire it again; ticks missed
//! while the server was down are not replayed. A tick that comes while the
//! schedule's previous run is still going is skipped and counted.
//!
//! [`Clock`]: crate::Clock

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agentkit_manifest::{Admission, CronSchedule, Schedule, ScheduleAction};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use agentkit_harness::{CallOrigin, CallPrincipal};
use serde_json::json;

use crate::error::{Error, Result};
use crate::meta::{Owner, SessionMode};
use crate::runtime::{AgentRuntime, HTTP_CHANNEL, SendRequest};
use crate::schedule_handlers::{ScheduleHandlers, ScheduleRun, WorkGuard};
use crate::schedule_state::{LastRun, ScheduleLastRun};
use crate::util::lock;

/// The channel recorded on the task sessions schedules start.
pub const SCHEDULE_CHANNEL: &str = "schedule";

/// What is known at run time about one schedule.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleStatus {
    pub id: String,
    pub cron: String,
    pub next_fire_at: Option<String>,
    /// The last tick this host fired (not dev dispatches).
    pub last_fired_at: Option<String>,
    /// Ticks skipped because the previous run was still going.
    pub skipped_ticks: u64,
    /// The previous run (its sessions or tool call) is still going.
    pub running: bool,
    /// The last run on this host, by cron tick or by hand.
    pub last_run: Option<ScheduleLastRun>,
}

/// The principal schedules act as (the spec's `appAuth`).
pub fn schedule_owner(id: &str) -> Owner {
    Owner {
        principal_id: format!("schedule:{id}"),
        principal_type: "app".to_owned(),
        authenticator: "schedule".to_owned(),
        ..Default::default()
    }
}

fn iso(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn from_ms(ms: i64) -> Option<DateTime<Utc>> {
    DateTime::<Utc>::from_timestamp_millis(ms)
}

/// The later of the last tick fired and the last run's start (a dispatch
/// by hand counts as a firing too). Both are ISO-8601 UTC in one format,
/// so they compare as text.
fn latest(fired: Option<String>, run: Option<&ScheduleLastRun>) -> Option<String> {
    match (fired, run.map(|r| r.at.clone())) {
        (Some(a), Some(b)) => Some(if b > a { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// A stored record read back (`None` when it cannot be read). A run the
/// record shows as still going ended with the host that ran it.
fn stored_run(json: &str) -> Option<ScheduleLastRun> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let text = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_owned);
    Some(ScheduleLastRun {
        at: text("at")?,
        trigger: match v.get("trigger")?.as_str()? {
            "tick" => "tick",
            _ => "dispatch",
        },
        outcome: match v.get("outcome")?.as_str()? {
            "ok" => "ok",
            "failed" => "failed",
            _ => "interrupted",
        },
        session_ids: v
            .get("sessionIds")
            .and_then(|s| s.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        error: text("error"),
        finished_at: text("finishedAt"),
    })
}

/// A result or error as one line of text for the run record.
fn text_of(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Schedules, a part of the runtime: firing each cron schedule of the
/// agent once per tick (across hosts), running it by hand, and its
/// run-time status. It holds the session core by reference; its state
/// (`ScheduleState`: runs in flight, last runs, counters) is touched by
/// this module only. Reached through [`AgentRuntime::schedules`].
#[derive(Debug, Clone, Copy)]
pub struct Schedules<'a> {
    rt: &'a AgentRuntime,
}

impl AgentRuntime {
    /// The schedules of this agent.
    pub fn schedules(&self) -> Schedules<'_> {
        Schedules { rt: self }
    }
}

impl Schedules<'_> {
    fn definition(&self, id: &str) -> Result<Schedule> {
        self.rt
            .agent()
            .schedules
            .iter()
            .find(|s| s.id == id)
            .cloned()
            .ok_or_else(|| Error::NotFound {
                what: "schedule",
                id: id.to_owned(),
            })
    }

    /// Sets the Rust handlers `handler = "<name>"` schedules run (before
    /// [`Schedules::run`]).
    pub fn set_handlers(&self, handlers: ScheduleHandlers) {
        *lock(&self.rt.inner.schedules.handlers) = Some(Arc::new(handlers));
    }

    /// Records a session a run of schedule `id` started or sent into (a
    /// Rust handler's `receive`, a tool's or command's bridge `send`), so
    /// the schedule counts as running while it is active and its last run
    /// lists it.
    pub fn note_session(&self, id: &str, session: &str) {
        let mut runs = self.runs();
        let run = runs.entry(id.to_owned()).or_default();
        if !run.sessions.iter().any(|s| s == session) {
            run.sessions.push(session.to_owned());
        }
        if let Some(record) = &mut run.record
            && !record.session_ids.iter().any(|s| s == session)
        {
            record.session_ids.push(session.to_owned());
        }
    }

    /// The runs map, with the records stored by earlier processes read
    /// in on first use.
    fn runs(&self) -> std::sync::MutexGuard<'_, HashMap<String, LastRun>> {
        let state = &self.rt.inner.schedules;
        state
            .loaded
            .get_or_init(|| match self.rt.inner.db.schedule_runs() {
                Ok(rows) => {
                    let mut runs = lock(&state.runs);
                    for (id, json) in rows {
                        if let Some(record) = stored_run(&json) {
                            runs.entry(id).or_default().record.get_or_insert(record);
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot read the stored schedule runs"),
            });
        lock(&state.runs)
    }

    /// Stores `id`'s record (the last run survives a restart).
    fn store_run(&self, id: &str, record: &ScheduleLastRun) {
        match serde_json::to_string(record) {
            Ok(json) => self.rt.inner.db.put_schedule_run(id, json),
            Err(e) => tracing::warn!(schedule = %id, error = %e, "cannot store a schedule run"),
        }
    }

    /// The last run of schedule `id` (kept in `agentkit.sqlite`, so it
    /// survives a restart).
    pub fn last_run(&self, id: &str) -> Option<ScheduleLastRun> {
        self.runs().get(id).and_then(|r| r.record.clone())
    }

    /// Starts the record of a run: its sessions so far are none.
    fn begin_run(&self, id: &str, tick: Option<DateTime<Utc>>) {
        let at = iso(self.rt.clock().now());
        let record = ScheduleLastRun {
            at,
            trigger: if tick.is_some() { "tick" } else { "dispatch" },
            outcome: "running",
            session_ids: Vec::new(),
            error: None,
            finished_at: None,
        };
        self.store_run(id, &record);
        let mut runs = self.runs();
        let run = runs.entry(id.to_owned()).or_default();
        run.sessions.clear();
        run.record = Some(record);
    }

    /// Ends the record of a run with its outcome; its sessions are the
    /// ones noted while it ran plus `sessions`.
    fn end_run(&self, id: &str, sessions: &[String], error: Option<String>) -> Vec<String> {
        let finished = iso(self.rt.clock().now());
        let mut runs = self.runs();
        let run = runs.entry(id.to_owned()).or_default();
        for s in sessions {
            if !run.sessions.contains(s) {
                run.sessions.push(s.clone());
            }
        }
        let all = run.sessions.clone();
        if let Some(record) = &mut run.record {
            record.outcome = if error.is_some() { "failed" } else { "ok" };
            record.error = error.map(|e| truncate(&e, 2000));
            record.session_ids = all.clone();
            record.finished_at = Some(finished);
            self.store_run(id, record);
        }
        all
    }

    /// Runs schedule `id` once now, as `owner` (the schedule's own app
    /// principal when `None`), and answers the ids of the sessions it
    /// started. A tool call, a command and a Rust handler are awaited (not
    /// a handler's `wait_until` work); their sessions are those they
    /// reached through `receive` or the host bridge's `send`. The run is
    /// recorded as the schedule's last run either way
    /// ([`Schedules::last_run`]).
    pub async fn dispatch(&self, id: &str, owner: Option<Owner>) -> Result<Vec<String>> {
        self.run_one(id, owner, None).await
    }

    async fn run_one(
        &self,
        id: &str,
        owner: Option<Owner>,
        tick: Option<DateTime<Utc>>,
    ) -> Result<Vec<String>> {
        let schedule = self.definition(id)?;
        self.begin_run(id, tick);
        let outcome = self.run_action(&schedule, owner, tick).await;
        match outcome {
            Ok(sessions) => {
                let sessions = self.end_run(id, &sessions, None);
                tracing::info!(schedule = %id, sessions = ?sessions, "schedule run done");
                Ok(sessions)
            }
            Err(e) => {
                let message = match &e {
                    Error::ScheduleFailed { message, .. } => message.clone(),
                    other => other.to_string(),
                };
                let sessions = self.end_run(id, &[], Some(message));
                tracing::warn!(schedule = %id, error = %e, sessions = ?sessions, "schedule run failed");
                Err(e)
            }
        }
    }

    /// What the bridge acts as for a tool or command a schedule runs.
    fn origin(id: &str, owner: &Owner) -> CallOrigin {
        CallOrigin {
            channel_id: None,
            continuation_key: None,
            purpose: Some(format!("schedule:{id}")),
            principal: Some(CallPrincipal {
                id: owner.principal_id.clone(),
                kind: owner.principal_type.clone(),
                authenticator: owner.authenticator.clone(),
            }),
            schedule: Some(id.to_owned()),
            model_turn: false,
        }
    }

    async fn run_action(
        &self,
        schedule: &Schedule,
        owner: Option<Owner>,
        tick: Option<DateTime<Utc>>,
    ) -> Result<Vec<String>> {
        let id = schedule.id.as_str();
        let owner = owner.unwrap_or_else(|| schedule_owner(id));
        let title = Some(format!("schedule {id}"));
        let purpose = Some(format!("schedule:{id}"));
        let sessions = match &schedule.action {
            ScheduleAction::Markdown { prompt } => {
                let accepted = self
                    .rt
                    .send(SendRequest {
                        client_tools: Vec::new(),
                        channel: SCHEDULE_CHANNEL.to_owned(),
                        mode: SessionMode::Task,
                        owner,
                        message: prompt.clone(),
                        continuation: None,
                        title,
                        purpose,
                        admission: Admission::Preempt,
                        workspace_files: Vec::new(),
                        dry_run: false,
                        as_of: None,
                        output_schema: schedule.output_schema.clone(),
                    })
                    .await?;
                vec![accepted.session_id]
            }
            ScheduleAction::Message { message, channel } => {
                // A hand-off: a chat session on that channel (the built-in
                // HTTP channel by default), so the channel's event
                // deliveries fire for it.
                let channel = channel.clone().unwrap_or_else(|| HTTP_CHANNEL.to_owned());
                let accepted = self
                    .rt
                    .send(SendRequest {
                        client_tools: Vec::new(),
                        channel,
                        mode: SessionMode::Chat,
                        owner,
                        message: message.clone(),
                        continuation: None,
                        title,
                        purpose,
                        admission: Admission::Preempt,
                        workspace_files: Vec::new(),
                        dry_run: false,
                        as_of: None,
                        output_schema: schedule.output_schema.clone(),
                    })
                    .await?;
                vec![accepted.session_id]
            }
            ScheduleAction::Tool { name, input } => {
                let work = self.work(id);
                let _running = WorkGuard::new(&work);
                let origin = Schedules::origin(id, &owner);
                let o = self
                    .rt
                    .tool_calls()
                    .call_from(name, input.clone(), None, origin)
                    .await?;
                if o.is_error {
                    return Err(Error::ScheduleFailed {
                        id: id.to_owned(),
                        message: format!("tool `{name}` answered an error: {}", text_of(&o.result)),
                    });
                }
                Vec::new()
            }
            ScheduleAction::Command(command) => {
                let work = self.work(id);
                let _running = WorkGuard::new(&work);
                let stdin = json!({
                    "scheduleId": id,
                    "tick": tick.map(iso),
                    "principal": {
                        "id": owner.principal_id,
                        "type": owner.principal_type,
                        "authenticator": owner.authenticator,
                    },
                });
                let origin = Schedules::origin(id, &owner);
                let label = format!("schedule {id}");
                let out = self.rt.run_command(&label, command, &stdin, origin).await;
                if out.is_error {
                    return Err(Error::ScheduleFailed {
                        id: id.to_owned(),
                        message: text_of(&out.output),
                    });
                }
                Vec::new()
            }
            ScheduleAction::Handler { name } => {
                let table = lock(&self.rt.inner.schedules.handlers).clone();
                let handler = table
                    .as_deref()
                    .and_then(|t| t.downcast_ref::<ScheduleHandlers>())
                    .and_then(|t| t.get(name))
                    .cloned()
                    .ok_or_else(|| Error::NotAvailable {
                        message: format!(
                            "schedule `{id}` runs Rust handler `{name}`, which this host did not register"
                        ),
                    })?;
                let work = self.work(id);
                let run = ScheduleRun::new(self.rt.clone(), id, tick, owner, work.clone());
                let outcome = {
                    let _running = WorkGuard::new(&work);
                    handler.run(run.clone()).await
                };
                if let Err(e) = outcome {
                    return Err(Error::ScheduleFailed {
                        id: id.to_owned(),
                        message: e.to_string(),
                    });
                }
                run.sessions()
            }
        };
        Ok(sessions)
    }

    /// The counter of schedule `id`'s work still going.
    fn work(&self, id: &str) -> Arc<AtomicUsize> {
        let mut runs = lock(&self.rt.inner.schedules.runs);
        runs.entry(id.to_owned()).or_default().calls.clone()
    }

    /// Is the last run of schedule `id` still going?
    fn running(&self, id: &str) -> bool {
        let run = lock(&self.rt.inner.schedules.runs).get(id).cloned();
        run.is_some_and(|r| {
            r.calls.load(Ordering::SeqCst) > 0 || r.sessions.iter().any(|s| self.rt.is_active(s))
        })
    }

    /// The run-time state of every schedule.
    pub fn status(&self) -> Vec<ScheduleStatus> {
        let now = self.rt.clock().now();
        self.rt
            .agent()
            .schedules
            .iter()
            .map(|s| {
                let (_, fired, skipped) =
                    self.rt.inner.db.schedule_state(&s.id).unwrap_or_else(|e| {
                        tracing::warn!(schedule = %s.id, error = %e, "cannot read schedule state");
                        (None, None, 0)
                    });
                let last_run = self.last_run(&s.id);
                ScheduleStatus {
                    id: s.id.clone(),
                    cron: s.cron.clone(),
                    next_fire_at: CronSchedule::parse(&s.cron)
                        .ok()
                        .and_then(|c| c.next_after(now))
                        .map(iso),
                    last_fired_at: latest(fired.and_then(from_ms).map(iso), last_run.as_ref()),
                    skipped_ticks: skipped,
                    running: self.running(&s.id),
                    last_run,
                }
            })
            .collect()
    }

    /// Fires every schedule on its cadence until `cancel`. The first tick
    /// is the first one after the moment this is called (not when the
    /// future is first polled).
    pub fn run(
        &self,
        cancel: CancellationToken,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let start = self.rt.clock().now();
        let runtime = self.rt.clone();
        async move {
            let mut tasks = tokio::task::JoinSet::new();
            for schedule in runtime.agent().schedules.clone() {
                let cron = match CronSchedule::parse(&schedule.cron) {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::error!(schedule = %schedule.id, error = %e, "schedule not armed");
                        continue;
                    }
                };
                let r = runtime.clone();
                let cancel = cancel.clone();
                tasks.spawn(async move {
                    r.schedules()
                        .run_loop(&schedule.id, &cron, start, cancel)
                        .await
                });
            }
            while tasks.join_next().await.is_some() {}
        }
    }

    async fn run_loop(
        &self,
        id: &str,
        cron: &CronSchedule,
        start: DateTime<Utc>,
        cancel: CancellationToken,
    ) {
        let clock = self.rt.clock().clone();
        let mut after = start;
        loop {
            let Some(tick) = cron.next_after(after) else {
                tracing::warn!(schedule = %id, "cron expression never fires again");
                return;
            };
            while clock.now() < tick {
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = clock.sleep_until(tick) => {}
                }
            }
            if cancel.is_cancelled() {
                return;
            }
            let now = clock.now();
            if now - tick >= chrono::Duration::minutes(1) {
                // The process stalled (suspend, a clock jump) past the
                // tick's minute: like ticks missed while down, not replayed.
                tracing::warn!(schedule = %id, tick = %iso(tick), "tick missed (the host was stalled); not replayed");
                after = now;
                continue;
            }
            if let Err(e) = self.fire_tick(id, tick).await {
                tracing::warn!(schedule = %id, tick = %iso(tick), error = %e, "scheduled run failed");
            }
            after = tick;
        }
    }

    /// Handles one cron tick: fire once, or count a skip.
    async fn fire_tick(&self, id: &str, tick: DateTime<Utc>) -> Result<()> {
        let tick_ms = tick.timestamp_millis();
        let db = &self.rt.inner.db;
        let (last, _, _) = db.schedule_state(id)?;
        if last.is_some_and(|l| l >= tick_ms) {
            tracing::info!(schedule = %id, tick = %iso(tick), "tick already fired (restart within the minute)");
            return Ok(());
        }
        if self.running(id) {
            self.rt
                .inner
                .schedules
                .skipped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let skipped = db.skip_tick(id, tick_ms).await?;
            tracing::warn!(schedule = %id, tick = %iso(tick), skipped_ticks = skipped, "tick skipped: the previous run is still going");
            return Ok(());
        }
        let now_ms = self.rt.clock().now().timestamp_millis();
        if let Some(shared) = &self.rt.inner.shared {
            // Every host runs the cadence; the database says which fires.
            if !shared
                .ticks
                .claim_tick(id, tick_ms, shared.leases.owner())
                .await?
            {
                return Ok(());
            }
            // This host's own record (its last run, a restart's check).
            db.claim_tick(id, tick_ms, now_ms).await?;
        } else if !db.claim_tick(id, tick_ms, now_ms).await? {
            return Ok(());
        }
        {
            use std::sync::atomic::Ordering;
            let state = &self.rt.inner.schedules;
            state.fired.fetch_add(1, Ordering::Relaxed);
            let late = u64::try_from(now_ms.saturating_sub(tick_ms)).unwrap_or(0);
            state.late_ms.fetch_add(late, Ordering::Relaxed);
        }
        let in_background = self.rt.agent().schedules.iter().any(|s| {
            s.id == id
                && matches!(
                    s.action,
                    ScheduleAction::Handler { .. }
                        | ScheduleAction::Tool { .. }
                        | ScheduleAction::Command(_)
                )
        });
        if in_background {
            // A handler, tool or command may run long: in the background (counted as
            // running from now), so the cadence keeps its time, and
            // shutdown waits for it within its grace period.
            let work = {
                let mut runs = lock(&self.rt.inner.schedules.runs);
                runs.entry(id.to_owned()).or_default().calls.clone()
            };
            let guard = WorkGuard::new(&work);
            let runtime = self.rt.clone();
            let id = id.to_owned();
            self.rt.inner.tasks.spawn(async move {
                let _guard = guard;
                // Failures are logged by `run_schedule`.
                let _ = runtime.schedules().run_one(&id, None, Some(tick)).await;
            });
            return Ok(());
        }
        self.run_one(id, None, Some(tick)).await.map(|_| ())
    }
}

#[cfg(test)]
mod stored_tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_stored_run_still_going_reads_back_as_interrupted() {
        let record = ScheduleLastRun {
            at: "2026-12-01T09:00:00Z".to_owned(),
            trigger: "tick",
            outcome: "running",
            session_ids: vec!["ses_1".to_owned()],
            error: None,
            finished_at: None,
        };
        let back = stored_run(&serde_json::to_string(&record).unwrap()).unwrap();
        assert_eq!(back.outcome, "interrupted");
        assert_eq!(back.trigger, "tick");
        assert_eq!(back.session_ids, ["ses_1"]);
        let done = ScheduleLastRun {
            outcome: "failed",
            error: Some("boom".to_owned()),
            finished_at: Some("2026-12-01T09:00:01Z".to_owned()),
            ..record
        };
        assert_eq!(
            stored_run(&serde_json::to_string(&done).unwrap()).unwrap(),
            done
        );
        assert_eq!(stored_run("{not json"), None);
    }
}
