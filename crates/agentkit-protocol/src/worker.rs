//! The tool-worker protocol: one JSON line per call on the worker's
//! stdin ([`WorkerCall`]), one JSON line per answer on its stdout
//! ([`WorkerAnswer`]), matched by `id`. `docs/reference/tools.md`
//! ("Workers") documents it for the programs that speak it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One call sent to a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerCall {
    pub id: u64,
    pub input: Value,
    pub context: WorkerContext,
}

/// Where a call runs: what a spawned call gets as variables.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerContext {
    pub call_id: String,
    pub session_id: String,
    pub workspace_dir: String,
    pub idempotency_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuation_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    /// The host bridge and this call's credential for it, when the host
    /// serves one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_token: Option<String>,
}

/// One line a worker writes: the call's `output` (an error result when
/// `isError`), or an `error` message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkerAnswer {
    pub id: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
