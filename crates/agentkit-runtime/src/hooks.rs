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
//! Deliveries: a `command` runs through the harness's child-process runner
//! ([`agentkit_harness::run_child`]): the event JSON (one line) on stdin,
//! the `hooks/` folder, the scrubbed environment
//! ([`agentkit_harness::PASSED_ENV`] plus `AGENTKIT_HOOK`,
//! `AGENTKIT_EVENT_TYPE` and the host bridge's `AGENTKIT_HOST_URL` and
//! `AGENTKIT_HOST_TOKEN`, a credential of its own bound to the event's
//! session and revoked when it ends), its process group killed at its timeout, its
//! output read up to a cap (stderr logged on failure). A `url` gets the
//! event JSON POSTed through the process's one HTTP client
//! ([`agentkit_harness::http_client`]); with a `secret`, the header
//! `X-Agentkit-Signature` carries `sha256=<hex HMAC-SHA256 of the body>`.
//! Failures name the URL without its credentials.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agentkit_protocol::Event;
use serde::Serialize;
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
            HookTarget::Url { url, .. } => {
                write!(f, "Url({})", agentkit_harness::redact_credentials(url))
            }
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
        let mut queues = Vec::new();
        let mut stats = Vec::new();
        for spec in specs {
            let st = Arc::new(HookStats {
                name: spec.name.clone(),
                ..Default::default()
            });
            let (tx, rx) = mpsc::channel::<Arc<Event>>(HOOK_QUEUE);
            let spec = Arc::new(spec);
            tokio::spawn(worker(
                spec.clone(),
                rx,
                st.clone(),
                self.inner.host_bridge(),
            ));
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
    bridge: Option<agentkit_harness::HostBridge>,
) {
    while let Some(event) = rx.recv().await {
        let result =
            tokio::time::timeout(spec.timeout, deliver(&spec, &event, bridge.as_ref())).await;
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
    bridge: Option<&agentkit_harness::HostBridge>,
) -> Result<(), String> {
    match &spec.target {
        HookTarget::Rust(f) => {
            f(event.clone()).await;
            Ok(())
        }
        HookTarget::Command { command, cwd } => {
            run_command(spec, command, cwd, event, bridge).await
        }
        HookTarget::Url {
            url,
            headers,
            secret,
        } => {
            let body = serde_json::to_vec(&**event).map_err(|e| e.to_string())?;
            let shown = agentkit_harness::redact_credentials(url);
            let client = agentkit_harness::http_client().map_err(|e| e.to_string())?;
            let mut req = client
                .post(url)
                .header("content-type", "application/json")
                .header("x-agentkit-hook", &spec.name)
                .header("x-agentkit-event", event.event_type.as_str());
            for (k, v) in headers {
                req = req.header(k, v);
            }
            if let Some(secret) = secret {
                let sig = agentkit_auth::sign_body(secret, &body);
                req = req.header(SIGNATURE_HEADER, format!("sha256={sig}"));
            }
            let resp = req
                .body(body)
                .send()
                .await
                .map_err(|e| format!("{shown}: {}", agentkit_harness::http_error_text(e)))?;
            if resp.status().is_success() {
                Ok(())
            } else {
                Err(format!("{shown} answered {}", resp.status()))
            }
        }
    }
}

async fn run_command(
    spec: &HookSpec,
    command: &[String],
    cwd: &std::path::Path,
    event: &Event,
    bridge: Option<&agentkit_harness::HostBridge>,
) -> Result<(), String> {
    let mut child = command_spec(spec, command, cwd, event)?;
    // A credential of its own, bound to the event's session (a `send`
    // acts as its owner), revoked when the command ends.
    let credential = bridge.map(|b| {
        let origin = agentkit_harness::CallOrigin::default();
        (
            b.url.clone(),
            b.credential_for(
                event.session_id.as_str(),
                &format!("hook_{}", spec.name),
                &origin,
            ),
        )
    });
    if let Some((url, credential)) = &credential {
        child = child
            .env("AGENTKIT_HOST_URL", url)
            .env("AGENTKIT_HOST_TOKEN", credential.token());
    }
    let program = child.program().display().to_string();
    let outcome = agentkit_harness::run_child(&child)
        .await
        .map_err(|e| format!("cannot run `{program}`: {e}"))?;
    if outcome.success() {
        Ok(())
    } else {
        Err(format!("`{program}` {}", outcome.describe()))
    }
}

/// A hook command's child: the event JSON (one line) on stdin, the
/// `hooks/` folder, the scrubbed environment plus `AGENTKIT_HOOK` and
/// `AGENTKIT_EVENT_TYPE`, the hook's timeout and the output cap.
fn command_spec(
    spec: &HookSpec,
    command: &[String],
    cwd: &std::path::Path,
    event: &Event,
) -> Result<agentkit_harness::ChildSpec, String> {
    let Some((program, args)) = command.split_first() else {
        return Err("empty command".into());
    };
    let mut line = serde_json::to_vec(event).map_err(|e| e.to_string())?;
    line.push(b'\n');
    Ok(agentkit_harness::ChildSpec::new(program)
        .args(args)
        .cwd(cwd)
        .stdin(line)
        .env("AGENTKIT_HOOK", &spec.name)
        .env("AGENTKIT_EVENT_TYPE", event.event_type.as_str())
        .timeout(spec.timeout)
        .stdout_cap(OUTPUT_CAP)
        .stderr_cap(OUTPUT_CAP))
}

#[cfg(all(test, unix))]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn event() -> Event {
        serde_json::from_value(serde_json::json!({
            "type": "session.started",
            "index": 0,
            "sessionId": "s1",
            "at": "2026-01-01T00:00:00Z",
            "data": {}
        }))
        .unwrap()
    }

    fn command_hook(command: &[&str], cwd: &std::path::Path) -> HookSpec {
        HookSpec {
            name: "audit".into(),
            events: vec!["*".into()],
            target: HookTarget::Command {
                command: command.iter().map(|s| (*s).to_owned()).collect(),
                cwd: cwd.to_path_buf(),
            },
            timeout: Duration::from_secs(10),
        }
    }

    #[tokio::test]
    async fn hook_commands_do_not_see_the_hosts_secrets() {
        use agentkit_test_support::rerun::{SECRET, rerun_with_env};
        if !rerun_with_env(
            module_path!(),
            "hook_commands_do_not_see_the_hosts_secrets",
            &[],
        ) {
            return;
        }
        assert_eq!(std::env::var(SECRET.0).as_deref(), Ok(SECRET.1));
        let dir = tempfile::tempdir().unwrap();
        let spec = command_hook(&["sh", "-c", "cat > event.json; env > env.txt"], dir.path());
        deliver(&spec, &Arc::new(event()), None).await.unwrap();
        let env = std::fs::read_to_string(dir.path().join("env.txt")).unwrap();
        assert!(env.contains("AGENTKIT_HOOK=audit\n"), "{env}");
        assert!(
            env.contains("AGENTKIT_EVENT_TYPE=session.started\n"),
            "{env}"
        );
        assert!(!env.contains(SECRET.0), "{env}");
        assert!(!env.contains(SECRET.1), "{env}");
        let line = std::fs::read_to_string(dir.path().join("event.json")).unwrap();
        assert!(line.ends_with("}\n"), "{line}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&line).unwrap()["sessionId"],
            "s1"
        );
    }

    #[tokio::test]
    async fn a_failing_url_hook_does_not_show_the_urls_credentials() {
        let spec = HookSpec {
            name: "notify".into(),
            events: vec!["*".into()],
            target: HookTarget::Url {
                url: "http://user:s3cret-pass@127.0.0.1:1/hook".into(),
                headers: vec![],
                secret: None,
            },
            timeout: Duration::from_secs(10),
        };
        let err = deliver(&spec, &Arc::new(event()), None).await.unwrap_err();
        assert!(err.starts_with("http://127.0.0.1:1/hook: "), "{err}");
        assert!(!err.contains("s3cret-pass"), "{err}");
        let debug = format!("{:?}", spec.target);
        assert!(!debug.contains("s3cret-pass"), "{debug}");
    }

    #[tokio::test]
    async fn a_failing_hook_command_says_how_it_ended_and_a_slow_one_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let spec = command_hook(&["sh", "-c", "echo nope >&2; exit 4"], dir.path());
        let err = deliver(&spec, &Arc::new(event()), None).await.unwrap_err();
        assert_eq!(err, "`sh` exited with status 4: nope");
        let mut spec = command_hook(&["sh", "-c", "sleep 30"], dir.path());
        spec.timeout = Duration::from_millis(200);
        let started = std::time::Instant::now();
        let err = deliver(&spec, &Arc::new(event()), None).await.unwrap_err();
        assert!(err.starts_with("`sh` timed out"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(3));
    }
}
