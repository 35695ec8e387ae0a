//! Commands and flags, and what each command does with the facade.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};

use crate::render;

pub(crate) use agentkit_cli::EXIT_INVALID;

/// Build and serve AI agents from a folder of files.
#[derive(Debug, Parser)]
#[command(name = "agentkit", version, about, long_about = None, propagate_version = true, arg_required_else_help = true)]
pub(crate) struct Cli {
    /// When to use colours in output.
    #[arg(long, global = true, value_enum, default_value_t = Color::Auto)]
    pub(crate) color: Color,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum Color {
    Auto,
    Always,
    Never,
}

impl From<Color> for anstream::ColorChoice {
    fn from(c: Color) -> Self {
        match c {
            Color::Auto => anstream::ColorChoice::Auto,
            Color::Always => anstream::ColorChoice::Always,
            Color::Never => anstream::ColorChoice::Never,
        }
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check an agent project (or a folder of them) and report every problem.
    ///
    /// Exits 0 when there are no errors (warnings are allowed), 1 when there
    /// is any error, 2 on usage errors such as a missing folder.
    Validate {
        /// The project, or a folder of projects.
        #[arg(long, default_value = ".", value_name = "PATH")]
        dir: PathBuf,
        /// Print a JSON document of the diagnostics instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Describe what discovery found: agents, tools, skills, connections,
    /// subagents, channels and routes, hooks, schedules (with their next
    /// fire time in UTC), experiments and evals.
    ///
    /// With --url, asks a running server instead (`GET /v1/info`): the
    /// agent's MCP endpoint and the live status of its MCP connections.
    Info {
        /// The project, or a folder of projects.
        #[arg(long, default_value = ".", value_name = "PATH", conflicts_with = "url")]
        dir: PathBuf,
        /// Print the JSON document instead of text.
        #[arg(long)]
        json: bool,
        /// A running agent (or host): report its live state.
        #[arg(long, value_name = "URL")]
        url: Option<String>,
        /// The agent, when the host serves several (with --url).
        #[arg(long, value_name = "SLUG", requires = "url")]
        agent: Option<String>,
        /// Bearer token for the server (with --url).
        #[arg(long, env = "AGENTKIT_BEARER_TOKEN", hide_env_values = true)]
        bearer_token: Option<String>,
        /// The agent's A/B experiments: per-variant metrics and each
        /// variant against the control, with 95 % intervals (with --url).
        #[arg(long, requires = "url")]
        ab: bool,
    },
    /// Scaffold a new agent project; with no PATH, print the setup guide.
    ///
    /// Writes agent/agent.toml, agent/instructions.md, a working `echo`
    /// server tool (agent/tools/echo.toml + echo.py), an eval case that
    /// uses it (evals/evals.toml + evals/echo.eval.toml) and a .gitignore
    /// for the state folder. Never overwrites an existing file.
    Init {
        /// The folder to create the project in (its name becomes the slug).
        path: Option<PathBuf>,
    },
    /// Serve an agent project, or a folder of them, over HTTP.
    ///
    /// Every agent gets durable sessions with a replayable NDJSON event
    /// stream under /SLUG/v1/* (or /v1/* with --mode single). Stops
    /// cleanly on Ctrl-C or SIGTERM: running turns are recorded as
    /// interrupted and every log is synced.
    Serve(agentkit_cli::ServeArgs),
    /// Run turns against an ephemeral server and print the trajectory.
    ///
    /// Boots the project on a free port with a temporary state root outside
    /// it (or uses --url), sends each --message as a turn of one session,
    /// and prints the trajectory JSON. Exits 1 when a turn failed.
    Run(crate::chat::RunArgs),
    /// Chat with a running agent: a REPL that renders replies live, or one
    /// message with --message.
    ///
    /// In the REPL, `/new` starts a new session and `/exit` (or end of
    /// input) quits.
    Chat(crate::chat::ChatArgs),
    /// Call a server tool deterministically, with the input you choose and
    /// no model turn.
    ///
    /// Boots an ephemeral server for --dir (or uses --url), validates the
    /// input against the tool's schema, and prints the envelope {ok,
    /// toolName, callId, isError, result, durationMs}. Exits 1 when the
    /// tool returned an error result.
    Call(crate::call::CallArgs),
    /// Print the OpenAPI 3.1 document of an agent's HTTP API.
    ///
    /// Boots an ephemeral server for --dir and prints what the agent's
    /// `GET /v1/openapi.json` answers: every route with its request and
    /// response schemas, the custom channel routes included.
    Openapi(crate::call::OpenapiArgs),
    /// Summarise a saved event log (NDJSON) as trajectory JSON.
    ///
    /// Exits 1 when a turn failed, 2 when the file is not an event log.
    Trajectory(crate::chat::TrajectoryArgs),
    /// Run the project's evals against an ephemeral server and report
    /// every expectation.
    ///
    /// Boots the project on a free port with a temporary state root (or
    /// uses --url); eval sessions carry `purpose = "eval"`. Exits 0 when
    /// every case passed, 1 when one failed (or regressed against
    /// --baseline), 2 on usage or project errors (an unknown selector).
    Eval(crate::eval::EvalArgs),
    /// Re-run a stored session's turns against a project, offline.
    ///
    /// Reads the session's events (--events FILE, or --url and --session),
    /// boots the project (--dir) on a free port, sends each turn's message
    /// again with every model answer taken from the log (no provider is
    /// called) and every tool result too (unless --live-tools), then
    /// compares the new events with the recorded ones, ids, times and
    /// streamed deltas aside. Exits 0 when identical, 1 at the first
    /// divergence (shown as event index, field, before and after), 2 on
    /// usage errors or a session it cannot replay.
    Replay(crate::replay::ReplayArgs),
    /// GitHub webhook helpers: list channels and events, replay signed
    /// deliveries, forward live ones with `gh webhook forward`, check (and
    /// install) the repository webhook.
    Github(crate::github::GithubArgs),
    /// GitLab webhook helpers: list channels and events, replay a saved
    /// payload with `X-Gitlab-Token`.
    Gitlab(crate::packs::PackArgs),
    /// Bitbucket webhook helpers (Cloud and Data Center): list channels
    /// and events, replay a saved payload signed with `X-Hub-Signature`.
    Bitbucket(crate::packs::PackArgs),
    /// MCP connections that use OAuth: log in, and show each one's state.
    Mcp(crate::mcp::McpArgs),
    /// Slack app helpers: set up Slack step by step, add a slack channel
    /// with its app manifests, write the app manifest a slack channel
    /// needs, check its tokens and scopes.
    Slack(crate::slack::SlackArgs),
    /// Store a model provider's API key (file mode 0600 in your config
    /// directory). Keys resolve in this order: the environment
    /// (OPENAI_API_KEY, ANTHROPIC_API_KEY), then the stored key.
    Login(crate::login::LoginArgs),
    /// Remove a stored API key.
    Logout(crate::login::LogoutArgs),
    /// Show which key source is active for each provider (never the key).
    Whoami(crate::login::WhoamiArgs),
    /// Convert a project of the TypeScript framework into agentkit's files.
    ///
    /// Converts instructions, skills, subagents, agent settings, MCP
    /// connections, GitHub and Slack pack options, agent tools, schedules,
    /// workspace seeds and eval cases. With Node (on PATH, or --node), loads the
    /// project's own modules under a stand-in of the original package to
    /// read their real values (zod schemas through zod's own converter),
    /// and writes server tools, route handlers, schedules and hooks whose
    /// command runs the original code under Node, talking to agentkit through the
    /// host bridge. Prints what it could not convert, with the reason and
    /// what to write instead, then validates the output. Exits 1 when the
    /// output has validation errors or a module failed to load under Node,
    /// 2 when it cannot migrate (no agent/ folder, a non-empty --to
    /// without --force).
    Migrate(crate::migrate::MigrateArgs),
    /// The shared PostgreSQL database of scaled-out hosts: apply its
    /// schema migrations, or show which are applied.
    Db(crate::db::DbArgs),
}

impl Cli {
    /// The log filter when `AGENTKIT_LOG` is unset: a server logs what it
    /// serves (as `agentkit-serve` does); other commands only warnings.
    pub(crate) fn default_log(&self) -> &'static str {
        match self.command {
            Command::Serve(_) => agentkit_cli::SERVE_LOG_DEFAULT,
            _ => "warn",
        }
    }

    /// `serve --log-format json`.
    pub(crate) fn log_json(&self) -> bool {
        match &self.command {
            Command::Serve(args) => args.log_json(),
            _ => false,
        }
    }
}

pub(crate) fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Validate { dir, json } => validate(dir, json),
        Command::Info {
            url: Some(url),
            json,
            agent,
            bearer_token,
            ab,
            ..
        } => live_info(&url, agent.as_deref(), bearer_token, json, ab),
        Command::Info { dir, json, .. } => info(dir, json),
        Command::Init { path } => init(path),
        Command::Serve(args) => agentkit_cli::run(args),
        Command::Run(args) => crate::chat::run(args),
        Command::Chat(args) => crate::chat::chat(args),
        Command::Trajectory(args) => crate::chat::trajectory(args),
        Command::Call(args) => crate::call::call(args),
        Command::Openapi(args) => crate::call::openapi(args),
        Command::Eval(args) => crate::eval::eval(args),
        Command::Replay(args) => crate::replay::replay(args),
        Command::Github(args) => crate::github::github(args),
        Command::Gitlab(args) => crate::packs::run(agentkit::webhooks::Provider::Gitlab, args),
        Command::Bitbucket(args) => {
            crate::packs::run(agentkit::webhooks::Provider::Bitbucket, args)
        }
        Command::Mcp(args) => crate::mcp::mcp(args),
        Command::Slack(args) => crate::slack::slack(args),
        Command::Login(args) => crate::login::login(args),
        Command::Logout(args) => crate::login::logout(args),
        Command::Whoami(args) => crate::login::whoami(args),
        Command::Migrate(args) => crate::migrate::migrate(args),
        Command::Db(args) => crate::db::db(args),
    }
}

fn validate(dir: PathBuf, json: bool) -> anyhow::Result<ExitCode> {
    // The rule serving applies: an empty variable counts as unset.
    let env = agentkit::EnvLookup::process();
    let found = agentkit::validate(&dir, |name| env.is_set(name))
        .with_context(|| format!("cannot validate `{}`", dir.display()))?;
    let mut out = anstream::stdout();
    if json {
        render::validate_json(&mut out, &found)?;
    } else {
        render::diagnostics(&mut out, &found)?;
    }
    Ok(if found.diagnostics.has_errors() {
        ExitCode::from(EXIT_INVALID)
    } else {
        ExitCode::SUCCESS
    })
}

fn info(dir: PathBuf, json: bool) -> anyhow::Result<ExitCode> {
    let found =
        agentkit::discover(&dir).with_context(|| format!("cannot read `{}`", dir.display()))?;
    let now = chrono::Utc::now();
    let mut out = anstream::stdout();
    if json {
        render::json(&mut out, &agentkit::info::info_json(&found, now))?;
    } else {
        render::info(&mut out, &found, now)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `agentkit info --url`: a running agent's `/v1/info`, with the live
/// status of its MCP connections.
fn live_info(
    url: &str,
    agent: Option<&str>,
    bearer_token: Option<String>,
    json: bool,
    ab: bool,
) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    if ab {
        let report = runtime.block_on(async {
            let client = agentkit::client::Client::resolve(url, agent, bearer_token).await?;
            client.ab_report().await
        })?;
        let mut out = anstream::stdout();
        if json {
            render::json(&mut out, &serde_json::to_value(&report)?)?;
        } else {
            render::ab_report(&mut out, &report)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let info = runtime.block_on(async {
        let client = agentkit::client::Client::resolve(url, agent, bearer_token).await?;
        client.info().await
    })?;
    let mut out = anstream::stdout();
    if json {
        render::json(&mut out, &serde_json::to_value(&info)?)?;
    } else {
        render::live_info(&mut out, &info)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn init(path: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let Some(path) = path else {
        print!("{}", agentkit::init::SETUP_GUIDE);
        return Ok(ExitCode::SUCCESS);
    };
    let written = agentkit::init::init(&path)?;
    let mut out = anstream::stdout();
    render::init(&mut out, &path, &written)?;
    Ok(ExitCode::SUCCESS)
}
