//! The `anthropic` provider against an in-process Messages API: real HTTP
//! over loopback, SSE events as the API sends them, and failures (error
//! statuses, error events, dropped and stalled streams, interrupts).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use agentkit_harness::{Endpoint, FinishReason, ProviderConfig, StepEvent, TurnOutcome, run_turn};
use agentkit_manifest::ModelSpec;
use agentkit_protocol::Usage;
use agentkit_test_support::mock::{MockResponse, MockServer, StreamEnd};
use axum::http::HeaderMap;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::*;

const KEY: &str = "sk-ant-secret";

/// One part of a streamed answer.
#[derive(Clone)]
enum Part {
    Event(Value),
    /// Nothing more, but the connection stays open.
    Stall,
    /// The connection is cut.
    Drop,
}

/// One answer of the mock API.
#[derive(Clone)]
enum Reply {
    Sse(Vec<Part>),
    Status {
        code: u16,
        retry_after: Option<&'static str>,
        body: Value,
    },
}

/// The shared recording mock server, answering the scripted replies in
/// order.
struct MockApi {
    url: String,
    server: MockServer,
}

impl MockApi {
    async fn start(replies: Vec<Reply>) -> MockApi {
        let replies = Mutex::new(VecDeque::from(replies));
        let server = MockServer::start(move |req| {
            assert_eq!(req.path, "/v1/messages");
            match replies.lock().unwrap().pop_front() {
                None => MockResponse::text(500, "no reply scripted"),
                Some(Reply::Status {
                    code,
                    retry_after,
                    body,
                }) => {
                    let response = MockResponse::json(code, &body);
                    match retry_after {
                        Some(after) => response.header("retry-after", after),
                        None => response,
                    }
                }
                Some(Reply::Sse(parts)) => {
                    let mut events = Vec::new();
                    let mut end = StreamEnd::Close;
                    for part in parts {
                        match part {
                            Part::Event(data) => {
                                let name = data["type"].as_str().unwrap_or("message").to_owned();
                                events.push(format!("event: {name}\ndata: {data}\n\n"));
                            }
                            Part::Stall => {
                                end = StreamEnd::Stall;
                                break;
                            }
                            Part::Drop => {
                                end = StreamEnd::Cut;
                                break;
                            }
                        }
                    }
                    MockResponse::sse(events, end)
                }
            }
        });
        MockApi {
            url: server.url(),
            server,
        }
    }

    fn requests(&self) -> Vec<(HeaderMap, Value)> {
        self.server
            .requests()
            .iter()
            .map(|r| {
                let mut headers = HeaderMap::new();
                for (k, v) in &r.headers {
                    headers.append(
                        axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                        v.parse().unwrap(),
                    );
                }
                (headers, r.json())
            })
            .collect()
    }

    fn bodies(&self) -> Vec<Value> {
        self.requests().into_iter().map(|(_, b)| b).collect()
    }

    /// A streamed body was dropped before its end: the client went away.
    fn stream_dropped(&self) -> bool {
        self.server.streams_dropped() > 0
    }
}

// Realistic events, as the Messages API streams them.

fn message_start(input: u64, cache_write: u64, cache_read: u64) -> Part {
    Part::Event(json!({
        "type": "message_start",
        "message": {
            "id": "msg_01", "type": "message", "role": "assistant", "content": [],
            "model": "claude-test", "stop_reason": null, "stop_sequence": null,
            "usage": {
                "input_tokens": input,
                "cache_creation_input_tokens": cache_write,
                "cache_read_input_tokens": cache_read,
                "output_tokens": 1
            }
        }
    }))
}

fn block_start(index: usize, block: Value) -> Part {
    Part::Event(json!({"type": "content_block_start", "index": index, "content_block": block}))
}

fn delta(index: usize, delta: Value) -> Part {
    Part::Event(json!({"type": "content_block_delta", "index": index, "delta": delta}))
}

fn text_delta(index: usize, text: &str) -> Part {
    delta(index, json!({"type": "text_delta", "text": text}))
}

fn block_stop(index: usize) -> Part {
    Part::Event(json!({"type": "content_block_stop", "index": index}))
}

fn ping() -> Part {
    Part::Event(json!({"type": "ping"}))
}

fn message_end(stop_reason: &str, output: u64) -> Vec<Part> {
    vec![
        Part::Event(json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": output}
        })),
        Part::Event(json!({"type": "message_stop"})),
    ]
}

/// A whole answer of plain text in the given deltas.
fn text_answer(deltas: &[&str]) -> Reply {
    let mut parts = vec![
        message_start(10, 0, 0),
        block_start(0, json!({"type": "text", "text": ""})),
    ];
    parts.extend(deltas.iter().map(|d| text_delta(0, d)));
    parts.push(block_stop(0));
    parts.extend(message_end("end_turn", 5));
    Reply::Sse(parts)
}

fn overloaded(code: u16, retry_after: Option<&'static str>) -> Reply {
    Reply::Status {
        code,
        retry_after,
        body: json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    }
}

const ECHO_TOOL: (&str, &str) = (
    "tools/echo.toml",
    r#"description = "Echo the word"
command = ["python3", "echo.py"]
[input_schema]
type = "object"
required = ["word"]
additionalProperties = false
properties.word = { type = "string", minLength = 1 }
"#,
);
const ECHO_PY: (&str, &str) = (
    "tools/echo.py",
    "import json, sys\nprint(json.dumps({'echo': json.load(sys.stdin)['word']}))\n",
);
/// Built-in workspace tools are off so request bodies list only the
/// project's own tools.
const AGENT_TOML: (&str, &str) = (
    "agent.toml",
    "model = \"anthropic:claude-test\"\n[harness]\nbuiltin_tools = []\n",
);

fn project(extra: &[(&str, &str)]) -> TestProject {
    let mut files = vec![AGENT_TOML];
    files.extend_from_slice(extra);
    TestProject::new(&files)
}

fn model(project: &TestProject) -> ModelSpec {
    project.agent.config.model.clone().unwrap()
}

/// A turn input that reaches `api` with the secret key.
fn input_for(project: &TestProject, spec: ModelSpec, api: &MockApi, message: &str) -> TurnInput {
    let mut input = project.input(spec, message);
    input.providers = Arc::new(ProviderConfig {
        anthropic: Endpoint {
            api_key: Some(KEY.to_owned()),
            base_url: api.url.clone(),
        },
        ..ProviderConfig::default()
    });
    input
}

/// Runs the turn and checks the key shows nowhere in what it produced.
async fn run_checked(input: TurnInput) -> (TurnOutcome, Vec<StepEvent>) {
    let (outcome, events) = run(input).await;
    let seen = format!("{outcome:?}\n{}\n{events:?}", render(&events));
    assert!(!seen.contains(KEY), "the key leaked: {seen}");
    (outcome, events)
}

fn failed(outcome: &TurnOutcome) -> &str {
    match outcome {
        TurnOutcome::Failed { message } => message,
        other => panic!("expected a failed turn, got {other:?}"),
    }
}

fn deltas(events: &[StepEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            StepEvent::MessageAppended { delta, .. } => Some(delta.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn streams_text_with_usage_and_sends_the_documented_request() {
    let mut parts = vec![
        message_start(25, 7, 11),
        block_start(0, json!({"type": "text", "text": ""})),
        ping(),
        text_delta(0, "Hello"),
        text_delta(0, " there,"),
        text_delta(0, " world."),
        block_stop(0),
    ];
    parts.extend(message_end("end_turn", 12));
    let api = MockApi::start(vec![Reply::Sse(parts)]).await;
    let project = project(&[(
        "skills/forecast.md",
        "---\ndescription: Use when asked for a forecast\n---\nSteps.\n",
    )]);
    let (outcome, events) = run_checked(input_for(&project, model(&project), &api, "hi")).await;

    let TurnOutcome::Completed {
        result,
        usage,
        output,
        sizing,
        cost_usd,
    } = outcome
    else {
        panic!("{outcome:?}");
    };
    // `claude-test` is in no price table: its cost is unknown, not 0.
    assert_eq!(cost_usd, None);
    assert_eq!(result, "Hello there, world.");
    assert_eq!(
        usage,
        Usage {
            input_tokens: 25,
            output_tokens: 12,
            cache_read_tokens: 11,
            cache_write_tokens: 7,
        }
    );
    assert_eq!(output, None);
    // Claude's window is known, so the request was sized: Anthropic's
    // count is its input tokens plus the cached ones.
    assert_eq!(sizing.counted_input_tokens, 25 + 11 + 7);
    assert!(sizing.estimated_input_tokens > 0, "{sizing:?}");
    assert_eq!(deltas(&events), ["Hello", " there,", " world."]);
    assert!(events.contains(&StepEvent::MessageCompleted {
        text: "Hello there, world.".into(),
        finish_reason: FinishReason::Stop,
    }));

    let requests = api.requests();
    assert_eq!(requests.len(), 1);
    let (headers, body) = &requests[0];
    assert_eq!(headers["x-api-key"], KEY);
    assert_eq!(headers["anthropic-version"], "2023-06-01");
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(body["model"], "claude-test");
    assert_eq!(body["max_tokens"], 4096);
    assert_eq!(body["stream"], true);
    // Prompt caching: breakpoints on the system prompt, the last tool and
    // the last block of the conversation.
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}])
    );
    assert_eq!(
        body["system"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    let tools = body["tools"].as_array().unwrap();
    assert_eq!(
        tools.last().unwrap()["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert!(
        tools[..tools.len() - 1]
            .iter()
            .all(|t| t.get("cache_control").is_none())
    );
    let system = body["system"][0]["text"].as_str().unwrap();
    assert!(system.starts_with("You are a test agent."), "{system}");
    assert!(
        system.contains("- `forecast`: Use when asked for a forecast"),
        "{system}"
    );
    // No server tools and no built-ins: the only tool is `load_skill`,
    // offered because the agent has a skill.
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["load_skill"], "{body}");
}

#[tokio::test]
async fn tool_input_fragments_become_a_call_and_results_merge_into_one_user_message() {
    let mut first = vec![
        message_start(50, 0, 0),
        block_start(0, json!({"type": "text", "text": ""})),
        text_delta(0, "Let me echo."),
        block_stop(0),
        block_start(
            1,
            json!({"type": "tool_use", "id": "toolu_01", "name": "echo", "input": {}}),
        ),
        delta(1, json!({"type": "input_json_delta", "partial_json": ""})),
        delta(
            1,
            json!({"type": "input_json_delta", "partial_json": "{\"wo"}),
        ),
        delta(
            1,
            json!({"type": "input_json_delta", "partial_json": "rd\": \"hel"}),
        ),
        delta(
            1,
            json!({"type": "input_json_delta", "partial_json": "lo\"}"}),
        ),
        block_stop(1),
        block_start(
            2,
            json!({"type": "tool_use", "id": "toolu_02", "name": "echo", "input": {}}),
        ),
        delta(
            2,
            json!({"type": "input_json_delta", "partial_json": "{\"word\": \"again\"}"}),
        ),
        block_stop(2),
    ];
    first.extend(message_end("tool_use", 30));
    let api = MockApi::start(vec![Reply::Sse(first), text_answer(&["Echoed ", "twice."])]).await;
    let project = project(&[ECHO_TOOL, ECHO_PY]);
    let (outcome, events) = run_checked(input_for(&project, model(&project), &api, "echo")).await;

    assert_eq!(completed(&outcome), "Echoed twice.");
    // Results arrive in completion order.
    let mut results = results(&events);
    results.sort_by_key(|r| r.1.to_string());
    assert_eq!(
        results,
        vec![
            ("echo".to_owned(), json!({"echo": "again"}), false),
            ("echo".to_owned(), json!({"echo": "hello"}), false),
        ]
    );
    let calls = events
        .iter()
        .find_map(|e| match e {
            StepEvent::ActionsRequested { calls } => Some(calls.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(calls[0].call_id, "toolu_01");
    assert_eq!(calls[0].input, json!({"word": "hello"}));
    let TurnOutcome::Completed { usage, .. } = outcome else {
        unreachable!()
    };
    assert_eq!((usage.input_tokens, usage.output_tokens), (60, 35));

    let bodies = api.bodies();
    assert_eq!(bodies.len(), 2);
    assert_eq!(
        bodies[0]["tools"],
        json!([{
            "name": "echo",
            "description": "Echo the word",
            "input_schema": {
                "type": "object", "required": ["word"], "additionalProperties": false,
                "properties": {"word": {"type": "string", "minLength": 1}}
            },
            "cache_control": {"type": "ephemeral"}
        }])
    );
    assert_eq!(
        bodies[1]["messages"],
        json!([
            {"role": "user", "content": "echo"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Let me echo."},
                {"type": "tool_use", "id": "toolu_01", "name": "echo", "input": {"word": "hello"}},
                {"type": "tool_use", "id": "toolu_02", "name": "echo", "input": {"word": "again"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01", "content": "{\"echo\":\"hello\"}", "is_error": false},
                {"type": "tool_result", "tool_use_id": "toolu_02", "content": "{\"echo\":\"again\"}", "is_error": false,
                 "cache_control": {"type": "ephemeral"}},
            ]},
        ])
    );
}

#[tokio::test]
async fn thinking_streams_as_reasoning_and_goes_back_with_the_tool_calls() {
    let mut first = vec![
        message_start(40, 0, 0),
        block_start(
            0,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
        ),
        delta(
            0,
            json!({"type": "thinking_delta", "thinking": "The user wants "}),
        ),
        delta(0, json!({"type": "thinking_delta", "thinking": "an echo."})),
        delta(
            0,
            json!({"type": "signature_delta", "signature": "EqQBCgIYAhIM"}),
        ),
        block_stop(0),
        block_start(
            1,
            json!({"type": "tool_use", "id": "toolu_09", "name": "echo", "input": {}}),
        ),
        delta(
            1,
            json!({"type": "input_json_delta", "partial_json": "{\"word\":\"hm\"}"}),
        ),
        block_stop(1),
    ];
    first.extend(message_end("tool_use", 20));
    let api = MockApi::start(vec![Reply::Sse(first), text_answer(&["Done."])]).await;
    let project = project(&[ECHO_TOOL, ECHO_PY]);
    let mut spec = model(&project);
    spec.params.insert(
        "thinking".into(),
        json!({"type": "enabled", "budget_tokens": 2048}),
    );
    spec.params.insert("temperature".into(), json!(1));
    let (outcome, events) = run_checked(input_for(&project, spec, &api, "think")).await;

    assert_eq!(completed(&outcome), "Done.");
    let reasoning: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            StepEvent::ReasoningAppended { delta } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasoning, ["The user wants ", "an echo."]);
    assert!(events.contains(&StepEvent::ReasoningCompleted {
        text: "The user wants an echo.".into()
    }));

    let bodies = api.bodies();
    assert_eq!(
        bodies[0]["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert_eq!(bodies[0]["temperature"], 1);
    // The default max_tokens leaves room for the thinking budget.
    assert_eq!(bodies[0]["max_tokens"], 2048 + 4096);
    assert_eq!(
        bodies[1]["messages"][1]["content"][0],
        json!({"type": "thinking", "thinking": "The user wants an echo.", "signature": "EqQBCgIYAhIM"})
    );
    assert_eq!(bodies[1]["messages"][1]["content"][1]["type"], "tool_use");
}

#[tokio::test]
async fn overloaded_is_retried_after_the_retry_after_delay() {
    let api = MockApi::start(vec![overloaded(529, Some("1")), text_answer(&["Fine."])]).await;
    let project = project(&[]);
    let started = Instant::now();
    let (outcome, _) = run_checked(input_for(&project, model(&project), &api, "hi")).await;
    assert_eq!(completed(&outcome), "Fine.");
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(api.requests().len(), 2);
}

#[tokio::test]
async fn retries_stop_after_three_and_client_errors_are_not_retried() {
    let api = MockApi::start(vec![
        overloaded(503, Some("0")),
        overloaded(503, Some("0")),
        overloaded(503, Some("0")),
        overloaded(503, Some("0")),
        text_answer(&["never"]),
    ])
    .await;
    let project = project(&[]);
    let (outcome, _) = run_checked(input_for(&project, model(&project), &api, "hi")).await;
    assert_eq!(
        failed(&outcome),
        "anthropic API error 503 Service Unavailable (overloaded_error): Overloaded"
    );
    assert_eq!(api.requests().len(), 4);

    // A 4xx fails at once with the API's message, and a key echoed by
    // the server is scrubbed.
    let api = MockApi::start(vec![Reply::Status {
        code: 401,
        retry_after: None,
        body: json!({"type": "error", "error": {"type": "authentication_error", "message": format!("invalid x-api-key {KEY}")}}),
    }])
    .await;
    let (outcome, _) = run_checked(input_for(&project, model(&project), &api, "hi")).await;
    assert_eq!(
        failed(&outcome),
        "anthropic API error 401 Unauthorized (authentication_error): invalid x-api-key <redacted>"
    );
    assert_eq!(api.requests().len(), 1);
}

#[tokio::test]
async fn an_error_event_mid_stream_fails_the_turn_with_its_message() {
    let api = MockApi::start(vec![Reply::Sse(vec![
        message_start(10, 0, 0),
        block_start(0, json!({"type": "text", "text": ""})),
        text_delta(0, "Partial"),
        Part::Event(json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})),
    ])])
    .await;
    let project = project(&[]);
    let (outcome, events) = run_checked(input_for(&project, model(&project), &api, "hi")).await;
    assert_eq!(
        failed(&outcome),
        "anthropic error (overloaded_error): Overloaded"
    );
    assert_eq!(deltas(&events), ["Partial"]);
    // Text already reached the client: no retry.
    assert_eq!(api.requests().len(), 1);
}

#[tokio::test]
async fn a_cut_connection_fails_the_turn_without_hanging() {
    let api = MockApi::start(vec![Reply::Sse(vec![
        message_start(10, 0, 0),
        block_start(0, json!({"type": "text", "text": ""})),
        text_delta(0, "Half an"),
        Part::Drop,
    ])])
    .await;
    let project = project(&[]);
    let started = Instant::now();
    let (outcome, events) = run_checked(input_for(&project, model(&project), &api, "hi")).await;
    assert_eq!(deltas(&events), ["Half an"]);
    let message = failed(&outcome);
    assert!(
        message.starts_with("anthropic stream ended early"),
        "{message}"
    );
    assert!(started.elapsed() < Duration::from_secs(15), "no hang");
    assert_eq!(api.requests().len(), 1);
}

#[tokio::test]
async fn a_silent_stream_times_out() {
    let api = MockApi::start(vec![Reply::Sse(vec![message_start(10, 0, 0), Part::Stall])]).await;
    let project = project(&[]);
    let mut spec = model(&project);
    spec.params
        .insert("stream_idle_timeout_ms".into(), json!(300));
    let started = Instant::now();
    let (outcome, _) = run_checked(input_for(&project, spec, &api, "hi")).await;
    assert_eq!(
        failed(&outcome),
        "anthropic stream stalled: no data for 300ms"
    );
    assert!(started.elapsed() < Duration::from_secs(10), "no hang");
    // The setting stays out of the request.
    assert!(api.bodies()[0].get("stream_idle_timeout_ms").is_none());
}

#[tokio::test]
async fn an_interrupt_ends_the_turn_and_the_request_at_once() {
    let api = MockApi::start(vec![Reply::Sse(vec![
        message_start(10, 0, 0),
        block_start(0, json!({"type": "text", "text": ""})),
        text_delta(0, "Thinking"),
        Part::Stall,
    ])])
    .await;
    let project = project(&[]);
    let input = input_for(&project, model(&project), &api, "hi");
    let cancel = input.cancel.clone();
    let (tx, mut rx) = mpsc::channel(1024);
    let turn = tokio::spawn(run_turn(input, tx));
    while let Some(event) = rx.recv().await {
        if matches!(event, StepEvent::MessageAppended { .. }) {
            break;
        }
    }
    let cancelled = Instant::now();
    cancel.cancel();
    let outcome = tokio::time::timeout(Duration::from_secs(2), turn)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outcome, TurnOutcome::Interrupted);
    assert!(cancelled.elapsed() < Duration::from_secs(5), "promptly");
    // The server sees the request go away.
    let deadline = Instant::now() + Duration::from_secs(2);
    while !api.stream_dropped() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(api.stream_dropped());
}

#[tokio::test]
async fn a_key_is_required_for_the_public_api_but_not_for_a_proxy() {
    let project = project(&[]);
    let mut input = project.input(model(&project), "hi");
    input.providers = Arc::new(ProviderConfig::default());
    let (outcome, events) = run_checked(input).await;
    assert!(
        failed(&outcome).starts_with("ANTHROPIC_API_KEY is not set"),
        "{outcome:?}"
    );
    assert!(events.is_empty(), "{events:?}");

    let api = MockApi::start(vec![text_answer(&["Proxied."])]).await;
    let mut input = project.input(model(&project), "hi");
    input.providers = Arc::new(ProviderConfig {
        anthropic: Endpoint {
            api_key: None,
            base_url: format!("{}/", api.url),
        },
        ..ProviderConfig::default()
    });
    let (outcome, _) = run_checked(input).await;
    assert_eq!(completed(&outcome), "Proxied.");
    assert!(api.requests()[0].0.get("x-api-key").is_none());
}
