//! The runtime's errors. Each says which HTTP status the facade answers
//! with, so the mapping lives in one place.

use agentkit_events::Exhausted;
use agentkit_protocol::{ErrorCode, InvalidSessionId};

/// What a session operation can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    InvalidSessionId(#[from] InvalidSessionId),
    #[error("no session `{id}`")]
    SessionNotFound { id: String },
    #[error("session `{id}` belongs to another principal")]
    Forbidden { id: String },
    #[error("the continuation token is stale: use the token from the last accepted message")]
    StaleContinuation,
    #[error("session `{id}` is a task session and does not accept follow-ups")]
    TaskSession { id: String },
    #[error("session `{id}` is running a turn")]
    SessionBusy { id: String },
    #[error("{message}")]
    BadRequest { message: String },
    #[error("event {at} falls inside a turn: fork at a turn boundary ({})", boundaries(*.before, *.after))]
    InsideTurn {
        at: u64,
        before: Option<u64>,
        after: Option<u64>,
    },
    #[error("no server tool `{name}`; available: {}", if .available.is_empty() { "none".to_owned() } else { .available.join(", ") })]
    UnknownTool {
        name: String,
        available: Vec<String>,
    },
    #[error("invalid input for `{tool}`: {}", .errors.iter().map(|e| format!("{}: {}", if e.path.is_empty() { "/" } else { &e.path }, e.message)).collect::<Vec<_>>().join("; "))]
    InvalidInput {
        tool: String,
        errors: Vec<InputError>,
    },
    #[error("no {what} `{id}`")]
    NotFound { what: &'static str, id: String },
    #[error("{what} `{id}` belongs to another principal")]
    NotOwned { what: &'static str, id: String },
    #[error("{message}")]
    NotAvailable { message: String },
    /// Over a size cap (the message names it).
    #[error("{message}")]
    TooLarge { message: String },
    #[error("no call `{call_id}` waits for approval in this session")]
    ApprovalNotFound { call_id: String },
    #[error("call `{call_id}` was already approved or denied")]
    ApprovalResolved { call_id: String },
    #[error(
        "no call `{call_id}` of a client tool waits for its result in this session (answered already, withdrawn, or never asked)"
    )]
    ClientCallNotWaiting { call_id: String },
    #[error("schedule `{id}`: the handler failed: {message}")]
    ScheduleFailed { id: String, message: String },
    #[error("event store")]
    Store(#[from] agentkit_events::Error),
    /// The shared database (`--database-url`): unreachable, or the
    /// session is held by another host (a turn runs there).
    #[error("{0}")]
    Shared(#[from] agentkit_store::SharedError),
    /// The host running the session answered a routed request with an
    /// error (`mailbox.rs`): its status, code and message, as is.
    #[error("{message}")]
    Routed {
        status: u16,
        code: ErrorCode,
        message: String,
    },
    /// A routed request got no outcome in time; the message says whether
    /// it may have been applied.
    #[error("{message}")]
    RouteTimeout { message: String },
    /// A blocking task panicked (or the runtime is shutting down): a
    /// fault of the server, never of the request.
    #[error("{what} failed: the server's task did not finish ({message})")]
    Task { what: &'static str, message: String },
    #[error("state database `{path}`")]
    Db {
        path: std::path::PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("cannot {action} `{path}`")]
    Io {
        action: &'static str,
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// The host resource this error ran out of (a full state volume, no
    /// descriptors left), found along its chain of sources: a condition
    /// of the host, answered `507` / `503` rather than `500`.
    pub fn exhausted(&self) -> Option<Exhausted> {
        if let Error::Store(e) = self {
            return e.exhausted();
        }
        let mut next: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(e) = next {
            if let Some(io) = e.downcast_ref::<std::io::Error>()
                && let Some(x) = Exhausted::of(io)
            {
                return Some(x);
            }
            if let Some(rusqlite::Error::SqliteFailure(f, _)) = e.downcast_ref::<rusqlite::Error>()
                && f.code == rusqlite::ErrorCode::DiskFull
            {
                return Some(Exhausted::Storage);
            }
            next = e.source();
        }
        None
    }

    /// The stable error code of the JSON error body.
    pub fn code(&self) -> ErrorCode {
        match self.exhausted() {
            Some(Exhausted::Storage) => return ErrorCode::StorageFull,
            Some(Exhausted::Descriptors) => return ErrorCode::Overloaded,
            None => {}
        }
        match self {
            Error::InvalidSessionId(_) => ErrorCode::InvalidSessionId,
            Error::SessionNotFound { .. } => ErrorCode::SessionNotFound,
            Error::Forbidden { .. } | Error::NotOwned { .. } => ErrorCode::Forbidden,
            Error::StaleContinuation => ErrorCode::StaleContinuation,
            Error::TaskSession { .. } => ErrorCode::TaskSession,
            Error::SessionBusy { .. } => ErrorCode::SessionBusy,
            Error::BadRequest { .. } => ErrorCode::BadRequest,
            Error::InsideTurn { .. } => ErrorCode::InsideTurn,
            Error::UnknownTool { .. } => ErrorCode::UnknownTool,
            Error::InvalidInput { .. } => ErrorCode::InvalidInput,
            Error::NotFound { .. } | Error::ClientCallNotWaiting { .. } => ErrorCode::NotFound,
            Error::NotAvailable { .. } => ErrorCode::NotAvailable,
            Error::TooLarge { .. } => ErrorCode::PayloadTooLarge,
            Error::ApprovalNotFound { .. } => ErrorCode::ApprovalNotFound,
            Error::ApprovalResolved { .. } => ErrorCode::ApprovalResolved,
            Error::ScheduleFailed { .. } => ErrorCode::ScheduleFailed,
            Error::Routed { code, .. } => *code,
            Error::RouteTimeout { .. } => ErrorCode::RequestTimeout,
            Error::Shared(
                agentkit_store::SharedError::Busy { .. }
                | agentkit_store::SharedError::Fenced { .. },
            ) => ErrorCode::SessionBusy,
            Error::Store(_)
            | Error::Io { .. }
            | Error::Db { .. }
            | Error::Task { .. }
            | Error::Shared(_) => ErrorCode::Internal,
        }
    }

    /// The HTTP status the facade answers with.
    pub fn status(&self) -> u16 {
        match self.exhausted() {
            Some(Exhausted::Storage) => return 507,
            Some(Exhausted::Descriptors) => return 503,
            None => {}
        }
        match self {
            Error::InvalidSessionId(_) | Error::BadRequest { .. } | Error::InvalidInput { .. } => {
                400
            }
            Error::SessionNotFound { .. }
            | Error::UnknownTool { .. }
            | Error::NotFound { .. }
            | Error::ClientCallNotWaiting { .. }
            | Error::ApprovalNotFound { .. } => 404,
            Error::NotAvailable { .. } => 501,
            Error::TooLarge { .. } => 413,
            Error::Forbidden { .. } | Error::NotOwned { .. } => 403,
            Error::StaleContinuation
            | Error::TaskSession { .. }
            | Error::SessionBusy { .. }
            | Error::ApprovalResolved { .. }
            | Error::InsideTurn { .. }
            | Error::Shared(
                agentkit_store::SharedError::Busy { .. }
                | agentkit_store::SharedError::Fenced { .. },
            ) => 409,
            Error::Routed { status, .. } => *status,
            Error::RouteTimeout { .. }
            | Error::Shared(agentkit_store::SharedError::Unavailable { .. }) => 503,
            Error::Store(_)
            | Error::Shared(_)
            | Error::Task { .. }
            | Error::Io { .. }
            | Error::Db { .. }
            | Error::ScheduleFailed { .. } => 500,
        }
    }

    /// A blocking task that did not finish (it panicked, or shutdown
    /// cancelled it): logged here, once, and answered `500 internal`.
    pub(crate) fn task(what: &'static str, e: tokio::task::JoinError) -> Error {
        tracing::error!(error = %e, "{what}: a blocking task did not finish");
        Error::Task {
            what,
            message: if e.is_panic() {
                "it panicked".to_owned()
            } else {
                "it was cancelled".to_owned()
            },
        }
    }

    pub(crate) fn io(
        action: &'static str,
        path: &std::path::Path,
        source: std::io::Error,
    ) -> Error {
        Error::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// The turn boundaries nearest an index, for [`Error::InsideTurn`].
fn boundaries(before: Option<u64>, after: Option<u64>) -> String {
    match (before, after) {
        (Some(b), Some(a)) => format!("atIndex {b} or {a}"),
        (Some(b), None) => format!("atIndex {b}; the turn after it has not ended yet"),
        (None, Some(a)) => format!("atIndex {a}"),
        (None, None) => "none yet".to_owned(),
    }
}

/// One schema violation of a tool's input.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct InputError {
    /// A JSON pointer into the input (`""` for the whole input).
    pub path: String,
    pub message: String,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn io(errno: i32) -> Error {
        Error::io(
            "create",
            std::path::Path::new("/state/sessions/s"),
            std::io::Error::from_raw_os_error(errno),
        )
    }

    #[test]
    fn a_host_out_of_storage_or_descriptors_answers_507_or_503_not_500() {
        // ENOSPC, EMFILE, EACCES on Linux and the BSDs alike.
        let full = io(28);
        assert_eq!((full.status(), full.code()), (507, ErrorCode::StorageFull));
        let fds = io(24);
        assert_eq!((fds.status(), fds.code()), (503, ErrorCode::Overloaded));
        let denied = io(13);
        assert_eq!((denied.status(), denied.code()), (500, ErrorCode::Internal));

        let db = Error::Db {
            path: "/state/state.db".into(),
            source: rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
                Some("database or disk is full".into()),
            ),
        };
        assert_eq!((db.status(), db.code()), (507, ErrorCode::StorageFull));

        let store = Error::Store(agentkit_events::Error::SessionFailed {
            session: agentkit_protocol::SessionId::parse("s").unwrap(),
            reason: "no space left on device".into(),
            exhausted: Some(Exhausted::Storage),
        });
        assert_eq!(store.status(), 507);
    }
}
