//! `agentkit serve` at its edge, as a real child process: many half-sent
//! requests under `ulimit -n 1024` neither make it unreachable nor stay
//! open; single mode's `/v1/health` is public while agent routes need the
//! bearer token; an invalid project and a usage error exit as
//! `agentkit-serve` does (1 with the diagnostics, 2).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agentkit_test_support::http::Request;
use agentkit_test_support::process::{ServerProcess, free_port};

fn project(root: &Path) {
    let agent = root.join("bot/agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(agent.join("agent.toml"), "model = \"test\"\n").unwrap();
    std::fs::write(agent.join("instructions.md"), "Test agent.\n").unwrap();
}

/// `agentkit serve --dir bot` on `port` under `ulimit -n 1024` (soft and
/// hard, so raising the limit cannot escape it), logging to `log`.
fn start(root: &Path, port: u16, log: &Path, extra: &[&str]) -> ServerProcess {
    start_limited(root, port, log, extra, 1024)
}

/// [`start`] under `ulimit -n limit`.
fn start_limited(root: &Path, port: u16, log: &Path, extra: &[&str], limit: u32) -> ServerProcess {
    let child = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -n {limit} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_agentkit"))
        .args([
            "serve",
            "--dir",
            "bot",
            "--port",
            &port.to_string(),
            "--state-root",
            "state",
        ])
        .args(extra)
        .current_dir(root)
        .env("NO_COLOR", "1")
        .env_remove("AGENTKIT_LOG")
        .env_remove("AGENTKIT_BEARER_TOKEN")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    ServerProcess::healthy(child, port, Duration::from_secs(20))
}

/// Whether the server closed `stream` (EOF or reset) before `deadline`,
/// reading past whatever it answered first.
fn closed_by(stream: &mut TcpStream, deadline: Instant) -> bool {
    let mut buf = [0; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return false;
        }
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) => return e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}

/// Serves under `ulimit -n 1024` with `extra` flags, holds 1,100
/// connections that each sent half a request line, checks that
/// `/v1/health` answers meanwhile and that the server closes every held
/// connection, and returns the server's log.
fn flood(extra: &[&str]) -> String {
    let tmp = tempfile::tempdir().unwrap();
    project(tmp.path());
    let log = tmp.path().join("server.log");
    let mut args = vec!["--dev"];
    args.extend(extra);
    let server = start(tmp.path(), free_port(), &log, &args);
    let held: Vec<TcpStream> = (0..1100)
        .map(|i| {
            let mut c = TcpStream::connect(server.addr)
                .unwrap_or_else(|e| panic!("connection {i} was refused: {e}"));
            c.write_all(b"GET /v1/health HTTP/1.1\r\nHost: 127.")
                .unwrap();
            c
        })
        .collect();

    // The host still answers while they are held.
    let health = {
        let addr = server.addr;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(Request::get("/v1/health").send(addr).map(|r| r.status));
        });
        rx.recv_timeout(Duration::from_secs(20))
    };
    assert!(
        matches!(health, Ok(Ok(200))),
        "/v1/health did not answer while 1,100 half-sent requests were held: {health:?}"
    );

    // And the server closes every one of them.
    let deadline = Instant::now() + Duration::from_secs(45);
    let open = held
        .into_iter()
        .map(|mut c| closed_by(&mut c, deadline))
        .filter(|closed| !closed)
        .count();
    assert_eq!(
        open, 0,
        "{open} half-sent requests were still open after 45 s"
    );
    let health = Request::get("/v1/health").send(server.addr).unwrap();
    assert_eq!(health.status, 200);
    drop(server);
    std::fs::read_to_string(&log).unwrap()
}

#[test]
fn half_sent_requests_under_ulimit_1024_neither_block_the_server_nor_stay_open() {
    // A header timeout long enough that the first 768 connections (the
    // cap a limit of 1024 gives) are all held before the first is closed.
    let log = flood(&["--header-timeout", "10s"]);
    assert!(log.contains("file-descriptor limit"), "{log}");
    assert!(log.contains("soft=1024"), "{log}");
    // 1,100 connections are more than the cap.
    assert!(log.contains("connection limit reached"), "{log}");
    assert!(!log.contains("cannot accept connections"), "{log}");
}

/// With a cap above the descriptor limit, `accept` fails with `EMFILE`:
/// the server backs off and logs instead of spinning, and recovers as the
/// held connections time out.
#[test]
fn a_cap_above_the_fd_limit_makes_accept_back_off_on_emfile() {
    let log = flood(&["--header-timeout", "10s", "--max-connections", "5000"]);
    assert!(log.contains("cannot accept connections"), "{log}");
    assert!(
        log.matches("cannot accept connections").count() < 10,
        "the accept error was logged on every retry:\n{log}"
    );
}

/// A gauge or counter of `/metrics`, by its whole name.
fn metric(addr: std::net::SocketAddr, name: &str) -> u64 {
    let r = Request::get("/metrics").send(addr).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{}", r.body))
}

/// Under `ulimit -n 256`, with idle connections holding the descriptors
/// (a connection cap above what the limit allows), a new turn is answered
/// `503` `overloaded` once the process is within the headroom of its
/// limit, instead of being admitted and failing with `Too many open
/// files`; once they go, turns are admitted and complete again.
#[test]
fn near_the_descriptor_limit_a_turn_is_shed_with_503_not_failed_with_emfile() {
    let tmp = tempfile::tempdir().unwrap();
    project(tmp.path());
    let log = tmp.path().join("server.log");
    let server = start_limited(
        tmp.path(),
        free_port(),
        &log,
        &[
            "--dev",
            "--header-timeout",
            "60s",
            "--max-connections",
            "1000",
            "--max-turns",
            "100",
        ],
        256,
    );
    let addr = server.addr;
    let turn = || {
        Request::post("/bot/v1/session")
            .json(&serde_json::json!({"message": "hi"}))
            .send(addr)
            .unwrap()
    };
    let r = turn();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(metric(addr, "agentkit_process_max_fds"), 256);
    // The default headroom at 256 is 32: hold idle connections until the
    // process holds more than 224 descriptors, leaving it room to answer.
    // Wait for the count to settle: the first turn took one of the
    // agent's spare logs (each an open file), made again in the
    // background.
    std::thread::sleep(Duration::from_millis(200));
    let mut base = metric(addr, "agentkit_process_open_fds");
    let settle = Instant::now() + Duration::from_secs(10);
    let mut same = 0;
    while same < 4 && Instant::now() < settle {
        std::thread::sleep(Duration::from_millis(300));
        let now = metric(addr, "agentkit_process_open_fds");
        same = if now == base { same + 1 } else { 0 };
        base = now;
    }
    assert!(base > 0 && base < 200, "{base}");
    let held: Vec<TcpStream> = (0..(236 - base))
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while metric(addr, "agentkit_process_open_fds") <= 224 {
        assert!(
            Instant::now() < deadline,
            "the held connections were not counted"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for _ in 0..10 {
        let r = turn();
        assert_eq!(r.status, 503, "{}", r.body);
        assert_eq!(r.error_code(), "overloaded", "{}", r.body);
        assert_eq!(r.header("retry-after"), Some("1"));
        assert!(r.body.contains("file descriptors"), "{}", r.body);
    }
    assert!(metric(addr, "agentkit_turns_shed_descriptors_total") >= 10);
    drop(held);
    // Once they are gone, a turn is admitted and completes.
    let deadline = Instant::now() + Duration::from_secs(20);
    let id = loop {
        let r = turn();
        if r.status == 200 {
            break r.json()["sessionId"].as_str().unwrap().to_owned();
        }
        assert_eq!(r.status, 503, "{}", r.body);
        assert!(Instant::now() < deadline, "no turn was admitted again");
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut lines = Request::get(&format!("/bot/v1/session/{id}/stream"))
        .stream(addr)
        .unwrap();
    let events = lines.until("turn.completed").unwrap();
    assert!(
        events.iter().all(|e| e["type"] != "turn.failed"),
        "{events:#?}"
    );
    drop(server);
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(!log.contains("Too many open files"), "{log}");
}

#[test]
fn single_mode_health_is_public_and_agent_routes_need_the_bearer_token() {
    let tmp = tempfile::tempdir().unwrap();
    project(tmp.path());
    let server = start(
        tmp.path(),
        free_port(),
        &tmp.path().join("server.log"),
        &["--dev", "--mode", "single", "--bearer-token", "s3cret"],
    );
    let health = Request::get("/v1/health").send(server.addr).unwrap();
    assert_eq!(health.status, 200, "{}", health.body);
    assert_eq!(health.json()["ok"], true);
    let denied = Request::get("/v1/sessions").send(server.addr).unwrap();
    assert_eq!(denied.status, 401, "{}", denied.body);
    let info = Request::get("/v1/info").send(server.addr).unwrap();
    assert_eq!(info.status, 401, "{}", info.body);
    let admitted = Request::get("/v1/sessions")
        .bearer("s3cret")
        .send(server.addr)
        .unwrap();
    assert_eq!(admitted.status, 200, "{}", admitted.body);
}

/// `text` without ANSI colour sequences.
fn plain(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// What both servers print when they refuse `dir`.
fn refusal(dir: &Path) -> String {
    let found = agentkit::discover(dir).unwrap();
    assert!(found.diagnostics.has_errors());
    let mut out = Vec::new();
    agentkit_cli::render_refusal(&mut out, &found.diagnostics).unwrap();
    plain(&String::from_utf8(out).unwrap())
}

#[test]
fn an_invalid_project_exits_1_with_its_diagnostics_and_a_usage_error_exits_2() {
    let dir = super::fixtures().join("invalid/tools");
    let run = super::agentkit(
        &super::fixtures(),
        &["serve", "--dir", &dir.display().to_string(), "--port", "0"],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    let expected = refusal(&dir);
    assert!(
        plain(&run.stderr).contains(&expected),
        "stderr:\n{}\nexpected:\n{expected}",
        run.stderr
    );
    assert!(expected.contains("error: not serving: the project has"));

    let run = super::agentkit(&super::fixtures(), &["serve", "--port", "not-a-port"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.starts_with("error:"), "{}", run.stderr);
    let run = super::agentkit(&super::fixtures(), &["serve", "--header-timeout", "soon"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
}
