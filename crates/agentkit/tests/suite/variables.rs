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

/// The host's secret command in the tests: prints the secret named by its
/// last argument, fails, or hangs.
const SECRET_COMMAND: &str = r#"import os, sys, time
name = sys.argv[-1]
if name == "hook-token":
    print("cmd-token-9f2")
elif name == "env-names":
    print("-".join(sorted(k for k in os.environ if not k.startswith(("LC_", "LANG")))))
elif name == "leaky":
    sys.stdout.write("leaked-value-77")
    sys.stderr.write("vault: permission denied\n")
    sys.exit(3)
elif name == "slow":
    time.sleep(30)
else:
    sys.exit(1)
"#;

fn secret_command(dir: &std::path::Path) -> agentkit::secrets::SecretCommand {
    let script = dir.join("secret-command.py");
    std::fs::write(&script, SECRET_COMMAND).unwrap();
    // The interpreter itself, not a shim on PATH that would add variables
    // of its own to what the command sees.
    let python = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let python = String::from_utf8(python.stdout).unwrap().trim().to_owned();
    agentkit::secrets::SecretCommand {
        program: python.into(),
        args: vec![script.display().to_string()],
        pass_env: vec!["CARGO_PKG_NAME".to_owned()],
        timeout: Duration::from_secs(10),
    }
}

fn note_channel(token: &str, principal: &str) -> String {
    format!(
        r#"auth = [{{ bearer = {{ token = "{token}", principal = "{principal}" }} }}]
[[routes]]
method = "POST"
path = "/note"
body_schema = {{ type = "object" }}
[routes.send]
message = "{{{{ body.text }}}}"
wait = true
"#
    )
}

/// Every file under `dir`, read as bytes.
fn every_file(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                out.push((path, bytes));
            }
        }
    }
    out
}

#[test]
fn secret_files_and_the_secret_command_feed_every_expansion_and_never_leak() {
    super::observability::install_log_layer();
    let secrets = tempfile::tempdir().unwrap();
    let token_file = secrets.path().join("intake-token");
    // A Kubernetes secret file ends with a line end; the value does not.
    std::fs::write(&token_file, "file-token-3c1\n").unwrap();
    let command = secret_command(secrets.path());
    // What the command sees: the runner's few variables and the one
    // passed through, nothing else of this process's environment.
    let mut seen: Vec<&str> = agentkit_harness::PASSED_ENV
        .iter()
        .copied()
        .chain(["CARGO_PKG_NAME"])
        .filter(|n| std::env::var_os(n).is_some())
        .filter(|n| !n.starts_with("LC_") && !n.starts_with("LANG"))
        .collect();
    seen.sort_unstable();
    let env_names = seen.join("-");
    assert!(env_names.contains("PATH"), "{env_names}");

    let intake = note_channel(&format!("${{file:{}}}", token_file.display()), "intake");
    let ops = note_channel("${secret:hook-token}", "ops");
    let envs = note_channel("${secret:env-names}", "envs");
    let defaulted = note_channel("${file:/nonexistent/agentkit-secret:-dev-token}", "dev");
    let host = host(
        &[(
            "desk",
            &[
                ("agent.toml", "model = \"scripted:script.json\"\n"),
                (
                    "script.json",
                    r#"{"turns": [{"steps": [{"text": "noted"}]}, {"steps": [{"text": "noted"}]}, {"steps": [{"text": "noted"}]}, {"steps": [{"text": "noted"}]}]}"#,
                ),
                ("instructions.md", "Desk.\n"),
                ("channels/intake.toml", &intake),
                ("channels/ops.toml", &ops),
                ("channels/envs.toml", &envs),
                ("channels/defaulted.toml", &defaulted),
            ],
        )],
        ServeOptions {
            env: nothing_set(),
            secret_command: Some(command),
            ..ServeOptions::default()
        },
    );
    let post = |channel: &str, token: &str| {
        host.send(
            Request::post(&format!("/desk/v1/channels/{channel}/note"))
                .bearer(token)
                .json(&json!({"text": "hi"})),
        )
    };
    assert_eq!(post("intake", "file-token-3c1").status, 200);
    assert_eq!(post("ops", "cmd-token-9f2").status, 200);
    assert_eq!(post("ops", "file-token-3c1").status, 401);
    let r = post("envs", &env_names);
    assert_eq!(r.status, 200, "the command saw other variables: {}", r.body);
    assert_eq!(post("defaulted", "dev-token").status, 200);

    // No value in what the host shows or keeps: info (served and
    // discovered), the log ring, the state root's files.
    let values = ["file-token-3c1", "cmd-token-9f2", &env_names];
    let info = host.send(Request::get("/desk/v1/info"));
    let logs = host.send(Request::get("/v1/logs?limit=1000").bearer(super::http::SCRAPER));
    assert_eq!(logs.status, 200, "{}", logs.body);
    let found = agentkit::discover(&host.dir.path().join("agents")).unwrap();
    let discovered = agentkit::info::info_json(&found, chrono::Utc::now()).to_string();
    assert!(
        discovered.contains(r#""kind":"secret""#) && discovered.contains("hook-token"),
        "{discovered}"
    );
    for value in values {
        for (what, text) in [
            ("info", &info.body),
            ("logs", &logs.body),
            ("agentkit info", &discovered),
        ] {
            assert!(!text.contains(value), "{what} shows a secret: {text}");
        }
        for (path, bytes) in every_file(&host.dir.path().join("state")) {
            assert!(
                !bytes.windows(value.len()).any(|w| w == value.as_bytes()),
                "{} holds a secret",
                path.display()
            );
        }
    }
}

#[test]
fn a_secret_that_cannot_be_resolved_keeps_the_host_from_starting_without_showing_it() {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agents/desk/agent");
    super::mcp::write(&agent.join("instructions.md"), "Desk.\n");
    super::mcp::write(
        &agent.join("mcp-connections/vault.toml"),
        "url = \"${file:/nonexistent/agentkit-url:-https://mcp.example.com/mcp}\"\n\
         headers = { Authorization = \"Bearer ${secret:leaky}\", X-Slow = \"${secret:slow}\", \
         X-File = \"${file:/nonexistent/agentkit-secret}\", X-Rel = \"${file:relative/token}\" }\n\
         \n\
         # ${secret:in-a-comment}\n",
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let serve = |command: Option<agentkit::secrets::SecretCommand>| {
        rt.block_on(agentkit::serve(
            &dir.path().join("agents"),
            ServeOptions {
                port: 0,
                state_root: Some(dir.path().join("state")),
                env: nothing_set(),
                secret_command: command,
                ..ServeOptions::default()
            },
        ))
    };
    let mut command = secret_command(dir.path());
    command.timeout = Duration::from_secs(1);
    let program = command.program.display().to_string();
    let Err(agentkit::Error::Invalid { diagnostics }) = serve(Some(command)) else {
        panic!("served with unresolvable secrets");
    };
    let lines: Vec<String> = diagnostics.iter().map(ToString::to_string).collect();
    let file = "desk/agent/mcp-connections/vault.toml:2:1: error[secret-unavailable]";
    assert_eq!(
        lines,
        [
            format!(
                "{file}: `${{file:/nonexistent/agentkit-secret}}`: cannot read `/nonexistent/agentkit-secret`: No such file or directory (os error 2) (hint: mount the file where the host runs (readable by its user); `${{file:/nonexistent/agentkit-secret:-default}}` gives it a default)"
            ),
            format!(
                "{file}: `${{file:relative/token}}`: `relative/token` is not an absolute path (hint: mount the file where the host runs (readable by its user); `${{file:relative/token:-default}}` gives it a default)"
            ),
            format!(
                "{file}: `${{secret:leaky}}`: the secret command `{program}` exited with status 3: vault: permission denied (hint: check that the secret command prints `leaky`; `${{secret:leaky:-default}}` gives it a default)"
            ),
            format!(
                "{file}: `${{secret:slow}}`: the secret command `{program}` did not answer within 1s (hint: check that the secret command prints `slow`; `${{secret:slow:-default}}` gives it a default)"
            ),
        ]
    );
    for line in &lines {
        assert!(!line.contains("leaked-value-77"), "{line}");
    }
    // Without a secret command, the hint says how to give one.
    let Err(agentkit::Error::Invalid { diagnostics }) = serve(None) else {
        panic!("served with unresolvable secrets");
    };
    let hints: Vec<String> = diagnostics
        .iter()
        .filter(|d| d.message.contains("secret:"))
        .map(ToString::to_string)
        .collect();
    assert_eq!(hints.len(), 2, "{hints:?}");
    assert!(
        hints
            .iter()
            .all(|h| h.contains("no secret command is configured")
                && h.contains("--secret-command PROGRAM")),
        "{hints:?}"
    );
}
