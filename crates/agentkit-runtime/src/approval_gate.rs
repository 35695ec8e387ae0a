//! Where a running turn's calls wait for a person's decision: the
//! parked calls by `(session, call)` and the gate each turn parks at. A
//! leaf: the runtime holds the waiters, the `Approvals` part decides.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agentkit_harness::{ApprovalGate, ClientResultFuture, Decision, DecisionFuture, ToolOutput};
use tokio::sync::oneshot;

use crate::util::lock;

/// The calls parked in running turns, by `(session, call)`.
#[derive(Debug, Default)]
pub(crate) struct Waiters {
    pub(crate) map: Mutex<HashMap<(String, String), oneshot::Sender<Decision>>>,
    /// Calls of client tools waiting for the client's result.
    pub(crate) clients: Mutex<HashMap<(String, String), oneshot::Sender<ToolOutput>>>,
}

/// The gate one turn parks its calls at.
#[derive(Debug)]
pub(crate) struct SessionGate {
    pub(crate) waiters: Arc<Waiters>,
    pub(crate) session: String,
}

/// Unparks the call when its wait ends or is dropped (an interrupted turn).
struct Unpark {
    waiters: Arc<Waiters>,
    key: (String, String),
    client: bool,
}

impl Drop for Unpark {
    fn drop(&mut self) {
        if self.client {
            lock(&self.waiters.clients).remove(&self.key);
        } else {
            lock(&self.waiters.map).remove(&self.key);
        }
    }
}

impl ApprovalGate for SessionGate {
    fn park(&self, _turn_id: &str, call_id: &str) -> DecisionFuture {
        let (tx, rx) = oneshot::channel();
        let key = (self.session.clone(), call_id.to_owned());
        lock(&self.waiters.map).insert(key.clone(), tx);
        let guard = Unpark {
            waiters: self.waiters.clone(),
            key,
            client: false,
        };
        Box::pin(async move {
            let decision = rx
                .await
                .unwrap_or_else(|_| Decision::deny("the approval was withdrawn", "system"));
            drop(guard);
            decision
        })
    }

    fn park_client(&self, _turn_id: &str, call_id: &str) -> ClientResultFuture {
        let (tx, rx) = oneshot::channel();
        let key = (self.session.clone(), call_id.to_owned());
        lock(&self.waiters.clients).insert(key.clone(), tx);
        let guard = Unpark {
            waiters: self.waiters.clone(),
            key,
            client: true,
        };
        Box::pin(async move {
            let result = rx.await.ok();
            drop(guard);
            result
        })
    }
}
