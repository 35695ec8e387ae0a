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
//! The rows live behind `agentkit_store::SharedAb`: this host's SQLite
//! (`ab_local.rs`) or the shared store (`--database-url`), where the
//! report of any host covers the sessions of every host; either's sums
//! become the report through the same code ([`assemble`]).

use agentkit_manifest::{Experiment, Sticky};
use agentkit_protocol::Usage;
use agentkit_protocol::ab::{
    AbReport, Comparison, ExperimentReport, Latency, PassRate, ScoreSummary, VariantMetrics,
};

use crate::ab::Assignment;
use crate::ab_stats::{self, Interval, Moments};
use crate::error::{Error, Result};
use crate::runtime::AgentRuntime;

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
    /// A variant's sums as the store answers them.
    fn of_store(t: &agentkit_store::AbTotals) -> Tally {
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

/// The report of `experiments` from the A/B store (this host's, or
/// every host's in a shared store).
async fn report(ab: &dyn agentkit_store::SharedAb, experiments: &[Experiment]) -> Result<AbReport> {
    let mut out = Vec::with_capacity(experiments.len());
    for x in experiments {
        let not_enrolled = to_u64(ab.not_enrolled(&x.id).await?);
        let mut measured = Vec::with_capacity(x.variants.len());
        for v in &x.variants {
            let tally = Tally::of_store(&ab.totals(&x.id, &v.id).await?);
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

fn pairs(assignments: &[Assignment]) -> Vec<(String, Option<String>)> {
    assignments
        .iter()
        .map(|a| (a.experiment.clone(), a.variant.clone()))
        .collect()
}

/// A/B experiments' records, a part of the runtime: assignments, turn
/// metrics, feedback and the per-variant report, over the A/B store
/// (this host's or the shared one). It holds the session core by
/// reference. Reached through [`AgentRuntime::ab`].
#[derive(Debug, Clone, Copy)]
pub struct Experiments<'a> {
    rt: &'a AgentRuntime,
}

impl AgentRuntime {
    /// This agent's A/B records.
    pub fn ab(&self) -> Experiments<'_> {
        Experiments { rt: self }
    }
}

impl Experiments<'_> {
    /// Records a new session's assignments; answers once committed.
    pub(crate) async fn record_assignments(
        &self,
        session_id: &str,
        principal: &str,
        purpose: Option<&str>,
        at_ms: i64,
        assignments: Vec<Assignment>,
    ) -> Result<()> {
        Ok(self
            .rt
            .inner
            .ab
            .record_assignments(session_id, principal, purpose, at_ms, &pairs(&assignments))
            .await?)
    }

    /// Records one ended turn of an enrolled session: queued without
    /// waiting on one host; in a shared store written before the turn's
    /// end is appended, so a report on any host that saw the turn end
    /// counts it.
    pub(crate) async fn record_turn(&self, row: TurnRow) {
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
        if let Err(e) = self.rt.inner.ab.record_turn(&turn).await {
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

impl Experiments<'_> {
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
        let session = self.rt.sessions().owned(id, owner).await?;
        self.rt.turns().ready(&session).await?;
        let assignments = self
            .rt
            .turns()
            .with_history(&session, crate::ab::recorded)
            .await?;
        let (principal, purpose) = {
            let meta = session.meta();
            (meta.owner.principal_id.clone(), meta.purpose.clone())
        };
        let at_ms = chrono::Utc::now().timestamp_millis();
        let feedback_id = to_u64(
            self.rt
                .inner
                .ab
                .record_feedback(agentkit_store::AbFeedback {
                    session: id,
                    principal: &principal,
                    purpose: purpose.as_deref(),
                    assignments: &pairs(&assignments),
                    score: feedback.score,
                    label: feedback.label.as_deref(),
                    note: feedback.note.as_deref(),
                    at_ms,
                })
                .await?,
        );
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
    pub async fn report(&self) -> Result<AbReport> {
        // Rows queued before this call are in the report.
        self.rt.inner.ab.settle().await?;
        report(self.rt.inner.ab.as_ref(), &self.rt.inner.agent.experiments).await
    }
}
