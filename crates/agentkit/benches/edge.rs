//! Edge benchmark: the HTTP edge under a slowloris and past saturation,
//! measured on the real `agentkit-serve` binary (issue 37's targets).
//!
//! The server under test is the binary at `AGENTKIT_SERVE_BIN` (default
//! `target/release/agentkit-serve`), spawned under `ulimit -n 1024` (the
//! issue's setting; `--nofile N` changes it) with default flags and
//! `--allow-anonymous --metrics-public` on a throwaway project whose model is `scripted`
//! (a one-step short reply: no network, no keys).
//!
//! Sections (`--only NAME` runs one):
//! - `heads`: 1,100 connections (`--attackers N`) each send a request
//!   line and then one more header line every 5 s, reopened when the
//!   server closes them; meanwhile a normal client sends a
//!   `GET /v1/health` every 0.5 s and a session turn every 2 s, each on a
//!   new connection. Reports the probes and turns answered within 2 s
//!   and within 5 s, their p50 and max, and how many attacking
//!   connections the server closed and how long they had lived.
//! - `bodies`: the same with complete heads (`Content-Length: 1000`) and
//!   bodies sent one byte every 5 s.
//! - `saturation`: the closed-loop throughput at concurrency 64 (the
//!   saturated rate), then paced offered load at 100 % and 150 % of it
//!   over at most 256 connections: each offered turn is a `POST` and, if
//!   admitted, its stream read to `session.waiting`. Reports the RSS
//!   every 10 s (and per minute), the turns admitted, shed (`503`/`429`,
//!   with the p99 of their answer time), admitted turns that failed, and
//!   the server's queue gauges from `/metrics`, then the RSS 30 s after
//!   the load stops. The server's own figures for the same span (from
//!   `/metrics`, bucket bounds): the time from a refused request's head
//!   to its answer, and how late a woken task is polled on each of its
//!   runtimes; and the CPU the client (this bench, which shares the
//!   machine) and each of the server's threads used. Neither side is
//!   pinned to a core.
//!
//! `--post-only` offers turns as `POST`s alone (an open loop: the server
//! holds every admitted turn until it settles, up to `--max-turns`).
//!
//! The attack lasts 30 s (`--quick`: 15 s); each saturation level 600 s
//! (`--quick`: 60 s; `--minutes N` sets it). The bench reports and does
//! not judge.
//!
//! `cargo bench -p agentkit --bench edge -- [--quick] [--only NAME]
//! [--attackers N] [--minutes N] [--nofile N] [--post-only]`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SECTIONS: &[&str] = &["heads", "bodies", "saturation"];
const SLUG: &str = "short";

struct Args {
    quick: bool,
    only: Option<String>,
    attackers: usize,
    minutes: Option<f64>,
    nofile: u64,
    /// Offered turns are `POST`s alone: their streams are not read.
    post_only: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        quick: false,
        only: None,
        attackers: 1_100,
        minutes: None,
        nofile: 1024,
        post_only: false,
    };
    let mut it = std::env::args().skip(1);
    let number = |it: &mut std::iter::Skip<std::env::Args>, flag: &str| -> Result<f64, String> {
        it.next()
            .and_then(|v| v.parse().ok())
            .ok_or(format!("{flag} takes a number"))
    };
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => args.quick = true,
            "--post-only" => args.post_only = true,
            "--only" => {
                let name = it.next().ok_or("--only takes a section name")?;
                if !SECTIONS.contains(&name.as_str()) {
                    return Err(format!(
                        "unknown section `{name}` (one of {})",
                        SECTIONS.join(", ")
                    ));
                }
                args.only = Some(name);
            }
            "--attackers" => args.attackers = number(&mut it, "--attackers")? as usize,
            "--minutes" => args.minutes = Some(number(&mut it, "--minutes")?),
            "--nofile" => args.nofile = number(&mut it, "--nofile")? as u64,
            // `cargo bench` passes `--bench`.
            "--bench" => {}
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(args)
}

fn main() -> std::process::ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let bin = std::env::var_os("AGENTKIT_SERVE_BIN").map_or_else(default_bin, |p| {
        let p = PathBuf::from(p);
        if p.is_relative() && !p.is_file() {
            workspace_root().join(p)
        } else {
            p
        }
    });
    if !bin.is_file() {
        eprintln!(
            "error: the server binary {} does not exist; build it with \
             `cargo build --release -p agentkit-serve` or point AGENTKIT_SERVE_BIN at one",
            bin.display()
        );
        return std::process::ExitCode::from(2);
    }
    // The attackers need more descriptors than the server is given.
    let _ = agentkit::raise_fd_limit();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run(&bin, &args));
    std::process::ExitCode::SUCCESS
}

fn default_bin() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace_root().join("target"), PathBuf::from);
    target.join("release").join("agentkit-serve")
}

fn workspace_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_default()
}

async fn run(bin: &Path, args: &Args) {
    let wanted = |name: &str| args.only.as_deref().is_none_or(|only| only == name);
    let project = tempfile::tempdir().unwrap();
    write_project(project.path());
    println!(
        "agentkit edge benchmark{}\nserver: {} under ulimit -n {}, default flags\ncpus: {}, load average {}\n",
        if args.quick { " (--quick)" } else { "" },
        bin.display(),
        args.nofile,
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        load_average(),
    );
    let attack = Duration::from_secs(if args.quick { 15 } else { 30 });
    for (name, bodies) in [("heads", false), ("bodies", true)] {
        if wanted(name) {
            let state = tempfile::tempdir().unwrap();
            let text = match Server::start(bin, project.path(), state.path(), args.nofile).await {
                Ok(server) => slowloris(&server, args.attackers, bodies, attack).await,
                Err(e) => format!("== slowloris ({name}): cannot start the server: {e}\n"),
            };
            println!("{text}");
        }
    }
    if wanted("saturation") {
        let minutes = args.minutes.unwrap_or(if args.quick { 1.0 } else { 10.0 });
        let state = tempfile::tempdir().unwrap();
        let text = match Server::start(bin, project.path(), state.path(), args.nofile).await {
            Ok(server) => {
                saturation(
                    &server,
                    Duration::from_secs_f64(minutes * 60.0),
                    args.post_only,
                )
                .await
            }
            Err(e) => format!("== saturation: cannot start the server: {e}\n"),
        };
        println!("{text}");
    }
    println!("1-minute load average at the end: {}", load_average());
}

fn write_project(dir: &Path) {
    let agent = dir.join(SLUG).join("agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("agent.toml"),
        "description = \"edge benchmark\"\nmodel = \"scripted:script.json\"\n",
    )
    .unwrap();
    std::fs::write(agent.join("instructions.md"), "Answer briefly.\n").unwrap();
    let script = json!({"turns": [{"steps": [{"text": "the quick brown fox jumps over the lazy dogs while agents stream"}]}]});
    std::fs::write(agent.join("script.json"), script.to_string()).unwrap();
}

// ---------------------------------------------------------------------------
// The server process

/// A running `agentkit-serve`, killed when dropped.
struct Server {
    child: Child,
    base: String,
    addr: std::net::SocketAddr,
    log: PathBuf,
}

impl Server {
    async fn start(
        bin: &Path,
        project: &Path,
        state: &Path,
        nofile: u64,
    ) -> Result<Server, String> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("cannot pick a free port: {e}"))?
            .port();
        let log = state.join("server.log");
        let file = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        // `ulimit -n` sets both limits, so the server cannot raise it.
        let child = Command::new("sh")
            .arg("-c")
            .arg(format!("ulimit -n {nofile} && exec \"$0\" \"$@\""))
            .arg(bin)
            .arg("--dir")
            .arg(project)
            .arg("--state-root")
            .arg(state.join("state"))
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            // `/metrics` for the bench's scrapes (it otherwise runs the
            // auth chain, and an anonymous caller may not read it).
            .args(["--allow-anonymous", "--no-schedules", "--metrics-public"])
            .stdin(Stdio::null())
            .stdout(file.try_clone().map_err(|e| e.to_string())?)
            .stderr(file)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        let mut server = Server {
            child,
            base: format!("http://127.0.0.1:{port}"),
            addr: ([127, 0, 0, 1], port).into(),
            log,
        };
        let http = reqwest::Client::new();
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!(
                    "the server exited ({status}): {}",
                    server.log_tail()
                ));
            }
            if started.elapsed() > Duration::from_secs(300) {
                return Err(format!("no /v1/health in 300 s: {}", server.log_tail()));
            }
            if let Ok(r) = http.get(server.url("/v1/health")).send().await
                && r.status().is_success()
            {
                return Ok(server);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn rss_kib(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id())).map_or(0, Iterator::count)
    }

    /// The CPU ticks each of the server's threads used, summed by thread
    /// name (tokio's workers share one).
    fn cpu_by_thread(&self) -> std::collections::BTreeMap<String, u64> {
        let mut by_name = std::collections::BTreeMap::new();
        let tasks = format!("/proc/{}/task", self.child.id());
        for entry in std::fs::read_dir(tasks).into_iter().flatten().flatten() {
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            if let Some((name, ticks)) = parse_stat(&stat) {
                *by_name.entry(name).or_insert(0) += ticks;
            }
        }
        by_name
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().rev().take(5).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------
// Slowloris

/// What the attackers saw.
#[derive(Default)]
struct Attack {
    opened: AtomicU64,
    /// Connections the server closed.
    closed: AtomicU64,
    /// Connections that could not be opened (refused, timed out).
    failed: AtomicU64,
    /// How long each closed connection had lived, in ms.
    lifetimes: Mutex<Vec<f64>>,
}

/// One attacking connection, reopened whenever the server closes it.
async fn attacker(
    addr: std::net::SocketAddr,
    bodies: bool,
    stop: Arc<AtomicBool>,
    seen: Arc<Attack>,
) {
    let head: &[u8] = if bodies {
        b"POST /short/v1/session HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"
    } else {
        b"GET /v1/health HTTP/1.1\r\nhost: localhost\r\n"
    };
    while !stop.load(Ordering::Relaxed) {
        let connect =
            tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(addr))
                .await;
        let Ok(Ok(mut stream)) = connect else {
            seen.failed.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        seen.opened.fetch_add(1, Ordering::Relaxed);
        let opened = Instant::now();
        if stream.write_all(head).await.is_err() {
            continue;
        }
        let mut buf = [0u8; 1024];
        let (mut reader, mut writer) = stream.split();
        loop {
            tokio::select! {
                read = reader.read(&mut buf) => {
                    if matches!(read, Ok(0) | Err(_)) {
                        seen.closed.fetch_add(1, Ordering::Relaxed);
                        seen.lifetimes.lock().unwrap().push(ms(opened.elapsed()));
                        break;
                    }
                }
                () = tokio::time::sleep(Duration::from_secs(5)) => {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let more: &[u8] = if bodies { b" " } else { b"x-slow: 1\r\n" };
                    if writer.write_all(more).await.is_err() {
                        seen.closed.fetch_add(1, Ordering::Relaxed);
                        seen.lifetimes.lock().unwrap().push(ms(opened.elapsed()));
                        break;
                    }
                }
            }
        }
    }
}

/// A normal client's answers: time to the answer, `None` when none came
/// within 5 s (or it was not a success).
#[derive(Default)]
struct Answers {
    probes: Vec<Option<f64>>,
    turns: Vec<Option<f64>>,
}

fn summary(what: &str, answers: &[Option<f64>]) -> String {
    let n = answers.len();
    let within = |limit: f64| {
        answers
            .iter()
            .filter(|a| a.is_some_and(|t| t <= limit))
            .count()
    };
    let times: Vec<f64> = answers.iter().flatten().copied().collect();
    let max = times.iter().copied().fold(0.0, f64::max);
    format!(
        "{what:<24}{:>4} of {n} within 2 s ({:.1} %), {:>4} within 5 s; p50 {:.0} ms, max {:.0} ms",
        within(2_000.0),
        100.0 * within(2_000.0) as f64 / n.max(1) as f64,
        within(5_000.0),
        percentile(&times, 0.5),
        max,
    )
}

/// A new connection per request, as a client arriving during the attack.
fn fresh_client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// A new session's turn: the `POST`, then its stream to `session.waiting`.
async fn session_turn(http: &reqwest::Client, base: &str) -> Result<(), String> {
    let r = http
        .post(format!("{base}/{SLUG}/v1/session"))
        .json(&json!({"message": "hi"}))
        .send()
        .await
        .map_err(|e| format!("post: {e}"))?;
    let status = r.status();
    let body: Value = r.json().await.map_err(|e| format!("post body: {e}"))?;
    if !status.is_success() {
        return Err(format!("{}", status.as_u16()));
    }
    read_to_waiting(http, base, &body).await
}

async fn slowloris(server: &Server, attackers: usize, bodies: bool, length: Duration) -> String {
    let name = if bodies { "bodies" } else { "heads" };
    let mut out = format!(
        "== slowloris ({name}): {attackers} connections, {} every 5 s, for {} s\n",
        if bodies {
            "one more body byte (Content-Length: 1000)"
        } else {
            "one more header line"
        },
        length.as_secs()
    );
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Attack::default());
    let mut tasks = Vec::new();
    for _ in 0..attackers {
        tasks.push(tokio::spawn(attacker(
            server.addr,
            bodies,
            stop.clone(),
            seen.clone(),
        )));
        // 1,100 connects in about 1 s, not all in one burst.
        tokio::time::sleep(Duration::from_micros(900)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let fds_before = server.open_fds();
    let answers = Arc::new(Mutex::new(Answers::default()));
    let started = Instant::now();
    let mut clients = Vec::new();
    {
        // Probes every 0.5 s.
        let answers = answers.clone();
        let http = fresh_client();
        let server_url = server.url("/v1/health");
        clients.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(500));
            let mut running = Vec::new();
            while started.elapsed() < length {
                tick.tick().await;
                let (http, url, answers) = (http.clone(), server_url.clone(), answers.clone());
                running.push(tokio::spawn(async move {
                    let t0 = Instant::now();
                    let ok = match http.get(&url).send().await {
                        Ok(r) => r.status().is_success(),
                        Err(_) => false,
                    };
                    answers
                        .lock()
                        .unwrap()
                        .probes
                        .push(ok.then(|| ms(t0.elapsed())));
                }));
            }
            for r in running {
                let _ = r.await;
            }
        }));
    }
    let mut turn_errors = Vec::new();
    {
        // A turn every 2 s.
        let http = fresh_client();
        let mut tick = tokio::time::interval(Duration::from_secs(2));
        let mut running = Vec::new();
        while started.elapsed() < length {
            tick.tick().await;
            let (http, base) = (http.clone(), server.base.clone());
            running.push(tokio::spawn(async move {
                let t0 = Instant::now();
                let r =
                    tokio::time::timeout(Duration::from_secs(5), session_turn(&http, &base)).await;
                (r, ms(t0.elapsed()))
            }));
        }
        for r in running {
            let (r, took) = r.await.unwrap();
            let ok = match r {
                Ok(Ok(())) => true,
                Ok(Err(e)) => {
                    turn_errors.push(e);
                    false
                }
                Err(_) => {
                    turn_errors.push("no answer in 5 s".to_owned());
                    false
                }
            };
            answers.lock().unwrap().turns.push(ok.then_some(took));
        }
    }
    for c in clients {
        let _ = c.await;
    }
    let fds_during = server.open_fds();
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.abort();
    }
    let answers = std::mem::take(&mut *answers.lock().unwrap());
    let _ = writeln!(out, "{}", summary("health probes", &answers.probes));
    let _ = writeln!(
        out,
        "{}",
        summary("session turns (to waiting)", &answers.turns)
    );
    if !turn_errors.is_empty() {
        turn_errors.sort();
        turn_errors.dedup();
        let _ = writeln!(out, "turn errors: {}", turn_errors.join("; "));
    }
    let lifetimes = seen.lifetimes.lock().unwrap().clone();
    let _ = writeln!(
        out,
        "attacking connections: {} opened, {} closed by the server (lived p50 {:.1} s, max {:.1} s), {} connects failed",
        seen.opened.load(Ordering::Relaxed),
        seen.closed.load(Ordering::Relaxed),
        percentile(&lifetimes, 0.5) / 1000.0,
        lifetimes.iter().copied().fold(0.0, f64::max) / 1000.0,
        seen.failed.load(Ordering::Relaxed),
    );
    let _ = writeln!(
        out,
        "server descriptors: {fds_before} after 2 s of attack, {fds_during} at its end"
    );
    let metrics = scrape(server).await;
    for name in [
        "agentkit_http_connections_open",
        "agentkit_http_connections_evicted_total",
        "agentkit_http_body_timeouts_total",
    ] {
        let _ = writeln!(out, "{}", metric_lines(&metrics, name));
    }
    out
}

async fn scrape(server: &Server) -> String {
    match reqwest::get(server.url("/metrics")).await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(e) => format!("# cannot scrape: {e}"),
    }
}

/// The samples of `name` in a scrape, on one line.
fn metric_lines(metrics: &str, name: &str) -> String {
    let samples: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .collect();
    if samples.is_empty() {
        format!("{name}: absent")
    } else {
        samples.join(", ")
    }
}

// ---------------------------------------------------------------------------
// Saturation

#[derive(Default)]
struct Offered {
    sent: AtomicU64,
    /// The client had 256 requests in flight: the offer was dropped.
    unsent: AtomicU64,
    admitted: AtomicU64,
    admitted_failed: AtomicU64,
    shed_503: AtomicU64,
    shed_429: AtomicU64,
    /// Other answers and transport errors on the `POST`.
    errors: AtomicU64,
    shed_ms: Mutex<Vec<f64>>,
    admitted_ms: Mutex<Vec<f64>>,
    failures: Mutex<Vec<String>>,
}

/// One offered turn: the `POST`, and the stream when admitted.
async fn offer(http: reqwest::Client, base: String, counts: Arc<Offered>, post_only: bool) {
    let t0 = Instant::now();
    let r = http
        .post(format!("{base}/{SLUG}/v1/session"))
        .json(&json!({"message": "hi"}))
        .send()
        .await;
    let r = match r {
        Ok(r) => r,
        Err(e) => {
            counts.errors.fetch_add(1, Ordering::Relaxed);
            counts.failures.lock().unwrap().push(format!("post: {e}"));
            return;
        }
    };
    match r.status().as_u16() {
        200 => {}
        503 | 429 => {
            let code = r.status().as_u16();
            let _ = r.bytes().await;
            let took = ms(t0.elapsed());
            counts.shed_ms.lock().unwrap().push(took);
            if code == 503 {
                counts.shed_503.fetch_add(1, Ordering::Relaxed);
            } else {
                counts.shed_429.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        other => {
            counts.errors.fetch_add(1, Ordering::Relaxed);
            let text = r.text().await.unwrap_or_default();
            counts
                .failures
                .lock()
                .unwrap()
                .push(format!("post {other}: {text}"));
            return;
        }
    }
    counts.admitted.fetch_add(1, Ordering::Relaxed);
    if post_only {
        let _ = r.bytes().await;
        counts.admitted_ms.lock().unwrap().push(ms(t0.elapsed()));
        return;
    }
    let body: Value = match r.json().await {
        Ok(b) => b,
        Err(e) => {
            counts.admitted_failed.fetch_add(1, Ordering::Relaxed);
            counts
                .failures
                .lock()
                .unwrap()
                .push(format!("post body: {e}"));
            return;
        }
    };
    let outcome = read_to_waiting(&http, &base, &body).await;
    match outcome {
        Ok(()) => counts.admitted_ms.lock().unwrap().push(ms(t0.elapsed())),
        Err(e) => {
            counts.admitted_failed.fetch_add(1, Ordering::Relaxed);
            counts.failures.lock().unwrap().push(e);
        }
    }
}

async fn read_to_waiting(http: &reqwest::Client, base: &str, body: &Value) -> Result<(), String> {
    let stream = body["streamUrl"].as_str().ok_or("no streamUrl")?;
    let mut r = http
        .get(format!("{base}{stream}"))
        .send()
        .await
        .map_err(|e| format!("stream: {e}"))?;
    if !r.status().is_success() {
        return Err(format!("stream {}", r.status().as_u16()));
    }
    let mut buffer = Vec::new();
    loop {
        let Some(chunk) = r.chunk().await.map_err(|e| format!("stream: {e}"))? else {
            return Err("the stream ended before session.waiting".to_owned());
        };
        buffer.extend_from_slice(&chunk);
        while let Some(pos) = buffer.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=pos).collect();
            if line.windows(17).any(|w| w == b"\"session.waiting\"") {
                return Ok(());
            }
            if line.windows(13).any(|w| w == b"\"turn.failed\"") {
                return Err("turn.failed".to_owned());
            }
        }
    }
}

/// Turns per second with `concurrency` clients in a closed loop.
async fn closed_loop(server: &Server, concurrency: usize, length: Duration) -> f64 {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(usize::MAX)
        .build()
        .unwrap();
    let counts = Arc::new(Offered::default());
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (http, base, counts) = (http.clone(), server.base.clone(), counts.clone());
            tokio::spawn(async move {
                while started.elapsed() < length {
                    offer(http.clone(), base.clone(), counts.clone(), false).await;
                }
            })
        })
        .collect();
    for w in workers {
        let _ = w.await;
    }
    let done =
        counts.admitted.load(Ordering::Relaxed) - counts.admitted_failed.load(Ordering::Relaxed);
    done as f64 / started.elapsed().as_secs_f64()
}

async fn saturation(server: &Server, length: Duration, post_only: bool) -> String {
    let mut out = format!(
        "== saturation{}\n",
        if post_only {
            " (offered turns are POSTs alone; their streams are not read)"
        } else {
            ""
        }
    );
    let idle = server.rss_kib();
    let rate = closed_loop(server, 64, Duration::from_secs(15)).await;
    let _ = writeln!(
        out,
        "closed loop at concurrency 64: {rate:.0} turns/s (the saturated rate); RSS {:.1} MiB idle, {:.1} MiB after",
        idle as f64 / 1024.0,
        server.rss_kib() as f64 / 1024.0
    );
    for factor in [1.0, 1.5] {
        let offered = rate * factor;
        let _ = writeln!(
            out,
            "-- paced {:.0} % of it: {offered:.0} turns/s offered for {} s over at most 256 connections",
            factor * 100.0,
            length.as_secs()
        );
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(256)
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let counts = Arc::new(Offered::default());
        let slots = Arc::new(tokio::sync::Semaphore::new(256));
        let metrics_before = scrape(server).await;
        let cpu_before = (cpu_ticks("self"), server.cpu_by_thread());
        let started = Instant::now();
        let mut rss = vec![(0.0, server.rss_kib())];
        let mut next_sample = Duration::from_secs(10);
        let mut tick = tokio::time::interval(Duration::from_millis(5));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        while started.elapsed() < length {
            tick.tick().await;
            let due = (started.elapsed().as_secs_f64() * offered) as u64;
            while counts.sent.load(Ordering::Relaxed) + counts.unsent.load(Ordering::Relaxed) < due
            {
                match slots.clone().try_acquire_owned() {
                    Ok(permit) => {
                        counts.sent.fetch_add(1, Ordering::Relaxed);
                        let (http, base, counts) =
                            (http.clone(), server.base.clone(), counts.clone());
                        tokio::spawn(async move {
                            offer(http, base, counts, post_only).await;
                            drop(permit);
                        });
                    }
                    Err(_) => {
                        counts.unsent.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            if started.elapsed() >= next_sample {
                rss.push((started.elapsed().as_secs_f64(), server.rss_kib()));
                next_sample += Duration::from_secs(10);
            }
        }
        let _ = slots.acquire_many(256).await;
        let busy = started.elapsed().as_secs_f64();
        let cpu_after = (cpu_ticks("self"), server.cpu_by_thread());
        let metrics = scrape(server).await;
        let end = server.rss_kib();
        tokio::time::sleep(Duration::from_secs(30)).await;
        let after = server.rss_kib();
        let c = &counts;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let secs = length.as_secs_f64();
        let _ = writeln!(
            out,
            "offered {} ({:.0}/s), of which {} not sent (256 in flight); admitted {} ({:.0}/s), failed after admission {}; shed 503 {}, 429 {}; other errors {}",
            load(&c.sent) + load(&c.unsent),
            (load(&c.sent) + load(&c.unsent)) as f64 / secs,
            load(&c.unsent),
            load(&c.admitted),
            load(&c.admitted) as f64 / secs,
            load(&c.admitted_failed),
            load(&c.shed_503),
            load(&c.shed_429),
            load(&c.errors),
        );
        let shed = c.shed_ms.lock().unwrap();
        let admitted = c.admitted_ms.lock().unwrap();
        let _ = writeln!(
            out,
            "shed answered in p50 {:.1} ms, p99 {:.1} ms; admitted turns (POST to waiting) p50 {:.0} ms, p99 {:.0} ms",
            percentile(&shed, 0.5),
            percentile(&shed, 0.99),
            percentile(&admitted, 0.5),
            percentile(&admitted, 0.99),
        );
        // The server's own figures for the same requests, and the CPU each
        // side used (the client shares the machine).
        let quantiles = |name: &str, filter: &str| {
            let h = histogram_delta(&metrics_before, &metrics, name, filter);
            format!(
                "{name}{{{filter}}}: {} samples, p50 <= {}, p99 <= {}",
                h.last().map_or(0, |b| b.1),
                bucket_quantile(&h, 0.5),
                bucket_quantile(&h, 0.99)
            )
        };
        let _ = writeln!(
            out,
            "server side: {}; {}; {}",
            quantiles("agentkit_shed_answer_seconds", ""),
            quantiles("agentkit_runtime_wake_delay_seconds", "runtime=\"main\""),
            quantiles("agentkit_runtime_wake_delay_seconds", "runtime=\"edge\""),
        );
        let percent = |ticks: u64| ticks as f64 / TICKS_PER_SECOND / busy * 100.0;
        let mut threads: Vec<String> = cpu_after
            .1
            .iter()
            .map(|(name, ticks)| {
                let was = cpu_before.1.get(name).copied().unwrap_or(0);
                format!("{name} {:.0} %", percent(ticks.saturating_sub(was)))
            })
            .collect();
        threads.sort();
        let _ = writeln!(
            out,
            "CPU over the {busy:.0} s (% of one core): client (this bench) {:.0} %; server {:.0} % ({})",
            percent(cpu_after.0.saturating_sub(cpu_before.0)),
            percent(
                cpu_after
                    .1
                    .values()
                    .sum::<u64>()
                    .saturating_sub(cpu_before.1.values().sum::<u64>())
            ),
            threads.join(", "),
        );
        let mut failures = c.failures.lock().unwrap().clone();
        if !failures.is_empty() {
            failures.sort();
            failures.dedup();
            failures.truncate(5);
            let _ = writeln!(out, "failures (first kinds): {}", failures.join("; "));
        }
        let line: Vec<String> = rss
            .iter()
            .map(|(t, kib)| format!("{t:.0}s {:.1}", *kib as f64 / 1024.0))
            .collect();
        let _ = writeln!(out, "RSS MiB: {}", line.join(", "));
        // MiB per minute from minute 2 (or the first sample past a fifth
        // of the run) to the end.
        let from = rss
            .iter()
            .find(|(t, _)| *t >= (secs / 5.0).min(120.0))
            .copied()
            .unwrap_or(rss[0]);
        let last = rss.last().copied().unwrap_or(from);
        let slope = if last.0 > from.0 {
            (last.1 as f64 - from.1 as f64) / 1024.0 / ((last.0 - from.0) / 60.0)
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "RSS {slope:+.1} MiB per minute from {:.0} s to the end; {:.1} MiB at the end, {:.1} MiB 30 s later",
            from.0,
            end as f64 / 1024.0,
            after as f64 / 1024.0
        );
        for name in [
            "agentkit_turns_shed_total",
            "agentkit_turns_in_flight",
            "agentkit_sessions_loaded",
            "agentkit_index_writes_queued",
            "agentkit_tasks_alive",
            "agentkit_process_open_fds",
        ] {
            let _ = writeln!(out, "{}", metric_lines(&metrics, name));
        }
    }
    out
}

/// Clock ticks per second of `/proc/*/stat` (`USER_HZ`, 100 on Linux).
const TICKS_PER_SECOND: f64 = 100.0;

/// The CPU ticks (user and system) process `pid` (`self`) used.
fn cpu_ticks(pid: &str) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    parse_stat(&stat).map_or(0, |(_, t)| t)
}

/// The name and CPU ticks (utime + stime) of a `/proc/*/stat` line.
fn parse_stat(stat: &str) -> Option<(String, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat[open + 1..close].to_owned();
    let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
    // After the name: state is field 3, utime 14 and stime 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((name, utime + stime))
}

/// The cumulative buckets (upper bound, count) of histogram `name` whose
/// labels contain `filter`, counted between two scrapes.
fn histogram_delta(before: &str, after: &str, name: &str, filter: &str) -> Vec<(f64, u64)> {
    let read = |text: &str| -> Vec<(f64, u64)> {
        let prefix = format!("{name}_bucket{{");
        text.lines()
            .filter(|l| l.starts_with(&prefix) && l.contains(filter))
            .filter_map(|l| {
                let le = l.split("le=\"").nth(1)?.split('"').next()?;
                let le = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().ok()?
                };
                let count = l.rsplit(' ').next()?.parse().ok()?;
                Some((le, count))
            })
            .collect()
    };
    let was = read(before);
    read(after)
        .into_iter()
        .map(|(le, n)| {
            let old = was.iter().find(|(l, _)| *l == le).map_or(0, |(_, c)| *c);
            (le, n.saturating_sub(old))
        })
        .collect()
}

/// The upper bound of the bucket holding quantile `p`, in ms.
fn bucket_quantile(buckets: &[(f64, u64)], p: f64) -> String {
    let total = buckets.last().map_or(0, |b| b.1);
    if total == 0 {
        return "-".to_owned();
    }
    let want = (total as f64 * p).ceil() as u64;
    match buckets.iter().find(|(_, n)| *n >= want) {
        Some((le, _)) if le.is_finite() => format!("{} ms", le * 1000.0),
        _ => "inf".to_owned(),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn percentile(samples: &[f64], p: f64) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}
