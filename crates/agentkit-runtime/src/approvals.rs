//! Durable approvals. A call that needs a human's decision parks inside
//! its turn (the harness asks this module's gate and records
//! `action.approval_requested`); the decision comes from
//! [`AgentRuntime::resolve_approval`].
//!
//! The pending list is read from the event log, never from memory, so a
//! parked call outlives the process: after a restart (or a shutdown) the
//! turn is recorded as interrupted but its parked calls stay listed.
//! Approving one then runs the tool, records its result under the original
//! turn, and starts a turn that resumes the conversation from the log
//! (`turn.started` with `resumes`), so the model sees the result as if it
//! had never stopped. `approval_timeout` applies to such calls too: they
//! are denied with reason "timed out" when it elapses, counted from the
//! request.

use std::collections::HashSet;
use std::sync::Arc;

use agentkit_harness::{ApprovalGate, Decision, ToolContext, ToolOutput};
use agentkit_protocol::{ActionResult, ApprovalResolved, Event, EventData, EventType, SessionId};

use crate::approval_gate::SessionGate;
use crate::error::{Error, Result};
use crate::meta::Owner;
use crate::requests::ResolvedApproval;
use crate::runtime::AgentRuntime;
use crate::util::lock;

/// A parked call, as `GET /v1/session/:id/approvals` lists it.
pub use agentkit_protocol::api::PendingApproval;

/// The requests in `events` that no decision answered yet.
pub(crate) fn pending(events: &[Event]) -> Vec<PendingApproval> {
    let mut requested = Vec::new();
    let mut resolved: HashSet<String> = HashSet::new();
    // Parse only the approval events: the others may hold large results.
    let approvals = events.iter().filter(|e| {
        matches!(
            e.event_type,
            EventType::ActionApprovalRequested | EventType::ActionApprovalResolved
        )
    });
    for e in approvals {
        match e.payload() {
            EventData::ApprovalRequested(r) => requested.push((e, r)),
            EventData::ApprovalResolved(r) => {
                resolved.insert(r.call_id);
            }
            _ => {}
        }
    }
    requested
        .into_iter()
        .filter(|(_, r)| !resolved.contains(&r.call_id))
        .map(|(e, r)| PendingApproval {
            call_id: r.call_id,
            tool_name: r.tool_name,
            input: r.input,
            turn_id: e.turn_id.clone().unwrap_or_default(),
            requested_at: e.at.clone(),
            live: false,
        })
        .collect()
}

/// Approvals, a part of the runtime: the calls parked in turns until a
/// person decides, listing them, deciding them (here or on the host whose
/// turn waits), and their timeouts. It holds the session core by
/// reference; the waiting calls (`Waiters`) are its state. Reached
/// through [`AgentRuntime::approvals`].
#[derive(Debug, Clone, Copy)]
pub struct Approvals<'a> {
    rt: &'a AgentRuntime,
}

impl AgentRuntime {
    /// The approvals of this agent's sessions.
    pub fn approvals(&self) -> Approvals<'_> {
        Approvals { rt: self }
    }
}

impl Approvals<'_> {
    /// The gate for turns of `session`.
    pub(crate) fn gate(&self, session: &SessionId) -> Arc<dyn ApprovalGate> {
        Arc::new(SessionGate {
            waiters: self.rt.inner.waiters().clone(),
            session: session.as_str().to_owned(),
        })
    }

    /// The parked calls of a session `owner` may see, oldest first.
    pub async fn pending(&self, id: &str, owner: &Owner) -> Result<Vec<PendingApproval>> {
        let session = self.rt.sessions().owned(id, owner).await?;
        self.rt.turns().ready(&session).await?;
        let parked = self.rt.turns().with_history(&session, pending).await?;
        let waiters = lock(&self.rt.inner.waiters().map);
        Ok(parked
            .into_iter()
            .map(|mut p| {
                p.live = waiters.contains_key(&(id.to_owned(), p.call_id.clone()));
                p
            })
            .collect())
    }

    /// Approves or denies a parked call. `owner` must own the session (or
    /// be an operator); the decision records `decision.by`, which for an
    /// operator deciding on someone else's session becomes
    /// `operator:<principalId>`.
    ///
    /// On a shared database, a call parked in a turn another live host is
    /// running is decided there: the decision is routed through the
    /// mailbox (`mailbox.rs`) and resolves the parked call on that host.
    pub async fn resolve(
        &self,
        id: &str,
        call_id: &str,
        decision: Decision,
        owner: &Owner,
    ) -> Result<ResolvedApproval> {
        let command = crate::session_command::SessionCommand::Decision {
            owner: owner.clone(),
            call_id: call_id.to_owned(),
            decision,
        };
        if self.rt.inner.shared.is_some() {
            self.rt.sessions().owned(id, owner).await?;
            // A call parked in a turn another host runs waits there: send
            // the decision there first rather than deciding from the log.
            let waits_here = lock(&self.rt.inner.waiters().map)
                .contains_key(&(id.to_owned(), call_id.to_owned()));
            if !waits_here && self.rt.commands().held_by_other(id).await?.is_some() {
                return self.rt.commands().route(id, command).await?.into_resolved();
            }
        }
        self.rt
            .commands()
            .dispatch(id, command)
            .await?
            .into_resolved()
    }

    /// [`resolve_approval`](Approvals::resolve_approval) on this host only (its
    /// [`SessionCommand::Decision`](crate::session_command::SessionCommand)).
    pub(crate) async fn decide(
        &self,
        id: &str,
        call_id: &str,
        mut decision: Decision,
        owner: &Owner,
    ) -> Result<ResolvedApproval> {
        let session = self.rt.sessions().owned(id, owner).await?;
        if owner.is_operator() && session.meta().owner.principal_id != owner.principal_id {
            decision.by = owner.operator_label();
        }
        self.apply_decision(id, call_id, decision).await
    }

    async fn apply_decision(
        &self,
        id: &str,
        call_id: &str,
        decision: Decision,
    ) -> Result<ResolvedApproval> {
        let (verdict, by) = (decision.as_str(), decision.by.clone());
        let answer = |resumed| ResolvedApproval {
            call_id: call_id.to_owned(),
            decision: verdict,
            by: by.clone(),
            resumed,
        };
        // A running turn waits for it: hand the decision over; the harness
        // records it and goes on.
        let key = (id.to_owned(), call_id.to_owned());
        let waiter = lock(&self.rt.inner.waiters().map).remove(&key);
        if let Some(tx) = waiter {
            let reply = answer(false);
            if tx.send(decision.clone()).is_ok() {
                return Ok(reply);
            }
        }
        // Its turn is gone: a restart (or shutdown) cut it short.
        let session = self.rt.sessions().get(id).await?;
        self.rt.turns().ready(&session).await?;
        let (parked, known, trace) = self.rt
            .turns().with_history(&session, |events| {
                let parked = pending(events).into_iter().find(|p| p.call_id == call_id);
                let known = events.iter().any(|e| {
                    e.event_type == EventType::ActionApprovalRequested
                        && matches!(e.payload(), EventData::ApprovalRequested(r) if r.call_id == call_id)
                });
                let trace = parked
                    .as_ref()
                    .and_then(|p| crate::trace::recorded(events, &p.turn_id));
                (parked, known, trace)
            })
            .await?;
        let Some(parked) = parked else {
            return Err(if known {
                Error::ApprovalResolved {
                    call_id: call_id.to_owned(),
                }
            } else {
                Error::ApprovalNotFound {
                    call_id: call_id.to_owned(),
                }
            });
        };
        let claimed = self.rt.turns().claim_idle(&session).await?;
        let guard = crate::tool_call::Release {
            runtime: self.rt,
            session: claimed,
        };
        let turn = parked.turn_id.as_str();
        self.rt
            .store()
            .append(
                &session.id,
                Some(turn),
                // The decision came after its turn ended: a reader may
                // not know when the call parked nor the turn's trace.
                EventData::ApprovalResolved(ApprovalResolved {
                    requested_at: Some(parked.requested_at.clone()),
                    trace,
                    ..agentkit_harness::approval_resolved(call_id, &parked.tool_name, &decision)
                }),
            )
            .await?;
        let started = std::time::Instant::now();
        let out = if decision.approved {
            self.run_parked(&parked, &session.id, &guard).await
        } else {
            let reason = decision.reason.as_deref().unwrap_or("no reason given");
            ToolOutput::error(format!("the call was denied by {}: {reason}", decision.by))
        };
        self.rt
            .store()
            .append(
                &session.id,
                Some(turn),
                EventData::ActionResult(ActionResult {
                    call_id: call_id.to_owned(),
                    tool_name: parked.tool_name.clone(),
                    output: out.output,
                    is_error: out.is_error,
                    duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                }),
            )
            .await?;
        // The conversation can go on once every call of that step has a
        // result: calls a restart cut short get an error result; calls
        // still parked keep it waiting.
        let (still_parked, unanswered) = self
            .rt
            .turns()
            .with_history(&session, |events| {
                (
                    pending(events).iter().any(|p| p.turn_id == turn),
                    unanswered_calls(events, turn),
                )
            })
            .await?;
        if still_parked {
            self.rt.store().sync(&session.id).await?;
            return Ok(answer(false));
        }
        for (call, tool) in unanswered {
            self.rt
                .store()
                .append(
                    &session.id,
                    Some(turn),
                    EventData::ActionResult(ActionResult {
                        call_id: call,
                        tool_name: tool,
                        output: "the call was interrupted by a restart before it finished".into(),
                        is_error: true,
                        duration_ms: 0,
                    }),
                )
                .await?;
        }
        self.rt.turns().mark_parked(&guard.session, false);
        self.rt.turns().set_resume(&guard.session, turn.to_owned());
        // Releasing starts the resuming turn.
        drop(guard);
        Ok(answer(true))
    }

    /// Runs an approved call whose turn is gone, in the session workspace.
    async fn run_parked(
        &self,
        parked: &PendingApproval,
        session: &SessionId,
        guard: &crate::tool_call::Release<'_>,
    ) -> ToolOutput {
        let tool = match self.rt.tool_calls().callable(&parked.tool_name).await {
            Ok(tool) => tool,
            Err(e) => return ToolOutput::error(e.to_string()),
        };
        if let Err(e) = self.rt.turns().ensure_workspace(&guard.session).await {
            return ToolOutput::error(e.to_string());
        }
        let meta = self.rt.session_meta(session.as_str()).await.ok();
        let ctx = ToolContext {
            progress: Default::default(),
            call_id: parked.call_id.clone(),
            session_id: session.as_str().to_owned(),
            workspace_dir: guard.session.workspace.clone(),
            cancel: guard.cancel(),
            host: self.rt.inner.host_bridge(),
            services: self.rt.inner.services_handle(),
            as_of: meta.as_ref().and_then(|m| m.as_of.clone()),
            // A parked call the model asked for, resumed after approval.
            origin: agentkit_harness::CallOrigin {
                model_turn: true,
                ..meta.as_ref().map(|m| m.call_origin()).unwrap_or_default()
            },
        };
        tool.run(&parked.input, &ctx).await
    }

    /// Denies calls parked before a restart once `approval_timeout` has
    /// passed since their request (at once if it already has).
    pub(crate) fn arm_timeouts(&self, id: &SessionId, events: &[Event]) {
        let Some(limit) = self.rt.agent().config.harness.approval_timeout else {
            return;
        };
        for parked in pending(events) {
            let waited = chrono::DateTime::parse_from_rfc3339(&parked.requested_at)
                .ok()
                .and_then(|at| {
                    (chrono::Utc::now() - at.with_timezone(&chrono::Utc))
                        .to_std()
                        .ok()
                })
                .unwrap_or_default();
            let left = limit.saturating_sub(waited);
            let runtime = self.rt.clone();
            let id = id.as_str().to_owned();
            self.rt.inner.spawn_task(async move {
                runtime.inner.sleep_or_shutdown(left).await?;
                match runtime
                    .approvals()
                    .apply_decision(&id, &parked.call_id, Decision::deny("timed out", "timeout"))
                    .await
                {
                    Ok(_) | Err(Error::ApprovalResolved { .. }) => {}
                    Err(e) => {
                        tracing::warn!(session = %id, call = %parked.call_id, error = %e, "cannot time out a parked call");
                    }
                }
                Some(())
            });
        }
    }

    /// Hands the client's results to the calls of its tools that wait in
    /// session `id`'s running turn; results for calls that do not wait
    /// (answered already, or another run's) are left out. Answers the ids
    /// of the calls it answered. `owner` must own the session.
    pub async fn answer_client(
        &self,
        id: &str,
        owner: &Owner,
        results: Vec<(String, ToolOutput)>,
    ) -> Result<Vec<String>> {
        self.rt.sessions().owned(id, owner).await?;
        let mut answered = Vec::new();
        for (call_id, output) in results {
            let key = (id.to_owned(), call_id);
            let waiter = lock(&self.rt.inner.waiters().clients).remove(&key);
            if let Some(tx) = waiter
                && tx.send(output).is_ok()
            {
                answered.push(key.1);
            }
        }
        Ok(answered)
    }

    /// The calls of client tools that wait for the client in session
    /// `id` (on this host).
    pub fn awaiting_client(&self, id: &str) -> Vec<String> {
        let mut calls: Vec<String> = lock(&self.rt.inner.waiters().clients)
            .keys()
            .filter(|(session, _)| session == id)
            .map(|(_, call)| call.clone())
            .collect();
        calls.sort();
        calls
    }

    /// After an interrupted turn (preempted or stopped, not a shutdown),
    /// its parked calls are withdrawn: they no longer wait for anyone.
    pub(crate) async fn withdraw_parked(&self, id: &SessionId, turn: &str) -> Result<()> {
        let session = self.rt.sessions().get(id.as_str()).await?;
        let all = self.rt.turns().with_history(&session, pending).await?;
        if all.iter().all(|p| p.turn_id == turn) {
            self.rt.turns().mark_parked(&session, false);
        }
        for parked in all.into_iter().filter(|p| p.turn_id == turn) {
            self.rt
                .store()
                .append(
                    id,
                    Some(turn),
                    EventData::ApprovalResolved(agentkit_harness::approval_resolved(
                        &parked.call_id,
                        &parked.tool_name,
                        &Decision::deny("turn interrupted", "system"),
                    )),
                )
                .await?;
        }
        Ok(())
    }
}

/// Calls of `turn`'s last `actions.requested` with no `action.result`.
fn unanswered_calls(events: &[Event], turn: &str) -> Vec<(String, String)> {
    let mut requested = Vec::new();
    let mut answered: HashSet<String> = HashSet::new();
    for e in events.iter().filter(|e| e.turn_id.as_deref() == Some(turn)) {
        match e.payload() {
            EventData::ActionsRequested(r) => requested = r.calls,
            EventData::ActionResult(r) => {
                answered.insert(r.call_id);
            }
            _ => {}
        }
    }
    requested
        .into_iter()
        .filter(|c| !answered.contains(&c.call_id))
        .map(|c| (c.call_id, c.tool_name))
        .collect()
}
