//! `${VAR:-default}` and `${VAR:?message}` over a real server: with
//! nothing set, each place that reads the environment (an MCP connection's
//! URL and headers, a stdio connection's arguments and environment, a
//! channel's auth secret, a channel event delivery, a URL hook, a pack's
//! webhook secret) uses its default; a required variable left unset keeps
//! the host from starting and says which file and why.

use std::time::Duration;

use agentkit::{EnvLookup, ServeOptions};
use agentkit_test_support::http::Request;
use agentkit_test_support::mock::{MockResponse, MockServer};
use serde_json::json;

use super::mcp::host;

const SCRIPT: &str = r#"{"turns": [{"steps": [{"text": "noted"}]}]}"#;

const ECHO_TOOL: &str = r#"description = "Echo the input back."
command = ["python3", "-c", "import json,sys; print(json.dumps({'echo': json.load(sys.stdin)}))"]
[input_schema]
type = "object"
properties.text = { type = "string" }
"#;

/// A stdio MCP server in Python (the protocol by hand, no SDK): one tool,
/// `whoami`, answering with its first argument and `$GREETING`.
const STDIO_SERVER: &str = r#"import json, os, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "who", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "whoami", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        text = sys.argv[1] + " " + os.environ.get("GREETING", "<unset>")
        result = {"content": [{"type": "text", "text": text}]}
    else:
        result = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
    sys.stdout.flush()
"#;

fn nothing_set() -> EnvLookup {
    EnvLookup::empty()
}

#[test]
fn defaults_apply_wherever_the_environment_is_read() {
    let remote = host(
        &[(
            "remote",
            &[
                ("agent.toml", "model = \"scripted:script.json\"\n"),
                ("script.json", SCRIPT),
                ("instructions.md", "Remote.\n"),
                ("tools/echo.toml", ECHO_TOOL),
            ],
        )],
        ServeOptions {
            bearer_token: Some("remote-secret".into()),
            ..ServeOptions::default()
        },
    );
    let receiver = MockServer::start(|_| MockResponse::json(200, &json!({"stored": true})));
    let remote_url = format!("http://{}/remote/v1/mcp", remote.addr());
    let connection = format!(
        "url = \"${{REMOTE_URL:-{remote_url}}}\"\n\
         headers = {{ Authorization = \"Bearer ${{REMOTE_TOKEN:-remote-secret}}\" }}\n"
    );
    let stdio = "command = \"python3\"\n\
                 args = [\"who.py\", \"${WHO:-the default}\"]\n\
                 env = { GREETING = \"${GREETING:-hello}\" }\n";
    let channel = format!(
        r#"auth = [{{ bearer = {{ token = "${{INTAKE_TOKEN:-intake-dev}}", principal = "intake" }} }}]
[[routes]]
method = "POST"
path = "/note"
body_schema = {{ type = "object" }}
[routes.send]
message = "{{{{ body.text }}}}"
wait = true

[events."turn.completed"]
post = "${{RECEIVER:-{receiver}}}/delivered"
"#,
        receiver = receiver.url()
    );
    let hook = format!(
        "events = [\"turn.completed\"]\nurl = \"${{HOOK_URL:-{}/hooked}}\"\n",
        receiver.url()
    );
    let github = "kind = \"github\"\nwebhook_secret = \"${GH_SECRET:-dev-secret}\"\n";
    let local = host(
        &[(
            "local",
            &[
                ("agent.toml", "model = \"scripted:script.json\"\n"),
                ("script.json", SCRIPT),
                ("instructions.md", "Local.\n"),
                ("mcp-connections/remote.toml", &connection),
                ("mcp-connections/who.toml", stdio),
                ("who.py", STDIO_SERVER),
                ("channels/intake.toml", &channel),
                ("channels/github.toml", github),
                ("hooks/forward.toml", &hook),
            ],
        )],
        ServeOptions {
            env: nothing_set(),
            ..ServeOptions::default()
        },
    );

    // The connection's URL and bearer header come from their defaults.
    let mcp = local.handle.as_ref().unwrap().mcp("local").unwrap();
    let out = local
        .rt
        .block_on(mcp.call_tool(
            "remote",
            "call_tool",
            json!({"name": "echo", "input": {"text": "far"}}),
            0,
        ))
        .unwrap();
    assert!(!out.is_error, "{out:?}");
    assert_eq!(
        out.model_output()["result"],
        json!({"echo": {"text": "far"}})
    );

    // The stdio connection's argument and environment too.
    let out = local
        .rt
        .block_on(mcp.call_tool("who", "whoami", json!({}), 0))
        .unwrap();
    assert!(!out.is_error, "{out:?}");
    assert_eq!(out.model_output().to_string(), "\"the default hello\"");

    // The channel admits the default token and only it; the turn's
    // completion is delivered and hooked to the default receiver URLs.
    let wrong = local.send(
        Request::post("/local/v1/channels/intake/note")
            .bearer("intake")
            .json(&json!({"text": "hi"})),
    );
    assert_eq!(wrong.status, 401, "{}", wrong.body);
    let r = local.send(
        Request::post("/local/v1/channels/intake/note")
            .bearer("intake-dev")
            .json(&json!({"text": "hi"})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let seen = receiver.wait_for(2, Duration::from_secs(10));
    let mut paths: Vec<&str> = seen.iter().map(|r| r.path.as_str()).collect();
    paths.sort();
    assert_eq!(paths, ["/delivered", "/hooked"]);

    // The GitHub pack checks signatures with the default secret.
    let body = br#"{"zen": "Keep it logically awesome.", "hook_id": 1}"#;
    let ping = |secret: &str| {
        local.send(
            Request::post("/local/v1/channels/github")
                .header("x-github-event", "ping")
                .header("x-github-delivery", "d-1")
                .header(
                    "x-hub-signature-256",
                    &format!("sha256={}", agentkit_channels::sign(secret, body)),
                )
                .header("content-type", "application/json")
                .raw_body(body),
        )
    };
    assert_eq!(ping("dev-secret").status, 200);
    assert_eq!(ping("other").status, 401);
}

#[test]
fn a_required_variable_left_unset_keeps_the_host_from_starting() {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agents/desk/agent");
    super::mcp::write(&agent.join("instructions.md"), "Desk.\n");
    super::mcp::write(
        &agent.join("mcp-connections/linear.toml"),
        "# ${NOT_READ:?comments are not references}\n\
         url = \"${LINEAR_URL:-https://mcp.linear.app/mcp}\"\n\
         headers = { Authorization = \"Bearer ${LINEAR_TOKEN:?create a key under Settings → API}\" }\n",
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let serve = |env: EnvLookup| {
        rt.block_on(agentkit::serve(
            &dir.path().join("agents"),
            ServeOptions {
                port: 0,
                state_root: Some(dir.path().join("state")),
                env,
                ..ServeOptions::default()
            },
        ))
    };
    let Err(agentkit::Error::Invalid { diagnostics }) = serve(nothing_set()) else {
        panic!("served without LINEAR_TOKEN");
    };
    let lines: Vec<String> = diagnostics.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        [
            "desk/agent/mcp-connections/linear.toml:3:1: error[env-required]: `${LINEAR_TOKEN:?…}`: `LINEAR_TOKEN` must be set: create a key under Settings → API (hint: export LINEAR_TOKEN before serving; the host does not start without it)"
        ]
    );
    // An empty value counts as unset.
    let empty = EnvLookup::new(|n| (n == "LINEAR_TOKEN").then(String::new));
    assert!(matches!(serve(empty), Err(agentkit::Error::Invalid { .. })));
    // `validate` reports the same error.
    let found = agentkit::validate(&dir.path().join("agents"), |_| false).unwrap();
    assert!(!found.is_ok());
    // Set, the host starts.
    let set = EnvLookup::new(|n| (n == "LINEAR_TOKEN").then(|| "lin_api_x".to_owned()));
    let handle = serve(set).unwrap();
    rt.block_on(handle.close());
}
