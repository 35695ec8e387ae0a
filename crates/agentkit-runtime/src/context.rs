//! What the model saw at one step of a turn, rebuilt from the log: the
//! system prompt and the tools offered (as the providers build them, for
//! the session's agent and A/B variant), and the conversation folded up to
//! that step. Nothing of it is stored per step: the prompt and catalog are
//! the same for every step of a session's agent, and the conversation is
//! a fold of events the log already holds.

use std::collections::BTreeSet;

use agentkit_protocol::api::{ContextSize, OfferedTool, StepContext};
use agentkit_protocol::{Event, EventData, EventType};

use crate::error::{Error, Result};
use crate::fold::{OpenTurn, conversation_with};
use crate::meta::Owner;
use crate::runtime::AgentRuntime;

impl AgentRuntime {
    /// The context of step `step` (1-based) of turn `turn_id`, for `owner`.
    pub async fn step_context(
        &self,
        id: &str,
        owner: &Owner,
        turn_id: &str,
        step: u32,
    ) -> Result<StepContext> {
        let events = self.events_stored(id, owner, 0).await?;
        let not_found = |what: &'static str, id: String| Error::NotFound { what, id };
        let started = events
            .iter()
            .position(|e| {
                e.event_type == EventType::TurnStarted && e.turn_id.as_deref() == Some(turn_id)
            })
            .ok_or_else(|| not_found("turn", turn_id.to_owned()))?;
        let step_started = events[started..]
            .iter()
            .position(|e| {
                e.event_type == EventType::StepStarted
                    && e.turn_id.as_deref() == Some(turn_id)
                    && e.data.get("step").and_then(serde_json::Value::as_u64)
                        == Some(u64::from(step))
            })
            .map(|i| started + i)
            .ok_or_else(|| not_found("step", format!("{turn_id}#{step}")))?;
        let received = answered(&events, started);
        let user: Vec<String> = events[..started]
            .iter()
            .filter(|e| received.contains(&e.index))
            .filter_map(|e| match e.payload() {
                EventData::MessageReceived(m) => Some(m.text),
                _ => None,
            })
            .collect();
        // One fold up to the step, as the turn saw it: this turn's
        // messages become one user message where it started, messages
        // arriving during it are for later turns, and a compaction
        // recorded before the step replaces what it summarised.
        let mut exclude = received;
        exclude.extend(
            events[started..step_started]
                .iter()
                .filter(|e| e.event_type == EventType::MessageReceived)
                .map(|e| e.index),
        );
        let open = OpenTurn {
            turn_id,
            user_text: (!user.is_empty()).then(|| user.join("\n\n")),
        };
        let conversation = conversation_with(&events[..step_started], &exclude, Some(&open));
        let agent = crate::ab::agent_for(self.agent(), &crate::ab::recorded(&events));
        let tools = self.dynamic_tools(id).await;
        let as_of = self.session(id, owner).await?.as_of;
        let (system, offered) = agentkit_harness::request_context(&agent, &tools, as_of.as_deref());
        let model = agent
            .config
            .model
            .clone()
            .or_else(|| self.inner.options.default_model.clone());
        let (conversation, estimate, trimmed) = agentkit_harness::as_sent(
            model.as_ref(),
            &agent,
            &tools,
            as_of.as_deref(),
            conversation,
            crate::fold::sizing(&events[..started]),
        );
        let tools: Vec<OfferedTool> = offered
            .into_iter()
            .map(|t| OfferedTool {
                name: t.name,
                description: t.description,
                input_schema: t.input_schema,
            })
            .collect();
        let system_chars = system.chars().count() as u64;
        let tools_chars = json_chars(&tools);
        let conversation_chars = json_chars(&conversation);
        let size = ContextSize {
            system_chars,
            tools_chars,
            conversation_chars,
            messages: conversation.len() as u64,
            approx_tokens: estimate,
            trimmed,
        };
        Ok(StepContext {
            ok: true,
            session_id: id.to_owned(),
            turn_id: turn_id.to_owned(),
            step,
            system,
            tools,
            conversation,
            size,
        })
    }
}

/// The `message.received` indices turn `started` answers: recorded on
/// `turn.started`; for logs written before that, the messages since the
/// previous turn started.
fn answered(events: &[Event], started: usize) -> BTreeSet<u64> {
    if let EventData::TurnStarted(t) = events[started].payload()
        && !t.received.is_empty()
    {
        return t.received.into_iter().collect();
    }
    let previous = events[..started]
        .iter()
        .rposition(|e| e.event_type == EventType::TurnStarted)
        .map_or(0, |i| i + 1);
    events[previous..started]
        .iter()
        .filter(|e| e.event_type == EventType::MessageReceived)
        .map(|e| e.index)
        .collect()
}

/// The length of `value`'s JSON, in characters.
fn json_chars(value: &impl serde::Serialize) -> u64 {
    serde_json::to_string(value).map_or(0, |s| s.chars().count() as u64)
}
