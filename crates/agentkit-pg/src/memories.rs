//! The agent's governed memories in PostgreSQL (`agentkit_memories`):
//! every host of the agent sees the same rows.

use agentkit_store::{AGENT_SCOPE, MemoryQuery, MemoryRow};
use tokio_postgres::Row;

use crate::database::Database;
use crate::error::{Error, Result};

/// One agent's memory rows. Cheap to clone.
#[derive(Debug, Clone)]
pub struct MemoryTable {
    db: Database,
    agent: String,
}

const COLUMNS: &str =
    "id, text, scope, principal_id, session_id, turn_id, event_index, created_at_ms, updated_at_ms";

fn row_of(r: &Row) -> MemoryRow {
    MemoryRow {
        id: r.get(0),
        text: r.get(1),
        scope: r.get(2),
        principal_id: r.get(3),
        session_id: r.get(4),
        turn_id: r.get(5),
        event_index: r.get(6),
        created_at_ms: r.get(7),
        updated_at_ms: r.get(8),
    }
}

impl MemoryTable {
    pub fn new(db: Database, agent: &str) -> MemoryTable {
        MemoryTable {
            db,
            agent: agent.to_owned(),
        }
    }

    pub async fn insert(&self, row: &MemoryRow) -> Result<()> {
        let client = self.db.client().await?;
        client
            .execute(
                &format!(
                    "INSERT INTO agentkit_memories (agent, {COLUMNS})
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
                ),
                &[
                    &self.agent,
                    &row.id,
                    &row.text,
                    &row.scope,
                    &row.principal_id,
                    &row.session_id,
                    &row.turn_id,
                    &row.event_index,
                    &row.created_at_ms,
                    &row.updated_at_ms,
                ],
            )
            .await
            .map_err(Error::query("keep a memory"))?;
        Ok(())
    }

    pub async fn get(&self, id: &str) -> Result<Option<MemoryRow>> {
        let client = self.db.client().await?;
        let row = client
            .query_opt(
                &format!("SELECT {COLUMNS} FROM agentkit_memories WHERE agent = $1 AND id = $2"),
                &[&self.agent, &id],
            )
            .await
            .map_err(Error::query("read a memory"))?;
        Ok(row.as_ref().map(row_of))
    }

    pub async fn edit(
        &self,
        id: &str,
        text: &str,
        updated_at_ms: i64,
    ) -> Result<Option<MemoryRow>> {
        let client = self.db.client().await?;
        let row = client
            .query_opt(
                &format!(
                    "UPDATE agentkit_memories SET text = $3, updated_at_ms = $4
                     WHERE agent = $1 AND id = $2 RETURNING {COLUMNS}"
                ),
                &[&self.agent, &id, &text, &updated_at_ms],
            )
            .await
            .map_err(Error::query("edit a memory"))?;
        Ok(row.as_ref().map(row_of))
    }

    pub async fn delete(&self, id: &str) -> Result<bool> {
        let client = self.db.client().await?;
        let n = client
            .execute(
                "DELETE FROM agentkit_memories WHERE agent = $1 AND id = $2",
                &[&self.agent, &id],
            )
            .await
            .map_err(Error::query("delete a memory"))?;
        Ok(n > 0)
    }

    /// A page, newest first.
    pub async fn page(&self, q: MemoryQuery<'_>) -> Result<Vec<MemoryRow>> {
        let client = self.db.client().await?;
        let rows = client
            .query(
                &format!(
                    "SELECT {COLUMNS} FROM agentkit_memories WHERE agent = $1
                     AND ($2::TEXT IS NULL OR scope = $3 OR principal_id = $2)
                     AND ($4::TEXT IS NULL OR id < $4)
                     ORDER BY id DESC LIMIT $5"
                ),
                &[&self.agent, &q.principal, &AGENT_SCOPE, &q.before, &q.limit],
            )
            .await
            .map_err(Error::query("list memories"))?;
        Ok(rows.iter().map(row_of).collect())
    }
}
