//! The agent's artifacts in PostgreSQL (`agentkit_artifacts`): a tag is
//! one transaction (the insert, or the update of the artifact of the same
//! kind and key, then the eviction beyond `max`), so hosts tagging at
//! once never make two artifacts of one key.

use agentkit_store::{ArtifactQuery, ArtifactRow, Tagged};
use tokio_postgres::Row;

use crate::database::Database;
use crate::error::{Error, Result};

/// One agent's artifact rows. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ArtifactTable {
    db: Database,
    agent: String,
}

const COLUMNS: &str =
    "id, kind, key, data, session_id, principal_id, turn_id, created_at_ms, updated_at_ms";

fn row_of(r: &Row) -> ArtifactRow {
    ArtifactRow {
        id: r.get(0),
        kind: r.get(1),
        key: r.get(2),
        data: r.get(3),
        session_id: r.get(4),
        principal_id: r.get(5),
        turn_id: r.get(6),
        created_at_ms: r.get(7),
        updated_at_ms: r.get(8),
    }
}

impl ArtifactTable {
    pub fn new(db: Database, agent: &str) -> ArtifactTable {
        ArtifactTable {
            db,
            agent: agent.to_owned(),
        }
    }

    /// Stores `row` (updating the artifact of its kind and key, if any)
    /// and deletes the least recently updated beyond `max`.
    pub async fn tag(&self, row: &ArtifactRow, max: Option<i64>) -> Result<Tagged> {
        let mut client = self.db.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(Error::query("begin tagging an artifact"))?;
        // `xmax` is not 0 on a row this statement updated rather than
        // inserted.
        let stored = tx
            .query_one(
                &format!(
                    "INSERT INTO agentkit_artifacts (agent, {COLUMNS})
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                     ON CONFLICT (agent, kind, key) WHERE key IS NOT NULL DO UPDATE SET
                         data = EXCLUDED.data, session_id = EXCLUDED.session_id,
                         principal_id = EXCLUDED.principal_id, turn_id = EXCLUDED.turn_id,
                         updated_at_ms = EXCLUDED.updated_at_ms
                     RETURNING {COLUMNS}, xmax <> 0"
                ),
                &[
                    &self.agent,
                    &row.id,
                    &row.kind,
                    &row.key,
                    &row.data,
                    &row.session_id,
                    &row.principal_id,
                    &row.turn_id,
                    &row.created_at_ms,
                    &row.updated_at_ms,
                ],
            )
            .await
            .map_err(Error::query("tag an artifact"))?;
        let updated: bool = stored.get(9);
        let mut evicted = 0;
        if let Some(max) = max {
            evicted = tx
                .execute(
                    "DELETE FROM agentkit_artifacts WHERE agent = $1 AND id IN (
                         SELECT id FROM agentkit_artifacts WHERE agent = $1
                         ORDER BY updated_at_ms DESC, id DESC OFFSET $2)",
                    &[&self.agent, &max],
                )
                .await
                .map_err(Error::query("evict artifacts"))?;
        }
        tx.commit()
            .await
            .map_err(Error::query("commit an artifact"))?;
        Ok(Tagged {
            row: row_of(&stored),
            updated,
            evicted,
        })
    }

    pub async fn get(&self, id: &str) -> Result<Option<ArtifactRow>> {
        let client = self.db.client().await?;
        let row = client
            .query_opt(
                &format!("SELECT {COLUMNS} FROM agentkit_artifacts WHERE agent = $1 AND id = $2"),
                &[&self.agent, &id],
            )
            .await
            .map_err(Error::query("read an artifact"))?;
        Ok(row.as_ref().map(row_of))
    }

    /// A page, newest first.
    pub async fn page(&self, q: ArtifactQuery<'_>) -> Result<Vec<ArtifactRow>> {
        let client = self.db.client().await?;
        let rows = client
            .query(
                &format!(
                    "SELECT {COLUMNS} FROM agentkit_artifacts WHERE agent = $1
                     AND ($2::TEXT IS NULL OR principal_id = $2)
                     AND ($3::TEXT IS NULL OR session_id = $3)
                     AND ($4::TEXT IS NULL OR kind = $4)
                     AND ($5::TEXT IS NULL OR id < $5)
                     ORDER BY id DESC LIMIT $6"
                ),
                &[
                    &self.agent,
                    &q.principal,
                    &q.session,
                    &q.kind,
                    &q.before,
                    &q.limit,
                ],
            )
            .await
            .map_err(Error::query("list artifacts"))?;
        Ok(rows.iter().map(row_of).collect())
    }

    /// Deletes every artifact of `session`; how many.
    pub async fn delete_session(&self, session: &str) -> Result<u64> {
        let client = self.db.client().await?;
        client
            .execute(
                "DELETE FROM agentkit_artifacts WHERE agent = $1 AND session_id = $2",
                &[&self.agent, &session],
            )
            .await
            .map_err(Error::query("delete a session's artifacts"))
    }
}
