//! Time on the facade: starting each agent's schedule and reminder timers
//! per [`ServeOptions`], the dev routes (`POST /v1/dev/schedules/:id`,
//! `GET /v1/dev/reminders`, `POST /v1/dev/reminders/:id`), and the
//! [`ServeHandle`] methods embedders call.

use agentkit_manifest::HookAction;
use agentkit_runtime::{AgentRuntime, HookSpec, HookTarget, NewReminder, Reminder, ReminderFired};
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde_json::json;

use super::api::{AgentState, ApiError, ApiResult, Authed};
use super::{ServeHandle, ServeOptions};
use crate::error::{Error, Result};

/// Spawns the timers `options` asks for: schedules fire on cadence
/// unless `dev` or `!options.schedules`; reminder timers run per
/// `options.reminders` (default: not under `dev`). Both stop when the
/// runtime shuts down.
pub(super) fn start_timers(runtime: &AgentRuntime, options: &ServeOptions) {
    let fire_schedules = options.schedules && !options.dev;
    if fire_schedules && !runtime.agent().schedules.is_empty() {
        tokio::spawn(runtime.run_schedules(runtime.shutdown_token()));
    } else if !runtime.agent().schedules.is_empty() {
        tracing::info!(
            dev = options.dev,
            "schedules do not fire by themselves on this server; dispatch with POST /v1/dev/schedules/:id"
        );
    }
    if options.reminders.unwrap_or(!options.dev) {
        let r = runtime.clone();
        tokio::spawn(async move { r.run_reminders(r.shutdown_token()).await });
    }
}

/// Refuses to serve a schedule bound to a Rust handler nobody registered.
pub(super) fn check_handlers(host: &agentkit_manifest::Host, options: &ServeOptions) -> Result<()> {
    let registered = options.schedule_handlers.names();
    let mut missing = Vec::new();
    for project in &host.agents {
        for s in &project.agent.schedules {
            if let agentkit_manifest::ScheduleAction::Handler { name } = &s.action
                && !options.schedule_handlers.contains(name)
            {
                missing.push(format!(
                    "schedule `{}` of agent `{}` ({}) runs Rust handler `{name}`, which is not registered",
                    s.id, project.slug, s.path
                ));
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::Config {
        message: format!(
            "{}; registered handlers: {} (ServeOptions::schedule_handler)",
            missing.join("; "),
            if registered.is_empty() {
                "none".to_owned()
            } else {
                registered.join(", ")
            }
        ),
    })
}

/// Starts the agent's `hooks/*.toml` (with `${VAR}` resolved through
/// `options.env`) and the embedder's Rust hooks.
pub(super) fn start_hooks(
    runtime: &AgentRuntime,
    project: &agentkit_manifest::Project,
    options: &ServeOptions,
) -> agentkit_runtime::Hooks {
    let resolve = |s: &str| options.env.resolve(s);
    let mut specs: Vec<HookSpec> = project
        .agent
        .hooks
        .iter()
        .map(|h| HookSpec {
            name: h.name.clone(),
            events: h.events.clone(),
            target: match &h.action {
                HookAction::Command { command, cwd } => HookTarget::Command {
                    command: command.clone(),
                    cwd: project.agent.dir.join(cwd),
                },
                HookAction::Url {
                    url,
                    headers,
                    secret,
                } => HookTarget::Url {
                    url: resolve(url),
                    headers: headers
                        .iter()
                        .map(|(k, v)| (k.clone(), resolve(v)))
                        .collect(),
                    secret: secret.as_deref().map(resolve),
                },
            },
            timeout: h.timeout,
        })
        .collect();
    specs.extend(options.hooks.iter().cloned());
    runtime.start_hooks(specs)
}

pub(super) fn routes() -> Router<AgentState> {
    Router::new()
        .route("/v1/dev/schedules/{id}", post(dispatch_schedule))
        .route("/v1/dev/reminders", get(list_reminders))
        .route("/v1/dev/reminders/{id}", post(dispatch_reminder))
}

fn dev_only(state: &AgentState) -> ApiResult<()> {
    if state.agent.dev {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "dev routes are served only with --dev",
        ))
    }
}

/// Dispatches one schedule exactly once, as the caller (so the caller can
/// follow the sessions it starts).
async fn dispatch_schedule(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    dev_only(&state)?;
    let sessions = state
        .agent
        .runtime
        .dispatch_schedule(&id, Some(owner))
        .await?;
    Ok(axum::Json(json!({"ok": true, "scheduleId": id, "sessionIds": sessions})).into_response())
}

async fn list_reminders(State(state): State<AgentState>, _auth: Authed) -> ApiResult {
    dev_only(&state)?;
    let reminders = state.agent.runtime.reminders()?;
    Ok(axum::Json(json!({"ok": true, "reminders": reminders})).into_response())
}

async fn dispatch_reminder(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    _auth: Authed,
) -> ApiResult {
    dev_only(&state)?;
    let fired = state.agent.runtime.dispatch_reminder(&id).await?;
    let mut doc = serde_json::to_value(&fired).unwrap_or_default();
    if let Some(obj) = doc.as_object_mut() {
        obj.insert("ok".to_owned(), true.into());
    }
    Ok(axum::Json(doc).into_response())
}

impl ServeHandle {
    /// The runtime of agent `slug` (its sessions, schedules and reminders:
    /// what Rust tools and channel handlers see as `host.reminders`).
    pub fn runtime(&self, slug: &str) -> Result<&AgentRuntime> {
        self.agents
            .iter()
            .find(|a| a.slug == slug)
            .map(|a| &a.runtime)
            .ok_or_else(|| Error::Config {
                message: format!("no agent `{slug}` on this host"),
            })
    }

    /// Runs schedule `id` of agent `slug` once now, through the path the
    /// cron timer uses (as the schedule's own app principal); answers the
    /// ids of the sessions it started.
    pub async fn dispatch_schedule(&self, slug: &str, id: &str) -> Result<Vec<String>> {
        Ok(self.runtime(slug)?.dispatch_schedule(id, None).await?)
    }

    /// Creates a reminder on agent `slug`, durable before this returns.
    pub async fn create_reminder(&self, slug: &str, reminder: NewReminder) -> Result<Reminder> {
        Ok(self.runtime(slug)?.create_reminder(reminder).await?)
    }

    /// Cancels a reminder of agent `slug`.
    pub async fn cancel_reminder(&self, slug: &str, id: &str) -> Result<Reminder> {
        Ok(self.runtime(slug)?.cancel_reminder(id).await?)
    }

    /// Fires a reminder of agent `slug` now, whatever its time.
    pub async fn dispatch_reminder(&self, slug: &str, id: &str) -> Result<ReminderFired> {
        Ok(self.runtime(slug)?.dispatch_reminder(id).await?)
    }
}
