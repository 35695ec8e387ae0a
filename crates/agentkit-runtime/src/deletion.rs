//! Deleting sessions. One at a time on request (`DELETE
//! /v1/session/:id`): its owner or an operator asks; a running turn is
//! stopped first (recorded as any stop is) and the deletion waits for the
//! session to settle. By `[sessions]` in `agent.toml`: settled sessions
//! idle past `retention`, and the least recently active beyond
//! `max_sessions`, are deleted by a sweep that runs on one host per
//! period (the period's tick is claimed as a cron tick is). Either way
//! its artifacts, its log, its fold snapshot and workspace (the
//! session's folder), its index row and, on a shared store, its lease go,
//! and the session answers `404` from then on. A part
//! (`runtime.retention()`), which also reaches the artifacts.
//!
//! A workspace set by `[local] cwd` is the user's folder and is never
//! deleted. On a shared store, the session's folder on other hosts (their
//! copy of its workspace) stays until they are restarted.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use agentkit_store::Stale;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::meta::Owner;
use crate::runtime::AgentRuntime;
use crate::session::Session;
use crate::session_counts::DeleteReason;

/// How long a deletion waits for a stopped turn to settle.
const SETTLE_WAIT: Duration = Duration::from_secs(10);

/// How many stale sessions one query of a sweep reads.
const SWEEP_BATCH: i64 = 256;

/// The tick name a sweep claims (beside the cron schedules' ids, which
/// cannot contain `:`).
const SWEEP_TICK: &str = "agentkit:retention";

/// What one sweep deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Idle past `retention`.
    pub retention: u64,
    /// Beyond `max_sessions`.
    pub max_sessions: u64,
    /// Stale, but running a turn: left for a later sweep.
    pub busy: u64,
    /// Another host swept this period.
    pub elsewhere: bool,
}

/// What an agent keeps and for how long: deleting sessions, and its
/// artifacts (`artifacts.rs`).
#[derive(Debug, Clone, Copy)]
pub struct Retention<'a> {
    rt: &'a AgentRuntime,
}

impl AgentRuntime {
    /// What the agent keeps: its artifacts, deleting sessions.
    pub fn retention(&self) -> Retention<'_> {
        Retention { rt: self }
    }
}

impl<'a> Retention<'a> {
    pub(crate) fn runtime(&self) -> &'a AgentRuntime {
        self.rt
    }

    /// Lets go of what an idle agent keeps in memory for speed: the
    /// session logs nobody uses (their buffers and recent events; each is
    /// opened again when next asked for) and the state database's page
    /// caches. Blocking (SQLite): call it on the blocking pool. Answers
    /// how many logs it closed.
    pub fn release_idle_memory(&self) -> usize {
        let closed = match self.rt.store() {
            crate::log::EventLog::File(store) => store.close_unused(),
            crate::log::EventLog::Shared(_) => 0,
        };
        self.rt.inner.db.release_memory();
        closed
    }

    /// Deletes session `id` for `owner` (its owner, or an operator):
    /// stops a running turn, waits for it to settle, then removes
    /// everything the session kept. `404` for no such session, `403` for
    /// another principal's.
    pub async fn delete(&self, id: &str, owner: &Owner) -> Result<()> {
        let session = self.rt.sessions().owned(id, owner).await?;
        if self.running(&session).await? {
            self.rt.stop(id, owner).await?;
            let started = std::time::Instant::now();
            while self.running(&session).await? {
                if started.elapsed() > SETTLE_WAIT {
                    return Err(Error::SessionBusy { id: id.to_owned() });
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        self.remove(&session, DeleteReason::Request, &owner.principal_id)
            .await
    }

    /// Whether a turn of `session` runs, here or (on a shared store) on
    /// the host holding its lease.
    async fn running(&self, session: &Arc<Session>) -> Result<bool> {
        if session.state().is_active() {
            return Ok(true);
        }
        Ok(match &self.rt.inner.shared {
            Some(stores) => stores.leases.holder(session.id.as_str()).await?.is_some(),
            None => false,
        })
    }

    /// Removes everything settled `session` kept.
    async fn remove(&self, session: &Arc<Session>, reason: DeleteReason, by: &str) -> Result<()> {
        let id = session.id.as_str();
        let artifacts = self.artifacts().delete_session(id).await?;
        // A new session's folder may still be a spare: in place first.
        self.rt.inner.store.make_folder(&session.id).await?;
        let dir = self.rt.sessions().session_dir(&session.id);
        self.rt.inner.registry.remove(session);
        self.rt.inner.store.close(&session.id);
        self.rt.inner.index.delete(id).await?;
        // The folder holds the log, its snapshot and (unless `[local]
        // cwd` put it elsewhere) the workspace.
        if dir.exists() {
            let remove = dir.clone();
            tokio::task::spawn_blocking(move || std::fs::remove_dir_all(&remove))
                .await
                .map_err(|e| Error::task("deleting a session's folder", e))?
                .map_err(|e| Error::io("delete", &dir, e))?;
        }
        self.rt
            .inner
            .deleted
            .counter(reason)
            .fetch_add(1, Ordering::Relaxed);
        tracing::info!(
            session = %id,
            reason = reason.as_str(),
            by,
            artifacts,
            "session deleted"
        );
        Ok(())
    }

    /// How often the sweep runs: a quarter of the retention, between a
    /// second and ten minutes; a minute for `max_sessions` alone.
    pub fn sweep_period(&self) -> Option<Duration> {
        let keep = self.rt.agent().config.sessions;
        if !keep.deletes() {
            return None;
        }
        Some(keep.retention.map_or(Duration::from_secs(60), |r| {
            (r / 4).clamp(Duration::from_secs(1), Duration::from_secs(600))
        }))
    }

    /// Sweeps every [`sweep_period`](Self::sweep_period) until `cancel`
    /// (nothing when `[sessions]` deletes nothing).
    pub async fn run(&self, cancel: CancellationToken) {
        let Some(period) = self.sweep_period() else {
            return;
        };
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(period) => {}
            }
            match self.sweep().await {
                Ok(swept) if swept.retention + swept.max_sessions > 0 => {
                    tracing::info!(
                        retention = swept.retention,
                        max_sessions = swept.max_sessions,
                        busy = swept.busy,
                        "deleted the sessions [sessions] no longer keeps"
                    );
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "cannot sweep sessions past their retention"),
            }
        }
    }

    /// Deletes the settled sessions `[sessions]` no longer keeps, if no
    /// other host swept this period.
    pub async fn sweep(&self) -> Result<Swept> {
        let mut swept = Swept::default();
        let Some(period) = self.sweep_period() else {
            return Ok(swept);
        };
        let now = chrono::Utc::now();
        let period_ms = i64::try_from(period.as_millis()).unwrap_or(i64::MAX).max(1);
        let tick_ms = now.timestamp_millis() / period_ms * period_ms;
        let host = self
            .rt
            .inner
            .shared
            .as_ref()
            .map_or("local", |s| s.leases.owner());
        if !self
            .rt
            .inner
            .ticks
            .claim_tick(SWEEP_TICK, tick_ms, host)
            .await?
        {
            swept.elsewhere = true;
            return Ok(swept);
        }
        let keep = self.rt.agent().config.sessions;
        if let Some(retention) = keep.retention {
            let cutoff =
                now - chrono::Duration::from_std(retention).unwrap_or(chrono::Duration::MAX);
            let cutoff = cutoff.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            let (n, busy) = self
                .sweep_one(Stale::UpdatedBefore(&cutoff), DeleteReason::Retention)
                .await?;
            swept.retention = n;
            swept.busy += busy;
        }
        if let Some(max) = keep.max_sessions {
            let (n, busy) = self
                .sweep_one(Stale::Beyond(max), DeleteReason::MaxSessions)
                .await?;
            swept.max_sessions = n;
            swept.busy += busy;
        }
        Ok(swept)
    }

    /// Deletes the sessions `which` names, batch by batch, leaving those
    /// running a turn: `(deleted, busy)`.
    async fn sweep_one(&self, which: Stale<'_>, reason: DeleteReason) -> Result<(u64, u64)> {
        let (mut deleted, mut busy) = (0, 0);
        loop {
            let ids = self.rt.inner.index.stale(which, SWEEP_BATCH).await?;
            let mut removed = 0;
            for id in &ids {
                let session = match self.rt.sessions().get(id).await {
                    Ok(s) => s,
                    // Deleted meanwhile (by request, or another host).
                    Err(Error::NotFound { .. }) => continue,
                    Err(e) => return Err(e),
                };
                if self.running(&session).await? {
                    busy += 1;
                    continue;
                }
                self.remove(&session, reason, "agent.toml [sessions]")
                    .await?;
                removed += 1;
            }
            deleted += removed;
            if i64::try_from(ids.len()).unwrap_or(0) < SWEEP_BATCH || removed == 0 {
                return Ok((deleted, busy));
            }
        }
    }
}
