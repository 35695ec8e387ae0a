//! Tool workers: a server tool declared with `worker = true` (or a
//! `[worker]` table) runs as one long-lived process that answers calls one
//! JSON line at a time, instead of one process per call, so an
//! interpreter's start-up (Python's ~20 ms) is paid once.
//!
//! The protocol, newline-delimited JSON in UTF-8:
//!
//! - host → worker, on stdin, one call per line:
//!   `{"id": 7, "input": {…}, "context": {"callId": …, "sessionId": …,
//!   "workspaceDir": …, "idempotencyKey": …, "asOf"?, "channelId"?,
//!   "continuationKey"?, "purpose"?, "hostUrl"?, "hostToken"?}}`;
//! - worker → host, on stdout, one answer per line, in any order:
//!   `{"id": 7, "output": <any JSON>}` (with `"isError": true` for an
//!   error result the tool chose), or `{"id": 7, "error": "message"}`;
//! - stderr is the worker's log (its last 4 KiB are quoted when it fails).
//!
//! One worker per tool of an agent (per tool file: its folder, name,
//! command, variables and sandbox), started on the tool's first call,
//! confined like a spawned call of the tool (`crate::sandbox`), except
//! that no session's workspace is granted (it serves every session; a
//! call's workspace is named in its context). With `scope = "session"`,
//! one worker per session instead (the session is part of its key),
//! confined exactly like a spawned call of that session (its workspace
//! granted), so it may keep the session's state; its pool entry goes
//! when it ends, so the pool does not grow with the sessions served. It lives until agentkit
//! exits (its stdin then closes: the helpers exit at end of input; the
//! group is killed when the host drops it), until it has had no call in
//! flight for the tool's `idle_timeout` (10 minutes by default: its stdin
//! is closed and its group killed a moment later; the next call starts a
//! new one), or until it fails: a worker
//! that exits, writes a line that is not an answer to a call in flight,
//! writes an answer past the tool's `max_output_bytes`, leaves a call
//! unanswered past the tool's `timeout`, or has a call cancelled, is
//! killed (its whole process group), every call it had in flight gets an
//! error result, and the next call starts a new one. At most
//! `concurrency` calls are in flight per worker; more wait in order. The
//! tool's timeout bounds the wait (a call that waits past it fails
//! without touching the worker) and, from when the call is sent, the
//! worker's answer.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use agentkit_manifest::{Tool, Worker, WorkerScope};
use agentkit_plumbing::{ChildSpec, LiveChild, spawn_child};
use agentkit_protocol::worker::{WorkerAnswer, WorkerCall, WorkerContext};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::sync::{Semaphore, oneshot};

use crate::tools::{CallCredential, ToolContext, ToolOutput};

/// How much of a worker's stderr is kept for its failure messages.
const STDERR_TAIL: usize = 4 * 1024;

/// Workers by tool (see the module's header).
type Pool = Mutex<HashMap<String, Arc<WorkerSlot>>>;

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The key of one tool's worker: what makes two tools the same worker
/// (and, with `scope = "session"`, the session and its workspace).
fn key_of(tool: &Tool, worker: Worker, ctx: &ToolContext) -> String {
    let mut key = format!(
        "{}\u{0}{}\u{0}{:?}\u{0}{:?}\u{0}{:?}\u{0}{}\u{0}{:?}",
        tool.cwd.display(),
        tool.name,
        tool.command,
        tool.env,
        tool.sandbox,
        worker.concurrency,
        worker.idle_timeout
    );
    if worker.scope == WorkerScope::Session {
        key.push_str(&format!(
            "\u{0}session\u{0}{}\u{0}{}",
            ctx.session_id,
            ctx.workspace_dir.display()
        ));
    }
    key
}

/// Drops the pool's entry `key` if it is still `slot` and nobody but the
/// pool holds it: a session's worker slot goes with its worker, so the
/// pool does not grow with every session ever served. A call holds its
/// slot from the pool's lock on, so one that took it keeps it.
fn forget(key: &str, slot: &std::sync::Weak<WorkerSlot>) {
    let mut pool = pool().lock().unwrap_or_else(PoisonError::into_inner);
    let Some(held) = pool.get(key) else {
        return;
    };
    // A new worker started in the slot meanwhile keeps it.
    let ended = held
        .process
        .try_lock()
        .is_ok_and(|p| p.as_ref().is_none_or(|p| p.dead.load(Ordering::SeqCst)));
    if std::ptr::eq(Arc::as_ptr(held), slot.as_ptr()) && Arc::strong_count(held) == 1 && ended {
        pool.remove(key);
    }
}

/// How many session-scoped worker slots the pool holds (for tests).
pub fn session_worker_slots() -> usize {
    pool()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .keys()
        .filter(|k| k.contains("\u{0}session\u{0}"))
        .count()
}

/// One tool's worker: its bound on calls in flight and its current
/// process, if one runs.
#[derive(Debug)]
struct WorkerSlot {
    slots: Semaphore,
    process: tokio::sync::Mutex<Option<Arc<Process>>>,
    next_id: AtomicU64,
}

/// A running worker process.
#[derive(Debug)]
struct Process {
    stdin: tokio::sync::Mutex<Option<tokio::process::ChildStdin>>,
    state: Mutex<State>,
    dead: AtomicBool,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// Turns true when the worker's stderr ends.
    stderr_closed: tokio::sync::watch::Receiver<bool>,
}

#[derive(Debug, Default)]
struct State {
    pending: HashMap<u64, oneshot::Sender<Result<ToolOutput, String>>>,
    child: Option<LiveChild>,
    /// Since when no call has been in flight (`None` while one is).
    idle_since: Option<std::time::Instant>,
}

impl Process {
    /// Stops the worker if it has had no call in flight for `idle`:
    /// closes its stdin (the helpers exit at end of input), then kills its
    /// group a moment later. True when it stopped (or was dead already).
    async fn stop_if_idle(&self, idle: Duration) -> bool {
        let child = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            if self.dead.load(Ordering::SeqCst) {
                return true;
            }
            match state.idle_since {
                Some(since) if since.elapsed() >= idle && state.pending.is_empty() => {}
                _ => return false,
            }
            // A call taking this worker now sees it dead and starts another.
            self.dead.store(true, Ordering::SeqCst);
            state.child.take()
        };
        *self.stdin.lock().await = None;
        if let Some(child) = child {
            child.close(Duration::from_secs(2)).await;
        }
        tracing::debug!("a tool worker idle for {idle:?} was stopped");
        true
    }

    /// How long until the worker may be idle for `idle`, from now.
    fn idle_wait(&self, idle: Duration) -> Duration {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        match state.idle_since {
            Some(since) => idle.saturating_sub(since.elapsed()),
            None => idle,
        }
    }

    /// Kills the worker's group and fails every call in flight with
    /// `reason`; the next call starts a new worker.
    fn kill(&self, reason: &str) {
        self.dead.store(true, Ordering::SeqCst);
        let (pending, child) = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            (std::mem::take(&mut state.pending), state.child.take())
        };
        if let Some(child) = &child {
            child.kill();
        }
        let tail = self.stderr_tail();
        let reason = if tail.is_empty() {
            reason.to_owned()
        } else {
            format!("{reason}; its stderr ends with: {tail}")
        };
        for (_, tx) in pending {
            let _ = tx.send(Err(reason.clone()));
        }
        if let Some(child) = child {
            // Reaped off this thread (the group is dead already).
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => {
                    rt.spawn(child.close(Duration::ZERO));
                }
                Err(_) => drop(child),
            }
        }
    }

    fn stderr_tail(&self) -> String {
        let tail = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&tail).trim().to_owned()
    }

    /// Waits for answers until the worker's stdout ends or goes wrong.
    async fn read_answers(self: Arc<Self>, stdout: impl AsyncRead + Unpin, cap: usize) {
        let mut reader = BufReader::new(stdout);
        let mut line = Vec::new();
        loop {
            line.clear();
            match read_line(&mut reader, cap, &mut line).await {
                Ok(Line::Full) => {}
                Ok(Line::End) => {
                    self.dead.store(true, Ordering::SeqCst);
                    let status = self.exit_status().await;
                    // Its last words, when they are still in the pipe.
                    let mut closed = self.stderr_closed.clone();
                    let _ = tokio::time::timeout(
                        Duration::from_millis(500),
                        closed.wait_for(|closed| *closed),
                    )
                    .await;
                    self.kill(&format!("the worker {status}"));
                    return;
                }
                Ok(Line::TooLong) => {
                    self.kill(&format!(
                        "the worker wrote an answer of more than {cap} bytes"
                    ));
                    return;
                }
                Err(e) => {
                    self.kill(&format!("reading the worker's answers failed: {e}"));
                    return;
                }
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let answer = match serde_json::from_slice::<WorkerAnswer>(&line) {
                Ok(answer) => answer,
                Err(e) => {
                    self.kill(&format!(
                        "the worker wrote a line that is not an answer ({e}): {}",
                        excerpt(&line)
                    ));
                    return;
                }
            };
            let waiting = {
                let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
                let waiting = state.pending.remove(&answer.id);
                if state.pending.is_empty() {
                    state.idle_since = Some(std::time::Instant::now());
                }
                waiting
            };
            let Some(tx) = waiting else {
                self.kill(&format!(
                    "the worker answered call {}, which is not in flight",
                    answer.id
                ));
                return;
            };
            let result = match (answer.error, answer.output) {
                (Some(message), _) => Ok(ToolOutput::error(message)),
                (None, Some(output)) => Ok(ToolOutput {
                    output,
                    is_error: answer.is_error,
                }),
                (None, None) => Err(format!(
                    "the worker's answer to call {} has neither `output` nor `error`",
                    answer.id
                )),
            };
            let _ = tx.send(result);
        }
    }

    /// How the worker ended, for a message: `exited with status 1`.
    async fn exit_status(&self) -> String {
        let child = self
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .child
            .take();
        let Some(mut child) = child else {
            return "was stopped".to_owned();
        };
        let status = tokio::time::timeout(Duration::from_secs(1), child.wait()).await;
        child.kill();
        match status {
            Ok(Ok(status)) => match status.code() {
                Some(code) => format!("exited with status {code}"),
                None => match agentkit_plumbing::signal_of(status) {
                    Some(signal) => format!("was killed by signal {signal}"),
                    None => format!("ended ({status})"),
                },
            },
            _ => "closed its stdout".to_owned(),
        }
    }
}

enum Line {
    Full,
    End,
    TooLong,
}

/// One line (without its newline) into `line`, at most `cap` bytes.
async fn read_line(
    reader: &mut BufReader<impl AsyncRead + Unpin>,
    cap: usize,
    line: &mut Vec<u8>,
) -> std::io::Result<Line> {
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(Line::End);
        }
        let (take, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (available.len(), false),
        };
        line.extend_from_slice(&available[..take]);
        reader.consume(if done { take + 1 } else { take });
        if line.len() > cap {
            return Ok(Line::TooLong);
        }
        if done {
            return Ok(Line::Full);
        }
    }
}

fn excerpt(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    match text.char_indices().nth(200) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// Keeps the last [`STDERR_TAIL`] bytes of the worker's stderr.
async fn keep_stderr(
    stderr: impl AsyncRead + Unpin,
    tail: Arc<Mutex<Vec<u8>>>,
    closed: tokio::sync::watch::Sender<bool>,
    tool: String,
) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(tool = %tool, line, "tool worker stderr");
        let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
        tail.extend_from_slice(line.as_bytes());
        tail.push(b'\n');
        if tail.len() > STDERR_TAIL {
            let cut = tail.len() - STDERR_TAIL;
            tail.drain(..cut);
        }
    }
    let _ = closed.send(true);
}

impl WorkerSlot {
    /// The running worker, started when there is none (or it failed).
    /// `workspace`: the session's, granted to a session's worker.
    async fn process(
        self: &Arc<Self>,
        key: &str,
        tool: &Tool,
        worker: Worker,
        program: &Path,
        args: &[String],
        workspace: Option<&Path>,
    ) -> Result<Arc<Process>, String> {
        let mut current = self.process.lock().await;
        if let Some(process) = &*current
            && !process.dead.load(Ordering::SeqCst)
        {
            return Ok(process.clone());
        }
        let sandbox = match workspace {
            Some(workspace) => crate::sandbox::for_tool(tool, workspace)?,
            None => crate::sandbox::for_worker(tool)?,
        };
        let mut spec = ChildSpec::new(program)
            .args(args)
            .cwd(&tool.cwd)
            .pass_env(tool.env.iter().cloned())
            .env("AGENTKIT_TOOL_NAME", &tool.name)
            .env("AGENTKIT_WORKER", "1");
        if let Some(sandbox) = sandbox {
            spec = spec.confine(Arc::new(sandbox));
        }
        let mut child = spawn_child(&spec).map_err(|e| {
            format!(
                "could not start the worker `{}` for tool `{}` (in {}): {e}",
                program.display(),
                tool.name,
                tool.cwd.display()
            )
        })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.take_stdin(), child.take_stdout(), child.take_stderr())
        else {
            return Err("the worker's pipes are missing".to_owned());
        };
        let (closed_tx, stderr_closed) = tokio::sync::watch::channel(false);
        let process = Arc::new(Process {
            stdin: tokio::sync::Mutex::new(Some(stdin)),
            state: Mutex::new(State {
                pending: HashMap::new(),
                child: Some(child),
                idle_since: Some(std::time::Instant::now()),
            }),
            dead: AtomicBool::new(false),
            stderr: Arc::new(Mutex::new(Vec::new())),
            stderr_closed,
        });
        tokio::spawn(keep_stderr(
            stderr,
            process.stderr.clone(),
            closed_tx,
            tool.name.clone(),
        ));
        let cap = usize::try_from(tool.max_output_bytes).unwrap_or(usize::MAX);
        tokio::spawn(process.clone().read_answers(stdout, cap));
        // A session's worker takes its slot with it when it ends.
        let slot =
            (worker.scope == WorkerScope::Session).then(|| (key.to_owned(), Arc::downgrade(self)));
        tokio::spawn(idle_watch(
            Arc::downgrade(&process),
            worker.idle_timeout,
            slot,
        ));
        tracing::debug!(tool = %tool.name, "tool worker started");
        *current = Some(process.clone());
        Ok(process)
    }
}

/// Runs one call of `tool` through its worker. Never fails: every problem
/// is an error result the model can read.
pub(crate) async fn call(
    tool: &Tool,
    worker: Worker,
    program: &Path,
    args: &[String],
    input: &Value,
    ctx: &ToolContext,
) -> ToolOutput {
    let key = key_of(tool, worker, ctx);
    let workspace = (worker.scope == WorkerScope::Session).then_some(ctx.workspace_dir.as_path());
    let slot = {
        let mut pool = pool().lock().unwrap_or_else(PoisonError::into_inner);
        pool.entry(key.clone())
            .or_insert_with(|| {
                Arc::new(WorkerSlot {
                    slots: Semaphore::new(worker.concurrency.max(1) as usize),
                    process: tokio::sync::Mutex::new(None),
                    next_id: AtomicU64::new(1),
                })
            })
            .clone()
    };
    let timeout = tool.timeout;
    let deadline = tokio::time::Instant::now() + timeout;
    let timed_out = || {
        ToolOutput::error(format!(
            "tool timed out after {}",
            humantime::format_duration(timeout)
        ))
    };

    // Queued: a wait past the deadline fails this call only.
    let _permit = tokio::select! {
        biased;
        () = ctx.cancel.cancelled() => return ToolOutput::error("tool call cancelled"),
        permit = slot.slots.acquire() => match permit {
            Ok(permit) => permit,
            Err(_) => return ToolOutput::error("the tool's worker is closed"),
        },
        () = tokio::time::sleep_until(deadline) => return ToolOutput::error(format!(
            "tool timed out after {} waiting for its worker ({} call(s) at once)",
            humantime::format_duration(timeout),
            worker.concurrency
        )),
    };
    // Twice at most: a worker stopped for idleness between being handed
    // out and taking the call is replaced once.
    let mut attempt = 0;
    let (process, id, rx) = loop {
        let process = match slot
            .process(&key, tool, worker, program, args, workspace)
            .await
        {
            Ok(process) => process,
            Err(message) => return ToolOutput::error(message),
        };
        let id = slot.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut state = process.state.lock().unwrap_or_else(PoisonError::into_inner);
            if !process.dead.load(Ordering::SeqCst) {
                state.pending.insert(id, tx);
                state.idle_since = None;
                break (process.clone(), id, rx);
            }
        }
        attempt += 1;
        if attempt >= 2 {
            return ToolOutput::error(
                "the tool's worker stopped before the call was sent; try again",
            );
        }
    };

    // Lives until the call is over (or its future dropped): revoked then.
    let credential = ctx
        .host
        .as_ref()
        .map(|host| host.credential_for(&ctx.session_id, &ctx.call_id, &ctx.origin));
    // Killed with the worker when this call ends in any other way than
    // its answer (a timeout, a cancel, the call's future dropped).
    let mut guard = KillOnDrop {
        process: &process,
        reason: "a call was abandoned while the worker ran it",
        armed: true,
    };
    let call = WorkerCall {
        id,
        input: input.clone(),
        context: context(ctx, credential.as_ref()),
    };
    let mut line = serde_json::to_string(&call).unwrap_or_default();
    line.push('\n');
    {
        let mut stdin = process.stdin.lock().await;
        let written = match stdin.as_mut() {
            Some(stdin) => stdin.write_all(line.as_bytes()).await,
            None => Err(std::io::Error::other("stdin closed")),
        };
        if let Err(e) = written {
            *stdin = None;
            drop(stdin);
            guard.reason = "the worker stopped reading its calls";
            drop(guard);
            return ToolOutput::error(format!(
                "the tool's worker did not take the call: {e}; {}",
                process.stderr_tail()
            ));
        }
    }

    // In flight: the worker has the whole timeout for this call.
    let result = tokio::select! {
        biased;
        () = ctx.cancel.cancelled() => {
            guard.reason = "a call it ran was cancelled";
            return ToolOutput::error("tool call cancelled");
        }
        answer = rx => answer,
        () = tokio::time::sleep(timeout) => {
            guard.reason = "it did not answer a call within the tool's timeout";
            return timed_out();
        }
    };
    guard.armed = false;
    drop(credential);
    match result {
        Ok(Ok(output)) => output,
        Ok(Err(reason)) => ToolOutput::error(format!("tool `{}` failed: {reason}", tool.name)),
        Err(_) => ToolOutput::error(format!("tool `{}` failed: its worker stopped", tool.name)),
    }
}

/// Stops the worker once it has been idle for `idle` (see
/// [`Process::stop_if_idle`]); ends with the worker, then drops a
/// session's worker slot from the pool (`slot`: its key and slot).
async fn idle_watch(
    process: std::sync::Weak<Process>,
    idle: Duration,
    slot: Option<(String, std::sync::Weak<WorkerSlot>)>,
) {
    loop {
        let wait = match process.upgrade() {
            Some(p) if !p.dead.load(Ordering::SeqCst) => p.idle_wait(idle),
            _ => break,
        };
        tokio::time::sleep(wait.max(Duration::from_millis(50))).await;
        let Some(p) = process.upgrade() else { break };
        if p.stop_if_idle(idle).await {
            break;
        }
    }
    if let Some((key, slot)) = slot {
        forget(&key, &slot);
    }
}

/// Kills the worker (failing its calls) unless disarmed.
struct KillOnDrop<'a> {
    process: &'a Process,
    reason: &'static str,
    armed: bool,
}

impl Drop for KillOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.process
                .kill(&format!("the worker was stopped: {}", self.reason));
        }
    }
}

/// What a call tells the worker about where it runs (a spawned call's
/// variables).
fn context(ctx: &ToolContext, credential: Option<&CallCredential>) -> WorkerContext {
    let (host_url, host_token) = match (&ctx.host, credential) {
        (Some(host), Some(credential)) => {
            (Some(host.url.clone()), Some(credential.token().to_owned()))
        }
        _ => (None, None),
    };
    WorkerContext {
        call_id: ctx.call_id.clone(),
        session_id: ctx.session_id.clone(),
        workspace_dir: ctx.workspace_dir.to_string_lossy().into_owned(),
        idempotency_key: crate::tools::idempotency_key(&ctx.session_id, &ctx.call_id),
        as_of: ctx.as_of.clone(),
        channel_id: ctx.origin.channel_id.clone(),
        continuation_key: ctx.origin.continuation_key.clone(),
        purpose: ctx.origin.purpose.clone(),
        host_url,
        host_token,
    }
}
