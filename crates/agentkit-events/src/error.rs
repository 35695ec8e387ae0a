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
        /// The host resource the first error ran out of, if it was one.
        exhausted: Option<Exhausted>,
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
    /// The host resource this error ran out of (a full volume, no
    /// descriptors left), if that is what it is: a condition of the host,
    /// not of the request, which the facade answers as such.
    pub fn exhausted(&self) -> Option<Exhausted> {
        match self {
            Error::Io { source, .. } => Exhausted::of(source),
            Error::SessionFailed { exhausted, .. } => *exhausted,
            _ => None,
        }
    }

    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }
}

/// A resource of the host that ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exhausted {
    /// The volume holding the state is full: no space, no inodes left
    /// (`ENOSPC`, both), or the user's quota is spent (`EDQUOT`).
    Storage,
    /// The process or the system holds as many open files as it may
    /// (`EMFILE`, `ENFILE`).
    Descriptors,
}

impl Exhausted {
    /// What `error` ran out of, if it says it ran out of something.
    pub fn of(error: &std::io::Error) -> Option<Exhausted> {
        use nix::errno::Errno;
        match error.kind() {
            std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => {
                return Some(Exhausted::Storage);
            }
            _ => {}
        }
        match Errno::from_raw(error.raw_os_error()?) {
            Errno::ENOSPC | Errno::EDQUOT => Some(Exhausted::Storage),
            Errno::EMFILE | Errno::ENFILE => Some(Exhausted::Descriptors),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_full_volume_and_a_full_descriptor_table_are_told_apart_from_other_errors() {
        use nix::errno::Errno;
        let os = |e: Errno| std::io::Error::from_raw_os_error(e as i32);
        assert_eq!(Exhausted::of(&os(Errno::ENOSPC)), Some(Exhausted::Storage));
        assert_eq!(Exhausted::of(&os(Errno::EDQUOT)), Some(Exhausted::Storage));
        assert_eq!(
            Exhausted::of(&os(Errno::EMFILE)),
            Some(Exhausted::Descriptors)
        );
        assert_eq!(
            Exhausted::of(&os(Errno::ENFILE)),
            Some(Exhausted::Descriptors)
        );
        assert_eq!(Exhausted::of(&os(Errno::EACCES)), None);
        assert_eq!(Exhausted::of(&std::io::Error::other("no errno")), None);
        let io = Error::io("create", "/state/x", os(Errno::ENOSPC));
        assert_eq!(io.exhausted(), Some(Exhausted::Storage));
        let failed = Error::SessionFailed {
            session: SessionId::parse("s_1").unwrap(),
            reason: "no space".into(),
            exhausted: Some(Exhausted::Storage),
        };
        assert_eq!(failed.exhausted(), Some(Exhausted::Storage));
    }
}
