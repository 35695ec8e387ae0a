//! The `openai` provider: one streamed Chat Completions request per step,
//! against OpenAI or a compatible server (Ollama, vLLM, llama.cpp, LM Studio,
//! OpenRouter …).
//!
//! This module maps the conversation to the request body and the stream's
//! chunks to step events; sending, retries, timeouts and the SSE parser
//! are the shared [`super::http`] layer. Servers that omit fields still
//! work: every wire struct is `serde(default)`, tool-call fragments are
//! matched by `index` or `id`, `type` is never required, and arguments
//! may come in one piece or many. A server that ignores `stream: true`
//! and answers one JSON object is read as one chunk.
//!
//! The API key goes into the `Authorization` header only; every message
//! this module produces is redacted by the target.

use std::time::Duration;

use agentkit_manifest::{Agent, ModelSpec};
use agentkit_protocol::{Message, ToolCall, Usage};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use agentkit_plumbing::RetryPolicy;

use super::http::{self, Call, Events, Failed, HttpError, StreamError, Target};
use super::{ModelReply, StepRequest, StepSink, approx_tokens};
use crate::credentials::Endpoint;

/// How long the server may stay silent: before the response headers and
/// between two chunks of the stream.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How much of a non-JSON error body goes into a message.
const ERROR_BODY_CHARS: usize = 300;

/// The public API, which always needs a key (local servers often do not).
const OPENAI_HOST: &str = "api.openai.com";

/// The `openai` model of one turn.
#[derive(Debug)]
pub(crate) struct OpenAiTurn {
    /// `{base_url}/chat/completions` and the key.
    target: Target,
    model: String,
    params: Map<String, Value>,
    idle_timeout: Duration,
    /// The process-wide client, resolved once per turn.
    client: &'static reqwest::Client,
}

impl OpenAiTurn {
    /// Checks the endpoint and key. A missing key is an error only for the
    /// public API; local servers are called without `Authorization`.
    pub(crate) fn new(spec: &ModelSpec, endpoint: &Endpoint) -> Result<OpenAiTurn, String> {
        if spec.id.trim().is_empty() {
            return Err("model `openai:` needs a model id, such as \"openai:gpt-4.1-mini\"".into());
        }
        let target = Target::new(
            &endpoint.base_url,
            "/chat/completions",
            endpoint.api_key.as_deref(),
            "OpenAI",
        )?;
        if target.api_key().is_none() && target.url().host_str() == Some(OPENAI_HOST) {
            return Err("OPENAI_API_KEY is not set (or pass --api-key)".into());
        }
        Ok(OpenAiTurn {
            target,
            model: spec.id.clone(),
            params: spec.params.clone(),
            idle_timeout: IDLE_TIMEOUT,
            client: http::client()?,
        })
    }

    #[cfg(test)]
    pub(crate) fn client(&self) -> &'static reqwest::Client {
        self.client
    }

    pub(super) async fn step(
        &self,
        request: &StepRequest<'_>,
        sink: &mut StepSink<'_>,
    ) -> Result<ModelReply, String> {
        let body = request_body(
            &self.model,
            &self.params,
            request.agent,
            request.tools,
            request.conversation,
            request.as_of,
        );
        let call = Call {
            provider: "openai",
            client: self.client,
            target: &self.target,
            policy: RetryPolicy::default(),
            idle_timeout: self.idle_timeout,
            cancel: request.cancel,
        };
        let work = async {
            let response = http::open(&call, |client, url| {
                let builder = client
                    .post(url.clone())
                    .header(reqwest::header::ACCEPT, "text/event-stream")
                    .json(&body);
                match self.target.api_key() {
                    Some(key) => builder.bearer_auth(key),
                    None => builder,
                }
            })
            .await
            .map_err(|failed| failure_message(&failed))?;
            if response.is_json() {
                // A server that does not stream answers with one object.
                let text = response.text().await.map_err(|e| match e {
                    StreamError::Idle(d) => {
                        format!("openai response idle for {}", http::duration_text(d))
                    }
                    StreamError::Cut(m) => format!("cannot read the openai response: {m}"),
                })?;
                return read_completion(&text, sink).await;
            }
            read_stream(response.events(), sink).await
        };
        // The loop also drops this future on interrupt; selecting here
        // keeps the provider prompt when it is driven on its own.
        let result = tokio::select! {
            biased;
            _ = request.cancel.cancelled() => Err("openai request cancelled".to_owned()),
            r = work => r,
        };
        match result {
            Ok(stream) => Ok(stream.into_reply(request)),
            Err(message) => Err(self.target.redact(&message)),
        }
    }
}

/// The message of a request the layer gave up on.
fn failure_message(failed: &Failed) -> String {
    let message = match &failed.error {
        HttpError::Cancelled => "openai request cancelled".to_owned(),
        HttpError::Request(m) => format!("cannot build the request: {m}"),
        HttpError::NoResponse(d) => {
            format!("openai sent no response for {}", http::duration_text(*d))
        }
        HttpError::Unreachable(m) => format!("cannot reach the openai API: {m}"),
        HttpError::Status { status, body, .. } => {
            format!("openai returned {status}: {}", api_error(body))
        }
        HttpError::BodyFailed(m) => format!("openai stream ended early: {m}"),
        HttpError::Idle(d) => format!("openai stream idle for {}", http::duration_text(*d)),
    };
    if failed.exhausted {
        let attempts = failed.attempts;
        let noun = if attempts == 1 { "attempt" } else { "attempts" };
        format!("{message} (gave up after {attempts} {noun})")
    } else {
        message
    }
}

/// The API's `error.message`, else the start of the body.
fn api_error(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let message = parsed.as_ref().and_then(|v| {
        let error = v.get("error").unwrap_or(v);
        error
            .get("message")
            .and_then(Value::as_str)
            .or_else(|| error.as_str())
    });
    match message {
        Some(m) => m.to_owned(),
        None if body.trim().is_empty() => "(empty body)".to_owned(),
        None => {
            let body = body.trim();
            match body.char_indices().nth(ERROR_BODY_CHARS) {
                Some((i, _)) => format!("{}…", &body[..i]),
                None => body.to_owned(),
            }
        }
    }
}

// --- The request -----------------------------------------------------------

/// The Chat Completions body: the model's `params` are merged in, but never
/// replace `model`, `messages`, `stream` or `tools`.
pub(super) fn request_body(
    model: &str,
    params: &Map<String, Value>,
    agent: &Agent,
    extra: &[std::sync::Arc<dyn crate::DynTool>],
    conversation: &[Message],
    as_of: Option<&str>,
) -> Value {
    let mut messages = Vec::with_capacity(conversation.len() + 1);
    if let Some(system) = system_prompt(agent, as_of) {
        messages.push(json!({"role": "system", "content": system}));
    }
    // A tool message takes text only: the images tools returned follow
    // the step's tool messages as one user message of image parts.
    let mut images: Vec<Value> = Vec::new();
    for message in conversation {
        if !matches!(message, Message::Tool { .. }) && !images.is_empty() {
            messages.push(images_message(std::mem::take(&mut images)));
        }
        if let Message::Tool {
            call_id, output, ..
        } = message
        {
            for (media_type, data) in crate::images::inline_images(output) {
                if images.is_empty() {
                    images.push(json!({"type": "text", "text": format!("The images returned by tool call {call_id}:")}));
                }
                images.push(json!({
                    "type": "image_url",
                    "image_url": {"url": format!("data:{media_type};base64,{data}")},
                }));
            }
        }
        messages.push(wire_message(message));
    }
    if !images.is_empty() {
        messages.push(images_message(images));
    }

    let tools: Vec<Value> = super::tool_defs(agent, extra)
        .into_iter()
        .map(|d| {
            json!({
                "type": "function",
                "function": {"name": d.name, "description": d.description, "parameters": d.schema},
            })
        })
        .collect();

    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    body.insert("messages".into(), Value::Array(messages));
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
        body.insert("tool_choice".into(), json!("auto"));
    }
    // Native structured output; the harness still validates the reply
    // (servers that ignore the field get the retry instead).
    if let Some(schema) = &agent.config.output_schema {
        body.insert(
            "response_format".into(),
            json!({"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}),
        );
    }
    for (key, value) in params {
        if !matches!(key.as_str(), "model" | "messages" | "stream" | "tools") {
            body.insert(key.clone(), value.clone());
        }
    }
    Value::Object(body)
}

/// The agent's instructions, then a catalog of its skills.
fn system_prompt(agent: &Agent, as_of: Option<&str>) -> Option<String> {
    let text = super::system_prompt(agent, as_of);
    (!text.is_empty()).then_some(text)
}

fn images_message(parts: Vec<Value>) -> Value {
    json!({"role": "user", "content": parts})
}

fn wire_message(message: &Message) -> Value {
    match message {
        Message::User { text, images } => {
            let attached: Vec<Value> = images
                .iter()
                .filter_map(|i| {
                    let data = i.data.as_ref()?;
                    Some(json!({"type": "image_url", "image_url": {"url": format!("data:{};base64,{data}", i.media_type)}}))
                })
                .collect();
            if attached.is_empty() {
                json!({"role": "user", "content": text})
            } else {
                let mut parts = vec![json!({"type": "text", "text": text})];
                parts.extend(attached);
                json!({"role": "user", "content": parts})
            }
        }
        Message::Assistant { text, tool_calls } => {
            let content = if text.is_empty() && !tool_calls.is_empty() {
                Value::Null
            } else {
                json!(text)
            };
            let mut m = json!({"role": "assistant", "content": content});
            if !tool_calls.is_empty() {
                m["tool_calls"] = tool_calls
                    .iter()
                    .map(|c| {
                        json!({
                            "id": c.call_id,
                            "type": "function",
                            "function": {"name": c.tool_name, "arguments": c.input.to_string()},
                        })
                    })
                    .collect();
            }
            m
        }
        Message::Tool {
            call_id, output, ..
        } => {
            let content = if crate::images::has_images(output) {
                crate::images::text_of(output)
            } else {
                match output {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                }
            };
            json!({"role": "tool", "tool_call_id": call_id, "content": content})
        }
    }
}

// --- The stream ------------------------------------------------------------

/// Reads a Chat Completions event stream into `sink`, failing when the
/// server goes quiet or the stream ends before its end.
async fn read_stream(mut events: Events, sink: &mut StepSink<'_>) -> Result<StreamState, String> {
    let mut state = StreamState::default();
    loop {
        match events.next().await {
            Ok(Some(event)) => {
                state.on_data(&event.data, sink).await?;
                if state.done {
                    return Ok(state);
                }
            }
            Ok(None) => break,
            Err(StreamError::Idle(d)) => {
                return Err(format!("openai stream idle for {}", http::duration_text(d)));
            }
            Err(StreamError::Cut(m)) => return Err(format!("openai stream ended early: {m}")),
        }
    }
    if state.done || state.finish_reason.is_some() {
        Ok(state)
    } else {
        Err("openai stream ended early".into())
    }
}

/// Reads a non-streamed `chat.completion` (a server that ignored
/// `stream: true`) as if it were one chunk whose delta is the message.
async fn read_completion(body: &str, sink: &mut StepSink<'_>) -> Result<StreamState, String> {
    let mut completion: Value = serde_json::from_str(body)
        .map_err(|e| format!("openai sent an unreadable response: {e}"))?;
    if let Some(choices) = completion.get_mut("choices").and_then(Value::as_array_mut) {
        for choice in choices {
            let mut message = choice
                .get_mut("message")
                .map(Value::take)
                .unwrap_or_default();
            if let Some(calls) = message.get_mut("tool_calls").and_then(Value::as_array_mut) {
                for (i, call) in calls.iter_mut().enumerate() {
                    call["index"] = json!(i);
                }
            }
            choice["delta"] = message;
        }
    }
    let mut state = StreamState::default();
    state.on_data(&completion.to_string(), sink).await?;
    if state.finish_reason.is_none() {
        state.finish_reason = Some("stop".into());
    }
    Ok(state)
}

/// What a stream said so far.
#[derive(Debug, Default)]
struct StreamState {
    calls: Vec<PartialCall>,
    usage: Option<WireUsage>,
    finish_reason: Option<String>,
    /// `data: [DONE]` arrived.
    done: bool,
    /// Characters of text, reasoning and arguments, for approximate usage
    /// when the server reports none.
    output_chars: usize,
}

/// A tool call assembled from fragments.
#[derive(Debug, Default)]
struct PartialCall {
    index: Option<usize>,
    id: Option<String>,
    name: String,
    arguments: String,
}

impl StreamState {
    async fn on_data(&mut self, data: &str, sink: &mut StepSink<'_>) -> Result<(), String> {
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        if data.is_empty() {
            return Ok(());
        }
        let chunk: Chunk = match serde_json::from_str(data) {
            Ok(chunk) => chunk,
            // Some servers omit the blank line between events, so their
            // `data` lines arrive joined: read them one by one.
            Err(_) if data.contains('\n') => {
                for line in data.lines() {
                    Box::pin(self.on_data(line, sink)).await?;
                }
                return Ok(());
            }
            Err(e) => return Err(format!("openai sent an unreadable stream event: {e}")),
        };
        if let Some(error) = chunk.error {
            let message = match error {
                Value::String(s) => s,
                other => other
                    .get("message")
                    .and_then(Value::as_str)
                    .map_or_else(|| other.to_string(), str::to_owned),
            };
            return Err(format!("openai stream error: {message}"));
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage);
        }
        // One choice is asked for; any others are ignored.
        let Some(choice) = chunk
            .choices
            .into_iter()
            .find(|c| c.index.unwrap_or(0) == 0)
        else {
            return Ok(());
        };
        let delta = choice.delta;
        for reasoning in [delta.reasoning_content, delta.reasoning]
            .into_iter()
            .flatten()
        {
            self.output_chars += reasoning.len();
            sink.reasoning(&reasoning).await;
        }
        if let Some(text) = delta.content {
            self.output_chars += text.len();
            sink.text(&text).await;
        }
        for fragment in delta.tool_calls {
            self.add_fragment(fragment);
        }
        if let Some(reason) = choice.finish_reason {
            if reason == "length" || reason == "content_filter" {
                tracing::warn!(finish_reason = %reason, "openai cut the step short");
            }
            self.finish_reason = Some(reason);
        }
        Ok(())
    }

    /// Adds a fragment to its call: the one with the same `id`, else the
    /// last with the same `index`, else the last call, else a new one.
    fn add_fragment(&mut self, fragment: WireToolCall) {
        let id = fragment.id.filter(|id| !id.is_empty());
        let position = match &id {
            Some(id) => self
                .calls
                .iter()
                .position(|c| c.id.as_ref() == Some(id))
                .or_else(|| {
                    // An id that was missing from the call's first fragment.
                    self.calls
                        .iter()
                        .rposition(|c| c.id.is_none() && c.index == fragment.index)
                        .filter(|_| fragment.index.is_some())
                }),
            None => match fragment.index {
                Some(index) => self.calls.iter().rposition(|c| c.index == Some(index)),
                None => self.calls.len().checked_sub(1),
            },
        };
        let position = position.unwrap_or_else(|| {
            self.calls.push(PartialCall {
                index: fragment.index,
                ..PartialCall::default()
            });
            self.calls.len() - 1
        });
        let Some(call) = self.calls.get_mut(position) else {
            return;
        };
        if call.id.is_none() {
            call.id = id;
        }
        if let Some(function) = fragment.function {
            // Names come whole in the first fragment; later repeats are
            // not continuations.
            if call.name.is_empty()
                && let Some(name) = function.name
            {
                call.name = name;
            }
            let before = call.arguments.len();
            match function.arguments {
                Some(Value::String(s)) => call.arguments.push_str(&s),
                // Some servers send the arguments as an object.
                Some(Value::Null) | None => {}
                Some(other) => call.arguments.push_str(&other.to_string()),
            }
            self.output_chars += call.arguments.len() - before;
        }
    }

    fn into_reply(self, request: &StepRequest<'_>) -> ModelReply {
        let tool_calls = self
            .calls
            .into_iter()
            .enumerate()
            .map(|(i, call)| ToolCall {
                call_id: call.id.unwrap_or_else(|| request.call_id(i)),
                tool_name: call.name,
                input: parse_arguments(&call.arguments),
            })
            .collect();
        let usage = match self.usage {
            Some(u) => Usage {
                input_tokens: u.prompt_tokens.unwrap_or(0),
                output_tokens: u.completion_tokens.unwrap_or(0),
                cache_read_tokens: u
                    .prompt_tokens_details
                    .and_then(|d| d.cached_tokens)
                    .unwrap_or(0),
                ..Usage::default()
            },
            None => Usage {
                input_tokens: request.approx_input_tokens(),
                output_tokens: approx_tokens(self.output_chars),
                ..Usage::default()
            },
        };
        ModelReply { tool_calls, usage }
    }
}

/// The call's input: the arguments' JSON (`{}` when empty), or
/// `{"_raw": text}` when they do not parse, so the loop answers the model
/// with a schema error.
fn parse_arguments(arguments: &str) -> Value {
    let trimmed = arguments.trim();
    if trimmed.is_empty() {
        return json!({});
    }
    serde_json::from_str(trimmed).unwrap_or_else(|_| json!({"_raw": arguments}))
}

// --- Wire types (lenient: every field optional, `null` allowed) ------------

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Chunk {
    #[serde(deserialize_with = "super::null_default")]
    choices: Vec<Choice>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Choice {
    index: Option<u64>,
    #[serde(deserialize_with = "super::null_default")]
    delta: Delta,
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Delta {
    content: Option<String>,
    /// vLLM, DeepSeek, llama.cpp …
    reasoning_content: Option<String>,
    /// Ollama, OpenRouter …
    reasoning: Option<String>,
    #[serde(deserialize_with = "super::null_default")]
    tool_calls: Vec<WireToolCall>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireToolCall {
    index: Option<usize>,
    id: Option<String>,
    function: Option<WireFunction>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireFunction {
    name: Option<String>,
    arguments: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptTokensDetails>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct PromptTokensDetails {
    cached_tokens: Option<u64>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn arguments_parse_or_keep_their_text() {
        assert_eq!(parse_arguments(""), json!({}));
        assert_eq!(parse_arguments("{\"a\":1}"), json!({"a": 1}));
        assert_eq!(parse_arguments("{\"a\":"), json!({"_raw": "{\"a\":"}));
    }

    #[test]
    fn api_errors_prefer_the_message() {
        assert_eq!(
            api_error(r#"{"error":{"message":"bad model","type":"x"}}"#),
            "bad model"
        );
        assert_eq!(api_error(r#"{"error":"nope"}"#), "nope");
        assert_eq!(api_error(""), "(empty body)");
        assert_eq!(api_error("plain"), "plain");
    }

    #[test]
    fn fragments_without_index_or_type_still_assemble() {
        let mut s = StreamState::default();
        let frag = |v: Value| serde_json::from_value::<WireToolCall>(v).unwrap();
        // Arguments in one piece, as an object, no index, no type.
        s.add_fragment(frag(
            json!({"id": "a", "function": {"name": "f", "arguments": {"x": 1}}}),
        ));
        // Same index 0 but a new id: a second call (seen from Gemini).
        s.add_fragment(frag(
            json!({"index": 0, "id": "b", "function": {"name": "g", "arguments": "{\"y\""}}),
        ));
        s.add_fragment(frag(json!({"index": 0, "function": {"arguments": ":2}"}})));
        let names: Vec<_> = s.calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["f", "g"]);
        assert_eq!(parse_arguments(&s.calls[0].arguments), json!({"x": 1}));
        assert_eq!(parse_arguments(&s.calls[1].arguments), json!({"y": 2}));
    }

    fn events(chunks: &[&'static [u8]], then_silence: bool) -> Events {
        let chunks: Vec<Result<bytes::Bytes, String>> = chunks
            .iter()
            .map(|c| Ok(bytes::Bytes::from_static(c)))
            .collect();
        let chunks = futures_util::stream::iter(chunks);
        if then_silence {
            Events::new(
                futures_util::StreamExt::chain(chunks, futures_util::stream::pending()),
                Duration::from_millis(100),
            )
        } else {
            Events::new(chunks, IDLE_TIMEOUT)
        }
    }

    #[tokio::test]
    async fn a_silent_stream_times_out() {
        let (tx, _rx) = tokio::sync::mpsc::channel(16);
        let mut sink = StepSink::new(&tx);
        let stream = events(
            &[b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"],
            true,
        );
        let started = std::time::Instant::now();
        let err = read_stream(stream, &mut sink).await.unwrap_err();
        assert_eq!(err, "openai stream idle for 100ms");
        assert_eq!(http::duration_text(IDLE_TIMEOUT), "60s");
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(sink.finish().await, "hi");
    }

    #[tokio::test]
    async fn a_stream_without_its_end_is_an_error_and_a_chunk_error_fails() {
        let (tx, _rx) = tokio::sync::mpsc::channel(16);
        let mut sink = StepSink::new(&tx);
        let body = events(
            &[b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"],
            false,
        );
        let err = read_stream(body, &mut sink).await.unwrap_err();
        assert_eq!(err, "openai stream ended early");

        let body = events(
            &[b"data: {\"error\":{\"message\":\"overloaded\"}}\n\n"],
            false,
        );
        let err = read_stream(body, &mut sink).await.unwrap_err();
        assert_eq!(err, "openai stream error: overloaded");

        // A finish reason without `[DONE]` (or a blank line) is a complete
        // step.
        let body = events(
            &[b"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}"],
            false,
        );
        let state = read_stream(body, &mut sink).await.unwrap();
        assert_eq!(state.finish_reason.as_deref(), Some("stop"));

        // Half an event that does not parse is an error.
        let body = events(&[b"data: {\"choices\":[{\"del"], false);
        let err = read_stream(body, &mut sink).await.unwrap_err();
        assert!(
            err.starts_with("openai sent an unreadable stream event"),
            "{err}"
        );
    }

    #[test]
    fn exhausted_retries_say_so() {
        let failed = Failed {
            error: HttpError::Status {
                status: reqwest::StatusCode::BAD_GATEWAY,
                body: "{\"error\":{\"message\":\"down\"}}".into(),
                retry_after: None,
            },
            attempts: 4,
            exhausted: true,
        };
        assert_eq!(
            failure_message(&failed),
            "openai returned 502 Bad Gateway: down (gave up after 4 attempts)"
        );
    }
}
