//! What an idle host gives back. Once it has run no turn for
//! [`RELEASE_AFTER`] after serving some, each agent closes the session
//! logs nobody uses and empties its state database's page caches, then
//! the binary's allocator returns its free pages
//! ([`MemoryRelease`](super::options::MemoryRelease)). Once per idle
//! spell: a host that stays idle does nothing more.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use agentkit_runtime::AgentRuntime;
use tokio_util::sync::CancellationToken;

use super::edge::EdgeStats;
use super::options::MemoryRelease;

/// How long the host must run no turn before it lets go: past the 20 s
/// after which idle sessions are unloaded (looked for every 5 s), so that
/// their logs are out of use by then.
const RELEASE_AFTER: Duration = Duration::from_secs(26);

/// Watches the turns in flight every second until `shutdown`, releasing
/// once per idle spell.
pub(crate) async fn release_when_idle(
    stats: Arc<EdgeStats>,
    runtimes: Vec<AgentRuntime>,
    allocator: Option<MemoryRelease>,
    shutdown: CancellationToken,
) {
    let mut last_busy = Instant::now();
    let mut owed = false;
    loop {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
            () = shutdown.cancelled() => return,
        }
        if stats.turns_in_flight.load(Ordering::Relaxed) > 0 {
            last_busy = Instant::now();
            owed = true;
            continue;
        }
        if !owed || last_busy.elapsed() < RELEASE_AFTER {
            continue;
        }
        owed = false;
        let runtimes = runtimes.clone();
        let allocator = allocator.clone();
        let released = tokio::task::spawn_blocking(move || {
            let closed: usize = runtimes
                .iter()
                .map(|rt| rt.retention().release_idle_memory())
                .sum();
            if let Some(release) = allocator {
                (release.0)();
            }
            closed
        })
        .await;
        match released {
            Ok(closed) => tracing::debug!(logs_closed = closed, "idle: released cached memory"),
            Err(e) => tracing::warn!(error = %e, "releasing an idle host's memory failed"),
        }
    }
}
