//! One agent's eval runs started through the dev routes (`evals.rs`):
//! kept in memory (and as `eval-runs/<runId>.json` when runs persist),
//! or in the shared database, where every host lists the runs any host
//! started. A leaf: the routes and the mount use it, it uses neither.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agentkit_evals::Report;
use agentkit_manifest::{ModelSpec, Project};
use serde_json::{Value, json};

use super::http::ApiError;

/// One agent's eval runs started on this server.
#[derive(Debug)]
pub(crate) struct DevEvals {
    pub(super) project: Arc<Project>,
    /// The agent's own public URL.
    pub(super) base_url: String,
    pub(super) providers: Arc<agentkit_harness::ProviderConfig>,
    pub(super) default_model: Option<ModelSpec>,
    /// `eval-runs/` when runs persist.
    pub(super) dir: Option<PathBuf>,
    pub(super) max_runs: usize,
    pub(super) runs: Mutex<VecDeque<Run>>,
    /// On a shared database (`--database-url`) the runs live there, so
    /// every host lists and shows the runs any host started; `runs` and
    /// `eval-runs/` are then unused.
    pub(super) shared: Option<agentkit_pg::EvalRunTable>,
}

#[derive(Debug, Clone)]
pub(super) struct Run {
    pub(super) run_id: String,
    pub(super) started_at: String,
    pub(super) selectors: Vec<String>,
    pub(super) tags: Vec<String>,
    pub(super) report: Option<Arc<Report>>,
}

impl Run {
    pub(super) fn summary(&self) -> Value {
        json!({
            "runId": self.run_id,
            "status": if self.report.is_some() { "completed" } else { "running" },
            "startedAt": self.started_at,
            "selectors": self.selectors,
            "tags": self.tags,
            "ok": self.report.as_ref().map(|r| r.ok),
            "summary": self.report.as_ref().map(|r| &r.summary),
        })
    }
}

impl DevEvals {
    pub(crate) fn new(
        project: Arc<Project>,
        state_dir: &std::path::Path,
        base_url: String,
        providers: Arc<agentkit_harness::ProviderConfig>,
        default_model: Option<ModelSpec>,
    ) -> DevEvals {
        let config = project.evals.as_ref().and_then(|e| e.config.clone());
        let dir = config
            .as_ref()
            .filter(|c| c.persist_runs)
            .map(|_| state_dir.join("eval-runs"));
        let max_runs = config.as_ref().map_or(20, |c| c.max_playground_runs.max(1)) as usize;
        let mut runs = VecDeque::new();
        if let Some(dir) = &dir {
            let mut stored: Vec<Report> = std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| std::fs::read_to_string(e.path()).ok())
                .filter_map(|t| serde_json::from_str(&t).ok())
                .collect();
            stored.sort_by(|a: &Report, b| a.started_at.cmp(&b.started_at));
            for r in stored {
                runs.push_back(Run {
                    run_id: r.run_id.clone(),
                    started_at: r.started_at.clone(),
                    selectors: Vec::new(),
                    tags: Vec::new(),
                    report: Some(Arc::new(r)),
                });
            }
        }
        DevEvals {
            project,
            base_url,
            providers,
            default_model,
            dir,
            max_runs,
            runs: Mutex::new(runs),
            shared: None,
        }
    }

    /// Keeps the runs in the shared database instead of this host.
    pub(crate) fn shared(mut self, backend: &agentkit_pg::PgBackend, agent: &str) -> Self {
        self.shared = Some(agentkit_pg::EvalRunTable::new(
            backend.database().clone(),
            agent,
        ));
        self.dir = None;
        self
    }

    /// Records a started run: here, or in the shared database.
    pub(super) async fn start(&self, run: Run) -> Result<(), ApiError> {
        if let Some(table) = &self.shared {
            let row = agentkit_pg::EvalRunRow {
                run_id: run.run_id,
                started_at: run.started_at,
                host: agentkit_pg::Leases::owner_name(),
                selectors: json!(run.selectors).to_string(),
                tags: json!(run.tags).to_string(),
                report: None,
            };
            let keep = i64::try_from(self.max_runs).unwrap_or(i64::MAX);
            return table.start(&row, keep).await.map_err(shared_error);
        }
        let mut runs = self.lock();
        runs.push_back(run);
        self.trim(&mut runs);
        Ok(())
    }

    /// Every run, newest first.
    pub(super) async fn all(&self) -> Result<Vec<Run>, ApiError> {
        match &self.shared {
            Some(table) => Ok(table
                .list()
                .await
                .map_err(shared_error)?
                .into_iter()
                .map(run_of)
                .collect()),
            None => Ok(self.lock().iter().rev().cloned().collect()),
        }
    }

    /// One run.
    pub(super) async fn one(&self, run_id: &str) -> Result<Option<Run>, ApiError> {
        match &self.shared {
            Some(table) => Ok(table.get(run_id).await.map_err(shared_error)?.map(run_of)),
            None => Ok(self.lock().iter().find(|r| r.run_id == run_id).cloned()),
        }
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Run>> {
        self.runs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps the newest `max_runs`, deleting the files of the others.
    pub(super) fn trim(&self, runs: &mut VecDeque<Run>) {
        while runs.len() > self.max_runs {
            if let Some(old) = runs.pop_front()
                && let Some(dir) = &self.dir
            {
                let _ = std::fs::remove_file(dir.join(format!("{}.json", old.run_id)));
            }
        }
    }

    pub(super) async fn finish(&self, run_id: &str, report: Report) {
        if let Some(table) = &self.shared {
            let text = serde_json::to_string(&report).unwrap_or_default();
            if let Err(e) = table.finish(run_id, &text).await {
                tracing::warn!(error = %e, run = %run_id, "cannot record an eval report in the shared database");
            }
            return;
        }
        if let Some(dir) = &self.dir {
            let written = std::fs::create_dir_all(dir).and_then(|()| {
                let text = serde_json::to_vec_pretty(&report).unwrap_or_default();
                std::fs::write(dir.join(format!("{run_id}.json")), text)
            });
            if let Err(e) = written {
                tracing::warn!(error = %e, "cannot keep an eval run");
            }
        }
        let mut runs = self.lock();
        if let Some(run) = runs.iter_mut().find(|r| r.run_id == run_id) {
            run.report = Some(Arc::new(report));
        }
    }
}

/// A stored run as the routes show it (a report that does not parse
/// shows as none: the run reads as still going, and the server logs why).
fn run_of(row: agentkit_pg::EvalRunRow) -> Run {
    let strings = |text: &str| serde_json::from_str::<Vec<String>>(text).unwrap_or_default();
    let report = row.report.as_deref().and_then(|text| {
        serde_json::from_str::<Report>(text)
            .map_err(|e| tracing::warn!(run = %row.run_id, error = %e, "cannot read a stored eval report"))
            .ok()
    });
    Run {
        selectors: strings(&row.selectors),
        tags: strings(&row.tags),
        run_id: row.run_id,
        started_at: row.started_at,
        report: report.map(Arc::new),
    }
}

/// The shared database failed: answered as every shared read is (`503`
/// when it cannot be reached, the detail in the server's log only).
fn shared_error(e: agentkit_pg::Error) -> ApiError {
    agentkit_runtime::Error::Shared(e.into()).into()
}
