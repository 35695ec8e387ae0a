//! Both MCP revisions against software nobody here wrote: the official
//! MCP Python SDK as a client of an agent's endpoint (2026-07-28, where
//! an approval is an input request its elicitation callback answers, and
//! 2025-11-25, where it is `waiting_approval`), and as a server an agent's
//! `mcp-connections/` file reaches (the client speaks 2026-07-28 to a
//! server that offers it and falls back to 2025-11-25 with one that does
//! not). Peer agents speak 2026-07-28 to each other.

use std::path::PathBuf;
use std::time::Duration;

use agentkit::ServeOptions;
use agentkit_test_support::http::Request;
use serde_json::{Value, json};

use super::mcp::host;

/// The Python environment with the MCP SDK, or why the test skips.
// Says why it skips when the environment is missing (never under CI).
#[allow(clippy::print_stderr)]
fn python() -> Option<PathBuf> {
    match agentkit_test_support::pyenv::pyenv_with("python MCP SDK", "mcp") {
        Ok(bin) => Some(bin),
        Err(skip) => {
            eprintln!("{skip}");
            None
        }
    }
}

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python")
        .join(name)
}

/// A child process killed (and reaped) when the test ends, however.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const GUARDED: &str = r#"{"turns": [
  {"steps": [{"toolCalls": [{"name": "echo", "input": {"text": "hi"}}]}, {"text": "after approval"}]}
]}"#;

const ECHO_TOOL: &str = r#"description = "Echo the text back, after a human agrees"
command = ["python3", "-c", "import json,sys; print(json.dumps({'echo': json.load(sys.stdin)['text']}))"]
needs_approval = true
[input_schema]
type = "object"
required = ["text"]
properties.text = { type = "string" }
"#;

#[test]
fn the_python_sdk_gets_approvals_as_input_requests_under_2026_07_28_and_waits_under_2025_11_25() {
    let Some(bin) = python() else { return };
    let files = vec![
        ("agent.toml", "model = \"scripted:script.json\"\n"),
        ("script.json", GUARDED),
        ("instructions.md", "You are a test agent.\n"),
        ("tools/echo.toml", ECHO_TOOL),
    ];
    let h = host(&[("guarded", &files)], ServeOptions::default());
    let url = format!("http://{}/guarded/v1/mcp", h.addr());
    let out = std::process::Command::new(bin.join("python"))
        .arg(script("mcp_client_rounds.py"))
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let modern = &v["modern"];
    assert_eq!(modern["protocol"], "2026-07-28", "{v}");
    assert!(modern["tasksExtension"].as_bool().unwrap(), "{v}");
    // The SDK answered the input request with its elicitation callback,
    // which was shown the call and its arguments, and retried.
    let shown = modern["asked"][0]["message"].as_str().unwrap();
    assert!(
        shown.contains("`echo`") && shown.contains(r#"{"text":"hi"}"#),
        "{v}"
    );
    assert_eq!(modern["ask"]["content"]["status"], "completed", "{v}");
    assert_eq!(modern["ask"]["content"]["reply"], "after approval", "{v}");
    let legacy = &v["legacy"];
    assert_eq!(legacy["protocol"], "2025-11-25", "{v}");
    assert_eq!(legacy["asked"], json!([]), "{v}");
    assert_eq!(
        legacy["ask"]["content"]["status"], "waiting_approval",
        "{v}"
    );
    let text = legacy["ask"]["content"]["reply"].as_str().unwrap();
    assert!(
        text.contains("/approvals/") && text.contains("`check`"),
        "{text}"
    );
}

/// An agent calls `shout` of a streamable-HTTP server built with the
/// Python SDK: one that offers 2026-07-28 is spoken to in it, one that
/// serves only 2025-11-25 (sessions, the `initialize` handshake) in that.
#[test]
fn a_connection_speaks_2026_07_28_where_offered_and_falls_back_to_2025_11_25() {
    let Some(bin) = python() else { return };
    for (era, want) in [("both", "2026-07-28"), ("legacy", "2025-11-25")] {
        let port = agentkit_test_support::process::free_port();
        let _server = Killed(
            std::process::Command::new(bin.join("python"))
                .arg(script("mcp_http_server.py"))
                .arg(port.to_string())
                .arg(era)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        );
        let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the Python MCP server did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let conn = format!("url = \"http://127.0.0.1:{port}/mcp\"\n");
        let script = r#"{"turns": [{"steps": [
            {"toolCalls": [{"name": "py__shout", "input": {"text": "hi"}}]},
            {"text": "shouted"}
        ]}]}"#;
        let files = vec![
            ("agent.toml", "model = \"scripted:script.json\"\n"),
            ("script.json", script),
            ("instructions.md", "Shout.\n"),
            ("mcp-connections/py.toml", conn.as_str()),
        ];
        let h = host(&[("bot", &files)], ServeOptions::default());
        let r = h.send(
            Request::post("/bot/v1/mcp")
                .header("accept", "application/json, text/event-stream")
                .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "ask", "arguments": {"message": "shout"}}})),
        );
        let reply = &r.json()["result"]["structuredContent"];
        assert_eq!(reply["reply"], "shouted", "{era}: {}", r.body);
        let sid = reply["sessionId"].as_str().unwrap();
        let events: Vec<Value> = h
            .send(Request::get(&format!("/bot/v1/session/{sid}/events")))
            .body
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let result = events
            .iter()
            .find(|e| e["type"] == "action.result" && e["data"]["toolName"] == "py__shout")
            .unwrap_or_else(|| panic!("{era}: no result in {events:?}"));
        assert_eq!(result["data"]["isError"], false, "{era}: {result}");
        assert!(
            result["data"]["output"]
                .to_string()
                .contains(&format!("HI ({want})")),
            "{era}: {result}"
        );
        let status = h.send(Request::get("/bot/v1/info")).json()["mcp"]["connections"][0].clone();
        assert_eq!(status["protocol"], want, "{era}: {status}");
        assert_eq!(status["state"], "connected", "{era}: {status}");
    }
}

/// docs/reference/mcp-server.md's second Python program (approvals as
/// input requests), as written, with the official MCP SDK, against an
/// agent whose tool needs approval.
#[test]
fn the_input_requests_snippet_runs_as_written() {
    let Some(bin) = python() else { return };
    let page = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/reference/mcp-server.md"),
    )
    .unwrap();
    let program = page
        .split("```python\n")
        .nth(2)
        .and_then(|rest| rest.split("\n```").next())
        .expect("the page has a second Python program");
    let url = "http://127.0.0.1:3000/deploy-agent/v1/mcp";
    assert!(program.contains(url), "{program}");
    let files = vec![
        ("agent.toml", "model = \"scripted:script.json\"\n"),
        ("script.json", GUARDED),
        ("instructions.md", "You deploy.\n"),
        ("tools/echo.toml", ECHO_TOOL),
    ];
    let h = host(&[("deploy-agent", &files)], ServeOptions::default());
    let tmp = tempfile::tempdir().unwrap();
    let client = tmp.path().join("client.py");
    std::fs::write(
        &client,
        program.replace(url, &format!("http://{}/deploy-agent/v1/mcp", h.addr())),
    )
    .unwrap();
    let out = std::process::Command::new(bin.join("python"))
        .arg(&client)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("the tool `echo`"), "{stdout}");
    assert!(stdout.contains("'status': 'completed'"), "{stdout}");
    assert!(stdout.contains("'reply': 'after approval'"), "{stdout}");
}
