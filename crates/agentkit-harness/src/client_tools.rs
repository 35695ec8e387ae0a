//! Tools a client declares for one turn (an AG-UI front-end's tools):
//! offered to the model beside the agent's own, never run here. A call of
//! one ends the step's work on the server; the turn records
//! `actions.client_requested` and waits at the host's gate for the
//! client's result, which the model then sees as the call's output.

use std::sync::Arc;

use agentkit_protocol::ClientTool;
use serde_json::Value;

use crate::dynamic::{DynTool, ToolFuture, ToolSpec};
use crate::tools::{ToolContext, ToolOutput};

/// A client tool as the providers offer it.
#[derive(Debug)]
struct Declared {
    spec: ToolSpec,
}

impl DynTool for Declared {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// Never reached from a turn (its calls wait for the client); a
    /// deterministic call cannot run it either.
    fn call(&self, _input: Value, _ctx: ToolContext) -> ToolFuture {
        let message = format!(
            "`{}` is a tool of the client: only the client runs it",
            self.spec.name
        );
        Box::pin(async move { ToolOutput::error(message) })
    }
}

/// The turn's dynamic tools followed by the client's, as the model is
/// offered them (what a step's request carries, for rebuilding it).
pub fn with_client_tools(
    tools: &[Arc<dyn DynTool>],
    client: &[ClientTool],
) -> Vec<Arc<dyn DynTool>> {
    let mut out = tools.to_vec();
    for t in client {
        out.push(Arc::new(Declared {
            spec: ToolSpec {
                name: t.name.clone(),
                description: t.description.clone(),
                input_schema: t.parameters.clone(),
                read_only: false,
                needs_approval: agentkit_manifest::Approval::Never,
            },
        }));
    }
    out
}
