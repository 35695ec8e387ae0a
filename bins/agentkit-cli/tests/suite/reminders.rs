//! The built-in `remind_me` tool through `agentkit serve --dev` as a real
//! child process: the model creates a reminder, the server is killed
//! (SIGKILL) and restarted on the same state root, and the reminder is
//! still there to fire by hand through the dev routes.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use agentkit_test_support::http::Request;
use agentkit_test_support::process::{ServerProcess, free_port};
use serde_json::{Value, json};

/// Turn 0 asks for a reminder; turn 1 (the wake) answers.
const SCRIPT: &str = r#"{"turns": [
  {"steps": [
    {"toolCalls": [{"name": "remind_me", "input": {"delay": "20m", "prompt": "Re-check CI", "purpose": "ci_recheck"}}]},
    {"text": "I will check again in 20 minutes."}
  ]},
  {"steps": [{"text": "Woke up and re-checked."}]}
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
            "--state-root",
            "state",
        ])
        .current_dir(root)
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    ServerProcess::healthy(child, port, Duration::from_secs(30))
}

fn stream_until(addr: SocketAddr, id: &str, start: usize, t: &str) -> Vec<Value> {
    Request::get(&format!("/bot/v1/session/{id}/stream?startIndex={start}"))
        .stream(addr)
        .unwrap()
        .until(t)
        .unwrap()
}

#[test]
fn remind_me_survives_a_kill_and_fires_through_the_dev_routes() {
    let tmp = tempfile::tempdir().unwrap();
    let agent = tmp.path().join("bot/agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("agent.toml"),
        "model = \"scripted:script.json\"\n[harness]\nbuiltin_tools = [\"remind_me\"]\n",
    )
    .unwrap();
    std::fs::write(agent.join("script.json"), SCRIPT).unwrap();
    std::fs::write(agent.join("instructions.md"), "Test agent.\n").unwrap();

    let mut server = start(tmp.path());
    let r = Request::post("/bot/v1/session")
        .json(&json!({"message": "watch my PR"}))
        .send(server.addr)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let events = stream_until(server.addr, &id, 0, "session.waiting");
    let result = events
        .iter()
        .find(|e| e["type"] == "action.result")
        .unwrap_or_else(|| panic!("{events:?}"));
    assert_eq!(result["data"]["isError"], false, "{result}");
    let reminder_id = result["data"]["output"]["reminderId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        result["data"]["output"]["nextFireAt"].is_string(),
        "{result}"
    );

    // Crash: no shutdown, no flush beyond what was already durable.
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    let server = start(tmp.path());
    let list = Request::get("/bot/v1/dev/reminders")
        .send(server.addr)
        .unwrap()
        .json();
    let listed = &list["reminders"][0];
    assert_eq!(listed["id"], reminder_id.as_str(), "{list}");
    assert_eq!(listed["status"], "armed");
    assert_eq!(listed["purpose"], "ci_recheck");
    assert_eq!(listed["channelId"], "http");
    assert_eq!(listed["sessionId"], id.as_str());
    // --dev: timers are off, so it fires only by hand.
    let fired = Request::post(&format!("/bot/v1/dev/reminders/{reminder_id}"))
        .send(server.addr)
        .unwrap();
    assert_eq!(fired.status, 200, "{}", fired.body);
    assert_eq!(fired.json()["sessionId"], id.as_str());
    let before = events.len();
    let woken = stream_until(server.addr, &id, before, "session.waiting");
    let received = woken
        .iter()
        .find(|e| e["type"] == "message.received")
        .unwrap_or_else(|| panic!("{woken:?}"));
    assert!(
        received["data"]["text"]
            .as_str()
            .unwrap()
            .contains("Re-check CI"),
        "{received}"
    );
    let done = woken
        .iter()
        .find(|e| e["type"] == "turn.completed")
        .unwrap();
    assert_eq!(done["data"]["result"], "Woke up and re-checked.");
}
