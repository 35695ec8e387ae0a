//! What each experiment variant's sessions did, kept in `agentkit.sqlite`
//! beside the session index: the assignment of each enrolled session
//! (`ab_assignments`), one row per ended turn (`ab_turns`: outcome, tokens,
//! latency, tool calls and errors) and outcomes posted later
//! (`ab_feedback`). The session's log stays the source of truth for what
//! ran; these rows are what `GET /v1/ab` aggregates without reading logs.
//!
//! Assignments are written when the session starts (and again, ignored if
//! present, when feedback arrives, so a session whose row a crash lost is
//! still credited); turn rows are queued without waiting when a turn ends.
//!
//! On a shared database (`--database-url`) the same rows live in
//! the shared store (`agentkit_store::SharedAb`), so the report of any host covers
//! the sessions of every host; the sums are turned into the report by the
//! same code ([`assemble`]).

use std::path::Path;

use agentkit_manifest::{Experiment, Sticky};
use agentkit_protocol::Usage;
use agentkit_protocol::ab::{
    AbReport, Comparison, ExperimentReport, Latency, PassRate, ScoreSummary, VariantMetrics,
};
use rusqlite::{Connection, params};

use crate::ab::Assignment;
use crate::ab_stats::{self, Interval, Moments};
use crate::db::Db;
use crate::error::{Error, Result};

/// The feedback label the eval runner posts its verdicts with.
pub const EVAL_LABEL: &str = "eval";

/// One ended turn of an enrolled session.
#[derive(Debug, Clone)]
pub(crate) struct TurnRow {
    pub(crate) session_id: String,
    pub(crate) turn_id: String,
    /// `completed`, `failed` or `interrupted`.
    pub(crate) outcome: &'static str,
    pub(crate) usage: Usage,
    pub(crate) latency_ms: u64,
    pub(crate) tool_calls: u64,
    pub(crate) tool_errors: u64,
    pub(crate) ended_at_ms: i64,
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn insert_assignments(
    conn: &Connection,
    session_id: &str,
    principal: &str,
    purpose: Option<&str>,
    at_ms: i64,
    assignments: &[Assignment],
) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(
        "INSERT OR IGNORE INTO ab_assignments (session_id, experiment, variant, principal_id, purpose, assigned_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for a in assignments {
        stmt.execute(params![
            session_id,
            a.experiment,
            a.variant,
            principal,
            purpose,
            at_ms
        ])?;
    }
    Ok(())
}

impl Db {
    /// Records a new session's assignments; answers once committed.
    pub(crate) async fn record_assignments(
        &self,
        session_id: &str,
        principal: &str,
        purpose: Option<&str>,
        at_ms: i64,
        assignments: Vec<Assignment>,
    ) -> Result<()> {
        if assignments.is_empty() {
            return Ok(());
        }
        let (id, principal, purpose) = (
            session_id.to_owned(),
            principal.to_owned(),
            purpose.map(str::to_owned),
        );
        self.write(move |conn| {
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
    }

    /// Queues one ended turn (a retried row for the same turn is ignored).
    pub(crate) fn record_turn(&self, row: TurnRow) {
        self.write_detached(move |conn| {
            conn.prepare_cached(
                "INSERT OR IGNORE INTO ab_turns (session_id, turn_id, outcome, input_tokens, output_tokens,
                 cache_read_tokens, cache_write_tokens, latency_ms, tool_calls, tool_errors, ended_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )?
            .execute(params![
                row.session_id,
                row.turn_id,
                row.outcome,
                to_i64(row.usage.input_tokens),
                to_i64(row.usage.output_tokens),
                to_i64(row.usage.cache_read_tokens),
                to_i64(row.usage.cache_write_tokens),
                to_i64(row.latency_ms),
                to_i64(row.tool_calls),
                to_i64(row.tool_errors),
                row.ended_at_ms
            ])
            .map(|_| ())
        });
    }

    /// Stores one feedback entry (and the session's assignments, if a
    /// crash lost them); answers its id once committed.
    pub(crate) async fn record_feedback(
        &self,
        session_id: &str,
        principal: &str,
        purpose: Option<&str>,
        assignments: Vec<Assignment>,
        feedback: agentkit_protocol::ab::Feedback,
        at_ms: i64,
    ) -> Result<u64> {
        let (id, principal, purpose) = (
            session_id.to_owned(),
            principal.to_owned(),
            purpose.map(str::to_owned),
        );
        self.write(move |conn| {
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
            .execute(params![
                id,
                feedback.score,
                feedback.label,
                feedback.note,
                principal,
                at_ms
            ])?;
            Ok(to_u64(conn.last_insert_rowid()))
        })
        .await
    }
}

/// The report of `experiments`, read from the database at `path` on a
/// connection of its own (blocking: call it inside `spawn_blocking`).
pub(crate) fn report(path: &Path, experiments: &[Experiment]) -> Result<AbReport> {
    let err = |source| Error::Db {
        path: path.to_owned(),
        source,
    };
    let conn = Db::open_reader(path).map_err(err)?;
    let experiments = experiments
        .iter()
        .map(|x| experiment_report(&conn, x))
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(err)?;
    Ok(AbReport {
        ok: true,
        experiments,
    })
}

/// What one variant's rows add up to, before it becomes wire metrics.
#[derive(Debug, Default)]
struct Tally {
    sessions: u64,
    eval_sessions: u64,
    turns: u64,
    failed: u64,
    interrupted: u64,
    usage: Usage,
    latency: Moments,
    tool_calls: u64,
    tool_errors: u64,
    feedback: Moments,
    eval_passed: u64,
    eval_total: u64,
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

fn tally(conn: &Connection, experiment: &str, variant: &str) -> rusqlite::Result<Tally> {
    let mut t = Tally::default();
    conn.prepare_cached(
        "SELECT COUNT(*), COALESCE(SUM(purpose = 'eval'), 0) FROM ab_assignments WHERE experiment = ?1 AND variant = ?2",
    )?
    .query_row(params![experiment, variant], |r| {
        t.sessions = to_u64(r.get(0)?);
        t.eval_sessions = to_u64(r.get(1)?);
        Ok(())
    })?;
    conn.prepare_cached(TURN_TOTALS)?
        .query_row(params![experiment, variant], |r| {
            t.turns = to_u64(r.get(0)?);
            t.failed = to_u64(r.get(1)?);
            t.interrupted = to_u64(r.get(2)?);
            t.usage = Usage {
                input_tokens: to_u64(r.get(3)?),
                output_tokens: to_u64(r.get(4)?),
                cache_read_tokens: to_u64(r.get(5)?),
                cache_write_tokens: to_u64(r.get(6)?),
            };
            t.latency = Moments {
                n: t.turns,
                sum: r.get::<_, i64>(7)? as f64,
                sum_sq: r.get(8)?,
            };
            t.tool_calls = to_u64(r.get(9)?);
            t.tool_errors = to_u64(r.get(10)?);
            Ok(())
        })?;
    conn.prepare_cached(FEEDBACK_TOTALS)?
        .query_row(params![experiment, variant], |r| {
            t.feedback = Moments {
                n: to_u64(r.get(0)?),
                sum: r.get(1)?,
                sum_sq: r.get(2)?,
            };
            Ok(())
        })?;
    conn.prepare_cached(EVAL_TOTALS)?
        .query_row(params![experiment, variant], |r| {
            t.eval_total = to_u64(r.get(0)?);
            t.eval_passed = to_u64(r.get(1)?);
            Ok(())
        })?;
    Ok(t)
}

fn latency_at(
    conn: &Connection,
    experiment: &str,
    variant: &str,
    p: f64,
    n: u64,
) -> rusqlite::Result<Option<u64>> {
    let Some(rank) = ab_stats::rank(p, n) else {
        return Ok(None);
    };
    conn.prepare_cached(LATENCY_AT_RANK)?
        .query_row(params![experiment, variant, to_i64(rank)], |r| {
            r.get::<_, i64>(0)
        })
        .map(|ms| Some(to_u64(ms)))
}

fn experiment_report(conn: &Connection, x: &Experiment) -> rusqlite::Result<ExperimentReport> {
    let not_enrolled: i64 = conn
        .prepare_cached(
            "SELECT COUNT(*) FROM ab_assignments WHERE experiment = ?1 AND variant IS NULL",
        )?
        .query_row(params![x.id], |r| r.get(0))?;
    let mut measured = Vec::new();
    for v in &x.variants {
        let t = tally(conn, &x.id, &v.id)?;
        let p50 = latency_at(conn, &x.id, &v.id, 50.0, t.turns)?;
        let p95 = latency_at(conn, &x.id, &v.id, 95.0, t.turns)?;
        measured.push(Measured { tally: t, p50, p95 });
    }
    Ok(assemble(x, to_u64(not_enrolled), measured))
}

/// One variant's sums and latency percentiles, from either store.
#[derive(Debug)]
struct Measured {
    tally: Tally,
    p50: Option<u64>,
    p95: Option<u64>,
}

/// The report of experiment `x` from what its variants measured (in
/// `x.variants`' order).
fn assemble(x: &Experiment, not_enrolled: u64, measured: Vec<Measured>) -> ExperimentReport {
    let control = x
        .variants
        .iter()
        .find(|v| v.id == "control")
        .or(x.variants.first())
        .map(|v| v.id.clone())
        .unwrap_or_default();
    let mut tallies = Vec::new();
    let mut variants = Vec::new();
    for (v, Measured { tally: t, p50, p95 }) in x.variants.iter().zip(measured) {
        let latency_ms = match (p50, p95, t.latency.mean()) {
            (Some(p50), Some(p95), Some(mean)) => Some(Latency { p50, p95, mean }),
            _ => None,
        };
        variants.push(VariantMetrics {
            id: v.id.clone(),
            weight: v.weight,
            sessions: t.sessions,
            eval_sessions: t.eval_sessions,
            turns: t.turns,
            failed_turns: t.failed,
            interrupted_turns: t.interrupted,
            failure_rate: (t.turns > 0).then(|| t.failed as f64 / t.turns as f64),
            usage: t.usage,
            latency_ms,
            tool_calls: t.tool_calls,
            tool_errors: t.tool_errors,
            feedback: t.feedback.mean().map(|mean| ScoreSummary {
                count: t.feedback.n,
                mean,
                stddev: t.feedback.variance().map(f64::sqrt),
            }),
            eval: (t.eval_total > 0).then(|| PassRate {
                passed: t.eval_passed,
                total: t.eval_total,
                rate: t.eval_passed as f64 / t.eval_total as f64,
            }),
        });
        tallies.push((v.id.clone(), t));
    }
    let comparisons = match tallies.iter().find(|(id, _)| *id == control) {
        Some((_, base)) => tallies
            .iter()
            .filter(|(id, _)| *id != control)
            .flat_map(|(id, t)| compare(&control, base, id, t))
            .collect(),
        None => Vec::new(),
    };
    ExperimentReport {
        id: x.id.clone(),
        description: x.description.clone(),
        traffic: x.traffic,
        sticky: match x.sticky {
            Sticky::Key => "key",
            Sticky::Principal => "principal",
        }
        .to_owned(),
        control,
        not_enrolled,
        variants,
        comparisons,
    }
}

impl Tally {
    /// A variant's sums as the shared database answers them.
    fn of_shared(t: &agentkit_store::AbTotals) -> Tally {
        let turns = to_u64(t.turns);
        Tally {
            sessions: to_u64(t.sessions),
            eval_sessions: to_u64(t.eval_sessions),
            turns,
            failed: to_u64(t.failed),
            interrupted: to_u64(t.interrupted),
            usage: Usage {
                input_tokens: to_u64(t.input_tokens),
                output_tokens: to_u64(t.output_tokens),
                cache_read_tokens: to_u64(t.cache_read_tokens),
                cache_write_tokens: to_u64(t.cache_write_tokens),
            },
            latency: Moments {
                n: turns,
                sum: t.latency_sum as f64,
                sum_sq: t.latency_sum_sq,
            },
            tool_calls: to_u64(t.tool_calls),
            tool_errors: to_u64(t.tool_errors),
            feedback: Moments {
                n: to_u64(t.feedback_n),
                sum: t.feedback_sum,
                sum_sq: t.feedback_sum_sq,
            },
            eval_passed: to_u64(t.eval_passed),
            eval_total: to_u64(t.eval_total),
        }
    }
}

/// The report of `experiments` from the shared database (every host's
/// sessions).
async fn report_shared(
    ab: &dyn agentkit_store::SharedAb,
    experiments: &[Experiment],
) -> Result<AbReport> {
    let mut out = Vec::with_capacity(experiments.len());
    for x in experiments {
        let not_enrolled = to_u64(ab.not_enrolled(&x.id).await?);
        let mut measured = Vec::with_capacity(x.variants.len());
        for v in &x.variants {
            let tally = Tally::of_shared(&ab.totals(&x.id, &v.id).await?);
            let at = |p: f64| {
                let rank = ab_stats::rank(p, tally.turns);
                let (x, v) = (x.id.clone(), v.id.clone());
                async move {
                    match rank {
                        Some(rank) => {
                            Ok::<_, Error>(ab.latency_at(&x, &v, to_i64(rank)).await?.map(to_u64))
                        }
                        None => Ok(None),
                    }
                }
            };
            let p50 = at(50.0).await?;
            let p95 = at(95.0).await?;
            measured.push(Measured { tally, p50, p95 });
        }
        out.push(assemble(x, not_enrolled, measured));
    }
    Ok(AbReport {
        ok: true,
        experiments: out,
    })
}

fn pg_assignments(assignments: &[Assignment]) -> Vec<(String, Option<String>)> {
    assignments
        .iter()
        .map(|a| (a.experiment.clone(), a.variant.clone()))
        .collect()
}

impl crate::AgentRuntime {
    /// Records a new session's assignments, in the shared database or
    /// this host's; answers once committed.
    pub(crate) async fn record_ab_assignments(
        &self,
        session_id: &str,
        principal: &str,
        purpose: Option<&str>,
        at_ms: i64,
        assignments: Vec<Assignment>,
    ) -> Result<()> {
        match &self.inner.shared {
            Some(shared) => Ok(shared
                .ab
                .record_assignments(
                    session_id,
                    principal,
                    purpose,
                    at_ms,
                    &pg_assignments(&assignments),
                )
                .await?),
            None => {
                self.inner
                    .db
                    .record_assignments(session_id, principal, purpose, at_ms, assignments)
                    .await
            }
        }
    }

    /// Records one ended turn of an enrolled session: queued without
    /// waiting on one host; on a shared database written before the
    /// turn's end is appended, so a report on any host that saw the turn
    /// end counts it.
    pub(crate) async fn record_ab_turn(&self, row: TurnRow) {
        let Some(shared) = &self.inner.shared else {
            self.inner.db.record_turn(row);
            return;
        };
        let turn = agentkit_store::AbTurn {
            session_id: row.session_id,
            turn_id: row.turn_id,
            outcome: row.outcome.to_owned(),
            input_tokens: to_i64(row.usage.input_tokens),
            output_tokens: to_i64(row.usage.output_tokens),
            cache_read_tokens: to_i64(row.usage.cache_read_tokens),
            cache_write_tokens: to_i64(row.usage.cache_write_tokens),
            latency_ms: to_i64(row.latency_ms),
            tool_calls: to_i64(row.tool_calls),
            tool_errors: to_i64(row.tool_errors),
            ended_at_ms: row.ended_at_ms,
        };
        if let Err(e) = shared.ab.record_turn(&turn).await {
            tracing::warn!(session = %turn.session_id, error = %e, "cannot record an A/B turn");
        }
    }
}

const WELCH: &str = "welch-normal-95";
const AGRESTI_CAFFO: &str = "agresti-caffo-95";

/// Every metric both sides have enough data for.
fn compare(control: &str, base: &Tally, variant: &str, t: &Tally) -> Vec<Comparison> {
    let entry =
        |metric: &str, method: &str, i: Interval, values: (f64, f64), ns: (u64, u64)| Comparison {
            metric: metric.to_owned(),
            variant: variant.to_owned(),
            control: control.to_owned(),
            control_value: values.0,
            variant_value: values.1,
            difference: i.difference,
            ci95: [i.low, i.high],
            significant: i.excludes_zero(),
            control_n: ns.0,
            variant_n: ns.1,
            method: method.to_owned(),
        };
    let rate = |s: u64, n: u64| s as f64 / n as f64;
    let mut out = Vec::new();
    if let Some(i) = ab_stats::mean_difference(&base.feedback, &t.feedback) {
        out.push(entry(
            "feedback.score",
            WELCH,
            i,
            (
                base.feedback.mean().unwrap_or_default(),
                t.feedback.mean().unwrap_or_default(),
            ),
            (base.feedback.n, t.feedback.n),
        ));
    }
    if let Some(i) = ab_stats::proportion_difference((base.failed, base.turns), (t.failed, t.turns))
    {
        out.push(entry(
            "turns.failureRate",
            AGRESTI_CAFFO,
            i,
            (rate(base.failed, base.turns), rate(t.failed, t.turns)),
            (base.turns, t.turns),
        ));
    }
    if let Some(i) = ab_stats::mean_difference(&base.latency, &t.latency) {
        out.push(entry(
            "turns.latencyMs",
            WELCH,
            i,
            (
                base.latency.mean().unwrap_or_default(),
                t.latency.mean().unwrap_or_default(),
            ),
            (base.turns, t.turns),
        ));
    }
    if let Some(i) = ab_stats::proportion_difference(
        (base.eval_passed, base.eval_total),
        (t.eval_passed, t.eval_total),
    ) {
        out.push(entry(
            "eval.passRate",
            AGRESTI_CAFFO,
            i,
            (
                rate(base.eval_passed, base.eval_total),
                rate(t.eval_passed, t.eval_total),
            ),
            (base.eval_total, t.eval_total),
        ));
    }
    out
}

/// The longest feedback `label`, in characters.
const MAX_LABEL_CHARS: usize = 64;
/// The longest feedback `note`, in bytes.
const MAX_NOTE_BYTES: usize = 4096;

fn check_feedback(f: &agentkit_protocol::ab::Feedback) -> Result<()> {
    let bad = |message: String| Err(Error::BadRequest { message });
    if !f.score.is_finite() {
        return bad("`score` must be a finite number".into());
    }
    if let Some(label) = &f.label {
        if label.trim().is_empty() || label.chars().count() > MAX_LABEL_CHARS {
            return bad(format!("`label` must be 1 to {MAX_LABEL_CHARS} characters"));
        }
        if label == EVAL_LABEL && !(f.score == 0.0 || f.score == 1.0) {
            return bad(
                "feedback labelled `eval` is a verdict: `score` is 1 (passed) or 0 (failed)".into(),
            );
        }
    }
    if f.note.as_ref().is_some_and(|n| n.len() > MAX_NOTE_BYTES) {
        return bad(format!("`note` is longer than {MAX_NOTE_BYTES} bytes"));
    }
    Ok(())
}

impl crate::AgentRuntime {
    /// `POST /v1/session/:id/feedback`: stores an outcome for a session
    /// `owner` may act on, credited to the variants its log records
    /// (whenever it arrives: days later, after restarts).
    pub async fn feedback(
        &self,
        id: &str,
        owner: &crate::Owner,
        feedback: agentkit_protocol::ab::Feedback,
    ) -> Result<agentkit_protocol::ab::FeedbackRecorded> {
        check_feedback(&feedback)?;
        let session = self.owned(id, owner)?;
        self.ready(&session).await?;
        let assignments = self.with_history(&session, crate::ab::recorded).await?;
        let (principal, purpose) = {
            let meta = session.meta();
            (meta.owner.principal_id.clone(), meta.purpose.clone())
        };
        let at_ms = chrono::Utc::now().timestamp_millis();
        let feedback_id = match &self.inner.shared {
            Some(shared) => to_u64(
                shared
                    .ab
                    .record_feedback(agentkit_store::AbFeedback {
                        session: id,
                        principal: &principal,
                        purpose: purpose.as_deref(),
                        assignments: &pg_assignments(&assignments),
                        score: feedback.score,
                        label: feedback.label.as_deref(),
                        note: feedback.note.as_deref(),
                        at_ms,
                    })
                    .await?,
            ),
            None => {
                self.inner
                    .db
                    .record_feedback(
                        id,
                        &principal,
                        purpose.as_deref(),
                        assignments.clone(),
                        feedback,
                        at_ms,
                    )
                    .await?
            }
        };
        Ok(agentkit_protocol::ab::FeedbackRecorded {
            ok: true,
            session_id: id.to_owned(),
            feedback_id,
            credited: assignments
                .into_iter()
                .map(|a| agentkit_protocol::ab::Assigned {
                    experiment: a.experiment,
                    variant: a.variant,
                })
                .collect(),
        })
    }

    /// `GET /v1/ab`: every experiment of the agent with its variants'
    /// metrics and their comparison with the control.
    pub async fn ab_report(&self) -> Result<AbReport> {
        if let Some(shared) = &self.inner.shared {
            return report_shared(shared.ab.as_ref(), &self.inner.agent.experiments).await;
        }
        // Rows queued before this call are in the report.
        self.inner.db.flush().await?;
        let path = self.inner.db.path().to_owned();
        let agent = std::sync::Arc::clone(&self.inner.agent);
        let read = path.clone();
        tokio::task::spawn_blocking(move || report(&read, &agent.experiments))
            .await
            .map_err(|e| Error::Io {
                action: "read the A/B report from",
                path,
                source: std::io::Error::other(e),
            })?
    }
}
