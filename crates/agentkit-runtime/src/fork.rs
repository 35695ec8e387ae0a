//! Forking a session, a part of the runtime: a new session whose log
//! starts with a copy of another session's first events, then a
//! `session.forked` event, so the conversation can go on from that
//! point without touching the original. A fork is a storage operation
//! over the log seam: it works the same on this host's files and on a
//! shared store, from any host.
//!
//! A fork cuts between turns only: an index inside a turn (after a
//! `message.received` or `turn.started` whose turn has not ended) is
//! refused with the nearest boundaries. The fork's workspace is a copy of
//! the original's as it is now (a log does not record a workspace's past
//! states); it is an HTTP session owned by the caller, whatever the
//! original's channel, with a fresh continuation token.

use std::path::Path;

use agentkit_events::NewEvent;
use agentkit_protocol::api::{Forked, ForkedFrom};
use agentkit_protocol::{Event, EventData, EventType, SessionForked, SessionId};

use crate::error::{Error, Result};
use crate::meta::{HTTP_CHANNEL, Owner, SessionMeta};
use crate::requests::FollowUp;
use crate::runtime::AgentRuntime;
use crate::util::{mint_token, new_id, now};

/// Forks of this agent's sessions. Reached through
/// [`AgentRuntime::forks`].
#[derive(Debug, Clone, Copy)]
pub struct Forks<'a> {
    rt: &'a AgentRuntime,
}

impl AgentRuntime {
    /// Forking sessions at an event.
    pub fn forks(&self) -> Forks<'_> {
        Forks { rt: self }
    }
}

impl Forks<'_> {
    /// Forks session `id`, which `owner` may see, before its event
    /// `at_index`: the new session's events `0..at_index` are the
    /// original's (same types and data; the session id and times are the
    /// fork's), then `session.forked`. With `message`, that message is
    /// sent in the fork at once, and the answer's token is the one after
    /// it. The original is untouched.
    pub async fn fork(
        &self,
        id: &str,
        owner: &Owner,
        at_index: u64,
        message: Option<String>,
    ) -> Result<Forked> {
        let original = self.rt.sessions().owned(id, owner).await?;
        // A crash's interrupted turn is recorded before the log is read.
        self.rt.turns().ready(&original).await?;
        let len = self.rt.store().len(&original.id).await?;
        if at_index == 0 || at_index > len {
            return Err(Error::BadRequest {
                message: format!(
                    "`atIndex` must be between 1 (keep only the session's start) and {len} (the whole log); it is {at_index}"
                ),
            });
        }
        // Only what the checks and the carried-over state need: turn
        // boundaries, costs, approvals, A/B variants. On files the other
        // lines (a reply's deltas, tool results) are skipped unparsed, and
        // the log itself is shared, not copied.
        let prefix = self
            .rt
            .store()
            .read_stored_of(&original.id, len, KEPT)
            .await?;
        check_cut(&prefix, at_index, len)?;
        let prefix: Vec<Event> = prefix
            .into_iter()
            .take_while(|e| e.index < at_index)
            .collect();
        let prefix = prefix.as_slice();
        let from = original.meta().clone();
        let fork_id = SessionId::parse(&new_id("ses"))?;
        let workspace_dir = self
            .rt
            .inner
            .agent
            .config
            .local
            .cwd
            .as_ref()
            .map(|cwd| cwd.join(fork_id.as_str()).to_string_lossy().into_owned());
        let forked_from = ForkedFrom {
            session_id: from.id.clone(),
            at_index,
        };
        let prefix_cost = crate::fold::cost(prefix);
        let meta = SessionMeta {
            id: fork_id.as_str().to_owned(),
            channel: HTTP_CHANNEL.to_owned(),
            mode: from.mode,
            // The fork stays in the original's tenant (an admin's too).
            owner: Owner {
                tenant: original.meta().owner.tenant.clone(),
                ..owner.as_session_owner()
            },
            continuation_token: mint_token(),
            created_at: now(),
            title: from.title.clone(),
            purpose: from.purpose.clone(),
            workspace_dir,
            dry_run: from.dry_run,
            parked: !crate::approvals::pending(prefix).is_empty(),
            as_of: from.as_of.clone(),
            output_schema: from.output_schema.clone(),
            forked_from: Some(forked_from.clone()),
            // The copied turns' cost is the fork's too.
            cost_usd: prefix_cost.1.then_some(prefix_cost.0),
            cost_unknown: !prefix_cost.1,
            updated_at: None,
        };
        // The index row first, as for a new session, then the log.
        self.rt.sessions().index_put(&meta).await?;
        let session = self
            .rt
            .sessions()
            .register(fork_id.clone(), meta.clone(), false);
        // Shared with the original on files, not copied. Not fed to the
        // fork's fold cache: its first turn folds the log once, so an idle
        // fork holds none of it in memory. Not published either: hooks saw
        // these events in the original.
        self.rt
            .store()
            .fork(&original.id, at_index, &fork_id)
            .await?;
        // After the log: on files the fork's folder is made whole by it.
        copy_workspace(&original.workspace, &session.workspace).await?;
        // The fork's own first event is published as any.
        self.rt
            .store()
            .append_batch(
                &fork_id,
                vec![NewEvent::new(
                    None,
                    EventData::SessionForked(SessionForked {
                        from_session_id: forked_from.session_id.clone(),
                        at_index,
                    }),
                )],
            )
            .await?;
        self.rt
            .ab()
            .record_assignments(
                fork_id.as_str(),
                &meta.owner.principal_id,
                meta.purpose.as_deref(),
                chrono::Utc::now().timestamp_millis(),
                assignments(prefix),
            )
            .await?;
        if meta.parked {
            self.rt.approvals().arm_timeouts(&fork_id, prefix);
        }
        let mut token = meta.continuation_token.clone();
        match message {
            Some(message) => {
                let accepted = self
                    .rt
                    .follow_up(
                        fork_id.as_str(),
                        FollowUp {
                            client_tools: Vec::new(),
                            owner: owner.clone(),
                            message,
                            continuation_token: Some(token),
                            admission: Default::default(),
                            workspace_files: Vec::new(),
                        },
                    )
                    .await?;
                token = accepted.continuation_token;
            }
            // Nothing runs in the fork yet: let any host take its first
            // message.
            None => self.rt.commands().release_if_idle(&session).await,
        }
        Ok(Forked {
            ok: true,
            session_id: fork_id.as_str().to_owned(),
            continuation_token: token,
            forked_from,
        })
    }
}

/// The kinds of event a fork reads of its prefix: the turn boundaries
/// (for the cut), what ended turns cost, approvals and A/B variants.
const KEPT: &[EventType] = &[
    EventType::MessageReceived,
    EventType::TurnStarted,
    EventType::TurnCompleted,
    EventType::TurnFailed,
    EventType::ActionApprovalRequested,
    EventType::ActionApprovalResolved,
    EventType::AbAssigned,
];

/// Refuses a cut before event `at` that falls inside a turn: after a
/// message that no turn has taken yet, or a turn that has not ended.
/// `events` are the log's events of the [`KEPT`] kinds, in index order;
/// `len` is the log's length.
fn check_cut(events: &[Event], at: u64, len: u64) -> Result<()> {
    let spans = idle_spans(events, len);
    if spans.iter().any(|(lo, hi)| (*lo..=*hi).contains(&at)) {
        return Ok(());
    }
    Err(Error::InsideTurn {
        at,
        // A run that starts before `at` ends before it, or `at` would be in it.
        before: spans
            .iter()
            .rev()
            .find(|(lo, _)| *lo < at)
            .map(|(_, hi)| *hi),
        after: spans.iter().find(|(lo, _)| *lo > at).map(|(lo, _)| *lo),
    })
}

/// The runs of indices a fork may cut before (within `1..=len`), as
/// inclusive `(first, last)` pairs, ascending: no turn open, no message
/// waiting for one. Only the kinds in [`KEPT`] move that state, so the
/// events of other kinds may be left out of `events`.
fn idle_spans(events: &[Event], len: u64) -> Vec<(u64, u64)> {
    let (mut turn_open, mut waiting) = (false, false);
    let mut spans: Vec<(u64, u64)> = Vec::new();
    // The idle run open since this cut, if any (the log's first event,
    // `session.started`, leaves the session idle).
    let mut idle_from: Option<u64> = Some(1);
    for e in events {
        let was_idle = !turn_open && !waiting;
        match e.event_type {
            EventType::MessageReceived => waiting = true,
            EventType::TurnStarted => {
                turn_open = true;
                waiting = false;
            }
            EventType::TurnCompleted | EventType::TurnFailed => turn_open = false,
            _ => {}
        }
        let idle = !turn_open && !waiting;
        match (was_idle, idle) {
            // The cut before this event is the run's last.
            (true, false) => {
                if let Some(from) = idle_from.take()
                    && from <= e.index
                {
                    spans.push((from, e.index));
                }
            }
            (false, true) => idle_from = Some(e.index + 1),
            _ => {}
        }
    }
    if let Some(from) = idle_from
        && from <= len
    {
        spans.push((from, len));
    }
    spans
}

/// The A/B variants the copied events assigned, recorded for the fork
/// too (its turns are measured under the same variants).
fn assignments(prefix: &[Event]) -> Vec<crate::ab::Assignment> {
    prefix
        .iter()
        .filter(|e| e.event_type == EventType::AbAssigned)
        .filter_map(|e| match e.payload() {
            EventData::AbAssigned(a) => Some(crate::ab::Assignment {
                experiment: a.experiment,
                variant: a.variant,
            }),
            _ => None,
        })
        .collect()
}

/// Copies the original's workspace, as it is now, to the fork's (nothing
/// when the original has none yet). Symbolic links are copied as links;
/// nothing outside the workspace is read.
async fn copy_workspace(from: &Path, to: &Path) -> Result<()> {
    let (from, to) = (from.to_path_buf(), to.to_path_buf());
    tokio::task::spawn_blocking(move || {
        if !from.is_dir() {
            return Ok(());
        }
        copy_tree(&from, &to)
    })
    .await
    .map_err(|e| Error::task("copying the workspace", e))?
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).map_err(|e| Error::io("creating", to, e))?;
    let entries = std::fs::read_dir(from).map_err(|e| Error::io("reading", from, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("reading", from, e))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry
            .file_type()
            .map_err(|e| Error::io("reading", &src, e))?;
        if kind.is_dir() {
            copy_tree(&src, &dst)?;
        } else if kind.is_symlink() {
            let target = std::fs::read_link(&src).map_err(|e| Error::io("reading", &src, e))?;
            #[cfg(unix)]
            std::os::unix::fs::symlink(&target, &dst).map_err(|e| Error::io("linking", &dst, e))?;
        } else {
            std::fs::copy(&src, &dst).map_err(|e| Error::io("copying", &src, e))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn event(index: u64, event_type: EventType) -> Event {
        Event {
            event_type,
            index,
            session_id: SessionId::parse("ses_a").unwrap(),
            turn_id: None,
            at: String::new(),
            data: serde_json::json!({}),
        }
    }

    #[test]
    fn cuts_fall_between_turns_only() {
        use EventType::*;
        let types = [
            SessionStarted,  // 0
            MessageReceived, // 1
            TurnStarted,     // 2
            StepStarted,     // 3
            TurnCompleted,   // 4
            SessionWaiting,  // 5
            MessageReceived, // 6
            TurnStarted,     // 7
            MessageReceived, // 8 (queued behind the turn)
            TurnFailed,      // 9
            TurnStarted,     // 10
            TurnCompleted,   // 11
        ];
        let events: Vec<Event> = types
            .iter()
            .enumerate()
            .map(|(i, t)| event(i as u64, *t))
            .collect();
        assert_eq!(idle_spans(&events, 12), vec![(1, 1), (5, 6), (12, 12)]);
        assert!(check_cut(&events, 5, 12).is_ok());
        assert!(check_cut(&events, 6, 12).is_ok());
        match check_cut(&events, 3, 12) {
            Err(Error::InsideTurn { at, before, after }) => {
                assert_eq!((at, before, after), (3, Some(1), Some(5)));
            }
            other => panic!("{other:?}"),
        }
        // Events of other kinds may be left out: the same answers.
        let kept: Vec<Event> = events
            .iter()
            .filter(|e| KEPT.contains(&e.event_type))
            .cloned()
            .collect();
        assert_eq!(idle_spans(&kept, 12), idle_spans(&events, 12));
        let open = &events[..8];
        match check_cut(open, 8, 8) {
            Err(e @ Error::InsideTurn { .. }) => {
                assert_eq!(e.status(), 409);
                assert!(e.to_string().contains("atIndex 6"), "{e}");
            }
            other => panic!("{other:?}"),
        }
    }
}
