//! The trace context the runtime keeps in the log while tracing is on:
//! the `traceparent` a message arrived with (on `message.received`), and
//! the trace of each turn (on `turn.started`, copied where a reader may
//! not have seen that event). A turn joins the trace of the request that
//! brought its first message, or of the turn it resumes, or starts one.
//! Spans are built from these events by the facade, never here.

use agentkit_protocol::trace::{TraceParent, TurnTrace};
use agentkit_protocol::{Event, EventData};

/// A fresh span id (64 random bits, as hex).
pub(crate) fn new_span_id() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    id[..16].to_owned()
}

fn new_trace_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The trace of a new turn: a child of `resumed` (the turn it resumes),
/// else of `incoming` (the request of its first traced message), else the
/// root of a new trace.
pub(crate) fn turn_trace(
    resumed: Option<&TraceParent>,
    incoming: Option<&TraceParent>,
) -> TurnTrace {
    let own = new_span_id();
    let (tp, parent) = match resumed.or(incoming) {
        Some(parent) => (parent.with_span(own), Some(parent.span_id.clone())),
        None => (
            TraceParent {
                trace_id: new_trace_id(),
                span_id: own,
                sampled: true,
            },
            None,
        ),
    };
    TurnTrace {
        traceparent: tp.to_string(),
        parent_span_id: parent,
        turn_started_at: None,
    }
}

/// The trace of turn `turn` in `events`, with its start time, for the
/// events that carry a copy.
pub(crate) fn recorded(events: &[Event], turn: &str) -> Option<TurnTrace> {
    events
        .iter()
        .rev()
        .filter(|e| e.turn_id.as_deref() == Some(turn))
        .find_map(|e| match e.payload() {
            EventData::TurnStarted(s) => s.trace.map(|t| TurnTrace {
                turn_started_at: Some(e.at.clone()),
                ..t
            }),
            _ => None,
        })
}
