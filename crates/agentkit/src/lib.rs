//! agentkit: build and serve AI agents from a folder of files.
//!
//! This facade is what binaries and embedders use: it discovers and
//! validates projects ([`discover`], [`validate`]), describes them
//! ([`info`]), scaffolds new ones ([`init`]), and serves them
//! ([`serve`] → [`ServeHandle`]): one agent or a folder of them on one
//! port, each with durable sessions and an NDJSON event stream, and
//! deterministic tool calls ([`ServeHandle::call_tool`]), schedules fired on
//! their cron cadence ([`ServeHandle::dispatch_schedule`]) and durable
//! reminders ([`ServeHandle::create_reminder`]). The public API's client
//! is [`client`] (with [`trajectory`]); the eval runner is [`evals`].
//!
//! Serving, for embedders (see `docs/guides/serving.md`):
//!
//! ```no_run
//! # async fn demo() -> Result<(), agentkit::Error> {
//! let options = agentkit::ServeOptions { port: 0, dev: true, ..Default::default() };
//! let handle = agentkit::serve(std::path::Path::new("fixtures/agents"), options).await?;
//! let base = handle.agent_url("weather-agent"); // POST {base}/v1/session …
//! # let _ = base;
//! handle.close().await; // interrupts running turns, syncs every log
//! # Ok(())
//! # }
//! ```
//!
//! Discovery alone:
//!
//! ```no_run
//! let found = agentkit::discover(std::path::Path::new("fixtures/agents"))?;
//! assert!(found.is_ok(), "{:?}", found.diagnostics);
//! let doc = agentkit::info::info_json(&found, chrono::Utc::now());
//! println!("{doc:#}");
//! # Ok::<(), agentkit::manifest::Error>(())
//! ```

pub mod credentials;
pub mod db;
mod error;
pub mod github;
pub mod info;
pub mod init;
pub mod logs;
pub mod mcp_oauth;
pub mod replay;
pub mod secrets;
mod serve;
pub mod slack;
pub mod webhooks;

/// The HTTP client of the public API (`agentkit-client`): sessions,
/// streams, approvals, tool calls, and the turn-settled fold.
pub mod client {
    pub use agentkit_client::{
        Client, Error, NdjsonError, NdjsonErrorReason, Result, SessionCursor, Settle,
    };
    /// The bodies the client sends and reads (`agentkit_protocol::api`).
    pub use agentkit_protocol::api::{
        Accepted, ApprovalList, ApprovalResolved, Info, SendMessage, SessionList, Stopped,
        ToolCalled,
    };
}
/// The eval runner (`agentkit-evals`): selection, runs, reports,
/// baselines.
pub use agentkit_evals as evals;
/// `agentkit migrate` (`agentkit-migrate`): a TypeScript framework project
/// converted into agentkit's files, with a report of what was not.
pub use agentkit_migrate as migrate;
/// Trajectories: a session's events folded into a summary
/// (`agentkit-client`).
pub mod trajectory {
    pub use agentkit_client::trajectory::*;
    pub use agentkit_client::{NdjsonError, NdjsonErrorReason, parse_ndjson, parse_ndjson_line};
}

pub use agentkit_harness::{
    Cassette, Decision, DynTool, Endpoint, ProviderConfig, RustTool, SandboxStatus, ToolContext,
    ToolOutput, ToolSource, ToolSpec, sandbox_status,
};
pub use agentkit_runtime::{
    AgentRuntime, Clock, Followup, InputError, ManualClock, NewReminder, Owner, PendingApproval,
    Receive, Reminder, ReminderAction, ReminderFired, ReminderHandler, ReminderHandlers,
    ReminderOutcome, ReminderRequest, ReminderTick, ReminderWhen, ResolvedApproval, ScheduleError,
    ScheduleHandler, ScheduleHandlers, ScheduleLastRun, ScheduleRun, ScheduleStatus, SystemClock,
    ToolCallOutcome,
};
pub use error::{Error, Result};
pub use serve::{
    EdgeOptions, EnvFn, EnvLookup, FdLimit, HostArtifacts, HostFiles, HostGithub, HostMcp,
    HostReminders, HostSend, HostSent, HostServices, HostSessions, HostSlack, MemoryRelease, Mode,
    OidcOptions, OtlpProtocol, Rate, ServeHandle, ServeOptions, TelemetryOptions,
    apply_host_config, raise_fd_limit, read_host_config, role_table_markdown, serve,
    shutdown_signal,
};

/// The project format: discovery, the manifest types and diagnostics.
pub use agentkit_auth as auth;
pub use agentkit_channels as channels;
pub use agentkit_manifest as manifest;
pub use agentkit_manifest::{Diagnostic, Diagnostics, Discovery, Severity, discover};
/// The event vocabulary and other shared wire data.
pub use agentkit_protocol as protocol;

/// MCP client connections for host code (`ServeHandle::mcp`): names,
/// tools, calls, live status.
pub mod mcp {
    pub use agentkit_mcp::{
        ClientError, ClientOptions, ConnectionStatus, Connections, McpCallResult, McpTool,
    };
}

/// Runs discovery and adds the diagnostics that depend on the host's
/// environment (`${VAR}` references that are unset) and the pack channels'
/// settings (checked by the packs themselves), as `agentkit validate`
/// reports them.
pub fn validate(
    dir: &std::path::Path,
    is_set: impl Fn(&str) -> bool,
) -> manifest::Result<Discovery> {
    let mut found = discover(dir)?;
    let mut extra = manifest::unset_env_refs(&found.host, is_set);
    // Pack settings are the pack's to read: checked here by the same code
    // that serves them.
    for project in &found.host.agents {
        for c in &project.agent.channels {
            if let Ok(source) = std::fs::read_to_string(found.host.root.join(&c.path)) {
                extra.extend(agentkit_channels::pack_diagnostics(c, &source));
            }
        }
    }
    for project in &found.host.agents {
        for tool in &project.agent.tools {
            extra.extend(sandbox_unreadable(&found.host.root, tool));
        }
    }
    if !extra.is_empty() {
        let mut all = found.diagnostics.into_vec();
        all.extend(extra);
        all.sort_by(|a, b| (&a.path, a.line, a.column).cmp(&(&b.path, b.line, b.column)));
        let mut diagnostics = Diagnostics::default();
        diagnostics.extend(all);
        found.diagnostics = diagnostics;
    }
    Ok(found)
}

/// `sandbox-unreadable`: the files `tool`'s command needs that its
/// sandbox cannot read on this host (the harness resolves the program as
/// a call would, with the interpreter installs it grants by itself), at
/// the line of `command`.
fn sandbox_unreadable(root: &std::path::Path, tool: &manifest::Tool) -> Vec<Diagnostic> {
    let gaps = agentkit_harness::sandbox_gaps(tool);
    if gaps.is_empty() {
        return Vec::new();
    }
    let line = std::fs::read_to_string(root.join(&tool.path))
        .ok()
        .and_then(|text| {
            text.lines()
                .position(|l| l.trim_start().starts_with("command"))
                .and_then(|i| u32::try_from(i + 1).ok())
        });
    gaps.into_iter()
        .map(|gap| {
            let hint = match &gap.grant {
                Some(grant) => format!(
                    "add `read = [{}]` to the tool's `sandbox` table (or under `[harness.sandbox]` in agent/agent.toml); see docs/reference/sandbox.md",
                    serde_json::Value::String(grant.display().to_string())
                ),
                None => "it lies in a place the sandbox keeps out on purpose (the home folder, a secret, a project or the state root): install the program elsewhere, for example in a virtual environment".to_owned(),
            };
            let mut d = Diagnostic::warning(
                manifest::Code::SandboxUnreadable,
                tool.path.clone(),
                format!(
                    "tool `{}` needs `{}`, which its sandbox cannot read",
                    tool.name,
                    gap.path.display()
                ),
            )
            .with_hint(hint);
            d.line = line;
            d.column = line.map(|_| 1);
            d
        })
        .collect()
}
