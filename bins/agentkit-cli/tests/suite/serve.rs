//! `agentkit serve` as a real child process: the startup banner, a crash
//! (SIGKILL) mid-turn and a restart on the same state root, and a graceful
//! SIGTERM that records the interrupted turn.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agentkit_test_support::http::Request;
use agentkit_test_support::process::{ServerProcess, free_port};
use serde_json::{Value, json};

/// The first turn holds for a minute; the second answers at once.
const SCRIPT: &str = r#"{"turns": [{"steps": [{"text": "slow", "delayMs": 60000}]}, {"steps": [{"text": "after the restart"}]}]}"#;

fn project(root: &Path) {
    let agent = root.join("bot/agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("agent.toml"),
        "model = \"scripted:script.json\"\n",
    )
    .unwrap();
    std::fs::write(agent.join("script.json"), SCRIPT).unwrap();
    std::fs::write(agent.join("instructions.md"), "Test agent.\n").unwrap();
}

fn start(root: &Path, port: u16) -> ServerProcess {
    let child = Command::new(env!("CARGO_BIN_EXE_agentkit"))
        .args([
            "serve",
            "--dir",
            "bot",
            "--port",
            &port.to_string(),
            "--state-root",
            "state",
        ])
        .current_dir(root)
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    ServerProcess::healthy(child, port, Duration::from_secs(20))
}

fn events(addr: SocketAddr, id: &str) -> Vec<Value> {
    let r = Request::get(&format!("/bot/v1/session/{id}/events"))
        .send(addr)
        .unwrap();
    r.body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn turn_ends(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| {
            matches!(
                e["type"].as_str(),
                Some("turn.completed" | "turn.failed" | "session.waiting")
            )
        })
        .map(|e| {
            format!(
                "{}{}",
                e["type"].as_str().unwrap(),
                e["data"]["reason"]
                    .as_str()
                    .map(|r| format!("({r})"))
                    .unwrap_or_default()
            )
        })
        .collect()
}

/// Starts a session and waits until its slow turn is running.
fn start_slow_turn(addr: SocketAddr) -> (String, String) {
    let r = Request::post("/bot/v1/session")
        .json(&json!({"message": "first"}))
        .send(addr)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let token = r.json()["continuationToken"].as_str().unwrap().to_owned();
    let mut lines = Request::get(&format!("/bot/v1/session/{id}/stream"))
        .stream(addr)
        .unwrap();
    lines.until("step.started").unwrap();
    (id, token)
}

#[test]
fn a_killed_server_restarts_with_its_sessions_intact() {
    let tmp = tempfile::tempdir().unwrap();
    project(tmp.path());
    let port = free_port();
    let mut server = start(tmp.path(), port);
    let (id, token) = start_slow_turn(server.addr);
    // A crash: no chance to record anything.
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    drop(server);

    let server = start(tmp.path(), port);
    let after = events(server.addr, &id);
    assert_eq!(
        turn_ends(&after),
        ["turn.failed(restart)", "session.waiting"]
    );
    assert_eq!(after[0]["type"], "session.started");
    assert!(
        after
            .iter()
            .enumerate()
            .all(|(i, e)| e["index"] == i as u64)
    );
    // The session takes its next follow-up, with the first message in its history.
    let r = Request::post(&format!("/bot/v1/session/{id}"))
        .json(&json!({"message": "second", "continuationToken": token}))
        .send(server.addr)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let mut lines = Request::get(&format!(
        "/bot/v1/session/{id}/stream?startIndex={}",
        after.len()
    ))
    .stream(server.addr)
    .unwrap();
    let tail = lines.until("session.waiting").unwrap();
    let done = tail.iter().find(|e| e["type"] == "turn.completed").unwrap();
    assert_eq!(done["data"]["result"], "after the restart");
}

#[cfg(unix)]
#[test]
fn sigterm_interrupts_running_turns_and_exits_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    project(tmp.path());
    let port = free_port();
    let mut server = start(tmp.path(), port);
    let (id, _) = start_slow_turn(server.addr);
    let status = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let exit = loop {
        if let Some(s) = server.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "server did not exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "{exit:?}");
    let banner = {
        use std::io::Read;
        let mut out = String::new();
        server
            .child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        out
    };
    assert!(
        banner.contains(&format!("1 agent listening on http://127.0.0.1:{port}")),
        "{banner}"
    );
    assert!(banner.contains("/bot → /bot/v1/*"), "{banner}");
    drop(server);
    // The log says why the turn ended; a restart adds nothing to it.
    let server = start(tmp.path(), port);
    assert_eq!(
        turn_ends(&events(server.addr, &id)),
        ["turn.failed(shutdown)", "session.waiting"]
    );
}

/// Warns as `agentkit-serve` does (its test checks the same lines): the
/// dev fallback model, and listening beyond loopback without a token.
#[test]
fn the_banner_warns_about_the_dev_model_and_unauthenticated_exposure() {
    let tmp = tempfile::tempdir().unwrap();
    project(tmp.path());
    let port = free_port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentkit"));
    command
        .args([
            "serve",
            "--dir",
            "bot",
            "--port",
            &port.to_string(),
            "--host",
            "0.0.0.0",
            "--dev",
            "--state-root",
            "state",
        ])
        .current_dir(tmp.path())
        .env("NO_COLOR", "1")
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

/// `AGENTKIT_OPERATOR_TOKEN` reaches the server: its holder is the
/// operator from a remote-looking request, reads a `local` session and
/// sees it listed with its owner; the same token given as the bearer
/// token refuses to start.
#[test]
fn the_operator_token_from_the_environment_makes_an_operator() {
    let tmp = tempfile::tempdir().unwrap();
    project(tmp.path());
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_agentkit"))
        .args(["serve", "--dir", "bot", "--port", &port.to_string()])
        .args(["--state-root", "state"])
        .current_dir(tmp.path())
        .env("NO_COLOR", "1")
        .env("AGENTKIT_OPERATOR_TOKEN", "op-from-env")
        .env_remove("AGENTKIT_BEARER_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = ServerProcess::healthy(child, port, Duration::from_secs(20));
    let (id, _) = start_slow_turn(server.addr);
    let remote = |req: Request| {
        req.bearer("op-from-env")
            .host("agents.example")
            .header("x-forwarded-for", "203.0.113.4")
    };
    let info = remote(Request::get("/bot/v1/info"))
        .send(server.addr)
        .unwrap();
    assert_eq!(info.json()["caller"]["operator"], true, "{}", info.body);
    let list = remote(Request::get("/bot/v1/sessions"))
        .send(server.addr)
        .unwrap()
        .json();
    assert_eq!(list["sessions"][0]["sessionId"], id.as_str());
    assert_eq!(list["sessions"][0]["principalId"], "local");
    let stop = remote(Request::post(&format!("/bot/v1/session/{id}/stop")))
        .send(server.addr)
        .unwrap();
    assert_eq!(stop.json()["interrupted"], true, "{}", stop.body);
    drop(server);

    let run = super::agentkit_with(
        tmp.path(),
        &[
            "serve",
            "--dir",
            "bot",
            "--port",
            "0",
            "--bearer-token",
            "same",
        ],
        |cmd| {
            cmd.env("AGENTKIT_OPERATOR_TOKEN", "same");
        },
    );
    assert_ne!(run.code, 0);
    assert!(
        run.stderr.contains("operator token must differ"),
        "{}",
        run.stderr
    );
}
