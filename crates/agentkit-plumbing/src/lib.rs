//! agentkit's plumbing: the mechanisms every crate above needs once and
//! only once, with no knowledge of agents, sessions or channels.
//!
//! - [`ChildSpec`] with [`run_child`] / [`spawn_child`]: the one
//!   child-process runner (scrubbed environment, own process group killed
//!   on every way out, timeout, output caps, an optional [`Confinement`]
//!   the harness's sandbox implements). Server tools, the `shell`
//!   built-in, hooks, pack host tasks and stdio MCP servers all use it.
//! - [`http_client`]: the process's one outgoing HTTP client, and
//!   [`Backoff`] / [`RetryPolicy`] its one retry policy.
//! - [`redact_credentials`] and [`http_error_text`]: URLs' passwords and
//!   `Basic` / `Bearer` credentials kept out of messages.
//! - [`confine_path`] / [`check_relative_path`]: the one workspace path
//!   guard.
//!
//! Not here: the sandbox's rules (the harness reads them from the agent's
//! configuration and implements [`Confinement`]), providers, and anything
//! of agentkit's own vocabulary. It depends on no agentkit crate.

mod content_type;
mod http;
mod process;
mod redact;
#[cfg(target_os = "linux")]
mod spawn;
mod workspace_path;

pub use content_type::content_type;
pub use http::{
    Backoff, CONNECT_TIMEOUT, HttpClientError, RetryPolicy, http_client, http_error_text,
    retry_after_header,
};
pub use process::{
    Captured, ChildExit, ChildOutcome, ChildSpec, Confined, Confinement, DEFAULT_OUTPUT_CAP,
    Launch, Limit, LiveChild, PASSED_ENV, PreExec, run_child, signal_of, spawn_child,
};
pub use redact::redact_credentials;
pub use workspace_path::{PathError, check_relative_path, confine_path};
