//! What ends a turn early: max_steps, the turn timeout, an interrupt; and
//! the concurrency of one step's tool calls.

use std::time::{Duration, Instant};

use agentkit_harness::{TurnOutcome, run_turn};
use serde_json::json;

use super::*;

/// Each call marks that it started, then waits for the other call's mark:
/// run one after the other, the first would give up after 10 s and say it
/// was alone. No wall-clock bound, so a loaded machine cannot fail it.
const SLEEPER_PY: &str = r#"import json, os, sys, time
args = json.load(sys.stdin)
me = args['name']
other = {'a': 'b', 'b': 'a'}[me]
d = os.environ['AGENTKIT_WORKSPACE_DIR']
open(os.path.join(d, me + '.started'), 'w').close()
deadline = time.time() + 10
while not os.path.exists(os.path.join(d, other + '.started')):
    if time.time() > deadline:
        print(json.dumps({'slept': me, 'alone': True}))
        sys.exit(0)
    time.sleep(0.01)
print(json.dumps({'slept': me}))
"#;

fn sleeper(name: &str) -> String {
    format!(
        "description = \"Sleep\"\ncommand = [\"python3\", \"sleeper.py\"]\n[input_schema]\ntype = \"object\"\nproperties.name = {{ type = \"string\" }}\n# {name}\n"
    )
}

#[tokio::test]
async fn max_steps_fails_the_turn() {
    let script = json!({"turns": [{"steps": [
        {"text": "again", "toolCalls": [{"name": "nope", "input": {}}]}
    ]}]});
    let project = TestProject::new(&[
        ("agent.toml", "[harness]\nmax_steps = 3\n"),
        ("s.json", &script.to_string()),
    ]);
    let (outcome, events) = run(project.input(scripted("s.json"), "go")).await;
    assert_eq!(
        outcome,
        TurnOutcome::Failed {
            message: "max_steps (3) reached".into()
        }
    );
    assert_eq!(
        render(&events)
            .lines()
            .filter(|l| l.starts_with("step.completed"))
            .count(),
        3
    );
}

#[tokio::test]
async fn the_turn_timeout_fails_the_turn() {
    let script = json!({"turns": [{"steps": [{"text": "late", "delayMs": 10000}]}]});
    let project = TestProject::new(&[
        ("agent.toml", "[harness]\nturn_timeout = \"300ms\"\n"),
        ("s.json", &script.to_string()),
    ]);
    let started = Instant::now();
    let (outcome, _) = run(project.input(scripted("s.json"), "go")).await;
    assert_eq!(
        outcome,
        TurnOutcome::Failed {
            message: "turn timed out after 300ms".into()
        }
    );
    assert!(started.elapsed() < Duration::from_secs(10), "no hang");
}

#[tokio::test]
async fn cancel_interrupts_a_waiting_step_promptly() {
    let script = json!({"turns": [{"steps": [{"text": "late", "delayMs": 30000}]}]});
    let project = TestProject::new(&[("s.json", &script.to_string())]);
    let input = project.input(scripted("s.json"), "go");
    let cancel = input.cancel.clone();
    let (tx, _rx) = tokio::sync::mpsc::channel(64);
    let turn = tokio::spawn(run_turn(input, tx));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    cancel.cancel();
    let outcome = tokio::time::timeout(Duration::from_secs(2), turn)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outcome, TurnOutcome::Interrupted);
    assert!(started.elapsed() < Duration::from_secs(5), "promptly");
}

#[tokio::test]
async fn cancel_kills_running_tools() {
    let script = json!({"turns": [{"steps": [
        {"toolCalls": [{"name": "hang", "input": {}}]},
        {"text": "never"}
    ]}]});
    let project = TestProject::new(&[
        (
            "tools/hang.toml",
            "description = \"Hang\"\ncommand = [\"./hang.sh\"]\ntimeout = \"60s\"\n[input_schema]\ntype = \"object\"\n",
        ),
        (
            "tools/hang.sh",
            "#!/bin/sh\necho $$ > \"$AGENTKIT_WORKSPACE_DIR/hang.pid\"\nexec sleep 30\n",
        ),
        ("s.json", &script.to_string()),
    ]);
    let ws = tempfile::tempdir().unwrap();
    let mut input = project.input(scripted("s.json"), "go");
    input.workspace = ws.path().to_path_buf();
    let cancel = input.cancel.clone();
    let (tx, _rx) = tokio::sync::mpsc::channel(64);
    let turn = tokio::spawn(run_turn(input, tx));
    let pid = read_pid(&ws.path().join("hang.pid")).await;
    assert!(is_alive(pid));
    cancel.cancel();
    let outcome = tokio::time::timeout(Duration::from_secs(2), turn)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outcome, TurnOutcome::Interrupted);
    assert!(
        gone(pid, Duration::from_secs(2)).await,
        "pid {pid} survived"
    );
}

#[tokio::test]
async fn tool_calls_of_one_step_run_concurrently() {
    let script = json!({"turns": [{"steps": [
        {"toolCalls": [
            {"name": "sleep_a", "input": {"name": "a"}},
            {"name": "sleep_b", "input": {"name": "b"}}
        ]},
        {"text": "rested"}
    ]}]});
    let project = TestProject::new(&[
        ("tools/sleep_a.toml", &sleeper("a")),
        ("tools/sleep_b.toml", &sleeper("b")),
        ("tools/sleeper.py", SLEEPER_PY),
        ("s.json", &script.to_string()),
    ]);
    let (outcome, events) = run(project.input(scripted("s.json"), "go")).await;
    assert_eq!(completed(&outcome), "rested");
    let results = results(&events);
    // Each saw the other running: neither was alone.
    assert!(
        results.contains(&("sleep_a".into(), json!({"slept": "a"}), false)),
        "{results:?}"
    );
    assert!(
        results.contains(&("sleep_b".into(), json!({"slept": "b"}), false)),
        "{results:?}"
    );
}

#[tokio::test]
async fn a_provider_without_its_key_fails_with_a_clear_message() {
    let project = TestProject::new(&[]);
    let model = agentkit_manifest::parse_model_string("openai:gpt-4.1-mini").unwrap();
    // The default configuration: the public API, no key.
    let (outcome, events) = run(project.input(model, "hi")).await;
    assert_eq!(
        outcome,
        TurnOutcome::Failed {
            message: "OPENAI_API_KEY is not set (or pass --api-key)".into()
        }
    );
    assert!(events.is_empty());
}
