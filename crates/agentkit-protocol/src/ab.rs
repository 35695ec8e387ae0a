//! The A/B bodies of the HTTP API: `POST /v1/session/:id/feedback` and
//! `GET /v1/ab` (per-experiment, per-variant metrics with confidence
//! intervals against the control). Field order is the wire order.

use serde::{Deserialize, Serialize};

use crate::Usage;

/// `POST /v1/session/:id/feedback`: an outcome for a session, credited to
/// its variants.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Feedback {
    /// Any finite number on the caller's scale (thumbs 1/0, 1–5 stars…);
    /// variants are compared on its mean.
    pub score: f64,
    /// A short tag (at most 64 characters). `eval` is reserved for the
    /// eval runner's pass (1) / fail (0) of an eval session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Free text (at most 4,096 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One experiment's assignment of a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Assigned {
    pub experiment: String,
    /// `None`: the traffic share left the session out.
    pub variant: Option<String>,
}

/// The answer to `POST /v1/session/:id/feedback`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct FeedbackRecorded {
    pub ok: bool,
    pub session_id: String,
    pub feedback_id: u64,
    /// What the feedback is credited to (empty outside experiments).
    pub credited: Vec<Assigned>,
}

/// `GET /v1/ab`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AbReport {
    pub ok: bool,
    pub experiments: Vec<ExperimentReport>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ExperimentReport {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub traffic: f64,
    /// `key` or `principal`.
    pub sticky: String,
    /// The variant the others are compared with: the one named `control`,
    /// else the first.
    pub control: String,
    /// Sessions the traffic share left out.
    pub not_enrolled: u64,
    pub variants: Vec<VariantMetrics>,
    /// Each other variant against the control, per metric.
    pub comparisons: Vec<Comparison>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct VariantMetrics {
    pub id: String,
    pub weight: u32,
    /// Sessions assigned to it (eval sessions included).
    pub sessions: u64,
    /// Of those, sessions with `purpose = "eval"`.
    pub eval_sessions: u64,
    /// Turns that ended (completed, failed or interrupted).
    pub turns: u64,
    pub failed_turns: u64,
    pub interrupted_turns: u64,
    /// `failedTurns / turns`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_rate: Option<f64>,
    /// Token usage summed over its turns.
    pub usage: Usage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<Latency>,
    pub tool_calls: u64,
    pub tool_errors: u64,
    /// Feedback other than the eval runner's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<ScoreSummary>,
    /// The eval runner's verdicts on eval sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval: Option<PassRate>,
}

/// Turn latency, from `turn.started` to the turn's end (approval waits
/// included).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Latency {
    pub p50: u64,
    pub p95: u64,
    pub mean: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ScoreSummary {
    pub count: u64,
    pub mean: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stddev: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PassRate {
    pub passed: u64,
    pub total: u64,
    pub rate: f64,
}

/// `variant − control` for one metric, with a 95 % confidence interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Comparison {
    /// `feedback.score`, `turns.failureRate`, `turns.latencyMs` or
    /// `eval.passRate`.
    pub metric: String,
    pub variant: String,
    pub control: String,
    pub control_value: f64,
    pub variant_value: f64,
    pub difference: f64,
    /// `[low, high]`.
    pub ci95: [f64; 2],
    /// The interval excludes zero.
    pub significant: bool,
    /// Observations behind each side (feedback entries, turns or eval
    /// verdicts).
    pub control_n: u64,
    pub variant_n: u64,
    /// How the interval is computed.
    pub method: String,
}
