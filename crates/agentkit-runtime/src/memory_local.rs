//! The governed memories of one host, in the `memories` table of the
//! agent's `agentkit.sqlite`, behind the shared store's trait
//! (`agentkit_store::SharedMemories`). Writes are jobs of the database's
//! one writer; reads run on a reader connection of their own, on the
//! blocking pool.

use std::sync::Arc;

use agentkit_store::{AGENT_SCOPE, MemoryQuery, MemoryRow, SharedMemories, StoreFuture};
use rusqlite::{Connection, OptionalExtension, params};

use crate::db::Db;
use crate::error::Result;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS memories (
    id TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    scope TEXT NOT NULL,
    principal_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    turn_id TEXT,
    event_index INTEGER,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS memories_by_principal ON memories (principal_id, id);
CREATE INDEX IF NOT EXISTS memories_by_scope ON memories (scope, id);
";

const COLUMNS: &str =
    "id, text, scope, principal_id, session_id, turn_id, event_index, created_at_ms, updated_at_ms";

/// The table of each open database, made once per database.
/// This host's memories.
#[derive(Debug)]
pub(crate) struct LocalMemories {
    db: Arc<Db>,
}

fn row_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<MemoryRow> {
    Ok(MemoryRow {
        id: r.get(0)?,
        text: r.get(1)?,
        scope: r.get(2)?,
        principal_id: r.get(3)?,
        session_id: r.get(4)?,
        turn_id: r.get(5)?,
        event_index: r.get(6)?,
        created_at_ms: r.get(7)?,
        updated_at_ms: r.get(8)?,
    })
}

impl LocalMemories {
    /// The table of `db`, its schema made (at the runtime's open).
    pub(crate) fn open(db: Arc<Db>) -> Result<LocalMemories> {
        db.make_schema(SCHEMA)?;
        Ok(LocalMemories { db })
    }

    /// Runs `f` on a reader connection, on the blocking pool.
    fn read<'a, T: Send + 'static>(
        &'a self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> StoreFuture<'a, T> {
        self.db.read_off("memory", f)
    }

    fn write<'a, T: Send + 'static>(
        &'a self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> StoreFuture<'a, T> {
        self.db.write_queued(f)
    }
}

impl SharedMemories for LocalMemories {
    fn insert<'a>(&'a self, row: &'a MemoryRow) -> StoreFuture<'a, ()> {
        let row = row.clone();
        self.write(move |conn| {
            conn.execute(
                &format!(
                    "INSERT INTO memories ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
                ),
                params![
                    row.id,
                    row.text,
                    row.scope,
                    row.principal_id,
                    row.session_id,
                    row.turn_id,
                    row.event_index,
                    row.created_at_ms,
                    row.updated_at_ms
                ],
            )
            .map(|_| ())
        })
    }

    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<MemoryRow>> {
        let id = id.to_owned();
        self.read(move |conn| {
            conn.query_row(
                &format!("SELECT {COLUMNS} FROM memories WHERE id = ?1"),
                params![id],
                row_of,
            )
            .optional()
        })
    }

    fn edit<'a>(
        &'a self,
        id: &'a str,
        text: &'a str,
        updated_at_ms: i64,
    ) -> StoreFuture<'a, Option<MemoryRow>> {
        let (id, text) = (id.to_owned(), text.to_owned());
        self.write(move |conn| {
            conn.query_row(
                &format!(
                    "UPDATE memories SET text = ?2, updated_at_ms = ?3 WHERE id = ?1 RETURNING {COLUMNS}"
                ),
                params![id, text, updated_at_ms],
                row_of,
            )
            .optional()
        })
    }

    fn delete<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        let id = id.to_owned();
        self.write(move |conn| {
            conn.execute("DELETE FROM memories WHERE id = ?1", params![id])
                .map(|n| n > 0)
        })
    }

    fn page<'a>(&'a self, q: MemoryQuery<'a>) -> StoreFuture<'a, Vec<MemoryRow>> {
        let (principal, before) = (q.principal.map(str::to_owned), q.before.map(str::to_owned));
        let limit = q.limit;
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM memories
                 WHERE (?1 IS NULL OR scope = ?2 OR principal_id = ?1)
                   AND (?3 IS NULL OR id < ?3)
                 ORDER BY id DESC LIMIT ?4"
            ))?;
            stmt.query_map(params![principal, AGENT_SCOPE, before, limit], row_of)?
                .collect()
        })
    }
}
