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
//! Tools beyond the agent's files ([`DynTool`]: Rust tools written with
//! [`RustTool`], MCP tools) come in through [`TurnInput::tools`]. Calls that
//! need approval park at the host's [`ApprovalGate`] (recorded as
//! `action.approval_requested` / `action.approval_resolved`); the turn's
//! timeout stops while a call waits, `approval_timeout` bounds the wait.
//!
//! Server tools and the `shell` built-in run through the one
//! child-process runner of `agentkit-plumbing` ([`ChildSpec`]), confined
//! by the sandbox ([`SandboxSpec`], which implements the runner's
//! [`Confinement`]); the providers send on its one HTTP client
//! ([`http_client`]) with its one retry policy. Those, the redaction of
//! credentials and the workspace path guard are re-exported here for the
//! crates above that already use the harness; crates that need only the
//! plumbing depend on `agentkit-plumbing` itself.
//!
//! [`trace`] holds the trace context of the work in hand (task-locals the
//! facade and the runtime set while traces are exported), which the
//! providers' HTTP layer and the MCP client put on what they send.
//!
//! Not here: sessions, storage and HTTP serving (the runtime and the facade own
//! them) and `glob`. Subagents run through the built-in `task` tool as a
//! nested loop.

mod approvals;
mod builtins;
mod client_tools;
mod complete;
mod context;
mod credentials;
mod dynamic;
mod images;
mod output;
pub mod pricing;
mod providers;
mod sandbox;
mod step;
mod tools;
pub mod trace;
mod turn;
mod worker;

pub use agentkit_manifest::schema_errors;
pub use agentkit_plumbing::{
    Backoff, Captured, ChildExit, ChildOutcome, ChildSpec, Confinement, DEFAULT_OUTPUT_CAP,
    HttpClientError, LiveChild, PASSED_ENV, PathError, RetryPolicy, check_relative_path,
    confine_path, http_client, http_error_text, redact_credentials, retry_after_header, run_child,
    signal_of, spawn_child,
};
pub use approvals::{ApprovalGate, ClientResultFuture, Decision, DecisionFuture};
pub use client_tools::with_client_tools;
pub use complete::{Completion, complete};
pub use context::{
    CALIBRATE_AFTER, MAX_CALIBRATION, SUMMARY_PREFIX, SUMMARY_PROMPT, Window, as_sent, calibration,
    fixed_breakdown, message_tokens, summary_message, window,
};
pub use credentials::{Endpoint, ProviderConfig};
pub use dynamic::{DynTool, RustTool, ToolFuture, ToolSource, ToolSpec, ToolsFuture};
pub use images::hydrate as hydrate_images;
pub use providers::{
    Asked, Cassette, LoggedAnswer, OfferedTool, RecordedAnswer, RecordedLog, RecordedResult,
    RecordedSession, RecordedToolCall, recorded_exchange, recorded_log, recorded_summary,
    request_context, wire_request,
};
pub use sandbox::{
    DEV_FILES, ETC_HIDDEN, SIMULATE_UNAVAILABLE_ENV, SYSTEM_READ, SandboxGap, SandboxSpec,
    SandboxStatus, log_sandbox_status, sandbox_info, sandbox_status,
};
pub use step::{FinishReason, StepEvent, approval_resolved};
pub use tools::{
    BoxFuture, BridgeCredentials, CallCredential, CallOrigin, CallPrincipal, ExtraTool, ExtraTools,
    ExtraToolsSource, HostBridge, HostHandle, Progress, ReminderHost, ToolContext, ToolOutput,
    run_server_tool, sandbox_gaps,
};
pub use turn::{PrepareWorkspace, TurnInput, TurnOutcome, run_turn, subagent_agent};
/// How many session-scoped tool workers (`[worker] scope = "session"`) this
/// process keeps a slot for (each ends with its worker).
pub use worker::session_worker_slots;

/// [`run_turn`] behind a box, for the `task` tool's nested loop: the
/// recursion needs a named future type, and it must live outside `turn`
/// so the compiler can see that the nested future is `Send`.
pub(crate) fn boxed_turn(
    input: TurnInput,
    events: tokio::sync::mpsc::Sender<StepEvent>,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = TurnOutcome> + Send>> {
    Box::pin(run_turn(input, events))
}

/// The content type of a file by its extension (the plumbing's).
pub use agentkit_plumbing::content_type;
