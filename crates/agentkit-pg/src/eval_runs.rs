//! Eval runs started through the dev routes, shared by hosts
//! (`agentkit_eval_runs`): the host that starts a run inserts its row and
//! writes its report into it when it ends; every host lists and shows
//! them from here. Selectors, tags and the report are JSON text.

use crate::database::Database;
use crate::error::{Error, Result};

/// One stored run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalRunRow {
    pub run_id: String,
    pub started_at: String,
    pub host: String,
    /// JSON arrays of strings.
    pub selectors: String,
    pub tags: String,
    /// The report as JSON; `None` while the run is going.
    pub report: Option<String>,
}

/// One agent's eval runs. Cheap to clone.
#[derive(Debug, Clone)]
pub struct EvalRunTable {
    db: Database,
    agent: String,
}

const COLUMNS: &str = "run_id, started_at, host, selectors, tags, report";

fn row_of(r: &tokio_postgres::Row) -> EvalRunRow {
    EvalRunRow {
        run_id: r.get(0),
        started_at: r.get(1),
        host: r.get(2),
        selectors: r.get(3),
        tags: r.get(4),
        report: r.get(5),
    }
}

impl EvalRunTable {
    pub fn new(db: Database, agent: &str) -> EvalRunTable {
        EvalRunTable {
            db,
            agent: agent.to_owned(),
        }
    }

    /// Records a run that has started, then keeps the newest `keep` runs
    /// of the agent (older rows are deleted).
    pub async fn start(&self, run: &EvalRunRow, keep: i64) -> Result<()> {
        let client = self.db.client().await?;
        client
            .execute(
                "INSERT INTO agentkit_eval_runs (agent, run_id, started_at, host, selectors, tags, report)
                 VALUES ($1, $2, $3, $4, $5, $6, NULL)",
                &[
                    &self.agent,
                    &run.run_id,
                    &run.started_at,
                    &run.host,
                    &run.selectors,
                    &run.tags,
                ],
            )
            .await
            .map_err(Error::query("record an eval run"))?;
        client
            .execute(
                "DELETE FROM agentkit_eval_runs WHERE agent = $1 AND run_id NOT IN (
                     SELECT run_id FROM agentkit_eval_runs WHERE agent = $1
                     ORDER BY started_at DESC, run_id DESC LIMIT $2)",
                &[&self.agent, &keep],
            )
            .await
            .map_err(Error::query("trim the eval runs"))?;
        Ok(())
    }

    /// Writes a run's report (it ended).
    pub async fn finish(&self, run_id: &str, report: &str) -> Result<()> {
        self.db
            .client()
            .await?
            .execute(
                "UPDATE agentkit_eval_runs SET report = $3 WHERE agent = $1 AND run_id = $2",
                &[&self.agent, &run_id, &report],
            )
            .await
            .map_err(Error::query("record an eval report"))?;
        Ok(())
    }

    /// The agent's runs, newest first.
    pub async fn list(&self) -> Result<Vec<EvalRunRow>> {
        let rows = self
            .db
            .client()
            .await?
            .query(
                &format!(
                    "SELECT {COLUMNS} FROM agentkit_eval_runs WHERE agent = $1
                     ORDER BY started_at DESC, run_id DESC"
                ),
                &[&self.agent],
            )
            .await
            .map_err(Error::query("list eval runs"))?;
        Ok(rows.iter().map(row_of).collect())
    }

    /// One run.
    pub async fn get(&self, run_id: &str) -> Result<Option<EvalRunRow>> {
        let row = self
            .db
            .client()
            .await?
            .query_opt(
                &format!(
                    "SELECT {COLUMNS} FROM agentkit_eval_runs WHERE agent = $1 AND run_id = $2"
                ),
                &[&self.agent, &run_id],
            )
            .await
            .map_err(Error::query("read an eval run"))?;
        Ok(row.as_ref().map(row_of))
    }
}
