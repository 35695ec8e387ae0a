//! The GitHub pack (`kind = "github"`), built on the channel API: one
//! route, `POST /v1/channels/<id>`, that checks `X-Hub-Signature-256`
//! (HMAC-SHA256 of the raw body, constant time, before parsing) when a
//! secret is set, drops redeliveries by `X-GitHub-Delivery` (durably),
//! and dispatches each delivery by the first matching rule to a model turn
//! (as the actor), a host task (202 at once) or nothing. Opt-in progress
//! surfaces follow the turn through the GitHub API: a commit status
//! (pending → success/failure) and one sticky PR comment.

mod app;
mod client;
pub(crate) mod settings;

use std::path::PathBuf;
use std::sync::Arc;

use agentkit_auth::{Chain, Policy, Secret};
use agentkit_manifest::Channel;
use serde_json::{Value, json};

use crate::api::{ChannelContext, ChannelDefinition, ChannelResponse, HandlerArgs, TurnReply};
use crate::env::Env;
use crate::error::{Error, Result};
use crate::pack::pack_definition;
use crate::pack::{
    Decision, Delivery, PackCore, TurnDefaults, accepted, at, default_chain, ok, resolve, skipped,
    turn_result, webhook_secret,
};
use app::AppAuth;
pub use client::GithubClient;
use client::{Auth, GithubApi};
use settings::Settings;

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
    /// The delivery ledger hosts share (`--database-url`); `None`: this
    /// host's own log under `state_dir`.
    pub deliveries: Option<std::sync::Arc<dyn crate::api::DeliveryLedger>>,
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
    core: PackCore,
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
    let secret = webhook_secret(
        env,
        settings.webhook_secret.as_deref(),
        &channel.id,
        "GitHub",
    );
    let chain = default_chain(
        authored,
        secret.as_ref().map(|secret| Policy::HmacSignature {
            header: "x-hub-signature-256".into(),
            secret: Secret::new(secret.clone()),
            prefix: Some("sha256=".into()),
        }),
        options.dev,
    );
    let api_url = resolve(env, settings.api_url.as_deref())
        .unwrap_or_else(|| "https://api.github.com".into());
    let auth = api_auth(&settings, env, &options.agent_dir).map_err(|message| Error::Config {
        channel: channel.id.clone(),
        message,
    })?;
    let events = settings.published_events();
    let pack = Arc::new(Pack {
        api: GithubApi::new(&api_url, auth),
        settings,
        core: PackCore::new(
            "github",
            "GitHub",
            &options.state_dir,
            &channel.id,
            &options.agent_dir,
            options.deliveries.clone(),
        ),
    });
    let p = pack.clone();
    Ok(pack_definition(
        crate::pack::PackSpec {
            kind: "github",
            label: "GitHub",
            channel,
            description: pack.settings.description.clone(),
            chain,
            events,
            signed: secret.is_some(),
            api_url: &api_url,
            form_bodies: crate::api::FormBodies::PayloadField,
        },
        move |args| {
            let p = p.clone();
            async move { p.handle(args).await }
        },
    ))
}

/// A [`GithubClient`] with the credentials of a `kind = "github"` channel
/// file (`host.github`); `agent_dir` is the agent folder
/// (`private_key_path` is relative to it).
pub fn github_client(
    channel: &Channel,
    env: &Env,
    agent_dir: &std::path::Path,
) -> Result<GithubClient> {
    let settings = parse_settings(channel)?;
    let api_url = resolve(env, settings.api_url.as_deref())
        .unwrap_or_else(|| "https://api.github.com".into());
    let auth = api_auth(&settings, env, agent_dir).map_err(|message| Error::Config {
        channel: channel.id.clone(),
        message,
    })?;
    Ok(GithubClient::from_api(GithubApi::new(&api_url, auth)))
}

/// The API credentials: App installation tokens when `app_id` is set,
/// else `token`, `GITHUB_TOKEN` or `GH_TOKEN`. Errors name settings and
/// files, never secrets.
fn api_auth(
    settings: &Settings,
    env: &Env,
    agent_dir: &std::path::Path,
) -> std::result::Result<Auth, String> {
    let Some(app_id) = &settings.app_id else {
        let token = match &settings.token {
            Some(t) => resolve(env, Some(t)),
            None => env.get("GITHUB_TOKEN").or_else(|| env.get("GH_TOKEN")),
        };
        return Ok(token.map_or(Auth::None, Auth::Token));
    };
    let text = |v: &Value| match v {
        Value::String(s) => env.resolve(s).trim().to_owned(),
        other => other.to_string(),
    };
    let app_id = text(app_id);
    if app_id.is_empty() {
        return Err("`app_id` resolves to nothing: is its `${VAR}` set?".into());
    }
    let installation_id = match &settings.installation_id {
        None => None,
        Some(v) => {
            let t = text(v);
            Some(
                t.parse::<u64>()
                    .map_err(|_| format!("`installation_id` must be a number, not `{t}`"))?,
            )
        }
    };
    let pem = match (&settings.private_key, &settings.private_key_path) {
        (Some(k), _) => env.resolve(k),
        (None, Some(p)) => {
            let path = agent_dir.join(env.resolve(p));
            std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read `private_key_path` {}: {e}", path.display()))?
        }
        (None, None) => String::new(),
    };
    if pem.trim().is_empty() {
        return Err("`private_key` resolves to nothing: is its `${VAR}` set?".into());
    }
    Ok(Auth::App(Arc::new(AppAuth::new(
        app_id,
        &pem,
        installation_id,
    )?)))
}

impl Pack {
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
        if let Some(dup) = self.core.redelivery(delivery.as_deref())? {
            return Ok(dup);
        }
        let payload = &args.body;
        let sender = at(payload, "sender.login")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        if let Some(bot) = &self.settings.bot_name
            && (sender == *bot || sender == format!("{bot}[bot]"))
        {
            return skipped("the bot's own activity");
        }
        let mut ctx = payload.clone();
        if let Some(obj) = ctx.as_object_mut() {
            obj.insert("event".into(), json!(event));
            obj.insert("delivery".into(), json!(delivery));
        }
        let action = payload.get("action").and_then(Value::as_str).unwrap_or("");
        let decision = self.core.decide(
            &args,
            &self.settings.rules,
            &Delivery {
                events: vec![event.as_str()],
                action,
                id: delivery.as_deref(),
                ctx: &ctx,
                payload,
            },
        );
        match decision {
            Decision::Answered(r) => r,
            Decision::Turn(turn) => self.turn(&args, &turn, &event, &sender, &ctx).await,
        }
    }

    async fn turn(
        self: &Arc<Self>,
        args: &HandlerArgs,
        turn: &crate::pack::TurnRule,
        event: &str,
        sender: &str,
        ctx: &Value,
    ) -> Result<ChannelResponse> {
        let repo = at(ctx, "repository.full_name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let number = at(ctx, "pull_request.number")
            .or_else(|| at(ctx, "issue.number"))
            .and_then(Value::as_u64);
        let is_pr = ctx.get("pull_request").is_some() || at(ctx, "issue.pull_request").is_some();
        let defaults = TurnDefaults {
            message: default_message(event, ctx),
            continuation: number
                .map(|n| format!("{}:{repo}#{n}", if is_pr { "pr" } else { "issue" })),
            title: number.map(|n| format!("{repo}#{n}")),
        };
        let session = self
            .core
            .start_turn(args, turn, ctx, defaults, sender, &[("githubEvent", event)])
            .await?;
        let context = self.settings.progress.status_context();
        if (context.is_some() || self.settings.progress.banner) && !repo.is_empty() {
            if self.api.has_credentials() {
                let sha = at(ctx, "pull_request.head.sha")
                    .or_else(|| at(ctx, "check_suite.head_sha"))
                    .or_else(|| at(ctx, "check_run.head_sha"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let target = Target {
                    installation: at(ctx, "installation.id").and_then(Value::as_u64),
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
                    "GitHub progress is on but no API credentials are set (`token`, GITHUB_TOKEN, GH_TOKEN, or `app_id` + `private_key`): skipping it"
                );
            }
        }
        accepted(event, &session)
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
        let api = self.api.for_installation(t.installation);
        if t.sha.is_none()
            && let Some(n) = t.number
        {
            match api.pull(&t.repo, n).await {
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
            let (api, t) = (api.clone(), t.clone());
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
                api.clone(),
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
        match turn_result(&ctx, &session, start).await {
            Some(TurnReply { ok: true, text, .. }) => {
                status("success", "agentkit finished".into()).await;
                banner(if text.is_empty() {
                    "✅ Done.".into()
                } else {
                    text
                })
                .await;
            }
            Some(TurnReply {
                ok: false, text, ..
            }) => {
                status("failure", text.clone()).await;
                banner(format!("❌ {text}")).await;
            }
            None => {}
        }
    }
}

#[derive(Debug, Clone)]
struct Target {
    /// The delivery's App installation.
    installation: Option<u64>,
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
