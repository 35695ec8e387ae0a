//! The OpenAI-compatible wire formats an agent also speaks
//! (`/<slug>/v1/responses`, `/<slug>/v1/chat/completions`): the request
//! bodies as agentkit reads them, the response objects, the streaming
//! events and chunks, and the error body. Field names are OpenAI's
//! (snake_case); only what agentkit reads or writes is here: a field a
//! client sends that is not named is ignored (the agent's own
//! configuration decides sampling, models and tools).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The error body of every OpenAI-compatible route:
/// `{"error": {"message", "type", "param", "code"}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "OpenAiErrorBody"))]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// What went wrong: `type` is OpenAI's class of error
/// (`invalid_request_error`, `authentication_error`, ...), `code`
/// agentkit's [`crate::ErrorCode`] (or an OpenAI code such as
/// `model_not_found`), `param` the request field at fault.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "OpenAiErrorDetail"))]
pub struct ErrorDetail {
    pub message: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub param: Option<String>,
    pub code: Option<String>,
}

/// `POST /v1/responses`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct CreateResponse {
    /// The agent's slug (another value answers `404 model_not_found`).
    pub model: Option<String>,
    /// A string (one user message) or input items: messages
    /// (`{"role", "content"}`), and `mcp_approval_response` items that
    /// decide the calls the previous response asked approval for.
    pub input: Option<ResponseInput>,
    /// Refused when not empty: the agent's instructions are its own.
    pub instructions: Option<String>,
    /// Continues the session of that response.
    pub previous_response_id: Option<String>,
    pub stream: bool,
    /// Refused when not empty: the agent's tools run on the server and
    /// the client declares none.
    pub tools: Vec<Value>,
    /// Accepted when absent or `auto` (the agent decides its calls).
    pub tool_choice: Option<Value>,
}

/// The `input` of a response: one user message, or items.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum ResponseInput {
    Text(String),
    Items(Vec<Value>),
}

/// A response object (`"object": "response"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "OpenAiResponse"))]
pub struct Response {
    pub id: String,
    pub object: String,
    pub created_at: u64,
    /// `in_progress`, `completed` (an approval the turn waits on included)
    /// or `failed`.
    pub status: String,
    pub model: String,
    pub output: Vec<OutputItem>,
    pub usage: Option<ResponseUsage>,
    pub error: Option<ResponseError>,
    pub incomplete_details: Option<Value>,
    pub previous_response_id: Option<String>,
    pub instructions: Option<String>,
    pub metadata: serde_json::Map<String, Value>,
    pub parallel_tool_calls: bool,
    pub tool_choice: String,
    pub tools: Vec<Value>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    /// agentkit's addition: the session the response is a turn of.
    pub session_id: String,
}

/// Why a response failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ResponseError {
    pub code: String,
    pub message: String,
}

/// One item of a response's `output`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputItem {
    /// Assistant text.
    Message {
        id: String,
        role: String,
        status: String,
        content: Vec<OutputContent>,
    },
    /// One of the agent's own tool calls, run on the server (never for
    /// the client to answer).
    FunctionCall {
        id: String,
        call_id: String,
        name: String,
        arguments: String,
        status: String,
    },
    /// A call of the agent's that waits for a human's approval: answered
    /// by an `mcp_approval_response` input item on the next request.
    McpApprovalRequest {
        id: String,
        server_label: String,
        name: String,
        arguments: String,
    },
}

/// A part of a message item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputContent {
    OutputText {
        text: String,
        annotations: Vec<Value>,
    },
}

/// A response's token counts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ResponseUsage {
    pub input_tokens: u64,
    pub input_tokens_details: InputTokensDetails,
    pub output_tokens: u64,
    pub output_tokens_details: OutputTokensDetails,
    pub total_tokens: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct InputTokensDetails {
    pub cached_tokens: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OutputTokensDetails {
    pub reasoning_tokens: u64,
}

impl From<crate::Usage> for ResponseUsage {
    fn from(u: crate::Usage) -> ResponseUsage {
        ResponseUsage {
            input_tokens: u.input_tokens,
            input_tokens_details: InputTokensDetails {
                cached_tokens: u.cache_read_tokens,
            },
            output_tokens: u.output_tokens,
            output_tokens_details: OutputTokensDetails::default(),
            total_tokens: u.input_tokens.saturating_add(u.output_tokens),
        }
    }
}

/// One server-sent event of a streamed response: `event: <type>` and
/// this as `data`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ResponseStreamEvent {
    #[serde(flatten)]
    pub event: ResponseEvent,
    pub sequence_number: u64,
}

/// The streamed events agentkit sends, by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type")]
pub enum ResponseEvent {
    #[serde(rename = "response.created")]
    Created { response: Box<Response> },
    #[serde(rename = "response.in_progress")]
    InProgress { response: Box<Response> },
    #[serde(rename = "response.output_item.added")]
    OutputItemAdded {
        output_index: usize,
        item: OutputItem,
    },
    #[serde(rename = "response.output_item.done")]
    OutputItemDone {
        output_index: usize,
        item: OutputItem,
    },
    #[serde(rename = "response.content_part.added")]
    ContentPartAdded {
        item_id: String,
        output_index: usize,
        content_index: usize,
        part: OutputContent,
    },
    #[serde(rename = "response.content_part.done")]
    ContentPartDone {
        item_id: String,
        output_index: usize,
        content_index: usize,
        part: OutputContent,
    },
    #[serde(rename = "response.output_text.delta")]
    OutputTextDelta {
        item_id: String,
        output_index: usize,
        content_index: usize,
        delta: String,
        logprobs: Vec<Value>,
    },
    #[serde(rename = "response.output_text.done")]
    OutputTextDone {
        item_id: String,
        output_index: usize,
        content_index: usize,
        text: String,
        logprobs: Vec<Value>,
    },
    #[serde(rename = "response.function_call_arguments.delta")]
    FunctionCallArgumentsDelta {
        item_id: String,
        output_index: usize,
        delta: String,
    },
    #[serde(rename = "response.function_call_arguments.done")]
    FunctionCallArgumentsDone {
        item_id: String,
        output_index: usize,
        name: String,
        arguments: String,
    },
    #[serde(rename = "response.completed")]
    Completed { response: Box<Response> },
    #[serde(rename = "response.failed")]
    Failed { response: Box<Response> },
}

impl ResponseEvent {
    /// The event's `type`, for the SSE `event:` line.
    pub fn name(&self) -> &'static str {
        match self {
            ResponseEvent::Created { .. } => "response.created",
            ResponseEvent::InProgress { .. } => "response.in_progress",
            ResponseEvent::OutputItemAdded { .. } => "response.output_item.added",
            ResponseEvent::OutputItemDone { .. } => "response.output_item.done",
            ResponseEvent::ContentPartAdded { .. } => "response.content_part.added",
            ResponseEvent::ContentPartDone { .. } => "response.content_part.done",
            ResponseEvent::OutputTextDelta { .. } => "response.output_text.delta",
            ResponseEvent::OutputTextDone { .. } => "response.output_text.done",
            ResponseEvent::FunctionCallArgumentsDelta { .. } => {
                "response.function_call_arguments.delta"
            }
            ResponseEvent::FunctionCallArgumentsDone { .. } => {
                "response.function_call_arguments.done"
            }
            ResponseEvent::Completed { .. } => "response.completed",
            ResponseEvent::Failed { .. } => "response.failed",
        }
    }
}

/// `POST /v1/chat/completions`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct CreateChatCompletion {
    /// The agent's slug (another value answers `404 model_not_found`).
    pub model: Option<String>,
    pub messages: Vec<ChatMessage>,
    pub stream: bool,
    pub stream_options: Option<StreamOptions>,
    /// Refused when not empty: the agent's tools run on the server.
    pub tools: Vec<Value>,
    /// A conversation key: requests with the same `user` (from the same
    /// principal) continue one session.
    pub user: Option<String>,
    /// Only 1 is served.
    pub n: Option<u32>,
}

/// One message of a chat request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ChatMessage {
    pub role: String,
    /// A string, or parts (`{"type": "text", "text"}`).
    pub content: Value,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct StreamOptions {
    pub include_usage: bool,
}

/// A chat completion (`"object": "chat.completion"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ChatCompletion {
    pub id: String,
    pub object: String,
    pub created: u64,
    pub model: String,
    pub choices: Vec<ChatChoice>,
    pub usage: ChatUsage,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ChatChoice {
    pub index: u32,
    pub message: ChatReply,
    /// `stop`, or `error` for a turn that failed.
    pub finish_reason: String,
    pub logprobs: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ChatReply {
    pub role: String,
    pub content: String,
    pub refusal: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ChatUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
}

impl From<crate::Usage> for ChatUsage {
    fn from(u: crate::Usage) -> ChatUsage {
        ChatUsage {
            prompt_tokens: u.input_tokens,
            completion_tokens: u.output_tokens,
            total_tokens: u.input_tokens.saturating_add(u.output_tokens),
        }
    }
}

/// One chunk of a streamed chat completion
/// (`"object": "chat.completion.chunk"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ChatCompletionChunk {
    pub id: String,
    pub object: String,
    pub created: u64,
    pub model: String,
    pub choices: Vec<ChunkChoice>,
    /// Only on the last chunk, and only with
    /// `stream_options.include_usage`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<ChatUsage>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ChunkChoice {
    pub index: u32,
    pub delta: ChunkDelta,
    pub finish_reason: Option<String>,
    pub logprobs: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ChunkDelta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn stream_events_carry_their_type_and_sequence_number() {
        let e = ResponseStreamEvent {
            event: ResponseEvent::OutputTextDelta {
                item_id: "msg_1".into(),
                output_index: 0,
                content_index: 0,
                delta: "Hi".into(),
                logprobs: vec![],
            },
            sequence_number: 3,
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["type"], "response.output_text.delta");
        assert_eq!(v["sequence_number"], 3);
        assert_eq!(v["delta"], "Hi");
        assert_eq!(e.event.name(), "response.output_text.delta");
        let back: ResponseStreamEvent = serde_json::from_value(v).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn input_is_a_string_or_items() {
        let r: CreateResponse =
            serde_json::from_value(json!({"model": "bot", "input": "hi", "temperature": 1}))
                .unwrap();
        assert_eq!(r.input, Some(ResponseInput::Text("hi".into())));
        let r: CreateResponse =
            serde_json::from_value(json!({"input": [{"role": "user", "content": "hi"}]})).unwrap();
        assert!(matches!(r.input, Some(ResponseInput::Items(items)) if items.len() == 1));
    }
}
