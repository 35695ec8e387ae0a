//! The MCP endpoint of each agent (`/<slug>/v1/mcp`, or `/v1/mcp` in single
//! mode): `agentkit-mcp`'s server over this agent's runtime, behind the
//! same auth chain as the other routes.
//!
//! `ask` runs a turn in a session on the `mcp` channel owned by the calling
//! principal and waits (bounded) for it by following the session's event
//! stream; `check` does the waiting alone; `call_tool` is the deterministic
//! call of `POST /v1/tools/:name`.

use std::time::Duration;

use agentkit_manifest::Admission;
use agentkit_mcp::{
    AgentBackend, ApprovalAnswer, AskRequest, BackendError, PendingCall, ProgressSink, Reply,
    ReplyStatus, ServerToolInfo, TaskReport, ToolCallRequest,
};
use agentkit_protocol::{ErrorCode, Event, EventData, EventType};
use agentkit_runtime::{AgentRuntime, FollowUp, Owner, SendRequest, SessionMode};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::depths::{Depths, at_depth};
use super::http::{ApiError, tool_called};
use super::turn_task::task::{Change, TaskFold, TaskId};
use super::turn_task::wire::TaskState;

/// The channel MCP sessions live on.
pub(crate) const MCP_CHANNEL: &str = "mcp";

/// One agent's MCP endpoint.
pub(crate) type Endpoint = agentkit_mcp::McpHttp<RuntimeBackend>;

/// Builds the endpoint of one agent.
pub(crate) fn endpoint(
    runtime: AgentRuntime,
    slug: &str,
    depths: Depths,
    options: agentkit_mcp::McpServerOptions,
) -> Endpoint {
    let shutdown = options.shutdown.clone();
    let backend = RuntimeBackend {
        runtime,
        shutdown,
        depths,
    };
    agentkit_mcp::McpHttp::new(
        std::sync::Arc::new(backend),
        agentkit_mcp::McpServerOptions {
            name: slug.to_owned(),
            ..options
        },
    )
}

/// The MCP server's view of one agent's runtime.
#[derive(Debug, Clone)]
pub(crate) struct RuntimeBackend {
    runtime: AgentRuntime,
    shutdown: CancellationToken,
    depths: Depths,
}

fn refused(e: agentkit_runtime::Error) -> BackendError {
    let api = ApiError::from(e);
    let mut err = BackendError::new(api.code, api.message);
    if let Some(details) = api.details {
        err.details = details;
    }
    err
}

/// The last turn's outcome among `events`: its status and reply.
#[derive(Debug, Default)]
struct Outcome(Option<(ReplyStatus, Option<String>)>);

impl Outcome {
    fn see(&mut self, e: &Event) {
        if let Some(end) = agentkit_protocol::TurnEnd::of(e) {
            let status = if end.ok {
                ReplyStatus::Completed
            } else {
                ReplyStatus::Failed
            };
            self.0 = Some((status, Some(end.text)));
        }
    }

    fn reply(self, session_id: &str) -> Reply {
        let (status, reply) = self.0.unwrap_or((
            ReplyStatus::Failed,
            Some("the session settled without running a turn (stopped)".to_owned()),
        ));
        Reply {
            status,
            session_id: session_id.to_owned(),
            reply,
        }
    }
}

fn running(session_id: &str) -> Reply {
    Reply {
        status: ReplyStatus::Running,
        session_id: session_id.to_owned(),
        reply: None,
    }
}

impl RuntimeBackend {
    /// Follows the session from `start` until `done` says it settled, or
    /// the deadline passes (`running`).
    async fn follow(
        &self,
        owner: &Owner,
        session_id: &str,
        start: u64,
        wait: Duration,
        mut step: impl FnMut(&Event) -> Option<Reply> + Send,
    ) -> Result<Reply, BackendError> {
        let mut sub = self
            .runtime
            .subscribe(session_id, owner, start)
            .await
            .map_err(refused)?;
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let next = tokio::select! {
                e = tokio::time::timeout_at(deadline, sub.next()) => e,
                () = self.shutdown.cancelled() => return Ok(running(session_id)),
            };
            match next {
                Err(_) => return Ok(running(session_id)),
                Ok(Err(e)) => {
                    tracing::warn!(session = session_id, error = %e, "cannot follow a session for MCP");
                    return Err(BackendError::new(
                        ErrorCode::Internal,
                        "cannot read the session's events; see the server log",
                    ));
                }
                Ok(Ok(event)) => {
                    if let Some(reply) = step(&event) {
                        return Ok(reply);
                    }
                    if let Some(reply) = self.parked(owner, session_id, &event).await {
                        return Ok(reply);
                    }
                }
            }
        }
    }
}

impl RuntimeBackend {
    /// `waiting_approval` when `event` parked a call that still waits: a
    /// human has to decide before the turn can go on, so waiting longer
    /// would only run into the deadline.
    async fn parked(&self, owner: &Owner, session_id: &str, event: &Event) -> Option<Reply> {
        if event.event_type != EventType::ActionApprovalRequested {
            return None;
        }
        let EventData::ApprovalRequested(requested) = event.payload() else {
            return None;
        };
        let (call, tool) = (requested.call_id.as_str(), requested.tool_name.as_str());
        let pending = self
            .runtime
            .approvals()
            .pending(session_id, owner)
            .await
            .ok()?;
        pending.iter().any(|p| p.call_id == call).then(|| Reply {
            status: ReplyStatus::WaitingApproval,
            session_id: session_id.to_owned(),
            reply: Some(format!(
                "tool `{tool}` waits for a human's approval (call `{call}`): decide with POST /v1/session/{session_id}/approvals/{call}, then call `check`"
            )),
        })
    }
}

impl RuntimeBackend {
    /// Sends `ask`'s message: a fresh session on the `mcp` channel, or a
    /// follow-up of one `ask` started.
    async fn send(&self, owner: &Owner, req: &AskRequest) -> Result<Sent, BackendError> {
        let (session_id, message_index, follow_from) = match &req.session_id {
            None => {
                let accepted = self
                    .runtime
                    .send(SendRequest {
                        client_tools: Vec::new(),
                        channel: MCP_CHANNEL.to_owned(),
                        mode: SessionMode::Chat,
                        owner: owner.clone(),
                        message: req.message.clone(),
                        continuation: None,
                        title: None,
                        purpose: None,
                        admission: Admission::default(),
                        workspace_files: Vec::new(),
                        dry_run: false,
                        as_of: None,
                        output_schema: req.output_schema.clone(),
                    })
                    .await
                    .map_err(refused)?;
                self.depths.set(&accepted.session_id, req.hops);
                (accepted.session_id, accepted.start_index, 0)
            }
            Some(id) => {
                let meta = self.runtime.session(id, owner).await.map_err(refused)?;
                if meta.channel != MCP_CHANNEL {
                    return Err(BackendError::new(
                        ErrorCode::BadRequest,
                        format!(
                            "session `{id}` is on the `{}` channel; `ask` follows up only sessions it started",
                            meta.channel
                        ),
                    ));
                }
                let accepted = self
                    .runtime
                    .follow_up(
                        id,
                        FollowUp {
                            client_tools: Vec::new(),
                            owner: owner.clone(),
                            message: req.message.clone(),
                            continuation_token: None,
                            admission: Admission::default(),
                            workspace_files: Vec::new(),
                        },
                    )
                    .await
                    .map_err(refused)?;
                let start = accepted.start_index;
                self.depths.set(id, req.hops);
                (id.clone(), start, start)
            }
        };
        Ok(Sent {
            session_id,
            message_index,
            follow_from,
        })
    }
}

/// How long deciding or cancelling waits for the log to show it.
const RECORD_WAIT: Duration = Duration::from_secs(10);

/// How often a wait looks whether a message no turn took was dropped.
const IDLE_CHECK: Duration = Duration::from_millis(250);

/// A message `ask` sent.
struct Sent {
    session_id: String,
    /// The index of its `message.received` (the task's id).
    message_index: u64,
    /// Where `ask` follows the session from.
    follow_from: u64,
}

fn task_not_found(id: &str) -> BackendError {
    BackendError::new(
        ErrorCode::NotFound,
        format!("no task `{id}` that you may see"),
    )
}

impl RuntimeBackend {
    /// The task `id` as its session's log holds it now (from its own
    /// message on), when it was created, and the index after the last
    /// event read.
    async fn snapshot(
        &self,
        owner: &Owner,
        text: &str,
    ) -> Result<(TaskFold, String, u64), BackendError> {
        let id = TaskId::parse(text).ok_or_else(|| task_not_found(text))?;
        let events = self
            .runtime
            .events_stored(&id.session, owner, id.start)
            .await
            .map_err(|e| match refused(e) {
                e if matches!(
                    e.code,
                    ErrorCode::NotFound | ErrorCode::SessionNotFound | ErrorCode::InvalidSessionId
                ) =>
                {
                    task_not_found(text)
                }
                e => e,
            })?;
        let Some(first) = events
            .first()
            .filter(|e| e.index == id.start && e.event_type == EventType::MessageReceived)
        else {
            return Err(task_not_found(text));
        };
        // Only tasks `ask` started: a session on another channel is none.
        let meta = self
            .runtime
            .session(&id.session, owner)
            .await
            .map_err(refused)?;
        if meta.channel != MCP_CHANNEL {
            return Err(task_not_found(text));
        }
        let created = first.at.clone();
        let mut fold = TaskFold::new(id.clone());
        let mut next = id.start;
        for e in &events {
            fold.observe(e);
            next = e.index + 1;
        }
        if self.dropped(&fold) {
            fold.dropped();
        }
        Ok((fold, created, next))
    }

    /// A stop dropped the task's message before a turn took it: the log
    /// records no such drop, but the session is idle with the message
    /// unanswered. Only this host's log says so (on a shared store another
    /// host may be about to start the turn).
    fn dropped(&self, fold: &TaskFold) -> bool {
        fold.state() == TaskState::Submitted
            && matches!(self.runtime.store(), agentkit_runtime::EventLog::File(_))
            && !self.runtime.is_active(&fold.id.session)
    }

    /// Follows the task's session from `next` until `done` says so, or
    /// `wait` passes; the progress of the turn's calls goes to
    /// `progress`.
    async fn wait(
        &self,
        owner: &Owner,
        fold: &mut TaskFold,
        next: u64,
        wait: Duration,
        progress: Option<&ProgressSink>,
        done: impl Fn(&TaskFold) -> bool + Send,
    ) -> Result<(), BackendError> {
        if done(fold) || wait.is_zero() {
            return Ok(());
        }
        let mut sub = self
            .runtime
            .subscribe(&fold.id.session, owner, next)
            .await
            .map_err(refused)?;
        let deadline = tokio::time::Instant::now() + wait;
        while !done(fold) {
            let tick = deadline
                .saturating_duration_since(tokio::time::Instant::now())
                .min(IDLE_CHECK);
            let event = tokio::select! {
                e = tokio::time::timeout(tick, sub.next()) => e,
                () = self.shutdown.cancelled() => return Ok(()),
            };
            match event {
                Err(_) if tokio::time::Instant::now() >= deadline => return Ok(()),
                Err(_) => {
                    if self.dropped(fold) {
                        fold.dropped();
                    }
                }
                Ok(Err(e)) => {
                    tracing::warn!(task = %fold.id, error = %e, "cannot follow a session for an MCP task");
                    return Err(BackendError::new(
                        ErrorCode::Internal,
                        "cannot read the session's events; see the server log",
                    ));
                }
                Ok(Ok(event)) => {
                    if fold.observe(&event) == Some(Change::Progress)
                        && let (Some(sink), Some(p)) = (progress, fold.progress())
                    {
                        sink.report(p.text());
                    }
                }
            }
        }
        Ok(())
    }
}

/// The task as the MCP server reports it.
fn report(fold: &TaskFold, created_at: String) -> TaskReport {
    let state = match fold.state() {
        TaskState::InputRequired => agentkit_mcp::TaskState::InputRequired,
        TaskState::Completed => agentkit_mcp::TaskState::Completed,
        TaskState::Failed | TaskState::Rejected => agentkit_mcp::TaskState::Failed,
        TaskState::Canceled => agentkit_mcp::TaskState::Cancelled,
        _ => agentkit_mcp::TaskState::Working,
    };
    TaskReport {
        task_id: fold.id.to_string(),
        session_id: fold.id.session.clone(),
        state,
        text: fold.outcome().map(str::to_owned),
        pending: fold
            .parked
            .iter()
            .map(|p| PendingCall {
                call_id: p.call_id.clone(),
                tool_name: p.tool_name.clone(),
                input: p.input.clone(),
            })
            .collect(),
        message: fold.user_text().map(str::to_owned),
        progress: fold.progress().map(|p| p.text().to_owned()),
        updated_at: fold
            .updated_at()
            .map_or_else(|| created_at.clone(), str::to_owned),
        created_at,
    }
}

impl AgentBackend for RuntimeBackend {
    type Caller = Owner;

    fn server_tools(&self) -> Vec<ServerToolInfo> {
        self.runtime
            .agent()
            .tools
            .iter()
            // MCP clients are often models: host-only tools are not listed.
            .filter(|t| t.offered_to_model())
            .map(|t| ServerToolInfo {
                name: t.name.clone(),
                description: t.description.clone(),
            })
            .collect()
    }

    async fn ask(&self, owner: &Owner, req: AskRequest) -> Result<Reply, BackendError> {
        let sent = self.send(owner, &req).await?;
        let (session_id, start) = (sent.session_id, sent.follow_from);
        // Our turn is the first after our message (the protocol's fold);
        // the session settling after it, or after our message was
        // dropped unanswered, ends the wait.
        let mut fold = agentkit_protocol::TurnFold::answering(&req.message);
        let mut outcome = Outcome::default();
        let sid = session_id.clone();
        let progress = req.progress.clone();
        self.follow(owner, &session_id, start, req.wait, move |e| {
            if fold.is_ours(e) {
                outcome.see(e);
                // A call's progress (a remote A2A agent's state, a piece
                // of its reply), to a caller that sent a progress token.
                if let Some(sink) = &progress
                    && e.event_type == EventType::ActionProgress
                    && let EventData::ActionProgress(p) = e.payload()
                    && let Some(text) = p.delta.or(p.status).filter(|t| !t.is_empty())
                {
                    sink.report(&text);
                }
            }
            (fold.observe(e) == agentkit_protocol::Seen::Settled)
                .then(|| std::mem::take(&mut outcome).reply(&sid))
        })
        .await
    }

    async fn check(
        &self,
        owner: &Owner,
        session_id: &str,
        wait: Duration,
    ) -> Result<Reply, BackendError> {
        let events = self
            .runtime
            .events_stored(session_id, owner, 0)
            .await
            .map_err(refused)?;
        let mut outcome = Outcome::default();
        let mut settled = false;
        for e in &events {
            outcome.see(e);
            match e.event_type {
                _ if e.is_settle() => settled = true,
                EventType::MessageReceived | EventType::TurnStarted => settled = false,
                _ => {}
            }
        }
        if settled {
            return Ok(outcome.reply(session_id));
        }
        if wait.is_zero() {
            return Ok(running(session_id));
        }
        let sid = session_id.to_owned();
        self.follow(owner, session_id, events.len() as u64, wait, move |e| {
            outcome.see(e);
            e.is_settle()
                .then(|| std::mem::take(&mut outcome).reply(&sid))
        })
        .await
    }

    async fn call_tool(&self, owner: &Owner, req: ToolCallRequest) -> Result<Value, BackendError> {
        if let Some(tool) = self.runtime.agent().tool(&req.name)
            && tool.expose == agentkit_manifest::Expose::Host
        {
            // A model on the other end must not reach what it is never
            // offered; host code calls `POST /v1/tools/:name` instead.
            return Err(refused(agentkit_runtime::Error::BadRequest {
                message: format!(
                    "tool `{}` is host-only (`expose = \"host\"`): call it through `POST /v1/tools/{}`, a route or a schedule",
                    req.name, req.name
                ),
            }));
        }
        let session = req.session_id.as_deref().map(|id| (id, owner));
        // The tool's own MCP calls through the bridge go on from the
        // depth this request arrived at.
        let outcome = at_depth(
            req.hops,
            self.runtime
                .tool_calls()
                .call(&req.name, req.input, session),
        )
        .await
        .map_err(refused)?;
        Ok(serde_json::to_value(tool_called(outcome)).unwrap_or(Value::Null))
    }

    async fn start_task(&self, owner: &Owner, req: AskRequest) -> Result<TaskReport, BackendError> {
        let sent = self.send(owner, &req).await?;
        let id = TaskId {
            session: sent.session_id,
            start: sent.message_index,
        };
        let (fold, created, _) = self.snapshot(owner, &id.to_string()).await?;
        Ok(report(&fold, created))
    }

    async fn task(
        &self,
        owner: &Owner,
        task_id: &str,
        wait: Duration,
        progress: Option<&ProgressSink>,
    ) -> Result<TaskReport, BackendError> {
        let (mut fold, created, next) = self.snapshot(owner, task_id).await?;
        self.wait(owner, &mut fold, next, wait, progress, |f| {
            f.state().is_interrupted()
        })
        .await?;
        Ok(report(&fold, created))
    }

    async fn decide(
        &self,
        owner: &Owner,
        task_id: &str,
        answers: Vec<ApprovalAnswer>,
    ) -> Result<TaskReport, BackendError> {
        let (fold, _, _) = self.snapshot(owner, task_id).await?;
        let mut decided = Vec::new();
        for answer in answers {
            if !fold.parked.iter().any(|p| p.call_id == answer.call_id) {
                continue;
            }
            let decision = agentkit_runtime::Decision {
                approved: answer.approved,
                reason: answer.reason,
                by: owner.principal_id.clone(),
            };
            self.runtime
                .approvals()
                .resolve(&fold.id.session, &answer.call_id, decision, owner)
                .await
                .map_err(refused)?;
            decided.push(answer.call_id);
        }
        // A live turn records the decision itself, a moment later: what
        // the caller reads next starts after it.
        let (mut after, created, next) = self.snapshot(owner, task_id).await?;
        self.wait(owner, &mut after, next, RECORD_WAIT, None, |f| {
            !f.parked.iter().any(|p| decided.contains(&p.call_id))
        })
        .await?;
        Ok(report(&after, created))
    }

    async fn cancel_task(&self, owner: &Owner, task_id: &str) -> Result<(), BackendError> {
        let (mut fold, _, next) = self.snapshot(owner, task_id).await?;
        if fold.state().is_terminal() {
            return Ok(());
        }
        self.runtime
            .stop(&fold.id.session, owner)
            .await
            .map_err(refused)?;
        self.wait(owner, &mut fold, next, RECORD_WAIT, None, |f| {
            f.state().is_terminal()
        })
        .await
    }
}
