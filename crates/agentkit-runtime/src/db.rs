//! `<stateRoot>/<slug>/agentkit.sqlite`: the runtime's durable bookkeeping
//! (the last fired tick of each schedule, reminders). Other parts of the
//! host keep their own tables in the same file with their own connection,
//! so it runs in WAL mode with a busy timeout.
//!
//! Writes are single small statements on one connection behind a mutex;
//! they are quick enough (WAL, `synchronous = NORMAL`) to run inline.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{Error, Result};

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
";

/// The open database of one agent.
#[derive(Debug)]
pub(crate) struct Db {
    path: PathBuf,
    conn: Mutex<Connection>,
}

/// One stored reminder row.
#[derive(Debug, Clone)]
pub(crate) struct ReminderRow {
    pub(crate) id: String,
    pub(crate) purpose: String,
    pub(crate) channel_id: String,
    pub(crate) continuation_token: String,
    pub(crate) session_id: Option<String>,
    pub(crate) kind: String,
    pub(crate) spec: String,
    pub(crate) prompt: Option<String>,
    pub(crate) until: Option<String>,
    pub(crate) run_form: bool,
    pub(crate) status: String,
    pub(crate) reason: Option<String>,
    pub(crate) next_fire_at_ms: Option<i64>,
    pub(crate) fire_count: u64,
    pub(crate) created_at_ms: i64,
    pub(crate) last_fired_at_ms: Option<i64>,
}

const REMINDER_COLUMNS: &str = "id, purpose, channel_id, continuation_token, session_id, kind, spec, prompt, until_condition, run_form, status, reason, next_fire_at_ms, fire_count, created_at_ms, last_fired_at_ms";

fn reminder_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ReminderRow> {
    Ok(ReminderRow {
        id: r.get(0)?,
        purpose: r.get(1)?,
        channel_id: r.get(2)?,
        continuation_token: r.get(3)?,
        session_id: r.get(4)?,
        kind: r.get(5)?,
        spec: r.get(6)?,
        prompt: r.get(7)?,
        until: r.get(8)?,
        run_form: r.get::<_, i64>(9)? != 0,
        status: r.get(10)?,
        reason: r.get(11)?,
        next_fire_at_ms: r.get(12)?,
        fire_count: u64::try_from(r.get::<_, i64>(13)?).unwrap_or(0),
        created_at_ms: r.get(14)?,
        last_fired_at_ms: r.get(15)?,
    })
}

impl Db {
    pub(crate) fn open(state_dir: &Path) -> Result<Db> {
        std::fs::create_dir_all(state_dir).map_err(|e| Error::io("create", state_dir, e))?;
        let path = state_dir.join("agentkit.sqlite");
        let err = |source| Error::Db {
            path: path.clone(),
            source,
        };
        let conn = Connection::open(&path).map_err(err)?;
        conn.busy_timeout(Duration::from_secs(5)).map_err(err)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(err)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(err)?;
        conn.execute_batch(SCHEMA).map_err(err)?;
        Ok(Db {
            path: path.clone(),
            conn: Mutex::new(conn),
        })
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
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

    /// Claims `tick` for a schedule: true when this call recorded it, false
    /// when that tick (or a later one) was already recorded.
    pub(crate) fn claim_tick(&self, id: &str, tick_ms: i64, now_ms: i64) -> Result<bool> {
        let conn = self.conn();
        let changed = conn
            .execute(
                "INSERT INTO schedule_ticks (schedule_id, last_tick_ms, last_fired_at_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT(schedule_id) DO UPDATE SET last_tick_ms = ?2, last_fired_at_ms = ?3
                 WHERE last_tick_ms IS NULL OR last_tick_ms < ?2",
                params![id, tick_ms, now_ms],
            )
            .map_err(|e| self.err(e))?;
        Ok(changed == 1)
    }

    /// Records a tick skipped because the previous run was still going
    /// (the tick counts as handled: a restart does not fire it).
    pub(crate) fn skip_tick(&self, id: &str, tick_ms: i64) -> Result<u64> {
        let conn = self.conn();
        conn.execute(
            "INSERT INTO schedule_ticks (schedule_id, last_tick_ms, skipped) VALUES (?1, ?2, 1)
             ON CONFLICT(schedule_id) DO UPDATE SET last_tick_ms = ?2, skipped = skipped + 1",
            params![id, tick_ms],
        )
        .map_err(|e| self.err(e))?;
        conn.query_row(
            "SELECT skipped FROM schedule_ticks WHERE schedule_id = ?1",
            params![id],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| u64::try_from(n).unwrap_or(0))
        .map_err(|e| self.err(e))
    }

    pub(crate) fn insert_reminder(&self, r: &ReminderRow) -> Result<()> {
        self.insert_reminders(std::slice::from_ref(r))
    }

    /// Inserts many reminders in one transaction.
    pub(crate) fn insert_reminders(&self, rows: &[ReminderRow]) -> Result<()> {
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(|e| self.err(e))?;
        {
            let mut stmt = tx
                .prepare_cached(&format!(
                    "INSERT INTO reminders ({REMINDER_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)"
                ))
                .map_err(|e| self.err(e))?;
            for r in rows {
                stmt.execute(params![
                    r.id,
                    r.purpose,
                    r.channel_id,
                    r.continuation_token,
                    r.session_id,
                    r.kind,
                    r.spec,
                    r.prompt,
                    r.until,
                    i64::from(r.run_form),
                    r.status,
                    r.reason,
                    r.next_fire_at_ms,
                    i64::try_from(r.fire_count).unwrap_or(i64::MAX),
                    r.created_at_ms,
                    r.last_fired_at_ms,
                ])
                .map_err(|e| self.err(e))?;
            }
        }
        tx.commit().map_err(|e| self.err(e))
    }

    /// Saves what a firing or a cancellation changed.
    pub(crate) fn update_reminder(&self, r: &ReminderRow) -> Result<()> {
        self.conn()
            .execute(
                "UPDATE reminders SET status = ?2, reason = ?3, next_fire_at_ms = ?4, fire_count = ?5, last_fired_at_ms = ?6, session_id = ?7 WHERE id = ?1",
                params![
                    r.id,
                    r.status,
                    r.reason,
                    r.next_fire_at_ms,
                    i64::try_from(r.fire_count).unwrap_or(i64::MAX),
                    r.last_fired_at_ms,
                    r.session_id,
                ],
            )
            .map_err(|e| self.err(e))?;
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
    /// many.
    pub(crate) fn disarm_run_form(&self, reason: &str) -> Result<usize> {
        self.conn()
            .execute(
                "UPDATE reminders SET status = 'disarmed', reason = ?1, next_fire_at_ms = NULL WHERE status = 'armed' AND run_form = 1",
                params![reason],
            )
            .map_err(|e| self.err(e))
    }
}
