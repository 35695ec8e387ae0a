//! Requests for a session another host is running, routed to it through
//! the shared store's mailbox (`agentkit_store::SharedMailbox`): a follow-up, a
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

use agentkit_store::{Mail, MailSignal, MailState};
use tokio::sync::broadcast;

use crate::dispatch::Commands;
use crate::error::{Error, Result};
use crate::session_command::{Outcome, SessionCommand, held_elsewhere};
use crate::util::new_id;

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

impl Commands<'_> {
    /// Applies the requests other hosts route to this one, until shutdown.
    pub(crate) fn start_mailbox(&self) {
        let Some(shared) = self.rt.inner.shared.clone() else {
            return;
        };
        let runtime = self.rt.downgrade();
        let shutdown = self.rt.shutdown_token();
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
                runtime.commands().drain_mailbox().await;
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
        let Some(shared) = &self.rt.inner.shared else {
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
        let command: SessionCommand = match serde_json::from_str(&mail.payload) {
            Ok(command) => command,
            Err(e) => {
                return Some(Outcome::failed(&Error::BadRequest {
                    message: format!("an unreadable routed request: {e}"),
                }));
            }
        };
        tracing::debug!(request = %mail.id, session = %mail.session, kind = command.kind(), "applying a routed request");
        let applied = self.apply(mail.session.as_str(), command).await;
        if held_elsewhere(&applied) {
            return None;
        }
        Some(applied.unwrap_or_else(|e| Outcome::failed(&e)))
    }

    /// Posts `request` for session `id` and waits for its outcome: from
    /// the host holding the session, or from this host once none does.
    pub(crate) async fn route(&self, id: &str, request: SessionCommand) -> Result<Outcome> {
        let Some(shared) = &self.rt.inner.shared else {
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
        if let Some(shared) = &self.rt.inner.shared {
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
