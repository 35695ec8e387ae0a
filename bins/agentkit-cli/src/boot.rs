//! What the commands that talk to an agent share: the async runtime, an
//! ephemeral server booted for a project folder (`run`, `chat`, `call`,
//! `eval`), and the choice of its agent. A leaf: every command module may
//! use it, it uses none of them.

use std::path::Path;

use anyhow::Context;

pub(crate) fn tokio_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

pub(crate) async fn boot(
    dir: &Path,
    state_root: &Path,
    api_keys: &[String],
    model: Option<&str>,
) -> anyhow::Result<agentkit::ServeHandle> {
    let providers = crate::login::provider_config(api_keys)?;
    boot_with(dir, state_root, providers, model).await
}

/// [`boot`] with the providers already chosen (`eval` adds a cassette).
/// The `OTEL_*` variables apply as they do to `serve`: the ephemeral
/// server exports its traces and metrics, and flushes them as it closes.
pub(crate) async fn boot_with(
    dir: &Path,
    state_root: &Path,
    providers: agentkit::ProviderConfig,
    model: Option<&str>,
) -> anyhow::Result<agentkit::ServeHandle> {
    let telemetry = agentkit::TelemetryOptions::from_env(|k| std::env::var(k).ok())?;
    let options = agentkit::ServeOptions {
        telemetry,
        model: model.map(str::to_owned),
        port: 0,
        state_root: Some(state_root.to_path_buf()),
        dev: true,
        default_model: std::env::var("AGENTKIT_MODEL")
            .ok()
            .filter(|m| !m.is_empty()),
        env: agentkit::EnvLookup::process(),
        providers,
        ..Default::default()
    };
    agentkit::serve(dir, options)
        .await
        .with_context(|| format!("cannot serve `{}`", dir.display()))
}

/// The URL of the agent to talk to on a server booted for `dir`.
pub(crate) fn pick_agent(
    handle: &agentkit::ServeHandle,
    agent: Option<&str>,
    dir: &Path,
) -> anyhow::Result<String> {
    let slugs = handle.slugs();
    match (agent, slugs.as_slice()) {
        (Some(slug), _) if slugs.iter().any(|s| s == slug) => Ok(handle.agent_url(slug)),
        (Some(slug), _) => anyhow::bail!(
            "`{}` has no agent `{slug}`; it holds {}",
            dir.display(),
            slugs.join(", ")
        ),
        (None, [one]) => Ok(handle.agent_url(one)),
        (None, _) => anyhow::bail!(
            "`{}` holds several agents ({}); choose one with --agent SLUG",
            dir.display(),
            slugs.join(", ")
        ),
    }
}
