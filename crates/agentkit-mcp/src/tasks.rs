//! MCP 2026-07-28's ways of waiting for a turn: `ask` as a task (the
//! Tasks extension, `io.modelcontextprotocol/tasks`: `tasks/get`,
//! `tasks/update`, `tasks/cancel`) and approvals as input requests (a
//! multi-round-trip `InputRequiredResult` answered by `inputResponses` on
//! the retried call, or by `tasks/update` for a task).
//!
//! A task is one turn: the turn that answers the `ask` message. Its id is
//! the backend's (the facade uses `<sessionId>.<index>` of the message,
//! read back from the session's log alone). Each parked call of the turn
//! is one input request, keyed by its call id: a form elicitation naming
//! the tool and its arguments, whose answer is
//! `{"action": "accept", "content": {"decision": "approve"|"deny", "reason"?}}`
//! (`decline` denies; `cancel` leaves the call waiting).

use rmcp::model::{
    CallToolResult, CreateTaskResult, DetailedTask, InputRequest, InputRequests,
    InputRequiredResult, InputResponses, JsonObject, Task, TaskPayload, TaskStatus,
};
use serde_json::{Value, json};

use crate::server::{Reply, ReplyStatus};

/// How often a client should poll a task, in milliseconds.
pub(crate) const POLL_INTERVAL_MS: u64 = 1000;

/// A prefix that marks a `requestState` as this server's: the rest is the
/// task id.
const STATE_PREFIX: &str = "agentkit-task:";

/// A call a turn parked until someone decides.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingCall {
    pub call_id: String,
    pub tool_name: String,
    pub input: Value,
}

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    /// Queued or running.
    Working,
    /// A call of the turn waits for a decision ([`TaskReport::pending`]).
    InputRequired,
    /// The turn answered.
    Completed,
    /// The turn failed (a tool-level error: the task is `completed` with
    /// an error result).
    Failed,
    /// Stopped, or dropped before a turn took it.
    Cancelled,
}

/// A task as the backend reads it from the session.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskReport {
    pub task_id: String,
    pub session_id: String,
    pub state: TaskState,
    /// The reply (completed), or why it failed or was cancelled.
    pub text: Option<String>,
    /// The calls that wait for a decision (input required).
    pub pending: Vec<PendingCall>,
    /// The message that started the task.
    pub message: Option<String>,
    /// The latest progress a call of the working turn reported (a remote
    /// agent's state or a piece of its reply): the working task's status
    /// message.
    pub progress: Option<String>,
    /// ISO 8601: when the message arrived, and when the state last changed.
    pub created_at: String,
    pub updated_at: String,
}

impl TaskReport {
    /// What `ask` / `check` would answer now.
    pub fn reply(&self) -> Reply {
        let status = match self.state {
            TaskState::Working => ReplyStatus::Running,
            TaskState::InputRequired => ReplyStatus::WaitingApproval,
            TaskState::Completed => ReplyStatus::Completed,
            TaskState::Failed | TaskState::Cancelled => ReplyStatus::Failed,
        };
        let reply = match self.state {
            TaskState::Working => None,
            TaskState::InputRequired => Some(format!(
                "waiting for a decision on {}",
                self.pending
                    .iter()
                    .map(|p| format!("`{}` (call `{}`)", p.tool_name, p.call_id))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            _ => self.text.clone(),
        };
        Reply {
            status,
            session_id: self.session_id.clone(),
            reply,
        }
    }

    fn task(&self) -> Task {
        let mut task = Task::new(
            self.task_id.clone(),
            TaskStatus::Working,
            self.created_at.clone(),
            self.updated_at.clone(),
        )
        .with_poll_interval_ms(POLL_INTERVAL_MS);
        // A task lives as long as its session's log.
        task.ttl_ms = None;
        let message = match self.state {
            TaskState::Working => Some(
                self.progress
                    .clone()
                    .unwrap_or_else(|| "the agent's turn is running".to_owned()),
            ),
            TaskState::InputRequired => Some(format!(
                "{} call(s) wait for a decision: answer the input requests with tasks/update",
                self.pending.len()
            )),
            TaskState::Completed => None,
            TaskState::Failed | TaskState::Cancelled => self.text.clone(),
        };
        if let Some(m) = message {
            task = task.with_status_message(m);
        }
        task
    }

    /// The `CreateTaskResult` that answers an `ask` run as a task.
    pub(crate) fn created(&self) -> CreateTaskResult {
        let mut task = self.task();
        // The seed state is never input-required (its requests live on
        // `tasks/get`).
        if self.state == TaskState::InputRequired {
            task.status = TaskStatus::Working;
        } else {
            task.status = self.detailed().status();
        }
        CreateTaskResult::new(task)
    }

    /// The task as `tasks/get` answers it.
    pub(crate) fn detailed(&self) -> DetailedTask {
        let payload = match self.state {
            TaskState::Working => TaskPayload::Working,
            TaskState::InputRequired => TaskPayload::InputRequired {
                input_requests: input_requests(&self.pending),
            },
            TaskState::Completed | TaskState::Failed => TaskPayload::Completed {
                result: result_object(&reply_result(&self.reply())),
            },
            TaskState::Cancelled => TaskPayload::Cancelled,
        };
        DetailedTask::new(self.task(), payload)
    }

    /// The `InputRequiredResult` that asks for the pending decisions; the
    /// retry names this task in its `requestState`.
    pub(crate) fn input_required(&self) -> InputRequiredResult {
        InputRequiredResult::new(
            Some(input_requests(&self.pending)),
            Some(format!("{STATE_PREFIX}{}", self.task_id)),
        )
    }
}

/// The task a retried call's `requestState` names, or why it names none.
pub(crate) fn task_of_state(state: &str) -> Result<&str, String> {
    state
        .strip_prefix(STATE_PREFIX)
        .filter(|id| !id.is_empty())
        .ok_or_else(|| {
            "requestState is not one this server issued: retry with the requestState of the InputRequiredResult, unchanged".to_owned()
        })
}

/// The tool result an `ask` reply is.
pub(crate) fn reply_result(reply: &Reply) -> CallToolResult {
    let value = serde_json::to_value(reply).unwrap_or(Value::Null);
    if reply.status == ReplyStatus::Failed {
        CallToolResult::structured_error(value)
    } else {
        CallToolResult::structured(value)
    }
}

fn result_object(result: &CallToolResult) -> JsonObject {
    match serde_json::to_value(result) {
        Ok(Value::Object(mut map)) => {
            // The inlined result is the tool's, not a response's.
            map.remove("resultType");
            map
        }
        _ => JsonObject::new(),
    }
}

/// One form elicitation per parked call, keyed by its call id.
fn input_requests(pending: &[PendingCall]) -> InputRequests {
    let mut out = InputRequests::new();
    for p in pending {
        let args = serde_json::to_string(&p.input).unwrap_or_default();
        let request = json!({
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": format!(
                    "The agent wants to call the tool `{}` with the arguments {args}. Approve this call (`{}`)?",
                    p.tool_name, p.call_id
                ),
                "requestedSchema": {
                    "type": "object",
                    "properties": {
                        "decision": {
                            "type": "string",
                            "title": "Decision",
                            "enum": ["approve", "deny"],
                            "description": "approve runs the call; deny refuses it"
                        },
                        "reason": {
                            "type": "string",
                            "title": "Reason",
                            "description": "Why (shown to the agent when denied)"
                        }
                    },
                    "required": ["decision"]
                },
                "_meta": {
                    "agentkit/approval": {
                        "callId": p.call_id,
                        "toolName": p.tool_name,
                        "input": p.input
                    }
                }
            }
        });
        match serde_json::from_value::<InputRequest>(request) {
            Ok(r) => {
                out.insert(p.call_id.clone(), r);
            }
            Err(e) => {
                tracing::warn!(call = %p.call_id, error = %e, "cannot build an approval input request");
            }
        }
    }
    out
}

/// A decision on a parked call, read from an input response.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalAnswer {
    pub call_id: String,
    pub approved: bool,
    pub reason: Option<String>,
}

/// The decisions `responses` carry (an elicitation result per call id).
/// `cancel` (the person dismissed the form) decides nothing; a response
/// that is no elicitation result is refused with why.
pub(crate) fn answers(responses: &InputResponses) -> Result<Vec<ApprovalAnswer>, String> {
    let mut out = Vec::new();
    for (key, value) in responses {
        let Some(obj) = value.as_object() else {
            return Err(format!(
                "inputResponses[{key}] must be an elicitation result object ({{\"action\": \"accept\"|\"decline\"|\"cancel\", \"content\"?}}), not {value}"
            ));
        };
        let content = obj.get("content").and_then(Value::as_object);
        let reason = content
            .and_then(|c| c.get("reason"))
            .and_then(Value::as_str)
            .filter(|r| !r.trim().is_empty())
            .map(str::to_owned);
        let approved = match obj.get("action").and_then(Value::as_str) {
            Some("accept") => match content.and_then(|c| c.get("decision")) {
                None => true,
                Some(Value::String(d)) if d == "approve" => true,
                Some(Value::String(d)) if d == "deny" => false,
                Some(other) => {
                    return Err(format!(
                        "inputResponses[{key}].content.decision must be \"approve\" or \"deny\", not {other}"
                    ));
                }
            },
            Some("decline") => false,
            Some("cancel") => continue,
            _ => {
                return Err(format!(
                    "inputResponses[{key}].action must be \"accept\", \"decline\" or \"cancel\""
                ));
            }
        };
        let reason = if approved || reason.is_some() {
            reason
        } else {
            Some("denied by the MCP client".to_owned())
        };
        out.push(ApprovalAnswer {
            call_id: key.clone(),
            approved,
            reason,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn report(state: TaskState) -> TaskReport {
        TaskReport {
            task_id: "ses_1.0".into(),
            session_id: "ses_1".into(),
            state,
            text: Some("done".into()),
            pending: vec![PendingCall {
                call_id: "c1".into(),
                tool_name: "echo".into(),
                input: json!({"text": "hi"}),
            }],
            message: Some("go".into()),
            progress: None,
            created_at: "2026-01-01T00:00:00Z".into(),
            updated_at: "2026-01-01T00:00:01Z".into(),
        }
    }

    #[test]
    fn a_working_tasks_status_message_is_its_latest_progress() {
        let mut working = report(TaskState::Working);
        let plain = serde_json::to_value(working.detailed()).unwrap();
        assert_eq!(plain["statusMessage"], "the agent's turn is running");
        working.progress = Some("hello there".into());
        let got = serde_json::to_value(working.detailed()).unwrap();
        assert_eq!(got["status"], "working");
        assert_eq!(got["statusMessage"], "hello there");
        // Once the turn answered, the progress is no status.
        let mut done = report(TaskState::Completed);
        done.progress = Some("stale".into());
        let got = serde_json::to_value(done.detailed()).unwrap();
        assert!(got.get("statusMessage").is_none(), "{got}");
    }

    #[test]
    fn tasks_have_the_extensions_wire_shapes() {
        let created = serde_json::to_value(report(TaskState::Working).created()).unwrap();
        assert_eq!(created["resultType"], "task");
        assert_eq!(created["taskId"], "ses_1.0");
        assert_eq!(created["status"], "working");
        assert_eq!(created["ttlMs"], Value::Null);
        assert_eq!(created["pollIntervalMs"], POLL_INTERVAL_MS);

        let waiting = serde_json::to_value(report(TaskState::InputRequired).detailed()).unwrap();
        assert_eq!(waiting["status"], "input_required");
        let ask = &waiting["inputRequests"]["c1"];
        assert_eq!(ask["method"], "elicitation/create");
        assert_eq!(
            ask["params"]["_meta"]["agentkit/approval"]["toolName"],
            "echo"
        );
        assert_eq!(
            ask["params"]["_meta"]["agentkit/approval"]["input"],
            json!({"text": "hi"})
        );
        assert!(
            ask["params"]["message"]
                .as_str()
                .unwrap()
                .contains("{\"text\":\"hi\"}")
        );

        let done = serde_json::to_value(report(TaskState::Completed).detailed()).unwrap();
        assert_eq!(done["status"], "completed");
        assert_eq!(done["result"]["structuredContent"]["reply"], "done");
        assert_eq!(done["result"]["isError"], false);
        assert!(done["result"].get("resultType").is_none());
        // A failed turn is a tool error: completed, with isError.
        let failed = serde_json::to_value(report(TaskState::Failed).detailed()).unwrap();
        assert_eq!(failed["status"], "completed");
        assert_eq!(failed["result"]["isError"], true);
        let cancelled = serde_json::to_value(report(TaskState::Cancelled).detailed()).unwrap();
        assert_eq!(cancelled["status"], "cancelled");
        assert_eq!(cancelled["statusMessage"], "done");
    }

    #[test]
    fn input_required_names_its_task_in_the_request_state() {
        let r = serde_json::to_value(report(TaskState::InputRequired).input_required()).unwrap();
        assert_eq!(r["resultType"], "input_required");
        let state = r["requestState"].as_str().unwrap();
        assert_eq!(task_of_state(state).unwrap(), "ses_1.0");
        assert!(task_of_state("ses_1.0").is_err());
        assert!(task_of_state(STATE_PREFIX).is_err());
    }

    #[test]
    fn answers_read_elicitation_results() {
        let responses: InputResponses = serde_json::from_value(json!({
            "a": {"action": "accept", "content": {"decision": "approve"}},
            "b": {"action": "accept", "content": {"decision": "deny", "reason": "no"}},
            "c": {"action": "decline"},
            "d": {"action": "cancel"},
            "e": {"action": "accept"}
        }))
        .unwrap();
        let got = answers(&responses).unwrap();
        let brief: Vec<(&str, bool, Option<&str>)> = got
            .iter()
            .map(|a| (a.call_id.as_str(), a.approved, a.reason.as_deref()))
            .collect();
        assert_eq!(
            brief,
            [
                ("a", true, None),
                ("b", false, Some("no")),
                ("c", false, Some("denied by the MCP client")),
                ("e", true, None)
            ]
        );
        for bad in [
            json!({"a": 12}),
            json!({"a": {"action": "maybe"}}),
            json!({"a": {"action": "accept", "content": {"decision": "later"}}}),
        ] {
            let r: InputResponses = serde_json::from_value(bad).unwrap();
            assert!(answers(&r).is_err());
        }
    }
}
