//! Reminders: durable wakes bound to one channel conversation, created at
//! run time (by embedders, tools, the `remind_me` built-in).
//!
//! Each reminder is a row of the store's reminders table: this host's
//! (`reminders_local.rs`: `agentkit.sqlite`, with the armed ones in memory
//! by next fire time) or the shared database's. One path serves both:
//! [`Reminders::run`] claims what is due on the runtime's clock, fires it
//! and writes it back, which lets the claim go.
//! A firing of the **prompt form** sends the prompt (with its `until`
//! condition) into the bound conversation as a follow-up admitted with
//! `coalesce`, so it never interrupts a turn in flight. The **run form**
//! calls a Rust [`ReminderHandler`] that decides (`stop`, `skip`,
//! `delivered`) and may send follow-ups itself.
//!
//! Restarts: armed reminders are loaded at open and those whose time
//! passed while the host was down fire at once (late rather than never).
//! Run handlers live in memory only, so run-form reminders found armed at
//! open are disarmed with the reason `handler_lost_on_restart`.
//!
//! On a shared database a run-form reminder names its handler
//! ([`ReminderAction::Named`], registered on every host with
//! [`Reminders::register_handler`]): the name is stored, and
//! whichever host claims the reminder calls its own handler of that name
//! (a host without one records the firing as failed, with the reason).

use std::sync::Arc;
use std::time::Duration;

use agentkit_manifest::Admission;
use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::clock::BoxFuture;
use crate::error::{Error, Result};
use crate::meta::{Owner, SessionMode};
use crate::reminder_types::{
    Cadence, Followup, FollowupTarget, HANDLER_LOST_ON_RESTART, NewReminder, Reminder,
    ReminderAction, ReminderFired, ReminderHandler, ReminderHandlers, ReminderOutcome, ReminderRow,
    ReminderStatus, ReminderTick, from_record, parse_when, to_record,
};
use crate::requests::{Accepted, SendRequest};
use crate::runtime::{AgentRuntime, HTTP_CHANNEL};
use crate::util::{lock, new_id};

/// The principal a reminder acts as when it has to start its
/// conversation.
fn reminder_owner(purpose: &str) -> Owner {
    Owner {
        principal_id: format!("reminder:{purpose}"),
        principal_type: "app".to_owned(),
        authenticator: "reminder".to_owned(),
        ..Default::default()
    }
}

/// The message a prompt-form firing sends.
fn wake_message(row: &ReminderRow) -> String {
    let mut text = format!(
        "[reminder `{}` ({}) fired]\n\n{}",
        row.purpose,
        row.id,
        row.prompt.as_deref().unwrap_or_default()
    );
    if let Some(until) = &row.until {
        text.push_str(&format!("\n\nStanding condition (until): {until}"));
    }
    text
}

impl FollowupTarget for AgentRuntime {
    fn follow_up(
        &self,
        reminder_id: String,
        message: String,
    ) -> BoxFuture<'static, Result<Accepted>> {
        let runtime = self.clone();
        Box::pin(async move {
            let reminders = runtime.reminders();
            let row = reminders.row(&reminder_id).await?;
            let (accepted, session) = reminders.deliver(&row, message).await?;
            reminders.bind(&reminder_id, &session).await?;
            Ok(accepted)
        })
    }
}

/// Reminders, a part of the runtime: creating, cancelling, listing and
/// firing them. It holds the session core by reference (to deliver a
/// firing into its conversation); its state (`ReminderState`, the armed
/// index and the handlers) is touched by this module only. Reached
/// through [`AgentRuntime::reminders`].
#[derive(Debug, Clone, Copy)]
pub struct Reminders<'a> {
    rt: &'a AgentRuntime,
}

impl AgentRuntime {
    /// The reminders of this agent.
    pub fn reminders(&self) -> Reminders<'_> {
        Reminders { rt: self }
    }
}

impl Reminders<'_> {
    fn now_ms(&self) -> i64 {
        self.rt.clock().now().timestamp_millis()
    }

    /// The next fire time after a firing at `now` (or at creation),
    /// `None` for one-shots that already fired.
    fn next_fire(row: &ReminderRow, now_ms: i64, first: bool) -> Result<Option<i64>> {
        let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        Ok(match &row.cadence {
            Cadence::Delay(d) if first => Some(now_ms.saturating_add(ms(*d))),
            Cadence::At(t) if first => Some(t.timestamp_millis()),
            Cadence::Every(d) => {
                let d = ms(*d);
                match row.next_fire_at_ms {
                    // Keep the cadence; after a long outage, restart it from now.
                    Some(prev) if !first && prev.saturating_add(d) > now_ms => {
                        Some(prev.saturating_add(d))
                    }
                    _ => Some(now_ms.saturating_add(d)),
                }
            }
            Cadence::Cron(cron, _) => {
                let now = DateTime::<Utc>::from_timestamp_millis(now_ms).unwrap_or_default();
                cron.next_after(now).map(|t| t.timestamp_millis())
            }
            Cadence::Delay(_) | Cadence::At(_) => None,
        })
    }

    async fn new_row(&self, req: &NewReminder) -> Result<ReminderRow> {
        if req.purpose.trim().is_empty() {
            return Err(Error::BadRequest {
                message: "`purpose` must not be empty".into(),
            });
        }
        if req.channel_id.trim().is_empty() || req.continuation_token.trim().is_empty() {
            return Err(Error::BadRequest {
                message: "a reminder needs `channelId` and `continuationToken`".into(),
            });
        }
        let cadence = Cadence::from_when(&req.when)?;
        let (prompt, until, run_form, handler) = match &req.action {
            ReminderAction::Prompt { prompt, until } => {
                (Some(prompt.clone()), until.clone(), false, None)
            }
            ReminderAction::Run(_) => (None, None, true, None),
            ReminderAction::Named(name) => {
                self.named_handler(name)?;
                (None, None, true, Some(name.clone()))
            }
        };
        let now_ms = self.now_ms();
        let mut row = ReminderRow {
            id: new_id("rem"),
            purpose: req.purpose.clone(),
            channel_id: req.channel_id.clone(),
            continuation_token: req.continuation_token.clone(),
            session_id: self
                .rt
                .session_for(&req.channel_id, &req.continuation_token)
                .await,
            cadence,
            prompt,
            until,
            run_form,
            handler,
            status: ReminderStatus::Armed,
            reason: None,
            next_fire_at_ms: None,
            fire_count: 0,
            created_at_ms: now_ms,
            last_fired_at_ms: None,
        };
        row.next_fire_at_ms = Reminders::next_fire(&row, now_ms, true)?;
        if row.next_fire_at_ms.is_none() {
            return Err(Error::BadRequest {
                message: "the reminder would never fire".into(),
            });
        }
        Ok(row)
    }

    /// Creates a reminder, durable before this returns.
    pub async fn create(&self, req: NewReminder) -> Result<Reminder> {
        self.check_here(&req)?;
        let row = self.new_row(&req).await?;
        // An unnamed handler lives in this process, found by the id.
        if let ReminderAction::Run(handler) = req.action {
            lock(&self.rt.inner.reminders.handlers).insert(row.id.clone(), handler);
        }
        if let Err(e) = self.table().insert(&[to_record(&row)]).await {
            lock(&self.rt.inner.reminders.handlers).remove(&row.id);
            return Err(e.into());
        }
        self.rt.inner.reminders.changed.notify_one();
        Ok(Reminder::from(&row))
    }

    /// Creates many prompt-form reminders in one transaction (bulk
    /// enrolment, benchmarks).
    pub async fn create_many(&self, reqs: Vec<NewReminder>) -> Result<usize> {
        let mut rows = Vec::with_capacity(reqs.len());
        for req in &reqs {
            if !matches!(req.action, ReminderAction::Prompt { .. }) {
                return Err(Error::BadRequest {
                    message: "bulk creation takes prompt-form reminders only".into(),
                });
            }
            rows.push(to_record(&self.new_row(req).await?));
        }
        self.table().insert(&rows).await?;
        self.rt.inner.reminders.changed.notify_one();
        Ok(rows.len())
    }

    /// Cancels a reminder. Answers it as stored (already ended reminders
    /// are answered unchanged).
    pub async fn cancel(&self, id: &str) -> Result<Reminder> {
        let mut row = self.row(id).await?;
        if row.status == ReminderStatus::Armed {
            row.status = ReminderStatus::Cancelled;
            row.reason = Some("cancelled".to_owned());
            row.next_fire_at_ms = None;
            self.table().update(&to_record(&row), None).await?;
            lock(&self.rt.inner.reminders.handlers).remove(id);
            self.rt.inner.reminders.changed.notify_one();
        }
        Ok(Reminder::from(&row))
    }

    pub(crate) async fn row(&self, id: &str) -> Result<ReminderRow> {
        let stored = self.table().get(id).await?;
        from_record(stored.ok_or_else(|| Error::NotFound {
            what: "reminder",
            id: id.to_owned(),
        })?)
    }

    /// One reminder.
    pub async fn get(&self, id: &str) -> Result<Reminder> {
        Ok(Reminder::from(&self.row(id).await?))
    }

    /// Reminders, newest first: armed and ended (at most 1000).
    pub async fn list(&self) -> Result<Vec<Reminder>> {
        self.table()
            .list(1000)
            .await?
            .into_iter()
            .map(|r| from_record(r).map(|row| Reminder::from(&row)))
            .collect()
    }

    /// How many reminders are armed.
    pub async fn armed(&self) -> usize {
        self.table()
            .armed()
            .await
            .map_or(0, |n| usize::try_from(n).unwrap_or(0))
    }

    /// Fires reminder `id` now, whatever its time (the dev route,
    /// `ServeHandle::dispatch_reminder`), through the same path as the
    /// timers: claimed first, so no timer (or host) fires it meanwhile.
    pub async fn dispatch(&self, id: &str) -> Result<ReminderFired> {
        let Some(stored) = self
            .table()
            .claim_one(id, self.claimant(), CLAIM_SECS)
            .await?
        else {
            let stored = self.row(id).await?;
            if stored.status == ReminderStatus::Armed {
                // Being fired right now (a timer, or another host).
                return Err(Error::SessionBusy { id: id.to_owned() });
            }
            return Err(not_armed(id, &stored));
        };
        self.fire(from_record(stored)?).await
    }

    /// Fires due reminders until `cancel`: claims what is due (on a
    /// shared store every host claims, `FOR UPDATE SKIP LOCKED`, so no two
    /// fire one), then sleeps until the next is due, a creation, or (for
    /// another host's creations and expired claims) a second.
    pub async fn run(&self, cancel: CancellationToken) {
        let clock = self.rt.clock().clone();
        let table = self.table();
        loop {
            let changed = self.rt.inner.reminders.changed.notified();
            let claimed = table
                .claim_due(self.now_ms(), 64, self.claimant(), CLAIM_SECS)
                .await;
            let n = match claimed {
                Ok(rows) => {
                    let n = rows.len();
                    for stored in rows {
                        let runtime = self.rt.clone();
                        self.rt.inner.tasks.spawn(async move {
                            let id = stored.id.clone();
                            let fired = match from_record(stored) {
                                Ok(row) => runtime.reminders().fire(row).await.map(|_| ()),
                                Err(e) => Err(e),
                            };
                            if let Err(e) = fired {
                                tracing::warn!(reminder = %id, error = %e, "reminder firing failed (it is retried once its claim lapses)");
                                let reminders = runtime.reminders();
                                if let Err(e) = reminders.table().claim_failed(&id, reminders.claimant(), CLAIM_SECS).await {
                                    tracing::warn!(reminder = %id, error = %e, "cannot mark the failed firing's claim to lapse");
                                }
                            }
                        });
                    }
                    n
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot claim due reminders");
                    0
                }
            };
            if n > 0 {
                continue;
            }
            let next = table.next_due().await.ok().flatten();
            let poll = clock.now() + chrono::Duration::seconds(1);
            let deadline = next
                .and_then(DateTime::<Utc>::from_timestamp_millis)
                .map_or(poll, |at| at.min(poll));
            tokio::select! {
                () = cancel.cancelled() => return,
                () = changed => {}
                () = clock.sleep_until(deadline) => {}
                // Another host's creation, or the database's time moving
                // on: look again a second later whatever this clock says.
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    }

    /// Sends `message` into the conversation `row` is bound to: the
    /// session it was bound to, the one its continuation maps to now, or
    /// (on channels with their own keys) a new chat session under that key.
    pub(crate) async fn deliver(
        &self,
        row: &ReminderRow,
        message: String,
    ) -> Result<(Accepted, String)> {
        let bound = match &row.session_id {
            Some(s) if self.rt.session_meta(s).await.is_ok() => Some(s.clone()),
            _ => None,
        };
        let target = match bound {
            Some(id) => Some(id),
            None => {
                self.rt
                    .session_for(&row.channel_id, &row.continuation_token)
                    .await
            }
        };
        if let Some(id) = target {
            let accepted = self
                .rt
                .commands()
                .dispatch(
                    &id,
                    crate::session_command::SessionCommand::Wake { message },
                )
                .await?
                .into_accepted()?;
            return Ok((accepted, id));
        }
        if row.channel_id == HTTP_CHANNEL {
            return Err(Error::NotFound {
                what: "conversation for continuation",
                id: row.continuation_token.clone(),
            });
        }
        let accepted = self
            .rt
            .send(SendRequest {
                client_tools: Vec::new(),
                channel: row.channel_id.clone(),
                mode: SessionMode::Chat,
                owner: reminder_owner(&row.purpose),
                message,
                continuation: Some(row.continuation_token.clone()),
                title: None,
                purpose: Some(row.purpose.clone()),
                admission: Admission::Coalesce,
                workspace_files: Vec::new(),
                dry_run: false,
                as_of: None,
                output_schema: None,
            })
            .await?;
        let id = accepted.session_id.clone();
        Ok((accepted, id))
    }

    /// Fires a claimed reminder, then re-arms or ends it (the write-back
    /// lets the claim go).
    async fn fire(&self, mut row: ReminderRow) -> Result<ReminderFired> {
        let now_ms = self.now_ms();
        {
            use std::sync::atomic::Ordering;
            let state = &self.rt.inner.reminders;
            state.fired.fetch_add(1, Ordering::Relaxed);
            let due = row.next_fire_at_ms.unwrap_or(now_ms);
            let late = u64::try_from(now_ms.saturating_sub(due)).unwrap_or(0);
            state.late_ms.fetch_add(late, Ordering::Relaxed);
        }
        let (outcome, session_id) = if row.run_form {
            let handler = match &row.handler {
                // Stored by name (a shared database): this host's handler
                // of that name, whichever host created the reminder.
                Some(name) => match self.named_handler(name) {
                    Ok(handler) => Some(handler),
                    Err(e) => {
                        tracing::warn!(reminder = %row.id, handler = %name, "no reminder handler of that name on this host: the firing failed");
                        row.reason = Some(format!("firing failed: {e}"));
                        None
                    }
                },
                None => lock(&self.rt.inner.reminders.handlers)
                    .get(&row.id)
                    .cloned(),
            };
            match handler {
                Some(h) => {
                    let tick = ReminderTick {
                        reminder_id: row.id.clone(),
                        purpose: row.purpose.clone(),
                        fire_count: row.fire_count,
                        followup: Followup {
                            target: Arc::new(self.rt.clone()),
                            reminder_id: row.id.clone(),
                        },
                    };
                    (h.run(tick).await, None)
                }
                // A named handler missing on this host: a failed firing
                // (recorded in `reason`; a recurring reminder fires again).
                None if row.handler.is_some() => (ReminderOutcome::Skip, None),
                None => {
                    row.reason = Some(HANDLER_LOST_ON_RESTART.to_owned());
                    (ReminderOutcome::Stop, None)
                }
            }
        } else {
            match self.deliver(&row, wake_message(&row)).await {
                Ok((_, sid)) => (ReminderOutcome::Delivered, Some(sid)),
                Err(e) => {
                    tracing::warn!(reminder = %row.id, error = %e, "reminder could not wake its conversation");
                    row.reason = Some(format!("delivery failed: {e}"));
                    (ReminderOutcome::Skip, None)
                }
            }
        };
        // A follow-up sent by a handler may have bound the session.
        if row.run_form
            && let Ok(stored) = self.row(&row.id).await
        {
            row.session_id = stored.session_id.or(row.session_id);
        }
        if let Some(sid) = &session_id {
            row.session_id = Some(sid.clone());
        }
        row.last_fired_at_ms = Some(now_ms);
        if outcome == ReminderOutcome::Delivered {
            row.fire_count += 1;
        }
        let next = if outcome == ReminderOutcome::Stop {
            None
        } else {
            Reminders::next_fire(&row, now_ms, false)?
        };
        row.next_fire_at_ms = next;
        row.status = if next.is_some() {
            ReminderStatus::Armed
        } else {
            ReminderStatus::Done
        };
        if outcome == ReminderOutcome::Stop && row.reason.is_none() {
            row.reason = Some("stopped".to_owned());
        }
        let written = self
            .table()
            .update(&to_record(&row), Some(self.claimant()))
            .await?;
        if !written {
            // Cancelled while firing (or the claim lapsed): the stored
            // row stands.
            tracing::warn!(reminder = %row.id, "reminder fired, but it was cancelled or its claim expired meanwhile");
            if let Ok(stored) = self.row(&row.id).await {
                row.status = stored.status;
                row.reason = stored.reason;
                row.next_fire_at_ms = stored.next_fire_at_ms;
            }
        }
        if row.status != ReminderStatus::Armed {
            lock(&self.rt.inner.reminders.handlers).remove(&row.id);
        }
        self.rt.inner.reminders.changed.notify_one();
        tracing::info!(reminder = %row.id, outcome = ?outcome, status = row.status.as_str(), "reminder fired");
        Ok(ReminderFired {
            reminder_id: row.id.clone(),
            outcome,
            session_id,
            reminder: Reminder::from(&row),
        })
    }
}

/// The reminders API handed to the harness for the built-in `remind_me`
/// tool: binds each reminder to the calling session's conversation.
#[derive(Debug, Clone)]
pub(crate) struct SessionReminders {
    pub(crate) runtime: AgentRuntime,
}

impl agentkit_harness::ReminderHost for SessionReminders {
    fn remind(
        &self,
        session_id: &str,
        input: &Value,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Value, String>> + Send + '_>>
    {
        let session_id = session_id.to_owned();
        let input = input.clone();
        Box::pin(async move {
            let meta = self
                .runtime
                .session_meta(&session_id)
                .await
                .map_err(|e| e.to_string())?;
            let str_arg = |k: &str| input.get(k).and_then(Value::as_str).map(str::to_owned);
            let when = parse_when(
                str_arg("delay").as_deref(),
                str_arg("every").as_deref(),
                str_arg("cron").as_deref(),
                str_arg("at").as_deref(),
            )
            .map_err(|e| e.to_string())?;
            let prompt = str_arg("prompt").unwrap_or_default();
            if prompt.trim().is_empty() {
                return Err("`prompt` must not be empty".to_owned());
            }
            let reminder = self
                .runtime
                .reminders()
                .create(NewReminder {
                    purpose: str_arg("purpose").unwrap_or_else(|| "user_follow_up".to_owned()),
                    channel_id: meta.channel.clone(),
                    continuation_token: meta.continuation_token.clone(),
                    when,
                    action: ReminderAction::Prompt {
                        prompt,
                        until: str_arg("until"),
                    },
                })
                .await
                .map_err(|e| e.to_string())?;
            // Bound to this session even if its token rotates.
            let _ = self
                .runtime
                .reminders()
                .bind(&reminder.id, &session_id)
                .await;
            Ok(serde_json::json!({
                "reminderId": reminder.id,
                "nextFireAt": reminder.next_fire_at,
            }))
        })
    }
}

impl Reminders<'_> {
    /// Binds an armed reminder to a session id.
    async fn bind(&self, id: &str, session_id: &str) -> Result<()> {
        // Only the binding: a run handler binds while its host holds the
        // claim, which the firing's write-back checks.
        Ok(self.table().bind(id, session_id).await?)
    }
}

impl Reminders<'_> {
    /// On a shared database, an unnamed handler (a closure) lives in one
    /// process: it could not fire on another host. A named one can.
    fn check_here(&self, req: &NewReminder) -> Result<()> {
        if self.rt.inner.shared.is_some() && matches!(req.action, ReminderAction::Run(_)) {
            return Err(Error::NotAvailable {
                message: "--database-url: a run-form reminder must name its handler (ReminderAction::Named), registered on every host (ServeOptions::reminder_handler); an unnamed handler lives in one process".into(),
            });
        }
        Ok(())
    }

    /// Registers `handler` under `name`, for [`ReminderAction::Named`]
    /// (a later registration of the same name replaces it).
    pub fn register_handler(&self, name: impl Into<String>, handler: Arc<dyn ReminderHandler>) {
        lock(&self.rt.inner.reminders.named).insert(name.into(), handler);
    }

    /// Registers every handler of `handlers` (see
    /// [`register_handler`](Reminders::register_handler)).
    pub fn set_handlers(&self, handlers: &ReminderHandlers) {
        let mut named = lock(&self.rt.inner.reminders.named);
        for (name, handler) in &handlers.0 {
            named.insert(name.clone(), handler.clone());
        }
    }

    /// The handler registered under `name` on this host.
    fn named_handler(&self, name: &str) -> Result<Arc<dyn ReminderHandler>> {
        let named = lock(&self.rt.inner.reminders.named);
        if let Some(handler) = named.get(name) {
            return Ok(handler.clone());
        }
        let mut known: Vec<&str> = named.keys().map(String::as_str).collect();
        known.sort_unstable();
        Err(Error::BadRequest {
            message: format!(
                "no reminder handler `{name}` is registered on this host (registered: {})",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ),
        })
    }

    /// The reminders' store: this host's or the shared one.
    fn table(&self) -> &dyn agentkit_store::SharedReminders {
        self.rt.inner.reminder_store.as_ref()
    }

    /// Who claims a firing: this host, by its lease owner's name on a
    /// shared store.
    fn claimant(&self) -> &str {
        self.rt
            .inner
            .shared
            .as_ref()
            .map_or("local", |s| s.leases.owner())
    }
}

/// Why reminder `id` (`stored`) does not fire by hand.
fn not_armed(id: &str, stored: &ReminderRow) -> Error {
    Error::BadRequest {
        message: format!(
            "reminder `{id}` is {}{}; only armed reminders fire",
            stored.status.as_str(),
            stored
                .reason
                .as_ref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        ),
    }
}

/// How long a host's claim on a firing reminder stands before another
/// host may fire it again (its host died mid-firing).
const CLAIM_SECS: f64 = 60.0;
