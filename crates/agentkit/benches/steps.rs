//! The step view's cost on a long session: one session of 100 turns, each
//! a `list` call and an answer (200 model steps), through the mock
//! provider (OpenAI wire); then `GET …/steps` and `GET
//! …/steps/:step/request` for the first, middle and last step, each timed
//! over several calls (the median), with the size of what they answer.
//! A step request reads the session's log and folds it up to the step
//! (twice: the step and the one before, for the diff), so its cost grows
//! with the log, not with the number of sessions.
//!
//! `cargo bench -p agentkit --bench steps --profile dev`; `-- --quick`
//! runs 25 turns.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::{Duration, Instant};

use agentkit_test_support::http::Request;
use agentkit_test_support::provider::{MockProvider, Reply, Step};
use serde_json::{Value, json};

fn write(path: &std::path::Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn respond(body: &Value) -> Reply {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let input = body.to_string().len() as u64 / 4;
    if messages.last().is_some_and(|m| m["role"] == "tool") {
        Step::text(&format!("Noted. {}", "r".repeat(300)))
            .tokens(input, 80, 0, 0)
            .into()
    } else {
        Step::new()
            .call(
                &format!("c{}", messages.len()),
                "list",
                &json!({"path": "."}),
            )
            .tokens(input, 10, 0, 0)
            .into()
    }
}

fn median(mut times: Vec<Duration>) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1000.0
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let turns = if quick { 25 } else { 100 };
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agents/bot/agent");
    write(
        &agent.join("agent.toml"),
        "[model]\nprovider = \"openai\"\nid = \"gpt-4.1-mini\"\n[harness]\nbuiltin_tools = [\"list\"]\ncompaction = \"off\"\n",
    );
    write(&agent.join("instructions.md"), "You keep notes.\n");
    let mock = MockProvider::responding(respond);
    let mut providers = agentkit::ProviderConfig::default();
    providers.openai.base_url = mock.openai_base_url();
    providers.openai.api_key = Some("sk-mock".into());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let handle = rt
        .block_on(agentkit::serve(
            &dir.path().join("agents"),
            agentkit::ServeOptions {
                port: 0,
                dev: true,
                state_root: Some(dir.path().join("state")),
                providers,
                ..agentkit::ServeOptions::default()
            },
        ))
        .unwrap();
    let addr = handle.local_addr();
    let mut session: Option<(String, String)> = None;
    let mut next_index = 0u64;
    for i in 0..turns {
        let message = format!("Note {i}: {}", "m".repeat(200));
        let r = match &session {
            None => Request::post("/bot/v1/session").json(&json!({ "message": message })),
            Some((id, token)) => Request::post(&format!("/bot/v1/session/{id}"))
                .json(&json!({ "message": message, "continuationToken": token })),
        }
        .send(addr)
        .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        let doc = r.json();
        let id = doc["sessionId"].as_str().unwrap().to_owned();
        let token = doc["continuationToken"].as_str().unwrap().to_owned();
        let mut lines = Request::get(&format!(
            "/bot/v1/session/{id}/stream?startIndex={next_index}"
        ))
        .stream(addr)
        .unwrap();
        let mut started = false;
        loop {
            let e = lines.next_json().unwrap().expect("the stream ended");
            next_index = e["index"].as_u64().unwrap() + 1;
            match e["type"].as_str().unwrap() {
                "turn.started" => started = true,
                "turn.failed" => panic!("turn {i} failed: {e}"),
                "session.waiting" if started => break,
                _ => {}
            }
        }
        session = Some((id, token));
    }
    let (id, _) = session.unwrap();
    let steps = turns * 2;
    let reps = 9;
    let time = |path: &str| {
        let mut times = Vec::new();
        let mut bytes = 0;
        for _ in 0..reps {
            let started = Instant::now();
            let r = Request::get(path).send(addr).unwrap();
            times.push(started.elapsed());
            assert_eq!(r.status, 200, "{}", r.body);
            bytes = r.body.len();
        }
        (median(times), bytes)
    };
    println!(
        "steps bench: one session of {turns} turns, {steps} model steps, {next_index} events; median of {reps} calls"
    );
    let (ms, bytes) = time(&format!("/bot/v1/session/{id}/steps"));
    println!("  GET …/steps: {ms:.1} ms, {bytes} bytes");
    for n in [1, steps / 2, steps] {
        let (ms, bytes) = time(&format!("/bot/v1/session/{id}/steps/{n}/request"));
        println!("  GET …/steps/{n}/request: {ms:.1} ms, {bytes} bytes");
    }
    rt.block_on(handle.close());
}
