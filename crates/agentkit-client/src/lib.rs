//! The HTTP client of agentkit's public API: what `agentkit run`, `chat`,
//! `call` and `eval` (and any Rust program driving an agentkit server) use.
//!
//! [`Client`] speaks one agent's routes (`/v1/session`, its stream and
//! events, approvals, tool calls, info) in the protocol's types: it sends
//! and returns the bodies of [`agentkit_protocol::api`] (`SendMessage`,
//! `Accepted`, `Stopped`, `ApprovalList`, `ToolCalled`, `Info`, ...), and
//! the stream yields typed [`agentkit_protocol::Event`]s. [`Settle`] is the one "has this turn
//! settled" fold a follower of the stream runs, and [`trajectory`] folds a
//! session's events into the summary `run`, `chat --json` and `trajectory`
//! print. Both read the protocol's typed payloads ([`Event::payload`]).
//!
//! Not here: anything of the server half (sessions' storage, the runtime,
//! routing). The crate reaches the network only through the plumbing's
//! process-wide HTTP client.
//!
//! [`Event::payload`]: agentkit_protocol::Event::payload

mod client;
mod error;
mod ndjson;
mod settle;
pub mod trajectory;

pub use client::{Client, SessionCursor};
pub use error::{Error, NdjsonError, NdjsonErrorReason, Result};
pub use ndjson::{parse_ndjson, parse_ndjson_line};
pub use settle::Settle;
pub use trajectory::Trajectory;
