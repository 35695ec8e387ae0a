//! The governed memories of one host, in the `memories` table of the
//! agent's `agentkit.sqlite`, behind the shared store's trait
//! (`agentkit_store::SharedMemories`). Writes are jobs of the database's
//! one writer; reads run on a reader connection of their own, on the
//! blocking pool.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, LazyLock, Mutex, Weak};

use agentkit_store::{
    AGENT_SCOPE, MemoryQuery, MemoryRow, SharedError, SharedMemories, StoreFuture,
};
use futures_util::FutureExt;
use rusqlite::{Connection, OptionalExtension, params};

use crate::db::Db;
use crate::error::{Error, Result};

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
static OPEN: LazyLock<Mutex<HashMap<PathBuf, Weak<LocalMemories>>>> = LazyLock::new(Mutex::default);

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

fn failed(e: &Error) -> SharedError {
    SharedError::Failed {
        message: e.to_string(),
    }
}

impl LocalMemories {
    /// The table of `db`, its schema made on first use in this process.
    pub(crate) fn of(db: &Arc<Db>) -> Result<Arc<LocalMemories>> {
        let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(table) = open.get(db.path()).and_then(Weak::upgrade)
            && Arc::ptr_eq(&table.db, db)
        {
            return Ok(table);
        }
        db.conn()
            .execute_batch(SCHEMA)
            .map_err(|source| Error::Db {
                path: db.path().to_owned(),
                source,
            })?;
        let table = Arc::new(LocalMemories { db: db.clone() });
        open.retain(|_, t| t.strong_count() > 0);
        open.insert(db.path().to_owned(), Arc::downgrade(&table));
        Ok(table)
    }

    /// Runs `f` on a reader connection, on the blocking pool.
    fn read<'a, T: Send + 'static>(
        &'a self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> StoreFuture<'a, T> {
        let path: PathBuf = self.db.path().to_owned();
        async move {
            let read = path.clone();
            let answer = tokio::task::spawn_blocking(move || {
                let conn = Db::open_reader(&read)?;
                f(&conn)
            })
            .await
            .map_err(|e| SharedError::Failed {
                message: format!("the memory read did not finish: {e}"),
            })?;
            answer.map_err(|source| failed(&Error::Db { path, source }))
        }
        .boxed()
    }

    fn write<'a, T: Send + 'static>(
        &'a self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> StoreFuture<'a, T> {
        let write = self.db.queue(f);
        async move { write.await.map_err(|e| failed(&e)) }.boxed()
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
