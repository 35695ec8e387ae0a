//! A mock Slack on loopback: the Web API over HTTP (`/api/<method>`,
//! answering in Slack's shapes: `ok`, `ts`, `channel`, errors such as
//! `message_not_found`, and `429` + `Retry-After` when a test asks for
//! rate limiting) and a Socket Mode WebSocket server (`hello` on connect,
//! envelopes pushed by the test, acknowledgements recorded, `disconnect`
//! messages and dropped sockets on demand).
//!
//! Messages posted and edited are kept per `ts`, so a test reads a
//! thread as a user would see it. Like [`crate::mock::MockServer`] it runs
//! on its own thread and runtime; dropping it stops it.

// Test support: a mock that cannot start has no useful way to go on.
#![allow(clippy::expect_used)]

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

/// The mock workspace.
pub const TEAM: &str = "T0001";
/// The bot's user id.
pub const BOT_USER: &str = "U0BOT";

/// One Web API call.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: String,
    pub authorization: Option<String>,
    /// The JSON body, or the form fields as an object.
    pub body: Value,
    pub at: Instant,
}

/// A message as the channel shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Posted {
    pub channel: String,
    pub ts: String,
    pub thread_ts: Option<String>,
    pub text: String,
    /// The Block Kit blocks, as JSON text (empty when none).
    pub blocks: String,
    /// How many times it was edited (or appended to).
    pub edits: usize,
    /// Started with `chat.startStream` and not stopped yet.
    pub streaming: bool,
    /// Reaction names added (`reactions.add`), in order.
    pub reactions: Vec<String>,
}

enum Command {
    Send(String),
    Drop,
}

#[derive(Default)]
struct Inner {
    calls: Vec<Call>,
    messages: Vec<Posted>,
    next_ts: u64,
    /// Method → how many more calls answer 429.
    rate_limit: BTreeMap<String, u32>,
    guests: HashSet<String>,
    /// `chat.*Stream` answer `unknown_method` (a workspace without them).
    no_streaming: bool,
    /// The bot token's scopes (`auth.test`'s `x-oauth-scopes`).
    scopes: Option<String>,
    /// Socket Mode.
    opens: usize,
    connections: usize,
    acks: Vec<String>,
    sent_envelopes: usize,
    socket: Option<mpsc::UnboundedSender<Command>>,
}

struct Shared {
    inner: Mutex<Inner>,
    changed: Condvar,
    ws_addr: SocketAddr,
}

/// A running mock Slack.
pub struct MockSlack {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for MockSlack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockSlack")
            .field("addr", &self.addr)
            .finish()
    }
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Inner> {
    shared.inner.lock().unwrap_or_else(|e| e.into_inner())
}

impl MockSlack {
    pub fn start() -> MockSlack {
        let http = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let ws = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        http.set_nonblocking(true).expect("non-blocking listener");
        ws.set_nonblocking(true).expect("non-blocking listener");
        let addr = http.local_addr().expect("the listener's address");
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                next_ts: 1,
                ..Inner::default()
            }),
            changed: Condvar::new(),
            ws_addr: ws.local_addr().expect("the listener's address"),
        });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let state = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("mock-slack-{}", addr.port()))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime for the mock Slack");
                rt.block_on(async move {
                    let http = tokio::net::TcpListener::from_std(http).expect("a tokio listener");
                    let ws = tokio::net::TcpListener::from_std(ws).expect("a tokio listener");
                    let app = axum::Router::new()
                        .route("/api/{method}", axum::routing::post(web_api))
                        .with_state(state.clone());
                    tokio::select! {
                        _ = axum::serve(http, app) => {}
                        () = accept_sockets(ws, state) => {}
                        _ = stopped => {}
                    }
                });
            })
            .expect("spawn the mock Slack thread");
        MockSlack {
            addr,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// The `api_url` setting: `http://127.0.0.1:<port>/api`.
    pub fn api_url(&self) -> String {
        format!("http://{}/api", self.addr)
    }

    /// Every Web API call so far.
    pub fn calls(&self) -> Vec<Call> {
        lock(&self.shared).calls.clone()
    }

    /// The calls of one method.
    pub fn calls_of(&self, method: &str) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.method == method)
            .collect()
    }

    /// Every message posted, in order, as last edited.
    pub fn messages(&self) -> Vec<Posted> {
        lock(&self.shared).messages.clone()
    }

    /// The messages of a thread (its replies, in order).
    pub fn thread(&self, channel: &str, thread_ts: &str) -> Vec<Posted> {
        self.messages()
            .into_iter()
            .filter(|m| m.channel == channel && m.thread_ts.as_deref() == Some(thread_ts))
            .collect()
    }

    /// The next `n` calls of `method` answer `429` with `Retry-After: 1`.
    pub fn rate_limit(&self, method: &str, n: u32) {
        lock(&self.shared).rate_limit.insert(method.to_owned(), n);
    }

    /// The scopes `auth.test` reports for the bot token (default: every
    /// scope the pack may need).
    pub fn set_scopes(&self, scopes: &str) {
        lock(&self.shared).scopes = Some(scopes.to_owned());
    }

    /// Slack's streaming methods answer `unknown_method` from now on.
    pub fn disable_streaming(&self) {
        lock(&self.shared).no_streaming = true;
    }

    /// `users.info` says this user is a guest.
    pub fn add_guest(&self, user: &str) {
        lock(&self.shared).guests.insert(user.to_owned());
    }

    /// Waits until `f` holds over the state (or panics after `timeout`).
    pub fn wait_until(&self, what: &str, timeout: Duration, f: impl Fn(&MockSlack) -> bool) {
        let deadline = Instant::now() + timeout;
        while !f(self) {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            let guard = lock(&self.shared);
            let _ = self
                .shared
                .changed
                .wait_timeout(guard, Duration::from_millis(20));
        }
    }

    /// How many times `apps.connections.open` was called.
    pub fn opens(&self) -> usize {
        lock(&self.shared).opens
    }

    /// How many WebSocket connections were accepted.
    pub fn connections(&self) -> usize {
        lock(&self.shared).connections
    }

    /// Is a socket connected now?
    pub fn connected(&self) -> bool {
        lock(&self.shared).socket.is_some()
    }

    /// The envelope ids acknowledged so far.
    pub fn acks(&self) -> Vec<String> {
        lock(&self.shared).acks.clone()
    }

    /// Sends an `events_api` envelope carrying `payload` (an
    /// `event_callback`) over the live socket; its envelope id.
    pub fn push_event(&self, payload: &Value, retry_attempt: u32) -> String {
        self.push("events_api", payload, retry_attempt)
    }

    /// Sends an `interactive` envelope (a `block_actions` payload).
    pub fn push_interactive(&self, payload: &Value) -> String {
        self.push("interactive", payload, 0)
    }

    fn push(&self, kind: &str, payload: &Value, retry_attempt: u32) -> String {
        let mut inner = lock(&self.shared);
        inner.sent_envelopes += 1;
        let id = format!("env-{}", inner.sent_envelopes);
        let envelope = json!({
            "envelope_id": id,
            "type": kind,
            "payload": payload,
            "accepts_response_payload": false,
            "retry_attempt": retry_attempt,
            "retry_reason": if retry_attempt > 0 { "timeout" } else { "" },
        });
        let socket = inner.socket.as_ref().expect("no Socket Mode connection");
        socket
            .send(Command::Send(envelope.to_string()))
            .expect("the socket task is gone");
        id
    }

    /// Slack's `disconnect` message (a connection refresh).
    pub fn disconnect(&self) {
        let inner = lock(&self.shared);
        let socket = inner.socket.as_ref().expect("no Socket Mode connection");
        let msg = json!({"type": "disconnect", "reason": "refresh_requested", "debug_info": {"host": "applink-mock"}});
        let _ = socket.send(Command::Send(msg.to_string()));
    }

    /// Cuts the TCP connection without a close frame.
    pub fn drop_socket(&self) {
        let inner = lock(&self.shared);
        if let Some(socket) = inner.socket.as_ref() {
            let _ = socket.send(Command::Drop);
        }
    }
}

impl Drop for MockSlack {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// An `event_callback` envelope as Slack sends it (Events API body and
/// Socket Mode payload alike).
pub fn event_callback(event_id: &str, event: Value) -> Value {
    json!({
        "token": "XXYYZZ",
        "team_id": TEAM,
        "api_app_id": "A0MOCK",
        "event": event,
        "type": "event_callback",
        "event_id": event_id,
        "event_time": 1_700_000_000,
        "authorizations": [{"enterprise_id": null, "team_id": TEAM, "user_id": BOT_USER, "is_bot": true, "is_enterprise_install": false}],
        "is_ext_shared_channel": false,
        "event_context": format!("4-{event_id}"),
    })
}

/// An `app_mention` event by `user` in `channel` at `ts` (in `thread_ts`
/// when given).
pub fn app_mention(
    user: &str,
    channel: &str,
    ts: &str,
    thread_ts: Option<&str>,
    text: &str,
) -> Value {
    let mut e = json!({
        "type": "app_mention",
        "user": user,
        "text": format!("<@{BOT_USER}> {text}"),
        "ts": ts,
        "channel": channel,
        "team": TEAM,
        "event_ts": ts,
    });
    if let Some(t) = thread_ts {
        e["thread_ts"] = json!(t);
    }
    e
}

/// A plain `message` event (`channel_type` `channel` or `im`).
pub fn message(
    user: &str,
    channel: &str,
    channel_type: &str,
    ts: &str,
    thread_ts: Option<&str>,
    text: &str,
) -> Value {
    let mut e = json!({
        "type": "message",
        "user": user,
        "text": text,
        "ts": ts,
        "channel": channel,
        "channel_type": channel_type,
        "team": TEAM,
        "event_ts": ts,
    });
    if let Some(t) = thread_ts {
        e["thread_ts"] = json!(t);
    }
    e
}

/// A `block_actions` payload: `user` clicked `action_id` on the message
/// `message` (as posted) in `channel`.
pub fn block_actions(user: &str, posted: &Posted, action_id: &str) -> Value {
    let blocks: Value = serde_json::from_str(&posted.blocks).unwrap_or(Value::Null);
    let value = blocks
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|b| b["elements"].as_array().cloned().unwrap_or_default())
        .find(|e| e["action_id"] == action_id)
        .map(|e| e["value"].clone())
        .unwrap_or(Value::Null);
    json!({
        "type": "block_actions",
        "user": {"id": user, "username": "someone", "team_id": TEAM},
        "api_app_id": "A0MOCK",
        "token": "XXYYZZ",
        "container": {"type": "message", "message_ts": posted.ts, "channel_id": posted.channel, "is_ephemeral": false, "thread_ts": posted.thread_ts},
        "trigger_id": "123.456.abc",
        "team": {"id": TEAM, "domain": "mock"},
        "channel": {"id": posted.channel, "name": "general"},
        "message": {"type": "message", "ts": posted.ts, "thread_ts": posted.thread_ts, "text": posted.text, "blocks": blocks, "user": BOT_USER},
        "actions": [{"action_id": action_id, "block_id": "agentkit_approval", "type": "button", "value": value, "action_ts": "1700000000.1"}],
    })
}

fn form_fields(body: &[u8]) -> Value {
    let text = String::from_utf8_lossy(body);
    let mut map = serde_json::Map::new();
    for pair in text.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        map.insert(decode(k), Value::String(decode(v)));
    }
    Value::Object(map)
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn ok(body: Value) -> Response {
    axum::Json(body).into_response()
}

fn slack_error(code: &str) -> Response {
    axum::Json(json!({"ok": false, "error": code})).into_response()
}

async fn web_api(
    State(shared): State<Arc<Shared>>,
    Path(method): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let form = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    let body = if form {
        form_fields(&body)
    } else {
        serde_json::from_slice(&body).unwrap_or(Value::Null)
    };
    let authorization = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut inner = lock(&shared);
    inner.calls.push(Call {
        method: method.clone(),
        authorization: authorization.clone(),
        body: body.clone(),
        at: Instant::now(),
    });
    shared.changed.notify_all();
    if let Some(n) = inner.rate_limit.get_mut(&method)
        && *n > 0
    {
        *n -= 1;
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", "1")],
            axum::Json(json!({"ok": false, "error": "ratelimited"})),
        )
            .into_response();
    }
    let Some(token) = authorization
        .as_deref()
        .and_then(|a| a.strip_prefix("Bearer "))
    else {
        return slack_error("not_authed");
    };
    let s = |k: &str| body[k].as_str().unwrap_or("").to_owned();
    match method.as_str() {
        "apps.connections.open" => {
            if !token.starts_with("xapp-") {
                return slack_error("not_allowed_token_type");
            }
            inner.opens += 1;
            let url = format!(
                "ws://{}/link/?ticket=t{}&app_id=A0MOCK",
                shared.ws_addr, inner.opens
            );
            ok(json!({"ok": true, "url": url}))
        }
        _ if !token.starts_with("xoxb-") => slack_error("invalid_auth"),
        "auth.test" => {
            let scopes = inner.scopes.clone().unwrap_or_else(|| {
                "chat:write,users:read,app_mentions:read,im:history,im:read,im:write,channels:history,groups:history,assistant:write".to_owned()
            });
            (
                [("x-oauth-scopes", scopes)],
                axum::Json(json!({
                    "ok": true, "url": "https://mock.slack.com/", "team": "Mock", "user": "agent",
                    "team_id": TEAM, "user_id": BOT_USER, "bot_id": "B0BOT", "is_enterprise_install": false
                })),
            )
                .into_response()
        }
        "users.info" => {
            let user = s("user");
            let guest = inner.guests.contains(&user);
            ok(json!({"ok": true, "user": {
                "id": user, "team_id": TEAM, "name": user.to_lowercase(), "deleted": false,
                "is_bot": false, "is_admin": false, "is_owner": false,
                "is_restricted": guest, "is_ultra_restricted": false,
                "profile": {"display_name": user}
            }}))
        }
        "chat.postMessage" => {
            let (channel, text) = (s("channel"), s("text"));
            if channel.is_empty() {
                return slack_error("channel_not_found");
            }
            if text.is_empty() && body.get("blocks").is_none() {
                return slack_error("no_text");
            }
            if text.chars().count() > 40_000 {
                return slack_error("msg_too_long");
            }
            let ts = format!("1700000000.{:06}", inner.next_ts);
            inner.next_ts += 1;
            let thread_ts = body["thread_ts"].as_str().map(str::to_owned);
            inner.messages.push(Posted {
                channel: channel.clone(),
                ts: ts.clone(),
                thread_ts: thread_ts.clone(),
                text: text.clone(),
                blocks: body.get("blocks").map(Value::to_string).unwrap_or_default(),
                edits: 0,
                streaming: false,
                reactions: Vec::new(),
            });
            shared.changed.notify_all();
            ok(
                json!({"ok": true, "channel": channel, "ts": ts, "message": {
                    "type": "message", "text": text, "user": BOT_USER, "bot_id": "B0BOT", "ts": ts, "thread_ts": thread_ts
                }}),
            )
        }
        "chat.update" => {
            let (channel, ts, text) = (s("channel"), s("ts"), s("text"));
            if text.chars().count() > 40_000 {
                return slack_error("msg_too_long");
            }
            let blocks = body.get("blocks").map(Value::to_string);
            let Some(m) = inner
                .messages
                .iter_mut()
                .find(|m| m.channel == channel && m.ts == ts)
            else {
                return slack_error("message_not_found");
            };
            m.text = text.clone();
            if let Some(b) = blocks {
                m.blocks = b;
            }
            m.edits += 1;
            shared.changed.notify_all();
            ok(json!({"ok": true, "channel": channel, "ts": ts, "text": text}))
        }
        "chat.startStream" | "chat.appendStream" | "chat.stopStream" if inner.no_streaming => {
            slack_error("unknown_method")
        }
        "chat.startStream" => {
            let (channel, thread_ts, text) = (s("channel"), s("thread_ts"), s("markdown_text"));
            if channel.is_empty() || thread_ts.is_empty() {
                return slack_error("invalid_arguments");
            }
            // Outside direct messages Slack wants to know who reads it.
            if !channel.starts_with('D')
                && (s("recipient_user_id").is_empty() || s("recipient_team_id").is_empty())
            {
                return slack_error("invalid_arguments");
            }
            if text.chars().count() > 12_000 {
                return slack_error("msg_too_long");
            }
            let ts = format!("1700000000.{:06}", inner.next_ts);
            inner.next_ts += 1;
            inner.messages.push(Posted {
                channel: channel.clone(),
                ts: ts.clone(),
                thread_ts: Some(thread_ts),
                text,
                blocks: String::new(),
                edits: 0,
                streaming: true,
                reactions: Vec::new(),
            });
            shared.changed.notify_all();
            ok(json!({"ok": true, "channel": channel, "ts": ts}))
        }
        "chat.appendStream" | "chat.stopStream" => {
            let (channel, ts, text) = (s("channel"), s("ts"), s("markdown_text"));
            if method == "chat.appendStream" && text.is_empty() {
                return slack_error("invalid_arguments");
            }
            if text.chars().count() > 12_000 {
                return slack_error("msg_too_long");
            }
            let Some(m) = inner
                .messages
                .iter_mut()
                .find(|m| m.channel == channel && m.ts == ts)
            else {
                return slack_error("message_not_found");
            };
            if !m.streaming {
                return slack_error("message_not_in_streaming_state");
            }
            m.text.push_str(&text);
            m.edits += 1;
            if method == "chat.stopStream" {
                m.streaming = false;
            }
            shared.changed.notify_all();
            ok(json!({"ok": true, "channel": channel, "ts": ts}))
        }
        "reactions.add" => {
            let (channel, ts, name) = (s("channel"), s("timestamp"), s("name"));
            if name.is_empty() {
                return slack_error("invalid_name");
            }
            let Some(m) = inner
                .messages
                .iter_mut()
                .find(|m| m.channel == channel && m.ts == ts)
            else {
                return slack_error("message_not_found");
            };
            if m.reactions.contains(&name) {
                return slack_error("already_reacted");
            }
            m.reactions.push(name);
            shared.changed.notify_all();
            ok(json!({"ok": true}))
        }
        "assistant.threads.setStatus"
        | "assistant.threads.setTitle"
        | "assistant.threads.setSuggestedPrompts" => {
            if s("channel_id").is_empty() || s("thread_ts").is_empty() {
                return slack_error("invalid_arguments");
            }
            ok(json!({"ok": true}))
        }
        _ => slack_error("unknown_method"),
    }
}

async fn accept_sockets(listener: tokio::net::TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                return;
            };
            let (tx, mut rx) = mpsc::unbounded_channel();
            {
                let mut inner = lock(&shared);
                inner.connections += 1;
                inner.socket = Some(tx.clone());
                shared.changed.notify_all();
            }
            let hello = json!({"type": "hello", "num_connections": 1, "debug_info": {"host": "applink-mock", "approximate_connection_time": 18060}, "connection_info": {"app_id": "A0MOCK"}});
            let _ = ws.send(Message::text(hello.to_string())).await;
            loop {
                tokio::select! {
                    cmd = rx.recv() => match cmd {
                        Some(Command::Send(text)) => {
                            if ws.send(Message::text(text)).await.is_err() { break; }
                        }
                        Some(Command::Drop) | None => break,
                    },
                    frame = ws.next() => match frame {
                        Some(Ok(Message::Text(t))) => {
                            let v: Value = serde_json::from_str(t.as_str()).unwrap_or(Value::Null);
                            if let Some(id) = v["envelope_id"].as_str() {
                                lock(&shared).acks.push(id.to_owned());
                                shared.changed.notify_all();
                            }
                        }
                        Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                        Some(Ok(_)) => {}
                    },
                }
            }
            let mut inner = lock(&shared);
            if inner.socket.as_ref().is_some_and(|s| s.same_channel(&tx)) {
                inner.socket = None;
            }
            shared.changed.notify_all();
        });
    }
}
