//! `agentkit slack init`: a slack channel file for the project and the
//! pair of app manifests that go with it, `manifest.dev.json` (Socket
//! Mode) and `manifest.prod.json` (the Events API at `--url`), built by the
//! same code as `agentkit slack manifest`.

use std::path::{Path, PathBuf};

use agentkit::channels::SlackManifestOptions;
use agentkit::manifest::ChannelKind;
use anyhow::{Context, bail};
use serde::Serialize;

/// What `slack init` was asked for.
pub(crate) struct InitRequest {
    pub(crate) dir: PathBuf,
    pub(crate) channel: String,
    pub(crate) name: Option<String>,
    pub(crate) url: Option<String>,
    pub(crate) agent: Option<String>,
    /// `WEATHER` → `WEATHER_SLACK_BOT_TOKEN`, … (several agents on a host).
    pub(crate) prefix: Option<String>,
    pub(crate) force: bool,
}

/// What `slack init` wrote.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InitWritten {
    pub(crate) slug: String,
    pub(crate) channel_file: PathBuf,
    pub(crate) dev_manifest: PathBuf,
    /// Absent without `--url`.
    pub(crate) prod_manifest: Option<PathBuf>,
    pub(crate) request_url: Option<String>,
    pub(crate) env_example: PathBuf,
}

/// The variable a credential reads: `SLACK_BOT_TOKEN`, or
/// `<PREFIX>_SLACK_BOT_TOKEN`.
fn var(prefix: Option<&str>, name: &str) -> String {
    match prefix {
        Some(p) => format!("{p}_{name}"),
        None => name.to_owned(),
    }
}

/// The channel file: Socket Mode by default, every credential a `${VAR:-}`
/// reference to the variables the Slack guide names (the empty default
/// keeps `validate` quiet where they are unset; the channel then stays
/// idle, naming them).
fn channel_file(slug: &str, prefix: Option<&str>) -> String {
    let env_prefix = prefix.map_or_else(String::new, |p| format!("env_prefix = \"{p}\"\n"));
    format!(
        r#"# Written by `agentkit slack init`; every setting is in
# docs/reference/channels.md (Slack settings).
kind = "slack"
description = "{slug} in Slack"
{env_prefix}# Development: Socket Mode (.agentkit/slack/manifest.dev.json), no public
# URL. Production: uncomment the next line and create the app from
# .agentkit/slack/manifest.prod.json (Slack POSTs to its request URL).
# mode = "events"
# Unset (or empty), a credential leaves the channel idle: `serve` logs
# which variables it needs.
bot_token = "${{{bot}:-}}"
app_token = "${{{app}:-}}"
signing_secret = "${{{signing}:-}}"
"#,
        bot = var(prefix, "SLACK_BOT_TOKEN"),
        app = var(prefix, "SLACK_APP_TOKEN"),
        signing = var(prefix, "SLACK_SIGNING_SECRET"),
    )
}

/// `env.example`: the variables the file reads, empty.
fn env_example(prefix: Option<&str>) -> String {
    format!(
        "# Slack credentials (https://api.slack.com/apps → your app). Dev and prod are\n\
         # separate apps: set these for the one this host runs.\n\
         # OAuth & Permissions → Bot User OAuth Token (xoxb-…)\n{}=\n\
         # Basic Information → App-Level Tokens, scope connections:write (xapp-…): Socket Mode\n{}=\n\
         # Basic Information → Signing Secret: the Events API (mode = \"events\")\n{}=\n",
        var(prefix, "SLACK_BOT_TOKEN"),
        var(prefix, "SLACK_APP_TOKEN"),
        var(prefix, "SLACK_SIGNING_SECRET"),
    )
}

/// The one agent `dir` holds (or `agent` names): its slug and folder.
fn project(dir: &Path, agent: Option<&str>) -> anyhow::Result<(String, PathBuf)> {
    let found =
        agentkit::discover(dir).with_context(|| format!("cannot read `{}`", dir.display()))?;
    if found.diagnostics.has_errors() {
        bail!(
            "`{}` does not validate: run `agentkit validate` first",
            dir.display()
        );
    }
    let picked: Vec<_> = found
        .host
        .agents
        .iter()
        .filter(|p| agent.is_none_or(|a| p.slug == a))
        .collect();
    match picked.as_slice() {
        [one] => Ok((one.slug.clone(), one.dir.clone())),
        [] => match agent {
            Some(a) => bail!("no agent `{a}` under {}", dir.display()),
            None => bail!(
                "no agent under {} (run `agentkit init` first)",
                dir.display()
            ),
        },
        _ => bail!("several agents here: name one with --agent"),
    }
}

fn is_channel_id(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

pub(crate) fn init(req: &InitRequest) -> anyhow::Result<InitWritten> {
    if !is_channel_id(&req.channel) {
        bail!(
            "`{}` is not a channel name: use lower-case letters, digits, `-` and `_`",
            req.channel
        );
    }
    if let Some(p) = &req.prefix
        && (p.is_empty()
            || !p
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
    {
        bail!("--prefix `{p}` must be upper-case letters, digits and `_`");
    }
    if let Some(url) = &req.url
        && !(url.starts_with("https://") || url.starts_with("http://"))
    {
        bail!("--url `{url}` is not an http(s) URL");
    }
    let (slug, project) = project(&req.dir, req.agent.as_deref())?;
    let channel_path = project
        .join("agent")
        .join("channels")
        .join(format!("{}.toml", req.channel));
    let out = project.join(".agentkit").join("slack");
    let dev_path = out.join("manifest.dev.json");
    let prod_path = out.join("manifest.prod.json");
    let env_path = out.join("env.example");
    let mut paths = vec![&channel_path, &dev_path, &env_path];
    if req.url.is_some() {
        paths.push(&prod_path);
    }
    if !req.force {
        let existing: Vec<String> = paths
            .iter()
            .filter(|p| p.exists())
            .map(|p| p.display().to_string())
            .collect();
        if !existing.is_empty() {
            bail!(
                "{} already exist{}: pass --force to overwrite",
                existing.join(", "),
                if existing.len() == 1 { "s" } else { "" }
            );
        }
    }
    let write = |path: &Path, text: &str| -> anyhow::Result<()> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create `{}`", parent.display()))?;
        }
        std::fs::write(path, text).with_context(|| format!("cannot write `{}`", path.display()))
    };
    let prefix = req.prefix.as_deref();
    write(&channel_path, &channel_file(&slug, prefix))?;
    write(&env_path, &env_example(prefix))?;
    // The manifests follow the file as the pack reads it.
    let found = agentkit::discover(&project)
        .with_context(|| format!("cannot read `{}`", project.display()))?;
    let channel = found
        .host
        .agents
        .iter()
        .flat_map(|p| &p.agent.channels)
        .find(|c| c.kind == ChannelKind::Slack && c.id == req.channel)
        .cloned();
    let name = req.name.clone().unwrap_or_else(|| slug.clone());
    let manifest = |events_url: Option<String>| -> anyhow::Result<String> {
        let value = agentkit::channels::slack_app_manifest(
            channel.as_ref(),
            &SlackManifestOptions {
                name: name.clone(),
                events_url,
                ..Default::default()
            },
        )?;
        Ok(serde_json::to_string_pretty(&value)? + "\n")
    };
    write(&dev_path, &manifest(None)?)?;
    let request_url = req.url.as_ref().map(|base| {
        format!(
            "{}/{slug}/v1/channels/{}",
            base.trim_end_matches('/'),
            req.channel
        )
    });
    let prod_manifest = match &request_url {
        Some(url) => {
            write(&prod_path, &manifest(Some(url.clone()))?)?;
            Some(prod_path)
        }
        None => None,
    };
    Ok(InitWritten {
        slug,
        channel_file: channel_path,
        dev_manifest: dev_path,
        prod_manifest,
        request_url,
        env_example: env_path,
    })
}

/// The first slack channel file of the agent `dir` holds (or `agent`
/// names), if it has one.
pub(crate) fn existing_channel(dir: &Path, agent: Option<&str>) -> anyhow::Result<Option<PathBuf>> {
    let (slug, project) = project(dir, agent)?;
    let found = agentkit::discover(&project)
        .with_context(|| format!("cannot read `{}`", project.display()))?;
    Ok(found
        .host
        .agents
        .iter()
        .filter(|p| p.slug == slug)
        .flat_map(|p| &p.agent.channels)
        .find(|c| c.kind == ChannelKind::Slack)
        .map(|c| project.join(&c.path)))
}
