//! The AG-UI endpoint (`/<slug>/v1/ag-ui`) driven by the official client,
//! `@ag-ui/client`'s `HttpAgent` (pinned, installed by `.ci/run`), against
//! a real server with the offline `test` model: a thread of two runs, and
//! a run that ends on an interrupt (a call waiting for approval) resumed
//! by the next run's `resume`; and a front-end tool's round trip (the
//! client's `tools`, answered by a `tool` message on the next run). The
//! events are checked one by one as the client received them (it verifies
//! their order itself).

use std::path::PathBuf;

use agentkit::ServeOptions;
use serde_json::Value;

use super::mcp::host;

const ECHO_TOOL: &str = r#"description = "Echo the input back."
command = ["python3", "-c", "import json,sys; print(json.dumps({'echo': json.load(sys.stdin)}))"]
[input_schema]
type = "object"
required = ["text"]
properties.text = { type = "string" }
"#;

const GUARDED_TOOL: &str = r#"description = "Echo, after a human agrees."
command = ["python3", "-c", "import json,sys; print(json.dumps({'echo': json.load(sys.stdin)}))"]
needs_approval = true
[input_schema]
type = "object"
required = ["text"]
properties.text = { type = "string" }
"#;

/// Where `.ci/run` installs `@ag-ui/client` (`AGENTKIT_AGUI_CLIENT`, else
/// `target/agui-client`); `None` after saying why outside CI.
#[allow(clippy::print_stderr)]
fn client_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("AGENTKIT_AGUI_CLIENT")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/agui-client")
        });
    if dir
        .join("node_modules/@ag-ui/client/package.json")
        .is_file()
    {
        return Some(dir);
    }
    let reason = format!(
        "no @ag-ui/client at {} (install it with `npm install --prefix target/agui-client @ag-ui/client@1.0.0`)",
        dir.display()
    );
    if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
        panic!("{reason}");
    }
    eprintln!("skipping the AG-UI client test: {reason}");
    None
}

/// The events of one run, one per line, ids replaced by their kind.
fn lines(run: &Value) -> String {
    run["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let mut e = e.clone();
            for key in ["toolCallId", "messageId"] {
                if let Some(v) = e.get_mut(key) {
                    *v = Value::String(key.to_owned());
                }
            }
            if let Some(interrupts) = e.pointer_mut("/outcome/interrupts") {
                for i in interrupts.as_array_mut().unwrap() {
                    i["id"] = "callId".into();
                    i["toolCallId"] = "callId".into();
                }
            }
            if let Some(usage) = e.get_mut("usage") {
                *usage = Value::String("…".into());
            }
            e.to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_official_agui_client_runs_a_thread_and_resumes_an_interrupt() {
    let Some(modules) = client_dir() else { return };
    let h = host(
        &[
            (
                "bot",
                &[
                    ("agent.toml", "model = \"test\"\n"),
                    ("instructions.md", "You are a test agent.\n"),
                    ("tools/echo.toml", ECHO_TOOL),
                ],
            ),
            (
                "guard",
                &[
                    ("agent.toml", "model = \"test\"\n"),
                    ("instructions.md", "You are a careful agent.\n"),
                    ("tools/echo.toml", GUARDED_TOOL),
                ],
            ),
        ],
        ServeOptions {
            bearer_token: Some("sk-agui".to_owned()),
            ..ServeOptions::default()
        },
    );
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/js/agui_client.mjs");
    let base = format!("http://{}", h.addr());
    let out = std::process::Command::new("node")
        .arg(&script)
        .arg(&modules)
        .arg(format!("{base}/bot/v1/ag-ui"))
        .arg(format!("{base}/guard/v1/ag-ui"))
        .arg("sk-agui")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the AG-UI client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();

    expect_test::expect![[r#"
        {"type":"RUN_STARTED","threadId":"thread-1","runId":"run-1","protocolVersion":"1.0"}
        {"type":"STEP_STARTED","stepName":"step 1"}
        {"type":"TOOL_CALL_START","toolCallId":"toolCallId","toolCallName":"echo"}
        {"type":"TOOL_CALL_ARGS","toolCallId":"toolCallId","delta":"{\"text\":\"example\"}"}
        {"type":"TOOL_CALL_END","toolCallId":"toolCallId"}
        {"type":"TOOL_CALL_RESULT","messageId":"messageId","toolCallId":"toolCallId","content":"{\"echo\":{\"text\":\"example\"}}","role":"tool"}
        {"type":"STEP_FINISHED","stepName":"step 1"}
        {"type":"STEP_STARTED","stepName":"step 2"}
        {"type":"TEXT_MESSAGE_START","messageId":"messageId","role":"assistant"}
        {"type":"TEXT_MESSAGE_CONTENT","messageId":"messageId","delta":"You said: hello over "}
        {"type":"TEXT_MESSAGE_CONTENT","messageId":"messageId","delta":"AG-UI\nI called echo({\"text\":\"example\"}) "}
        {"type":"TEXT_MESSAGE_CONTENT","messageId":"messageId","delta":"→ {\"echo\":{\"text\":\"example\"}}"}
        {"type":"TEXT_MESSAGE_END","messageId":"messageId"}
        {"type":"STEP_FINISHED","stepName":"step 2"}
        {"type":"RUN_FINISHED","threadId":"thread-1","runId":"run-1","result":"You said: hello over AG-UI\nI called echo({\"text\":\"example\"}) → {\"echo\":{\"text\":\"example\"}}","outcome":{"type":"success"},"usage":"…"}"#]].assert_eq(&lines(&v["first"]));
    // The thread's second run continues its session: only the new text.
    let second = lines(&v["second"]);
    assert!(
        second.contains(r#""delta":"You said: and again\n""#),
        "{second}"
    );
    assert_eq!(
        v["second"]["newMessages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()["role"],
        "assistant"
    );
    expect_test::expect![[r#"
        {"type":"RUN_STARTED","threadId":"thread-g","runId":"run-g1","protocolVersion":"1.0"}
        {"type":"STEP_STARTED","stepName":"step 1"}
        {"type":"TOOL_CALL_START","toolCallId":"toolCallId","toolCallName":"echo"}
        {"type":"TOOL_CALL_ARGS","toolCallId":"toolCallId","delta":"{\"text\":\"example\"}"}
        {"type":"TOOL_CALL_END","toolCallId":"toolCallId"}
        {"type":"STEP_FINISHED","stepName":"step 1"}
        {"type":"RUN_FINISHED","threadId":"thread-g","runId":"run-g1","outcome":{"type":"interrupt","interrupts":[{"id":"callId","reason":"tool_approval","message":"the agent's call of `echo` with {\"text\":\"example\"} waits for a human's approval","toolCallId":"callId","responseSchema":{"type":"object","properties":{"approved":{"type":"boolean"},"reason":{"type":"string"}},"required":["approved"]}}]},"usage":"…"}"#]].assert_eq(&lines(&v["interrupted"]));
    expect_test::expect![[r#"
        {"type":"RUN_STARTED","threadId":"thread-g","runId":"run-g2","protocolVersion":"1.0"}
        {"type":"TOOL_CALL_RESULT","messageId":"messageId","toolCallId":"toolCallId","content":"{\"echo\":{\"text\":\"example\"}}","role":"tool"}
        {"type":"STEP_STARTED","stepName":"step 2"}
        {"type":"TEXT_MESSAGE_START","messageId":"messageId","role":"assistant"}
        {"type":"TEXT_MESSAGE_CONTENT","messageId":"messageId","delta":"You said: please echo\n"}
        {"type":"TEXT_MESSAGE_CONTENT","messageId":"messageId","delta":"I called echo({\"text\":\"example\"}) → "}
        {"type":"TEXT_MESSAGE_CONTENT","messageId":"messageId","delta":"{\"echo\":{\"text\":\"example\"}}"}
        {"type":"TEXT_MESSAGE_END","messageId":"messageId"}
        {"type":"STEP_FINISHED","stepName":"step 2"}
        {"type":"RUN_FINISHED","threadId":"thread-g","runId":"run-g2","result":"You said: please echo\nI called echo({\"text\":\"example\"}) → {\"echo\":{\"text\":\"example\"}}","outcome":{"type":"success"},"usage":"…"}"#]].assert_eq(&lines(&v["resumed"]));
    // What the client kept of the resumed run: the call's result, then
    // the reply.
    let kept = v["resumed"]["newMessages"].as_array().unwrap();
    assert_eq!(kept[0]["role"], "tool");
    assert_eq!(kept[1]["role"], "assistant");

    // A front-end tool: the `test` model calls the agent's echo and the
    // client's pick_city; the run ends once echo ran, the client answers
    // pick_city on the next run, and the model sees its answer (and the
    // run's context, before the user's text).
    expect_test::expect![[r#"
        {"type":"RUN_STARTED","threadId":"thread-f","runId":"run-f1","protocolVersion":"1.0"}
        {"type":"STEP_STARTED","stepName":"step 1"}
        {"type":"TOOL_CALL_START","toolCallId":"toolCallId","toolCallName":"echo"}
        {"type":"TOOL_CALL_ARGS","toolCallId":"toolCallId","delta":"{\"text\":\"example\"}"}
        {"type":"TOOL_CALL_END","toolCallId":"toolCallId"}
        {"type":"TOOL_CALL_START","toolCallId":"toolCallId","toolCallName":"pick_city"}
        {"type":"TOOL_CALL_ARGS","toolCallId":"toolCallId","delta":"{\"question\":\"example\"}"}
        {"type":"TOOL_CALL_END","toolCallId":"toolCallId"}
        {"type":"TOOL_CALL_RESULT","messageId":"messageId","toolCallId":"toolCallId","content":"{\"echo\":{\"text\":\"example\"}}","role":"tool"}
        {"type":"STEP_FINISHED","stepName":"step 1"}
        {"type":"RUN_FINISHED","threadId":"thread-f","runId":"run-f1","outcome":{"type":"success"},"usage":"…"}"#]].assert_eq(&lines(&v["frontCalled"]));
    expect_test::expect![[r#"
        {"type":"RUN_STARTED","threadId":"thread-f","runId":"run-f2","protocolVersion":"1.0"}
        {"type":"STEP_STARTED","stepName":"step 2"}
        {"type":"TEXT_MESSAGE_START","messageId":"messageId","role":"assistant"}
        {"type":"TEXT_MESSAGE_CONTENT","messageId":"messageId","delta":"You said: Context from "}
        {"type":"TEXT_MESSAGE_CONTENT","messageId":"messageId","delta":"the application:\n- page: "}
        {"type":"TEXT_MESSAGE_CONTENT","messageId":"messageId","delta":"checkout\n\nwhich city?\nI "}
        {"type":"TEXT_MESSAGE_CONTENT","messageId":"messageId","delta":"called echo({\"text\":\"example\"}) → {\"echo\":{\"text\":\"example\"}}\n"}
        {"type":"TEXT_MESSAGE_CONTENT","messageId":"messageId","delta":"I called pick_city({\"question\":\"example\"}) → "}
        {"type":"TEXT_MESSAGE_CONTENT","messageId":"messageId","delta":"Paris"}
        {"type":"TEXT_MESSAGE_END","messageId":"messageId"}
        {"type":"STEP_FINISHED","stepName":"step 2"}
        {"type":"RUN_FINISHED","threadId":"thread-f","runId":"run-f2","result":"You said: Context from the application:\n- page: checkout\n\nwhich city?\nI called echo({\"text\":\"example\"}) → {\"echo\":{\"text\":\"example\"}}\nI called pick_city({\"question\":\"example\"}) → Paris","outcome":{"type":"success"},"usage":"…"}"#]].assert_eq(&lines(&v["frontAnswered"]));
    // What the client kept of the first run: the calls (one assistant
    // message each) and echo's result; the script adds pick_city's.
    expect_test::expect![[r#"[{"role":"assistant","content":null,"toolCalls":["echo"]},{"role":"tool","content":"{\"echo\":{\"text\":\"example\"}}","toolCalls":[]},{"role":"assistant","content":null,"toolCalls":["pick_city"]}]"#]].assert_eq(&v["frontCalled"]["newMessages"].to_string());
}

/// The events of an AG-UI answer (`data:` lines of the SSE body).
fn sse(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

/// The events' types, with a tool call's name, its arguments or an
/// outcome where it says what happened; a run of text deltas is one line.
fn kinds(events: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in events.iter().map(|e| {
        let t = e["type"].as_str().unwrap().to_owned();
        match t.as_str() {
            "TOOL_CALL_START" => format!("{t} {}", e["toolCallName"].as_str().unwrap()),
            "TOOL_CALL_ARGS" => format!("{t} {}", e["delta"].as_str().unwrap()),
            "TOOL_CALL_RESULT" => format!("{t} {}", e["content"].as_str().unwrap()),
            "RUN_FINISHED" => format!("{t} {} result={}", e["outcome"]["type"], e["result"]),
            _ => t,
        }
    }) {
        if line != "TEXT_MESSAGE_CONTENT" || out.last().map(String::as_str) != Some(line.as_str()) {
            out.push(line);
        }
    }
    out
}

const PICK_SCRIPT: &str = r#"{"turns": [
  {"steps": [
    {"text": "", "toolCalls": [{"id": "call-pick", "name": "pick_city", "input": {"question": "Which city?"}}]},
    {"text": "Off to the city you picked."}
  ]}
]}"#;

/// Front-end tools over plain HTTP with a scripted model that calls one:
/// the run ends at the call, a run without its result is refused, the
/// next run's `tool` message is the result the turn goes on with, and a
/// tool named as one of the agent's is refused.
#[test]
fn a_front_end_tool_call_ends_the_run_and_the_next_runs_tool_message_answers_it() {
    use agentkit_test_support::http::Request;
    let h = host(
        &[(
            "front",
            &[
                ("agent.toml", "model = \"scripted:script.json\"\n"),
                ("script.json", PICK_SCRIPT),
                ("instructions.md", "You are a test agent.\n"),
                ("tools/echo.toml", ECHO_TOOL),
            ],
        )],
        ServeOptions {
            bearer_token: Some("sk-agui".to_owned()),
            // For the step's rebuilt context.
            dev: true,
            ..ServeOptions::default()
        },
    );
    let pick = serde_json::json!({
        "name": "pick_city",
        "description": "Ask the user to pick a city.",
        "parameters": {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]},
    });
    let run = |body: Value| {
        h.send(
            Request::post("/front/v1/ag-ui")
                .bearer("sk-agui")
                .json(&body),
        )
    };
    let user = serde_json::json!({"id": "u1", "role": "user", "content": "plan a trip"});
    let first = run(serde_json::json!({
        "threadId": "t1", "runId": "r1", "messages": [user], "tools": [pick],
    }));
    assert_eq!(first.status, 200, "{}", first.body);
    let events = sse(&first.body);
    assert_eq!(
        kinds(&events),
        [
            "RUN_STARTED",
            "STEP_STARTED",
            "TOOL_CALL_START pick_city",
            r#"TOOL_CALL_ARGS {"question":"Which city?"}"#,
            "TOOL_CALL_END",
            "STEP_FINISHED",
            r#"RUN_FINISHED "success" result=null"#,
        ]
    );
    assert_eq!(events[2]["toolCallId"], "call-pick");

    // The thread waits for the result: a new message is refused.
    let early = run(serde_json::json!({
        "threadId": "t1", "runId": "r1b", "tools": [pick],
        "messages": [user, {"id": "u2", "role": "user", "content": "never mind"}],
    }));
    assert_eq!(early.status, 409, "{}", early.body);
    assert!(early.body.contains("call-pick"), "{}", early.body);

    // The next run answers it: the turn goes on.
    let assistant = serde_json::json!({"id": "a1", "role": "assistant", "toolCalls": [
        {"id": "call-pick", "type": "function", "function": {"name": "pick_city", "arguments": "{\"question\":\"Which city?\"}"}}]});
    let second = run(serde_json::json!({
        "threadId": "t1", "runId": "r2", "tools": [pick],
        "messages": [user, assistant, {"id": "t1", "role": "tool", "toolCallId": "call-pick", "content": "Paris"}],
    }));
    assert_eq!(second.status, 200, "{}", second.body);
    let events = sse(&second.body);
    assert_eq!(
        kinds(&events),
        [
            "RUN_STARTED",
            "STEP_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "STEP_FINISHED",
            r#"RUN_FINISHED "success" result="Off to the city you picked.""#,
        ]
    );
    assert_eq!(events[0]["runId"], "r2");
    // The log: the call waited for the client, whose answer is its result.
    let message_id = events[2]["messageId"].as_str().unwrap();
    let session = message_id
        .strip_prefix("msg_")
        .unwrap()
        .split('.')
        .next()
        .unwrap();
    let log =
        h.send(Request::get(&format!("/front/v1/session/{session}/events")).bearer("sk-agui"));
    assert_eq!(log.status, 200, "{}", log.body);
    let log: Vec<Value> = log
        .body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |t: &str| log.iter().filter(|e| e["type"] == t).collect::<Vec<_>>();
    let received = of("message.received");
    assert_eq!(received[0]["data"]["clientTools"][0]["name"], "pick_city");
    let requested = of("actions.client_requested");
    assert_eq!(requested.len(), 1);
    assert_eq!(requested[0]["data"]["calls"][0]["callId"], "call-pick");
    let results = of("action.result");
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["data"]["output"], "Paris");
    assert_eq!(results[0]["data"]["isError"], false);
    assert_eq!(of("turn.completed").len(), 1);
    // The step that saw the result, rebuilt: the client's tool was
    // offered beside the agent's, and its result is in the conversation.
    let turn = of("turn.started")[0]["turnId"].as_str().unwrap();
    let context = h.send(
        Request::get(&format!(
            "/front/v1/session/{session}/context?turnId={turn}&step=2"
        ))
        .bearer("sk-agui"),
    );
    assert_eq!(context.status, 200, "{}", context.body);
    let context = context.json();
    let offered: Vec<&str> = context["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        offered.contains(&"echo") && offered.contains(&"pick_city"),
        "{offered:?}"
    );
    let last = context["conversation"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "tool", "{last}");
    assert_eq!(last["output"], "Paris", "{last}");

    // Answering again: nothing waits, and the run has no user message.
    let again = run(serde_json::json!({
        "threadId": "t1", "runId": "r3",
        "messages": [user, assistant, {"id": "t1", "role": "tool", "toolCallId": "call-pick", "content": "Rome"}],
    }));
    assert_eq!(again.status, 400, "{}", again.body);

    // A front-end tool named as one of the agent's own is refused.
    let clash = run(serde_json::json!({
        "threadId": "t2", "runId": "r1", "messages": [user],
        "tools": [{"name": "echo", "description": "mine", "parameters": {"type": "object"}}],
    }));
    assert_eq!(clash.status, 400, "{}", clash.body);
    assert!(
        clash
            .body
            .contains("client tool `echo` clashes with the agent's own tool"),
        "{}",
        clash.body
    );
}
