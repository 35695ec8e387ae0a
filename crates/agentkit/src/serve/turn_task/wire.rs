//! A2A v1.0's wire shapes, as the protocol's proto messages map to JSON
//! (camelCase fields, enum values by name such as `TASK_STATE_COMPLETED`
//! and `ROLE_AGENT`, a `oneof` as the one field that is set). Only what
//! this server reads and writes is here.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `Part`: one piece of a message or artifact (`text`, `data`, `url` or
/// `raw`, exactly one of them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Part {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) data: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) url: Option<String>,
    /// Base64 bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) raw: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) filename: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) media_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) metadata: Option<Map<String, Value>>,
}

impl Part {
    pub(crate) fn text(text: impl Into<String>) -> Part {
        Part {
            text: Some(text.into()),
            ..Part::default()
        }
    }

    pub(crate) fn data(data: Value) -> Part {
        Part {
            data: Some(data),
            ..Part::default()
        }
    }
}

/// `Role`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Role {
    #[default]
    #[serde(rename = "ROLE_UNSPECIFIED")]
    Unspecified,
    #[serde(rename = "ROLE_USER")]
    User,
    #[serde(rename = "ROLE_AGENT")]
    Agent,
}

/// `Message`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Message {
    pub(crate) message_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) context_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) task_id: Option<String>,
    pub(crate) role: Role,
    pub(crate) parts: Vec<Part>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) metadata: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) extensions: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) reference_task_ids: Vec<String>,
}

/// `TaskState`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum TaskState {
    #[default]
    #[serde(rename = "TASK_STATE_UNSPECIFIED")]
    Unspecified,
    #[serde(rename = "TASK_STATE_SUBMITTED")]
    Submitted,
    #[serde(rename = "TASK_STATE_WORKING")]
    Working,
    #[serde(rename = "TASK_STATE_COMPLETED")]
    Completed,
    #[serde(rename = "TASK_STATE_FAILED")]
    Failed,
    #[serde(rename = "TASK_STATE_CANCELED")]
    Canceled,
    #[serde(rename = "TASK_STATE_INPUT_REQUIRED")]
    InputRequired,
    #[serde(rename = "TASK_STATE_REJECTED")]
    Rejected,
    #[serde(rename = "TASK_STATE_AUTH_REQUIRED")]
    AuthRequired,
}

impl TaskState {
    /// Nothing more will happen to the task.
    pub(crate) fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected
        )
    }

    /// The task waits for the client (or is over): a blocking call and a
    /// stream end here.
    pub(crate) fn is_interrupted(self) -> bool {
        self.is_terminal() || matches!(self, TaskState::InputRequired | TaskState::AuthRequired)
    }
}

/// `TaskStatus`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct TaskStatus {
    pub(crate) state: TaskState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) message: Option<Message>,
    /// RFC 3339.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) timestamp: Option<String>,
}

/// `Artifact`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Artifact {
    pub(crate) artifact_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) description: Option<String>,
    pub(crate) parts: Vec<Part>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) metadata: Option<Map<String, Value>>,
}

/// `Task`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Task {
    pub(crate) id: String,
    pub(crate) context_id: String,
    pub(crate) status: TaskStatus,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) artifacts: Vec<Artifact>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) history: Vec<Message>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) metadata: Option<Map<String, Value>>,
}

/// `TaskStatusUpdateEvent`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct TaskStatusUpdateEvent {
    pub(crate) task_id: String,
    pub(crate) context_id: String,
    pub(crate) status: TaskStatus,
}

/// `TaskArtifactUpdateEvent`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct TaskArtifactUpdateEvent {
    pub(crate) task_id: String,
    pub(crate) context_id: String,
    pub(crate) artifact: Artifact,
    pub(crate) append: bool,
    pub(crate) last_chunk: bool,
}

/// `StreamResponse`: one event of a stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum StreamResponse {
    Task(Task),
    Message(Message),
    StatusUpdate(TaskStatusUpdateEvent),
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

/// `SendMessageResponse` (the task; this server never answers a bare
/// message).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SendMessageResponse {
    pub(crate) task: Task,
}

/// `SendMessageConfiguration`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct SendMessageConfiguration {
    pub(crate) accepted_output_modes: Vec<String>,
    pub(crate) history_length: Option<u32>,
    /// Answer at once with the task as it is (else wait until it ends or
    /// needs input).
    pub(crate) return_immediately: bool,
    pub(crate) task_push_notification_config: Option<Value>,
}

/// `SendMessageRequest` (the params of `SendMessage` and
/// `SendStreamingMessage`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct SendMessageRequest {
    pub(crate) tenant: String,
    pub(crate) message: Option<Message>,
    pub(crate) configuration: Option<SendMessageConfiguration>,
    pub(crate) metadata: Option<Map<String, Value>>,
}

/// `GetTaskRequest`, `CancelTaskRequest` and `SubscribeToTaskRequest`:
/// a task id (and, for a get, how much history).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct TaskRequest {
    pub(crate) tenant: String,
    pub(crate) id: String,
    pub(crate) history_length: Option<u32>,
    pub(crate) metadata: Option<Map<String, Value>>,
}

/// `ListTasksRequest`: filters and a page.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct ListTasksRequest {
    pub(crate) tenant: String,
    pub(crate) context_id: Option<String>,
    pub(crate) status: Option<TaskState>,
    pub(crate) page_size: Option<i64>,
    pub(crate) page_token: Option<String>,
    pub(crate) history_length: Option<u32>,
    /// RFC 3339: only tasks whose state changed at or after it.
    pub(crate) status_timestamp_after: Option<String>,
    pub(crate) include_artifacts: Option<bool>,
    pub(crate) metadata: Option<Map<String, Value>>,
}

/// The `google.rpc.ErrorInfo` detail A2A errors carry (its `reason`,
/// such as `TASK_NOT_FOUND`).
pub(crate) fn error_info(reason: &str, metadata: Map<String, Value>) -> Value {
    serde_json::json!({
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": reason,
        "domain": "a2a-protocol.org",
        "metadata": metadata,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn shapes_follow_the_proto_json_mapping() {
        let event = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus {
                state: TaskState::InputRequired,
                message: None,
                timestamp: None,
            },
        });
        assert_eq!(
            serde_json::to_value(&event).unwrap(),
            json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_INPUT_REQUIRED"}}})
        );
        let req: SendMessageRequest = serde_json::from_value(json!({
            "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}], "contextId": "ses_1"},
            "configuration": {"returnImmediately": true, "historyLength": 2}
        }))
        .unwrap();
        let message = req.message.unwrap();
        assert_eq!(message.role, Role::User);
        assert_eq!(message.parts, vec![Part::text("hi")]);
        assert_eq!(message.context_id.as_deref(), Some("ses_1"));
        let config = req.configuration.unwrap();
        assert!(config.return_immediately);
        assert_eq!(config.history_length, Some(2));
    }
}
