//! The loaded sessions, a part of the runtime: finding a session by id
//! (loaded from the session index when this host has not yet), by its
//! channel key, or as its owner; registering, unloading and forgetting
//! one; and writing its index row. It holds the session core by
//! reference; the registry and the index are the core's.

use std::path::PathBuf;
use std::sync::Arc;

use agentkit_protocol::SessionId;

use crate::error::{Error, Result};
use crate::meta::{Owner, SessionMeta};
use crate::runtime::AgentRuntime;
use crate::session::Session;
use crate::util::lock;

/// The loaded sessions of the runtime (crate-internal). Reached through
/// [`AgentRuntime::sessions`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sessions<'a> {
    pub(crate) rt: &'a AgentRuntime,
}

impl AgentRuntime {
    /// The loaded sessions (crate-internal).
    pub(crate) fn sessions(&self) -> Sessions<'_> {
        Sessions { rt: self }
    }
}

/// How often idle sessions are looked for (see
/// [`UNLOAD_IDLE_AFTER`](crate::registry::UNLOAD_IDLE_AFTER)).
const UNLOAD_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

impl Sessions<'_> {
    /// Unloads the sessions unused for
    /// [`UNLOAD_IDLE_AFTER`](crate::registry::UNLOAD_IDLE_AFTER), every
    /// [`UNLOAD_EVERY`], until shutdown.
    pub(crate) fn start_unloader(&self) {
        let runtime = self.rt.downgrade();
        let shutdown = self.rt.shutdown_token();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(UNLOAD_EVERY) => {}
                    _ = shutdown.cancelled() => return,
                }
                let Some(runtime) = runtime.upgrade() else {
                    return;
                };
                let unloaded = runtime
                    .inner
                    .registry
                    .unload_idle(crate::registry::UNLOAD_IDLE_AFTER);
                if unloaded > 0 {
                    tracing::debug!(unloaded, "unloaded idle sessions");
                }
            }
        });
    }

    pub(crate) fn session_dir(&self, id: &SessionId) -> PathBuf {
        self.rt
            .inner
            .options
            .state_dir
            .join("sessions")
            .join(id.as_str())
    }

    /// Makes `meta` a loaded session, or returns the one already loaded
    /// under its id (two callers may load one session at once).
    pub(crate) fn register(
        &self,
        id: SessionId,
        meta: SessionMeta,
        needs_recovery: bool,
    ) -> Arc<Session> {
        let workspace = meta
            .workspace_dir
            .as_ref()
            .map_or_else(|| self.session_dir(&id).join("workspace"), PathBuf::from);
        let fresh = Arc::new(Session::new(id, meta, workspace, needs_recovery));
        let session = self.rt.inner.registry.insert(fresh);
        self.rt.inner.registry.touch(&session);
        session
    }

    /// The session `id`, loaded from the index if this host has not yet.
    /// A loaded session is current unless another host may have moved it
    /// on or deleted it (a shared store, no turn running here, no lease
    /// held): then its metadata is read again (a rotated token, a new
    /// title), and a session gone from the index is forgotten here and
    /// answers `404`. Its fold cache stays (the log only grows).
    pub(crate) async fn get(&self, id: &str) -> Result<Arc<Session>> {
        let id = SessionId::parse(id)?;
        let not_found = || Error::SessionNotFound {
            id: id.as_str().to_owned(),
        };
        let loaded = self.rt.inner.registry.peek(id.as_str());
        if let Some(session) = &loaded
            && self.current(session)
        {
            if self.deleted(session) {
                return Err(not_found());
            }
            return Ok(session.clone());
        }
        let stored = self.rt.inner.index.get(id.as_str()).await?;
        let Some(meta) = stored
            .as_deref()
            .and_then(crate::meta::meta_of)
            .filter(|m| m.id == id.as_str())
        else {
            // Deleted on another host.
            if let Some(session) = &loaded {
                self.rt.inner.registry.remove(session);
                self.rt.inner.store.close(&session.id);
            }
            return Err(not_found());
        };
        match loaded {
            Some(session) => {
                let old = {
                    let mut current = lock(&session.meta);
                    let old = current.continuation_token.clone();
                    *current = meta.clone();
                    old
                };
                if old != meta.continuation_token {
                    self.rt.inner.registry.rekey(
                        &meta.channel,
                        &old,
                        &meta.continuation_token,
                        id.as_str(),
                    );
                }
                Ok(session)
            }
            None => Ok(self.register(id, meta, true)),
        }
    }

    /// Is the loaded `session`'s metadata the current one? Always on one
    /// host; on a shared store, while a turn runs here or this host holds
    /// its lease.
    fn current(&self, session: &Session) -> bool {
        match &self.rt.inner.shared {
            None => true,
            Some(shared) => session.state().is_active() || shared.leases.holds(session.id.as_str()),
        }
    }

    /// Drops a loaded session from memory (it is loaded again when next
    /// addressed).
    pub(crate) fn unload(&self, session: &Arc<Session>) {
        self.rt.inner.registry.remove(session);
    }

    /// Writes `meta` to the session index, answered once it is there.
    pub(crate) async fn index_put(&self, meta: &SessionMeta) -> Result<()> {
        Ok(self.rt.inner.index.put(&crate::meta::row_of(meta)?).await?)
    }

    /// Writes `meta` to the session index without waiting.
    pub(crate) fn index_put_detached(&self, meta: &SessionMeta) {
        match crate::meta::row_of(meta) {
            Ok(row) => self.rt.inner.index.put_detached(row),
            Err(e) => tracing::warn!(error = %e, "cannot update the session index"),
        }
    }

    /// [`index_put_detached`](Self::index_put_detached) at the end of a
    /// turn: the row's keys are unchanged, its metadata and last activity
    /// move.
    pub(crate) fn index_touch(&self, meta: &SessionMeta) {
        match crate::meta::row_of(meta) {
            Ok(row) => self.rt.inner.index.put_activity(row),
            Err(e) => tracing::warn!(error = %e, "cannot update the session index"),
        }
    }

    /// The loaded session `id`, if it is loaded (no index lookup).
    pub(crate) fn peek(&self, id: &str) -> Option<Arc<Session>> {
        self.rt.inner.registry.peek(id)
    }

    /// Has someone deleted the session's folder? An idle session whose
    /// folder is gone is forgotten at once (listings, streams, keys), so
    /// deleting a folder deletes the session without a restart. A session
    /// with a turn in flight is forgotten once it settles.
    pub(crate) fn deleted(&self, session: &Arc<Session>) -> bool {
        // On a shared database a session's folder is only this host's
        // copy of its workspace: its absence deletes nothing.
        if self.rt.inner.shared.is_some()
            || self.rt.inner.store.has_log(&session.id)
            || self.session_dir(&session.id).exists()
        {
            return false;
        }
        if session.state().is_active() {
            return false;
        }
        self.forget(session);
        true
    }

    /// Drops every trace of `session` from memory.
    pub(crate) fn forget(&self, session: &Arc<Session>) {
        if !self.rt.inner.registry.remove(session) {
            return;
        }
        self.rt.inner.store.close(&session.id);
        self.rt.inner.db.delete_session(session.id.as_str());
        tracing::info!(session = %session.id, "forgot a session whose folder was deleted");
    }

    /// The session, if `owner` may use it.
    /// An operator may use every session of its tenant (an admin every
    /// session); what it does is recorded (an
    /// approval's `by`, a message's `from`) and its reach logged.
    pub(crate) async fn owned(&self, id: &str, owner: &Owner) -> Result<Arc<Session>> {
        let session = self.get(id).await?;
        self.check_owner(session, id, owner)
    }

    fn check_owner(&self, session: Arc<Session>, id: &str, owner: &Owner) -> Result<Arc<Session>> {
        // Another tenant's session does not exist for this principal.
        if !owner.sees_tenant_of(&session.meta().owner) {
            return Err(Error::SessionNotFound { id: id.to_owned() });
        }
        if session.meta().owner.principal_id != owner.principal_id {
            if !owner.is_operator() {
                return Err(Error::Forbidden { id: id.to_owned() });
            }
            tracing::info!(session = %id, operator = %owner.principal_id, "an operator addresses a session it does not own");
        }
        Ok(session)
    }

    /// The owner of session `id` as the index (or memory) holds it,
    /// without loading the session; `None` when it is gone.
    pub(crate) async fn stored_owner(&self, id: &str) -> Result<Option<Owner>> {
        if let Some(s) = self.peek(id) {
            return Ok(Some(s.meta().owner.clone()));
        }
        let row = self.rt.inner.index.get(id).await?;
        Ok(row
            .as_deref()
            .and_then(crate::meta::meta_of)
            .map(|m| m.owner))
    }

    /// Whether `owner` sees the tenant of session `id` (a session gone
    /// counts as tenant-less; an index that cannot answer hides it from
    /// all but an admin).
    pub(crate) async fn sees_tenant(&self, id: &str, owner: &Owner) -> bool {
        if owner.admin {
            return true;
        }
        match self.stored_owner(id).await {
            Ok(stored) => owner.tenant == stored.and_then(|o| o.tenant),
            Err(e) => {
                tracing::warn!(session = %id, error = %e, "cannot read a session's tenant");
                false
            }
        }
    }

    /// The session a key maps to in the session index.
    pub(crate) async fn index_by_key(&self, channel: &str, key: &str) -> Result<Option<String>> {
        Ok(self.rt.inner.index.by_key(channel, key).await?)
    }
}

/// Whether an owner sees the tenants of the sessions that rows
/// (artifacts, memories) come from: those rows carry no tenant, so each
/// session is asked once, by the index.
pub(crate) struct TenantSight<'o> {
    owner: &'o Owner,
    seen: std::collections::HashMap<String, bool>,
}

impl<'o> TenantSight<'o> {
    pub(crate) fn new(owner: &'o Owner) -> Self {
        TenantSight {
            owner,
            seen: std::collections::HashMap::new(),
        }
    }

    pub(crate) async fn sees(&mut self, rt: &crate::runtime::AgentRuntime, session: &str) -> bool {
        if self.owner.admin {
            return true;
        }
        if let Some(v) = self.seen.get(session) {
            return *v;
        }
        let v = rt.sessions().sees_tenant(session, self.owner).await;
        self.seen.insert(session.to_owned(), v);
        v
    }
}
