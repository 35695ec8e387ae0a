//! An HTTP client for one agent's public API (`/v1/session`, its stream and
//! events), used by `agentkit run` and `agentkit chat` and by anyone who
//! drives an agentkit server from Rust.
//!
//! The client speaks only the wire contract: it knows event types by name
//! and leaves their meaning to [`crate::trajectory`]. Its base URL is the
//! agent's root: `http://host:port/<slug>` when the server mounts several
//! agents, `http://host:port` in single mode ([`Client::resolve`] picks the
//! agent on a multi-agent host).

use std::collections::VecDeque;
use std::fmt;

use futures_util::{Stream, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::trajectory::{NdjsonError, parse_ndjson, parse_ndjson_line};

/// What can go wrong talking to a server. Every message names the URL.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server answered with an error status.
    #[error("{method} {url} returned {status}{}: {message}", code_suffix(.code))]
    Status {
        method: &'static str,
        url: String,
        status: u16,
        /// The `error` code of the JSON body (empty when the body had none).
        code: String,
        message: String,
    },
    /// The request never got an answer (connection refused, reset, ...).
    #[error("{method} {url} failed")]
    Transport {
        method: &'static str,
        url: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The answer was not the JSON the contract promises.
    #[error("{method} {url} returned an unexpected body")]
    Body {
        method: &'static str,
        url: String,
        #[source]
        source: serde_json::Error,
    },
    /// A line of an NDJSON answer was not a JSON object.
    #[error("{url}: bad event stream")]
    Ndjson {
        url: String,
        #[source]
        source: NdjsonError,
    },
    /// The process's HTTP client could not be built.
    #[error(transparent)]
    HttpClient(#[from] agentkit_harness::HttpClientError),
    /// The server closed the stream before the turn settled.
    #[error("{url}: the stream ended before the turn settled")]
    StreamEnded { url: String },
    /// A multi-agent host serves several agents and none was chosen.
    #[error("{url} serves several agents ({}); choose one", .slugs.join(", "))]
    AmbiguousAgent { url: String, slugs: Vec<String> },
    /// The chosen agent is not on the host.
    #[error("{url} has no agent `{slug}` (it serves {})", .slugs.join(", "))]
    UnknownAgent {
        url: String,
        slug: String,
        slugs: Vec<String>,
    },
}

fn code_suffix(code: &str) -> String {
    if code.is_empty() {
        String::new()
    } else {
        format!(" ({code})")
    }
}

impl Error {
    /// The HTTP status, for [`Error::Status`].
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The error code of the JSON body, for [`Error::Status`].
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Status { code, .. } => Some(code),
            _ => None,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The answer to a message: the session it went to and the token the next
/// follow-up must carry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Accepted {
    pub session_id: String,
    pub continuation_token: String,
    #[serde(default)]
    pub is_new: bool,
    #[serde(default)]
    pub trace_url: Option<String>,
}

/// Where a conversation stands: its session, the token for the next
/// follow-up, and the index of the next event to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCursor {
    pub session_id: String,
    pub continuation_token: String,
    pub next_index: u64,
}

/// A client for one agent's HTTP API, on the process's one HTTP client
/// ([`agentkit_harness::http_client`]). Errors show its URLs without the
/// user and password they may carry.
#[derive(Clone)]
pub struct Client {
    base: String,
    bearer_token: Option<String>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The token stays out of logs.
        f.debug_struct("Client")
            .field("base", &self.base)
            .field("bearer_token", &self.bearer_token.as_ref().map(|_| "…"))
            .finish()
    }
}

impl Client {
    /// A client for the agent at `base_url` (a trailing `/` is ignored).
    pub fn new(base_url: &str, bearer_token: Option<String>) -> Client {
        Client {
            base: base_url.trim_end_matches('/').to_owned(),
            bearer_token,
        }
    }

    /// The agent's base URL.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// A client for one agent of the server at `url`.
    ///
    /// With `agent`, the agent's URL is `url/<agent>`. Without, a
    /// multi-agent host (one that answers `GET /v1/agents`) must serve
    /// exactly one agent, which is then chosen; any other server is taken
    /// to be the agent itself (single mode, or a URL that already names
    /// the agent).
    pub async fn resolve(
        url: &str,
        agent: Option<&str>,
        bearer_token: Option<String>,
    ) -> Result<Client> {
        let host = Client::new(url, bearer_token.clone());
        let listed = host.agent_slugs().await;
        let at = |slug: &str| Client::new(&format!("{}/{slug}", host.base), bearer_token.clone());
        match (agent, listed) {
            (Some(slug), Some(slugs)) if !slugs.iter().any(|s| s == slug) => {
                Err(Error::UnknownAgent {
                    url: shown(&host.base),
                    slug: slug.to_owned(),
                    slugs,
                })
            }
            (Some(slug), _) => Ok(at(slug)),
            (None, Some(slugs)) => match slugs.as_slice() {
                [one] => Ok(at(one)),
                [] => Ok(host),
                _ => Err(Error::AmbiguousAgent {
                    url: shown(&host.base),
                    slugs,
                }),
            },
            (None, None) => Ok(host),
        }
    }

    /// The slugs `GET /v1/agents` lists, or `None` when the server has no
    /// such index (single mode, or no playground).
    async fn agent_slugs(&self) -> Option<Vec<String>> {
        let doc: Value = self.get_json("/v1/agents").await.ok()?;
        let agents = doc.get("agents")?.as_array()?;
        Some(
            agents
                .iter()
                .filter_map(|a| a.get("slug").and_then(Value::as_str).map(str::to_owned))
                .collect(),
        )
    }

    /// `POST /v1/session`: starts a session with its first message.
    pub async fn create_session(&self, message: &str) -> Result<Accepted> {
        self.post_json("/v1/session", &json!({ "message": message }))
            .await
    }

    /// `POST /v1/session/{id}`: sends a follow-up. The answer carries the
    /// rotated token; the one passed here is spent.
    pub async fn follow_up(
        &self,
        session_id: &str,
        continuation_token: &str,
        message: &str,
    ) -> Result<Accepted> {
        self.post_json(
            &format!("/v1/session/{session_id}"),
            &json!({ "message": message, "continuationToken": continuation_token }),
        )
        .await
    }

    /// `POST /v1/session/{id}/stop`: interrupts the running turn.
    pub async fn stop(&self, session_id: &str) -> Result<Value> {
        self.post_json(&format!("/v1/session/{session_id}/stop"), &json!({}))
            .await
    }

    /// `GET /v1/session/{id}/events`: the stored events (no live follow).
    pub async fn events(&self, session_id: &str) -> Result<Vec<Value>> {
        let url = self.url(&format!("/v1/session/{session_id}/events"));
        let response = self.send("GET", http()?.get(&url), &url).await?;
        let text = response
            .text()
            .await
            .map_err(|e| transport("GET", &url, e))?;
        parse_ndjson(&text).map_err(|source| Error::Ndjson {
            url: shown(&url),
            source,
        })
    }

    /// `POST /v1/tools/{name}`: a deterministic tool call; the envelope
    /// `{ok, toolName, callId, isError, result, durationMs}`.
    pub async fn call_tool(
        &self,
        name: &str,
        input: &Value,
        session_id: Option<&str>,
    ) -> Result<Value> {
        let mut body = json!({ "input": input });
        if let Some(id) = session_id {
            body["sessionId"] = Value::String(id.to_owned());
        }
        self.post_json(&format!("/v1/tools/{name}"), &body).await
    }

    /// `GET /v1/session/{id}/approvals`: the calls waiting for a decision.
    pub async fn approvals(&self, session_id: &str) -> Result<Value> {
        self.get_json(&format!("/v1/session/{session_id}/approvals"))
            .await
    }

    /// `POST /v1/session/{id}/approvals/{callId}`: approves or denies a
    /// parked call.
    pub async fn resolve_approval(
        &self,
        session_id: &str,
        call_id: &str,
        approve: bool,
        reason: Option<&str>,
    ) -> Result<Value> {
        let mut body = json!({"decision": if approve { "approve" } else { "deny" }});
        if let Some(reason) = reason {
            body["reason"] = Value::String(reason.to_owned());
        }
        self.post_json(
            &format!("/v1/session/{session_id}/approvals/{call_id}"),
            &body,
        )
        .await
    }

    /// `GET /v1/info`: the agent's discovered surface.
    pub async fn info(&self) -> Result<Value> {
        self.get_json("/v1/info").await
    }

    /// `GET /v1/sessions`: the caller's sessions.
    pub async fn sessions(&self) -> Result<Value> {
        self.get_json("/v1/sessions").await
    }

    /// `GET /v1/session/{id}/stream?startIndex=N`: the events from index
    /// `start_index` on, replayed and then live. The stream does not end
    /// while the server runs; drop it when done.
    pub async fn stream(
        &self,
        session_id: &str,
        start_index: u64,
    ) -> Result<impl Stream<Item = Result<Value>> + Send + 'static> {
        let url = self.url(&format!(
            "/v1/session/{session_id}/stream?startIndex={start_index}"
        ));
        let response = self.send("GET", http()?.get(&url), &url).await?;
        let state = LineStream {
            body: Box::pin(response.bytes_stream()),
            lines: LineBuffer::default(),
            ready: VecDeque::new(),
            url,
            done: false,
        };
        Ok(futures_util::stream::unfold(state, LineStream::next))
    }

    /// Sends `message` (a new session when `session` is `None`, else a
    /// follow-up) and reads the stream until the session settles after
    /// this message's turn. Returns the answer and every event read, from
    /// the cursor's index on; `session` is left pointing after them.
    pub async fn run_turn(
        &self,
        session: &mut Option<SessionCursor>,
        message: &str,
    ) -> Result<(Accepted, Vec<Value>)> {
        self.run_turn_with(session, message, |_| {}).await
    }

    /// [`Client::run_turn`], calling `on_event` with each event as it
    /// arrives (to render a reply live).
    pub async fn run_turn_with(
        &self,
        session: &mut Option<SessionCursor>,
        message: &str,
        mut on_event: impl FnMut(&Value),
    ) -> Result<(Accepted, Vec<Value>)> {
        let (accepted, start) = match session.as_ref() {
            None => (self.create_session(message).await?, 0),
            Some(cursor) => (
                self.follow_up(&cursor.session_id, &cursor.continuation_token, message)
                    .await?,
                cursor.next_index,
            ),
        };
        // The token is rotated now, whatever happens to the stream; the
        // cursor follows every event read, so a broken stream resumes
        // where it broke.
        let cursor = session.insert(SessionCursor {
            session_id: accepted.session_id.clone(),
            continuation_token: accepted.continuation_token.clone(),
            next_index: start,
        });
        let stream = self.stream(&accepted.session_id, start).await?;
        let mut stream = std::pin::pin!(stream);
        let mut settle = Settle::new(message);
        let mut events = Vec::new();
        loop {
            let Some(event) = stream.next().await else {
                return Err(Error::StreamEnded {
                    url: shown(&self.url(&format!("/v1/session/{}/stream", accepted.session_id))),
                });
            };
            let event = event?;
            if let Some(index) = event.get("index").and_then(Value::as_u64) {
                cursor.next_index = cursor.next_index.max(index + 1);
            }
            on_event(&event);
            let done = settle.observe(&event);
            events.push(event);
            if done {
                break;
            }
        }
        Ok((accepted, events))
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T> {
        let url = self.url(path);
        let response = self.send("GET", http()?.get(&url), &url).await?;
        read_json("GET", &url, response).await
    }

    async fn post_json<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: &Value,
    ) -> Result<T> {
        let url = self.url(path);
        let request = http()?.post(&url).json(body);
        let response = self.send("POST", request, &url).await?;
        read_json("POST", &url, response).await
    }

    /// Sends a request with the bearer token and turns an error status
    /// into [`Error::Status`].
    async fn send(
        &self,
        method: &'static str,
        request: reqwest::RequestBuilder,
        url: &str,
    ) -> Result<reqwest::Response> {
        let request = match &self.bearer_token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        let response = request
            .send()
            .await
            .map_err(|e| transport(method, url, e))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let text = response.text().await.unwrap_or_default();
        let (code, message) = error_body(&text);
        Err(Error::Status {
            method,
            url: shown(url),
            status: status.as_u16(),
            code,
            message: message
                .unwrap_or_else(|| status.canonical_reason().unwrap_or("error").to_lowercase()),
        })
    }
}

fn transport(method: &'static str, url: &str, e: reqwest::Error) -> Error {
    Error::Transport {
        method,
        url: shown(url),
        source: Box::new(e.without_url()),
    }
}

/// A URL as an error may show it: without its user and password.
fn shown(url: &str) -> String {
    agentkit_harness::redact_credentials(url)
}

/// The process's one HTTP client.
fn http() -> Result<&'static reqwest::Client> {
    Ok(agentkit_harness::http_client()?)
}

async fn read_json<T: serde::de::DeserializeOwned>(
    method: &'static str,
    url: &str,
    response: reqwest::Response,
) -> Result<T> {
    let bytes = response
        .bytes()
        .await
        .map_err(|e| transport(method, url, e))?;
    serde_json::from_slice(&bytes).map_err(|source| Error::Body {
        method,
        url: shown(url),
        source,
    })
}

/// The code and message of an error body. Both spellings are accepted:
/// `{"error": {"code", "message"}}` and `{"error": "<code>", "message"}`.
/// A body that is not JSON becomes the message.
fn error_body(text: &str) -> (String, Option<String>) {
    let Ok(doc) = serde_json::from_str::<Value>(text) else {
        let text = text.trim();
        return (String::new(), (!text.is_empty()).then(|| text.to_owned()));
    };
    let as_string = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    match doc.get("error") {
        Some(Value::Object(e)) => (
            as_string(e.get("code")).unwrap_or_default(),
            as_string(e.get("message")),
        ),
        Some(Value::String(code)) => (code.clone(), as_string(doc.get("message"))),
        _ => (String::new(), as_string(doc.get("message"))),
    }
}

/// Decides when a turn's events are all in: our turn is the first that
/// starts after our `message.received` (or, on a server that records no
/// `message.received`, the first that starts), and the session settles
/// after it ends. Events of an earlier turn that a resumed stream replays
/// are passed over. A terminal session state (`session.completed` /
/// `session.failed`) ends the read whatever the turn did, since nothing
/// follows it.
#[derive(Debug)]
struct Settle {
    message: String,
    saw_message: bool,
    received_ours: bool,
    turn_id: Option<String>,
    started: bool,
    ended: bool,
}

impl Settle {
    fn new(message: &str) -> Settle {
        Settle {
            message: message.trim().to_owned(),
            saw_message: false,
            received_ours: false,
            turn_id: None,
            started: false,
            ended: false,
        }
    }

    fn observe(&mut self, event: &Value) -> bool {
        let turn_id = event.get("turnId").and_then(Value::as_str);
        let data = event.get("data");
        match event.get("type").and_then(Value::as_str).unwrap_or("") {
            "message.received" => {
                self.saw_message = true;
                let text = data.and_then(|d| d.get("text")).and_then(Value::as_str);
                if text.map(str::trim) == Some(self.message.as_str()) {
                    self.received_ours = true;
                }
                false
            }
            "turn.started" if !self.started && (self.received_ours || !self.saw_message) => {
                self.started = true;
                self.turn_id = turn_id.map(str::to_owned);
                false
            }
            "turn.completed" | "turn.failed"
                if self.started
                    && (self.turn_id.is_none() || self.turn_id.as_deref() == turn_id) =>
            {
                self.ended = true;
                false
            }
            "session.waiting" => self.ended,
            "session.completed" | "session.failed" => true,
            _ => false,
        }
    }
}

/// Splits a byte stream into lines, whatever the chunk boundaries.
#[derive(Debug, Default)]
struct LineBuffer {
    partial: Vec<u8>,
    /// Lines handed out so far, for error messages.
    line: usize,
}

impl LineBuffer {
    /// Adds a chunk; returns the complete lines it finished.
    fn push(&mut self, chunk: &[u8]) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        let mut rest = chunk;
        while let Some(at) = rest.iter().position(|&b| b == b'\n') {
            self.partial.extend_from_slice(&rest[..at]);
            rest = &rest[at + 1..];
            out.push(self.take());
        }
        self.partial.extend_from_slice(rest);
        out
    }

    /// The unterminated last line, if any.
    fn finish(&mut self) -> Option<(usize, String)> {
        (!self.partial.is_empty()).then(|| self.take())
    }

    fn take(&mut self) -> (usize, String) {
        self.line += 1;
        let bytes = std::mem::take(&mut self.partial);
        (self.line, String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// The state of [`Client::stream`]: the body, the partial line, and lines
/// parsed but not yet handed out.
struct LineStream<S> {
    body: std::pin::Pin<Box<S>>,
    lines: LineBuffer,
    ready: VecDeque<Result<Value>>,
    url: String,
    done: bool,
}

impl<S, B> LineStream<S>
where
    S: Stream<Item = reqwest::Result<B>> + Send,
    B: AsRef<[u8]>,
{
    async fn next(mut self) -> Option<(Result<Value>, Self)> {
        loop {
            if let Some(item) = self.ready.pop_front() {
                return Some((item, self));
            }
            if self.done {
                return None;
            }
            match self.body.next().await {
                Some(Ok(chunk)) => {
                    for (number, line) in self.lines.push(chunk.as_ref()) {
                        self.parse(number, &line);
                    }
                }
                Some(Err(e)) => {
                    self.done = true;
                    self.ready.push_back(Err(transport("GET", &self.url, e)));
                }
                None => {
                    self.done = true;
                    if let Some((number, line)) = self.lines.finish() {
                        self.parse(number, &line);
                    }
                }
            }
        }
    }

    fn parse(&mut self, number: usize, line: &str) {
        match parse_ndjson_line(line, number) {
            Ok(Some(event)) => self.ready.push_back(Ok(event)),
            Ok(None) => {}
            Err(source) => {
                // The rest of a stream that broke mid-way cannot be trusted.
                self.done = true;
                self.ready.push_back(Err(Error::Ndjson {
                    url: shown(&self.url),
                    source,
                }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn lines_split_across_chunks_are_joined() {
        let mut buf = LineBuffer::default();
        let mut lines = Vec::new();
        for chunk in ["{\"a\":", "1}\n{\"b", "\":2}\n\n{\"c\":3}"] {
            lines.extend(buf.push(chunk.as_bytes()));
        }
        lines.extend(buf.finish());
        let expected = [
            (1, "{\"a\":1}".to_owned()),
            (2, "{\"b\":2}".to_owned()),
            (3, String::new()),
            (4, "{\"c\":3}".to_owned()),
        ];
        assert_eq!(lines, expected);
        assert_eq!(buf.finish(), None);
    }

    #[test]
    fn multibyte_characters_split_across_chunks_survive() {
        let text = "{\"t\":\"é→\"}\n".as_bytes();
        let mut buf = LineBuffer::default();
        let mut lines = buf.push(&text[..7]);
        lines.extend(buf.push(&text[7..]));
        assert_eq!(lines, [(1, "{\"t\":\"é→\"}".to_owned())]);
    }

    #[test]
    fn error_bodies_in_both_spellings() {
        let nested = r#"{"ok":false,"error":{"code":"stale_token","message":"token was rotated"}}"#;
        assert_eq!(
            error_body(nested),
            (
                "stale_token".to_owned(),
                Some("token was rotated".to_owned())
            )
        );
        let flat = r#"{"ok":false,"error":"not_found","message":"no session `x`"}"#;
        assert_eq!(
            error_body(flat),
            ("not_found".to_owned(), Some("no session `x`".to_owned()))
        );
        assert_eq!(error_body("  "), (String::new(), None));
        assert_eq!(
            error_body("bad gateway"),
            (String::new(), Some("bad gateway".to_owned()))
        );
    }

    fn ev(kind: &str, turn: Option<&str>) -> Value {
        match turn {
            Some(t) => json!({"type": kind, "turnId": t}),
            None => json!({"type": kind}),
        }
    }

    fn received(text: &str) -> Value {
        json!({"type": "message.received", "data": {"text": text}})
    }

    #[test]
    fn settles_after_our_turn_only() {
        let mut s = Settle::new("and Paris?");
        let seq = [
            // A stream resumed mid-turn replays the end of an earlier turn.
            ev("step.completed", Some("t1")),
            ev("turn.completed", Some("t1")),
            ev("session.waiting", None),
            received(" and Paris? "),
            ev("turn.started", Some("t2")),
            // A preempted turn ending late is not ours.
            ev("turn.failed", Some("t1")),
            ev("session.waiting", None),
            ev("turn.completed", Some("t2")),
        ];
        for e in &seq {
            assert!(!s.observe(e), "{e}");
        }
        assert!(s.observe(&ev("session.waiting", None)));
    }

    #[test]
    fn settles_without_message_received_and_on_terminal_states() {
        let mut s = Settle::new("hi");
        assert!(!s.observe(&ev("turn.started", None)));
        assert!(!s.observe(&ev("turn.completed", None)));
        assert!(s.observe(&ev("session.waiting", None)));

        let mut s = Settle::new("hi");
        assert!(!s.observe(&received("something else")));
        assert!(!s.observe(&ev("turn.started", Some("t0"))));
        assert!(!s.observe(&ev("turn.completed", Some("t0"))));
        assert!(!s.observe(&ev("session.waiting", None)));
        assert!(s.observe(&ev("session.failed", None)));
    }

    #[test]
    fn status_errors_name_url_code_and_message() {
        let e = Error::Status {
            method: "POST",
            url: "http://127.0.0.1:1/a/v1/session/ses_1".to_owned(),
            status: 409,
            code: "stale_token".to_owned(),
            message: "the continuation token was rotated".to_owned(),
        };
        assert_eq!(
            e.to_string(),
            "POST http://127.0.0.1:1/a/v1/session/ses_1 returned 409 (stale_token): the continuation token was rotated"
        );
        assert_eq!(e.status(), Some(409));
        assert_eq!(e.code(), Some("stale_token"));
    }
}
