//! A2A v1.0 over real HTTP: the official Python SDK (`a2a-sdk`) as a
//! client over both bindings (send, stream, approvals through
//! input-required, subscribe, cancel, get, the errors it maps), the
//! agent card, JSON-RPC errors for malformed requests, the auth chain and
//! ownership, and tasks read back after a restart.

use std::path::PathBuf;

use agentkit::ServeOptions;
use agentkit_test_support::http::{Request, Response};
use serde_json::{Value, json};

use super::mcp::{Host, host};

/// Per session: turn 0 greets, turn 1 streams (after 200 ms, so that a
/// stream opened with it sees the reply as updates rather than in its
/// first task: a turn that ended before the stream's first read is sent
/// as one completed task), turn 2 calls a tool that needs approval, turn
/// 3 holds until interrupted.
const SCRIPT: &str = r#"{"turns": [
  {"steps": [{"text": "Hello over A2A."}]},
  {"steps": [{"text": "A reply streamed in several small pieces.", "delayMs": 200}]},
  {"steps": [{"toolCalls": [{"name": "echo", "input": {"text": "hi"}}]}, {"text": "after approval"}]},
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

const SKILL: &str = "---\nname: greeting\ndescription: Greets people warmly\n---\nSay hello.\n";

/// For the restart test: turn 1 parks a call; the turn a decision after
/// a restart resumes plays turn 2.
const RESTART_SCRIPT: &str = r#"{"turns": [
  {"steps": [{"text": "Hello over A2A."}]},
  {"steps": [{"toolCalls": [{"name": "echo", "input": {"text": "hi"}}]}, {"text": "after approval"}]},
  {"steps": [{"text": "resumed after a restart"}]}
]}"#;

fn bot(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    bot_with(SCRIPT, extra)
}

fn bot_with(
    script: &'static str,
    extra: &[(&'static str, &'static str)],
) -> Vec<(&'static str, &'static str)> {
    let mut files = vec![
        (
            "agent.toml",
            "model = \"scripted:script.json\"\ndescription = \"A test agent for A2A\"\n",
        ),
        ("script.json", script),
        ("instructions.md", "You are a test agent.\n"),
        ("tools/echo.toml", ECHO_TOOL),
        ("skills/greeting/SKILL.md", SKILL),
    ];
    files.extend_from_slice(extra);
    files
}

fn rpc(h: &Host, path: &str, method: &str, params: Value, auth: Option<&str>) -> Response {
    let mut req = Request::post(path)
        .json(&json!({"jsonrpc": "2.0", "id": "r1", "method": method, "params": params}));
    if let Some(token) = auth {
        req = req.bearer(token);
    }
    h.send(req)
}

fn user_message(text: &str, context: Option<&str>) -> Value {
    let mut m = json!({"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": text}]});
    if let Some(c) = context {
        m["contextId"] = json!(c);
    }
    m
}

/// The Python environment with `a2a-sdk`, or why the test skips.
// Says why it skips when the environment is missing (never under CI).
#[allow(clippy::print_stderr)]
fn a2a_python() -> Option<PathBuf> {
    match agentkit_test_support::pyenv::pyenv_with("python A2A client", "a2a.client") {
        Ok(bin) => Some(bin),
        Err(skip) => {
            eprintln!("{skip}");
            None
        }
    }
}

/// Runs `tests/python/<script>` (an SDK client) against agent `bot` of
/// `h` over `binding`; what it printed.
fn run_python_client(bin: &std::path::Path, script: &str, h: &Host, binding: &str) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python")
        .join(script);
    let out = std::process::Command::new(bin.join("python"))
        .arg(&script)
        .arg(format!("http://{}/bot", h.addr()))
        .arg(binding)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} ({binding}) failed: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn state(v: &Value) -> &str {
    v["status"]["state"].as_str().unwrap_or_default()
}

fn text_of(message: &Value) -> String {
    message["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .collect()
}

#[test]
fn the_official_python_sdk_sends_streams_approves_cancels_and_gets_over_both_bindings() {
    let Some(bin) = a2a_python() else { return };
    let h = host(&[("bot", &bot(&[]))], ServeOptions::default());
    for binding in ["JSONRPC", "HTTP+JSON"] {
        let v = run_python_client(&bin, "a2a_client.py", &h, binding);

        assert_eq!(v["card"]["name"], "bot");
        assert_eq!(v["card"]["capabilities"]["streaming"], true);

        let first = &v["send"];
        assert_eq!(state(first), "TASK_STATE_COMPLETED", "{binding}: {first}");
        assert_eq!(text_of(&first["status"]["message"]), "Hello over A2A.");
        assert_eq!(text_of(&first["artifacts"][0]), "Hello over A2A.");
        let context = first["contextId"].as_str().unwrap();
        assert!(first["id"].as_str().unwrap().starts_with(context));

        // The stream: the task first, pieces of the reply, the whole reply
        // replacing them, then the final status.
        let stream = v["stream"].as_array().unwrap();
        assert_eq!(
            stream[0]["task"]["contextId"], context,
            "{binding}: {stream:?}"
        );
        let pieces: Vec<&Value> = stream
            .iter()
            .filter(|e| e["artifactUpdate"]["append"] == true)
            .collect();
        assert!(
            !pieces.is_empty(),
            "{binding}: no appended pieces: {stream:?}"
        );
        let whole = stream
            .iter()
            .find(|e| e["artifactUpdate"]["lastChunk"] == true)
            .unwrap();
        assert_eq!(
            text_of(&whole["artifactUpdate"]["artifact"]),
            "A reply streamed in several small pieces."
        );
        let last = stream.last().unwrap();
        assert_eq!(
            last["statusUpdate"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );

        // An approval is input-required; `approve` with the task's id
        // resumes the same task to its end.
        let parked = &v["parked"];
        assert_eq!(state(parked), "TASK_STATE_INPUT_REQUIRED", "{parked}");
        let asks = &parked["status"]["message"]["parts"][1]["data"]["approvals"][0];
        assert_eq!(asks["toolName"], "echo");
        assert_eq!(asks["input"], json!({"text": "hi"}));
        let approved = &v["approved"];
        assert_eq!(approved["id"], parked["id"]);
        assert_eq!(state(approved), "TASK_STATE_COMPLETED", "{approved}");
        assert_eq!(text_of(&approved["status"]["message"]), "after approval");

        // A slow task: answered at once, followed, canceled.
        assert!(
            ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"].contains(&state(&v["slow"])),
            "{}",
            v["slow"]
        );
        assert_eq!(
            state(&v["canceled"]),
            "TASK_STATE_CANCELED",
            "{}",
            v["canceled"]
        );
        let subscribed = v["subscribed"].as_array().unwrap();
        assert_eq!(subscribed[0]["task"]["id"], v["slow"]["id"]);
        assert_eq!(
            subscribed.last().unwrap()["statusUpdate"]["status"]["state"],
            "TASK_STATE_CANCELED"
        );

        // Read back, with one message of history.
        let got = &v["got"];
        assert_eq!(got["id"], first["id"]);
        assert_eq!(state(got), "TASK_STATE_COMPLETED");
        assert_eq!(got["history"].as_array().unwrap().len(), 1);
        assert_eq!(got["history"][0]["role"], "ROLE_AGENT");

        assert_eq!(v["unknownTask"], "TaskNotFoundError", "{binding}");
        assert_eq!(
            v["subscribeEnded"], "UnsupportedOperationError",
            "{binding}"
        );
        assert_eq!(v["cancelEnded"], "TaskNotCancelableError", "{binding}");
    }
    // The SDK's sessions are ordinary sessions on the `a2a` channel.
    let list = h.send(Request::get("/bot/v1/sessions?channel=a2a")).json();
    assert_eq!(list["sessions"].as_array().unwrap().len(), 2, "{list}");
}

/// Where `.ci/run` installs `@a2a-js/sdk` (`$AGENTKIT_A2A_JS`, else
/// `target/a2a-js`): its `node_modules`, or why the test skips.
// Says why it skips when the SDK is missing (never under CI).
#[allow(clippy::print_stderr)]
fn a2a_js() -> Option<PathBuf> {
    let root = std::env::var_os("AGENTKIT_A2A_JS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/a2a-js"));
    let modules = root.join("node_modules");
    if modules.join("@a2a-js/sdk/package.json").is_file() {
        return Some(modules);
    }
    let reason = format!(
        "the A2A JavaScript SDK is not installed at {} (npm install --prefix target/a2a-js @a2a-js/sdk@1.3.0)",
        root.display()
    );
    assert!(
        !std::env::var("CI").is_ok_and(|v| v == "true" || v == "1"),
        "{reason}"
    );
    eprintln!("skipping: {reason}");
    None
}

#[test]
fn the_official_javascript_sdk_sends_streams_approves_cancels_and_gets_over_both_bindings() {
    let Some(modules) = a2a_js() else { return };
    let h = host(&[("bot", &bot(&[]))], ServeOptions::default());
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/js/a2a_client.cjs");
    for binding in ["JSONRPC", "HTTP+JSON"] {
        let out = std::process::Command::new("node")
            .arg(&script)
            .arg(format!("http://{}/bot", h.addr()))
            .arg(binding)
            .env("NODE_PATH", &modules)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "node client ({binding}) failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["send"]["state"], "TASK_STATE_COMPLETED", "{binding}: {v}");
        assert_eq!(v["send"]["reply"], "Hello over A2A.");
        let stream: Vec<&str> = v["stream"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(stream.first(), Some(&"task"), "{binding}: {stream:?}");
        assert!(stream.contains(&"artifactUpdate"), "{binding}: {stream:?}");
        assert_eq!(
            stream.last(),
            Some(&"statusUpdate:TASK_STATE_COMPLETED"),
            "{binding}: {stream:?}"
        );
        assert_eq!(v["parked"]["state"], "TASK_STATE_INPUT_REQUIRED", "{v}");
        assert_eq!(v["approved"]["id"], v["parked"]["id"]);
        assert_eq!(v["approved"]["state"], "TASK_STATE_COMPLETED", "{v}");
        assert_eq!(v["approved"]["statusText"], "after approval");
        assert_eq!(v["canceled"]["id"], v["slow"]["id"]);
        assert_eq!(v["canceled"]["state"], "TASK_STATE_CANCELED", "{v}");
        assert_eq!(v["got"]["id"], v["send"]["id"]);
        assert_eq!(v["got"]["state"], "TASK_STATE_COMPLETED");
        // The SDK's class per binding (`JsonRpcTaskNotFoundError`, …).
        let unknown = v["unknownTask"].as_str().unwrap_or_default();
        assert!(unknown.ends_with("TaskNotFoundError"), "{binding}: {v}");
    }
}

#[test]
fn the_card_names_the_agent_its_bindings_skills_and_security() {
    let http = "kind = \"http\"\nauth = [{ bearer = { tokens = { alice = \"token-a\" } } }]\n";
    let h = host(
        &[("bot", &bot(&[("channels/http.toml", http)]))],
        ServeOptions::default(),
    );
    // Public: discovery needs no credential.
    let r = h.send(Request::get("/bot/.well-known/agent-card.json"));
    assert_eq!(r.status, 200, "{}", r.body);
    let card = r.json();
    assert_eq!(card["name"], "bot");
    assert_eq!(card["description"], "A test agent for A2A");
    let url = format!("http://{}/bot/a2a", h.addr());
    assert_eq!(
        card["supportedInterfaces"],
        json!([
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        ])
    );
    assert_eq!(card["capabilities"]["streaming"], true);
    let skills: Vec<(&str, &str)> = card["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap(),
                s["description"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        skills,
        [
            ("skill:greeting", "Greets people warmly"),
            ("tool:echo", "Echo the text back, after a human agrees")
        ]
    );
    assert_eq!(
        card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
        "Bearer"
    );
    assert_eq!(
        card["securityRequirements"],
        json!([{"schemes": {"bearer": {"list": []}}}])
    );
    // The operations themselves run the chain.
    let params = json!({"message": user_message("hi", None)});
    let denied = rpc(&h, "/bot/a2a", "SendMessage", params.clone(), None);
    assert_eq!(denied.status, 401, "{}", denied.body);
    let rest = h.send(Request::get("/bot/a2a/tasks/ses_x.1"));
    assert_eq!(rest.status, 401);
    let ok = rpc(&h, "/bot/a2a", "SendMessage", params, Some("token-a"));
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(
        ok.json()["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

#[test]
fn the_extended_card_is_for_authenticated_callers_and_a2a_0_3_push_names_map_onto_1_0() {
    let Some(bin) = a2a_python() else { return };
    let http = "kind = \"http\"\nauth = [{ bearer = { tokens = { alice = \"token-a\" } } }]\n";
    let h = host(
        &[(
            "bot",
            &bot(&[
                ("channels/http.toml", http),
                (
                    "subagents/helper/agent.toml",
                    "description = \"Explains things at length\"\n",
                ),
                ("subagents/helper/instructions.md", "You explain.\n"),
                (
                    "mcp-connections/files.toml",
                    "command = \"files-server\"\ndescription = \"Reads the shared drive\"\n",
                ),
            ]),
        )],
        // The webhooks are on loopback (the test's receiver).
        ServeOptions {
            a2a_push_private_networks: true,
            ..ServeOptions::default()
        },
    );
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/a2a_extended.py");
    for binding in ["JSONRPC", "HTTP+JSON"] {
        let out = std::process::Command::new(bin.join("python"))
            .arg(&script)
            .arg(format!("http://{}/bot", h.addr()))
            .arg(binding)
            .arg("token-a")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "a2a_extended.py ({binding}) failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        // The public card says there is more, and shows only the skills
        // and tools.
        assert_eq!(v["public"]["extendedAgentCard"], true);
        assert_eq!(
            v["public"]["skills"],
            json!(["skill:greeting", "tool:echo"])
        );
        // Without a credential the chain refuses (HTTP 401).
        let refused = v["withoutCredential"].as_str().unwrap();
        assert!(refused.contains("401"), "{binding}: {refused}");
        // With one: the subagent and the connection, and which tool waits
        // for an approval.
        let extended = &v["extended"];
        let skills: Vec<(&str, Vec<&str>)> = extended["skills"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let tags = s["tags"].as_array().unwrap();
                (
                    s["id"].as_str().unwrap(),
                    tags.iter().map(|t| t.as_str().unwrap()).collect(),
                )
            })
            .collect();
        assert_eq!(
            skills,
            [
                ("skill:greeting", vec!["skill"]),
                ("tool:echo", vec!["tool", "needs-approval"]),
                ("subagent:helper", vec!["subagent"]),
                ("connection:files", vec!["connection", "mcp"]),
            ],
            "{binding}"
        );
        assert_eq!(
            extended["skills"][2]["description"],
            "Explains things at length"
        );
        assert_eq!(
            extended["skills"][3]["description"],
            "Reads the shared drive"
        );
        assert_eq!(extended["capabilities"]["extendedAgentCard"], true);
        // The same card by A2A 0.3's method, in 0.3's shape.
        let legacy = &v["legacyExtended"];
        assert_eq!(
            legacy["skills"],
            json!([
                "skill:greeting",
                "tool:echo",
                "subagent:helper",
                "connection:files"
            ])
        );
        let url = format!("http://{}/bot/a2a", h.addr());
        assert_eq!(legacy["interfaces"][0], json!(["JSONRPC", url]));
        assert_eq!(legacy["securitySchemes"], json!(["bearer"]));

        // A2A 0.3's push methods: a config without an id is named after
        // its task; set, get, list, delete.
        assert_eq!(v["taskState"], 3, "TASK_STATE_COMPLETED");
        let created = &v["created"];
        assert_eq!(created["id"], created["taskId"], "{created}");
        assert_eq!(created["token"], "tok-03");
        assert_eq!(created["authentication"]["scheme"], "Bearer");
        assert_eq!(v["named"]["id"], "second");
        assert!(
            v["got"]["url"].as_str().unwrap().ends_with("/two"),
            "{}",
            v["got"]
        );
        let task = created["taskId"].as_str().unwrap();
        let mut both = vec![task, "second"];
        both.sort_unstable();
        assert_eq!(v["listed"], json!(both), "{binding}");
        assert_eq!(v["afterDelete"], json!([task]), "{binding}");
        // Its webhook got 0.3's body: the task itself, with the token and
        // the credentials.
        assert_eq!(
            v["pushed"],
            json!({"kind": "task", "id": task, "state": "completed",
                   "token": "tok-03", "authorization": "Bearer c-03"}),
            "{binding}"
        );
    }
    // The official JavaScript SDK's `Client.getAgentCard()` asks for it
    // too.
    if let Some(modules) = a2a_js() {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/js/a2a_extended.cjs");
        for binding in ["JSONRPC", "HTTP+JSON"] {
            let out = std::process::Command::new("node")
                .arg(&script)
                .arg(format!("http://{}/bot", h.addr()))
                .arg(binding)
                .arg("token-a")
                .env("NODE_PATH", &modules)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "a2a_extended.cjs ({binding}) failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            // HTTP 401, as the SDK words it per binding.
            let refused = v["withoutCredential"].as_str().unwrap_or_default();
            assert!(
                refused.contains("401") || refused.contains("no auth policy admitted"),
                "{binding}: {v}"
            );
            assert_eq!(
                v["skills"],
                json!([
                    ["skill:greeting", ["skill"]],
                    ["tool:echo", ["tool", "needs-approval"]],
                    ["subagent:helper", ["subagent"]],
                    ["connection:files", ["connection", "mcp"]],
                ]),
                "{binding}"
            );
        }
    }
    // An agent that admits anyone has no extended card.
    let open = host(
        &[(
            "bot",
            &bot(&[(
                "channels/http.toml",
                "kind = \"http\"\nauth = [\"allow_all\"]\n",
            )]),
        )],
        ServeOptions::default(),
    );
    let card = open
        .send(Request::get("/bot/.well-known/agent-card.json"))
        .json();
    assert_eq!(card["capabilities"]["extendedAgentCard"], false);
    let r = rpc(&open, "/bot/a2a", "GetExtendedAgentCard", json!({}), None);
    assert_eq!(r.json()["error"]["code"], -32004, "{}", r.body);
}

#[test]
fn malformed_requests_and_unknown_methods_get_json_rpc_errors() {
    let h = host(&[("bot", &bot(&[]))], ServeOptions::default());
    let code = |r: &Response| {
        assert_eq!(r.status, 200, "{}", r.body);
        let v = r.json();
        assert_eq!(v["jsonrpc"], "2.0");
        v["error"]["code"].as_i64().unwrap()
    };
    let raw = |body: &[u8]| h.send(Request::post("/bot/a2a").raw_body(body));
    assert_eq!(code(&raw(b"{not json")), -32700);
    assert_eq!(code(&raw(b"[]")), -32600);
    assert_eq!(
        code(&raw(br#"{"jsonrpc": "1.0", "id": 1, "method": "GetTask"}"#)),
        -32600
    );
    let unknown = rpc(&h, "/bot/a2a", "Frobnicate", json!({}), None);
    assert_eq!(code(&unknown), -32601);
    assert_eq!(unknown.json()["id"], "r1");
    let bad = rpc(&h, "/bot/a2a", "SendMessage", json!({"message": 5}), None);
    assert_eq!(code(&bad), -32602);
    let empty = rpc(&h, "/bot/a2a", "SendMessage", json!({}), None);
    assert_eq!(code(&empty), -32602);
    let missing = rpc(&h, "/bot/a2a", "GetTask", json!({"id": "nope"}), None);
    assert_eq!(code(&missing), -32001);
    let v = missing.json();
    assert_eq!(v["error"]["data"][0]["reason"], "TASK_NOT_FOUND");
    let push = rpc(
        &h,
        "/bot/a2a",
        "CreateTaskPushNotificationConfig",
        json!({}),
        None,
    );
    assert_eq!(code(&push), -32001, "{}", push.body);
    let old = h.send(
        Request::post("/bot/a2a")
            .header("a2a-version", "0.3")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}})),
    );
    assert_eq!(code(&old), -32009);
    // The HTTP+JSON binding answers google.rpc.Status bodies.
    let r = h.send(Request::get("/bot/a2a/tasks/ses_nope.3"));
    assert_eq!(r.status, 404, "{}", r.body);
    let v = r.json();
    assert_eq!(v["error"]["status"], "NOT_FOUND");
    assert_eq!(v["error"]["details"][0]["reason"], "TASK_NOT_FOUND");
}

#[test]
fn a2a_0_3_methods_answer_in_0_3_shapes() {
    let h = host(&[("bot", &bot(&[]))], ServeOptions::default());
    let message = json!({"kind": "message", "messageId": "m1", "role": "user",
        "parts": [{"kind": "text", "text": "hello from 0.3"}]});
    let r = rpc(
        &h,
        "/bot/a2a",
        "message/send",
        json!({"message": message}),
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let task = r.json()["result"].clone();
    assert_eq!(task["kind"], "task", "{task}");
    assert_eq!(task["status"]["state"], "completed");
    assert_eq!(
        task["status"]["message"]["parts"][0],
        json!({"kind": "text", "text": "Hello over A2A."})
    );
    assert_eq!(task["status"]["message"]["role"], "agent");
    let context = task["contextId"].as_str().unwrap();
    let got = rpc(&h, "/bot/a2a", "tasks/get", json!({"id": task["id"]}), None).json();
    assert_eq!(got["result"]["status"]["state"], "completed", "{got}");
    assert_eq!(got["result"]["history"][0]["role"], "user");
    // A stream: the task, then updates, the last one `final`.
    let mut follow = message.clone();
    follow["contextId"] = json!(context);
    let r = rpc(
        &h,
        "/bot/a2a",
        "message/stream",
        json!({"message": follow}),
        None,
    );
    let events: Vec<Value> = r
        .body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["result"].clone())
        .collect();
    assert_eq!(events[0]["kind"], "task", "{events:?}");
    assert!(
        events.iter().any(|e| e["kind"] == "artifact-update"),
        "{events:?}"
    );
    let last = events.last().unwrap();
    assert_eq!(
        (last["kind"].as_str(), last["final"].as_bool()),
        (Some("status-update"), Some(true))
    );
    assert_eq!(last["status"]["state"], "completed");
}

#[test]
fn tasks_belong_to_their_principal_and_are_read_back_after_a_restart() {
    let http = "kind = \"http\"\nauth = [{ bearer = { tokens = { alice = \"token-a\", bob = \"token-b\" } } }]\n";
    // A parked turn holds shutdown for the grace; the call outlives it.
    let quick = || ServeOptions {
        shutdown_grace: std::time::Duration::from_millis(200),
        ..ServeOptions::default()
    };
    let mut h = host(
        &[(
            "bot",
            &bot_with(RESTART_SCRIPT, &[("channels/http.toml", http)]),
        )],
        quick(),
    );
    let sent = rpc(
        &h,
        "/bot/a2a",
        "SendMessage",
        json!({"message": user_message("hello", None)}),
        Some("token-a"),
    );
    let task = sent.json()["result"]["task"].clone();
    assert_eq!(state(&task), "TASK_STATE_COMPLETED", "{task}");
    let (id, context) = (
        task["id"].as_str().unwrap(),
        task["contextId"].as_str().unwrap(),
    );

    // Bob sees neither the task nor the context.
    let theirs = rpc(
        &h,
        "/bot/a2a",
        "GetTask",
        json!({"id": id}),
        Some("token-b"),
    );
    assert_eq!(theirs.json()["error"]["code"], -32001, "{}", theirs.body);
    let cancel = rpc(
        &h,
        "/bot/a2a",
        "CancelTask",
        json!({"id": id}),
        Some("token-b"),
    );
    assert_eq!(cancel.json()["error"]["code"], -32001);
    let follow = rpc(
        &h,
        "/bot/a2a",
        "SendMessage",
        json!({"message": user_message("mine now", Some(context))}),
        Some("token-b"),
    );
    assert_eq!(follow.json()["error"]["code"], -32602, "{}", follow.body);
    // An HTTP-channel session is no A2A context.
    let created = h.send(
        Request::post("/bot/v1/session")
            .bearer("token-a")
            .json(&json!({"message": "hi"})),
    );
    let http_sid = created.json()["sessionId"].as_str().unwrap().to_owned();
    let r = rpc(
        &h,
        "/bot/a2a",
        "SendMessage",
        json!({"message": user_message("x", Some(&http_sid))}),
        Some("token-a"),
    );
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`http` channel")
    );

    // A parked task survives a restart: read back, then answered.
    let second = rpc(
        &h,
        "/bot/a2a",
        "SendMessage",
        json!({"message": user_message("again", Some(context))}),
        Some("token-a"),
    );
    let waiting = second.json()["result"]["task"].clone();
    assert_eq!(state(&waiting), "TASK_STATE_INPUT_REQUIRED", "{waiting}");
    let waiting_id = waiting["id"].as_str().unwrap().to_owned();
    h.restart(quick());
    let got = rpc(
        &h,
        "/bot/a2a",
        "GetTask",
        json!({"id": id}),
        Some("token-a"),
    );
    let got = got.json()["result"].clone();
    assert_eq!(state(&got), "TASK_STATE_COMPLETED");
    assert_eq!(text_of(&got["artifacts"][0]), "Hello over A2A.");
    let still = rpc(
        &h,
        "/bot/a2a",
        "GetTask",
        json!({"id": waiting_id}),
        Some("token-a"),
    );
    assert_eq!(
        state(&still.json()["result"]),
        "TASK_STATE_INPUT_REQUIRED",
        "{}",
        still.body
    );
    // Something else than a decision is refused, saying how to answer.
    let mut answer = user_message("maybe later", Some(context));
    answer["taskId"] = json!(waiting_id);
    let vague = rpc(
        &h,
        "/bot/a2a",
        "SendMessage",
        json!({"message": answer}),
        Some("token-a"),
    );
    assert!(vague.body.contains("approve"), "{}", vague.body);
    let mut answer = user_message("deny: not after a restart", Some(context));
    answer["taskId"] = json!(waiting_id);
    let denied = rpc(
        &h,
        "/bot/a2a",
        "SendMessage",
        json!({"message": answer}),
        Some("token-a"),
    );
    let task = denied.json()["result"]["task"].clone();
    assert_eq!(task["id"], waiting_id.as_str());
    assert_eq!(state(&task), "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(
        text_of(&task["status"]["message"]),
        "resumed after a restart"
    );
}

/// A turn calls a remote A2A agent (a server built with the official
/// Python SDK) through an `a2a = "<card URL>"` connection: its reply
/// comes back as the tool's result, a remote task that needs input comes
/// back `input-required` with its `taskId`, the call carries its depth,
/// and a call past the hop limit is refused.
#[test]
fn a_turn_calls_a_remote_a2a_agent_built_with_the_python_sdk() {
    let Some(bin) = a2a_python() else { return };
    let port = agentkit_test_support::process::free_port();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/a2a_server.py");
    let _server = Killed(
        std::process::Command::new(bin.join("python"))
            .arg(&script)
            .arg(port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let card = format!("http://127.0.0.1:{port}/.well-known/agent-card.json");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    while Request::get("/.well-known/agent-card.json")
        .send(addr)
        .is_err()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the Python A2A server did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let connection = format!("a2a = \"{card}\"\ndescription = \"Books tables\"\n");
    let script = r#"{"turns": [
      {"steps": [{"toolCalls": [{"name": "remote__a2a", "input": {"message": "hello there"}}]}, {"text": "relayed"}]},
      {"steps": [{"toolCalls": [{"name": "remote__a2a", "input": {"message": "book a table"}}]}, {"text": "asked"}]}
    ]}"#;
    let files = |script: &'static str, connection: &'static str| {
        vec![
            ("agent.toml", "model = \"scripted:script.json\"\n"),
            ("script.json", script),
            ("instructions.md", "You relay.\n"),
            ("mcp-connections/remote.toml", connection),
        ]
    };
    let connection: &'static str = Box::leak(connection.into_boxed_str());
    let h = host(
        &[("bot", &files(script, connection))],
        ServeOptions::default(),
    );
    let result = |h: &Host, text: &str, context: Option<&str>| {
        let r = rpc(
            h,
            "/bot/a2a",
            "SendMessage",
            json!({"message": user_message(text, context)}),
            None,
        );
        let task = r.json()["result"]["task"].clone();
        assert_eq!(state(&task), "TASK_STATE_COMPLETED", "{task}");
        let sid = task["contextId"].as_str().unwrap().to_owned();
        let events = h
            .send(Request::get(&format!("/bot/v1/session/{sid}/events")))
            .body;
        let results: Vec<Value> = events
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|e| e["type"] == "action.result")
            .collect();
        (sid, results.last().unwrap()["data"].clone())
    };
    let (sid, first) = result(&h, "go", None);
    assert_eq!(first["isError"], false, "{first}");
    assert_eq!(first["output"]["state"], "completed");
    // One hop from a session no one delegated to.
    assert_eq!(
        first["output"]["reply"],
        "remote echo: hello there (hops 1)"
    );
    // The card says the remote streams: its progress is the call's.
    let progress = progress_of(&h, &sid);
    assert_eq!(
        progress,
        [
            "status submitted",
            "status working",
            "delta remote echo: ",
            "delta hello there",
            "delta  (hops 1)",
            "status completed",
        ],
        "{progress:?}"
    );
    let (_, second) = result(&h, "again", Some(&sid));
    assert_eq!(second["output"]["state"], "input-required", "{second}");
    assert_eq!(second["output"]["reply"], "which day?");
    assert!(
        second["output"]["taskId"]
            .as_str()
            .is_some_and(|t| !t.is_empty())
    );
    let progress = progress_of(&h, &sid);
    assert_eq!(
        progress.last().map(String::as_str),
        Some("status input-required: which day?"),
        "{progress:?}"
    );

    // A remote whose card does not say it streams gets `SendMessage`,
    // with the same result and no progress.
    let port = agentkit_test_support::process::free_port();
    let script_path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/a2a_server.py");
    let _blocking = Killed(
        std::process::Command::new(bin.join("python"))
            .arg(&script_path)
            .arg(port.to_string())
            .arg("--no-streaming")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while Request::get("/.well-known/agent-card.json")
        .send(addr)
        .is_err()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the Python A2A server did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let blocking_connection: &'static str = Box::leak(
        format!("a2a = \"http://127.0.0.1:{port}/.well-known/agent-card.json\"\n").into_boxed_str(),
    );
    let plain = host(
        &[("bot", &files(script, blocking_connection))],
        ServeOptions::default(),
    );
    let (sid, blocking) = result(&plain, "go", None);
    assert_eq!(blocking["isError"], false, "{blocking}");
    assert_eq!(
        blocking["output"]["reply"],
        "remote echo: hello there (hops 1)"
    );
    assert!(progress_of(&plain, &sid).is_empty());

    // Past the hop limit the call is refused before it leaves.
    let limited = host(
        &[("bot", &files(script, connection))],
        ServeOptions {
            max_hops: 0,
            ..ServeOptions::default()
        },
    );
    let (_, refused) = result(&limited, "go", None);
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(
        refused["output"].to_string().contains("too deep"),
        "{refused}"
    );
}

/// The `action.progress` events of session `sid` of agent `bot`, as
/// `status <status>` or `delta <text>` lines.
fn progress_of(h: &Host, sid: &str) -> Vec<String> {
    h.send(Request::get(&format!("/bot/v1/session/{sid}/events")))
        .body
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "action.progress")
        .map(|e| {
            let d = &e["data"];
            assert_eq!(d["toolName"], "remote__a2a", "{e}");
            match (d["status"].as_str(), d["delta"].as_str()) {
                (Some(s), None) => format!("status {s}"),
                (None, Some(t)) => format!("delta {t}"),
                _ => panic!("one of status and delta: {e}"),
            }
        })
        .collect()
}

/// A child process killed (and reaped) when the test ends, however.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn tasks_are_listed_newest_first_in_pages_of_their_principal_with_filters() {
    const TEXT: &str = r#"{"turns": [
  {"steps": [{"text": "first"}]},
  {"steps": [{"text": "second"}]},
  {"steps": [{"text": "third"}]}
]}"#;
    let http = "kind = \"http\"\nauth = [{ bearer = { tokens = { alice = \"token-a\", bob = \"token-b\" } } }]\n";
    let h = host(
        &[("bot", &bot_with(TEXT, &[("channels/http.toml", http)]))],
        ServeOptions::default(),
    );
    let send = |text: &str, context: Option<&str>, token: &str| {
        let r = rpc(
            &h,
            "/bot/a2a",
            "SendMessage",
            json!({"message": user_message(text, context)}),
            Some(token),
        );
        let task = r.json()["result"]["task"].clone();
        assert_eq!(state(&task), "TASK_STATE_COMPLETED", "{}", r.body);
        (
            task["id"].as_str().unwrap().to_owned(),
            task["contextId"].as_str().unwrap().to_owned(),
        )
    };
    let (t1, c1) = send("one", None, "token-a");
    let (t2, _) = send("two", Some(&c1), "token-a");
    let (t3, _) = send("three", None, "token-a");
    let (tb, _) = send("bob's", None, "token-b");
    let list = |params: Value, token: &str| {
        let r = rpc(&h, "/bot/a2a", "ListTasks", params, Some(token));
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()
    };
    let ids = |v: &Value| -> Vec<String> {
        v["result"]["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_owned())
            .collect()
    };
    // Two pages of two, the second going on from the first's token.
    let first = list(json!({"pageSize": 2}), "token-a");
    assert_eq!(first["result"]["totalSize"], 3, "{first}");
    assert_eq!(first["result"]["pageSize"], 2);
    let token = first["result"]["nextPageToken"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(!token.is_empty(), "{first}");
    let second = list(json!({"pageSize": 2, "pageToken": token}), "token-a");
    assert_eq!(second["result"]["nextPageToken"], "", "{second}");
    let mut all = ids(&first);
    all.extend(ids(&second));
    assert_eq!(all.len(), 3, "{all:?}");
    for t in [&t1, &t2, &t3] {
        assert!(all.contains(t), "{t} missing from {all:?}");
    }
    assert!(!all.contains(&tb), "bob's task listed for alice");
    // One context: its tasks, the later message first, with history and
    // without artifacts unless asked for.
    let one = list(json!({"contextId": c1}), "token-a");
    assert_eq!(ids(&one), vec![t2.clone(), t1.clone()], "{one}");
    let task = &one["result"]["tasks"][0];
    assert_eq!(task["contextId"], c1.as_str());
    assert!(
        task["artifacts"].as_array().is_none_or(Vec::is_empty),
        "{task}"
    );
    assert_eq!(text_of(&task["history"][0]), "two");
    let with = list(
        json!({"contextId": c1, "includeArtifacts": true}),
        "token-a",
    );
    let reply = &with["result"]["tasks"][0]["artifacts"][0];
    assert!(text_of(reply).contains("second"), "{with}");
    // The state and time filters.
    let done = list(json!({"status": "TASK_STATE_COMPLETED"}), "token-a");
    assert_eq!(done["result"]["totalSize"], 3);
    let working = list(json!({"status": "TASK_STATE_WORKING"}), "token-a");
    assert_eq!(ids(&working), Vec::<String>::new());
    let later = list(
        json!({"statusTimestampAfter": "2999-01-01T00:00:00Z"}),
        "token-a",
    );
    assert_eq!(later["result"]["totalSize"], 0);
    // Bob sees his own, and nothing of alice's context.
    assert_eq!(ids(&list(json!({}), "token-b")), vec![tb]);
    assert_eq!(
        list(json!({"contextId": c1}), "token-b")["result"]["totalSize"],
        0
    );
    // Bad pages are invalid params.
    for bad in [
        json!({"pageSize": 500}),
        json!({"pageToken": "not a token"}),
        json!({"statusTimestampAfter": "yesterday"}),
    ] {
        let r = list(bad.clone(), "token-a");
        assert_eq!(r["error"]["code"], -32602, "{bad}: {r}");
    }
    // The HTTP+JSON binding takes the same in its query.
    let r = h
        .send(Request::get(&format!("/bot/a2a/tasks?contextId={c1}&pageSize=1")).bearer("token-a"));
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["tasks"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["tasks"][0]["id"], t2.as_str());
    assert_eq!(v["nextPageToken"], t2.as_str());
    let r = h.send(Request::get("/bot/a2a/tasks?pageSize=x").bearer("token-a"));
    assert_eq!(r.status, 400, "{}", r.body);
}

/// Push notifications with the official Python SDK over both bindings:
/// a webhook registered with a message and one created on a parked task,
/// each called with its token and credentials, with bodies the SDK parses
/// as `StreamResponse` (the task, then its status updates to completed);
/// configs got, listed and deleted.
#[test]
fn the_official_python_sdk_registers_webhooks_that_receive_the_tasks_changes() {
    let Some(bin) = a2a_python() else { return };
    let h = host(
        &[("bot", &bot(&[]))],
        ServeOptions {
            a2a_push_private_networks: true,
            ..ServeOptions::default()
        },
    );
    for binding in ["JSONRPC", "HTTP+JSON"] {
        let v = run_python_client(&bin, "a2a_push.py", &h, binding);
        assert_eq!(v["pushCapability"], true);

        // The first webhook: the task as registered, then completed, each
        // with the token and the credentials.
        let first = v["first"].as_array().unwrap();
        assert_eq!(first[0]["event"]["task"]["id"], v["firstId"], "{first:?}");
        for call in first {
            assert_eq!(call["token"], "tok-first");
            assert_eq!(call["authorization"], "Bearer s3cret");
        }
        // The turn may have ended before the webhook was registered: then
        // the task as registered is the completed one.
        let last = &first.last().unwrap()["event"];
        assert_eq!(pushed_state(last), "TASK_STATE_COMPLETED", "{first:?}");
        let reply = first
            .iter()
            .find_map(|c| {
                let e = &c["event"];
                if e["artifactUpdate"]["lastChunk"] == true {
                    Some(text_of(&e["artifactUpdate"]["artifact"]))
                } else {
                    e["task"]["artifacts"]
                        .get(0)
                        .filter(|_| pushed_state(e) == "TASK_STATE_COMPLETED")
                        .map(text_of)
                }
            })
            .unwrap();
        assert_eq!(reply, "Hello over A2A.");
        // Pieces of the reply are not pushed.
        assert!(
            first
                .iter()
                .all(|c| c["event"]["artifactUpdate"]["append"] != true),
            "{first:?}"
        );

        // The webhook created on a parked task: the task as it waits,
        // then its end after the approval; no credentials were given.
        assert_eq!(v["parkedState"], "TASK_STATE_INPUT_REQUIRED");
        assert_eq!(v["created"]["id"], "later");
        assert_eq!(v["got"]["url"], v["created"]["url"]);
        assert_eq!(v["got"]["token"], "tok-later");
        assert_eq!(v["listed"]["configs"].as_array().unwrap().len(), 1);
        let later = v["later"].as_array().unwrap();
        assert_eq!(
            later[0]["event"]["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
            "{later:?}"
        );
        assert!(later.iter().all(|c| c["authorization"].is_null()));
        assert_eq!(
            later.last().unwrap()["event"]["statusUpdate"]["status"]["state"],
            "TASK_STATE_COMPLETED",
            "{later:?}"
        );
        assert!(
            later.len() >= 2,
            "the completion came as an update: {later:?}"
        );
        assert_eq!(v["afterDelete"], "TaskNotFoundError", "{binding}");
        assert_eq!(v["unknownTask"], "TaskNotFoundError", "{binding}");
    }
}

/// The state a pushed `StreamResponse` carries (a task or a status
/// update), or "".
fn pushed_state(event: &Value) -> &str {
    event["task"]["status"]["state"]
        .as_str()
        .or_else(|| event["statusUpdate"]["status"]["state"].as_str())
        .unwrap_or_default()
}

/// Without `--a2a-push-private-networks` a webhook on loopback, a private
/// address or a name resolving only to one is refused; another
/// principal's task takes no webhook; bad configs are refused.
#[test]
fn webhooks_are_refused_on_private_addresses_others_tasks_and_bad_configs() {
    let http = "kind = \"http\"\nauth = [{ bearer = { tokens = { alice = \"token-a\", bob = \"token-b\" } } }]\n";
    let h = host(
        &[("bot", &bot(&[("channels/http.toml", http)]))],
        ServeOptions::default(),
    );
    let sent = rpc(
        &h,
        "/bot/a2a",
        "SendMessage",
        json!({"message": user_message("hello", None)}),
        Some("token-a"),
    );
    let task = sent.json()["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let create = |url: &str, token: &str| {
        rpc(
            &h,
            "/bot/a2a",
            "CreateTaskPushNotificationConfig",
            json!({"taskId": task, "url": url}),
            Some(token),
        )
        .json()
    };
    for url in [
        "http://127.0.0.1:9/hook",
        "http://10.0.0.8/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]:9/hook",
        "http://localhost:9/hook",
    ] {
        let r = create(url, "token-a");
        assert_eq!(r["error"]["code"], -32602, "{url}: {r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("public address"),
            "{r}"
        );
    }
    for (url, why) in [
        ("ftp://example.com/x", "http or https"),
        ("http://user:pw@example.com/x", "credentials"),
        ("nonsense", "not a URL"),
    ] {
        let r = create(url, "token-a");
        assert!(
            r["error"]["message"].as_str().unwrap().contains(why),
            "{url}: {r}"
        );
    }
    // Bob cannot register on alice's task (whatever the URL), nor read
    // its configs.
    let r = create("http://127.0.0.1:9/hook", "token-b");
    assert_eq!(r["error"]["code"], -32001, "{r}");
    let r = rpc(
        &h,
        "/bot/a2a",
        "ListTaskPushNotificationConfigs",
        json!({"taskId": task}),
        Some("token-b"),
    )
    .json();
    assert_eq!(r["error"]["code"], -32001, "{r}");
    // A message's own webhook is checked before any turn starts.
    let r = rpc(
        &h,
        "/bot/a2a",
        "SendMessage",
        json!({"message": user_message("again", None), "configuration": {"taskPushNotificationConfig": {"url": "http://127.0.0.1:1/x"}}}),
        Some("token-a"),
    )
    .json();
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let listed = h
        .send(Request::get("/bot/v1/sessions?channel=a2a").bearer("token-a"))
        .json();
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 1, "{listed}");
}

/// A message queued behind a running turn and dropped by a stop is
/// recorded as dropped (`message.dropped`), so the task it started is
/// canceled at once for `GetTask` (on any host), not submitted until some
/// later turn starts. (A2A messages preempt; the queue is reached through
/// the session API's `coalesce`.)
#[test]
fn a_message_dropped_by_a_stop_is_recorded_and_its_task_is_canceled() {
    const SLOW: &str = r#"{"turns": [
      {"steps": [{"text": "slow", "delayMs": 30000}]},
      {"steps": [{"text": "never"}]}
    ]}"#;
    let h = host(&[("bot", &bot_with(SLOW, &[]))], ServeOptions::default());
    let created = h
        .send(Request::post("/bot/v1/session").json(&json!({"message": "take your time"})))
        .json();
    let (id, token) = (
        created["sessionId"].as_str().unwrap().to_owned(),
        created["continuationToken"].as_str().unwrap().to_owned(),
    );
    let queued = h
        .send(Request::post(&format!("/bot/v1/session/{id}")).json(
            &json!({"message": "and then this", "continuationToken": token, "admission": "coalesce"}),
        ))
        .json();
    assert_eq!(queued["coalesced"], true, "{queued}");
    let events = || -> Vec<Value> {
        h.send(Request::get(&format!("/bot/v1/session/{id}/events")))
            .body
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .collect()
    };
    let queued_index = events()
        .iter()
        .rfind(|e| e["type"] == "message.received")
        .and_then(|e| e["index"].as_u64())
        .unwrap();
    let r = h.send(Request::post(&format!("/bot/v1/session/{id}/stop")));
    assert_eq!(r.status, 200, "{}", r.body);
    let mut log = events();
    let start = std::time::Instant::now();
    while !log.iter().any(|e| e["type"] == "session.waiting") {
        assert!(start.elapsed().as_secs() < 30, "never settled: {log:?}");
        std::thread::sleep(std::time::Duration::from_millis(20));
        log = events();
    }
    let dropped: Vec<&Value> = log
        .iter()
        .filter(|e| e["type"] == "message.dropped")
        .collect();
    assert_eq!(dropped.len(), 1, "{log:?}");
    assert_eq!(dropped[0]["data"]["received"], json!([queued_index]));
    let got = rpc(
        &h,
        "/bot/a2a",
        "GetTask",
        json!({"id": format!("{id}.{queued_index}")}),
        None,
    )
    .json();
    assert_eq!(state(&got["result"]), "TASK_STATE_CANCELED", "{got}");
}

/// Starts the Python SDK's A2A server (`tests/python/a2a_server.py`) on a
/// free port and waits for its card; the process and its card URL.
fn python_a2a_server(bin: &std::path::Path) -> (Killed, String) {
    let port = agentkit_test_support::process::free_port();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/a2a_server.py");
    let server = Killed(
        std::process::Command::new(bin.join("python"))
            .arg(&script)
            .arg(port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while Request::get("/.well-known/agent-card.json")
        .send(addr)
        .is_err()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the Python A2A server did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    (
        server,
        format!("http://127.0.0.1:{port}/.well-known/agent-card.json"),
    )
}

/// A chain A → B → C: A is the official Python SDKs (an A2A client that
/// streams, then an MCP client with a progress token), B an agentkit
/// agent whose turn calls C, a remote A2A agent built with the Python
/// SDK that streams its reply in pieces. C's progress, recorded in B's
/// session as `action.progress`, reaches A before B's answer: as
/// `working` status updates on B's A2A stream, and as MCP progress
/// notifications of B's `ask`.
#[test]
fn a_remote_agents_progress_is_passed_on_over_a2a_streams_and_mcp_progress() {
    let Some(bin) = a2a_python() else { return };
    let (_c, card) = python_a2a_server(&bin);
    let connection: &'static str =
        Box::leak(format!("a2a = \"{card}\"\ndescription = \"Echoes\"\n").into_boxed_str());
    let script = r#"{"turns": [
      {"steps": [{"toolCalls": [{"name": "remote__a2a", "input": {"message": "hello there"}}]}, {"text": "relayed"}]}
    ]}"#;
    let h = host(
        &[(
            "bot",
            &[
                ("agent.toml", "model = \"scripted:script.json\"\n"),
                ("script.json", script),
                ("instructions.md", "You relay.\n"),
                ("mcp-connections/remote.toml", connection),
            ][..],
        )],
        ServeOptions::default(),
    );
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/a2a_chain.py");
    let out = std::process::Command::new(bin.join("python"))
        .arg(&script)
        .arg(format!("http://{}/bot", h.addr()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "a2a_chain.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();

    // The A2A stream: C's pieces as `working` status updates whose
    // message is the piece (the call named in its metadata), all before
    // the reply and the completion.
    let stream = v["stream"].as_array().unwrap();
    let progress: Vec<(usize, String)> = stream
        .iter()
        .enumerate()
        .filter(|(_, e)| e["statusUpdate"]["status"]["message"]["metadata"]["progress"].is_object())
        .map(|(i, e)| {
            let status = &e["statusUpdate"]["status"];
            assert_eq!(status["state"], "TASK_STATE_WORKING", "{e}");
            assert_eq!(
                status["message"]["metadata"]["progress"]["toolName"], "remote__a2a",
                "{e}"
            );
            (i, text_of(&status["message"]))
        })
        .collect();
    let texts: Vec<&str> = progress.iter().map(|(_, t)| t.as_str()).collect();
    let pieces = ["remote echo: ", "hello there", " (hops 1)"];
    let at = texts
        .windows(3)
        .position(|w| w == pieces)
        .unwrap_or_else(|| panic!("C's pieces in order: {texts:?}"));
    assert_eq!(texts.first(), Some(&"submitted"), "{texts:?}");
    assert_eq!(texts.last(), Some(&"completed"), "{texts:?}");
    assert!(at > 0);
    let done = stream
        .iter()
        .position(|e| e["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED")
        .unwrap_or_else(|| panic!("no completion: {stream:?}"));
    assert!(progress.iter().all(|(i, _)| *i < done), "{stream:?}");
    assert_eq!(
        text_of(&stream[done]["statusUpdate"]["status"]["message"]),
        "relayed"
    );

    // MCP: the same pieces as progress notifications, counting up,
    // before `ask` answers.
    // A 2026-07-28 client that takes input requests, whose `ask` the
    // server waits for as a task: the same.
    for (notes, ask) in [("progress", "ask"), ("roundsProgress", "roundsAsk")] {
        let notes = v[notes].as_array().unwrap();
        let messages: Vec<&str> = notes
            .iter()
            .map(|n| n["message"].as_str().unwrap())
            .collect();
        assert!(
            messages.windows(3).any(|w| w == pieces),
            "C's pieces in order: {messages:?}"
        );
        let counts: Vec<f64> = notes
            .iter()
            .map(|n| n["progress"].as_f64().unwrap())
            .collect();
        assert!(counts.windows(2).all(|w| w[0] < w[1]), "{counts:?}");
        assert_eq!(v[ask]["status"], "completed", "{v}");
        assert_eq!(v[ask]["reply"], "relayed", "{v}");
    }
}
