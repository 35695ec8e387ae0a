//! `agentkit gitlab` and `agentkit bitbucket` (`events`, `replay
//! --payload`), and the channel listing `agentkit github events` shares
//! with them; the work is in `agentkit::webhooks`.

use std::path::PathBuf;
use std::process::ExitCode;

use agentkit::webhooks::{PackTarget, PayloadReplay, Provider};
use anyhow::Context;
use clap::Subcommand;

use crate::boot::tokio_runtime;

#[derive(Debug, clap::Args)]
pub(crate) struct PackArgs {
    #[command(subcommand)]
    command: PackCommand,
}

#[derive(Debug, Subcommand)]
enum PackCommand {
    /// List the channels of this kind: their URL path and the events each
    /// one publishes.
    Events {
        /// The project, or a folder of projects.
        #[arg(long, default_value = ".", value_name = "PATH")]
        dir: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// POST a saved payload, byte for byte, at the channels of this kind
    /// under --dir on a running server, with the provider's headers and
    /// signature (or token). Exits 1 when a channel refuses it.
    Replay {
        /// The saved payload.
        #[arg(long, value_name = "FILE")]
        payload: PathBuf,
        #[arg(long, default_value = ".", value_name = "PATH")]
        dir: PathBuf,
        /// The server (default http://127.0.0.1:3000).
        #[arg(long)]
        url: Option<String>,
        /// The event (GitLab: `object_kind`; Bitbucket: `X-Event-Key`);
        /// guessed from the payload when absent.
        #[arg(long)]
        event: Option<String>,
        /// The webhook secret (default: GITLAB_WEBHOOK_SECRET or
        /// BITBUCKET_WEBHOOK_SECRET).
        #[arg(long)]
        secret: Option<String>,
        /// Only this channel (or agent slug).
        #[arg(long)]
        channel: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

/// Prints the channels of `provider` under `dir` (`events`).
pub(crate) fn print_targets(
    provider: Provider,
    dir: &std::path::Path,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let targets: Vec<PackTarget> = agentkit::webhooks::pack_targets(dir, provider)
        .with_context(|| format!("cannot read `{}`", dir.display()))?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"ok": true, "channels": targets}))?
        );
    } else if targets.is_empty() {
        println!("no {} channels in {}", provider.label(), dir.display());
    } else {
        for t in targets {
            println!("{}  {}", t.path, t.events.join(","));
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn run(provider: Provider, args: PackArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        PackCommand::Events { dir, json } => print_targets(provider, &dir, json),
        PackCommand::Replay {
            payload,
            dir,
            url,
            event,
            secret,
            channel,
            json,
        } => {
            let replay = PayloadReplay {
                provider,
                dir,
                url,
                payload,
                event,
                secret: secret.or_else(|| std::env::var(provider.secret_var()).ok()),
                channel,
            };
            let posted = tokio_runtime()?.block_on(agentkit::webhooks::replay_payload(&replay))?;
            if json {
                println!("{}", serde_json::to_string_pretty(&posted)?);
            } else {
                for p in &posted {
                    println!("{} → {}: {} {}", p.event, p.url, p.status, p.response);
                }
            }
            Ok(if posted.iter().any(|p| p.status >= 400) {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
    }
}
