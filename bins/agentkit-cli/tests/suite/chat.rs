//! `agentkit chat` against a real `agentkit serve` child process: one-shot,
//! `--json`, and the REPL fed through a pipe.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{Run, fixtures};
use agentkit_test_support::process::free_port;

/// An `agentkit serve` child process, killed when dropped.
struct Server {
    child: Child,
    url: String,
    _state: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Serves `fixtures/agents/<agent>` in dev mode and waits for
    /// `/v1/health`.
    fn start(agent: &str) -> Server {
        Server::start_with(agent, &[])
    }

    fn start_with(agent: &str, extra: &[&str]) -> Server {
        let state = tempfile::tempdir().unwrap();
        let port = free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_agentkit"))
            .current_dir(fixtures())
            .args(["serve", "--dev", "--port", &port.to_string(), "--dir"])
            .arg(Path::new("agents").join(agent))
            .arg("--state-root")
            .arg(state.path())
            .args(extra)
            .env("NO_COLOR", "1")
            .env("ALERTS_TOKEN", "test-token")
            .env_remove("AGENTKIT_MODEL")
            .env_remove("AGENTKIT_BEARER_TOKEN")
            .env_remove("AGENTKIT_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server = Server {
            child,
            url: format!("http://127.0.0.1:{port}"),
            _state: state,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !healthy(port) {
            assert!(Instant::now() < deadline, "the server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    /// `agentkit chat --url <server> <args>` (unless `args` name another
    /// URL) with `stdin` piped in.
    fn chat(&self, args: &[&str], stdin: &str) -> Run {
        self.command("chat", args, stdin)
    }

    fn command(&self, command: &str, args: &[&str], stdin: &str) -> Run {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentkit"));
        cmd.arg(command);
        if !args.contains(&"--url") {
            cmd.args(["--url", &self.url]);
        }
        let mut child = cmd
            .args(args)
            .env("NO_COLOR", "1")
            .env_remove("AGENTKIT_BEARER_TOKEN")
            .env_remove("AGENTKIT_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// `GET /v1/health` answers 200, spoken by hand to need no HTTP client.
fn healthy(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let request = "GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.1 200")
}

#[test]
fn one_shot_prints_the_reply_and_json_prints_the_trajectory() {
    let server = Server::start("weather-agent");

    let run = server.chat(&["--message", "What's the weather in NYC?"], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .starts_with("You said: What's the weather in NYC?"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.ends_with('\n'));
    // The tool calls, their results and the usage footer, on stderr.
    assert!(run.stderr.contains("→ get_weather("), "{}", run.stderr);
    assert!(run.stderr.contains("← "), "{}", run.stderr);
    assert!(
        run.stderr.lines().last().unwrap().starts_with("[in "),
        "{}",
        run.stderr
    );
    assert!(
        !run.stdout.lines().any(|l| l.starts_with("→ ")),
        "{}",
        run.stdout
    );

    let run = server.chat(&["--message", "hello", "--json"], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["ok"], true);
    assert_eq!(doc["turns"][0]["messages"][0], "hello");
    assert!(!doc["reply"].as_str().unwrap().is_empty());

    // The URL may name the agent, too.
    let url = format!("{}/weather-agent", server.url);
    let run = server.chat(&["--url", &url, "--message", "hi"], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[test]
fn repl_keeps_one_session_until_new() {
    let server = Server::start("weather-agent");
    let run = server.chat(
        &[],
        "What's the weather in NYC?\n\nAnd in Paris?\n/new\nhello again\n/exit\nnever sent\n",
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = &run.stdout;
    // Tool calls, results, streamed replies and a footer per turn.
    assert!(out.contains("→ get_weather("), "{out}");
    assert!(out.contains("← {"), "{out}");
    assert!(
        out.contains("You said: What's the weather in NYC?"),
        "{out}"
    );
    assert!(out.contains("You said: And in Paris?"), "{out}");
    assert!(out.contains("You said: hello again"), "{out}");
    assert!(!out.contains("never sent"), "{out}");
    assert_eq!(out.matches("tokens]").count(), 3, "{out}");
    assert!(out.contains("(new session)"), "{out}");

    // With --json, one trajectory line per turn: the first two share a
    // session, `/new` starts another.
    let run = server.chat(&["--json"], "one\ntwo\n/new\nthree\n");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let docs: Vec<serde_json::Value> = run
        .stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(docs.len(), 3, "{}", run.stdout);
    assert_eq!(docs[0]["sessionId"], docs[1]["sessionId"]);
    assert_ne!(docs[1]["sessionId"], docs[2]["sessionId"]);
    assert_eq!(docs[1]["turns"][0]["messages"][0], "two");
    assert_eq!(docs[1]["turns"].as_array().unwrap().len(), 1);
}

#[test]
fn an_unknown_agent_is_an_error_listing_the_agents() {
    let server = Server::start("weather-agent");
    let run = server.chat(&["--agent", "nobody", "--message", "hi"], "");
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("has no agent `nobody` (it serves weather-agent)"),
        "{}",
        run.stderr
    );
}

#[test]
fn run_with_url_uses_the_running_server() {
    let server = Server::start("weather-agent");
    let run = server.command("run", &["--message", "hi", "--message", "again"], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["turns"].as_array().unwrap().len(), 2);
}

#[test]
fn bearer_token_is_sent() {
    let server = Server::start_with("weather-agent", &["--bearer-token", "s3cret"]);
    let run = server.chat(&["--message", "hi"], "");
    assert_eq!(run.code, 2, "{}", run.stdout);
    let url = format!("{}/weather-agent/v1/session", server.url);
    assert!(
        run.stderr.contains(&format!("POST {url} returned 401")),
        "{}",
        run.stderr
    );
    let run = server.chat(&["--message", "hi", "--bearer-token", "s3cret"], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.starts_with("You said: hi"), "{}", run.stdout);
}

#[test]
fn info_url_shows_the_live_mcp_state() {
    let server = Server::start("");
    let text = server.command("info", &["--agent", "concierge"], "");
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(text.stdout.contains("concierge (live)"), "{}", text.stdout);
    assert!(
        text.stdout
            .contains("mcp server: /concierge/v1/mcp (ask, check, call_tool)"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains("weather (peer) idle"),
        "{}",
        text.stdout
    );
    let json = server.command("info", &["--agent", "weather-agent", "--json"], "");
    assert_eq!(json.code, 0, "{}", json.stderr);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(doc["mcp"]["path"], "/weather-agent/v1/mcp");
    assert_eq!(doc["mcp"]["connections"], serde_json::json!([]));
}
