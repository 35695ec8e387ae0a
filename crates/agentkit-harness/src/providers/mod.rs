//! Model providers: what answers one step of a turn.
//!
//! A provider gets the conversation so far and streams one step into a
//! [`StepSink`] (reasoning and text deltas), returning the step's tool
//! calls and usage. `test` and `scripted:<file>` run offline; `openai`
//! speaks the Chat Completions API (OpenAI or a compatible server);
//! `anthropic` streams from the Anthropic Messages API. Both remote
//! providers sit on one HTTP layer ([`http`]: a shared client, one retry
//! policy, one SSE parser in [`sse`], messages without secrets).

mod anthropic;
mod cassette;
mod http;
mod openai;
pub(crate) mod recorded;
mod scripted;
mod sse;
mod test_model;

use std::sync::Arc;

use agentkit_manifest::{Agent, ModelSpec, Provider};
use agentkit_protocol::{Message, ToolCall, Usage};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::credentials::ProviderConfig;
use crate::step::StepEvent;

pub(crate) use cassette::TurnDigests;
pub use cassette::{Cassette, recorded_exchange, recorded_summary};
pub use recorded::{
    Asked, LoggedAnswer, RecordedAnswer, RecordedLog, RecordedResult, RecordedSession,
    RecordedToolCall, recorded_log,
};
pub(crate) use scripted::Script;

/// The model of one turn, ready to answer steps.
#[derive(Debug)]
pub(crate) enum Model {
    Test,
    Scripted(scripted::ScriptedTurn),
    OpenAi(Box<openai::OpenAiTurn>),
    Anthropic(Box<anthropic::AnthropicTurn>),
    /// Recorded to, or replayed from, a cassette.
    Cassette(Box<cassette::CassetteTurn>),
    /// A stored session's answers (`agentkit replay`).
    Recorded(Arc<recorded::RecordedSession>),
}

impl Model {
    /// Prepares the model for a turn. `turn_index` counts the user messages
    /// before this turn. Fails when the provider is unavailable or its
    /// script cannot be read.
    pub(crate) async fn for_turn(
        spec: &ModelSpec,
        agent: &Agent,
        turn_index: usize,
        providers: &ProviderConfig,
    ) -> Result<Model, String> {
        match &providers.cassette {
            Some(cassette::Cassette::Session(session)) if session.answers_model() => {
                return Ok(Model::Recorded(session.clone()));
            }
            // The model runs live; only tool results come from the log.
            Some(cassette::Cassette::Session(_)) => {}
            // Replay never builds the provider: no key, no network.
            Some(c @ cassette::Cassette::Replay(_)) => {
                return Ok(Model::Cassette(Box::new(cassette::CassetteTurn::new(
                    c.clone(),
                    spec,
                    None,
                ))));
            }
            Some(c @ cassette::Cassette::Record(_)) => {
                let inner = Box::pin(Model::provider(spec, agent, turn_index, providers)).await?;
                return Ok(Model::Cassette(Box::new(cassette::CassetteTurn::new(
                    c.clone(),
                    spec,
                    Some(inner),
                ))));
            }
            None => {}
        }
        Model::provider(spec, agent, turn_index, providers).await
    }

    /// The provider itself, without a cassette.
    async fn provider(
        spec: &ModelSpec,
        agent: &Agent,
        turn_index: usize,
        providers: &ProviderConfig,
    ) -> Result<Model, String> {
        match spec.provider {
            Provider::Test => Ok(Model::Test),
            Provider::Scripted => {
                let script = Script::load(&agent.dir.join(&spec.id)).await?;
                Ok(Model::Scripted(script.turn(turn_index)))
            }
            Provider::Openai => Ok(Model::OpenAi(Box::new(openai::OpenAiTurn::new(
                spec,
                &providers.openai,
            )?))),
            Provider::Anthropic => Ok(Model::Anthropic(Box::new(anthropic::AnthropicTurn::new(
                spec,
                &providers.anthropic,
            )?))),
        }
    }

    /// Streams one step into `sink`.
    pub(crate) async fn step(
        &self,
        request: &StepRequest<'_>,
        sink: &mut StepSink<'_>,
    ) -> Result<ModelReply, String> {
        match self {
            Model::Test => Ok(test_model::step(request, sink).await),
            Model::Scripted(turn) => turn.step(request, sink).await,
            Model::OpenAi(turn) => turn.step(request, sink).await,
            Model::Anthropic(turn) => turn.step(request, sink).await,
            Model::Cassette(turn) => Box::pin(turn.step(request, sink)).await,
            Model::Recorded(session) => session.step(request, sink).await,
        }
    }
}

/// What a provider sees for one step.
#[derive(Debug)]
pub(crate) struct StepRequest<'a> {
    pub(crate) agent: &'a Arc<Agent>,
    pub(crate) conversation: &'a [Message],
    /// 1-based.
    pub(crate) step: u32,
    pub(crate) turn_id: &'a str,
    /// The turn's interrupt: a provider stops its request at once.
    pub(crate) cancel: &'a CancellationToken,
    /// Rust and MCP tools of this turn.
    pub(crate) tools: &'a [Arc<dyn crate::DynTool>],
    /// The instant a frozen session lives at.
    pub(crate) as_of: Option<&'a str>,
}

impl StepRequest<'_> {
    /// A call id unique within the session.
    pub(crate) fn call_id(&self, index: usize) -> String {
        format!("{}-s{}-c{}", self.turn_id, self.step, index + 1)
    }

    /// The last user message: this turn's.
    pub(crate) fn user_text(&self) -> &str {
        self.conversation
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::User { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .unwrap_or("")
    }

    /// Approximate input tokens (a quarter of the characters), so offline
    /// providers report non-zero usage.
    pub(crate) fn approx_input_tokens(&self) -> u64 {
        let instructions = self.agent.instructions.as_ref().map_or(0, |i| i.text.len());
        let chars: usize = self
            .conversation
            .iter()
            .map(|m| serde_json::to_string(m).map_or(0, |s| s.len()))
            .sum();
        approx_tokens(instructions + chars)
    }
}

/// The system prompt every remote provider sends: the instructions, then
/// the skills catalog (each skill's description; the model loads one with
/// the built-in `load_skill` tool).
/// One tool as a provider advertises it.
pub(crate) struct ToolDef {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) schema: serde_json::Value,
}

/// Every tool the model may call this step: the agent's server tools, the
/// enabled built-ins, then Rust and MCP tools whose names are still free.
pub(crate) fn tool_defs(agent: &Agent, extra: &[Arc<dyn crate::DynTool>]) -> Vec<ToolDef> {
    let mut defs: Vec<ToolDef> = agent
        .tools
        .iter()
        .filter(|t| t.offered_to_model())
        .map(|t| ToolDef {
            name: t.name.clone(),
            description: t.description.clone(),
            schema: t.input_schema.clone(),
        })
        .collect();
    for b in crate::builtins::enabled(agent) {
        defs.push(ToolDef {
            name: b.name.to_owned(),
            description: b.description.into_owned(),
            schema: b.schema,
        });
    }
    for t in extra {
        let spec = t.spec();
        if agent.tool(&spec.name).is_none() && !defs.iter().any(|d| d.name == spec.name) {
            defs.push(ToolDef {
                name: spec.name.clone(),
                description: spec.description.clone(),
                schema: spec.input_schema.clone(),
            });
        }
    }
    defs
}

/// One tool as the model is offered it.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferedTool {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
}

/// What every step's request carries besides the conversation, exactly as
/// the providers build it: the system prompt and the tools offered (for
/// showing a step's context; the log does not repeat them per step).
pub fn request_context(
    agent: &Agent,
    extra: &[Arc<dyn crate::DynTool>],
    as_of: Option<&str>,
) -> (String, Vec<OfferedTool>) {
    let tools = tool_defs(agent, extra)
        .into_iter()
        .map(|d| OfferedTool {
            name: d.name,
            description: d.description,
            input_schema: d.schema,
        })
        .collect();
    (system_prompt(agent, as_of), tools)
}

/// The JSON body a step's request sends the provider of `spec`, built by
/// the same code the provider sends with (`None` for the offline `test`
/// and `scripted` models, which send nothing). For showing what a step
/// sent; `conversation` is the step's as sent (compacted and trimmed).
/// Anthropic's signed thinking blocks live only in the turn that got
/// them, so a rebuilt request carries none.
pub fn wire_request(
    spec: &ModelSpec,
    agent: &Arc<Agent>,
    extra: &[Arc<dyn crate::DynTool>],
    conversation: &[Message],
    as_of: Option<&str>,
) -> Result<Option<serde_json::Value>, String> {
    match spec.provider {
        Provider::Test | Provider::Scripted => Ok(None),
        Provider::Openai => Ok(Some(openai::request_body(
            &spec.id,
            &spec.params,
            agent,
            extra,
            conversation,
            as_of,
        ))),
        Provider::Anthropic => {
            // Only the body is built: no key or address is used.
            let endpoint = crate::credentials::Endpoint {
                api_key: None,
                base_url: "http://127.0.0.1".to_owned(),
            };
            let turn = anthropic::AnthropicTurn::new(spec, &endpoint)?;
            let cancel = CancellationToken::new();
            let request = StepRequest {
                agent,
                conversation,
                step: 1,
                turn_id: "",
                cancel: &cancel,
                tools: extra,
                as_of,
            };
            Ok(Some(turn.request_body(&request)))
        }
    }
}

/// A session frozen at an instant (`as_of`) gets that instant as the
/// current time, after the instructions: the model has no other clock.
pub(crate) fn system_prompt(agent: &Agent, as_of: Option<&str>) -> String {
    let mut text = agent
        .instructions
        .as_ref()
        .map_or("", |i| i.text.trim_end())
        .to_owned();
    if !agent.skills.is_empty() {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(
            "## Skills\n\nSkills are procedures for particular tasks. When a task fits a skill's description, load it with the `load_skill` tool (or read `.agentkit/skills/<name>/SKILL.md`) and follow it.\n\n",
        );
        for skill in &agent.skills {
            text.push_str(&format!(
                "- `{}`: {}\n",
                skill.name,
                skill.description.trim()
            ));
        }
    }
    if let Some(instant) = as_of {
        if !text.is_empty() {
            text.push_str(if text.ends_with('\n') { "\n" } else { "\n\n" });
        }
        text.push_str(&format!("The current date and time is {instant}."));
    }
    text
}

/// `null` reads as the default value, like a missing field: the wire
/// structs of both remote providers are lenient with servers that send
/// `null` where a value belongs.
pub(crate) fn null_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + serde::Deserialize<'de>,
{
    use serde::Deserialize as _;
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

pub(crate) fn approx_tokens(chars: usize) -> u64 {
    (chars as u64).div_ceil(4).max(1)
}

/// A step's result besides its streamed text.
#[derive(Debug, Default)]
pub(crate) struct ModelReply {
    pub(crate) tool_calls: Vec<ToolCall>,
    pub(crate) usage: Usage,
}

/// Where a provider streams a step: it turns deltas into events and keeps
/// the text so far.
#[derive(Debug)]
pub(crate) struct StepSink<'a> {
    events: &'a mpsc::Sender<StepEvent>,
    reasoning: String,
    reasoning_open: bool,
    text: String,
    /// The deltas streamed so far, while a cassette records.
    tape: Option<Vec<cassette::Chunk>>,
}

impl<'a> StepSink<'a> {
    pub(crate) fn new(events: &'a mpsc::Sender<StepEvent>) -> Self {
        StepSink {
            events,
            reasoning: String::new(),
            reasoning_open: false,
            text: String::new(),
            tape: None,
        }
    }

    /// Starts keeping every delta (a cassette records the step).
    pub(crate) fn start_tape(&mut self) {
        self.tape = Some(Vec::new());
    }

    /// The deltas kept since [`StepSink::start_tape`].
    pub(crate) fn take_tape(&mut self) -> Vec<cassette::Chunk> {
        self.tape.take().unwrap_or_default()
    }

    pub(crate) async fn reasoning(&mut self, delta: &str) {
        if delta.is_empty() {
            return;
        }
        self.reasoning.push_str(delta);
        self.reasoning_open = true;
        if let Some(tape) = &mut self.tape {
            tape.push(cassette::Chunk::Reasoning(delta.to_owned()));
        }
        send(
            self.events,
            StepEvent::ReasoningAppended {
                delta: delta.to_owned(),
            },
        )
        .await;
    }

    pub(crate) async fn text(&mut self, delta: &str) {
        if delta.is_empty() {
            return;
        }
        self.finish_reasoning().await;
        self.text.push_str(delta);
        if let Some(tape) = &mut self.tape {
            tape.push(cassette::Chunk::Text(delta.to_owned()));
        }
        send(
            self.events,
            StepEvent::MessageAppended {
                delta: delta.to_owned(),
                text: self.text.clone(),
            },
        )
        .await;
    }

    /// Closes an open reasoning block with `reasoning.completed`.
    pub(crate) async fn finish_reasoning(&mut self) {
        if self.reasoning_open {
            self.reasoning_open = false;
            send(
                self.events,
                StepEvent::ReasoningCompleted {
                    text: std::mem::take(&mut self.reasoning),
                },
            )
            .await;
        }
    }

    /// The step's text; closes reasoning.
    pub(crate) async fn finish(mut self) -> String {
        self.finish_reasoning().await;
        self.text
    }
}

/// Sends an event; a runtime that stopped listening does not stop the turn.
pub(crate) async fn send(events: &mpsc::Sender<StepEvent>, event: StepEvent) {
    if events.send(event).await.is_err() {
        tracing::debug!("step event dropped: the receiver is gone");
    }
}

/// Splits text into deltas of a few words each; the pieces concatenate to
/// the text exactly.
pub(crate) fn chunk_text(text: &str, words_per_chunk: usize) -> Vec<&str> {
    let mut chunks = Vec::new();
    let mut start = 0;
    let mut words = 0;
    let mut in_space = false;
    for (i, c) in text.char_indices() {
        let space = c.is_whitespace();
        if in_space && !space {
            words += 1;
            if words == words_per_chunk.max(1) {
                chunks.push(&text[start..i]);
                start = i;
                words = 0;
            }
        }
        in_space = space;
    }
    if start < text.len() {
        chunks.push(&text[start..]);
    }
    chunks
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn both_remote_providers_share_one_client() {
        let spec = |provider, id: &str| ModelSpec {
            provider,
            id: id.into(),
            params: serde_json::Map::new(),
            context_window: None,
            max_output_tokens: None,
            pricing: None,
        };
        let endpoint = |base: &str| crate::Endpoint {
            api_key: Some("sk-debug-secret".into()),
            base_url: base.replace("//", "//user:s3cret@"),
        };
        let a = openai::OpenAiTurn::new(
            &spec(Provider::Openai, "m"),
            &endpoint("http://127.0.0.1:9/v1"),
        )
        .unwrap();
        let b = openai::OpenAiTurn::new(
            &spec(Provider::Openai, "m"),
            &endpoint("http://127.0.0.1:9/v1"),
        )
        .unwrap();
        let c = anthropic::AnthropicTurn::new(
            &spec(Provider::Anthropic, "m"),
            &endpoint("http://127.0.0.1:9"),
        )
        .unwrap();
        assert!(std::ptr::eq(a.client(), b.client()));
        assert!(std::ptr::eq(a.client(), c.client()));
        assert!(std::ptr::eq(
            a.client(),
            agentkit_plumbing::http_client().unwrap()
        ));
        // Neither the key nor the URL's password shows in `Debug`.
        let debug = format!("{a:?} {c:?} {:?}", endpoint("http://h/v1"));
        for leak in ["sk-debug-secret", "s3cret", "user:"] {
            assert!(!debug.contains(leak), "{leak} in {debug}");
        }
    }

    #[test]
    fn chunks_concatenate_to_the_text() {
        for text in [
            "",
            "one",
            "one two three four five six seven",
            "  lead\n\nand  trailing  ",
            "héllo wörld ünïcode ok",
        ] {
            let chunks = chunk_text(text, 3);
            assert_eq!(chunks.concat(), text);
            assert!(chunks.iter().all(|c| !c.is_empty()));
        }
        assert_eq!(
            chunk_text("a b c d e f g", 3),
            vec!["a b c ", "d e f ", "g"]
        );
    }
}
