//! This host's session index, in `agentkit.sqlite` (written by the one
//! SQLite writer), behind the same trait as a shared store's
//! (`agentkit_store::SharedIndex`): the runtime reads and writes its index
//! through one path whichever store it runs on.
//!
//! On files a session's folder is the truth: a row whose folder was
//! deleted by hand is dropped as it is read, and a folder written without
//! the index (an older version, or by hand) joins it through its
//! `session.json` when first looked up. Point lookups read on the calling
//! thread (a primary-key read of a few hundred bytes); pages, counts and
//! the parked sessions read on the blocking pool.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentkit_events::FileEventStore;
use agentkit_protocol::SessionId;
use agentkit_store::{PageQuery, SessionRow, SharedError, SharedIndex, Stale, StoreFuture};
use futures_util::FutureExt;

use crate::db::Db;
use crate::error::Error;

/// This host's session index.
#[derive(Debug)]
pub(crate) struct LocalIndex {
    db: Arc<Db>,
    folders: Folders,
}

/// Where this host's session folders are.
#[derive(Debug, Clone)]
struct Folders {
    /// `<state>/sessions`: one folder per session.
    sessions_dir: PathBuf,
    /// The log store, which knows the new sessions whose folder is still
    /// a spare (`agentkit_events::FileEventStore::create`).
    store: Option<FileEventStore>,
}

impl Folders {
    /// Is the session's folder there (or its spare, for a new session)?
    /// An id that cannot name a folder has none.
    fn has(&self, id: &str) -> bool {
        SessionId::parse(id).is_ok_and(|id| {
            self.store.as_ref().is_some_and(|s| s.has_log(&id))
                || self.sessions_dir.join(id.as_str()).exists()
        })
    }
}

impl LocalIndex {
    pub(crate) fn new(db: Arc<Db>, state_dir: &Path, store: Option<FileEventStore>) -> LocalIndex {
        LocalIndex {
            db,
            folders: Folders {
                sessions_dir: state_dir.join("sessions"),
                store,
            },
        }
    }

    /// The row's metadata, or the `session.json` of a folder the index
    /// does not know (which then joins it).
    fn lookup(&self, id: &str) -> Result<Option<String>, Error> {
        let stored = match self.db.session(id)? {
            Some(meta) => Some(meta),
            None => {
                let Ok(parsed) = SessionId::parse(id) else {
                    return Ok(None);
                };
                let path = self
                    .folders
                    .sessions_dir
                    .join(parsed.as_str())
                    .join("session.json");
                match crate::meta::load(&path).ok().filter(|m| m.id == id) {
                    Some(meta) => {
                        self.db.put_session_detached(&meta);
                        let at = meta
                            .updated_at
                            .clone()
                            .unwrap_or_else(|| meta.created_at.clone());
                        Some(crate::meta::row_at(&meta, at)?.meta)
                    }
                    None => None,
                }
            }
        };
        if stored.is_some() && !self.folders.has(id) {
            // Someone deleted the folder: the session is gone.
            self.db.delete_session(id);
            return Ok(None);
        }
        Ok(stored)
    }

    /// Runs `f` on the blocking pool.
    fn blocking<'a, T: Send + 'static>(
        &'a self,
        what: &'static str,
        f: impl FnOnce(&Db, &Folders) -> Result<T, Error> + Send + 'static,
    ) -> StoreFuture<'a, T> {
        let db = self.db.clone();
        let dir = self.folders.clone();
        async move {
            tokio::task::spawn_blocking(move || f(&db, &dir))
                .await
                .map_err(|e| SharedError::Failed {
                    message: format!("{what} did not finish: {e}"),
                })?
                .map_err(|e| failed(&e))
        }
        .boxed()
    }
}

/// [`Stale`] carried to the blocking pool.
enum OwnedStale {
    UpdatedBefore(String),
    Beyond(u64),
}

/// A local failure as the trait reports it (a `500`).
fn failed(e: &Error) -> SharedError {
    SharedError::Failed {
        message: e.to_string(),
    }
}

impl SharedIndex for LocalIndex {
    fn put<'a>(&'a self, row: &'a SessionRow) -> StoreFuture<'a, ()> {
        let row = row.clone();
        let written = self
            .db
            .queue_one(move |conn| crate::db::upsert_row(conn, &row));
        async move { written.await.map_err(|e| failed(&e)) }.boxed()
    }

    fn put_detached(&self, row: SessionRow) {
        self.db
            .write_detached_one(move |conn| crate::db::upsert_row(conn, &row));
    }

    /// Only the metadata and the last activity are set, so of the index
    /// table's indexes only the one on `updated_at` is written (an upsert
    /// rewrites all five); a row not there yet is inserted whole. Of the
    /// two statements at most one changes anything.
    fn put_activity(&self, row: SessionRow) {
        self.db.write_detached_one(move |conn| {
            let changed = conn
                .prepare_cached("UPDATE sessions SET meta = ?2, updated_at = ?3 WHERE id = ?1")?
                .execute(rusqlite::params![row.id, row.meta, row.updated_at])?;
            if changed == 0 {
                crate::db::upsert_row(conn, &row)?;
            }
            Ok(())
        });
    }

    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<String>> {
        std::future::ready(self.lookup(id).map_err(|e| failed(&e))).boxed()
    }

    fn by_key<'a>(&'a self, channel: &'a str, key: &'a str) -> StoreFuture<'a, Option<String>> {
        std::future::ready(self.db.session_by_key(channel, key).map_err(|e| failed(&e))).boxed()
    }

    fn page<'a>(&'a self, query: PageQuery<'a>) -> StoreFuture<'a, Vec<String>> {
        if query.activity == Some(agentkit_store::Activity::Running) {
            // One host's index has no leases: its runtime knows which
            // turns run.
            return std::future::ready(Err(SharedError::Failed {
                message: "the local session index cannot tell which sessions run".to_owned(),
            }))
            .boxed();
        }
        let owned = |s: Option<&str>| s.map(str::to_owned);
        let (principal, channel, before, since, updated_since) = (
            owned(query.principal),
            owned(query.channel),
            owned(query.before),
            owned(query.since),
            owned(query.updated_since),
        );
        let (activity, limit) = (query.activity, query.limit);
        let tenant = query.tenant.map(owned);
        self.blocking("listing sessions", move |db, dir| {
            // A folder deleted by hand deletes its session; the page is
            // filled from the rows after it, so it stays full and the
            // caller's cursor stays right.
            let mut out = Vec::new();
            let mut before = before;
            loop {
                let wanted = limit - i64::try_from(out.len()).unwrap_or(limit);
                let rows = db.sessions_page(&PageQuery {
                    principal: principal.as_deref(),
                    tenant: tenant.as_ref().map(Option::as_deref),
                    channel: channel.as_deref(),
                    before: before.as_deref(),
                    since: since.as_deref(),
                    updated_since: updated_since.as_deref(),
                    activity,
                    limit: wanted,
                })?;
                let last = i64::try_from(rows.len()).unwrap_or(0) < wanted;
                before = rows.last().map(|(id, _)| id.clone());
                for (id, meta) in rows {
                    if dir.has(&id) {
                        out.push(meta);
                    } else {
                        db.delete_session(&id);
                    }
                }
                if last || before.is_none() || i64::try_from(out.len()).unwrap_or(limit) >= limit {
                    return Ok(out);
                }
            }
        })
    }

    fn count(&self) -> StoreFuture<'_, u64> {
        self.blocking("counting sessions", |db, _| db.count_sessions())
    }

    fn stale<'a>(&'a self, which: Stale<'a>, limit: i64) -> StoreFuture<'a, Vec<String>> {
        let which = match which {
            Stale::UpdatedBefore(at) => OwnedStale::UpdatedBefore(at.to_owned()),
            Stale::Beyond(keep) => OwnedStale::Beyond(keep),
        };
        self.blocking("listing sessions past their retention", move |db, _| {
            let which = match &which {
                OwnedStale::UpdatedBefore(at) => Stale::UpdatedBefore(at),
                OwnedStale::Beyond(keep) => Stale::Beyond(*keep),
            };
            db.stale_sessions(which, limit)
        })
    }

    /// Deletes the session's row; its folder (its log, snapshot and
    /// workspace) is the runtime's to delete.
    fn delete<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        let had = self.db.session(id).map(|m| m.is_some());
        self.db.delete_session(id);
        async move {
            self.db.flush().await.map_err(|e| failed(&e))?;
            had.map_err(|e| failed(&e))
        }
        .boxed()
    }

    fn parked(&self) -> StoreFuture<'_, Vec<String>> {
        self.blocking("reading the parked sessions", |db, _| {
            Ok(db
                .parked_sessions()?
                .into_iter()
                .map(|(_, meta)| meta)
                .collect())
        })
    }
}

/// The host bridge's kv store on this host: the `kv` table of
/// `agentkit.sqlite`, written through the one SQLite writer. Reads skip
/// expired entries; writes drop them.
#[derive(Debug)]
pub(crate) struct LocalKv {
    db: Arc<Db>,
}

impl LocalKv {
    pub(crate) fn new(db: Arc<Db>) -> LocalKv {
        LocalKv { db }
    }

    fn read<T>(
        &self,
        f: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<T>,
    ) -> Result<T, SharedError> {
        f(&self.db.conn()).map_err(|e| SharedError::Failed {
            message: format!("the key-value store: {e}"),
        })
    }

    fn write<'a, T: Send + 'static>(
        &'a self,
        f: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> StoreFuture<'a, T> {
        let written = self.db.queue(f);
        async move { written.await.map_err(|e| failed(&e)) }.boxed()
    }
}

impl agentkit_store::SharedKv for LocalKv {
    fn get<'a>(&'a self, key: &'a str, now: i64) -> StoreFuture<'a, Option<agentkit_store::KvRow>> {
        use rusqlite::OptionalExtension;
        std::future::ready(self.read(|c| {
            c.prepare_cached(
                "SELECT value, expires_at FROM kv WHERE key = ?1 AND (expires_at IS NULL OR expires_at > ?2)",
            )?
            .query_row(rusqlite::params![key, now], |r| {
                Ok((key.to_owned(), r.get(0)?, r.get(1)?))
            })
            .optional()
        }))
        .boxed()
    }

    fn set<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
        expires_at: Option<i64>,
        now: i64,
    ) -> StoreFuture<'a, ()> {
        let (key, value) = (key.to_owned(), value.to_owned());
        self.write(move |c| {
            c.prepare_cached("DELETE FROM kv WHERE expires_at IS NOT NULL AND expires_at <= ?1")?
                .execute(rusqlite::params![now])?;
            c.prepare_cached(
                "INSERT INTO kv (key, value, expires_at, updated_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(key) DO UPDATE SET value = ?2, expires_at = ?3, updated_at = ?4",
            )?
            .execute(rusqlite::params![key, value, expires_at, now])
            .map(|_| ())
        })
    }

    fn delete<'a>(&'a self, key: &'a str, now: i64) -> StoreFuture<'a, bool> {
        let key = key.to_owned();
        self.write(move |c| {
            let live = c
                .prepare_cached(
                    "DELETE FROM kv WHERE key = ?1 AND (expires_at IS NULL OR expires_at > ?2)",
                )?
                .execute(rusqlite::params![key, now])?;
            c.prepare_cached("DELETE FROM kv WHERE key = ?1")?
                .execute(rusqlite::params![key])?;
            Ok(live > 0)
        })
    }

    fn list<'a>(
        &'a self,
        prefix: &'a str,
        after: &'a str,
        limit: i64,
        now: i64,
    ) -> StoreFuture<'a, Vec<agentkit_store::KvRow>> {
        std::future::ready(self.read(|c| {
            // `substr` rather than LIKE: keys may hold `%` and `_`.
            let mut stmt = c.prepare_cached(
                "SELECT key, value, expires_at FROM kv
                 WHERE substr(key, 1, length(?1)) = ?1 AND (expires_at IS NULL OR expires_at > ?2)
                   AND key > ?4
                 ORDER BY key LIMIT ?3",
            )?;
            let rows = stmt.query_map(rusqlite::params![prefix, now, limit, after], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?;
            rows.collect()
        }))
        .boxed()
    }
}

/// This host's once-only records and daily totals, in `agentkit.sqlite`:
/// the same trait as a shared store's, so budgets read and count one way
/// whichever store the runtime runs on. Counting waits for nothing (the
/// one writer queues it); reads are primary-key reads on the caller.
#[derive(Debug)]
pub(crate) struct LocalTicks {
    db: Arc<Db>,
}

impl LocalTicks {
    pub(crate) fn new(db: Arc<Db>) -> LocalTicks {
        LocalTicks { db }
    }
}

impl agentkit_store::SharedTicks for LocalTicks {
    /// One host: the tick is this host's if its record is older.
    fn claim_tick<'a>(
        &'a self,
        schedule: &'a str,
        tick_ms: i64,
        _host: &'a str,
    ) -> StoreFuture<'a, bool> {
        async move {
            self.db
                .claim_tick(schedule, tick_ms, tick_ms)
                .await
                .map_err(|e| failed(&e))
        }
        .boxed()
    }

    fn day_usage<'a>(&'a self, day: &'a str) -> StoreFuture<'a, (i64, i64)> {
        let read = self.db.day_usage(day).map(|u| {
            (
                i64::try_from(u.input_tokens).unwrap_or(i64::MAX),
                i64::try_from(u.output_tokens).unwrap_or(i64::MAX),
            )
        });
        std::future::ready(read.map_err(|e| failed(&e))).boxed()
    }

    fn add_day_usage<'a>(&'a self, day: &'a str, input: i64, output: i64) -> StoreFuture<'a, ()> {
        self.db.add_day_usage(
            day.to_owned(),
            agentkit_protocol::Usage {
                input_tokens: u64::try_from(input).unwrap_or(0),
                output_tokens: u64::try_from(output).unwrap_or(0),
                ..Default::default()
            },
        );
        std::future::ready(Ok(())).boxed()
    }

    fn day_cost<'a>(&'a self, day: &'a str) -> StoreFuture<'a, i64> {
        std::future::ready(self.db.day_cost(day).map_err(|e| failed(&e))).boxed()
    }

    fn add_day_cost<'a>(&'a self, day: &'a str, nano_usd: i64) -> StoreFuture<'a, ()> {
        self.db.add_day_cost(day.to_owned(), nano_usd);
        std::future::ready(Ok(())).boxed()
    }
}
