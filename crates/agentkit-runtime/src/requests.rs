//! The plain data of the runtime's requests and answers: a message that
//! starts or continues a session, a follow-up, and what accepting one
//! answers. A leaf: every part takes and gives these.

use agentkit_manifest::Admission;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::meta::{Owner, SessionMode};

/// A message to start (or, with a known continuation key, continue) a
/// session.
#[derive(Debug, Clone)]
pub struct SendRequest {
    pub channel: String,
    pub mode: SessionMode,
    pub owner: Owner,
    pub message: String,
    /// The channel's own key (such as `pr:owner/repo#1`); `None` mints an
    /// opaque rotating token (the built-in HTTP channel).
    pub continuation: Option<String>,
    pub title: Option<String>,
    pub purpose: Option<String>,
    pub admission: Admission,
    /// Relative path → bytes, written into the workspace before the turn.
    pub workspace_files: Vec<(String, Vec<u8>)>,
    /// A dry-run session: tools not annotated `read_only` answer stubs.
    pub dry_run: bool,
    /// Freeze the session at this instant: ISO-8601 with a time zone
    /// (`2025-01-15T09:30:00Z`, `2025-01-15T10:30:00+01:00`). The model is
    /// told it is the current time; tools get it. Ignored when the message
    /// continues an existing session.
    pub as_of: Option<String>,
    /// A JSON Schema this session's final replies must match, instead of
    /// the agent's `output_schema` (checked by [`crate::AgentRuntime::send`]).
    pub output_schema: Option<serde_json::Value>,
    /// Tools the client declares for the turn that answers this message
    /// (an AG-UI front-end's): offered to the model beside the agent's
    /// own; a call of one waits for the client's result
    /// ([`crate::Approvals::answer_client`]). A name the agent's tools use
    /// is refused.
    pub client_tools: Vec<agentkit_protocol::ClientTool>,
}

/// A message as a session admits it: its text and the tools its client
/// declared for the turn that answers it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Incoming {
    pub(crate) text: String,
    pub(crate) client_tools: Vec<agentkit_protocol::ClientTool>,
}

/// A follow-up message to an existing session.
#[derive(Debug, Clone)]
pub struct FollowUp {
    pub owner: Owner,
    pub message: String,
    /// Required on the built-in HTTP channel: the current token.
    pub continuation_token: Option<String>,
    pub admission: Admission,
    /// Relative path → bytes, written into the workspace before the turn.
    pub workspace_files: Vec<(String, Vec<u8>)>,
    /// As [`SendRequest::client_tools`].
    pub client_tools: Vec<agentkit_protocol::ClientTool>,
}

/// What accepting a message answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Accepted {
    pub session_id: String,
    pub continuation_token: String,
    pub is_new: bool,
    /// The message queued behind a running turn.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub coalesced: bool,
    /// The index of this message's `message.received`: a follower that
    /// starts here sees the message and everything it caused.
    #[serde(skip)]
    pub start_index: u64,
}

/// What resolving answered.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedApproval {
    pub call_id: String,
    pub decision: &'static str,
    pub by: String,
    /// A new turn resumes the conversation (the call's turn had ended).
    pub resumed: bool,
}

/// What handing the client's results to calls of its tools answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnsweredClient {
    /// The calls answered, in the order sent.
    pub answered: Vec<String>,
    /// A new turn resumes the conversation (the calls' turn had ended).
    pub resumed: bool,
}

/// The envelope of a finished call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallOutcome {
    pub tool_name: String,
    pub call_id: String,
    pub is_error: bool,
    pub result: Value,
    pub duration_ms: u64,
}
