//! Pages of the session index: `GET /v1/sessions` reads one page at a
//! time (keyset paging on the session id, newest first), so a listing
//! costs its page, not every session ever stored.

use agentkit_protocol::api::SessionSummary;

use crate::error::Result;
use crate::meta::{Owner, SessionMeta};
use crate::runtime::AgentRuntime;

/// Which page of sessions to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionPage {
    /// The most sessions on the page (at least 1).
    pub limit: usize,
    /// Only sessions whose id sorts before this one (the previous page's
    /// last).
    pub before: Option<String>,
    /// Only the sessions of this channel.
    pub channel: Option<String>,
    /// Only the sessions created at or after this instant (RFC 3339, UTC,
    /// milliseconds, as session metadata stores it).
    pub since: Option<String>,
    /// Only the sessions last active at or after this instant (the same
    /// form): their index row was written then or later.
    pub updated_since: Option<String>,
    /// Only the sessions doing this.
    pub status: Option<SessionStatus>,
}

/// What a listed session is doing:
/// [`WaitingApproval`](SessionStatus::WaitingApproval) while a tool call
/// waits for a human's decision (its parked flag: set when the call asks,
/// cleared when its turn ends with nothing pending), whether its turn
/// waits live or ended; [`Running`](SessionStatus::Running) while a turn
/// runs otherwise (on a shared database: while a live host, whichever,
/// holds its lease); [`Idle`](SessionStatus::Idle) otherwise.
pub use agentkit_store::Activity as SessionStatus;

impl AgentRuntime {
    /// One page of the sessions `owner` created (every principal's for an
    /// operator, each with its owner), newest first, and the id to pass as
    /// `before` for the next page (`None` on the last).
    pub async fn list_page(
        &self,
        owner: &Owner,
        page: &SessionPage,
    ) -> Result<(Vec<SessionSummary>, Option<String>)> {
        let operator = owner.is_operator();
        let limit = page.limit.max(1);
        let principal = (!operator).then_some(owner.principal_id.as_str());
        // On one host, which turns run is known in memory only: the index
        // answers the parked flag and the running sessions are dropped
        // from the idle ones it gives (asking for as many more as there
        // are).
        let running = match (&self.inner.shared, page.status) {
            (None, Some(SessionStatus::Running | SessionStatus::Idle)) => Some(running_ids(self)),
            _ => None,
        };
        // One more than the page, to know whether another follows.
        let stored = match (&running, page.status) {
            (Some(running), Some(SessionStatus::Running)) => {
                running_metas(self, running, owner, page, limit + 1).await?
            }
            _ => {
                let extra = running.as_ref().map_or(0, Vec::len);
                self.inner
                    .index
                    .page(agentkit_store::PageQuery {
                        principal,
                        tenant: owner.tenant_scope(),
                        channel: page.channel.as_deref(),
                        before: page.before.as_deref(),
                        since: page.since.as_deref(),
                        updated_since: page.updated_since.as_deref(),
                        activity: page.status,
                        limit: i64::try_from(limit + 1 + extra).unwrap_or(i64::MAX),
                    })
                    .await?
                    .iter()
                    .filter_map(|m| crate::meta::meta_of(m))
                    .filter(|m| running.as_ref().is_none_or(|r| !r.contains(&m.id)))
                    .collect()
            }
        };
        let (stored, next) = split(stored, limit);
        let mut out = Vec::with_capacity(stored.len());
        for meta in stored {
            // The last activity is the index row's.
            let updated_at = meta.updated_at.clone();
            // A loaded session's metadata is the current one.
            let (meta, busy) = match self.sessions().peek(&meta.id) {
                Some(s) => {
                    if self.sessions().deleted(&s) {
                        continue;
                    }
                    (s.meta().clone(), s.state().is_running())
                }
                None => (meta, false),
            };
            out.push(SessionSummary {
                session_id: meta.id,
                channel: meta.channel,
                mode: meta.mode,
                updated_at: updated_at.unwrap_or_else(|| meta.created_at.clone()),
                created_at: meta.created_at,
                title: meta.title,
                busy,
                principal_id: operator.then_some(meta.owner.principal_id),
                cost_usd: meta.cost_usd.filter(|_| !meta.cost_unknown),
            });
        }
        Ok((out, next))
    }
}

/// The ids of the sessions with a turn running on this host.
fn running_ids(rt: &AgentRuntime) -> Vec<String> {
    rt.inner
        .registry
        .loaded()
        .into_iter()
        .filter(|s| s.state().is_running())
        .map(|s| s.id.as_str().to_owned())
        .collect()
}

/// Up to `limit` of the running sessions of one host (`running`, from
/// memory) that `page`'s filters select, newest first, as the index
/// holds them.
async fn running_metas(
    rt: &AgentRuntime,
    running: &[String],
    owner: &Owner,
    page: &SessionPage,
    limit: usize,
) -> Result<Vec<SessionMeta>> {
    let principal = (!owner.is_operator()).then_some(owner.principal_id.as_str());
    let mut ids: Vec<&String> = running
        .iter()
        .filter(|id| page.before.as_deref().is_none_or(|b| id.as_str() < b))
        .collect();
    ids.sort_unstable_by(|a, b| b.cmp(a));
    let mut metas = Vec::new();
    for id in ids {
        if metas.len() >= limit {
            break;
        }
        let Some(meta) = rt
            .inner
            .index
            .get(id)
            .await?
            .as_deref()
            .and_then(crate::meta::meta_of)
        else {
            continue;
        };
        let updated = meta.updated_at.as_deref().unwrap_or(&meta.created_at);
        let wanted = !meta.parked
            && principal.is_none_or(|p| meta.owner.principal_id == p)
            && owner.sees_tenant_of(&meta.owner)
            && page.channel.as_deref().is_none_or(|c| meta.channel == c)
            && page
                .since
                .as_deref()
                .is_none_or(|s| meta.created_at.as_str() >= s)
            && page.updated_since.as_deref().is_none_or(|s| updated >= s);
        if wanted {
            metas.push(meta);
        }
    }
    Ok(metas)
}

/// The first `limit` of `stored` (which holds up to one more), and the
/// cursor of the next page when there is one more.
fn split(mut stored: Vec<SessionMeta>, limit: usize) -> (Vec<SessionMeta>, Option<String>) {
    if stored.len() > limit {
        stored.truncate(limit);
        let next = stored.last().map(|m| m.id.clone());
        (stored, next)
    } else {
        (stored, None)
    }
}
