//! Deterministic tool calls: a server tool run with input the caller chose,
//! no model turn. The input is validated against the tool's schema before
//! anything runs; the result comes back exactly as the model would see it.

use std::sync::Arc;
use std::time::Instant;

use agentkit_harness::{CallOrigin, DynTool, ToolContext, ToolOutput, run_server_tool};
use agentkit_manifest::{Execution, Tool};
use agentkit_protocol::{ActionResult, ActionsRequested, EventData, ToolCall};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, InputError, Result};
use crate::meta::Owner;
use crate::requests::ToolCallOutcome;
use crate::runtime::AgentRuntime;
use crate::session_command::SessionCommand;
use crate::util::new_id;
use crate::workspace;

/// Deterministic tool calls, a part of the runtime: running a server tool
/// with caller-chosen input, in an ephemeral workspace or inside a
/// session. It holds the session core by reference. Reached through
/// [`AgentRuntime::tool_calls`].
#[derive(Debug, Clone, Copy)]
pub struct ToolCalls<'a> {
    rt: &'a AgentRuntime,
}

impl AgentRuntime {
    /// Deterministic calls of this agent's tools.
    pub fn tool_calls(&self) -> ToolCalls<'_> {
        ToolCalls { rt: self }
    }
}

impl ToolCalls<'_> {
    /// Runs server tool `name` with `input`. Without `session`, it runs in
    /// an ephemeral workspace under `<state>/tool-calls/<callId>` that is
    /// removed afterwards; with one, it runs in that session's workspace,
    /// is recorded on its stream as `actions.requested` / `action.result`
    /// under its own turn id, and is refused with `session_busy` while a
    /// turn runs. Messages that arrive during the call are admitted by
    /// their admission policy (preempt cancels the call). On a shared
    /// database, a call for a session another live host holds is routed
    /// there (`mailbox.rs`) and answered as that host answers it.
    pub async fn call(
        &self,
        name: &str,
        input: Value,
        session: Option<(&str, &Owner)>,
    ) -> Result<ToolCallOutcome> {
        self.call_from(name, input, session, CallOrigin::default())
            .await
    }

    /// [`ToolCalls::call`] on behalf of `origin` (a route, a
    /// schedule): the tool's environment and its host-bridge credential
    /// carry it. Inside a session, the session's own channel, key and
    /// purpose fill what `origin` leaves unset.
    pub async fn call_from(
        &self,
        name: &str,
        input: Value,
        session: Option<(&str, &Owner)>,
        origin: CallOrigin,
    ) -> Result<ToolCallOutcome> {
        match session {
            Some((id, owner)) => self
                .rt
                .commands()
                .dispatch(id, SessionCommand::tool_call(name, input, owner, &origin))
                .await?
                .into_called(),
            None => self.run_call(name, input, None, origin).await,
        }
    }

    /// [`call_tool_from`](ToolCalls::call_tool_from) on this host only (a
    /// session's [`SessionCommand::ToolCall`], or an ephemeral call):
    /// [`agentkit_store::SharedError::Busy`] when another live host holds the
    /// session (nothing ran then).
    pub(crate) async fn run_call(
        &self,
        name: &str,
        input: Value,
        session: Option<(&str, &Owner)>,
        origin: CallOrigin,
    ) -> Result<ToolCallOutcome> {
        let tool = self.callable(name).await?;
        validate(&tool, &input)?;
        let call_id = new_id(&format!("tool_{name}"));
        match session {
            None => self.ephemeral(tool, input, call_id, origin).await,
            Some((id, owner)) => {
                let mut origin = origin;
                if let Ok(meta) = self.rt.session_meta(id).await {
                    let own = meta.call_origin();
                    origin.channel_id = origin.channel_id.or(own.channel_id);
                    origin.continuation_key = origin.continuation_key.or(own.continuation_key);
                    origin.purpose = origin.purpose.or(own.purpose);
                }
                self.in_session(tool, input, call_id, id, owner, origin)
                    .await
            }
        }
    }

    /// The names of every tool a deterministic call can run.
    pub async fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .rt
            .agent()
            .tools
            .iter()
            .filter(|t| t.execution == Execution::Server)
            .map(|t| t.name.clone())
            .collect();
        for t in self.rt.dynamic_tools("").await {
            if !names.contains(&t.spec().name) {
                names.push(t.spec().name.clone());
            }
        }
        names
    }

    pub(crate) async fn callable(&self, name: &str) -> Result<HostTool> {
        let agent = self.rt.agent();
        let Some(tool) = agent.tool(name) else {
            if let Some(t) = self
                .rt
                .dynamic_tools("")
                .await
                .into_iter()
                .find(|t| t.spec().name == name)
            {
                return Ok(HostTool::Rust(t));
            }
            return Err(Error::UnknownTool {
                name: name.to_owned(),
                available: self.names().await,
            });
        };
        if tool.execution == Execution::Agent {
            return Err(Error::BadRequest {
                message: format!(
                    "tool `{name}` has `execution = \"agent\"`: the model runs it in its workspace; only server tools can be called on the host"
                ),
            });
        }
        Ok(HostTool::File(Arc::new(tool.clone())))
    }

    async fn ephemeral(
        &self,
        tool: HostTool,
        input: Value,
        call_id: String,
        origin: CallOrigin,
    ) -> Result<ToolCallOutcome> {
        let dir = self.rt.state_dir().join("tool-calls").join(&call_id);
        let agent = self.rt.agent().clone();
        let dir2 = dir.clone();
        tokio::task::spawn_blocking(move || workspace::materialize(&agent, &dir2))
            .await
            .map_err(|e| Error::task("workspace setup", e))??;
        let site = CallSite {
            session_id: "direct",
            workspace: &dir,
            cancel: CancellationToken::new(),
            origin,
        };
        let outcome = run(self.rt, &tool, &input, &call_id, site).await;
        let dir2 = dir.clone();
        let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(&dir2)).await;
        Ok(outcome)
    }

    async fn in_session(
        &self,
        tool: HostTool,
        input: Value,
        call_id: String,
        id: &str,
        owner: &Owner,
        origin: CallOrigin,
    ) -> Result<ToolCallOutcome> {
        if self.rt.inner.shared.is_some() {
            // The lease first, as for a message: `Busy` (routed by the
            // caller) while another live host holds it; an interrupted
            // turn of a dead holder is recorded before the call.
            let session = self.rt.sessions().owned(id, owner).await?;
            self.rt.turns().ready(&session).await?;
            self.rt.commands().hold_lease(&session).await?;
        }
        let session = self.rt.turns().claim_for_call(id, owner).await?;
        let turn_id = new_id("call");
        let guard = Release {
            runtime: self.rt,
            session: session.clone(),
        };
        self.rt.turns().ensure_workspace(&session).await?;
        let requested = EventData::ActionsRequested(ActionsRequested {
            calls: vec![ToolCall {
                call_id: call_id.clone(),
                tool_name: tool.name().to_owned(),
                input: input.clone(),
            }],
            direct: true,
        });
        self.rt
            .store()
            .append(&session.id, Some(&turn_id), requested)
            .await?;
        let site = CallSite {
            session_id: id,
            workspace: &session.workspace,
            cancel: guard.cancel(),
            origin,
        };
        let outcome = run(self.rt, &tool, &input, &call_id, site).await;
        let data = EventData::ActionResult(ActionResult {
            call_id: outcome.call_id.clone(),
            tool_name: outcome.tool_name.clone(),
            output: outcome.result.clone(),
            is_error: outcome.is_error,
            duration_ms: outcome.duration_ms,
        });
        self.rt
            .store()
            .append(&session.id, Some(&turn_id), data)
            .await?;
        self.rt.store().sync(&session.id).await?;
        drop(guard);
        Ok(outcome)
    }
}

/// Releases the session after a session-bound call, even when the call's
/// future is dropped, and starts the turn of any message that arrived
/// meanwhile.
pub(crate) struct Release<'a> {
    pub(crate) runtime: &'a AgentRuntime,
    pub(crate) session: Arc<crate::session::Session>,
}

impl Release<'_> {
    pub(crate) fn cancel(&self) -> CancellationToken {
        self.runtime
            .turns()
            .running_token(&self.session)
            .unwrap_or_default()
    }
}

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.runtime.turns().release_after_call(&self.session);
    }
}

/// A tool the host can run without a model: a server tool of the agent's
/// files, or a Rust/MCP tool.
#[derive(Debug, Clone)]
pub(crate) enum HostTool {
    File(Arc<Tool>),
    Rust(Arc<dyn DynTool>),
}

impl HostTool {
    pub(crate) fn name(&self) -> &str {
        match self {
            HostTool::File(t) => &t.name,
            HostTool::Rust(t) => &t.spec().name,
        }
    }

    fn schema(&self) -> &Value {
        match self {
            HostTool::File(t) => &t.input_schema,
            HostTool::Rust(t) => &t.spec().input_schema,
        }
    }

    /// Runs the tool; every failure is an error result.
    pub(crate) async fn run(&self, input: &Value, ctx: &ToolContext) -> ToolOutput {
        match self {
            HostTool::File(tool) => run_server_tool(tool, input, ctx).await,
            HostTool::Rust(tool) => {
                let call = tool.call(input.clone(), ctx.clone());
                tokio::select! {
                    out = call => out,
                    _ = ctx.cancel.cancelled() => ToolOutput::error("the call was interrupted"),
                }
            }
        }
    }
}

/// Where a deterministic call runs and for whom.
struct CallSite<'a> {
    session_id: &'a str,
    workspace: &'a std::path::Path,
    cancel: CancellationToken,
    origin: CallOrigin,
}

async fn run(
    runtime: &AgentRuntime,
    tool: &HostTool,
    input: &Value,
    call_id: &str,
    site: CallSite<'_>,
) -> ToolCallOutcome {
    let CallSite {
        session_id,
        workspace,
        cancel,
        origin,
    } = site;
    let started = Instant::now();
    let ctx = ToolContext {
        progress: Default::default(),
        call_id: call_id.to_owned(),
        session_id: session_id.to_owned(),
        workspace_dir: workspace.to_path_buf(),
        cancel,
        host: runtime.inner.host_bridge(),
        services: runtime.inner.services_handle(),
        as_of: runtime
            .session_meta(session_id)
            .await
            .ok()
            .and_then(|m| m.as_of),
        origin,
    };
    let out = tool.run(input, &ctx).await;
    ToolCallOutcome {
        tool_name: tool.name().to_owned(),
        call_id: call_id.to_owned(),
        is_error: out.is_error,
        result: out.output,
        duration_ms: started.elapsed().as_millis() as u64,
    }
}

/// Every schema error of `input`, with its JSON pointer.
fn validate(tool: &HostTool, input: &Value) -> Result<()> {
    let errors: Vec<InputError> = agentkit_harness::schema_errors(tool.schema(), input)
        .map_err(|e| Error::BadRequest {
            message: format!("tool `{}` has an unusable input schema: {e}", tool.name()),
        })?
        .into_iter()
        .map(|(path, message)| InputError { path, message })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Error::InvalidInput {
            tool: tool.name().to_owned(),
            errors,
        })
    }
}
