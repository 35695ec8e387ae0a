//! Serving on a database shared with other hosts (`--database-url`): the
//! connection, the migrations applied at start, and the refusal of what
//! is not yet coordinated across hosts (it would run on every host, or on
//! one host's disk only), named with the file that uses it.

use agentkit_manifest::Host;
use agentkit_runtime::SharedState;

use super::options::Parts;
use crate::error::{Error, Result};

/// Connects to `url` and migrates it, after refusing what cannot be
/// shared yet. `None` without a URL: this host's files, as always.
pub(crate) async fn open(
    url: Option<&str>,
    host: &Host,
    parts: &Parts,
) -> Result<Option<SharedState>> {
    let Some(url) = url else {
        return Ok(None);
    };
    refuse_unshared(host, parts)?;
    let state = SharedState::open(url).await?;
    tracing::info!(
        database = %state.db.target(),
        host = %state.leases.owner(),
        "sessions, event logs and leases are shared through PostgreSQL"
    );
    Ok(Some(state))
}

/// The first feature of `host` that is not coordinated across hosts yet.
fn refuse_unshared(host: &Host, parts: &Parts) -> Result<()> {
    let refuse = |what: &str, slug: &str, path: &str, hint: &str| Error::Config {
        message: format!(
            "--database-url: {what} are not yet coordinated across hosts (agent `{slug}`, {path}); {hint}"
        ),
    };
    for project in &host.agents {
        let agent = &project.agent;
        if let Some(channel) = agent.channels.first() {
            return Err(refuse(
                "channel deliveries",
                &project.slug,
                &channel.path,
                "serve this agent without --database-url",
            ));
        }
        if agent.config.harness.max_tokens_per_day.is_some() {
            return Err(refuse(
                "daily token budgets",
                &project.slug,
                "agent/agent.toml `[harness] max_tokens_per_day`",
                "serve this agent without --database-url",
            ));
        }
        if let Some(experiment) = agent.experiments.first() {
            return Err(refuse(
                "A/B experiments",
                &project.slug,
                &experiment.path,
                "serve this agent without --database-url",
            ));
        }
    }
    if let Some((slug, _)) = parts.extensions.channels.first() {
        return Err(refuse(
            "channel deliveries",
            slug,
            "a channel defined in Rust",
            "serve without --database-url",
        ));
    }
    Ok(())
}
