//! Running cases: each iteration of each case is one eval session
//! (`purpose = "eval"`, dry-run as the eval says) driven turn by turn
//! through the client, at most `concurrency` at once, each turn bounded
//! by the case's timeout; parked tool calls are denied (no human watches
//! an eval); then every expectation of every turn is checked.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use agentkit_client::trajectory::add_cost;
use agentkit_client::{Client, SessionCursor, trajectory};
use agentkit_harness::ProviderConfig;
use agentkit_manifest::{EvalCase, ModelSpec};
use agentkit_protocol::api::SendMessage;
use agentkit_protocol::{EventData, EventType};
use futures_util::StreamExt;

use crate::expect::{check_file, check_turn, seen_calls};
use crate::judge::run_judge;
use crate::report::{
    CaseReport, IterationReport, Outcome, REPORT_VERSION, Report, Summary, TurnReport,
};

/// What judges need: a default model, where scripts live, the providers.
#[derive(Debug, Clone, Default)]
pub struct JudgeOptions {
    /// The judge model when a judge names none.
    pub default_model: Option<ModelSpec>,
    /// The agent folder (`scripted:<file>` paths are relative to it).
    pub dir: PathBuf,
    pub providers: ProviderConfig,
}

/// How a run goes.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The agent's slug, for the report.
    pub agent: String,
    /// The model every agent runs on, when forced (for the report).
    pub model: Option<String>,
    /// How many case iterations run at once (at least 1).
    pub concurrency: usize,
    /// Overrides every case's `iterations`.
    pub iterations: Option<u32>,
    /// `evals.toml`'s `dry_run`, for cases and files that say nothing.
    pub dry_run: bool,
    /// The turn timeout of cases that set none.
    pub default_timeout: Duration,
    pub judge: JudgeOptions,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            agent: String::new(),
            model: None,
            concurrency: 1,
            iterations: None,
            dry_run: false,
            default_timeout: Duration::from_secs(600),
            judge: JudgeOptions::default(),
        }
    }
}

/// Told as case iterations start and end (a progress display).
pub trait Progress: Send + Sync {
    fn started(&self, case: &str, iteration: u32);
    fn finished(&self, case: &str, run: &IterationReport);
}

/// A [`Progress`] that shows nothing.
#[derive(Debug, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn started(&self, _: &str, _: u32) {}
    fn finished(&self, _: &str, _: &IterationReport) {}
}

/// Runs `cases` against the agent `client` talks to.
pub async fn run(
    client: &Client,
    cases: &[&EvalCase],
    options: &RunOptions,
    progress: &dyn Progress,
) -> Report {
    let started_at = now();
    let clock = Instant::now();
    let concurrency = options.concurrency.max(1);
    let units: Vec<(usize, u32)> = cases
        .iter()
        .enumerate()
        .flat_map(|(i, c)| {
            let k = options.iterations.unwrap_or(c.iterations).max(1);
            (1..=k).map(move |n| (i, n))
        })
        .collect();
    let mut runs: Vec<Vec<IterationReport>> = vec![Vec::new(); cases.len()];
    let mut done = futures_util::stream::iter(units)
        .map(|(i, n)| async move {
            progress.started(&cases[i].id, n);
            let r = run_case(client, cases[i], n, options).await;
            progress.finished(&cases[i].id, &r);
            (i, r)
        })
        .buffer_unordered(concurrency);
    while let Some((i, r)) = done.next().await {
        runs[i].push(r);
    }
    drop(done);
    let mut reports = Vec::new();
    for (case, mut runs) in cases.iter().zip(runs) {
        runs.sort_by_key(|r| r.iteration);
        reports.push(case_report(case, runs));
    }
    let passed = reports.iter().filter(|c| c.outcome.passed()).count();
    let summary = Summary {
        cases: reports.len(),
        passed,
        failed: reports.len() - passed,
        runs: reports.iter().map(|c| c.runs.len()).sum(),
    };
    Report {
        version: REPORT_VERSION,
        run_id: format!("evr_{}", uuid::Uuid::now_v7().simple()),
        agent: options.agent.clone(),
        model: options.model.clone(),
        started_at,
        duration_ms: millis(clock.elapsed()),
        concurrency,
        ok: summary.failed == 0,
        summary,
        cost_usd: reports
            .iter()
            .try_fold(0.0, |sum, c| add_cost(Some(sum), c.cost_usd)),
        cases: reports,
    }
}

fn case_report(case: &EvalCase, runs: Vec<IterationReport>) -> CaseReport {
    let k = runs.len() as u32;
    let ok = runs.iter().filter(|r| r.outcome.passed()).count() as u32;
    let mut usage = trajectory::Usage::default();
    let mut cost_usd = Some(0.0);
    for r in &runs {
        usage.add(r.usage);
        cost_usd = add_cost(cost_usd, r.cost_usd);
    }
    CaseReport {
        id: case.id.clone(),
        description: case.description.clone(),
        tags: case.tags.clone(),
        iterations: k,
        passed_iterations: ok,
        outcome: Outcome::of(ok == k),
        pass_rate: if k == 0 {
            0.0
        } else {
            f64::from(ok) / f64::from(k)
        },
        pass_at_k: if ok > 0 { 1.0 } else { 0.0 },
        pass_hat_k: if ok == k { 1.0 } else { 0.0 },
        duration_ms: runs.iter().map(|r| r.duration_ms).sum(),
        usage,
        cost_usd,
        runs,
    }
}

/// One iteration of one case: its session, turn by turn.
async fn run_case(
    client: &Client,
    case: &EvalCase,
    iteration: u32,
    options: &RunOptions,
) -> IterationReport {
    let started_at = now();
    let clock = Instant::now();
    let timeout = case.timeout.unwrap_or(options.default_timeout);
    let dry_run = case.dry_run.unwrap_or(options.dry_run);
    let mut cursor: Option<SessionCursor> = None;
    let mut turns = Vec::new();
    let mut usage = trajectory::Usage::default();
    let mut cost_usd = Some(0.0);
    let mut error = None;
    for turn in &case.turns {
        let new = SendMessage {
            title: Some(format!("eval {} #{iteration}", case.id)),
            purpose: Some("eval".to_owned()),
            dry_run,
            workspace_files: turn.workspace_files.clone(),
            output_schema: case.output_schema.clone(),
            ..SendMessage::new(turn.send.clone())
        };
        let decider = client.clone();
        // The turn's decisions, in the order its calls park; past them,
        // calls are denied.
        let mut decisions: std::collections::VecDeque<_> = turn.approvals.clone().into();
        let on_event = move |e: &agentkit_protocol::Event| {
            if e.event_type == EventType::ActionApprovalRequested
                && let EventData::ApprovalRequested(r) = e.payload()
            {
                let (approve, reason) = match decisions.pop_front() {
                    Some(d) if d.tool == r.tool_name => (d.approve, d.reason),
                    Some(d) => (
                        false,
                        Some(format!(
                            "the case decides a call of `{}` here, not of `{}`",
                            d.tool, r.tool_name
                        )),
                    ),
                    None => (
                        false,
                        Some("no one approves calls during an eval".to_owned()),
                    ),
                };
                let client = decider.clone();
                let session = e.session_id.to_string();
                tokio::spawn(async move {
                    if let Err(e) = client
                        .resolve_approval(&session, &r.call_id, approve, reason.as_deref())
                        .await
                    {
                        tracing::warn!(error = %e, "cannot decide a parked call");
                    }
                });
            }
        };
        let sent =
            tokio::time::timeout(timeout, client.run_turn_as(&mut cursor, &new, on_event)).await;
        let events = match sent {
            Ok(Ok((_, events))) => events,
            Ok(Err(e)) => {
                error = Some(format!("turn {}: {e}", turns.len() + 1));
                break;
            }
            Err(_) => {
                if let Some(c) = &cursor {
                    let _ = client.stop(&c.session_id).await;
                }
                error = Some(format!(
                    "turn {} timed out after {}",
                    turns.len() + 1,
                    humanize(timeout)
                ));
                break;
            }
        };
        let t = trajectory::from_events(&events);
        let this = t.turns.last().cloned().unwrap_or_default();
        usage.add(this.usage);
        cost_usd = add_cost(cost_usd, this.cost_usd);
        let mut checks = check_turn(&turn.expect, &this);
        for judge in turn.expect.judges() {
            let reply = this.reply.as_deref().unwrap_or("");
            checks.push(
                run_judge(
                    &judge,
                    options.judge.default_model.as_ref(),
                    &options.judge.dir,
                    &options.judge.providers,
                    &turn.send,
                    reply,
                )
                .await,
            );
        }
        if let Some(c) = &cursor {
            for want in &turn.expect.files {
                match client.workspace_file(&c.session_id, &want.path).await {
                    Ok(content) => checks.extend(check_file(want, content.as_deref())),
                    Err(e) => {
                        // A server not in dev mode has no workspace route.
                        let hint = if e.code() == Some("not_found") {
                            " (file expectations read the workspace through the dev routes: serve with `--dev`, or run `agentkit eval` without `--url`)"
                        } else {
                            ""
                        };
                        checks.push(crate::expect::result(
                            "file",
                            false,
                            format!("`{}` can be read", want.path),
                            e.to_string(),
                            format!("cannot read `{}` from the workspace: {e}{hint}", want.path),
                        ));
                    }
                }
            }
        }
        turns.push(TurnReport {
            send: turn.send.clone(),
            status: match this.status {
                trajectory::TurnStatus::Completed => "completed",
                trajectory::TurnStatus::Failed => "failed",
                trajectory::TurnStatus::Running => "running",
            }
            .to_owned(),
            reply: this.reply.clone(),
            error: this.error.clone(),
            tool_calls: seen_calls(&this),
            checks,
        });
    }
    let passed = error.is_none() && turns.iter().all(|t| t.checks.iter().all(|c| c.passed));
    if let Some(c) = &cursor {
        // The verdict, credited to the session's A/B variants (their eval
        // pass rate in `GET /v1/ab`). A server without the route (an older
        // host behind `--url`) only loses that.
        let verdict = agentkit_protocol::ab::Feedback {
            score: if passed { 1.0 } else { 0.0 },
            label: Some("eval".to_owned()),
            note: Some(format!("{} #{iteration}", case.id)),
        };
        if let Err(e) = client.feedback(&c.session_id, &verdict).await {
            tracing::debug!(error = %e, "cannot post the eval verdict as feedback");
        }
    }
    IterationReport {
        iteration,
        outcome: Outcome::of(passed),
        session_id: cursor.map(|c| c.session_id),
        started_at,
        ended_at: now(),
        duration_ms: millis(clock.elapsed()),
        usage,
        cost_usd,
        error,
        turns,
    }
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn humanize(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}
