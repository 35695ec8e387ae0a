//! `agentkit eval`: the project's evals against an ephemeral server (or
//! `--url`), with reports for people (live progress, plain lines, a
//! table), scripts (`--json`) and CI (`--junit`), cassettes
//! (`--record` / `--replay`) and a baseline to compare with.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use agentkit::client::Client;
use agentkit::evals::{self, Progress, RunOptions};
use anyhow::Context;

use crate::boot::{boot_with, tokio_runtime};
use crate::render;
use agentkit_cli::EXIT_INVALID;

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct EvalArgs {
    #[command(subcommand)]
    command: Option<EvalCommand>,
    /// Case ids (`cities/paris`), file ids (`cities`: all its cases) or
    /// folders of eval files; none runs every case.
    #[arg(value_name = "SELECTOR")]
    selectors: Vec<String>,
    /// The project (or a folder of projects; pick one with --agent).
    #[arg(long, default_value = ".", value_name = "PATH")]
    dir: PathBuf,
    /// The agent whose evals run, when the folder holds several.
    #[arg(long, value_name = "SLUG")]
    agent: Option<String>,
    /// Only cases with this tag (repeatable: any of them).
    #[arg(long = "tag", value_name = "TAG")]
    tags: Vec<String>,
    /// Print the selected case ids with their tags and descriptions, and
    /// run nothing.
    #[arg(long)]
    list: bool,
    /// Print one JSON document (the report, or the list) on stdout.
    #[arg(long)]
    json: bool,
    /// Also write a JUnit XML report to this file.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Plain lines as cases finish, even on a terminal.
    #[arg(long)]
    no_stream: bool,
    /// Run every case this many times (overrides `iterations`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    iterations: Option<u32>,
    /// At most this many case iterations at once (and never more than
    /// `max_concurrency` in evals.toml).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    concurrency: Option<u32>,
    /// Run against this server instead of booting one.
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// Sent as `Authorization: Bearer <token>` (with --url).
    #[arg(
        long,
        env = "AGENTKIT_BEARER_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    bearer_token: Option<String>,
    /// Run the agent (and judges without a model) on this model, e.g.
    /// `test` or `openai:gpt-4.1-mini`.
    #[arg(long, value_name = "PROVIDER:MODEL")]
    model: Option<String>,
    /// A model provider's API key, as PROVIDER=KEY (repeatable).
    #[arg(long = "api-key", value_name = "PROVIDER=KEY")]
    api_key: Vec<String>,
    /// Compare with an earlier `--json` report; a regression exits 1.
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// The pass-rate drop (0 to 1) against --baseline that is still no
    /// regression.
    #[arg(
        long,
        default_value_t = 0.0,
        value_name = "RATE",
        requires = "baseline"
    )]
    tolerance: f64,
    /// Record every model exchange (judges' included) into this folder.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["replay", "url"])]
    record: Option<PathBuf>,
    /// Answer every model request from this folder's recordings, offline;
    /// a request that matches none fails its case with a diff.
    #[arg(long, value_name = "DIR", conflicts_with = "url")]
    replay: Option<PathBuf>,
}

#[derive(Debug, clap::Subcommand)]
enum EvalCommand {
    /// Write a stored session as an eval case, with a recording of each
    /// of its model steps in `evals/cassettes/`.
    ///
    /// The case sends the session's messages again and expects what
    /// happened: how each turn ended, the tools it called (in order) and
    /// the start of its reply. `agentkit eval --replay evals/cassettes`
    /// then passes on the unchanged project, offline, and fails when a
    /// request or the behaviour changes. Reading the recordings needs
    /// `--dev` or an operator token on the server.
    Add(crate::replay::EvalAddArgs),
}

/// Exit 0 when every case passed (and nothing regressed), 1 otherwise, 2
/// on usage or project errors.
pub(crate) fn eval(mut args: EvalArgs) -> anyhow::Result<ExitCode> {
    if let Some(EvalCommand::Add(add)) = args.command.take() {
        return crate::replay::eval_add(add);
    }
    anyhow::ensure!(
        (0.0..=1.0).contains(&args.tolerance),
        "--tolerance must be between 0 and 1"
    );
    let found = agentkit::discover(&args.dir)
        .with_context(|| format!("cannot read `{}`", args.dir.display()))?;
    if found.diagnostics.has_errors() {
        anyhow::bail!(
            "`{}` has {} error(s); run `agentkit validate --dir {}`",
            args.dir.display(),
            found.diagnostics.error_count(),
            args.dir.display()
        );
    }
    let project = pick_project(&found.host, args.agent.as_deref(), &args)?;
    let Some(project_evals) = &project.evals else {
        return Err(evals::Error::NoEvals {
            agent: project.slug.clone(),
        }
        .into());
    };
    let cases = evals::select(project_evals, &args.selectors, &args.tags)?;
    let mut out = anstream::stdout();
    if args.list {
        if args.json {
            render::json(&mut out, &evals::list_json(&project.slug, &cases))?;
        } else {
            evals::text::write_list(&mut out, &cases)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let baseline = match &args.baseline {
        Some(path) => Some(evals::read_baseline(path)?),
        None => None,
    };
    let forced = match &args.model {
        Some(m) => Some(
            agentkit::manifest::parse_model_string(m)
                .map_err(|(message, _)| anyhow::anyhow!("--model: {message}"))?,
        ),
        None => None,
    };
    let mut providers = crate::login::provider_config(&args.api_key)?;
    if let Some(dir) = &args.record {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create `{}`", dir.display()))?;
        providers.cassette = Some(agentkit::Cassette::Record(dir.clone()));
    }
    if let Some(dir) = &args.replay {
        anyhow::ensure!(
            dir.is_dir(),
            "--replay: `{}` is not a folder of recordings",
            dir.display()
        );
        providers.cassette = Some(agentkit::Cassette::Replay(dir.clone()));
    }
    let config = project_evals.config.clone();
    let max = config.as_ref().map_or(1, |c| c.max_concurrency);
    let concurrency = args.concurrency.map_or(max, |c| c.min(max)) as usize;
    let default_model = forced
        .clone()
        .or_else(|| project.agent.config.model.clone())
        .or_else(|| {
            std::env::var("AGENTKIT_MODEL")
                .ok()
                .and_then(|m| agentkit::manifest::parse_model_string(&m).ok())
        })
        .or_else(|| agentkit::manifest::parse_model_string("test").ok());
    let options = RunOptions {
        agent: project.slug.clone(),
        model: args.model.clone(),
        concurrency,
        iterations: args.iterations,
        dry_run: config.as_ref().is_some_and(|c| c.dry_run),
        judge: evals::JudgeOptions {
            default_model,
            dir: project.agent.dir.clone(),
            providers: providers.clone(),
        },
        ..RunOptions::default()
    };
    let runs: usize = cases
        .iter()
        .map(|c| args.iterations.unwrap_or(c.iterations) as usize)
        .sum();
    let live = !args.json && !args.no_stream && std::io::stderr().is_terminal();
    let bar = live.then(|| evals::text::Bar::new(anstream::stderr(), runs));
    let lines = (!args.json && !live).then(|| evals::text::Lines::new(anstream::stdout()));
    let progress: &dyn Progress = match (&bar, &lines) {
        (Some(bar), _) => bar,
        (_, Some(lines)) => lines,
        _ => &evals::NoProgress,
    };

    let report = tokio_runtime()?.block_on(async {
        let mut server = None;
        let mut _state = None;
        let client = match &args.url {
            Some(url) => {
                Client::resolve(url, Some(&project.slug), args.bearer_token.clone()).await?
            }
            None => {
                let state = tempfile::Builder::new()
                    .prefix("agentkit-eval-")
                    .tempdir()
                    .context("cannot create a temporary state root")?;
                let handle = boot_with(
                    &args.dir,
                    state.path(),
                    providers.clone(),
                    args.model.as_deref(),
                )
                .await?;
                _state = Some(state);
                let url = handle.agent_url(&project.slug);
                server = Some(handle);
                Client::new(&url, args.bearer_token.clone())
            }
        };
        let report = evals::run(&client, &cases, &options, progress).await;
        if let Some(handle) = server {
            handle.close().await;
        }
        anyhow::Ok(report)
    })?;
    if let Some(bar) = &bar {
        bar.clear();
    }
    let comparison = baseline
        .as_ref()
        .map(|b| evals::compare(b, &report, args.tolerance));
    if let Some(path) = &args.junit {
        std::fs::write(path, evals::junit_xml(&report))
            .with_context(|| format!("cannot write `{}`", path.display()))?;
    }
    if args.json {
        let mut doc = serde_json::to_value(&report)?;
        if let Some(c) = &comparison {
            doc["baseline"] = serde_json::to_value(c)?;
        }
        render::json(&mut out, &doc)?;
    } else {
        if live {
            evals::text::write_table(&mut out, &report)?;
        } else {
            evals::text::write_summary(&mut out, &report)?;
        }
        if let Some(c) = &comparison {
            evals::text::write_comparison(&mut out, c)?;
        }
        out.flush()?;
    }
    let regressed = comparison.as_ref().is_some_and(|c| c.regressed());
    Ok(if report.ok && !regressed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_INVALID)
    })
}

/// The project whose evals run: `--agent`, else the only one with evals.
fn pick_project<'a>(
    host: &'a agentkit::manifest::Host,
    agent: Option<&str>,
    args: &EvalArgs,
) -> anyhow::Result<&'a agentkit::manifest::Project> {
    let slugs = || {
        host.agents
            .iter()
            .map(|p| p.slug.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(slug) = agent {
        return host.project(slug).with_context(|| {
            format!(
                "`{}` has no agent `{slug}`; it holds {}",
                args.dir.display(),
                slugs()
            )
        });
    }
    let with_evals: Vec<&agentkit::manifest::Project> =
        host.agents.iter().filter(|p| p.evals.is_some()).collect();
    match (with_evals.as_slice(), host.agents.as_slice()) {
        ([one], _) => Ok(one),
        ([], [only]) => Ok(only),
        ([], _) => anyhow::bail!("no agent in `{}` has evals", args.dir.display()),
        (several, _) => anyhow::bail!(
            "several agents in `{}` have evals ({}); choose one with --agent SLUG",
            args.dir.display(),
            several
                .iter()
                .map(|p| p.slug.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}
