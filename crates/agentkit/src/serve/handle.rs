//! [`ServeHandle`]: what `serve()` answers: the bound address, each
//! agent's URL, runtime and MCP connections, deterministic calls,
//! schedules and reminders by hand, and an orderly close.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agentkit_manifest::Host;
use agentkit_runtime::{AgentRuntime, NewReminder, Reminder, ReminderFired};
use tokio_util::sync::CancellationToken;

use super::agent::Mounted;
use super::options::Mode;
use crate::error::{Error, Result};

/// A running server. Dropping it does not stop the server; call
/// [`ServeHandle::close`].
#[derive(Debug)]
pub struct ServeHandle {
    pub(crate) addr: SocketAddr,
    pub(crate) agents: Vec<Mounted>,
    pub(crate) mode: Mode,
    pub(crate) shutdown: CancellationToken,
    pub(crate) server: tokio::task::JoinHandle<std::io::Result<()>>,
    pub(crate) bridge: tokio::task::JoinHandle<()>,
    pub(crate) grace: Duration,
    pub(crate) host: Arc<Host>,
    /// The playground is served (the banner prints its URLs).
    pub(crate) playground: bool,
    pub(crate) telemetry: super::telemetry::Telemetry,
}

impl ServeHandle {
    fn agent(&self, slug: &str) -> Result<&Mounted> {
        self.agents
            .iter()
            .find(|a| a.slug == slug)
            .ok_or_else(|| Error::Config {
                message: format!("no agent `{slug}` on this host"),
            })
    }

    /// The OpenAPI 3.1 document of agent `slug`'s HTTP API (what its
    /// `GET /v1/openapi.json` answers).
    pub fn openapi(&self, slug: &str) -> Result<serde_json::Value> {
        Ok(super::openapi::document(self.agent(slug)?))
    }

    /// The host URL, such as `http://127.0.0.1:3000`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL of one agent (`…/<slug>`, or the host URL in single
    /// mode).
    pub fn agent_url(&self, slug: &str) -> String {
        match self.mode {
            Mode::Multi => format!("{}/{slug}", self.url()),
            Mode::Single => self.url(),
        }
    }

    pub fn slugs(&self) -> Vec<String> {
        self.agents.iter().map(|a| a.slug.clone()).collect()
    }

    /// Calls server tool `tool` of agent `slug` deterministically (no
    /// model turn), in an ephemeral workspace or, with `session`, inside
    /// that session (recorded on its stream) as its owner.
    pub async fn call_tool(
        &self,
        slug: &str,
        tool: &str,
        input: serde_json::Value,
        session: Option<(&str, &agentkit_runtime::Owner)>,
    ) -> Result<agentkit_runtime::ToolCallOutcome> {
        Ok(self
            .agent(slug)?
            .runtime
            .tool_calls()
            .call(tool, input, session)
            .await?)
    }

    /// The MCP connections of agent `slug` (`host.mcp`): `names`,
    /// `list_tools` and `call_tool`, each opening its client lazily.
    pub fn mcp(&self, slug: &str) -> Result<&agentkit_mcp::Connections> {
        Ok(&self.agent(slug)?.connections)
    }

    /// The discovered projects being served.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// Stops accepting connections, ends open streams, interrupts running
    /// turns (recorded as `turn.failed`, reason `shutdown`), syncs every
    /// log, and waits for the server to finish.
    pub async fn close(self) {
        self.shutdown.cancel();
        for a in &self.agents {
            a.channels.stop(self.grace).await;
            a.runtime.shutdown(self.grace).await;
        }
        for a in &self.agents {
            a.connections.close().await;
        }
        // The last events (interrupted turns) become spans, then go out.
        self.telemetry.close().await;
        let _ = self.bridge.await;
        match self.server.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "server ended with an error"),
            Err(e) => tracing::warn!(error = %e, "server task failed"),
        }
    }

    /// Resolves when the server stops for a reason of its own.
    pub async fn stopped(&self) {
        self.shutdown.cancelled().await;
    }

    /// The runtime of agent `slug` (its sessions, schedules and reminders:
    /// what Rust tools and channel handlers see as `host.reminders`).
    pub fn runtime(&self, slug: &str) -> Result<&AgentRuntime> {
        Ok(&self.agent(slug)?.runtime)
    }

    /// Runs schedule `id` of agent `slug` once now, through the path the
    /// cron timer uses (as the schedule's own app principal); answers the
    /// ids of the sessions it started.
    pub async fn dispatch_schedule(&self, slug: &str, id: &str) -> Result<Vec<String>> {
        Ok(self.runtime(slug)?.schedules().dispatch(id, None).await?)
    }

    /// Creates a reminder on agent `slug`, durable before this returns.
    pub async fn create_reminder(&self, slug: &str, reminder: NewReminder) -> Result<Reminder> {
        Ok(self.runtime(slug)?.reminders().create(reminder).await?)
    }

    /// Cancels a reminder of agent `slug`.
    pub async fn cancel_reminder(&self, slug: &str, id: &str) -> Result<Reminder> {
        Ok(self.runtime(slug)?.reminders().cancel(id).await?)
    }

    /// Fires a reminder of agent `slug` now, whatever its time.
    pub async fn dispatch_reminder(&self, slug: &str, id: &str) -> Result<ReminderFired> {
        Ok(self.runtime(slug)?.reminders().dispatch(id).await?)
    }
}
