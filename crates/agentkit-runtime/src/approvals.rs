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
//!
//! Calls of tools a client declared wait at the same gate, for the
//! client's result (`actions.client_requested`), and are as durable: the
//! waiting ones are read from the log (`waiting_client`), a result for
//! one whose turn is gone is recorded under that turn and resumes the
//! conversation in the same way, and `approval_timeout` answers them with
//! an error result. A result reaches the host running the turn through
//! the one command path (`SessionCommand::ClientResults`).

use std::collections::HashSet;
use std::sync::Arc;

use agentkit_harness::{ApprovalGate, Decision, ToolContext, ToolOutput};
use agentkit_protocol::api::{ClientResult, WaitingClientCall};
use agentkit_protocol::{ActionResult, ApprovalResolved, Event, EventData, EventType, SessionId};

use crate::approval_gate::SessionGate;
use crate::error::{Error, Result};
use crate::meta::Owner;
use crate::requests::{AnsweredClient, ResolvedApproval};
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

/// The calls of client tools in `events` whose result has not come,
/// oldest first (`actions.client_requested` with no `action.result`).
pub(crate) fn waiting_client(events: &[Event]) -> Vec<WaitingClientCall> {
    let mut requested: Vec<WaitingClientCall> = Vec::new();
    let mut turns: HashSet<&str> = HashSet::new();
    for e in events
        .iter()
        .filter(|e| e.event_type == EventType::ActionsClientRequested)
    {
        if let EventData::ClientActionsRequested(r) = e.payload() {
            turns.insert(e.turn_id.as_deref().unwrap_or_default());
            requested.extend(r.calls.into_iter().map(|c| WaitingClientCall {
                call_id: c.call_id,
                tool_name: c.tool_name,
                input: c.input,
                turn_id: e.turn_id.clone().unwrap_or_default(),
                requested_at: e.at.clone(),
                live: false,
            }));
        }
    }
    if requested.is_empty() {
        return requested;
    }
    // Parse only the results of turns that asked the client.
    let mut answered: HashSet<String> = HashSet::new();
    for e in events.iter().filter(|e| {
        e.event_type == EventType::ActionResult
            && turns.contains(e.turn_id.as_deref().unwrap_or_default())
    }) {
        if let EventData::ActionResult(r) = e.payload() {
            answered.insert(r.call_id);
        }
    }
    requested.retain(|c| !answered.contains(&c.call_id));
    requested
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
        let resumed = self.resume_when_answered(&session, guard, turn).await?;
        Ok(answer(resumed))
    }

    /// After a call of `turn` (a turn that has ended) got its result:
    /// once no call of the turn waits any more (for a decision or for the
    /// client), calls a restart cut short get an error result and a new
    /// turn resumes the conversation when `guard` is released. Answers
    /// whether it resumes.
    async fn resume_when_answered(
        &self,
        session: &Arc<crate::session::Session>,
        guard: crate::tool_call::Release<'_>,
        turn: &str,
    ) -> Result<bool> {
        let (still_waiting, unanswered, any_waiting) = self
            .rt
            .turns()
            .with_history(session, |events| {
                let parked = pending(events);
                let client = waiting_client(events);
                (
                    parked.iter().any(|p| p.turn_id == turn)
                        || client.iter().any(|c| c.turn_id == turn),
                    unanswered_calls(events, turn),
                    !parked.is_empty() || !client.is_empty(),
                )
            })
            .await?;
        if still_waiting {
            self.rt.store().sync(&session.id).await?;
            return Ok(false);
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
        if !any_waiting {
            self.rt.turns().mark_parked(&guard.session, false);
        }
        self.rt.turns().set_resume(&guard.session, turn.to_owned());
        // Releasing starts the resuming turn.
        drop(guard);
        Ok(true)
    }

    /// Runs an approved call whose turn is gone, in the session workspace.
    async fn run_parked(
        &self,
        parked: &PendingApproval,
        session: &SessionId,
        guard: &crate::tool_call::Release<'_>,
    ) -> ToolOutput {
        // Replaying a stored session: its recorded result, as in a turn.
        if let Some(agentkit_harness::Cassette::Session(recorded)) =
            &self.rt.inner.options.providers.cassette
            && let Some(out) = recorded.result(&parked.tool_name, &parked.input)
        {
            return out;
        }
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
            let left = limit.saturating_sub(waited_since(&parked.requested_at));
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
        // Calls that waited for the client: the harness's own bound on
        // the wait, kept across the restart.
        for waiting in waiting_client(events) {
            let left = limit.saturating_sub(waited_since(&waiting.requested_at));
            let runtime = self.rt.clone();
            let id = id.as_str().to_owned();
            self.rt.inner.spawn_task(async move {
                runtime.inner.sleep_or_shutdown(left).await?;
                let out = ClientResult {
                    call_id: waiting.call_id.clone(),
                    output: format!(
                        "the client did not answer within approval_timeout ({limit:?})"
                    )
                    .into(),
                    is_error: true,
                };
                match runtime.approvals().apply_client_results(&id, vec![out]).await {
                    Ok(_) | Err(Error::ClientCallNotWaiting { .. }) => {}
                    Err(e) => {
                        tracing::warn!(session = %id, call = %waiting.call_id, error = %e, "cannot time out a call waiting for the client");
                    }
                }
                Some(())
            });
        }
    }

    /// Hands the client's results to the calls of its tools that wait in
    /// session `id`: to its running turn, or, when a restart (or a
    /// shutdown) cut that turn short, under the turn that asked, and a
    /// new turn resumes the conversation once none of its calls waits.
    /// `owner` must own the session. A result for a call that does not
    /// wait (answered already, withdrawn, or never asked) is refused and
    /// nothing is answered.
    ///
    /// On a shared database, calls waiting in a turn another live host is
    /// running are answered there: the results are routed through the
    /// mailbox (`mailbox.rs`), as a decision is.
    pub async fn answer_client(
        &self,
        id: &str,
        owner: &Owner,
        results: Vec<(String, ToolOutput)>,
    ) -> Result<AnsweredClient> {
        let results: Vec<ClientResult> = results
            .into_iter()
            .map(|(call_id, out)| ClientResult {
                call_id,
                output: out.output,
                is_error: out.is_error,
            })
            .collect();
        if self.rt.inner.shared.is_some() {
            self.rt.sessions().owned(id, owner).await?;
            let waits_here = {
                let clients = lock(&self.rt.inner.waiters().clients);
                results
                    .iter()
                    .any(|r| clients.contains_key(&(id.to_owned(), r.call_id.clone())))
            };
            let command = crate::session_command::SessionCommand::ClientResults {
                owner: owner.clone(),
                results: results.clone(),
            };
            if !waits_here && self.rt.commands().held_by_other(id).await?.is_some() {
                return self.rt.commands().route(id, command).await?.into_answered();
            }
        }
        let command = crate::session_command::SessionCommand::ClientResults {
            owner: owner.clone(),
            results,
        };
        self.rt
            .commands()
            .dispatch(id, command)
            .await?
            .into_answered()
    }

    /// [`answer_client`](Approvals::answer_client) on this host only (its
    /// [`SessionCommand::ClientResults`](crate::session_command::SessionCommand)).
    pub(crate) async fn answer_here(
        &self,
        id: &str,
        owner: &Owner,
        results: Vec<ClientResult>,
    ) -> Result<AnsweredClient> {
        self.rt.sessions().owned(id, owner).await?;
        self.apply_client_results(id, results).await
    }

    async fn apply_client_results(
        &self,
        id: &str,
        results: Vec<ClientResult>,
    ) -> Result<AnsweredClient> {
        let session = self.rt.sessions().get(id).await?;
        self.rt.turns().ready(&session).await?;
        let logged = self
            .rt
            .turns()
            .with_history(&session, waiting_client)
            .await?;
        // Every result must answer a call that waits, live or in the log.
        {
            let clients = lock(&self.rt.inner.waiters().clients);
            if let Some(stray) = results.iter().find(|r| {
                !clients.contains_key(&(id.to_owned(), r.call_id.clone()))
                    && !logged.iter().any(|c| c.call_id == r.call_id)
            }) {
                return Err(Error::ClientCallNotWaiting {
                    call_id: stray.call_id.clone(),
                });
            }
        }
        let mut answered = Vec::new();
        let mut rest = Vec::new();
        for r in results {
            let key = (id.to_owned(), r.call_id.clone());
            let waiter = lock(&self.rt.inner.waiters().clients).remove(&key);
            let out = ToolOutput {
                output: r.output,
                is_error: r.is_error,
            };
            match waiter.map(|tx| tx.send(out.clone())) {
                Some(Ok(())) => answered.push(r.call_id),
                _ => rest.push((r.call_id, out)),
            }
        }
        if rest.is_empty() {
            return Ok(AnsweredClient {
                answered,
                resumed: false,
            });
        }
        // Their turn is gone: a restart (or shutdown) cut it short. The
        // results go under the turn that asked.
        let claimed = self.rt.turns().claim_idle(&session).await?;
        let guard = crate::tool_call::Release {
            runtime: self.rt,
            session: claimed,
        };
        let mut turn = String::new();
        for (call_id, out) in rest {
            let Some(call) = logged.iter().find(|c| c.call_id == call_id) else {
                continue;
            };
            turn.clone_from(&call.turn_id);
            self.rt
                .store()
                .append(
                    &session.id,
                    Some(&call.turn_id),
                    EventData::ActionResult(ActionResult {
                        call_id: call_id.clone(),
                        tool_name: call.tool_name.clone(),
                        output: out.output,
                        is_error: out.is_error,
                        duration_ms: 0,
                    }),
                )
                .await?;
            answered.push(call_id);
        }
        let resumed = self.resume_when_answered(&session, guard, &turn).await?;
        Ok(AnsweredClient { answered, resumed })
    }

    /// The calls of client tools that wait for the client in session
    /// `id` (in a turn running on any host, or left by a restart), oldest
    /// first. `owner` must own the session.
    pub async fn awaiting_client(&self, id: &str, owner: &Owner) -> Result<Vec<WaitingClientCall>> {
        let session = self.rt.sessions().owned(id, owner).await?;
        self.rt.turns().ready(&session).await?;
        let mut calls = self
            .rt
            .turns()
            .with_history(&session, waiting_client)
            .await?;
        let clients = lock(&self.rt.inner.waiters().clients);
        for c in &mut calls {
            c.live = clients.contains_key(&(id.to_owned(), c.call_id.clone()));
        }
        Ok(calls)
    }

    /// Withdraws the calls of client tools that a turn other than
    /// `except` left waiting (a restart cut it short): a new message
    /// answered them, as a follow-up preempts a waiting turn. Each gets an
    /// error result under its turn.
    pub(crate) async fn withdraw_client_calls(
        &self,
        session: &Arc<crate::session::Session>,
        except: &str,
    ) -> Result<()> {
        let left = self
            .rt
            .turns()
            .with_history(session, waiting_client)
            .await?;
        for call in left.into_iter().filter(|c| c.turn_id != except) {
            self.rt
                .turns()
                .append(
                    &session.id,
                    Some(&call.turn_id),
                    EventData::ActionResult(ActionResult {
                        call_id: call.call_id,
                        tool_name: call.tool_name,
                        output: format!(
                            "the client's result never came: turn `{except}` answered a newer message instead"
                        )
                        .into(),
                        is_error: true,
                        duration_ms: 0,
                    }),
                )
                .await?;
        }
        Ok(())
    }

    /// After an interrupted turn (preempted or stopped, not a shutdown),
    /// its parked calls are withdrawn: they no longer wait for anyone.
    pub(crate) async fn withdraw_parked(&self, id: &SessionId, turn: &str) -> Result<()> {
        let session = self.rt.sessions().get(id.as_str()).await?;
        let (all, client) = self
            .rt
            .turns()
            .with_history(&session, |events| (pending(events), waiting_client(events)))
            .await?;
        if all.iter().all(|p| p.turn_id == turn) && client.iter().all(|c| c.turn_id == turn) {
            self.rt.turns().mark_parked(&session, false);
        }
        for call in client.into_iter().filter(|c| c.turn_id == turn) {
            self.rt
                .store()
                .append(
                    id,
                    Some(turn),
                    EventData::ActionResult(ActionResult {
                        call_id: call.call_id,
                        tool_name: call.tool_name,
                        output: "the wait for the client's result was withdrawn: the turn was interrupted".into(),
                        is_error: true,
                        duration_ms: 0,
                    }),
                )
                .await?;
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

/// How long ago `at` (RFC 3339) was; zero when it does not parse.
fn waited_since(at: &str) -> std::time::Duration {
    chrono::DateTime::parse_from_rfc3339(at)
        .ok()
        .and_then(|at| {
            (chrono::Utc::now() - at.with_timezone(&chrono::Utc))
                .to_std()
                .ok()
        })
        .unwrap_or_default()
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
