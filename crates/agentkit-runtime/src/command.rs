//! Programs the host runs outside a turn: route handlers
//! (`[routes.handler]`) and schedule commands (`command = [...]` in
//! `schedules/<id>.toml`). Each runs exactly as a server tool does, through
//! the harness's one runner (`run_server_tool`): a JSON document on stdin,
//! the agent folder as its working directory, a private scratch folder as
//! its workspace, the tools' sandbox (network on), its timeout and output
//! cap, a scrubbed environment, and a host-bridge credential of its own
//! that is revoked when it ends.

use std::time::Instant;

use agentkit_harness::{CallOrigin, ToolContext, run_server_tool};
use agentkit_manifest::{Approval, Command, Execution, Expose, Sandbox, Tool, ToolAnnotations};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::runtime::AgentRuntime;
use crate::util::new_id;

/// How a command ended: its stdout (JSON when it parses, text otherwise),
/// or an error message (a non-zero exit with its stderr, a timeout, an
/// output overflow, a program that would not start).
#[derive(Debug, Clone, PartialEq)]
pub struct CommandOutcome {
    pub output: Value,
    pub is_error: bool,
    pub duration_ms: u64,
}

impl AgentRuntime {
    /// Runs `command` with `stdin` as its input, acting for `origin` on
    /// the host bridge. `label` names it in error messages ("route handler
    /// POST /alert"). Never fails: every problem is an error outcome.
    pub async fn run_command(
        &self,
        label: &str,
        command: &Command,
        stdin: &Value,
        origin: CallOrigin,
    ) -> CommandOutcome {
        let started = Instant::now();
        let call_id = new_id("cmd");
        let scratch = self.state_dir().join("tool-calls").join(&call_id);
        let made = {
            let dir = scratch.clone();
            tokio::task::spawn_blocking(move || std::fs::create_dir_all(dir)).await
        };
        if !matches!(made, Ok(Ok(()))) {
            return CommandOutcome {
                output: Value::String(format!(
                    "{label}: cannot make its scratch folder under {}",
                    self.state_dir().display()
                )),
                is_error: true,
                duration_ms: 0,
            };
        }
        let tool = Tool {
            name: label.to_owned(),
            path: String::new(),
            description: String::new(),
            execution: Execution::Server,
            command: command.command.clone(),
            cwd: command.cwd.clone(),
            script: None,
            timeout: command.timeout,
            max_output_bytes: command.max_output_bytes,
            env: command.env.clone(),
            needs_approval: Approval::Never,
            annotations: ToolAnnotations::default(),
            input_schema: json!({"type": "object"}),
            // As for server tools: `[harness.sandbox]` with network on.
            sandbox: Sandbox {
                network: true,
                ..self.agent().config.harness.sandbox.clone()
            },
            expose: Expose::Host,
            worker: None,
        };
        let ctx = ToolContext {
            progress: Default::default(),
            call_id,
            session_id: String::new(),
            workspace_dir: scratch.clone(),
            cancel: CancellationToken::new(),
            host: self.inner.host_bridge(),
            services: self.inner.services_handle(),
            as_of: None,
            origin,
        };
        let out = run_server_tool(&tool, stdin, &ctx).await;
        let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(scratch)).await;
        CommandOutcome {
            output: out.output,
            is_error: out.is_error,
            duration_ms: started.elapsed().as_millis() as u64,
        }
    }
}
