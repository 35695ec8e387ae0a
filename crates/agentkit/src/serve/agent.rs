//! A mounted agent as the routes read it: [`Mounted`] (its runtime, auth
//! chain, MCP endpoint, channels, hooks) and [`AgentState`], the state of
//! its routes. A leaf: `mount.rs` builds these, every route module reads
//! them, and neither needs the other.

use std::sync::Arc;

use agentkit_auth::Chain;
use agentkit_manifest::Project;
use agentkit_runtime::AgentRuntime;
use tokio_util::sync::CancellationToken;

use super::depths::Depths;
use super::http::Guarded;
use super::mcp;

/// One mounted agent.
#[derive(Debug, Clone)]
pub(crate) struct Mounted {
    pub(crate) slug: String,
    pub(crate) runtime: AgentRuntime,
    pub(crate) chain: Arc<Chain>,
    pub(crate) project: Arc<Project>,
    /// `/<slug>` or empty in single mode.
    pub(crate) prefix: String,
    /// The agent's MCP endpoint (`/v1/mcp`).
    pub(crate) mcp: mcp::Endpoint,
    /// The agent's MCP client connections (`mcp-connections/`).
    pub(crate) connections: agentkit_mcp::Connections,
    /// The custom channels (`/v1/channels/<id>`).
    pub(crate) channels: agentkit_channels::ChannelHost,
    /// Serving with `--dev` (the dev routes answer).
    pub(crate) dev: bool,
    /// The agent's running hooks (their counters show in `/v1/info`).
    pub(crate) hooks: agentkit_runtime::Hooks,
    /// Eval runs started through the dev routes.
    pub(crate) evals: Arc<super::dev_evals::DevEvals>,
    /// The playground is served (`POST /v1/session` answers its URL).
    pub(crate) playground: bool,
    /// The delegation depth of sessions that A2A requests drove, and the
    /// limit past which a request is refused.
    pub(crate) depths: Depths,
    pub(crate) max_hops: u32,
    /// The A2A push notification webhooks and the tasks followed for them.
    pub(crate) pushes: Arc<super::turn_task::push::Pushes>,
}

/// The state of one agent's routes.
#[derive(Debug, Clone)]
pub(crate) struct AgentState {
    /// Shared: axum clones the state for every request.
    pub(crate) agent: Arc<Mounted>,
    /// Ends open streams when the server stops.
    pub(crate) shutdown: CancellationToken,
    /// The request body limit (a multipart message has its own).
    pub(crate) body_limit: usize,
}

impl Guarded for AgentState {
    fn chain(&self) -> &Chain {
        &self.agent.chain
    }

    fn agent(&self) -> &str {
        &self.agent.slug
    }

    fn prefix(&self) -> &str {
        &self.agent.prefix
    }

    fn dev(&self) -> bool {
        self.agent.dev
    }
}
