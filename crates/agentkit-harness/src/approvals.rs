//! Human-in-the-loop: a call that needs approval parks until the host
//! hands the harness a decision.
//!
//! The harness does not know where decisions come from (an HTTP route, a
//! chat button, a timeout after a restart): the host implements
//! [`ApprovalGate`]. The harness parks the call by asking the gate for the
//! decision *before* it records `action.approval_requested`, so a decision
//! can never arrive before anyone waits for it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};

/// A human's (or the timeout's) answer to a parked call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    pub approved: bool,
    /// Why; a denial's reason reaches the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Who decided: a principal id, or `timeout`, or `system`.
    pub by: String,
}

impl Decision {
    pub fn deny(reason: impl Into<String>, by: impl Into<String>) -> Decision {
        Decision {
            approved: false,
            reason: Some(reason.into()),
            by: by.into(),
        }
    }

    /// `"approve"` or `"deny"`, as the events and the HTTP API spell it.
    pub fn as_str(&self) -> &'static str {
        if self.approved { "approve" } else { "deny" }
    }
}

/// A boxed decision.
pub type DecisionFuture = Pin<Box<dyn Future<Output = Decision> + Send>>;

/// A client's result for a call of one of its tools; `None` when the
/// wait was withdrawn (or the host takes no client results).
pub type ClientResultFuture = Pin<Box<dyn Future<Output = Option<crate::ToolOutput>> + Send>>;

/// Where parked calls wait: for a person's decision, or for the result of
/// a tool the client declared (`TurnInput::client_tools`).
pub trait ApprovalGate: Send + Sync + fmt::Debug {
    /// Registers `call_id` of `turn_id` as parked and returns the future of
    /// its decision. Dropping the future (an interrupted turn) unparks it.
    fn park(&self, turn_id: &str, call_id: &str) -> DecisionFuture;

    /// Registers `call_id` of `turn_id`, a call of a client tool, as
    /// waiting for the client's result and returns the future of it.
    /// Dropping the future unparks it. A gate that takes no client
    /// results answers `None` at once.
    fn park_client(&self, turn_id: &str, call_id: &str) -> ClientResultFuture {
        let _ = (turn_id, call_id);
        Box::pin(async { None })
    }
}
