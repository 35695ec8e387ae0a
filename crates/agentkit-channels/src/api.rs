//! The Rust channel API (the `defineChannel` contract): a channel is a set
//! of typed routes, event handlers with per-session state, and `on_start` /
//! `on_stop` hooks. Declarative `channels/*.toml` files and the packs are
//! built on exactly this API; none has a private path into the runtime.
//!
//! The crate cannot see sessions: it calls them through [`SessionHost`],
//! which the facade implements over the agent runtime.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use agentkit_auth::{AuthContext, Chain};
use agentkit_manifest::{Admission, Method, RouteHandler};
use agentkit_protocol::Event;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use serde::Serialize;
use serde_json::{Value, json};
use tokio_util::task::TaskTracker;

use crate::error::{Error, Result};
use crate::state::StateStore;

/// What a channel needs from the sessions of its agent. The facade
/// implements it over `AgentRuntime`; tests may implement it over anything.
pub trait SessionHost: Send + Sync + 'static {
    /// Starts a session on `channel`, or continues the one its
    /// continuation key maps to (whoever owns it: the channel has already
    /// authenticated the sender).
    fn send(&self, channel: &str, request: SendRequest) -> BoxFuture<'_, Result<ChannelSession>>;

    /// The session, if it exists.
    fn session(&self, id: &str) -> BoxFuture<'_, Option<SessionInfo>>;

    /// The session a continuation key of `channel` maps to.
    fn session_for(&self, channel: &str, key: &str) -> BoxFuture<'_, Option<String>>;

    /// Is a turn running (or queued) in the session?
    fn is_busy(&self, id: &str) -> bool;

    /// Interrupts the running turn and drops queued messages; whether a
    /// turn was running.
    fn interrupt(&self, id: &str) -> BoxFuture<'_, Result<bool>>;

    /// A deterministic server-tool call, answering its envelope
    /// `{toolName, callId, isError, result, durationMs}`; inside `session`
    /// when given.
    fn call_tool(
        &self,
        name: &str,
        input: Value,
        session: Option<&str>,
    ) -> BoxFuture<'_, Result<Value>>;

    /// The session's events from `start_index`, then live ones; ends when
    /// the host shuts down.
    fn follow(
        &self,
        id: &str,
        start_index: u64,
    ) -> BoxFuture<'_, Result<BoxStream<'static, Event>>>;

    /// Every event the host publishes, for event handlers. Never blocks a
    /// turn: a slow receiver misses events (and is told so).
    fn tap(&self) -> tokio::sync::broadcast::Receiver<Arc<Event>>;

    /// Approves or denies a parked call of session `id`, recording `by`
    /// as who decided (whoever owns the session: the channel has
    /// authenticated the decider).
    fn resolve_approval(
        &self,
        id: &str,
        call_id: &str,
        decision: ApprovalDecision,
        by: &str,
    ) -> BoxFuture<'_, Result<ResolvedApproval>>;

    /// Appends final assistant text to session `id` without a model turn
    /// (recorded as a short turn with `kind: "emitted"`); the turn id.
    fn emit_assistant_message(&self, id: &str, text: &str) -> BoxFuture<'_, Result<String>>;

    /// Runs a route handler's program (`[routes.handler]`) with `request`
    /// as its stdin, for a request to `channel` that `auth` was admitted
    /// as: the program's host-bridge credential acts as `auth`. `label`
    /// names it in messages. The host answers "not available" by default.
    fn run_handler(
        &self,
        channel: &str,
        label: &str,
        handler: &RouteHandler,
        request: Value,
        auth: &AuthContext,
    ) -> BoxFuture<'_, Result<HandlerOutput>> {
        let _ = (channel, handler, request, auth);
        let what = format!("{label}: running route handlers");
        Box::pin(async move { Err(Error::NotAvailable { what }) })
    }

    /// The host's services handed to handlers (`ChannelContext::services`):
    /// in agentkit's server, `agentkit::HostServices` (kv, MCP, reminders,
    /// GitHub). `None` by default.
    fn services(&self) -> Option<Arc<dyn std::any::Any + Send + Sync>> {
        None
    }
}

/// How a route handler's program ended: its stdout (JSON when it parses),
/// or an error message (a non-zero exit with its stderr, a timeout, an
/// output overflow).
#[derive(Debug, Clone, PartialEq)]
pub struct HandlerOutput {
    pub output: Value,
    pub is_error: bool,
}

/// A human's decision on a parked call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalDecision {
    pub approve: bool,
    /// Why; a denial's reason reaches the model.
    pub reason: Option<String>,
}

impl ApprovalDecision {
    pub fn approve() -> ApprovalDecision {
        ApprovalDecision {
            approve: true,
            reason: None,
        }
    }

    pub fn deny(reason: impl Into<String>) -> ApprovalDecision {
        ApprovalDecision {
            approve: false,
            reason: Some(reason.into()),
        }
    }
}

/// What resolving a parked call answered (the body of `POST
/// /v1/session/:id/approvals/:callId`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedApproval {
    pub call_id: String,
    /// `"approve"` or `"deny"`.
    pub decision: String,
    pub by: String,
    /// A new turn resumes the conversation (the call's turn had ended).
    pub resumed: bool,
}

/// What [`SessionHost::send`] is asked to do.
#[derive(Debug, Clone)]
pub struct SendRequest {
    pub message: String,
    pub options: SendOptions,
    /// The principal of a new session: `options.auth` or the request's.
    pub auth: AuthContext,
}

/// `send` options (the spec's `continuationToken`, `admission`, ...).
#[derive(Debug, Clone, Default)]
pub struct SendOptions {
    /// The channel-local conversation key; `None` starts a new session.
    pub continuation_token: Option<String>,
    pub admission: Admission,
    /// Relative path → bytes, written before the turn.
    pub workspace_files: Vec<(String, Vec<u8>)>,
    /// The principal of a new session (defaults to the request's).
    pub auth: Option<AuthContext>,
    /// Starting channel state of a new session (defaults to the channel's).
    pub state: Option<Value>,
    pub title: Option<String>,
    pub purpose: Option<String>,
    pub dry_run: bool,
    /// Freeze a new session at an instant: ISO-8601 with a time zone
    /// (`400` otherwise). Ignored when the message continues a session.
    pub as_of: Option<String>,
    /// Answer only after the turn ends, with its outcome.
    pub wait: bool,
    /// The final replies of a new session are JSON values validated
    /// against this schema (ignored when the message continues a session,
    /// which keeps its own).
    pub output_schema: Option<Value>,
}

/// What `send` returns.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelSession {
    #[serde(rename = "sessionId")]
    pub id: String,
    pub continuation_token: String,
    pub is_new: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub coalesced: bool,
    /// The first event index this message's events can have: follow the
    /// session from here to see its turn.
    #[serde(skip)]
    pub start_index: u64,
    /// With `wait`: how the turn ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply: Option<TurnReply>,
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnReply {
    pub ok: bool,
    /// The final text (`ok`) or the failure message.
    pub text: String,
    /// The reply parsed and validated against the session's output schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
}

/// A session as a channel sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    pub id: String,
    pub channel: String,
    pub continuation_token: String,
    pub principal_id: String,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// An answer to a route.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl ChannelResponse {
    /// A JSON answer.
    pub fn json(status: u16, body: Value) -> ChannelResponse {
        ChannelResponse {
            status,
            headers: Vec::new(),
            body,
        }
    }

    /// The answer an error gives.
    pub fn from_error(e: &Error) -> ChannelResponse {
        ChannelResponse::json(e.status(), e.to_body())
    }
}

/// A route handler.
pub type Handler =
    Arc<dyn Fn(HandlerArgs) -> BoxFuture<'static, Result<ChannelResponse>> + Send + Sync>;

/// An event handler: `(event, channel, ctx)` of the spec.
pub type EventHandler =
    Arc<dyn Fn(Arc<Event>, EventArgs) -> BoxFuture<'static, Result<()>> + Send + Sync>;

/// `on_start`.
pub type StartHandler = Arc<dyn Fn(ChannelContext) -> BoxFuture<'static, Result<()>> + Send + Sync>;

/// `on_stop`.
pub type StopHandler = Arc<dyn Fn() -> BoxFuture<'static, ()> + Send + Sync>;

/// One route: method, path (relative to `/v1/channels/<id>`, with
/// `:param` segments), schemas and handler.
#[derive(Clone)]
pub struct RouteDef {
    pub method: Method,
    pub path: String,
    pub description: Option<String>,
    pub body_schema: Option<Value>,
    pub query_schema: Option<Value>,
    pub handler: Handler,
}

impl fmt::Debug for RouteDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RouteDef")
            .field("method", &self.method)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl RouteDef {
    /// A route; check the verb's schema rule with [`RouteDef::check`].
    pub fn new<F, Fut>(method: Method, path: impl Into<String>, handler: F) -> RouteDef
    where
        F: Fn(HandlerArgs) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<ChannelResponse>> + Send + 'static,
    {
        RouteDef {
            method,
            path: path.into(),
            description: None,
            body_schema: None,
            query_schema: None,
            handler: Arc::new(move |args| Box::pin(handler(args))),
        }
    }

    pub fn body_schema(mut self, schema: Value) -> RouteDef {
        self.body_schema = Some(schema);
        self
    }

    pub fn query_schema(mut self, schema: Value) -> RouteDef {
        self.query_schema = Some(schema);
        self
    }

    pub fn description(mut self, d: impl Into<String>) -> RouteDef {
        self.description = Some(d.into());
        self
    }

    /// The spec's verb rules: GET needs a query schema, POST/PUT/PATCH a
    /// body schema; the path starts with `/`.
    pub fn check(&self) -> std::result::Result<(), String> {
        if !self.path.starts_with('/') {
            return Err(format!("route path `{}` must begin with `/`", self.path));
        }
        let name = format!("{} {}", self.method.as_str(), self.path);
        match self.method {
            Method::Get if self.query_schema.is_none() => {
                Err(format!("{name} needs a query schema"))
            }
            Method::Get if self.body_schema.is_some() => {
                Err(format!("{name}: GET requests have no body"))
            }
            Method::Post | Method::Put | Method::Patch if self.body_schema.is_none() => {
                Err(format!("{name} needs a body schema"))
            }
            _ => Ok(()),
        }
    }
}

/// A channel: the Rust form of `defineChannel`.
#[derive(Clone, Default)]
pub struct ChannelDefinition {
    pub id: String,
    pub kind: String,
    pub description: Option<String>,
    /// The auth chain; `None` takes the host default.
    pub auth: Option<Chain>,
    /// Starting state of each new session.
    pub state: Option<Value>,
    pub routes: Vec<RouteDef>,
    /// Event type (or `*`) → handler, for the sessions this channel owns.
    pub events: Vec<(String, EventHandler)>,
    pub on_start: Option<StartHandler>,
    pub on_stop: Option<StopHandler>,
    /// What a pack adds to its entry of `GET /v1/info` (its published
    /// events, its API URL, Slack's mode and state).
    pub info: Option<agentkit_protocol::api::PackInfo>,
    /// The largest request body the channel reads, in bytes; `None`
    /// takes the host's limit.
    pub max_body: Option<usize>,
    /// How a form-encoded body (`application/x-www-form-urlencoded`)
    /// becomes the handler's `body`.
    pub form_bodies: FormBodies,
    /// The headers that carry the provider's signature (lowercase). A
    /// request that carries one but was admitted only by a loopback
    /// policy failed the signature policy before it (`--dev` admits
    /// unsigned loopback deliveries, never wrongly signed ones): it is
    /// refused before its body is parsed.
    pub signature_headers: Vec<String>,
}

/// How a channel reads a form-encoded request body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum FormBodies {
    /// An object of the form's fields (Slack's interactivity and slash
    /// commands, declarative routes).
    #[default]
    Fields,
    /// The JSON document in the `payload` field: GitHub's
    /// `content_type=form` webhooks. The signature covers the raw form.
    PayloadField,
    /// The provider sends JSON only: a form body is refused with 415.
    /// The string names the provider in the error.
    JsonOnly(String),
}

impl fmt::Debug for ChannelDefinition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChannelDefinition")
            .field("id", &self.id)
            .field("kind", &self.kind)
            .field("routes", &self.routes)
            .field(
                "events",
                &self.events.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl ChannelDefinition {
    pub fn new(id: impl Into<String>) -> ChannelDefinition {
        ChannelDefinition {
            id: id.into(),
            kind: "custom".into(),
            ..Default::default()
        }
    }

    pub fn route(mut self, route: RouteDef) -> ChannelDefinition {
        self.routes.push(route);
        self
    }

    pub fn on_event<F, Fut>(mut self, event: impl Into<String>, handler: F) -> ChannelDefinition
    where
        F: Fn(Arc<Event>, EventArgs) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<()>> + Send + 'static,
    {
        self.events
            .push((event.into(), Arc::new(move |e, a| Box::pin(handler(e, a)))));
        self
    }

    pub fn on_start<F, Fut>(mut self, handler: F) -> ChannelDefinition
    where
        F: Fn(ChannelContext) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<()>> + Send + 'static,
    {
        self.on_start = Some(Arc::new(move |c| Box::pin(handler(c))));
        self
    }

    pub fn on_stop<F, Fut>(mut self, handler: F) -> ChannelDefinition
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        self.on_stop = Some(Arc::new(move || Box::pin(handler())));
        self
    }

    pub fn auth(mut self, chain: Chain) -> ChannelDefinition {
        self.auth = Some(chain);
        self
    }

    pub fn state(mut self, state: Value) -> ChannelDefinition {
        self.state = Some(state);
        self
    }
}

/// The helpers every handler (route, event, start) reaches the host
/// through. Cheap to clone.
#[derive(Clone)]
pub struct ChannelContext {
    pub(crate) channel: String,
    pub(crate) host: Arc<dyn SessionHost>,
    pub(crate) tasks: TaskTracker,
    pub(crate) states: StateStore,
    pub(crate) default_state: Option<Value>,
    /// `/<slug>` or empty: where the agent is mounted.
    pub(crate) prefix: String,
}

impl fmt::Debug for ChannelContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChannelContext")
            .field("channel", &self.channel)
            .finish_non_exhaustive()
    }
}

impl ChannelContext {
    /// This channel's id.
    pub fn channel_id(&self) -> &str {
        &self.channel
    }

    /// The host's services (the handler argument `host`): in agentkit's
    /// server, `ctx.services::<agentkit::HostServices>()` gives the
    /// agent's key-value store, MCP connections, reminders and GitHub
    /// clients, as Rust tools get them.
    pub fn services<T: std::any::Any + Clone>(&self) -> Option<T> {
        self.host
            .services()
            .and_then(|s| s.downcast_ref::<T>().cloned())
    }

    /// Starts or continues a session on this channel.
    pub async fn send(
        &self,
        message: impl Into<String>,
        options: SendOptions,
        auth: &AuthContext,
    ) -> Result<ChannelSession> {
        self.send_on(&self.channel.clone(), message.into(), options, auth)
            .await
    }

    /// Hands work to another channel of the same agent (its sessions,
    /// its continuation keys).
    pub async fn receive(
        &self,
        channel: &str,
        message: impl Into<String>,
        options: SendOptions,
        auth: &AuthContext,
    ) -> Result<ChannelSession> {
        self.send_on(channel, message.into(), options, auth).await
    }

    async fn send_on(
        &self,
        channel: &str,
        message: String,
        mut options: SendOptions,
        auth: &AuthContext,
    ) -> Result<ChannelSession> {
        let starting = options.state.take().or_else(|| self.default_state.clone());
        let principal = options.auth.clone().unwrap_or_else(|| auth.clone());
        let wait = options.wait;
        let mut session = self
            .host
            .send(
                channel,
                SendRequest {
                    message,
                    options,
                    auth: principal,
                },
            )
            .await?;
        if session.is_new
            && let Some(state) = starting
        {
            self.states.init(&session.id, state)?;
        }
        if wait {
            let events = self.host.follow(&session.id, session.start_index).await?;
            session.reply = Some(turn_outcome(events).await.unwrap_or(TurnReply {
                ok: false,
                text: "the host stopped before the turn ended".into(),
                output: None,
            }));
        }
        Ok(session)
    }

    /// This channel's session, or `None` (another channel's sessions are
    /// not visible).
    pub async fn get_session(&self, id: &str) -> Option<SessionInfo> {
        self.host
            .session(id)
            .await
            .filter(|s| s.channel == self.channel)
    }

    /// A deterministic tool call; its envelope.
    pub async fn call_tool(
        &self,
        name: &str,
        input: Value,
        session: Option<&str>,
    ) -> Result<Value> {
        self.host.call_tool(name, input, session).await
    }

    /// Runs a route handler's program for a request admitted as `auth`.
    pub async fn run_handler(
        &self,
        label: &str,
        handler: &RouteHandler,
        request: Value,
        auth: &AuthContext,
    ) -> Result<HandlerOutput> {
        self.host
            .run_handler(&self.channel, label, handler, request, auth)
            .await
    }

    /// The channel's starting state (`[state]`), `null` when it has none.
    pub fn default_state(&self) -> Value {
        self.default_state.clone().unwrap_or(Value::Null)
    }

    /// Runs `work` after the response has been sent; the host waits for
    /// such work (within its grace period) when it stops.
    pub fn wait_until<F>(&self, work: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.tasks.spawn(work);
    }

    /// The session's stream and trace URLs (relative to the host).
    pub fn session_urls(&self, id: &str) -> Value {
        json!({
            "streamUrl": format!("{}/v1/session/{id}/stream", self.prefix),
            "traceUrl": format!("{}/v1/session/{id}/events", self.prefix),
        })
    }

    /// The session's events from `start_index`, then live ones.
    pub async fn follow(&self, id: &str, start_index: u64) -> Result<BoxStream<'static, Event>> {
        self.host.follow(id, start_index).await
    }

    /// Does this continuation key map to a session of this channel?
    pub async fn has_continuation_session(&self, token: &str) -> bool {
        self.host.session_for(&self.channel, token).await.is_some()
    }

    /// Is a turn in flight for this continuation key?
    pub async fn is_continuation_busy(&self, token: &str) -> bool {
        self.host
            .session_for(&self.channel, token)
            .await
            .is_some_and(|id| self.host.is_busy(&id))
    }

    /// Stops the in-flight turn of this key and drops queued messages.
    pub async fn interrupt_continuation(&self, token: &str) -> Result<bool> {
        match self.host.session_for(&self.channel, token).await {
            Some(id) => self.host.interrupt(&id).await,
            None => Ok(false),
        }
    }

    /// Appends final assistant text to one of this channel's sessions
    /// without a model turn (a host task that already has the answer, a
    /// greeting). The stream shows a short turn (`turn.started` with
    /// `kind: "emitted"`, `message.appended`, `message.completed`,
    /// `turn.completed` with the text as `result`), and later turns see
    /// the text as an assistant message. A session running a turn answers
    /// `409` `session_busy`. Returns the turn id.
    pub async fn emit_assistant_message(&self, session: &str, text: &str) -> Result<String> {
        self.own_session(session).await?;
        self.host.emit_assistant_message(session, text).await
    }

    async fn own_session(&self, session: &str) -> Result<SessionInfo> {
        self.get_session(session)
            .await
            .ok_or_else(|| Error::Session {
                status: 404,
                code: agentkit_protocol::ErrorCode::SessionNotFound,
                message: format!("channel `{}` has no session `{session}`", self.channel),
                details: None,
            })
    }

    /// Approves or denies a parked tool call of one of this channel's
    /// sessions (how chat buttons unblock a turn without the HTTP
    /// approvals route). `auth` is who decided: its principal is recorded
    /// as the decision's `by`.
    pub async fn resolve_approval(
        &self,
        session: &str,
        call_id: &str,
        decision: ApprovalDecision,
        auth: &AuthContext,
    ) -> Result<ResolvedApproval> {
        self.own_session(session).await?;
        self.host
            .resolve_approval(session, call_id, decision, &auth.principal_id)
            .await
    }

    /// The channel state of a session (`null` when it has none).
    pub fn state(&self, session: &str) -> Result<Value> {
        self.states.get(session)
    }

    /// Replaces the channel state of a session.
    pub fn set_state(&self, session: &str, state: Value) -> Result<()> {
        self.states.set(session, state)
    }
}

/// What a route handler receives.
#[derive(Debug, Clone)]
pub struct HandlerArgs {
    /// The validated JSON body (`{}` when empty).
    pub body: Value,
    /// The validated query, as an object.
    pub query: Value,
    /// The `:param` path segments.
    pub params: BTreeMap<String, String>,
    /// Who the route's auth chain admitted.
    pub auth: AuthContext,
    /// The TCP peer, if known.
    pub request_ip: Option<IpAddr>,
    /// The request headers (names lowercase).
    pub headers: Vec<(String, String)>,
    /// The raw body, as received (signatures are over it).
    pub raw_body: Vec<u8>,
    /// `send`, `get_session`, `call_tool`, `wait_until`, ...
    pub ctx: ChannelContext,
}

impl HandlerArgs {
    /// The first value of a header (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What an event handler receives besides the event.
#[derive(Debug, Clone)]
pub struct EventArgs {
    pub session: SessionInfo,
    pub ctx: ChannelContext,
}

impl EventArgs {
    /// The session's channel state.
    pub fn state(&self) -> Result<Value> {
        self.ctx.state(&self.session.id)
    }

    /// Replaces the session's channel state.
    pub fn set_state(&self, state: Value) -> Result<()> {
        self.ctx.set_state(&self.session.id, state)
    }
}

/// How the turn that handles a message ends, following the session from
/// before that message: the first `turn.started` after a
/// `message.received`, then that turn's `turn.completed` / `turn.failed`
/// (a turn it preempted ends earlier and is not it).
pub async fn turn_outcome(mut events: BoxStream<'static, Event>) -> Option<TurnReply> {
    use agentkit_protocol::{Seen, TurnFold};
    use futures_util::StreamExt;
    let mut fold = TurnFold::after_next_message();
    while let Some(e) = events.next().await {
        if let Seen::Ended(end) = fold.observe(&e) {
            return Some(TurnReply {
                ok: end.ok,
                text: end.text,
                output: end.output,
            });
        }
    }
    None
}

/// Where pack channels record the delivery ids they have acted on, when
/// that is not this host's own log: several hosts behind one load
/// balancer share one ledger, so a delivery sent to two of them runs once.
pub trait DeliveryLedger: Send + Sync + std::fmt::Debug {
    /// Records delivery `id` of pack `pack` on channel `channel`: true for
    /// the one caller that recorded it first, false for every other.
    fn first_delivery<'a>(
        &'a self,
        channel: &'a str,
        pack: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, std::result::Result<bool, String>>;
}

/// Where channels keep their per-session state, when that is not this
/// host's own files: several hosts behind one load balancer share it.
pub trait ChannelStates: Send + Sync + std::fmt::Debug {
    /// The state of `session` on `channel`, if it has one.
    fn get<'a>(
        &'a self,
        channel: &'a str,
        session: &'a str,
    ) -> BoxFuture<'a, std::result::Result<Option<Value>, String>>;
    /// Replaces it.
    fn set<'a>(
        &'a self,
        channel: &'a str,
        session: &'a str,
        value: &'a Value,
    ) -> BoxFuture<'a, std::result::Result<(), String>>;
}
