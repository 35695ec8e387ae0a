//! How many sessions were deleted, and why. A leaf: the runtime holds the
//! counts, the retention part (`deletion.rs`) adds to them.

use std::sync::atomic::{AtomicU64, Ordering};

/// Why a session was deleted (the `reason` label of
/// `agentkit_sessions_deleted_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteReason {
    /// `DELETE /v1/session/:id`.
    Request,
    /// Idle past `[sessions] retention`.
    Retention,
    /// Beyond `[sessions] max_sessions`.
    MaxSessions,
}

impl DeleteReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DeleteReason::Request => "request",
            DeleteReason::Retention => "retention",
            DeleteReason::MaxSessions => "max_sessions",
        }
    }
}

/// Sessions deleted by this process, by reason.
#[derive(Debug, Default)]
pub(crate) struct DeletedCounts {
    request: AtomicU64,
    retention: AtomicU64,
    max_sessions: AtomicU64,
}

impl DeletedCounts {
    pub(crate) fn counter(&self, reason: DeleteReason) -> &AtomicU64 {
        match reason {
            DeleteReason::Request => &self.request,
            DeleteReason::Retention => &self.retention,
            DeleteReason::MaxSessions => &self.max_sessions,
        }
    }

    pub(crate) fn totals(&self) -> SessionsDeleted {
        SessionsDeleted {
            request: self.request.load(Ordering::Relaxed),
            retention: self.retention.load(Ordering::Relaxed),
            max_sessions: self.max_sessions.load(Ordering::Relaxed),
        }
    }
}

/// Sessions deleted by this process, by [`DeleteReason`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SessionsDeleted {
    pub request: u64,
    pub retention: u64,
    pub max_sessions: u64,
}

impl SessionsDeleted {
    /// `(reason, count)` of each reason.
    pub fn by_reason(&self) -> [(DeleteReason, u64); 3] {
        [
            (DeleteReason::Request, self.request),
            (DeleteReason::Retention, self.retention),
            (DeleteReason::MaxSessions, self.max_sessions),
        ]
    }
}
