//! `agentkit run`: turns against an ephemeral server, trajectory on stdout.

use std::process::Command;

use super::{Run, agentkit, agentkit_with, fixtures};

/// `agentkit run …` in `fixtures/`, with the offline model the fixtures
/// name and no ambient token.
fn run_in_fixtures(args: &[&str]) -> Run {
    agentkit_with(&fixtures(), args, |cmd: &mut Command| {
        cmd.env_remove("AGENTKIT_MODEL")
            .env_remove("AGENTKIT_BEARER_TOKEN");
    })
}

#[test]
fn one_message_calls_tools_and_replies() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("run.ndjson");
    let events = events.to_str().unwrap();
    let run = run_in_fixtures(&[
        "run",
        "--dir",
        "agents/weather-agent",
        "--message",
        "What's the weather in NYC?",
        "--events",
        events,
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["ok"], true);
    assert!(doc["sessionId"].as_str().unwrap().starts_with("ses_"));
    let turns = doc["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0]["status"], "completed");
    assert_eq!(turns[0]["messages"][0], "What's the weather in NYC?");
    let calls = doc["toolCalls"].as_array().unwrap();
    assert!(
        calls
            .iter()
            .any(|c| c["isError"] == false && !c["output"].is_null()),
        "{calls:#?}"
    );
    assert!(!doc["reply"].as_str().unwrap().is_empty());

    // The event log summarises to the same trajectory.
    let again = agentkit(dir.path(), &["trajectory", "--events", "run.ndjson"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(again.stdout, run.stdout);
    let log = std::fs::read_to_string(dir.path().join("run.ndjson")).unwrap();
    let last: serde_json::Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "session.waiting");
}

#[test]
fn a_malformed_model_is_refused_with_a_hint() {
    let run = run_in_fixtures(&[
        "run",
        "--dir",
        "agents/weather-agent",
        "--message",
        "hi",
        "--model",
        "gpt-4",
    ]);
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("--model"), "{}", run.stderr);
    assert!(run.stderr.contains("openai:"), "{}", run.stderr);
}

#[test]
fn two_messages_are_two_turns_of_one_session() {
    let run = run_in_fixtures(&[
        "run",
        "--dir",
        "agents/weather-agent",
        "--message",
        "What's the weather in NYC?",
        "-m",
        "And in Paris?",
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let turns = doc["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2, "{doc:#}");
    assert_eq!(turns[0]["messages"][0], "What's the weather in NYC?");
    assert_eq!(turns[1]["messages"][0], "And in Paris?");
    assert_ne!(turns[0]["turnId"], turns[1]["turnId"]);
    assert!(turns.iter().all(|t| t["status"] == "completed"));
    // Usage is summed over the turns.
    let sum: u64 = turns
        .iter()
        .map(|t| t["usage"]["outputTokens"].as_u64().unwrap())
        .sum();
    assert_eq!(doc["usage"]["outputTokens"].as_u64().unwrap(), sum);
}

#[test]
fn several_agents_need_agent_flag() {
    let run = run_in_fixtures(&["run", "--dir", "agents", "--message", "hi"]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(
        run.stderr
            .contains("holds several agents (concierge, weather-agent); choose one with --agent"),
        "{}",
        run.stderr
    );
    let run = run_in_fixtures(&[
        "run",
        "--dir",
        "agents",
        "--agent",
        "nobody",
        "--message",
        "hi",
    ]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(
        run.stderr.contains("has no agent `nobody`"),
        "{}",
        run.stderr
    );
}

#[test]
fn an_unreachable_url_names_it() {
    // Bind then drop: nothing listens on the port afterwards.
    let port = agentkit_test_support::process::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let run = run_in_fixtures(&["run", "--url", &url, "--message", "hi"]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(
        run.stderr
            .contains(&format!("POST {url}/v1/session failed")),
        "{}",
        run.stderr
    );
}

/// `agentkit run` on the bundled weather agent with a remote model,
/// `openai:*` or `anthropic:*` (chosen with `--model`), against the
/// shared mock provider: the model calls `get_weather`, the tool runs, and
/// the reply comes from the second step, whose request carries the tool's
/// result.
fn weather_with_remote_model(model: &str) {
    use agentkit_test_support::provider::{MockProvider, Step};
    let mock = MockProvider::start(vec![
        Step::new()
            .call(
                "call_w1",
                "get_weather",
                &serde_json::json!({"city": "Lisbon"}),
            )
            .into(),
        Step::text("Lisbon is fine today.").into(),
    ]);
    let config = tempfile::tempdir().unwrap();
    let run = agentkit_with(
        &fixtures(),
        &[
            "run",
            "--dir",
            "agents/weather-agent",
            "--message",
            "Weather in Lisbon?",
            "--model",
            model,
        ],
        |cmd: &mut Command| {
            cmd.env_remove("AGENTKIT_MODEL")
                .env("XDG_CONFIG_HOME", config.path())
                .env("OPENAI_BASE_URL", mock.openai_base_url())
                .env("OPENAI_API_KEY", "sk-mock-openai")
                .env("ANTHROPIC_BASE_URL", mock.anthropic_base_url())
                .env("ANTHROPIC_API_KEY", "sk-mock-anthropic")
                .env_remove("AGENTKIT_BEARER_TOKEN");
        },
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["reply"], "Lisbon is fine today.", "{doc:#}");
    let calls = doc["toolCalls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{calls:#?}");
    assert_eq!(calls[0]["toolName"], "get_weather");
    assert_eq!(calls[0]["isError"], false, "{calls:#?}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    // The tool's output (from `get_weather.py`) went back to the model.
    let output = calls[0]["output"].to_string();
    let second = requests[1].text();
    assert!(second.contains("call_w1"), "{second}");
    assert!(
        output.contains("Lisbon") && second.contains("Lisbon"),
        "{output}\n{second}"
    );
    assert!(!run.stderr.contains("sk-mock"), "{}", run.stderr);
}

#[test]
fn the_weather_agent_runs_on_openai() {
    weather_with_remote_model("openai:gpt-mock");
}

#[test]
fn the_weather_agent_runs_on_anthropic() {
    weather_with_remote_model("anthropic:claude-mock");
}
