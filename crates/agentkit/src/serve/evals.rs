//! The eval dev routes: `GET /v1/dev/sessions/:id/files/*path` (a file of
//! a session's workspace, for file expectations), and eval runs started
//! on the server itself: `POST /v1/dev/evals` (selectors, tags),
//! `GET /v1/dev/evals` and `GET /v1/dev/evals/:runId`, keeping the last
//! `max_playground_runs` (in memory, and as `eval-runs/<runId>.json`
//! beside `agentkit.sqlite` when `persist_runs = true`).
//!
//! A run's sessions go to this server's own public API as the caller (its
//! `Authorization` header is passed on), so the caller owns and can read
//! them.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agentkit_evals::{Report, RunOptions};
use agentkit_manifest::{ModelSpec, Project};
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use serde::Deserialize;
use serde_json::{Value, json};

use agentkit_protocol::ErrorCode;

use super::http::{ApiError, ApiResult, Authed};
use super::mount::AgentState;

pub(super) fn routes() -> Router<AgentState> {
    Router::new()
        .route("/v1/dev/sessions/{id}/files/{*path}", get(workspace_file))
        .route("/v1/dev/evals", get(list_runs).post(start_run))
        .route("/v1/dev/evals/{run}", get(show_run))
}

fn dev_only(state: &AgentState) -> ApiResult<()> {
    if state.agent.dev {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            "dev routes are served only with --dev",
        ))
    }
}

/// A file of a session's workspace, for its owner.
async fn workspace_file(
    State(state): State<AgentState>,
    Path((id, path)): Path<(String, String)>,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    dev_only(&state)?;
    let root = state.agent.runtime.workspace(&id, &owner)?;
    let missing = || {
        ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::FileNotFound,
            format!("`{path}` is not in the workspace of `{id}`"),
        )
    };
    if !root.is_dir() {
        return Err(missing());
    }
    let file = agentkit_runtime::safe_join(&root, &path)?;
    match tokio::fs::read(&file).await {
        Ok(bytes) => {
            Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], bytes).into_response())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(missing()),
        Err(e) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::BadRequest,
            format!("cannot read `{path}`: {e}"),
        )),
    }
}

/// One agent's eval runs started on this server.
#[derive(Debug)]
pub(crate) struct DevEvals {
    project: Arc<Project>,
    /// The agent's own public URL.
    base_url: String,
    providers: Arc<agentkit_harness::ProviderConfig>,
    default_model: Option<ModelSpec>,
    /// `eval-runs/` when runs persist.
    dir: Option<PathBuf>,
    max_runs: usize,
    runs: Mutex<VecDeque<Run>>,
    /// On a shared database (`--database-url`) the runs live there, so
    /// every host lists and shows the runs any host started; `runs` and
    /// `eval-runs/` are then unused.
    shared: Option<agentkit_pg::EvalRunTable>,
}

#[derive(Debug, Clone)]
struct Run {
    run_id: String,
    started_at: String,
    selectors: Vec<String>,
    tags: Vec<String>,
    report: Option<Arc<Report>>,
}

impl Run {
    fn summary(&self) -> Value {
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
    pub(crate) fn shared(mut self, state: &agentkit_runtime::SharedState, agent: &str) -> Self {
        self.shared = Some(agentkit_pg::EvalRunTable::new(state.db.clone(), agent));
        self.dir = None;
        self
    }

    /// Records a started run: here, or in the shared database.
    async fn start(&self, run: Run) -> Result<(), ApiError> {
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
    async fn all(&self) -> Result<Vec<Run>, ApiError> {
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
    async fn one(&self, run_id: &str) -> Result<Option<Run>, ApiError> {
        match &self.shared {
            Some(table) => Ok(table.get(run_id).await.map_err(shared_error)?.map(run_of)),
            None => Ok(self.lock().iter().find(|r| r.run_id == run_id).cloned()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Run>> {
        self.runs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps the newest `max_runs`, deleting the files of the others.
    fn trim(&self, runs: &mut VecDeque<Run>) {
        while runs.len() > self.max_runs {
            if let Some(old) = runs.pop_front()
                && let Some(dir) = &self.dir
            {
                let _ = std::fs::remove_file(dir.join(format!("{}.json", old.run_id)));
            }
        }
    }

    async fn finish(&self, run_id: &str, report: Report) {
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

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StartBody {
    #[serde(default)]
    selectors: Vec<String>,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    iterations: Option<u32>,
}

async fn start_run(
    State(state): State<AgentState>,
    headers: HeaderMap,
    Authed { body, .. }: Authed,
) -> ApiResult {
    dev_only(&state)?;
    let req: StartBody = if body.iter().all(u8::is_ascii_whitespace) {
        StartBody::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                ErrorCode::BadRequest,
                format!("invalid request body: {e}"),
            )
        })?
    };
    let dev = state.agent.evals.clone();
    let Some(evals) = dev.project.evals.clone() else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            format!("`{}` has no evals", state.agent.slug),
        ));
    };
    let cases: Vec<agentkit_manifest::EvalCase> =
        agentkit_evals::select(&evals, &req.selectors, &req.tags)
            .map_err(|e| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    ErrorCode::UnknownSelector,
                    e.to_string(),
                )
            })?
            .into_iter()
            .cloned()
            .collect();
    let run_id = format!("evr_{}", uuid::Uuid::now_v7().simple());
    let started_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    dev.start(Run {
        run_id: run_id.clone(),
        started_at,
        selectors: req.selectors.clone(),
        tags: req.tags.clone(),
        report: None,
    })
    .await?;
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let client = agentkit_client::Client::new(&dev.base_url, bearer);
    let config = evals.config.clone();
    let options = RunOptions {
        agent: state.agent.slug.clone(),
        model: None,
        concurrency: config.as_ref().map_or(1, |c| c.max_concurrency) as usize,
        iterations: req.iterations,
        dry_run: config.as_ref().is_some_and(|c| c.dry_run),
        judge: agentkit_evals::JudgeOptions {
            default_model: dev.default_model.clone(),
            dir: dev.project.agent.dir.clone(),
            providers: (*dev.providers).clone(),
        },
        ..RunOptions::default()
    };
    let id = run_id.clone();
    let count = cases.len();
    tokio::spawn(async move {
        let refs: Vec<&agentkit_manifest::EvalCase> = cases.iter().collect();
        let mut report =
            agentkit_evals::run(&client, &refs, &options, &agentkit_evals::NoProgress).await;
        report.run_id = id.clone();
        dev.finish(&id, report).await;
    });
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(json!({"ok": true, "runId": run_id, "status": "running", "cases": count})),
    )
        .into_response())
}

async fn list_runs(State(state): State<AgentState>, _auth: Authed) -> ApiResult {
    dev_only(&state)?;
    let runs: Vec<Value> = state
        .agent
        .evals
        .all()
        .await?
        .iter()
        .map(Run::summary)
        .collect();
    Ok(axum::Json(json!({"ok": true, "runs": runs})).into_response())
}

async fn show_run(
    State(state): State<AgentState>,
    Path(run_id): Path<String>,
    _auth: Authed,
) -> ApiResult {
    dev_only(&state)?;
    let run = state.agent.evals.one(&run_id).await?.ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            format!("no eval run `{run_id}`"),
        )
    })?;
    let mut doc = run.summary();
    doc["ok"] = json!(true);
    doc["report"] = json!(run.report.as_deref());
    Ok(axum::Json(doc).into_response())
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
    agentkit_runtime::Error::Shared(e).into()
}
