//! `agentkit-serve` as a child process: it serves the bundled example
//! agents, keeps a call that waits for approval and a pending reminder
//! across a crash (SIGKILL), and stops cleanly on SIGTERM, as a container
//! runtime sends it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agentkit_test_support::http::Request;
use agentkit_test_support::process::free_port;
use serde_json::{Value, json};

fn spawn(state: &Path, port: u16) -> Child {
    spawn_dir(
        &agentkit_test_support::fixture_agent("weather-agent"),
        state,
        port,
    )
}

fn spawn_dir(dir: &Path, state: &Path, port: u16) -> Child {
    let child = Command::new(env!("CARGO_BIN_EXE_agentkit-serve"))
        .args(["--dir", &dir.display().to_string()])
        .args([
            "--port",
            &port.to_string(),
            "--dev",
            "--mode",
            "single",
            "--state-root",
            &state.display().to_string(),
        ])
        // The fixture's `alerts` channel authenticates with
        // `${ALERTS_TOKEN}`; unset, that policy is disabled with a warning.
        .env("ALERTS_TOKEN", "test-alerts-token")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr = addr(port);
    let deadline = Instant::now() + Duration::from_secs(20);
    while Request::get("/v1/health").send(addr).map(|r| r.status).ok() != Some(200) {
        assert!(Instant::now() < deadline, "agentkit-serve did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

fn addr(port: u16) -> SocketAddr {
    format!("127.0.0.1:{port}").parse().unwrap()
}

fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(Instant::now() < deadline, "agentkit-serve did not exit");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn signal(child: &Child, sig: &str) {
    assert!(
        Command::new("kill")
            .args([sig, &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
}

#[cfg(unix)]
#[test]
fn serves_the_examples_survives_a_crash_with_a_parked_call_and_stops_on_sigterm() {
    let state = std::env::temp_dir().join(format!("agentkit-serve-test-{}", std::process::id()));
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = spawn(&state, port);
    let r = Request::post("/v1/session")
        .json(&json!({"message": "weather in NYC?"}))
        .send(addr(port))
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    // The offline model calls every tool; `post_alert` needs approval.
    let events = Request::get(&format!("/v1/session/{id}/stream"))
        .stream(addr(port))
        .unwrap()
        .until("action.approval_requested")
        .unwrap();
    let call = events.last().unwrap()["data"]["callId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(events.last().unwrap()["data"]["toolName"], "post_alert");

    // A crash while the call waits.
    signal(&child, "-KILL");
    wait_exit(&mut child);
    let mut child = spawn(&state, port);
    let pending = Request::get(&format!("/v1/session/{id}/approvals"))
        .send(addr(port))
        .unwrap();
    assert_eq!(pending.status, 200, "{}", pending.body);
    let pending = pending.json();
    assert_eq!(pending["approvals"][0]["callId"], call.as_str());
    assert_eq!(pending["approvals"][0]["live"], false);

    let r = Request::post(&format!("/v1/session/{id}/approvals/{call}"))
        .json(&json!({"decision": "approve"}))
        .send(addr(port))
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["resumed"], true);
    let events: Vec<Value> = Request::get(&format!("/v1/session/{id}/stream"))
        .stream(addr(port))
        .unwrap()
        .until("turn.completed")
        .unwrap();
    let failed = events.iter().find(|e| e["type"] == "turn.failed").unwrap();
    assert_eq!(failed["data"]["reason"], "restart");
    let alert = events
        .iter()
        .find(|e| e["type"] == "action.result" && e["data"]["toolName"] == "post_alert")
        .expect("the approved call ran after the restart");
    assert_eq!(alert["data"]["isError"], false, "{alert}");
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "turn.started" && e["data"]["resumes"].is_string())
    );

    signal(&child, "-TERM");
    let status = wait_exit(&mut child);
    assert!(status.success(), "{status:?}");
    let _ = std::fs::remove_dir_all(&state);
}

/// The model sets a reminder with `remind_me`; the server is killed; after
/// the restart the reminder is still armed for the same instant, and
/// firing it wakes the same conversation.
#[cfg(unix)]
#[test]
fn a_pending_reminder_survives_a_crash_and_wakes_its_conversation() {
    // The folder's name is the agent's slug: no leading dot.
    let project = tempfile::Builder::new().prefix("oven-").tempdir().unwrap();
    let agent = project.path().join("agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("agent.toml"),
        "model = \"scripted:script.json\"\n[harness]\nbuiltin_tools = [\"remind_me\"]\n",
    )
    .unwrap();
    std::fs::write(
        agent.join("instructions.md"),
        "You keep track of the oven.\n",
    )
    .unwrap();
    std::fs::write(
        agent.join("script.json"),
        r#"{"turns": [
            {"steps": [
                {"toolCalls": [{"name": "remind_me", "input": {"delay": "1h", "prompt": "Check the oven.", "purpose": "oven"}}]},
                {"text": "I will remind you."}
            ]},
            {"steps": [{"text": "The oven is off."}]}
        ]}"#,
    )
    .unwrap();
    let state = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut child = spawn_dir(project.path(), state.path(), port);
    let r = Request::post("/v1/session")
        .json(&json!({"message": "remind me about the oven in an hour"}))
        .send(addr(port))
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let events = Request::get(&format!("/v1/session/{id}/stream"))
        .stream(addr(port))
        .unwrap()
        .until("session.waiting")
        .unwrap();
    let set = events
        .iter()
        .find(|e| e["type"] == "action.result" && e["data"]["toolName"] == "remind_me")
        .expect("the model called remind_me");
    assert_eq!(set["data"]["isError"], false, "{set}");
    let reminder = set["data"]["output"]["reminderId"]
        .as_str()
        .unwrap()
        .to_owned();
    let listed = Request::get("/v1/dev/reminders")
        .send(addr(port))
        .unwrap()
        .json();
    let before = listed["reminders"][0].clone();
    assert_eq!(before["id"], reminder.as_str(), "{listed}");
    assert_eq!(before["status"], "armed");

    // A crash: no graceful close, nothing flushed on the way out.
    signal(&child, "-KILL");
    wait_exit(&mut child);
    let mut child = spawn_dir(project.path(), state.path(), port);
    let listed = Request::get("/v1/dev/reminders")
        .send(addr(port))
        .unwrap()
        .json();
    let after = &listed["reminders"][0];
    assert_eq!(after["id"], reminder.as_str(), "{listed}");
    assert_eq!(after["status"], "armed");
    assert_eq!(after["nextFireAt"], before["nextFireAt"]);
    assert_eq!(after["sessionId"], id.as_str());

    let fired = Request::post(&format!("/v1/dev/reminders/{reminder}"))
        .send(addr(port))
        .unwrap();
    assert_eq!(fired.status, 200, "{}", fired.body);
    // The stream replays the first turn; the wake is the second.
    let mut stream = Request::get(&format!("/v1/session/{id}/stream"))
        .stream(addr(port))
        .unwrap();
    let mut events = Vec::new();
    let mut done = 0;
    let mut last = String::new();
    while let Some(e) = stream.next_json().unwrap() {
        if e["type"] == "turn.completed" {
            done += 1;
            last = e["data"]["result"].as_str().unwrap_or_default().to_owned();
        }
        events.push(e);
        if done == 2 {
            break;
        }
    }
    let received: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "message.received")
        .collect();
    assert_eq!(received.len(), 2, "{received:?}");
    assert!(
        received[1].to_string().contains("Check the oven."),
        "{received:?}"
    );
    assert_eq!(last, "The oven is off.");

    signal(&child, "-TERM");
    let status = wait_exit(&mut child);
    assert!(status.success(), "{status:?}");
}

/// `text` without ANSI colour sequences.
fn plain(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Exits as `agentkit serve` does (its test checks the same rendering):
/// 1 with the diagnostics on an invalid project, 2 on a usage error.
#[test]
fn an_invalid_project_exits_1_with_its_diagnostics_and_a_usage_error_exits_2() {
    let dir = agentkit_test_support::fixtures_dir().join("invalid/tools");
    let out = Command::new(env!("CARGO_BIN_EXE_agentkit-serve"))
        .args(["--dir", &dir.display().to_string(), "--port", "0"])
        .env("NO_COLOR", "1")
        .env_remove("AGENTKIT_LOG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let found = agentkit::discover(&dir).unwrap();
    let mut expected = Vec::new();
    agentkit_cli::render_refusal(&mut expected, &found.diagnostics).unwrap();
    let expected = plain(&String::from_utf8(expected).unwrap());
    assert!(
        plain(&stderr).contains(&expected),
        "stderr:\n{stderr}\nexpected:\n{expected}"
    );

    let out = Command::new(env!("CARGO_BIN_EXE_agentkit-serve"))
        .args(["--port", "not-a-port"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error:"));
}

/// Warns as `agentkit serve` does (its test checks the same lines): the
/// dev fallback model, and listening beyond loopback without a token.
#[test]
fn the_banner_warns_about_the_dev_model_and_unauthenticated_exposure() {
    let state = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentkit-serve"));
    command
        .args([
            "--dir",
            &agentkit_test_support::fixture_agent("weather-agent")
                .display()
                .to_string(),
            "--port",
            &port.to_string(),
            "--host",
            "0.0.0.0",
            "--dev",
            "--state-root",
            &state.path().display().to_string(),
        ])
        .env("NO_COLOR", "1")
        .env("ALERTS_TOKEN", "test-alerts-token")
        .env_remove("AGENTKIT_MODEL")
        .env_remove("AGENTKIT_BEARER_TOKEN");
    let (status, banner) =
        agentkit_test_support::process::serve_then_stop(command, port, Duration::from_secs(20));
    assert!(status.success(), "{status:?}\n{banner}");
    assert!(
        banner.contains(&format!("1 agent listening on http://0.0.0.0:{port}")),
        "{banner}"
    );
    assert!(
        banner.contains("dev: agents without a model use the offline `test` model"),
        "{banner}"
    );
    assert!(
        banner.contains("warning: listening beyond loopback without --bearer-token: callers need an authored auth chain or get 401"),
        "{banner}"
    );
}
