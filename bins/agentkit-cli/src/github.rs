//! `agentkit github events | replay | forward | doctor`: argument parsing
//! and output; the work is in `agentkit::github` (and `github_doctor`).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;

use crate::boot::tokio_runtime;

#[derive(Debug, clap::Args)]
pub(crate) struct GithubArgs {
    #[command(subcommand)]
    command: GithubCommand,
}

#[derive(Debug, Subcommand)]
enum GithubCommand {
    /// List the GitHub channels: their URL path and the webhook events
    /// each one publishes.
    Events {
        /// The project, or a folder of projects.
        #[arg(long, default_value = ".", value_name = "PATH")]
        dir: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Sign and POST GitHub deliveries at the GitHub channels of --dir on
    /// a running server: a saved payload (--payload), or payloads
    /// synthesised from a pull request read through the API.
    Replay {
        /// `https://github.com/OWNER/REPO/pull/N` or `OWNER/REPO#N`.
        pr: Option<String>,
        /// A saved payload (its event is guessed unless --events names it).
        #[arg(long, value_name = "FILE", conflicts_with = "pr")]
        payload: Option<PathBuf>,
        #[arg(long, default_value = ".", value_name = "PATH")]
        dir: PathBuf,
        /// The server (default http://127.0.0.1:3000).
        #[arg(long)]
        url: Option<String>,
        /// Events to synthesise (comma-separated), or `*` for the
        /// channel's declared events. Default: pull_request.
        #[arg(long)]
        events: Option<String>,
        /// The `action` of pull_request deliveries (default `opened`).
        #[arg(long)]
        action: Option<String>,
        /// The check_suite conclusion (default `success`).
        #[arg(long)]
        conclusion: Option<String>,
        /// The body of an issue_comment delivery.
        #[arg(long)]
        comment: Option<String>,
        /// The `context` of a `status` (commit status) delivery on the pull
        /// request's head commit, e.g. `ci/build` (default `ci`; its state
        /// is --conclusion). Without --events, it replays `status`.
        #[arg(long, value_name = "NAME", conflicts_with = "payload")]
        context: Option<String>,
        /// Signs deliveries (X-Hub-Signature-256).
        #[arg(long, env = "GITHUB_WEBHOOK_SECRET", hide_env_values = true)]
        secret: Option<String>,
        /// Only this channel (or agent slug).
        #[arg(long)]
        channel: Option<String>,
        /// Print (or write to --out) the payloads instead of POSTing.
        #[arg(long)]
        dry_run: bool,
        #[arg(long, value_name = "DIR", requires = "dry_run")]
        out: Option<PathBuf>,
        /// The REST API base for reading the pull request.
        #[arg(long, env = "GITHUB_API_URL")]
        api_url: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Check the GitHub channel's token or App and the repository webhook
    /// that feeds it (URL, secret, content type, events) through the
    /// GitHub API at the channel's `api_url`; --install creates or repairs
    /// the hook. Exits 0 when every check passes, 1 otherwise.
    Doctor {
        #[arg(long, default_value = ".", value_name = "PATH")]
        dir: PathBuf,
        /// OWNER/REPO (default: the `origin` remote of --dir).
        #[arg(long)]
        repo: Option<String>,
        /// The server's public base URL: the hook must deliver to
        /// `<URL>/<slug>/v1/channels/<id>` (without it, any host with that
        /// path matches). Needed by --install.
        #[arg(long, value_name = "URL")]
        url: Option<String>,
        /// The channel (its id, or agent slug) when there are several.
        #[arg(long)]
        channel: Option<String>,
        /// Create the hook, or update it: `content_type=json`, the events
        /// the channel publishes, the secret from the environment.
        #[arg(long)]
        install: bool,
        #[arg(long)]
        json: bool,
    },
    /// Forward live deliveries with `gh webhook forward` to the GitHub
    /// channel of --dir.
    Forward {
        #[arg(long, default_value = ".", value_name = "PATH")]
        dir: PathBuf,
        /// OWNER/REPO (default: the `origin` remote of --dir).
        #[arg(long, conflicts_with = "org")]
        repo: Option<String>,
        /// Forward every repository's deliveries of this organisation
        /// (an organisation webhook; needs owner rights) instead of one
        /// repository's.
        #[arg(long, value_name = "ORG")]
        org: Option<String>,
        /// Subscribe to these events only (comma-separated); each must be
        /// one a matching channel publishes. Default: every event the
        /// matching channels publish.
        #[arg(long, value_name = "EVENTS")]
        events: Option<String>,
        /// The server (default http://127.0.0.1:3000), e.g. a tunnel.
        #[arg(long)]
        url: Option<String>,
        /// Only the channels of this agent (on a multi-agent host).
        #[arg(long)]
        slug: Option<String>,
        /// Only this channel (its id, or an agent slug).
        #[arg(long)]
        channel: Option<String>,
        #[arg(long, env = "GITHUB_WEBHOOK_SECRET", hide_env_values = true)]
        secret: Option<String>,
    },
}

pub(crate) fn github(args: GithubArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        GithubCommand::Events { dir, json } => {
            crate::packs::print_targets(agentkit::webhooks::Provider::Github, &dir, json)
        }
        GithubCommand::Replay {
            pr,
            payload,
            dir,
            url,
            events,
            action,
            conclusion,
            comment,
            context,
            secret,
            channel,
            dry_run,
            out,
            api_url,
            json,
        } => {
            let options = agentkit::github::ReplayOptions {
                dir,
                url,
                payload,
                pr,
                events,
                action,
                conclusion,
                comment,
                context,
                secret,
                channel,
                dry_run,
                out,
                api_url,
                token: std::env::var("GITHUB_TOKEN")
                    .or_else(|_| std::env::var("GH_TOKEN"))
                    .ok(),
            };
            let outcomes = tokio_runtime()?.block_on(agentkit::github::replay(&options))?;
            if json {
                println!("{}", serde_json::to_string_pretty(&outcomes)?);
            } else {
                for o in &outcomes {
                    match (o.status, &o.file) {
                        (Some(s), _) => println!("{} → {}: {s} {}", o.event, o.url, o.response),
                        (None, Some(f)) => println!("{} → {f}", o.event),
                        (None, None) => println!("{}", serde_json::to_string_pretty(&o.response)?),
                    }
                }
            }
            let failed = outcomes.iter().any(|o| o.status.is_some_and(|s| s >= 400));
            Ok(if failed {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        GithubCommand::Doctor {
            dir,
            repo,
            url,
            channel,
            install,
            json,
        } => {
            let repo = match repo {
                Some(r) => r,
                None => origin_repo(&dir).context(
                    "cannot infer the repository from the `origin` remote; pass --repo OWNER/REPO",
                )?,
            };
            let env = agentkit::EnvLookup::process();
            let report = tokio_runtime()?.block_on(crate::github_doctor::doctor(
                &crate::github_doctor::DoctorRequest {
                    dir,
                    repo,
                    url,
                    channel,
                    install,
                },
                &env,
            ))?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                println!(
                    "github channel `{}` of agent `{}`, repository {}",
                    report.channel, report.slug, report.repo
                );
                for line in &report.installed {
                    println!("  {line}");
                }
                for c in &report.checks {
                    let mark = if c.ok { "ok " } else { "FIX" };
                    println!("  {mark} {}: {}", c.name, c.detail);
                    if let Some(fix) = &c.fix {
                        println!("      → {fix}");
                    }
                }
            }
            Ok(if report.ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        GithubCommand::Forward {
            dir,
            repo,
            org,
            events,
            url,
            slug,
            channel,
            secret,
        } => {
            use agentkit::github::ForwardScope;
            let scope = match (repo, org) {
                (Some(r), _) => ForwardScope::Repo(r),
                (None, Some(o)) => ForwardScope::Org(o),
                (None, None) => ForwardScope::Repo(origin_repo(&dir).context(
                    "cannot infer the repository from the `origin` remote; pass --repo OWNER/REPO or --org ORG",
                )?),
            };
            let plan = agentkit::github::forward_plan(
                &dir,
                scope,
                &agentkit::github::ForwardRequest {
                    url: url.as_deref(),
                    channel: channel.as_deref(),
                    slug: slug.as_deref(),
                    events: events.as_deref(),
                    secret: secret.as_deref(),
                },
            )?;
            let gh = find_on_path("gh").context(
                "`gh` is not installed: install the GitHub CLI (https://cli.github.com), then `gh extension install cli/gh-webhook`",
            )?;
            if std::env::var_os("GITHUB_TOKEN").is_some() || std::env::var_os("GH_TOKEN").is_some()
            {
                tracing::warn!(
                    "GITHUB_TOKEN / GH_TOKEN are not passed to `gh webhook forward` (its relay rejects environment tokens)"
                );
            }
            let run_gh = |url: &str| {
                std::process::Command::new(&gh)
                    .args(plan.gh_args(url))
                    .env_remove("GITHUB_TOKEN")
                    .env_remove("GH_TOKEN")
                    .status()
                    .context("cannot run `gh webhook forward`")
            };
            let status = match plan.targets.as_slice() {
                [one] => run_gh(one)?,
                several => {
                    // One `gh` subscription, fanned out by a local relay.
                    let rt = tokio::runtime::Builder::new_multi_thread()
                        .worker_threads(1)
                        .enable_all()
                        .build()
                        .context("cannot start the relay's runtime")?;
                    let stop = tokio_util::sync::CancellationToken::new();
                    let relay = rt
                        .block_on(agentkit::github::start_relay(
                            several.to_vec(),
                            stop.clone(),
                        ))
                        .context("cannot start the local relay")?;
                    let _ = writeln!(
                        anstream::stderr(),
                        "relaying to {} channels: {}",
                        several.len(),
                        several.join(", ")
                    );
                    let status = run_gh(&relay);
                    stop.cancel();
                    status?
                }
            };
            Ok(ExitCode::from(
                u8::try_from(status.code().unwrap_or(1)).unwrap_or(1),
            ))
        }
    }
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// `OWNER/REPO` from `git remote get-url origin` in `dir`.
fn origin_repo(dir: &std::path::Path) -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["remote", "get-url", "origin"])
        .current_dir(dir)
        .output()
        .ok()?;
    let url = String::from_utf8(out.stdout).ok()?;
    let url = url.trim().trim_end_matches(".git");
    let tail = url.rsplit_once("github.com").map(|(_, t)| t)?;
    let tail = tail.trim_start_matches([':', '/']);
    (tail.split('/').count() == 2).then(|| tail.to_owned())
}
