//! The `scripted:<file>` provider and the loop it drives: streaming,
//! multi-step tool use, validation errors fed back to the model.

use agentkit_harness::{FinishReason, StepEvent, TurnOutcome};
use serde_json::json;

use super::*;

const ECHO_TOOL: (&str, &str) = (
    "tools/echo.toml",
    r#"description = "Echo the word"
command = ["python3", "echo.py"]
[input_schema]
type = "object"
required = ["word"]
additionalProperties = false
properties.word = { type = "string", minLength = 1 }
"#,
);
const ECHO_PY: (&str, &str) = (
    "tools/echo.py",
    "import json, sys\nprint(json.dumps({'echo': json.load(sys.stdin)['word']}))\n",
);

#[tokio::test]
async fn streams_text_in_deltas_that_concatenate_to_the_message() {
    let text = "The quick brown fox jumps over the lazy dog, twice over and over again.";
    let script = json!({"turns": [{"steps": [{"text": text, "reasoning": "thinking about foxes and dogs"}]}]});
    let project = TestProject::new(&[("script.json", &script.to_string())]);
    let (outcome, events) = run(project.input(scripted("script.json"), "go")).await;
    assert_eq!(completed(&outcome), text);

    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            StepEvent::MessageAppended { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert!(deltas.len() > 2, "{deltas:?}");
    assert_eq!(deltas.concat(), text);
    // Each delta carries the text so far.
    let last = events
        .iter()
        .rev()
        .find_map(|e| match e {
            StepEvent::MessageAppended { text, .. } => Some(text.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(last, text);

    let types: Vec<String> = events.iter().map(|e| e.event_type().to_string()).collect();
    let first_text = types.iter().position(|t| t == "message.appended").unwrap();
    let reasoning_done = types
        .iter()
        .position(|t| t == "reasoning.completed")
        .unwrap();
    assert!(
        types[1] == "reasoning.appended" && reasoning_done < first_text,
        "{types:?}"
    );
    assert!(events.contains(&StepEvent::ReasoningCompleted {
        text: "thinking about foxes and dogs".into()
    }));
    assert!(events.contains(&StepEvent::MessageCompleted {
        text: text.into(),
        finish_reason: FinishReason::Stop
    }));
}

#[tokio::test]
async fn follows_tool_calls_across_steps() {
    let script = json!({"turns": [{"steps": [
        {"text": "Let me echo.", "toolCalls": [{"name": "echo", "input": {"word": "hi"}}]},
        {"text": "Echoed."}
    ]}]});
    let project = TestProject::new(&[ECHO_TOOL, ECHO_PY, ("s.json", &script.to_string())]);
    let (outcome, events) = run(project.input(scripted("s.json"), "echo hi")).await;
    assert_eq!(completed(&outcome), "Echoed.");

    let lines: Vec<String> = render(&events)
        .lines()
        .filter(|l| !l.starts_with("message.appended"))
        .map(|l| {
            // Durations vary; blank them out.
            let mut v: serde_json::Value =
                serde_json::from_str(l.split_once(' ').unwrap().1).unwrap();
            if v.get("durationMs").is_some() {
                v["durationMs"] = json!("_");
            }
            format!("{} {v}", l.split(' ').next().unwrap())
        })
        .collect();
    assert_eq!(
        lines,
        [
            r#"step.started {"step":1}"#,
            r#"message.completed {"text":"Let me echo.","finishReason":"tool_call"}"#,
            r#"actions.requested {"calls":[{"callId":"turn-1-s1-c1","toolName":"echo","input":{"word":"hi"}}]}"#,
            r#"action.result {"callId":"turn-1-s1-c1","toolName":"echo","output":{"echo":"hi"},"isError":false,"durationMs":"_"}"#,
            r#"step.completed {"step":1,"durationMs":"_"}"#,
            r#"step.started {"step":2}"#,
            r#"message.completed {"text":"Echoed.","finishReason":"stop"}"#,
            r#"step.completed {"step":2,"durationMs":"_"}"#,
        ]
    );
}

#[tokio::test]
async fn the_turn_index_picks_the_script_turn() {
    let script = json!({"turns": [
        {"steps": [{"text": "first turn"}]},
        {"steps": [{"text": "second turn"}]}
    ]});
    let project = TestProject::new(&[("s.json", &script.to_string())]);
    let mut input = project.input(scripted("s.json"), "b");
    input.history = vec![
        user("a"),
        agentkit_protocol::Message::Assistant {
            text: "first turn".into(),
            tool_calls: vec![],
        },
    ];
    assert_eq!(completed(&run(input.clone()).await.0), "second turn");
    input.history.push(user("c"));
    // Wraps around.
    assert_eq!(completed(&run(input).await.0), "first turn");
}

#[tokio::test]
async fn invalid_unknown_and_agent_tool_calls_are_error_results_not_failures() {
    let script = json!({"turns": [{"steps": [
        {"toolCalls": [
            {"name": "echo", "input": {"word": 5, "extra": true}},
            {"name": "nope", "input": {}},
            {"name": "note", "input": {"text": "x"}},
            {"name": "echo", "input": {"word": "ok"}}
        ]},
        {"text": "done"}
    ]}]});
    let project = TestProject::new(&[
        ECHO_TOOL,
        ECHO_PY,
        (
            "tools/note.toml",
            "description = \"Note\"\nexecution = \"agent\"\nscript = \"echo hi\"\n[input_schema]\ntype = \"object\"\n",
        ),
        ("s.json", &script.to_string()),
    ]);
    let (outcome, events) = run(project.input(scripted("s.json"), "go")).await;
    assert_eq!(completed(&outcome), "done");
    let results = results(&events);
    assert_eq!(results.len(), 4);
    let invalid = results.iter().find(|r| r.0 == "echo" && r.2).unwrap();
    let message = invalid.1.as_str().unwrap();
    assert!(
        message.starts_with("invalid input for `echo`: "),
        "{message}"
    );
    assert!(message.contains("/word"), "{message}");
    assert!(message.contains("extra"), "{message}");
    let unknown = results.iter().find(|r| r.0 == "nope").unwrap();
    assert_eq!(unknown.1, json!("unknown tool `nope`"));
    assert!(unknown.2);
    let agent_tool = results.iter().find(|r| r.0 == "note").unwrap();
    assert!(agent_tool.2);
    assert!(agent_tool.1.as_str().unwrap().contains("agent tool"));
    assert!(results.contains(&("echo".into(), json!({"echo": "ok"}), false)));
}

#[tokio::test]
async fn approval_schemas_refuse_only_matching_calls() {
    let script = json!({"turns": [{"steps": [
        {"toolCalls": [
            {"name": "echo", "input": {"word": "safe"}},
            {"name": "echo", "input": {"word": "danger"}}
        ]},
        {"text": "done"}
    ]}]});
    let tool = ECHO_TOOL.1.replace(
        "[input_schema]",
        "[needs_approval]\nproperties.word = { const = \"danger\" }\n\n[input_schema]",
    );
    let project = TestProject::new(&[
        ("tools/echo.toml", &tool),
        ECHO_PY,
        ("s.json", &script.to_string()),
    ]);
    let (outcome, events) = run(project.input(scripted("s.json"), "go")).await;
    assert_eq!(completed(&outcome), "done");
    let results = results(&events);
    assert!(results.contains(&("echo".into(), json!({"echo": "safe"}), false)));
    assert!(results.contains(&(
        "echo".into(),
        json!("approval required: approvals are not available yet"),
        true
    )));
}

#[tokio::test]
async fn script_errors_fail_the_turn_naming_the_file() {
    let project = TestProject::new(&[("bad.json", "{\"turns\": [")]);
    let (outcome, _) = run(project.input(scripted("missing.json"), "go")).await;
    let TurnOutcome::Failed { message } = outcome else {
        panic!("{outcome:?}")
    };
    assert!(message.contains("missing.json"), "{message}");

    let (outcome, _) = run(project.input(scripted("bad.json"), "go")).await;
    let TurnOutcome::Failed { message } = outcome else {
        panic!("{outcome:?}")
    };
    assert!(message.starts_with("invalid model script ") && message.contains("bad.json"));

    let script = json!({"turns": [{"steps": [{"error": "rate limited"}]}]});
    let project = TestProject::new(&[("s.json", &script.to_string())]);
    let (outcome, _) = run(project.input(scripted("s.json"), "go")).await;
    assert_eq!(
        outcome,
        TurnOutcome::Failed {
            message: "rate limited".into()
        }
    );
}

#[tokio::test]
async fn usage_sums_over_steps() {
    let script = json!({"turns": [{"steps": [
        {"toolCalls": [{"name": "echo", "input": {"word": "a"}}],
         "usage": {"inputTokens": 10, "outputTokens": 2, "cacheReadTokens": 1}},
        {"text": "done", "usage": {"inputTokens": 20, "outputTokens": 3}}
    ]}]});
    let project = TestProject::new(&[ECHO_TOOL, ECHO_PY, ("s.json", &script.to_string())]);
    let (outcome, _) = run(project.input(scripted("s.json"), "go")).await;
    let TurnOutcome::Completed { usage, .. } = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(
        (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens
        ),
        (30, 5, 1)
    );
}
