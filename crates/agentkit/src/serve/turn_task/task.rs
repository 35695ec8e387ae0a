//! An A2A task is one turn of a session: the turn that answers the
//! message which created it. Its id is `<sessionId>.<index>`, the index of
//! that message's `message.received` in the session's log, so a task is
//! found again from the log alone (after a restart, on another host) and
//! nothing else is stored. [`TaskFold`] reads the session's events from
//! there into the task's state, its reply and what it waits for.
//!
//! ```text
//! message.received ─▶ SUBMITTED ─turn.started─▶ WORKING ─turn.completed─▶ COMPLETED
//!                        │                      │  ▲ │ └─turn.failed─▶ FAILED / CANCELED (stopped)
//!                        │       approval_requested│ └─approval_resolved
//!                        │                      ▼  │
//!                        │                INPUT_REQUIRED
//!                        └─ the session settles with no turn taking it ─▶ CANCELED
//! ```

use agentkit_protocol::{Event, EventData, EventType, SessionId};
use serde_json::{Value, json};

use super::wire::{
    Artifact, Message, Part, Role, StreamResponse, Task, TaskArtifactUpdateEvent, TaskState,
    TaskStatus, TaskStatusUpdateEvent,
};

/// Why a task that no turn took was canceled.
const DROPPED: &str = "the session was stopped before a turn answered";

/// The id of the reply's artifact in every task.
const REPLY_ARTIFACT: &str = "reply";

/// A task's address: its session and the index of the message that
/// started it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TaskId {
    pub(crate) session: String,
    pub(crate) start: u64,
}

impl TaskId {
    pub(crate) fn parse(id: &str) -> Option<TaskId> {
        let (session, start) = id.rsplit_once('.')?;
        SessionId::parse(session).ok()?;
        let start = start.parse().ok()?;
        Some(TaskId {
            session: session.to_owned(),
            start,
        })
    }
}

impl std::fmt::Display for TaskId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.session, self.start)
    }
}

/// A call the task's turn parked until someone decides.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Parked {
    pub(crate) call_id: String,
    pub(crate) tool_name: String,
    pub(crate) input: Value,
}

/// What one event changed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Change {
    /// The task's state (or, for input-required, what it waits for).
    Status,
    /// A piece of the reply.
    Delta(String),
    /// A running call of the working turn reported progress (a remote
    /// A2A agent's state or a piece of its reply): the task is still
    /// working, with this as its status message.
    Progress,
}

/// The latest progress of a call of the task's turn (`action.progress`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Progress {
    /// The event's index in the session's log.
    pub(crate) index: u64,
    pub(crate) call_id: String,
    pub(crate) tool_name: String,
    /// What the call is doing now, when that changed.
    pub(crate) status: Option<String>,
    /// Text the call wrote since its last progress.
    pub(crate) delta: Option<String>,
}

impl Progress {
    /// The progress as one line of text: the text written, else the
    /// status.
    pub(crate) fn text(&self) -> &str {
        self.delta
            .as_deref()
            .or(self.status.as_deref())
            .unwrap_or_default()
    }
}

/// A task's state folded from its session's events (from the task's own
/// message on).
#[derive(Debug, Clone)]
pub(crate) struct TaskFold {
    pub(crate) id: TaskId,
    state: TaskState,
    /// The turn that answers our message (a resumed turn replaces it).
    turn: Option<String>,
    /// A follow-up preempted our turn: a later turn that does not take
    /// our message ends the task as canceled.
    preempted: bool,
    user_text: Option<String>,
    /// The reply streamed so far in our turn.
    reply: String,
    /// How the turn ended: the reply, or why it failed.
    outcome: Option<String>,
    /// The reply validated against the agent's output schema.
    output: Option<Value>,
    pub(crate) parked: Vec<Parked>,
    /// The latest progress of a call, while the task works (cleared at
    /// every change of state).
    progress: Option<Progress>,
    /// When the state last changed.
    at: Option<String>,
}

impl TaskFold {
    pub(crate) fn new(id: TaskId) -> TaskFold {
        TaskFold {
            id,
            state: TaskState::Submitted,
            turn: None,
            preempted: false,
            user_text: None,
            reply: String::new(),
            outcome: None,
            output: None,
            parked: Vec::new(),
            progress: None,
            at: None,
        }
    }

    pub(crate) fn state(&self) -> TaskState {
        self.state
    }

    /// The reply once the turn completed, or why the task failed or was
    /// canceled.
    pub(crate) fn outcome(&self) -> Option<&str> {
        self.outcome.as_deref()
    }

    /// The task's address.
    pub(crate) fn id(&self) -> &TaskId {
        &self.id
    }

    /// The text of the message that started the task.
    pub(crate) fn user_text(&self) -> Option<&str> {
        self.user_text.as_deref()
    }

    /// The latest progress of a call of the working turn.
    pub(crate) fn progress(&self) -> Option<&Progress> {
        self.progress.as_ref()
    }

    /// When the state last changed (ISO 8601).
    pub(crate) fn updated_at(&self) -> Option<&str> {
        self.at.as_deref()
    }

    /// A stop dropped the task's message before a turn took it, and the
    /// log does not say so (written before `message.dropped` existed):
    /// the caller saw the session go idle.
    pub(crate) fn dropped(&mut self) {
        if self.state == TaskState::Submitted {
            self.state = TaskState::Canceled;
            self.outcome = Some(DROPPED.to_owned());
        }
    }

    fn set(&mut self, state: TaskState, e: &Event) -> Option<Change> {
        self.state = state;
        self.progress = None;
        self.at = Some(e.at.clone());
        Some(Change::Status)
    }

    /// Reads one event of the session (from the task's message on).
    pub(crate) fn observe(&mut self, e: &Event) -> Option<Change> {
        if e.index < self.id.start || self.state.is_terminal() {
            return None;
        }
        if e.index == self.id.start {
            if let EventData::MessageReceived(m) = e.payload() {
                self.user_text = Some(m.text);
                self.at = Some(e.at.clone());
            }
            return None;
        }
        if e.event_type == EventType::MessageDropped {
            if let EventData::MessageDropped(dropped) = e.payload()
                && dropped.received.contains(&self.id.start)
                && self.state == TaskState::Submitted
            {
                self.outcome = Some(DROPPED.to_owned());
                return self.set(TaskState::Canceled, e);
            }
            return None;
        }
        if e.event_type == EventType::TurnStarted {
            let EventData::TurnStarted(started) = e.payload() else {
                return None;
            };
            let takes_ours = started.received.contains(&self.id.start);
            let resumes_ours = self.turn.is_some() && started.resumes == self.turn;
            if takes_ours || resumes_ours {
                self.turn = e.turn_id.clone();
                self.preempted = false;
                self.reply.clear();
                let state = if self.parked.is_empty() {
                    TaskState::Working
                } else {
                    TaskState::InputRequired
                };
                return self.set(state, e);
            }
            if self.preempted {
                self.outcome = Some("a later message preempted this task's turn".to_owned());
                return self.set(TaskState::Canceled, e);
            }
            // A later message's turn started without ours: a stop dropped
            // ours before any turn took it.
            if self.state == TaskState::Submitted
                && started.received.iter().all(|&i| i > self.id.start)
                && !started.received.is_empty()
            {
                self.outcome = Some(DROPPED.to_owned());
                return self.set(TaskState::Canceled, e);
            }
            return None;
        }
        // A decision may be recorded outside the turn that parked the call
        // (after a restart, before the resumed turn starts).
        if e.event_type == EventType::ActionApprovalResolved {
            if let EventData::ApprovalResolved(resolved) = e.payload()
                && self.parked.iter().any(|p| p.call_id == resolved.call_id)
            {
                self.parked.retain(|p| p.call_id != resolved.call_id);
                if self.parked.is_empty() && self.state == TaskState::InputRequired {
                    return self.set(TaskState::Working, e);
                }
            }
            return None;
        }
        let ours = self.turn.is_some() && e.turn_id == self.turn;
        if !ours {
            if e.is_settle() && (self.state == TaskState::Submitted || self.preempted) {
                self.outcome = Some(DROPPED.to_owned());
                return self.set(TaskState::Canceled, e);
            }
            return None;
        }
        match e.payload() {
            EventData::MessageAppended(a) if a.parent_call_id.is_none() => {
                self.reply.push_str(&a.delta);
                Some(Change::Delta(a.delta))
            }
            // Progress shows while the task works (a call parked beside
            // the reporting one keeps the task asking for input).
            EventData::ActionProgress(p) if self.state == TaskState::Working => {
                self.progress = Some(Progress {
                    index: e.index,
                    call_id: p.call_id,
                    tool_name: p.tool_name,
                    status: p.status,
                    delta: p.delta,
                });
                Some(Change::Progress)
            }
            EventData::ApprovalRequested(r) => {
                self.parked.push(Parked {
                    call_id: r.call_id,
                    tool_name: r.tool_name,
                    input: r.input,
                });
                self.set(TaskState::InputRequired, e)
            }
            EventData::TurnCompleted(done) => {
                self.parked.clear();
                self.outcome = Some(done.result);
                self.output = done.output;
                self.set(TaskState::Completed, e)
            }
            EventData::TurnFailed(failed) => match failed.reason.as_deref() {
                Some("preempted") => {
                    self.parked.clear();
                    self.preempted = true;
                    None
                }
                // A parked call outlives a restart: deciding it resumes
                // the conversation in a new turn.
                Some("restart" | "shutdown") if !self.parked.is_empty() => None,
                Some("stopped") => {
                    self.parked.clear();
                    self.outcome = Some(failed.message);
                    self.set(TaskState::Canceled, e)
                }
                _ => {
                    self.parked.clear();
                    self.outcome = Some(if failed.message.trim().is_empty() {
                        "the turn failed".to_owned()
                    } else {
                        failed.message
                    });
                    self.set(TaskState::Failed, e)
                }
            },
            _ => None,
        }
    }

    fn agent_message(&self, suffix: &str, parts: Vec<Part>) -> Message {
        Message {
            message_id: format!("{}-{suffix}", self.id),
            context_id: Some(self.id.session.clone()),
            task_id: Some(self.id.to_string()),
            role: Role::Agent,
            parts,
            ..Message::default()
        }
    }

    /// The status message: the reply, why it failed, what the task waits
    /// for, or the latest progress of a call while it works.
    fn status_message(&self) -> Option<Message> {
        match self.state {
            TaskState::Working => self.progress.as_ref().map(|p| {
                let mut message = self
                    .agent_message(&format!("progress-{}", p.index), vec![Part::text(p.text())]);
                let mut about = serde_json::Map::new();
                about.insert("callId".to_owned(), json!(p.call_id));
                about.insert("toolName".to_owned(), json!(p.tool_name));
                if let Some(status) = &p.status {
                    about.insert("status".to_owned(), json!(status));
                }
                if let Some(delta) = &p.delta {
                    about.insert("delta".to_owned(), json!(delta));
                }
                let mut metadata = serde_json::Map::new();
                metadata.insert("progress".to_owned(), Value::Object(about));
                message.metadata = Some(metadata);
                message
            }),
            TaskState::Completed => {
                let mut parts = vec![Part::text(self.outcome.clone().unwrap_or_default())];
                if let Some(output) = &self.output {
                    parts.push(Part::data(output.clone()));
                }
                Some(self.agent_message("reply", parts))
            }
            TaskState::Failed | TaskState::Canceled => Some(self.agent_message(
                "status",
                vec![Part::text(self.outcome.clone().unwrap_or_default())],
            )),
            TaskState::InputRequired => {
                let names: Vec<String> = self
                    .parked
                    .iter()
                    .map(|p| format!("`{}` (call `{}`)", p.tool_name, p.call_id))
                    .collect();
                let calls: Vec<Value> = self
                    .parked
                    .iter()
                    .map(
                        |p| json!({"callId": p.call_id, "toolName": p.tool_name, "input": p.input}),
                    )
                    .collect();
                let text = format!(
                    "approval required for {}: answer with a message carrying this taskId whose text is `approve` or `deny` (or a data part {{\"decision\": \"approve\"|\"deny\", \"reason\"?, \"callId\"?}})",
                    names.join(", ")
                );
                Some(self.agent_message(
                    "input",
                    vec![Part::text(text), Part::data(json!({"approvals": calls}))],
                ))
            }
            _ => None,
        }
    }

    fn status(&self) -> TaskStatus {
        TaskStatus {
            state: self.state,
            message: self.status_message(),
            timestamp: self.at.clone(),
        }
    }

    /// The reply as an artifact: the turn's result once it completed,
    /// what streamed so far before.
    fn reply_artifact(&self) -> Option<Artifact> {
        let text = match (self.state, &self.outcome) {
            (TaskState::Completed, Some(result)) => result.as_str(),
            _ => self.reply.as_str(),
        };
        if text.is_empty() && self.output.is_none() {
            return None;
        }
        let mut parts = vec![Part::text(text)];
        if let Some(output) = &self.output {
            parts.push(Part::data(output.clone()));
        }
        Some(Artifact {
            artifact_id: REPLY_ARTIFACT.to_owned(),
            name: Some(REPLY_ARTIFACT.to_owned()),
            parts,
            ..Artifact::default()
        })
    }

    /// The task as `GetTask` answers it, with at most `history` messages
    /// of history (all when `None`).
    pub(crate) fn task(&self, history: Option<u32>) -> Task {
        let mut messages = Vec::new();
        if let Some(text) = &self.user_text {
            messages.push(Message {
                message_id: format!("{}-user", self.id),
                context_id: Some(self.id.session.clone()),
                task_id: Some(self.id.to_string()),
                role: Role::User,
                parts: vec![Part::text(text.clone())],
                ..Message::default()
            });
        }
        if let Some(status) = self.status_message() {
            messages.push(status);
        }
        if let Some(n) = history {
            let skip = messages.len().saturating_sub(n as usize);
            messages.drain(..skip);
        }
        Task {
            id: self.id.to_string(),
            context_id: self.id.session.clone(),
            status: self.status(),
            artifacts: self.reply_artifact().into_iter().collect(),
            history: messages,
            metadata: None,
        }
    }

    /// The stream events a change makes: a status update (a `working`
    /// one carrying a call's progress as its message), or a piece of the
    /// reply artifact (the whole reply, replacing the pieces, when the
    /// turn completes).
    pub(crate) fn stream_events(&self, change: &Change) -> Vec<StreamResponse> {
        let (task_id, context_id) = (self.id.to_string(), self.id.session.clone());
        match change {
            Change::Delta(delta) => vec![StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                task_id,
                context_id,
                artifact: Artifact {
                    artifact_id: REPLY_ARTIFACT.to_owned(),
                    name: Some(REPLY_ARTIFACT.to_owned()),
                    parts: vec![Part::text(delta.clone())],
                    ..Artifact::default()
                },
                append: self.reply.len() > delta.len(),
                last_chunk: false,
            })],
            Change::Progress => vec![StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                task_id,
                context_id,
                status: self.status(),
            })],
            Change::Status => {
                let mut out = Vec::new();
                if self.state == TaskState::Completed
                    && let Some(artifact) = self.reply_artifact()
                {
                    out.push(StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                        task_id: task_id.clone(),
                        context_id: context_id.clone(),
                        artifact,
                        append: false,
                        last_chunk: true,
                    }));
                }
                out.push(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                    task_id,
                    context_id,
                    status: self.status(),
                }));
                out
            }
        }
    }
}

/// A stop dropped the task's message before a turn took it: the log
/// records no such drop, but the session is idle with the message
/// unanswered. Only this host's log says so (on a shared store another
/// host may be about to start the turn).
pub(crate) fn dropped(runtime: &agentkit_runtime::AgentRuntime, fold: &TaskFold) -> bool {
    fold.state() == TaskState::Submitted
        && matches!(runtime.store(), agentkit_runtime::EventLog::File(_))
        && !runtime.is_active(&fold.id.session)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn ev(index: u64, kind: EventType, turn: Option<&str>, data: Value) -> Event {
        Event {
            event_type: kind,
            index,
            session_id: SessionId::parse("ses_1").unwrap(),
            turn_id: turn.map(str::to_owned),
            at: format!("2026-01-01T00:00:0{index}Z"),
            data,
        }
    }

    /// The states a fold goes through over `events`, one per change.
    fn states(events: &[Event]) -> Vec<TaskState> {
        let mut fold = TaskFold::new(TaskId::parse("ses_1.1").unwrap());
        let mut out = Vec::new();
        for e in events {
            if fold.observe(e) == Some(Change::Status) {
                out.push(fold.state());
            }
        }
        out
    }

    #[test]
    fn ids_round_trip_and_refuse_what_is_no_task() {
        let id = TaskId::parse("ses_ab-1.42").unwrap();
        assert_eq!((id.session.as_str(), id.start), ("ses_ab-1", 42));
        assert_eq!(id.to_string(), "ses_ab-1.42");
        for bad in ["", "ses_1", "ses_1.x", "a/b.1", ".1"] {
            assert!(TaskId::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn a_turn_that_parks_a_call_asks_for_input_then_completes() {
        let events = [
            ev(
                0,
                EventType::MessageReceived,
                None,
                json!({"text": "earlier"}),
            ),
            ev(1, EventType::MessageReceived, None, json!({"text": "go"})),
            ev(
                2,
                EventType::TurnStarted,
                Some("t1"),
                json!({"received": [1]}),
            ),
            ev(
                3,
                EventType::ActionApprovalRequested,
                Some("t1"),
                json!({"callId": "c1", "toolName": "echo", "input": {}}),
            ),
            ev(
                4,
                EventType::ActionApprovalResolved,
                Some("t1"),
                json!({"callId": "c1", "toolName": "echo", "decision": "approve", "by": "x"}),
            ),
            ev(
                5,
                EventType::MessageAppended,
                Some("t1"),
                json!({"delta": "do"}),
            ),
            ev(
                6,
                EventType::TurnCompleted,
                Some("t1"),
                json!({"result": "done"}),
            ),
        ];
        assert_eq!(
            states(&events),
            [
                TaskState::Working,
                TaskState::InputRequired,
                TaskState::Working,
                TaskState::Completed
            ]
        );
    }

    #[test]
    fn a_calls_progress_is_a_working_status_update_until_the_state_changes() {
        let mut fold = TaskFold::new(TaskId::parse("ses_1.1").unwrap());
        let events = [
            ev(1, EventType::MessageReceived, None, json!({"text": "go"})),
            ev(
                2,
                EventType::TurnStarted,
                Some("t1"),
                json!({"received": [1]}),
            ),
            ev(
                3,
                EventType::ActionProgress,
                Some("t1"),
                json!({"callId": "c1", "toolName": "remote__a2a", "delta": "hello"}),
            ),
            // Another turn's progress is not ours.
            ev(
                4,
                EventType::ActionProgress,
                Some("t0"),
                json!({"callId": "c0", "toolName": "remote__a2a", "status": "working"}),
            ),
        ];
        let changes: Vec<Option<Change>> = events.iter().map(|e| fold.observe(e)).collect();
        assert_eq!(
            changes,
            [None, Some(Change::Status), Some(Change::Progress), None]
        );
        assert_eq!(fold.progress().map(Progress::text), Some("hello"));
        let out = serde_json::to_value(fold.stream_events(&Change::Progress)).unwrap();
        let status = &out[0]["statusUpdate"]["status"];
        assert_eq!(status["state"], "TASK_STATE_WORKING");
        assert_eq!(status["message"]["parts"][0]["text"], "hello");
        assert_eq!(status["message"]["messageId"], "ses_1.1-progress-3");
        assert_eq!(
            status["message"]["metadata"]["progress"],
            json!({"callId": "c1", "toolName": "remote__a2a", "delta": "hello"})
        );
        // `GetTask` shows it while the task works; the completion clears it.
        assert_eq!(
            fold.task(None).status.message.unwrap().parts[0]
                .text
                .as_deref(),
            Some("hello")
        );
        fold.observe(&ev(
            5,
            EventType::TurnCompleted,
            Some("t1"),
            json!({"result": "done"}),
        ));
        assert!(fold.progress().is_none());
    }

    #[test]
    fn another_turn_is_not_ours_and_a_dropped_message_is_canceled() {
        let events = [
            ev(1, EventType::MessageReceived, None, json!({"text": "go"})),
            ev(
                2,
                EventType::TurnCompleted,
                Some("t0"),
                json!({"result": "old"}),
            ),
            ev(3, EventType::SessionWaiting, None, json!({})),
        ];
        assert_eq!(states(&events), [TaskState::Canceled]);
        let stopped = [
            ev(1, EventType::MessageReceived, None, json!({"text": "go"})),
            ev(
                2,
                EventType::TurnStarted,
                Some("t1"),
                json!({"received": [1]}),
            ),
            ev(
                3,
                EventType::TurnFailed,
                Some("t1"),
                json!({"message": "stopped", "reason": "stopped"}),
            ),
        ];
        assert_eq!(states(&stopped), [TaskState::Working, TaskState::Canceled]);
        // A stop dropped ours; the next message's turn shows it.
        let dropped = [
            ev(1, EventType::MessageReceived, None, json!({"text": "go"})),
            ev(2, EventType::MessageReceived, None, json!({"text": "next"})),
            ev(
                3,
                EventType::TurnStarted,
                Some("t2"),
                json!({"received": [2]}),
            ),
        ];
        assert_eq!(states(&dropped), [TaskState::Canceled]);
    }
}
