//! The A2A operations over one agent's runtime, whichever binding
//! carried them: a message creates or continues a session on the `a2a`
//! channel (its `contextId`) and starts a task (a turn); a message that
//! carries the id of a task waiting for input answers its parked calls;
//! getting, cancelling and subscribing read the task back from the
//! session's log. The runtime is reached only through the public methods
//! the HTTP routes and the MCP server use, so ownership and admission are
//! the same.

use std::sync::Arc;
use std::time::Duration;

use agentkit_manifest::Admission;
use agentkit_protocol::ErrorCode;
use agentkit_runtime::{FollowUp, Owner, SendRequest, SessionMode};
use axum::http::StatusCode;
use futures_util::Stream;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::super::agent::Mounted;
use super::super::edge::TurnGate;
use super::super::http::ApiError;
use super::push::{ConfigRequest, ListConfigsRequest, PushConfig, PushError};
use super::task::{TaskFold, TaskId};
use super::wire::{
    self, ListTasksRequest, Message, SendMessageRequest, StreamResponse, TaskRequest, TaskState,
};

/// The channel A2A sessions live on.
pub(crate) const A2A_CHANNEL: &str = "a2a";

/// How long a blocking `SendMessage` waits for its task to end or ask
/// for input before it answers the task as it is (still working; the
/// client then polls `GetTask` or subscribes).
const BLOCKING_WAIT: Duration = Duration::from_secs(300);

/// `ListTasks`' page size when none is asked for, and the most.
const LIST_PAGE_DEFAULT: usize = 50;
const LIST_PAGE_MAX: usize = 100;

/// The most A2A sessions (the caller's newest) `ListTasks` reads for one
/// answer without a `contextId`: its `totalSize` counts their tasks.
const LIST_SESSIONS_MAX: usize = 1_000;

/// How long `CancelTask` waits for the stop to be recorded.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

/// An A2A error: a JSON-RPC code and an `ErrorInfo` reason (for the
/// HTTP+JSON binding, a status too); or a refusal the HTTP layer answers
/// as it answers every route (`401`, `429`, `503`, `413`).
#[derive(Debug)]
pub(crate) enum A2aError {
    Protocol {
        code: i64,
        reason: &'static str,
        status: StatusCode,
        message: String,
        metadata: Map<String, Value>,
    },
    Http(ApiError),
}

impl A2aError {
    fn protocol(code: i64, reason: &'static str, status: StatusCode, message: String) -> A2aError {
        A2aError::Protocol {
            code,
            reason,
            status,
            message,
            metadata: Map::new(),
        }
    }

    pub(crate) fn parse_error(message: impl Into<String>) -> A2aError {
        A2aError::protocol(
            -32700,
            "PARSE_ERROR",
            StatusCode::BAD_REQUEST,
            message.into(),
        )
    }

    pub(crate) fn invalid_request(message: impl Into<String>) -> A2aError {
        A2aError::protocol(
            -32600,
            "INVALID_REQUEST",
            StatusCode::BAD_REQUEST,
            message.into(),
        )
    }

    pub(crate) fn method_not_found(message: impl Into<String>) -> A2aError {
        A2aError::protocol(
            -32601,
            "METHOD_NOT_FOUND",
            StatusCode::NOT_FOUND,
            message.into(),
        )
    }

    pub(crate) fn invalid_params(message: impl Into<String>) -> A2aError {
        A2aError::protocol(
            -32602,
            "INVALID_PARAMS",
            StatusCode::BAD_REQUEST,
            message.into(),
        )
    }

    pub(crate) fn internal(message: impl Into<String>) -> A2aError {
        A2aError::protocol(
            -32603,
            "INTERNAL",
            StatusCode::INTERNAL_SERVER_ERROR,
            message.into(),
        )
    }

    /// Something of a task that is not there (a push config), as a task
    /// not found.
    pub(crate) fn not_found(message: &str) -> A2aError {
        A2aError::protocol(
            -32001,
            "TASK_NOT_FOUND",
            StatusCode::NOT_FOUND,
            message.to_owned(),
        )
    }

    fn task_not_found(id: &str) -> A2aError {
        A2aError::protocol(
            -32001,
            "TASK_NOT_FOUND",
            StatusCode::NOT_FOUND,
            format!("no task `{id}` that you may see"),
        )
    }

    fn not_cancelable(id: &str, state: TaskState) -> A2aError {
        A2aError::protocol(
            -32002,
            "TASK_NOT_CANCELABLE",
            StatusCode::BAD_REQUEST,
            format!("task `{id}` has ended ({state:?}) and cannot be canceled"),
        )
    }

    pub(crate) fn unsupported(message: impl Into<String>) -> A2aError {
        A2aError::protocol(
            -32004,
            "UNSUPPORTED_OPERATION",
            StatusCode::BAD_REQUEST,
            message.into(),
        )
    }

    fn content_type(message: impl Into<String>) -> A2aError {
        A2aError::protocol(
            -32005,
            "CONTENT_TYPE_NOT_SUPPORTED",
            StatusCode::BAD_REQUEST,
            message.into(),
        )
    }

    pub(crate) fn version_not_supported(version: &str) -> A2aError {
        A2aError::protocol(
            -32009,
            "VERSION_NOT_SUPPORTED",
            StatusCode::BAD_REQUEST,
            format!("A2A version `{version}` is not supported: this server speaks A2A 1.0"),
        )
    }

    /// A runtime refusal on task `task` (its session not found is the task
    /// not found).
    fn on_task(task: &str, e: agentkit_runtime::Error) -> A2aError {
        match A2aError::from(ApiError::from(e)) {
            A2aError::Protocol {
                reason: "TASK_NOT_FOUND",
                ..
            } => A2aError::task_not_found(task),
            other => other,
        }
    }
}

impl From<ApiError> for A2aError {
    fn from(api: ApiError) -> A2aError {
        let (code, reason, status) = match api.code {
            ErrorCode::Unauthorized
            | ErrorCode::RateLimited
            | ErrorCode::Overloaded
            | ErrorCode::StorageFull
            | ErrorCode::PayloadTooLarge
            | ErrorCode::NotAvailable => return A2aError::Http(api),
            // Another principal's session is not found: a task id reveals
            // no more than a guess would.
            ErrorCode::NotFound
            | ErrorCode::SessionNotFound
            | ErrorCode::InvalidSessionId
            | ErrorCode::Forbidden => (-32001, "TASK_NOT_FOUND", StatusCode::NOT_FOUND),
            ErrorCode::BadRequest
            | ErrorCode::InvalidInput
            | ErrorCode::StaleContinuation
            | ErrorCode::TaskSession
            | ErrorCode::SessionBusy
            | ErrorCode::ApprovalNotFound
            | ErrorCode::ApprovalResolved
            | ErrorCode::HopLimit => (-32602, "INVALID_PARAMS", StatusCode::BAD_REQUEST),
            _ => (-32603, "INTERNAL", StatusCode::INTERNAL_SERVER_ERROR),
        };
        let mut metadata = Map::new();
        if let Ok(Value::String(c)) = serde_json::to_value(api.code) {
            metadata.insert("agentkitCode".to_owned(), Value::String(c));
        }
        A2aError::Protocol {
            code,
            reason,
            status,
            message: api.message,
            metadata,
        }
    }
}

impl From<PushError> for A2aError {
    fn from(e: PushError) -> A2aError {
        match e {
            PushError::Invalid(m) => A2aError::invalid_params(m),
            PushError::NotFound(m) => A2aError::not_found(&m),
            PushError::Unsupported(m) => A2aError::unsupported(m),
            PushError::Internal(m) => {
                tracing::warn!(error = %m, "an A2A push notification request failed");
                A2aError::internal("the push notification store failed; see the server log")
            }
        }
    }
}

impl From<agentkit_runtime::Error> for A2aError {
    fn from(e: agentkit_runtime::Error) -> A2aError {
        A2aError::from(ApiError::from(e))
    }
}

pub(crate) type A2aResult<T> = Result<T, A2aError>;

/// One admitted caller of one agent.
pub(crate) struct Caller {
    pub(crate) agent: Arc<Mounted>,
    pub(crate) owner: Owner,
    pub(crate) gate: Option<Arc<TurnGate>>,
    pub(crate) shutdown: CancellationToken,
    /// The delegation depth the request arrived at (`x-agentkit-hops`).
    pub(crate) hops: u32,
    /// The request named an A2A 0.3 method: the webhooks it registers
    /// are sent 0.3's bodies.
    pub(crate) legacy: bool,
}

/// The delegation depth a request's `x-agentkit-hops` header says (0
/// without one).
pub(crate) fn hops(headers: &axum::http::HeaderMap) -> u32 {
    headers
        .get(agentkit_mcp::HOPS_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The text a message gives the agent: its text parts, its data parts as
/// JSON, its file parts by URL.
fn message_text(message: &Message) -> A2aResult<String> {
    let mut pieces = Vec::new();
    for part in &message.parts {
        if let Some(text) = &part.text {
            pieces.push(text.clone());
        } else if let Some(data) = &part.data {
            pieces.push(serde_json::to_string(data).unwrap_or_default());
        } else if let Some(url) = &part.url {
            let name = part.filename.as_deref().unwrap_or("file");
            pieces.push(format!("[{name}]({url})"));
        } else if part.raw.is_some() {
            return Err(A2aError::content_type(
                "raw file parts are not supported: send text, data, or a file by `url`",
            ));
        }
    }
    let text = pieces.join("\n\n");
    if text.trim().is_empty() {
        return Err(A2aError::invalid_params(
            "the message has no text: give it a `text` (or `data`) part",
        ));
    }
    Ok(text)
}

/// A decision on parked calls, read from an answer to `input-required`:
/// a text part that is `approve` or `deny` (optionally `deny: why`), or a
/// data part `{"decision": "approve"|"deny", "reason"?, "callId"?}`.
#[derive(Debug, Clone, PartialEq)]
struct Answer {
    approved: bool,
    reason: Option<String>,
    call_id: Option<String>,
}

fn answer(message: &Message) -> Option<Answer> {
    for part in &message.parts {
        if let Some(Value::Object(data)) = &part.data {
            let approved = match data.get("decision").and_then(Value::as_str) {
                Some("approve") => true,
                Some("deny") => false,
                _ => continue,
            };
            let text = |k: &str| data.get(k).and_then(Value::as_str).map(str::to_owned);
            return Some(Answer {
                approved,
                reason: text("reason"),
                call_id: text("callId"),
            });
        }
        if let Some(text) = &part.text {
            let (word, reason) = match text.trim().split_once(':') {
                Some((w, r)) => (
                    w.trim(),
                    Some(r.trim().to_owned()).filter(|r| !r.is_empty()),
                ),
                None => (text.trim(), None),
            };
            let approved = match word.to_ascii_lowercase().as_str() {
                "approve" | "approved" | "yes" => true,
                "deny" | "denied" | "no" => false,
                _ => continue,
            };
            return Some(Answer {
                approved,
                reason,
                call_id: None,
            });
        }
    }
    None
}

impl Caller {
    fn runtime(&self) -> &agentkit_runtime::AgentRuntime {
        &self.agent.runtime
    }

    /// The task `id` as its log holds it now, and the index after the
    /// last event read.
    async fn snapshot(&self, id: &TaskId) -> A2aResult<(TaskFold, u64)> {
        let text = id.to_string();
        let events = self
            .runtime()
            .events_stored(&id.session, &self.owner, id.start)
            .await
            .map_err(|e| A2aError::on_task(&text, e))?;
        let first = events.first();
        if first.is_none_or(|e| {
            e.index != id.start || e.event_type != agentkit_protocol::EventType::MessageReceived
        }) {
            return Err(A2aError::task_not_found(&text));
        }
        let mut fold = TaskFold::new(id.clone());
        let mut next = id.start;
        for e in &events {
            fold.observe(e);
            next = e.index + 1;
        }
        Ok((fold, next))
    }

    fn task_id(&self, id: &str) -> A2aResult<TaskId> {
        TaskId::parse(id).ok_or_else(|| A2aError::task_not_found(id))
    }

    /// Starts the task a message asks for (or answers the one it names)
    /// and answers its id.
    async fn start(&self, req: &SendMessageRequest) -> A2aResult<TaskId> {
        let Some(message) = &req.message else {
            return Err(A2aError::invalid_params("`message` is required"));
        };
        if self.hops > self.agent.max_hops {
            return Err(A2aError::from(ApiError::new(
                StatusCode::BAD_REQUEST,
                ErrorCode::HopLimit,
                format!(
                    "delegation chain too deep: this request arrived after {} agent-to-agent hops and the limit is {}; answer without delegating further",
                    self.hops, self.agent.max_hops
                ),
            )));
        }
        if let Some(task) = message.task_id.as_deref().filter(|t| !t.is_empty()) {
            let id = self.task_id(task)?;
            if message
                .context_id
                .as_deref()
                .is_some_and(|c| !c.is_empty() && c != id.session)
            {
                return Err(A2aError::invalid_params(format!(
                    "task `{task}` is not in context `{}`",
                    message.context_id.as_deref().unwrap_or_default()
                )));
            }
            let (fold, _) = self.snapshot(&id).await?;
            match fold.state() {
                TaskState::InputRequired => {
                    self.answer(&fold, message).await?;
                    return Ok(id);
                }
                s if s.is_terminal() => {
                    return Err(A2aError::unsupported(format!(
                        "task `{task}` has ended ({s:?}): send a new message in its context (`contextId`) without `taskId`"
                    )));
                }
                // A task still at work: the message follows up its
                // session as a new task.
                _ => {}
            }
            return self.follow_up(&id.session, message).await;
        }
        match message.context_id.as_deref().filter(|c| !c.is_empty()) {
            Some(context) => self.follow_up(context, message).await,
            None => self.create(message).await,
        }
    }

    fn admit(&self) -> A2aResult<Option<super::super::edge::TurnSlot>> {
        match &self.gate {
            Some(gate) => Ok(Some(gate.admit(&self.agent.slug, &self.owner)?)),
            None => Ok(None),
        }
    }

    async fn create(&self, message: &Message) -> A2aResult<TaskId> {
        let text = message_text(message)?;
        let slot = self.admit()?;
        let accepted = self
            .runtime()
            .send(SendRequest {
                client_tools: Vec::new(),
                channel: A2A_CHANNEL.to_owned(),
                mode: SessionMode::Chat,
                owner: self.owner.clone(),
                message: text,
                continuation: None,
                title: None,
                purpose: None,
                admission: Admission::default(),
                workspace_files: Vec::new(),
                dry_run: false,
                as_of: None,
                output_schema: None,
            })
            .await?;
        if let Some(slot) = slot {
            slot.admitted(self.runtime(), &accepted.session_id);
        }
        // Its turns' calls to other agents go one hop deeper.
        self.agent.depths.set(&accepted.session_id, self.hops);
        Ok(TaskId {
            session: accepted.session_id,
            start: accepted.start_index,
        })
    }

    async fn follow_up(&self, context: &str, message: &Message) -> A2aResult<TaskId> {
        let text = message_text(message)?;
        let meta = self
            .runtime()
            .session(context, &self.owner)
            .await
            .map_err(|e| match A2aError::from(e) {
                A2aError::Protocol {
                    reason: "TASK_NOT_FOUND",
                    ..
                } => A2aError::invalid_params(format!("no context `{context}` that you may see")),
                other => other,
            })?;
        if meta.channel != A2A_CHANNEL {
            return Err(A2aError::invalid_params(format!(
                "context `{context}` is a session on the `{}` channel; A2A continues only sessions it started",
                meta.channel
            )));
        }
        let slot = self.admit()?;
        let accepted = self
            .runtime()
            .follow_up(
                context,
                FollowUp {
                    client_tools: Vec::new(),
                    owner: self.owner.clone(),
                    message: text,
                    continuation_token: None,
                    admission: Admission::default(),
                    workspace_files: Vec::new(),
                },
            )
            .await?;
        if let Some(slot) = slot {
            slot.admitted(self.runtime(), &accepted.session_id);
        }
        // Its turns' calls to other agents go one hop deeper.
        self.agent.depths.set(&accepted.session_id, self.hops);
        Ok(TaskId {
            session: accepted.session_id,
            start: accepted.start_index,
        })
    }

    /// Decides the parked calls of an input-required task from `message`.
    async fn answer(&self, fold: &TaskFold, message: &Message) -> A2aResult<()> {
        let Some(answer) = answer(message) else {
            return Err(A2aError::invalid_params(format!(
                "task `{}` waits for an approval: answer `approve` or `deny` (a text part, optionally `deny: why`), or a data part {{\"decision\": \"approve\"|\"deny\", \"reason\"?, \"callId\"?}}",
                fold.id
            )));
        };
        let calls: Vec<&str> = fold
            .parked
            .iter()
            .map(|p| p.call_id.as_str())
            .filter(|c| answer.call_id.as_deref().is_none_or(|want| want == *c))
            .collect();
        if calls.is_empty() {
            return Err(A2aError::invalid_params(format!(
                "task `{}` has no parked call `{}`",
                fold.id,
                answer.call_id.as_deref().unwrap_or_default()
            )));
        }
        for call in &calls {
            let decision = agentkit_runtime::Decision {
                approved: answer.approved,
                reason: answer.reason.clone(),
                by: self.owner.principal_id.clone(),
            };
            self.runtime()
                .approvals()
                .resolve(&fold.id.session, call, decision, &self.owner)
                .await?;
        }
        // A live turn records the decision itself, a moment later: what
        // the caller reads next starts after it.
        let decided: Vec<String> = calls.iter().map(|c| (*c).to_owned()).collect();
        let (mut after, next) = self.snapshot(&fold.id).await?;
        self.wait(&mut after, next, CANCEL_WAIT, |f| {
            !f.parked.iter().any(|p| decided.contains(&p.call_id))
        })
        .await?;
        Ok(())
    }

    /// `SendMessage`: the task, once it ends or needs input (at once with
    /// `returnImmediately`).
    pub(crate) async fn send_message(&self, req: SendMessageRequest) -> A2aResult<Value> {
        let push = self.push_config(&req).await?;
        let id = self.start(&req).await?;
        self.register_push(&id, push).await?;
        let config = req.configuration.unwrap_or_default();
        let (mut fold, next) = self.snapshot(&id).await?;
        if !config.return_immediately {
            self.wait(&mut fold, next, BLOCKING_WAIT, |f| {
                f.state().is_interrupted()
            })
            .await?;
        }
        to_value(&wire::SendMessageResponse {
            task: fold.task(config.history_length),
        })
    }

    /// Follows the session until `done` says so, or `wait` passes.
    async fn wait(
        &self,
        fold: &mut TaskFold,
        next: u64,
        wait: Duration,
        done: impl Fn(&TaskFold) -> bool,
    ) -> A2aResult<u64> {
        let text = fold.id.to_string();
        let mut sub = self
            .runtime()
            .subscribe(&fold.id.session, &self.owner, next)
            .await
            .map_err(|e| A2aError::on_task(&text, e))?;
        let deadline = tokio::time::Instant::now() + wait;
        let mut next = next;
        while !done(fold) {
            let tick = (deadline - tokio::time::Instant::now()).min(IDLE_CHECK);
            let event = tokio::select! {
                e = tokio::time::timeout(tick, sub.next()) => e,
                () = self.shutdown.cancelled() => return Ok(next),
            };
            match event {
                Err(_) if tokio::time::Instant::now() >= deadline => return Ok(next),
                Err(_) => {
                    if super::task::dropped(self.runtime(), fold) {
                        fold.dropped();
                    }
                }
                Ok(Err(e)) => {
                    tracing::warn!(task = %fold.id, error = %e, "cannot follow a session for A2A");
                    return Err(A2aError::internal(
                        "cannot read the session's events; see the server log",
                    ));
                }
                Ok(Ok(event)) => {
                    fold.observe(&event);
                    next = event.index + 1;
                }
            }
        }
        Ok(next)
    }

    /// `GetTask`.
    pub(crate) async fn get_task(&self, req: TaskRequest) -> A2aResult<Value> {
        let id = self.task_id(&req.id)?;
        let (fold, _) = self.snapshot(&id).await?;
        to_value(&fold.task(req.history_length))
    }

    /// `ListTasks`: the caller's tasks (of one context, or of its newest
    /// A2A sessions), newest first (by context, then by message), with
    /// the state and time filters, one page at a time. A page token is
    /// the last task of the page before, so a page goes on from there
    /// whatever started since.
    pub(crate) async fn list_tasks(&self, req: ListTasksRequest) -> A2aResult<Value> {
        let size = match req.page_size {
            None | Some(0) => LIST_PAGE_DEFAULT,
            Some(n) if (1..=LIST_PAGE_MAX as i64).contains(&n) => n as usize,
            Some(n) => {
                return Err(A2aError::invalid_params(format!(
                    "`pageSize` must be 1 to {LIST_PAGE_MAX} (got {n})"
                )));
            }
        };
        let after = match req.page_token.as_deref().filter(|t| !t.is_empty()) {
            None => None,
            Some(t) => Some(TaskId::parse(t).ok_or_else(|| {
                A2aError::invalid_params(format!(
                    "`pageToken` `{t}` is not one this server gave (pass the previous answer's `nextPageToken`)"
                ))
            })?),
        };
        let since = match req.status_timestamp_after.as_deref() {
            None => None,
            Some(t) => Some(chrono::DateTime::parse_from_rfc3339(t).map_err(|e| {
                A2aError::invalid_params(format!(
                    "`statusTimestampAfter` `{t}` is not an RFC 3339 time: {e}"
                ))
            })?),
        };
        let sessions = match &req.context_id {
            Some(context) if !context.is_empty() => vec![context.clone()],
            _ => self.a2a_sessions().await?,
        };
        let mut tasks: Vec<TaskFold> = Vec::new();
        for session in sessions {
            let events = match self.runtime().events_stored(&session, &self.owner, 0).await {
                Ok(events) => events,
                // Another principal's or a deleted context: none of yours.
                Err(e) => match A2aError::on_task(&session, e) {
                    A2aError::Protocol {
                        reason: "TASK_NOT_FOUND",
                        ..
                    } => continue,
                    other => return Err(other),
                },
            };
            let mut folds: Vec<TaskFold> = Vec::new();
            for e in &events {
                if e.event_type == agentkit_protocol::EventType::MessageReceived {
                    folds.push(TaskFold::new(TaskId {
                        session: session.clone(),
                        start: e.index,
                    }));
                }
                for fold in &mut folds {
                    fold.observe(e);
                }
            }
            tasks.extend(folds.into_iter().filter(|f| {
                req.status.is_none_or(|s| f.state() == s)
                    && since.is_none_or(|since| {
                        f.updated_at()
                            .and_then(|at| chrono::DateTime::parse_from_rfc3339(at).ok())
                            .is_some_and(|at| at >= since)
                    })
            }));
        }
        let key = |f: &TaskFold| (f.id().session.clone(), f.id().start);
        tasks.sort_by_key(|f| std::cmp::Reverse(key(f)));
        let total = tasks.len();
        let from = after.map_or(0, |t| {
            let token = (t.session, t.start);
            tasks.partition_point(|f| key(f) >= token)
        });
        let page: Vec<&TaskFold> = tasks.iter().skip(from).take(size).collect();
        let next = if from + page.len() < total {
            page.last().map(|f| f.id().to_string()).unwrap_or_default()
        } else {
            String::new()
        };
        let include_artifacts = req.include_artifacts.unwrap_or(false);
        let listed = page
            .iter()
            .map(|f| {
                let mut task = f.task(req.history_length);
                if !include_artifacts {
                    task.artifacts.clear();
                }
                task
            })
            .collect::<Vec<_>>();
        Ok(serde_json::json!({
            "tasks": listed,
            "nextPageToken": next,
            "pageSize": size,
            "totalSize": total,
        }))
    }

    /// The caller's A2A sessions, newest first, at most
    /// `LIST_SESSIONS_MAX`.
    async fn a2a_sessions(&self) -> A2aResult<Vec<String>> {
        let mut ids = Vec::new();
        let mut before = None;
        while ids.len() < LIST_SESSIONS_MAX {
            let page = agentkit_runtime::SessionPage {
                limit: 100,
                before: before.take(),
                channel: Some(A2A_CHANNEL.to_owned()),
                since: None,
                updated_since: None,
                status: None,
            };
            let (sessions, next) = self
                .runtime()
                .list_page(&self.owner, &page)
                .await
                .map_err(|e| A2aError::from(ApiError::from(e)))?;
            ids.extend(sessions.into_iter().map(|s| s.session_id));
            match next {
                Some(n) => before = Some(n),
                None => break,
            }
        }
        ids.truncate(LIST_SESSIONS_MAX);
        Ok(ids)
    }

    /// `CancelTask`: stops the task's turn (and whatever is queued in its
    /// session), then answers the task once the stop is recorded.
    pub(crate) async fn cancel_task(&self, req: TaskRequest) -> A2aResult<Value> {
        let id = self.task_id(&req.id)?;
        let (mut fold, next) = self.snapshot(&id).await?;
        if fold.state().is_terminal() {
            return Err(A2aError::not_cancelable(&req.id, fold.state()));
        }
        self.runtime()
            .stop(&id.session, &self.owner)
            .await
            .map_err(|e| A2aError::on_task(&req.id, e))?;
        self.wait(&mut fold, next, CANCEL_WAIT, |f| f.state().is_terminal())
            .await?;
        to_value(&fold.task(req.history_length))
    }

    /// `SendStreamingMessage`: the task as it starts, then its updates
    /// until it ends or needs input.
    pub(crate) async fn send_streaming(
        &self,
        req: SendMessageRequest,
    ) -> A2aResult<impl Stream<Item = StreamResponse> + Send + use<>> {
        let push = self.push_config(&req).await?;
        let id = self.start(&req).await?;
        self.register_push(&id, push).await?;
        self.stream(id).await
    }

    /// The webhook a message's `configuration` registers for its task.
    async fn push_config(&self, req: &SendMessageRequest) -> A2aResult<Option<PushConfig>> {
        let Some(value) = req
            .configuration
            .as_ref()
            .and_then(|c| c.task_push_notification_config.clone())
        else {
            return Ok(None);
        };
        let mut config: PushConfig = serde_json::from_value(value)
            .map_err(|e| A2aError::invalid_params(format!("`taskPushNotificationConfig`: {e}")))?;
        config.legacy = self.legacy;
        if config.url.is_empty() {
            return Err(A2aError::invalid_params(
                "`taskPushNotificationConfig` needs a `url`",
            ));
        }
        self.agent.pushes.check(&config).await?;
        Ok(Some(config))
    }

    async fn register_push(&self, id: &TaskId, config: Option<PushConfig>) -> A2aResult<()> {
        let Some(mut config) = config else {
            return Ok(());
        };
        config.task_id = id.to_string();
        // 0.3 names a task's webhook after the task.
        if config.legacy && config.id.is_empty() {
            config.id = config.task_id.clone();
        }
        let (fold, _) = self.snapshot(id).await?;
        self.agent
            .pushes
            .create(self.runtime(), &self.owner, &fold, config, &self.shutdown)
            .await?;
        Ok(())
    }

    /// `CreateTaskPushNotificationConfig`.
    pub(crate) async fn create_push(&self, mut config: PushConfig) -> A2aResult<Value> {
        config.legacy = self.legacy;
        let id = self.task_id(&config.task_id)?;
        let (fold, _) = self.snapshot(&id).await?;
        let created = self
            .agent
            .pushes
            .create(self.runtime(), &self.owner, &fold, config, &self.shutdown)
            .await?;
        to_value(&created)
    }

    /// `GetTaskPushNotificationConfig`.
    pub(crate) async fn get_push(&self, req: ConfigRequest) -> A2aResult<Value> {
        let id = self.task_id(&req.task_id)?;
        self.snapshot(&id).await?;
        to_value(&self.agent.pushes.get(&id, &req.id).await?)
    }

    /// `ListTaskPushNotificationConfigs`.
    pub(crate) async fn list_push(&self, req: ListConfigsRequest) -> A2aResult<Value> {
        let id = self.task_id(&req.task_id)?;
        self.snapshot(&id).await?;
        Ok(self.agent.pushes.list(&id, &req).await?)
    }

    /// `DeleteTaskPushNotificationConfig`.
    pub(crate) async fn delete_push(&self, req: ConfigRequest) -> A2aResult<Value> {
        let id = self.task_id(&req.task_id)?;
        self.snapshot(&id).await?;
        self.agent.pushes.delete(&id, &req.id).await?;
        Ok(Value::Object(Map::new()))
    }

    /// `GetExtendedAgentCard`: the extended card, for a caller the chain
    /// authenticated (not one it admitted anonymously); `base` is where
    /// the request came to.
    pub(crate) fn extended_card(&self, base: &str) -> A2aResult<Value> {
        if !super::card::extended_available(&self.agent.chain) {
            return Err(A2aError::unsupported(
                "this agent admits anyone anonymously and has no extended card: its card is /.well-known/agent-card.json",
            ));
        }
        if self.owner.principal_type == "anonymous" {
            return Err(A2aError::Http(ApiError::new(
                StatusCode::UNAUTHORIZED,
                ErrorCode::Unauthorized,
                "the extended agent card is for authenticated callers: present a credential of the card's `securitySchemes` (a chain that admits anyone first, `allow_all`, admits you anonymously)",
            )));
        }
        Ok(super::card::extended_card(&self.agent, base))
    }

    /// `SubscribeToTask`: as a stream does, for a task not yet over.
    pub(crate) async fn subscribe(
        &self,
        req: TaskRequest,
    ) -> A2aResult<impl Stream<Item = StreamResponse> + Send + use<>> {
        let id = self.task_id(&req.id)?;
        let (fold, _) = self.snapshot(&id).await?;
        if fold.state().is_terminal() {
            return Err(A2aError::unsupported(format!(
                "task `{}` has ended ({:?}): read it with GetTask",
                req.id,
                fold.state()
            )));
        }
        self.stream(id).await
    }

    async fn stream(
        &self,
        id: TaskId,
    ) -> A2aResult<impl Stream<Item = StreamResponse> + Send + use<>> {
        let (mut fold, next) = self.snapshot(&id).await?;
        let text = id.to_string();
        let sub = self
            .runtime()
            .subscribe(&id.session, &self.owner, next)
            .await
            .map_err(|e| A2aError::on_task(&text, e))?;
        let first = StreamResponse::Task(fold.task(None));
        let done = fold.state().is_interrupted();
        let (tx, rx) = tokio::sync::mpsc::channel::<StreamResponse>(64);
        let shutdown = self.shutdown.clone();
        let runtime = self.runtime().clone();
        tokio::spawn(async move {
            if tx.send(first).await.is_err() || done {
                return;
            }
            let mut sub = sub;
            loop {
                let event = tokio::select! {
                    e = tokio::time::timeout(IDLE_CHECK, sub.next()) => e,
                    () = shutdown.cancelled() => return,
                    () = tx.closed() => return,
                };
                let change = match event {
                    Ok(Ok(event)) => fold.observe(&event),
                    Ok(Err(e)) => {
                        tracing::warn!(task = %fold.id, error = %e, "A2A stream ended by a store error");
                        return;
                    }
                    Err(_) if super::task::dropped(&runtime, &fold) => {
                        fold.dropped();
                        Some(super::task::Change::Status)
                    }
                    Err(_) => None,
                };
                let Some(change) = change else {
                    continue;
                };
                for out in fold.stream_events(&change) {
                    if tx.send(out).await.is_err() {
                        return;
                    }
                }
                if fold.state().is_interrupted() {
                    return;
                }
            }
        });
        Ok(futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        }))
    }
}

/// How often a wait looks whether a message no turn took was dropped.
const IDLE_CHECK: Duration = Duration::from_millis(250);

fn to_value(v: &impl serde::Serialize) -> A2aResult<Value> {
    serde_json::to_value(v)
        .map_err(|e| A2aError::internal(format!("cannot encode the answer: {e}")))
}

/// Reads a request's params (a JSON object; `null` or absent reads as
/// `{}`).
pub(crate) fn params<T: for<'de> serde::Deserialize<'de> + Default>(
    params: Option<Value>,
) -> A2aResult<T> {
    match params {
        None | Some(Value::Null) => Ok(T::default()),
        Some(v @ Value::Object(_)) => serde_json::from_value(v)
            .map_err(|e| A2aError::invalid_params(format!("invalid params: {e}"))),
        Some(_) => Err(A2aError::invalid_params("`params` must be an object")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;
    use crate::serve::turn_task::wire::Part;

    fn message(parts: Vec<Part>) -> Message {
        Message {
            parts,
            ..Message::default()
        }
    }

    #[test]
    fn answers_are_read_from_text_or_data() {
        let yes = Answer {
            approved: true,
            reason: None,
            call_id: None,
        };
        assert_eq!(answer(&message(vec![Part::text(" Approve ")])), Some(yes));
        assert_eq!(
            answer(&message(vec![Part::text("deny: not today")])),
            Some(Answer {
                approved: false,
                reason: Some("not today".into()),
                call_id: None
            })
        );
        assert_eq!(
            answer(&message(vec![Part::data(
                json!({"decision": "deny", "callId": "c1"})
            )])),
            Some(Answer {
                approved: false,
                reason: None,
                call_id: Some("c1".into())
            })
        );
        assert_eq!(answer(&message(vec![Part::text("what is this?")])), None);
    }

    #[test]
    fn message_text_joins_parts_and_refuses_raw_bytes() {
        let m = message(vec![Part::text("a"), Part::data(json!({"k": 1}))]);
        assert_eq!(message_text(&m).unwrap(), "a\n\n{\"k\":1}");
        let raw = message(vec![Part {
            raw: Some("AAAA".into()),
            ..Part::default()
        }]);
        assert!(matches!(
            message_text(&raw),
            Err(A2aError::Protocol { code: -32005, .. })
        ));
        assert!(message_text(&message(vec![])).is_err());
    }
}
