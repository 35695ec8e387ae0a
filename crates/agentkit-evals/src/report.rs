//! The eval run's one JSON document: stable field names (camelCase), a
//! `version`, every case with its iterations, turns and checks.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Bumped when a field changes meaning or goes away (adding one does not).
pub const REPORT_VERSION: u32 = 1;

/// Whether something passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Passed,
    Failed,
}

impl Outcome {
    pub fn of(passed: bool) -> Outcome {
        if passed {
            Outcome::Passed
        } else {
            Outcome::Failed
        }
    }

    pub fn passed(self) -> bool {
        self == Outcome::Passed
    }
}

/// A whole run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub version: u32,
    pub run_id: String,
    pub agent: String,
    /// The model every agent ran on (`--model`), when one was forced.
    #[serde(default)]
    pub model: Option<String>,
    pub started_at: String,
    pub duration_ms: u64,
    /// The most case iterations that were allowed to run at once.
    pub concurrency: usize,
    pub ok: bool,
    pub summary: Summary,
    /// What every case's runs cost in US dollars; `null` when a price was
    /// unknown.
    #[serde(default)]
    pub cost_usd: Option<f64>,
    pub cases: Vec<CaseReport>,
}

/// Counts over the run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub cases: usize,
    pub passed: usize,
    pub failed: usize,
    /// Case iterations run.
    pub runs: usize,
}

/// One case over its iterations.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CaseReport {
    pub id: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    /// How many times the case ran (`k`).
    pub iterations: u32,
    /// How many of those passed.
    pub passed_iterations: u32,
    /// Passed when every iteration passed.
    pub outcome: Outcome,
    /// The share of iterations that passed (pass@1).
    pub pass_rate: f64,
    /// At least one of the `k` iterations passed (pass@k), 1 or 0.
    pub pass_at_k: f64,
    /// All `k` iterations passed (pass^k), 1 or 0.
    pub pass_hat_k: f64,
    pub duration_ms: u64,
    pub usage: agentkit_client::trajectory::Usage,
    /// What the case's iterations cost in US dollars (`null`: a price was
    /// unknown).
    #[serde(default)]
    pub cost_usd: Option<f64>,
    pub runs: Vec<IterationReport>,
}

/// One run of a case.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IterationReport {
    /// 1-based.
    pub iteration: u32,
    pub outcome: Outcome,
    #[serde(default)]
    pub session_id: Option<String>,
    pub started_at: String,
    pub ended_at: String,
    pub duration_ms: u64,
    pub usage: agentkit_client::trajectory::Usage,
    /// What the run's turns cost in US dollars (`null`: a price was
    /// unknown).
    #[serde(default)]
    pub cost_usd: Option<f64>,
    /// Why the run could not go on (a refused message, a timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub turns: Vec<TurnReport>,
}

/// One message of a case and what was checked after it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnReport {
    pub send: String,
    /// `completed`, `failed`, or `running` when the turn never ended.
    pub status: String,
    #[serde(default)]
    pub reply: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub tool_calls: Vec<ToolCallSeen>,
    pub checks: Vec<CheckResult>,
}

/// A tool call as the checks saw it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallSeen {
    pub tool_name: String,
    pub input: Value,
    pub is_error: bool,
}

/// One expectation's verdict.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CheckResult {
    /// `succeeded`, `called_tool`, `not_called_tool`, `tool_order`,
    /// `reply.contains`, `reply.matches`, `reply.json_schema`, `judge`, `output`,
    /// `file`.
    pub kind: String,
    pub passed: bool,
    /// What the eval asked for.
    pub expected: String,
    /// What the run showed.
    pub seen: String,
    /// One line saying why it failed (empty when it passed).
    #[serde(default)]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<JudgeRecord>,
}

/// What a judge was asked and answered.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct JudgeRecord {
    pub model: String,
    pub system: String,
    pub prompt: String,
    #[serde(default)]
    pub answer: Option<String>,
    #[serde(default)]
    pub score: Option<f64>,
    #[serde(default)]
    pub reason: Option<String>,
    pub threshold: f64,
}

impl Report {
    /// The failing checks of a case's run, as `turn N: message` lines.
    pub fn failures(run: &IterationReport) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(e) = &run.error {
            out.push(e.clone());
        }
        for (i, turn) in run.turns.iter().enumerate() {
            if let Some(e) = &turn.error
                && turn.status == "failed"
            {
                out.push(format!("turn {} failed: {e}", i + 1));
            }
            for c in turn.checks.iter().filter(|c| !c.passed) {
                out.push(format!("turn {}: {}", i + 1, c.message));
            }
        }
        out
    }
}
