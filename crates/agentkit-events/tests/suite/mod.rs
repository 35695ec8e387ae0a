//! Integration tests against real files in temporary directories.

mod append;
mod compact;
mod fork;
mod journal;
mod recovery;
mod spare;
mod subscribe;

use agentkit_events::{FileEventStore, StoreOptions};
use agentkit_protocol::SessionId;
use tempfile::TempDir;

pub(crate) fn id(s: &str) -> SessionId {
    SessionId::parse(s).unwrap()
}

pub(crate) fn store(options: StoreOptions) -> (TempDir, FileEventStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = FileEventStore::open(dir.path(), options).unwrap();
    (dir, store)
}

pub(crate) fn log_path(dir: &TempDir, session: &str) -> std::path::PathBuf {
    dir.path()
        .join("sessions")
        .join(session)
        .join("events.ndjson")
}
