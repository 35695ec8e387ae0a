//! The A/B rows of one host, in `agentkit.sqlite` beside the session
//! index: the assignment of each enrolled session (`ab_assignments`), one
//! row per ended turn (`ab_turns`) and outcomes posted later
//! (`ab_feedback`), behind the same trait as the shared store's
//! (`agentkit_store::SharedAb`), so the runtime records and reports
//! through one path whichever store it runs on. Writes go through the
//! one SQLite writer (a turn's row queued without waiting); reads run on
//! a reader connection of their own, on the blocking pool.

use std::path::PathBuf;
use std::sync::Arc;

use agentkit_store::{AbFeedback, AbTotals, AbTurn, SharedAb, SharedError, StoreFuture};
use futures_util::FutureExt;
use rusqlite::{Connection, params};

use crate::db::Db;
use crate::error::Error;

/// This host's A/B rows.
#[derive(Debug)]
pub(crate) struct LocalAb {
    db: Arc<Db>,
}

impl LocalAb {
    pub(crate) fn new(db: Arc<Db>) -> LocalAb {
        LocalAb { db }
    }

    /// Runs `f` on a reader connection, on the blocking pool.
    fn read<'a, T: Send + 'static>(
        &'a self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> StoreFuture<'a, T> {
        let path: PathBuf = self.db.path().to_owned();
        async move {
            let err = |e: rusqlite::Error| {
                failed(&Error::Db {
                    path: path.clone(),
                    source: e,
                })
            };
            let read = path.clone();
            let conn_result = tokio::task::spawn_blocking(move || {
                let conn = Db::open_reader(&read)?;
                f(&conn)
            })
            .await
            .map_err(|e| SharedError::Failed {
                message: format!("the A/B read did not finish: {e}"),
            })?;
            conn_result.map_err(err)
        }
        .boxed()
    }
}

fn failed(e: &Error) -> SharedError {
    SharedError::Failed {
        message: e.to_string(),
    }
}

fn insert_assignments(
    conn: &Connection,
    session_id: &str,
    principal: &str,
    purpose: Option<&str>,
    at_ms: i64,
    assignments: &[(String, Option<String>)],
) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(
        "INSERT OR IGNORE INTO ab_assignments (session_id, experiment, variant, principal_id, purpose, assigned_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for (experiment, variant) in assignments {
        stmt.execute(params![
            session_id, experiment, variant, principal, purpose, at_ms
        ])?;
    }
    Ok(())
}

const TURN_TOTALS: &str = "
SELECT COUNT(*), COALESCE(SUM(t.outcome = 'failed'), 0), COALESCE(SUM(t.outcome = 'interrupted'), 0),
       COALESCE(SUM(t.input_tokens), 0), COALESCE(SUM(t.output_tokens), 0),
       COALESCE(SUM(t.cache_read_tokens), 0), COALESCE(SUM(t.cache_write_tokens), 0),
       COALESCE(SUM(t.latency_ms), 0), COALESCE(SUM(CAST(t.latency_ms AS REAL) * t.latency_ms), 0),
       COALESCE(SUM(t.tool_calls), 0), COALESCE(SUM(t.tool_errors), 0)
FROM ab_assignments a JOIN ab_turns t ON t.session_id = a.session_id
WHERE a.experiment = ?1 AND a.variant = ?2";

/// Live feedback: every label but the eval runner's.
const FEEDBACK_TOTALS: &str = "
SELECT COUNT(*), COALESCE(SUM(f.score), 0), COALESCE(SUM(f.score * f.score), 0)
FROM ab_assignments a JOIN ab_feedback f ON f.session_id = a.session_id
WHERE a.experiment = ?1 AND a.variant = ?2 AND (f.label IS NULL OR f.label <> 'eval')";

/// The eval runner's verdicts on eval sessions: the latest per session.
const EVAL_TOTALS: &str = "
SELECT COUNT(*), COALESCE(SUM(f.score >= 1), 0)
FROM ab_assignments a JOIN ab_feedback f ON f.session_id = a.session_id
WHERE a.experiment = ?1 AND a.variant = ?2 AND a.purpose = 'eval' AND f.label = 'eval'
  AND f.id = (SELECT MAX(g.id) FROM ab_feedback g WHERE g.session_id = f.session_id AND g.label = 'eval')";

const LATENCY_AT_RANK: &str = "
SELECT t.latency_ms FROM ab_assignments a JOIN ab_turns t ON t.session_id = a.session_id
WHERE a.experiment = ?1 AND a.variant = ?2 ORDER BY t.latency_ms LIMIT 1 OFFSET ?3";

impl SharedAb for LocalAb {
    fn record_assignments<'a>(
        &'a self,
        session: &'a str,
        principal: &'a str,
        purpose: Option<&'a str>,
        at_ms: i64,
        assignments: &'a [(String, Option<String>)],
    ) -> StoreFuture<'a, ()> {
        let (id, principal, purpose, assignments) = (
            session.to_owned(),
            principal.to_owned(),
            purpose.map(str::to_owned),
            assignments.to_vec(),
        );
        async move {
            if assignments.is_empty() {
                return Ok(());
            }
            self.db
                .write(move |conn| {
                    insert_assignments(
                        conn,
                        &id,
                        &principal,
                        purpose.as_deref(),
                        at_ms,
                        &assignments,
                    )
                })
                .await
                .map_err(|e| failed(&e))
        }
        .boxed()
    }

    /// Queued without waiting (a retried row for the same turn is
    /// ignored): [`settle`](SharedAb::settle) makes it visible.
    fn record_turn<'a>(&'a self, t: &'a AbTurn) -> StoreFuture<'a, ()> {
        let t = t.clone();
        self.db.write_detached(move |conn| {
            conn.prepare_cached(
                "INSERT OR IGNORE INTO ab_turns (session_id, turn_id, outcome, input_tokens, output_tokens,
                 cache_read_tokens, cache_write_tokens, latency_ms, tool_calls, tool_errors, ended_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )?
            .execute(params![
                t.session_id,
                t.turn_id,
                t.outcome,
                t.input_tokens,
                t.output_tokens,
                t.cache_read_tokens,
                t.cache_write_tokens,
                t.latency_ms,
                t.tool_calls,
                t.tool_errors,
                t.ended_at_ms
            ])
            .map(|_| ())
        });
        std::future::ready(Ok(())).boxed()
    }

    fn record_feedback<'a>(&'a self, f: AbFeedback<'a>) -> StoreFuture<'a, i64> {
        let (id, principal, purpose, assignments) = (
            f.session.to_owned(),
            f.principal.to_owned(),
            f.purpose.map(str::to_owned),
            f.assignments.to_vec(),
        );
        let (score, label, note, at_ms) = (
            f.score,
            f.label.map(str::to_owned),
            f.note.map(str::to_owned),
            f.at_ms,
        );
        async move {
            self.db
                .write(move |conn| {
                    insert_assignments(
                        conn,
                        &id,
                        &principal,
                        purpose.as_deref(),
                        at_ms,
                        &assignments,
                    )?;
                    conn.prepare_cached(
                        "INSERT INTO ab_feedback (session_id, score, label, note, principal_id, at_ms)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    )?
                    .execute(params![id, score, label, note, principal, at_ms])?;
                    Ok(conn.last_insert_rowid())
                })
                .await
                .map_err(|e| failed(&e))
        }
        .boxed()
    }

    fn settle(&self) -> StoreFuture<'_, ()> {
        async move { self.db.flush().await.map_err(|e| failed(&e)) }.boxed()
    }

    fn not_enrolled<'a>(&'a self, experiment: &'a str) -> StoreFuture<'a, i64> {
        let experiment = experiment.to_owned();
        self.read(move |conn| {
            conn.prepare_cached(
                "SELECT COUNT(*) FROM ab_assignments WHERE experiment = ?1 AND variant IS NULL",
            )?
            .query_row(params![experiment], |r| r.get(0))
        })
    }

    fn totals<'a>(&'a self, experiment: &'a str, variant: &'a str) -> StoreFuture<'a, AbTotals> {
        let (x, v) = (experiment.to_owned(), variant.to_owned());
        self.read(move |conn| totals(conn, &x, &v))
    }

    fn latency_at<'a>(
        &'a self,
        experiment: &'a str,
        variant: &'a str,
        rank: i64,
    ) -> StoreFuture<'a, Option<i64>> {
        let (x, v) = (experiment.to_owned(), variant.to_owned());
        self.read(move |conn| {
            match conn
                .prepare_cached(LATENCY_AT_RANK)?
                .query_row(params![x, v, rank], |r| r.get::<_, i64>(0))
            {
                Ok(ms) => Ok(Some(ms)),
                Err(rusqlite::Error::QueryReturnedNoRows) => Ok(None),
                Err(e) => Err(e),
            }
        })
    }
}

fn totals(conn: &Connection, experiment: &str, variant: &str) -> rusqlite::Result<AbTotals> {
    let mut t = AbTotals::default();
    conn.prepare_cached(
        "SELECT COUNT(*), COALESCE(SUM(purpose = 'eval'), 0) FROM ab_assignments WHERE experiment = ?1 AND variant = ?2",
    )?
    .query_row(params![experiment, variant], |r| {
        (t.sessions, t.eval_sessions) = (r.get(0)?, r.get(1)?);
        Ok(())
    })?;
    conn.prepare_cached(TURN_TOTALS)?
        .query_row(params![experiment, variant], |r| {
            t.turns = r.get(0)?;
            t.failed = r.get(1)?;
            t.interrupted = r.get(2)?;
            t.input_tokens = r.get(3)?;
            t.output_tokens = r.get(4)?;
            t.cache_read_tokens = r.get(5)?;
            t.cache_write_tokens = r.get(6)?;
            t.latency_sum = r.get(7)?;
            t.latency_sum_sq = r.get(8)?;
            t.tool_calls = r.get(9)?;
            t.tool_errors = r.get(10)?;
            Ok(())
        })?;
    conn.prepare_cached(FEEDBACK_TOTALS)?
        .query_row(params![experiment, variant], |r| {
            (t.feedback_n, t.feedback_sum, t.feedback_sum_sq) = (r.get(0)?, r.get(1)?, r.get(2)?);
            Ok(())
        })?;
    conn.prepare_cached(EVAL_TOTALS)?
        .query_row(params![experiment, variant], |r| {
            (t.eval_total, t.eval_passed) = (r.get(0)?, r.get(1)?);
            Ok(())
        })?;
    Ok(t)
}
