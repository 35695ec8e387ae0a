//! What host code reaches from inside a Rust tool:
//! `ctx.services::<agentkit::HostServices>()`, the in-process twin of the
//! host bridge that subprocess tools call over loopback (`host.mcp`,
//! `host.kv`, `host.reminders`).

use std::sync::{Arc, OnceLock};

use agentkit_channels::{GithubClient, SlackClient};
use agentkit_runtime::{AgentRuntime, KvStore, NewReminder, Reminder, WeakRuntime};
use serde_json::Value;

use super::depths::Depths;
use crate::{Error, Result};

/// The services of the agent a Rust tool runs for. Cheap to clone.
///
/// ```no_run
/// # async fn tool(ctx: agentkit::ToolContext) -> Result<(), Box<dyn std::error::Error>> {
/// let host = ctx.services::<agentkit::HostServices>().expect("served by agentkit");
/// host.kv.set("last-run", &serde_json::json!(1), None).await?;
/// let names = host.mcp.names();
/// let time = host.mcp.in_session(&ctx.session_id)
///     .call_tool("time", "get_current_time", serde_json::json!({"timezone": "UTC"}))
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HostServices {
    /// The agent the call runs for.
    pub slug: String,
    /// The agent's key-value store (SQLite, shared with the host bridge's
    /// `/kv` routes).
    pub kv: KvStore,
    /// The agent's MCP client connections (`mcp-connections/`).
    pub mcp: HostMcp,
    /// The agent's durable reminders.
    pub reminders: HostReminders,
    /// GitHub API access with the credentials of the agent's
    /// `kind = "github"` channels.
    pub github: HostGithub,
    /// Slack Web API access with the bot tokens of the agent's
    /// `kind = "slack"` channels.
    pub slack: HostSlack,
}

impl HostServices {
    pub(crate) fn new(
        slug: &str,
        kv: KvStore,
        connections: agentkit_mcp::Connections,
        depths: Depths,
        github: HostGithub,
    ) -> HostServices {
        HostServices {
            slug: slug.to_owned(),
            kv,
            mcp: HostMcp {
                connections,
                depths,
                session: None,
            },
            reminders: HostReminders {
                runtime: Arc::new(OnceLock::new()),
            },
            github,
            slack: HostSlack::default(),
        }
    }

    /// With the agent's Slack clients.
    pub(crate) fn with_slack(mut self, slack: HostSlack) -> HostServices {
        self.slack = slack;
        self
    }

    /// Binds the reminders to the runtime once it is open (the runtime
    /// holds these services, so they hold it weakly).
    pub(crate) fn attach(&self, runtime: &AgentRuntime) {
        let _ = self.reminders.runtime.set(runtime.downgrade());
    }
}

/// `host.mcp`: the agent's MCP connections. Calls made
/// [`in_session`](HostMcp::in_session) carry that session's delegation
/// depth, so a chain of agents calling each other from tools is stopped
/// by the hop limit like one driven by the model.
#[derive(Debug, Clone)]
pub struct HostMcp {
    connections: agentkit_mcp::Connections,
    depths: Depths,
    session: Option<String>,
}

impl HostMcp {
    /// The same connections, counting calls as made by `session_id`'s turn.
    pub fn in_session(&self, session_id: &str) -> HostMcp {
        HostMcp {
            session: Some(session_id.to_owned()),
            ..self.clone()
        }
    }

    fn hops(&self) -> u32 {
        self.session
            .as_deref()
            .map_or(0, |session| self.depths.get(session))
    }

    /// The connection names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.connections.names()
    }

    /// The tools of connection `name` (opening it if needed).
    pub async fn list_tools(
        &self,
        name: &str,
    ) -> std::result::Result<Vec<agentkit_mcp::McpTool>, agentkit_mcp::ClientError> {
        self.connections.list_tools(name, self.hops()).await
    }

    /// Calls `tool` of connection `name` with `args` (an object).
    pub async fn call_tool(
        &self,
        name: &str,
        tool: &str,
        args: Value,
    ) -> std::result::Result<agentkit_mcp::McpCallResult, agentkit_mcp::ClientError> {
        self.connections
            .call_tool(name, tool, args, self.hops())
            .await
    }
}

/// `host.reminders`: create, cancel and list the agent's reminders. They
/// are durable before `create` returns, exactly as through
/// [`ServeHandle::create_reminder`](crate::ServeHandle::create_reminder).
#[derive(Debug, Clone)]
pub struct HostReminders {
    runtime: Arc<OnceLock<WeakRuntime>>,
}

impl HostReminders {
    fn runtime(&self) -> Result<AgentRuntime> {
        self.runtime
            .get()
            .and_then(WeakRuntime::upgrade)
            .ok_or_else(|| Error::Config {
                message: "the agent's runtime has stopped".into(),
            })
    }

    /// Creates a reminder, on disk before this returns.
    pub async fn create(&self, reminder: NewReminder) -> Result<Reminder> {
        Ok(self.runtime()?.create_reminder(reminder).await?)
    }

    /// Creates a reminder bound to the conversation of session
    /// `session_id` (its channel and continuation), as the built-in
    /// `remind_me` tool does: a tool reminding its own session passes
    /// `ctx.session_id`.
    pub async fn create_for_session(
        &self,
        session_id: &str,
        purpose: &str,
        when: agentkit_runtime::ReminderWhen,
        action: agentkit_runtime::ReminderAction,
    ) -> Result<Reminder> {
        let runtime = self.runtime()?;
        let meta = runtime.session_meta(session_id)?;
        Ok(runtime
            .create_reminder(NewReminder {
                purpose: purpose.to_owned(),
                channel_id: meta.channel,
                continuation_token: meta.continuation_token,
                when,
                action,
            })
            .await?)
    }

    /// Cancels a reminder.
    pub async fn cancel(&self, id: &str) -> Result<Reminder> {
        Ok(self.runtime()?.cancel_reminder(id).await?)
    }

    /// One reminder.
    pub fn get(&self, id: &str) -> Result<Reminder> {
        Ok(self.runtime()?.reminder(id)?)
    }

    /// Every reminder of the agent.
    pub fn list(&self) -> Result<Vec<Reminder>> {
        Ok(self.runtime()?.reminders()?)
    }
}

/// `host.github`: a [`GithubClient`] per `kind = "github"` channel of the
/// agent, with that channel's credentials (token or App installation).
#[derive(Debug, Clone, Default)]
pub struct HostGithub {
    clients: Arc<Vec<(String, GithubClient)>>,
}

impl HostGithub {
    /// The clients of `project`'s github channels. A channel whose
    /// settings cannot give one is left out (serving it fails anyway,
    /// saying why).
    pub(crate) fn of(
        project: &agentkit_manifest::Project,
        env: &agentkit_channels::Env,
    ) -> HostGithub {
        let mut clients = Vec::new();
        for c in &project.agent.channels {
            if c.kind != agentkit_manifest::ChannelKind::Github {
                continue;
            }
            match agentkit_channels::github_client(c, env, &project.agent.dir) {
                Ok(client) => clients.push((c.id.clone(), client)),
                Err(e) => tracing::debug!(channel = %c.id, error = %e, "no host.github client"),
            }
        }
        HostGithub {
            clients: Arc::new(clients),
        }
    }

    /// The github channels a client can be chosen by.
    pub fn names(&self) -> Vec<String> {
        self.clients.iter().map(|(n, _)| n.clone()).collect()
    }

    /// The client of github channel `channel`; with `None`, the only
    /// github channel's (an agent with several must name one).
    pub fn client(&self, channel: Option<&str>) -> Result<GithubClient> {
        let names = || self.names().join("`, `");
        match channel {
            Some(name) => self
                .clients
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, c)| c.clone())
                .ok_or_else(|| Error::Config {
                    message: format!("no github channel `{name}` (the agent has: `{}`)", names()),
                }),
            None => match self.clients.as_slice() {
                [(_, only)] => Ok(only.clone()),
                [] => Err(Error::Config {
                    message: "the agent has no `kind = \"github\"` channel to take GitHub credentials from".into(),
                }),
                _ => Err(Error::Config {
                    message: format!(
                        "the agent has several github channels: name one (`{}`)",
                        names()
                    ),
                }),
            },
        }
    }
}

/// `host.slack`: a [`SlackClient`] per `kind = "slack"` channel of the
/// agent, with that channel's bot token (post, update, react, any Web API
/// method).
#[derive(Debug, Clone, Default)]
pub struct HostSlack {
    clients: Arc<Vec<(String, SlackClient)>>,
}

impl HostSlack {
    /// The clients of `project`'s slack channels that have a bot token.
    pub(crate) fn of(
        project: &agentkit_manifest::Project,
        env: &agentkit_channels::Env,
    ) -> HostSlack {
        let mut clients = Vec::new();
        for c in &project.agent.channels {
            if c.kind != agentkit_manifest::ChannelKind::Slack {
                continue;
            }
            match agentkit_channels::slack_client(c, env) {
                Ok(client) => clients.push((c.id.clone(), client)),
                Err(e) => tracing::debug!(channel = %c.id, error = %e, "no host.slack client"),
            }
        }
        HostSlack {
            clients: Arc::new(clients),
        }
    }

    /// The slack channels a client can be chosen by.
    pub fn names(&self) -> Vec<String> {
        self.clients.iter().map(|(n, _)| n.clone()).collect()
    }

    /// The client of slack channel `channel`; with `None`, the only slack
    /// channel's (an agent with several must name one).
    pub fn client(&self, channel: Option<&str>) -> Result<SlackClient> {
        let names = || self.names().join("`, `");
        match channel {
            Some(name) => self
                .clients
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, c)| c.clone())
                .ok_or_else(|| Error::Config {
                    message: format!(
                        "no slack channel `{name}` with a bot token (the agent has: `{}`)",
                        names()
                    ),
                }),
            None => match self.clients.as_slice() {
                [(_, only)] => Ok(only.clone()),
                [] => Err(Error::Config {
                    message: "the agent has no `kind = \"slack\"` channel with a bot token".into(),
                }),
                _ => Err(Error::Config {
                    message: format!(
                        "the agent has several slack channels: name one (`{}`)",
                        names()
                    ),
                }),
            },
        }
    }
}
