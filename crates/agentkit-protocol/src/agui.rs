//! The AG-UI 1.0 wire format an agent also speaks (`POST
//! /<slug>/v1/ag-ui`): the `RunAgentInput` a client posts and the events
//! agentkit answers with over server-sent events. Field names are
//! AG-UI's (camelCase); only what agentkit reads or writes is here.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The protocol version agentkit speaks, sent on `RUN_STARTED`.
pub const PROTOCOL_VERSION: &str = "1.0";

/// `POST /v1/ag-ui`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default)]
pub struct RunAgentInput {
    /// The conversation: one session per principal and thread.
    pub thread_id: String,
    /// This run (one turn).
    pub run_id: String,
    /// The conversation so far; a continued thread sends its session only
    /// the user text after the last assistant message.
    pub messages: Vec<Value>,
    /// Front-end tools: offered to the model for this run beside the
    /// agent's own; a call of one ends the run, and the client answers it
    /// with a `tool` message on the next run.
    pub tools: Vec<Tool>,
    /// Ambient information, given to the model with this run's user
    /// message.
    pub context: Vec<Context>,
    /// Ignored: an agentkit session keeps no client state.
    pub state: Option<Value>,
    /// Ignored.
    pub forwarded_props: Option<Value>,
    /// Answers to the interrupts (parked calls) that ended the previous
    /// run.
    pub resume: Vec<ResumeEntry>,
}

/// A front-end tool: the client runs it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default)]
pub struct Tool {
    pub name: String,
    pub description: String,
    /// A JSON Schema object for the call's arguments (none: any object).
    pub parameters: Option<Value>,
}

/// One item of ambient information.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default)]
pub struct Context {
    pub description: String,
    pub value: String,
}

/// An answer to one interrupt.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default)]
pub struct ResumeEntry {
    /// The interrupt's id: the parked call's id.
    pub interrupt_id: String,
    /// `resolved` (decided by `payload`) or `cancelled` (denied).
    pub status: String,
    /// `{"approved": bool, "reason"?: string}`; a `resolved` entry without
    /// `approved: false` approves.
    pub payload: Option<Value>,
}

/// Something a run waits for: a call parked for approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Interrupt {
    pub id: String,
    pub reason: String,
    pub message: String,
    pub tool_call_id: String,
    pub response_schema: Value,
}

/// A run's token counts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    pub cached_input_tokens: u64,
}

impl From<crate::Usage> for TokenUsage {
    fn from(u: crate::Usage) -> TokenUsage {
        TokenUsage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            total_tokens: u.input_tokens.saturating_add(u.output_tokens),
            cached_input_tokens: u.cache_read_tokens,
        }
    }
}

/// Why a run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Outcome {
    Success,
    Interrupt { interrupts: Vec<Interrupt> },
}

/// The events agentkit sends, by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AguiEvent {
    #[serde(rename_all = "camelCase")]
    RunStarted {
        thread_id: String,
        run_id: String,
        protocol_version: String,
    },
    #[serde(rename_all = "camelCase")]
    RunFinished {
        thread_id: String,
        run_id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        outcome: Outcome,
        #[serde(skip_serializing_if = "Vec::is_empty", default)]
        usage: Vec<TokenUsage>,
    },
    #[serde(rename_all = "camelCase")]
    RunError {
        message: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        code: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    StepStarted { step_name: String },
    #[serde(rename_all = "camelCase")]
    StepFinished { step_name: String },
    #[serde(rename_all = "camelCase")]
    TextMessageStart { message_id: String, role: String },
    #[serde(rename_all = "camelCase")]
    TextMessageContent { message_id: String, delta: String },
    #[serde(rename_all = "camelCase")]
    TextMessageEnd { message_id: String },
    #[serde(rename_all = "camelCase")]
    ToolCallStart {
        tool_call_id: String,
        tool_call_name: String,
    },
    #[serde(rename_all = "camelCase")]
    ToolCallArgs { tool_call_id: String, delta: String },
    #[serde(rename_all = "camelCase")]
    ToolCallEnd { tool_call_id: String },
    #[serde(rename_all = "camelCase")]
    ToolCallResult {
        message_id: String,
        tool_call_id: String,
        content: String,
        role: String,
    },
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn events_use_agui_names() {
        let e = AguiEvent::ToolCallStart {
            tool_call_id: "c1".into(),
            tool_call_name: "echo".into(),
        };
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            json!({"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "echo"})
        );
        let done = AguiEvent::RunFinished {
            thread_id: "t".into(),
            run_id: "r".into(),
            result: None,
            outcome: Outcome::Success,
            usage: vec![],
        };
        assert_eq!(
            serde_json::to_value(&done).unwrap(),
            json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "success"}})
        );
    }
}
