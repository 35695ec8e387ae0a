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

use agentkit_evals::RunOptions;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use serde::Deserialize;
use serde_json::{Value, json};

use agentkit_protocol::ErrorCode;

use super::agent::AgentState;
use super::dev_evals::Run;
use super::http::{ApiError, ApiResult, Authed};

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
    let root = state.agent.runtime.files().dir(&id, &owner).await?;
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

/// The kind of the eval runs' cursors.
const RUN_CURSOR: &str = "r1";

/// `GET /v1/dev/evals?limit&cursor`: the runs, newest first, one page.
async fn list_runs(
    State(state): State<AgentState>,
    uri: axum::http::Uri,
    _auth: Authed,
) -> ApiResult {
    dev_only(&state)?;
    let query = super::http::list_query(&uri, RUN_CURSOR)?;
    // At most `max_playground_runs` are kept; the page is cut here.
    let mut runs = state.agent.evals.all().await?;
    let key = |r: &Run| format!("{}\n{}", r.started_at, r.run_id);
    runs.sort_by_cached_key(|r| std::cmp::Reverse(key(r)));
    let (runs, next) = super::paging::page(runs, RUN_CURSOR, &query, key);
    let runs: Vec<Value> = runs.iter().map(Run::summary).collect();
    let mut body = json!({"ok": true, "runs": runs});
    if let Some(next) = next {
        body["nextCursor"] = json!(next);
    }
    Ok(axum::Json(body).into_response())
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
