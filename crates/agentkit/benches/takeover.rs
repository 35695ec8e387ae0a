//! Takeover benchmark: how long a session whose host was killed (`kill
//! -9`) mid-turn waits before another host records the cut turn
//! (`turn.failed` reason `restart`) and can serve it again.
//!
//! Two `agentkit-serve` hosts share a throwaway database (`agentkit_bench_
//! takeover_<pid>` on the server at `AGENTKIT_TEST_PG`, default
//! `postgres://postgres@127.0.0.1:5432`, made and dropped with `psql`).
//! Host B lives through the run. Each round starts a host A, makes a
//! session on it whose scripted turn lasts a minute, follows the session's
//! stream on B until `turn.started`, kills A with SIGKILL, and times from
//! the kill until B's stream shows `turn.failed`. Reported: p50, p90, p99
//! and the slowest of the rounds.
//!
//! The servers are the binary at `AGENTKIT_SERVE_BIN` (default
//! `target/debug/agentkit-serve`).
//!
//! `cargo bench -p agentkit --bench takeover --profile dev -- [--kills N]`
//! (default 50; `--quick`: 10).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agentkit_test_support::http::Request;
use agentkit_test_support::process::{ServerProcess, free_port};
use serde_json::json;

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let kills = args
        .iter()
        .position(|a| a == "--kills")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(if quick { 10 } else { 50 });
    let bin = std::env::var("AGENTKIT_SERVE_BIN").map_or_else(
        |_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/debug/agentkit-serve"),
        PathBuf::from,
    );
    if !bin.is_file() {
        eprintln!(
            "no server binary at {} (cargo build -p agentkit-serve, or set AGENTKIT_SERVE_BIN)",
            bin.display()
        );
        return std::process::ExitCode::FAILURE;
    }
    let server = std::env::var("AGENTKIT_TEST_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned());
    let name = format!("agentkit_bench_takeover_{}", std::process::id());
    if let Err(e) = psql(&server, "postgres", &format!("CREATE DATABASE {name}")) {
        eprintln!("no PostgreSQL at {server}: {e}");
        return std::process::ExitCode::FAILURE;
    }
    let url = format!("{server}/{name}");
    let dir = tempfile::tempdir().unwrap();
    write_project(dir.path());
    let mut times = Vec::with_capacity(kills);
    {
        let b = host(&bin, dir.path(), "b", &url);
        for round in 0..kills {
            let mut a = host(&bin, dir.path(), &format!("a{round}"), &url);
            let made = Request::post("/bot/v1/session")
                .json(&json!({"message": "hi"}))
                .send(a.addr)
                .unwrap();
            assert_eq!(made.status, 200, "{}", made.body);
            let id = made.json()["sessionId"].as_str().unwrap().to_owned();
            let mut stream = Request::get(&format!("/bot/v1/session/{id}/stream"))
                .stream(b.addr)
                .unwrap();
            stream.until("turn.started").unwrap();
            a.child.kill().unwrap();
            a.child.wait().unwrap();
            let killed = Instant::now();
            let failed = stream.until("turn.failed").unwrap();
            let took = killed.elapsed();
            let reason = failed.last().map(|e| e["data"]["reason"].clone());
            assert_eq!(reason, Some(json!("restart")), "{failed:?}");
            times.push(took);
            eprintln!("round {round}: {:.0} ms", took.as_secs_f64() * 1000.0);
        }
    }
    let _ = psql(
        &server,
        "postgres",
        &format!("DROP DATABASE {name} WITH (FORCE)"),
    );
    times.sort();
    let at = |q: f64| {
        let i = ((times.len() as f64 - 1.0) * q).round() as usize;
        times[i.min(times.len() - 1)].as_secs_f64() * 1000.0
    };
    println!(
        "takeover after kill -9, {} rounds, {} cores: p50 {:.0} ms, p90 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        times.len(),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        at(0.5),
        at(0.9),
        at(0.99),
        at(1.0)
    );
    std::process::ExitCode::SUCCESS
}

fn psql(server: &str, db: &str, sql: &str) -> Result<String, String> {
    let out = Command::new("psql")
        .arg(format!("{server}/{db}"))
        .args(["-v", "ON_ERROR_STOP=1", "-At", "-c", sql])
        .env("PGCONNECT_TIMEOUT", "3")
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn host(bin: &Path, dir: &Path, name: &str, url: &str) -> ServerProcess {
    let port = free_port();
    let child = Command::new(bin)
        .args(["--dir", &dir.join("bot").display().to_string()])
        .args(["--port", &port.to_string()])
        .args([
            "--state-root",
            &dir.join(format!("state-{name}")).display().to_string(),
        ])
        .args(["--allow-anonymous", "--no-schedules"])
        .env("AGENTKIT_DATABASE_URL", url)
        .env("AGENTKIT_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    ServerProcess::healthy(child, port, Duration::from_secs(30))
}

fn write_project(dir: &Path) {
    let agent = dir.join("bot/agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("agent.toml"),
        "model = \"scripted:script.json\"\n",
    )
    .unwrap();
    std::fs::write(agent.join("instructions.md"), "Bench agent.\n").unwrap();
    std::fs::write(
        agent.join("script.json"),
        json!({"turns": [{"steps": [{"text": "never finished", "delayMs": 60000}]}]}).to_string(),
    )
    .unwrap();
}
