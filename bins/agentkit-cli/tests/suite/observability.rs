//! Observability of the real binary: the `OTEL_*` variables turn export
//! on, a turn cut short by SIGKILL is recorded in its trace when the
//! restarted server recovers it, `--log-format json` lines carry the
//! session, turn and trace ids, and a gRPC protocol is refused.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use agentkit_test_support::http::Request;
use agentkit_test_support::otlp::OtlpReceiver;
use agentkit_test_support::process::{ServerProcess, free_port};
use serde_json::{Value, json};

const CALLER_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";

fn project(root: &Path) {
    let agent = root.join("bot/agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("agent.toml"),
        "model = \"scripted:script.json\"\n",
    )
    .unwrap();
    std::fs::write(
        agent.join("script.json"),
        r#"{"turns": [{"steps": [{"text": "slow", "delayMs": 60000}]}]}"#,
    )
    .unwrap();
    std::fs::write(agent.join("instructions.md"), "Test agent.\n").unwrap();
}

fn start(root: &Path, port: u16, receiver: &OtlpReceiver, stderr: &Path) -> ServerProcess {
    let child = Command::new(env!("CARGO_BIN_EXE_agentkit"))
        .args([
            "serve",
            "--dir",
            "bot",
            "--port",
            &port.to_string(),
            "--state-root",
            "state",
            "--log-format",
            "json",
        ])
        .current_dir(root)
        .env("NO_COLOR", "1")
        .env("AGENTKIT_LOG", "info,agentkit_harness=debug")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url())
        .env("OTEL_SERVICE_NAME", "cli-test")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(stderr).unwrap())
        .spawn()
        .unwrap();
    ServerProcess::healthy(child, port, Duration::from_secs(30))
}

fn json_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

#[test]
fn a_killed_turn_ends_in_its_trace_after_the_restart_and_json_logs_carry_ids() {
    let dir = tempfile::tempdir().unwrap();
    project(dir.path());
    let receiver = OtlpReceiver::start();
    let port = free_port();
    let first_log = dir.path().join("first.log");
    let mut server = start(dir.path(), port, &receiver, &first_log);
    let r = Request::post("/bot/v1/session")
        .header(
            "traceparent",
            &format!("00-{CALLER_TRACE}-b7ad6b7169203331-01"),
        )
        .json(&json!({"message": "hi"}))
        .send(server.addr)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let seen = Request::get(&format!("/bot/v1/session/{id}/stream"))
        .stream(server.addr)
        .unwrap()
        .until("step.started")
        .unwrap();
    let turn = seen.last().unwrap()["turnId"].as_str().unwrap().to_owned();
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    drop(server);

    // Every line was JSON; the turn's carried its ids and its trace.
    let lines = json_lines(&first_log);
    let running = lines
        .iter()
        .find(|l| l["message"] == "turn running")
        .unwrap_or_else(|| panic!("{lines:#?}"));
    assert_eq!(running["sessionId"], id.as_str());
    assert_eq!(running["turnId"], turn.as_str());
    assert_eq!(running["traceId"], CALLER_TRACE);
    assert_eq!(running["level"], "DEBUG");

    // The restarted server recovers the session when it is addressed,
    // and the interrupted turn's span goes out with the caller's trace.
    let second_log = dir.path().join("second.log");
    let server = start(dir.path(), port, &receiver, &second_log);
    let events = Request::get(&format!("/bot/v1/session/{id}/events"))
        .send(server.addr)
        .unwrap();
    assert_eq!(events.status, 200, "{}", events.body);
    let spans = receiver.wait_for(Duration::from_secs(10), |spans| {
        spans.iter().any(|s| s.name == "invoke_agent bot")
    });
    let span = spans
        .iter()
        .find(|s| s.name == "invoke_agent bot")
        .unwrap_or_else(|| panic!("{spans:#?}"));
    assert_eq!(span.trace_id, CALLER_TRACE);
    assert_eq!(span.attr_str("agentkit.turn.interrupted"), Some("restart"));
    assert_eq!(span.resource["service.name"], "cli-test");
    assert!(span.parent_span_id.is_some());
    assert!(span.end_unix_nano > span.start_unix_nano);
    let lines = json_lines(&second_log);
    assert!(
        lines.iter().any(
            |l| l["message"] == "recording a turn interrupted by a restart"
                && l["sessionId"] == id.as_str()
                && l["turnId"] == turn.as_str()
        ),
        "{lines:#?}"
    );
}

#[test]
fn an_unknown_otlp_protocol_is_refused_with_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    project(dir.path());
    let out = Command::new(env!("CARGO_BIN_EXE_agentkit"))
        .args(["serve", "--dir", "bot", "--port", "0"])
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("`http/json` is not supported") && stderr.contains("http/protobuf"),
        "{stderr}"
    );
}

/// `agentkit run` and `agentkit eval` honour `OTEL_*` as `serve` does:
/// their ephemeral server exports each turn's spans before it exits.
#[test]
fn run_and_eval_export_their_turns_over_otlp() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("bot");
    std::fs::create_dir_all(project.join("agent")).unwrap();
    std::fs::create_dir_all(project.join("evals")).unwrap();
    std::fs::write(project.join("agent/agent.toml"), "model = \"test\"\n").unwrap();
    std::fs::write(project.join("agent/instructions.md"), "Test agent.\n").unwrap();
    std::fs::write(project.join("evals/evals.toml"), "max_concurrency = 1\n").unwrap();
    std::fs::write(
        project.join("evals/hi.eval.toml"),
        "send = \"hi from the eval\"\nexpect = { succeeded = true }\n",
    )
    .unwrap();
    let receiver = OtlpReceiver::start();
    let otel = |c: &mut Command| {
        c.env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url())
            .env("OTEL_SERVICE_NAME", "cli-run-test");
    };
    let run = super::agentkit_with(dir.path(), &["run", "--dir", "bot", "-m", "hi"], otel);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let spans = receiver.wait_for(Duration::from_secs(10), |spans| {
        spans.iter().any(|s| s.name == "invoke_agent bot")
    });
    let span = spans.iter().find(|s| s.name == "invoke_agent bot").unwrap();
    assert_eq!(span.resource["service.name"], "cli-run-test");
    let before = spans
        .iter()
        .filter(|s| s.name == "invoke_agent bot")
        .count();

    let run = super::agentkit_with(dir.path(), &["eval", "--dir", "bot", "--no-stream"], otel);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let spans = receiver.wait_for(Duration::from_secs(10), |spans| {
        spans
            .iter()
            .filter(|s| s.name == "invoke_agent bot")
            .count()
            > before
    });
    assert!(
        spans
            .iter()
            .filter(|s| s.name == "invoke_agent bot")
            .count()
            > before,
        "{spans:#?}"
    );
}
