//! Hooks: observers of every recorded event (`hooks/*.toml`, and Rust
//! callbacks from embedders).
//!
//! Driven by the event store's tap ([`agentkit_events::FileEventStore::tap`]),
//! which hands out each event after it was written, in per-session order.
//! One dispatcher task reads the tap and puts each event on the bounded
//! queue of every hook whose `events` match; each hook has one worker that
//! delivers its queue in order. Nothing here can block a turn: a full queue
//! drops the event for that hook (counted), a dispatcher that falls behind
//! the tap loses events (counted for every hook), and a delivery that fails
//! or runs past its timeout is logged and counted, never fatal.
//!
//! Deliveries: a `command` gets the event JSON (one line) on stdin, runs in
//! the `hooks/` folder with a scrubbed environment (`PATH`, plus
//! `AGENTKIT_HOOK` and `AGENTKIT_EVENT_TYPE`), is killed at its timeout, and
//! its output is read up to a cap (logged on failure). A `url` gets the
//! event JSON POSTed; with a `secret`, the header `X-Agentkit-Signature`
//! carries `sha256=<hex HMAC-SHA256 of the body>`.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agentkit_protocol::Event;
use hmac::{KeyInit, Mac};
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;

use crate::clock::BoxFuture;
use crate::runtime::AgentRuntime;

/// The signature header of URL hooks with a `secret`.
pub const SIGNATURE_HEADER: &str = "X-Agentkit-Signature";

/// How many events may wait for one hook before new ones are dropped.
pub const HOOK_QUEUE: usize = 1024;

/// The most output read from a hook command (the rest is discarded).
const OUTPUT_CAP: usize = 64 * 1024;

/// A Rust hook's callback.
pub type HookFn = Arc<dyn Fn(Arc<Event>) -> BoxFuture<'static, ()> + Send + Sync>;

/// Where a hook delivers.
#[derive(Clone)]
pub enum HookTarget {
    /// A program and its arguments, run in `cwd`.
    Command { command: Vec<String>, cwd: PathBuf },
    /// A URL to POST to, with headers (`${VAR}` already resolved) and an
    /// optional signing secret.
    Url {
        url: String,
        headers: Vec<(String, String)>,
        secret: Option<String>,
    },
    /// A Rust callback (embedders).
    Rust(HookFn),
}

impl std::fmt::Debug for HookTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HookTarget::Command { command, .. } => write!(f, "Command({command:?})"),
            HookTarget::Url { url, .. } => write!(f, "Url({url})"),
            HookTarget::Rust(_) => f.write_str("Rust(..)"),
        }
    }
}

/// One hook to run.
#[derive(Debug, Clone)]
pub struct HookSpec {
    pub name: String,
    /// Event types, or `*`.
    pub events: Vec<String>,
    pub target: HookTarget,
    pub timeout: Duration,
}

impl HookSpec {
    /// A Rust hook on `events` (types or `*`).
    pub fn rust<F, Fut>(name: impl Into<String>, events: &[&str], f: F) -> HookSpec
    where
        F: Fn(Arc<Event>) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        HookSpec {
            name: name.into(),
            events: events.iter().map(|e| (*e).to_owned()).collect(),
            target: HookTarget::Rust(Arc::new(move |e| Box::pin(f(e)))),
            timeout: Duration::from_secs(10),
        }
    }

    fn wants(&self, event: &Event) -> bool {
        self.events
            .iter()
            .any(|e| e == "*" || e == event.event_type.as_str())
    }
}

/// Counters of one hook, as `GET /v1/info` shows them.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HookStats {
    pub name: String,
    pub delivered: AtomicU64,
    pub failed: AtomicU64,
    /// Events this hook never saw: its queue was full, or the dispatcher
    /// fell behind the store's tap.
    pub dropped: AtomicU64,
}

/// The running hooks of one agent.
#[derive(Debug, Clone, Default)]
pub struct Hooks {
    stats: Vec<Arc<HookStats>>,
}

impl Hooks {
    /// Each hook's counters.
    pub fn stats(&self) -> &[Arc<HookStats>] {
        &self.stats
    }
}

impl AgentRuntime {
    /// Starts `specs` on this runtime's events (from now on) until the
    /// runtime shuts down.
    pub fn start_hooks(&self, specs: Vec<HookSpec>) -> Hooks {
        if specs.is_empty() {
            return Hooks::default();
        }
        let mut tap = self.store().tap();
        let cancel = self.shutdown_token();
        let client = reqwest::Client::new();
        let mut queues = Vec::new();
        let mut stats = Vec::new();
        for spec in specs {
            let st = Arc::new(HookStats {
                name: spec.name.clone(),
                ..Default::default()
            });
            let (tx, rx) = mpsc::channel::<Arc<Event>>(HOOK_QUEUE);
            let spec = Arc::new(spec);
            tokio::spawn(worker(spec.clone(), rx, st.clone(), client.clone()));
            queues.push((spec, tx, st.clone()));
            stats.push(st);
        }
        tokio::spawn(async move {
            loop {
                let event = tokio::select! {
                    () = cancel.cancelled() => break,
                    e = tap.recv() => e,
                };
                match event {
                    Ok(event) => {
                        for (spec, tx, st) in &queues {
                            if spec.wants(&event) && tx.try_send(event.clone()).is_err() {
                                st.dropped.fetch_add(1, Ordering::Relaxed);
                                tracing::warn!(hook = %spec.name, event = %event.event_type.as_str(), "hook queue full; event dropped");
                            }
                        }
                    }
                    Err(RecvError::Lagged(n)) => {
                        for (spec, _, st) in &queues {
                            st.dropped.fetch_add(n, Ordering::Relaxed);
                            tracing::warn!(hook = %spec.name, dropped = n, "hooks fell behind the event store; events dropped");
                        }
                    }
                    Err(RecvError::Closed) => break,
                }
            }
        });
        Hooks { stats }
    }
}

async fn worker(
    spec: Arc<HookSpec>,
    mut rx: mpsc::Receiver<Arc<Event>>,
    stats: Arc<HookStats>,
    client: reqwest::Client,
) {
    while let Some(event) = rx.recv().await {
        let result = tokio::time::timeout(spec.timeout, deliver(&spec, &event, &client)).await;
        let error = match result {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e),
            Err(_) => Some(format!("timed out after {:?}", spec.timeout)),
        };
        match error {
            None => {
                stats.delivered.fetch_add(1, Ordering::Relaxed);
            }
            Some(error) => {
                stats.failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(hook = %spec.name, event = %event.event_type.as_str(), session = %event.session_id, index = event.index, %error, "hook failed");
            }
        }
    }
}

async fn deliver(
    spec: &HookSpec,
    event: &Arc<Event>,
    client: &reqwest::Client,
) -> Result<(), String> {
    match &spec.target {
        HookTarget::Rust(f) => {
            f(event.clone()).await;
            Ok(())
        }
        HookTarget::Command { command, cwd } => run_command(spec, command, cwd, event).await,
        HookTarget::Url {
            url,
            headers,
            secret,
        } => {
            let body = serde_json::to_vec(&**event).map_err(|e| e.to_string())?;
            let mut req = client
                .post(url)
                .header("content-type", "application/json")
                .header("x-agentkit-hook", &spec.name)
                .header("x-agentkit-event", event.event_type.as_str());
            for (k, v) in headers {
                req = req.header(k, v);
            }
            if let Some(secret) = secret {
                let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes())
                    .map_err(|e| e.to_string())?;
                mac.update(&body);
                let sig = hex::encode(mac.finalize().into_bytes());
                req = req.header(SIGNATURE_HEADER, format!("sha256={sig}"));
            }
            let resp = req.body(body).send().await.map_err(|e| e.to_string())?;
            if resp.status().is_success() {
                Ok(())
            } else {
                Err(format!("{url} answered {}", resp.status()))
            }
        }
    }
}

async fn run_command(
    spec: &HookSpec,
    command: &[String],
    cwd: &std::path::Path,
    event: &Event,
) -> Result<(), String> {
    let Some((program, args)) = command.split_first() else {
        return Err("empty command".into());
    };
    let mut line = serde_json::to_vec(event).map_err(|e| e.to_string())?;
    line.push(b'\n');
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .current_dir(cwd)
        .env_clear()
        .env("AGENTKIT_HOOK", &spec.name)
        .env("AGENTKIT_EVENT_TYPE", event.event_type.as_str())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run `{program}`: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A hook that does not read its input is not an error.
        let _ = stdin.write_all(&line).await;
    }
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let read_out = async {
        if let Some(s) = stdout {
            let _ = s.take(OUTPUT_CAP as u64).read_to_end(&mut out).await;
        }
    };
    let read_err = async {
        if let Some(s) = stderr {
            let _ = s.take(OUTPUT_CAP as u64).read_to_end(&mut err).await;
        }
    };
    tokio::join!(read_out, read_err);
    let status = child.wait().await.map_err(|e| e.to_string())?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{program}` exited with {status}: {}",
            String::from_utf8_lossy(&err).trim()
        ))
    }
}
