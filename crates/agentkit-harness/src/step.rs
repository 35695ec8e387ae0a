//! What the agent loop reports while a turn runs: one [`StepEvent`] per
//! event the runtime stores, with the typed payload of each.

use agentkit_protocol::{
    ActionProgress, ActionResult, ActionsRequested, Appended, ApprovalRequested, ApprovalResolved,
    ClientActionsRequested, ContextCompacted, EventData, EventType, MessageCompleted,
    ReasoningCompleted, StepCompleted, StepStarted, SubagentCalled, SubagentCompleted,
    SubagentStep, ToolCall,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why a model step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model answered; the turn is over.
    Stop,
    /// The model asked for tool calls; another step follows.
    ToolCall,
    /// The reply did not match the turn's `output_schema`; the model is
    /// asked again.
    InvalidOutput,
}

impl FinishReason {
    /// The wire spelling: `stop`, `tool_call` or `invalid_output`.
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::ToolCall => "tool_call",
            FinishReason::InvalidOutput => "invalid_output",
        }
    }
}

/// One thing that happened during a turn. The runtime turns each into one
/// stored event of type [`StepEvent::event_type`] with
/// [`StepEvent::payload`] as its `data`.
#[derive(Debug, Clone, PartialEq)]
pub enum StepEvent {
    StepStarted {
        step: u32,
        /// The digests of the request the step sends.
        request: Option<agentkit_protocol::RequestDigest>,
    },
    ReasoningAppended {
        delta: String,
    },
    ReasoningCompleted {
        text: String,
    },
    /// A delta of the reply and the text so far.
    MessageAppended {
        delta: String,
        text: String,
    },
    MessageCompleted {
        text: String,
        finish_reason: FinishReason,
    },
    ActionsRequested {
        calls: Vec<ToolCall>,
    },
    ActionResult {
        call_id: String,
        tool_name: String,
        output: Value,
        is_error: bool,
        duration_ms: u64,
    },
    StepCompleted {
        step: u32,
        duration_ms: u64,
        /// What the provider counted for this step.
        usage: Option<agentkit_protocol::Usage>,
        /// The harness's estimate of the request's input tokens.
        estimated_input_tokens: Option<u64>,
        /// `provider:id` of the step's model.
        model: String,
        /// What the step cost, `None` when the price is unknown.
        cost_usd: Option<f64>,
    },
    /// Older messages were summarised (`context.compacted`).
    ContextCompacted {
        messages: usize,
        summary: String,
        tokens_before: u64,
        tokens_after: u64,
        usage: agentkit_protocol::Usage,
        cost_usd: Option<f64>,
    },
    /// A call waits for a human's decision.
    ApprovalRequested {
        call_id: String,
        tool_name: String,
        input: Value,
    },
    /// Calls of the client's tools: the turn waits for the client's
    /// results.
    ClientActionsRequested {
        calls: Vec<ToolCall>,
    },
    /// The decision on a parked call.
    ApprovalResolved {
        call_id: String,
        tool_name: String,
        decision: crate::Decision,
    },
    /// A running call reported progress.
    ActionProgress {
        call_id: String,
        tool_name: String,
        status: Option<String>,
        delta: Option<String>,
    },
    /// The model delegated work to a subagent (the built-in `task` tool).
    SubagentCalled {
        call_id: String,
        subagent: String,
        prompt: String,
    },
    /// One of the subagent's model steps ended.
    SubagentStep {
        call_id: String,
        subagent: String,
        step: u32,
        provider: String,
        model: String,
        duration_ms: u64,
        usage: Option<agentkit_protocol::Usage>,
        finish_reason: String,
        cost_usd: Option<f64>,
    },
    /// The subagent finished; its usage is part of the turn's.
    SubagentCompleted {
        call_id: String,
        subagent: String,
        is_error: bool,
        result: String,
        usage: agentkit_protocol::Usage,
    },
}

impl StepEvent {
    /// The stored event's `type`.
    pub fn event_type(&self) -> EventType {
        match self {
            StepEvent::StepStarted { .. } => EventType::StepStarted,
            StepEvent::ReasoningAppended { .. } => EventType::ReasoningAppended,
            StepEvent::ReasoningCompleted { .. } => EventType::ReasoningCompleted,
            StepEvent::MessageAppended { .. } => EventType::MessageAppended,
            StepEvent::MessageCompleted { .. } => EventType::MessageCompleted,
            StepEvent::ActionsRequested { .. } => EventType::ActionsRequested,
            StepEvent::ActionResult { .. } => EventType::ActionResult,
            StepEvent::ActionProgress { .. } => EventType::ActionProgress,
            StepEvent::StepCompleted { .. } => EventType::StepCompleted,
            StepEvent::ContextCompacted { .. } => EventType::ContextCompacted,
            StepEvent::ApprovalRequested { .. } => EventType::ActionApprovalRequested,
            StepEvent::ApprovalResolved { .. } => EventType::ActionApprovalResolved,
            StepEvent::ClientActionsRequested { .. } => EventType::ActionsClientRequested,
            StepEvent::SubagentCalled { .. } => EventType::SubagentCalled,
            StepEvent::SubagentCompleted { .. } => EventType::SubagentCompleted,
            StepEvent::SubagentStep { .. } => EventType::SubagentStep,
        }
    }

    /// The stored event's payload, typed: the store writes it as readers
    /// read it.
    pub fn payload(&self) -> EventData {
        match self.clone() {
            StepEvent::StepStarted { step, request } => {
                EventData::StepStarted(StepStarted { step, request })
            }
            StepEvent::ReasoningAppended { delta } => EventData::ReasoningAppended(Appended {
                delta,
                text: None,
                parent_call_id: None,
            }),
            StepEvent::ReasoningCompleted { text } => {
                EventData::ReasoningCompleted(ReasoningCompleted { text })
            }
            StepEvent::MessageAppended { delta, text } => EventData::MessageAppended(Appended {
                delta,
                text: Some(text),
                parent_call_id: None,
            }),
            StepEvent::MessageCompleted {
                text,
                finish_reason,
            } => EventData::MessageCompleted(MessageCompleted {
                text,
                finish_reason: finish_reason.as_str().to_owned(),
                parent_call_id: None,
            }),
            StepEvent::ActionsRequested { calls } => {
                EventData::ActionsRequested(ActionsRequested {
                    calls,
                    direct: false,
                })
            }
            StepEvent::ActionResult {
                call_id,
                tool_name,
                output,
                is_error,
                duration_ms,
            } => EventData::ActionResult(ActionResult {
                call_id,
                tool_name,
                output,
                is_error,
                duration_ms,
            }),
            StepEvent::StepCompleted {
                step,
                duration_ms,
                usage,
                estimated_input_tokens,
                model,
                cost_usd,
            } => EventData::StepCompleted(StepCompleted {
                step,
                duration_ms,
                usage,
                estimated_input_tokens,
                model: Some(model),
                cost_usd,
            }),
            StepEvent::ContextCompacted {
                messages,
                summary,
                tokens_before,
                tokens_after,
                usage,
                cost_usd,
            } => EventData::ContextCompacted(ContextCompacted {
                messages,
                summary,
                tokens_before,
                tokens_after,
                usage,
                cost_usd,
            }),
            StepEvent::ApprovalRequested {
                call_id,
                tool_name,
                input,
            } => EventData::ApprovalRequested(ApprovalRequested {
                call_id,
                tool_name,
                input,
            }),
            StepEvent::ClientActionsRequested { calls } => {
                EventData::ClientActionsRequested(ClientActionsRequested { calls })
            }
            StepEvent::ApprovalResolved {
                call_id,
                tool_name,
                decision,
            } => EventData::ApprovalResolved(approval_resolved(&call_id, &tool_name, &decision)),
            StepEvent::SubagentCalled {
                call_id,
                subagent,
                prompt,
            } => EventData::SubagentCalled(SubagentCalled {
                call_id,
                subagent,
                prompt,
            }),
            StepEvent::SubagentCompleted {
                call_id,
                subagent,
                is_error,
                result,
                usage,
            } => EventData::SubagentCompleted(SubagentCompleted {
                call_id,
                subagent,
                is_error,
                result,
                usage,
            }),
            StepEvent::ActionProgress {
                call_id,
                tool_name,
                status,
                delta,
            } => EventData::ActionProgress(ActionProgress {
                call_id,
                tool_name,
                status,
                delta,
            }),
            StepEvent::SubagentStep {
                call_id,
                subagent,
                step,
                provider,
                model,
                duration_ms,
                usage,
                finish_reason,
                cost_usd,
            } => EventData::SubagentStep(SubagentStep {
                call_id,
                subagent,
                step,
                provider,
                model,
                duration_ms,
                usage,
                finish_reason,
                cost_usd,
            }),
        }
    }
}

/// The payload of `action.approval_resolved`: `decision` is `approve` or
/// `deny`, `by` who decided, `reason` when one was given.
pub fn approval_resolved(
    call_id: &str,
    tool_name: &str,
    decision: &crate::Decision,
) -> ApprovalResolved {
    ApprovalResolved {
        call_id: call_id.to_owned(),
        tool_name: tool_name.to_owned(),
        decision: decision.as_str().to_owned(),
        by: decision.by.clone(),
        reason: decision.reason.clone(),
        ..ApprovalResolved::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn data_uses_wire_names() {
        let e = StepEvent::MessageCompleted {
            text: "hi".into(),
            finish_reason: FinishReason::ToolCall,
        };
        assert_eq!(e.event_type(), EventType::MessageCompleted);
        assert_eq!(
            e.payload().to_value(),
            json!({"text": "hi", "finishReason": "tool_call"})
        );

        let e = StepEvent::ActionsRequested {
            calls: vec![ToolCall {
                call_id: "c".into(),
                tool_name: "t".into(),
                input: json!({}),
            }],
        };
        assert_eq!(
            e.payload().to_value(),
            json!({"calls": [{"callId": "c", "toolName": "t", "input": {}}]})
        );
        let e = StepEvent::ActionResult {
            call_id: "c".into(),
            tool_name: "t".into(),
            output: json!(1),
            is_error: false,
            duration_ms: 5,
        };
        assert_eq!(e.event_type().as_str(), "action.result");
        assert_eq!(
            e.payload().to_value(),
            json!({"callId": "c", "toolName": "t", "output": 1, "isError": false, "durationMs": 5})
        );
        assert_eq!(
            serde_json::to_value(FinishReason::Stop).unwrap_or_default(),
            json!("stop")
        );
    }
}
