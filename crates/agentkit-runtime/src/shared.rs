//! Running on a database several hosts share (`--database-url`): the
//! session index and the leases in PostgreSQL, and the runtime's rules
//! for them. A session's turns run on the host holding its lease (taken
//! by the first append, let go when the session settles); a host that
//! finds a session held elsewhere answers 409 `session_busy` rather than
//! writing; a lease a dead host held past its expiry is taken over by
//! the first host whose sweep finds it, which records the interrupted
//! turn (`turn.failed`, reason `restart`) as a restart would. A request
//! for a session another live host holds is routed to it through the
//! database (`mailbox.rs`).

use std::sync::Arc;
use std::time::Duration;

use crate::dispatch::Commands;
use crate::error::Result;

/// How often a host looks for sessions whose holder died.
const SWEEP_EVERY: Duration = Duration::from_millis(500);

impl Commands<'_> {
    /// Looks for sessions of this agent whose holder died mid-turn, takes
    /// each over and records the interruption, until shutdown.
    pub(crate) fn start_sweeper(&self) {
        let Some(shared) = self.rt.inner.shared.clone() else {
            return;
        };
        let runtime = self.rt.downgrade();
        let shutdown = self.rt.shutdown_token();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(SWEEP_EVERY) => {}
                    _ = shutdown.cancelled() => return,
                }
                let Some(runtime) = runtime.upgrade() else {
                    return;
                };
                let orphans = match shared.leases.orphaned(64).await {
                    Ok(orphans) => orphans,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot look for orphaned sessions");
                        continue;
                    }
                };
                for id in orphans {
                    if let Err(e) = runtime.commands().take_over(&id).await {
                        tracing::debug!(session = %id, error = %e, "no takeover");
                    }
                }
            }
        });
    }

    /// Takes over session `id` from a dead host: its lease, then the
    /// recovery a restart would run.
    async fn take_over(&self, id: &str) -> Result<()> {
        let Some(shared) = &self.rt.inner.shared else {
            return Ok(());
        };
        shared.leases.acquire(id).await?;
        tracing::warn!(session = %id, "taking over a session whose host stopped renewing its lease");
        // What this host had loaded of it is stale: load it afresh.
        if let Some(stale) = self.rt.sessions().peek(id) {
            if stale.state().is_active() {
                return Ok(());
            }
            self.rt.sessions().unload(&stale);
        }
        let session = self.rt.sessions().get(id).await?;
        let recovered = self.rt.turns().recover_now(&session).await;
        self.release_if_idle(&session).await;
        recovered
    }

    /// Takes `session`'s lease for this host (a no-op on files):
    /// [`agentkit_store::SharedError::Busy`] while another live host holds it.
    ///
    /// The lease may come from a host that died mid-turn (it expired
    /// before any sweep took it over): once this host holds it, no one
    /// else can append, so the log read now is complete, and an
    /// interrupted turn is recorded (`restart`) before the message that
    /// follows it, as the sweeper would have. A lease that was let go (its
    /// session settled) needs no such look.
    pub(crate) async fn hold_lease(&self, session: &Arc<crate::session::Session>) -> Result<()> {
        if let Some(shared) = &self.rt.inner.shared {
            let id = session.id.as_str();
            let took_over = shared.leases.hold(id).await?;
            if took_over && !session.state().is_active() {
                tracing::warn!(session = %id, "taking over a session whose host stopped renewing its lease");
                self.rt.turns().recover_now(session).await?;
            }
        }
        Ok(())
    }

    /// The other live host holding session `id`'s lease, if one does (a
    /// request for it is routed there).
    pub(crate) async fn held_by_other(&self, id: &str) -> Result<Option<String>> {
        match &self.rt.inner.shared {
            Some(shared) => Ok(shared.leases.holder(id).await?),
            None => Ok(None),
        }
    }

    /// Lets go of `session`'s lease once it is idle, so any host may take
    /// its next message. A call parked in a turn that is still running
    /// here keeps it (the turn is active); a parked call whose turn is
    /// gone (a restart, a takeover) is resolved from the log by whichever
    /// host the decision reaches.
    pub(crate) async fn release_if_idle(&self, session: &Arc<crate::session::Session>) {
        let Some(shared) = &self.rt.inner.shared else {
            return;
        };
        if session.state().is_active() {
            return;
        }
        if let Err(e) = shared.leases.release(session.id.as_str()).await {
            tracing::warn!(session = %session.id, error = %e, "cannot release the session's lease");
        }
    }
}
