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
    let port = super::chat::free_port();
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
