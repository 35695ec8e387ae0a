//! The one command path's data: a [`SessionCommand`] (what every entry
//! point asks of a session) and the [`Outcome`] that applying it answers,
//! serialised as a routed mailbox row's payload and answer. A leaf: the
//! dispatch (`dispatch.rs`) and the mailbox (`mailbox.rs`) move them.

use agentkit_harness::{CallOrigin, CallPrincipal, Decision};
use agentkit_manifest::Admission;
use agentkit_protocol::ErrorCode;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::meta::Owner;
use crate::requests::{Accepted, AnsweredClient, FollowUp, ResolvedApproval, ToolCallOutcome};

/// A request to one session: what every entry point (HTTP, MCP,
/// channels, schedules, reminders, the host bridge) asks of a session
/// that may run on another host. Serialised as the mailbox row's payload
/// when it is routed.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub(crate) enum SessionCommand {
    #[serde(rename_all = "camelCase")]
    Message {
        owner: Owner,
        message: String,
        continuation_token: Option<String>,
        admission: Admission,
        #[serde(with = "crate::util::b64_files")]
        workspace_files: Vec<(String, Vec<u8>)>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        client_tools: Vec<agentkit_protocol::ClientTool>,
    },
    #[serde(rename_all = "camelCase")]
    Stop { owner: Owner },
    /// A reminder waking the conversation (`coalesce`, no token rotation).
    #[serde(rename_all = "camelCase")]
    Wake { message: String },
    #[serde(rename_all = "camelCase")]
    Decision {
        owner: Owner,
        call_id: String,
        decision: Decision,
    },
    /// The client's results for calls of its tools (AG-UI `tool`
    /// messages, Responses `function_call_output` items,
    /// `POST /v1/session/:id/client-calls`).
    #[serde(rename_all = "camelCase")]
    ClientResults {
        owner: Owner,
        results: Vec<agentkit_protocol::api::ClientResult>,
    },
    /// A deterministic tool call in the session (`POST /v1/tools/:name`
    /// with `sessionId`).
    #[serde(rename_all = "camelCase")]
    ToolCall {
        owner: Owner,
        name: String,
        input: serde_json::Value,
        origin: RoutedOrigin,
    },
}

/// What a routed tool call keeps of its [`CallOrigin`] (the call never
/// runs in a model's turn).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RoutedOrigin {
    channel_id: Option<String>,
    continuation_key: Option<String>,
    purpose: Option<String>,
    /// `(id, kind, authenticator)` of the principal the bridge acts as.
    principal: Option<(String, String, String)>,
    schedule: Option<String>,
}

impl RoutedOrigin {
    pub(crate) fn of(origin: &CallOrigin) -> RoutedOrigin {
        RoutedOrigin {
            channel_id: origin.channel_id.clone(),
            continuation_key: origin.continuation_key.clone(),
            purpose: origin.purpose.clone(),
            principal: origin
                .principal
                .as_ref()
                .map(|p| (p.id.clone(), p.kind.clone(), p.authenticator.clone())),
            schedule: origin.schedule.clone(),
        }
    }

    pub(crate) fn into_origin(self) -> CallOrigin {
        CallOrigin {
            channel_id: self.channel_id,
            continuation_key: self.continuation_key,
            purpose: self.purpose,
            principal: self
                .principal
                .map(|(id, kind, authenticator)| CallPrincipal {
                    id,
                    kind,
                    authenticator,
                }),
            schedule: self.schedule,
            model_turn: false,
        }
    }
}

impl SessionCommand {
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            SessionCommand::Message { .. } => "message",
            SessionCommand::Stop { .. } => "stop",
            SessionCommand::Wake { .. } => "wake",
            SessionCommand::Decision { .. } => "decision",
            SessionCommand::ClientResults { .. } => "client-results",
            SessionCommand::ToolCall { .. } => "tool",
        }
    }

    /// Who asked (recorded on the row).
    pub(crate) fn principal(&self) -> &str {
        match self {
            SessionCommand::Message { owner, .. }
            | SessionCommand::Stop { owner }
            | SessionCommand::Decision { owner, .. }
            | SessionCommand::ClientResults { owner, .. }
            | SessionCommand::ToolCall { owner, .. } => &owner.principal_id,
            SessionCommand::Wake { .. } => "reminder",
        }
    }

    pub(crate) fn tool_call(
        name: &str,
        input: serde_json::Value,
        owner: &Owner,
        origin: &CallOrigin,
    ) -> SessionCommand {
        SessionCommand::ToolCall {
            owner: owner.clone(),
            name: name.to_owned(),
            input,
            origin: RoutedOrigin::of(origin),
        }
    }

    pub(crate) fn message(req: FollowUp) -> SessionCommand {
        SessionCommand::Message {
            owner: req.owner,
            message: req.message,
            continuation_token: req.continuation_token,
            admission: req.admission,
            workspace_files: req.workspace_files,
            client_tools: req.client_tools,
        }
    }
}

/// What applying a routed request answered, as the row's outcome stores
/// it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "camelCase")]
pub(crate) enum Outcome {
    #[serde(rename_all = "camelCase")]
    Accepted {
        session_id: String,
        continuation_token: String,
        coalesced: bool,
        start_index: u64,
    },
    #[serde(rename_all = "camelCase")]
    Stopped { interrupted: bool },
    #[serde(rename_all = "camelCase")]
    Resolved {
        call_id: String,
        approved: bool,
        by: String,
        resumed: bool,
    },
    #[serde(rename_all = "camelCase")]
    Answered {
        answered: Vec<String>,
        resumed: bool,
    },
    #[serde(rename_all = "camelCase")]
    Called { call: ToolCallOutcome },
    #[serde(rename_all = "camelCase")]
    Failed {
        status: u16,
        code: ErrorCode,
        message: String,
    },
}

impl Outcome {
    pub(crate) fn accepted(a: Accepted) -> Outcome {
        Outcome::Accepted {
            session_id: a.session_id,
            continuation_token: a.continuation_token,
            coalesced: a.coalesced,
            start_index: a.start_index,
        }
    }

    pub(crate) fn failed(e: &Error) -> Outcome {
        Outcome::Failed {
            status: e.status(),
            code: e.code(),
            message: e.to_string(),
        }
    }

    fn unexpected(&self) -> Error {
        Error::NotAvailable {
            message: format!("the host running the session answered an unexpected {self:?}"),
        }
    }

    fn or_failed(self) -> Result<Outcome> {
        match self {
            Outcome::Failed {
                status,
                code,
                message,
            } => Err(Error::Routed {
                status,
                code,
                message,
            }),
            other => Ok(other),
        }
    }

    pub(crate) fn into_accepted(self) -> Result<Accepted> {
        match self.or_failed()? {
            Outcome::Accepted {
                session_id,
                continuation_token,
                coalesced,
                start_index,
            } => Ok(Accepted {
                session_id,
                continuation_token,
                is_new: false,
                coalesced,
                start_index,
            }),
            other => Err(other.unexpected()),
        }
    }

    pub(crate) fn into_stopped(self) -> Result<bool> {
        match self.or_failed()? {
            Outcome::Stopped { interrupted } => Ok(interrupted),
            other => Err(other.unexpected()),
        }
    }

    pub(crate) fn into_called(self) -> Result<ToolCallOutcome> {
        match self.or_failed()? {
            Outcome::Called { call } => Ok(call),
            other => Err(other.unexpected()),
        }
    }

    pub(crate) fn into_answered(self) -> Result<AnsweredClient> {
        match self.or_failed()? {
            Outcome::Answered { answered, resumed } => Ok(AnsweredClient { answered, resumed }),
            other => Err(other.unexpected()),
        }
    }

    pub(crate) fn into_resolved(self) -> Result<ResolvedApproval> {
        match self.or_failed()? {
            Outcome::Resolved {
                call_id,
                approved,
                by,
                resumed,
            } => Ok(ResolvedApproval {
                call_id,
                decision: if approved { "approve" } else { "deny" },
                by,
                resumed,
            }),
            other => Err(other.unexpected()),
        }
    }
}

/// Is this the error of a session another live host holds?
pub(crate) fn held_elsewhere<T>(result: &Result<T>) -> bool {
    matches!(
        result,
        Err(Error::Shared(agentkit_store::SharedError::Busy { .. }))
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn requests_and_outcomes_round_trip_as_json() {
        let owner = Owner {
            principal_id: "alice".into(),
            principal_type: "user".into(),
            authenticator: "bearer".into(),
            ..Default::default()
        };
        let request = SessionCommand::Message {
            client_tools: Vec::new(),
            owner,
            message: "and then?".into(),
            continuation_token: Some("http:1".into()),
            admission: Admission::Preempt,
            workspace_files: vec![("a.txt".into(), b"hi\xff".to_vec())],
        };
        let text = serde_json::to_string(&request).unwrap();
        assert!(text.contains(r#""kind":"message""#), "{text}");
        let back: SessionCommand = serde_json::from_str(&text).unwrap();
        assert_eq!(back.kind(), "message");
        let failed = Outcome::failed(&Error::StaleContinuation);
        let text = serde_json::to_string(&failed).unwrap();
        let back: Outcome = serde_json::from_str(&text).unwrap();
        let err = back.into_accepted().unwrap_err();
        assert_eq!(err.status(), 409);
        assert_eq!(err.code(), ErrorCode::StaleContinuation);
    }
}
