//! MCP 2026-07-28 on each agent's endpoint, as raw JSON-RPC over real
//! HTTP: `ask` as a task (the Tasks extension: `tasks/get`,
//! `tasks/update`, `tasks/cancel`, ownership, a parked task read back and
//! answered after a restart), approvals as multi-round-trip input
//! requests (answered by `inputResponses` on the retried call), what a
//! 2025-11-25 client gets instead, and the capabilities declared.

use std::time::Duration;

use agentkit::ServeOptions;
use agentkit_test_support::http::Response;
use serde_json::{Value, json};

use super::mcp::{Host, host, rpc_raw};

const TASKS: &str = "io.modelcontextprotocol/tasks";

/// `greeter`: turn 0 answers at once.
const GREETER: &str = r#"{"turns": [
  {"steps": [{"text": "Hello over MCP."}]}
]}"#;

/// `guarded`: turn 0 calls a tool that needs approval, then answers;
/// the turn a decision after a restart resumes plays turn 1.
const GUARDED: &str = r#"{"turns": [
  {"steps": [{"toolCalls": [{"name": "echo", "input": {"text": "hi"}}]}, {"text": "after approval"}]},
  {"steps": [{"text": "resumed after a restart"}]}
]}"#;

/// `slow`: turn 0 holds for 30 s unless interrupted.
const SLOW: &str = r#"{"turns": [
  {"steps": [{"text": "slow", "delayMs": 30000}]}
]}"#;

const ECHO_TOOL: &str = r#"description = "Echo the text back, after a human agrees"
command = ["python3", "-c", "import json,sys; print(json.dumps({'echo': json.load(sys.stdin)['text']}))"]
needs_approval = true
[input_schema]
type = "object"
required = ["text"]
properties.text = { type = "string" }
"#;

const HTTP: &str = "kind = \"http\"\nauth = [{ bearer = { tokens = { alice = \"token-a\", bob = \"token-b\" } } }]\n";

fn agent(script: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![
        ("agent.toml", "model = \"scripted:script.json\"\n"),
        ("script.json", script),
        ("instructions.md", "You are a test agent.\n"),
        ("tools/echo.toml", ECHO_TOOL),
        ("channels/http.toml", HTTP),
    ]
}

fn quick() -> ServeOptions {
    // A parked turn holds shutdown for the grace; the call outlives it.
    ServeOptions {
        shutdown_grace: Duration::from_millis(200),
        ..ServeOptions::default()
    }
}

fn agents() -> Host {
    host(
        &[
            ("greeter", &agent(GREETER)),
            ("guarded", &agent(GUARDED)),
            ("slow", &agent(SLOW)),
        ],
        quick(),
    )
}

/// A 2026-07-28 request: the protocol version, client info and
/// capabilities in `_meta`, the standard headers beside it.
fn modern(
    h: &Host,
    slug: &str,
    method: &str,
    mut params: Value,
    caps: Value,
    token: &str,
) -> Response {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": caps,
    });
    let name = params
        .get("name")
        .or_else(|| params.get("taskId"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let bearer = format!("Bearer {token}");
    let mut headers = vec![
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", method),
        ("authorization", bearer.as_str()),
    ];
    if !name.is_empty() {
        headers.push(("mcp-name", &name));
    }
    rpc_raw(h, &format!("/{slug}/v1/mcp"), method, params, &headers)
}

fn tasks_caps() -> Value {
    json!({"extensions": {TASKS: {}}})
}

fn result(r: &Response) -> Value {
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert!(v.get("error").is_none(), "{v}");
    v["result"].clone()
}

fn error_code(r: &Response) -> i64 {
    r.json()["error"]["code"].as_i64().unwrap_or_default()
}

/// Polls `tasks/get` until the task leaves `working` (at most 20 s).
fn settled(h: &Host, slug: &str, task: &str, token: &str) -> Value {
    for _ in 0..200 {
        let got = result(&modern(
            h,
            slug,
            "tasks/get",
            json!({"taskId": task}),
            tasks_caps(),
            token,
        ));
        if got["status"] != "working" {
            return got;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("task {task} still working after 20 s");
}

#[test]
fn discover_declares_tools_and_the_tasks_extension_only() {
    let h = agents();
    let found = result(&modern(
        &h,
        "greeter",
        "server/discover",
        json!({}),
        json!({}),
        "token-a",
    ));
    let caps = &found["capabilities"];
    assert!(caps["tools"].is_object(), "{found}");
    assert!(caps["extensions"][TASKS].is_object(), "{found}");
    for absent in ["resources", "prompts", "logging", "completions", "tasks"] {
        assert!(caps.get(absent).is_none(), "`{absent}` declared: {found}");
    }
    assert!(
        found["supportedVersions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v == "2026-07-28"),
        "{found}"
    );
    // Methods it does not serve are JSON-RPC errors.
    let r = modern(
        &h,
        "greeter",
        "resources/list",
        json!({}),
        json!({}),
        "token-a",
    );
    assert_eq!(error_code(&r), -32601, "{}", r.body);
    let r = modern(
        &h,
        "greeter",
        "no/such/method",
        json!({}),
        json!({}),
        "token-a",
    );
    assert_eq!(error_code(&r), -32601, "{}", r.body);
}

#[test]
fn ask_is_a_task_for_a_client_that_takes_tasks() {
    let h = agents();
    let created = result(&modern(
        &h,
        "greeter",
        "tools/call",
        json!({"name": "ask", "arguments": {"message": "hi"}}),
        tasks_caps(),
        "token-a",
    ));
    assert_eq!(created["resultType"], "task", "{created}");
    let task = created["taskId"].as_str().unwrap().to_owned();
    assert!(created["createdAt"].as_str().unwrap().contains('T'));
    assert!(created.get("result").is_none() && created.get("requestState").is_none());
    assert!(created["pollIntervalMs"].as_u64().unwrap() > 0);
    let done = settled(&h, "greeter", &task, "token-a");
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["resultType"], "complete");
    assert_eq!(
        done["result"]["structuredContent"]["reply"],
        "Hello over MCP."
    );
    assert_eq!(done["result"]["structuredContent"]["status"], "completed");
    assert_eq!(done["result"]["isError"], false);

    // Without the extension on the request, the task methods refuse and
    // `ask` answers as it always did.
    let r = modern(
        &h,
        "greeter",
        "tasks/get",
        json!({"taskId": task}),
        json!({}),
        "token-a",
    );
    assert_eq!(error_code(&r), -32021, "{}", r.body);
    let sync = result(&modern(
        &h,
        "greeter",
        "tools/call",
        json!({"name": "ask", "arguments": {"message": "again"}}),
        json!({}),
        "token-a",
    ));
    assert!(sync.get("taskId").is_none(), "{sync}");
    assert_eq!(sync["structuredContent"]["status"], "completed", "{sync}");

    // Someone else's task, and no task at all, are not found.
    for (id, token) in [
        (task.as_str(), "token-b"),
        ("ses_nope.0", "token-a"),
        ("x", "token-a"),
    ] {
        let r = modern(
            &h,
            "greeter",
            "tasks/get",
            json!({"taskId": id}),
            tasks_caps(),
            token,
        );
        assert_eq!(error_code(&r), -32602, "{id}: {}", r.body);
        let r = modern(
            &h,
            "greeter",
            "tasks/cancel",
            json!({"taskId": id}),
            tasks_caps(),
            token,
        );
        assert_eq!(error_code(&r), -32602, "{id}: {}", r.body);
    }
    // Cancelling an ended task is the same empty acknowledgement.
    let ack = result(&modern(
        &h,
        "greeter",
        "tasks/cancel",
        json!({"taskId": task}),
        tasks_caps(),
        "token-a",
    ));
    assert_eq!(ack, json!({"resultType": "complete"}));
}

#[test]
fn a_task_is_cancelled_by_tasks_cancel() {
    let h = agents();
    let created = result(&modern(
        &h,
        "slow",
        "tools/call",
        json!({"name": "ask", "arguments": {"message": "take your time"}}),
        tasks_caps(),
        "token-a",
    ));
    let task = created["taskId"].as_str().unwrap().to_owned();
    let got = result(&modern(
        &h,
        "slow",
        "tasks/get",
        json!({"taskId": task}),
        tasks_caps(),
        "token-a",
    ));
    assert_eq!(got["status"], "working", "{got}");
    // Bob cannot stop Alice's task.
    let r = modern(
        &h,
        "slow",
        "tasks/cancel",
        json!({"taskId": task}),
        tasks_caps(),
        "token-b",
    );
    assert_eq!(error_code(&r), -32602, "{}", r.body);
    let ack = result(&modern(
        &h,
        "slow",
        "tasks/cancel",
        json!({"taskId": task}),
        tasks_caps(),
        "token-a",
    ));
    assert_eq!(ack, json!({"resultType": "complete"}));
    let got = settled(&h, "slow", &task, "token-a");
    assert_eq!(got["status"], "cancelled", "{got}");
    assert!(got.get("result").is_none(), "{got}");
}

#[test]
fn an_approval_is_an_input_request_of_the_task_answered_by_tasks_update_even_after_a_restart() {
    let mut h = agents();
    let ask = |h: &Host| {
        let created = result(&modern(
            h,
            "guarded",
            "tools/call",
            json!({"name": "ask", "arguments": {"message": "echo hi"}}),
            tasks_caps(),
            "token-a",
        ));
        created["taskId"].as_str().unwrap().to_owned()
    };
    let task = ask(&h);
    let waiting = settled(&h, "guarded", &task, "token-a");
    assert_eq!(waiting["status"], "input_required", "{waiting}");
    let requests = waiting["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1, "{waiting}");
    let (call, request) = requests.iter().next().unwrap();
    assert_eq!(request["method"], "elicitation/create");
    let approval = &request["params"]["_meta"]["agentkit/approval"];
    assert_eq!(approval["callId"], call.as_str());
    assert_eq!(approval["toolName"], "echo");
    assert_eq!(approval["input"], json!({"text": "hi"}));
    assert!(
        request["params"]["message"]
            .as_str()
            .unwrap()
            .contains("echo")
    );

    // Answers to requests that are not outstanding are ignored; a bad
    // answer is refused; Bob cannot answer.
    let ignored = modern(
        &h,
        "guarded",
        "tasks/update",
        json!({"taskId": task, "inputResponses": {"nope": {"action": "accept"}}}),
        tasks_caps(),
        "token-a",
    );
    assert_eq!(result(&ignored), json!({"resultType": "complete"}));
    let bad = modern(
        &h,
        "guarded",
        "tasks/update",
        json!({"taskId": task, "inputResponses": {call: 12}}),
        tasks_caps(),
        "token-a",
    );
    assert_eq!(error_code(&bad), -32602, "{}", bad.body);
    let theirs = modern(
        &h,
        "guarded",
        "tasks/update",
        json!({"taskId": task, "inputResponses": {call: {"action": "accept", "content": {"decision": "approve"}}}}),
        tasks_caps(),
        "token-b",
    );
    assert_eq!(error_code(&theirs), -32602, "{}", theirs.body);

    let approved = modern(
        &h,
        "guarded",
        "tasks/update",
        json!({"taskId": task, "inputResponses": {call: {"action": "accept", "content": {"decision": "approve"}}}}),
        tasks_caps(),
        "token-a",
    );
    assert_eq!(result(&approved), json!({"resultType": "complete"}));
    let done = settled(&h, "guarded", &task, "token-a");
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["reply"],
        "after approval"
    );

    // A parked task outlives a restart: read back, then denied.
    let parked = ask(&h);
    let waiting = settled(&h, "guarded", &parked, "token-a");
    assert_eq!(waiting["status"], "input_required", "{waiting}");
    let call = waiting["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    h.restart(quick());
    let still = result(&modern(
        &h,
        "guarded",
        "tasks/get",
        json!({"taskId": parked}),
        tasks_caps(),
        "token-a",
    ));
    assert_eq!(still["status"], "input_required", "{still}");
    assert!(still["inputRequests"][&call].is_object(), "{still}");
    let old = result(&modern(
        &h,
        "guarded",
        "tasks/get",
        json!({"taskId": task}),
        tasks_caps(),
        "token-a",
    ));
    assert_eq!(old["status"], "completed", "{old}");
    let denied = modern(
        &h,
        "guarded",
        "tasks/update",
        json!({"taskId": parked, "inputResponses": {&call: {"action": "decline"}}}),
        tasks_caps(),
        "token-a",
    );
    assert_eq!(result(&denied), json!({"resultType": "complete"}));
    let done = settled(&h, "guarded", &parked, "token-a");
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["reply"],
        "resumed after a restart"
    );
}

#[test]
fn approvals_are_input_requests_answered_on_the_retried_call() {
    let h = agents();
    let elicit = json!({"elicitation": {}});
    let args = json!({"message": "echo hi"});
    let first = result(&modern(
        &h,
        "guarded",
        "tools/call",
        json!({"name": "ask", "arguments": args}),
        elicit.clone(),
        "token-a",
    ));
    assert_eq!(first["resultType"], "input_required", "{first}");
    let state = first["requestState"].as_str().unwrap().to_owned();
    let requests = first["inputRequests"].as_object().unwrap();
    let (call, request) = requests.iter().next().unwrap();
    assert_eq!(
        request["params"]["_meta"]["agentkit/approval"]["toolName"],
        "echo"
    );
    assert_eq!(
        request["params"]["_meta"]["agentkit/approval"]["input"],
        json!({"text": "hi"})
    );

    // A tampered state, a state with other arguments, and responses
    // without a state are refused.
    for (params, why) in [
        (
            json!({"name": "ask", "arguments": args, "requestState": "forged", "inputResponses": {}}),
            "forged",
        ),
        (
            json!({"name": "ask", "arguments": {"message": "other"}, "requestState": state}),
            "other arguments",
        ),
        (
            json!({"name": "ask", "arguments": args, "inputResponses": {call: {"action": "accept"}}}),
            "no state",
        ),
    ] {
        let r = modern(
            &h,
            "guarded",
            "tools/call",
            params,
            elicit.clone(),
            "token-a",
        );
        assert_eq!(error_code(&r), -32602, "{why}: {}", r.body);
    }
    // Bob's retry names a task he may not see.
    let r = modern(
        &h,
        "guarded",
        "tools/call",
        json!({"name": "ask", "arguments": args, "requestState": state, "inputResponses": {call: {"action": "accept"}}}),
        elicit.clone(),
        "token-b",
    );
    assert_eq!(error_code(&r), -32602, "{}", r.body);
    // A retry without an answer asks again.
    let again = result(&modern(
        &h,
        "guarded",
        "tools/call",
        json!({"name": "ask", "arguments": args, "requestState": state}),
        elicit.clone(),
        "token-a",
    ));
    assert_eq!(again["resultType"], "input_required", "{again}");
    assert!(again["inputRequests"][call].is_object(), "{again}");

    let done = result(&modern(
        &h,
        "guarded",
        "tools/call",
        json!({
            "name": "ask",
            "arguments": args,
            "requestState": state,
            "inputResponses": {call: {"action": "accept", "content": {"decision": "approve"}}}
        }),
        elicit,
        "token-a",
    ));
    assert_eq!(done["structuredContent"]["status"], "completed", "{done}");
    assert_eq!(done["structuredContent"]["reply"], "after approval");
}

#[test]
fn a_client_without_input_requests_is_told_to_use_check_and_the_approvals_api() {
    let h = agents();
    // 2026-07-28 without elicitation, then 2025-11-25 (no `_meta`).
    let modern_reply = result(&modern(
        &h,
        "guarded",
        "tools/call",
        json!({"name": "ask", "arguments": {"message": "echo hi"}}),
        json!({}),
        "token-a",
    ));
    let legacy = rpc_raw(
        &h,
        "/guarded/v1/mcp",
        "tools/call",
        json!({"name": "ask", "arguments": {"message": "echo hi"}}),
        &[
            ("mcp-protocol-version", "2025-11-25"),
            ("authorization", "Bearer token-a"),
        ],
    );
    let legacy_reply = result(&legacy);
    for reply in [modern_reply, legacy_reply] {
        let content = &reply["structuredContent"];
        assert_eq!(content["status"], "waiting_approval", "{reply}");
        let text = content["reply"].as_str().unwrap();
        assert!(
            text.contains("/approvals/") && text.contains("`check`"),
            "{text}"
        );
        assert!(
            reply.get("resultType").is_none_or(|t| t == "complete"),
            "{reply}"
        );
    }
}
