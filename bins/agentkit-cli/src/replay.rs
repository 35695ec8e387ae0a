//! `agentkit replay` (a stored session re-run against a project, answers
//! from its log, compared event by event) and `agentkit eval add` (a
//! stored session written as an eval case with its recordings). The
//! work is the facade's (`agentkit::replay`); this reads the flags and
//! the events, prints, and picks the exit code.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use agentkit::client::Client;
use anyhow::Context;

use crate::boot::tokio_runtime;

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["events", "url"])))]
pub(crate) struct ReplayArgs {
    /// The session's event log (NDJSON), as `GET …/events` or `agentkit run
    /// --events` writes it.
    #[arg(long, value_name = "FILE")]
    events: Option<PathBuf>,
    /// A running agent to read the session from (`GET …/events`).
    #[arg(long, value_name = "URL", requires = "session")]
    url: Option<String>,
    /// The session to replay (with --url).
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// The project to replay against.
    #[arg(long, default_value = ".", value_name = "PATH")]
    dir: PathBuf,
    /// The agent, when the folder (or --url's host) holds several.
    #[arg(long, value_name = "SLUG")]
    agent: Option<String>,
    /// Run the tools instead of taking their results from the log.
    #[arg(long)]
    live_tools: bool,
    /// Run this model live (`provider:id`) instead of answering from the
    /// log, and report where the new run departs from the old one.
    #[arg(long, value_name = "PROVIDER:MODEL")]
    model: Option<String>,
    /// A model provider's API key, as PROVIDER=KEY (repeatable; with
    /// --model).
    #[arg(long = "api-key", value_name = "PROVIDER=KEY", requires = "model")]
    api_key: Vec<String>,
    /// How long one replayed turn may take.
    #[arg(long, default_value = "120s", value_name = "DURATION", value_parser = parse_duration)]
    turn_timeout: Duration,
    /// Sent as `Authorization: Bearer <token>` (with --url).
    #[arg(
        long,
        env = "AGENTKIT_BEARER_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    bearer_token: Option<String>,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("`{s}` is not a duration: {e}"))
}

/// Exit 0 when the replay matches the recording, 1 at the first
/// divergence, 2 on usage errors (the command's `Err`).
pub(crate) fn replay(args: ReplayArgs) -> anyhow::Result<ExitCode> {
    tokio_runtime()?.block_on(replay_async(args))
}

async fn replay_async(args: ReplayArgs) -> anyhow::Result<ExitCode> {
    let events = match (&args.events, &args.url, &args.session) {
        (Some(path), _, _) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read `{}`", path.display()))?;
            agentkit::trajectory::parse_ndjson(&text)
                .with_context(|| format!("`{}` is not an event log", path.display()))?
        }
        (None, Some(url), Some(session)) => {
            let client =
                Client::resolve(url, args.agent.as_deref(), args.bearer_token.clone()).await?;
            client
                .events(session)
                .await
                .with_context(|| format!("cannot read session {session}"))?
        }
        _ => anyhow::bail!("give --events FILE, or --url URL and --session ID"),
    };
    let state = tempfile::Builder::new()
        .prefix("agentkit-replay-")
        .tempdir()
        .context("cannot create a temporary state root")?;
    let options = agentkit::replay::ReplayOptions {
        dir: args.dir.clone(),
        agent: args.agent.clone(),
        state_root: state.path().to_path_buf(),
        live_tools: args.live_tools,
        turn_timeout: args.turn_timeout,
        model: args.model.clone(),
        providers: crate::login::provider_config(&args.api_key)?,
    };
    let replayed = agentkit::replay::replay(&events, options).await?;
    let mut out = anstream::stdout();
    use std::io::Write;
    match &replayed.divergence {
        None => {
            writeln!(
                out,
                "identical: {} events compared (ids, times and streamed deltas aside)",
                replayed.compared
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Some(d) => {
            writeln!(
                out,
                "diverged after {} matching events:\n{d}",
                replayed.compared - 1
            )?;
            Ok(ExitCode::from(1))
        }
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct EvalAddArgs {
    /// The running agent (or host, with --agent) the session lives on.
    #[arg(long, value_name = "URL")]
    url: String,
    /// The session to keep as an eval case.
    #[arg(long, value_name = "ID")]
    session: String,
    /// The case's id (its file is `evals/<NAME>.eval.toml`); by default
    /// `sessions/<ID>`.
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// The project to write into.
    #[arg(long, default_value = ".", value_name = "PATH")]
    dir: PathBuf,
    /// The agent, when the host serves several.
    #[arg(long, value_name = "SLUG")]
    agent: Option<String>,
    /// Sent as `Authorization: Bearer <token>`.
    #[arg(
        long,
        env = "AGENTKIT_BEARER_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    bearer_token: Option<String>,
}

/// `agentkit eval add`.
pub(crate) fn eval_add(args: EvalAddArgs) -> anyhow::Result<ExitCode> {
    tokio_runtime()?.block_on(async {
        let client =
            Client::resolve(&args.url, args.agent.as_deref(), args.bearer_token.clone()).await?;
        let name = args
            .name
            .clone()
            .unwrap_or_else(|| format!("sessions/{}", args.session));
        let added =
            agentkit::replay::add_eval_case(&client, &args.session, &name, &args.dir).await?;
        let mut out = anstream::stdout();
        use std::io::Write;
        writeln!(
            out,
            "wrote eval case `{}` ({}) and {} recording(s) in {}",
            added.id,
            added.case_file.display(),
            added.recordings,
            added.cassette_dir.display()
        )?;
        for w in &added.warnings {
            writeln!(out, "warning: {w}")?;
        }
        writeln!(
            out,
            "check it offline: agentkit eval --dir {} --replay {} {}",
            args.dir.display(),
            added.cassette_dir.display(),
            added.id
        )?;
        Ok(ExitCode::SUCCESS)
    })
}
