//! `serve(dir, options)`: one agent or a folder of them on one port, each
//! with its durable sessions, behind its auth chain.
//!
//! Layout: in the default multi-agent layout every agent is mounted under
//! `/<slug>/v1/*`, with an HTML index at `/`, `/v1/agents` and host
//! liveness at `/v1/health`; single mode mounts the one agent at `/v1/*`,
//! where `/v1/health` is the public liveness probe. Connections are
//! accepted and bounded by the HTTP edge (`edge.rs`).
//! State lives under `<stateRoot>/<slug>/` (default stateRoot:
//! `<dir>/.agentkit`).
//!
//! The modules, leaves first (each imports only those above it):
//! `options` (what to serve with, split by concern), `limits` (fair
//! shares: rates per principal, address and channel), `paging` (list
//! pages: `limit`, the opaque `cursor`), `http` (the error
//! answer, the `Authed` extractor, JSON bodies), `depths` (delegation
//! depth), `edge` (accepting and bounding connections), `services`
//! (`HostServices`), `jwks` (the `jwt` policy's key fetches), `resolve`
//! (every `${VAR}`, once), `auth` (chains and operators),
//! `timers`, `mcp` and `connection_tools` (MCP server and clients),
//! `bridge` (the loopback host bridge), `channels` (custom channels),
//! `mount` (one agent), `api`, `dev`, `context`, `openai`, `agui` and `openapi` (its routes), `router`,
//! `telemetry` (traces, `/metrics`, `/v1/logs`), `handle`
//! (`ServeHandle`), and this file, which wires them in order.

mod a2a;
mod ab;
mod agent;
mod agui;
mod api;
mod artifacts;
mod auth;
mod bridge;
mod channels;
mod connection_tools;
mod context;
mod deletion;
mod depths;
mod dev;
mod dev_evals;
mod edge;
mod evals;
mod every;
mod files;
mod handle;
mod host_config;
mod http;
mod identity;
mod idle;
mod jwks;
mod limits;
mod mcp;
mod memory;
mod mount;
mod oidc;
mod openai;
mod openapi;
mod options;
mod paging;
mod playground;
mod resolve;
mod roles;
mod router;
mod scale;
mod services;
mod telemetry;
mod timers;
mod turn_task;
mod uploads;

pub use edge::{EdgeOptions, FdLimit, raise_fd_limit};
pub use handle::ServeHandle;
pub use host_config::{apply_host_config, read_host_config};
pub use limits::Rate;
pub use oidc::OidcOptions;
pub use options::{EnvFn, EnvLookup, MemoryRelease, Mode, ServeOptions};
/// The role table of `docs/reference/auth.md#roles` (for its docs test).
#[doc(hidden)]
pub use roles::markdown_table as role_table_markdown;
pub use services::{
    HostArtifacts, HostFiles, HostGithub, HostMcp, HostReminders, HostSend, HostSent, HostServices,
    HostSessions, HostSlack,
};
pub use telemetry::{OtlpProtocol, TelemetryOptions};

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};

/// Discovers `dir`, refuses to start on error diagnostics, opens every
/// agent's sessions (recovering those a crash interrupted), binds, and
/// serves until [`ServeHandle::close`].
pub async fn serve(dir: &Path, options: ServeOptions) -> Result<ServeHandle> {
    let found = agentkit_manifest::discover(dir)?;
    if found.diagnostics.has_errors() {
        return Err(Error::Invalid {
            diagnostics: found.diagnostics,
        });
    }
    if options.mode == Mode::Single && found.host.agents.len() != 1 {
        return Err(Error::Config {
            message: format!(
                "single mode serves exactly one agent; `{}` holds {}",
                dir.display(),
                found.host.agents.len()
            ),
        });
    }
    timers::check_handlers(&found.host, &options.schedule_handlers)?;
    let mut parts = options.into_parts()?;
    // `${VAR:?message}` left unset: refuse to start, naming file and message.
    let required = agentkit_manifest::unset_env_refs(&found.host, |n| parts.env.is_set(n));
    if required
        .iter()
        .any(|d| d.severity == agentkit_manifest::Severity::Error)
    {
        let mut diagnostics = agentkit_manifest::Diagnostics::default();
        diagnostics.extend(
            required
                .into_iter()
                .filter(|d| d.severity == agentkit_manifest::Severity::Error),
        );
        return Err(Error::Invalid { diagnostics });
    }
    // `${file:…}` and `${secret:…}`: read once, before anything expands.
    let secrets = crate::secrets::resolve(&found.host, parts.secret_command.as_ref())
        .await
        .map_err(|diagnostics| Error::Invalid { diagnostics })?;
    parts.env = parts.env.clone().with_resolved(secrets);
    let state_root = parts
        .state_root
        .clone()
        .unwrap_or_else(|| found.host.root.join(".agentkit"));
    let database = scale::open(parts.database_url.as_deref()).await?;
    let (listener, addr) = bind(&parts.listen).await?;
    let (bridge_listener, bridge_url) = bridge::bind().await.map_err(|source| Error::Bind {
        addr: "127.0.0.1:0 (host bridge)".into(),
        source,
    })?;
    let peer_base = parts
        .listen
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{}", loopback_of(addr)));
    let issuer = Arc::new(
        agentkit_auth::IdentityIssuer::new(
            agentkit_auth::IdentityConfig::new(peer_base.clone()),
            identity::now_secs(),
        )
        .map_err(|e| Error::Config {
            message: e.to_string(),
        })?,
    );
    if let Some(options) = parts.auth.oidc_options.clone() {
        let keep_claims = found
            .host
            .agents
            .iter()
            .flat_map(|p| p.agent.config.auth.roles.iter())
            .flat_map(|(_, rules)| rules.iter())
            .filter_map(|r| r.split_once(':').map(|(c, _)| c))
            .map(|c| c.split('.').next().unwrap_or(c).to_owned())
            .collect();
        let start = oidc::Start {
            env: &parts.env,
            secret_command: parts.secret_command.as_ref(),
            origin: &peer_base,
            keep_claims,
            public: parts.listen.public_url.is_some(),
        };
        parts.auth.oidc = Some(oidc::start(&options, start).await?);
    }
    let resolved = resolve::host(
        &found.host,
        &parts.env,
        &parts.auth,
        &peer_base,
        &state_root,
        &resolve::Identity { issuer: &issuer },
    );
    let shutdown = CancellationToken::new();
    let telemetry = telemetry::Telemetry::start(&parts.telemetry);
    let agent_roles = found
        .host
        .agents
        .iter()
        .map(|p| auth::role_map(&p.slug, &p.agent.config.auth))
        .collect::<Result<Vec<_>>>()?;
    telemetry.set_chain(roles::HostGuard {
        chain: auth::host_chain(&parts.auth, parts.dev),
        agents: agent_roles,
    });
    let shared = mount::Shared {
        telemetry: &telemetry,
        state_root: &state_root,
        mode: parts.listen.mode,
        dev: parts.dev,
        models: &parts.models,
        mcp: &parts.mcp,
        timers: &parts.timers,
        auth: &parts.auth,
        env: &parts.env,
        extensions: &parts.extensions,
        body_limit: parts.edge.body_limit,
        bridge_url: &bridge_url,
        peer_base: &peer_base,
        playground: parts.playground,
        shutdown: &shutdown,
        database: database.as_ref(),
        fd_headroom: parts.edge.options.fd_headroom,
    };
    let mut agents = Vec::new();
    let mut bridged = Vec::new();
    for (project, resolved) in found.host.agents.iter().zip(resolved) {
        let (agent, bridge_agent) = mount::mount(project, resolved, &shared).await?;
        agents.push(agent);
        bridged.push(bridge_agent);
    }
    let bridge_task = bridge::spawn(bridge_listener, bridged, shutdown.clone());
    let longest_tool = found
        .host
        .agents
        .iter()
        .flat_map(|p| p.agent.tools.iter().map(|t| t.timeout))
        .max()
        .unwrap_or_default();
    let edge_options = &parts.edge.options;
    let bounds = edge::RequestBounds {
        default: edge_options.request_timeout,
        mcp: edge_options.request_timeout + parts.mcp.max_wait,
        tools: edge_options.request_timeout + longest_tool,
    };
    let edge_stats = Arc::new(edge::EdgeStats::default());
    telemetry.set_edge(edge_stats.clone());
    tracing::debug!(max_turns = edge::turn_cap(edge_options), "turn bound");
    let turn_gate = edge::TurnGate::new(edge_options, edge_stats.clone());
    let shares = limits::FairShares::new(
        edge_options.rate_limit,
        edge_options.channel_rate_limit,
        edge_stats.limited.clone(),
    );
    let router = router::router(
        &agents,
        parts.listen.mode,
        parts.edge.body_limit,
        shutdown.clone(),
    )
    .merge(
        playground::router(
            &agents,
            parts.listen.mode,
            parts.playground,
            parts.auth.oidc.clone(),
        )
        // No auth chain here: each client address has its share.
        .route_layer(axum::middleware::from_fn(http::limit_by_address)),
    )
    .merge(match &parts.auth.oidc {
        Some(client) => oidc::routes(client.clone(), &peer_base)
            .route_layer(axum::middleware::from_fn(http::limit_by_address)),
        None => axum::Router::new(),
    })
    .merge(telemetry::routes(telemetry.clone()))
    .merge(
        identity::routes(issuer)
            // Public, as a JWKS is: each client address has its share.
            .route_layer(axum::middleware::from_fn(http::limit_by_address)),
    )
    .layer(axum::middleware::from_fn_with_state(
        telemetry.clone(),
        telemetry::layer,
    ))
    // The turn handlers take a slot from the gate once the body has
    // arrived; the auth extractor and the channel routes count fair
    // shares. Both find them in the request's extensions.
    .layer(axum::Extension(turn_gate.clone()))
    .layer(axum::Extension(shares.clone()))
    .layer(axum::middleware::from_fn_with_state(
        bounds,
        edge::request_timeout,
    ));
    tokio::spawn(turn_gate.clone().reap(shutdown.clone()));
    tokio::spawn(shares.prune(shutdown.clone()));
    tokio::spawn(edge::sample_descriptors(
        edge_stats.clone(),
        shutdown.clone(),
    ));
    tokio::spawn(edge::sample_wake_delay(
        edge_stats.clone(),
        "main",
        shutdown.clone(),
    ));
    tokio::spawn(idle::release_when_idle(
        edge_stats.clone(),
        agents.iter().map(|a| a.runtime.clone()).collect(),
        parts.edge.release_memory.clone(),
        shutdown.clone(),
    ));
    let max_connections = edge::connection_cap(edge_options);
    tracing::debug!(max_connections, "connection cap");
    let early = edge::EarlyRefusal {
        gate: turn_gate,
        prefixes: match parts.listen.mode {
            options::Mode::Single => vec![String::new()],
            options::Mode::Multi => agents.iter().map(|a| format!("/{}", a.slug)).collect(),
        },
        count: {
            let telemetry = telemetry.clone();
            Arc::new(move |route: &str, status: u16, seconds: f64| {
                telemetry.count_http(route, status, seconds);
            })
        },
        body_cap: parts.edge.body_limit as u64,
    };
    let server = edge::spawn(
        listener,
        edge::Edge {
            router,
            options: edge_options.clone(),
            max_connections,
            shutdown: shutdown.clone(),
            grace: parts.edge.shutdown_grace,
            stats: edge_stats,
            main: tokio::runtime::Handle::current(),
            early: Some(early),
        },
    )
    .map_err(|source| Error::Bind {
        addr: addr.to_string(),
        source,
    })?;
    Ok(ServeHandle {
        addr,
        agents,
        mode: parts.listen.mode,
        shutdown,
        server,
        bridge: bridge_task,
        grace: parts.edge.shutdown_grace,
        host: Arc::new(found.host),
        playground: parts.playground,
        telemetry,
    })
}

/// How many connections the kernel queues for the accept loop (capped by
/// `net.core.somaxconn`, 4,096 by default on Linux since 5.4). The
/// standard library's and mio's 128 overflowed while the edge closed
/// slow clients' connections at the cap to admit new ones: the kernel
/// then dropped new connections' handshakes, and a normal client waited
/// a SYN retransmission (1 s, then 3 s).
const LISTEN_BACKLOG: u32 = 4096;

/// Binds the listener; answers it with the address it got.
async fn bind(listen: &options::Listen) -> Result<(tokio::net::TcpListener, SocketAddr)> {
    let failed = |source| Error::Bind {
        addr: format!("{}:{}", listen.host, listen.port),
        source,
    };
    let addr = SocketAddr::new(listen.host, listen.port);
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
    }
    .map_err(failed)?;
    // As `TcpListener::bind` does: a restart binds while the last run's
    // connections linger in TIME_WAIT.
    socket.set_reuseaddr(true).map_err(failed)?;
    socket.bind(addr).map_err(failed)?;
    let listener = socket.listen(LISTEN_BACKLOG).map_err(failed)?;
    let addr = listener.local_addr().map_err(failed)?;
    Ok((listener, addr))
}

/// The address peers dial: the bound one, with an unspecified IP (bound
/// to all interfaces) replaced by loopback.
fn loopback_of(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), addr.port())
        }
        IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::new(IpAddr::V6(std::net::Ipv6Addr::LOCALHOST), addr.port())
        }
        _ => addr,
    }
}

/// Resolves on Ctrl-C, or on SIGTERM (what container runtimes send) on
/// Unix: the signal both binaries stop serving on. The handlers are
/// installed when this is called, not when the future is first polled,
/// so a signal that arrives while the server starts is not lost (nor does
/// it kill the process before the logs are synced). Call it from within a
/// tokio runtime.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let interrupt = signal(SignalKind::interrupt());
        let terminate = signal(SignalKind::terminate());
        async move {
            let (mut interrupt, mut terminate) = match (interrupt, terminate) {
                (Ok(i), Ok(t)) => (i, t),
                (i, t) => {
                    tracing::warn!(
                        sigint = i.is_ok(),
                        sigterm = t.is_ok(),
                        "cannot install the shutdown signal handlers; falling back to Ctrl-C"
                    );
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}
