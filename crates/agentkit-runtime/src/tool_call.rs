//! Deterministic tool calls: a server tool run with input the caller chose,
//! no model turn. The input is validated against the tool's schema before
//! anything runs; the result comes back exactly as the model would see it.

use std::sync::Arc;
use std::time::Instant;

use agentkit_harness::{ToolContext, run_server_tool};
use agentkit_manifest::{Execution, Tool};
use agentkit_protocol::EventType;
use serde::Serialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::error::{Error, InputError, Result};
use crate::meta::Owner;
use crate::runtime::{AgentRuntime, new_id};
use crate::workspace;

/// The envelope of a finished call.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallOutcome {
    pub tool_name: String,
    pub call_id: String,
    pub is_error: bool,
    pub result: Value,
    pub duration_ms: u64,
}

impl AgentRuntime {
    /// Runs server tool `name` with `input`. Without `session`, it runs in
    /// an ephemeral workspace under `<state>/tool-calls/<callId>` that is
    /// removed afterwards; with one, it runs in that session's workspace,
    /// is recorded on its stream as `actions.requested` / `action.result`
    /// under its own turn id, and is refused with `session_busy` while a
    /// turn runs. Messages that arrive during the call are admitted by
    /// their admission policy (preempt cancels the call).
    pub async fn call_tool(
        &self,
        name: &str,
        input: Value,
        session: Option<(&str, &Owner)>,
    ) -> Result<ToolCallOutcome> {
        let tool = self.callable_tool(name)?;
        validate(&tool, &input)?;
        let call_id = new_id(&format!("tool_{name}"));
        match session {
            None => self.call_ephemeral(tool, input, call_id).await,
            Some((id, owner)) => self.call_in_session(tool, input, call_id, id, owner).await,
        }
    }

    /// Refuses a call that [`AgentRuntime::call_tool`] would refuse
    /// (unknown tool, agent tool, input against its schema).
    pub(crate) fn check_tool_call(&self, name: &str, input: &Value) -> Result<()> {
        let tool = self.callable_tool(name)?;
        validate(&tool, input)
    }

    fn callable_tool(&self, name: &str) -> Result<Arc<Tool>> {
        let agent = self.agent();
        let Some(tool) = agent.tool(name) else {
            let available: Vec<String> = agent
                .tools
                .iter()
                .filter(|t| t.execution == Execution::Server)
                .map(|t| t.name.clone())
                .collect();
            return Err(Error::UnknownTool {
                name: name.to_owned(),
                available,
            });
        };
        if tool.execution == Execution::Agent {
            return Err(Error::BadRequest {
                message: format!(
                    "tool `{name}` has `execution = \"agent\"`: the model runs it in its workspace; only server tools can be called on the host"
                ),
            });
        }
        Ok(Arc::new(tool.clone()))
    }

    async fn call_ephemeral(
        &self,
        tool: Arc<Tool>,
        input: Value,
        call_id: String,
    ) -> Result<ToolCallOutcome> {
        let dir = self.state_dir().join("tool-calls").join(&call_id);
        let agent = self.agent().clone();
        let dir2 = dir.clone();
        tokio::task::spawn_blocking(move || workspace::materialize(&agent, &dir2))
            .await
            .map_err(|e| Error::BadRequest {
                message: format!("workspace setup failed: {e}"),
            })??;
        let outcome = run(
            &tool,
            &input,
            &call_id,
            "direct",
            &dir,
            CancellationToken::new(),
            self.host_bridge(),
        )
        .await;
        let dir2 = dir.clone();
        let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(&dir2)).await;
        Ok(outcome)
    }

    async fn call_in_session(
        &self,
        tool: Arc<Tool>,
        input: Value,
        call_id: String,
        id: &str,
        owner: &Owner,
    ) -> Result<ToolCallOutcome> {
        let session = self.claim_for_call(id, owner).await?;
        let turn_id = new_id("call");
        let guard = CallGuard {
            runtime: self,
            session: session.clone(),
        };
        let requested = json!({"calls": [{"callId": call_id, "toolName": tool.name, "input": input}], "direct": true});
        self.store()
            .append(
                &session.id,
                EventType::ActionsRequested,
                Some(&turn_id),
                requested,
            )
            .await?;
        let outcome = run(
            &tool,
            &input,
            &call_id,
            id,
            &session.workspace,
            guard.cancel(),
            self.host_bridge(),
        )
        .await;
        let data = json!({
            "callId": outcome.call_id,
            "toolName": outcome.tool_name,
            "output": outcome.result,
            "isError": outcome.is_error,
            "durationMs": outcome.duration_ms,
        });
        self.store()
            .append(&session.id, EventType::ActionResult, Some(&turn_id), data)
            .await?;
        self.store().sync(&session.id).await?;
        drop(guard);
        Ok(outcome)
    }
}

/// Releases the session after a session-bound call, even when the call's
/// future is dropped, and starts the turn of any message that arrived
/// meanwhile.
struct CallGuard<'a> {
    runtime: &'a AgentRuntime,
    session: Arc<crate::runtime::Session>,
}

impl CallGuard<'_> {
    fn cancel(&self) -> CancellationToken {
        self.runtime
            .running_token(&self.session)
            .unwrap_or_default()
    }
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        self.runtime.release_after_call(&self.session);
    }
}

async fn run(
    tool: &Tool,
    input: &Value,
    call_id: &str,
    session_id: &str,
    workspace: &std::path::Path,
    cancel: CancellationToken,
    host: Option<agentkit_harness::HostBridge>,
) -> ToolCallOutcome {
    let started = Instant::now();
    let ctx = ToolContext {
        call_id: call_id.to_owned(),
        session_id: session_id.to_owned(),
        workspace_dir: workspace.to_path_buf(),
        cancel,
        host,
    };
    let out = run_server_tool(tool, input, &ctx).await;
    ToolCallOutcome {
        tool_name: tool.name.clone(),
        call_id: call_id.to_owned(),
        is_error: out.is_error,
        result: out.output,
        duration_ms: started.elapsed().as_millis() as u64,
    }
}

/// Every schema error of `input`, with its JSON pointer.
fn validate(tool: &Tool, input: &Value) -> Result<()> {
    let errors: Vec<InputError> = agentkit_harness::schema_errors(&tool.input_schema, input)
        .map_err(|e| Error::BadRequest {
            message: format!("tool `{}` has an unusable input schema: {e}", tool.name),
        })?
        .into_iter()
        .map(|(path, message)| InputError { path, message })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Error::InvalidInput {
            tool: tool.name.clone(),
            errors,
        })
    }
}
