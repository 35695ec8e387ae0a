//! Plain data shared by every agentkit layer: the event vocabulary, the
//! event envelope and session ids, the HTTP API's bodies and error codes
//! ([`api`]), the OpenAI-compatible wire formats ([`openai`]) and AG-UI's ([`agui`]), and the names every other crate agrees on.
//!
//! This crate is serde-only by design: no IO, no async runtime, no other
//! agentkit crate. Anything that two layers must spell the same way lives
//! here, so that a rename is one change that the compiler follows.

pub mod ab;
pub mod agui;
pub mod api;
mod conversation;
mod envelope;
mod events;
pub mod openai;
mod payload;
mod settle;
pub mod trace;
pub mod worker;

pub use api::{Admission, ErrorBody, ErrorCode, SessionMode};
pub use conversation::{ImageRef, Message, Sizing, ToolCall, Usage};
pub use envelope::{Event, InvalidSessionId, SessionId};
pub use events::{EventType, UnknownEventType};
pub use payload::{
    AbAssigned, ActionProgress, ActionResult, ActionsRequested, Appended, ApprovalRequested,
    ApprovalResolved, ArtifactTagged, ClientActionsRequested, ClientTool, ContextCompacted,
    EventData, MemoryForgotten, MemoryRemembered, MessageCompleted, MessageDropped,
    MessageReceived, ReasoningCompleted, RequestDigest, SessionFailed, SessionForked,
    SessionStarted, StepCompleted, StepStarted, SubagentCalled, SubagentCompleted, SubagentStep,
    TurnCompleted, TurnFailed, TurnStarted,
};
pub use settle::{Seen, TurnEnd, TurnFold};
