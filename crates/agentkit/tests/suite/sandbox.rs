//! The sandbox through the whole host: a served agent's `shell` (a
//! scripted model) cannot reach the state root beside its workspace or a
//! file elsewhere on the host; a deterministic call (`POST /v1/tools/…`)
//! and MCP `call_tool` run the same sandbox, so neither can read another
//! session's workspace; `/v1/info` says what the host can do.

use agentkit::ServeOptions;
use agentkit_test_support::http::Request;
use serde_json::{Value, json};

use super::mcp::{Host, host, rpc_raw};

/// A tool that prints the file its input names.
const PROBE: &str = r#"description = "Prints a file"
command = ["python3", "-c", "import json,sys; print(open(json.load(sys.stdin)['path']).read().strip())"]
[input_schema]
type = "object"
required = ["path"]
properties.path = { type = "string" }
"#;

fn served(canary: &std::path::Path) -> Host {
    // The workspace is `<state>/bot/sessions/<id>/workspace`: the state
    // root is three folders up.
    let steps = json!([
        {"toolCalls": [{"name": "shell", "input": {"command": "pwd && echo SESSION-NOTE > notes.txt"}}]},
        {"toolCalls": [{"name": "shell", "input": {"command": "head -c 15 ../../../agentkit.sqlite"}}]},
        {"toolCalls": [{"name": "shell", "input": {"command": "touch ../../../pwned"}}]},
        {"toolCalls": [{"name": "shell", "input": {"command": format!("cat {}", canary.display())}}]},
        {"text": "done"}
    ]);
    let script = json!({"turns": [{"steps": steps}]}).to_string();
    let files: Vec<(&str, &str)> = vec![
        (
            "agent.toml",
            "model = \"scripted:script.json\"\n[harness]\nmax_steps = 10\n",
        ),
        ("script.json", Box::leak(script.into_boxed_str())),
        ("instructions.md", "You are a test agent.\n"),
        ("tools/probe.toml", PROBE),
    ];
    host(&[("bot", &files)], ServeOptions::default())
}

fn mcp_call_tool(h: &Host, args: Value) -> Value {
    let r = rpc_raw(
        h,
        "/bot/v1/mcp",
        "tools/call",
        json!({"name": "call_tool", "arguments": args}),
        &[],
    );
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["result"]["structuredContent"].clone()
}

fn denied(result: &Value, canary: &str, what: &str) {
    let text = result.to_string();
    assert!(
        text.contains("Permission denied") && !text.contains(canary),
        "{what}: {text}"
    );
}

#[test]
fn model_deterministic_and_mcp_calls_all_run_in_the_sandbox() {
    let status = agentkit::sandbox_status();
    if !status.available {
        assert!(
            std::env::var("CI").is_err(),
            "this CI host cannot sandbox: {status:?}"
        );
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let canary = outside.path().join("canary.txt");
    std::fs::write(&canary, "OUTSIDE-CANARY\n").unwrap();
    let h = served(&canary);

    let info = h.send(Request::get("/bot/v1/info")).json();
    assert_eq!(info["sandbox"]["available"], true, "{info}");
    assert_eq!(info["sandbox"]["mode"], "warn");
    assert_eq!(info["sandbox"]["abi"], json!(status.abi));

    // The model's shell, in session A.
    let r = h.send(Request::post("/bot/v1/session").json(&json!({"message": "go"})));
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let events = Request::get(&format!("/bot/v1/session/{id}/stream?startIndex=0"))
        .stream(h.addr())
        .unwrap()
        .until("session.waiting")
        .unwrap();
    let results: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "action.result")
        .map(|e| &e["data"])
        .collect();
    assert_eq!(results.len(), 4, "{events:?}");
    assert_eq!(results[0]["isError"], false, "{}", results[0]);
    let workspace = results[0]["output"].as_str().unwrap().to_owned();
    assert!(
        workspace.ends_with(&format!("{id}/workspace")),
        "{workspace}"
    );
    assert_eq!(results[1]["isError"], true, "{}", results[1]);
    denied(&results[1]["output"], "SQLite format", "the state database");
    assert_eq!(results[2]["isError"], true, "{}", results[2]);
    assert!(!h.dir.path().join("state/bot/pwned").exists());
    denied(&results[3]["output"], "OUTSIDE-CANARY", "a file elsewhere");

    // Session A's note, from a deterministic call outside the session
    // (its own ephemeral workspace) and from one bound to the session.
    let note = format!("{workspace}/notes.txt");
    let r = h.send(Request::post("/bot/v1/tools/probe").json(&json!({"input": {"path": note}})));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["isError"], true, "{}", r.body);
    denied(
        &r.json()["result"],
        "SESSION-NOTE",
        "another session's workspace",
    );
    let r = h.send(
        Request::post("/bot/v1/tools/probe")
            .json(&json!({"input": {"path": note}, "sessionId": id})),
    );
    assert_eq!(r.json()["result"], "SESSION-NOTE", "{}", r.body);

    // MCP `call_tool` runs the same way.
    let out = mcp_call_tool(&h, json!({"name": "probe", "input": {"path": note}}));
    assert_eq!(out["isError"], true, "{out}");
    denied(
        &out["result"],
        "SESSION-NOTE",
        "another session's workspace over MCP",
    );
    let out = mcp_call_tool(
        &h,
        json!({"name": "probe", "input": {"path": canary.display().to_string()}}),
    );
    denied(
        &out["result"],
        "OUTSIDE-CANARY",
        "a file elsewhere over MCP",
    );
}
