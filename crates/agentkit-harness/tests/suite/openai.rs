//! The `openai` provider against an in-process Chat Completions server on
//! loopback: streamed text and reasoning, tool calls in fragments, retries,
//! cut and stalled streams, cancellation, and a key that never leaks.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentkit_harness::{Endpoint, ProviderConfig, StepEvent, TurnInput, TurnOutcome, run_turn};
use agentkit_protocol::Usage;
use agentkit_test_support::mock::{MockBody, MockResponse, MockServer, StreamEnd};
use serde_json::{Value, json};

use super::*;

const KEY: &str = "sk-test-secret";

/// How a streamed reply ends after its events.
#[derive(Clone, Copy)]
enum End {
    /// The body ends cleanly.
    Close,
    /// The connection drops mid-body.
    Cut,
    /// Nothing more, on an open connection.
    Hang,
}

#[derive(Clone)]
enum Reply {
    Sse(Vec<String>, End),
    Status(u16, Vec<(&'static str, &'static str)>, String),
}

/// A request the server received.
#[derive(Debug, Clone)]
struct Seen {
    authorization: Option<String>,
    body: Value,
}

/// The shared recording mock server, answering the scripted replies in
/// order (then 500s).
struct Mock(MockServer);

impl Mock {
    fn seen(&self) -> Vec<Seen> {
        self.0
            .requests()
            .iter()
            .map(|r| Seen {
                authorization: r.header("authorization").map(str::to_owned),
                body: r.json(),
            })
            .collect()
    }

    /// A streamed body was dropped before its end: the client went away.
    fn stream_dropped(&self) -> bool {
        self.0.streams_dropped() > 0
    }
}

async fn serve(replies: Vec<Reply>) -> (Arc<Mock>, SocketAddr) {
    let replies = Mutex::new(VecDeque::from(replies));
    let server = MockServer::start(move |req| {
        assert_eq!(req.path, "/v1/chat/completions");
        match replies.lock().unwrap().pop_front() {
            None => MockResponse::json(500, &json!({"error": {"message": "no reply scripted"}})),
            Some(Reply::Status(status, headers, body)) => {
                let mut r = MockResponse {
                    status,
                    headers: vec![("content-type".into(), "application/json".into())],
                    body: MockBody::Full(body.into_bytes()),
                };
                for (k, v) in headers {
                    r = r.header(k, v);
                }
                r
            }
            Some(Reply::Sse(events, end)) => {
                let end = match end {
                    End::Close => StreamEnd::Close,
                    End::Cut => StreamEnd::Cut,
                    End::Hang => StreamEnd::Stall,
                };
                let mut r = MockResponse::sse(events, end);
                // Realistic pacing: chunks arrive apart.
                if let MockBody::Stream { pace, .. } = &mut r.body {
                    *pace = Duration::from_millis(5);
                }
                r
            }
        }
    });
    let addr = server.addr();
    (Arc::new(Mock(server)), addr)
}

fn chunk(delta: Value) -> String {
    event(json!({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
        "model": "gpt-test", "system_fingerprint": null,
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}]
    }))
}

fn finish(reason: &str) -> String {
    event(json!({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
        "choices": [{"index": 0, "delta": {}, "logprobs": null, "finish_reason": reason}]
    }))
}

fn usage(prompt: u64, completion: u64, cached: u64) -> String {
    event(json!({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0}
        }
    }))
}

fn event(v: Value) -> String {
    format!("data: {v}\n\n")
}

const DONE: &str = "data: [DONE]\n\n";

fn text_reply(text: &str) -> Reply {
    Reply::Sse(
        vec![
            chunk(json!({"role": "assistant", "content": ""})),
            chunk(json!({"content": text})),
            finish("stop"),
            usage(10, 2, 0),
            DONE.into(),
        ],
        End::Close,
    )
}

const ECHO_TOOL: (&str, &str) = (
    "tools/echo.toml",
    r#"description = "Echo the word"
command = ["python3", "echo.py"]
[input_schema]
type = "object"
required = ["word"]
additionalProperties = false
properties.word = { type = "string" }
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
    "model = \"openai:gpt-test\"\n[harness]\nbuiltin_tools = []\n",
);

fn input(project: &TestProject, addr: SocketAddr, message: &str) -> TurnInput {
    let model = project.agent.config.model.clone().unwrap();
    let mut input = project.input(model, message);
    input.providers = Arc::new(ProviderConfig {
        openai: Endpoint {
            api_key: Some(KEY.into()),
            base_url: format!("http://{addr}/v1"),
        },
        ..ProviderConfig::default()
    });
    input
}

/// Runs a turn and checks that the key appears nowhere in what it produced.
async fn run_checked(input: TurnInput) -> (TurnOutcome, Vec<StepEvent>) {
    let (outcome, events) = run(input).await;
    assert!(!format!("{outcome:?}").contains(KEY), "{outcome:?}");
    assert!(!format!("{events:?}").contains(KEY));
    assert!(!render(&events).contains(KEY));
    (outcome, events)
}

fn failed(outcome: &TurnOutcome) -> &str {
    match outcome {
        TurnOutcome::Failed { message } => message,
        other => panic!("expected a failed turn, got {other:?}"),
    }
}

fn text_deltas(events: &[StepEvent]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match e {
            StepEvent::MessageAppended { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn streams_text_and_reasoning_and_records_usage() {
    let (mock, addr) = serve(vec![Reply::Sse(
        vec![
            chunk(json!({"role": "assistant", "content": ""})),
            chunk(json!({"reasoning_content": "Think"})),
            chunk(json!({"reasoning_content": "ing."})),
            chunk(json!({"content": "Hel"})),
            chunk(json!({"content": "lo, "})),
            chunk(json!({"content": "world"})),
            finish("stop"),
            usage(12, 5, 4),
            DONE.into(),
        ],
        End::Close,
    )])
    .await;
    let project = TestProject::new(&[
        (
            "agent.toml",
            "[model]\nprovider = \"openai\"\nid = \"gpt-test\"\nparams = { temperature = 0.2, stream = false }\n[harness]\nbuiltin_tools = []\n",
        ),
        (
            "skills/greet.md",
            "---\ndescription: Use when greeting someone.\n---\n\nSay hello.\n",
        ),
    ]);
    let (outcome, events) = run_checked(input(&project, addr, "hi")).await;

    let TurnOutcome::Completed { result, usage, .. } = &outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(result, "Hello, world");
    assert_eq!(
        *usage,
        Usage {
            input_tokens: 12,
            output_tokens: 5,
            cache_read_tokens: 4,
            cache_write_tokens: 0
        }
    );
    assert_eq!(text_deltas(&events), ["Hel", "lo, ", "world"]);
    assert!(events.contains(&StepEvent::ReasoningCompleted {
        text: "Thinking.".into()
    }));

    let seen = mock.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some("Bearer sk-test-secret")
    );
    let body = &seen[0].body;
    assert_eq!(body["model"], "gpt-test");
    // Params merge in, but never turn streaming off.
    assert_eq!(body["stream"], true);
    assert_eq!(body["temperature"], 0.2);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    // No server tools and no built-ins: the only tool is `load_skill`,
    // offered because the agent has a skill.
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["load_skill"]);
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "You are a test agent.\n\n## Skills\n\nSkills are procedures for particular tasks. When a task fits a skill's description, load it with the `load_skill` tool (or read `.agentkit/skills/<name>/SKILL.md`) and follow it.\n\n- `greet`: Use when greeting someone.\n"},
            {"role": "user", "content": "hi"}
        ])
    );
}

#[tokio::test]
async fn a_tool_call_in_fragments_runs_and_its_result_goes_back() {
    let (mock, addr) = serve(vec![
        Reply::Sse(
            vec![
                chunk(json!({"role": "assistant", "content": null})),
                chunk(
                    json!({"tool_calls": [{"index": 0, "id": "call_abc", "type": "function",
                    "function": {"name": "echo", "arguments": ""}}]}),
                ),
                chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"wo"}}]})),
                chunk(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": "rd\": \"he"}}]}),
                ),
                chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "llo\"}"}}]})),
                finish("tool_calls"),
                usage(30, 10, 0),
                DONE.into(),
            ],
            End::Close,
        ),
        text_reply("Echoed hello."),
    ])
    .await;
    let project = TestProject::new(&[AGENT_TOML, ECHO_TOOL, ECHO_PY]);
    let (outcome, events) = run_checked(input(&project, addr, "echo hello")).await;

    let TurnOutcome::Completed { result, usage, .. } = &outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(result, "Echoed hello.");
    assert_eq!((usage.input_tokens, usage.output_tokens), (40, 12));
    assert_eq!(
        results(&events),
        [("echo".to_owned(), json!({"echo": "hello"}), false)]
    );
    assert!(events.iter().any(|e| matches!(e,
        StepEvent::ActionsRequested { calls }
            if calls.len() == 1 && calls[0].call_id == "call_abc" && calls[0].input == json!({"word": "hello"})
    )));

    let seen = mock.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[0].body["tools"],
        json!([{"type": "function", "function": {
            "name": "echo", "description": "Echo the word",
            "parameters": {"type": "object", "required": ["word"], "additionalProperties": false,
                "properties": {"word": {"type": "string"}}}
        }}])
    );
    assert_eq!(seen[0].body["tool_choice"], "auto");
    let messages = seen[1].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4);
    assert_eq!(
        messages[2],
        json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": "call_abc", "type": "function",
            "function": {"name": "echo", "arguments": "{\"word\":\"hello\"}"}
        }]})
    );
    assert_eq!(
        messages[3],
        json!({"role": "tool", "tool_call_id": "call_abc", "content": "{\"echo\":\"hello\"}"})
    );
}

#[tokio::test]
async fn parallel_tool_calls_by_index_even_without_id_or_type() {
    let (mock, addr) = serve(vec![
        Reply::Sse(
            vec![
                chunk(json!({"content": "Both."})),
                chunk(
                    json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                    "function": {"name": "echo", "arguments": "{\"word\":"}}]}),
                ),
                // A compatible server: no id, no type, arguments whole.
                chunk(json!({"tool_calls": [{"index": 1,
                    "function": {"name": "echo", "arguments": "{\"word\":\"b\"}"}}]})),
                chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"a\"}"}}]})),
                finish("tool_calls"),
                DONE.into(),
            ],
            End::Close,
        ),
        text_reply("Done."),
    ])
    .await;
    let project = TestProject::new(&[AGENT_TOML, ECHO_TOOL, ECHO_PY]);
    let (outcome, events) = run_checked(input(&project, addr, "both")).await;
    assert_eq!(completed(&outcome), "Done.");

    let mut outputs: Vec<Value> = results(&events).into_iter().map(|r| r.1).collect();
    outputs.sort_by_key(|v| v.to_string());
    assert_eq!(outputs, [json!({"echo": "a"}), json!({"echo": "b"})]);

    let seen = mock.seen();
    let messages = seen[1].body["messages"].as_array().unwrap();
    assert_eq!(messages[2]["content"], "Both.");
    let ids: Vec<&str> = messages[2]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["call_1", "turn-1-s1-c2"]);
    assert_eq!(messages[3]["tool_call_id"], "call_1");
    assert_eq!(messages[3]["content"], "{\"echo\":\"a\"}");
    assert_eq!(messages[4]["tool_call_id"], "turn-1-s1-c2");
}

#[tokio::test]
async fn unparseable_arguments_come_back_as_a_schema_error() {
    let (mock, addr) = serve(vec![
        Reply::Sse(
            vec![
                chunk(
                    json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                    "function": {"name": "echo", "arguments": "{\"word\": hel"}}]}),
                ),
                finish("tool_calls"),
                DONE.into(),
            ],
            End::Close,
        ),
        text_reply("Sorry."),
    ])
    .await;
    let project = TestProject::new(&[AGENT_TOML, ECHO_TOOL, ECHO_PY]);
    let (outcome, events) = run_checked(input(&project, addr, "x")).await;
    assert_eq!(completed(&outcome), "Sorry.");
    let results = results(&events);
    assert!(results[0].2, "{results:?}");
    assert!(
        results[0]
            .1
            .as_str()
            .unwrap()
            .contains("invalid input for `echo`"),
        "{results:?}"
    );
    let tool_message = &mock.seen()[1].body["messages"][3];
    assert!(
        tool_message["content"]
            .as_str()
            .unwrap()
            .contains("invalid input"),
        "{tool_message}"
    );
}

#[tokio::test]
async fn a_429_is_retried_after_its_retry_after() {
    let (mock, addr) = serve(vec![
        Reply::Status(
            429,
            vec![("retry-after", "1")],
            r#"{"error":{"message":"Rate limit reached","type":"requests"}}"#.into(),
        ),
        text_reply("ok"),
    ])
    .await;
    let project = TestProject::new(&[AGENT_TOML]);
    let started = Instant::now();
    let (outcome, _) = run_checked(input(&project, addr, "x")).await;
    assert_eq!(completed(&outcome), "ok");
    assert_eq!(mock.seen().len(), 2);
    assert!(started.elapsed() >= Duration::from_secs(1));
}

#[tokio::test]
async fn server_errors_are_retried_three_times_then_fail_the_turn() {
    let error = || r#"{"error":{"message":"boom"}}"#.to_owned();
    let (mock, addr) = serve(vec![
        // Exponential backoff first, then short server-given delays.
        Reply::Status(500, vec![], error()),
        Reply::Status(503, vec![("retry-after-ms", "20")], error()),
        Reply::Status(500, vec![("retry-after-ms", "20")], error()),
        Reply::Status(500, vec![("retry-after-ms", "20")], error()),
    ])
    .await;
    let project = TestProject::new(&[AGENT_TOML]);
    let started = Instant::now();
    let (outcome, events) = run_checked(input(&project, addr, "x")).await;
    assert_eq!(
        failed(&outcome),
        "openai returned 500 Internal Server Error: boom (gave up after 4 attempts)"
    );
    assert_eq!(mock.seen().len(), 4);
    assert!(started.elapsed() >= Duration::from_millis(375));
    assert!(text_deltas(&events).is_empty());
}

#[tokio::test]
async fn other_client_errors_fail_at_once_without_the_key() {
    let (mock, addr) = serve(vec![Reply::Status(
        401,
        vec![],
        // A server that echoes the key back.
        format!(r#"{{"error":{{"message":"Incorrect API key provided: {KEY}"}}}}"#),
    )])
    .await;
    let project = TestProject::new(&[AGENT_TOML]);
    let (outcome, _) = run_checked(input(&project, addr, "x")).await;
    assert_eq!(
        failed(&outcome),
        "openai returned 401 Unauthorized: Incorrect API key provided: <redacted>"
    );
    assert_eq!(mock.seen().len(), 1);
}

#[tokio::test]
async fn a_cut_or_unfinished_stream_fails_the_turn_without_retrying() {
    let (mock, addr) = serve(vec![
        Reply::Sse(
            vec![
                chunk(json!({"content": "partial "})),
                chunk(json!({"content": "answer"})),
            ],
            End::Cut,
        ),
        // Ends cleanly, but without a finish reason or `[DONE]`.
        Reply::Sse(vec![chunk(json!({"content": "partial"}))], End::Close),
    ])
    .await;
    let project = TestProject::new(&[AGENT_TOML]);

    let started = Instant::now();
    let (outcome, events) = run_checked(input(&project, addr, "x")).await;
    let message = failed(&outcome);
    assert!(
        message.starts_with("openai stream ended early"),
        "{message}"
    );
    assert_eq!(text_deltas(&events), ["partial ", "answer"]);
    assert_eq!(mock.seen().len(), 1);

    let (outcome, _) = run_checked(input(&project, addr, "x")).await;
    assert_eq!(failed(&outcome), "openai stream ended early");
    assert_eq!(mock.seen().len(), 2);
    assert!(started.elapsed() < Duration::from_secs(15), "no hang");
}

#[tokio::test]
async fn cancelling_aborts_the_request_at_once() {
    let (mock, addr) = serve(vec![Reply::Sse(
        vec![chunk(json!({"content": "Hel"}))],
        End::Hang,
    )])
    .await;
    let project = TestProject::new(&[AGENT_TOML]);
    let input = input(&project, addr, "x");
    let cancel = input.cancel.clone();
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let turn = tokio::spawn(run_turn(input, tx));
    while let Some(e) = rx.recv().await {
        if matches!(e, StepEvent::MessageAppended { .. }) {
            break;
        }
    }
    let cancelled = Instant::now();
    cancel.cancel();
    let outcome = tokio::time::timeout(Duration::from_secs(1), turn)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outcome, TurnOutcome::Interrupted);
    assert!(cancelled.elapsed() < Duration::from_secs(5), "promptly");
    // The server sees the connection go (its next keep-alive fails).
    let deadline = Instant::now() + Duration::from_secs(2);
    while !mock.stream_dropped() {
        assert!(Instant::now() < deadline, "the request outlived the turn");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_dropped_connection_is_retried() {
    let (mock, addr) = serve(vec![text_reply("second try")]).await;
    // A proxy in front of the mock that drops its first connection unanswered.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (first, _) = listener.accept().await.unwrap();
        drop(first);
        loop {
            let (mut client, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut server = tokio::net::TcpStream::connect(addr).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            });
        }
    });
    let project = TestProject::new(&[AGENT_TOML]);
    let (outcome, _) = run_checked(input(&project, proxy, "x")).await;
    assert_eq!(completed(&outcome), "second try");
    assert_eq!(mock.seen().len(), 1);
}

#[tokio::test]
async fn a_server_that_does_not_stream_still_answers() {
    let (_mock, addr) = serve(vec![
        Reply::Status(
            200,
            vec![],
            json!({
                "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-test",
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                    "role": "assistant", "content": "Checking.",
                    "tool_calls": [{"id": "call_9", "type": "function",
                        "function": {"name": "echo", "arguments": "{\"word\":\"x\"}"}}]
                }}],
                "usage": {"prompt_tokens": 7, "completion_tokens": 3}
            })
            .to_string(),
        ),
        text_reply("Done."),
    ])
    .await;
    let project = TestProject::new(&[AGENT_TOML, ECHO_TOOL, ECHO_PY]);
    let (outcome, events) = run_checked(input(&project, addr, "x")).await;
    assert_eq!(completed(&outcome), "Done.");
    assert_eq!(text_deltas(&events), ["Checking.", "Done."]);
    assert_eq!(
        results(&events),
        [("echo".to_owned(), json!({"echo": "x"}), false)]
    );
}

#[tokio::test]
async fn the_key_is_required_by_the_public_api_only() {
    let project = TestProject::new(&[AGENT_TOML]);
    let mut no_key = input(&project, "127.0.0.1:9".parse().unwrap(), "x");
    no_key.providers = Arc::new(ProviderConfig::default());
    let (outcome, _) = run_checked(no_key).await;
    assert_eq!(
        failed(&outcome),
        "OPENAI_API_KEY is not set (or pass --api-key)"
    );

    // A local server needs none, and gets no Authorization header.
    let (mock, addr) = serve(vec![text_reply("local")]).await;
    let mut local = input(&project, addr, "x");
    local.providers = Arc::new(ProviderConfig {
        openai: Endpoint {
            api_key: None,
            base_url: format!("http://{addr}/v1/"),
        },
        ..ProviderConfig::default()
    });
    let (outcome, _) = run_checked(local).await;
    assert_eq!(completed(&outcome), "local");
    assert_eq!(mock.seen()[0].authorization, None);
}
