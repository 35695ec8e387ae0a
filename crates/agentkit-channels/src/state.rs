//! Per-session channel state: a JSON value per session, starting from the
//! channel's `state` (or `send`'s), read by templates and handlers and
//! replaced by them. Stored at `<stateDir>/channels/<id>/state/<session>.json`
//! (written to a temp file, then renamed), so it survives a restart.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agentkit_protocol::SessionId;
use serde_json::Value;

use crate::error::{Error, Result};

/// The state of every session of one channel. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct StateStore {
    dir: PathBuf,
    cache: Arc<Mutex<HashMap<String, Value>>>,
    /// The store hosts share, and this channel's id in it: no cache then
    /// (another host may have replaced a value).
    shared: Option<(Arc<dyn crate::api::ChannelStates>, String)>,
}

/// Waits for a shared-store call from the synchronous state API (tokio's
/// multi-threaded runtime, which the server runs on, lets it wait in
/// place).
fn wait<T>(f: impl std::future::Future<Output = std::result::Result<T, String>>) -> Result<T> {
    let unavailable = |why: String| Error::NotAvailable {
        what: format!("the shared channel state: {why}"),
    };
    let handle = tokio::runtime::Handle::try_current().map_err(|e| unavailable(e.to_string()))?;
    if handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
        return Err(unavailable("it needs the multi-threaded runtime".into()));
    }
    tokio::task::block_in_place(|| handle.block_on(f)).map_err(unavailable)
}

impl StateStore {
    pub(crate) fn new(dir: PathBuf) -> StateStore {
        StateStore {
            dir,
            cache: Arc::default(),
            shared: None,
        }
    }

    /// This store, kept in `shared` (under channel `channel`) when given.
    pub(crate) fn shared(
        mut self,
        shared: Option<Arc<dyn crate::api::ChannelStates>>,
        channel: &str,
    ) -> StateStore {
        self.shared = shared.map(|s| (s, channel.to_owned()));
        self
    }

    fn path(&self, session: &str) -> Result<PathBuf> {
        let id = SessionId::parse(session).map_err(|e| Error::bad_request(e.to_string()))?;
        Ok(self.dir.join(format!("{}.json", id.as_str())))
    }

    /// The state, `null` when the session has none.
    pub(crate) fn get(&self, session: &str) -> Result<Value> {
        if let Some((shared, channel)) = &self.shared {
            SessionId::parse(session).map_err(|e| Error::bad_request(e.to_string()))?;
            return Ok(wait(shared.get(channel, session))?.unwrap_or(Value::Null));
        }
        if let Some(v) = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(session)
        {
            return Ok(v.clone());
        }
        let path = self.path(session)?;
        let value = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Value::Null,
            Err(e) => return Err(Error::io("read", &path, e)),
        };
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(session.to_owned(), value.clone());
        Ok(value)
    }

    /// Replaces the state.
    pub(crate) fn set(&self, session: &str, value: Value) -> Result<()> {
        if let Some((shared, channel)) = &self.shared {
            SessionId::parse(session).map_err(|e| Error::bad_request(e.to_string()))?;
            return wait(shared.set(channel, session, &value));
        }
        let path = self.path(session)?;
        std::fs::create_dir_all(&self.dir).map_err(|e| Error::io("create", &self.dir, e))?;
        let tmp = path.with_extension("json.tmp");
        let bytes = serde_json::to_vec_pretty(&value).unwrap_or_default();
        std::fs::write(&tmp, bytes).map_err(|e| Error::io("write", &tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| Error::io("rename", &path, e))?;
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(session.to_owned(), value);
        Ok(())
    }

    /// Sets the starting state of a new session (never overwrites).
    pub(crate) fn init(&self, session: &str, value: Value) -> Result<()> {
        if self.get(session)?.is_null() {
            self.set(session, value)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn state_survives_a_new_store_and_init_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::new(dir.path().to_path_buf());
        assert_eq!(store.get("ses_1").unwrap(), Value::Null);
        store.init("ses_1", json!({"n": 1})).unwrap();
        store.init("ses_1", json!({"n": 2})).unwrap();
        store.set("ses_1", json!({"n": 3})).unwrap();
        let again = StateStore::new(dir.path().to_path_buf());
        assert_eq!(again.get("ses_1").unwrap(), json!({"n": 3}));
        assert!(store.get("../x").is_err());
    }
}
