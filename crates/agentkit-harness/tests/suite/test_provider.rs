//! The `test` provider: calls every server tool once, then summarises.

use agentkit_harness::{StepEvent, TurnOutcome};

use super::*;

#[tokio::test]
async fn calls_every_server_tool_of_the_weather_agent_and_quotes_the_message() {
    let agent = weather_agent();
    let ws = tempfile::tempdir().unwrap();
    let input = turn_input(agent, test_model(), ws.path(), "What's the weather in NYC?");
    let (outcome, events) = run(input).await;

    let result = completed(&outcome);
    assert!(
        result.starts_with("You said: What's the weather in NYC?"),
        "{result}"
    );
    assert!(
        result.contains("I called get_weather({\"city\":\"example\"}) → "),
        "{result}"
    );
    assert!(result.contains("I called convert_units("), "{result}");

    let calls: Vec<String> = events
        .iter()
        .find_map(|e| match e {
            StepEvent::ActionsRequested { calls } => {
                Some(calls.iter().map(|c| c.tool_name.clone()).collect())
            }
            _ => None,
        })
        .unwrap();
    // forecast_note is an agent tool: the model runs it itself.
    assert_eq!(calls, ["convert_units", "get_weather", "post_alert"]);

    let mut results = results(&events);
    results.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(results.len(), 3);
    assert_eq!(results[0].0, "convert_units");
    assert_eq!(results[0].1, serde_json::json!({"value": 1.0, "unit": "F"}));
    assert!(!results[0].2);
    assert_eq!(results[1].0, "get_weather");
    assert_eq!(results[1].1["city"], "example");
    assert!(!results[1].2);
    // needs_approval = true and no approval gate in a bare harness: denied,
    // never run.
    assert_eq!(results[2].0, "post_alert");
    assert!(results[2].2);
    assert_eq!(
        results[2].1,
        "the call was denied by system: approvals are not available in this host"
    );
    assert!(result.contains("approvals are not available"), "{result}");

    let TurnOutcome::Completed { usage, .. } = outcome else {
        unreachable!()
    };
    assert!(usage.input_tokens > 0 && usage.output_tokens > 0);
}

#[tokio::test]
async fn without_tools_it_answers_in_one_step() {
    let project = TestProject::new(&[]);
    let mut input = project.input(test_model(), "first");
    input.user_messages.push("second".into());
    let (outcome, events) = run(input).await;
    assert_eq!(
        completed(&outcome),
        "You said: first\n\nsecond\nI called no tools."
    );

    let text = render(&events);
    let types: Vec<&str> = text.lines().map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(types.first(), Some(&"step.started"));
    assert_eq!(types.last(), Some(&"step.completed"));
    assert!(types.contains(&"message.appended"));
    assert!(!types.contains(&"actions.requested"));
    assert!(
        text.contains(r#"message.completed {"text":"You said: first\n\nsecond\nI called no tools.","finishReason":"stop"}"#),
        "{text}"
    );
}

#[tokio::test]
async fn calls_tools_again_on_every_turn() {
    let project = TestProject::new(&[
        (
            "tools/echo.toml",
            r#"description = "Echo"
command = ["python3", "echo.py"]
[input_schema]
type = "object"
required = ["word"]
properties.word = { type = "string" }
"#,
        ),
        (
            "tools/echo.py",
            "import json, sys\nprint(json.dumps({'echo': json.load(sys.stdin)['word']}))\n",
        ),
    ]);
    let mut input = project.input(test_model(), "again");
    input.history = vec![
        user("before"),
        agentkit_protocol::Message::Assistant {
            text: "You said: before".into(),
            tool_calls: vec![],
        },
    ];
    let (outcome, events) = run(input).await;
    assert_eq!(
        completed(&outcome),
        "You said: again\nI called echo({\"word\":\"example\"}) → {\"echo\":\"example\"}"
    );
    assert_eq!(
        render(&events)
            .lines()
            .filter(|l| l.starts_with("step.started"))
            .count(),
        2
    );
}
