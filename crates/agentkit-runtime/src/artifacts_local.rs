//! The artifacts of one host, in the `artifacts` table of the agent's
//! `agentkit.sqlite`, behind the shared store's trait
//! (`agentkit_store::SharedArtifacts`). A tag is one job of the database's
//! one writer (the update of the artifact of the same kind and key, or the
//! insert, then the eviction beyond `max`); reads run on a reader
//! connection of their own, on the blocking pool.

use std::sync::Arc;

use agentkit_store::{ArtifactQuery, ArtifactRow, SharedArtifacts, StoreFuture, Tagged};
use futures_util::FutureExt;
use rusqlite::{Connection, OptionalExtension, params};

use crate::db::{Db, store_failed as failed};
use crate::error::Result;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS artifacts (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    key TEXT,
    data TEXT NOT NULL,
    session_id TEXT NOT NULL,
    principal_id TEXT NOT NULL,
    turn_id TEXT,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS artifacts_by_key ON artifacts (kind, key) WHERE key IS NOT NULL;
CREATE INDEX IF NOT EXISTS artifacts_by_session ON artifacts (session_id, id);
CREATE INDEX IF NOT EXISTS artifacts_by_principal ON artifacts (principal_id, id);
CREATE INDEX IF NOT EXISTS artifacts_by_update ON artifacts (updated_at_ms);
";

const COLUMNS: &str =
    "id, kind, key, data, session_id, principal_id, turn_id, created_at_ms, updated_at_ms";

/// The table of each open database, made once per database.
/// This host's artifacts.
#[derive(Debug)]
pub(crate) struct LocalArtifacts {
    db: Arc<Db>,
}

fn row_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<ArtifactRow> {
    Ok(ArtifactRow {
        id: r.get(0)?,
        kind: r.get(1)?,
        key: r.get(2)?,
        data: r.get(3)?,
        session_id: r.get(4)?,
        principal_id: r.get(5)?,
        turn_id: r.get(6)?,
        created_at_ms: r.get(7)?,
        updated_at_ms: r.get(8)?,
    })
}

impl LocalArtifacts {
    /// The table of `db`, its schema made (at the runtime's open).
    pub(crate) fn open(db: Arc<Db>) -> Result<LocalArtifacts> {
        db.make_schema(SCHEMA)?;
        Ok(LocalArtifacts { db })
    }

    /// Runs `f` on a reader connection, on the blocking pool.
    fn read<'a, T: Send + 'static>(
        &'a self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> StoreFuture<'a, T> {
        self.db.read_off("artifact", f)
    }
}

fn tag(conn: &Connection, row: &ArtifactRow, max: Option<i64>) -> rusqlite::Result<Tagged> {
    let existing: Option<(String, i64)> = match &row.key {
        None => None,
        Some(key) => conn
            .query_row(
                "SELECT id, created_at_ms FROM artifacts WHERE kind = ?1 AND key = ?2",
                params![row.kind, key],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?,
    };
    let updated = existing.is_some();
    let stored = match existing {
        Some((id, created_at_ms)) => {
            conn.execute(
                "UPDATE artifacts SET data = ?2, session_id = ?3, principal_id = ?4,
                     turn_id = ?5, updated_at_ms = ?6 WHERE id = ?1",
                params![
                    id,
                    row.data,
                    row.session_id,
                    row.principal_id,
                    row.turn_id,
                    row.updated_at_ms
                ],
            )?;
            ArtifactRow {
                id,
                created_at_ms,
                ..row.clone()
            }
        }
        None => {
            conn.execute(
                &format!(
                    "INSERT INTO artifacts ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
                ),
                params![
                    row.id,
                    row.kind,
                    row.key,
                    row.data,
                    row.session_id,
                    row.principal_id,
                    row.turn_id,
                    row.created_at_ms,
                    row.updated_at_ms
                ],
            )?;
            row.clone()
        }
    };
    let evicted = match max {
        None => 0,
        Some(max) => conn.execute(
            "DELETE FROM artifacts WHERE id IN (
                 SELECT id FROM artifacts ORDER BY updated_at_ms DESC, id DESC LIMIT -1 OFFSET ?1)",
            params![max],
        )?,
    };
    Ok(Tagged {
        row: stored,
        updated,
        evicted: evicted as u64,
    })
}

impl SharedArtifacts for LocalArtifacts {
    fn tag<'a>(&'a self, row: &'a ArtifactRow, max: Option<i64>) -> StoreFuture<'a, Tagged> {
        let row = row.clone();
        let write = self.db.queue(move |conn| tag(conn, &row, max));
        async move { write.await.map_err(|e| failed(&e)) }.boxed()
    }

    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<ArtifactRow>> {
        let id = id.to_owned();
        self.read(move |conn| {
            conn.query_row(
                &format!("SELECT {COLUMNS} FROM artifacts WHERE id = ?1"),
                params![id],
                row_of,
            )
            .optional()
        })
    }

    fn page<'a>(&'a self, q: ArtifactQuery<'a>) -> StoreFuture<'a, Vec<ArtifactRow>> {
        let (principal, session, kind, before) = (
            q.principal.map(str::to_owned),
            q.session.map(str::to_owned),
            q.kind.map(str::to_owned),
            q.before.map(str::to_owned),
        );
        let limit = q.limit;
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM artifacts
                 WHERE (?1 IS NULL OR principal_id = ?1) AND (?2 IS NULL OR session_id = ?2)
                   AND (?3 IS NULL OR kind = ?3) AND (?4 IS NULL OR id < ?4)
                 ORDER BY id DESC LIMIT ?5"
            ))?;
            stmt.query_map(params![principal, session, kind, before, limit], row_of)?
                .collect()
        })
    }

    fn delete_session<'a>(&'a self, session: &'a str) -> StoreFuture<'a, u64> {
        let session = session.to_owned();
        let write = self.db.queue(move |conn| {
            conn.execute(
                "DELETE FROM artifacts WHERE session_id = ?1",
                params![session],
            )
        });
        async move { write.await.map(|n| n as u64).map_err(|e| failed(&e)) }.boxed()
    }
}
