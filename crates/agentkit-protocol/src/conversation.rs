//! The conversation a model sees: user, assistant and tool messages, the
//! tool calls that link them, and token usage.
//!
//! The runtime folds these out of a session's event log; the harness sends
//! them to the model. Both sides spell them the same way here.

use std::ops::{Add, AddAssign};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One tool call the model asked for.
/// An image kept in the session's workspace, as a message or a tool's
/// output names it: `{"type": "image", "mediaType", "path"}`; in a
/// provider request only, with its bytes (`data`, base64).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "type", rename = "image", rename_all = "camelCase")]
pub struct ImageRef {
    pub media_type: String,
    /// Relative to the workspace.
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// Unique within the session; links the call to its result.
    pub call_id: String,
    pub tool_name: String,
    /// The arguments, a JSON object when the model behaves.
    pub input: Value,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(
    tag = "role",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Message {
    /// What the user said (coalesced follow-ups are joined into one), and
    /// the images attached to it.
    User {
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<ImageRef>,
    },
    /// One model step: its text and the tool calls it made.
    Assistant {
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call.
    Tool {
        call_id: String,
        tool_name: String,
        output: Value,
        #[serde(default)]
        is_error: bool,
    },
}

impl Message {
    /// A user message.
    pub fn user(text: impl Into<String>) -> Message {
        Message::User {
            text: text.into(),
            images: Vec::new(),
        }
    }
}

/// How well the harness's estimate of request sizes matched what the
/// provider counted, summed over the steps of a turn (or of a session):
/// the harness calibrates later estimates with it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default)]
pub struct Sizing {
    /// The harness's uncalibrated estimates of the requests' input tokens.
    pub estimated_input_tokens: u64,
    /// The input tokens the provider counted for those requests (cached
    /// ones included).
    pub counted_input_tokens: u64,
}

impl std::ops::AddAssign for Sizing {
    fn add_assign(&mut self, rhs: Sizing) {
        self.estimated_input_tokens = self
            .estimated_input_tokens
            .saturating_add(rhs.estimated_input_tokens);
        self.counted_input_tokens = self
            .counted_input_tokens
            .saturating_add(rhs.counted_input_tokens);
    }
}

/// Tokens a turn (or a step) used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub cache_read_tokens: u64,
    #[serde(default)]
    pub cache_write_tokens: u64,
}

impl Add for Usage {
    type Output = Usage;

    fn add(self, rhs: Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens.saturating_add(rhs.input_tokens),
            output_tokens: self.output_tokens.saturating_add(rhs.output_tokens),
            cache_read_tokens: self.cache_read_tokens.saturating_add(rhs.cache_read_tokens),
            cache_write_tokens: self
                .cache_write_tokens
                .saturating_add(rhs.cache_write_tokens),
        }
    }
}

impl AddAssign for Usage {
    fn add_assign(&mut self, rhs: Usage) {
        *self = *self + rhs;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_serialize_with_a_role_tag_and_camel_case_fields() {
        let m = Message::Assistant {
            text: "hi".into(),
            tool_calls: vec![ToolCall {
                call_id: "c1".into(),
                tool_name: "get_weather".into(),
                input: json!({"city": "NYC"}),
            }],
        };
        let v = serde_json::to_value(&m).unwrap_or_default();
        assert_eq!(
            v,
            json!({"role": "assistant", "text": "hi", "toolCalls": [
                {"callId": "c1", "toolName": "get_weather", "input": {"city": "NYC"}}
            ]})
        );
        let back: Message = serde_json::from_value(v).unwrap_or(Message::user("x"));
        assert_eq!(back, m);

        let t = Message::Tool {
            call_id: "c1".into(),
            tool_name: "t".into(),
            output: json!("ok"),
            is_error: true,
        };
        assert_eq!(
            serde_json::to_value(&t).unwrap_or_default(),
            json!({"role": "tool", "callId": "c1", "toolName": "t", "output": "ok", "isError": true})
        );
        assert_eq!(
            serde_json::to_value(Message::user("yo")).unwrap_or_default(),
            json!({"role": "user", "text": "yo"})
        );
    }

    #[test]
    fn usage_adds_field_by_field() {
        let mut u = Usage {
            input_tokens: 1,
            output_tokens: 2,
            cache_read_tokens: 3,
            cache_write_tokens: 4,
        };
        u += u;
        assert_eq!(
            u,
            Usage {
                input_tokens: 2,
                output_tokens: 4,
                cache_read_tokens: 6,
                cache_write_tokens: 8
            }
        );
        assert_eq!(
            serde_json::to_value(Usage::default()).unwrap_or_default(),
            json!({"inputTokens": 0, "outputTokens": 0, "cacheReadTokens": 0, "cacheWriteTokens": 0})
        );
    }
}
