//! The data of reminders: what a caller asks for (`NewReminder`, its
//! `ReminderWhen` and `ReminderAction`), what it gets back (`Reminder`,
//! `ReminderFired`), a stored row and its parsed cadence, and the armed
//! index kept in memory. Plain data: the operations are the `Reminders`
//! part (`reminders.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentkit_manifest::CronSchedule;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use crate::clock::BoxFuture;
use crate::error::{Error, Result};
use crate::requests::Accepted;
use crate::util::lock;

/// The reason recorded on run-form reminders disarmed at open.
pub const HANDLER_LOST_ON_RESTART: &str = "handler_lost_on_restart";

/// When a reminder fires.
#[derive(Debug, Clone, PartialEq)]
pub enum ReminderWhen {
    /// Once, this long after creation.
    Delay(Duration),
    /// Repeatedly, this often (the first firing one period after creation).
    Every(Duration),
    /// On a 5-field cron cadence (UTC).
    Cron(String),
    /// Once, at this instant.
    At(DateTime<Utc>),
}

/// When a stored reminder fires, parsed once: when it is created or
/// read from `agentkit.sqlite`, never again per firing.
#[derive(Debug, Clone)]
pub(crate) enum Cadence {
    Delay(Duration),
    Every(Duration),
    Cron(Box<CronSchedule>, String),
    At(DateTime<Utc>),
}

impl Cadence {
    /// The stored form: `(kind, spec)`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Cadence::Delay(_) => "delay",
            Cadence::Every(_) => "every",
            Cadence::Cron(..) => "cron",
            Cadence::At(_) => "at",
        }
    }

    pub(crate) fn spec(&self) -> String {
        match self {
            Cadence::Delay(d) | Cadence::Every(d) => humanize(*d),
            Cadence::Cron(_, text) => text.clone(),
            Cadence::At(t) => t.to_rfc3339_opts(SecondsFormat::Millis, true),
        }
    }

    /// Reads the stored form back.
    pub(crate) fn parse(kind: &str, spec: &str) -> std::result::Result<Cadence, String> {
        let duration = || agentkit_manifest::parse_duration(spec);
        Ok(match kind {
            "delay" => Cadence::Delay(duration()?),
            "every" => Cadence::Every(duration()?),
            "cron" => Cadence::Cron(Box::new(CronSchedule::parse(spec)?), spec.to_owned()),
            "at" => Cadence::At(
                DateTime::parse_from_rfc3339(spec)
                    .map_err(|e| e.to_string())?
                    .with_timezone(&Utc),
            ),
            other => return Err(format!("unknown reminder kind `{other}`")),
        })
    }

    pub(crate) fn from_when(when: &ReminderWhen) -> Result<Cadence> {
        Ok(match when {
            ReminderWhen::Delay(d) => Cadence::Delay(*d),
            ReminderWhen::Every(d) => Cadence::Every(*d),
            ReminderWhen::Cron(c) => Cadence::Cron(
                Box::new(CronSchedule::parse(c).map_err(|message| Error::BadRequest { message })?),
                c.clone(),
            ),
            ReminderWhen::At(t) => Cadence::At(*t),
        })
    }
}

/// Where a stored reminder is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReminderStatus {
    Armed,
    Done,
    Cancelled,
    /// A run-form reminder whose handler a restart lost.
    Disarmed,
}

impl ReminderStatus {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ReminderStatus::Armed => "armed",
            ReminderStatus::Done => "done",
            ReminderStatus::Cancelled => "cancelled",
            ReminderStatus::Disarmed => "disarmed",
        }
    }

    pub(crate) fn parse(text: &str) -> std::result::Result<ReminderStatus, String> {
        Ok(match text {
            "armed" => ReminderStatus::Armed,
            "done" => ReminderStatus::Done,
            "cancelled" => ReminderStatus::Cancelled,
            "disarmed" => ReminderStatus::Disarmed,
            other => return Err(format!("unknown reminder status `{other}`")),
        })
    }
}

/// What a run handler decided on one tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReminderOutcome {
    /// Disarm the reminder.
    Stop,
    /// Nothing delivered this tick (the fire count stays).
    Skip,
    /// Something was delivered (the fire count goes up).
    Delivered,
}

/// One tick of a run-form reminder, as its handler sees it.
#[derive(Debug, Clone)]
pub struct ReminderTick {
    pub reminder_id: String,
    pub purpose: String,
    /// How many earlier ticks delivered (0 on the first tick).
    pub fire_count: u64,
    pub followup: Followup,
}

/// Sends a follow-up into the conversation a reminder is bound to.
#[derive(Clone)]
pub struct Followup {
    pub(crate) target: Arc<dyn FollowupTarget>,
    pub(crate) reminder_id: String,
}

impl std::fmt::Debug for Followup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Followup")
            .field("reminder_id", &self.reminder_id)
            .finish_non_exhaustive()
    }
}

/// Where a [`Followup`] delivers: the runtime (`reminders.rs`), behind a
/// trait so this data module does not name it.
pub(crate) trait FollowupTarget: Send + Sync {
    /// Wakes the conversation reminder `reminder_id` is bound to with
    /// `message` (admission `coalesce`) and binds it to that session.
    fn follow_up(
        &self,
        reminder_id: String,
        message: String,
    ) -> BoxFuture<'static, Result<Accepted>>;
}

impl Followup {
    /// Wakes the bound conversation with `message` (admission
    /// `coalesce`).
    pub async fn send(&self, message: impl Into<String>) -> Result<Accepted> {
        self.target
            .follow_up(self.reminder_id.clone(), message.into())
            .await
    }
}

/// A run-form reminder's handler: host-side policy, no model turn unless
/// it sends a follow-up. Any `Fn(ReminderTick) -> impl Future<Output =
/// ReminderOutcome>` is one.
pub trait ReminderHandler: Send + Sync {
    fn run(&self, tick: ReminderTick) -> BoxFuture<'static, ReminderOutcome>;
}

impl<F, Fut> ReminderHandler for F
where
    F: Fn(ReminderTick) -> Fut + Send + Sync,
    Fut: std::future::Future<Output = ReminderOutcome> + Send + 'static,
{
    fn run(&self, tick: ReminderTick) -> BoxFuture<'static, ReminderOutcome> {
        Box::pin(self(tick))
    }
}

/// Run-form handlers by name, for [`ReminderAction::Named`] (the
/// facade's `ServeOptions::reminder_handler`).
#[derive(Clone, Default)]
pub struct ReminderHandlers(
    pub(crate) std::collections::BTreeMap<String, Arc<dyn ReminderHandler>>,
);

impl ReminderHandlers {
    /// Registers `handler` under `name` (a later registration of the same
    /// name replaces it).
    pub fn insert(&mut self, name: impl Into<String>, handler: impl ReminderHandler + 'static) {
        self.0.insert(name.into(), Arc::new(handler));
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

impl std::fmt::Debug for ReminderHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// What a reminder does when it fires.
#[derive(Clone)]
pub enum ReminderAction {
    /// Send `prompt` into the conversation; `until` is the standing
    /// cancellation condition for the model to honour.
    Prompt {
        prompt: String,
        until: Option<String>,
    },
    /// Call a Rust handler (in memory only: lost on restart).
    Run(Arc<dyn ReminderHandler>),
    /// Call the handler registered under this name
    /// ([`crate::Reminders::register_handler`]). On a shared
    /// database the name is stored and the host that claims the reminder
    /// calls its own handler of that name, so every host must register
    /// it; on one host it behaves as [`ReminderAction::Run`].
    Named(String),
}

impl std::fmt::Debug for ReminderAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReminderAction::Prompt { prompt, until } => f
                .debug_struct("Prompt")
                .field("prompt", prompt)
                .field("until", until)
                .finish(),
            ReminderAction::Run(_) => f.write_str("Run(..)"),
            ReminderAction::Named(name) => f.debug_tuple("Named").field(name).finish(),
        }
    }
}

/// A reminder to create.
#[derive(Debug, Clone)]
pub struct NewReminder {
    pub purpose: String,
    pub channel_id: String,
    pub continuation_token: String,
    pub when: ReminderWhen,
    pub action: ReminderAction,
}

/// The JSON form of a prompt-form reminder (`host.reminders.create`, the
/// host bridge): `purpose`, `channelId`, `continuationToken`, exactly one
/// of `delay`, `every`, `cron`, `at` (RFC 3339), then `prompt` and an
/// optional `until`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReminderRequest {
    pub purpose: String,
    pub channel_id: String,
    pub continuation_token: String,
    #[serde(default)]
    pub delay: Option<String>,
    #[serde(default)]
    pub every: Option<String>,
    #[serde(default)]
    pub cron: Option<String>,
    #[serde(default)]
    pub at: Option<String>,
    pub prompt: String,
    #[serde(default)]
    pub until: Option<String>,
}

impl ReminderRequest {
    /// Checks the request and turns it into a [`NewReminder`].
    pub fn into_new(self) -> Result<NewReminder> {
        let bad = |message: String| Error::BadRequest { message };
        let when = parse_when(
            self.delay.as_deref(),
            self.every.as_deref(),
            self.cron.as_deref(),
            self.at.as_deref(),
        )?;
        if self.prompt.trim().is_empty() {
            return Err(bad("`prompt` must not be empty".into()));
        }
        Ok(NewReminder {
            purpose: self.purpose,
            channel_id: self.channel_id,
            continuation_token: self.continuation_token,
            when,
            action: ReminderAction::Prompt {
                prompt: self.prompt,
                until: self.until,
            },
        })
    }
}

/// Exactly one of the four ways to say when.
pub fn parse_when(
    delay: Option<&str>,
    every: Option<&str>,
    cron: Option<&str>,
    at: Option<&str>,
) -> Result<ReminderWhen> {
    let bad = |message: String| Error::BadRequest { message };
    let duration = |field: &str, s: &str| {
        agentkit_manifest::parse_duration(s).map_err(|e| bad(format!("`{field}`: {e}")))
    };
    match (delay, every, cron, at) {
        (Some(d), None, None, None) => Ok(ReminderWhen::Delay(duration("delay", d)?)),
        (None, Some(e), None, None) => Ok(ReminderWhen::Every(duration("every", e)?)),
        (None, None, Some(c), None) => {
            CronSchedule::parse(c).map_err(|e| bad(format!("`cron`: {e}")))?;
            Ok(ReminderWhen::Cron(c.trim().to_owned()))
        }
        (None, None, None, Some(a)) => DateTime::parse_from_rfc3339(a)
            .map(|t| ReminderWhen::At(t.with_timezone(&Utc)))
            .map_err(|e| bad(format!("`at`: `{a}` is not an RFC 3339 instant ({e})"))),
        _ => Err(bad(
            "a reminder needs exactly one of `delay`, `every`, `cron` or `at`".into(),
        )),
    }
}

/// A reminder as listed (`GET /v1/dev/reminders`) and answered on
/// creation.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reminder {
    pub id: String,
    pub purpose: String,
    pub channel_id: String,
    pub continuation_token: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// `delay`, `every`, `cron` or `at`.
    pub kind: String,
    /// The duration, cron expression or instant.
    pub spec: String,
    /// `prompt` or `run`.
    pub form: String,
    /// A run-form reminder's handler name (shared database).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handler: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// `armed`, `done`, `cancelled` or `disarmed`.
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub next_fire_at: Option<String>,
    pub fire_count: u64,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_fired_at: Option<String>,
}

fn iso_ms(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(SecondsFormat::Millis, true)
}

impl From<&ReminderRow> for Reminder {
    fn from(r: &ReminderRow) -> Reminder {
        Reminder {
            id: r.id.clone(),
            purpose: r.purpose.clone(),
            channel_id: r.channel_id.clone(),
            continuation_token: r.continuation_token.clone(),
            session_id: r.session_id.clone(),
            kind: r.cadence.kind().to_owned(),
            spec: r.cadence.spec(),
            form: if r.run_form { "run" } else { "prompt" }.to_owned(),
            handler: r.handler.clone(),
            prompt: r.prompt.clone(),
            until: r.until.clone(),
            status: r.status.as_str().to_owned(),
            reason: r.reason.clone(),
            next_fire_at: r.next_fire_at_ms.map(iso_ms),
            fire_count: r.fire_count,
            created_at: iso_ms(r.created_at_ms),
            last_fired_at: r.last_fired_at_ms.map(iso_ms),
        }
    }
}

/// What firing one reminder did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReminderFired {
    pub reminder_id: String,
    /// `delivered`, `skip` or `stop`.
    pub outcome: ReminderOutcome,
    /// The session woken (prompt form, or a run handler's follow-up).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub reminder: Reminder,
}

/// The reminders part's state on this host: its handlers and counters
/// (the armed rows are the store's).
#[derive(Default)]
pub(crate) struct ReminderState {
    /// Reminders fired and their summed lateness in ms (for `/metrics`).
    pub(crate) fired: std::sync::atomic::AtomicU64,
    pub(crate) late_ms: std::sync::atomic::AtomicU64,
    /// Unnamed run handlers, by reminder id (this process only).
    pub(crate) handlers: Mutex<HashMap<String, Arc<dyn ReminderHandler>>>,
    /// Handlers by name, for [`ReminderAction::Named`].
    pub(crate) named: Mutex<HashMap<String, Arc<dyn ReminderHandler>>>,
    /// Signalled when the earliest fire time may have changed.
    pub(crate) changed: tokio::sync::Notify,
}

impl std::fmt::Debug for ReminderState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReminderState")
            .field("handlers", &lock(&self.handlers).len())
            .finish()
    }
}

/// One stored reminder row.
#[derive(Debug, Clone)]
pub(crate) struct ReminderRow {
    pub(crate) id: String,
    pub(crate) purpose: String,
    pub(crate) channel_id: String,
    pub(crate) continuation_token: String,
    pub(crate) session_id: Option<String>,
    pub(crate) cadence: Cadence,
    pub(crate) prompt: Option<String>,
    pub(crate) until: Option<String>,
    pub(crate) run_form: bool,
    /// A run-form reminder's handler by its registered name (kept on a
    /// shared database only: here the handler stays in memory).
    pub(crate) handler: Option<String>,
    pub(crate) status: ReminderStatus,
    pub(crate) reason: Option<String>,
    pub(crate) next_fire_at_ms: Option<i64>,
    pub(crate) fire_count: u64,
    pub(crate) created_at_ms: i64,
    pub(crate) last_fired_at_ms: Option<i64>,
}

/// `20m`, `2h`, `1h 30m` from a duration.
pub(crate) fn humanize(d: Duration) -> String {
    let secs = d.as_secs();
    if secs == 0 {
        return format!("{}ms", d.as_millis());
    }
    let mut parts = Vec::new();
    let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
    if h > 0 {
        parts.push(format!("{h}h"));
    }
    if m > 0 {
        parts.push(format!("{m}m"));
    }
    if s > 0 {
        parts.push(format!("{s}s"));
    }
    parts.join(" ")
}

/// `r` as a store's row.
pub(crate) fn to_record(r: &ReminderRow) -> agentkit_store::ReminderRecord {
    agentkit_store::ReminderRecord {
        id: r.id.clone(),
        purpose: r.purpose.clone(),
        channel_id: r.channel_id.clone(),
        continuation_token: r.continuation_token.clone(),
        session_id: r.session_id.clone(),
        kind: r.cadence.kind().to_owned(),
        spec: r.cadence.spec(),
        prompt: r.prompt.clone(),
        until_condition: r.until.clone(),
        status: r.status.as_str().to_owned(),
        reason: r.reason.clone(),
        next_fire_at_ms: r.next_fire_at_ms,
        fire_count: i64::try_from(r.fire_count).unwrap_or(i64::MAX),
        created_at_ms: r.created_at_ms,
        last_fired_at_ms: r.last_fired_at_ms,
        handler: r.handler.clone(),
    }
}

/// A store's row as a reminder. The run form is the one without a
/// prompt (named, or an unnamed handler of this process).
pub(crate) fn from_record(r: agentkit_store::ReminderRecord) -> Result<ReminderRow> {
    let bad = |e: String| Error::BadRequest {
        message: format!("reminder `{}` in the state database: {e}", r.id),
    };
    Ok(ReminderRow {
        cadence: Cadence::parse(&r.kind, &r.spec).map_err(bad)?,
        status: ReminderStatus::parse(&r.status).map_err(bad)?,
        run_form: r.handler.is_some() || r.prompt.is_none(),
        id: r.id,
        purpose: r.purpose,
        channel_id: r.channel_id,
        continuation_token: r.continuation_token,
        session_id: r.session_id,
        prompt: r.prompt,
        until: r.until_condition,
        handler: r.handler,
        reason: r.reason,
        next_fire_at_ms: r.next_fire_at_ms,
        fire_count: u64::try_from(r.fire_count).unwrap_or(0),
        created_at_ms: r.created_at_ms,
        last_fired_at_ms: r.last_fired_at_ms,
    })
}
