//! Delegation depth: how many agent-to-agent hops led to a session or a
//! call, so that a chain of agents calling each other (from the model,
//! from tools through the host bridge, from host code) stops at the hop
//! limit.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The delegation depth of each session that MCP `ask` drove. Its turns'
/// calls to peers (and its tools' calls through the host bridge) go one
/// deeper.
#[derive(Debug, Clone, Default)]
pub(crate) struct Depths(Arc<Mutex<HashMap<String, u32>>>);

impl Depths {
    pub(crate) fn get(&self, session_id: &str) -> u32 {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.get(session_id).copied().unwrap_or(0)
    }

    pub(crate) fn set(&self, session_id: &str, hops: u32) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if hops == 0 {
            map.remove(session_id);
        } else {
            map.insert(session_id.to_owned(), hops);
        }
    }
}

tokio::task_local! {
    /// The delegation depth a deterministic call arrived at (MCP
    /// `call_tool` from a peer): its tool's calls through the bridge go on
    /// from there.
    static CALL_HOPS: u32;
}

/// Runs `call` with its tools' bridge credentials at depth `hops` at
/// least.
pub(crate) async fn at_depth<F: std::future::Future>(hops: u32, call: F) -> F::Output {
    CALL_HOPS.scope(hops, call).await
}

/// The depth of the deterministic call running on this task (0 outside
/// one).
pub(crate) fn call_depth() -> u32 {
    CALL_HOPS.try_with(|h| *h).unwrap_or(0)
}
