//! `agentkit slack setup | init | manifest | doctor`: argument parsing and
//! output; the work is in `agentkit::slack` (and `slack_init`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use crate::boot::tokio_runtime;

#[derive(Debug, clap::Args)]
pub(crate) struct SlackArgs {
    #[command(subcommand)]
    command: SlackCommand,
}

#[derive(Debug, Subcommand)]
enum SlackCommand {
    /// Add a slack channel file (`agent/channels/<NAME>.toml`, credentials
    /// as `${SLACK_…}` references) and the app manifests that go with it:
    /// `.agentkit/slack/manifest.dev.json` (Socket Mode) and, with --url,
    /// `manifest.prod.json` (the Events API at that base URL), and
    /// `env.example` naming the variables.
    ///
    /// Refuses to overwrite any of them unless --force.
    Init {
        /// The project.
        #[arg(long, default_value = ".", value_name = "PATH")]
        dir: PathBuf,
        /// The channel's name (its file name and URL segment).
        #[arg(long, default_value = "slack", value_name = "NAME")]
        channel: String,
        /// The app's display name (default: the agent's slug).
        #[arg(long)]
        name: Option<String>,
        /// The production host's base URL (`https://bot.example.com`): the
        /// prod manifest's request URL is `<URL>/<slug>/v1/channels/<NAME>`.
        #[arg(long, value_name = "URL")]
        url: Option<String>,
        /// The agent, when the folder has several.
        #[arg(long)]
        agent: Option<String>,
        /// Read `<PREFIX>_SLACK_BOT_TOKEN` etc. (one Slack app per agent
        /// on a multi-agent host).
        #[arg(long)]
        prefix: Option<String>,
        /// Overwrite files that exist.
        #[arg(long)]
        force: bool,
        #[arg(long)]
        json: bool,
    },
    /// Set up Slack for the project, step by step: add the slack channel
    /// and its app manifests (as `init`) unless the agent has one, say how
    /// to create and install the app, then check the credentials (as
    /// `doctor`). Run it again once the variables are set.
    ///
    /// Exits 0 when every check passes, 1 otherwise.
    Setup {
        #[arg(long, default_value = ".", value_name = "PATH")]
        dir: PathBuf,
        /// The new channel's name, when the agent has none.
        #[arg(long, default_value = "slack", value_name = "NAME")]
        channel: String,
        /// The app's display name (default: the agent's slug).
        #[arg(long)]
        name: Option<String>,
        /// The production host's base URL (writes `manifest.prod.json`).
        #[arg(long, value_name = "URL")]
        url: Option<String>,
        /// Read `<PREFIX>_SLACK_BOT_TOKEN` etc.
        #[arg(long)]
        prefix: Option<String>,
        #[arg(long)]
        agent: Option<String>,
    },
    /// Write the Slack app manifest (JSON) the project's slack channel
    /// needs, and an env.example, under <project>/.agentkit/slack/.
    ///
    /// Paste the manifest into api.slack.com/apps → Create New App → From
    /// a manifest. Scopes and events follow the channel file's settings.
    Manifest {
        /// The project, or a folder of projects.
        #[arg(long, default_value = ".", value_name = "PATH")]
        dir: PathBuf,
        /// The app's display name (default: the agent's slug).
        #[arg(long)]
        name: Option<String>,
        /// Socket Mode (the default): no public URL needed.
        #[arg(long, conflicts_with = "events_url")]
        socket_mode: bool,
        /// The Events API and interactivity request URL
        /// (`https://HOST/<slug>/v1/channels/<id>`) instead of Socket Mode.
        #[arg(long, value_name = "URL")]
        events_url: Option<String>,
        /// Subscribe to channel posts (channel watch).
        #[arg(long)]
        channel_posts: bool,
        /// Turn interactivity on for Approve / Deny cards.
        #[arg(long)]
        approvals: bool,
        /// The agent, when the folder has several.
        #[arg(long)]
        agent: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Check the slack channel's tokens against Slack (`auth.test`,
    /// `apps.connections.open`) and its scopes, and say what to fix.
    ///
    /// Exits 0 when every check passes, 1 otherwise.
    Doctor {
        #[arg(long, default_value = ".", value_name = "PATH")]
        dir: PathBuf,
        /// Read `<PREFIX>_SLACK_BOT_TOKEN` etc. instead of the file's
        /// `env_prefix`.
        #[arg(long)]
        prefix: Option<String>,
        #[arg(long)]
        agent: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

pub(crate) fn slack(args: SlackArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        SlackCommand::Init {
            dir,
            channel,
            name,
            url,
            agent,
            prefix,
            force,
            json,
        } => {
            let written = crate::slack_init::init(&crate::slack_init::InitRequest {
                dir,
                channel,
                name,
                url,
                agent,
                prefix,
                force,
            })?;
            if json {
                println!("{}", serde_json::to_string_pretty(&written)?);
            } else {
                println!("wrote {}", written.channel_file.display());
                println!("wrote {} (Socket Mode)", written.dev_manifest.display());
                println!("wrote {}", written.env_example.display());
                match (&written.prod_manifest, &written.request_url) {
                    (Some(p), Some(u)) => {
                        println!("wrote {} (Events API at {u})", p.display());
                    }
                    _ => println!(
                        "no manifest.prod.json: pass --url https://YOUR-HOST for the production app"
                    ),
                }
                println!(
                    "next: create the app from manifest.dev.json (api.slack.com/apps → Create New App → From a manifest), install it, fill in the variables of env.example, then `agentkit slack doctor`"
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        SlackCommand::Setup {
            dir,
            channel,
            name,
            url,
            prefix,
            agent,
        } => {
            let existing = crate::slack_init::existing_channel(&dir, agent.as_deref())?;
            let manifests = match existing {
                Some(file) => {
                    println!("1. slack channel: {} (kept)", file.display());
                    println!(
                        "   app manifest: `agentkit slack manifest` writes one that follows it"
                    );
                    None
                }
                None => {
                    let written = crate::slack_init::init(&crate::slack_init::InitRequest {
                        dir: dir.clone(),
                        channel,
                        name,
                        url,
                        agent: agent.clone(),
                        prefix: prefix.clone(),
                        force: false,
                    })?;
                    println!("1. wrote {}", written.channel_file.display());
                    println!("   wrote {} (Socket Mode)", written.dev_manifest.display());
                    if let Some(p) = &written.prod_manifest {
                        println!("   wrote {} (Events API)", p.display());
                    }
                    println!("   wrote {}", written.env_example.display());
                    Some(written)
                }
            };
            let manifest = manifests.as_ref().map_or_else(
                || "the manifest".to_owned(),
                |w| format!("{}", w.dev_manifest.display()),
            );
            println!(
                "2. api.slack.com/apps → Create New App → From a manifest → paste {manifest}; Install to Workspace"
            );
            println!(
                "3. set the variables env.example names (Bot User OAuth Token; App-Level Token with connections:write) where the server runs"
            );
            println!("4. check:");
            let env = agentkit::EnvLookup::process();
            let report = tokio_runtime()?.block_on(agentkit::slack::doctor(
                &dir,
                agent.as_deref(),
                prefix.as_deref(),
                &env,
            ))?;
            print_checks(&report.checks);
            Ok(if report.ok() {
                println!("ready: `agentkit serve`, then mention the bot in a channel it is in");
                ExitCode::SUCCESS
            } else {
                println!("fix the above, then run `agentkit slack setup` again");
                ExitCode::from(1)
            })
        }
        SlackCommand::Manifest {
            dir,
            name,
            socket_mode: _,
            events_url,
            channel_posts,
            approvals,
            agent,
            json,
        } => {
            let written = agentkit::slack::write_manifest(&agentkit::slack::ManifestRequest {
                dir,
                name,
                events_url,
                channel_posts,
                approvals,
                agent,
            })?;
            if json {
                println!("{}", serde_json::to_string_pretty(&written)?);
            } else {
                println!(
                    "wrote {}\nwrote {}\nnext: create the app from the manifest (api.slack.com/apps → Create New App → From a manifest), install it, fill in the variables of env.example, then `agentkit slack doctor`",
                    written.manifest_path.display(),
                    written.env_example_path.display()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        SlackCommand::Doctor {
            dir,
            prefix,
            agent,
            json,
        } => {
            let env = agentkit::EnvLookup::process();
            let report = tokio_runtime()?.block_on(agentkit::slack::doctor(
                &dir,
                agent.as_deref(),
                prefix.as_deref(),
                &env,
            ))?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                println!(
                    "slack channel `{}` of agent `{}`",
                    report.channel, report.slug
                );
                print_checks(&report.checks);
            }
            Ok(if report.ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}

fn print_checks(checks: &[agentkit::channels::SlackCheck]) {
    for c in checks {
        let mark = if c.ok { "ok " } else { "FIX" };
        println!("  {mark} {}: {}", c.name, c.detail);
        if let Some(fix) = &c.fix {
            println!("      → {fix}");
        }
    }
}
