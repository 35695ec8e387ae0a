//! The MCP endpoint of each agent, driven as JSON-RPC over real HTTP:
//! tool listing, `ask` / `check` / `call_tool`, bounded waits, the auth
//! chain, the hop limit, and sessions that survive a restart.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agentkit::{ServeHandle, ServeOptions};
use agentkit_test_support::http::{Request, Response};
use serde_json::{Value, json};

/// Turn 0 answers at once; turn 1 holds for 30 s unless interrupted.
const SCRIPT: &str = r#"{"turns": [
  {"steps": [{"text": "Hello over MCP."}]},
  {"steps": [{"text": "slow", "delayMs": 30000}]}
]}"#;

const ECHO_TOOL: &str = r#"description = "Echo the input back."
command = ["python3", "-c", "import json,sys; print(json.dumps({'echo': json.load(sys.stdin)}))"]
[input_schema]
type = "object"
required = ["text"]
properties.text = { type = "string" }
"#;

pub(crate) struct Host {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) rt: tokio::runtime::Runtime,
    pub(crate) handle: Option<ServeHandle>,
}

impl Host {
    pub(crate) fn addr(&self) -> SocketAddr {
        self.handle.as_ref().unwrap().local_addr()
    }

    pub(crate) fn send(&self, req: Request) -> Response {
        req.send(self.addr()).unwrap()
    }

    pub(crate) fn restart(&mut self, options: ServeOptions) {
        if let Some(h) = self.handle.take() {
            self.rt.block_on(h.close());
        }
        self.handle = Some(boot(&self.rt, self.dir.path(), options));
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            self.rt.block_on(h.close());
        }
    }
}

pub(crate) fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn boot(rt: &tokio::runtime::Runtime, dir: &Path, options: ServeOptions) -> ServeHandle {
    let options = super::http::with_scraper(ServeOptions {
        port: 0,
        state_root: Some(dir.join("state")),
        ..options
    });
    rt.block_on(agentkit::serve(&dir.join("agents"), options))
        .unwrap()
}

/// A host folder with agents (`slug`, files relative to its `agent/`).
pub(crate) fn host(agents: &[(&str, &[(&str, &str)])], options: ServeOptions) -> Host {
    let dir = tempfile::tempdir().unwrap();
    for (slug, files) in agents {
        let project: PathBuf = dir.path().join("agents").join(slug).join("agent");
        for (rel, text) in *files {
            write(&project.join(rel), text);
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let handle = boot(&rt, dir.path(), options);
    Host {
        dir,
        rt,
        handle: Some(handle),
    }
}

fn bot(with_tool: bool) -> Vec<(&'static str, &'static str)> {
    let mut files = vec![
        ("agent.toml", "model = \"scripted:script.json\"\n"),
        ("script.json", SCRIPT),
        ("instructions.md", "You are a test agent.\n"),
    ];
    if with_tool {
        files.push(("tools/echo.toml", ECHO_TOOL));
    }
    files
}

/// One JSON-RPC request to `path`, answered with JSON.
pub(crate) fn rpc_raw(
    h: &Host,
    path: &str,
    method: &str,
    params: Value,
    extra: &[(&str, &str)],
) -> Response {
    let mut req = Request::post(path)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
    for (k, v) in extra {
        req = req.header(k, v);
    }
    h.send(req)
}

fn rpc(h: &Host, path: &str, method: &str, params: Value) -> Value {
    let r = rpc_raw(h, path, method, params, &[]);
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert!(v.get("error").is_none(), "{v}");
    v["result"].clone()
}

/// `tools/call`: the structured content and the error flag.
fn call(h: &Host, path: &str, tool: &str, args: Value) -> (Value, bool) {
    let result = rpc(
        h,
        path,
        "tools/call",
        json!({"name": tool, "arguments": args}),
    );
    (
        result["structuredContent"].clone(),
        result["isError"].as_bool().unwrap_or(false),
    )
}

fn tool_names(h: &Host, path: &str) -> Vec<String> {
    rpc(h, path, "tools/list", json!({}))["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn initialize_and_tools_offered_by_what_the_agent_has() {
    let h = host(
        &[("plain", &bot(false)), ("tooled", &bot(true))],
        ServeOptions::default(),
    );
    let init = rpc(
        &h,
        "/plain/v1/mcp",
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
    );
    assert_eq!(init["serverInfo"]["name"], "plain");
    assert!(init["capabilities"]["tools"].is_object(), "{init}");
    assert_eq!(tool_names(&h, "/plain/v1/mcp"), ["ask", "check"]);
    assert_eq!(
        tool_names(&h, "/tooled/v1/mcp"),
        ["ask", "check", "call_tool"]
    );
    let info = h.send(Request::get("/tooled/v1/info")).json();
    assert_eq!(info["mcp"]["path"], "/tooled/v1/mcp");
    // The default chain (local_dev_strict) guards the endpoint: a foreign
    // Host or a forwarded request is refused before MCP sees it.
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let mcp_req =
        || Request::post("/plain/v1/mcp").header("accept", "application/json, text/event-stream");
    for r in [
        h.send(mcp_req().host("evil.example").json(&list)),
        h.send(
            mcp_req()
                .header("x-forwarded-for", "203.0.113.9")
                .json(&list),
        ),
    ] {
        assert_eq!(
            (r.status, r.error_code()),
            (401, "unauthorized".to_owned()),
            "{}",
            r.body
        );
    }
    // A tool the agent does not offer is an error result, not a crash.
    let (err, is_error) = call(&h, "/plain/v1/mcp", "call_tool", json!({"name": "echo"}));
    assert!(is_error);
    assert_eq!(err["error"]["code"], "unknown_tool");
}

#[test]
fn ask_runs_a_turn_in_an_mcp_session_and_check_waits_bounded() {
    let mut h = host(
        &[("bot", &bot(false))],
        ServeOptions {
            mcp_max_wait: Duration::from_secs(2),
            ..ServeOptions::default()
        },
    );
    let path = "/bot/v1/mcp";
    let (first, is_error) = call(&h, path, "ask", json!({"message": "hi"}));
    assert!(!is_error, "{first}");
    assert_eq!(first["status"], "completed");
    assert_eq!(first["reply"], "Hello over MCP.");
    let sid = first["sessionId"].as_str().unwrap().to_owned();

    // Listed like any other session, on the `mcp` channel, owned by the
    // same (loopback) principal.
    let list = h.send(Request::get("/bot/v1/sessions")).json();
    let listed = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sessionId"] == sid.as_str())
        .cloned()
        .unwrap();
    assert_eq!(listed["channel"], "mcp");

    // The second turn holds for 30 s: the wait is cut at the bound.
    let (slow, _) = call(
        &h,
        path,
        "ask",
        json!({"message": "slow one", "sessionId": sid}),
    );
    assert_eq!(slow["status"], "running", "{slow}");
    assert_eq!(slow["sessionId"], sid.as_str());
    assert_eq!(slow["reply"], Value::Null);
    let (poll, _) = call(
        &h,
        path,
        "check",
        json!({"sessionId": sid, "waitSeconds": 0}),
    );
    assert_eq!(poll["status"], "running");
    // An over-long wait is capped by the server's bound (2 s here).
    let (capped, _) = call(
        &h,
        path,
        "check",
        json!({"sessionId": sid, "waitSeconds": 600}),
    );
    assert_eq!(capped["status"], "running");

    // Stopping the turn settles the session; check reports the failure.
    let stop = h.send(Request::post(&format!("/bot/v1/session/{sid}/stop")));
    assert_eq!(stop.status, 200, "{}", stop.body);
    let (done, is_error) = call(
        &h,
        path,
        "check",
        json!({"sessionId": sid, "waitSeconds": 10}),
    );
    assert!(is_error);
    assert_eq!(done["status"], "failed");
    assert_eq!(done["reply"], "turn interrupted");

    // Errors are tool results with the HTTP API's error object.
    let (missing, is_error) = call(&h, path, "check", json!({"sessionId": "ses_nope"}));
    assert!(is_error);
    assert_eq!(missing["error"]["code"], "session_not_found");
    let (bad, is_error) = call(&h, path, "ask", json!({"sessionId": sid}));
    assert!(is_error);
    assert_eq!(bad["error"]["code"], "bad_request");
    let (empty, is_error) = call(&h, path, "ask", json!({"message": " "}));
    assert!(is_error);
    assert_eq!(empty["error"]["code"], "bad_request");

    // The session survives a restart: check still answers from its log,
    // and a follow-up runs (turn 2 of the script wraps to turn 0).
    h.restart(ServeOptions {
        mcp_max_wait: Duration::from_secs(20),
        ..ServeOptions::default()
    });
    let (after, _) = call(
        &h,
        path,
        "check",
        json!({"sessionId": sid, "waitSeconds": 0}),
    );
    assert_eq!(after["status"], "failed");
    let (again, is_error) = call(
        &h,
        path,
        "ask",
        json!({"message": "again", "sessionId": sid}),
    );
    assert!(!is_error, "{again}");
    assert_eq!(again["status"], "completed");
    assert_eq!(again["reply"], "Hello over MCP.");
}

#[test]
fn sessions_belong_to_the_calling_principal_and_http_sessions_are_off_limits() {
    let h = host(
        &[("bot", &bot(false))],
        ServeOptions {
            bearer_token: Some("s3cret".into()),
            ..ServeOptions::default()
        },
    );
    let path = "/bot/v1/mcp";
    let params = json!({"name": "ask", "arguments": {"message": "hi"}});
    let denied = rpc_raw(&h, path, "tools/call", params.clone(), &[]);
    assert_eq!(
        (denied.status, denied.error_code()),
        (401, "unauthorized".to_owned())
    );
    let wrong = rpc_raw(
        &h,
        path,
        "tools/call",
        params.clone(),
        &[("authorization", "Bearer nope")],
    );
    assert_eq!(wrong.status, 401);
    let ok = rpc_raw(
        &h,
        path,
        "tools/call",
        params,
        &[("authorization", "Bearer s3cret")],
    );
    assert_eq!(ok.status, 200, "{}", ok.body);
    let sid = ok.json()["result"]["structuredContent"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let list = h
        .send(Request::get("/bot/v1/sessions").bearer("s3cret"))
        .json();
    assert_eq!(list["sessions"][0]["sessionId"], sid.as_str());
    assert_eq!(list["sessions"][0]["channel"], "mcp");

    // An HTTP-channel session cannot be driven through `ask`.
    let created = h.send(
        Request::post("/bot/v1/session")
            .bearer("s3cret")
            .json(&json!({"message": "hi"})),
    );
    let http_sid = created.json()["sessionId"].as_str().unwrap().to_owned();
    let r = rpc_raw(
        &h,
        path,
        "tools/call",
        json!({"name": "ask", "arguments": {"message": "x", "sessionId": http_sid}}),
        &[("authorization", "Bearer s3cret")],
    );
    let v = r.json()["result"].clone();
    assert_eq!(v["isError"], true);
    assert_eq!(v["structuredContent"]["error"]["code"], "bad_request");
}

#[test]
fn call_tool_answers_the_http_envelope_and_its_errors() {
    let h = host(&[("bot", &bot(true))], ServeOptions::default());
    let path = "/bot/v1/mcp";
    let (ok, is_error) = call(
        &h,
        path,
        "call_tool",
        json!({"name": "echo", "input": {"text": "hey"}}),
    );
    assert!(!is_error, "{ok}");
    assert_eq!(ok["ok"], true);
    assert_eq!(ok["toolName"], "echo");
    assert_eq!(ok["isError"], false);
    assert_eq!(ok["result"], json!({"echo": {"text": "hey"}}));
    assert!(ok["callId"].as_str().unwrap().starts_with("tool_echo_"));
    // The same call over the plain route answers the same shape.
    let plain = h
        .send(Request::post("/bot/v1/tools/echo").json(&json!({"input": {"text": "hey"}})))
        .json();
    assert_eq!(plain["result"], ok["result"]);

    let (invalid, is_error) = call(&h, path, "call_tool", json!({"name": "echo", "input": {}}));
    assert!(is_error);
    assert_eq!(invalid["error"]["code"], "invalid_input");
    assert!(invalid["error"]["errors"].is_array(), "{invalid}");
    let (unknown, is_error) = call(&h, path, "call_tool", json!({"name": "nope"}));
    assert!(is_error);
    assert_eq!(unknown["error"]["code"], "unknown_tool");
    assert_eq!(unknown["error"]["available"], json!(["echo"]));
}

#[test]
fn requests_past_the_hop_limit_are_refused() {
    let h = host(
        &[("bot", &bot(false))],
        ServeOptions {
            max_hops: 2,
            ..ServeOptions::default()
        },
    );
    let params = json!({"name": "ask", "arguments": {"message": "hi"}});
    let within = rpc_raw(
        &h,
        "/bot/v1/mcp",
        "tools/call",
        params.clone(),
        &[("x-agentkit-hops", "2")],
    );
    assert_eq!(
        within.json()["result"]["structuredContent"]["status"],
        "completed"
    );
    let past = rpc_raw(
        &h,
        "/bot/v1/mcp",
        "tools/call",
        params,
        &[("x-agentkit-hops", "3")],
    );
    let v = past.json()["result"].clone();
    assert_eq!(v["isError"], true);
    assert_eq!(v["structuredContent"]["error"]["code"], "hop_limit");
    assert!(
        v["structuredContent"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("limit is 2"),
        "{v}"
    );
}

/// The official MCP Python SDK's streamable-HTTP client against a real
/// server: initialize, list tools, `ask`, `check`, `call_tool`.
#[test]
#[allow(clippy::print_stderr)]
fn the_official_python_sdk_drives_ask_check_and_call_tool() {
    let bin = match agentkit_test_support::pyenv::pyenv_bin("python MCP client") {
        Ok(bin) => bin,
        Err(skip) => return eprintln!("{skip}"),
    };
    let h = host(
        &[("bot", &bot(true))],
        ServeOptions {
            mcp_max_wait: Duration::from_secs(2),
            ..ServeOptions::default()
        },
    );
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/mcp_client.py");
    let url = format!("http://{}/bot/v1/mcp", h.addr());
    let out = std::process::Command::new(bin.join("python"))
        .arg(&script)
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["serverName"], "bot");
    assert_eq!(v["tools"], json!(["ask", "check", "call_tool"]));
    assert_eq!(v["ask"]["isError"], false);
    assert_eq!(v["ask"]["content"]["status"], "completed");
    assert_eq!(v["ask"]["content"]["reply"], "Hello over MCP.");
    let sid = v["ask"]["content"]["sessionId"].as_str().unwrap();
    assert_eq!(v["checkDone"]["content"]["status"], "completed");
    assert_eq!(v["checkDone"]["content"]["sessionId"], sid);
    assert_eq!(v["askSlow"]["content"]["status"], "running");
    assert_eq!(v["checkRunning"]["content"]["status"], "running");
    assert_eq!(v["callTool"]["isError"], false);
    assert_eq!(
        v["callTool"]["content"]["result"],
        json!({"echo": {"text": "py"}})
    );
    assert_eq!(v["callToolInvalid"]["isError"], true);
    assert_eq!(
        v["callToolInvalid"]["content"]["error"]["code"],
        "invalid_input"
    );
    // The session the SDK started is an ordinary `mcp` session.
    let events = h.send(Request::get(&format!("/bot/v1/session/{sid}/events")));
    assert_eq!(events.status, 200);
    assert!(events.body.contains("hello from python"));
}

/// `mcp-server-time` (a real third-party MCP server from PyPI) as a stdio
/// connection, reached by host code through `host.mcp`.
#[test]
#[allow(clippy::print_stderr)]
fn host_code_calls_a_real_stdio_server_through_host_mcp() {
    let bin = match agentkit_test_support::pyenv::pyenv_bin("stdio mcp-server-time") {
        Ok(bin) => bin,
        Err(skip) => return eprintln!("{skip}"),
    };
    let conn = format!(
        "description = \"Clock.\"\ncommand = \"{}\"\nargs = [\"--local-timezone\", \"UTC\"]\n",
        bin.join("mcp-server-time").display()
    );
    let mut files = bot(false);
    files.push(("mcp-connections/time.toml", &conn));
    let h = host(&[("bot", &files)], ServeOptions::default());
    let info = h.send(Request::get("/bot/v1/info")).json();
    assert_eq!(info["mcp"]["connections"][0]["name"], "time");
    assert_eq!(info["mcp"]["connections"][0]["transport"], "stdio");
    assert_eq!(info["mcp"]["connections"][0]["state"], "idle");

    let handle = h.handle.as_ref().unwrap();
    let mcp = handle.mcp("bot").unwrap();
    assert_eq!(mcp.names(), ["time"]);
    let tools = h.rt.block_on(mcp.list_tools("time", 0)).unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"get_current_time"), "{names:?}");
    let out =
        h.rt.block_on(mcp.call_tool(
            "time",
            "get_current_time",
            json!({"timezone": "Europe/Paris"}),
            0,
        ))
        .unwrap();
    assert!(!out.is_error, "{out:?}");
    let text = out.to_json().to_string();
    assert!(text.contains("Europe/Paris"), "{text}");
    // A bad argument is the server's own error result, not a crash.
    let bad = h.rt.block_on(mcp.call_tool(
        "time",
        "get_current_time",
        json!({"timezone": "Mars/Olympus"}),
        0,
    ));
    assert!(bad.map(|r| r.is_error).unwrap_or(true));

    let info = h.send(Request::get("/bot/v1/info")).json();
    assert_eq!(
        info["mcp"]["connections"][0]["state"], "connected",
        "{info}"
    );
    assert_eq!(info["mcp"]["connections"][0]["opens"], 1);
    assert!(handle.mcp("nope").is_err());
}

/// The first MCP connection's entry in `GET /bot/v1/info`.
fn conn_status(h: &Host) -> Value {
    h.send(Request::get("/bot/v1/info")).json()["mcp"]["connections"][0].clone()
}

/// Polls the connection's status (never calling it) until `done` holds.
fn wait_status(h: &Host, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let status = conn_status(h);
        if done(&status) {
            return status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: still {status}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A stdio server that dies is started again in the background, with no
/// call to trigger it: killed from outside, it comes back at once;
/// dying again soon after, it waits out a backoff (visible as
/// `restarting` in `/v1/info`) and comes back again. Shutdown leaves no
/// process behind.
#[test]
#[allow(clippy::print_stderr)]
fn a_stdio_server_that_dies_is_restarted_in_the_background() {
    let bin = match agentkit_test_support::pyenv::pyenv_bin("stdio restart") {
        Ok(bin) => bin,
        Err(skip) => return eprintln!("{skip}"),
    };
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/flaky_server.py");
    let conn = format!(
        "command = \"{}\"\nargs = [\"{}\"]\n",
        bin.join("python").display(),
        script.display()
    );
    let mut files = bot(false);
    files.push(("mcp-connections/flaky.toml", &conn));
    let options = ServeOptions {
        mcp_clients: agentkit::mcp::ClientOptions {
            // A second death within the stable period waits 1.5–3 s.
            backoff: Duration::from_secs(3),
            stable_after: Duration::from_secs(600),
            ..Default::default()
        },
        ..ServeOptions::default()
    };
    let mut h = host(&[("bot", &files)], options);
    let mcp = h.handle.as_ref().unwrap().mcp("bot").unwrap().clone();
    // MCPServer answers `{"result": "<pid>"}` as structured content.
    let pid = |h: &Host| -> u64 {
        let r =
            h.rt.block_on(mcp.call_tool("flaky", "pid", json!({}), 0))
                .unwrap();
        let out = r.model_output();
        out["result"]
            .as_str()
            .or(out.as_str())
            .unwrap()
            .parse()
            .unwrap()
    };
    let first = pid(&h);
    let status = conn_status(&h);
    assert_eq!(status["state"], "connected", "{status}");
    assert_eq!(status["pid"], first, "{status}");

    let killed = std::process::Command::new("kill")
        .args(["-9", &first.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let back = wait_status(&h, "restart after kill", |s| {
        s["opens"] == 2 && s["state"] == "connected"
    });
    assert_eq!(back["exits"], 1, "{back}");
    assert!(
        back["lastExit"]
            .as_str()
            .unwrap()
            .contains("killed by signal 9"),
        "{back}"
    );
    let second = back["pid"].as_u64().unwrap();
    assert_ne!(second, first);
    assert_eq!(pid(&h), second);

    // A second death soon after: the restart backs off.
    let died = h.rt.block_on(mcp.call_tool("flaky", "die", json!({}), 0));
    assert!(died.is_err(), "{died:?}");
    let waiting = wait_status(&h, "backing off", |s| {
        s["state"] == "restarting" || s["opens"] == 3
    });
    assert_eq!(waiting["state"], "restarting", "{waiting}");
    assert_eq!(waiting["attempt"], 2, "{waiting}");
    assert!(
        waiting["error"]
            .as_str()
            .unwrap()
            .contains("exited with status 3"),
        "{waiting}"
    );
    assert!(waiting["retryInMs"].as_u64().unwrap() <= 3000, "{waiting}");
    // A call meanwhile fails at once, saying when the next attempt is.
    let early =
        h.rt.block_on(mcp.call_tool("flaky", "pid", json!({}), 0))
            .unwrap_err()
            .to_string();
    assert!(early.contains("next attempt in"), "{early}");
    let again = wait_status(&h, "restart after backoff", |s| {
        s["opens"] == 3 && s["state"] == "connected"
    });
    let third = again["pid"].as_u64().unwrap();
    assert_eq!(pid(&h), third);

    // Shutdown stops the child and reaps it.
    let handle = h.handle.take().unwrap();
    h.rt.block_on(handle.close());
    assert!(
        !Path::new(&format!("/proc/{third}")).exists(),
        "the stdio server outlived the server"
    );
    assert_eq!(mcp.status()[0].state, "closed");
}

/// A stdio server that always dies at once is retried in the background
/// with bounded backoff, and its status says why it fails.
#[test]
fn a_stdio_server_that_always_dies_backs_off() {
    let conn = "command = \"sh\"\nargs = [\"-c\", \"echo boom >&2; exit 3\"]\n";
    let mut files = bot(false);
    files.push(("mcp-connections/broken.toml", conn));
    let options = ServeOptions {
        mcp_clients: agentkit::mcp::ClientOptions {
            backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(400),
            ..Default::default()
        },
        ..ServeOptions::default()
    };
    let h = host(&[("bot", &files)], options);
    assert_eq!(conn_status(&h)["state"], "idle");
    let mcp = h.handle.as_ref().unwrap().mcp("bot").unwrap();
    let first = h.rt.block_on(mcp.list_tools("broken", 0)).unwrap_err();
    assert!(
        matches!(first, agentkit::mcp::ClientError::Unavailable { .. }),
        "{first:?}"
    );
    // No call from here on: the supervisor keeps trying by itself, with
    // pauses of 50–100, 100–200, then 200–400 ms (a tight loop would make
    // hundreds of attempts).
    std::thread::sleep(Duration::from_secs(3));
    // Read between two attempts (during one, no retry is scheduled: on a
    // loaded machine starting `sh` takes a while).
    let status = wait_status(&h, "a pause between attempts", |s| s["retryInMs"].is_u64());
    assert_eq!(status["state"], "restarting", "{status}");
    assert_eq!(status["opens"], 0, "{status}");
    let attempts = status["attempt"].as_u64().unwrap();
    assert!((4..=20).contains(&attempts), "{status}");
    let error = status["error"].as_str().unwrap();
    assert!(
        error.contains("exited with status 3") && error.contains("boom"),
        "{status}"
    );
    assert!(status["retryInMs"].as_u64().unwrap() <= 400, "{status}");
    std::thread::sleep(Duration::from_secs(1));
    let later = conn_status(&h)["attempt"].as_u64().unwrap();
    assert!(
        later > attempts && later <= attempts + 6,
        "{attempts} then {later}"
    );
}

/// A server tool reaches the host bridge: the key-value store (persisted
/// in SQLite across a restart), MCP connections, and a 401 with a wrong
/// token; one agent's token does not open another's store.
#[test]
fn server_tools_use_the_host_bridge() {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/host_tool.py");
    let tool = format!(
        "description = \"Host bridge probe.\"\ncommand = [\"python3\", \"{}\"]\nsandbox = {{ read = [\"{}\"] }}\n[input_schema]\ntype = \"object\"\nrequired = [\"op\"]\n",
        script.display(),
        // The probe lives outside the tool's folder: the sandbox must
        // be told it may read it.
        script.parent().unwrap().display()
    );
    let mut a = bot(false);
    a.push(("tools/host.toml", &tool));
    let mut b = bot(false);
    b.push(("tools/host.toml", &tool));
    let mut h = host(&[("a", &a), ("b", &b)], ServeOptions::default());
    let call = |h: &Host, slug: &str, input: Value| -> Value {
        let r =
            h.send(Request::post(&format!("/{slug}/v1/tools/host")).json(&json!({"input": input})));
        assert_eq!(r.status, 200, "{}", r.body);
        let v = r.json();
        assert_eq!(v["isError"], false, "{v}");
        v["result"].clone()
    };
    let put = call(
        &h,
        "a",
        json!({"op": "remember", "key": "notes/1", "value": {"text": "hi"}}),
    );
    assert_eq!(put["status"], 200, "{put}");
    call(
        &h,
        "a",
        json!({"op": "remember", "key": "notes/2", "value": 2, "ttlSeconds": 3600}),
    );
    call(
        &h,
        "a",
        json!({"op": "remember", "key": "other", "value": true}),
    );
    let got = call(&h, "a", json!({"op": "recall", "key": "notes/1"}));
    assert_eq!(got["body"]["entry"]["value"], json!({"text": "hi"}));
    let listed = call(&h, "a", json!({"op": "list", "prefix": "notes/"}));
    let keys: Vec<&str> = listed["body"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["notes/1", "notes/2"]);
    assert!(listed["body"]["entries"][1]["expiresAt"].is_i64());
    // In pages that follow the cursor, in key order, none twice.
    let paged = call(&h, "a", json!({"op": "list_pages", "limit": 2}));
    assert_eq!(
        paged["body"]["pages"],
        json!([["notes/1", "notes/2"], ["other"]]),
        "{paged}"
    );
    // Agent b has its own store.
    let other = call(&h, "b", json!({"op": "recall", "key": "notes/1"}));
    assert_eq!(
        (
            other["status"].as_i64(),
            other["body"]["error"]["code"].as_str()
        ),
        (Some(404), Some("not_found"))
    );
    let denied = call(&h, "a", json!({"op": "badtoken"}));
    assert_eq!(denied["status"], 401);
    assert_eq!(denied["body"]["error"]["code"], "unauthorized");
    let reminders = call(&h, "a", json!({"op": "reminders"}));
    assert_eq!(reminders["status"], 400, "{reminders}");
    let created = call(
        &h,
        "a",
        json!({"op": "reminders", "reminder": {"purpose": "ci_recheck", "channelId": "intake",
            "continuationToken": "pr:1", "delay": "20m", "prompt": "Re-check CI", "until": "CI is green"}}),
    );
    assert_eq!(created["status"], 200, "{created}");
    assert_eq!(created["body"]["reminder"]["status"], "armed");
    let listed = call(&h, "a", json!({"op": "reminders_list"}));
    assert_eq!(
        listed["body"]["reminders"][0]["id"],
        created["body"]["reminder"]["id"]
    );
    call(
        &h,
        "a",
        json!({"op": "reminders", "reminder": {"purpose": "ci_recheck", "channelId": "intake",
            "continuationToken": "pr:2", "delay": "30m", "prompt": "Re-check CI again"}}),
    );
    let paged = call(
        &h,
        "a",
        json!({"op": "list_pages", "limit": 1, "path": "/v1/reminders"}),
    );
    let pages = paged["body"]["pages"].as_array().unwrap();
    assert_eq!(pages.len(), 2, "{paged}");
    assert_eq!(
        pages[1][0], created["body"]["reminder"]["id"],
        "oldest last"
    );
    // Agent b sees none of a's reminders.
    let other = call(&h, "b", json!({"op": "reminders_list"}));
    assert_eq!(other["body"]["reminders"], json!([]));
    let conns = call(&h, "a", json!({"op": "connections"}));
    assert_eq!(conns["body"]["names"], json!([]));
    let missing = call(
        &h,
        "a",
        json!({"op": "mcp", "connection": "nope", "tool": "x"}),
    );
    assert_eq!(missing["status"], 404);
    assert_eq!(missing["body"]["error"]["code"], "unknown_connection");

    // The store is SQLite in the agent's state folder and survives a
    // restart (a new token: the old one is useless).
    assert!(h.dir.path().join("state/a/agentkit.sqlite").is_file());
    let forgot = call(&h, "a", json!({"op": "forget", "key": "other"}));
    assert_eq!(forgot["body"]["deleted"], true);
    h.restart(ServeOptions::default());
    let again = call(&h, "a", json!({"op": "recall", "key": "notes/1"}));
    assert_eq!(again["body"]["entry"]["value"], json!({"text": "hi"}));
    let gone = call(&h, "a", json!({"op": "recall", "key": "other"}));
    assert_eq!(gone["status"], 404);
}

/// Through the bridge, a server tool calls a real stdio MCP server.
#[test]
#[allow(clippy::print_stderr)]
fn server_tools_call_mcp_connections_through_the_bridge() {
    let bin = match agentkit_test_support::pyenv::pyenv_bin("bridge MCP call") {
        Ok(bin) => bin,
        Err(skip) => return eprintln!("{skip}"),
    };
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/host_tool.py");
    let tool = format!(
        "description = \"Host bridge probe.\"\ncommand = [\"python3\", \"{}\"]\nsandbox = {{ read = [\"{}\"] }}\n",
        script.display(),
        // The probe lives outside the tool's folder: the sandbox must
        // be told it may read it.
        script.parent().unwrap().display()
    );
    let conn = format!(
        "command = \"{}\"\nargs = [\"--local-timezone\", \"UTC\"]\n",
        bin.join("mcp-server-time").display()
    );
    let mut files = bot(false);
    files.push(("tools/host.toml", &tool));
    files.push(("mcp-connections/time.toml", &conn));
    let h = host(&[("bot", &files)], ServeOptions::default());
    let r = h
        .send(Request::post("/bot/v1/tools/host").json(&json!({"input": {
            "op": "mcp", "connection": "time", "tool": "get_current_time",
            "arguments": {"timezone": "Asia/Tokyo"}
        }})))
        .json();
    assert_eq!(r["result"]["status"], 200, "{r}");
    let result = &r["result"]["body"]["result"];
    assert_eq!(result["isError"], false, "{r}");
    assert!(result.to_string().contains("Asia/Tokyo"), "{r}");
}

/// Events of every session of agent `slug` (as the loopback principal).
fn all_events(h: &Host, slug: &str) -> Vec<Vec<Value>> {
    let list = h.send(Request::get(&format!("/{slug}/v1/sessions"))).json();
    list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let id = s["sessionId"].as_str().unwrap();
            h.send(Request::get(&format!("/{slug}/v1/session/{id}/events")))
                .body
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        })
        .collect()
}

fn results_of<'a>(events: &'a [Value], tool: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["type"] == "action.result" && e["data"]["toolName"] == tool)
        .collect()
}

/// The model (scripted) calls a tool of a real stdio MCP server,
/// `mcp-server-time`, as `time__get_current_time`.
#[test]
#[allow(clippy::print_stderr)]
fn the_model_calls_a_stdio_connection_tool() {
    let bin = match agentkit_test_support::pyenv::pyenv_bin("model calls mcp-server-time") {
        Ok(bin) => bin,
        Err(skip) => return eprintln!("{skip}"),
    };
    let conn = format!(
        "command = \"{}\"\nargs = [\"--local-timezone\", \"UTC\"]\n",
        bin.join("mcp-server-time").display()
    );
    let script = r#"{"turns": [{"steps": [
        {"toolCalls": [{"name": "time__get_current_time", "input": {"timezone": "America/New_York"}}]},
        {"text": "It is late."}
    ]}]}"#;
    let files = vec![
        ("agent.toml", "model = \"scripted:script.json\"\n"),
        ("script.json", script),
        ("instructions.md", "Tell the time.\n"),
        ("mcp-connections/time.toml", conn.as_str()),
    ];
    let h = host(&[("clock", &files)], ServeOptions::default());
    let (reply, _) = call(&h, "/clock/v1/mcp", "ask", json!({"message": "time?"}));
    assert_eq!(reply["status"], "completed", "{reply}");
    assert_eq!(reply["reply"], "It is late.");
    let sessions = all_events(&h, "clock");
    let results = results_of(&sessions[0], "time__get_current_time");
    assert_eq!(results.len(), 1, "{:?}", sessions[0]);
    assert_eq!(results[0]["data"]["isError"], false, "{}", results[0]);
    assert!(
        results[0]["data"]["output"]
            .to_string()
            .contains("America/New_York"),
        "{}",
        results[0]
    );
}

/// The bundled fixtures: `concierge` delegates to `weather-agent` through
/// its peer connection `weather`, end to end over loopback.
#[test]
fn the_concierge_delegates_to_the_weather_agent() {
    let state = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let handle = rt
        .block_on(agentkit::serve(
            &agentkit_test_support::fixtures_dir().join("agents"),
            ServeOptions {
                port: 0,
                state_root: Some(state.path().to_path_buf()),
                // The weather agent's `alerts` channel needs its secret.
                env: agentkit::EnvLookup(std::sync::Arc::new(|name| {
                    (name == "ALERTS_TOKEN").then(|| "alerts-secret".to_owned())
                })),
                ..ServeOptions::default()
            },
        ))
        .unwrap();
    let h = Host {
        dir: state,
        rt,
        handle: Some(handle),
    };
    let created = h.send(
        Request::post("/concierge/v1/session")
            .json(&json!({"message": "What's the weather in Paris?"})),
    );
    assert_eq!(created.status, 200, "{}", created.body);
    let id = created.json()["sessionId"].as_str().unwrap().to_owned();
    let mut lines = Request::get(&format!("/concierge/v1/session/{id}/stream"))
        .stream(h.addr())
        .unwrap();
    let events = lines.until("session.waiting").unwrap();
    // The `test` model calls every tool once, the peer's `ask` included.
    let asked = results_of(&events, "weather__ask");
    assert_eq!(asked.len(), 1, "{events:?}");
    let out = &asked[0]["data"]["output"];
    assert_eq!(asked[0]["data"]["isError"], false, "{out}");
    // The weather agent's offline model also calls `post_alert`, which
    // needs a human: `ask` says so instead of waiting out its deadline.
    assert_eq!(out["status"], "waiting_approval", "{out}");
    assert!(
        out["reply"].as_str().unwrap().contains("`post_alert`"),
        "{out}"
    );
    let weather_session = out["sessionId"].as_str().unwrap();
    // The weather agent ran the turn in its own `mcp` session, with its
    // own tools.
    let list = h.send(Request::get("/weather-agent/v1/sessions")).json();
    let listed = &list["sessions"][0];
    assert_eq!(listed["sessionId"], weather_session);
    assert_eq!(listed["channel"], "mcp");
    let theirs = h
        .send(Request::get(&format!(
            "/weather-agent/v1/session/{weather_session}/events"
        )))
        .body;
    assert!(theirs.contains("\"toolName\":\"get_weather\""), "{theirs}");
    // Approving it (as the peer's caller: the concierge reached the weather
    // agent as the same loopback principal) lets the weather turn finish.
    let approvals = h
        .send(Request::get(&format!(
            "/weather-agent/v1/session/{weather_session}/approvals"
        )))
        .json();
    let call = approvals["approvals"][0]["callId"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = h.send(
        Request::post(&format!(
            "/weather-agent/v1/session/{weather_session}/approvals/{call}"
        ))
        .json(&json!({"decision": "approve"})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let done = Request::get(&format!(
        "/weather-agent/v1/session/{weather_session}/stream"
    ))
    .stream(h.addr())
    .unwrap()
    .until("turn.completed")
    .unwrap();
    assert!(done.iter().any(|e| e["type"] == "action.result"
        && e["data"]["toolName"] == "post_alert"
        && e["data"]["isError"] == false));
    let info = h.send(Request::get("/concierge/v1/info")).json();
    let conn = &info["mcp"]["connections"][0];
    assert_eq!(
        (
            conn["name"].as_str(),
            conn["transport"].as_str(),
            conn["state"].as_str()
        ),
        (Some("weather"), Some("peer"), Some("connected"))
    );
    // Peers speak MCP 2026-07-28 to each other.
    assert_eq!(conn["protocol"], "2026-07-28", "{conn}");
}

/// Two agents that always delegate to each other: the hop limit stops the
/// chain, and every level still answers.
#[test]
fn a_two_agent_cycle_is_stopped_by_the_hop_limit() {
    let script = |peer: &str| {
        format!(
            r#"{{"turns": [{{"steps": [
                {{"toolCalls": [{{"name": "{peer}__ask", "input": {{"message": "ping"}}}}]}},
                {{"text": "pong"}}
            ]}}]}}"#
        )
    };
    let (sa, sb) = (script("b"), script("a"));
    let agent = |script: &'static str, peer: &'static str| -> Vec<(&'static str, &'static str)> {
        vec![
            ("agent.toml", "model = \"scripted:script.json\"\n"),
            ("script.json", script),
            ("instructions.md", "Always delegate.\n"),
            ("mcp-connections/peer.toml", peer),
        ]
    };
    let sa: &'static str = Box::leak(sa.replace("b__ask", "peer__ask").into_boxed_str());
    let sb: &'static str = Box::leak(sb.replace("a__ask", "peer__ask").into_boxed_str());
    let h = host(
        &[
            ("a", &agent(sa, "agent = \"b\"\n")),
            ("b", &agent(sb, "agent = \"a\"\n")),
        ],
        ServeOptions::default(),
    );
    let (reply, is_error) = call(&h, "/a/v1/mcp", "ask", json!({"message": "start"}));
    assert!(!is_error, "{reply}");
    assert_eq!(reply["status"], "completed");
    assert_eq!(reply["reply"], "pong");
    // a (depth 0) → b (1) → a (2) → b (3) → a (4) → b refused (5 > 4).
    let (a, b) = (all_events(&h, "a"), all_events(&h, "b"));
    assert_eq!((a.len(), b.len()), (3, 2));
    let refusals: Vec<&Value> = a
        .iter()
        .chain(b.iter())
        .flat_map(|events| results_of(events, "peer__ask"))
        .filter(|r| r["data"]["output"].to_string().contains("hop_limit"))
        .collect();
    assert_eq!(refusals.len(), 1, "{a:?} {b:?}");
    assert_eq!(refusals[0]["data"]["isError"], true);
    assert!(
        refusals[0]["data"]["output"]
            .to_string()
            .contains("limit is 4"),
        "{}",
        refusals[0]
    );
}

/// The same cycle driven by a subprocess tool that calls its peer through
/// the host bridge, sending nothing but the credential it was given: the
/// per-call credential carries the session's depth, so the hop limit
/// still stops the chain. The credential dies with its call.
#[test]
fn a_cycle_through_subprocess_tools_on_the_bridge_is_stopped_by_the_hop_limit() {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/host_tool.py");
    let tool = format!(
        "description = \"Host bridge probe.\"\ncommand = [\"python3\", \"{}\"]\nsandbox = {{ read = [\"{}\"] }}\ntimeout = \"120s\"\n[input_schema]\ntype = \"object\"\nrequired = [\"op\"]\n",
        script.display(),
        // The probe lives outside the tool's folder: the sandbox must
        // be told it may read it.
        script.parent().unwrap().display()
    );
    let model = r#"{"turns": [{"steps": [
        {"toolCalls": [{"name": "host", "input": {"op": "ask_peer"}}]},
        {"text": "pong"}
    ]}]}"#;
    let agent = |peer: &'static str| -> Vec<(&'static str, String)> {
        vec![
            ("agent.toml", "model = \"scripted:script.json\"\n".into()),
            ("script.json", model.into()),
            ("instructions.md", "Always delegate.\n".into()),
            ("tools/host.toml", tool.clone()),
            ("mcp-connections/peer.toml", peer.into()),
        ]
    };
    let (a, b) = (agent("agent = \"b\"\n"), agent("agent = \"a\"\n"));
    let borrow = |files: &'static [(&'static str, String)]| -> Vec<(&'static str, &'static str)> {
        files.iter().map(|(k, v)| (*k, v.as_str())).collect()
    };
    let (a, b) = (borrow(Vec::leak(a)), borrow(Vec::leak(b)));
    let h = host(&[("a", &a), ("b", &b)], ServeOptions::default());
    let (reply, is_error) = call(&h, "/a/v1/mcp", "ask", json!({"message": "start"}));
    assert!(!is_error, "{reply}");
    assert_eq!(reply["status"], "completed", "{reply}");
    // a (depth 0) → b (1) → a (2) → b (3) → a (4) → b refused (5 > 4).
    let (sa, sb) = (all_events(&h, "a"), all_events(&h, "b"));
    assert_eq!((sa.len(), sb.len()), (3, 2));
    let refusals: Vec<&Value> = sa
        .iter()
        .chain(sb.iter())
        .flat_map(|events| results_of(events, "host"))
        .filter(|r| r["data"]["output"].to_string().contains("hop_limit"))
        .collect();
    assert_eq!(refusals.len(), 1, "{sa:?} {sb:?}");
    let body = &refusals[0]["data"]["output"]["body"];
    assert_eq!(body["result"]["isError"], true, "{body}");
    assert!(body.to_string().contains("limit is 4"), "{body}");

    // A call's credential works during the call only.
    let r = h.send(Request::post("/a/v1/tools/host").json(&json!({"input": {"op": "credential"}})));
    let out = r.json()["result"]["body"].clone();
    assert_eq!(out["works"], 200, "{out}");
    let token = out["token"].as_str().unwrap();
    assert!(token.starts_with("akc."), "not a per-call credential");
    let bridge: SocketAddr = out["url"]
        .as_str()
        .unwrap()
        .trim_start_matches("http://")
        .parse()
        .unwrap();
    let after = Request::get("/v1/kv?prefix=")
        .bearer(token)
        .send(bridge)
        .unwrap();
    assert_eq!(after.status, 401, "{}", after.body);
}

/// A `url` connection with a `${VAR}` header: one host's agent uses
/// another host's agent over streamable HTTP, through its bearer chain.
#[test]
fn a_url_connection_sends_its_resolved_headers() {
    let remote = host(
        &[("remote", &bot(true))],
        ServeOptions {
            bearer_token: Some("remote-secret".into()),
            ..ServeOptions::default()
        },
    );
    let url = format!("http://{}/remote/v1/mcp", remote.addr());
    let conn =
        format!("url = \"{url}\"\nheaders = {{ Authorization = \"Bearer ${{REMOTE_TOKEN}}\" }}\n");
    let bad_conn = format!("url = \"{url}\"\n");
    let mut files = bot(false);
    files.push(("mcp-connections/remote.toml", &conn));
    files.push(("mcp-connections/anonymous.toml", &bad_conn));
    let local = host(
        &[("local", &files)],
        ServeOptions {
            env: agentkit::EnvLookup(std::sync::Arc::new(|name| {
                (name == "REMOTE_TOKEN").then(|| "remote-secret".to_owned())
            })),
            ..ServeOptions::default()
        },
    );
    let mcp = local.handle.as_ref().unwrap().mcp("local").unwrap();
    let tools = local.rt.block_on(mcp.list_tools("remote", 0)).unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["ask", "check", "call_tool"]);
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
    // Without the header the remote chain refuses: the connection reports
    // the failure and backs off.
    let refused = local.rt.block_on(mcp.list_tools("anonymous", 0));
    assert!(
        matches!(refused, Err(agentkit::mcp::ClientError::Unavailable { .. })),
        "{refused:?}"
    );
    let status = mcp.status();
    let anon = status.iter().find(|s| s.name == "anonymous").unwrap();
    assert_eq!((anon.transport, anon.state), ("http", "error"));
    let ok = status.iter().find(|s| s.name == "remote").unwrap();
    assert_eq!((ok.state, ok.tools), ("connected", Some(3)));
}

/// With `--bearer-token`, peer calls carry the token and pass the peer's
/// chain.
#[test]
fn peer_calls_carry_the_bearer_token() {
    let a_script = r#"{"turns": [{"steps": [
        {"toolCalls": [{"name": "peer__ask", "input": {"message": "hello b"}}]},
        {"text": "a is done"}
    ]}]}"#;
    let a = vec![
        ("agent.toml", "model = \"scripted:script.json\"\n"),
        ("script.json", a_script),
        ("instructions.md", "Delegate.\n"),
        ("mcp-connections/peer.toml", "agent = \"b\"\n"),
    ];
    let h = host(
        &[("a", &a), ("b", &bot(false))],
        ServeOptions {
            bearer_token: Some("tok".into()),
            ..ServeOptions::default()
        },
    );
    let r = rpc_raw(
        &h,
        "/a/v1/mcp",
        "tools/call",
        json!({"name": "ask", "arguments": {"message": "go"}}),
        &[("authorization", "Bearer tok")],
    );
    let out = r.json()["result"]["structuredContent"].clone();
    assert_eq!(out["status"], "completed", "{out}");
    let list = h.send(Request::get("/a/v1/sessions").bearer("tok")).json();
    let id = list["sessions"][0]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let events: Vec<Value> = h
        .send(Request::get(&format!("/a/v1/session/{id}/events")).bearer("tok"))
        .body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let asked = results_of(&events, "peer__ask");
    assert_eq!(asked.len(), 1);
    assert_eq!(
        asked[0]["data"]["output"]["status"], "completed",
        "{}",
        asked[0]
    );
    assert_eq!(asked[0]["data"]["output"]["reply"], "Hello over MCP.");
    // b's session belongs to the bearer principal, like any caller's.
    let theirs = h.send(Request::get("/b/v1/sessions").bearer("tok")).json();
    assert_eq!(theirs["sessions"][0]["channel"], "mcp");
}

/// `ask` with `outputSchema`: the fresh session's replies must match it
/// (the reply is the JSON value), and a model that never matches fails
/// the turn.
#[test]
fn ask_takes_an_output_schema_for_its_session() {
    let files: Vec<(&str, &str)> = vec![
        ("agent.toml", "model = \"scripted:script.json\"\n"),
        (
            "script.json",
            r#"{"turns": [{"steps": [{"text": "{\"answer\": 42}"}]}]}"#,
        ),
        ("instructions.md", "You answer in JSON.\n"),
    ];
    let h = host(&[("bot", &files)], ServeOptions::default());
    let path = "/bot/v1/mcp";
    let schema = json!({"type": "object", "required": ["answer"], "properties": {"answer": {"type": "integer"}}});
    let (ok, is_error) = call(
        &h,
        path,
        "ask",
        json!({"message": "?", "outputSchema": schema}),
    );
    assert!(!is_error, "{ok}");
    assert_eq!(ok["status"], "completed", "{ok}");
    let sid = ok["sessionId"].as_str().unwrap();
    let events = h.send(Request::get(&format!("/bot/v1/session/{sid}/events")));
    let done = events
        .body
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["type"] == "turn.completed")
        .unwrap();
    assert_eq!(done["data"]["output"], json!({"answer": 42}), "{done}");
    // A schema the script never matches: three attempts, then a failure.
    let strict = json!({"type": "object", "required": ["city"]});
    let (failed, _) = call(
        &h,
        path,
        "ask",
        json!({"message": "?", "outputSchema": strict}),
    );
    assert_eq!(failed["status"], "failed", "{failed}");
    // Not a schema: refused before a session starts.
    let (bad, is_error) = call(
        &h,
        path,
        "ask",
        json!({"message": "?", "outputSchema": {"type": 7}}),
    );
    assert!(is_error, "{bad}");
}

#[test]
fn malformed_requests_get_json_rpc_errors_and_batches_are_answered_under_2025_03_26() {
    let h = host(&[("plain", &bot(false))], ServeOptions::default());
    let post = |body: &[u8], version: Option<&str>| {
        let mut req = Request::post("/plain/v1/mcp")
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .raw_body(body);
        if let Some(v) = version {
            req = req.header("mcp-protocol-version", v);
        }
        h.send(req)
    };
    let error = |r: &Response| -> (u16, Value, Value) {
        assert_eq!(
            r.header("content-type"),
            Some("application/json"),
            "{}",
            r.body
        );
        let v = r.json();
        assert_eq!(v["jsonrpc"], "2.0", "{}", r.body);
        (r.status, v["id"].clone(), v["error"]["code"].clone())
    };
    // Not JSON: a parse error, with no id.
    let r = post(b"{\"jsonrpc\": \"2.0\", \"id\": 1,", None);
    assert_eq!(error(&r), (400, Value::Null, json!(-32700)), "{}", r.body);
    // JSON but not a message: an invalid request, with its id.
    let r = post(br#"{"jsonrpc": "2.0", "id": 7, "params": {}}"#, None);
    assert_eq!(error(&r), (400, json!(7), json!(-32600)), "{}", r.body);
    let r = post(b"42", None);
    assert_eq!(error(&r), (400, Value::Null, json!(-32600)), "{}", r.body);

    // A batch under 2025-03-26 (said, or assumed without the header): each
    // message answered as if alone, notifications with nothing.
    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        {"jsonrpc": "2.0", "id": 3},
    ])
    .to_string();
    for version in [Some("2025-03-26"), None] {
        let r = post(batch.as_bytes(), version);
        assert_eq!(r.status, 200, "{}", r.body);
        let mut answers = r.json().as_array().unwrap().clone();
        answers.sort_by_key(|a| a["id"].as_i64());
        assert_eq!(answers.len(), 3, "{}", r.body);
        let names: Vec<&str> = answers[0]["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["ask", "check"]);
        assert_eq!(answers[1]["result"], json!({}), "{}", r.body);
        assert_eq!(
            (
                answers[2]["id"].clone(),
                answers[2]["error"]["code"].clone()
            ),
            (json!(3), json!(-32600))
        );
    }
    let r = post(
        json!([{"jsonrpc": "2.0", "method": "notifications/initialized"}])
            .to_string()
            .as_bytes(),
        None,
    );
    assert_eq!(r.status, 202, "{}", r.body);
    // Later protocols have no batches: an invalid request.
    let r = post(batch.as_bytes(), Some("2025-06-18"));
    assert_eq!(error(&r), (400, Value::Null, json!(-32600)), "{}", r.body);
    assert!(r.body.contains("no JSON-RPC batches"), "{}", r.body);
    // A single well-formed request is served as before.
    assert_eq!(tool_names(&h, "/plain/v1/mcp"), ["ask", "check"]);
}
