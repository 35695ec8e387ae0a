//! Session-core benchmark: the figures issue 12 sets targets for, measured
//! on the real `agentkit-serve` binary as a child process.
//!
//! The server under test is the binary at `AGENTKIT_SERVE_BIN` (default
//! `target/release/agentkit-serve`), spawned on `127.0.0.1` with
//! `--allow-anonymous` on a throwaway project folder this bench writes (the
//! `scripted` model: no network, no keys) and a fresh state root per
//! section. It is pinned to core 0 with `taskset` when there are two cores or
//! more; this process (the load client) pins itself to core 1. Server CPU is
//! read from `/proc/<pid>/stat` (utime + stime), the client's from
//! `/proc/self/stat`, RSS from `/proc/<pid>/status`.
//!
//! Sections (`--only NAME` runs one):
//! - `throughput`: turns/s, server and client CPU ms per turn, latency and
//!   time to first event at concurrency 1, 8 and 64 (a fresh server per
//!   level). A turn is `POST /<slug>/v1/session` then its `streamUrl` read
//!   line by line until `session.waiting`.
//! - `tool`: the same levels with one server tool call per turn (the model
//!   asks for `printf`, sandboxed as every server tool is by default, then
//!   answers the short reply): what a tool call adds to a turn.
//! - `tool-worker`: the same with the tool a Python worker (`[worker]`,
//!   `concurrency = 64`): a call is a line each way to one process.
//! - `ttfe`: the concurrency-1 level alone (POST start → first line).
//! - `rss`: RSS idle after boot, per settled stored session, and per stored
//!   session after a restart.
//! - `log`: one ~23 KB reply (4,000 words in 1,334 deltas): bytes of
//!   `events.ndjson` and of the stream per reply byte.
//! - `growth`: 20 long turns in one session: server CPU per turn, turn 2 vs
//!   turn 20.
//! - `boot`: 100,000 stored sessions written straight to disk (copies of a
//!   real session the server under test wrote), time from spawn to the first
//!   `200` of `/v1/health`, and RSS after boot.
//! - `soak`: SIGKILL at random moments while clients create sessions, read
//!   streams and follow up; restart on the same state root; every
//!   acknowledged session and follow-up must be intact.
//!
//! The bench reports and does not judge: a section that shows a known
//! problem (a quadratic log, a boot that fails) prints what it saw. It exits
//! non-zero only when it cannot run at all (no binary).
//!
//! `cargo bench -p agentkit --bench core -- [--quick] [--only NAME] [--json]
//! [--json-file PATH] [--seed N]`, or `cargo xtask bench core [args]`.
//!
//! The load client is a thin reqwest wrapper written here rather than
//! `agentkit::client`: the bench needs the raw bytes of each streamed line
//! (to count stream bytes and to parse only an event's `type` and `index`),
//! which that client does not expose.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};

/// (concurrency, turns) per throughput level; `--quick` runs a tenth.
const LEVELS: &[(usize, usize)] = &[(1, 500), (8, 2_000), (64, 5_000)];
const SECTIONS: &[&str] = &[
    "throughput",
    "tool",
    "tool-worker",
    "ttfe",
    "rss",
    "log",
    "growth",
    "boot",
    "soak",
];
/// The agents of the bench project: a short reply, a long one, the soak's.
const SHORT: &str = "short";
/// The tool workload's agent: one `printf` call, then the short reply.
const TOOL: &str = "tool";
/// The same turn with the tool a Python worker (`worker = true`): one
/// process started on the first call, then a line each way per call.
const TOOL_WORKER: &str = "tool-worker";
const LONG: &str = "long";
const SOAK: &str = "soak";

struct Args {
    quick: bool,
    only: Option<String>,
    json: bool,
    json_file: Option<PathBuf>,
    seed: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        quick: false,
        only: None,
        json: false,
        json_file: None,
        seed: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => args.quick = true,
            "--json" => args.json = true,
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
            "--json-file" => {
                args.json_file = Some(it.next().ok_or("--json-file takes a path")?.into());
            }
            "--seed" => {
                let seed = it.next().ok_or("--seed takes a number")?;
                args.seed = seed
                    .parse()
                    .map_err(|_| format!("--seed `{seed}` is not a number"))?;
            }
            // `cargo bench` passes `--bench` to every harness = false target.
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
        // `cargo bench` runs this from the package folder: a relative path
        // that is not found there is taken from the workspace root.
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
    // Pin this process before the runtime starts its threads, so that they
    // inherit the mask and the server keeps core 0 to itself.
    let cpus = cpu_count();
    let pinned = cpus >= 2 && taskset_available() && pin_self_to_core(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(if pinned { 1 } else { 2 })
        .enable_all()
        .build()
        .unwrap();
    let env = Env {
        bin,
        cpus,
        pinned,
        quick: args.quick,
        http: reqwest::Client::builder()
            .pool_max_idle_per_host(usize::MAX)
            .tcp_nodelay(true)
            .build()
            .unwrap(),
    };
    runtime.block_on(run(&env, &args));
    std::process::ExitCode::SUCCESS
}

/// `target/release/agentkit-serve` of this workspace.
fn default_bin() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace_root().join("target"), PathBuf::from);
    target.join("release").join("agentkit-serve")
}

fn workspace_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// The 1-minute load average: how busy the machine was besides the bench.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_default()
}

/// What every section shares.
struct Env {
    bin: PathBuf,
    /// Before this process pinned itself to one.
    cpus: usize,
    pinned: bool,
    quick: bool,
    http: reqwest::Client,
}

async fn run(env: &Env, args: &Args) {
    let wanted = |name: &str| args.only.as_deref().is_none_or(|only| only == name);
    let project = tempfile::tempdir().unwrap();
    write_project(project.path());
    let mut out = String::new();
    let version = Command::new(&env.bin)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "agentkit session-core benchmark{}\nserver: {} ({version})\ncpus: {}, server pinned to core 0 and client to core 1: {}\nseed: {}\n",
        if env.quick { " (--quick)" } else { "" },
        env.bin.display(),
        env.cpus,
        env.pinned,
        args.seed,
    );
    if !args.json {
        print!("{out}");
    }
    let mut doc = json!({
        "server": env.bin.display().to_string(),
        "version": version,
        "cpus": env.cpus,
        "pinned": env.pinned,
        "quick": env.quick,
        "seed": args.seed,
        "loadAverageAtStart": load_average(),
    });
    let mut section = |name: &str, text: String, value: Value| {
        if !args.json {
            println!("{text}");
        }
        doc[name] = value;
    };
    let project = project.path();
    if wanted("throughput") {
        let (text, value) = throughput(env, project, LEVELS, SHORT).await;
        section("throughput", text, value);
    } else if wanted("ttfe") {
        let (text, value) = throughput(env, project, &LEVELS[..1], SHORT).await;
        section("ttfe", text, value);
    }
    if wanted("tool") {
        let (text, value) = throughput(env, project, LEVELS, TOOL).await;
        section("tool", text, value);
    }
    if wanted("tool-worker") {
        let (text, value) = throughput(env, project, LEVELS, TOOL_WORKER).await;
        section("tool-worker", text, value);
    }
    if wanted("rss") {
        let (text, value) = rss(env, project).await;
        section("rss", text, value);
    }
    if wanted("log") {
        let (text, value) = log_size(env, project).await;
        section("log", text, value);
    }
    if wanted("growth") {
        let (text, value) = growth(env, project).await;
        section("growth", text, value);
    }
    if wanted("boot") {
        let (text, value) = boot(env, project).await;
        section("boot", text, value);
    }
    if wanted("soak") {
        let (text, value) = soak(env, project, args.seed).await;
        section("soak", text, value);
    }
    doc["loadAverageAtEnd"] = json!(load_average());
    if !args.json {
        println!(
            "1-minute load average: {} at the start, {} at the end (2 would be both cores busy)",
            doc["loadAverageAtStart"].as_str().unwrap_or_default(),
            doc["loadAverageAtEnd"].as_str().unwrap_or_default()
        );
    }
    let rendered = serde_json::to_string_pretty(&doc).unwrap();
    if args.json {
        println!("{rendered}");
    }
    if let Some(path) = &args.json_file {
        std::fs::write(path, format!("{rendered}\n")).unwrap();
    }
}

// ---------------------------------------------------------------------------
// The project

/// A reply of `n` words (about 5.75 bytes a word with its space), streamed
/// by the scripted model in deltas of three words.
fn words(n: usize) -> String {
    const WORDS: &[&str] = &[
        "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dogs", "while", "agents",
        "stream", "their", "replies",
    ];
    let mut text = String::new();
    for i in 0..n {
        if i > 0 {
            text.push(' ');
        }
        text.push_str(WORDS[i % WORDS.len()]);
    }
    text
}

/// The short reply: 14 words, 80 bytes, 20 tokens by the scripted model's
/// quarter-of-the-characters estimate, in 5 deltas.
fn short_reply() -> String {
    words(14)
}

/// The long reply: 4,000 words, about 23 KB, in 1,334 deltas.
fn long_reply() -> String {
    words(4_000)
}

fn write_project(dir: &Path) {
    for (slug, reply) in [
        (SHORT, short_reply()),
        (LONG, long_reply()),
        (SOAK, words(150)),
    ] {
        let agent = dir.join(slug).join("agent");
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::write(
            agent.join("agent.toml"),
            format!("description = \"session-core benchmark: {slug}\"\nmodel = \"scripted:script.json\"\n"),
        )
        .unwrap();
        std::fs::write(agent.join("instructions.md"), "Answer briefly.\n").unwrap();
        let script = json!({"turns": [{"steps": [{"text": reply}]}]});
        std::fs::write(agent.join("script.json"), script.to_string()).unwrap();
    }
    let agent = dir.join(TOOL).join("agent");
    std::fs::create_dir_all(agent.join("tools")).unwrap();
    std::fs::write(
        agent.join("agent.toml"),
        "description = \"session-core benchmark: tool\"\nmodel = \"scripted:script.json\"\n",
    )
    .unwrap();
    std::fs::write(agent.join("instructions.md"), "Answer briefly.\n").unwrap();
    std::fs::write(
        agent.join("tools/stamp.toml"),
        "description = \"Prints ok\"\ncommand = [\"printf\", \"ok\"]\n",
    )
    .unwrap();
    let script = json!({"turns": [{"steps": [
        {"toolCalls": [{"name": "stamp", "input": {}}]},
        {"text": short_reply()},
    ]}]});
    std::fs::write(agent.join("script.json"), script.to_string()).unwrap();
    let worker = dir.join(TOOL_WORKER).join("agent");
    std::fs::create_dir_all(worker.join("tools")).unwrap();
    for file in ["agent.toml", "instructions.md", "script.json"] {
        std::fs::copy(agent.join(file), worker.join(file)).unwrap();
    }
    std::fs::write(
        worker.join("tools/stamp.toml"),
        "description = \"Prints ok\"\ncommand = [\"python3\", \"stamp.py\"]\n[worker]\nconcurrency = 64\n",
    )
    .unwrap();
    // The protocol's helper as the docs give it, answering `ok`.
    std::fs::write(
        worker.join("tools/stamp.py"),
        "import json, sys\n\
         for line in sys.stdin:\n\
         \x20   if not line.strip():\n\
         \x20       continue\n\
         \x20   call = json.loads(line)\n\
         \x20   sys.stdout.write(json.dumps({\"id\": call[\"id\"], \"output\": \"ok\"}) + \"\\n\")\n\
         \x20   sys.stdout.flush()\n",
    )
    .unwrap();
}

// ---------------------------------------------------------------------------
// The server process

/// A running `agentkit-serve`, killed when dropped.
struct Server {
    child: Child,
    base: String,
    log: PathBuf,
    /// From spawn to the first `200` of `/v1/health`.
    boot: Duration,
}

impl Server {
    /// Spawns the server on `state` and waits for `/v1/health`.
    async fn start(env: &Env, project: &Path, state: &Path) -> Result<Server, String> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("cannot pick a free port: {e}"))?
            .port();
        std::fs::create_dir_all(state)
            .map_err(|e| format!("cannot create {}: {e}", state.display()))?;
        let log = state.with_extension("server.log");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
        let mut command = if env.pinned {
            let mut c = Command::new("taskset");
            c.args(["-c", "0"]).arg(&env.bin);
            c
        } else {
            Command::new(&env.bin)
        };
        command
            .arg("--dir")
            .arg(project)
            .arg("--state-root")
            .arg(state)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--allow-anonymous", "--no-schedules"])
            .stdin(Stdio::null())
            .stdout(file.try_clone().map_err(|e| e.to_string())?)
            .stderr(file);
        let started = Instant::now();
        let child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", env.bin.display()))?;
        let mut server = Server {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
            boot: Duration::ZERO,
        };
        let health = format!("{}/v1/health", server.base);
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!(
                    "the server exited ({status}) before answering /v1/health: {}",
                    server.log_tail()
                ));
            }
            if started.elapsed() > Duration::from_secs(900) {
                return Err(format!(
                    "no /v1/health answer in 900 s: {}",
                    server.log_tail()
                ));
            }
            if let Ok(r) = env.http.get(&health).send().await
                && r.status().is_success()
            {
                server.boot = started.elapsed();
                return Ok(server);
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    fn pid(&self) -> u32 {
        // `taskset -c 0 CMD` execs CMD, so the pid is the server's.
        self.child.id()
    }

    fn cpu_ms(&self) -> f64 {
        cpu_ms(&format!("/proc/{}/stat", self.pid()))
    }

    fn rss_kib(&self) -> u64 {
        rss_kib(&format!("/proc/{}/status", self.pid()))
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// SIGKILL, then reap.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM (a graceful shutdown), SIGKILL after 20 s.
    fn stop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().rev().take(5).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

// ---------------------------------------------------------------------------
// The load client

/// The two fields of an event the client needs.
#[derive(Deserialize)]
struct Head {
    #[serde(rename = "type")]
    kind: String,
    index: u64,
}

/// An NDJSON answer read line by line.
struct Lines {
    response: reqwest::Response,
    buffer: Vec<u8>,
    bytes: u64,
}

impl Lines {
    /// The next complete line (without its newline); `None` at the end.
    async fn next(&mut self) -> Result<Option<Vec<u8>>, String> {
        loop {
            if let Some(pos) = self.buffer.iter().position(|&b| b == b'\n') {
                let mut line: Vec<u8> = self.buffer.drain(..=pos).collect();
                line.pop();
                return Ok(Some(line));
            }
            match self.response.chunk().await.map_err(|e| e.to_string())? {
                Some(chunk) => {
                    self.bytes += chunk.len() as u64;
                    self.buffer.extend_from_slice(&chunk);
                }
                None if self.buffer.is_empty() => return Ok(None),
                None => return Err("the stream ended inside a line".to_owned()),
            }
        }
    }
}

async fn post(http: &reqwest::Client, url: &str, body: &Value) -> Result<Value, String> {
    let response = http
        .post(url)
        .json(body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let text = response.text().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("POST {url}: {status}: {text}"));
    }
    serde_json::from_str(&text).map_err(|e| format!("POST {url}: {e}"))
}

async fn get_lines(http: &reqwest::Client, url: &str) -> Result<Lines, String> {
    let response = http.get(url).send().await.map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        let status = response.status();
        return Err(format!(
            "GET {url}: {status}: {}",
            response.text().await.unwrap_or_default()
        ));
    }
    Ok(Lines {
        response,
        buffer: Vec::new(),
        bytes: 0,
    })
}

/// Where a conversation stands between turns.
#[derive(Clone)]
struct Cursor {
    session_id: String,
    token: String,
    next_index: u64,
}

/// One turn's figures, from the start of the POST.
struct Turn {
    cursor: Cursor,
    post: Duration,
    first_line: Duration,
    total: Duration,
    stream_bytes: u64,
    events: u64,
}

/// Sends `message` (a new session, or a follow-up at `cursor`) and reads the
/// stream until `session.waiting`.
async fn turn(
    http: &reqwest::Client,
    server: &str,
    slug: &str,
    cursor: Option<&Cursor>,
    message: &str,
) -> Result<Turn, String> {
    let t0 = Instant::now();
    let (answer, start) = match cursor {
        None => (
            post(
                http,
                &format!("{server}/{slug}/v1/session"),
                &json!({"message": message}),
            )
            .await?,
            0,
        ),
        Some(c) => (
            post(
                http,
                &format!("{server}/{slug}/v1/session/{}", c.session_id),
                &json!({"message": message, "continuationToken": c.token}),
            )
            .await?,
            c.next_index,
        ),
    };
    let posted = t0.elapsed();
    let field = |name: &str| {
        answer[name]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("the answer has no `{name}`: {answer}"))
    };
    let (session_id, token, stream_url) = (
        field("sessionId")?,
        field("continuationToken")?,
        field("streamUrl")?,
    );
    let mut lines = get_lines(http, &format!("{server}{stream_url}?startIndex={start}")).await?;
    let mut first_line = None;
    let mut events = 0;
    let mut next_index = start;
    loop {
        let Some(line) = lines.next().await? else {
            return Err(format!(
                "the stream of {session_id} ended before session.waiting"
            ));
        };
        first_line.get_or_insert_with(|| t0.elapsed());
        events += 1;
        let head: Head =
            serde_json::from_slice(&line).map_err(|e| format!("bad event line: {e}"))?;
        next_index = next_index.max(head.index + 1);
        if head.kind == "session.waiting" {
            break;
        }
    }
    Ok(Turn {
        cursor: Cursor {
            session_id,
            token,
            next_index,
        },
        post: posted,
        first_line: first_line.unwrap_or_default(),
        total: t0.elapsed(),
        stream_bytes: lines.bytes,
        events,
    })
}

// ---------------------------------------------------------------------------
// 1, 2: throughput, CPU per turn, time to first event

async fn throughput(
    env: &Env,
    project: &Path,
    levels: &[(usize, usize)],
    slug: &'static str,
) -> (String, Value) {
    let mut text = if slug == TOOL {
        String::from(
            "== tool turns/s and CPU per turn (model → one sandboxed `printf` → scripted 20-token reply; a fresh server per level)\n",
        )
    } else if slug == TOOL_WORKER {
        String::from(
            "== tool turns/s and CPU per turn, the tool a sandboxed Python worker (model → one call → scripted 20-token reply; a fresh server per level; the worker process's own CPU is not in the server's)\n",
        )
    } else {
        String::from(
            "== turns/s and CPU per turn (scripted 20-token reply; a fresh server per level)\n",
        )
    };
    let _ = writeln!(
        text,
        "{:>4} {:>6} {:>6} {:>8} {:>10} {:>7} {:>10} {:>7} {:>7} {:>9} {:>9}",
        "c",
        "turns",
        "errors",
        "turns/s",
        "server ms",
        "busy %",
        "client ms",
        "p50 ms",
        "p99 ms",
        "TTFE p50",
        "TTFE p99"
    );
    let mut rows = Vec::new();
    for &(concurrency, turns) in levels {
        let turns = if env.quick { turns / 10 } else { turns };
        let state = tempfile::tempdir().unwrap();
        let server = match Server::start(env, project, &state.path().join("state")).await {
            Ok(s) => s,
            Err(e) => {
                let _ = writeln!(text, "{concurrency:>4} cannot start the server: {e}");
                rows.push(json!({"concurrency": concurrency, "error": e}));
                continue;
            }
        };
        // Warm-up: connections, lazy state, the allocator.
        for i in 0..20 {
            let _ = turn(&env.http, &server.base, slug, None, &format!("warm up {i}")).await;
        }
        if (slug == TOOL || slug == TOOL_WORKER)
            && let Err(e) = tool_ran(&env.http, &server.base, slug).await
        {
            let _ = writeln!(text, "{concurrency:>4} the tool did not run: {e}");
            rows.push(json!({"concurrency": concurrency, "error": e}));
            continue;
        }
        let r = level(env, &server, concurrency, turns, slug).await;
        let ok = r.samples.len();
        let per = |ms: f64| if ok == 0 { 0.0 } else { ms / ok as f64 };
        let wall = r.wall.as_secs_f64();
        let totals: Vec<f64> = r.samples.iter().map(|s| ms(s.total)).collect();
        let firsts: Vec<f64> = r.samples.iter().map(|s| ms(s.first_line)).collect();
        let posts: Vec<f64> = r.samples.iter().map(|s| ms(s.post)).collect();
        let row = json!({
            "concurrency": concurrency,
            "turns": ok,
            "errors": r.errors,
            "firstErrors": r.first_errors,
            "turnsPerSecond": ok as f64 / wall,
            "serverCpuMsPerTurn": per(r.server_cpu_ms),
            "serverBusyPercent": 100.0 * r.server_cpu_ms / 1000.0 / wall,
            "clientCpuMsPerTurn": per(r.client_cpu_ms),
            "clientBusyPercent": 100.0 * r.client_cpu_ms / 1000.0 / wall,
            "latencyMsP50": percentile(&totals, 0.50),
            "latencyMsP99": percentile(&totals, 0.99),
            "postMsP50": percentile(&posts, 0.50),
            "ttfeMsP50": percentile(&firsts, 0.50),
            "ttfeMsP99": percentile(&firsts, 0.99),
            "serverRssKib": server.rss_kib(),
        });
        let _ = writeln!(
            text,
            "{:>4} {:>6} {:>6} {:>8.0} {:>10.3} {:>7.0} {:>10.3} {:>7.2} {:>7.2} {:>9.2} {:>9.2}",
            concurrency,
            ok,
            r.errors,
            row["turnsPerSecond"].as_f64().unwrap_or(0.0),
            row["serverCpuMsPerTurn"].as_f64().unwrap_or(0.0),
            row["serverBusyPercent"].as_f64().unwrap_or(0.0),
            row["clientCpuMsPerTurn"].as_f64().unwrap_or(0.0),
            row["latencyMsP50"].as_f64().unwrap_or(0.0),
            row["latencyMsP99"].as_f64().unwrap_or(0.0),
            row["ttfeMsP50"].as_f64().unwrap_or(0.0),
            row["ttfeMsP99"].as_f64().unwrap_or(0.0),
        );
        for e in &r.first_errors {
            let _ = writeln!(text, "     error: {e}");
        }
        rows.push(row);
    }
    text.push_str(
        "(server ms / client ms: CPU per turn from /proc; busy %: server CPU over wall time; \
         p50/p99: POST start to session.waiting; TTFE: POST start to the first streamed line)\n",
    );
    (text, Value::Array(rows))
}

/// One tool turn, read whole: its `action.result` must be the tool's
/// own `ok`, so the tool workload measures a call that ran.
async fn tool_ran(http: &reqwest::Client, base: &str, slug: &str) -> Result<(), String> {
    let t = turn(http, base, slug, None, "check").await?;
    let url = format!(
        "{base}/{slug}/v1/session/{}/stream?startIndex=0",
        t.cursor.session_id
    );
    let mut lines = get_lines(http, &url).await?;
    while let Some(line) = lines.next().await? {
        let event: Value = serde_json::from_slice(&line).map_err(|e| e.to_string())?;
        if event["type"] == "action.result" {
            let data = &event["data"];
            return if data["isError"] == false && data["output"] == "ok" {
                Ok(())
            } else {
                Err(format!("the tool answered {data}"))
            };
        }
        if event["type"] == "session.waiting" {
            break;
        }
    }
    Err("no action.result in the turn".to_owned())
}

struct Sample {
    post: Duration,
    first_line: Duration,
    total: Duration,
}

struct LevelResult {
    wall: Duration,
    samples: Vec<Sample>,
    errors: usize,
    first_errors: Vec<String>,
    server_cpu_ms: f64,
    client_cpu_ms: f64,
}

async fn level(
    env: &Env,
    server: &Server,
    concurrency: usize,
    turns: usize,
    slug: &'static str,
) -> LevelResult {
    let next = Arc::new(AtomicUsize::new(0));
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let (server_cpu, client_cpu) = (server.cpu_ms(), self_cpu_ms());
    let start = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let (http, base, next, errors) = (
            env.http.clone(),
            server.base.clone(),
            next.clone(),
            errors.clone(),
        );
        workers.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= turns {
                    break;
                }
                match turn(&http, &base, slug, None, &format!("hello {n}")).await {
                    Ok(t) => samples.push(Sample {
                        post: t.post,
                        first_line: t.first_line,
                        total: t.total,
                    }),
                    Err(e) => errors.lock().unwrap().push(e),
                }
            }
            samples
        }));
    }
    let mut samples = Vec::with_capacity(turns);
    for w in workers {
        samples.extend(w.await.unwrap());
    }
    let wall = start.elapsed();
    let server_cpu_ms = server.cpu_ms() - server_cpu;
    let client_cpu_ms = self_cpu_ms() - client_cpu;
    let errors = std::mem::take(&mut *errors.lock().unwrap());
    LevelResult {
        wall,
        samples,
        errors: errors.len(),
        first_errors: errors.into_iter().take(3).collect(),
        server_cpu_ms,
        client_cpu_ms,
    }
}

// ---------------------------------------------------------------------------
// 3: RSS idle and per stored session

async fn rss(env: &Env, project: &Path) -> (String, Value) {
    let n = if env.quick { 200 } else { 2_000 };
    let mut text =
        format!("== RSS per stored session ({n} settled sessions of the short reply, c=8)\n");
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let result: Result<Value, String> = async {
        let mut server = Server::start(env, project, &state).await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let idle = server.rss_kib();
        let r = level(env, &server, 8, n, SHORT).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let after = server.rss_kib();
        server.stop();
        let restarted = Server::start(env, project, &state).await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let after_restart = restarted.rss_kib();
        let per = |kib: u64| (kib as f64 - idle as f64) / n as f64;
        let _ = writeln!(
            text,
            "idle after boot:                {:>8.1} MiB",
            idle as f64 / 1024.0
        );
        let _ = writeln!(
            text,
            "after {n} settled sessions:   {:>8.1} MiB  ({:.2} KiB per session; {} errors)",
            after as f64 / 1024.0,
            per(after),
            r.errors
        );
        let _ = writeln!(
            text,
            "after a restart with them:      {:>8.1} MiB  ({:.2} KiB per session; boot {:.0} ms)",
            after_restart as f64 / 1024.0,
            per(after_restart),
            ms(restarted.boot)
        );
        Ok(json!({
            "sessions": n,
            "errors": r.errors,
            "idleKib": idle,
            "afterSessionsKib": after,
            "kibPerSession": per(after),
            "afterRestartKib": after_restart,
            "kibPerSessionAfterRestart": per(after_restart),
            "restartBootMs": ms(restarted.boot),
        }))
    }
    .await;
    finish(text, result)
}

/// A section's text and value, or the error that stopped it.
fn finish(mut text: String, result: Result<Value, String>) -> (String, Value) {
    match result {
        Ok(v) => (text, v),
        Err(e) => {
            let _ = writeln!(text, "could not finish: {e}");
            (text, json!({"error": e}))
        }
    }
}

// ---------------------------------------------------------------------------
// 4: log bytes per reply byte

async fn log_size(env: &Env, project: &Path) -> (String, Value) {
    let reply = long_reply();
    let mut text = format!(
        "== log bytes per reply byte (one reply of {} bytes, 4,000 words in {} deltas)\n",
        reply.len(),
        4_000_usize.div_ceil(3)
    );
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let result: Result<Value, String> = async {
        let server = Server::start(env, project, &state).await?;
        let t = turn(&env.http, &server.base, LONG, None, "write the long reply").await?;
        let session_dir = find_session_dir(&state.join(LONG), &t.cursor.session_id);
        // The same stream for a follower that asks for deltas only
        // (`?text=false`; a server without the parameter ignores it).
        let deltas_only = stream_bytes(
            &env.http,
            &server.url(&format!(
                "/{LONG}/v1/session/{}/stream?startIndex=0&text=false",
                t.cursor.session_id
            )),
        )
        .await?;
        let log = file_len(&session_dir.join("events.ndjson"));
        let folder = dir_len(&session_dir, Some("workspace"));
        let events = t.cursor.next_index;
        let bound = 4 * reply.len() as u64 + 300 * events;
        let ratio = |b: u64| b as f64 / reply.len() as f64;
        let _ = writeln!(text, "events:                  {events}");
        let _ = writeln!(
            text,
            "events.ndjson on disk:   {:>12} bytes  ({:.1} per reply byte)",
            log,
            ratio(log)
        );
        let _ = writeln!(
            text,
            "session folder on disk:  {:>12} bytes  ({:.1} per reply byte; without workspace/)",
            folder,
            ratio(folder)
        );
        let _ = writeln!(
            text,
            "stream to session.waiting:{:>11} bytes  ({:.1} per reply byte)",
            t.stream_bytes,
            ratio(t.stream_bytes)
        );
        let _ = writeln!(
            text,
            "the same, ?text=false:    {:>11} bytes  ({:.1} per reply byte)",
            deltas_only,
            ratio(deltas_only)
        );
        let _ = writeln!(
            text,
            "issue 12 bound (4 x reply + 300 B per event): {bound} bytes; log within it: {}",
            log <= bound
        );
        Ok(json!({
            "replyBytes": reply.len(),
            "events": events,
            "logBytes": log,
            "logBytesPerReplyByte": ratio(log),
            "sessionFolderBytes": folder,
            "streamBytes": t.stream_bytes,
            "streamBytesPerReplyByte": ratio(t.stream_bytes),
            "streamBytesTextFalse": deltas_only,
            "boundBytes": bound,
            "withinBound": log <= bound,
        }))
    }
    .await;
    finish(text, result)
}

/// The bytes of a stream read until `session.waiting`.
async fn stream_bytes(http: &reqwest::Client, url: &str) -> Result<u64, String> {
    let mut lines = get_lines(http, url).await?;
    while let Some(line) = lines.next().await? {
        let head: Head =
            serde_json::from_slice(&line).map_err(|e| format!("bad event line: {e}"))?;
        if head.kind == "session.waiting" {
            return Ok(lines.bytes);
        }
    }
    Err(format!("{url} ended before session.waiting"))
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// The bytes of every file under `dir`, skipping a top-level `skip` folder.
fn dir_len(dir: &Path, skip: Option<&str>) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut total = 0;
    for entry in entries.flatten() {
        if skip.is_some_and(|s| entry.file_name() == s) {
            continue;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            total += dir_len(&entry.path(), None);
        } else {
            total += entry.metadata().map_or(0, |m| m.len());
        }
    }
    total
}

// ---------------------------------------------------------------------------
// 5: turn-cost growth over long turns

async fn growth(env: &Env, project: &Path) -> (String, Value) {
    let turns = if env.quick { 6 } else { 20 };
    let mut text =
        format!("== turn-cost growth: {turns} turns in one session, each the ~23 KB reply\n");
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let result: Result<Value, String> = async {
        let server = Server::start(env, project, &state).await?;
        let mut cursor: Option<Cursor> = None;
        let mut rows = Vec::new();
        let _ = writeln!(
            text,
            "{:>4} {:>10} {:>10} {:>9} {:>13} {:>10}",
            "turn", "server ms", "client ms", "wall ms", "log MB", "RSS MiB"
        );
        for k in 1..=turns {
            let (s0, c0) = (server.cpu_ms(), self_cpu_ms());
            let t = turn(
                &env.http,
                &server.base,
                LONG,
                cursor.as_ref(),
                &format!("turn {k}"),
            )
            .await?;
            // Let work after session.waiting (metadata writes) land in this turn.
            tokio::time::sleep(Duration::from_millis(50)).await;
            let (server_ms, client_ms) = (server.cpu_ms() - s0, self_cpu_ms() - c0);
            let log = file_len(
                &find_session_dir(&state.join(LONG), &t.cursor.session_id).join("events.ndjson"),
            );
            let rss = server.rss_kib();
            let _ = writeln!(
                text,
                "{k:>4} {server_ms:>10.0} {client_ms:>10.0} {:>9.0} {:>13.1} {:>10.1}",
                ms(t.total),
                log as f64 / 1e6,
                rss as f64 / 1024.0
            );
            rows.push(json!({
                "turn": k,
                "serverCpuMs": server_ms,
                "clientCpuMs": client_ms,
                "wallMs": ms(t.total),
                "streamBytes": t.stream_bytes,
                "events": t.events,
                "logBytes": log,
                "serverRssKib": rss,
            }));
            cursor = Some(t.cursor);
        }
        let cost = |k: usize| rows[k - 1]["serverCpuMs"].as_f64().unwrap_or(0.0);
        let ratio = cost(turns) / cost(2).max(1e-9);
        let _ = writeln!(
            text,
            "server CPU: turn 2 {:.0} ms, turn {turns} {:.0} ms, ratio {ratio:.2} \
             (/proc ticks are 10 ms: small turns are coarse)",
            cost(2),
            cost(turns)
        );
        Ok(json!({
            "turns": rows,
            "turn2ServerCpuMs": cost(2),
            "lastTurnServerCpuMs": cost(turns),
            "lastOverTurn2": ratio,
        }))
    }
    .await;
    finish(text, result)
}

// ---------------------------------------------------------------------------
// 6: boot time with many stored sessions

async fn boot(env: &Env, project: &Path) -> (String, Value) {
    let n = if env.quick { 5_000 } else { 100_000 };
    let mut text = format!("== boot with {n} stored sessions\n");
    let dir = tempfile::tempdir().unwrap();
    let (template_state, state) = (dir.path().join("template"), dir.path().join("state"));
    let result: Result<Value, String> = async {
        // A real settled session written by the server under test is the
        // template, so the copies' logs have the shape that server writes.
        let mut server = Server::start(env, project, &template_state).await?;
        let empty_boot = server.boot;
        let t = turn(&env.http, &server.base, SHORT, None, "template").await?;
        tokio::time::sleep(Duration::from_millis(200)).await;
        server.stop();
        let folder = find_session_dir(&template_state.join(SHORT), &t.cursor.session_id);
        let mut template = read_tree(&folder);
        // The copies are written in the folder layout of 858b0a1
        // (`sessions/<id>/session.json` + `events.ndjson`), which every
        // version reads; a core that keeps metadata elsewhere (an index)
        // wrote no `session.json`, so one is made in that shape.
        if !template.iter().any(|(p, _)| p == Path::new("session.json")) {
            template.push(("session.json".into(), legacy_meta(&template, &t.cursor)));
        }
        let sessions = state.join(SHORT).join("sessions");
        let started = Instant::now();
        let ids = generate_sessions(&sessions, &template, &t.cursor, n);
        let generated = started.elapsed();
        let _ = writeln!(
            text,
            "generated {n} sessions ({} files each, {} bytes) in {:.1} s",
            template.len(),
            template.iter().map(|(_, b)| b.len()).sum::<usize>(),
            generated.as_secs_f64()
        );
        // Write back what the generation left dirty in the page cache, so
        // the boot does not pay for it.
        let _ = Command::new("sync").status();
        let _ = writeln!(
            text,
            "boot with no sessions:        {:>9.0} ms",
            ms(empty_boot)
        );
        // The first start over these folders may index them (a one-time
        // import for a core with a session index); the second is the boot
        // a restarted host pays every time.
        let mut boots = Vec::new();
        for (round, what) in ["first boot over them", "second boot (restart)"]
            .into_iter()
            .enumerate()
        {
            let mut server = Server::start(env, project, &state).await?;
            tokio::time::sleep(Duration::from_millis(500)).await;
            let rss = server.rss_kib();
            // The copies must be real sessions to the server, or the boot
            // figure means nothing.
            let sampled: Vec<&String> = ids
                .iter()
                .skip(round * 7 + 1)
                .step_by((n / 5).max(1))
                .collect();
            let mut addressable = 0;
            for id in &sampled {
                let url = server.url(&format!("/{SHORT}/v1/session/{id}"));
                if env
                    .http
                    .get(&url)
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success())
                {
                    addressable += 1;
                }
            }
            let _ = writeln!(
                text,
                "{what:<22}{:>12.0} ms (spawn to the first 200 of /v1/health), RSS {:.1} MiB, \
                 sampled copies answering GET: {addressable}/{}",
                ms(server.boot),
                rss as f64 / 1024.0,
                sampled.len()
            );
            boots.push(json!({
                "bootMs": ms(server.boot),
                "rssKib": rss,
                "sampledAddressable": addressable,
                "sampled": sampled.len(),
            }));
            server.stop();
        }
        Ok(json!({
            "sessions": n,
            "generateSeconds": generated.as_secs_f64(),
            "emptyBootMs": ms(empty_boot),
            "bootMs": boots[1]["bootMs"],
            "rssKib": boots[1]["rssKib"],
            "firstBoot": boots[0],
            "secondBoot": boots[1],
        }))
    }
    .await;
    finish(text, result)
}

/// A `session.json` in the shape 858b0a1 wrote, for the template session
/// (owner `anonymous`, created at its first event).
fn legacy_meta(template: &[(PathBuf, Vec<u8>)], cursor: &Cursor) -> Vec<u8> {
    let created_at = template
        .iter()
        .find(|(p, _)| p == Path::new("events.ndjson"))
        .and_then(|(_, b)| b.split(|&c| c == b'\n').next())
        .and_then(|line| serde_json::from_slice::<Value>(line).ok())
        .and_then(|e| e["at"].as_str().map(str::to_owned))
        .unwrap_or_else(|| "2026-01-01T00:00:00.000Z".to_owned());
    let meta = json!({
        "id": cursor.session_id,
        "channel": "http",
        "mode": "chat",
        "owner": {
            "principalId": "anonymous",
            "principalType": "anonymous",
            "authenticator": "allowAll",
        },
        "continuationToken": cursor.token,
        "createdAt": created_at,
    });
    serde_json::to_vec_pretty(&meta).unwrap()
}

/// The folder of session `id` under an agent's state: `sessions/<id>` as
/// 858b0a1 lays it out, else wherever below (up to three levels) a folder
/// of that name is.
fn find_session_dir(agent_state: &Path, id: &str) -> PathBuf {
    fn search(dir: &Path, id: &str, depth: usize) -> Option<PathBuf> {
        let entries = std::fs::read_dir(dir).ok()?;
        let dirs: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        if let Some(hit) = dirs.iter().find(|p| p.file_name().is_some_and(|n| n == id)) {
            return Some(hit.clone());
        }
        if depth == 0 {
            return None;
        }
        dirs.iter().find_map(|d| search(d, id, depth - 1))
    }
    let usual = agent_state.join("sessions").join(id);
    if usual.is_dir() {
        return usual;
    }
    search(agent_state, id, 3).unwrap_or(usual)
}

/// Every file under `dir`, as (relative path, bytes).
fn read_tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(root, &path, out);
            } else if let Ok(bytes) = std::fs::read(&path) {
                out.push((path.strip_prefix(root).unwrap().to_path_buf(), bytes));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out
}

/// Writes `n` copies of `template` under `sessions`, each with its own
/// session id and continuation token (same lengths as the originals);
/// returns the ids.
fn generate_sessions(
    sessions: &Path,
    template: &[(PathBuf, Vec<u8>)],
    cursor: &Cursor,
    n: usize,
) -> Vec<String> {
    let id = &cursor.session_id;
    let token = &cursor.token;
    // Keep each prefix and replace the tail with the copy's number in hex.
    let renumber = |original: &str, i: usize| {
        let tail = format!("{i:x}");
        format!("{}{tail}", &original[..original.len() - tail.len()])
    };
    let template: Vec<(PathBuf, String)> = template
        .iter()
        .map(|(p, b)| (p.clone(), String::from_utf8_lossy(b).into_owned()))
        .collect();
    let ids: Vec<String> = (0..n).map(|i| renumber(id, 0x1000_0000 + i)).collect();
    let threads = 4;
    std::thread::scope(|scope| {
        for part in 0..threads {
            let (ids, template) = (&ids, &template);
            scope.spawn(move || {
                for i in (part..n).step_by(threads) {
                    let new_id = &ids[i];
                    let new_token = renumber(token, 0x1000_0000 + i);
                    let dir = sessions.join(new_id);
                    for (path, text) in template {
                        let target = dir.join(path);
                        if let Some(parent) = target.parent() {
                            std::fs::create_dir_all(parent).unwrap();
                        }
                        let body = text
                            .replace(id.as_str(), new_id)
                            .replace(token.as_str(), &new_token);
                        std::fs::write(&target, body).unwrap();
                    }
                }
            });
        }
    });
    ids
}

// ---------------------------------------------------------------------------
// 7: kill -9 soak

/// What the server acknowledged for one session.
#[derive(Default)]
struct Acked {
    /// The current token; `None` while a follow-up is in flight or after
    /// one whose answer was lost (the token may have rotated).
    token: Option<String>,
    /// Every message answered with 200, the first one included.
    messages: Vec<String>,
}

#[derive(Default)]
struct Ledger {
    sessions: HashMap<String, Acked>,
    order: Vec<String>,
    followups: usize,
}

/// A small xorshift generator: the soak's kill points and choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

async fn soak(env: &Env, project: &Path, seed: u64) -> (String, Value) {
    let kills = if env.quick { 3 } else { 15 };
    let clients = 16;
    let mut text = format!(
        "== kill -9 soak: {kills} kills, {clients} clients creating sessions (150-word reply) and following up\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let mut rng = Rng(seed | 1);
    let client_errors = Arc::new(AtomicU64::new(0));
    let result: Result<Value, String> = async {
        for round in 0..kills {
            let mut server = Server::start(env, project, &state).await?;
            let stop = Arc::new(AtomicBool::new(false));
            let mut tasks = Vec::new();
            for c in 0..clients {
                let (http, base, ledger, stop, errors) = (
                    env.http.clone(),
                    server.base.clone(),
                    ledger.clone(),
                    stop.clone(),
                    client_errors.clone(),
                );
                let seed = rng.next();
                tasks.push(tokio::spawn(async move {
                    soak_client(
                        &http,
                        &base,
                        &ledger,
                        &stop,
                        &errors,
                        Rng(seed | 1),
                        round,
                        c,
                    )
                    .await;
                }));
            }
            let run_for = Duration::from_millis(300 + rng.below(1_700));
            tokio::time::sleep(run_for).await;
            server.kill();
            stop.store(true, Ordering::Relaxed);
            for t in tasks {
                let _ = t.await;
            }
        }
        // The last restart: every acknowledged session must be intact.
        let server = Server::start(env, project, &state).await?;
        let (ids, followups) = {
            let l = ledger.lock().unwrap();
            (l.order.clone(), l.followups)
        };
        let losses = Arc::new(Mutex::new(Vec::<String>::new()));
        let next = Arc::new(AtomicUsize::new(0));
        let recovered = Arc::new(AtomicU64::new(0));
        let ids = Arc::new(ids);
        let mut checkers = Vec::new();
        for _ in 0..8 {
            let (http, base, ids, next, losses, ledger, recovered) = (
                env.http.clone(),
                server.base.clone(),
                ids.clone(),
                next.clone(),
                losses.clone(),
                ledger.clone(),
                recovered.clone(),
            );
            checkers.push(tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(id) = ids.get(i) else { break };
                    let messages = ledger.lock().unwrap().sessions[id].messages.clone();
                    match check_session(&http, &base, id, &messages).await {
                        Ok(n) => {
                            recovered.fetch_add(n, Ordering::Relaxed);
                        }
                        Err(e) => losses.lock().unwrap().push(format!("{id}: {e}")),
                    }
                }
            }));
        }
        for c in checkers {
            let _ = c.await;
        }
        let losses = std::mem::take(&mut *losses.lock().unwrap());
        let _ = writeln!(text, "kills:                        {kills}");
        let _ = writeln!(text, "acknowledged sessions:        {}", ids.len());
        let _ = writeln!(text, "acknowledged follow-ups:      {followups}");
        let _ = writeln!(
            text,
            "client errors (around kills): {}",
            client_errors.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            text,
            "turns recorded as interrupted by a restart: {}",
            recovered.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            text,
            "restart boot:                 {:.0} ms",
            ms(server.boot)
        );
        let _ = writeln!(text, "losses:                       {}", losses.len());
        for l in losses.iter().take(5) {
            let _ = writeln!(text, "  {l}");
        }
        Ok(json!({
            "kills": kills,
            "acknowledgedSessions": ids.len(),
            "acknowledgedFollowUps": followups,
            "clientErrors": client_errors.load(Ordering::Relaxed),
            "restartBootMs": ms(server.boot),
            "turnsInterruptedByRestart": recovered.load(Ordering::Relaxed),
            "losses": losses.len(),
            "firstLosses": losses.iter().take(5).collect::<Vec<_>>(),
        }))
    }
    .await;
    finish(text, result)
}

/// One soak client: until `stop`, either starts a session (and reads part
/// of its stream) or follows up on an acknowledged one.
#[allow(clippy::too_many_arguments)]
async fn soak_client(
    http: &reqwest::Client,
    base: &str,
    ledger: &Mutex<Ledger>,
    stop: &AtomicBool,
    errors: &AtomicU64,
    mut rng: Rng,
    round: usize,
    client: usize,
) {
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let message = format!("r{round}-c{client}-m{n}");
        let follow = rng.below(2) == 0;
        let target = if follow {
            let mut l = ledger.lock().unwrap();
            let len = l.order.len() as u64;
            let mut picked = None;
            for _ in 0..4 {
                let id = l.order.get(rng.below(len) as usize).cloned();
                if let Some(id) = id
                    && let Some(token) = l.sessions.get_mut(&id).and_then(|a| a.token.take())
                {
                    picked = Some((id, token));
                    break;
                }
            }
            picked
        } else {
            None
        };
        let answer = match &target {
            None => {
                post(
                    http,
                    &format!("{base}/{SOAK}/v1/session"),
                    &json!({"message": message}),
                )
                .await
            }
            Some((id, token)) => {
                post(
                    http,
                    &format!("{base}/{SOAK}/v1/session/{id}"),
                    &json!({"message": message, "continuationToken": token}),
                )
                .await
            }
        };
        let answer = match answer {
            Ok(a) => a,
            Err(_) => {
                errors.fetch_add(1, Ordering::Relaxed);
                continue;
            }
        };
        let (Some(id), Some(token)) = (
            answer["sessionId"].as_str(),
            answer["continuationToken"].as_str(),
        ) else {
            errors.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        {
            let mut l = ledger.lock().unwrap();
            if target.is_some() {
                l.followups += 1;
            } else {
                l.order.push(id.to_owned());
            }
            let acked = l.sessions.entry(id.to_owned()).or_default();
            acked.messages.push(message);
            acked.token = Some(token.to_owned());
        }
        // Read part of the stream: sometimes to the end of the turn,
        // sometimes a few lines, sometimes none.
        let lines = rng.below(40);
        if lines > 0
            && let Some(url) = answer["streamUrl"].as_str()
            && let Ok(mut stream) = get_lines(http, &format!("{base}{url}")).await
        {
            for _ in 0..lines {
                match stream.next().await {
                    Ok(Some(line)) => {
                        if serde_json::from_slice::<Head>(&line)
                            .is_ok_and(|h| h.kind == "session.waiting")
                        {
                            break;
                        }
                    }
                    _ => break,
                }
            }
        }
    }
}

/// An acknowledged session after the restart: `/events` reads, every line
/// is a JSON object, indices run from 0 without a gap, it ends settled and
/// every acknowledged message is there, and a stream resumes at its last
/// index. Returns how many turns the server recorded as interrupted by a
/// restart.
async fn check_session(
    http: &reqwest::Client,
    base: &str,
    id: &str,
    messages: &[String],
) -> Result<u64, String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let url = format!("{base}/{SOAK}/v1/session/{id}/events");
        let response = http.get(&url).send().await.map_err(|e| e.to_string())?;
        if !response.status().is_success() {
            return Err(format!("GET /events: {}", response.status()));
        }
        let body = response.text().await.map_err(|e| e.to_string())?;
        let mut received = Vec::new();
        let mut last = String::new();
        let mut recovered = 0;
        let mut count = 0;
        for (i, line) in body.lines().enumerate() {
            let event: Value =
                serde_json::from_str(line).map_err(|e| format!("line {i} is torn: {e}"))?;
            count += 1;
            if event["index"].as_u64() != Some(i as u64) {
                return Err(format!("line {i} has index {}", event["index"]));
            }
            last = event["type"].as_str().unwrap_or_default().to_owned();
            if last == "turn.failed" && event["data"]["reason"] == "restart" {
                recovered += 1;
            }
            if last == "message.received"
                && let Some(text) = event["data"]["text"].as_str()
            {
                received.push(text.to_owned());
            }
        }
        if let Some(missing) = messages.iter().find(|m| !received.contains(m)) {
            return Err(format!(
                "acknowledged message `{missing}` is not in the log"
            ));
        }
        if last == "session.waiting" {
            // Resumable: a stream from the last index answers that event.
            let url = format!(
                "{base}/{SOAK}/v1/session/{id}/stream?startIndex={}",
                count - 1
            );
            let mut stream = get_lines(http, &url).await?;
            let line = stream.next().await?.ok_or("the resumed stream is empty")?;
            let head: Head =
                serde_json::from_slice(&line).map_err(|e| format!("resumed stream: {e}"))?;
            if head.index != count - 1 {
                return Err(format!(
                    "the stream resumed at {} answered index {}",
                    count - 1,
                    head.index
                ));
            }
            return Ok(recovered);
        }
        // A lazily recovering core may settle the session once addressed.
        if Instant::now() > deadline {
            return Err(format!("the log ends with `{last}`, not session.waiting"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// ---------------------------------------------------------------------------
// /proc and small helpers

/// utime + stime of a `/proc/.../stat` file, in milliseconds.
fn cpu_ms(stat: &str) -> f64 {
    let text = std::fs::read_to_string(stat).unwrap_or_default();
    // The command name may hold spaces: the fields start after its `)`.
    let fields: Vec<&str> = text
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    // After `)`, field 3 (state) is index 0, so utime (14) is 11, stime 12.
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) * 1000.0 / clock_ticks()
}

fn self_cpu_ms() -> f64 {
    cpu_ms("/proc/self/stat")
}

fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// `VmRSS` of a `/proc/.../status` file, in KiB (0 where `/proc` is missing).
fn rss_kib(status: &str) -> u64 {
    std::fs::read_to_string(status)
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn cpu_count() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn taskset_available() -> bool {
    Command::new("taskset")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Pins every thread of this process to `core` with `taskset`.
fn pin_self_to_core(core: usize) -> bool {
    Command::new("taskset")
        .args([
            "-a",
            "-cp",
            &core.to_string(),
            &std::process::id().to_string(),
        ])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
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
