//! The agentkit session runtime: chat and task sessions, turns and
//! follow-ups, workspaces, approvals, hooks, schedules, reminders and A/B.
//!
//! Not built yet: it arrives with the sessions issue. Until then this crate
//! exports nothing.
