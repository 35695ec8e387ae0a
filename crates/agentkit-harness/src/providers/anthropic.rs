//! The `anthropic` provider: one streamed request to the Anthropic Messages
//! API (`POST {base}/v1/messages`) per step.
//!
//! - The system prompt is the agent's instructions plus a catalog of its
//!   skills; the tools are the agent's server tools.
//! - The conversation maps to alternating `user` / `assistant` messages:
//!   tool results become `tool_result` blocks of one user message, and
//!   adjacent messages of the same role merge.
//! - Text deltas stream as `message.appended`, thinking deltas as
//!   `reasoning.appended`; `tool_use` blocks collect their `partial_json`
//!   into tool calls. Thinking blocks of a step that called tools are sent
//!   back with that step, as the API requires while thinking is on.
//! - Model params pass through into the request body (`temperature`,
//!   `top_p`, `thinking` …), except `max_tokens` (default 4096),
//!   `reasoning_effort` (`low` / `medium` / `high` turn thinking on with a
//!   budget of 1024 / 4096 / 16384 tokens unless `thinking` is given) and
//!   `stream_idle_timeout_ms` (how long the stream may stay silent, 60 s
//!   by default; not sent).
//! - Sending, retries (connection errors, 429, 529 and 5xx, before the
//!   first byte of an answer), timeouts and the SSE parser are the shared
//!   [`super::http`] layer; this module maps requests and events.
//!
//! The API key goes in the `x-api-key` header only and is scrubbed from
//! every error message.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use agentkit_manifest::{Agent, ModelSpec};
use agentkit_protocol::{Message, ToolCall, Usage};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use agentkit_plumbing::RetryPolicy;

use super::http::{self, Call, Failed, HttpError, StreamError, Target};
use super::sse::SseEvent;
use super::{ModelReply, StepRequest, StepSink};
use crate::credentials::Endpoint;

const API_VERSION: &str = "2023-06-01";
const DEFAULT_MAX_TOKENS: u64 = 4096;
const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Params the harness sets or consumes itself; the rest go into the body.
const RESERVED_PARAMS: &[&str] = &[
    "model",
    "messages",
    "system",
    "tools",
    "stream",
    "max_tokens",
    "reasoning_effort",
    "stream_idle_timeout_ms",
    "prompt_caching",
];

/// The `anthropic` model of one turn.
#[derive(Debug)]
pub(crate) struct AnthropicTurn {
    model_id: String,
    /// `cache_control` breakpoints on the system prompt, the tool catalog
    /// and the conversation so far (model param `prompt_caching`, default
    /// true).
    caching: bool,
    /// The body keys that come from the model params.
    extra: Map<String, Value>,
    max_tokens: u64,
    /// `{base}/v1/messages` and the key.
    target: Target,
    /// The key as a sensitive header value.
    key_header: Option<HeaderValue>,
    idle_timeout: Duration,
    /// The process-wide client.
    client: &'static reqwest::Client,
    /// Thinking blocks of the steps that ended in tool calls, keyed by the
    /// step's first call id: the API wants them back in front of those
    /// calls while thinking is on.
    thinking: Mutex<HashMap<String, Vec<Value>>>,
}

impl AnthropicTurn {
    /// Checks the key and the params. A missing key is allowed only for a
    /// base URL other than the public API (a proxy that adds its own).
    pub(crate) fn new(spec: &ModelSpec, endpoint: &Endpoint) -> Result<AnthropicTurn, String> {
        let target = Target::new(
            &endpoint.base_url,
            "/v1/messages",
            endpoint.api_key.as_deref(),
            "anthropic",
        )?;
        let public_api = target
            .url()
            .host_str()
            .is_some_and(|h| h.eq_ignore_ascii_case("api.anthropic.com"));
        let key_header = match target.api_key() {
            None => None,
            Some(key) => {
                let mut value = HeaderValue::from_str(key)
                    .map_err(|_| "ANTHROPIC_API_KEY is not a valid header value".to_owned())?;
                value.set_sensitive(true);
                Some(value)
            }
        };
        if key_header.is_none() && public_api {
            return Err(format!(
                "ANTHROPIC_API_KEY is not set (needed by model `anthropic:{}`)",
                spec.id
            ));
        }

        let params = &spec.params;
        let mut extra: Map<String, Value> = params
            .iter()
            .filter(|(k, _)| !RESERVED_PARAMS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !extra.contains_key("thinking")
            && let Some(effort) = params.get("reasoning_effort")
        {
            let budget = match effort.as_str() {
                Some("low") => 1024,
                Some("medium") => 4096,
                Some("high") => 16384,
                _ => {
                    return Err(format!(
                        "model param `reasoning_effort` must be \"low\", \"medium\" or \"high\", not {effort}"
                    ));
                }
            };
            extra.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget}),
            );
        }
        let budget = extra
            .get("thinking")
            .and_then(|t| t.get("budget_tokens"))
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let max_tokens = match params.get("max_tokens") {
            None => DEFAULT_MAX_TOKENS.max(budget.saturating_add(DEFAULT_MAX_TOKENS)),
            Some(v) => v.as_u64().filter(|n| *n > 0).ok_or_else(|| {
                format!("model param `max_tokens` must be a positive integer, not {v}")
            })?,
        };
        let idle_timeout = match params.get("stream_idle_timeout_ms") {
            None => DEFAULT_IDLE_TIMEOUT,
            Some(v) => v
                .as_u64()
                .filter(|n| *n > 0)
                .map(Duration::from_millis)
                .ok_or_else(|| {
                    format!(
                        "model param `stream_idle_timeout_ms` must be a positive integer, not {v}"
                    )
                })?,
        };

        let caching = match params.get("prompt_caching") {
            None => true,
            Some(Value::Bool(b)) => *b,
            Some(v) => {
                return Err(format!(
                    "model param `prompt_caching` must be true or false, not {v}"
                ));
            }
        };
        Ok(AnthropicTurn {
            model_id: spec.id.clone(),
            caching,
            extra,
            max_tokens,
            target,
            key_header,
            idle_timeout,
            client: http::client()?,
            thinking: Mutex::new(HashMap::new()),
        })
    }

    #[cfg(test)]
    pub(crate) fn client(&self) -> &'static reqwest::Client {
        self.client
    }

    /// Streams one step.
    pub(crate) async fn step(
        &self,
        request: &StepRequest<'_>,
        sink: &mut StepSink<'_>,
    ) -> Result<ModelReply, String> {
        let body = self.request_body(request);
        let body = serde_json::to_vec(&body)
            .map_err(|e| format!("cannot encode the anthropic request: {e}"))?;
        let call = Call {
            provider: "anthropic",
            client: self.client,
            target: &self.target,
            policy: RetryPolicy::default(),
            idle_timeout: self.idle_timeout,
            cancel: request.cancel,
        };
        let result = tokio::select! {
            biased;
            _ = request.cancel.cancelled() => Err("anthropic request cancelled".to_owned()),
            r = self.stream(&call, &body, sink) => r,
        };
        result.map_err(|message| self.target.redact(&message))
    }

    /// One request (retried by the layer until its answer begins) and its
    /// stream.
    async fn stream(
        &self,
        call: &Call<'_>,
        body: &[u8],
        sink: &mut StepSink<'_>,
    ) -> Result<ModelReply, String> {
        let response = http::open(call, |client, url| {
            let builder = client
                .post(url.clone())
                .header("anthropic-version", HeaderValue::from_static(API_VERSION))
                .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                .header(ACCEPT, HeaderValue::from_static("text/event-stream"))
                .body(body.to_vec());
            match &self.key_header {
                Some(key) => builder.header("x-api-key", key.clone()),
                None => builder,
            }
        })
        .await
        .map_err(|failed| failure_message(&failed))?;
        let mut events = response.events();
        let mut stream = StreamState::default();
        loop {
            match events.next().await {
                Ok(Some(event)) => {
                    if stream.handle(&event, sink).await? {
                        return Ok(self.finish(stream));
                    }
                }
                Ok(None) => return Err("anthropic stream ended early".to_owned()),
                Err(StreamError::Idle(d)) => {
                    return Err(format!(
                        "anthropic stream stalled: no data for {}",
                        humantime::format_duration(d)
                    ));
                }
                Err(StreamError::Cut(m)) => {
                    return Err(format!("anthropic stream ended early: {m}"));
                }
            }
        }
    }

    /// The step's reply; keeps its thinking blocks for the next request
    /// when it called tools.
    fn finish(&self, stream: StreamState) -> ModelReply {
        if stream.stop_reason.as_deref() == Some("max_tokens") {
            tracing::warn!(
                max_tokens = self.max_tokens,
                "anthropic step stopped at max_tokens"
            );
        }
        let mut tool_calls = Vec::new();
        let mut thinking = Vec::new();
        for block in stream.blocks.into_values() {
            match block {
                Block::Tool {
                    id,
                    name,
                    json,
                    start_input,
                } => tool_calls.push(ToolCall {
                    call_id: id,
                    tool_name: name,
                    input: parse_tool_input(&json, start_input),
                }),
                Block::Thinking {
                    thinking: text,
                    signature,
                } => thinking.push(json!({
                    "type": "thinking", "thinking": text, "signature": signature,
                })),
                Block::RedactedThinking { data } => {
                    thinking.push(json!({"type": "redacted_thinking", "data": data}));
                }
                Block::Text | Block::Other => {}
            }
        }
        if let Some(first) = tool_calls.first()
            && !thinking.is_empty()
            && let Ok(mut kept) = self.thinking.lock()
        {
            kept.insert(first.call_id.clone(), thinking);
        }
        ModelReply {
            tool_calls,
            usage: stream.usage,
        }
    }

    pub(super) fn request_body(&self, request: &StepRequest<'_>) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), Value::String(self.model_id.clone()));
        body.insert("max_tokens".into(), Value::from(self.max_tokens));
        let system = system_prompt(request.agent, request.as_of);
        if !system.is_empty() {
            let system = if self.caching {
                json!([{"type": "text", "text": system, "cache_control": ephemeral()}])
            } else {
                Value::String(system)
            };
            body.insert("system".into(), system);
        }
        let mut messages = match self.thinking.lock() {
            Ok(kept) => map_messages(request.conversation, &kept),
            Err(_) => map_messages(request.conversation, &HashMap::new()),
        };
        if self.caching {
            cache_last_block(&mut messages);
        }
        body.insert("messages".into(), Value::Array(messages));
        let mut tools: Vec<Value> = super::tool_defs(request.agent, request.tools)
            .into_iter()
            .map(
                |d| json!({"name": d.name, "description": d.description, "input_schema": d.schema}),
            )
            .collect();
        if self.caching
            && let Some(Value::Object(last)) = tools.last_mut()
        {
            last.insert("cache_control".into(), ephemeral());
        }
        if !tools.is_empty() {
            body.insert("tools".into(), Value::Array(tools));
        }
        body.insert("stream".into(), Value::Bool(true));
        for (k, v) in &self.extra {
            body.insert(k.clone(), v.clone());
        }
        Value::Object(body)
    }
}

/// The message of a request the layer gave up on.
fn failure_message(failed: &Failed) -> String {
    match &failed.error {
        HttpError::Cancelled => "anthropic request cancelled".to_owned(),
        HttpError::NoResponse(d) => format!(
            "the anthropic API did not answer within {}",
            humantime::format_duration(*d)
        ),
        HttpError::Request(m) | HttpError::Unreachable(m) => {
            format!("cannot reach the anthropic API: {m}")
        }
        HttpError::Status { status, body, .. } => {
            format!("anthropic API error {status}{}", api_error_detail(body))
        }
        HttpError::BodyFailed(m) => format!("anthropic stream ended early: {m}"),
        HttpError::Idle(d) => format!(
            "anthropic stream stalled: no data for {}",
            humantime::format_duration(*d)
        ),
    }
}

/// ` (type): message` from an API error body, or a short excerpt of a body
/// that is not one.
fn api_error_detail(body: &str) -> String {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Body {
        error: WireError,
    }
    match serde_json::from_str::<Body>(body) {
        Ok(b) if !b.error.message.is_empty() => {
            format!(" ({}): {}", b.error.kind, b.error.message)
        }
        _ => {
            let body = body.trim();
            if body.is_empty() {
                String::new()
            } else {
                let excerpt: String = body.chars().take(300).collect();
                format!(": {excerpt}")
            }
        }
    }
}

/// The tool input a call's JSON fragments add up to: `{}` when empty, the
/// input of `content_block_start` when no fragments came, and
/// `{"_raw": …}` when it does not parse (the loop then reports a schema
/// error to the model).
fn parse_tool_input(json: &str, start_input: Value) -> Value {
    if json.trim().is_empty() {
        return match start_input {
            Value::Object(_) => start_input,
            _ => Value::Object(Map::new()),
        };
    }
    serde_json::from_str(json).unwrap_or_else(|_| json!({ "_raw": json }))
}

/// The instructions and a catalog of the agent's skills.
fn system_prompt(agent: &Agent, as_of: Option<&str>) -> String {
    super::system_prompt(agent, as_of)
}

/// A prompt-cache breakpoint (Anthropic's default five-minute cache).
fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

/// Marks the last content block of the last message as a cache breakpoint,
/// so the next step (and the next turn) reads the whole conversation so
/// far from the cache. Compaction keeps the summary at the head, so the
/// prefix stays stable between compactions.
fn cache_last_block(messages: &mut [Value]) {
    let Some(last) = messages.last_mut() else {
        return;
    };
    let content = &mut last["content"];
    if let Value::String(text) = content {
        *content = json!([{"type": "text", "text": std::mem::take(text)}]);
    }
    if let Some(Value::Object(block)) = content.as_array_mut().and_then(|b| b.last_mut()) {
        block.insert("cache_control".into(), ephemeral());
    }
}

/// Maps the conversation to Messages API messages: roles alternate (same
/// role neighbours merge), every `tool_use` is answered by a `tool_result`
/// in the next user message (an interrupted turn's missing results are
/// filled in as errors), and empty assistant messages are dropped.
/// A tool result with images as Anthropic's content blocks: text, and
/// each image with its bytes as a base64 source.
fn tool_result_blocks(output: &Value) -> Value {
    let items = output.as_array().cloned().unwrap_or_default();
    Value::Array(
        items
            .iter()
            .map(|item| {
                let kind = item.get("type").and_then(Value::as_str);
                match (kind, item.get("data").and_then(Value::as_str)) {
                    (Some("image"), Some(data)) => json!({
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": item.get("mediaType").and_then(Value::as_str).unwrap_or("image/png"),
                            "data": data,
                        },
                    }),
                    (Some("text"), _) => json!({
                        "type": "text",
                        "text": item.get("text").and_then(Value::as_str).unwrap_or_default(),
                    }),
                    _ => json!({"type": "text", "text": crate::images::text_of(&Value::Array(vec![item.clone()]))}),
                }
            })
            .collect(),
    )
}

fn map_messages(conversation: &[Message], thinking: &HashMap<String, Vec<Value>>) -> Vec<Value> {
    // (role, content blocks); a lone user text stays a plain string below.
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    let mut push = |role: &'static str, blocks: Vec<Value>| {
        if blocks.is_empty() {
            return;
        }
        match turns.last_mut() {
            Some((last, content)) if *last == role => content.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    };
    for message in conversation {
        match message {
            Message::User { text, images } => {
                let mut blocks = vec![json!({"type": "text", "text": text})];
                blocks.extend(images.iter().filter_map(|i| {
                    let data = i.data.as_ref()?;
                    Some(json!({"type": "image", "source": {"type": "base64", "media_type": i.media_type, "data": data}}))
                }));
                push("user", blocks)
            }
            Message::Assistant { text, tool_calls } => {
                let mut blocks = Vec::new();
                if let Some(kept) = tool_calls.first().and_then(|c| thinking.get(&c.call_id)) {
                    blocks.extend(kept.iter().cloned());
                }
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for call in tool_calls {
                    let input = match &call.input {
                        Value::Object(_) => call.input.clone(),
                        _ => Value::Object(Map::new()),
                    };
                    blocks.push(json!({
                        "type": "tool_use",
                        "id": call.call_id,
                        "name": call.tool_name,
                        "input": input,
                    }));
                }
                push("assistant", blocks);
            }
            Message::Tool {
                call_id,
                output,
                is_error,
                ..
            } => {
                let content = if crate::images::has_images(output) {
                    tool_result_blocks(output)
                } else {
                    match output {
                        Value::String(s) => Value::String(s.clone()),
                        other => Value::String(other.to_string()),
                    }
                };
                push(
                    "user",
                    vec![json!({
                        "type": "tool_result",
                        "tool_use_id": call_id,
                        "content": content,
                        "is_error": is_error,
                    })],
                );
            }
        }
    }

    // Answer every tool_use in the next user message.
    let mut i = 0;
    while i < turns.len() {
        if turns[i].0 == "assistant" {
            let ids: Vec<String> = turns[i]
                .1
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .filter_map(|b| b["id"].as_str().map(str::to_owned))
                .collect();
            if !ids.is_empty() {
                if turns.get(i + 1).is_none_or(|(role, _)| *role != "user") {
                    turns.insert(i + 1, ("user", Vec::new()));
                }
                if let Some((_, next)) = turns.get_mut(i + 1) {
                    let missing: Vec<Value> = ids
                        .iter()
                        .filter(|id| {
                            !next.iter().any(|b| {
                                b["type"] == "tool_result" && b["tool_use_id"] == id.as_str()
                            })
                        })
                        .map(|id| {
                            json!({
                                "type": "tool_result",
                                "tool_use_id": id,
                                "content": "no result: the turn ended before the call finished",
                                "is_error": true,
                            })
                        })
                        .collect();
                    // Results come first in a user message.
                    next.splice(0..0, missing);
                }
            }
        }
        i += 1;
    }

    turns
        .into_iter()
        .map(|(role, mut blocks)| {
            let content = if role == "user" && blocks.len() == 1 && blocks[0]["type"] == "text" {
                blocks.swap_remove(0)["text"].take()
            } else {
                Value::Array(blocks)
            };
            json!({"role": role, "content": content})
        })
        .collect()
}

/// One content block as it streams.
#[derive(Debug)]
enum Block {
    Text,
    Tool {
        id: String,
        name: String,
        json: String,
        start_input: Value,
    },
    Thinking {
        thinking: String,
        signature: String,
    },
    RedactedThinking {
        data: String,
    },
    Other,
}

/// What one stream has said so far.
#[derive(Debug, Default)]
struct StreamState {
    blocks: BTreeMap<usize, Block>,
    usage: Usage,
    stop_reason: Option<String>,
}

impl StreamState {
    /// Handles one SSE event; `true` at `message_stop`.
    async fn handle(&mut self, event: &SseEvent, sink: &mut StepSink<'_>) -> Result<bool, String> {
        if event.data.trim().is_empty() {
            return Ok(false);
        }
        let wire: WireEvent = serde_json::from_str(&event.data)
            .map_err(|e| format!("anthropic sent an unreadable `{}` event: {e}", event.event))?;
        // The data's `type` is authoritative; the SSE event name backs it up.
        let kind = if wire.kind.is_empty() {
            event.event.as_str()
        } else {
            wire.kind.as_str()
        };
        match kind {
            "message_start" => self.add_usage(&wire.message.usage),
            "content_block_start" => {
                let b = wire.content_block;
                let block = match b.kind.as_str() {
                    "text" => {
                        if !b.text.is_empty() {
                            sink.text(&b.text).await;
                        }
                        Block::Text
                    }
                    "tool_use" | "server_tool_use" => Block::Tool {
                        id: b.id,
                        name: b.name,
                        json: String::new(),
                        start_input: b.input,
                    },
                    "thinking" => {
                        if !b.thinking.is_empty() {
                            sink.reasoning(&b.thinking).await;
                        }
                        Block::Thinking {
                            thinking: b.thinking,
                            signature: b.signature,
                        }
                    }
                    "redacted_thinking" => Block::RedactedThinking { data: b.data },
                    _ => Block::Other,
                };
                self.blocks.insert(wire.index, block);
            }
            "content_block_delta" => {
                let d = wire.delta;
                let block = self.blocks.get_mut(&wire.index);
                match (d.kind.as_str(), block) {
                    ("text_delta", _) if !d.text.is_empty() => {
                        sink.text(&d.text).await;
                    }
                    ("input_json_delta", Some(Block::Tool { json, .. })) => {
                        json.push_str(&d.partial_json);
                    }
                    ("thinking_delta", block) => {
                        if let Some(Block::Thinking { thinking, .. }) = block {
                            thinking.push_str(&d.thinking);
                        }
                        if !d.thinking.is_empty() {
                            sink.reasoning(&d.thinking).await;
                        }
                    }
                    ("signature_delta", Some(Block::Thinking { signature, .. })) => {
                        signature.push_str(&d.signature);
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = wire.delta.stop_reason {
                    self.stop_reason = Some(reason);
                }
                self.add_usage(&wire.usage);
            }
            "message_stop" => return Ok(true),
            "error" => {
                let kind = if wire.error.kind.is_empty() {
                    "error"
                } else {
                    wire.error.kind.as_str()
                };
                return Err(format!("anthropic error ({kind}): {}", wire.error.message));
            }
            // `ping`, `content_block_stop` and events added later.
            _ => {}
        }
        Ok(false)
    }

    /// Usage counts are cumulative: the latest non-null value wins.
    fn add_usage(&mut self, usage: &WireUsage) {
        if let Some(n) = usage.input_tokens {
            self.usage.input_tokens = n;
        }
        if let Some(n) = usage.output_tokens {
            self.usage.output_tokens = n;
        }
        if let Some(n) = usage.cache_read_input_tokens {
            self.usage.cache_read_tokens = n;
        }
        if let Some(n) = usage.cache_creation_input_tokens {
            self.usage.cache_write_tokens = n;
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireEvent {
    #[serde(rename = "type", deserialize_with = "super::null_default")]
    kind: String,
    #[serde(deserialize_with = "super::null_default")]
    message: WireMessage,
    #[serde(deserialize_with = "super::null_default")]
    index: usize,
    #[serde(deserialize_with = "super::null_default")]
    content_block: WireBlock,
    #[serde(deserialize_with = "super::null_default")]
    delta: WireDelta,
    #[serde(deserialize_with = "super::null_default")]
    usage: WireUsage,
    #[serde(deserialize_with = "super::null_default")]
    error: WireError,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireMessage {
    #[serde(deserialize_with = "super::null_default")]
    usage: WireUsage,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireBlock {
    #[serde(rename = "type", deserialize_with = "super::null_default")]
    kind: String,
    #[serde(deserialize_with = "super::null_default")]
    id: String,
    #[serde(deserialize_with = "super::null_default")]
    name: String,
    input: Value,
    #[serde(deserialize_with = "super::null_default")]
    text: String,
    #[serde(deserialize_with = "super::null_default")]
    thinking: String,
    #[serde(deserialize_with = "super::null_default")]
    signature: String,
    #[serde(deserialize_with = "super::null_default")]
    data: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireDelta {
    #[serde(rename = "type", deserialize_with = "super::null_default")]
    kind: String,
    #[serde(deserialize_with = "super::null_default")]
    text: String,
    #[serde(deserialize_with = "super::null_default")]
    partial_json: String,
    #[serde(deserialize_with = "super::null_default")]
    thinking: String,
    #[serde(deserialize_with = "super::null_default")]
    signature: String,
    stop_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireError {
    #[serde(rename = "type", deserialize_with = "super::null_default")]
    kind: String,
    #[serde(deserialize_with = "super::null_default")]
    message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_input_fragments() {
        assert_eq!(parse_tool_input("", json!({})), json!({}));
        assert_eq!(parse_tool_input("", json!({"a": 1})), json!({"a": 1}));
        assert_eq!(
            parse_tool_input("{\"a\":", json!({})),
            json!({"_raw": "{\"a\":"})
        );
        assert_eq!(parse_tool_input("{\"a\": 2}", json!({})), json!({"a": 2}));
    }

    #[test]
    fn messages_alternate_and_every_tool_use_gets_a_result() {
        let call = |id: &str| ToolCall {
            call_id: id.into(),
            tool_name: "t".into(),
            input: json!({"x": 1}),
        };
        let conversation = vec![
            Message::user("first"),
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![call("a"), call("b")],
            },
            Message::Tool {
                call_id: "a".into(),
                tool_name: "t".into(),
                output: json!({"ok": true}),
                is_error: false,
            },
            // "b" never got a result: the turn was interrupted.
            Message::user("second"),
            Message::Assistant {
                text: String::new(),
                tool_calls: Vec::new(),
            },
            Message::user("third"),
        ];
        let thinking = HashMap::from([(
            "a".to_owned(),
            vec![json!({"type": "thinking", "thinking": "hm", "signature": "sig"})],
        )]);
        let messages = map_messages(&conversation, &thinking);
        assert_eq!(
            Value::Array(messages),
            json!([
                {"role": "user", "content": "first"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hm", "signature": "sig"},
                    {"type": "tool_use", "id": "a", "name": "t", "input": {"x": 1}},
                    {"type": "tool_use", "id": "b", "name": "t", "input": {"x": 1}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "b", "content": "no result: the turn ended before the call finished", "is_error": true},
                    {"type": "tool_result", "tool_use_id": "a", "content": "{\"ok\":true}", "is_error": false},
                    {"type": "text", "text": "second"},
                    {"type": "text", "text": "third"},
                ]},
            ])
        );
    }

    #[test]
    fn error_bodies_give_their_message() {
        assert_eq!(
            api_error_detail(
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: required"}}"#
            ),
            " (invalid_request_error): max_tokens: required"
        );
        assert_eq!(api_error_detail("bad gateway"), ": bad gateway");
        assert_eq!(api_error_detail(""), "");
    }
}
