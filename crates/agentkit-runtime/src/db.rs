//! `<stateRoot>/<slug>/agentkit.sqlite`: the runtime's durable bookkeeping
//! (the last fired tick of each schedule, reminders). Other parts of the
//! host keep their own tables in the same file with their own connection,
//! so it runs in WAL mode with a busy timeout.
//!
//! Writes never run on the async threads: each goes to one writer thread
//! per database, which takes every write queued at that moment and commits
//! them in one transaction (each in its own savepoint, so one failing
//! write does not undo the others), then answers each caller. A detached
//! write (bookkeeping nobody awaits) does not wake a busy writer: it joins
//! the next batch, at most a few milliseconds late. A write
//! answered `Ok` is committed (WAL, `synchronous = NORMAL`: it survives
//! the process being killed). Reads are single indexed lookups on a second
//! connection; the bulk ones run at open inside `spawn_blocking`.

use std::collections::HashMap;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{Error, Result};
use crate::meta::SessionMeta;
use crate::reminder_types::ReminderRow;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS schedule_ticks (
    schedule_id TEXT PRIMARY KEY,
    last_tick_ms INTEGER,
    last_fired_at_ms INTEGER,
    skipped INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS reminders (
    id TEXT PRIMARY KEY,
    purpose TEXT NOT NULL,
    channel_id TEXT NOT NULL,
    continuation_token TEXT NOT NULL,
    session_id TEXT,
    kind TEXT NOT NULL,
    spec TEXT NOT NULL,
    prompt TEXT,
    until_condition TEXT,
    run_form INTEGER NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    next_fire_at_ms INTEGER,
    fire_count INTEGER NOT NULL DEFAULT 0,
    created_at_ms INTEGER NOT NULL,
    last_fired_at_ms INTEGER
);
CREATE INDEX IF NOT EXISTS reminders_by_status ON reminders(status, next_fire_at_ms);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    channel TEXT NOT NULL,
    continuation TEXT NOT NULL,
    principal_id TEXT NOT NULL,
    parked INTEGER NOT NULL DEFAULT 0,
    meta TEXT NOT NULL,
    updated_at TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS sessions_by_key ON sessions(channel, continuation);
CREATE INDEX IF NOT EXISTS sessions_by_owner ON sessions(principal_id, id);
CREATE INDEX IF NOT EXISTS sessions_by_channel ON sessions(channel, id);
CREATE INDEX IF NOT EXISTS sessions_parked ON sessions(parked) WHERE parked = 1;
CREATE TABLE IF NOT EXISTS usage_daily (
    day TEXT PRIMARY KEY,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS cost_daily (
    day TEXT PRIMARY KEY,
    cost_nano_usd INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS schedule_runs (
    schedule_id TEXT PRIMARY KEY,
    record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS ab_assignments (
    session_id TEXT NOT NULL,
    experiment TEXT NOT NULL,
    variant TEXT,
    principal_id TEXT NOT NULL,
    purpose TEXT,
    assigned_at_ms INTEGER NOT NULL,
    PRIMARY KEY (session_id, experiment)
);
CREATE INDEX IF NOT EXISTS ab_assignments_by_variant ON ab_assignments(experiment, variant);
CREATE TABLE IF NOT EXISTS ab_turns (
    session_id TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    outcome TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cache_read_tokens INTEGER NOT NULL,
    cache_write_tokens INTEGER NOT NULL,
    latency_ms INTEGER NOT NULL,
    tool_calls INTEGER NOT NULL,
    tool_errors INTEGER NOT NULL,
    ended_at_ms INTEGER NOT NULL,
    PRIMARY KEY (session_id, turn_id)
);
CREATE TABLE IF NOT EXISTS ab_feedback (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    score REAL NOT NULL,
    label TEXT,
    note TEXT,
    principal_id TEXT NOT NULL,
    at_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS ab_feedback_by_session ON ab_feedback(session_id);
CREATE TABLE IF NOT EXISTS kv (
    key TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL,
    expires_at INTEGER,
    updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS kv_expiring ON kv(expires_at) WHERE expires_at IS NOT NULL;
";

/// `PRAGMA user_version` once stored `session.json` files were imported
/// into the `sessions` table.
const SESSIONS_INDEXED: i64 = 1;

/// Below this many sessions active since an `updatedSince`, a listing
/// reads them by their last activity and sorts them (see
/// [`Db::sessions_page`]).
const FEW_UPDATED: i64 = 2_000;

/// The open database of one agent.
#[derive(Debug)]
pub(crate) struct Db {
    path: PathBuf,
    /// Reads (and the writes made at open, before anything else runs).
    conn: Mutex<Connection>,
    /// The writer thread's queue; the thread ends when this is dropped.
    writes: Arc<WriteQueue>,
    /// Jobs queued still waiting to run (for `/metrics`).
    queued: Arc<AtomicUsize>,
    /// Transactions the writer thread committed (for `/metrics`).
    commits: Arc<AtomicU64>,
}

/// What the writer thread calls after the batch holding a job committed
/// (`None`) or failed to (`Some`).
type Finish = Box<dyn FnOnce(Option<&rusqlite::Error>) + Send>;
/// One queued write: runs inside the batch's transaction.
type Job = Box<dyn FnOnce(&Connection) -> Finish + Send>;

/// The most writes committed together.
const MAX_BATCH: usize = 512;

fn open_conn(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // Every statement the writer and the readers run stays parsed: the
    // default (16) is fewer than the index, kv, A/B, ticks and reminders
    // statements together, and a reparse showed in the server's profile.
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

/// An error to hand to every job of a batch whose commit failed.
fn copy_error(e: &rusqlite::Error) -> rusqlite::Error {
    match e {
        rusqlite::Error::SqliteFailure(code, msg) => {
            rusqlite::Error::SqliteFailure(*code, msg.clone())
        }
        other => rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR),
            Some(other.to_string()),
        ),
    }
}

fn upsert_session(conn: &Connection, meta: &SessionMeta) -> rusqlite::Result<()> {
    let at = meta
        .updated_at
        .clone()
        .unwrap_or_else(|| meta.created_at.clone());
    let row = crate::meta::row_at(meta, at)
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    upsert_row(conn, &row)
}

/// Gives an index made before sessions had a last activity its column
/// (each row's starting at its creation) and the index on it.
fn add_updated_at(conn: &Connection) -> rusqlite::Result<()> {
    let has: bool = conn.query_row(
        "SELECT COUNT(*) > 0 FROM pragma_table_info('sessions') WHERE name = 'updated_at'",
        [],
        |r| r.get(0),
    )?;
    if !has {
        conn.execute_batch(
            "ALTER TABLE sessions ADD COLUMN updated_at TEXT NOT NULL DEFAULT '';
             UPDATE sessions SET updated_at = COALESCE(json_extract(meta, '$.createdAt'), '');",
        )?;
    }
    conn.execute_batch("CREATE INDEX IF NOT EXISTS sessions_by_update ON sessions(updated_at)")
}

/// Writes one index row as the index trait gives it.
pub(crate) fn upsert_row(
    conn: &Connection,
    row: &agentkit_store::SessionRow,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO sessions (id, channel, continuation, principal_id, parked, meta, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT(id) DO UPDATE SET channel = ?2, continuation = ?3, principal_id = ?4,
             parked = ?5, meta = ?6, updated_at = ?7",
    )?
    .execute(params![
        row.id,
        row.channel,
        row.continuation,
        row.principal_id,
        row.parked,
        row.meta,
        row.updated_at
    ])
    .map(|_| ())
}

/// How late a detached write may commit while the writer is busy: it
/// waits for the next awaited write's batch, or this long, instead of
/// waking the writer for a transaction of its own. Under load (a commit
/// less than this ago) the turn-end index writes of many turns share one
/// commit; an idle writer commits a detached write at once.
const LINGER: Duration = Duration::from_millis(5);

/// The writer thread's queue. An awaited write wakes the writer at once;
/// a detached one wakes it only from idleness, and is otherwise taken
/// with the next batch (see [`LINGER`]). Jobs run in the order queued.
#[derive(Debug, Default)]
struct WriteQueue {
    state: Mutex<QueueState>,
    wake: Condvar,
}

#[derive(Default)]
struct QueueState {
    /// Each job, and whether its caller awaits it.
    jobs: VecDeque<(Job, bool)>,
    /// How many jobs in `jobs` are awaited.
    awaited: usize,
    /// The writer waits with nothing queued.
    idle: bool,
    /// The database was dropped: the writer commits what is queued and
    /// ends.
    closed: bool,
}

impl std::fmt::Debug for QueueState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueState")
            .field("jobs", &self.jobs.len())
            .field("awaited", &self.awaited)
            .field("idle", &self.idle)
            .field("closed", &self.closed)
            .finish()
    }
}

impl WriteQueue {
    fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `job`; false once the writer has ended.
    fn push(&self, job: Job, awaited: bool) -> bool {
        let mut state = self.lock();
        if state.closed {
            return false;
        }
        state.jobs.push_back((job, awaited));
        state.awaited += usize::from(awaited);
        let wake = awaited || state.idle;
        drop(state);
        if wake {
            self.wake.notify_one();
        }
        true
    }

    /// Ends the writer once what is queued is committed.
    fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_one();
    }

    /// The next batch to commit, in queue order: at once when a job in it
    /// is awaited (or the queue is closing), else once [`LINGER`] passed
    /// since the writer last committed (`last`). `None` when closed and
    /// drained.
    fn next_batch(&self, last: Option<Instant>) -> Option<Vec<Job>> {
        let mut state = self.lock();
        let mut until: Option<Instant> = None;
        loop {
            if state.awaited > 0 || (state.closed && !state.jobs.is_empty()) {
                break;
            }
            if state.jobs.is_empty() {
                if state.closed {
                    return None;
                }
                until = None;
                state.idle = true;
                state = self.wake.wait(state).unwrap_or_else(|e| e.into_inner());
                state.idle = false;
                continue;
            }
            let now = Instant::now();
            let until = *until.get_or_insert_with(|| match last {
                Some(at) if now.duration_since(at) < LINGER => at + LINGER,
                _ => now,
            });
            if now >= until {
                break;
            }
            state = self
                .wake
                .wait_timeout(state, until - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        let state = &mut *state;
        let n = state.jobs.len().min(MAX_BATCH);
        let mut batch = Vec::with_capacity(n);
        for (job, awaited) in state.jobs.drain(..n) {
            state.awaited -= usize::from(awaited);
            batch.push(job);
        }
        Some(batch)
    }
}

/// The writer thread: batches whatever is queued into one transaction.
fn writer_loop(
    conn: Connection,
    jobs: Arc<WriteQueue>,
    queued: Arc<AtomicUsize>,
    commits: Arc<AtomicU64>,
) {
    let mut last = None;
    while let Some(batch) = jobs.next_batch(last) {
        queued.fetch_sub(batch.len(), Ordering::Relaxed);
        // Without a transaction (BEGIN failed), each job's savepoint is
        // a transaction of its own.
        // Cached statements: parsing BEGIN and COMMIT anew for every batch
        // showed in the server's profile.
        let began = run_cached(&conn, "BEGIN IMMEDIATE").is_ok();
        let finishes: Vec<Finish> = batch.into_iter().map(|job| job(&conn)).collect();
        let commit = if began {
            run_cached(&conn, "COMMIT")
        } else {
            Ok(())
        };
        match &commit {
            Err(e) => {
                tracing::error!(error = %e, "state database: a batch of writes did not commit");
                let _ = conn.execute_batch("ROLLBACK");
            }
            Ok(()) if began => {
                commits.fetch_add(1, Ordering::Relaxed);
            }
            Ok(()) => {}
        }
        for finish in finishes {
            finish(commit.as_ref().err());
        }
        last = Some(Instant::now());
    }
}

/// How a queued job is kept from leaving half its changes in the batch's
/// transaction when it fails.
#[derive(Clone, Copy)]
enum Shape {
    /// Any number of statements, inside a savepoint rolled back on error.
    Several,
    /// At most one statement that changes anything: a failed statement's
    /// changes are undone by SQLite, so no savepoint is needed.
    One,
}

impl Shape {
    fn run<T>(
        self,
        conn: &Connection,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T> {
        match self {
            Shape::One => f(conn),
            Shape::Several => run_cached(conn, "SAVEPOINT job").and_then(|()| match f(conn) {
                Ok(t) => run_cached(conn, "RELEASE job").map(|()| t),
                Err(e) => {
                    let _ = conn.execute_batch("ROLLBACK TO job; RELEASE job");
                    Err(e)
                }
            }),
        }
    }
}

/// Runs a statement without parameters from the connection's cache.
fn run_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

const REMINDER_COLUMNS: &str = "id, purpose, channel_id, continuation_token, session_id, kind, spec, prompt, until_condition, run_form, status, reason, next_fire_at_ms, fire_count, created_at_ms, last_fired_at_ms";

/// A stored value the typed row cannot hold (a hand-edited database).
fn bad_column(index: usize, message: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(
        index,
        rusqlite::types::Type::Text,
        Box::new(std::io::Error::other(message)),
    )
}

fn reminder_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ReminderRow> {
    Ok(ReminderRow {
        id: r.get(0)?,
        purpose: r.get(1)?,
        channel_id: r.get(2)?,
        continuation_token: r.get(3)?,
        session_id: r.get(4)?,
        cadence: {
            let kind: String = r.get(5)?;
            let spec: String = r.get(6)?;
            crate::reminder_types::Cadence::parse(&kind, &spec).map_err(|e| bad_column(6, e))?
        },
        prompt: r.get(7)?,
        until: r.get(8)?,
        run_form: r.get::<_, i64>(9)? != 0,
        handler: None,
        status: crate::reminder_types::ReminderStatus::parse(&r.get::<_, String>(10)?)
            .map_err(|e| bad_column(10, e))?,
        reason: r.get(11)?,
        next_fire_at_ms: r.get(12)?,
        fire_count: u64::try_from(r.get::<_, i64>(13)?).unwrap_or(0),
        created_at_ms: r.get(14)?,
        last_fired_at_ms: r.get(15)?,
    })
}

/// A local failure as a store trait reports it (a `500`).
pub(crate) fn store_failed(e: &Error) -> agentkit_store::SharedError {
    agentkit_store::SharedError::Failed {
        message: e.to_string(),
    }
}

/// The databases open in this process, by file: one [`Db`] (one writer
/// thread) per file, whoever opens it (the runtime, the kv store).
static OPEN: LazyLock<Mutex<HashMap<PathBuf, Weak<Db>>>> = LazyLock::new(Mutex::default);

impl Drop for Db {
    fn drop(&mut self) {
        self.writes.close();
    }
}

impl Db {
    /// The database of `state_dir`: the one already open in this process,
    /// else opened now. Every store of an agent (the session index,
    /// reminders, schedules, A/B, the host bridge's kv) writes through
    /// its one writer thread.
    pub(crate) fn open_shared(state_dir: &Path) -> Result<Arc<Db>> {
        std::fs::create_dir_all(state_dir).map_err(|e| Error::io("create", state_dir, e))?;
        let key = std::fs::canonicalize(state_dir)
            .map_err(|e| Error::io("resolve", state_dir, e))?
            .join("agentkit.sqlite");
        let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(db) = open.get(&key).and_then(Weak::upgrade) {
            return Ok(db);
        }
        let db = Arc::new(Db::open(state_dir)?);
        open.retain(|_, db| db.strong_count() > 0);
        open.insert(key, Arc::downgrade(&db));
        Ok(db)
    }

    fn open(state_dir: &Path) -> Result<Db> {
        std::fs::create_dir_all(state_dir).map_err(|e| Error::io("create", state_dir, e))?;
        let path = state_dir.join("agentkit.sqlite");
        let err = |source| Error::Db {
            path: path.clone(),
            source,
        };
        let conn = open_conn(&path).map_err(err)?;
        conn.execute_batch(SCHEMA).map_err(err)?;
        add_updated_at(&conn).map_err(err)?;
        let writer = open_conn(&path).map_err(err)?;
        let writes = Arc::new(WriteQueue::default());
        let queued = Arc::new(AtomicUsize::new(0));
        let commits = Arc::new(AtomicU64::new(0));
        std::thread::Builder::new()
            .name("agentkit-sqlite-writer".into())
            .spawn({
                let (writes, queued, commits) = (writes.clone(), queued.clone(), commits.clone());
                move || writer_loop(writer, writes, queued, commits)
            })
            .map_err(|e| Error::io("start the writer thread for", &path, e))?;
        Ok(Db {
            path: path.clone(),
            conn: Mutex::new(conn),
            writes,
            queued,
            commits,
        })
    }

    /// Runs `f` on a reader connection of this database, on the blocking
    /// pool, as a store trait answers (`what` names the read in an error).
    pub(crate) fn read_off<'a, T: Send + 'static>(
        &self,
        what: &'static str,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> agentkit_store::StoreFuture<'a, T> {
        let path = self.path.clone();
        Box::pin(async move {
            let read = path.clone();
            let answer = tokio::task::spawn_blocking(move || {
                let conn = Db::open_reader(&read)?;
                f(&conn)
            })
            .await
            .map_err(|e| agentkit_store::SharedError::Failed {
                message: format!("the {what} read did not finish: {e}"),
            })?;
            answer.map_err(|source| store_failed(&Error::Db { path, source }))
        })
    }

    /// [`queue`](Self::queue) as a store trait answers.
    pub(crate) fn write_queued<'a, T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> agentkit_store::StoreFuture<'a, T> {
        let write = self.queue(f);
        Box::pin(async move { write.await.map_err(|e| store_failed(&e)) })
    }

    /// Makes `schema` (`CREATE … IF NOT EXISTS` statements) at open.
    pub(crate) fn make_schema(&self, schema: &str) -> Result<()> {
        self.conn()
            .execute_batch(schema)
            .map_err(|source| Error::Db {
                path: self.path.clone(),
                source,
            })
    }

    /// Runs `f` on the writer thread, in the next batch, and answers once
    /// that batch committed.
    pub(crate) async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T> {
        self.queue(f).await
    }

    /// [`write`](Self::write), queued now (in call order with every other
    /// write) rather than when the answer is first awaited.
    pub(crate) fn queue<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> impl std::future::Future<Output = Result<T>> + Send + 'static {
        self.queue_as(Shape::Several, f)
    }

    /// [`queue`](Self::queue) for a job that changes the database by at
    /// most one statement: SQLite undoes a failed statement's changes by
    /// itself, so the job needs no savepoint of its own (two statements
    /// fewer on the writer thread; the index row's writes take this path
    /// at every new session and every turn's end).
    pub(crate) fn queue_one<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> impl std::future::Future<Output = Result<T>> + Send + 'static {
        self.queue_as(Shape::One, f)
    }

    fn queue_as<T: Send + 'static>(
        &self,
        shape: Shape,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> impl std::future::Future<Output = Result<T>> + Send + 'static {
        let (tx, rx) = tokio::sync::oneshot::channel::<rusqlite::Result<T>>();
        let job: Job = Box::new(move |conn| {
            let outcome = shape.run(conn, f);
            Box::new(move |commit: Option<&rusqlite::Error>| {
                let answer = match (outcome, commit) {
                    (Ok(t), None) => Ok(t),
                    (Ok(_), Some(e)) => Err(copy_error(e)),
                    (Err(e), _) => Err(e),
                };
                let _ = tx.send(answer);
            })
        });
        self.queued.fetch_add(1, Ordering::Relaxed);
        let queued = self.writes.push(job, true);
        if !queued {
            self.queued.fetch_sub(1, Ordering::Relaxed);
        }
        let path = self.path.clone();
        let err = move |source| Error::Db {
            path: path.clone(),
            source,
        };
        let gone = || {
            rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_MISUSE),
                Some("the writer thread has stopped".into()),
            )
        };
        async move {
            if !queued {
                return Err(err(gone()));
            }
            match rx.await {
                Ok(answer) => answer.map_err(err),
                Err(_) => Err(err(gone())),
            }
        }
    }

    /// Queues `f` for the writer thread without waiting for its commit:
    /// for bookkeeping whose loss a crash can only make stale (writes
    /// still commit in the order they were queued).
    pub(crate) fn write_detached(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<()> + Send + 'static,
    ) {
        self.detached_as(Shape::Several, f);
    }

    /// [`write_detached`](Self::write_detached) for a job that changes
    /// the database by at most one statement (see
    /// [`queue_one`](Self::queue_one)).
    pub(crate) fn write_detached_one(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<()> + Send + 'static,
    ) {
        self.detached_as(Shape::One, f);
    }

    fn detached_as(
        &self,
        shape: Shape,
        f: impl FnOnce(&Connection) -> rusqlite::Result<()> + Send + 'static,
    ) {
        let job: Job = Box::new(move |conn| {
            if let Err(e) = shape.run(conn, f) {
                tracing::warn!(error = %e, "state database: a bookkeeping write failed");
            }
            Box::new(|_| {})
        });
        self.queued.fetch_add(1, Ordering::Relaxed);
        if !self.writes.push(job, false) {
            self.queued.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Imports the `session.json` of every session folder once, so state
    /// written before the index existed keeps being served.
    pub(crate) fn index_stored_sessions(&self, sessions_dir: &Path) -> Result<usize> {
        let conn = self.conn();
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| self.err(e))?;
        if version >= SESSIONS_INDEXED {
            return Ok(0);
        }
        let mut imported = 0;
        if let Ok(entries) = std::fs::read_dir(sessions_dir) {
            let tx = conn.unchecked_transaction().map_err(|e| self.err(e))?;
            for entry in entries.flatten() {
                let path = entry.path().join("session.json");
                let Ok(meta) = crate::meta::load(&path) else {
                    continue;
                };
                if meta.id != entry.file_name().to_string_lossy() {
                    tracing::warn!(path = %path.display(), "skipping a session.json whose id is not its folder's");
                    continue;
                }
                upsert_session(&tx, &meta).map_err(|e| self.err(e))?;
                imported += 1;
            }
            tx.commit().map_err(|e| self.err(e))?;
        }
        conn.pragma_update(None, "user_version", SESSIONS_INDEXED)
            .map_err(|e| self.err(e))?;
        Ok(imported)
    }

    /// Writes an index row without waiting (a session found by its
    /// `session.json` alone joins the index).
    pub(crate) fn put_session_detached(&self, meta: &SessionMeta) {
        let meta = meta.clone();
        self.write_detached(move |conn| upsert_session(conn, &meta));
    }

    /// Writes queued for the writer thread still waiting to run.
    pub(crate) fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Empties both connections' page caches (`PRAGMA shrink_memory`):
    /// the reader's now, the writer's with its next batch. They fill
    /// again from the operating system's cache as pages are read.
    pub(crate) fn release_memory(&self) {
        let shrink = |conn: &Connection| conn.execute_batch("PRAGMA shrink_memory");
        if let Err(e) = shrink(&self.conn()) {
            tracing::debug!(error = %e, "cannot shrink the state database's read cache");
        }
        self.write_detached_one(shrink);
    }

    /// Transactions the writer thread committed so far.
    pub(crate) fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// Waits until every write queued before this call is committed (the
    /// writer takes them in order): detached writes included.
    pub(crate) async fn flush(&self) -> Result<()> {
        self.write(|_| Ok(())).await
    }

    /// Forgets a session (its folder was deleted).
    pub(crate) fn delete_session(&self, id: &str) {
        let id = id.to_owned();
        self.write_detached(move |conn| {
            conn.execute("DELETE FROM sessions WHERE id = ?1", params![id])
                .map(|_| ())
        });
    }

    /// One session's metadata, as stored (JSON).
    pub(crate) fn session(&self, id: &str) -> Result<Option<String>> {
        self.conn()
            .query_row(
                "SELECT meta FROM sessions WHERE id = ?1",
                params![id],
                |r| r.get::<_, String>(0),
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// The session a channel key maps to.
    pub(crate) fn session_by_key(&self, channel: &str, key: &str) -> Result<Option<String>> {
        self.conn()
            .query_row(
                "SELECT id FROM sessions WHERE channel = ?1 AND continuation = ?2 ORDER BY id DESC LIMIT 1",
                params![channel, key],
                |r| r.get::<_, String>(0),
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// One page of the session index, newest (greatest id) first: the
    /// ids below `before`, of `principal` and `channel` when given,
    /// created at or after `since` and written at or after
    /// `updated_since` (RFC 3339, UTC, milliseconds, as stored), parked or
    /// not as `activity` asks (the caller drops the running idle ones), at most
    /// `limit`. Keyset paging on an index: the cost is the
    /// page's, not the index's.
    pub(crate) fn sessions_page(
        &self,
        page: &agentkit_store::PageQuery<'_>,
    ) -> Result<Vec<(String, String)>> {
        use rusqlite::types::Value as Sql;
        // SQLite cannot tell how many rows a bound `updated_at` range
        // holds: when few do (a cheap count on its index), it reads them
        // by that index and sorts them, instead of walking every id down
        // to the few old sessions active lately.
        let few_updated = match page.updated_since {
            Some(since) => {
                let n: i64 = self
                    .conn()
                    .query_row(
                        "SELECT COUNT(*) FROM (SELECT 1 FROM sessions WHERE updated_at >= ?1 LIMIT ?2)",
                        params![since, FEW_UPDATED],
                        |r| r.get(0),
                    )
                    .map_err(|e| self.err(e))?;
                n < FEW_UPDATED
            }
            None => false,
        };
        let mut sql = String::from(if few_updated {
            "SELECT id, meta FROM sessions INDEXED BY sessions_by_update WHERE 1 = 1"
        } else {
            "SELECT id, meta FROM sessions WHERE 1 = 1"
        });
        let mut args = Vec::new();
        let mut add = |clause: &str, value: Option<&str>| {
            if let Some(v) = value {
                args.push(Sql::Text(v.to_owned()));
                sql.push_str(&format!(" AND {clause} ?{}", args.len()));
            }
        };
        add("principal_id =", page.principal);
        add("channel =", page.channel);
        add("id <", page.before);
        add("json_extract(meta, '$.createdAt') >=", page.since);
        add("updated_at >=", page.updated_since);
        match page.tenant {
            Some(Some(tenant)) => add("json_extract(meta, '$.owner.tenant') =", Some(tenant)),
            Some(None) => sql.push_str(" AND json_extract(meta, '$.owner.tenant') IS NULL"),
            None => {}
        }
        // Running is the runtime's to know (its turns are in memory): it
        // drops them from the idle ones.
        match page.activity {
            Some(agentkit_store::Activity::WaitingApproval) => sql.push_str(" AND parked = 1"),
            Some(agentkit_store::Activity::Idle) => sql.push_str(" AND parked = 0"),
            Some(agentkit_store::Activity::Running) | None => {}
        }
        args.push(Sql::Integer(page.limit));
        sql.push_str(&format!(" ORDER BY id DESC LIMIT ?{}", args.len()));
        self.metas(&sql, rusqlite::params_from_iter(args))
    }

    /// How many sessions the index holds.
    pub(crate) fn count_sessions(&self) -> Result<u64> {
        let conn = self.conn();
        let n: i64 = conn
            .query_row("SELECT COUNT(*) FROM sessions", params![], |r| r.get(0))
            .map_err(|e| self.err(e))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// The ids of up to `limit` unparked sessions past what `[sessions]`
    /// keeps, least recently written first.
    pub(crate) fn stale_sessions(
        &self,
        which: agentkit_store::Stale<'_>,
        limit: i64,
    ) -> Result<Vec<String>> {
        use agentkit_store::Stale;
        let conn = self.conn();
        let (sql, arg) = match which {
            Stale::UpdatedBefore(at) => (
                "SELECT id FROM sessions WHERE updated_at < ?1 AND parked = 0 \
                 ORDER BY updated_at, id LIMIT ?2",
                rusqlite::types::Value::Text(at.to_owned()),
            ),
            Stale::Beyond(keep) => (
                "SELECT id FROM (SELECT id, parked, updated_at FROM sessions \
                 ORDER BY updated_at DESC, id DESC LIMIT -1 OFFSET ?1) \
                 WHERE parked = 0 ORDER BY updated_at, id LIMIT ?2",
                rusqlite::types::Value::Integer(i64::try_from(keep).unwrap_or(i64::MAX)),
            ),
        };
        let mut stmt = conn.prepare_cached(sql).map_err(|e| self.err(e))?;
        let ids = stmt
            .query_map(params![arg, limit], |r| r.get::<_, String>(0))
            .map_err(|e| self.err(e))?
            .collect::<rusqlite::Result<Vec<String>>>()
            .map_err(|e| self.err(e))?;
        Ok(ids)
    }

    /// The sessions that may have a call waiting for approval.
    pub(crate) fn parked_sessions(&self) -> Result<Vec<(String, String)>> {
        self.metas("SELECT id, meta FROM sessions WHERE parked = 1", params![])
    }

    /// `(id, metadata as stored)` of each row `sql` selects.
    fn metas(&self, sql: &str, args: impl rusqlite::Params) -> Result<Vec<(String, String)>> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(sql).map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(args, |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in rows {
            out.push(row.map_err(|e| self.err(e))?);
        }
        Ok(out)
    }

    /// The database file (reports open their own read connection).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// A second read-only connection, for a bulk read that must not hold
    /// the shared read connection (run it inside `spawn_blocking`).
    pub(crate) fn open_reader(path: &Path) -> rusqlite::Result<Connection> {
        let conn = Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(Duration::from_secs(5))?;
        Ok(conn)
    }

    pub(crate) fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn err(&self, source: rusqlite::Error) -> Error {
        Error::Db {
            path: self.path.clone(),
            source,
        }
    }

    /// The last tick (ms since the epoch) a schedule fired for, and how
    /// many ticks it skipped.
    pub(crate) fn schedule_state(&self, id: &str) -> Result<(Option<i64>, Option<i64>, u64)> {
        self.conn()
            .query_row(
                "SELECT last_tick_ms, last_fired_at_ms, skipped FROM schedule_ticks WHERE schedule_id = ?1",
                params![id],
                |r| {
                    Ok((
                        r.get::<_, Option<i64>>(0)?,
                        r.get::<_, Option<i64>>(1)?,
                        u64::try_from(r.get::<_, i64>(2)?).unwrap_or(0),
                    ))
                },
            )
            .optional()
            .map(|o| o.unwrap_or((None, None, 0)))
            .map_err(|e| self.err(e))
    }

    /// What the agent's turns used on `day` (`YYYY-MM-DD`, UTC).
    pub(crate) fn day_usage(&self, day: &str) -> Result<agentkit_protocol::Usage> {
        let row: Option<(i64, i64)> = self
            .conn()
            .query_row(
                "SELECT input_tokens, output_tokens FROM usage_daily WHERE day = ?1",
                params![day],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        let (input, output) = row.unwrap_or_default();
        Ok(agentkit_protocol::Usage {
            input_tokens: u64::try_from(input).unwrap_or(0),
            output_tokens: u64::try_from(output).unwrap_or(0),
            ..Default::default()
        })
    }

    /// Adds a turn's usage to `day`'s, without waiting.
    pub(crate) fn add_day_usage(&self, day: String, usage: agentkit_protocol::Usage) {
        let (input, output) = (
            i64::try_from(usage.input_tokens).unwrap_or(i64::MAX),
            i64::try_from(usage.output_tokens).unwrap_or(i64::MAX),
        );
        if input == 0 && output == 0 {
            return;
        }
        self.write_detached(move |conn| {
            conn.prepare_cached(
                "INSERT INTO usage_daily (day, input_tokens, output_tokens) VALUES (?1, ?2, ?3)
                 ON CONFLICT(day) DO UPDATE SET input_tokens = input_tokens + ?2, output_tokens = output_tokens + ?3",
            )?
            .execute(params![day, input, output])
            .map(|_| ())
        });
    }

    /// What the agent's turns cost on `day`, in billionths of a US dollar.
    pub(crate) fn day_cost(&self, day: &str) -> Result<i64> {
        self.conn()
            .query_row(
                "SELECT cost_nano_usd FROM cost_daily WHERE day = ?1",
                params![day],
                |r| r.get(0),
            )
            .optional()
            .map(Option::unwrap_or_default)
            .map_err(|e| self.err(e))
    }

    /// Adds a turn's cost to `day`'s, without waiting.
    pub(crate) fn add_day_cost(&self, day: String, nano_usd: i64) {
        if nano_usd <= 0 {
            return;
        }
        self.write_detached(move |conn| {
            conn.prepare_cached(
                "INSERT INTO cost_daily (day, cost_nano_usd) VALUES (?1, ?2)
                 ON CONFLICT(day) DO UPDATE SET cost_nano_usd = cost_nano_usd + ?2",
            )?
            .execute(params![day, nano_usd])
            .map(|_| ())
        });
    }

    /// Every schedule's last run record (JSON), as stored.
    pub(crate) fn schedule_runs(&self) -> Result<Vec<(String, String)>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached("SELECT schedule_id, record FROM schedule_runs")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    /// Stores schedule `id`'s last run record, without waiting.
    pub(crate) fn put_schedule_run(&self, id: &str, record: String) {
        let id = id.to_owned();
        self.write_detached(move |conn| {
            conn.prepare_cached(
                "INSERT INTO schedule_runs (schedule_id, record) VALUES (?1, ?2)
                 ON CONFLICT(schedule_id) DO UPDATE SET record = ?2",
            )?
            .execute(params![id, record])
            .map(|_| ())
        });
    }

    /// Claims `tick` for a schedule: true when this call recorded it, false
    /// when that tick (or a later one) was already recorded.
    pub(crate) async fn claim_tick(&self, id: &str, tick_ms: i64, now_ms: i64) -> Result<bool> {
        let id = id.to_owned();
        let changed = self
            .write(move |conn| {
                conn.execute(
                    "INSERT INTO schedule_ticks (schedule_id, last_tick_ms, last_fired_at_ms) VALUES (?1, ?2, ?3)
                     ON CONFLICT(schedule_id) DO UPDATE SET last_tick_ms = ?2, last_fired_at_ms = ?3
                     WHERE last_tick_ms IS NULL OR last_tick_ms < ?2",
                    params![id, tick_ms, now_ms],
                )
            })
            .await?;
        Ok(changed == 1)
    }

    /// Records a tick skipped because the previous run was still going
    /// (the tick counts as handled: a restart does not fire it).
    pub(crate) async fn skip_tick(&self, id: &str, tick_ms: i64) -> Result<u64> {
        let id = id.to_owned();
        self.write(move |conn| {
            conn.execute(
                "INSERT INTO schedule_ticks (schedule_id, last_tick_ms, skipped) VALUES (?1, ?2, 1)
                 ON CONFLICT(schedule_id) DO UPDATE SET last_tick_ms = ?2, skipped = skipped + 1",
                params![id, tick_ms],
            )?;
            conn.query_row(
                "SELECT skipped FROM schedule_ticks WHERE schedule_id = ?1",
                params![id],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| u64::try_from(n).unwrap_or(0))
        })
        .await
    }

    /// Inserts many reminders in one write.
    pub(crate) async fn insert_reminders(&self, rows: Vec<ReminderRow>) -> Result<()> {
        self.write(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "INSERT INTO reminders ({REMINDER_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)"
            ))?;
            for r in &rows {
                stmt.execute(params![
                    r.id,
                    r.purpose,
                    r.channel_id,
                    r.continuation_token,
                    r.session_id,
                    r.cadence.kind(),
                    r.cadence.spec(),
                    r.prompt,
                    r.until,
                    i64::from(r.run_form),
                    r.status.as_str(),
                    r.reason,
                    r.next_fire_at_ms,
                    i64::try_from(r.fire_count).unwrap_or(i64::MAX),
                    r.created_at_ms,
                    r.last_fired_at_ms,
                ])?;
            }
            Ok(())
        })
        .await
    }

    /// Saves what a firing or a cancellation changed.
    pub(crate) async fn update_reminder(&self, r: &ReminderRow) -> Result<()> {
        let r = r.clone();
        self.write(move |conn| {
            conn.prepare_cached(
                "UPDATE reminders SET status = ?2, reason = ?3, next_fire_at_ms = ?4, fire_count = ?5, last_fired_at_ms = ?6, session_id = ?7 WHERE id = ?1",
            )?
            .execute(params![
                r.id,
                r.status.as_str(),
                r.reason,
                r.next_fire_at_ms,
                i64::try_from(r.fire_count).unwrap_or(i64::MAX),
                r.last_fired_at_ms,
                r.session_id,
            ])
        })
        .await?;
        Ok(())
    }

    /// Every reminder still armed.
    pub(crate) fn armed_reminders(&self) -> Result<Vec<ReminderRow>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {REMINDER_COLUMNS} FROM reminders WHERE status = 'armed'"
            ))
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], reminder_from_row)
            .map_err(|e| self.err(e))?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))?;
        Ok(rows)
    }

    /// Every reminder, armed or not, newest first (at most `limit`).
    pub(crate) fn all_reminders(&self, limit: usize) -> Result<Vec<ReminderRow>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {REMINDER_COLUMNS} FROM reminders ORDER BY created_at_ms DESC, id DESC LIMIT ?1"
            ))
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(
                params![i64::try_from(limit).unwrap_or(i64::MAX)],
                reminder_from_row,
            )
            .map_err(|e| self.err(e))?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))?;
        Ok(rows)
    }

    pub(crate) fn reminder(&self, id: &str) -> Result<Option<ReminderRow>> {
        self.conn()
            .query_row(
                &format!("SELECT {REMINDER_COLUMNS} FROM reminders WHERE id = ?1"),
                params![id],
                reminder_from_row,
            )
            .optional()
            .map_err(|e| self.err(e))
    }
}

impl Db {
    /// Disarms every armed run-form reminder with `reason`; answers how
    /// many. At open only (inside `spawn_blocking`, before any write is
    /// queued), so on the read connection.
    pub(crate) fn disarm_run_form(&self, reason: &str) -> Result<usize> {
        self.conn()
            .execute(
                "UPDATE reminders SET status = 'disarmed', reason = ?1, next_fire_at_ms = NULL WHERE status = 'armed' AND run_form = 1",
                params![reason],
            )
            .map_err(|e| self.err(e))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn row(id: &str) -> ReminderRow {
        ReminderRow {
            id: id.to_owned(),
            purpose: "p".into(),
            channel_id: "http".into(),
            continuation_token: "k".into(),
            session_id: None,
            cadence: crate::reminder_types::Cadence::Delay(std::time::Duration::from_secs(60)),
            prompt: Some("x".into()),
            until: None,
            run_form: false,
            handler: None,
            status: crate::reminder_types::ReminderStatus::Armed,
            reason: None,
            next_fire_at_ms: Some(1),
            fire_count: 0,
            created_at_ms: 0,
            last_fired_at_ms: None,
        }
    }

    /// An index written before sessions kept a last activity gets the
    /// column (each row's starting at its creation) and its index; the
    /// listing then filters on it.
    #[test]
    fn an_index_without_updated_at_gets_it_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let conn = Connection::open(dir.path().join("agentkit.sqlite")).unwrap();
        conn.execute_batch(
            "CREATE TABLE sessions (id TEXT PRIMARY KEY, channel TEXT NOT NULL,
                 continuation TEXT NOT NULL, principal_id TEXT NOT NULL,
                 parked INTEGER NOT NULL DEFAULT 0, meta TEXT NOT NULL);
             INSERT INTO sessions VALUES ('ses_1', 'http', 'k1', 'p', 0,
                 '{\"id\":\"ses_1\",\"createdAt\":\"2020-01-01T00:00:00.000Z\"}');
             INSERT INTO sessions VALUES ('ses_2', 'http', 'k2', 'p', 0,
                 '{\"id\":\"ses_2\",\"createdAt\":\"2024-01-01T00:00:00.000Z\"}');",
        )
        .unwrap();
        drop(conn);
        let db = Db::open(dir.path()).unwrap();
        let at: String = db
            .conn()
            .query_row(
                "SELECT updated_at FROM sessions WHERE id = 'ses_1'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(at, "2020-01-01T00:00:00.000Z");
        let page = |since| {
            db.sessions_page(&agentkit_store::PageQuery {
                updated_since: Some(since),
                limit: 10,
                ..Default::default()
            })
            .unwrap()
            .into_iter()
            .map(|(id, _)| id)
            .collect::<Vec<_>>()
        };
        assert_eq!(page("2023-01-01T00:00:00.000Z"), ["ses_2"]);
        assert_eq!(page("2019-01-01T00:00:00.000Z"), ["ses_2", "ses_1"]);
        drop(db);
        // Opening again changes nothing.
        Db::open(dir.path()).unwrap();
    }

    /// A database in a new folder with a table made by `sql`.
    async fn with_table(sql: &'static str) -> (tempfile::TempDir, Db) {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path()).unwrap();
        db.write(move |c| c.execute_batch(sql)).await.unwrap();
        (dir, db)
    }

    /// Detached writes run in queue order with awaited ones, commit with
    /// no awaited write after them (a linger late at most), and are
    /// committed when the database is dropped.
    #[tokio::test]
    async fn detached_writes_keep_their_order_and_are_not_lost() {
        let (dir, db) = with_table("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER)").await;
        let set = |k: &'static str, v: i64| {
            move |c: &Connection| {
                c.execute(
                    "INSERT INTO t VALUES (?1, ?2) ON CONFLICT(k) DO UPDATE SET v = ?2",
                    params![k, v],
                )
                .map(|_| ())
            }
        };
        // The writer just committed: these linger, and the awaited read
        // after them runs after them.
        for v in 0..50 {
            db.write_detached_one(set("a", v));
        }
        let a = db
            .write(|c| c.query_row("SELECT v FROM t WHERE k = 'a'", [], |r| r.get::<_, i64>(0)))
            .await
            .unwrap();
        assert_eq!(a, 49);
        let fresh = Connection::open(dir.path().join("agentkit.sqlite")).unwrap();
        let committed = |k: &str| -> bool {
            fresh
                .query_row("SELECT count(*) FROM t WHERE k = ?1", params![k], |r| {
                    r.get::<_, i64>(0)
                })
                .unwrap()
                == 1
        };
        let within = |k: &str| -> bool {
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if committed(k) {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            false
        };
        db.write_detached_one(set("b", 1));
        assert!(within("b"), "a detached write alone was never committed");
        db.write_detached(set("c", 1));
        drop(db);
        assert!(
            within("c"),
            "a detached write was lost when the database closed"
        );
    }

    /// Each transaction the writer commits is counted.
    #[tokio::test]
    async fn the_writer_counts_its_commits() {
        let (_dir, db) = with_table("CREATE TABLE t (k TEXT PRIMARY KEY)").await;
        let before = db.commits();
        db.write(|c| c.execute("INSERT INTO t VALUES ('a')", []).map(|_| ()))
            .await
            .unwrap();
        assert_eq!(db.commits(), before + 1);
        // Ten writes queued at once take one transaction each at most.
        let writes: Vec<_> = (0..10)
            .map(|i| {
                db.write(move |c| {
                    c.execute("INSERT INTO t VALUES (?1)", params![format!("b{i}")])
                        .map(|_| ())
                })
            })
            .collect();
        for w in writes {
            w.await.unwrap();
        }
        let after = db.commits();
        assert!(
            after > before + 1 && after <= before + 11,
            "{} commits for 10 writes",
            after - before - 1
        );
    }

    /// Every store of an agent writes through one writer: opening the
    /// state folder again (by another spelling of its path) gives the
    /// database already open, and the kv store writes through it.
    #[tokio::test]
    async fn one_database_and_one_writer_per_file_in_a_process() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open_shared(dir.path()).unwrap();
        let again = Db::open_shared(&dir.path().join(".")).unwrap();
        assert!(std::sync::Arc::ptr_eq(&db, &again));
        let kv = crate::KvStore::open(dir.path()).unwrap();
        // The kv store holds this database (no connection of its own).
        assert_eq!(std::sync::Arc::strong_count(&db), 3);
        kv.set("k", &serde_json::json!(1), None).await.unwrap();
        db.flush().await.unwrap();
        let n: i64 = db
            .conn()
            .query_row("SELECT COUNT(*) FROM kv", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
        drop((db, again, kv));
        // Once every holder is gone, the file opens afresh.
        let reopened = Db::open_shared(dir.path()).unwrap();
        assert_eq!(std::sync::Arc::strong_count(&reopened), 1);
    }

    /// Concurrent writes share batches; a failing one (a duplicate id)
    /// is refused alone, and every write answered `Ok` is committed: a
    /// fresh connection sees it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn batched_writes_are_committed_when_answered_and_fail_alone() {
        let dir = tempfile::tempdir().unwrap();
        let db = std::sync::Arc::new(Db::open(dir.path()).unwrap());
        db.insert_reminders(vec![row("dup")]).await.unwrap();
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..200 {
            let db = db.clone();
            tasks.spawn(async move {
                let id = if i == 100 {
                    "dup".to_owned()
                } else {
                    format!("r{i}")
                };
                (i, db.insert_reminders(vec![row(&id)]).await)
            });
        }
        let mut failed = Vec::new();
        while let Some(done) = tasks.join_next().await {
            let (i, result) = done.unwrap();
            if result.is_err() {
                failed.push(i);
            }
        }
        assert_eq!(failed, [100]);
        let fresh = Connection::open(dir.path().join("agentkit.sqlite")).unwrap();
        let n: i64 = fresh
            .query_row("SELECT count(*) FROM reminders", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 200);
        let mut r = row("r7");
        r.status = crate::reminder_types::ReminderStatus::Cancelled;
        db.update_reminder(&r).await.unwrap();
        let status: String = fresh
            .query_row("SELECT status FROM reminders WHERE id = 'r7'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(status, "cancelled");
        assert!(db.claim_tick("s", 60_000, 1).await.unwrap());
        assert!(!db.claim_tick("s", 60_000, 2).await.unwrap());
        assert_eq!(db.skip_tick("s", 120_000).await.unwrap(), 1);
    }

    /// A one-statement job has no savepoint: a statement that fails half
    /// way (its first row inserted, its second refused) leaves nothing of
    /// itself in the batch, and the batch's other jobs commit.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_failed_one_statement_job_leaves_nothing_and_fails_alone() {
        let dir = tempfile::tempdir().unwrap();
        let db = std::sync::Arc::new(Db::open(dir.path()).unwrap());
        db.make_schema("CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY)")
            .unwrap();
        db.queue_one(|conn| conn.execute("INSERT INTO t VALUES ('first')", []))
            .await
            .unwrap();
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..200 {
            let db = db.clone();
            tasks.spawn(async move {
                let sql = if i == 100 {
                    "INSERT INTO t VALUES ('half'), ('first')".to_owned()
                } else {
                    format!("INSERT INTO t VALUES ('k{i}')")
                };
                (i, db.queue_one(move |conn| conn.execute(&sql, [])).await)
            });
        }
        let mut failed = Vec::new();
        while let Some(done) = tasks.join_next().await {
            let (i, result) = done.unwrap();
            if result.is_err() {
                failed.push(i);
            }
        }
        assert_eq!(failed, [100]);
        db.write_detached_one(|conn| {
            conn.execute("INSERT INTO t VALUES ('late'), ('first')", [])
                .map(|_| ())
        });
        db.write_detached_one(|conn| {
            conn.execute("INSERT INTO t VALUES ('after')", [])
                .map(|_| ())
        });
        db.flush().await.unwrap();
        let fresh = Connection::open(dir.path().join("agentkit.sqlite")).unwrap();
        let n: i64 = fresh
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        // `first`, 199 of the 200, and `after`.
        assert_eq!(n, 201);
        let stray: i64 = fresh
            .query_row(
                "SELECT count(*) FROM t WHERE k IN ('half', 'late')",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(stray, 0);
    }
}
