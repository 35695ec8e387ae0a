//! A turn seen as a task, for the protocols that speak of tasks: an A2A
//! task (`a2a/`) and an MCP 2026-07-28 task of `ask` (`mcp.rs`). A task is
//! one turn of a session, found again from the session's log alone
//! (`task.rs`); its states and messages are A2A's wire shapes (`wire.rs`),
//! which the MCP tasks reuse, and A2A 0.3's (`wire_03.rs`); an A2A task's
//! webhooks follow it (`push.rs`). A leaf: both front-ends read it, and it reads neither.

pub(crate) mod push;
pub(crate) mod task;
pub(crate) mod wire;
pub(crate) mod wire_03;
