//! Rust schedule handlers: the spec's `defineSchedule({ cron, run })` for
//! embedders. A `schedules/<id>.toml` with `handler = "<name>"` binds its
//! cron to a [`ScheduleHandler`] registered under that name; each firing
//! (cron tick or dispatch by hand) calls it with a [`ScheduleRun`] carrying
//! the spec's arguments: `receive` (hand a message into a channel),
//! `call_tool` (a deterministic tool call), `wait_until` (background work
//! that outlives the handler), `app_auth` (the schedule's principal) and
//! the host's services.
//!
//! A run counts as "still going" (so the next tick is skipped, not piled
//! up) while the handler runs, while any `wait_until` work runs, and while
//! any session it handed a message to is active.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agentkit_manifest::Admission;
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::clock::BoxFuture;
use crate::error::{Error, Result};
use crate::meta::{Owner, SessionMode};
use crate::requests::ToolCallOutcome;
use crate::runtime::{Accepted, AgentRuntime, HTTP_CHANNEL, SendRequest};
use crate::util::lock;

/// What a schedule handler's failure carries (any error type converts
/// with `?`).
pub type ScheduleError = Box<dyn std::error::Error + Send + Sync>;

/// A Rust schedule handler. Any `Fn(ScheduleRun) -> impl Future<Output =
/// Result<(), E>>` with `E: Into<ScheduleError>` is one.
pub trait ScheduleHandler: Send + Sync {
    fn run(&self, run: ScheduleRun) -> BoxFuture<'static, Result<(), ScheduleError>>;
}

impl<F, Fut, E> ScheduleHandler for F
where
    F: Fn(ScheduleRun) -> Fut + Send + Sync,
    Fut: std::future::Future<Output = std::result::Result<(), E>> + Send + 'static,
    E: Into<ScheduleError>,
{
    fn run(&self, run: ScheduleRun) -> BoxFuture<'static, Result<(), ScheduleError>> {
        let fut = self(run);
        Box::pin(async move { fut.await.map_err(Into::into) })
    }
}

/// Handlers by the name `handler = "<name>"` refers to.
#[derive(Clone, Default)]
pub struct ScheduleHandlers(BTreeMap<String, Arc<dyn ScheduleHandler>>);

impl ScheduleHandlers {
    /// Registers `handler` under `name` (a later registration of the same
    /// name replaces it).
    pub fn insert(&mut self, name: impl Into<String>, handler: impl ScheduleHandler + 'static) {
        self.0.insert(name.into(), Arc::new(handler));
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn ScheduleHandler>> {
        self.0.get(name)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

impl std::fmt::Debug for ScheduleHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// A message a schedule hands into a channel (the spec's `receive`).
#[derive(Debug, Clone)]
pub struct Receive {
    /// The channel id; `None` is the built-in HTTP channel.
    pub channel: Option<String>,
    pub message: String,
    /// The channel's continuation key: the session it maps to gets the
    /// message as a follow-up; `None` always starts a new session.
    pub continuation: Option<String>,
    /// The principal a new session belongs to; `None` is the run's
    /// [`ScheduleRun::app_auth`]. A session continued by its key stays
    /// with the principal that started it.
    pub auth: Option<Owner>,
    /// How the message is admitted when the session is busy.
    pub admission: Admission,
}

impl Receive {
    /// `message` into the built-in HTTP channel, a new session, as the
    /// schedule's principal, admitted with `coalesce`.
    pub fn new(message: impl Into<String>) -> Receive {
        Receive {
            channel: None,
            message: message.into(),
            continuation: None,
            auth: None,
            admission: Admission::Coalesce,
        }
    }

    /// Into channel `id` (so that channel's event deliveries fire).
    pub fn channel(mut self, id: impl Into<String>) -> Receive {
        self.channel = Some(id.into());
        self
    }

    /// Into the session this channel key maps to (created on first use).
    pub fn continuation(mut self, key: impl Into<String>) -> Receive {
        self.continuation = Some(key.into());
        self
    }

    /// As this principal.
    pub fn auth(mut self, owner: Owner) -> Receive {
        self.auth = Some(owner);
        self
    }
}

/// One firing of a Rust schedule, as its handler sees it. Cheap to clone
/// (clones share the run: sessions started and work kept alive).
#[derive(Clone)]
pub struct ScheduleRun {
    pub schedule_id: String,
    /// The cron tick this run fires for; `None` for a dispatch by hand
    /// (the dev route, `ServeHandle::dispatch_schedule`).
    pub tick: Option<DateTime<Utc>>,
    /// The principal the run acts as: the schedule's app principal
    /// `schedule:<id>` (the spec's `appAuth`), or the caller of a dev
    /// dispatch.
    pub app_auth: Owner,
    runtime: AgentRuntime,
    started: Arc<Mutex<Vec<String>>>,
    work: Arc<AtomicUsize>,
}

impl std::fmt::Debug for ScheduleRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScheduleRun")
            .field("schedule_id", &self.schedule_id)
            .field("tick", &self.tick)
            .field("app_auth", &self.app_auth)
            .finish_non_exhaustive()
    }
}

/// Counts one piece of a run's work as going until dropped.
pub(crate) struct WorkGuard(Arc<AtomicUsize>);

impl WorkGuard {
    pub(crate) fn new(work: &Arc<AtomicUsize>) -> WorkGuard {
        work.fetch_add(1, Ordering::SeqCst);
        WorkGuard(work.clone())
    }
}

impl Drop for WorkGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl ScheduleRun {
    pub(crate) fn new(
        runtime: AgentRuntime,
        schedule_id: &str,
        tick: Option<DateTime<Utc>>,
        app_auth: Owner,
        work: Arc<AtomicUsize>,
    ) -> ScheduleRun {
        ScheduleRun {
            schedule_id: schedule_id.to_owned(),
            tick,
            app_auth,
            runtime,
            started: Arc::default(),
            work,
        }
    }

    /// The sessions this run handed messages to so far.
    pub fn sessions(&self) -> Vec<String> {
        lock(&self.started).clone()
    }

    /// Hands a message into a channel: a new chat session on it, or a
    /// follow-up to the session its continuation key maps to. The
    /// channel's event deliveries fire as for any of its sessions.
    pub async fn receive(&self, r: Receive) -> Result<Accepted> {
        let channel = r.channel.unwrap_or_else(|| HTTP_CHANNEL.to_owned());
        if channel == HTTP_CHANNEL && r.continuation.is_some() {
            return Err(Error::BadRequest {
                message: "the built-in HTTP channel mints its own continuation tokens; \
                          use a channel with keys, or no continuation"
                    .into(),
            });
        }
        // The one create-or-continue: a key continues its session whoever
        // sends (the schedule is the host's own code), as its owner.
        let accepted = self
            .runtime
            .send(SendRequest {
                client_tools: Vec::new(),
                channel,
                mode: SessionMode::Chat,
                owner: r.auth.unwrap_or_else(|| self.app_auth.clone()),
                message: r.message,
                continuation: r.continuation,
                title: Some(format!("schedule {}", self.schedule_id)),
                purpose: Some(format!("schedule:{}", self.schedule_id)),
                admission: r.admission,
                workspace_files: Vec::new(),
                dry_run: false,
                as_of: None,
                output_schema: None,
            })
            .await?;
        let id = accepted.session_id.clone();
        {
            let mut started = lock(&self.started);
            if !started.contains(&id) {
                started.push(id.clone());
            }
        }
        self.runtime
            .schedules()
            .note_session(&self.schedule_id, &id);
        Ok(accepted)
    }

    /// Calls a server tool of the agent deterministically (no model turn),
    /// in an ephemeral workspace.
    pub async fn call_tool(&self, name: &str, input: Value) -> Result<ToolCallOutcome> {
        self.runtime.tool_calls().call(name, input, None).await
    }

    /// Keeps `work` going after the handler returns: the run counts as
    /// still going until it ends, and shutdown waits for it within its
    /// grace period. Its output is dropped; log failures inside.
    pub fn wait_until<F>(&self, work: F)
    where
        F: std::future::Future + Send + 'static,
    {
        let guard = WorkGuard::new(&self.work);
        self.runtime.inner.tasks.spawn(async move {
            let _guard = guard;
            work.await;
        });
    }

    /// The agent's runtime: sessions, reminders (`create_reminder`), kv.
    pub fn runtime(&self) -> &AgentRuntime {
        &self.runtime
    }

    /// The host's services as `T` (the facade's `HostServices`: `host.mcp`,
    /// `host.reminders`, …), when the host provided them.
    pub fn services<T: std::any::Any>(&self) -> Option<&T> {
        self.runtime
            .inner
            .options_services()
            .and_then(|h| h.downcast_ref::<T>())
    }
}
