//! The one error type of the event store.

use std::path::PathBuf;

use agentkit_protocol::SessionId;

/// Everything that can go wrong in the event store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or directory operation failed.
    #[error("{op} `{path}`: {source}")]
    Io {
        /// What we were doing (`open`, `write`, ...).
        op: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A complete line of a log is not the event it should be: invalid
    /// JSON before the last line, an index that is not its line number, or
    /// an event of another session.
    #[error("corrupt event log `{path}` at line {line}: {reason}")]
    Corrupt {
        /// The log file.
        path: PathBuf,
        /// The 1-based line number.
        line: u64,
        /// What is wrong with the line.
        reason: String,
    },
    /// The session has no event log yet.
    #[error("session `{session}` has no event log")]
    SessionNotFound {
        /// The session asked for.
        session: SessionId,
    },
    /// An earlier write to this session's log failed; the log refuses
    /// appends until the store is reopened (which recovers the file).
    #[error("event log of session `{session}` failed earlier and is read-only: {reason}")]
    SessionFailed {
        /// The session whose log failed.
        session: SessionId,
        /// The first error, as text.
        reason: String,
    },
    /// An event could not be encoded as JSON.
    #[error("encoding an event of session `{session}`: {source}")]
    Encode {
        /// The session of the event.
        session: SessionId,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// A blocking file task panicked or was cancelled by runtime shutdown.
    #[error("event store background task failed: {0}")]
    Task(String),
}

/// The event store's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }
}
