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
}

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
        // One more than the page, to know whether another follows.
        let stored = self
            .inner
            .index
            .page(agentkit_store::PageQuery {
                principal: (!operator).then_some(owner.principal_id.as_str()),
                channel: page.channel.as_deref(),
                before: page.before.as_deref(),
                since: page.since.as_deref(),
                limit: i64::try_from(limit + 1).unwrap_or(i64::MAX),
            })
            .await?
            .iter()
            .filter_map(|m| crate::meta::meta_of(m))
            .collect::<Vec<SessionMeta>>();
        let (stored, next) = split(stored, limit);
        let mut out = Vec::with_capacity(stored.len());
        for meta in stored {
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
