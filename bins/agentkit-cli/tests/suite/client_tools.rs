//! Calls of client-declared tools across a crash: `agentkit serve --dev`
//! as a real child process, a turn of each front-end (AG-UI, Responses,
//! and the session API) waiting for the client, the server killed
//! (SIGKILL) and restarted on the same state root. Each call is still listed as waiting, and the client's
//! answer (an AG-UI `tool` message, a `function_call_output`, `POST
//! /v1/session/:id/client-calls`) resumes the turn: a new turn that offers
//! the client's tools again, whose own call of one then waits live.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use agentkit_test_support::http::{Request, Response};
use agentkit_test_support::process::{ServerProcess, free_port};
use serde_json::{Value, json};

/// Turn 0 calls the client's `pick_city` (and never gets further: the
/// crash cuts it); turn 1, the resumed one, calls it again, then answers.
const SCRIPT: &str = r#"{"turns": [
  {"steps": [
    {"text": "", "toolCalls": [{"id": "call-a", "name": "pick_city", "input": {"question": "Which city?"}}]},
    {"text": "never said: the crash cut this turn"}
  ]},
  {"steps": [
    {"text": "", "toolCalls": [{"id": "call-b", "name": "pick_city", "input": {"question": "And the second?"}}]},
    {"text": "Off to both."}
  ]}
]}"#;

fn start(root: &Path) -> ServerProcess {
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_agentkit"))
        .args([
            "serve",
            "--dev",
            "--dir",
            "bot",
            "--port",
            &port.to_string(),
        ])
        .args(["--state-root", "state"])
        .current_dir(root)
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    ServerProcess::healthy(child, port, Duration::from_secs(30))
}

fn pick_city() -> Value {
    json!({
        "name": "pick_city",
        "description": "Ask the user to pick a city.",
        "parameters": {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]},
    })
}

fn post(addr: SocketAddr, path: &str, body: Value) -> Response {
    Request::post(path).json(&body).send(addr).unwrap()
}

/// A Responses request with the client's function tool.
fn respond(addr: SocketAddr, input: Value, previous: Option<&str>) -> Value {
    let mut tool = pick_city();
    tool["type"] = json!("function");
    let mut body = json!({"model": "bot", "input": input, "tools": [tool]});
    if let Some(previous) = previous {
        body["previous_response_id"] = json!(previous);
    }
    let r = post(addr, "/bot/v1/responses", body);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

/// The call ids of a response's `function_call` items.
fn function_calls(response: &Value) -> Vec<String> {
    response["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "function_call")
        .map(|i| i["call_id"].as_str().unwrap().to_owned())
        .collect()
}

fn output_text(response: &Value) -> String {
    let mut text = String::new();
    for item in response["output"].as_array().unwrap() {
        for part in item["content"].as_array().into_iter().flatten() {
            text.push_str(part["text"].as_str().unwrap_or_default());
        }
    }
    text
}

/// An AG-UI run on thread `t1`; its events' types (a tool call with its
/// id).
fn agui(addr: SocketAddr, run: &str, messages: Value) -> Vec<String> {
    let r = post(
        addr,
        "/bot/v1/ag-ui",
        json!({"threadId": "t1", "runId": run, "messages": messages, "tools": [pick_city()]}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let mut kinds: Vec<String> = Vec::new();
    for data in r.body.lines().filter_map(|l| l.strip_prefix("data: ")) {
        let e: Value = serde_json::from_str(data).unwrap();
        let t = e["type"].as_str().unwrap().to_owned();
        let line = match t.as_str() {
            "TOOL_CALL_START" => format!("{t} {}", e["toolCallId"].as_str().unwrap()),
            "RUN_FINISHED" => format!("{t} result={}", e["result"]),
            "TEXT_MESSAGE_CONTENT" | "TOOL_CALL_ARGS" => continue,
            _ => t,
        };
        kinds.push(line);
    }
    kinds
}

fn client_calls(addr: SocketAddr, id: &str) -> Vec<Value> {
    let r = Request::get(&format!("/bot/v1/session/{id}/client-calls"))
        .send(addr)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["calls"].as_array().unwrap().clone()
}

fn events(addr: SocketAddr, id: &str) -> Vec<Value> {
    let r = Request::get(&format!("/bot/v1/session/{id}/events"))
        .send(addr)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn stream_until(addr: SocketAddr, id: &str, t: &str) -> Vec<Value> {
    Request::get(&format!("/bot/v1/session/{id}/stream?startIndex=0"))
        .stream(addr)
        .unwrap()
        .until(t)
        .unwrap()
}

#[test]
fn calls_waiting_for_the_client_survive_a_kill_and_each_front_ends_answer_resumes_the_turn() {
    let tmp = tempfile::tempdir().unwrap();
    let agent = tmp.path().join("bot/agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("agent.toml"),
        "model = \"scripted:script.json\"\n",
    )
    .unwrap();
    std::fs::write(agent.join("script.json"), SCRIPT).unwrap();
    std::fs::write(agent.join("instructions.md"), "Test agent.\n").unwrap();
    let mut server = start(tmp.path());
    let user = json!({"id": "u1", "role": "user", "content": "plan a trip"});

    // Three turns wait for the client: AG-UI's, one of Responses and one
    // of the session API (a message's `clientTools`).
    let first = agui(server.addr, "r1", json!([user]));
    assert_eq!(
        first,
        [
            "RUN_STARTED",
            "STEP_STARTED",
            "TOOL_CALL_START call-a",
            "TOOL_CALL_END",
            "STEP_FINISHED",
            "RUN_FINISHED result=null"
        ]
    );
    let waiting = respond(server.addr, json!("plan a trip"), None);
    assert_eq!(function_calls(&waiting), ["call-a"], "{waiting}");
    let native = post(
        server.addr,
        "/bot/v1/session",
        json!({"message": "plan a trip", "clientTools": [pick_city()]}),
    );
    assert_eq!(native.status, 200, "{}", native.body);
    let native_id = native.json()["sessionId"].as_str().unwrap().to_owned();
    stream_until(server.addr, &native_id, "actions.client_requested");
    let listed = client_calls(server.addr, &native_id);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["callId"], "call-a");
    assert_eq!(listed[0]["live"], true);

    // Crash: no shutdown.
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    let server = start(tmp.path());

    // Still waiting, no longer live; the crash is recorded.
    let listed = client_calls(server.addr, &native_id);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["callId"], "call-a");
    assert_eq!(listed[0]["toolName"], "pick_city");
    assert_eq!(listed[0]["input"], json!({"question": "Which city?"}));
    assert_eq!(listed[0]["live"], false);
    let failed = stream_until(server.addr, &native_id, "turn.failed");
    assert_eq!(failed.last().unwrap()["data"]["reason"], "restart");

    // AG-UI: the next run's `tool` message resumes the turn, whose own
    // call of the client's tool (offered again) ends the run; the run
    // after answers that one live.
    let assistant = |call: &str| {
        json!({"id": format!("a-{call}"), "role": "assistant", "toolCalls": [
            {"id": call, "type": "function", "function": {"name": "pick_city", "arguments": "{}"}}]})
    };
    let tool = |call: &str, city: &str| json!({"id": format!("t-{call}"), "role": "tool", "toolCallId": call, "content": city});
    let resumed = agui(
        server.addr,
        "r2",
        json!([user, assistant("call-a"), tool("call-a", "Paris")]),
    );
    assert_eq!(
        resumed,
        [
            "RUN_STARTED",
            "STEP_STARTED",
            "TOOL_CALL_START call-b",
            "TOOL_CALL_END",
            "STEP_FINISHED",
            "RUN_FINISHED result=null"
        ]
    );
    let done = agui(
        server.addr,
        "r3",
        json!([
            user,
            assistant("call-a"),
            tool("call-a", "Paris"),
            assistant("call-b"),
            tool("call-b", "Rome")
        ]),
    );
    assert_eq!(
        done.last().unwrap(),
        r#"RUN_FINISHED result="Off to both.""#,
        "{done:?}"
    );

    // Responses: a `function_call_output` for the call the crash left.
    let resumed = respond(
        server.addr,
        json!([{"type": "function_call_output", "call_id": "call-a", "output": "Paris"}]),
        Some(waiting["id"].as_str().unwrap()),
    );
    assert_eq!(function_calls(&resumed), ["call-b"], "{resumed}");
    let done = respond(
        server.addr,
        json!([{"type": "function_call_output", "call_id": "call-b", "output": "Rome"}]),
        Some(resumed["id"].as_str().unwrap()),
    );
    assert_eq!(output_text(&done), "Off to both.", "{done}");
    assert_eq!(done["status"], "completed");

    // The native API: an unknown call is refused and answers nothing;
    // the waiting one resumes the turn.
    let path = format!("/bot/v1/session/{native_id}/client-calls");
    let stray = post(
        server.addr,
        &path,
        json!({"results": [{"callId": "call-a", "output": "Paris"}, {"callId": "call-z", "output": "?"}]}),
    );
    assert_eq!(stray.status, 404, "{}", stray.body);
    assert!(stray.body.contains("call-z"), "{}", stray.body);
    let r = post(
        server.addr,
        &path,
        json!({"results": [{"callId": "call-a", "output": {"city": "Paris"}}]}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["answered"], json!(["call-a"]));
    assert_eq!(r.json()["resumed"], true);
    let mut follow = Request::get(&format!("/bot/v1/session/{native_id}/stream?startIndex=0"))
        .stream(server.addr)
        .unwrap();
    while let Some(e) = follow.next_json().unwrap() {
        if e["type"] == "actions.client_requested" && e["data"]["calls"][0]["callId"] == "call-b" {
            break;
        }
    }
    let listed = client_calls(server.addr, &native_id);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["callId"], "call-b");
    assert_eq!(listed[0]["live"], true);
    let r = post(
        server.addr,
        &path,
        json!({"results": [{"callId": "call-b", "output": "no city", "isError": true}]}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["resumed"], false);
    stream_until(server.addr, &native_id, "turn.completed");
    let twice = post(
        server.addr,
        &path,
        json!({"results": [{"callId": "call-b", "output": "Rome"}]}),
    );
    assert_eq!(twice.status, 404, "{}", twice.body);

    // The log: call-a's result under the turn the crash cut, a new turn
    // resuming it, call-b's error result under that one.
    let log = events(server.addr, &native_id);
    let first_turn = log
        .iter()
        .find(|e| e["type"] == "actions.client_requested")
        .unwrap()["turnId"]
        .clone();
    let result_a = log
        .iter()
        .find(|e| e["type"] == "action.result" && e["data"]["callId"] == "call-a")
        .unwrap();
    assert_eq!(result_a["turnId"], first_turn);
    assert_eq!(result_a["data"]["output"], json!({"city": "Paris"}));
    let resume = log
        .iter()
        .find(|e| e["type"] == "turn.started" && e["data"]["resumes"].is_string())
        .unwrap();
    assert_eq!(resume["data"]["resumes"], first_turn);
    let result_b = log
        .iter()
        .find(|e| e["type"] == "action.result" && e["data"]["callId"] == "call-b")
        .unwrap();
    assert_eq!(result_b["turnId"], resume["turnId"]);
    assert_eq!(result_b["data"]["isError"], true);
    assert!(client_calls(server.addr, &native_id).is_empty());
}

/// After a crash, a new message instead of the client's result answers
/// the call with an error result (a follow-up preempts a waiting turn
/// the same way), and nothing waits any more.
#[test]
fn a_new_message_after_a_kill_withdraws_the_call_left_waiting() {
    let tmp = tempfile::tempdir().unwrap();
    let agent = tmp.path().join("bot/agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("agent.toml"),
        "model = \"scripted:script.json\"\n",
    )
    .unwrap();
    std::fs::write(agent.join("script.json"), SCRIPT).unwrap();
    std::fs::write(agent.join("instructions.md"), "Test agent.\n").unwrap();
    let mut server = start(tmp.path());
    let waiting = respond(server.addr, json!("plan a trip"), None);
    let id = waiting["session_id"].as_str().unwrap().to_owned();
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    let server = start(tmp.path());
    assert_eq!(client_calls(server.addr, &id).len(), 1);
    let next = respond(
        server.addr,
        json!("never mind, stay home"),
        Some(waiting["id"].as_str().unwrap()),
    );
    assert_eq!(next["status"], "completed", "{next}");
    // The new turn's own call of the tool waits; call-a no longer does.
    assert_eq!(function_calls(&next), ["call-b"], "{next}");
    let listed = client_calls(server.addr, &id);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["callId"], "call-b");
    let log = events(server.addr, &id);
    let withdrawn = log
        .iter()
        .find(|e| e["type"] == "action.result" && e["data"]["callId"] == "call-a")
        .unwrap();
    assert_eq!(withdrawn["data"]["isError"], true);
    assert!(
        withdrawn["data"]["output"]
            .as_str()
            .unwrap()
            .contains("answered a newer message instead"),
        "{withdrawn}"
    );
}

/// `approval_timeout` bounds the wait across a crash: counted from the
/// request, the call left waiting gets an error result, and a resumed
/// turn tells the model.
#[test]
fn approval_timeout_answers_a_call_left_waiting_by_a_kill() {
    let tmp = tempfile::tempdir().unwrap();
    let agent = tmp.path().join("bot/agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("agent.toml"),
        "model = \"scripted:script.json\"\n[harness]\napproval_timeout = \"2s\"\n",
    )
    .unwrap();
    std::fs::write(agent.join("script.json"), SCRIPT).unwrap();
    std::fs::write(agent.join("instructions.md"), "Test agent.\n").unwrap();
    let mut server = start(tmp.path());
    let waiting = respond(server.addr, json!("plan a trip"), None);
    let id = waiting["session_id"].as_str().unwrap().to_owned();
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    let server = start(tmp.path());
    // Nobody answers: the restarted host times the call out by itself.
    let events = stream_until(server.addr, &id, "turn.completed");
    let results: Vec<(&str, &Value)> = events
        .iter()
        .filter(|e| e["type"] == "action.result")
        .map(|e| (e["data"]["callId"].as_str().unwrap(), &e["data"]))
        .collect();
    assert_eq!(results.len(), 2, "{events:?}");
    for (call, data) in &results {
        assert_eq!(data["isError"], true, "{call}: {data}");
        assert!(
            data["output"]
                .as_str()
                .unwrap()
                .contains("did not answer within approval_timeout"),
            "{call}: {data}"
        );
    }
    assert_eq!(results[0].0, "call-a");
    assert_eq!(results[1].0, "call-b");
    let resumed = events
        .iter()
        .find(|e| e["type"] == "turn.started" && e["data"]["resumes"].is_string())
        .unwrap();
    assert_eq!(resumed["data"]["resumes"], waiting_turn(&events));
    assert_eq!(events.last().unwrap()["data"]["result"], "Off to both.");
}

/// The turn that asked the client first.
fn waiting_turn(events: &[Value]) -> Value {
    events
        .iter()
        .find(|e| e["type"] == "actions.client_requested")
        .unwrap()["turnId"]
        .clone()
}
