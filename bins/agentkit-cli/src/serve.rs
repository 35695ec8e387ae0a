//! Serving from the command line: the flags of `agentkit serve` and
//! `agentkit-serve`, startup, the banner and warnings, the refusal of an
//! invalid project, and shutdown on a signal.

use std::io::{self, Write};
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anstyle::{AnsiColor, Style};
use anyhow::Context;
use clap::{Args, ValueEnum};

/// The project has error diagnostics (as `agentkit validate` exits).
pub const EXIT_INVALID: u8 = 1;
/// Bad arguments, a missing folder, a server that cannot start, or a
/// command that is not available.
pub const EXIT_USAGE: u8 = 2;
/// The log filter of both servers when `AGENTKIT_LOG` is unset.
pub const SERVE_LOG_DEFAULT: &str = "info";

const RED: Style = AnsiColor::Red.on_default().bold();
const YELLOW: Style = AnsiColor::Yellow.on_default().bold();
const GREEN: Style = AnsiColor::Green.on_default().bold();
const CYAN: Style = AnsiColor::Cyan.on_default();

/// The flags of `agentkit serve` and `agentkit-serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The project, or a folder of projects.
    #[arg(long, default_value = ".", value_name = "PATH")]
    dir: PathBuf,
    /// The host configuration file (TOML): `[server]`, `[auth]` and
    /// `[auth.oidc]`, secrets by reference only (docs/reference/cli.md).
    /// A flag, or its environment variable, wins over the file.
    #[arg(long, env = "AGENTKIT_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// The port to listen on (0 picks a free one) [default: 3000].
    #[arg(long)]
    port: Option<u16>,
    /// The address to listen on [default: 127.0.0.1]. Anything but
    /// loopback is reachable from the network: configure auth
    /// (--bearer-token, OIDC) first.
    #[arg(long)]
    host: Option<IpAddr>,
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
    /// The operator token: its holder may list, stream, follow up, stop
    /// and resolve approvals on every session of every agent, whoever
    /// owns it (under --dev the loopback caller is an operator anyway).
    #[arg(
        long,
        env = "AGENTKIT_OPERATOR_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    operator_token: Option<String>,
    /// A model provider's API key, as PROVIDER=KEY (repeatable); wins over
    /// the environment and `agentkit login`. Visible in the process list:
    /// prefer the environment on shared machines.
    #[arg(long = "api-key", value_name = "PROVIDER=KEY")]
    api_key: Vec<String>,
    /// The URL peer agents reach this host at, when its loopback address
    /// is not reachable from where turns run (default: the bound address).
    #[arg(long, env = "AGENTKIT_PUBLIC_URL", value_name = "URL")]
    public_url: Option<String>,
    /// Let A2A push notifications (webhooks a client registers for its
    /// tasks) go to loopback, private and link-local addresses; by default
    /// only public addresses are called.
    #[arg(long)]
    a2a_push_private_networks: bool,
    /// Mount agents under /SLUG (multi) or the only agent at the root.
    #[arg(long, value_enum, default_value_t = MountMode::Multi)]
    mode: MountMode,
    /// Do not fire schedules on their cron cadence (under --dev they never
    /// fire by themselves; dispatch them with POST /v1/dev/schedules/ID).
    #[arg(long)]
    no_schedules: bool,
    /// Do not serve the web playground (/SLUG/playground); /docs stays.
    #[arg(long)]
    no_playground: bool,
    /// Share sessions, event logs and leases with every host started on
    /// this PostgreSQL database (postgres://user@host:port/database);
    /// migrations are applied at start. See the scale-out guide.
    #[arg(
        long,
        env = "AGENTKIT_DATABASE_URL",
        hide_env_values = true,
        value_name = "URL"
    )]
    database_url: Option<String>,
    /// How long a client may take to send a request's headers; also how
    /// long an idle keep-alive connection is kept.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = humantime::parse_duration)]
    header_timeout: Duration,
    /// How long a request may take to be answered (streams excepted; MCP
    /// and tool calls get their own waits on top).
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = humantime::parse_duration)]
    request_timeout: Duration,
    /// How long a write to a client may make no progress before the
    /// connection is dropped (a stream follower that stopped reading).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = humantime::parse_duration)]
    stall_timeout: Duration,
    /// How long a request's body may take to arrive after its headers,
    /// beyond what --body-min-rate earns; then it is answered 408 and the
    /// connection closed.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = humantime::parse_duration)]
    body_timeout: Duration,
    /// The slowest body upload kept, in bytes per second: each this many
    /// bytes received extend the body timeout by one second (0: the body
    /// timeout bounds the whole upload).
    #[arg(long, value_name = "BYTES", default_value_t = 500)]
    body_min_rate: u64,
    /// The most connections open at once (default: three quarters of the
    /// file-descriptor limit). At the cap a new connection closes the
    /// oldest one that has not completed a request, else the longest idle
    /// one; when all are busy it waits in the listen backlog.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: Option<u32>,
    /// The most turns in flight on the host at once (default: a twentieth
    /// of the file-descriptor limit, at least 16); past it a new turn is
    /// answered 503 overloaded with Retry-After.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_turns: Option<u32>,
    /// The most turns in flight per principal of each agent (default: no
    /// bound); past it the principal's next turn is answered 429
    /// rate_limited with Retry-After while others are served. Operators
    /// are not counted.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_turns_per_principal: Option<u32>,
    /// The request rate of each principal of each agent, and of each
    /// client address on the routes without auth, as N/s, N/min or N/h
    /// (at most N at once, refilled evenly; default: none). Past it: 429
    /// rate_limited with Retry-After. Operators are not counted.
    #[arg(long, value_name = "RATE")]
    rate_limit: Option<agentkit::Rate>,
    /// The delivery rate of each webhook channel (/v1/channels/:id), as
    /// N/s, N/min or N/h, apart from the principals' budget (default:
    /// none). Past it: 429 rate_limited with Retry-After.
    #[arg(long, value_name = "RATE")]
    channel_rate_limit: Option<agentkit::Rate>,
    /// How many file descriptors below the limit a new turn is still
    /// admitted (default: a sixteenth of the limit, at least 32; 0: no
    /// check); past it a turn is answered 503 overloaded with Retry-After.
    #[arg(long, value_name = "N")]
    fd_headroom: Option<u64>,
    /// The threads of the HTTP edge's own runtime, where connections are
    /// read and refusals answered beside the busy turns (default: a
    /// quarter of the cores, at least one; none on one core; 0: the edge
    /// shares the turns' runtime).
    #[arg(long, value_name = "N")]
    edge_threads: Option<usize>,
    /// How logs are written on stderr: `text`, or `json` (one object a
    /// line, with the session, turn and trace ids where known).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Serve GET /metrics without authentication (for a scraper on a
    /// trusted network); otherwise it runs the host's auth chain.
    #[arg(long)]
    metrics_public: bool,
    /// The secret provider for `${secret:NAME}` references: a program and
    /// its arguments (split on whitespace, no shell) that prints the
    /// secret named by its last argument; run once per secret at start.
    #[arg(long, env = "AGENTKIT_SECRET_COMMAND", value_name = "COMMAND")]
    secret_command: Option<String>,
    /// A host variable the secret command also receives (repeatable);
    /// nothing else of the environment but PATH, HOME and the locale.
    #[arg(long = "secret-command-env", value_name = "NAME")]
    secret_command_env: Vec<String>,
    /// How long the secret command may take for one secret.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = humantime::parse_duration)]
    secret_command_timeout: Duration,
    /// OIDC sign-in: the provider's issuer URL (its discovery document is
    /// fetched at start). People sign in at /login; the provider's
    /// access tokens are bearer tokens on the API (docs/guides/sso.md).
    #[arg(
        long,
        env = "AGENTKIT_OIDC_ISSUER",
        value_name = "URL",
        requires = "oidc_client_id"
    )]
    oidc_issuer: Option<String>,
    /// The client id registered at the provider.
    #[arg(long, env = "AGENTKIT_OIDC_CLIENT_ID", value_name = "ID")]
    oidc_client_id: Option<String>,
    /// The client secret BY REFERENCE: `${VAR}`, `${file:/run/secrets/x}`
    /// or `${secret:name}` (left out: a public client, PKCE only).
    #[arg(long, env = "AGENTKIT_OIDC_CLIENT_SECRET", value_name = "REF")]
    oidc_client_secret: Option<String>,
    /// Scopes besides `openid` (comma-separated; default `profile,email`).
    #[arg(
        long,
        env = "AGENTKIT_OIDC_SCOPES",
        value_delimiter = ',',
        value_name = "SCOPES"
    )]
    oidc_scopes: Vec<String>,
    /// Accepted audiences of the provider's access tokens sent as bearer
    /// tokens, besides the client id (comma-separated).
    #[arg(
        long,
        env = "AGENTKIT_OIDC_AUDIENCES",
        value_delimiter = ',',
        value_name = "AUD"
    )]
    oidc_audiences: Vec<String>,
    /// How long a sign-in lasts (the session cookie's lifetime)
    /// [default: 8h].
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    oidc_session_ttl: Option<Duration>,
}

impl ServeArgs {
    /// `--log-format json`.
    pub fn log_json(&self) -> bool {
        matches!(self.log_format, LogFormat::Json)
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum MountMode {
    Multi,
    Single,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Logs go to stderr, filtered by `AGENTKIT_LOG` (else `default`).
pub fn install_tracing(default: &str) {
    install_tracing_as(default, false);
}

/// Logs go to stderr, filtered by `AGENTKIT_LOG` (else `default`), as
/// text or (`json`) one JSON object a line; either way the recent ones
/// are kept for `GET /v1/logs`.
pub fn install_tracing_as(default: &str, json: bool) {
    use tracing_subscriber::prelude::*;
    let filter = tracing_subscriber::EnvFilter::try_from_env("AGENTKIT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let registry = tracing_subscriber::registry().with(filter);
    let _ = if json {
        registry.with(agentkit::logs::log_layer(true)).try_init()
    } else {
        registry
            .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
            .with(agentkit::logs::log_layer(false))
            .try_init()
    };
}

/// `error: …` with every cause, on one line.
pub fn render_error(out: &mut impl Write, e: &anyhow::Error) -> io::Result<()> {
    write!(out, "{RED}error{RED:#}: {e}")?;
    for cause in e.chain().skip(1) {
        write!(out, ": {cause}")?;
    }
    writeln!(out)
}

/// What a server prints on stderr when it refuses an invalid project: each
/// diagnostic, then the count.
pub fn render_refusal(out: &mut impl Write, diagnostics: &agentkit::Diagnostics) -> io::Result<()> {
    for d in diagnostics {
        writeln!(out, "{d}")?;
    }
    writeln!(
        out,
        "{RED}error{RED:#}: not serving: the project has {} error(s)",
        diagnostics.error_count()
    )
}

/// The whole of `agentkit-serve` after parsing: logging, serving, and the
/// exit code.
pub fn serve_main(args: ServeArgs) -> ExitCode {
    install_tracing_as(SERVE_LOG_DEFAULT, args.log_json());
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            let _ = render_error(&mut anstream::stderr(), &e);
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// Serves until Ctrl-C or SIGTERM. `Ok(1)` when the project is invalid
/// (its diagnostics rendered on stderr); `Err` when the server cannot
/// start.
pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    match agentkit::raise_fd_limit() {
        Ok(limit) => tracing::info!(
            soft = limit.soft,
            hard = limit.hard,
            raised_from = ?limit.raised_from,
            "file-descriptor limit"
        ),
        Err(e) => tracing::warn!(error = %e, "cannot raise the file-descriptor limit"),
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(serve(args))
}

/// The options: the defaults, then the host configuration file, then the
/// flags (and their environment variables) over both.
async fn options(args: &ServeArgs) -> anyhow::Result<agentkit::ServeOptions> {
    let mut providers = agentkit::credentials::resolve_providers(|k| std::env::var(k).ok());
    agentkit::credentials::apply_api_keys(&mut providers, &args.api_key)?;
    let telemetry = agentkit::TelemetryOptions::from_env(|k| std::env::var(k).ok())?;
    let mut options = agentkit::ServeOptions {
        telemetry,
        dev: args.dev,
        mode: match args.mode {
            MountMode::Multi => agentkit::Mode::Multi,
            MountMode::Single => agentkit::Mode::Single,
        },
        allow_anonymous: args.allow_anonymous,
        a2a_push_private_networks: args.a2a_push_private_networks,
        schedules: !args.no_schedules,
        playground: !args.no_playground,
        default_model: std::env::var("AGENTKIT_MODEL")
            .ok()
            .filter(|m| !m.is_empty()),
        env: agentkit::EnvLookup::process(),
        secret_command: args
            .secret_command
            .as_deref()
            .and_then(agentkit::secrets::SecretCommand::parse)
            .map(|command| agentkit::secrets::SecretCommand {
                pass_env: args.secret_command_env.clone(),
                timeout: args.secret_command_timeout,
                ..command
            }),
        providers,
        edge: agentkit::EdgeOptions {
            header_read_timeout: args.header_timeout,
            request_timeout: args.request_timeout,
            write_stall_timeout: args.stall_timeout,
            body_read_timeout: args.body_timeout,
            body_min_rate: args.body_min_rate,
            max_connections: args.max_connections.map(|n| n as usize),
            max_turns: args.max_turns.map(|n| n as usize),
            max_turns_per_principal: args.max_turns_per_principal.map(|n| n as usize),
            rate_limit: args.rate_limit,
            channel_rate_limit: args.channel_rate_limit,
            fd_headroom: args.fd_headroom,
            edge_threads: args.edge_threads,
        },
        release_memory: Some(agentkit::MemoryRelease(std::sync::Arc::new(
            crate::allocator::release,
        ))),
        ..agentkit::ServeOptions::default()
    };
    if let Some(path) = &args.config {
        let config = agentkit::read_host_config(path)?;
        agentkit::apply_host_config(&config, &mut options).await?;
    }
    override_with_flags(args, &mut options);
    Ok(options)
}

/// What the command line names, over the file's values.
fn override_with_flags(args: &ServeArgs, options: &mut agentkit::ServeOptions) {
    fn set<T: Clone>(target: &mut T, flag: &Option<T>) {
        if let Some(value) = flag {
            *target = value.clone();
        }
    }
    fn set_some<T: Clone>(target: &mut Option<T>, flag: &Option<T>) {
        if flag.is_some() {
            target.clone_from(flag);
        }
    }
    set(&mut options.host, &args.host);
    set(&mut options.port, &args.port);
    set_some(&mut options.state_root, &args.state_root);
    set_some(&mut options.bearer_token, &args.bearer_token);
    set_some(&mut options.operator_token, &args.operator_token);
    set_some(&mut options.public_url, &args.public_url);
    set_some(&mut options.database_url, &args.database_url);
    if args.metrics_public {
        options.telemetry.metrics_public = true;
    }
    if args.allow_anonymous {
        // It conflicts with `--bearer-token`, not with the file's token:
        // the flag wins.
        options.bearer_token = None;
    }
    if let Some(issuer) = &args.oidc_issuer {
        let oidc = options
            .oidc
            .get_or_insert_with(|| agentkit::OidcOptions::new(issuer.clone(), String::new()));
        oidc.issuer.clone_from(issuer);
    }
    if let Some(oidc) = options.oidc.as_mut() {
        set(&mut oidc.client_id, &args.oidc_client_id);
        set_some(&mut oidc.client_secret, &args.oidc_client_secret);
        if !args.oidc_scopes.is_empty() {
            oidc.scopes = args.oidc_scopes.clone();
        }
        if !args.oidc_audiences.is_empty() {
            oidc.audiences = args.oidc_audiences.clone();
        }
        set(&mut oidc.session_ttl, &args.oidc_session_ttl);
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    // Before the server answers anything: a SIGTERM sent as soon as it is
    // healthy shuts it down gracefully instead of killing it.
    let stop = agentkit::shutdown_signal();
    let options = match options(&args).await {
        Ok(options) => options,
        Err(e) => {
            if let Some(agentkit::Error::HostConfig { diagnostics, .. }) = e.downcast_ref() {
                for d in diagnostics {
                    writeln!(anstream::stderr(), "{d}")?;
                }
            }
            return Err(e.context("not serving"));
        }
    };
    let warnings = Warnings {
        dev_fallback: options.dev && options.default_model.is_none(),
        exposed: !options.host.is_loopback()
            && options.bearer_token.is_none()
            && options.oidc.is_none(),
        anonymous: !options.host.is_loopback() && options.allow_anonymous,
    };
    let handle = match agentkit::serve(&args.dir, options).await {
        Ok(h) => h,
        Err(agentkit::Error::Invalid { diagnostics }) => {
            render_refusal(&mut anstream::stderr(), &diagnostics)?;
            return Ok(ExitCode::from(EXIT_INVALID));
        }
        Err(e) => return Err(e).context(format!("cannot serve `{}`", args.dir.display())),
    };
    tracing::info!(url = %handle.url(), agents = ?handle.slugs(), "listening");
    banner(&mut anstream::stdout(), &handle, warnings)?;
    stop.await;
    tracing::info!("shutting down: interrupting running turns and syncing logs");
    handle.close().await;
    Ok(ExitCode::SUCCESS)
}

/// What the banner warns about.
#[derive(Debug, Clone, Copy)]
struct Warnings {
    /// `--dev` without `AGENTKIT_MODEL`: model-less agents run `test`.
    dev_fallback: bool,
    /// Beyond loopback without `--bearer-token`.
    exposed: bool,
    /// Beyond loopback with `--allow-anonymous`.
    anonymous: bool,
}

/// Where the server listens, each agent's mount, and the warnings.
fn banner(
    out: &mut impl Write,
    handle: &agentkit::ServeHandle,
    warnings: Warnings,
) -> io::Result<()> {
    let slugs = handle.slugs();
    let url = handle.url();
    let plural = if slugs.len() == 1 { "" } else { "s" };
    writeln!(
        out,
        "{GREEN}{} agent{plural}{GREEN:#} listening on {url}",
        slugs.len(),
    )?;
    if slugs.first().is_some_and(|s| handle.agent_url(s) != url) {
        writeln!(out, "  index: {url}/")?;
    }
    for slug in &slugs {
        let base = handle.agent_url(slug);
        let path = base.strip_prefix(&url).unwrap_or(&base);
        writeln!(out, "  {CYAN}/{slug}{CYAN:#} → {path}/v1/*")?;
        if let Some(playground) = handle.playground_url(slug) {
            writeln!(out, "    playground: {playground}")?;
        }
    }
    writeln!(out, "  docs: {}", handle.docs_url())?;
    if warnings.dev_fallback {
        writeln!(
            out,
            "{YELLOW}dev{YELLOW:#}: agents without a model use the offline `test` model"
        )?;
    }
    if warnings.anonymous {
        writeln!(
            out,
            "{YELLOW}warning{YELLOW:#}: listening beyond loopback with --allow-anonymous: anyone who reaches this address is admitted"
        )?;
    } else if warnings.exposed {
        writeln!(
            out,
            "{YELLOW}warning{YELLOW:#}: listening beyond loopback without --bearer-token: callers need an authored auth chain or get 401"
        )?;
    }
    out.flush()
}
