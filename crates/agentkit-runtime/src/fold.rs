//! The conversation the model sees is a fold over the session's events:
//! the event log is the single source of truth, so a restart loses nothing.

use std::collections::{BTreeSet, HashMap};

use agentkit_protocol::{Event, EventType, Message, ToolCall};
use serde_json::Value;

/// Folds `events` into the conversation so far. User messages count from
/// `message.received` (skipping the indices in `exclude`, which are the
/// messages of the turn about to run); assistant text and tool results
/// count only from turns that completed, because an interrupted or failed
/// turn may have stopped halfway through a step.
pub fn conversation(events: &[Event], exclude: &BTreeSet<u64>) -> Vec<Message> {
    // A turn that a restart cut short while a call waited for approval
    // counts once a later turn resumes it: its steps up to the parked call
    // (and the results recorded on approval) are the context of the resume.
    let completed: BTreeSet<&str> = events
        .iter()
        .filter_map(|e| match e.event_type {
            EventType::TurnCompleted => e.turn_id.as_deref(),
            EventType::TurnStarted => e.data.get("resumes").and_then(Value::as_str),
            _ => None,
        })
        .collect();
    let mut out = Vec::new();
    // Tool calls requested in a step attach to that step's assistant text.
    let mut pending_text: HashMap<&str, String> = HashMap::new();
    for e in events {
        match e.event_type {
            EventType::MessageReceived if !exclude.contains(&e.index) => {
                if let Some(text) = e.data.get("text").and_then(Value::as_str) {
                    out.push(Message::User {
                        text: text.to_owned(),
                    });
                }
            }
            _ => {}
        }
        let Some(turn) = e.turn_id.as_deref() else {
            continue;
        };
        if !completed.contains(turn) {
            continue;
        }
        match e.event_type {
            EventType::MessageCompleted => {
                let text = e
                    .data
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let finish = e
                    .data
                    .get("finishReason")
                    .and_then(Value::as_str)
                    .unwrap_or("stop");
                if finish == "tool_call" {
                    pending_text.insert(turn, text);
                } else {
                    out.push(Message::Assistant {
                        text,
                        tool_calls: Vec::new(),
                    });
                }
            }
            EventType::ActionsRequested => {
                let calls: Vec<ToolCall> = e
                    .data
                    .get("calls")
                    .and_then(|c| serde_json::from_value(c.clone()).ok())
                    .unwrap_or_default();
                let text = pending_text.remove(turn).unwrap_or_default();
                out.push(Message::Assistant {
                    text,
                    tool_calls: calls,
                });
            }
            EventType::ActionResult => {
                let get = |k: &str| {
                    e.data
                        .get(k)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                out.push(Message::Tool {
                    call_id: get("callId"),
                    tool_name: get("toolName"),
                    output: e.data.get("output").cloned().unwrap_or(Value::Null),
                    is_error: e
                        .data
                        .get("isError")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                });
            }
            _ => {}
        }
    }
    out
}
