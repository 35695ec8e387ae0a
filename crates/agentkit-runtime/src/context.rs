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

/// A step's request as the turn built it, before a provider's wire
/// format: the agent it ran as, its model, the extra tools, the frozen
/// instant and the conversation as sent.
pub(crate) struct Rebuilt {
    pub(crate) agent: std::sync::Arc<agentkit_manifest::Agent>,
    pub(crate) model: Option<agentkit_manifest::ModelSpec>,
    pub(crate) tools: Vec<std::sync::Arc<dyn agentkit_harness::DynTool>>,
    pub(crate) as_of: Option<String>,
    pub(crate) conversation: Vec<agentkit_protocol::Message>,
    pub(crate) estimate: u64,
    pub(crate) trimmed: bool,
    /// The session's workspace on this host, where the images the
    /// conversation names are read back from for the wire body.
    pub(crate) workspace: std::path::PathBuf,
}

/// Step `step` of turn `turn_id` of `events` (session `id`), rebuilt as
/// the turn sent it: the fold up to the step (compaction included), the
/// session's A/B variant and output schema, trimming with the
/// calibration its earlier turns gave.
pub(crate) async fn rebuild(
    rt: &AgentRuntime,
    id: &str,
    owner: &Owner,
    events: &[Event],
    turn_id: &str,
    step: u32,
) -> Result<Rebuilt> {
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
                && e.data.get("step").and_then(serde_json::Value::as_u64) == Some(u64::from(step))
        })
        .map(|i| started + i)
        .ok_or_else(|| not_found("step", format!("{turn_id}#{step}")))?;
    rebuild_until(rt, id, owner, events, started, step_started, true).await
}

/// The conversation turn `turn_id` held just before the compaction
/// logged at event `index` (what its summary request folded), with the
/// agent, model and tools of the turn; `None` when no compaction of the
/// turn is logged there.
pub(crate) async fn before_compaction(
    rt: &AgentRuntime,
    id: &str,
    owner: &Owner,
    events: &[Event],
    turn_id: &str,
    index: u64,
) -> Result<Option<Rebuilt>> {
    let started = events.iter().position(|e| {
        e.event_type == EventType::TurnStarted && e.turn_id.as_deref() == Some(turn_id)
    });
    let at = events.iter().position(|e| {
        e.index == index
            && e.event_type == EventType::ContextCompacted
            && e.turn_id.as_deref() == Some(turn_id)
    });
    match (started, at) {
        (Some(started), Some(at)) if started < at => Ok(Some(
            rebuild_until(rt, id, owner, events, started, at, false).await?,
        )),
        _ => Ok(None),
    }
}

/// The turn started at `events[started]`, folded up to `events[until]`
/// (excluded); `as_sent`: trimmed as a step's request is (else the
/// conversation as the turn held it).
async fn rebuild_until(
    rt: &AgentRuntime,
    id: &str,
    owner: &Owner,
    events: &[Event],
    started: usize,
    until: usize,
    as_sent: bool,
) -> Result<Rebuilt> {
    let turn_id = events[started].turn_id.as_deref().unwrap_or_default();
    let step_started = until;
    let received = answered(events, started);
    let messages: Vec<agentkit_protocol::MessageReceived> = events[..started]
        .iter()
        .filter(|e| received.contains(&e.index))
        .filter_map(|e| match e.payload() {
            EventData::MessageReceived(m) => Some(m),
            _ => None,
        })
        .collect();
    // The client's tools of the turn's messages, as the turn offered them
    // (a later message's declaration of a name wins).
    // A resumed turn offered those of the turn it resumes.
    let mut client_tools: Vec<agentkit_protocol::ClientTool> = if messages.is_empty() {
        crate::fold::resumed_client_tools(events, turn_id)
    } else {
        Vec::new()
    };
    for tool in messages.iter().flat_map(|m| m.client_tools.iter()) {
        client_tools.retain(|t| t.name != tool.name);
        client_tools.push(tool.clone());
    }
    let user_images: Vec<agentkit_protocol::ImageRef> =
        messages.iter().flat_map(|m| m.images.clone()).collect();
    let user: Vec<String> = messages.into_iter().map(|m| m.text).collect();
    // What the turn left out of its history: its own messages, those
    // recorded after its newest one (waiting for the next turn, as the
    // worker leaves them out) and those that came while it ran.
    let newest = received.last().copied();
    let mut exclude = received;
    exclude.extend(
        events[..step_started]
            .iter()
            .filter(|e| e.event_type == EventType::MessageReceived)
            .filter(|e| newest.is_some_and(|n| e.index > n) || e.index > events[started].index)
            .map(|e| e.index),
    );
    let open = OpenTurn {
        turn_id,
        user_text: (!user.is_empty()).then(|| user.join("\n\n")),
        user_images,
    };
    let conversation = conversation_with(&events[..step_started], &exclude, Some(&open));
    let mut agent = crate::ab::agent_for(rt.agent(), &crate::ab::recorded(events));
    let meta = rt.session(id, owner).await?;
    if let Some(schema) = meta.output_schema {
        let mut own = (*agent).clone();
        own.config.output_schema = Some(schema);
        agent = std::sync::Arc::new(own);
    }
    let tools = agentkit_harness::with_client_tools(&rt.dynamic_tools(id).await, &client_tools);
    let workspace = rt.sessions().get(id).await?.workspace.clone();
    let model = agent
        .config
        .model
        .clone()
        .or_else(|| rt.inner.options.default_model.clone());
    let (conversation, estimate, trimmed) = if as_sent {
        agentkit_harness::as_sent(
            model.as_ref(),
            &agent,
            &tools,
            meta.as_of.as_deref(),
            conversation,
            crate::fold::sizing(&events[..started]),
        )
    } else {
        (conversation, 0, false)
    };
    Ok(Rebuilt {
        agent,
        model,
        tools,
        as_of: meta.as_of,
        conversation,
        estimate,
        trimmed,
        workspace,
    })
}

/// The context of step `step` (1-based) of turn `turn_id` of session
/// `id`, for `owner` (`Steps::context`).
pub(crate) async fn step_context(
    rt: &AgentRuntime,
    id: &str,
    owner: &Owner,
    turn_id: &str,
    step: u32,
) -> Result<StepContext> {
    let events = rt.events_stored(id, owner, 0).await?;
    let Rebuilt {
        agent,
        tools,
        as_of,
        conversation,
        estimate,
        trimmed,
        ..
    } = rebuild(rt, id, owner, &events, turn_id, step).await?;
    let (system, offered) = agentkit_harness::request_context(&agent, &tools, as_of.as_deref());
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
