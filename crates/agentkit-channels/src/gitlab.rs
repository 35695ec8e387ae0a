//! The GitLab pack (`kind = "gitlab"`, GitLab.com and self-managed), built
//! on the channel API: one route, `POST /v1/channels/<id>`, that checks
//! `X-Gitlab-Token` against the secret in constant time, drops
//! redeliveries by `X-Gitlab-Event-UUID` (durably), dispatches merge
//! request, note, pipeline, push and custom hooks by the first matching
//! rule (the rules of the GitHub pack), and posts the turn's reply back as
//! a merge request (or issue) note through the GitLab API.

use std::collections::HashSet;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentkit_auth::{AuthContext, Chain, Policy, PrincipalType, Secret, Surface};
use agentkit_manifest::{Channel, Method};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::api::{
    ChannelDefinition, ChannelResponse, HandlerArgs, RouteDef, SendOptions, turn_outcome,
};
use crate::env::Env;
use crate::error::{Error, Result};
use crate::github::GithubOptions;
use crate::github::settings::{Rule, at, check_rules};
use crate::template::{render, render_value};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    #[serde(default)]
    description: Option<String>,
    /// Compared with `X-Gitlab-Token`; usually `${GITLAB_WEBHOOK_SECRET}`.
    #[serde(default)]
    webhook_secret: Option<String>,
    /// `https://gitlab.com/api/v4` (default) or a self-managed instance's.
    #[serde(default)]
    api_url: Option<String>,
    /// Defaults to `${GITLAB_TOKEN}`.
    #[serde(default)]
    token: Option<String>,
    /// The bot's username: its own notes never start a turn.
    #[serde(default)]
    bot_name: Option<String>,
    /// Post the turn's final text as a note (default true).
    #[serde(default)]
    reply: Option<bool>,
    #[serde(default)]
    events: Option<Vec<String>>,
    #[serde(default)]
    rules: Vec<Rule>,
}

/// The GitLab pack's options are the GitHub pack's.
pub type GitlabOptions = GithubOptions;

fn parse(channel: &Channel) -> Result<Settings> {
    let config = |message: String| Error::Config {
        channel: channel.id.clone(),
        message,
    };
    let s: Settings = serde_json::from_value(channel.settings.clone().unwrap_or_else(|| json!({})))
        .map_err(|e| config(e.to_string()))?;
    check_rules(&s.rules).map_err(config)?;
    Ok(s)
}

/// The hook events a gitlab channel file publishes.
pub fn gitlab_events(channel: &Channel) -> Result<Vec<String>> {
    let s = parse(channel)?;
    Ok(s.events.clone().unwrap_or_else(|| {
        let mut out: Vec<String> = Vec::new();
        for r in &s.rules {
            if !out.contains(&r.event) {
                out.push(r.event.clone());
            }
        }
        out
    }))
}

struct Pack {
    settings: Settings,
    client: reqwest::Client,
    api_url: String,
    token: Option<String>,
    seen: Mutex<HashSet<String>>,
    seen_path: PathBuf,
    agent_dir: PathBuf,
}

/// The channel API form of a gitlab channel file.
pub fn gitlab_channel(
    channel: &Channel,
    authored: Option<Chain>,
    options: GitlabOptions,
) -> Result<ChannelDefinition> {
    let settings = parse(channel)?;
    let env: &Env = &options.env;
    let secret = settings
        .webhook_secret
        .as_deref()
        .map(|s| env.resolve(s))
        .filter(|s| !s.is_empty());
    let chain = authored.unwrap_or_else(|| {
        let mut policies = Vec::new();
        if let Some(secret) = &secret {
            policies.push(Policy::SharedSecret {
                header: "x-gitlab-token".into(),
                secret: Secret::new(secret.clone()),
            });
        }
        if options.dev {
            policies.push(Policy::LoopbackOnly);
        } else if secret.is_none() {
            policies.push(Policy::LocalDevStrict);
        }
        Chain::new(policies, Surface::CustomChannel)
    });
    let api_url = settings
        .api_url
        .as_deref()
        .map(|s| env.resolve(s))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "https://gitlab.com/api/v4".into());
    let token = match &settings.token {
        Some(t) => Some(env.resolve(t)).filter(|t| !t.is_empty()),
        None => env.get("GITLAB_TOKEN"),
    };
    let seen_path = options
        .state_dir
        .join("channels")
        .join(&channel.id)
        .join("gitlab-deliveries.log");
    let seen = std::fs::read_to_string(&seen_path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect();
    let events = gitlab_events(channel)?;
    let pack = Arc::new(Pack {
        settings,
        client: crate::deliver::http_client(),
        api_url: api_url.clone(),
        token,
        seen: Mutex::new(seen),
        seen_path,
        agent_dir: options.agent_dir.clone(),
    });
    let mut def = ChannelDefinition::new(channel.id.clone());
    def.kind = "gitlab".into();
    def.description = pack.settings.description.clone();
    def.auth = Some(chain);
    def.info =
        Some(json!({"webhookEvents": events, "signed": secret.is_some(), "apiUrl": api_url}));
    let p = pack.clone();
    def.routes.push(
        RouteDef::new(Method::Post, "/", move |args| {
            let p = p.clone();
            async move { p.handle(args).await }
        })
        .body_schema(json!({"type": "object"}))
        .description("GitLab webhook deliveries"),
    );
    Ok(def)
}

fn ok(status: u16, body: Value) -> Result<ChannelResponse> {
    Ok(ChannelResponse::json(status, body))
}

fn s<'a>(v: &'a Value, path: &str) -> &'a str {
    at(v, path).and_then(Value::as_str).unwrap_or("")
}

impl Pack {
    fn first_delivery(&self, id: &str) -> Result<bool> {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if !seen.insert(id.to_owned()) {
            return Ok(false);
        }
        let write = || -> std::io::Result<()> {
            if let Some(dir) = self.seen_path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.seen_path)?;
            f.write_all(format!("{id}\n").as_bytes())
        };
        write().map_err(|e| Error::io("write", &self.seen_path, e))?;
        Ok(true)
    }

    async fn handle(self: Arc<Self>, args: HandlerArgs) -> Result<ChannelResponse> {
        let payload = args.body.clone();
        let header = args.header("x-gitlab-event").unwrap_or("").to_owned();
        let kind = payload
            .get("object_kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        if header.is_empty() && kind.is_empty() {
            return Err(Error::bad_request("missing the `X-Gitlab-Event` header"));
        }
        if let Some(id) = args.header("x-gitlab-event-uuid").map(str::to_owned)
            && !self.first_delivery(&id)?
        {
            return ok(200, json!({"ok": true, "duplicate": true, "delivery": id}));
        }
        let actor = match s(&payload, "user.username") {
            "" => s(&payload, "user_username").to_owned(),
            u => u.to_owned(),
        };
        if self
            .settings
            .bot_name
            .as_deref()
            .is_some_and(|b| b == actor)
        {
            return ok(
                200,
                json!({"ok": true, "skipped": true, "reason": "the bot's own activity"}),
            );
        }
        let action = s(&payload, "object_attributes.action").to_owned();
        let Some(rule) = self
            .settings
            .rules
            .iter()
            .find(|r| r.matches_with(&[kind.as_str(), header.as_str()], &action, &payload))
            .cloned()
        else {
            return ok(
                200,
                json!({"ok": true, "skipped": true, "reason": "no rule matches"}),
            );
        };
        let mut ctx = payload.clone();
        if let Some(obj) = ctx.as_object_mut() {
            obj.insert(
                "event".into(),
                json!(if kind.is_empty() { &header } else { &kind }),
            );
            obj.insert("action".into(), json!(action));
        }
        if rule.skip {
            return ok(200, json!({"ok": true, "skipped": true, "reason": "rule"}));
        }
        if let Some(task) = &rule.task {
            if let Some(tool) = task.tool.clone() {
                let input = render_value(
                    "task.input",
                    task.input.as_ref().unwrap_or(&json!({})),
                    &ctx,
                )?;
                let c = args.ctx.clone();
                args.ctx.wait_until(async move {
                    if let Err(e) = c.call_tool(&tool, input, None).await {
                        tracing::warn!(tool = %tool, error = %e, "GitLab host task failed");
                    }
                });
                return ok(202, json!({"ok": true, "task": "tool"}));
            }
            let command = task.command.clone().unwrap_or_default();
            let body = serde_json::to_vec(&payload).unwrap_or_default();
            let (cwd, event) = (self.agent_dir.clone(), kind.clone());
            args.ctx.wait_until(async move {
                if let Err(e) = crate::github::run_command(&command, &cwd, &body, &event, "").await
                {
                    tracing::warn!(error = %e, "GitLab host task failed");
                }
            });
            return ok(202, json!({"ok": true, "task": "command"}));
        }
        let turn = rule.turn.clone().unwrap_or_default();
        let project = s(&ctx, "project.path_with_namespace").to_owned();
        // The merge request (or issue) this delivery is about, for the
        // default continuation and the reply note.
        let (noun, iid) = if kind == "merge_request" {
            (
                "mr",
                at(&ctx, "object_attributes.iid").and_then(Value::as_u64),
            )
        } else if let Some(i) = at(&ctx, "merge_request.iid").and_then(Value::as_u64) {
            ("mr", Some(i))
        } else if let Some(i) = at(&ctx, "issue.iid").and_then(Value::as_u64) {
            ("issue", Some(i))
        } else if kind == "issue" {
            (
                "issue",
                at(&ctx, "object_attributes.iid").and_then(Value::as_u64),
            )
        } else {
            ("", None)
        };
        let message = match &turn.message {
            Some(t) => render("turn.message", t, &ctx)?,
            None => format!(
                "GitLab `{}`{} on {project}: {}\n{}\n\n{}",
                if kind.is_empty() { &header } else { &kind },
                if action.is_empty() {
                    String::new()
                } else {
                    format!(" ({action})")
                },
                s(&ctx, "object_attributes.title"),
                s(&ctx, "object_attributes.url"),
                match s(&ctx, "object_attributes.note") {
                    "" => s(&ctx, "object_attributes.description"),
                    n => n,
                }
            )
            .trim_end()
            .to_owned(),
        };
        let continuation = match &turn.continuation {
            Some(t) => Some(render("turn.continuation", t, &ctx)?).filter(|s| !s.trim().is_empty()),
            None => iid.map(|i| {
                format!(
                    "{noun}:{project}{}{i}",
                    if noun == "mr" { "!" } else { "#" }
                )
            }),
        };
        let auth = AuthContext::new(
            args.auth.authenticator.clone(),
            format!(
                "gitlab:{}",
                if actor.is_empty() { "unknown" } else { &actor }
            ),
            PrincipalType::User,
        );
        let session = args
            .ctx
            .send(
                message,
                SendOptions {
                    continuation_token: continuation,
                    admission: turn.admission.unwrap_or_default(),
                    title: match &turn.title {
                        Some(t) => Some(render("turn.title", t, &ctx)?),
                        None => iid.map(|i| {
                            format!("{project}{}{i}", if noun == "mr" { "!" } else { "#" })
                        }),
                    },
                    ..SendOptions::default()
                },
                &auth,
            )
            .await?;
        let project_id = at(&ctx, "project.id").and_then(Value::as_u64);
        if self.settings.reply.unwrap_or(true)
            && self.token.is_some()
            && !noun.is_empty()
            && let (Some(iid), Some(pid)) = (iid, project_id)
        {
            let (pack, c) = (self.clone(), args.ctx.clone());
            let (id, start) = (session.id.clone(), session.start_index);
            let path = format!(
                "/projects/{pid}/{}/{iid}/notes",
                if noun == "mr" {
                    "merge_requests"
                } else {
                    "issues"
                }
            );
            args.ctx.wait_until(async move {
                let Ok(events) = c.follow(&id, start).await else {
                    return;
                };
                let Ok(Some(reply)) =
                    tokio::time::timeout(Duration::from_secs(6 * 3600), turn_outcome(events)).await
                else {
                    return;
                };
                let body = if reply.ok {
                    reply.text
                } else {
                    format!("❌ {}", reply.text)
                };
                if let Err(e) = pack.post_note(&path, &body).await {
                    tracing::warn!(error = %e, "cannot post the GitLab note");
                }
            });
        }
        let mut out = json!({"ok": true, "event": kind});
        if let (Some(obj), Value::Object(s)) = (
            out.as_object_mut(),
            serde_json::to_value(&session).unwrap_or(Value::Null),
        ) {
            obj.extend(s);
        }
        ok(202, out)
    }

    async fn post_note(&self, path: &str, body: &str) -> Result<()> {
        let url = format!("{}{path}", self.api_url.trim_end_matches('/'));
        let mut req = self.client.post(&url).json(&json!({"body": body}));
        if let Some(t) = &self.token {
            req = req.header("private-token", t);
        }
        let resp = req.send().await.map_err(|e| Error::Upstream {
            message: format!("GitLab API POST {path}: {e}"),
        })?;
        if !resp.status().is_success() {
            return Err(Error::Upstream {
                message: format!("GitLab API POST {path}: HTTP {}", resp.status().as_u16()),
            });
        }
        Ok(())
    }
}
