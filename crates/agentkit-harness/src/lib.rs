//! The agentkit harness: model providers and the agent loop that runs one
//! turn of a session.
//!
//! [`run_turn`] takes the agent, its resolved model, the conversation so far
//! and this turn's user message(s); it asks the model for steps, validates
//! and runs the tool calls they make (server tools concurrently, each in its
//! own process group), and reports every step as a [`StepEvent`] that the
//! runtime stores. It ends with a [`TurnOutcome`].
//!
//! Providers: `test` (offline: calls every server tool once with arguments
//! generated from its schema, then summarises), `scripted:<file>`
//! (replays a JSON script), `openai` (Chat Completions, streamed, against
//! OpenAI or a compatible server such as Ollama or vLLM) and `anthropic`
//! (the Messages API, streamed). Built-in workspace tools (`read`,
//! `write`, `edit`, `list`, `grep`, `shell`) run confined to the session
//! workspace.
//!
//! Not here: sessions, storage and HTTP (the runtime and the facade own
//! them), approvals (calls of tools that need approval are refused with an
//! error result until approvals land) and `glob`. Subagents run through
//! the built-in `task` tool as a nested loop.

mod builtins;
mod credentials;
mod providers;
mod step;
mod tools;
mod turn;

pub use agentkit_manifest::schema_errors;
pub use credentials::{Endpoint, ProviderConfig};
pub use providers::model_from_env_or_default;
pub use step::{FinishReason, StepEvent};
pub use tools::{
    BoxFuture, ExtraTool, ExtraTools, HostBridge, ReminderHost, ToolContext, ToolOutput,
    run_server_tool,
};
pub use turn::{TurnInput, TurnOutcome, run_turn};

/// [`run_turn`] behind a box, for the `task` tool's nested loop: the
/// recursion needs a named future type, and it must live outside `turn`
/// so the compiler can see that the nested future is `Send`.
pub(crate) fn boxed_turn(
    input: TurnInput,
    events: tokio::sync::mpsc::Sender<StepEvent>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = TurnOutcome> + Send>> {
    Box::pin(run_turn(input, events))
}
