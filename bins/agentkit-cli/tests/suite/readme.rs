//! The walk-throughs of README.md and the docs, run as written against
//! `agentkit serve --dir fixtures/agents --dev`, with only the server's
//! address and the ids it printed filled in: README's `curl` commands,
//! the MCP server page's Python program (the official SDK, version 2).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serde_json::Value;

/// The `curl` commands of README's walk-through block (the one that
/// approves a call), continuation lines joined.
fn walkthrough() -> Vec<String> {
    let readme =
        std::fs::read_to_string(super::fixtures().join("../README.md")).expect("README.md");
    let block = readme
        .split("```bash\n")
        .skip(1)
        .filter_map(|rest| rest.split("\n```").next())
        .find(|block| block.contains("/approvals/"))
        .expect("README.md has a walk-through that approves a call");
    let joined = block.replace("\\\n", " ");
    joined
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("curl "))
        .map(str::to_owned)
        .collect()
}

fn sh(command: &str) -> Command {
    let mut c = Command::new("sh");
    c.arg("-c").arg(command);
    c
}

#[test]
fn the_readme_walkthrough_approves_the_first_turn() {
    let commands = walkthrough();
    assert_eq!(commands.len(), 3, "{commands:#?}");
    let tmp = tempfile::tempdir().unwrap();
    let server = super::serve_bundled_agents(tmp.path());
    let port = server.addr.port();
    let here = |c: &str| c.replace("http://127.0.0.1:3000", &format!("http://127.0.0.1:{port}"));

    // 1. The session starts; its id is in the answer.
    let out = sh(&here(&commands[0])).output().unwrap();
    let started: Value = serde_json::from_slice(&out.stdout).expect("curl printed JSON");
    assert_eq!(started["ok"], true, "{started}");
    let session = started["sessionId"].as_str().unwrap().to_owned();
    assert!(session.starts_with("ses_"), "{session}");
    let with_session = |c: &str| here(c).replace("ses_…", &session);

    // 2. The stream stops at the parked `post_alert` call.
    assert!(commands[1].contains("ses_…"), "{}", commands[1]);
    let mut stream = sh(&with_session(&commands[1]))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(stream.stdout.take().unwrap()).lines();
    let mut next_event = |want: &str| -> Value {
        for line in lines.by_ref() {
            let event: Value = serde_json::from_str(&line.unwrap()).unwrap();
            assert_ne!(event["type"], "turn.failed", "{event}");
            if event["type"] == want {
                return event;
            }
        }
        panic!("the stream ended before `{want}`");
    };
    let parked = next_event("action.approval_requested");
    assert_eq!(parked["data"]["toolName"], "post_alert", "{parked}");
    let call = parked["data"]["callId"].as_str().unwrap().to_owned();

    // 3. The README's placeholder has the shape of the real call id.
    let placeholder = commands[2]
        .split('/')
        .find(|part| part.starts_with("turn_…"))
        .and_then(|part| part.split_whitespace().next())
        .expect("the approve command names a call");
    let (head, tail) = placeholder.split_once('…').unwrap();
    assert!(
        call.starts_with(head) && call.ends_with(tail),
        "README says `{placeholder}`, the call is `{call}`"
    );
    let out = sh(&with_session(&commands[2]).replace(placeholder, &call))
        .output()
        .unwrap();
    let approved: Value = serde_json::from_slice(&out.stdout).expect("curl printed JSON");
    assert_eq!(approved["ok"], true, "{approved}");
    assert_eq!(approved["decision"], "approve", "{approved}");

    // The turn goes on to its end.
    let done = next_event("turn.completed");
    assert!(
        done["data"]["result"].as_str().unwrap().contains("NYC"),
        "{done}"
    );
    let _ = stream.kill();
    let _ = stream.wait();
}

/// docs/reference/mcp-server.md's Python program, as written, with the
/// official MCP SDK of the test environment (`mcp` 2.x).
#[test]
// Says why it skips when the environment is missing (never under CI).
#[allow(clippy::print_stderr)]
fn the_mcp_server_snippet_runs_as_written() {
    let bin =
        match agentkit_test_support::pyenv::pyenv_bin("the_mcp_server_snippet_runs_as_written") {
            Ok(bin) => bin,
            Err(why) => {
                eprintln!("{why}");
                return;
            }
        };
    let page = std::fs::read_to_string(super::fixtures().join("../docs/reference/mcp-server.md"))
        .expect("docs/reference/mcp-server.md");
    let program = page
        .split("```python\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("the page has a Python program");
    assert!(
        program.contains("http://127.0.0.1:3000/weather-agent/v1/mcp"),
        "{program}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let server = super::serve_bundled_agents(tmp.path());
    let script = tmp.path().join("client.py");
    std::fs::write(
        &script,
        program.replace("http://127.0.0.1:3000", &format!("http://{}", server.addr)),
    )
    .unwrap();
    let out = Command::new(bin.join("python"))
        .arg(&script)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("'sessionId': 'ses_"), "{stdout}");
}

/// docs/reference/a2a.md's Python program, as written, with the official
/// A2A SDK of the test environment (`a2a-sdk`).
#[test]
// Says why it skips when the environment is missing (never under CI).
#[allow(clippy::print_stderr)]
fn the_a2a_snippet_runs_as_written() {
    let bin = match agentkit_test_support::pyenv::pyenv_with(
        "the_a2a_snippet_runs_as_written",
        "a2a.client",
    ) {
        Ok(bin) => bin,
        Err(why) => {
            eprintln!("{why}");
            return;
        }
    };
    let page = std::fs::read_to_string(super::fixtures().join("../docs/reference/a2a.md"))
        .expect("docs/reference/a2a.md");
    let program = page
        .split("```python\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("the page has a Python program");
    assert!(
        program.contains("http://127.0.0.1:3000/weather-agent"),
        "{program}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let server = super::serve_bundled_agents(tmp.path());
    let script = tmp.path().join("client.py");
    std::fs::write(
        &script,
        program.replace("http://127.0.0.1:3000", &format!("http://{}", server.addr)),
    )
    .unwrap();
    let out = Command::new(bin.join("python"))
        .arg(&script)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("approval required for `post_alert`"),
        "{stdout}"
    );
    assert!(
        stdout.contains(" TASK_STATE_COMPLETED You said: Weather in Paris?"),
        "{stdout}"
    );
    assert!(stdout.contains("task\nstatus_update\n"), "{stdout}");
    assert!(
        stdout.contains("read back: TASK_STATE_COMPLETED"),
        "{stdout}"
    );
}
