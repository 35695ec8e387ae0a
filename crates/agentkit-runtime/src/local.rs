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

use agentkit_protocol::SessionId;
use agentkit_store::{PageQuery, SessionRow, SharedError, SharedIndex, StoreFuture};
use futures_util::FutureExt;

use crate::db::Db;
use crate::error::Error;

/// This host's session index.
#[derive(Debug)]
pub(crate) struct LocalIndex {
    db: Arc<Db>,
    /// `<state>/sessions`: one folder per session.
    sessions_dir: PathBuf,
}

impl LocalIndex {
    pub(crate) fn new(db: Arc<Db>, state_dir: &Path) -> LocalIndex {
        LocalIndex {
            db,
            sessions_dir: state_dir.join("sessions"),
        }
    }

    /// Is the session's folder there? An id that cannot name a folder has
    /// none.
    fn has_folder(sessions_dir: &Path, id: &str) -> bool {
        SessionId::parse(id).is_ok_and(|id| sessions_dir.join(id.as_str()).exists())
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
                let path = self.sessions_dir.join(parsed.as_str()).join("session.json");
                match crate::meta::load(&path).ok().filter(|m| m.id == id) {
                    Some(meta) => {
                        self.db.put_session_detached(&meta);
                        Some(crate::meta::row_of(&meta)?.meta)
                    }
                    None => None,
                }
            }
        };
        if stored.is_some() && !Self::has_folder(&self.sessions_dir, id) {
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
        f: impl FnOnce(&Db, &Path) -> Result<T, Error> + Send + 'static,
    ) -> StoreFuture<'a, T> {
        let db = self.db.clone();
        let dir = self.sessions_dir.clone();
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

/// A local failure as the trait reports it (a `500`).
fn failed(e: &Error) -> SharedError {
    SharedError::Failed {
        message: e.to_string(),
    }
}

impl SharedIndex for LocalIndex {
    fn put<'a>(&'a self, row: &'a SessionRow) -> StoreFuture<'a, ()> {
        let row = row.clone();
        let written = self.db.queue(move |conn| crate::db::upsert_row(conn, &row));
        async move { written.await.map_err(|e| failed(&e)) }.boxed()
    }

    fn put_detached(&self, row: SessionRow) {
        self.db
            .write_detached(move |conn| crate::db::upsert_row(conn, &row));
    }

    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<String>> {
        std::future::ready(self.lookup(id).map_err(|e| failed(&e))).boxed()
    }

    fn by_key<'a>(&'a self, channel: &'a str, key: &'a str) -> StoreFuture<'a, Option<String>> {
        std::future::ready(self.db.session_by_key(channel, key).map_err(|e| failed(&e))).boxed()
    }

    fn page<'a>(&'a self, query: PageQuery<'a>) -> StoreFuture<'a, Vec<String>> {
        let (principal, channel, before, since, limit) = (
            query.principal.map(str::to_owned),
            query.channel.map(str::to_owned),
            query.before.map(str::to_owned),
            query.since.map(str::to_owned),
            query.limit,
        );
        self.blocking("listing sessions", move |db, dir| {
            let rows = db.sessions_page(&PageQuery {
                principal: principal.as_deref(),
                channel: channel.as_deref(),
                before: before.as_deref(),
                since: since.as_deref(),
                limit,
            })?;
            // A folder deleted by hand deletes its session.
            Ok(rows
                .into_iter()
                .filter_map(|(id, meta)| {
                    let here = Self::has_folder(dir, &id);
                    if !here {
                        db.delete_session(&id);
                    }
                    here.then_some(meta)
                })
                .collect())
        })
    }

    fn count(&self) -> StoreFuture<'_, u64> {
        self.blocking("counting sessions", |db, _| db.count_sessions())
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
