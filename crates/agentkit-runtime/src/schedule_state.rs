//! The run-time state of the schedules: each one's last run and the work
//! still going, the tick counters, and the Rust handlers. A leaf: the
//! runtime holds it, the `Schedules` part (`schedules.rs`) works on it.

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use serde::Serialize;

/// One run of a schedule as `/v1/info` and the dev dispatch show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleLastRun {
    /// When it started (ISO-8601 UTC).
    pub at: String,
    /// `"tick"` (the cron cadence) or `"dispatch"` (by hand).
    pub trigger: &'static str,
    /// `"running"`, `"ok"`, `"failed"`, or `"interrupted"` (the host
    /// stopped while it ran).
    pub outcome: &'static str,
    /// The sessions it started or sent into (for a tool or command, the
    /// ones it reached through the host bridge's `send`).
    pub session_ids: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
}

/// In-memory state of the schedules: what each one's last run started,
/// and the Rust handlers `handler = "<name>"` refers to.
#[derive(Debug, Default)]
pub(crate) struct ScheduleState {
    /// Ticks fired, ticks skipped, and the summed lateness of the fired
    /// ones in ms (for `/metrics`).
    pub(crate) fired: std::sync::atomic::AtomicU64,
    pub(crate) skipped: std::sync::atomic::AtomicU64,
    pub(crate) late_ms: std::sync::atomic::AtomicU64,
    pub(crate) runs: Mutex<HashMap<String, LastRun>>,
    /// The stored records were read into `runs`.
    pub(crate) loaded: std::sync::OnceLock<()>,
    /// The `ScheduleHandlers` set at mount, held without naming the type:
    /// a handler takes a `ScheduleRun`, which holds the runtime, and the
    /// runtime holds this state, so naming it here would make the
    /// runtime's modules a circle. `Schedules::handler` reads it back.
    pub(crate) handlers: Mutex<Option<Arc<dyn Any + Send + Sync>>>,
}

#[derive(Debug, Default, Clone)]
pub(crate) struct LastRun {
    pub(crate) sessions: Vec<String>,
    /// What `/v1/info` shows of the last run.
    pub(crate) record: Option<ScheduleLastRun>,
    /// Work of this schedule still going: deterministic tool calls, a Rust
    /// handler and its `wait_until` work.
    pub(crate) calls: Arc<AtomicUsize>,
}
