//! Time and observers on the facade: each agent's schedule and reminder
//! timers and its retention sweep, the check that every schedule's Rust handler is registered,
//! and the agent's hooks.

use agentkit_runtime::{AgentRuntime, HookSpec, ScheduleHandlers};

use super::options::Timers;
use crate::error::{Error, Result};

/// Spawns the timers `timers` asks for; both stop when the runtime shuts
/// down.
pub(crate) fn start(runtime: &AgentRuntime, timers: &Timers, dev: bool) {
    if timers.schedules && !runtime.agent().schedules.is_empty() {
        tokio::spawn(runtime.schedules().run(runtime.shutdown_token()));
    } else if !runtime.agent().schedules.is_empty() {
        tracing::info!(
            dev,
            "schedules do not fire by themselves on this server; dispatch with POST /v1/dev/schedules/:id"
        );
    }
    if timers.reminders {
        let r = runtime.clone();
        tokio::spawn(async move { r.reminders().run(r.shutdown_token()).await });
    }
    // `[sessions]` retention: a data policy, so it runs on the wall clock
    // whatever the timers' clock.
    if let Some(period) = runtime.retention().sweep_period() {
        tracing::info!(
            period_ms = u64::try_from(period.as_millis()).unwrap_or(u64::MAX),
            "sessions past [sessions] retention are swept"
        );
        let r = runtime.clone();
        tokio::spawn(async move { r.retention().run(r.shutdown_token()).await });
    }
}

/// Refuses to serve a schedule bound to a Rust handler nobody registered.
pub(crate) fn check_handlers(
    host: &agentkit_manifest::Host,
    handlers: &ScheduleHandlers,
) -> Result<()> {
    let registered = handlers.names();
    let mut missing = Vec::new();
    for project in &host.agents {
        for s in &project.agent.schedules {
            if let agentkit_manifest::ScheduleAction::Handler { name } = &s.action
                && !handlers.contains(name)
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

/// Starts the agent's resolved `hooks/*.toml`, then the embedder's Rust
/// hooks.
pub(crate) fn start_hooks(
    runtime: &AgentRuntime,
    files: Vec<HookSpec>,
    rust: &[HookSpec],
) -> agentkit_runtime::Hooks {
    let mut specs = files;
    specs.extend(rust.iter().cloned());
    runtime.start_hooks(specs)
}
