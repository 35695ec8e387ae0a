//! The per-agent key-value store server tools reach through the host
//! bridge: JSON values under string keys, with an optional time to live,
//! in the agent's `agentkit.sqlite` (table `kv`).
//!
//! On one host the entries live in the `kv` table of the agent's
//! `agentkit.sqlite`, written by its one writer (`local.rs::LocalKv`); on
//! a shared store (`--database-url`), in that store. Both sit behind one
//! trait (`agentkit_store::SharedKv`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::error::{Error, Result};

/// The longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 512;

/// Milliseconds since the Unix epoch; injectable for tests.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

fn system_clock() -> Clock {
    Arc::new(|| chrono::Utc::now().timestamp_millis())
}

/// One stored entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KvEntry {
    pub key: String,
    pub value: Value,
    /// When the entry expires (ms since the epoch), if it has a TTL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

/// One agent's key-value store. Cheap to clone.
#[derive(Clone)]
pub struct KvStore {
    table: Arc<dyn agentkit_store::SharedKv>,
    clock: Clock,
}

impl std::fmt::Debug for KvStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KvStore")
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

fn check_key(key: &str) -> Result<()> {
    if key.is_empty() || key.len() > MAX_KEY_BYTES {
        return Err(Error::BadRequest {
            message: format!("a key is 1 to {MAX_KEY_BYTES} bytes"),
        });
    }
    Ok(())
}

impl KvStore {
    /// The store in `<state_dir>/agentkit.sqlite` (created if needed),
    /// written through the database's one writer, which the agent's
    /// runtime shares when it runs in this process.
    pub fn open(state_dir: &Path) -> Result<KvStore> {
        KvStore::open_with_clock(state_dir, system_clock())
    }

    /// [`KvStore::open`] with an injected clock (TTL tests).
    pub fn open_with_clock(state_dir: &Path, clock: Clock) -> Result<KvStore> {
        let db = crate::db::Db::open_shared(state_dir)?;
        Ok(KvStore {
            table: Arc::new(crate::local::LocalKv::new(db)),
            clock,
        })
    }

    /// This store, kept in the store several hosts share
    /// (`--database-url`) under agent `agent` instead of this host's
    /// `agentkit.sqlite`.
    pub fn shared(mut self, backend: &dyn agentkit_store::SharedBackend, agent: &str) -> KvStore {
        self.table = backend.agent(agent, 1).kv;
        self
    }

    /// The value under `key`, unless absent or expired.
    pub async fn get(&self, key: &str) -> Result<Option<KvEntry>> {
        check_key(key)?;
        let row = self.table.get(key, (self.clock)()).await?;
        Ok(row.map(entry))
    }

    /// Stores `value` under `key`, replacing what was there; with `ttl`,
    /// the entry disappears after that long.
    pub async fn set(&self, key: &str, value: &Value, ttl: Option<Duration>) -> Result<KvEntry> {
        check_key(key)?;
        let now = (self.clock)();
        let expires_at =
            ttl.map(|t| now.saturating_add(i64::try_from(t.as_millis()).unwrap_or(i64::MAX)));
        self.table
            .set(key, &value.to_string(), expires_at, now)
            .await?;
        Ok(KvEntry {
            key: key.to_owned(),
            value: value.clone(),
            expires_at,
        })
    }

    /// Removes `key`; answers whether a live entry was there.
    pub async fn delete(&self, key: &str) -> Result<bool> {
        check_key(key)?;
        Ok(self.table.delete(key, (self.clock)()).await?)
    }

    /// Live entries whose key starts with `prefix`, in key order, at most
    /// `limit`.
    pub async fn list(&self, prefix: &str, limit: usize) -> Result<Vec<KvEntry>> {
        self.list_after(prefix, "", limit).await
    }

    /// [`list`](Self::list) from the first key after `after` (byte order):
    /// the next page after a page whose last key was `after`.
    pub async fn list_after(
        &self,
        prefix: &str,
        after: &str,
        limit: usize,
    ) -> Result<Vec<KvEntry>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .table
            .list(prefix, after, limit, (self.clock)())
            .await?;
        Ok(rows.into_iter().map(entry).collect())
    }
}

/// An entry as a store reads it.
fn entry((key, text, expires_at): agentkit_store::KvRow) -> KvEntry {
    KvEntry {
        key,
        value: serde_json::from_str(&text).unwrap_or(Value::String(text)),
        expires_at,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::atomic::{AtomicI64, Ordering};

    use serde_json::json;

    use super::*;

    #[tokio::test]
    async fn set_get_delete_list_and_ttl_with_an_injected_clock() {
        let dir = tempfile::tempdir().unwrap();
        let now = Arc::new(AtomicI64::new(1_000_000));
        let clock_now = now.clone();
        let kv = KvStore::open_with_clock(
            dir.path(),
            Arc::new(move || clock_now.load(Ordering::SeqCst)),
        )
        .unwrap();
        kv.set("user:1", &json!({"name": "Ada"}), None)
            .await
            .unwrap();
        kv.set("user:2", &json!("Bob"), Some(Duration::from_secs(10)))
            .await
            .unwrap();
        kv.set("user_%", &json!(3), None).await.unwrap();
        kv.set("other", &json!(true), None).await.unwrap();
        let got = kv.get("user:1").await.unwrap().unwrap();
        assert_eq!(got.value, json!({"name": "Ada"}));
        assert_eq!(got.expires_at, None);
        assert_eq!(
            kv.get("user:2").await.unwrap().unwrap().expires_at,
            Some(1_010_000)
        );
        let keys = |v: Vec<KvEntry>| v.into_iter().map(|e| e.key).collect::<Vec<_>>();
        assert_eq!(
            keys(kv.list("user", 100).await.unwrap()),
            ["user:1", "user:2", "user_%"]
        );
        assert_eq!(keys(kv.list("user_", 100).await.unwrap()), ["user_%"]);
        assert_eq!(keys(kv.list("", 2).await.unwrap()), ["other", "user:1"]);

        // Past its TTL the entry is gone from get, list and delete.
        now.fetch_add(10_000, Ordering::SeqCst);
        assert_eq!(kv.get("user:2").await.unwrap(), None);
        assert!(!kv.delete("user:2").await.unwrap());
        assert!(kv.delete("user:1").await.unwrap());
        assert!(!kv.delete("user:1").await.unwrap());
        assert_eq!(keys(kv.list("user", 100).await.unwrap()), ["user_%"]);

        // Overwriting replaces value and TTL; the store survives a reopen.
        kv.set("other", &json!(false), Some(Duration::from_secs(1)))
            .await
            .unwrap();
        kv.set("other", &json!(1), None).await.unwrap();
        drop(kv);
        let again = KvStore::open(dir.path()).unwrap();
        assert_eq!(again.get("other").await.unwrap().unwrap().value, json!(1));
        assert!(matches!(again.get("").await, Err(Error::BadRequest { .. })));
    }
}
