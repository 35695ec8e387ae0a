//! The `agentkit-serve` binary: the server alone, for containers. It takes
//! the flags of `agentkit serve` and nothing else.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;

/// Serve agentkit agents over HTTP.
#[derive(Debug, Parser)]
#[command(name = "agentkit-serve", version, about)]
struct Args {
    /// The project, or a folder of projects.
    #[arg(long, default_value = ".", value_name = "PATH")]
    dir: PathBuf,
    /// The port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 3000)]
    port: u16,
    /// The address to listen on.
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
    /// Admit every caller as the shared `anonymous` principal.
    #[arg(long, conflicts_with = "bearer_token")]
    allow_anonymous: bool,
    /// A model provider's API key, as PROVIDER=KEY (repeatable); wins over
    /// the environment and stored keys. Visible in the process list:
    /// prefer the environment on shared machines.
    #[arg(long = "api-key", value_name = "PROVIDER=KEY")]
    api_key: Vec<String>,
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

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum MountMode {
    Multi,
    Single,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_env("AGENTKIT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Args) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let mut providers = agentkit::credentials::resolve_providers(|k| std::env::var(k).ok());
        agentkit::credentials::apply_api_keys(&mut providers, &args.api_key)?;
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
            providers,
            ..agentkit::ServeOptions::default()
        };
        let handle = agentkit::serve(&args.dir, options)
            .await
            .with_context(|| format!("cannot serve `{}`", args.dir.display()))?;
        tracing::info!(url = %handle.url(), agents = ?handle.slugs(), "listening");
        println!("listening on {}", handle.url());
        agentkit::shutdown_signal().await;
        handle.close().await;
        Ok(())
    })
}
