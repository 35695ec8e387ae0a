//! Per-agent mounting: one discovered project becomes a [`Mounted`] agent
//! (its runtime, auth chain, MCP endpoint and connections, custom
//! channels, hooks and timers) and the [`BridgeAgent`] the host bridge
//! serves for it. The routes read a mounted agent through
//! [`AgentState`](super::agent::AgentState).

use std::path::Path;
use std::sync::Arc;

use agentkit_manifest::Project;
use agentkit_runtime::{AgentRuntime, KvStore, RuntimeOptions};
use tokio_util::sync::CancellationToken;

use super::agent::Mounted;
use super::bridge::{self, BridgeAgent};
use super::connection_tools::ConnectionTools;
use super::depths::Depths;
use super::options::{AuthDefaults, EnvLookup, Extensions, Mcp, Mode, Models, Timers};
use super::resolve::ResolvedAgent;
use super::services::HostServices;
use super::{auth, channels, mcp, timers};
use crate::error::Result;

/// What every agent of the host is mounted with.
#[derive(Debug)]
pub(crate) struct Shared<'a> {
    pub(crate) state_root: &'a Path,
    pub(crate) mode: Mode,
    pub(crate) dev: bool,
    pub(crate) models: &'a Models,
    pub(crate) mcp: &'a Mcp,
    pub(crate) timers: &'a Timers,
    pub(crate) auth: &'a AuthDefaults,
    /// For the channel packs, which read their own settings.
    pub(crate) env: &'a EnvLookup,
    pub(crate) extensions: &'a Extensions,
    /// The largest request body the MCP endpoint reads.
    pub(crate) body_limit: usize,
    /// Where the host bridge listens.
    pub(crate) bridge_url: &'a str,
    /// Where peers (and eval runs) reach this host.
    pub(crate) peer_base: &'a str,
    pub(crate) playground: bool,
    pub(crate) shutdown: &'a CancellationToken,
    pub(crate) telemetry: &'a super::telemetry::Telemetry,
    /// The database shared with other hosts (`--database-url`).
    pub(crate) database: Option<&'a agentkit_pg::PgBackend>,
    /// `--fd-headroom`, as configured: the spare logs leave it free too.
    pub(crate) fd_headroom: Option<u64>,
}

/// Opens `project`'s runtime (recovering what a crash interrupted) and
/// mounts everything around it.
pub(crate) async fn mount(
    project: &Project,
    resolved: ResolvedAgent,
    shared: &Shared<'_>,
) -> Result<(Mounted, BridgeAgent)> {
    let slug = &project.slug;
    let state_dir = shared.state_root.join(slug);
    let token = bridge::mint_token();
    let mut kv = KvStore::open(&state_dir)?;
    if let Some(database) = shared.database {
        kv = kv.shared(database, slug);
    }
    let depths = Depths::default();
    let calls = bridge::CallTokens::default();
    let connections = agentkit_mcp::Connections::new(resolved.mcp, shared.mcp.clients.clone());
    let mut tool_sources: Vec<Arc<dyn agentkit_harness::ToolSource>> =
        vec![Arc::new(shared.extensions.tools.clone())];
    if !connections.names().is_empty() {
        tool_sources.push(Arc::new(agentkit_harness::ExtraToolsSource(Arc::new(
            ConnectionTools::new(connections.clone(), depths.clone()),
        ))));
    }
    if !resolved.a2a.is_empty() {
        tool_sources.push(Arc::new(agentkit_harness::ExtraToolsSource(Arc::new(
            super::a2a::RemoteAgents::new(
                resolved.a2a.clone(),
                depths.clone(),
                shared.mcp.max_hops,
            ),
        ))));
    }
    let host_services = HostServices::new(
        slug,
        kv.clone(),
        connections.clone(),
        depths.clone(),
        resolved.github.clone(),
    )
    .with_slack(resolved.slack.clone());
    let services: agentkit_harness::HostHandle = Arc::new(host_services.clone());
    let mut agent = project.agent.clone();
    if let Some(model) = &shared.models.forced {
        agent.config.model = Some(model.clone());
        // A forced model (`run --model`, `eval --model`) is every turn's
        // model: experiment variants keep only their instructions.
        for variant in agent
            .experiments
            .iter_mut()
            .flat_map(|e| e.variants.iter_mut())
        {
            variant.model = None;
        }
    }
    let runtime = AgentRuntime::open(
        Arc::new(agent),
        RuntimeOptions {
            state_dir: state_dir.clone(),
            default_model: shared.models.default.clone(),
            store: store_options(shared.fd_headroom),
            providers: shared.models.providers.clone(),
            host_bridge: Some(agentkit_harness::HostBridge {
                url: shared.bridge_url.to_owned(),
                token: token.to_string(),
                credentials: Some(Arc::new(bridge::Issuer {
                    secret: token.clone(),
                    calls: calls.clone(),
                    depths: depths.clone(),
                })),
            }),
            clock: shared.timers.clock.clone(),
            tool_sources,
            services: Some(services.clone()),
            tracing: shared.telemetry.tracing(),
            shared: shared
                .database
                .map(|b| Arc::new(b.clone()) as Arc<dyn agentkit_runtime::SharedBackend>),
        },
    )
    .await?;
    shared
        .telemetry
        .watch(slug, &runtime, &connections, shared.models.default.as_ref());
    host_services.attach(&runtime);
    let _ = resolved.runtime.set(runtime.downgrade());
    runtime
        .schedules()
        .set_handlers(shared.extensions.schedule_handlers.clone());
    runtime
        .reminders()
        .set_handlers(&shared.extensions.reminder_handlers);
    timers::start(&runtime, shared.timers, shared.dev);
    let chain = auth::http_chain(slug, resolved.http_auth, shared.auth)?
        .with_operators(auth::operators(shared.auth, shared.dev))
        .with_roles(auth::role_map(slug, &project.agent.config.auth)?)
        .with_tenant_claim(project.agent.config.auth.tenant_claim.clone());
    let prefix = match shared.mode {
        Mode::Multi => format!("/{slug}"),
        Mode::Single => String::new(),
    };
    let mcp = mcp::endpoint(
        runtime.clone(),
        slug,
        depths.clone(),
        agentkit_mcp::McpServerOptions {
            max_wait: shared.mcp.max_wait,
            max_hops: shared.mcp.max_hops,
            body_limit: shared.body_limit,
            shutdown: shared.shutdown.clone(),
            name: slug.clone(),
        },
    );
    let channels = channels::start(
        project,
        &runtime,
        channels::Setup {
            env: shared.env,
            dev: shared.dev,
            auth: shared.auth,
            authored: &resolved.channel_auth,
            rust: &shared.extensions.channels,
            prefix: &prefix,
            body_limit: shared.body_limit,
            services: Some(services),
            deliveries: shared
                .database
                .map(|db| super::scale::ledger(db, slug) as _),
            states: shared
                .database
                .map(|db| super::scale::ledger(db, slug) as _),
        },
    )
    .await?;
    host_services.attach_channels(&channels);
    let bridged = BridgeAgent {
        token,
        services: host_services,
        runtime: runtime.clone(),
        calls,
    };
    let hooks = timers::start_hooks(&runtime, resolved.hooks, &shared.extensions.hooks);
    let evals = super::dev_evals::DevEvals::new(
        Arc::new(project.clone()),
        runtime.state_dir(),
        format!("{}{prefix}", shared.peer_base),
        shared.models.providers.clone(),
        runtime
            .agent()
            .config
            .model
            .clone()
            .or(shared.models.default.clone()),
    );
    let evals = Arc::new(match shared.database {
        Some(database) => evals.shared(database, slug),
        None => evals,
    });
    let pushes = Arc::new(super::turn_task::push::Pushes::new(
        &state_dir,
        slug,
        shared.database,
        shared.mcp.push_private_networks,
    )?);
    pushes.resume(runtime.clone(), shared.shutdown.clone());
    let mounted = Mounted {
        pushes,
        depths,
        max_hops: shared.mcp.max_hops,
        evals,
        playground: shared.playground,
        slug: slug.clone(),
        hooks,
        runtime,
        mcp,
        connections,
        chain: Arc::new(chain),
        project: Arc::new(project.clone()),
        prefix,
        channels,
        dev: shared.dev,
    };
    Ok((mounted, bridged))
}

/// The event store's options: the defaults, but for
/// `AGENTKIT_SPARE_MOVE_AFTER_MS`, how long a new session's log waits in
/// its spare folder before it is moved to `sessions/<id>` (default 0: at
/// once, in the background). Crash tests set it to stop a server before a
/// move; nothing else needs it.
fn store_options(fd_headroom: Option<u64>) -> agentkit_events::StoreOptions {
    let mut options = agentkit_events::StoreOptions {
        spare_fd_reserve: fd_headroom,
        ..agentkit_events::StoreOptions::default()
    };
    if let Some(ms) = std::env::var("AGENTKIT_SPARE_MOVE_AFTER_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        options.spare_move_after = std::time::Duration::from_millis(ms);
    }
    options
}
