//! The GitHub pack (`kind = "github"`), built on the channel API: one
//! route, `POST /v1/channels/<id>`, that checks `X-Hub-Signature-256`
//! (HMAC-SHA256 of the raw body, constant time, before parsing) when a
//! secret is set, drops redeliveries by `X-GitHub-Delivery` (durably),
//! and dispatches each delivery by the first matching rule to a model turn
//! (as the actor), a host task (202 at once) or nothing. Opt-in progress
//! surfaces follow the turn through the GitHub API: a commit status
//! (pending → success/failure) and one sticky PR comment.

mod client;
pub(crate) mod settings;

use std::collections::HashSet;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentkit_auth::{AuthContext, Chain, Policy, PrincipalType, Secret, Surface};
use agentkit_manifest::{Channel, Method};
use serde_json::{Value, json};

use crate::api::{
    ChannelContext, ChannelDefinition, ChannelResponse, HandlerArgs, RouteDef, SendOptions,
    TurnReply, turn_outcome,
};
use crate::env::Env;
use crate::error::{Error, Result};
use crate::template::{render, render_value};
use client::GithubApi;
use settings::{Rule, Settings, at};

/// What the pack needs from the host.
#[derive(Debug, Clone)]
pub struct GithubOptions {
    pub env: Env,
    /// `--dev`: unsigned loopback deliveries are admitted.
    pub dev: bool,
    /// The agent's state folder (`<stateRoot>/<slug>`).
    pub state_dir: PathBuf,
    /// The agent folder: host-task commands run there.
    pub agent_dir: PathBuf,
}

/// The events a github channel file publishes (for `agentkit github
/// events` and `forward`).
pub fn github_events(channel: &Channel) -> Result<Vec<String>> {
    Ok(parse_settings(channel)?.published_events())
}

fn parse_settings(channel: &Channel) -> Result<Settings> {
    Settings::parse(channel.settings.as_ref().unwrap_or(&json!({}))).map_err(|message| {
        Error::Config {
            channel: channel.id.clone(),
            message,
        }
    })
}

struct Pack {
    settings: Settings,
    api: GithubApi,
    seen: Mutex<HashSet<String>>,
    seen_path: PathBuf,
    agent_dir: PathBuf,
}

/// The channel API form of a github channel file. `authored` is the
/// file's own `auth` chain, which replaces the pack's.
pub fn github_channel(
    channel: &Channel,
    authored: Option<Chain>,
    options: GithubOptions,
) -> Result<ChannelDefinition> {
    let settings = parse_settings(channel)?;
    let env = &options.env;
    let secret = settings
        .webhook_secret
        .as_deref()
        .map(|s| env.resolve(s))
        .filter(|s| !s.is_empty());
    if settings.webhook_secret.is_some() && secret.is_none() {
        tracing::warn!(channel = %channel.id, "the GitHub webhook secret resolves to nothing: only loopback deliveries are admitted");
    }
    let chain = authored.unwrap_or_else(|| {
        let mut policies = Vec::new();
        if let Some(secret) = &secret {
            policies.push(Policy::HmacSignature {
                header: "x-hub-signature-256".into(),
                secret: Secret::new(secret.clone()),
                prefix: Some("sha256=".into()),
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
        .unwrap_or_else(|| "https://api.github.com".into());
    let token = match &settings.token {
        Some(t) => Some(env.resolve(t)).filter(|t| !t.is_empty()),
        None => env.get("GITHUB_TOKEN").or_else(|| env.get("GH_TOKEN")),
    };
    let dir = options.state_dir.join("channels").join(&channel.id);
    let seen_path = dir.join("github-deliveries.log");
    let seen: HashSet<String> = std::fs::read_to_string(&seen_path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect();
    let events = settings.published_events();
    let pack = Arc::new(Pack {
        api: GithubApi::new(&api_url, token),
        settings,
        seen: Mutex::new(seen),
        seen_path,
        agent_dir: options.agent_dir.clone(),
    });
    let mut def = ChannelDefinition::new(channel.id.clone());
    def.kind = "github".into();
    def.description = pack.settings.description.clone();
    def.auth = Some(chain);
    def.info = Some(json!({
        "webhookEvents": events,
        "signed": secret.is_some(),
        "apiUrl": api_url,
    }));
    let p = pack.clone();
    def.routes.push(
        RouteDef::new(Method::Post, "/", move |args| {
            let p = p.clone();
            async move { p.handle(args).await }
        })
        .body_schema(json!({"type": "object"}))
        .description("GitHub webhook deliveries"),
    );
    Ok(def)
}

fn ok(status: u16, body: Value) -> Result<ChannelResponse> {
    Ok(ChannelResponse::json(status, body))
}

impl Pack {
    /// Records a delivery id; false when it was already seen.
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
        let Some(event) = args.header("x-github-event").map(str::to_owned) else {
            return Err(Error::bad_request("missing the `X-GitHub-Event` header"));
        };
        let delivery = args.header("x-github-delivery").map(str::to_owned);
        if event == "ping" {
            return ok(
                200,
                json!({"ok": true, "event": "ping", "zen": args.body.get("zen")}),
            );
        }
        if let Some(id) = &delivery
            && !self.first_delivery(id)?
        {
            tracing::info!(delivery = %id, "ignoring a GitHub redelivery");
            return ok(200, json!({"ok": true, "duplicate": true, "delivery": id}));
        }
        let payload = &args.body;
        let sender = at(payload, "sender.login")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        if let Some(bot) = &self.settings.bot_name
            && (sender == *bot || sender == format!("{bot}[bot]"))
        {
            return ok(
                200,
                json!({"ok": true, "skipped": true, "reason": "the bot's own activity"}),
            );
        }
        let Some(rule) = self
            .settings
            .rules
            .iter()
            .find(|r| r.matches(&event, payload))
            .cloned()
        else {
            return ok(
                200,
                json!({"ok": true, "skipped": true, "reason": "no rule matches"}),
            );
        };
        let mut ctx = payload.clone();
        if let Some(obj) = ctx.as_object_mut() {
            obj.insert("event".into(), json!(event));
            obj.insert("delivery".into(), json!(delivery));
        }
        if rule.skip {
            return ok(200, json!({"ok": true, "skipped": true, "reason": "rule"}));
        }
        if let Some(task) = &rule.task {
            return self.task(&args, task, &event, delivery.as_deref(), &ctx);
        }
        self.turn(&args, &rule, &event, &sender, &ctx).await
    }

    fn task(
        &self,
        args: &HandlerArgs,
        task: &settings::TaskRule,
        event: &str,
        delivery: Option<&str>,
        ctx: &Value,
    ) -> Result<ChannelResponse> {
        if let Some(tool) = &task.tool {
            let input = render_value("task.input", task.input.as_ref().unwrap_or(&json!({})), ctx)?;
            let c = args.ctx.clone();
            let tool = tool.clone();
            args.ctx.wait_until(async move {
                match c.call_tool(&tool, input, None).await {
                    Ok(env) => tracing::info!(tool = %tool, is_error = ?env.get("isError"), "GitHub host task finished"),
                    Err(e) => tracing::warn!(tool = %tool, error = %e, "GitHub host task failed"),
                }
            });
            return ok(202, json!({"ok": true, "task": "tool", "tool": task.tool}));
        }
        let Some(command) = task.command.clone() else {
            return Err(Error::bad_request("the task has no command"));
        };
        let payload = serde_json::to_vec(&args.body).unwrap_or_default();
        let cwd = self.agent_dir.clone();
        let (event, delivery) = (event.to_owned(), delivery.unwrap_or("").to_owned());
        args.ctx.wait_until(async move {
            if let Err(e) = run_command(&command, &cwd, &payload, &event, &delivery).await {
                tracing::warn!(command = ?command, error = %e, "GitHub host task failed");
            }
        });
        ok(202, json!({"ok": true, "task": "command"}))
    }

    async fn turn(
        self: &Arc<Self>,
        args: &HandlerArgs,
        rule: &Rule,
        event: &str,
        sender: &str,
        ctx: &Value,
    ) -> Result<ChannelResponse> {
        let turn = rule.turn.clone().unwrap_or_default();
        let repo = at(ctx, "repository.full_name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let number = at(ctx, "pull_request.number")
            .or_else(|| at(ctx, "issue.number"))
            .and_then(Value::as_u64);
        let is_pr = ctx.get("pull_request").is_some() || at(ctx, "issue.pull_request").is_some();
        let message = match &turn.message {
            Some(t) => render("turn.message", t, ctx)?,
            None => default_message(event, ctx),
        };
        let continuation = match &turn.continuation {
            Some(t) => Some(render("turn.continuation", t, ctx)?).filter(|s| !s.trim().is_empty()),
            None => number.map(|n| format!("{}:{repo}#{n}", if is_pr { "pr" } else { "issue" })),
        };
        let title = match &turn.title {
            Some(t) => Some(render("turn.title", t, ctx)?),
            None => number.map(|n| format!("{repo}#{n}")),
        };
        // The actor is the principal; the signature (or loopback) policy
        // that admitted the delivery stays visible as the authenticator.
        let actor = AuthContext::new(
            args.auth.authenticator.clone(),
            format!(
                "github:{}",
                if sender.is_empty() { "unknown" } else { sender }
            ),
            PrincipalType::User,
        )
        .with_attribute("githubEvent", event);
        let session = args
            .ctx
            .send(
                message,
                SendOptions {
                    continuation_token: continuation,
                    admission: turn.admission.unwrap_or_default(),
                    title,
                    ..SendOptions::default()
                },
                &actor,
            )
            .await?;
        let context = self.settings.progress.status_context();
        if (context.is_some() || self.settings.progress.banner) && !repo.is_empty() {
            if self.api.has_token() {
                let sha = at(ctx, "pull_request.head.sha")
                    .or_else(|| at(ctx, "check_suite.head_sha"))
                    .or_else(|| at(ctx, "check_run.head_sha"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let target = Target {
                    repo,
                    number: if is_pr { number } else { None },
                    sha,
                    context,
                };
                let pack = self.clone();
                let c = args.ctx.clone();
                let (id, start) = (session.id.clone(), session.start_index);
                args.ctx
                    .wait_until(async move { pack.progress(c, id, start, target).await });
            } else {
                tracing::warn!(
                    "GitHub progress is on but no API token is set (`token`, GITHUB_TOKEN or GH_TOKEN): skipping it"
                );
            }
        }
        let mut body = json!({"ok": true, "event": event});
        if let (Some(obj), Value::Object(s)) = (
            body.as_object_mut(),
            serde_json::to_value(&session).unwrap_or(Value::Null),
        ) {
            obj.extend(s);
        }
        ok(202, body)
    }

    /// Follows the turn this delivery started and converges the commit
    /// status and the banner comment on it.
    async fn progress(
        self: Arc<Self>,
        ctx: ChannelContext,
        session: String,
        start: u64,
        mut t: Target,
    ) {
        if t.sha.is_none()
            && let Some(n) = t.number
        {
            match self.api.pull(&t.repo, n).await {
                Ok(pr) => {
                    t.sha = at(&pr, "head.sha")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the pull request for its head commit")
                }
            }
        }
        let status = |state: &'static str, description: String| {
            let (api, t) = (self.api.clone(), t.clone());
            async move {
                if let (Some(sha), Some(context)) = (&t.sha, &t.context)
                    && let Err(e) = api
                        .set_status(&t.repo, sha, state, context, &description)
                        .await
                {
                    tracing::warn!(error = %e, "cannot set the commit status");
                }
            }
        };
        status("pending", "agentkit is working on it".into()).await;
        let banner_key = format!("{}#{}", t.repo, t.number.unwrap_or(0));
        let banner = |text: String| {
            let (api, t, ctx, session, key) = (
                self.api.clone(),
                t.clone(),
                ctx.clone(),
                session.clone(),
                banner_key.clone(),
            );
            let on = self.settings.progress.banner;
            async move {
                let Some(n) = t.number.filter(|_| on) else {
                    return;
                };
                let mut state = ctx.state(&session).unwrap_or(Value::Null);
                let existing = at(&state, "githubBanner")
                    .and_then(|b| b.get(&key))
                    .and_then(Value::as_u64);
                let result = match existing {
                    Some(id) => api.update_comment(&t.repo, id, &text).await,
                    None => match api.create_comment(&t.repo, n, &text).await {
                        Ok(id) => {
                            if !state.is_object() {
                                state = json!({});
                            }
                            if let Some(obj) = state.as_object_mut() {
                                let b = obj.entry("githubBanner").or_insert_with(|| json!({}));
                                if let Some(b) = b.as_object_mut() {
                                    b.insert(key.clone(), json!(id));
                                }
                            }
                            ctx.set_state(&session, state).map_err(|e| Error::Upstream {
                                message: e.to_string(),
                            })
                        }
                        Err(e) => Err(e),
                    },
                };
                if let Err(e) = result {
                    tracing::warn!(error = %e, "cannot update the GitHub banner comment");
                }
            }
        };
        banner("⏳ Working on it…".into()).await;
        let Ok(events) = ctx.follow(&session, start).await else {
            return;
        };
        let wait = tokio::time::timeout(Duration::from_secs(6 * 3600), turn_outcome(events)).await;
        match wait {
            Ok(Some(TurnReply { ok: true, text })) => {
                status("success", "agentkit finished".into()).await;
                banner(if text.is_empty() {
                    "✅ Done.".into()
                } else {
                    text
                })
                .await;
            }
            Ok(Some(TurnReply { ok: false, text })) => {
                status("failure", text.clone()).await;
                banner(format!("❌ {text}")).await;
            }
            _ => {}
        }
    }
}

#[derive(Debug, Clone)]
struct Target {
    repo: String,
    number: Option<u64>,
    sha: Option<String>,
    context: Option<String>,
}

fn default_message(event: &str, p: &Value) -> String {
    let s = |path: &str| at(p, path).and_then(Value::as_str).unwrap_or("").to_owned();
    let action = s("action");
    let repo = s("repository.full_name");
    let mut out = format!(
        "GitHub `{event}`{} on {repo}",
        if action.is_empty() {
            String::new()
        } else {
            format!(" ({action})")
        }
    );
    if let Some(pr) = p.get("pull_request") {
        let g = |k: &str| pr.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        out.push_str(&format!(
            "\n\nPull request #{}: {}\n{}\n\n{}",
            pr.get("number").and_then(Value::as_u64).unwrap_or(0),
            g("title"),
            g("html_url"),
            g("body")
        ));
    } else if let Some(issue) = p.get("issue") {
        let g = |k: &str| {
            issue
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        out.push_str(&format!(
            "\n\n#{}: {}\n{}",
            issue.get("number").and_then(Value::as_u64).unwrap_or(0),
            g("title"),
            g("html_url")
        ));
    }
    if let Some(c) = at(p, "comment.body").and_then(Value::as_str) {
        out.push_str(&format!("\n\nComment by {}:\n{c}", s("comment.user.login")));
    }
    out.trim_end().to_owned()
}

pub(crate) async fn run_command(
    command: &[String],
    cwd: &std::path::Path,
    payload: &[u8],
    event: &str,
    delivery: &str,
) -> Result<()> {
    use tokio::io::AsyncWriteExt;
    let Some((program, rest)) = command.split_first() else {
        return Err(Error::bad_request("empty command"));
    };
    let mut child = tokio::process::Command::new(program)
        .args(rest)
        .current_dir(cwd)
        .env("AGENTKIT_GITHUB_EVENT", event)
        .env("AGENTKIT_GITHUB_DELIVERY", delivery)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| Error::io("spawn", std::path::Path::new(program), e))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(payload).await;
    }
    let out = tokio::time::timeout(Duration::from_secs(600), child.wait_with_output())
        .await
        .map_err(|_| Error::Upstream {
            message: format!("`{program}` timed out"),
        })?
        .map_err(|e| Error::io("wait for", std::path::Path::new(program), e))?;
    if out.status.success() {
        tracing::info!(program, "GitHub host task finished");
        Ok(())
    } else {
        Err(Error::Upstream {
            message: format!(
                "`{program}` exited with {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
                    .chars()
                    .take(500)
                    .collect::<String>()
            ),
        })
    }
}
