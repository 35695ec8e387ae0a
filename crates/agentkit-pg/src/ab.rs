//! A/B metrics shared by hosts: assignments, ended turns and feedback of
//! enrolled sessions (`agentkit_ab_*`), and the sums `GET /v1/ab` is made
//! of. The runtime turns the sums into its report, as it does for one
//! host's SQLite tables.

use agentkit_store::{AbTotals, AbTurn};

use crate::database::Database;
use crate::error::{Error, Result};

/// One agent's A/B rows. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AbTable {
    db: Database,
    agent: String,
}

const INSERT_ASSIGNMENT: &str = "INSERT INTO agentkit_ab_assignments
    (agent, session_id, experiment, variant, principal_id, purpose, assigned_at_ms)
    VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING";

const SESSIONS: &str = "SELECT count(*), count(*) FILTER (WHERE purpose = 'eval')
    FROM agentkit_ab_assignments WHERE agent = $1 AND experiment = $2 AND variant = $3";

const TURN_TOTALS: &str = "
SELECT count(*), count(*) FILTER (WHERE t.outcome = 'failed'), count(*) FILTER (WHERE t.outcome = 'interrupted'),
       coalesce(sum(t.input_tokens), 0)::bigint, coalesce(sum(t.output_tokens), 0)::bigint,
       coalesce(sum(t.cache_read_tokens), 0)::bigint, coalesce(sum(t.cache_write_tokens), 0)::bigint,
       coalesce(sum(t.latency_ms), 0)::bigint, coalesce(sum(t.latency_ms::float8 * t.latency_ms), 0)::float8,
       coalesce(sum(t.tool_calls), 0)::bigint, coalesce(sum(t.tool_errors), 0)::bigint
FROM agentkit_ab_assignments a JOIN agentkit_ab_turns t ON t.agent = a.agent AND t.session_id = a.session_id
WHERE a.agent = $1 AND a.experiment = $2 AND a.variant = $3";

const FEEDBACK_TOTALS: &str = "
SELECT count(*), coalesce(sum(f.score), 0)::float8, coalesce(sum(f.score * f.score), 0)::float8
FROM agentkit_ab_assignments a JOIN agentkit_ab_feedback f ON f.agent = a.agent AND f.session_id = a.session_id
WHERE a.agent = $1 AND a.experiment = $2 AND a.variant = $3 AND (f.label IS NULL OR f.label <> 'eval')";

const EVAL_TOTALS: &str = "
SELECT count(*), count(*) FILTER (WHERE f.score >= 1)
FROM agentkit_ab_assignments a JOIN agentkit_ab_feedback f ON f.agent = a.agent AND f.session_id = a.session_id
WHERE a.agent = $1 AND a.experiment = $2 AND a.variant = $3 AND a.purpose = 'eval' AND f.label = 'eval'
  AND f.id = (SELECT max(g.id) FROM agentkit_ab_feedback g
              WHERE g.agent = f.agent AND g.session_id = f.session_id AND g.label = 'eval')";

const LATENCY_AT_RANK: &str = "
SELECT t.latency_ms FROM agentkit_ab_assignments a
JOIN agentkit_ab_turns t ON t.agent = a.agent AND t.session_id = a.session_id
WHERE a.agent = $1 AND a.experiment = $2 AND a.variant = $3 ORDER BY t.latency_ms LIMIT 1 OFFSET $4";

impl AbTable {
    /// The A/B rows of agent `agent` (its slug) in `db`.
    pub fn new(db: Database, agent: &str) -> AbTable {
        AbTable {
            db,
            agent: agent.to_owned(),
        }
    }

    /// Records a session's assignments (`(experiment, variant)`; rows
    /// already there stay), in one transaction.
    pub async fn record_assignments(
        &self,
        session: &str,
        principal: &str,
        purpose: Option<&str>,
        at_ms: i64,
        assignments: &[(String, Option<String>)],
    ) -> Result<()> {
        if assignments.is_empty() {
            return Ok(());
        }
        let mut client = self.db.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(Error::query("begin recording assignments"))?;
        let statement = tx
            .prepare_cached(INSERT_ASSIGNMENT)
            .await
            .map_err(Error::query("prepare an assignment"))?;
        for (experiment, variant) in assignments {
            tx.execute(
                &statement,
                &[
                    &self.agent,
                    &session,
                    experiment,
                    variant,
                    &principal,
                    &purpose,
                    &at_ms,
                ],
            )
            .await
            .map_err(Error::query("record an assignment"))?;
        }
        tx.commit()
            .await
            .map_err(Error::query("commit assignments"))?;
        Ok(())
    }

    /// Records one ended turn (a second row for the same turn is ignored).
    pub async fn record_turn(&self, t: &AbTurn) -> Result<()> {
        let client = self.db.client().await?;
        let statement = client
            .prepare_cached(
                "INSERT INTO agentkit_ab_turns (agent, session_id, turn_id, outcome, input_tokens,
                 output_tokens, cache_read_tokens, cache_write_tokens, latency_ms, tool_calls,
                 tool_errors, ended_at_ms)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT DO NOTHING",
            )
            .await
            .map_err(Error::query("prepare an A/B turn"))?;
        client
            .execute(
                &statement,
                &[
                    &self.agent,
                    &t.session_id,
                    &t.turn_id,
                    &t.outcome,
                    &t.input_tokens,
                    &t.output_tokens,
                    &t.cache_read_tokens,
                    &t.cache_write_tokens,
                    &t.latency_ms,
                    &t.tool_calls,
                    &t.tool_errors,
                    &t.ended_at_ms,
                ],
            )
            .await
            .map_err(Error::query("record an A/B turn"))?;
        Ok(())
    }

    /// Stores one feedback entry (and the session's assignments, if they
    /// are missing); answers its id.
    #[allow(clippy::too_many_arguments)]
    pub async fn record_feedback(
        &self,
        session: &str,
        principal: &str,
        purpose: Option<&str>,
        assignments: &[(String, Option<String>)],
        score: f64,
        label: Option<&str>,
        note: Option<&str>,
        at_ms: i64,
    ) -> Result<i64> {
        let mut client = self.db.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(Error::query("begin recording feedback"))?;
        for (experiment, variant) in assignments {
            tx.execute(
                INSERT_ASSIGNMENT,
                &[
                    &self.agent,
                    &session,
                    experiment,
                    variant,
                    &principal,
                    &purpose,
                    &at_ms,
                ],
            )
            .await
            .map_err(Error::query("record an assignment"))?;
        }
        let id: i64 = tx
            .query_one(
                "INSERT INTO agentkit_ab_feedback (agent, session_id, score, label, note, principal_id, at_ms)
                 VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
                &[
                    &self.agent,
                    &session,
                    &score,
                    &label,
                    &note,
                    &principal,
                    &at_ms,
                ],
            )
            .await
            .map_err(Error::query("record feedback"))?
            .get(0);
        tx.commit().await.map_err(Error::query("commit feedback"))?;
        Ok(id)
    }

    /// How many sessions `experiment` left out (outside its traffic).
    pub async fn not_enrolled(&self, experiment: &str) -> Result<i64> {
        let client = self.db.client().await?;
        Ok(client
            .query_one(
                "SELECT count(*) FROM agentkit_ab_assignments
                 WHERE agent = $1 AND experiment = $2 AND variant IS NULL",
                &[&self.agent, &experiment],
            )
            .await
            .map_err(Error::query("count sessions not enrolled"))?
            .get(0))
    }

    /// What `variant` of `experiment` adds up to, over every host.
    pub async fn totals(&self, experiment: &str, variant: &str) -> Result<AbTotals> {
        let client = self.db.client().await?;
        let args: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
            [&self.agent, &experiment, &variant];
        let mut t = AbTotals::default();
        let r = client
            .query_one(SESSIONS, &args)
            .await
            .map_err(Error::query("count A/B sessions"))?;
        (t.sessions, t.eval_sessions) = (r.get(0), r.get(1));
        let r = client
            .query_one(TURN_TOTALS, &args)
            .await
            .map_err(Error::query("sum A/B turns"))?;
        t.turns = r.get(0);
        t.failed = r.get(1);
        t.interrupted = r.get(2);
        t.input_tokens = r.get(3);
        t.output_tokens = r.get(4);
        t.cache_read_tokens = r.get(5);
        t.cache_write_tokens = r.get(6);
        t.latency_sum = r.get(7);
        t.latency_sum_sq = r.get(8);
        t.tool_calls = r.get(9);
        t.tool_errors = r.get(10);
        let r = client
            .query_one(FEEDBACK_TOTALS, &args)
            .await
            .map_err(Error::query("sum A/B feedback"))?;
        (t.feedback_n, t.feedback_sum, t.feedback_sum_sq) = (r.get(0), r.get(1), r.get(2));
        let r = client
            .query_one(EVAL_TOTALS, &args)
            .await
            .map_err(Error::query("count eval verdicts"))?;
        (t.eval_total, t.eval_passed) = (r.get(0), r.get(1));
        Ok(t)
    }

    /// The turn latency at `rank` (0-based, ascending) of `variant`.
    pub async fn latency_at(
        &self,
        experiment: &str,
        variant: &str,
        rank: i64,
    ) -> Result<Option<i64>> {
        let client = self.db.client().await?;
        Ok(client
            .query_opt(
                LATENCY_AT_RANK,
                &[&self.agent, &experiment, &variant, &rank],
            )
            .await
            .map_err(Error::query("read an A/B latency"))?
            .map(|r| r.get(0)))
    }
}
