//! The `openai` provider: one streamed Chat Completions request per step,
//! against OpenAI or a compatible server (Ollama, vLLM, llama.cpp, LM Studio,
//! OpenRouter …).
//!
//! A thin client on reqwest with its own SSE reader, so the raw stream stays
//! visible and servers that omit fields still work: every wire struct is
//! `serde(default)`, tool-call fragments are matched by `index` or `id`,
//! `type` is never required, and arguments may come in one piece or many.
//!
//! Robustness: a connect timeout, an idle timeout between chunks, and up to
//! [`MAX_RETRIES`] retries (exponential backoff with jitter, or the server's
//! `Retry-After`) on connection errors, 429 and 5xx, all before the first
//! byte of a body reaches the sink; once a step streams, an error fails it.
//! Cancelling the turn ends the step at once, which drops (aborts) the
//! request.
//! The API key goes into the `Authorization` header only: it is redacted
//! from every message this module produces.

use std::hash::BuildHasher;
use std::time::Duration;

use agentkit_manifest::{Agent, ModelSpec};
use agentkit_protocol::{Message, ToolCall, Usage};
use futures_util::{Stream, StreamExt};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value, json};

use super::{ModelReply, StepRequest, StepSink, approx_tokens};
use crate::credentials::Endpoint;

/// How long establishing a connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the server may stay silent: before the response headers and
/// between two chunks of the stream.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Retries after the first attempt.
pub(crate) const MAX_RETRIES: u32 = 3;
/// The longest `Retry-After` honoured.
const RETRY_AFTER_CAP: Duration = Duration::from_secs(30);
/// The first backoff; it doubles with every retry up to [`BACKOFF_MAX`].
const BACKOFF_BASE: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(8);
/// How much of a non-JSON error body goes into a message.
const ERROR_BODY_CHARS: usize = 300;

/// The public API, which always needs a key (local servers often do not).
const OPENAI_HOST: &str = "api.openai.com";

/// The `openai` model of one turn.
#[derive(Debug)]
pub(crate) struct OpenAiTurn {
    client: reqwest::Client,
    /// `{base_url}/chat/completions`.
    url: String,
    api_key: Option<ApiKey>,
    model: String,
    params: Map<String, Value>,
    idle_timeout: Duration,
}

/// A key that never prints.
struct ApiKey(String);

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

impl OpenAiTurn {
    /// Checks the endpoint and key. A missing key is an error only for the
    /// public API; local servers are called without `Authorization`.
    pub(crate) fn new(spec: &ModelSpec, endpoint: &Endpoint) -> Result<OpenAiTurn, String> {
        if spec.id.trim().is_empty() {
            return Err("model `openai:` needs a model id, such as \"openai:gpt-4.1-mini\"".into());
        }
        let base = endpoint.base_url.trim().trim_end_matches('/');
        let parsed = reqwest::Url::parse(base)
            .map_err(|e| format!("invalid OpenAI base URL `{base}`: {e}"))?;
        let api_key = endpoint
            .api_key
            .as_ref()
            .filter(|k| !k.trim().is_empty())
            .map(|k| ApiKey(k.trim().to_owned()));
        if api_key.is_none() && parsed.host_str() == Some(OPENAI_HOST) {
            return Err("OPENAI_API_KEY is not set (or pass --api-key)".into());
        }
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {}", error_chain(&e)))?;
        Ok(OpenAiTurn {
            client,
            url: format!("{base}/chat/completions"),
            api_key,
            model: spec.id.clone(),
            params: spec.params.clone(),
            idle_timeout: IDLE_TIMEOUT,
        })
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
        let work = async {
            let response = self.send(&body).await?;
            if is_json(&response) {
                // A server that does not stream answers with one object.
                let text = tokio::time::timeout(self.idle_timeout, response.text())
                    .await
                    .map_err(|_| {
                        format!(
                            "openai response idle for {}",
                            seconds_or_millis(self.idle_timeout)
                        )
                    })?
                    .map_err(|e| format!("cannot read the openai response: {}", error_chain(&e)))?;
                return read_completion(&text, sink).await;
            }
            read_stream(response.bytes_stream(), sink, self.idle_timeout).await
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
            Err(message) => Err(self.redact(message)),
        }
    }

    /// Sends the request, retrying connection errors, 429 and 5xx. Returns
    /// a response whose body has not been read.
    async fn send(&self, body: &Value) -> Result<reqwest::Response, String> {
        let mut attempt = 0;
        loop {
            let mut builder = self
                .client
                .post(&self.url)
                .header(reqwest::header::ACCEPT, "text/event-stream")
                .json(body);
            if let Some(key) = &self.api_key {
                builder = builder.bearer_auth(&key.0);
            }
            let (error, retry_after) =
                match tokio::time::timeout(self.idle_timeout, builder.send()).await {
                    Err(_) => {
                        return Err(format!(
                            "openai sent no response for {}",
                            seconds_or_millis(self.idle_timeout)
                        ));
                    }
                    Ok(Err(e)) if e.is_builder() => {
                        return Err(format!("cannot build the request: {}", error_chain(&e)));
                    }
                    Ok(Err(e)) => (
                        format!("cannot reach {}: {}", self.url, error_chain(&e)),
                        None,
                    ),
                    Ok(Ok(response)) if response.status().is_success() => return Ok(response),
                    Ok(Ok(response)) => {
                        let status = response.status();
                        let retry_after = retry_after(response.headers());
                        let text = tokio::time::timeout(self.idle_timeout, response.text())
                            .await
                            .ok()
                            .and_then(Result::ok)
                            .unwrap_or_default();
                        let error = format!("openai returned {status}: {}", api_error(&text));
                        let retryable = status == reqwest::StatusCode::TOO_MANY_REQUESTS
                            || status.is_server_error();
                        if !retryable {
                            return Err(error);
                        }
                        (error, retry_after)
                    }
                };
            if attempt >= MAX_RETRIES {
                return Err(format!("{error} (gave up after {} attempts)", attempt + 1));
            }
            let delay = retry_after.unwrap_or_else(|| backoff(attempt));
            tracing::warn!(
                error = %self.redact(error),
                retry_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                "openai request failed; retrying"
            );
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    /// Removes the key from a message (a server may echo it back).
    fn redact(&self, message: String) -> String {
        match &self.api_key {
            Some(key) if message.contains(&key.0) => message.replace(&key.0, "<redacted>"),
            _ => message,
        }
    }
}

/// `60s` or `250ms`, for messages.
fn seconds_or_millis(d: Duration) -> String {
    if d.subsec_millis() == 0 && d.as_secs() > 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

fn is_json(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"))
}

/// `0.5 s · 2^attempt`, at most 8 s, scaled by a random 75–100 %.
fn backoff(attempt: u32) -> Duration {
    let exp = BACKOFF_BASE
        .saturating_mul(2u32.saturating_pow(attempt))
        .min(BACKOFF_MAX);
    // A randomly keyed hasher is random enough for jitter.
    let random = std::collections::hash_map::RandomState::new().hash_one(attempt);
    let fraction = 0.75 + 0.25 * ((random % 1000) as f64 / 1000.0);
    exp.mul_f64(fraction)
}

/// `retry-after-ms` or `retry-after` (seconds; HTTP dates are ignored),
/// capped at [`RETRY_AFTER_CAP`].
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let number = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    let delay = number("retry-after-ms")
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
        .or_else(|| number("retry-after").map(Duration::from_secs_f64))?;
    Some(delay.min(RETRY_AFTER_CAP))
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

/// An error and its sources, joined by `: `.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

// --- The request -----------------------------------------------------------

/// The Chat Completions body: the model's `params` are merged in, but never
/// replace `model`, `messages`, `stream` or `tools`.
fn request_body(
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
    messages.extend(conversation.iter().map(wire_message));

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

fn wire_message(message: &Message) -> Value {
    match message {
        Message::User { text } => json!({"role": "user", "content": text}),
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
            let content = match output {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            json!({"role": "tool", "tool_call_id": call_id, "content": content})
        }
    }
}

// --- The stream ------------------------------------------------------------

/// Reads a Chat Completions event stream into `sink`, failing when the
/// server goes quiet for `idle` or the stream ends before its end.
async fn read_stream<S, B, E>(
    stream: S,
    sink: &mut StepSink<'_>,
    idle: Duration,
) -> Result<StreamState, String>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
    E: std::error::Error,
{
    let mut stream = std::pin::pin!(stream);
    let mut parser = SseParser::default();
    let mut state = StreamState::default();
    loop {
        let next = tokio::time::timeout(idle, stream.next())
            .await
            .map_err(|_| format!("openai stream idle for {}", seconds_or_millis(idle)))?;
        match next {
            None => break,
            Some(Err(e)) => {
                return Err(format!("openai stream ended early: {}", error_chain(&e)));
            }
            Some(Ok(bytes)) => {
                for data in parser.push(bytes.as_ref()) {
                    state.on_data(&data, sink).await?;
                    if state.done {
                        return Ok(state);
                    }
                }
            }
        }
    }
    for data in parser.finish() {
        state.on_data(&data, sink).await?;
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

/// Splits a byte stream into the `data` of its server-sent events.
#[derive(Debug, Default)]
struct SseParser {
    buf: Vec<u8>,
    /// How much of `buf` holds no newline.
    scanned: usize,
    data: Option<String>,
}

impl SseParser {
    fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(pos) = self.buf[self.scanned..].iter().position(|&b| b == b'\n') {
            let end = self.scanned + pos;
            let line: Vec<u8> = self.buf.drain(..=end).collect();
            self.scanned = 0;
            self.line(&line[..end], &mut out);
        }
        self.scanned = self.buf.len();
        out
    }

    /// The events left when the stream ends without a final blank line.
    fn finish(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        let rest = std::mem::take(&mut self.buf);
        if !rest.is_empty() {
            self.line(&rest, &mut out);
        }
        self.line(b"", &mut out);
        out
    }

    fn line(&mut self, line: &[u8], out: &mut Vec<String>) {
        let line = String::from_utf8_lossy(line);
        let line = line.strip_suffix('\r').unwrap_or(&line);
        if line.is_empty() {
            out.extend(self.data.take());
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        // `event`, `id` and `retry` carry nothing Chat Completions needs.
        if field == "data" {
            match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            }
        }
    }
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
    #[serde(deserialize_with = "null_default")]
    choices: Vec<Choice>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Choice {
    index: Option<u64>,
    #[serde(deserialize_with = "null_default")]
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
    #[serde(deserialize_with = "null_default")]
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

/// `null` reads as the default value.
fn null_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn sse_events_split_across_reads_and_lines() {
        let mut p = SseParser::default();
        let mut out = p.push(b": comment\r\nda");
        out.extend(p.push(b"ta: {\"a\":1}\r\n\r\ndata:x\ndata: y\n"));
        out.extend(p.push(b"\nevent: ping\ndata: [DONE]"));
        out.extend(p.finish());
        assert_eq!(out, ["{\"a\":1}", "x\ny", "[DONE]"]);
    }

    #[test]
    fn arguments_parse_or_keep_their_text() {
        assert_eq!(parse_arguments(""), json!({}));
        assert_eq!(parse_arguments("{\"a\":1}"), json!({"a": 1}));
        assert_eq!(parse_arguments("{\"a\":"), json!({"_raw": "{\"a\":"}));
    }

    #[test]
    fn retry_after_and_backoff_are_bounded() {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert("retry-after", "120".parse().unwrap());
        assert_eq!(retry_after(&h), Some(RETRY_AFTER_CAP));
        h.insert("retry-after-ms", "250".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
        h.clear();
        h.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), None);
        for attempt in 0..10 {
            let d = backoff(attempt);
            assert!(d <= BACKOFF_MAX && d >= BACKOFF_BASE.mul_f64(0.75), "{d:?}");
        }
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

    #[tokio::test]
    async fn a_silent_stream_times_out() {
        let (tx, _rx) = tokio::sync::mpsc::channel(16);
        let mut sink = StepSink::new(&tx);
        let first: Result<&[u8], std::fmt::Error> =
            Ok(b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n");
        let stream = futures_util::stream::iter([first]).chain(futures_util::stream::pending());
        let started = std::time::Instant::now();
        let err = read_stream(stream, &mut sink, Duration::from_millis(100))
            .await
            .unwrap_err();
        assert_eq!(err, "openai stream idle for 100ms");
        assert_eq!(seconds_or_millis(IDLE_TIMEOUT), "60s");
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(sink.finish().await, "hi");
    }

    #[tokio::test]
    async fn a_stream_without_its_end_is_an_error_and_a_chunk_error_fails() {
        let (tx, _rx) = tokio::sync::mpsc::channel(16);
        let mut sink = StepSink::new(&tx);
        let body: [Result<&[u8], std::fmt::Error>; 1] = [Ok(
            b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n",
        )];
        let err = read_stream(futures_util::stream::iter(body), &mut sink, IDLE_TIMEOUT)
            .await
            .unwrap_err();
        assert_eq!(err, "openai stream ended early");

        let body: [Result<&[u8], std::fmt::Error>; 1] =
            [Ok(b"data: {\"error\":{\"message\":\"overloaded\"}}\n\n")];
        let err = read_stream(futures_util::stream::iter(body), &mut sink, IDLE_TIMEOUT)
            .await
            .unwrap_err();
        assert_eq!(err, "openai stream error: overloaded");

        // A finish reason without `[DONE]` is a complete step.
        let body: [Result<&[u8], std::fmt::Error>; 1] = [Ok(
            b"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}",
        )];
        let state = read_stream(futures_util::stream::iter(body), &mut sink, IDLE_TIMEOUT)
            .await
            .unwrap();
        assert_eq!(state.finish_reason.as_deref(), Some("stop"));
    }
}
