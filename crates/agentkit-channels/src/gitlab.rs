//! The GitLab pack (`kind = "gitlab"`, GitLab.com and self-managed), built
//! on the channel API: one route, `POST /v1/channels/<id>`, that checks
//! `X-Gitlab-Token` against the secret in constant time, drops
//! redeliveries by `X-Gitlab-Event-UUID` (durably), dispatches merge
//! request, note, pipeline, push and custom hooks by the first matching
//! rule (the rules of the GitHub pack), and posts the turn's reply back as
//! a merge request (or issue) note through the GitLab API.

use std::sync::Arc;

use agentkit_auth::{Chain, Policy, Secret};
use agentkit_manifest::Channel;
use serde_json::{Value, json};

use crate::api::{ChannelDefinition, ChannelResponse, HandlerArgs};
use crate::env::Env;
use crate::error::{Error, Result};
use crate::github::GithubOptions;
use crate::pack::pack_definition;
use crate::pack::{
    Decision, Delivery, PackCore, ReplySettings, TurnDefaults, accepted, at, default_chain,
    post_json, published_events, resolve, skipped, text as s, webhook_secret,
};

/// `webhook_secret` is compared with `X-Gitlab-Token`; `api_url` defaults
/// to `https://gitlab.com/api/v4`, `token` to `${GITLAB_TOKEN}`; replies
/// are notes.
type Settings = ReplySettings;

/// The GitLab pack's options are the GitHub pack's.
pub type GitlabOptions = GithubOptions;

/// The hook events a gitlab channel file publishes.
pub fn gitlab_events(channel: &Channel) -> Result<Vec<String>> {
    let s = Settings::of(channel)?;
    Ok(published_events(s.events.as_ref(), &s.rules))
}

struct Pack {
    settings: Settings,
    api_url: String,
    token: Option<String>,
    core: PackCore,
}

/// The channel API form of a gitlab channel file.
pub fn gitlab_channel(
    channel: &Channel,
    authored: Option<Chain>,
    options: GitlabOptions,
) -> Result<ChannelDefinition> {
    let settings = Settings::of(channel)?;
    let env: &Env = &options.env;
    let secret = webhook_secret(
        env,
        settings.webhook_secret.as_deref(),
        &channel.id,
        "GitLab",
    );
    let chain = default_chain(
        authored,
        secret.as_ref().map(|secret| Policy::SharedSecret {
            header: "x-gitlab-token".into(),
            secret: Secret::new(secret.clone()),
        }),
        options.dev,
    );
    let api_url = resolve(env, settings.api_url.as_deref())
        .unwrap_or_else(|| "https://gitlab.com/api/v4".into());
    let token = match &settings.token {
        Some(t) => resolve(env, Some(t)),
        None => env.get("GITLAB_TOKEN"),
    };
    let events = published_events(settings.events.as_ref(), &settings.rules);
    let pack = Arc::new(Pack {
        settings,
        api_url: api_url.clone(),
        token,
        core: PackCore::new(
            "gitlab",
            "GitLab",
            &options.state_dir,
            &channel.id,
            &options.agent_dir,
            options.deliveries.clone(),
        ),
    });
    let p = pack.clone();
    Ok(pack_definition(
        crate::pack::PackSpec {
            kind: "gitlab",
            label: "GitLab",
            channel,
            description: pack.settings.description.clone(),
            chain,
            events,
            signed: secret.is_some(),
            api_url: &api_url,
            form_bodies: crate::api::FormBodies::JsonOnly("GitLab".into()),
        },
        move |args| {
            let p = p.clone();
            async move { p.handle(args).await }
        },
    ))
}

impl Pack {
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
        if let Some(dup) = self.core.redelivery(args.header("x-gitlab-event-uuid"))? {
            return Ok(dup);
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
            return skipped("the bot's own activity");
        }
        let action = s(&payload, "object_attributes.action").to_owned();
        let event = if kind.is_empty() { &header } else { &kind }.clone();
        let mut ctx = payload.clone();
        if let Some(obj) = ctx.as_object_mut() {
            obj.insert("event".into(), json!(event));
            obj.insert("action".into(), json!(action));
        }
        let decision = self.core.decide(
            &args,
            &self.settings.rules,
            &Delivery {
                events: vec![event.as_str(), header.as_str()],
                action: &action,
                id: args.header("x-gitlab-event-uuid"),
                ctx: &ctx,
                payload: &payload,
            },
        );
        let turn = match decision {
            Decision::Answered(r) => return r,
            Decision::Turn(turn) => turn,
        };
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
        let mark = if noun == "mr" { "!" } else { "#" };
        let defaults = TurnDefaults {
            message: format!(
                "GitLab `{event}`{} on {project}: {}\n{}\n\n{}",
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
            continuation: iid.map(|i| format!("{noun}:{project}{mark}{i}")),
            title: iid.map(|i| format!("{project}{mark}{i}")),
        };
        let session = self
            .core
            .start_turn(&args, &turn, &ctx, defaults, &actor, &[])
            .await?;
        let project_id = at(&ctx, "project.id").and_then(Value::as_u64);
        if self.settings.reply.unwrap_or(true)
            && self.token.is_some()
            && !noun.is_empty()
            && let (Some(iid), Some(pid)) = (iid, project_id)
        {
            let pack = self.clone();
            let path = format!(
                "/projects/{pid}/{}/{iid}/notes",
                if noun == "mr" {
                    "merge_requests"
                } else {
                    "issues"
                }
            );
            self.core
                .after_turn(&args, &session, move |reply| async move {
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
        accepted(&kind, &session)
    }

    async fn post_note(&self, path: &str, body: &str) -> Result<()> {
        let url = format!("{}{path}", self.api_url.trim_end_matches('/'));
        let auth = self.token.clone().map(|t| ("private-token", t));
        post_json("GitLab", &url, auth, &json!({"body": body}))
            .await
            .map(|_| ())
    }
}
