//! The AG-UI endpoint (`/<slug>/v1/ag-ui`) driven by the official client,
//! `@ag-ui/client`'s `HttpAgent` (pinned, installed by `.ci/run`), against
//! a real server with the offline `test` model: a thread of two runs, and
//! a run that ends on an interrupt (a call waiting for approval) resumed
//! by the next run's `resume`. The events are checked one by one as the
//! client received them (it verifies their order itself).

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
}
