//! The Slack pack (`kind = "slack"`), built on the channel API. Events
//! arrive over Socket Mode (the default: a WebSocket opened with the app
//! token, [`socket`]) or the Events API (`POST /v1/channels/<id>`, signed
//! with the app's signing secret and checked by the auth chain before
//! anything is parsed). Either way each `event_id` is recorded durably
//! before it is acted on, the event is acknowledged at once, and the work
//! runs after: mentions, direct messages, replies in a bot thread and
//! watched channel posts start or continue the thread's session
//! (`<team>:<channel>:<thread_ts>`), and the reply is streamed into the
//! thread ([`reply`]). With `tool_approvals`, parked calls post an
//! Approve / Deny card whose clicks (interactivity) resolve them.

mod client;
mod doctor;
pub(crate) mod manifest;
mod reply;
pub(crate) mod settings;
mod socket;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use agentkit_auth::{AuthContext, Chain, Policy, PrincipalType, Secret};
use agentkit_manifest::{Admission, Channel};
use agentkit_protocol::api::{ChannelState, PackInfo, SlackMode, SlackPackInfo};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::api::{
    ApprovalDecision, ChannelContext, ChannelDefinition, ChannelResponse, HandlerArgs, RouteDef,
    SendOptions,
};
use crate::env::Env;
use crate::error::{Error, Result};
use crate::pack::{Decision, Delivery, PackCore, TurnDefaults, at, default_chain, ok, text};
use client::SlackApi;
use reply::{APPROVE_ACTION, DENY_ACTION, Start, Streamer, Thread};
use settings::{Mode, Posts, Settings};

pub use crate::github::GithubOptions as SlackOptions;
pub use client::SlackClient;
pub use doctor::{SlackCheck, slack_doctor};
pub use manifest::{SlackManifestOptions, slack_app_manifest, slack_env_example};

/// How many replied-to turn ids are remembered (coalesced messages share
/// a turn: only its first follower replies).
const CLAIMED_TURNS: usize = 1024;

/// How many user lookups are cached.
const CACHED_USERS: usize = 4096;

fn parse_settings(channel: &Channel) -> Result<Settings> {
    Settings::parse(channel.settings.as_ref().unwrap_or(&json!({}))).map_err(|message| {
        Error::Config {
            channel: channel.id.clone(),
            message,
        }
    })
}

/// The pack's state: settings, the Web API client (none while idle), the
/// delivery log, and what is in flight.
pub(crate) struct Pack {
    id: String,
    settings: Settings,
    /// The bot token's client; `None` leaves the channel idle.
    api: Option<SlackApi>,
    app_token: Option<String>,
    api_url: String,
    core: PackCore,
    /// The credentials the mode needs and lacks.
    missing: Vec<String>,
    claimed: Mutex<VecDeque<String>>,
    /// Watched posts waiting out their debounce, by `channel:ts`.
    pending: Mutex<HashMap<String, Pending>>,
    /// Edits and deletions that arrived before their post was pending (the
    /// handlers of one post's events run concurrently, and the post's
    /// may still be looking up its author), by `channel:ts`.
    early: Mutex<HashMap<String, Early>>,
    /// `user id` → may talk to the bot (a member of the workspace).
    users: Mutex<HashMap<String, bool>>,
    bot_user: Mutex<Option<String>>,
    /// Slack's streaming methods work here (until Slack refuses one).
    streaming: AtomicBool,
    stop: CancellationToken,
}

#[derive(Debug, Clone)]
struct Pending {
    generation: u64,
    event: Value,
    team: String,
}

/// An edit or deletion seen before its post was pending.
struct Early {
    at: std::time::Instant,
    /// `None`: the post was deleted; else its latest text.
    text: Option<Value>,
}

/// The most early edits and deletions kept (older ones are dropped first).
const MAX_EARLY: usize = 10_000;

/// What brought a message to the bot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Engaged {
    Mention,
    DirectMessage,
    Thread,
    ChannelPost,
}

impl Engaged {
    fn as_str(self) -> &'static str {
        match self {
            Engaged::Mention => "mention",
            Engaged::DirectMessage => "direct_message",
            Engaged::Thread => "thread",
            Engaged::ChannelPost => "channel_post",
        }
    }
}

/// A [`SlackClient`] with the bot token of a `kind = "slack"` channel
/// file (`host.slack`). Errors name the variable, never the token.
pub fn slack_client(channel: &Channel, env: &Env) -> Result<SlackClient> {
    let settings = parse_settings(channel)?;
    let token = settings
        .credentials(env)
        .bot_token
        .ok_or_else(|| Error::Config {
            channel: channel.id.clone(),
            message: format!(
                "no bot token: `{}` is not set",
                settings.default_var("SLACK_BOT_TOKEN")
            ),
        })?;
    Ok(SlackClient::new(SlackApi::new(
        &settings.api_url(env),
        &token,
    )))
}

/// The events a slack channel file needs from the Slack app.
pub fn slack_events(channel: &Channel) -> Result<Vec<String>> {
    Ok(parse_settings(channel)?
        .bot_events()
        .into_iter()
        .map(str::to_owned)
        .collect())
}

/// The channel API form of a slack channel file. `authored` is the
/// file's own `auth` chain, which replaces the pack's (the signing
/// secret's check, or loopback only without one).
pub fn slack_channel(
    channel: &Channel,
    authored: Option<Chain>,
    options: SlackOptions,
) -> Result<ChannelDefinition> {
    let settings = parse_settings(channel)?;
    let creds = settings.credentials(&options.env);
    let api_url = settings.api_url(&options.env);
    let mut missing = Vec::new();
    if creds.bot_token.is_none() {
        missing.push(settings.default_var("SLACK_BOT_TOKEN"));
    }
    match settings.mode {
        Mode::Socket if creds.app_token.is_none() => {
            missing.push(settings.default_var("SLACK_APP_TOKEN"));
        }
        Mode::Events if creds.signing_secret.is_none() && authored.is_none() && !options.dev => {
            missing.push(settings.default_var("SLACK_SIGNING_SECRET"));
        }
        _ => {}
    }
    let mode = match settings.mode {
        Mode::Socket => SlackMode::Socket,
        Mode::Events => SlackMode::Events,
    };
    if !missing.is_empty() {
        tracing::warn!(
            channel = %channel.id,
            "slack channel `{}` is idle: missing credentials {} ({mode} mode)",
            channel.id,
            missing.join(", ")
        );
    }
    let chain = default_chain(
        authored,
        creds
            .signing_secret
            .as_ref()
            .map(|secret| Policy::SlackSignature {
                secret: Secret::new(secret.clone()),
            }),
        options.dev,
    );
    let info = PackInfo::Slack(SlackPackInfo {
        mode,
        state: if missing.is_empty() {
            ChannelState::Ready
        } else {
            ChannelState::Idle
        },
        missing: missing.clone(),
        api_url: api_url.clone(),
        signed: creds.signing_secret.is_some(),
        tool_approvals: settings.tool_approvals,
        block_external: settings.block_external,
        slack_events: settings
            .bot_events()
            .into_iter()
            .map(str::to_owned)
            .collect(),
        slack_channel_posts: settings
            .engagement
            .channel_posts
            .as_ref()
            .map(|p| p.allow.clone()),
    });
    let pack = Arc::new(Pack {
        id: channel.id.clone(),
        api: creds
            .bot_token
            .as_deref()
            .filter(|_| missing.is_empty())
            .map(|t| SlackApi::new(&api_url, t)),
        app_token: creds.app_token,
        api_url,
        core: PackCore::new(
            "slack",
            "Slack",
            &options.state_dir,
            &channel.id,
            &options.agent_dir,
            options.deliveries.clone(),
        ),
        missing,
        claimed: Mutex::default(),
        pending: Mutex::default(),
        early: Mutex::default(),
        users: Mutex::default(),
        bot_user: Mutex::default(),
        streaming: AtomicBool::new(settings.streaming),
        stop: CancellationToken::new(),
        settings,
    });
    let mut def = ChannelDefinition::new(channel.id.clone());
    def.kind = "slack".into();
    def.description = pack.settings.description.clone();
    // A wrong signature or a stale timestamp is refused under `--dev`
    // too, as on the other packs.
    def.signature_headers = crate::pack::signature_headers(&chain);
    def.auth = Some(chain);
    def.max_body = Some(crate::pack::pack_max_body(channel));
    def.info = Some(info);
    let p = pack.clone();
    def.routes.push(
        RouteDef::new(agentkit_manifest::Method::Post, "/", move |args| {
            let p = p.clone();
            async move { p.handle_http(args).await }
        })
        .body_schema(json!({"type": "object"}))
        .description("Slack Events API and interactivity requests"),
    );
    let p = pack.clone();
    def = def.on_start(move |ctx| {
        let p = p.clone();
        async move {
            if p.settings.mode == Mode::Socket
                && p.missing.is_empty()
                && let Some(token) = p.app_token.clone()
            {
                let c = ctx.clone();
                ctx.wait_until(socket::run(p.clone(), c, token));
            }
            Ok(())
        }
    });
    let p = pack;
    def = def.on_stop(move || {
        let p = p.clone();
        async move { p.stop.cancel() }
    });
    Ok(def)
}

impl Pack {
    /// One Events API or interactivity request (signature already checked).
    async fn handle_http(self: Arc<Self>, args: HandlerArgs) -> Result<ChannelResponse> {
        if let Some(raw) = args.body.get("payload").and_then(Value::as_str) {
            let payload: Value = serde_json::from_str(raw).map_err(|e| {
                Error::bad_request(format!("the interactivity `payload` is not JSON: {e}"))
            })?;
            if let Some(idle) = self.idle_answer() {
                return Ok(idle);
            }
            let (pack, ctx) = (self.clone(), args.ctx.clone());
            let authenticator = args.auth.authenticator.clone();
            args.ctx.wait_until(async move {
                pack.interactive(&ctx, &payload, &authenticator).await;
            });
            return ok(200, json!({}));
        }
        match text(&args.body, "type") {
            "url_verification" => ok(200, json!({"challenge": args.body.get("challenge")})),
            "event_callback" => {
                if let Some(idle) = self.idle_answer() {
                    return Ok(idle);
                }
                if let Some(n) = args.header("x-slack-retry-num") {
                    tracing::info!(channel = %self.id, retry = n, reason = ?args.header("x-slack-retry-reason"), "Slack redelivers an event");
                }
                let authenticator = args.auth.authenticator.clone();
                let answer = self.event_callback(&args.ctx, args.body, &authenticator)?;
                ok(200, answer)
            }
            other => ok(
                200,
                json!({"ok": true, "skipped": true, "reason": format!("unhandled request type `{other}`")}),
            ),
        }
    }

    /// `503` while credentials are missing.
    fn idle_answer(&self) -> Option<ChannelResponse> {
        (!self.missing.is_empty()).then(|| {
            ChannelResponse::json(
                503,
                json!({"ok": false, "error": {"code": "channel_idle", "message": format!("slack channel `{}` is idle: missing credentials {}", self.id, self.missing.join(", "))}}),
            )
        })
    }

    /// Records the envelope's `event_id` (a redelivery stops here) and
    /// hands the event to work that runs after the acknowledgement.
    fn event_callback(
        self: &Arc<Self>,
        ctx: &ChannelContext,
        envelope: Value,
        authenticator: &str,
    ) -> Result<Value> {
        let event_id = envelope
            .get("event_id")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if let Some(id) = &event_id
            && !self.core.first_delivery(id)?
        {
            tracing::info!(channel = %self.id, event = %id, "ignoring a redelivered Slack event");
            return Ok(json!({"ok": true, "duplicate": true, "eventId": id}));
        }
        let (pack, c, authn) = (self.clone(), ctx.clone(), authenticator.to_owned());
        ctx.wait_until(async move { pack.on_event(&c, &envelope, &authn).await });
        Ok(json!({"ok": true, "eventId": event_id}))
    }

    /// The bot's own user id: from the envelope's authorizations, else
    /// `auth.test` (once).
    async fn bot_user(&self, envelope: &Value) -> Option<String> {
        if let Some(id) = at(envelope, "authorizations")
            .and_then(|a| a.get(0))
            .and_then(|a| a.get("user_id"))
            .and_then(Value::as_str)
        {
            return Some(id.to_owned());
        }
        if let Some(id) = lock(&self.bot_user).clone() {
            return Some(id);
        }
        let api = self.api.as_ref()?;
        match api.call_form("auth.test", &[]).await {
            Ok(v) => {
                let id = v.get("user_id").and_then(Value::as_str)?.to_owned();
                *lock(&self.bot_user) = Some(id.clone());
                Some(id)
            }
            Err(e) => {
                tracing::warn!(channel = %self.id, error = %e, "cannot learn the bot's user id");
                None
            }
        }
    }

    async fn on_event(self: &Arc<Self>, ctx: &ChannelContext, envelope: &Value, authn: &str) {
        let Some(event) = envelope.get("event") else {
            return;
        };
        let team = text(envelope, "team_id").to_owned();
        let bot = self.bot_user(envelope).await;
        let user = text(event, "user");
        // The bot's own posts (and other bots') never dispatch.
        if event.get("bot_id").is_some()
            || text(event, "subtype") == "bot_message"
            || bot.as_deref() == Some(user)
        {
            return;
        }
        let kind = text(event, "type");
        if self.apply_rules(ctx, envelope, event, &team, authn).await {
            return;
        }
        match kind {
            "app_mention" if self.settings.engagement.mentions => {
                self.engage(ctx, &team, event, Engaged::Mention, bot.as_deref(), authn)
                    .await;
            }
            "message" => {
                self.on_message(ctx, &team, event, bot.as_deref(), authn)
                    .await
            }
            "assistant_thread_started" => self.greet(event).await,
            _ => {}
        }
    }

    /// A new assistant thread: offer the suggested prompts.
    async fn greet(&self, event: &Value) {
        let prompts = &self.settings.assistant.suggested_prompts;
        let Some(api) = self.api.as_ref().filter(|_| !prompts.is_empty()) else {
            return;
        };
        let body = json!({
            "channel_id": text(event, "assistant_thread.channel_id"),
            "thread_ts": text(event, "assistant_thread.thread_ts"),
            "prompts": prompts,
        });
        if let Err(e) = api
            .call("assistant.threads.setSuggestedPrompts", &body)
            .await
        {
            tracing::warn!(channel = %self.id, error = %e, "cannot offer the suggested prompts");
        }
    }

    /// `[[rules]]` first: the first rule matching the event (`event` is
    /// the Slack event type, or `message.<channel_type>`; `actions` match
    /// the subtype) decides. Whether one did.
    async fn apply_rules(
        self: &Arc<Self>,
        ctx: &ChannelContext,
        envelope: &Value,
        event: &Value,
        team: &str,
        authn: &str,
    ) -> bool {
        let rules = &self.settings.rules;
        if rules.is_empty() {
            return false;
        }
        let kind = text(event, "type");
        let qualified = format!("{kind}.{}", text(event, "channel_type"));
        let events = vec![kind, qualified.as_str()];
        let action = text(event, "subtype");
        if !rules
            .iter()
            .any(|r| r.matches_with(&events, action, envelope))
        {
            return false;
        }
        let args = HandlerArgs {
            body: envelope.clone(),
            query: json!({}),
            params: Default::default(),
            auth: AuthContext::new(authn, "slack", PrincipalType::App),
            request_ip: None,
            headers: Vec::new(),
            raw_body: Vec::new(),
            ctx: ctx.clone(),
        };
        let delivery = Delivery {
            events,
            action,
            id: envelope.get("event_id").and_then(Value::as_str),
            ctx: envelope,
            payload: envelope,
        };
        match self.core.decide(&args, rules, &delivery) {
            Decision::Answered(r) => {
                if let Err(e) = r {
                    tracing::warn!(channel = %self.id, error = %e, "a Slack rule failed");
                }
            }
            Decision::Turn(turn) => {
                let Some(thread) = thread_of(event) else {
                    return true;
                };
                let key = continuation(team, &thread);
                let defaults = TurnDefaults {
                    message: text(event, "text").to_owned(),
                    continuation: Some(key.clone()),
                    title: None,
                };
                match self
                    .core
                    .start_turn(&args, &turn, envelope, defaults, &key, &[])
                    .await
                {
                    Ok(session) => {
                        let recipient = Some((team.to_owned(), text(event, "user").to_owned()));
                        self.reply(
                            ctx,
                            &session.id,
                            session.start_index,
                            thread,
                            Start::AfterMessage,
                            recipient,
                        )
                        .await;
                    }
                    Err(e) => {
                        tracing::warn!(channel = %self.id, error = %e, "a Slack rule's turn failed")
                    }
                }
            }
        }
        true
    }

    async fn on_message(
        self: &Arc<Self>,
        ctx: &ChannelContext,
        team: &str,
        event: &Value,
        bot: Option<&str>,
        authn: &str,
    ) {
        let channel = text(event, "channel");
        match text(event, "subtype") {
            "" | "thread_broadcast" | "file_share" => {}
            "message_changed" => {
                // An edit inside the debounce window replaces the text and
                // restarts the window.
                let ts = text(event, "message.ts");
                let key = format!("{channel}:{ts}");
                let restarted = {
                    let mut pending = lock(&self.pending);
                    pending.get_mut(&key).map(|p| {
                        p.generation += 1;
                        if let (Some(obj), Some(new)) =
                            (p.event.as_object_mut(), at(event, "message.text"))
                        {
                            obj.insert("text".into(), new.clone());
                        }
                        p.generation
                    })
                };
                match restarted {
                    Some(generation) => self.schedule(ctx, key, generation, authn),
                    None => self.remember_early(key, at(event, "message.text").cloned()),
                }
                return;
            }
            "message_deleted" => {
                let key = format!("{channel}:{}", text(event, "deleted_ts"));
                if lock(&self.pending).remove(&key).is_some() {
                    tracing::info!(channel = %self.id, "a watched post was deleted before its debounce ended: not dispatched");
                } else {
                    self.remember_early(key, None);
                }
                return;
            }
            _ => return,
        }
        if text(event, "channel_type") == "im" {
            if self.settings.engagement.direct_messages {
                self.engage(ctx, team, event, Engaged::DirectMessage, bot, authn)
                    .await;
            }
            return;
        }
        // A post that mentions the bot is the `app_mention` path's.
        if let Some(bot) = bot
            && text(event, "text").contains(&format!("<@{bot}>"))
        {
            return;
        }
        let ts = text(event, "ts");
        let thread_ts = text(event, "thread_ts");
        let top_level = thread_ts.is_empty() || thread_ts == ts;
        if !top_level {
            let key = format!("{team}:{channel}:{thread_ts}");
            if ctx.has_continuation_session(&key).await {
                self.engage(ctx, team, event, Engaged::Thread, bot, authn)
                    .await;
                return;
            }
        }
        let Some(watch) = &self.settings.engagement.channel_posts else {
            return;
        };
        if !watch.allow.iter().any(|c| c == channel) || !(top_level || watch.posts == Posts::All) {
            return;
        }
        match self.settings.debounce() {
            None => {
                self.engage(ctx, team, event, Engaged::ChannelPost, bot, authn)
                    .await;
            }
            Some(_) => {
                let key = format!("{channel}:{ts}");
                let mut event = event.clone();
                // Its edit or deletion may have been handled first.
                if let Some(early) = lock(&self.early).remove(&key) {
                    match early.text {
                        None => {
                            tracing::info!(channel = %self.id, "a watched post was deleted before its debounce ended: not dispatched");
                            return;
                        }
                        Some(text) => {
                            if let Some(obj) = event.as_object_mut() {
                                obj.insert("text".into(), text);
                            }
                        }
                    }
                }
                lock(&self.pending).insert(
                    key.clone(),
                    Pending {
                        generation: 0,
                        event,
                        team: team.to_owned(),
                    },
                );
                self.schedule(ctx, key, 0, authn);
            }
        }
    }

    /// Keeps an edit (`Some` text) or a deletion (`None`) of a post that is
    /// not pending yet, for as long as a debounce lasts (bounded).
    fn remember_early(&self, key: String, text: Option<Value>) {
        let Some(wait) = self.settings.debounce() else {
            return;
        };
        let mut early = lock(&self.early);
        let keep = wait.max(std::time::Duration::from_secs(60));
        early.retain(|_, e| e.at.elapsed() < keep);
        if early.len() >= MAX_EARLY
            && let Some(oldest) = early
                .iter()
                .min_by_key(|(_, e)| e.at)
                .map(|(k, _)| k.clone())
        {
            early.remove(&oldest);
        }
        early.insert(
            key,
            Early {
                at: std::time::Instant::now(),
                text,
            },
        );
    }

    /// Dispatches a watched post once its debounce passes unchanged.
    fn schedule(self: &Arc<Self>, ctx: &ChannelContext, key: String, generation: u64, authn: &str) {
        let Some(wait) = self.settings.debounce() else {
            return;
        };
        let (pack, c, authn) = (self.clone(), ctx.clone(), authn.to_owned());
        ctx.wait_until(async move {
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = pack.stop.cancelled() => return,
            }
            let due = {
                let mut pending = lock(&pack.pending);
                match pending.get(&key) {
                    Some(p) if p.generation == generation => pending.remove(&key),
                    _ => None,
                }
            };
            if let Some(p) = due {
                let bot = lock(&pack.bot_user).clone();
                pack.engage(
                    &c,
                    &p.team,
                    &p.event,
                    Engaged::ChannelPost,
                    bot.as_deref(),
                    &authn,
                )
                .await;
            }
        });
    }

    /// Starts or continues the thread's session with the message, and
    /// streams the reply.
    async fn engage(
        self: &Arc<Self>,
        ctx: &ChannelContext,
        team: &str,
        event: &Value,
        how: Engaged,
        bot: Option<&str>,
        authn: &str,
    ) {
        let Some(api) = &self.api else {
            return;
        };
        let Some(thread) = thread_of(event) else {
            return;
        };
        let user = text(event, "user").to_owned();
        if self.settings.block_external && !self.is_member(team, event).await {
            tracing::info!(channel = %self.id, "refusing a Slack message from outside the workspace");
            if let Err(e) = api
                .post(
                    &thread.channel,
                    Some(&thread.thread_ts),
                    "Sorry, I only answer members of this workspace.",
                    None,
                )
                .await
            {
                tracing::warn!(channel = %self.id, error = %e, "cannot post the refusal");
            }
            return;
        }
        let mut message = text(event, "text").to_owned();
        if let Some(bot) = bot {
            message = message.replace(&format!("<@{bot}>"), "");
        }
        let message = message.trim().to_owned();
        let key = continuation(team, &thread);
        let auth = AuthContext::new(authn, format!("slack:{key}"), PrincipalType::User)
            .with_attribute("slackUser", user.as_str())
            .with_attribute("slackTeam", team)
            .with_attribute("engagement", how.as_str());
        let title: String = message.chars().take(80).collect();
        let session_title = title.clone();
        let sent = ctx
            .send(
                if message.is_empty() {
                    "(an empty message)".to_owned()
                } else {
                    message
                },
                SendOptions {
                    continuation_token: Some(key),
                    admission: Admission::Coalesce,
                    title: Some(session_title),
                    ..SendOptions::default()
                },
                &auth,
            )
            .await;
        match sent {
            Ok(session) => {
                if session.is_new
                    && thread.channel.starts_with('D')
                    && self.settings.assistant.titles
                {
                    let body = json!({"channel_id": thread.channel, "thread_ts": thread.thread_ts, "title": title});
                    if let Err(e) = api.call("assistant.threads.setTitle", &body).await {
                        tracing::debug!(channel = %self.id, error = %e, "cannot title the thread");
                    }
                }
                self.reply(
                    ctx,
                    &session.id,
                    session.start_index,
                    thread,
                    Start::AfterMessage,
                    Some((team.to_owned(), user.clone())),
                )
                .await;
            }
            Err(e) => {
                tracing::warn!(channel = %self.id, error = %e, "a Slack message could not start a turn");
                let shown = if e.status() >= 500 {
                    "something went wrong on the agent's side".to_owned()
                } else {
                    e.to_string()
                };
                let _ = api
                    .post(
                        &thread.channel,
                        Some(&thread.thread_ts),
                        &format!(":warning: {shown}"),
                        None,
                    )
                    .await;
            }
        }
    }

    /// Is the sender a full member of the workspace (not a Slack Connect
    /// user, a guest, or someone from another workspace)? Unknown counts
    /// as no.
    async fn is_member(&self, team: &str, event: &Value) -> bool {
        for field in ["user_team", "source_team", "team"] {
            let t = text(event, field);
            if !t.is_empty() && t != team {
                return false;
            }
        }
        let user = text(event, "user");
        if user.is_empty() {
            return false;
        }
        if let Some(known) = lock(&self.users).get(user) {
            return *known;
        }
        let Some(api) = &self.api else {
            return false;
        };
        let member = match api.call_form("users.info", &[("user", user)]).await {
            Ok(v) => {
                let u = v.get("user").cloned().unwrap_or(Value::Null);
                let flag = |k: &str| u.get(k).and_then(Value::as_bool).unwrap_or(false);
                let home = text(&u, "team_id");
                !(flag("is_restricted")
                    || flag("is_ultra_restricted")
                    || flag("is_stranger")
                    || flag("is_bot")
                    || (!home.is_empty() && home != team))
            }
            Err(e) => {
                tracing::warn!(channel = %self.id, error = %e, "cannot look the sender up (`users.info`, scope `users:read`): refusing");
                return false;
            }
        };
        let mut users = lock(&self.users);
        if users.len() >= CACHED_USERS {
            users.clear();
        }
        users.insert(user.to_owned(), member);
        member
    }

    /// Streams the reply of the turn that handles the message.
    async fn reply(
        self: &Arc<Self>,
        ctx: &ChannelContext,
        session: &str,
        start_index: u64,
        thread: Thread,
        start: Start,
        recipient: Option<(String, String)>,
    ) {
        let Some(api) = &self.api else {
            return;
        };
        let events = match ctx.follow(session, start_index).await {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(channel = %self.id, error = %e, "cannot follow the session");
                return;
            }
        };
        let claim = |turn: &str| {
            let mut claimed = lock(&self.claimed);
            if claimed.iter().any(|t| t == turn) {
                return false;
            }
            if claimed.len() >= CLAIMED_TURNS {
                claimed.pop_front();
            }
            claimed.push_back(turn.to_owned());
            true
        };
        let streamer = Streamer {
            api,
            thread: &thread,
            interval: self.settings.update_interval(),
            approvals: self.settings.tool_approvals,
            status: thread.channel.starts_with('D'),
            streaming: &self.streaming,
            recipient,
            session,
            claim: &claim,
            stop: &self.stop,
        };
        streamer.run(events, start).await;
    }

    /// A click on a card's button: resolves the call as the clicking
    /// user, updates the card, and streams a resumed turn's reply.
    async fn interactive(self: &Arc<Self>, ctx: &ChannelContext, payload: &Value, authn: &str) {
        if text(payload, "type") != "block_actions" {
            return;
        }
        let Some(api) = &self.api else {
            return;
        };
        let Some(action) = at(payload, "actions").and_then(|a| a.get(0)) else {
            return;
        };
        let approve = match text(action, "action_id") {
            APPROVE_ACTION => true,
            DENY_ACTION => false,
            _ => return,
        };
        let ids: Value = serde_json::from_str(text(action, "value")).unwrap_or(Value::Null);
        let (session, call) = (text(&ids, "session"), text(&ids, "call"));
        let user = text(payload, "user.id");
        let team = match text(payload, "team.id") {
            "" => text(payload, "user.team_id"),
            t => t,
        };
        let channel = text(payload, "channel.id");
        let ts = text(payload, "message.ts");
        let thread_ts = match text(payload, "message.thread_ts") {
            "" => text(payload, "container.thread_ts"),
            t => t,
        };
        if session.is_empty() || call.is_empty() || user.is_empty() {
            return;
        }
        if self.settings.block_external
            && !self
                .is_member(
                    team,
                    &json!({"user": user, "team": text(payload, "user.team_id")}),
                )
                .await
        {
            tracing::info!(channel = %self.id, "refusing an approval click from outside the workspace");
            return;
        }
        let auth = AuthContext::new(authn, format!("slack:{team}:{user}"), PrincipalType::User)
            .with_attribute("slackUser", user)
            .with_attribute("slackTeam", team);
        let decision = if approve {
            ApprovalDecision::approve()
        } else {
            ApprovalDecision::deny(format!("denied in Slack by {user}"))
        };
        let tool_line = at(payload, "message.blocks")
            .and_then(|b| b.get(0))
            .map(|b| text(b, "text.text"))
            .and_then(|t| t.lines().next())
            .unwrap_or("*Approval*")
            .to_owned();
        match ctx.resolve_approval(session, call, decision, &auth).await {
            Ok(resolved) => {
                let blocks = reply::decided_blocks(&tool_line, approve, user);
                let summary = if approve { "Approved" } else { "Denied" };
                if let Err(e) = api.update(channel, ts, summary, Some(&blocks)).await {
                    tracing::warn!(channel = %self.id, error = %e, "cannot update the approval card");
                }
                if resolved.resumed && !thread_ts.is_empty() {
                    let thread = Thread {
                        channel: channel.to_owned(),
                        thread_ts: thread_ts.to_owned(),
                    };
                    self.reply(
                        ctx,
                        session,
                        0,
                        thread,
                        Start::AfterApproval(call.to_owned()),
                        Some((team.to_owned(), user.to_owned())),
                    )
                    .await;
                }
            }
            Err(e) => {
                tracing::info!(channel = %self.id, error = %e, "an approval click was refused");
                let _ = api
                    .post(
                        channel,
                        (!thread_ts.is_empty()).then_some(thread_ts),
                        &format!(":warning: <@{user}> that approval could not be applied: {e}"),
                        None,
                    )
                    .await;
            }
        }
    }
}

/// The thread a message belongs to (a top-level post starts its own).
fn thread_of(event: &Value) -> Option<Thread> {
    let channel = text(event, "channel");
    let ts = text(event, "ts");
    if channel.is_empty() || ts.is_empty() {
        return None;
    }
    let thread_ts = match text(event, "thread_ts") {
        "" => ts,
        t => t,
    };
    Some(Thread {
        channel: channel.to_owned(),
        thread_ts: thread_ts.to_owned(),
    })
}

/// `<team>:<channel>:<thread_ts>`: one session per thread.
fn continuation(team: &str, thread: &Thread) -> String {
    format!("{team}:{}:{}", thread.channel, thread.thread_ts)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
