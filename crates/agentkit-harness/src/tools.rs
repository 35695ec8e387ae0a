//! Running a server tool: a child process that reads its JSON input on
//! stdin and writes its result on stdout.
//!
//! The child runs through the one runner ([`crate::run_child`]): a
//! scrubbed environment (plus the tool's `env`), its own process group, the
//! tool's timeout and output cap. Whatever ends the call (timeout, cancel,
//! an output overflow, or the tool's own exit) the whole process group is
//! killed, so no background process outlives the call and no pipe held by
//! a grandchild keeps the call open. Unless the tool's `sandbox` is off,
//! the child is also confined ([`crate::SandboxSpec`]): the system folders
//! and its own folder read-only, the workspace and a private temporary
//! folder read-write, network as the tool's settings say. A tool with a
//! `worker` runs through its worker instead (`worker.rs`).

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Arc;

use agentkit_manifest::Tool;
use agentkit_plumbing::{ChildExit, ChildSpec, run_child};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::sandbox::SandboxGap;

/// How much of a tool's stderr is kept (the rest is read and dropped).
const STDERR_CAP: usize = 64 * 1024;

/// What a tool call knows about where it runs.
#[derive(Debug, Clone)]
pub struct ToolContext {
    pub call_id: String,
    pub session_id: String,
    /// The session workspace (`AGENTKIT_WORKSPACE_DIR`).
    pub workspace_dir: PathBuf,
    /// Cancelling kills the tool's process group.
    pub cancel: CancellationToken,
    /// The host bridge the tool may call back into.
    pub host: Option<HostBridge>,
    /// The host's services (MCP connections, key-value store, reminders),
    /// for Rust tools: `ctx.services::<agentkit::HostServices>()`.
    pub services: Option<HostHandle>,
    /// The instant the session is frozen at (`send({asOf})`), ISO-8601
    /// with an offset; subprocess tools get it as `AGENTKIT_AS_OF`.
    pub as_of: Option<String>,
    /// Where the call comes from (its session's channel and key, or the
    /// route or schedule that runs it); subprocess tools get it in their
    /// environment, and the host bridge acts for it.
    pub origin: CallOrigin,
    /// Where the call reports its progress (`action.progress` events of
    /// a model's call; nowhere for the host's own calls).
    pub progress: Progress,
}

/// Where a running call reports progress: the turn records each report as
/// an `action.progress` event of the call. [`Progress::default`] drops
/// them (a call outside a turn).
#[derive(Debug, Clone, Default)]
pub struct Progress {
    to: Option<(tokio::sync::mpsc::Sender<crate::StepEvent>, String, String)>,
}

impl Progress {
    /// Reports to the turn that `events` feeds, for call `call_id` of
    /// tool `tool_name`.
    pub fn to_turn(
        events: tokio::sync::mpsc::Sender<crate::StepEvent>,
        call_id: impl Into<String>,
        tool_name: impl Into<String>,
    ) -> Progress {
        Progress {
            to: Some((events, call_id.into(), tool_name.into())),
        }
    }

    /// Reports what the call is doing now (`status`) and text it wrote
    /// since its last report (`delta`). Waits while the turn's event
    /// channel is full; a turn that is gone drops the report.
    pub async fn report(&self, status: Option<String>, delta: Option<String>) {
        let Some((events, call_id, tool_name)) = &self.to else {
            return;
        };
        let event = crate::StepEvent::ActionProgress {
            call_id: call_id.clone(),
            tool_name: tool_name.clone(),
            status,
            delta,
        };
        let _ = events.send(event).await;
    }
}

/// What a call knows about who asked for it. Subprocess children get
/// `AGENTKIT_CHANNEL_ID`, `AGENTKIT_CONTINUATION_KEY` and
/// `AGENTKIT_PURPOSE` from it (when known); the host bridge's `send`
/// acts as `principal` and counts the sessions it starts towards
/// `schedule`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallOrigin {
    pub channel_id: Option<String>,
    pub continuation_key: Option<String>,
    pub purpose: Option<String>,
    /// Who the bridge's `send` acts as for new sessions; `None`: the
    /// calling session's owner (or the host itself outside a session).
    pub principal: Option<CallPrincipal>,
    /// The schedule whose run this call is part of.
    pub schedule: Option<String>,
    /// The call runs in a model's turn (the model chose it): the host
    /// bridge then refuses host-only tools, which the model is never
    /// offered, even through a tool it does call.
    pub model_turn: bool,
}

/// A principal as the bridge records it on the sessions it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallPrincipal {
    pub id: String,
    /// `user`, `app`, ...
    pub kind: String,
    /// The policy that admitted it.
    pub authenticator: String,
}

/// Where a server tool reaches the host (`AGENTKIT_HOST_URL`) and what it
/// authenticates with (`AGENTKIT_HOST_TOKEN`): a credential minted for the
/// one call by `credentials` when the host issues them, else the per-boot
/// `token`.
#[derive(Clone)]
pub struct HostBridge {
    pub url: String,
    pub token: String,
    /// Mints each call's own short-lived credential, bound to its session
    /// (so the host knows which session calls, and its delegation depth,
    /// without the tool's cooperation).
    pub credentials: Option<std::sync::Arc<dyn BridgeCredentials>>,
}

impl std::fmt::Debug for HostBridge {
    // The token never reaches a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBridge")
            .field("url", &self.url)
            .field("token", &"<redacted>")
            .field("credentials", &self.credentials.is_some())
            .finish()
    }
}

impl HostBridge {
    /// The credential one call's child gets: its own when the host issues
    /// them (revoked when the returned value drops), else the per-boot
    /// token.
    pub fn credential_for(
        &self,
        session_id: &str,
        call_id: &str,
        origin: &CallOrigin,
    ) -> CallCredential {
        match &self.credentials {
            Some(issuer) => issuer.issue(session_id, call_id, origin),
            None => CallCredential::new(self.token.clone(), || {}),
        }
    }
}

/// Issues per-call bridge credentials. The facade implements it (the
/// harness knows nothing of the bridge's routes).
pub trait BridgeCredentials: Send + Sync + std::fmt::Debug {
    /// A credential for call `call_id` of session `session_id` (empty
    /// outside a session), acting for `origin`, valid until the returned
    /// value is dropped.
    fn issue(&self, session_id: &str, call_id: &str, origin: &CallOrigin) -> CallCredential;
}

/// A bridge credential handed to one tool call; dropping it revokes it.
pub struct CallCredential {
    token: String,
    revoke: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl CallCredential {
    pub fn new(token: String, revoke: impl FnOnce() + Send + Sync + 'static) -> CallCredential {
        CallCredential {
            token,
            revoke: Some(Box::new(revoke)),
        }
    }

    /// The secret, for `AGENTKIT_HOST_TOKEN` only.
    pub fn token(&self) -> &str {
        &self.token
    }
}

impl Drop for CallCredential {
    fn drop(&mut self) {
        if let Some(revoke) = self.revoke.take() {
            revoke();
        }
    }
}

impl std::fmt::Debug for CallCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallCredential(<redacted>)")
    }
}

/// The host's reminders as the built-in `remind_me` tool uses them. The
/// runtime implements it (the harness knows nothing of storage): `input`
/// is the tool's validated input, and the answer is the tool's output
/// (`reminderId`, `nextFireAt`) or an error message for the model.
pub trait ReminderHost: Send + Sync + std::fmt::Debug {
    fn remind(
        &self,
        session_id: &str,
        input: &Value,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Value, String>> + Send + '_>>;
}

/// The host's services, type-erased so the harness need not know the host.
pub type HostHandle = std::sync::Arc<dyn std::any::Any + Send + Sync>;

impl ToolContext {
    /// The host's services as `T`, when the host provided them.
    pub fn services<T: std::any::Any>(&self) -> Option<&T> {
        self.services.as_ref().and_then(|h| h.downcast_ref::<T>())
    }
}

/// A tool's result as the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub output: Value,
    pub is_error: bool,
}

impl ToolOutput {
    pub fn error(message: impl Into<String>) -> ToolOutput {
        ToolOutput {
            output: Value::String(message.into()),
            is_error: true,
        }
    }
}

/// A boxed future, for the object-safe [`ExtraTools`].
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// A tool a turn gets beyond the manifest's.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtraTool {
    /// As the model sees it (MCP connection tools: `<connection>__<tool>`).
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    /// Safe to run in a dry-run session.
    pub read_only: bool,
}

/// Tools a turn gets beyond the manifest's: an agent's MCP connection
/// tools, or tools an embedder defines in Rust. The host lists them at the
/// start of every turn (so a connection opens on first use) and runs the
/// calls the model makes; input is validated against `input_schema` first.
pub trait ExtraTools: Send + Sync + std::fmt::Debug {
    /// The tools to offer in this turn of `session_id`.
    fn list<'a>(&'a self, session_id: &'a str) -> BoxFuture<'a, Vec<ExtraTool>>;

    /// Runs tool `name` with `input`. Never fails: problems are error
    /// results the model reads.
    fn call<'a>(
        &'a self,
        name: &'a str,
        input: &'a Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, ToolOutput>;
}

/// An [`ExtraTools`] set as a [`crate::ToolSource`]: each listed tool
/// becomes a [`crate::DynTool`] that calls back into the set.
#[derive(Debug, Clone)]
pub struct ExtraToolsSource(pub std::sync::Arc<dyn ExtraTools>);

#[derive(Debug)]
struct ExtraDyn {
    spec: crate::ToolSpec,
    set: std::sync::Arc<dyn ExtraTools>,
}

impl crate::DynTool for ExtraDyn {
    fn spec(&self) -> &crate::ToolSpec {
        &self.spec
    }

    fn call(&self, input: Value, ctx: ToolContext) -> crate::ToolFuture {
        let set = self.set.clone();
        let name = self.spec.name.clone();
        Box::pin(async move { set.call(&name, &input, &ctx).await })
    }
}

impl crate::ToolSource for ExtraToolsSource {
    fn tools<'a>(&'a self, session_id: &'a str) -> crate::ToolsFuture<'a> {
        Box::pin(async move {
            self.0
                .list(session_id)
                .await
                .into_iter()
                .map(|t| {
                    std::sync::Arc::new(ExtraDyn {
                        spec: crate::ToolSpec {
                            name: t.name,
                            description: t.description,
                            input_schema: t.input_schema,
                            read_only: t.read_only,
                            needs_approval: agentkit_manifest::Approval::Never,
                        },
                        set: self.0.clone(),
                    }) as std::sync::Arc<dyn crate::DynTool>
                })
                .collect()
        })
    }
}

/// A stable key for one call, so a tool can make retries of the same call
/// idempotent.
pub(crate) fn idempotency_key(session_id: &str, call_id: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(session_id.as_bytes());
    hasher.update([0u8]);
    hasher.update(call_id.as_bytes());
    let digest = hasher.finalize();
    hex::encode(&digest[..16])
}

/// Runs a server tool with `input` on stdin. Never fails: every problem is
/// an error result the model can read.
pub async fn run_server_tool(tool: &Tool, input: &Value, ctx: &ToolContext) -> ToolOutput {
    let Some((program, args)) = tool.command.split_first() else {
        return ToolOutput::error(format!("tool `{}` has no command", tool.name));
    };
    let program_path = resolve_program(program, &tool.cwd);
    if let Some(worker) = tool.worker {
        return crate::worker::call(tool, worker, &program_path, args, input, ctx).await;
    }
    // Refused before anything runs when `enforce` cannot be met here.
    let sandbox = match crate::sandbox::for_tool(tool, &ctx.workspace_dir) {
        Ok(sandbox) => sandbox,
        Err(message) => return ToolOutput::error(message),
    };
    // Lives until this function returns or its future is dropped (the
    // call was cancelled): either way the credential is revoked then.
    let credential = ctx
        .host
        .as_ref()
        .map(|host| host.credential_for(&ctx.session_id, &ctx.call_id, &ctx.origin));
    let sandbox = sandbox.map(Arc::new);
    let mut spec = tool_spec(tool, &program_path, args, input, ctx, credential.as_ref());
    if let Some(sandbox) = &sandbox {
        spec = spec.confine(sandbox.clone());
    }
    let result = run_child(&spec).await;
    drop(credential);
    let sandbox_hint = |output: &str| {
        sandbox
            .as_deref()
            .and_then(|s| crate::sandbox::explain(s, &spec, output))
    };

    let outcome = match result {
        Ok(outcome) => outcome,
        Err(e) => {
            let hint = sandbox_hint(&e.to_string())
                .map(|h| format!("\n{h}"))
                .unwrap_or_default();
            return ToolOutput::error(format!(
                "could not start `{program}` for tool `{}` (in {}): {e}{hint}",
                tool.name,
                tool.cwd.display()
            ));
        }
    };
    match outcome.exit {
        ChildExit::Cancelled => ToolOutput::error("tool call cancelled"),
        ChildExit::TimedOut => ToolOutput::error(format!(
            "tool timed out after {}",
            humantime::format_duration(tool.timeout)
        )),
        ChildExit::OutputOverflow => {
            ToolOutput::error(format!("output exceeded {} bytes", tool.max_output_bytes))
        }
        ChildExit::Exited(status) => {
            let mut out = finish(tool, &outcome.stdout.bytes, &outcome.stderr.bytes, status);
            if !status.success()
                && let Value::String(text) = &mut out.output
                && let Some(hint) = sandbox_hint(&format!(
                    "{}\n{}",
                    outcome.stderr.text(),
                    outcome.stdout.text()
                ))
            {
                text.push('\n');
                text.push_str(&hint);
            }
            out
        }
    }
}

/// The files `tool`'s command needs that its sandbox cannot read after
/// the automatic grants of interpreter installs: its program as `exec`
/// finds it, the program's `#!` interpreters, and the arguments that name
/// existing files (`python3 /opt/app/main.py`). What `agentkit validate`
/// warns about. Empty when the tool runs unsandboxed or all is readable.
/// Resolved with this process's `PATH` and `HOME`, as a call on this host
/// would be.
pub fn sandbox_gaps(tool: &Tool) -> Vec<SandboxGap> {
    let Some((program, args)) = tool.command.split_first() else {
        return Vec::new();
    };
    let Ok(Some(sandbox)) = crate::sandbox::for_tool(tool, &tool.cwd) else {
        return Vec::new();
    };
    let files: Vec<PathBuf> = args
        .iter()
        .map(Path::new)
        .filter(|a| a.is_absolute() || a.components().count() > 1)
        .map(|a| tool.cwd.join(a))
        .filter(|a| a.is_file())
        .collect();
    let child = ChildSpec::new(resolve_program(program, &tool.cwd))
        .cwd(&tool.cwd)
        .pass_env(tool.env.iter().cloned());
    crate::sandbox::gaps(&sandbox, &child, &files)
}

/// The child of one call: JSON input on stdin, the tool's folder, the
/// scrubbed environment plus the tool's `env` and the call's variables,
/// the tool's timeout and output cap, cancelled with the call.
fn tool_spec(
    tool: &Tool,
    program: &Path,
    args: &[String],
    input: &Value,
    ctx: &ToolContext,
    credential: Option<&CallCredential>,
) -> ChildSpec {
    let mut spec = ChildSpec::new(program)
        .args(args)
        .cwd(&tool.cwd)
        .stdin(serde_json::to_vec(input).unwrap_or_default())
        .pass_env(tool.env.iter().cloned())
        .env("AGENTKIT_TOOL_CALL_ID", &ctx.call_id)
        .env("AGENTKIT_SESSION_ID", &ctx.session_id)
        .env("AGENTKIT_WORKSPACE_DIR", &ctx.workspace_dir)
        .env(
            "AGENTKIT_IDEMPOTENCY_KEY",
            idempotency_key(&ctx.session_id, &ctx.call_id),
        )
        .timeout(tool.timeout)
        .stdout_cap(usize::try_from(tool.max_output_bytes).unwrap_or(usize::MAX))
        .end_on_overflow()
        .stderr_cap(STDERR_CAP)
        .cancel_on(ctx.cancel.clone());
    if let Some(as_of) = &ctx.as_of {
        spec = spec.env("AGENTKIT_AS_OF", as_of);
    }
    for (name, value) in [
        ("AGENTKIT_CHANNEL_ID", &ctx.origin.channel_id),
        ("AGENTKIT_CONTINUATION_KEY", &ctx.origin.continuation_key),
        ("AGENTKIT_PURPOSE", &ctx.origin.purpose),
    ] {
        if let Some(value) = value {
            spec = spec.env(name, value);
        }
    }
    if let (Some(host), Some(credential)) = (&ctx.host, credential) {
        spec = spec
            .env("AGENTKIT_HOST_URL", &host.url)
            .env("AGENTKIT_HOST_TOKEN", credential.token());
    }
    spec
}

/// Relative paths with a separator (`./run.sh`, `bin/tool`) resolve in the
/// tool's folder; a bare name (`python3`) is looked up on `PATH`.
fn resolve_program(program: &str, cwd: &Path) -> PathBuf {
    let path = Path::new(program);
    if path.is_relative() && path.components().count() > 1 {
        cwd.join(path)
    } else {
        path.to_path_buf()
    }
}

fn finish(tool: &Tool, stdout: &[u8], stderr: &[u8], status: ExitStatus) -> ToolOutput {
    let stderr = String::from_utf8_lossy(stderr);
    let stderr = stderr.trim();
    if status.success() {
        if !stderr.is_empty() {
            tracing::debug!(tool = %tool.name, stderr, "tool wrote to stderr");
        }
        return parse_stdout(stdout);
    }
    let stdout = String::from_utf8_lossy(stdout);
    let detail = if !stderr.is_empty() {
        stderr
    } else {
        stdout.trim()
    };
    let how = match status.code() {
        Some(code) => format!("tool exited with code {code}"),
        None => exit_signal(status),
    };
    if detail.is_empty() {
        ToolOutput::error(how)
    } else {
        ToolOutput::error(format!("{how}: {detail}"))
    }
}

fn exit_signal(status: ExitStatus) -> String {
    match agentkit_plumbing::signal_of(status) {
        Some(signal) => format!("tool was killed by signal {signal}"),
        None => format!("tool failed: {status}"),
    }
}

/// JSON if it parses, text otherwise. An MCP-style envelope
/// (`{"content": [...], "isError": true}`) keeps its error flag.
fn parse_stdout(stdout: &[u8]) -> ToolOutput {
    let text = String::from_utf8_lossy(stdout);
    match serde_json::from_str::<Value>(text.trim()) {
        Ok(value) => {
            let is_error = value.get("content").is_some_and(Value::is_array)
                && value.get("isError").and_then(Value::as_bool) == Some(true);
            ToolOutput {
                output: value,
                is_error,
            }
        }
        Err(_) => ToolOutput {
            output: Value::String(text.trim_end_matches(['\n', '\r']).to_owned()),
            is_error: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_with_a_separator_resolve_in_the_tool_folder() {
        let cwd = Path::new("/agent/tools");
        assert_eq!(
            resolve_program("./run.sh", cwd),
            PathBuf::from("/agent/tools/./run.sh")
        );
        assert_eq!(resolve_program("python3", cwd), PathBuf::from("python3"));
        assert_eq!(resolve_program("/bin/sh", cwd), PathBuf::from("/bin/sh"));
    }

    #[test]
    fn stdout_is_json_when_it_parses_and_envelopes_keep_their_error_flag() {
        assert_eq!(
            parse_stdout(b"{\"a\":1}\n").output,
            serde_json::json!({"a": 1})
        );
        let t = parse_stdout(b"hello\n");
        assert_eq!(t.output, Value::String("hello".into()));
        assert!(!t.is_error);
        let e = parse_stdout(br#"{"content":[{"type":"text","text":"no"}],"isError":true}"#);
        assert!(e.is_error);
        assert!(!parse_stdout(br#"{"isError":true}"#).is_error);
    }

    #[test]
    fn idempotency_keys_are_stable_and_distinct() {
        assert_eq!(idempotency_key("s", "c"), idempotency_key("s", "c"));
        assert_ne!(idempotency_key("s", "c1"), idempotency_key("s", "c2"));
        assert_ne!(idempotency_key("sc", "1"), idempotency_key("s", "c1"));
        assert_eq!(idempotency_key("s", "c").len(), 32);
    }
}
