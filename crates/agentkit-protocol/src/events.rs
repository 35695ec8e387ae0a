//! The event vocabulary: every `type` a session stream can carry.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

macro_rules! event_types {
    ($($variant:ident => $name:literal, $doc:literal;)*) => {
        /// The `type` of an event on a session stream, spelled exactly as on
        /// the wire.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
        pub enum EventType {
            $(
                #[doc = $doc]
                #[serde(rename = $name)]
                $variant,
            )*
        }

        impl EventType {
            /// Every event type, in the order of the vocabulary table.
            pub const ALL: &'static [EventType] = &[$(EventType::$variant),*];

            /// The wire name, such as `turn.completed`.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(EventType::$variant => $name,)*
                }
            }

            /// One sentence on what the event tells a subscriber.
            pub fn summary(self) -> &'static str {
                match self {
                    $(EventType::$variant => $doc,)*
                }
            }
        }
    };
}

event_types! {
    SessionStarted => "session.started", "A session was created.";
    AbAssigned => "ab.assigned", "The session was enrolled in an A/B experiment variant (sticky).";
    SessionForked => "session.forked", "The session was forked: the events before this one are a copy of another session's first events.";
    SessionWaiting => "session.waiting", "A chat session finished a turn and waits for a follow-up.";
    SessionCompleted => "session.completed", "A task session ended successfully.";
    SessionFailed => "session.failed", "A task session ended with a failure.";
    AgentBound => "agent.bound", "The session was bound to its agent runtime.";
    MessageReceived => "message.received", "A user message was accepted.";
    MessageDropped => "message.dropped", "A stop dropped queued user messages before any turn took them.";
    TurnStarted => "turn.started", "A turn began.";
    TurnCompleted => "turn.completed", "A turn ended with a result and token usage.";
    TurnFailed => "turn.failed", "A turn ended with an error or was interrupted.";
    StepStarted => "step.started", "A model step began.";
    StepCompleted => "step.completed", "A model step ended, with its duration.";
    ReasoningAppended => "reasoning.appended", "A delta of streamed reasoning.";
    ReasoningCompleted => "reasoning.completed", "A reasoning block is complete.";
    MessageAppended => "message.appended", "A delta of the assistant's reply, with the text so far.";
    MessageCompleted => "message.completed", "An assistant message is final.";
    ActionsRequested => "actions.requested", "The model requested one or more tool calls, with validated arguments.";
    ActionApprovalRequested => "action.approval_requested", "A tool call is parked until a human approves or denies it.";
    ActionApprovalResolved => "action.approval_resolved", "A parked tool call was approved or denied.";
    ActionsClientRequested => "actions.client_requested", "The model called tools the client declared: the session waits for the client's results.";
    ActionProgress => "action.progress", "A running tool call reported progress: what it is doing now, or text it has written so far.";
    ActionResult => "action.result", "A tool call finished, with its output or error.";
    SubagentCalled => "subagent.called", "The model delegated work to a subagent.";
    SubagentCompleted => "subagent.completed", "A subagent finished its delegated work.";
    SubagentStep => "subagent.step", "A subagent's model step ended: its model, duration, usage and finish reason.";
    ContextCompacted => "context.compacted", "Older turns were summarised so later requests fit the model's context window.";
    ArtifactTagged => "artifact.tagged", "An artifact was tagged (created, or updated by its kind and key) by the model or by host code.";
    MemoryRemembered => "memory.remembered", "The model kept a memory (`remember`): its id, scope and text.";
    MemoryForgotten => "memory.forgotten", "The model deleted a memory (`forget`).";
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that names no event type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownEventType(pub String);

impl fmt::Display for UnknownEventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown event type `{}`", self.0)
    }
}

impl std::error::Error for UnknownEventType {}

impl FromStr for EventType {
    type Err = UnknownEventType;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EventType::ALL
            .iter()
            .copied()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| UnknownEventType(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_serde_and_from_str() {
        for &t in EventType::ALL {
            let json = serde_json::to_string(&t).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", t.as_str()));
            assert_eq!(t.as_str().parse::<EventType>(), Ok(t));
        }
        assert!("turn.done".parse::<EventType>().is_err());
    }

    #[test]
    fn vocabulary_has_every_spec_name_once() {
        let mut names: Vec<_> = EventType::ALL.iter().map(|t| t.as_str()).collect();
        let len = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), len);
        assert_eq!(len, 31);
    }
}
