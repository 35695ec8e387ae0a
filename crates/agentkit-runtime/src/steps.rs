//! The step view: a session's model steps listed from its log, and the
//! provider request of any one of them rebuilt as it was sent (the
//! provider's own body builder over the conversation the turn sent, after
//! compaction, calibration and A/B overrides), with its tokens by part
//! and what changed since the step before. Nothing is stored per step:
//! the log already holds everything the request was made of.

use agentkit_protocol::api::{
    CassetteFile, STEP_DIFF_MAX, SessionCassette, StepList, StepRequestView, StepSummary,
    TokenBreakdown, json_changes,
};
use agentkit_protocol::{Event, EventData, EventType, Message};

use crate::context::{Rebuilt, before_compaction, rebuild};
use crate::error::{Error, Result};
use crate::meta::Owner;
use crate::runtime::AgentRuntime;
use agentkit_harness::Asked;

/// The step view of an agent's sessions. Reached through
/// [`AgentRuntime::steps`].
#[derive(Debug, Clone, Copy)]
pub struct Steps<'a> {
    rt: &'a AgentRuntime,
}

impl AgentRuntime {
    /// The step view (`GET …/steps`, `GET …/steps/:step/request`).
    pub fn steps(&self) -> Steps<'_> {
        Steps { rt: self }
    }
}

impl Steps<'_> {
    /// What the model was sent at step `step` (1-based) of turn
    /// `turn_id`: the system prompt, the tools offered and the folded
    /// conversation, with their size (`GET …/context`).
    pub async fn context(
        &self,
        id: &str,
        owner: &Owner,
        turn_id: &str,
        step: u32,
    ) -> Result<agentkit_protocol::api::StepContext> {
        crate::context::step_context(self.rt, id, owner, turn_id, step).await
    }

    /// The model steps of session `id`, for `owner`, in log order.
    pub async fn list(&self, id: &str, owner: &Owner) -> Result<StepList> {
        let events = self.rt.events_stored(id, owner, 0).await?;
        Ok(StepList {
            ok: true,
            session_id: id.to_owned(),
            steps: summaries(&events),
        })
    }

    /// Step `step` (1-based in the session) of session `id`: its request
    /// as sent, its tokens by part, and the changes from the step before.
    pub async fn request(&self, id: &str, owner: &Owner, step: u64) -> Result<StepRequestView> {
        let events = self.rt.events_stored(id, owner, 0).await?;
        let steps = summaries(&events);
        let at = |n: u64| {
            usize::try_from(n)
                .ok()
                .and_then(|n| n.checked_sub(1))
                .and_then(|i| steps.get(i))
        };
        let summary = at(step).cloned().ok_or_else(|| Error::NotFound {
            what: "step",
            id: format!("{id}#{step} (the session has {} steps)", steps.len()),
        })?;
        let this = rebuild(
            self.rt,
            id,
            owner,
            &events,
            &summary.turn_id,
            summary.turn_step,
        )
        .await?;
        let body = wire_body(&this)?;
        let diff = match step.checked_sub(1).and_then(at) {
            Some(previous) => {
                let before = rebuild(
                    self.rt,
                    id,
                    owner,
                    &events,
                    &previous.turn_id,
                    previous.turn_step,
                )
                .await?;
                let before =
                    wire_body(&before)?.unwrap_or_else(|| conversation_value(&before.conversation));
                let after = body
                    .clone()
                    .unwrap_or_else(|| conversation_value(&this.conversation));
                Some(json_changes(&before, &after, STEP_DIFF_MAX))
            }
            None => None,
        };
        let tokens = breakdown(&this, &summary);
        Ok(StepRequestView {
            ok: true,
            session_id: id.to_owned(),
            request_model: this
                .model
                .as_ref()
                .map(|m| format!("{}:{}", m.provider.as_str(), m.id)),
            summary,
            body,
            tokens,
            diff_truncated: diff.as_ref().is_some_and(|(_, more)| *more),
            diff: diff.map(|(changes, _)| changes),
        })
    }
}

impl Steps<'_> {
    /// The cassette of session `id`: for each of its model calls (its
    /// steps, its compactions' summary requests, its one-step subagents'
    /// steps), the recording (`agentkit eval --replay` format) that
    /// answers that call's request, rebuilt from the log, with the answer
    /// the log recorded. `compactions` counts the summary requests it
    /// could not rebuild.
    pub async fn cassette(&self, id: &str, owner: &Owner) -> Result<SessionCassette> {
        let events = self.rt.events_stored(id, owner, 0).await?;
        let log = agentkit_harness::recorded_log(&events);
        let mut files = Vec::new();
        let mut compactions = 0;
        let mut unsupported = log.unsupported;
        for logged in &log.answers {
            match &logged.asked {
                Asked::Step { turn_id, step } => {
                    let this = rebuild(self.rt, id, owner, &events, turn_id, *step).await?;
                    let Some(model) = &this.model else {
                        continue;
                    };
                    let (name, exchange) = agentkit_harness::recorded_exchange(
                        model,
                        &this.agent,
                        &this.tools,
                        &this.conversation,
                        this.as_of.as_deref(),
                        &logged.answer,
                    );
                    files.push(CassetteFile { name, exchange });
                }
                Asked::Compaction {
                    turn_id,
                    index,
                    messages,
                } => {
                    let before =
                        before_compaction(self.rt, id, owner, &events, turn_id, *index).await?;
                    let Some((model, before)) =
                        before.and_then(|b| b.model.clone().map(|m| (m, b)))
                    else {
                        compactions += 1;
                        continue;
                    };
                    let (name, exchange) = agentkit_harness::recorded_summary(
                        &model,
                        &before.agent.dir,
                        &before.conversation,
                        *messages,
                        &logged.answer,
                    );
                    files.push(CassetteFile { name, exchange });
                }
                Asked::Subagent {
                    turn_id,
                    subagent,
                    prompt,
                } => {
                    // The subagent runs as the parent's agent does at its
                    // turn's first step, with the parent's own tools.
                    let parent = rebuild(self.rt, id, owner, &events, turn_id, 1).await?;
                    let child = parent
                        .model
                        .as_ref()
                        .and_then(|m| agentkit_harness::subagent_agent(&parent.agent, m, subagent));
                    let Some((child, model)) = child else {
                        unsupported.get_or_insert_with(|| {
                            format!("subagent `{subagent}` is not in the project any more")
                        });
                        continue;
                    };
                    let tools =
                        agentkit_harness::with_client_tools(&self.rt.dynamic_tools(id).await, &[]);
                    let (name, exchange) = agentkit_harness::recorded_exchange(
                        &model,
                        &std::sync::Arc::new(child),
                        &tools,
                        &[Message::user(prompt.clone())],
                        parent.as_of.as_deref(),
                        &logged.answer,
                    );
                    files.push(CassetteFile { name, exchange });
                }
            }
        }
        Ok(SessionCassette {
            ok: true,
            session_id: id.to_owned(),
            files,
            compactions,
            unsupported,
        })
    }
}

/// The steps of a log: each `step.started` (a subagent's steps are
/// `subagent.step` and not listed), filled in by its `step.completed`.
pub(crate) fn summaries(events: &[Event]) -> Vec<StepSummary> {
    let mut out: Vec<StepSummary> = Vec::new();
    for e in events {
        match e.event_type {
            EventType::StepStarted => {
                let Some(turn_id) = e.turn_id.clone() else {
                    continue;
                };
                let turn_step = match e.payload() {
                    EventData::StepStarted(s) => s.step,
                    _ => continue,
                };
                out.push(StepSummary {
                    step: out.len() as u64 + 1,
                    turn_id,
                    turn_step,
                    index: e.index,
                    model: None,
                    usage: None,
                    cost_usd: None,
                });
            }
            EventType::StepCompleted => {
                let EventData::StepCompleted(done) = e.payload() else {
                    continue;
                };
                let open = out
                    .iter_mut()
                    .rev()
                    .find(|s| Some(&s.turn_id) == e.turn_id.as_ref() && s.turn_step == done.step);
                if let Some(s) = open {
                    s.model = done.model;
                    s.usage = done.usage;
                    s.cost_usd = done.cost_usd;
                }
            }
            _ => {}
        }
    }
    out
}

/// The provider's body for a rebuilt step (`None` for a model that
/// sends none), with the images its messages and tool results name read
/// back from the workspace as the turn read them.
fn wire_body(step: &Rebuilt) -> Result<Option<serde_json::Value>> {
    let Some(model) = &step.model else {
        return Ok(None);
    };
    let hydrated = agentkit_harness::hydrate_images(&step.workspace, &step.conversation);
    agentkit_harness::wire_request(
        model,
        &step.agent,
        &step.tools,
        hydrated.as_deref().unwrap_or(&step.conversation),
        step.as_of.as_deref(),
    )
    .map_err(|message| Error::BadRequest {
        message: format!("cannot rebuild the step's request: {message}"),
    })
}

/// What is compared for a model that sends no request: the conversation.
fn conversation_value(conversation: &[Message]) -> serde_json::Value {
    serde_json::to_value(conversation).unwrap_or_default()
}

/// The request's estimated tokens by part, and what the provider counted.
fn breakdown(step: &Rebuilt, summary: &StepSummary) -> TokenBreakdown {
    let (system, tools) =
        agentkit_harness::fixed_breakdown(&step.agent, &step.tools, step.as_of.as_deref());
    let last_user = step
        .conversation
        .iter()
        .rposition(|m| matches!(m, Message::User { .. }));
    let (mut history, mut tool_results, mut new_message) = (0, 0, 0);
    for (i, m) in step.conversation.iter().enumerate() {
        let n = agentkit_harness::message_tokens(m);
        match m {
            Message::Tool { .. } => tool_results += n,
            _ if Some(i) == last_user => new_message += n,
            _ => history += n,
        }
    }
    let counted_input = summary.usage.as_ref().map(|u| u.input_tokens);
    TokenBreakdown {
        system,
        tools,
        history,
        tool_results,
        new_message,
        estimated_total: step.estimate,
        counted_input,
        counted_cache_read: summary.usage.as_ref().map(|u| u.cache_read_tokens),
        counted_cache_write: summary.usage.as_ref().map(|u| u.cache_write_tokens),
        trimmed: step.trimmed,
    }
}
