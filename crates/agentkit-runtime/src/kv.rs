//! The per-agent key-value store server tools reach through the host
//! bridge: JSON values under string keys, with an optional time to live,
//! in the agent's `agentkit.sqlite` (table `kv`).
//!
//! The database file is shared with other stores of the agent (reminders,
//! A/B assignments…), each opening its own connection and creating only its
//! own tables; WAL mode and a busy timeout let them write side by side.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};
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

/// One agent's key-value store. Cheap to clone; operations run on the
/// blocking pool.
#[derive(Clone)]
pub struct KvStore {
    conn: Arc<Mutex<Connection>>,
    path: PathBuf,
    clock: Clock,
    /// Serving on a shared database: the entries live there instead.
    shared: Option<Arc<dyn agentkit_store::SharedKv>>,
}

impl std::fmt::Debug for KvStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KvStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn db_error(path: &Path, e: rusqlite::Error) -> Error {
    Error::Io {
        action: "use the key-value store",
        path: path.to_path_buf(),
        source: std::io::Error::other(e),
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
    /// Opens (creating) `<state_dir>/agentkit.sqlite` and the `kv` table.
    pub fn open(state_dir: &Path) -> Result<KvStore> {
        KvStore::open_with_clock(state_dir, system_clock())
    }

    /// [`KvStore::open`] with an injected clock (TTL tests).
    pub fn open_with_clock(state_dir: &Path, clock: Clock) -> Result<KvStore> {
        std::fs::create_dir_all(state_dir).map_err(|e| Error::io("create", state_dir, e))?;
        let path = state_dir.join("agentkit.sqlite");
        let conn = Connection::open(&path).map_err(|e| db_error(&path, e))?;
        conn.busy_timeout(Duration::from_secs(5))
            .map_err(|e| db_error(&path, e))?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(|e| db_error(&path, e))?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS kv (
                key TEXT PRIMARY KEY NOT NULL,
                value TEXT NOT NULL,
                expires_at INTEGER,
                updated_at INTEGER NOT NULL
            );",
        )
        .map_err(|e| db_error(&path, e))?;
        Ok(KvStore {
            conn: Arc::new(Mutex::new(conn)),
            path,
            clock,
            shared: None,
        })
    }

    /// This store, kept in the store several hosts share
    /// (`--database-url`) under agent `agent` instead of this host's
    /// `agentkit.sqlite`.
    pub fn shared(mut self, backend: &dyn agentkit_store::SharedBackend, agent: &str) -> KvStore {
        self.shared = Some(backend.agent(agent, 1).kv);
        self
    }

    async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection, i64) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T> {
        let conn = self.conn.clone();
        let path = self.path.clone();
        let now = (self.clock)();
        tokio::task::spawn_blocking(move || {
            let conn = conn.lock().unwrap_or_else(|e| e.into_inner());
            f(&conn, now).map_err(|e| db_error(&path, e))
        })
        .await
        .map_err(|e| Error::task("a key-value operation", e))?
    }

    /// The value under `key`, unless absent or expired.
    pub async fn get(&self, key: &str) -> Result<Option<KvEntry>> {
        check_key(key)?;
        if let Some(table) = &self.shared {
            let row = table.get(key, (self.clock)()).await?;
            return Ok(row.map(entry));
        }
        let key = key.to_owned();
        self.with(move |c, now| {
            c.execute(
                "DELETE FROM kv WHERE key = ?1 AND expires_at IS NOT NULL AND expires_at <= ?2",
                params![key, now],
            )?;
            c.query_row(
                "SELECT value, expires_at FROM kv WHERE key = ?1",
                params![key],
                |row| {
                    let text: String = row.get(0)?;
                    Ok(KvEntry {
                        key: key.clone(),
                        value: serde_json::from_str(&text).unwrap_or(Value::String(text)),
                        expires_at: row.get(1)?,
                    })
                },
            )
            .optional()
        })
        .await
    }

    /// Stores `value` under `key`, replacing what was there; with `ttl`,
    /// the entry disappears after that long.
    pub async fn set(&self, key: &str, value: &Value, ttl: Option<Duration>) -> Result<KvEntry> {
        check_key(key)?;
        if let Some(table) = &self.shared {
            let now = (self.clock)();
            let expires_at = ttl.map(|t| now.saturating_add(t.as_millis() as i64));
            table.set(key, &value.to_string(), expires_at, now).await?;
            return Ok(KvEntry {
                key: key.to_owned(),
                value: value.clone(),
                expires_at,
            });
        }
        let key = key.to_owned();
        let text = value.to_string();
        let value = value.clone();
        self.with(move |c, now| {
            let expires_at = ttl.map(|t| now.saturating_add(t.as_millis() as i64));
            c.execute(
                "INSERT INTO kv (key, value, expires_at, updated_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(key) DO UPDATE SET value = ?2, expires_at = ?3, updated_at = ?4",
                params![key, text, expires_at, now],
            )?;
            Ok(KvEntry {
                key,
                value,
                expires_at,
            })
        })
        .await
    }

    /// Removes `key`; answers whether a live entry was there.
    pub async fn delete(&self, key: &str) -> Result<bool> {
        check_key(key)?;
        if let Some(table) = &self.shared {
            return Ok(table.delete(key, (self.clock)()).await?);
        }
        let key = key.to_owned();
        self.with(move |c, now| {
            let n = c.execute(
                "DELETE FROM kv WHERE key = ?1 AND (expires_at IS NULL OR expires_at > ?2)",
                params![key, now],
            )?;
            c.execute("DELETE FROM kv WHERE key = ?1", params![key])?;
            Ok(n > 0)
        })
        .await
    }

    /// Live entries whose key starts with `prefix`, in key order, at most
    /// `limit`.
    pub async fn list(&self, prefix: &str, limit: usize) -> Result<Vec<KvEntry>> {
        let prefix = prefix.to_owned();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        if let Some(table) = &self.shared {
            let rows = table.list(&prefix, limit, (self.clock)()).await?;
            return Ok(rows.into_iter().map(entry).collect());
        }
        self.with(move |c, now| {
            c.execute(
                "DELETE FROM kv WHERE expires_at IS NOT NULL AND expires_at <= ?1",
                params![now],
            )?;
            // `substr` rather than LIKE: keys may hold `%` and `_`.
            let mut stmt = c.prepare(
                "SELECT key, value, expires_at FROM kv
                 WHERE substr(key, 1, length(?1)) = ?1 ORDER BY key LIMIT ?2",
            )?;
            let rows = stmt.query_map(params![prefix, limit], |row| {
                let text: String = row.get(1)?;
                Ok(KvEntry {
                    key: row.get(0)?,
                    value: serde_json::from_str(&text).unwrap_or(Value::String(text)),
                    expires_at: row.get(2)?,
                })
            })?;
            rows.collect()
        })
        .await
    }
}

/// An entry read from the shared database.
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
