//! The typed payload of each event type: what `data` holds, as Rust types.
//!
//! The envelope keeps `data` as JSON (it is the wire and the disk), and a
//! reader asks [`Event::payload`] for the typed view instead of reading
//! keys by string. Parsing is lenient the way readers have always been:
//! missing optional fields take their defaults, unknown fields are
//! ignored, and a payload that does not fit its type (or a type this
//! version does not know) is [`EventData::Unknown`], never an error, so a
//! log written by a newer version still reads.
//!
//! Writers build the same types: a new event is an [`EventData`] value,
//! serialised by [`EventData::to_value`] (the event store calls it), so
//! what is written is what readers read. Optional fields a writer leaves
//! out are left out of the JSON too.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::trace::TurnTrace;
use crate::{Event, EventType, ToolCall, Usage};

/// `session.started`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionStarted {
    pub channel: String,
    pub mode: String,
    pub principal_id: String,
    pub title: Option<String>,
    pub purpose: Option<String>,
    pub as_of: Option<String>,
}

/// `ab.assigned`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AbAssigned {
    pub experiment: String,
    /// `None` (`null` on the wire): left out by the experiment's traffic
    /// share.
    pub variant: Option<String>,
}

/// `session.forked`: the events before it are a copy of session
/// `from_session_id`'s events `0..at_index`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionForked {
    pub from_session_id: String,
    pub at_index: u64,
}

/// `session.failed`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionFailed {
    pub message: Option<String>,
}

/// `message.received`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MessageReceived {
    pub text: String,
    /// Images attached to the message (uploaded files that are images),
    /// the bytes in the workspace.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<crate::ImageRef>,
    /// Who sent it when that is not the session's owner: an operator, as
    /// `operator:<principalId>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// The W3C `traceparent` of the request that brought the message
    /// (kept only while tracing is on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// Tools the client declared for the turn that answers this message
    /// (an AG-UI front-end's tools): offered to the model beside the
    /// agent's own, run by the client.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub client_tools: Vec<ClientTool>,
}

/// A tool a client declares for one turn: the model may call it, the
/// client runs it and sends the result back
/// (`actions.client_requested`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default)]
pub struct ClientTool {
    pub name: String,
    pub description: String,
    /// A JSON Schema object for the call's arguments.
    pub parameters: Value,
}

/// `actions.client_requested`: calls of client tools, waiting for the
/// client's results (each becomes an `action.result`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClientActionsRequested {
    pub calls: Vec<ToolCall>,
}

/// `turn.started`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TurnStarted {
    /// How many queued messages the turn answers.
    pub messages: u64,
    /// The turn this one resumes (a parked call was decided after its
    /// turn ended): that turn's steps count as completed context.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumes: Option<String>,
    /// `emitted` for assistant text a channel recorded without a model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The log indices of the `message.received` events the turn answers
    /// (what its user message was made of).
    pub received: Vec<u64>,
    /// The trace the turn belongs to (only while tracing is on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<TurnTrace>,
}

/// `turn.completed`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TurnCompleted {
    pub result: String,
    pub usage: Usage,
    /// `emitted` for assistant text a channel recorded without a model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The reply parsed and validated against the agent's `output_schema`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<serde_json::Value>,
    /// The turn's estimated and counted request sizes (for a model with a
    /// known window or under a token budget), which calibrate later
    /// estimates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sizing: Option<crate::Sizing>,
    /// What the turn cost in US dollars (its steps, compactions and
    /// subagents); `null` when a price is unknown, never 0 for unknown.
    pub cost_usd: Option<f64>,
}

/// `turn.failed`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TurnFailed {
    pub message: String,
    /// `preempted`, `stopped`, `shutdown` or `restart` for an interrupt;
    /// `budget` for a token budget the turn would have exceeded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The budget (`max_tokens_per_session`, `max_tokens_per_day`) of a
    /// `budget` failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
    /// Who stopped the turn (`reason: "stopped"`), when not its owner.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// What the turn used before it failed, when the server reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// What that usage cost in US dollars, when its price is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// The turn's trace, when recovery records the end of a turn a crash
    /// cut short (the reader may not have seen its `turn.started`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<TurnTrace>,
}

/// `step.started`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StepStarted {
    pub step: u32,
    /// Short digests of the request the step sent, part by part (call ids
    /// renumbered): what `agentkit replay` compares to tell that a
    /// changed project sends different requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<RequestDigest>,
}

/// The digests of a step's request (the first 8 bytes of a SHA-256, in
/// hex, of each part's JSON), and its model in the clear.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RequestDigest {
    /// `provider:id`.
    pub model: String,
    pub params: String,
    pub system: String,
    pub tools: String,
    pub messages: String,
}

/// `step.completed`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StepCompleted {
    pub step: u32,
    pub duration_ms: u64,
    /// The step's usage as the provider counted it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The harness's estimate of the request's input tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_input_tokens: Option<u64>,
    /// The step's model, `provider:id`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// What the step cost in US dollars, from `usage` (cache tokens
    /// included); `null` when the model's price is unknown.
    pub cost_usd: Option<f64>,
}

/// `context.compacted`: the first `messages` messages of the conversation
/// (as folded at this event) are replaced, in every later request, by one
/// user message carrying `summary`. The events they came from stay in the
/// log.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ContextCompacted {
    pub messages: usize,
    pub summary: String,
    /// The estimated input tokens of the request before and after.
    pub tokens_before: u64,
    pub tokens_after: u64,
    /// What the summarisation request used.
    pub usage: Usage,
    /// What it cost in US dollars, when the model's price is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

/// `message.dropped`: a stop dropped queued messages (by the indices of
/// their `message.received`) before any turn took them.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MessageDropped {
    pub received: Vec<u64>,
    /// The operator who stopped, when not the session's owner.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// `artifact.tagged`: an artifact was created, or updated (`updated`) as
/// the one of its `kind` and `key`, by the model's `tag_artifact` call
/// (`callId`) or by host code.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ArtifactTagged {
    pub artifact_id: String,
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    pub data: Value,
    /// True when an artifact of this kind and key existed and was replaced.
    #[serde(skip_serializing_if = "is_false")]
    pub updated: bool,
    /// The `tag_artifact` call that tagged it, when the model did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
}

/// `memory.remembered`: the model's `remember` call (`callId`) kept
/// memory `memoryId`; this event's index is the memory's `eventIndex`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MemoryRemembered {
    pub memory_id: String,
    /// `principal` or `agent`.
    pub scope: String,
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
}

/// `memory.forgotten`: the model's `forget` call (`callId`) deleted
/// memory `memoryId`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MemoryForgotten {
    pub memory_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
}

/// `reasoning.appended`, and `message.appended` (whose `text` is the
/// message so far, rebuilt by the store when read).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Appended {
    pub delta: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Set on a subagent's text: the `task` call it belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_call_id: Option<String>,
}

/// `reasoning.completed`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ReasoningCompleted {
    pub text: String,
}

/// `message.completed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MessageCompleted {
    pub text: String,
    /// `stop` (the turn is over) or `tool_call` (calls follow).
    pub finish_reason: String,
    /// Set on a subagent's message: the `task` call it belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_call_id: Option<String>,
}

impl Default for MessageCompleted {
    fn default() -> Self {
        MessageCompleted {
            text: String::new(),
            finish_reason: "stop".to_owned(),
            parent_call_id: None,
        }
    }
}

impl MessageCompleted {
    /// The step goes on with tool calls.
    pub fn is_tool_call(&self) -> bool {
        self.finish_reason == "tool_call"
    }

    /// A final reply refused by the turn's `output_schema` (the model was
    /// asked again): not part of the conversation later turns see.
    pub fn is_invalid_output(&self) -> bool {
        self.finish_reason == "invalid_output"
    }
}

/// `actions.requested`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ActionsRequested {
    pub calls: Vec<ToolCall>,
    /// A deterministic call (`POST /v1/tools/:name`), not a model's
    /// (left out when false).
    #[serde(skip_serializing_if = "is_false")]
    pub direct: bool,
}

/// `action.approval_requested`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ApprovalRequested {
    pub call_id: String,
    pub tool_name: String,
    pub input: Value,
}

/// `action.approval_resolved`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ApprovalResolved {
    pub call_id: String,
    pub tool_name: String,
    /// `approve` or `deny`.
    pub decision: String,
    pub by: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When the call was parked, and its turn's trace: set when the
    /// decision came after a restart (the reader may not have seen them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<TurnTrace>,
}

/// `action.result`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ActionResult {
    pub call_id: String,
    pub tool_name: String,
    pub output: Value,
    pub is_error: bool,
    pub duration_ms: u64,
}

/// `action.progress`: a running call's progress (a remote A2A agent's
/// status changes and the reply it streams). Between the call's
/// `actions.requested` and its `action.result`, which alone carries the
/// outcome.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ActionProgress {
    pub call_id: String,
    pub tool_name: String,
    /// What the call is doing now, when that changed (a remote agent's
    /// task state, and its status message).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Text the call wrote since its last progress (a piece of a remote
    /// agent's reply).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delta: Option<String>,
}

/// `subagent.called`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubagentCalled {
    pub call_id: String,
    pub subagent: String,
    pub prompt: String,
}

/// `subagent.completed`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubagentCompleted {
    pub call_id: String,
    pub subagent: String,
    pub is_error: bool,
    pub result: String,
    pub usage: Usage,
}

/// `subagent.step`: one model step of the subagent a `task` call runs
/// (its messages stay inside the subagent; this is what observability
/// needs of the step).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubagentStep {
    pub call_id: String,
    pub subagent: String,
    pub step: u32,
    /// `provider:id` of the subagent's model.
    pub provider: String,
    pub model: String,
    pub duration_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// `stop` or `tool_call`.
    pub finish_reason: String,
    /// What the step cost in US dollars, when the model's price is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

/// The payload of an event, by its type.
#[derive(Debug, Clone, PartialEq)]
pub enum EventData {
    SessionStarted(SessionStarted),
    AbAssigned(AbAssigned),
    SessionForked(SessionForked),
    SessionWaiting,
    SessionCompleted,
    SessionFailed(SessionFailed),
    AgentBound,
    MessageReceived(MessageReceived),
    MessageDropped(MessageDropped),
    TurnStarted(TurnStarted),
    TurnCompleted(TurnCompleted),
    TurnFailed(TurnFailed),
    StepStarted(StepStarted),
    StepCompleted(StepCompleted),
    ReasoningAppended(Appended),
    ReasoningCompleted(ReasoningCompleted),
    MessageAppended(Appended),
    MessageCompleted(MessageCompleted),
    ActionsRequested(ActionsRequested),
    ApprovalRequested(ApprovalRequested),
    ApprovalResolved(ApprovalResolved),
    ClientActionsRequested(ClientActionsRequested),
    ActionProgress(ActionProgress),
    ActionResult(ActionResult),
    SubagentCalled(SubagentCalled),
    SubagentCompleted(SubagentCompleted),
    SubagentStep(SubagentStep),
    ContextCompacted(ContextCompacted),
    ArtifactTagged(ArtifactTagged),
    MemoryRemembered(MemoryRemembered),
    MemoryForgotten(MemoryForgotten),
    /// A payload that does not fit its type, kept as it was.
    Unknown {
        event_type: EventType,
        data: Value,
    },
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl EventData {
    /// Reads `data` as the payload of an event of type `t`.
    pub fn parse(t: EventType, data: &Value) -> EventData {
        fn read<T: serde::de::DeserializeOwned>(
            t: EventType,
            data: &Value,
            wrap: fn(T) -> EventData,
        ) -> EventData {
            // `null` (an event recorded without data) reads as the defaults.
            let parsed = if data.is_null() {
                T::deserialize(Value::Object(Default::default()))
            } else {
                T::deserialize(data)
            };
            parsed.map_or_else(
                |_| EventData::Unknown {
                    event_type: t,
                    data: data.clone(),
                },
                wrap,
            )
        }
        match t {
            EventType::SessionStarted => read(t, data, EventData::SessionStarted),
            EventType::AbAssigned => read(t, data, EventData::AbAssigned),
            EventType::SessionForked => read(t, data, EventData::SessionForked),
            EventType::SessionWaiting => EventData::SessionWaiting,
            EventType::SessionCompleted => EventData::SessionCompleted,
            EventType::SessionFailed => read(t, data, EventData::SessionFailed),
            EventType::AgentBound => EventData::AgentBound,
            EventType::MessageReceived => read(t, data, EventData::MessageReceived),
            EventType::MessageDropped => read(t, data, EventData::MessageDropped),
            EventType::TurnStarted => read(t, data, EventData::TurnStarted),
            EventType::TurnCompleted => read(t, data, EventData::TurnCompleted),
            EventType::TurnFailed => read(t, data, EventData::TurnFailed),
            EventType::StepStarted => read(t, data, EventData::StepStarted),
            EventType::StepCompleted => read(t, data, EventData::StepCompleted),
            EventType::ReasoningAppended => read(t, data, EventData::ReasoningAppended),
            EventType::ReasoningCompleted => read(t, data, EventData::ReasoningCompleted),
            EventType::MessageAppended => read(t, data, EventData::MessageAppended),
            EventType::MessageCompleted => read(t, data, EventData::MessageCompleted),
            EventType::ActionsRequested => read(t, data, EventData::ActionsRequested),
            EventType::ActionApprovalRequested => read(t, data, EventData::ApprovalRequested),
            EventType::ActionApprovalResolved => read(t, data, EventData::ApprovalResolved),
            EventType::ActionsClientRequested => read(t, data, EventData::ClientActionsRequested),
            EventType::ActionProgress => read(t, data, EventData::ActionProgress),
            EventType::ActionResult => read(t, data, EventData::ActionResult),
            EventType::SubagentCalled => read(t, data, EventData::SubagentCalled),
            EventType::SubagentCompleted => read(t, data, EventData::SubagentCompleted),
            EventType::SubagentStep => read(t, data, EventData::SubagentStep),
            EventType::ContextCompacted => read(t, data, EventData::ContextCompacted),
            EventType::ArtifactTagged => read(t, data, EventData::ArtifactTagged),
            EventType::MemoryRemembered => read(t, data, EventData::MemoryRemembered),
            EventType::MemoryForgotten => read(t, data, EventData::MemoryForgotten),
        }
    }

    /// The type of the event this is the payload of.
    pub fn event_type(&self) -> EventType {
        match self {
            EventData::SessionStarted(_) => EventType::SessionStarted,
            EventData::AbAssigned(_) => EventType::AbAssigned,
            EventData::SessionForked(_) => EventType::SessionForked,
            EventData::SessionWaiting => EventType::SessionWaiting,
            EventData::SessionCompleted => EventType::SessionCompleted,
            EventData::SessionFailed(_) => EventType::SessionFailed,
            EventData::AgentBound => EventType::AgentBound,
            EventData::MessageReceived(_) => EventType::MessageReceived,
            EventData::MessageDropped(_) => EventType::MessageDropped,
            EventData::TurnStarted(_) => EventType::TurnStarted,
            EventData::TurnCompleted(_) => EventType::TurnCompleted,
            EventData::TurnFailed(_) => EventType::TurnFailed,
            EventData::StepStarted(_) => EventType::StepStarted,
            EventData::StepCompleted(_) => EventType::StepCompleted,
            EventData::ReasoningAppended(_) => EventType::ReasoningAppended,
            EventData::ReasoningCompleted(_) => EventType::ReasoningCompleted,
            EventData::MessageAppended(_) => EventType::MessageAppended,
            EventData::MessageCompleted(_) => EventType::MessageCompleted,
            EventData::ActionsRequested(_) => EventType::ActionsRequested,
            EventData::ApprovalRequested(_) => EventType::ActionApprovalRequested,
            EventData::ApprovalResolved(_) => EventType::ActionApprovalResolved,
            EventData::ClientActionsRequested(_) => EventType::ActionsClientRequested,
            EventData::ActionProgress(_) => EventType::ActionProgress,
            EventData::ActionResult(_) => EventType::ActionResult,
            EventData::SubagentCalled(_) => EventType::SubagentCalled,
            EventData::SubagentCompleted(_) => EventType::SubagentCompleted,
            EventData::SubagentStep(_) => EventType::SubagentStep,
            EventData::ContextCompacted(_) => EventType::ContextCompacted,
            EventData::ArtifactTagged(_) => EventType::ArtifactTagged,
            EventData::MemoryRemembered(_) => EventType::MemoryRemembered,
            EventData::MemoryForgotten(_) => EventType::MemoryForgotten,
            EventData::Unknown { event_type, .. } => *event_type,
        }
    }

    /// The `data` object of the event (camelCase keys; `{}` for the
    /// types that carry nothing).
    pub fn to_value(&self) -> Value {
        fn value<T: Serialize>(payload: &T) -> Value {
            // These types hold strings, numbers and JSON values only, with
            // string keys: serialising them cannot fail.
            serde_json::to_value(payload).unwrap_or_default()
        }
        match self {
            EventData::SessionStarted(p) => value(p),
            EventData::AbAssigned(p) => value(p),
            EventData::SessionForked(p) => value(p),
            EventData::SessionWaiting | EventData::SessionCompleted | EventData::AgentBound => {
                Value::Object(Default::default())
            }
            EventData::SessionFailed(p) => value(p),
            EventData::MessageReceived(p) => value(p),
            EventData::MessageDropped(p) => value(p),
            EventData::TurnStarted(p) => value(p),
            EventData::TurnCompleted(p) => value(p),
            EventData::TurnFailed(p) => value(p),
            EventData::StepStarted(p) => value(p),
            EventData::StepCompleted(p) => value(p),
            EventData::ReasoningAppended(p) | EventData::MessageAppended(p) => value(p),
            EventData::ReasoningCompleted(p) => value(p),
            EventData::MessageCompleted(p) => value(p),
            EventData::ActionsRequested(p) => value(p),
            EventData::ApprovalRequested(p) => value(p),
            EventData::ApprovalResolved(p) => value(p),
            EventData::ClientActionsRequested(p) => value(p),
            EventData::ActionProgress(p) => value(p),
            EventData::ActionResult(p) => value(p),
            EventData::SubagentCalled(p) => value(p),
            EventData::SubagentCompleted(p) => value(p),
            EventData::SubagentStep(p) => value(p),
            EventData::ContextCompacted(p) => value(p),
            EventData::ArtifactTagged(p) => value(p),
            EventData::MemoryRemembered(p) => value(p),
            EventData::MemoryForgotten(p) => value(p),
            EventData::Unknown { data, .. } => data.clone(),
        }
    }
}

impl Event {
    /// The typed view of this event's `data`.
    pub fn payload(&self) -> EventData {
        EventData::parse(self.event_type, &self.data)
    }

    /// Does this event end a session's activity for now (the session waits
    /// for a message, or ended)? Every "has it settled" check reads this.
    pub fn is_settle(&self) -> bool {
        matches!(
            self.event_type,
            EventType::SessionWaiting | EventType::SessionCompleted | EventType::SessionFailed
        )
    }

    /// Does this event end a turn?
    pub fn is_turn_end(&self) -> bool {
        matches!(
            self.event_type,
            EventType::TurnCompleted | EventType::TurnFailed
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn payloads_read_leniently_and_unknown_shapes_are_kept() {
        assert_eq!(
            EventData::parse(EventType::MessageCompleted, &json!({"text": "hi"})),
            EventData::MessageCompleted(MessageCompleted {
                text: "hi".into(),
                finish_reason: "stop".into(),
                parent_call_id: None,
            })
        );
        let r = EventData::parse(
            EventType::ActionResult,
            &json!({"callId": "c", "toolName": "t", "output": {"a": 1}, "isError": true, "extra": 1}),
        );
        let EventData::ActionResult(r) = r else {
            panic!("{r:?}")
        };
        assert!(r.is_error);
        assert_eq!(r.output, json!({"a": 1}));
        assert_eq!(
            EventData::parse(EventType::TurnCompleted, &Value::Null),
            EventData::TurnCompleted(TurnCompleted::default())
        );
        assert_eq!(
            EventData::parse(EventType::MessageReceived, &json!({"text": 5})),
            EventData::Unknown {
                event_type: EventType::MessageReceived,
                data: json!({"text": 5})
            }
        );
    }

    #[test]
    fn every_type_has_a_payload() {
        for &t in EventType::ALL {
            let data = EventData::parse(t, &json!({}));
            assert!(!matches!(data, EventData::Unknown { .. }), "{t}");
            assert_eq!(data.event_type(), t);
        }
    }

    #[test]
    fn what_is_written_reads_back_the_same() {
        let written = [
            EventData::TurnStarted(TurnStarted {
                messages: 2,
                received: vec![3, 4],
                ..TurnStarted::default()
            }),
            EventData::TurnFailed(TurnFailed {
                message: "over".into(),
                reason: Some("budget".into()),
                limit: Some("max_tokens_per_day".into()),
                usage: Some(Usage::default()),
                ..TurnFailed::default()
            }),
            EventData::ActionsRequested(ActionsRequested {
                calls: vec![],
                direct: true,
            }),
            EventData::SessionWaiting,
        ];
        for data in written {
            let t = data.event_type();
            assert_eq!(EventData::parse(t, &data.to_value()), data, "{t}");
        }
        // Optional fields left out are left out of the JSON.
        assert_eq!(
            EventData::TurnStarted(TurnStarted {
                messages: 1,
                received: vec![0],
                ..TurnStarted::default()
            })
            .to_value(),
            json!({"messages": 1, "received": [0]})
        );
        assert_eq!(
            EventData::ActionsRequested(ActionsRequested::default()).to_value(),
            json!({"calls": []})
        );
        assert_eq!(EventData::SessionCompleted.to_value(), json!({}));
    }
}
