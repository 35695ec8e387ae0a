//! The `scripted:<file>` provider and the loop it drives: streaming,
//! multi-step tool use, validation errors fed back to the model.

use agentkit_harness::{Decision, FinishReason, StepEvent, TurnOutcome};
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
            // The estimate depends on the built-in tools' schemas.
            if v.get("estimatedInputTokens").is_some() {
                v["estimatedInputTokens"] = json!("_");
            }
            // The request's digests are checked by `agentkit replay`'s
            // tests.
            if v.get("request").is_some() {
                v["request"] = json!("_");
            }
            format!("{} {v}", l.split(' ').next().unwrap())
        })
        .collect();
    assert_eq!(
        lines,
        [
            r#"step.started {"step":1,"request":"_"}"#,
            r#"message.completed {"text":"Let me echo.","finishReason":"tool_call"}"#,
            r#"actions.requested {"calls":[{"callId":"turn-1-s1-c1","toolName":"echo","input":{"word":"hi"}}]}"#,
            r#"action.result {"callId":"turn-1-s1-c1","toolName":"echo","output":{"echo":"hi"},"isError":false,"durationMs":"_"}"#,
            r#"step.completed {"step":1,"durationMs":"_","usage":{"inputTokens":14,"outputTokens":20,"cacheReadTokens":0,"cacheWriteTokens":0},"model":"scripted:s.json","costUsd":null}"#,
            r#"step.started {"step":2,"request":"_"}"#,
            r#"message.completed {"text":"Echoed.","finishReason":"stop"}"#,
            r#"step.completed {"step":2,"durationMs":"_","usage":{"inputTokens":68,"outputTokens":3,"cacheReadTokens":0,"cacheWriteTokens":0},"model":"scripted:s.json","costUsd":null}"#,
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
async fn approval_schemas_park_only_matching_calls() {
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

    // No gate in this host: the matching call is denied, the other runs.
    let (outcome, events) = run(project.input(scripted("s.json"), "go")).await;
    assert_eq!(completed(&outcome), "done");
    let found = results(&events);
    assert!(found.contains(&("echo".into(), json!({"echo": "safe"}), false)));
    assert!(found.contains(&(
        "echo".into(),
        json!("the call was denied by system: approvals are not available in this host"),
        true
    )));

    // A gate that denies with a reason: the model reads the reason, and
    // only the matching call was parked and resolved.
    let gate = std::sync::Arc::new(TestGate::new(|call| {
        Decision::deny(format!("{call} is too risky"), "alice")
    }));
    let mut input = project.input(scripted("s.json"), "go");
    input.approvals = Some(gate.clone());
    let (outcome, events) = run(input).await;
    assert_eq!(completed(&outcome), "done");
    let found = results(&events);
    assert!(found.contains(&("echo".into(), json!({"echo": "safe"}), false)));
    let denied = found.iter().find(|r| r.2).expect("a denied call");
    assert!(
        denied
            .1
            .as_str()
            .unwrap()
            .starts_with("the call was denied by alice: ")
            && denied.1.as_str().unwrap().ends_with(" is too risky"),
        "{denied:?}"
    );
    let requested: Vec<&StepEvent> = events
        .iter()
        .filter(|e| matches!(e, StepEvent::ApprovalRequested { .. }))
        .collect();
    assert_eq!(requested.len(), 1, "only the matching call parks");
    let StepEvent::ApprovalRequested { input, .. } = requested[0] else {
        unreachable!()
    };
    assert_eq!(input, &json!({"word": "danger"}));
    let resolved = events
        .iter()
        .find(|e| matches!(e, StepEvent::ApprovalResolved { .. }))
        .expect("resolved");
    assert_eq!(resolved.payload().to_value()["decision"], "deny");
    assert_eq!(resolved.payload().to_value()["by"], "alice");
    assert_eq!(gate.parked(), 1);

    // Approved: the call runs.
    let mut input = project.input(scripted("s.json"), "go");
    input.approvals = Some(std::sync::Arc::new(TestGate::new(|_| Decision {
        approved: true,
        reason: None,
        by: "bob".into(),
    })));
    let (_, events) = run(input).await;
    let found = results(&events);
    assert!(found.contains(&("echo".into(), json!({"echo": "danger"}), false)));
}

#[tokio::test]
async fn an_unanswered_approval_times_out_without_counting_against_the_turn() {
    let script = json!({"turns": [{"steps": [
        {"toolCalls": [{"name": "echo", "input": {"word": "x"}}]},
        {"text": "done"}
    ]}]});
    let tool = ECHO_TOOL
        .1
        .replace("[input_schema]", "needs_approval = true\n\n[input_schema]");
    let project = TestProject::new(&[
        ("tools/echo.toml", &tool),
        ECHO_PY,
        ("s.json", &script.to_string()),
        // The approval may wait longer than the whole turn may run: the
        // turn's clock stops while a call is parked.
        (
            "agent.toml",
            "model = \"scripted:s.json\"\n[harness]\napproval_timeout = \"1500ms\"\nturn_timeout = \"1s\"\n",
        ),
    ]);
    let mut input = project.input(scripted("s.json"), "go");
    input.approvals = Some(std::sync::Arc::new(TestGate::never()));
    let (outcome, events) = run(input).await;
    assert_eq!(completed(&outcome), "done");
    let found = results(&events);
    assert_eq!(
        found,
        vec![(
            "echo".into(),
            json!("the call was denied by timeout: timed out"),
            true
        )]
    );
}

/// An approval gate that answers at once (or never).
#[derive(Debug)]
struct TestGate {
    answer: Option<fn(&str) -> Decision>,
    parked: std::sync::atomic::AtomicUsize,
}

impl TestGate {
    fn new(answer: fn(&str) -> Decision) -> TestGate {
        TestGate {
            answer: Some(answer),
            parked: Default::default(),
        }
    }

    fn never() -> TestGate {
        TestGate {
            answer: None,
            parked: Default::default(),
        }
    }

    fn parked(&self) -> usize {
        self.parked.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl agentkit_harness::ApprovalGate for TestGate {
    fn park(&self, _turn: &str, call_id: &str) -> agentkit_harness::DecisionFuture {
        self.parked
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        match self.answer {
            Some(answer) => {
                let decision = answer(call_id);
                Box::pin(async move { decision })
            }
            None => Box::pin(std::future::pending()),
        }
    }
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

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct AddInput {
    a: i64,
    b: i64,
}

#[tokio::test]
async fn rust_tools_reach_the_model_validated_and_typed() {
    let script = json!({"turns": [{"steps": [
        {"toolCalls": [
            {"name": "add", "input": {"a": 2, "b": 3}},
            {"name": "add", "input": {"a": "two"}}
        ]},
        {"text": "done"}
    ]}]});
    let project = TestProject::new(&[("s.json", &script.to_string())]);
    let add = agentkit_harness::RustTool::new(
        "add",
        "Adds two numbers",
        |input: AddInput, ctx: agentkit_harness::ToolContext| async move {
            assert_eq!(ctx.session_id, "sess-1");
            Ok::<_, String>(json!({"sum": input.a + input.b}))
        },
    );
    let spec = agentkit_harness::DynTool::spec(&add).clone();
    assert_eq!(spec.input_schema["required"], json!(["a", "b"]));
    let mut input = project.input(scripted("s.json"), "go");
    input.tools = vec![add.into_dyn()];
    let (outcome, events) = run(input).await;
    assert_eq!(completed(&outcome), "done");
    let found = results(&events);
    assert!(found.contains(&("add".into(), json!({"sum": 5}), false)));
    let (_, message, _) = found.iter().find(|r| r.2).expect("the invalid call");
    assert!(
        message
            .as_str()
            .unwrap()
            .starts_with("invalid input for `add`:"),
        "{message}"
    );
}

/// A gate where calls of client tools get `answer`'s result (or wait
/// forever).
#[derive(Debug)]
struct ClientGate {
    answer: Option<fn(&str) -> agentkit_harness::ToolOutput>,
}

impl agentkit_harness::ApprovalGate for ClientGate {
    fn park(&self, _turn: &str, _call_id: &str) -> agentkit_harness::DecisionFuture {
        Box::pin(std::future::pending())
    }

    fn park_client(&self, _turn: &str, call_id: &str) -> agentkit_harness::ClientResultFuture {
        match self.answer {
            Some(answer) => {
                let out = answer(call_id);
                Box::pin(async move { Some(out) })
            }
            None => Box::pin(std::future::pending()),
        }
    }
}

#[tokio::test]
async fn a_client_tools_call_waits_for_the_client_whose_result_the_model_sees() {
    let script = json!({"turns": [{"steps": [
        {"toolCalls": [
            {"name": "pick", "input": {"q": "which city?"}},
            {"name": "pick", "input": {"q": 1}}
        ]},
        {"text": "done"}
    ]}]});
    let project = TestProject::new(&[
        ("s.json", &script.to_string()),
        (
            "agent.toml",
            "model = \"scripted:s.json\"\n[harness]\napproval_timeout = \"300ms\"\n",
        ),
    ]);
    let pick = agentkit_protocol::ClientTool {
        name: "pick".into(),
        description: "Ask the user.".into(),
        parameters: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
    };
    let mut input = project.input(scripted("s.json"), "go");
    input.client_tools = vec![pick.clone()];
    input.approvals = Some(std::sync::Arc::new(ClientGate {
        answer: Some(|_| agentkit_harness::ToolOutput {
            output: json!("Paris"),
            is_error: false,
        }),
    }));
    let (outcome, events) = run(input).await;
    assert_eq!(completed(&outcome), "done");
    // Only the valid call waited for the client; the other got the
    // schema's error without reaching it.
    let waited: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            StepEvent::ClientActionsRequested { calls } => Some(calls.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(waited.len(), 1);
    assert_eq!(waited[0].len(), 1);
    assert_eq!(waited[0][0].input, json!({"q": "which city?"}));
    let found = results(&events);
    assert_eq!(found.len(), 2);
    assert!(found[0].2, "{found:?}");
    assert!(
        found[0]
            .1
            .as_str()
            .unwrap()
            .starts_with("invalid input for `pick`"),
        "{found:?}"
    );
    assert_eq!(found[1], ("pick".into(), json!("Paris"), false));

    // A client that never answers: `approval_timeout` ends the wait.
    let mut input = project.input(scripted("s.json"), "go");
    input.client_tools = vec![pick];
    input.approvals = Some(std::sync::Arc::new(ClientGate { answer: None }));
    let (outcome, events) = run(input).await;
    assert_eq!(completed(&outcome), "done");
    let found = results(&events);
    assert_eq!(
        found[1],
        (
            "pick".into(),
            json!("the client did not answer within approval_timeout (300ms)"),
            true
        )
    );
}
