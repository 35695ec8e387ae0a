//! Full turns through a real server against the shared mock provider
//! (`agentkit_test_support::provider`), once per wire format: the events
//! the server records, and the request bodies the client sent (model,
//! stream options, tools, tool results, thinking sent back), retries on
//! 429/5xx, and a cut stream that fails the turn instead of hanging.

use agentkit::ServeOptions;
use agentkit_test_support::http::Request;
use agentkit_test_support::provider::{
    ANTHROPIC_PATH, End, MockProvider, OPENAI_PATH, Reply, Step,
};
use serde_json::{Value, json};

use super::mcp::{Host, host};

const KEY: &str = "sk-mock-secret-key";

const ECHO_TOOL: &str = r#"description = "Echo the word"
command = ["python3", "-c", "import json,sys; print(json.dumps({'echo': json.load(sys.stdin)['word']}))"]
[input_schema]
type = "object"
required = ["word"]
additionalProperties = false
properties.word = { type = "string" }
"#;

#[derive(Clone, Copy, Debug)]
enum Wire {
    OpenAi,
    Anthropic,
}

impl Wire {
    fn model(self) -> &'static str {
        match self {
            Wire::OpenAi => "openai:gpt-mock",
            Wire::Anthropic => "anthropic:claude-mock",
        }
    }

    fn path(self) -> &'static str {
        match self {
            Wire::OpenAi => OPENAI_PATH,
            Wire::Anthropic => ANTHROPIC_PATH,
        }
    }
}

fn serve(wire: Wire, mock: &MockProvider) -> Host {
    serve_with(wire, mock, ServeOptions::default())
}

/// The operator token of the hosts that show step requests.
const OPERATOR: &str = "op-providers";

fn serve_with(wire: Wire, mock: &MockProvider, options: ServeOptions) -> Host {
    let agent_toml = format!(
        "model = \"{}\"\n[harness]\nbuiltin_tools = []\n",
        wire.model()
    );
    let files: Vec<(&str, &str)> = vec![
        ("agent.toml", &agent_toml),
        ("instructions.md", "You echo words.\n"),
        ("tools/echo.toml", ECHO_TOOL),
    ];
    let mut providers = agentkit::ProviderConfig::default();
    providers.openai.base_url = mock.openai_base_url();
    providers.openai.api_key = Some(KEY.into());
    providers.anthropic.base_url = mock.anthropic_base_url();
    providers.anthropic.api_key = Some(KEY.into());
    host(
        &[("bot", &files)],
        ServeOptions {
            providers,
            ..options
        },
    )
}

/// Sends `message` on a new session and returns its events up to the
/// session settling.
fn turn(h: &Host, message: &str) -> Vec<Value> {
    let created = h.send(Request::post("/bot/v1/session").json(&json!({ "message": message })));
    assert_eq!(created.status, 200, "{}", created.body);
    let id = created.json()["sessionId"].as_str().unwrap().to_owned();
    let mut lines = Request::get(&format!("/bot/v1/session/{id}/stream"))
        .stream(h.addr())
        .unwrap();
    let mut events = Vec::new();
    loop {
        let Some(e) = lines.next_json().unwrap() else {
            break;
        };
        let settled = e["type"] == "session.waiting" || e["type"] == "session.failed";
        events.push(e);
        if settled {
            break;
        }
    }
    events
}

fn of_type<'a>(events: &'a [Value], t: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == t).collect()
}

/// Reasoning, chunked text and two parallel tool calls with fragmented
/// arguments, then a final answer: every event recorded, every request
/// shaped as the provider documents it.
fn a_full_turn(wire: Wire) {
    let mock = MockProvider::start(vec![
        Step::new()
            .reasoning(&["The user wants ", "two echoes."], "sig-mock-1")
            .chunks(&["Let me ", "echo."])
            .call("call_a", "echo", &json!({"word": "alpha"}))
            .call("call_b", "echo", &json!({"word": "beta"}))
            .tokens(100, 20, 30, 5)
            .into(),
        Step::text("Echoed alpha and beta.")
            .tokens(150, 8, 90, 0)
            .into(),
    ]);
    let h = serve(wire, &mock);
    let events = turn(&h, "Echo alpha and beta");
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert!(types.contains(&"session.waiting"), "{types:?}");

    // Reasoning and text stream as deltas with the cumulative text.
    let reasoning = of_type(&events, "reasoning.completed");
    assert_eq!(reasoning.len(), 1, "{types:?}");
    assert_eq!(reasoning[0]["data"]["text"], "The user wants two echoes.");
    let appended = of_type(&events, "message.appended");
    assert!(appended.len() >= 2, "{types:?}");
    let completed = of_type(&events, "message.completed");
    assert_eq!(completed.len(), 2, "{types:?}");
    assert_eq!(completed[0]["data"]["text"], "Let me echo.");
    assert_eq!(completed[0]["data"]["finishReason"], "tool_call");
    assert_eq!(completed[1]["data"]["text"], "Echoed alpha and beta.");
    assert_eq!(completed[1]["data"]["finishReason"], "stop");

    // Both calls of the step, assembled from fragments, ran.
    let requested = of_type(&events, "actions.requested");
    assert_eq!(requested.len(), 1);
    let calls = requested[0]["data"]["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "{}", requested[0]);
    let results = of_type(&events, "action.result");
    assert_eq!(results.len(), 2);
    let mut outputs: Vec<String> = results
        .iter()
        .map(|r| {
            assert_eq!(r["data"]["isError"], false, "{r}");
            r["data"]["output"].to_string()
        })
        .collect();
    outputs.sort();
    assert!(
        outputs[0].contains("alpha") && outputs[1].contains("beta"),
        "{outputs:?}"
    );

    // Usage adds up over the two steps.
    let done = of_type(&events, "turn.completed");
    assert_eq!(done.len(), 1);
    assert_eq!(done[0]["data"]["result"], "Echoed alpha and beta.");
    let usage = &done[0]["data"]["usage"];
    assert_eq!(usage["inputTokens"], 250, "{usage}");
    assert_eq!(usage["outputTokens"], 28, "{usage}");
    assert_eq!(usage["cacheReadTokens"], 120, "{usage}");
    if matches!(wire, Wire::Anthropic) {
        assert_eq!(usage["cacheWriteTokens"], 5, "{usage}");
    }
    assert_eq!(of_type(&events, "step.completed").len(), 2);

    // What the client sent.
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "one request per step");
    for r in &requests {
        assert_eq!(r.method, "POST");
        assert_eq!(r.path, wire.path());
    }
    let (first, second) = (requests[0].json(), requests[1].json());
    assert_eq!(first["stream"], true);
    match wire {
        Wire::OpenAi => {
            assert_eq!(
                requests[0].header("authorization"),
                Some(&*format!("Bearer {KEY}"))
            );
            assert_eq!(first["model"], "gpt-mock");
            assert_eq!(first["stream_options"]["include_usage"], true);
            assert_eq!(first["messages"][0]["role"], "system");
            assert!(
                first["messages"][0]["content"]
                    .as_str()
                    .unwrap()
                    .contains("You echo words.")
            );
            assert_eq!(
                first["messages"][1],
                json!({"role": "user", "content": "Echo alpha and beta"})
            );
            let tool = &first["tools"][0];
            assert_eq!(tool["type"], "function");
            assert_eq!(tool["function"]["name"], "echo");
            assert_eq!(tool["function"]["parameters"]["required"], json!(["word"]));
            // The second request carries the assistant's calls and one
            // `tool` message per call id.
            let messages = second["messages"].as_array().unwrap();
            let assistant = messages.iter().find(|m| m["role"] == "assistant").unwrap();
            let ids: Vec<&str> = assistant["tool_calls"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["id"].as_str().unwrap())
                .collect();
            assert_eq!(ids, ["call_a", "call_b"]);
            assert_eq!(
                assistant["tool_calls"][0]["function"]["arguments"]
                    .as_str()
                    .map(|a| serde_json::from_str::<Value>(a).unwrap()),
                Some(json!({"word": "alpha"}))
            );
            let tool_messages: Vec<&Value> =
                messages.iter().filter(|m| m["role"] == "tool").collect();
            assert_eq!(tool_messages.len(), 2);
            assert_eq!(tool_messages[0]["tool_call_id"], "call_a");
            assert!(
                tool_messages[0]["content"]
                    .as_str()
                    .unwrap()
                    .contains("alpha")
            );
            assert_eq!(tool_messages[1]["tool_call_id"], "call_b");
        }
        Wire::Anthropic => {
            assert_eq!(requests[0].header("x-api-key"), Some(KEY));
            assert!(requests[0].header("anthropic-version").is_some());
            assert_eq!(requests[0].header("authorization"), None);
            assert_eq!(first["model"], "claude-mock");
            assert!(
                first["system"].to_string().contains("You echo words."),
                "{}",
                first["system"]
            );
            assert_eq!(first["messages"][0]["role"], "user");
            let tool = &first["tools"][0];
            assert_eq!(tool["name"], "echo");
            assert_eq!(tool["input_schema"]["required"], json!(["word"]));
            // The thinking block goes back with its signature, then the
            // text and both tool_use blocks; the results are one user
            // message of tool_result blocks.
            let messages = second["messages"].as_array().unwrap();
            let assistant = &messages[1];
            assert_eq!(assistant["role"], "assistant");
            let blocks = assistant["content"].as_array().unwrap();
            assert_eq!(blocks[0]["type"], "thinking", "{assistant}");
            assert_eq!(blocks[0]["signature"], "sig-mock-1");
            assert_eq!(blocks[0]["thinking"], "The user wants two echoes.");
            let uses: Vec<&Value> = blocks.iter().filter(|b| b["type"] == "tool_use").collect();
            assert_eq!(uses.len(), 2);
            assert_eq!(uses[0]["id"], "call_a");
            assert_eq!(uses[0]["input"], json!({"word": "alpha"}));
            let results = &messages[2];
            assert_eq!(results["role"], "user");
            let ids: Vec<&str> = results["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|b| b["type"] == "tool_result")
                .map(|b| b["tool_use_id"].as_str().unwrap())
                .collect();
            assert_eq!(ids, ["call_a", "call_b"]);
        }
    }
    // The key never reaches the event log.
    let log = serde_json::to_string(&events).unwrap();
    assert!(!log.contains(KEY));
}

#[test]
fn openai_full_turn() {
    a_full_turn(Wire::OpenAi);
}

#[test]
fn anthropic_full_turn() {
    a_full_turn(Wire::Anthropic);
}

/// 429 with `Retry-After` and a 500 without are retried; the turn
/// completes on the third request.
fn retries(wire: Wire) {
    let mock = MockProvider::start(vec![
        Reply::retry_after(429, "0"),
        Reply::status(500),
        Step::text("Made it.").into(),
    ]);
    let h = serve(wire, &mock);
    let events = turn(&h, "hi");
    let done = of_type(&events, "turn.completed");
    assert_eq!(done.len(), 1, "{events:?}");
    assert_eq!(done[0]["data"]["result"], "Made it.");
    assert_eq!(mock.requests().len(), 3);
    assert_eq!(mock.remaining(), 0);
    // Each retry sent the same body.
    let bodies = mock.bodies();
    assert_eq!(bodies[0], bodies[2]);
}

#[test]
fn openai_retries() {
    retries(Wire::OpenAi);
}

#[test]
fn anthropic_retries() {
    retries(Wire::Anthropic);
}

/// A stream cut mid-way and an in-stream error event fail the turn with
/// a message; the session stays usable.
fn broken_streams(wire: Wire) {
    let mock = MockProvider::start(vec![
        Step::text("This answer will be cut off somewhere in the middle.")
            .end(End::Cut)
            .into(),
    ]);
    let h = serve(wire, &mock);
    let events = turn(&h, "hi");
    let failed = of_type(&events, "turn.failed");
    assert_eq!(failed.len(), 1, "{events:?}");
    let message = failed[0]["data"]["message"].as_str().unwrap_or_default();
    assert!(!message.is_empty(), "{}", failed[0]);
    assert!(!message.contains(KEY));

    mock.push([Step::text("Half of this.")
        .end(End::ErrorEvent("Overloaded".into()))
        .into()]);
    let events = turn(&h, "again");
    let failed = of_type(&events, "turn.failed");
    assert_eq!(failed.len(), 1, "{events:?}");
    assert!(
        failed[0]["data"]["message"]
            .to_string()
            .contains("Overloaded"),
        "{}",
        failed[0]
    );
}

#[test]
fn openai_broken_streams() {
    broken_streams(Wire::OpenAi);
}

#[test]
fn anthropic_broken_streams() {
    broken_streams(Wire::Anthropic);
}

/// The context `GET /v1/session/:id/context` rebuilds for each step is
/// what the OpenAI-wire client really sent at that step: the system
/// message, the tools, and one wire message per conversation message,
/// over two turns (the second's history folded from the first).
#[test]
fn the_rebuilt_step_context_is_what_the_provider_was_sent() {
    let mock = MockProvider::start(vec![
        Step::new()
            .chunks(&["Echoing."])
            .call("call_a", "echo", &json!({"word": "alpha"}))
            .into(),
        Step::text("Echoed alpha.").into(),
        Step::text("Still here.").into(),
    ]);
    let token = "op-ctx-token";
    let agent_toml = "model = \"openai:gpt-mock\"\n[harness]\nbuiltin_tools = []\n";
    let files: Vec<(&str, &str)> = vec![
        ("agent.toml", agent_toml),
        ("instructions.md", "You echo words.\n"),
        ("tools/echo.toml", ECHO_TOOL),
    ];
    let mut providers = agentkit::ProviderConfig::default();
    providers.openai.base_url = mock.openai_base_url();
    providers.openai.api_key = Some(KEY.into());
    let h = host(
        &[("bot", &files)],
        ServeOptions {
            providers,
            operator_token: Some(token.into()),
            ..ServeOptions::default()
        },
    );
    let events = turn(&h, "Echo alpha");
    let id = events[0]["sessionId"].as_str().unwrap().to_owned();
    let first_turn = of_type(&events, "turn.started")[0]["turnId"]
        .as_str()
        .unwrap()
        .to_owned();
    // A second turn, by the operator (no token needed).
    let r = h.send(
        Request::post(&format!("/bot/v1/session/{id}"))
            .bearer(token)
            .json(&json!({"message": "Again?"})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let mut lines = Request::get(&format!("/bot/v1/session/{id}/stream"))
        .bearer(token)
        .stream(h.addr())
        .unwrap();
    let mut all = Vec::new();
    while of_type(&all, "turn.completed").len() < 2 {
        all.push(lines.next_json().unwrap().expect("the stream ended early"));
    }
    let second_turn = of_type(&all, "turn.started")[1]["turnId"]
        .as_str()
        .unwrap()
        .to_owned();
    let sent: Vec<Value> = mock.requests().iter().map(|r| r.json()).collect();
    assert_eq!(sent.len(), 3);
    for (body, (turn_id, step)) in
        sent.iter()
            .zip([(&first_turn, 1), (&first_turn, 2), (&second_turn, 1)])
    {
        let r = h.send(
            Request::get(&format!(
                "/bot/v1/session/{id}/context?turnId={turn_id}&step={step}"
            ))
            .bearer(token),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let ctx = r.json();
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages[0]["role"], "system");
        assert_eq!(messages[0]["content"], ctx["system"], "{turn_id} #{step}");
        let sent_tools: Vec<(&Value, &Value)> = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (&t["function"]["name"], &t["function"]["parameters"]))
            .collect();
        let context_tools: Vec<(&Value, &Value)> = ctx["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (&t["name"], &t["inputSchema"]))
            .collect();
        assert_eq!(sent_tools, context_tools);
        let conversation = ctx["conversation"].as_array().unwrap();
        assert_eq!(
            conversation.len(),
            messages.len() - 1,
            "{turn_id} #{step}: {ctx}"
        );
        for (wire, folded) in messages[1..].iter().zip(conversation) {
            assert_eq!(wire["role"], folded["role"], "{wire} vs {folded}");
            match folded["role"].as_str().unwrap() {
                "user" => assert_eq!(wire["content"], folded["text"]),
                "tool" => assert_eq!(wire["tool_call_id"], folded["callId"]),
                _ => assert_eq!(
                    wire["tool_calls"][0]["id"].as_str(),
                    folded["toolCalls"][0]["callId"].as_str()
                ),
            }
        }
    }
}

const SHOT_TOOL: &str = r#"description = "Take a screenshot"
command = ["python3", "-c", "import base64,json,sys; json.load(sys.stdin); print(json.dumps([{'type': 'text', 'text': 'the chart'}, {'type': 'image', 'mediaType': 'image/png', 'data': base64.b64encode(b'PNGBYTES').decode()}]))"]
[input_schema]
type = "object"
"#;

/// `PNGBYTES` in base64.
const PNG_B64: &str = "UE5HQllURVM=";

/// An image a tool returns reaches the model in the provider's wire
/// format, while the log and the conversation keep only its workspace
/// path (the bytes are a file of the session's workspace).
fn an_image_from_a_tool(wire: Wire) {
    let mock = MockProvider::start(vec![
        Step::new()
            .call("call_img", "shot", &json!({}))
            .tokens(10, 2, 0, 0)
            .into(),
        Step::text("A bar chart.").tokens(20, 3, 0, 0).into(),
    ]);
    let agent_toml = format!(
        "model = \"{}\"\n[harness]\nbuiltin_tools = []\n",
        wire.model()
    );
    let files: Vec<(&str, &str)> = vec![
        ("agent.toml", &agent_toml),
        ("instructions.md", "You look at screenshots.\n"),
        ("tools/shot.toml", SHOT_TOOL),
    ];
    let mut providers = agentkit::ProviderConfig::default();
    providers.openai.base_url = mock.openai_base_url();
    providers.openai.api_key = Some(KEY.into());
    providers.anthropic.base_url = mock.anthropic_base_url();
    providers.anthropic.api_key = Some(KEY.into());
    let h = host(
        &[("bot", &files)],
        ServeOptions {
            providers,
            ..ServeOptions::default()
        },
    );
    let events = turn(&h, "What does the screen show?");
    let path = ".agentkit/images/call_img-1.png";
    let results = of_type(&events, "action.result");
    assert_eq!(results.len(), 1, "{events:#?}");
    assert_eq!(
        results[0]["data"]["output"],
        json!([{"type": "text", "text": "the chart"}, {"type": "image", "mediaType": "image/png", "path": path}])
    );
    let id = events[0]["sessionId"].as_str().unwrap().to_owned();
    let stored = h
        .send(Request::get(&format!("/bot/v1/session/{id}/events")))
        .body;
    assert!(!stored.contains(PNG_B64), "the log holds the image's bytes");
    let r = h.send(Request::get(&format!("/bot/v1/session/{id}/files/{path}")));
    assert_eq!((r.status, r.body.as_str()), (200, "PNGBYTES"));
    assert_eq!(r.header("content-type"), Some("image/png"));

    let bodies = mock.bodies();
    assert_eq!(bodies.len(), 2);
    let messages = bodies[1]["messages"].as_array().unwrap();
    match wire {
        Wire::OpenAi => {
            let tool = messages.iter().find(|m| m["role"] == "tool").unwrap();
            assert_eq!(tool["content"], format!("the chart\n[image {path}]"));
            let last = messages.last().unwrap();
            assert_eq!(last["role"], "user", "{messages:#?}");
            assert_eq!(
                last["content"][1],
                json!({"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG_B64}")}})
            );
        }
        Wire::Anthropic => {
            let result = messages
                .iter()
                .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
                .find(|b| b["type"] == "tool_result")
                .unwrap();
            assert_eq!(
                result["content"],
                json!([
                    {"type": "text", "text": "the chart"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}},
                ])
            );
        }
    }
}

#[test]
fn openai_receives_an_image_a_tool_returned() {
    an_image_from_a_tool(Wire::OpenAi);
}

#[test]
fn anthropic_receives_an_image_a_tool_returned() {
    an_image_from_a_tool(Wire::Anthropic);
}

/// A PNG image, as its first bytes are all a provider check here needs.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\nIMAGE";

/// An image uploaded with a message reaches the model with it, in the
/// provider's wire format; `message.received` names it by path.
fn an_uploaded_image(wire: Wire) {
    let mock = MockProvider::start(vec![Step::text("A screenshot.").tokens(20, 3, 0, 0).into()]);
    let h = serve_with(
        wire,
        &mock,
        ServeOptions {
            operator_token: Some(OPERATOR.into()),
            ..ServeOptions::default()
        },
    );
    let body = super::files::multipart(&[
        ("message", None, b"What is in the picture?"),
        ("file", Some("shots/screen.png"), PNG),
        ("file", Some("notes.txt"), b"not an image"),
    ]);
    let r = h.send(super::files::post_form("/bot/v1/session", "", &body));
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let mut lines = Request::get(&format!("/bot/v1/session/{id}/stream"))
        .stream(h.addr())
        .unwrap();
    let events = lines.until("session.waiting").unwrap();
    let received = of_type(&events, "message.received");
    assert_eq!(
        received[0]["data"]["images"],
        json!([{"type": "image", "mediaType": "image/png", "path": "shots/screen.png"}])
    );
    let data = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, PNG);
    let stored = h
        .send(Request::get(&format!("/bot/v1/session/{id}/events")))
        .body;
    assert!(!stored.contains(&data), "the log holds the image's bytes");
    let bodies = mock.bodies();
    let user = bodies[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "user")
        .unwrap()
        .clone();
    match wire {
        Wire::OpenAi => assert_eq!(
            user["content"],
            json!([
                {"type": "text", "text": "What is in the picture?"},
                {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{data}")}},
            ])
        ),
        Wire::Anthropic => {
            // The last block also carries the prompt cache's breakpoint.
            let mut content = user["content"].clone();
            content[1].as_object_mut().unwrap().remove("cache_control");
            assert_eq!(
                content,
                json!([
                    {"type": "text", "text": "What is in the picture?"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}},
                ])
            );
        }
    }
    // The step view rebuilds the same body, the image read back from the
    // workspace as the turn read it.
    let view = h
        .send(Request::get(&format!("/bot/v1/session/{id}/steps/1/request")).bearer(OPERATOR))
        .json();
    assert_eq!(view["body"], bodies[0], "{view}");
}

#[test]
fn openai_receives_an_uploaded_image() {
    an_uploaded_image(Wire::OpenAi);
}

#[test]
fn anthropic_receives_an_uploaded_image() {
    an_uploaded_image(Wire::Anthropic);
}
