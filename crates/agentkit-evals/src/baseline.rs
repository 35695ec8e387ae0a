//! Baselines: this run against an earlier `--json` report. A case that
//! passed and now fails, or whose pass rate dropped by more than the
//! tolerance, is a regression.

use std::path::Path;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::report::Report;

/// One case that got worse.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Regression {
    pub id: String,
    pub was_pass_rate: f64,
    pub now_pass_rate: f64,
    pub message: String,
}

/// What changed against the baseline.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Comparison {
    pub baseline_run_id: String,
    pub regressions: Vec<Regression>,
    /// Cases that failed before and pass now.
    pub fixed: Vec<String>,
    /// Cases of this run the baseline does not have.
    pub new: Vec<String>,
}

impl Comparison {
    pub fn regressed(&self) -> bool {
        !self.regressions.is_empty()
    }
}

/// Reads a baseline report.
pub fn read_baseline(path: &Path) -> Result<Report> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Baseline {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    serde_json::from_str(&text).map_err(|e| Error::Baseline {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// Compares `now` with `baseline`; `tolerance` is the pass-rate drop (0
/// to 1) that is still no regression.
pub fn compare(baseline: &Report, now: &Report, tolerance: f64) -> Comparison {
    let mut out = Comparison {
        baseline_run_id: baseline.run_id.clone(),
        ..Comparison::default()
    };
    for case in &now.cases {
        let Some(was) = baseline.cases.iter().find(|c| c.id == case.id) else {
            out.new.push(case.id.clone());
            continue;
        };
        let drop = was.pass_rate - case.pass_rate;
        let message = if was.outcome.passed() && !case.outcome.passed() {
            Some(format!(
                "`{}` passed in the baseline and fails now",
                case.id
            ))
        } else if drop > tolerance + 1e-9 {
            Some(format!(
                "`{}` pass rate dropped from {:.0}% to {:.0}% (tolerance {:.0}%)",
                case.id,
                was.pass_rate * 100.0,
                case.pass_rate * 100.0,
                tolerance * 100.0
            ))
        } else {
            None
        };
        if let Some(message) = message {
            out.regressions.push(Regression {
                id: case.id.clone(),
                was_pass_rate: was.pass_rate,
                now_pass_rate: case.pass_rate,
                message,
            });
        } else if !was.outcome.passed() && case.outcome.passed() {
            out.fixed.push(case.id.clone());
        }
    }
    out
}
