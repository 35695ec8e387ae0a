//! An HTTP client for one agent's public API (`/v1/session`, its stream and
//! events), used by `agentkit run` and `agentkit chat` and by anyone who
//! drives an agentkit server from Rust.
//!
//! The client speaks only the wire contract: events arrive typed
//! ([`Event`]) and their meaning is left to [`crate::trajectory`]. Its base URL is the
//! agent's root: `http://host:port/<slug>` when the server mounts several
//! agents, `http://host:port` in single mode ([`Client::resolve`] picks the
//! agent on a multi-agent host).

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use agentkit_protocol::Event;
use agentkit_protocol::ab::{AbReport, Feedback, FeedbackRecorded};
use agentkit_protocol::api::{
    Accepted, AgentList, ApprovalDecision, ApprovalList, ApprovalResolved, CallTool, Info,
    SendMessage, SessionList, SessionListQuery, SessionSummary, Stopped, ToolCalled,
};
use futures_util::{Stream, StreamExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::ndjson::{LineBuffer, event_of, parse_ndjson, parse_ndjson_line};
use crate::settle::Settle;

/// Where a conversation stands: its session, the token for the next
/// follow-up, and the index of the next event to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCursor {
    pub session_id: String,
    pub continuation_token: String,
    pub next_index: u64,
}

/// A client for one agent's HTTP API, on the process's one HTTP client
/// ([`agentkit_plumbing::http_client`]). Errors show its URLs without the
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
        let list: AgentList = self.get_json("/v1/agents").await.ok()?;
        Some(list.agents.into_iter().map(|a| a.slug).collect())
    }

    /// `POST /v1/session`: starts a session with its first message.
    pub async fn create_session(&self, message: &str) -> Result<Accepted> {
        self.create_session_with(&SendMessage::new(message)).await
    }

    /// `POST /v1/session` with the session's settings (title, purpose,
    /// dry run, workspace files, output schema).
    pub async fn create_session_with(&self, new: &SendMessage) -> Result<Accepted> {
        self.post_json("/v1/session", new).await
    }

    /// `POST /v1/session/{id}`: sends a follow-up. The answer carries the
    /// rotated token; the one passed here is spent.
    pub async fn follow_up(
        &self,
        session_id: &str,
        continuation_token: &str,
        message: &str,
    ) -> Result<Accepted> {
        self.follow_up_with(session_id, continuation_token, message, &BTreeMap::new())
            .await
    }

    /// [`Client::follow_up`] writing `workspace_files` into the workspace
    /// before the turn.
    pub async fn follow_up_with(
        &self,
        session_id: &str,
        continuation_token: &str,
        message: &str,
        workspace_files: &BTreeMap<String, String>,
    ) -> Result<Accepted> {
        let body = SendMessage {
            continuation_token: Some(continuation_token.to_owned()),
            workspace_files: workspace_files.clone(),
            ..SendMessage::new(message)
        };
        self.post_json(&format!("/v1/session/{session_id}"), &body)
            .await
    }

    /// [`Client::follow_up`] sending `message` as it is (its workspace
    /// files and client tools), with the token set.
    pub async fn follow_up_as(
        &self,
        session_id: &str,
        continuation_token: &str,
        message: &SendMessage,
    ) -> Result<Accepted> {
        let body = SendMessage {
            continuation_token: Some(continuation_token.to_owned()),
            ..message.clone()
        };
        self.post_json(&format!("/v1/session/{session_id}"), &body)
            .await
    }

    /// `POST /v1/session/{id}/client-calls`: the results of calls of
    /// tools the client declared.
    pub async fn answer_client_calls(
        &self,
        session_id: &str,
        results: Vec<agentkit_protocol::api::ClientResult>,
    ) -> Result<agentkit_protocol::api::ClientResultsAccepted> {
        let body = agentkit_protocol::api::ClientResults { results };
        self.post_json(&format!("/v1/session/{session_id}/client-calls"), &body)
            .await
    }

    /// `POST /v1/session/{id}/stop`: interrupts the running turn.
    pub async fn stop(&self, session_id: &str) -> Result<Stopped> {
        self.post_json(
            &format!("/v1/session/{session_id}/stop"),
            &serde_json::Map::new(),
        )
        .await
    }

    /// `GET /v1/session/{id}/events`: the stored events (no live follow).
    pub async fn events(&self, session_id: &str) -> Result<Vec<Event>> {
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

    /// `GET /v1/session/{id}/steps`: the session's model steps.
    pub async fn steps(&self, session_id: &str) -> Result<agentkit_protocol::api::StepList> {
        self.get_json(&format!("/v1/session/{session_id}/steps"))
            .await
    }

    /// `GET /v1/session/{id}/steps/{step}/request`: a step's request as
    /// it was sent.
    pub async fn step_request(
        &self,
        session_id: &str,
        step: u64,
    ) -> Result<agentkit_protocol::api::StepRequestView> {
        self.get_json(&format!("/v1/session/{session_id}/steps/{step}/request"))
            .await
    }

    /// `GET /v1/session/{id}/cassette`: a recording per step of the
    /// session, for `agentkit eval --replay`.
    pub async fn cassette(
        &self,
        session_id: &str,
    ) -> Result<agentkit_protocol::api::SessionCassette> {
        self.get_json(&format!("/v1/session/{session_id}/cassette"))
            .await
    }

    /// `POST /v1/tools/{name}`: a deterministic tool call, run in
    /// `session_id` when given; a failing tool is an answer with
    /// `is_error`, not an `Err`.
    pub async fn call_tool(
        &self,
        name: &str,
        input: &Value,
        session_id: Option<&str>,
    ) -> Result<ToolCalled> {
        let body = CallTool {
            input: input.clone(),
            session_id: session_id.map(str::to_owned),
        };
        self.post_json(&format!("/v1/tools/{name}"), &body).await
    }

    /// `GET /v1/session/{id}/approvals`: the calls waiting for a decision.
    pub async fn approvals(&self, session_id: &str) -> Result<ApprovalList> {
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
    ) -> Result<ApprovalResolved> {
        let body = ApprovalDecision::new(approve, reason.map(str::to_owned));
        self.post_json(
            &format!("/v1/session/{session_id}/approvals/{call_id}"),
            &body,
        )
        .await
    }

    /// `GET /v1/dev/sessions/{id}/files/{path}` (a server in dev mode): a
    /// file of the session's workspace, `None` when it does not exist.
    pub async fn workspace_file(&self, session_id: &str, path: &str) -> Result<Option<String>> {
        let url = self.url(&format!("/v1/dev/sessions/{session_id}/files/{path}"));
        match self.send("GET", http()?.get(&url), &url).await {
            Ok(response) => Ok(Some(
                response
                    .text()
                    .await
                    .map_err(|e| transport("GET", &url, e))?,
            )),
            Err(e) if e.code() == Some("file_not_found") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `POST /v1/session/{id}/feedback`: an outcome for the session,
    /// credited to its A/B variants.
    pub async fn feedback(
        &self,
        session_id: &str,
        feedback: &Feedback,
    ) -> Result<FeedbackRecorded> {
        self.post_json(&format!("/v1/session/{session_id}/feedback"), feedback)
            .await
    }

    /// `GET /v1/ab`: every experiment's per-variant metrics.
    pub async fn ab_report(&self) -> Result<AbReport> {
        self.get_json("/v1/ab").await
    }

    /// `GET /v1/info`: the agent's discovered surface and run-time state.
    pub async fn info(&self) -> Result<Info> {
        self.get_json("/v1/info").await
    }

    /// `GET /v1/sessions`: the first page of the caller's sessions
    /// (100, newest first; `next_cursor` continues).
    pub async fn sessions(&self) -> Result<SessionList> {
        self.get_json("/v1/sessions").await
    }

    /// `GET /v1/sessions?limit&cursor&channel&since&updatedSince&status`:
    /// one page of the caller's sessions, newest first.
    pub async fn sessions_page(&self, query: &SessionListQuery) -> Result<SessionList> {
        let mut url = self.url("/v1/sessions");
        let limit = query.limit.map(|n| n.to_string());
        let pairs = [
            ("limit", limit.as_deref()),
            ("cursor", query.cursor.as_deref()),
            ("channel", query.channel.as_deref()),
            ("since", query.since.as_deref()),
            ("updatedSince", query.updated_since.as_deref()),
            ("status", query.status.as_deref()),
        ];
        if let Ok(mut parsed) = reqwest::Url::parse(&url) {
            for (name, value) in pairs {
                if let Some(value) = value {
                    parsed.query_pairs_mut().append_pair(name, value);
                }
            }
            url = parsed.to_string();
        }
        let response = self.send("GET", http()?.get(&url), &url).await?;
        read_json("GET", &url, response).await
    }

    /// Every session `query` selects, following `nextCursor` from page to
    /// page (of `query.limit`, or the server's default), newest first.
    pub async fn all_sessions(&self, query: &SessionListQuery) -> Result<Vec<SessionSummary>> {
        let mut query = query.clone();
        let mut all = Vec::new();
        loop {
            let page = self.sessions_page(&query).await?;
            all.extend(page.sessions);
            match page.next_cursor {
                Some(next) => query.cursor = Some(next),
                None => return Ok(all),
            }
        }
    }

    /// `GET /v1/session/{id}/stream?startIndex=N`: the events from index
    /// `start_index` on, replayed and then live. The stream does not end
    /// while the server runs; drop it when done.
    pub async fn stream(
        &self,
        session_id: &str,
        start_index: u64,
    ) -> Result<impl Stream<Item = Result<Event>> + Send + 'static> {
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
    ) -> Result<(Accepted, Vec<Event>)> {
        self.run_turn_with(session, message, |_| {}).await
    }

    /// [`Client::run_turn`], calling `on_event` with each event as it
    /// arrives (to render a reply live).
    pub async fn run_turn_with(
        &self,
        session: &mut Option<SessionCursor>,
        message: &str,
        on_event: impl FnMut(&Event),
    ) -> Result<(Accepted, Vec<Event>)> {
        self.run_turn_as(session, &SendMessage::new(message), on_event)
            .await
    }

    /// [`Client::run_turn_with`] where a new session is set up as `new`
    /// says (its message is the turn's); a follow-up carries `new`'s
    /// message and workspace files and the cursor's token.
    pub async fn run_turn_as(
        &self,
        session: &mut Option<SessionCursor>,
        new: &SendMessage,
        mut on_event: impl FnMut(&Event),
    ) -> Result<(Accepted, Vec<Event>)> {
        let message = new.message.as_str();
        let (accepted, start) = match session.as_ref() {
            None => (self.create_session_with(new).await?, 0),
            Some(cursor) => (
                self.follow_up_with(
                    &cursor.session_id,
                    &cursor.continuation_token,
                    message,
                    &new.workspace_files,
                )
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
            cursor.next_index = cursor.next_index.max(event.index + 1);
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

    async fn get_json<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        let url = self.url(path);
        let response = self.send("GET", http()?.get(&url), &url).await?;
        read_json("GET", &url, response).await
    }

    async fn post_json<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &(impl Serialize + ?Sized),
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
    agentkit_plumbing::redact_credentials(url)
}

/// The process's one HTTP client.
fn http() -> Result<&'static reqwest::Client> {
    Ok(agentkit_plumbing::http_client()?)
}

async fn read_json<T: DeserializeOwned>(
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

/// The state of [`Client::stream`]: the body, the partial line, and lines
/// parsed but not yet handed out.
struct LineStream<S> {
    body: std::pin::Pin<Box<S>>,
    lines: LineBuffer,
    ready: VecDeque<Result<Event>>,
    url: String,
    done: bool,
}

impl<S, B> LineStream<S>
where
    S: Stream<Item = reqwest::Result<B>> + Send,
    B: AsRef<[u8]>,
{
    async fn next(mut self) -> Option<(Result<Event>, Self)> {
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
            Ok(Some(value)) => {
                if let Some(event) = event_of(value) {
                    self.ready.push_back(Ok(event));
                }
            }
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
    use super::*;

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
}
