//! `agentkit-serve` as a child process: it serves the bundled example
//! agents and stops cleanly on SIGTERM, as a container runtime sends it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agentkit_test_support::http::Request;
use serde_json::json;

#[cfg(unix)]
#[test]
fn serves_the_examples_and_stops_on_sigterm() {
    let state = std::env::temp_dir().join(format!("agentkit-serve-test-{}", std::process::id()));
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentkit-serve"))
        .args([
            "--dir",
            &agentkit_test_support::fixture_agent("weather-agent")
                .display()
                .to_string(),
        ])
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
        // `${ALERTS_TOKEN}`; unset, its chain could never admit anyone and
        // serve refuses to start.
        .env("ALERTS_TOKEN", "test-alerts-token")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Request::get("/v1/health").send(addr).map(|r| r.status).ok() != Some(200) {
        assert!(Instant::now() < deadline, "agentkit-serve did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = Request::post("/v1/session")
        .json(&json!({"message": "weather in NYC?"}))
        .send(addr)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let events = Request::get(&format!("/v1/session/{id}/stream"))
        .stream(addr)
        .unwrap()
        .until("session.waiting")
        .unwrap();
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "action.result" && e["data"]["toolName"] == "get_weather")
    );

    assert!(
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "agentkit-serve ignored SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    let _ = std::fs::remove_dir_all(&state);
}
