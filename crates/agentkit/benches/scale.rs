//! Scale-out benchmark: turns/s and latency with one and three
//! `agentkit-serve` hosts on one PostgreSQL database (and one host on its
//! files, for reference), with the CPU each side spent.
//!
//! The servers are the binary at `AGENTKIT_SERVE_BIN` (default
//! `target/debug/agentkit-serve`: `cargo build -p agentkit-serve`), each with its own state root, on a throwaway database
//! (`agentkit_bench_<pid>`) of the server at `AGENTKIT_TEST_PG` (default
//! `postgres://postgres@127.0.0.1:5432`), created with `psql` and dropped
//! afterwards. A turn is `POST /<slug>/v1/session` on one host (round
//! robin) then its stream on the same host until `session.waiting`; the
//! scripted 20-token reply needs no network.
//!
//! Reported per setup: turns, errors, turns/s, latency p50 and p99, CPU ms
//! per turn of the hosts (utime + stime from `/proc/<pid>/stat`), of the
//! database (the backends serving the bench database, by `pg_stat_activity`,
//! from `/proc`), commits per turn (`pg_stat_database`), and the
//! 3-host / 1-host throughput ratio. On a machine with fewer cores than
//! hosts plus the database, the ratio measures contention, not scaling:
//! the core count is printed with the figures.
//!
//! The load client's own CPU per turn (this process, utime + stime) is
//! reported beside them: on a small machine it shares the cores.
//!
//! `cargo bench -p agentkit --bench scale [--profile dev] -- [--quick]
//! [--concurrency N] [--turns N] [--only files|pg1|pg3]` (the bench
//! profile builds the client optimised, which leaves the host and the
//! database more of a small machine).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

const SLUG: &str = "bench";

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let value = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse::<usize>().ok())
    };
    let concurrency = value("--concurrency").unwrap_or(16);
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let turns = value("--turns").unwrap_or(if quick { 300 } else { 2_000 });
    let bin = std::env::var("AGENTKIT_SERVE_BIN").map_or_else(
        |_| workspace_root().join("target/debug/agentkit-serve"),
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
    if let Err(e) = psql(&server, "postgres", "SELECT 1") {
        eprintln!("skipped: PostgreSQL not reachable at {server} ({e})");
        return std::process::ExitCode::FAILURE;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "== scale-out: {turns} turns at concurrency {concurrency}, {cores} cores, binary {}",
        bin.display()
    );
    println!(
        "{:<14} {:>6} {:>6} {:>8} {:>8} {:>8} {:>10} {:>9} {:>9} {:>10}",
        "setup",
        "turns",
        "errors",
        "turns/s",
        "p50 ms",
        "p99 ms",
        "hosts ms",
        "db ms",
        "commits",
        "client ms"
    );
    let mut rates = Vec::new();
    for (key, name, hosts, shared) in [
        ("files", "files, 1 host", 1, false),
        ("pg1", "pg, 1 host", 1, true),
        ("pg3", "pg, 3 hosts", 3, true),
    ] {
        if only.as_deref().is_some_and(|o| o != key) {
            continue;
        }
        let r = runtime.block_on(setup(&bin, &server, hosts, shared, concurrency, turns));
        println!(
            "{:<14} {:>6} {:>6} {:>8.0} {:>8.1} {:>8.1} {:>10.2} {:>9} {:>9} {:>10.2}",
            name,
            r.turns,
            r.errors,
            r.rate,
            r.p50,
            r.p99,
            r.host_cpu_ms / r.turns.max(1) as f64,
            r.db_cpu_ms.map_or("-".to_owned(), |c| format!(
                "{:.2}",
                c / r.turns.max(1) as f64
            )),
            r.commits.map_or("-".to_owned(), |c| format!(
                "{:.1}",
                c as f64 / r.turns.max(1) as f64
            )),
            r.client_cpu_ms / r.turns.max(1) as f64,
        );
        if let Some(e) = &r.first_error {
            println!("  first error: {e}");
        }
        rates.push((key, r.rate));
    }
    let rate = |key: &str| rates.iter().find(|(k, _)| *k == key).map(|(_, r)| *r);
    if let (Some(three), Some(one)) = (rate("pg3"), rate("pg1")) {
        println!(
            "3 hosts / 1 host on PostgreSQL: {:.2}x (CPU ms are per turn)",
            three / one.max(f64::MIN_POSITIVE)
        );
    }
    std::process::ExitCode::SUCCESS
}

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
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

struct Host {
    child: Child,
    url: String,
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn cpu_ms(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command's closing parenthesis: utime is 14th, stime 15th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0)
        + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    ticks * 1000.0 / 100.0
}

fn write_project(dir: &Path) {
    let agent = dir.join(SLUG).join("agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("agent.toml"),
        "model = \"scripted:script.json\"\n",
    )
    .unwrap();
    std::fs::write(agent.join("instructions.md"), "Bench agent.\n").unwrap();
    std::fs::write(
        agent.join("script.json"),
        json!({"turns": [{"steps": [{"text": "Hello there, this is a short scripted reply of about twenty tokens for the bench."}]}]}).to_string(),
    )
    .unwrap();
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}

async fn spawn(bin: &Path, dir: &Path, state: &str, db_url: Option<&str>) -> Host {
    let port = free_port();
    let mut cmd = Command::new(bin);
    cmd.args([
        "--dir",
        &dir.display().to_string(),
        "--port",
        &port.to_string(),
    ])
    .args(["--state-root", &dir.join(state).display().to_string()])
    .args(["--allow-anonymous", "--no-schedules"])
    .env("AGENTKIT_LOG", "warn")
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    match db_url {
        Some(url) => cmd.env("AGENTKIT_DATABASE_URL", url),
        None => cmd.env_remove("AGENTKIT_DATABASE_URL"),
    };
    let host = Host {
        child: cmd.spawn().unwrap(),
        url: format!("http://127.0.0.1:{port}"),
    };
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let health = http.get(format!("{}/v1/health", host.url)).send().await;
        if health.is_ok_and(|r| r.status().is_success()) {
            return host;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{} did not come up", bin.display());
}

struct Outcome {
    turns: usize,
    errors: usize,
    rate: f64,
    p50: f64,
    p99: f64,
    host_cpu_ms: f64,
    db_cpu_ms: Option<f64>,
    commits: Option<i64>,
    client_cpu_ms: f64,
    first_error: Option<String>,
}

async fn setup(
    bin: &Path,
    server: &str,
    hosts: usize,
    shared: bool,
    concurrency: usize,
    turns: usize,
) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    write_project(dir.path());
    let db_name = format!("agentkit_bench_{}_{hosts}", std::process::id());
    let db_url = shared.then(|| format!("{server}/{db_name}"));
    if shared {
        let _ = psql(
            server,
            "postgres",
            &format!("DROP DATABASE IF EXISTS {db_name}"),
        );
        psql(server, "postgres", &format!("CREATE DATABASE {db_name}")).unwrap();
    }
    let mut running = Vec::new();
    for i in 0..hosts {
        running.push(spawn(bin, dir.path(), &format!("state-{i}"), db_url.as_deref()).await);
    }
    let urls: Arc<Vec<String>> = Arc::new(running.iter().map(|h| h.url.clone()).collect());
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .build()
        .unwrap();
    // Warm up every host (pools, prepared statements).
    for url in urls.iter() {
        for _ in 0..5 {
            let _ = turn(&http, url).await;
        }
    }
    let commits_before = shared.then(|| commits(server, &db_name));
    let cpu_before: f64 = running.iter().map(|h| cpu_ms(h.child.id())).sum();
    let db_before = shared.then(|| db_cpu(server, &db_name));
    let client_before = cpu_ms(std::process::id());
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let next = next.clone();
            let urls = urls.clone();
            let http = http.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut errors = Vec::new();
                loop {
                    let n = next.fetch_add(1, Ordering::SeqCst);
                    if n >= turns {
                        break;
                    }
                    let t0 = Instant::now();
                    match turn(&http, &urls[n % urls.len()]).await {
                        Ok(()) => latencies.push(t0.elapsed().as_secs_f64() * 1000.0),
                        Err(e) => errors.push(e),
                    }
                }
                (latencies, errors)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    let mut errors = Vec::new();
    for w in workers {
        let (l, e) = w.await.unwrap();
        latencies.extend(l);
        errors.extend(e);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let client_cpu_ms = cpu_ms(std::process::id()) - client_before;
    let host_cpu_ms = running.iter().map(|h| cpu_ms(h.child.id())).sum::<f64>() - cpu_before;
    let db_cpu_ms = db_before.map(|before| {
        let after = db_cpu(server, &db_name);
        // Backends that were there before the run, and new ones in full.
        after
            .iter()
            .map(|(pid, ms)| {
                ms - before
                    .iter()
                    .find(|(p, _)| p == pid)
                    .map_or(0.0, |(_, b)| *b)
            })
            .sum()
    });
    drop(running);
    // PostgreSQL counts an idle connection's commits up to 10 s late; a
    // backend whose client went away reports them as it exits.
    if shared {
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let commits = commits_before.map(|before| commits(server, &db_name) - before);
    if shared {
        let _ = psql(
            server,
            "postgres",
            &format!("DROP DATABASE IF EXISTS {db_name} WITH (FORCE)"),
        );
    }
    latencies.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        if latencies.is_empty() {
            return 0.0;
        }
        latencies[((latencies.len() - 1) as f64 * p).round() as usize]
    };
    Outcome {
        turns: latencies.len(),
        errors: errors.len(),
        rate: latencies.len() as f64 / elapsed,
        p50: pct(0.5),
        p99: pct(0.99),
        host_cpu_ms,
        db_cpu_ms,
        commits,
        client_cpu_ms,
        first_error: errors.into_iter().next(),
    }
}

fn commits(server: &str, db: &str) -> i64 {
    psql(
        server,
        "postgres",
        &format!("SELECT xact_commit FROM pg_stat_database WHERE datname = '{db}'"),
    )
    .ok()
    .and_then(|s| s.parse().ok())
    .unwrap_or(0)
}

/// CPU ms of each backend connected to `db` (it runs on this machine).
fn db_cpu(server: &str, db: &str) -> Vec<(u32, f64)> {
    psql(
        server,
        "postgres",
        &format!("SELECT pid FROM pg_stat_activity WHERE datname = '{db}'"),
    )
    .unwrap_or_default()
    .lines()
    .filter_map(|l| l.trim().parse::<u32>().ok())
    .map(|pid| (pid, cpu_ms(pid)))
    .collect()
}

/// One turn on host `url`: a new session, then its stream until it waits.
async fn turn(http: &reqwest::Client, url: &str) -> Result<(), String> {
    let r = http
        .post(format!("{url}/{SLUG}/v1/session"))
        .json(&json!({"message": "hi"}))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = r.status();
    let body: serde_json::Value = r.json().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("POST: {status}: {body}"));
    }
    let stream = body["streamUrl"].as_str().ok_or("no streamUrl")?;
    let mut r = http
        .get(format!("{url}{stream}"))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let mut buffer = Vec::new();
    while let Some(chunk) = r.chunk().await.map_err(|e| e.to_string())? {
        buffer.extend_from_slice(&chunk);
        if buffer
            .windows(b"\"session.waiting\"".len())
            .any(|w| w == b"\"session.waiting\"")
        {
            return Ok(());
        }
    }
    Err("the stream ended before session.waiting".to_owned())
}
