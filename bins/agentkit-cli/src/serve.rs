//! `agentkit serve`: flags, startup banner, and shutdown on a signal.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};

/// The flags of `agentkit serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// A model provider's API key, as PROVIDER=KEY (repeatable); wins over
    /// the environment and `agentkit login`. Visible in the process list:
    /// prefer the environment on shared machines.
    #[arg(long = "api-key", value_name = "PROVIDER=KEY")]
    api_key: Vec<String>,
    /// The project, or a folder of projects.
    #[arg(long, default_value = ".", value_name = "PATH")]
    dir: PathBuf,
    /// The port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 3000)]
    port: u16,
    /// The address to listen on. Anything but loopback is reachable from
    /// the network: configure auth (--bearer-token) first.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// Development mode: the offline `test` model when none is configured.
    #[arg(long)]
    dev: bool,
    /// Where sessions and logs live (default: DIR/.agentkit).
    #[arg(long, value_name = "DIR")]
    state_root: Option<PathBuf>,
    /// Require this bearer token on channels without their own auth chain.
    #[arg(long, env = "AGENTKIT_BEARER_TOKEN", hide_env_values = true)]
    bearer_token: Option<String>,
    /// Admit every caller as the shared `anonymous` principal (trusted
    /// networks only).
    #[arg(long, conflicts_with = "bearer_token")]
    allow_anonymous: bool,
    /// The URL peer agents reach this host at, when its loopback address
    /// is not reachable from where turns run (default: the bound address).
    #[arg(long, env = "AGENTKIT_PUBLIC_URL", value_name = "URL")]
    public_url: Option<String>,
    /// Mount agents under /SLUG (multi) or the only agent at the root.
    #[arg(long, value_enum, default_value_t = MountMode::Multi)]
    mode: MountMode,
    /// Do not fire schedules on their cron cadence (under --dev they never
    /// fire by themselves; dispatch them with POST /v1/dev/schedules/ID).
    #[arg(long)]
    no_schedules: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum MountMode {
    Multi,
    Single,
}

pub(crate) fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(serve(args))
}

async fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let options = agentkit::ServeOptions {
        host: args.host,
        port: args.port,
        state_root: args.state_root,
        dev: args.dev,
        mode: match args.mode {
            MountMode::Multi => agentkit::Mode::Multi,
            MountMode::Single => agentkit::Mode::Single,
        },
        bearer_token: args.bearer_token,
        allow_anonymous: args.allow_anonymous,
        public_url: args.public_url,
        schedules: !args.no_schedules,
        default_model: std::env::var("AGENTKIT_MODEL")
            .ok()
            .filter(|m| !m.is_empty()),
        env: agentkit::EnvLookup::process(),
        providers: crate::login::provider_config(&args.api_key)?,
        ..agentkit::ServeOptions::default()
    };
    let dev_fallback = options.dev && options.default_model.is_none();
    let exposed = !args.host.is_loopback() && options.bearer_token.is_none();
    let handle = match agentkit::serve(&args.dir, options).await {
        Ok(h) => h,
        Err(agentkit::Error::Invalid { diagnostics }) => {
            let mut err = anstream::stderr();
            for d in &diagnostics {
                use std::io::Write;
                let _ = writeln!(err, "{d}");
            }
            eprintln!(
                "error: not serving: the project has {} error(s)",
                diagnostics.error_count()
            );
            return Ok(ExitCode::from(crate::cli::EXIT_INVALID));
        }
        Err(e) => return Err(e).context(format!("cannot serve `{}`", args.dir.display())),
    };
    crate::render::serve_banner(&mut anstream::stdout(), &handle, dev_fallback, exposed)?;
    agentkit::shutdown_signal().await;
    eprintln!("shutting down: interrupting running turns and syncing logs");
    handle.close().await;
    Ok(ExitCode::SUCCESS)
}
