//! The agentkit session runtime: chat and task sessions, turns and
//! follow-ups under an admission policy, workspaces, and the conversation
//! folded from the event log.
//!
//! A session is a channel, an owning principal, a conversation, a
//! workspace and an append-only event stream (`agentkit-events`). The
//! runtime runs one turn at a time per session through `agentkit-harness`
//! and records every step; the next turn's conversation is a fold over the
//! stored events, so a restart loses nothing: a turn cut short by a crash is
//! recorded as `turn.failed` ("turn interrupted") when the runtime reopens.
//!
//! Deterministic tool calls ([`ToolCalls::call`]) run a server tool
//! with caller-chosen input, in an ephemeral workspace or inside a session.
//!
//! Schedules ([`Schedules::run`], [`Schedules::dispatch`])
//! fire on the runtime's [`Clock`] (Rust handlers: [`ScheduleHandler`]); reminders ([`Reminders::create`],
//! [`Reminders::run`]) are durable in `agentkit.sqlite`.
//!
//! Calls that need approval park durably ([`AgentRuntime::approvals`],
//! [`Approvals::resolve`]): a restart keeps them listed, and
//! approving one afterwards resumes the conversation from the log. Calls
//! of tools a client declared wait the same way for the client's result
//! ([`Approvals::answer_client`]).
//!
//! A/B experiments enrol new sessions and pick the agent each turn runs as
//! (`ab.rs`); per-variant metrics and feedback are not here yet. The
//! runtime knows nothing
//! of HTTP: the facade maps [`Error::status`] to responses.

mod ab;
mod ab_local;
mod ab_metrics;
mod ab_stats;
mod admission;
mod approval_gate;
mod approvals;
mod artifacts;
mod artifacts_local;
mod clock;
mod command;
mod context;
mod cost;
mod db;
mod deletion;
mod dispatch;
mod emit;
mod error;
mod files;
mod fold;
mod fork;
mod hooks;
mod journal;
mod kv;
mod listing;
mod local;
mod log;
mod mailbox;
mod memory;
mod memory_local;
mod meta;
mod registry;
mod reminder_types;
mod reminders;
mod reminders_local;
mod requests;
mod runtime;
mod schedule_handlers;
mod schedule_state;
mod schedules;
mod session;
mod session_command;
mod session_counts;
mod sessions;
mod shared;
mod steps;
mod tool_call;
mod trace;
mod util;
mod worker;
mod workspace;

pub use ab_metrics::{EVAL_LABEL, Experiments};
pub use agentkit_harness::{CallOrigin, CallPrincipal, Decision, DynTool, RustTool, ToolSource};
pub use agentkit_store::{SharedBackend, memory::MemoryBackend};
pub use approvals::{Approvals, PendingApproval};
pub use artifacts::{
    ArtifactFilter, ArtifactPage, Artifacts, DEFAULT_KIND as DEFAULT_ARTIFACT_KIND,
    MAX_ARTIFACT_BYTES, MAX_ARTIFACT_KEY_BYTES, TAG_TOOL, TagRequest,
};
pub use clock::{BoxFuture, Clock, ManualClock, SystemClock};
pub use command::CommandOutcome;
pub use deletion::{Retention, Swept};
pub use error::{Error, InputError, Result};
pub use files::{
    FilePage, Files, FilesCaller, MAX_FILE_BYTES, OpenedFile, check_size as check_file_size,
    content_type,
};
pub use fold::conversation;
pub use fork::Forks;
pub use hooks::{HOOK_QUEUE, HookFn, HookSpec, HookStats, HookTarget, Hooks, SIGNATURE_HEADER};
pub use journal::{JOURNAL_IN_WORKSPACE, JOURNAL_KEEP, journal_path};
pub use kv::{Clock as KvClock, KvEntry, KvStore, MAX_KEY_BYTES};
pub use listing::{SessionPage, SessionStatus};
pub use log::{EventLog, Follow};
pub use memory::{
    MAX_MEMORY_BYTES, MEMORY_TOOLS, Memories, MemoryPage, PRINCIPAL_SCOPE, RECALL_MAX,
    RECALL_WINDOW,
};
pub use meta::{Owner, SessionMeta, SessionMode};
pub use reminder_types::{
    Followup, HANDLER_LOST_ON_RESTART, NewReminder, Reminder, ReminderAction, ReminderFired,
    ReminderHandler, ReminderHandlers, ReminderOutcome, ReminderRequest, ReminderTick,
    ReminderWhen, parse_when,
};
pub use reminders::Reminders;
pub use requests::{AnsweredClient, ResolvedApproval, ToolCallOutcome};
pub use runtime::{
    Accepted, AgentRuntime, FollowUp, HTTP_CHANNEL, RuntimeOptions, RuntimeStats, SendRequest,
    SessionSummary, WeakRuntime,
};
pub use schedule_handlers::{
    Receive, ScheduleError, ScheduleHandler, ScheduleHandlers, ScheduleRun,
};
pub use schedule_state::ScheduleLastRun;
pub use schedules::{SCHEDULE_CHANNEL, ScheduleStatus, Schedules, schedule_owner};
pub use session_counts::{DeleteReason, SessionsDeleted};
pub use steps::Steps;
pub use tool_call::ToolCalls;
pub use workspace::{materialize, safe_join};
