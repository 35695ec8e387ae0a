//! Deleting a session (`DELETE /v1/session/:id`): its owner or an
//! operator asks; a running turn is stopped first (recorded as any stop
//! is) and the deletion waits for the session to settle; then its
//! artifacts, its log, its fold snapshot and workspace (the session's
//! folder), its index row and, on a shared store, its lease go. The
//! session answers `404` from then on. A part (`runtime.retention()`), which also reaches the artifacts.
//!
//! A workspace set by `[local] cwd` is the user's folder and is never
//! deleted. On a shared store, the session's folder on other hosts (their
//! copy of its workspace) stays until they are restarted.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::meta::Owner;
use crate::runtime::AgentRuntime;

/// How long a deletion waits for a stopped turn to settle.
const SETTLE_WAIT: Duration = Duration::from_secs(10);

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

    /// Deletes session `id` for `owner` (its owner, or an operator):
    /// stops a running turn, waits for it to settle, then removes
    /// everything the session kept. `404` for no such session, `403` for
    /// another principal's.
    pub async fn delete(&self, id: &str, owner: &Owner) -> Result<()> {
        let session = self.rt.sessions().owned(id, owner).await?;
        let busy_here = session.state().is_active();
        let elsewhere = match &self.rt.inner.shared {
            Some(stores) if !busy_here => stores.leases.holder(id).await?.is_some(),
            _ => false,
        };
        if busy_here || elsewhere {
            self.rt.stop(id, owner).await?;
            let started = std::time::Instant::now();
            loop {
                let active = session.state().is_active()
                    || match &self.rt.inner.shared {
                        Some(stores) => stores.leases.holder(id).await?.is_some(),
                        None => false,
                    };
                if !active {
                    break;
                }
                if started.elapsed() > SETTLE_WAIT {
                    return Err(Error::SessionBusy { id: id.to_owned() });
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        let artifacts = self.artifacts().delete_session(id).await?;
        let dir = self.rt.sessions().session_dir(&session.id);
        self.rt.inner.registry.remove(&session);
        self.rt.inner.store.close(&session.id);
        match &self.rt.inner.shared {
            Some(stores) => {
                stores.index.delete(id).await?;
            }
            None => {
                self.rt.inner.db.delete_session(id);
                self.rt.inner.db.flush().await?;
            }
        }
        // The folder holds the log, its snapshot and (unless `[local]
        // cwd` put it elsewhere) the workspace.
        if dir.exists() {
            let remove = dir.clone();
            tokio::task::spawn_blocking(move || std::fs::remove_dir_all(&remove))
                .await
                .map_err(|e| Error::task("deleting a session's folder", e))?
                .map_err(|e| Error::io("delete", &dir, e))?;
        }
        tracing::info!(
            session = %id,
            reason = "request",
            by = %owner.principal_id,
            artifacts,
            "session deleted"
        );
        Ok(())
    }
}
