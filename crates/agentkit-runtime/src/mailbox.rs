//! Requests for a session another host is running, routed to it through
//! the shared database's mailbox (`agentkit_pg::Mailbox`): a follow-up, a
//! stop, an approval decision, a reminder's wake or a deterministic tool
//! call in the session that reaches (or fires on) a host which does not
//! hold
//! the session's lease is posted there; the holder's mailbox loop (woken
//! by `NOTIFY`, and once a second) claims it and applies it exactly as a
//! request made to it (admission, token rotation, ownership checks), and
//! the receiving host answers its caller with the outcome.
//!
//! When no live host holds the session any more (its turn ended, or its
//! host died and the lease expired), the receiving host, or any host's
//! mailbox loop, claims the request and applies it itself. A request no
//! host claimed within [`ROUTE_TIMEOUT`] is abandoned (never applied) and
//! answered `503`; one claimed but not answered in time is answered `503`
//! saying it may have been applied. A caller is told "accepted" only once
//! the request was applied.

use std::time::{Duration, Instant};

use agentkit_harness::{CallOrigin, CallPrincipal, Decision};
use agentkit_manifest::Admission;
use agentkit_pg::{Mail, MailSignal, MailState};
use agentkit_protocol::ErrorCode;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::approvals::ResolvedApproval;
use crate::error::{Error, Result};
use crate::meta::Owner;
use crate::runtime::{Accepted, AgentRuntime, FollowUp, new_id};
use crate::tool_call::ToolCallOutcome;

/// How long a receiving host waits for a routed request's outcome.
pub(crate) const ROUTE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a waiting receiver looks at its request's row (a lost
/// notification costs at most this).
const POLL: Duration = Duration::from_millis(250);
/// How often every host looks for requests it should apply without a
/// notification (a lost one, or a session whose holder died).
const DRAIN_EVERY: Duration = Duration::from_secs(1);
/// How many requests one pass claims.
const CLAIM_BATCH: i64 = 32;
/// Settled requests whose receiver never read them are deleted after this.
const PURGE_AFTER_HOURS: f64 = 1.0;

/// A routed request, as the mailbox row's payload stores it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub(crate) enum Routed {
    #[serde(rename_all = "camelCase")]
    Message {
        owner: Owner,
        message: String,
        continuation_token: Option<String>,
        admission: Admission,
        workspace_files: Vec<(String, String)>,
    },
    #[serde(rename_all = "camelCase")]
    Stop { owner: Owner },
    /// A reminder waking the conversation (`coalesce`, no token rotation).
    #[serde(rename_all = "camelCase")]
    Wake { message: String },
    #[serde(rename_all = "camelCase")]
    Decision {
        owner: Owner,
        call_id: String,
        decision: Decision,
    },
    /// A deterministic tool call in the session (`POST /v1/tools/:name`
    /// with `sessionId`).
    #[serde(rename_all = "camelCase")]
    ToolCall {
        owner: Owner,
        name: String,
        input: serde_json::Value,
        origin: RoutedOrigin,
    },
}

/// What a routed tool call keeps of its [`CallOrigin`] (the call never
/// runs in a model's turn).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RoutedOrigin {
    channel_id: Option<String>,
    continuation_key: Option<String>,
    purpose: Option<String>,
    /// `(id, kind, authenticator)` of the principal the bridge acts as.
    principal: Option<(String, String, String)>,
    schedule: Option<String>,
}

impl RoutedOrigin {
    fn of(origin: &CallOrigin) -> RoutedOrigin {
        RoutedOrigin {
            channel_id: origin.channel_id.clone(),
            continuation_key: origin.continuation_key.clone(),
            purpose: origin.purpose.clone(),
            principal: origin
                .principal
                .as_ref()
                .map(|p| (p.id.clone(), p.kind.clone(), p.authenticator.clone())),
            schedule: origin.schedule.clone(),
        }
    }

    fn into_origin(self) -> CallOrigin {
        CallOrigin {
            channel_id: self.channel_id,
            continuation_key: self.continuation_key,
            purpose: self.purpose,
            principal: self
                .principal
                .map(|(id, kind, authenticator)| CallPrincipal {
                    id,
                    kind,
                    authenticator,
                }),
            schedule: self.schedule,
            model_turn: false,
        }
    }
}

impl Routed {
    fn kind(&self) -> &'static str {
        match self {
            Routed::Message { .. } => "message",
            Routed::Stop { .. } => "stop",
            Routed::Wake { .. } => "wake",
            Routed::Decision { .. } => "decision",
            Routed::ToolCall { .. } => "tool",
        }
    }

    /// Who asked (recorded on the row).
    fn principal(&self) -> &str {
        match self {
            Routed::Message { owner, .. }
            | Routed::Stop { owner }
            | Routed::Decision { owner, .. }
            | Routed::ToolCall { owner, .. } => &owner.principal_id,
            Routed::Wake { .. } => "reminder",
        }
    }

    pub(crate) fn tool_call(
        name: &str,
        input: serde_json::Value,
        owner: &Owner,
        origin: &CallOrigin,
    ) -> Routed {
        Routed::ToolCall {
            owner: owner.clone(),
            name: name.to_owned(),
            input,
            origin: RoutedOrigin::of(origin),
        }
    }

    pub(crate) fn message(req: FollowUp) -> Routed {
        Routed::Message {
            owner: req.owner,
            message: req.message,
            continuation_token: req.continuation_token,
            admission: req.admission,
            workspace_files: req.workspace_files,
        }
    }
}

/// What applying a routed request answered, as the row's outcome stores
/// it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "camelCase")]
pub(crate) enum Outcome {
    #[serde(rename_all = "camelCase")]
    Accepted {
        session_id: String,
        continuation_token: String,
        coalesced: bool,
        start_index: u64,
    },
    #[serde(rename_all = "camelCase")]
    Stopped { interrupted: bool },
    #[serde(rename_all = "camelCase")]
    Resolved {
        call_id: String,
        approved: bool,
        by: String,
        resumed: bool,
    },
    #[serde(rename_all = "camelCase")]
    Called { call: ToolCallOutcome },
    #[serde(rename_all = "camelCase")]
    Failed {
        status: u16,
        code: ErrorCode,
        message: String,
    },
}

impl Outcome {
    fn failed(e: &Error) -> Outcome {
        Outcome::Failed {
            status: e.status(),
            code: e.code(),
            message: e.to_string(),
        }
    }

    fn unexpected(&self) -> Error {
        Error::NotAvailable {
            message: format!("the host running the session answered an unexpected {self:?}"),
        }
    }

    fn or_failed(self) -> Result<Outcome> {
        match self {
            Outcome::Failed {
                status,
                code,
                message,
            } => Err(Error::Routed {
                status,
                code,
                message,
            }),
            other => Ok(other),
        }
    }

    pub(crate) fn into_accepted(self) -> Result<Accepted> {
        match self.or_failed()? {
            Outcome::Accepted {
                session_id,
                continuation_token,
                coalesced,
                start_index,
            } => Ok(Accepted {
                session_id,
                continuation_token,
                is_new: false,
                coalesced,
                start_index,
            }),
            other => Err(other.unexpected()),
        }
    }

    pub(crate) fn into_stopped(self) -> Result<bool> {
        match self.or_failed()? {
            Outcome::Stopped { interrupted } => Ok(interrupted),
            other => Err(other.unexpected()),
        }
    }

    pub(crate) fn into_called(self) -> Result<ToolCallOutcome> {
        match self.or_failed()? {
            Outcome::Called { call } => Ok(call),
            other => Err(other.unexpected()),
        }
    }

    pub(crate) fn into_resolved(self) -> Result<ResolvedApproval> {
        match self.or_failed()? {
            Outcome::Resolved {
                call_id,
                approved,
                by,
                resumed,
            } => Ok(ResolvedApproval {
                call_id,
                decision: if approved { "approve" } else { "deny" },
                by,
                resumed,
            }),
            other => Err(other.unexpected()),
        }
    }
}

/// Is this the error of a session another live host holds?
pub(crate) fn held_elsewhere<T>(result: &Result<T>) -> bool {
    matches!(result, Err(Error::Shared(agentkit_pg::Error::Busy { .. })))
}

impl AgentRuntime {
    /// Applies the requests other hosts route to this one, until shutdown.
    pub(crate) fn start_mailbox(&self) {
        let Some(shared) = self.inner.shared.clone() else {
            return;
        };
        let runtime = self.downgrade();
        let shutdown = self.shutdown_token();
        let mut signals = shared.mailbox.signals();
        tokio::spawn(async move {
            let mut purged = Instant::now();
            loop {
                let wake = tokio::select! {
                    _ = tokio::time::sleep(DRAIN_EVERY) => true,
                    signal = signals.recv() => match signal {
                        Ok(MailSignal::Posted { agent, .. }) => agent == shared.agent,
                        Ok(MailSignal::Missed) | Err(broadcast::error::RecvError::Lagged(_)) => true,
                        Ok(MailSignal::Done { .. }) => false,
                        Err(broadcast::error::RecvError::Closed) => return,
                    },
                    _ = shutdown.cancelled() => return,
                };
                if !wake {
                    continue;
                }
                let Some(runtime) = runtime.upgrade() else {
                    return;
                };
                runtime.drain_mailbox().await;
                if purged.elapsed() > Duration::from_secs(600) {
                    purged = Instant::now();
                    if let Err(e) = shared.mailbox.purge(PURGE_AFTER_HOURS).await {
                        tracing::debug!(error = %e, "cannot purge the mailbox");
                    }
                }
            }
        });
    }

    /// Claims and applies what this host should: requests for sessions
    /// it holds, and for sessions no live host holds.
    async fn drain_mailbox(&self) {
        let Some(shared) = &self.inner.shared else {
            return;
        };
        let me = shared.leases.owner();
        let claimed = match shared.mailbox.claim(me, CLAIM_BATCH).await {
            Ok(claimed) => claimed,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the mailbox");
                return;
            }
        };
        for mail in claimed {
            let written = match self.apply_mail(&mail).await {
                Some(outcome) => match serde_json::to_string(&outcome) {
                    Ok(text) => shared.mailbox.finish(&mail.id, me, &text).await,
                    Err(e) => {
                        tracing::warn!(request = %mail.id, error = %e, "cannot encode an outcome");
                        continue;
                    }
                },
                None => shared.mailbox.unclaim(&mail.id, me).await,
            };
            if let Err(e) = written {
                tracing::warn!(request = %mail.id, error = %e, "cannot answer a routed request");
            }
        }
    }

    /// Applies one routed request here, as a request made to this host.
    /// `None` when another live host holds the session after all (the
    /// request goes back for it).
    async fn apply_mail(&self, mail: &Mail) -> Option<Outcome> {
        let request: Routed = match serde_json::from_str(&mail.payload) {
            Ok(request) => request,
            Err(e) => {
                return Some(Outcome::failed(&Error::BadRequest {
                    message: format!("an unreadable routed request: {e}"),
                }));
            }
        };
        tracing::debug!(request = %mail.id, session = %mail.session, kind = request.kind(), "applying a routed request");
        let id = mail.session.as_str();
        let outcome = match request {
            Routed::Message {
                owner,
                message,
                continuation_token,
                admission,
                workspace_files,
            } => {
                let follow = FollowUp {
                    owner,
                    message,
                    continuation_token,
                    admission,
                    workspace_files,
                };
                let accepted = self.follow_up_here(id, follow).await;
                if held_elsewhere(&accepted) {
                    return None;
                }
                accepted.map(|a| Outcome::Accepted {
                    session_id: a.session_id,
                    continuation_token: a.continuation_token,
                    coalesced: a.coalesced,
                    start_index: a.start_index,
                })
            }
            Routed::Stop { owner } => {
                let stopped = self.stop(id, &owner);
                if held_elsewhere(&stopped) {
                    return None;
                }
                stopped.map(|interrupted| Outcome::Stopped { interrupted })
            }
            Routed::Wake { message } => {
                let accepted = self.wake_here(id, message).await;
                if held_elsewhere(&accepted) {
                    return None;
                }
                accepted.map(|a| Outcome::Accepted {
                    session_id: a.session_id,
                    continuation_token: a.continuation_token,
                    coalesced: a.coalesced,
                    start_index: a.start_index,
                })
            }
            Routed::Decision {
                owner,
                call_id,
                decision,
            } => {
                let resolved = self
                    .resolve_approval_here(id, &call_id, decision, &owner)
                    .await;
                if held_elsewhere(&resolved) {
                    return None;
                }
                resolved.map(|r| Outcome::Resolved {
                    call_id: r.call_id,
                    approved: r.decision == "approve",
                    by: r.by,
                    resumed: r.resumed,
                })
            }
            Routed::ToolCall {
                owner,
                name,
                input,
                origin,
            } => {
                let called = self
                    .call_tool_here(&name, input, Some((id, &owner)), origin.into_origin())
                    .await;
                if held_elsewhere(&called) {
                    return None;
                }
                called.map(|call| Outcome::Called { call })
            }
        };
        Some(outcome.unwrap_or_else(|e| Outcome::failed(&e)))
    }

    /// Posts `request` for session `id` and waits for its outcome: from
    /// the host holding the session, or from this host once none does.
    pub(crate) async fn route(&self, id: &str, request: Routed) -> Result<Outcome> {
        let Some(shared) = &self.inner.shared else {
            return Err(Error::NotAvailable {
                message: "routing a request needs a shared database".into(),
            });
        };
        let mailbox = &shared.mailbox;
        let me = shared.leases.owner();
        let mail_id = new_id("mail");
        let payload = serde_json::to_string(&request).map_err(|e| Error::BadRequest {
            message: format!("cannot encode the request: {e}"),
        })?;
        // Subscribed before posting, so the answer cannot slip past.
        let mut signals = mailbox.signals();
        mailbox
            .post(
                &mail_id,
                id,
                request.kind(),
                &payload,
                request.principal(),
                me,
            )
            .await?;
        tracing::debug!(request = %mail_id, session = %id, kind = request.kind(), "routed to the host holding the session");
        let deadline = Instant::now() + ROUTE_TIMEOUT;
        loop {
            match mailbox.state(&mail_id).await? {
                MailState::Done { outcome } => return self.answered(&mail_id, &outcome).await,
                MailState::Pending => {
                    // No live host holds the session any more: apply it here.
                    if let Some(mail) = mailbox.claim_one(&mail_id, me).await? {
                        match self.apply_mail(&mail).await {
                            Some(outcome) => {
                                let _ = mailbox.forget(&mail_id).await;
                                return Ok(outcome);
                            }
                            None => mailbox.unclaim(&mail_id, me).await?,
                        }
                    }
                }
                MailState::Claimed { .. } => {}
                MailState::Gone => {
                    return Err(Error::RouteTimeout {
                        message: format!(
                            "session `{id}`: the routed request disappeared before it was applied; retry"
                        ),
                    });
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep(POLL.min(left)) => {}
                _ = done(&mut signals, &mail_id) => {}
            }
        }
        let seconds = ROUTE_TIMEOUT.as_secs();
        if mailbox.abandon(&mail_id).await? {
            let _ = mailbox.forget(&mail_id).await;
            return Err(Error::RouteTimeout {
                message: format!(
                    "session `{id}`: the host running it did not take the request within {seconds} s; it was not applied, retry"
                ),
            });
        }
        match mailbox.state(&mail_id).await? {
            MailState::Done { outcome } => self.answered(&mail_id, &outcome).await,
            MailState::Claimed { by } => Err(Error::RouteTimeout {
                message: format!(
                    "session `{id}`: host {by} took the request but did not answer within {seconds} s; it may have been applied"
                ),
            }),
            _ => Err(Error::RouteTimeout {
                message: format!(
                    "session `{id}`: no answer to the routed request within {seconds} s"
                ),
            }),
        }
    }

    /// The outcome another host wrote for request `mail_id`.
    async fn answered(&self, mail_id: &str, outcome: &str) -> Result<Outcome> {
        if let Some(shared) = &self.inner.shared {
            let _ = shared.mailbox.forget(mail_id).await;
        }
        serde_json::from_str(outcome).map_err(|e| Error::NotAvailable {
            message: format!("the host running the session answered unreadably: {e}"),
        })
    }
}

/// Returns once `id`'s outcome is announced (or the signals stop).
async fn done(signals: &mut broadcast::Receiver<MailSignal>, id: &str) {
    loop {
        match signals.recv().await {
            Ok(MailSignal::Done { id: done }) if done == id => return,
            Ok(MailSignal::Missed) | Err(broadcast::error::RecvError::Lagged(_)) => return,
            Ok(_) => {}
            Err(broadcast::error::RecvError::Closed) => {
                // Nothing will come: let the poll decide.
                std::future::pending::<()>().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn requests_and_outcomes_round_trip_as_json() {
        let owner = Owner {
            principal_id: "alice".into(),
            principal_type: "user".into(),
            authenticator: "bearer".into(),
        };
        let request = Routed::Message {
            owner,
            message: "and then?".into(),
            continuation_token: Some("http:1".into()),
            admission: Admission::Preempt,
            workspace_files: vec![("a.txt".into(), "hi".into())],
        };
        let text = serde_json::to_string(&request).unwrap();
        assert!(text.contains(r#""kind":"message""#), "{text}");
        let back: Routed = serde_json::from_str(&text).unwrap();
        assert_eq!(back.kind(), "message");
        let failed = Outcome::failed(&Error::StaleContinuation);
        let text = serde_json::to_string(&failed).unwrap();
        let back: Outcome = serde_json::from_str(&text).unwrap();
        let err = back.into_accepted().unwrap_err();
        assert_eq!(err.status(), 409);
        assert_eq!(err.code(), ErrorCode::StaleContinuation);
    }
}
