//! `agentkit slack`: the app manifest and `env.example` a project's slack
//! channel needs (`manifest`), and checking its credentials against Slack
//! (`doctor`). The pack itself reads both from the channel file's
//! settings; this module finds the file and writes or reports.

use std::path::{Path, PathBuf};

use agentkit_channels::{SlackCheck, SlackManifestOptions};

use crate::EnvLookup as Env;
use agentkit_manifest::{Channel, ChannelKind};
use serde::Serialize;
use serde_json::Value;

use crate::error::{Error, Result};

/// What `agentkit slack manifest` was asked for.
#[derive(Debug, Clone, Default)]
pub struct ManifestRequest {
    /// The project, or a folder of projects.
    pub dir: PathBuf,
    /// The app's name (default: the agent's slug).
    pub name: Option<String>,
    /// The Events API request URL; Socket Mode when `None`.
    pub events_url: Option<String>,
    pub channel_posts: bool,
    pub approvals: bool,
    /// Which agent, when the folder has several with a slack channel.
    pub agent: Option<String>,
}

/// What was written.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWritten {
    pub slug: String,
    /// The slack channel file it follows, if the agent has one.
    pub channel: Option<String>,
    pub manifest_path: PathBuf,
    pub env_example_path: PathBuf,
    pub manifest: Value,
}

/// The agent (and its first slack channel file) a command is about.
fn target(dir: &Path, agent: Option<&str>) -> Result<(String, PathBuf, Option<Channel>)> {
    let found = agentkit_manifest::discover(dir)?;
    if found.diagnostics.has_errors() {
        return Err(Error::Invalid {
            diagnostics: found.diagnostics,
        });
    }
    let agents = &found.host.agents;
    let picked: Vec<_> = agents
        .iter()
        .filter(|p| agent.is_none_or(|a| p.slug == a))
        .collect();
    let with_slack: Vec<_> = picked
        .iter()
        .filter(|p| {
            p.agent
                .channels
                .iter()
                .any(|c| c.kind == ChannelKind::Slack)
        })
        .collect();
    let project = match (with_slack.as_slice(), picked.as_slice()) {
        ([one], _) => **one,
        ([], [one]) => *one,
        ([], []) => {
            return Err(Error::Config {
                message: match agent {
                    Some(a) => format!("no agent `{a}` under {}", dir.display()),
                    None => format!("no agent under {}", dir.display()),
                },
            });
        }
        _ => {
            return Err(Error::Config {
                message: "several agents here: name one with --agent".into(),
            });
        }
    };
    let channel = project
        .agent
        .channels
        .iter()
        .find(|c| c.kind == ChannelKind::Slack)
        .cloned();
    Ok((project.slug.clone(), project.dir.clone(), channel))
}

/// Writes `<project>/.agentkit/slack/manifest.json` (paste it into "Create
/// an app → From a manifest") and `env.example` beside it.
pub fn write_manifest(req: &ManifestRequest) -> Result<ManifestWritten> {
    let (slug, project, channel) = target(&req.dir, req.agent.as_deref())?;
    let options = SlackManifestOptions {
        name: req.name.clone().unwrap_or_else(|| slug.clone()),
        description: None,
        events_url: req.events_url.clone(),
        channel_posts: req.channel_posts,
        approvals: req.approvals,
    };
    let config = |e: agentkit_channels::Error| Error::Config {
        message: e.to_string(),
    };
    let manifest =
        agentkit_channels::slack_app_manifest(channel.as_ref(), &options).map_err(config)?;
    let env = agentkit_channels::slack_env_example(channel.as_ref(), req.events_url.is_some())
        .map_err(config)?;
    let out = project.join(".agentkit").join("slack");
    let write = |path: &Path, text: &str| {
        std::fs::create_dir_all(&out)
            .and_then(|()| std::fs::write(path, text))
            .map_err(|source| Error::Write {
                path: path.to_path_buf(),
                source,
            })
    };
    let manifest_path = out.join("manifest.json");
    let env_example_path = out.join("env.example");
    let pretty = serde_json::to_string_pretty(&manifest).unwrap_or_default() + "\n";
    write(&manifest_path, &pretty)?;
    write(&env_example_path, &env)?;
    Ok(ManifestWritten {
        slug,
        channel: channel.map(|c| c.id),
        manifest_path,
        env_example_path,
        manifest,
    })
}

/// The doctor's report for one agent's slack channel.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DoctorReport {
    pub slug: String,
    pub channel: String,
    pub checks: Vec<SlackCheck>,
}

impl DoctorReport {
    pub fn ok(&self) -> bool {
        self.checks.iter().all(|c| c.ok)
    }
}

/// Checks the credentials of the agent's slack channel (`env` resolves
/// them; `prefix` replaces the file's `env_prefix`).
pub async fn doctor(
    dir: &Path,
    agent: Option<&str>,
    prefix: Option<&str>,
    env: &Env,
) -> Result<DoctorReport> {
    let (slug, _, channel) = target(dir, agent)?;
    let Some(channel) = channel else {
        return Err(Error::Config {
            message: format!(
                "agent `{slug}` has no slack channel: add `agent/channels/slack.toml` with `kind = \"slack\"`"
            ),
        });
    };
    let checks = agentkit_channels::slack_doctor(&channel, env, prefix)
        .await
        .map_err(|e| Error::Config {
            message: e.to_string(),
        })?;
    Ok(DoctorReport {
        slug,
        channel: channel.id,
        checks,
    })
}
