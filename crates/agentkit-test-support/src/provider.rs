//! A mock model provider speaking both wire formats agentkit's remote
//! providers use, on one [`MockServer`]:
//!
//! - OpenAI Chat Completions: `POST /v1/chat/completions`, streamed as
//!   `data:` chunks with `choices[].delta` (`content`, `reasoning_content`,
//!   `tool_calls[]` with arguments in fragments), a `finish_reason` chunk,
//!   a usage chunk with empty `choices` (`stream_options.include_usage`),
//!   then `data: [DONE]`.
//! - Anthropic Messages: `POST /v1/messages`, streamed as named events
//!   (`message_start` with input and cache token counts, `ping`,
//!   `content_block_start` / `_delta` / `_stop` for `thinking` (with its
//!   `signature_delta`), `text` and `tool_use` (`input_json_delta`),
//!   `message_delta` with `stop_reason` and output tokens, `message_stop`).
//!
//! A test scripts wire-neutral [`Reply`]s; each request takes the next one
//! and gets it in the format of the route it called, so one script drives
//! an `openai:*` and an `anthropic:*` agent alike. Point the agent at it
//! with [`MockProvider::openai_base_url`] (`OPENAI_BASE_URL`) or
//! [`MockProvider::anthropic_base_url`] (`ANTHROPIC_BASE_URL`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::mock::{MockResponse, MockServer, Recorded, StreamEnd};

/// The route of the OpenAI wire format.
pub const OPENAI_PATH: &str = "/v1/chat/completions";
/// The route of the Anthropic wire format.
pub const ANTHROPIC_PATH: &str = "/v1/messages";

/// One tool call of a step, its JSON arguments streamed in fragments.
#[derive(Debug, Clone)]
pub struct Call {
    pub id: String,
    pub name: String,
    /// Concatenated, the fragments are the arguments' JSON text.
    pub fragments: Vec<String>,
}

/// Token counts a step reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

/// How a streamed step ends.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum End {
    /// The whole answer, then the stream closes.
    #[default]
    Complete,
    /// The connection drops after the first half of the events.
    Cut,
    /// The first half of the events, then silence on an open connection.
    Stall,
    /// The provider's in-stream error event after the first half.
    ErrorEvent(String),
}

/// One model step: reasoning, text and tool calls, each streamed in
/// chunks.
#[derive(Debug, Clone, Default)]
pub struct Step {
    pub reasoning: Vec<String>,
    /// The thinking block's signature (Anthropic).
    pub signature: Option<String>,
    pub text: Vec<String>,
    pub calls: Vec<Call>,
    pub tokens: Tokens,
    pub end: End,
}

impl Step {
    /// A step answering `text` (in chunks of about 8 characters).
    pub fn text(text: &str) -> Step {
        Step {
            text: split(text, 8),
            ..Step::default()
        }
        .tokens(12, 4, 0, 0)
    }

    /// A step with no text yet (add calls or chunks).
    pub fn new() -> Step {
        Step::default().tokens(12, 4, 0, 0)
    }

    /// Text in exactly these chunks.
    pub fn chunks(mut self, chunks: &[&str]) -> Step {
        self.text = chunks.iter().map(|c| (*c).to_owned()).collect();
        self
    }

    /// Reasoning (`reasoning_content` / a `thinking` block), in chunks.
    pub fn reasoning(mut self, chunks: &[&str], signature: &str) -> Step {
        self.reasoning = chunks.iter().map(|c| (*c).to_owned()).collect();
        self.signature = Some(signature.to_owned());
        self
    }

    /// A tool call whose arguments are streamed in three fragments.
    pub fn call(mut self, id: &str, name: &str, args: &Value) -> Step {
        let text = args.to_string();
        let third = text.len().div_ceil(3).max(1);
        self.calls.push(Call {
            id: id.to_owned(),
            name: name.to_owned(),
            fragments: split(&text, third),
        });
        self
    }

    pub fn tokens(mut self, input: u64, output: u64, cache_read: u64, cache_write: u64) -> Step {
        self.tokens = Tokens {
            input,
            output,
            cache_read,
            cache_write,
        };
        self
    }

    pub fn end(mut self, end: End) -> Step {
        self.end = end;
        self
    }
}

/// Splits on character boundaries into pieces of about `size` bytes.
fn split(text: &str, size: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        current.push(c);
        if current.len() >= size {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() || out.is_empty() {
        out.push(current);
    }
    out
}

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    Step(Step),
    /// An error status with the provider's JSON error body.
    Status {
        code: u16,
        retry_after: Option<String>,
        message: String,
    },
}

impl Reply {
    /// `code` with the provider's error body and no `Retry-After`.
    pub fn status(code: u16) -> Reply {
        Reply::Status {
            code,
            retry_after: None,
            message: format!("mock error {code}"),
        }
    }

    /// `code` with `Retry-After: <seconds>`.
    pub fn retry_after(code: u16, seconds: &str) -> Reply {
        Reply::Status {
            code,
            retry_after: Some(seconds.to_owned()),
            message: format!("mock error {code}"),
        }
    }
}

impl From<Step> for Reply {
    fn from(step: Step) -> Reply {
        Reply::Step(step)
    }
}

/// The running mock provider.
#[derive(Debug)]
pub struct MockProvider {
    server: MockServer,
    script: Arc<Mutex<VecDeque<Reply>>>,
}

impl MockProvider {
    /// Serves `replies` in order; a request past the script gets a 500
    /// saying so.
    pub fn start(replies: Vec<Reply>) -> MockProvider {
        let script = Arc::new(Mutex::new(VecDeque::from(replies)));
        let queue = script.clone();
        let server = MockServer::start(move |req| {
            let wire = match req.path.as_str() {
                OPENAI_PATH => Wire::OpenAi,
                ANTHROPIC_PATH => Wire::Anthropic,
                other => {
                    return MockResponse::json(
                        404,
                        &json!({"error": {"message": format!("no route {other}")}}),
                    );
                }
            };
            let next = queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
            match next {
                Some(reply) => wire.render(&reply, req),
                None => wire.error(500, "no reply scripted", None),
            }
        });
        MockProvider { server, script }
    }

    /// Answers each request with what `respond` makes of its JSON body
    /// (a long conversation whose replies depend on what was asked, such
    /// as a compaction's summary request); nothing is scripted.
    pub fn responding(respond: impl Fn(&Value) -> Reply + Send + Sync + 'static) -> MockProvider {
        let script = Arc::new(Mutex::new(VecDeque::new()));
        let server = MockServer::start(move |req| {
            let wire = match req.path.as_str() {
                OPENAI_PATH => Wire::OpenAi,
                ANTHROPIC_PATH => Wire::Anthropic,
                other => {
                    return MockResponse::json(
                        404,
                        &json!({"error": {"message": format!("no route {other}")}}),
                    );
                }
            };
            wire.render(&respond(&req.json()), req)
        });
        MockProvider { server, script }
    }

    /// Appends replies to the script.
    pub fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        self.script
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(replies);
    }

    /// `OPENAI_BASE_URL` for this mock (`http://127.0.0.1:<port>/v1`).
    pub fn openai_base_url(&self) -> String {
        format!("{}/v1", self.server.url())
    }

    /// `ANTHROPIC_BASE_URL` for this mock (`http://127.0.0.1:<port>`).
    pub fn anthropic_base_url(&self) -> String {
        self.server.url()
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.server.requests()
    }

    /// The requests from the `from`th on.
    pub fn requests_from(&self, from: usize) -> Vec<Recorded> {
        self.server.requests_from(from)
    }

    /// How many requests arrived so far.
    pub fn request_count(&self) -> usize {
        self.server.request_count()
    }

    /// The JSON bodies of every request so far.
    pub fn bodies(&self) -> Vec<Value> {
        self.requests().iter().map(Recorded::json).collect()
    }

    /// Replies not yet taken.
    pub fn remaining(&self) -> usize {
        self.script.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// The underlying server (waiting for requests, dropped streams).
    pub fn server(&self) -> &MockServer {
        &self.server
    }
}

#[derive(Debug, Clone, Copy)]
enum Wire {
    OpenAi,
    Anthropic,
}

impl Wire {
    fn error(self, code: u16, message: &str, retry_after: Option<&str>) -> MockResponse {
        let body = match self {
            Wire::OpenAi => json!({"error": {
                "message": message,
                "type": if code == 429 { "rate_limit_error" } else { "server_error" },
                "param": null,
                "code": null
            }}),
            Wire::Anthropic => json!({"type": "error", "error": {
                "type": match code {
                    429 => "rate_limit_error",
                    529 => "overloaded_error",
                    400 => "invalid_request_error",
                    401 => "authentication_error",
                    _ => "api_error",
                },
                "message": message
            }}),
        };
        let mut response = MockResponse::json(code, &body);
        if let Some(after) = retry_after {
            response = response.header("retry-after", after);
        }
        response
    }

    fn render(self, reply: &Reply, req: &Recorded) -> MockResponse {
        match reply {
            Reply::Status {
                code,
                retry_after,
                message,
            } => self.error(*code, message, retry_after.as_deref()),
            Reply::Step(step) => {
                let (mut events, error): (Vec<String>, fn(&str) -> String) = match self {
                    Wire::OpenAi => (openai_events(step, req), openai_error_event),
                    Wire::Anthropic => (anthropic_events(step), anthropic_error_event),
                };
                let end = match &step.end {
                    End::Complete => StreamEnd::Close,
                    End::Cut => {
                        events.truncate(events.len() / 2);
                        StreamEnd::Cut
                    }
                    End::Stall => {
                        events.truncate(events.len() / 2);
                        StreamEnd::Stall
                    }
                    End::ErrorEvent(message) => {
                        events.truncate(events.len() / 2);
                        events.push(error(message));
                        StreamEnd::Close
                    }
                };
                MockResponse::sse(events, end)
            }
        }
    }
}

fn data(v: &Value) -> String {
    format!("data: {v}\n\n")
}

fn openai_chunk(delta: Value, finish: Option<&str>) -> String {
    data(&json!({
        "id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1_700_000_000,
        "model": "mock", "system_fingerprint": null,
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]
    }))
}

fn openai_events(step: &Step, req: &Recorded) -> Vec<String> {
    let mut events = vec![openai_chunk(
        json!({"role": "assistant", "content": ""}),
        None,
    )];
    for r in &step.reasoning {
        events.push(openai_chunk(json!({"reasoning_content": r}), None));
    }
    for t in &step.text {
        events.push(openai_chunk(json!({"content": t}), None));
    }
    for (index, call) in step.calls.iter().enumerate() {
        events.push(openai_chunk(
            json!({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                "function": {"name": call.name, "arguments": ""}}]}),
            None,
        ));
        for f in &call.fragments {
            events.push(openai_chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": f}}]}),
                None,
            ));
        }
    }
    let finish = if step.calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    events.push(openai_chunk(json!({}), Some(finish)));
    // Usage comes only when the request asked for it, as documented.
    if req.json()["stream_options"]["include_usage"] == true {
        let t = step.tokens;
        events.push(data(&json!({
            "id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": "mock", "choices": [],
            "usage": {
                "prompt_tokens": t.input, "completion_tokens": t.output,
                "total_tokens": t.input + t.output,
                "prompt_tokens_details": {"cached_tokens": t.cache_read, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0}
            }
        })));
    }
    events.push("data: [DONE]\n\n".to_owned());
    events
}

fn openai_error_event(message: &str) -> String {
    data(
        &json!({"error": {"message": message, "type": "server_error", "param": null, "code": null}}),
    )
}

fn named(v: &Value) -> String {
    let name = v["type"].as_str().unwrap_or("message");
    format!("event: {name}\ndata: {v}\n\n")
}

fn anthropic_events(step: &Step) -> Vec<String> {
    let t = step.tokens;
    let mut events = vec![
        named(&json!({"type": "message_start", "message": {
            "id": "msg_mock", "type": "message", "role": "assistant", "content": [],
            "model": "mock", "stop_reason": null, "stop_sequence": null,
            "usage": {
                "input_tokens": t.input,
                "cache_creation_input_tokens": t.cache_write,
                "cache_read_input_tokens": t.cache_read,
                "output_tokens": 1
            }
        }})),
        named(&json!({"type": "ping"})),
    ];
    let mut index = 0;
    let delta = |index: usize, delta: Value| {
        named(&json!({"type": "content_block_delta", "index": index, "delta": delta}))
    };
    let start = |index: usize, block: Value| {
        named(&json!({"type": "content_block_start", "index": index, "content_block": block}))
    };
    let stop = |index: usize| named(&json!({"type": "content_block_stop", "index": index}));
    if !step.reasoning.is_empty() {
        events.push(start(
            index,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
        ));
        for r in &step.reasoning {
            events.push(delta(
                index,
                json!({"type": "thinking_delta", "thinking": r}),
            ));
        }
        if let Some(signature) = &step.signature {
            events.push(delta(
                index,
                json!({"type": "signature_delta", "signature": signature}),
            ));
        }
        events.push(stop(index));
        index += 1;
    }
    if !step.text.is_empty() {
        events.push(start(index, json!({"type": "text", "text": ""})));
        for c in &step.text {
            events.push(delta(index, json!({"type": "text_delta", "text": c})));
        }
        events.push(stop(index));
        index += 1;
    }
    for call in &step.calls {
        events.push(start(
            index,
            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": {}}),
        ));
        for f in &call.fragments {
            events.push(delta(
                index,
                json!({"type": "input_json_delta", "partial_json": f}),
            ));
        }
        events.push(stop(index));
        index += 1;
    }
    let reason = if step.calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    events.push(named(&json!({
        "type": "message_delta",
        "delta": {"stop_reason": reason, "stop_sequence": null},
        "usage": {"output_tokens": t.output}
    })));
    events.push(named(&json!({"type": "message_stop"})));
    events
}

fn anthropic_error_event(message: &str) -> String {
    named(&json!({"type": "error", "error": {"type": "overloaded_error", "message": message}}))
}
