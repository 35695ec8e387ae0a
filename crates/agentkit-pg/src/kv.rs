//! The host bridge's key-value store in PostgreSQL (`agentkit_kv`), with
//! the SQLite store's semantics: JSON text under a key, an optional expiry
//! in ms since the epoch, expired entries invisible (and deleted on read).

use agentkit_store::KvRow;

use crate::database::Database;
use crate::error::{Error, Result};

/// One agent's key-value rows. Cheap to clone.
#[derive(Debug, Clone)]
pub struct KvTable {
    db: Database,
    agent: String,
}

impl KvTable {
    pub fn new(db: Database, agent: &str) -> KvTable {
        KvTable {
            db,
            agent: agent.to_owned(),
        }
    }

    /// The live entry under `key` at `now` (ms).
    pub async fn get(&self, key: &str, now: i64) -> Result<Option<KvRow>> {
        let client = self.db.client().await?;
        client
            .execute(
                "DELETE FROM agentkit_kv WHERE agent = $1 AND key = $2 AND expires_at <= $3",
                &[&self.agent, &key, &now],
            )
            .await
            .map_err(Error::query("expire a key"))?;
        let row = client
            .query_opt(
                "SELECT key, value, expires_at FROM agentkit_kv WHERE agent = $1 AND key = $2",
                &[&self.agent, &key],
            )
            .await
            .map_err(Error::query("read a key"))?;
        Ok(row.map(|r| (r.get(0), r.get(1), r.get(2))))
    }

    /// Stores `value` (JSON text) under `key`, replacing what was there.
    pub async fn set(
        &self,
        key: &str,
        value: &str,
        expires_at: Option<i64>,
        now: i64,
    ) -> Result<()> {
        let client = self.db.client().await?;
        client
            .execute(
                "INSERT INTO agentkit_kv (agent, key, value, expires_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (agent, key) DO UPDATE SET value = EXCLUDED.value,
                     expires_at = EXCLUDED.expires_at, updated_at = EXCLUDED.updated_at",
                &[&self.agent, &key, &value, &expires_at, &now],
            )
            .await
            .map_err(Error::query("write a key"))?;
        Ok(())
    }

    /// Removes `key`; whether a live entry was there.
    pub async fn delete(&self, key: &str, now: i64) -> Result<bool> {
        let client = self.db.client().await?;
        let rows = client
            .query(
                "DELETE FROM agentkit_kv WHERE agent = $1 AND key = $2 RETURNING expires_at",
                &[&self.agent, &key],
            )
            .await
            .map_err(Error::query("delete a key"))?;
        Ok(rows
            .iter()
            .any(|r| r.get::<_, Option<i64>>(0).is_none_or(|at| at > now)))
    }

    /// Live entries whose key starts with `prefix`, in key order.
    pub async fn list(
        &self,
        prefix: &str,
        after: &str,
        limit: i64,
        now: i64,
    ) -> Result<Vec<KvRow>> {
        let client = self.db.client().await?;
        client
            .execute(
                "DELETE FROM agentkit_kv WHERE agent = $1 AND expires_at <= $2",
                &[&self.agent, &now],
            )
            .await
            .map_err(Error::query("expire keys"))?;
        // `left` rather than LIKE: keys may hold `%` and `_`.
        let rows = client
            .query(
                "SELECT key, value, expires_at FROM agentkit_kv
                 WHERE agent = $1 AND left(key, length($2)) = $2 AND key COLLATE \"C\" > $4
                 ORDER BY key COLLATE \"C\" LIMIT $3",
                &[&self.agent, &prefix, &limit, &after],
            )
            .await
            .map_err(Error::query("list keys"))?;
        Ok(rows
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect())
    }
}
