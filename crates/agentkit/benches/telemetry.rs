//! Tracing overhead per turn: the same sequential workload on an
//! in-process server with traces off, then on (exported over OTLP/HTTP to
//! the test support's real receiver on loopback), in alternating rounds.
//! A turn is `POST /bot/v1/session` and its stream read until
//! `session.waiting`; the agent answers with the `scripted` model in two
//! steps (a built-in `list` call, then text), so a turn makes two `chat`
//! spans, one `execute_tool`, one `invoke_agent` and the request's server
//! spans: the cheapest turn, where tracing weighs most.
//!
//! Reports wall time and process CPU (server and client share the
//! process; the client's work is the same in both modes) per turn, and the
//! ratio on/off.
//!
//! `cargo bench -p agentkit --bench telemetry --profile dev -- [--quick]
//! [--turns N]`

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::path::Path;
use std::time::{Duration, Instant};

use agentkit::{ServeOptions, TelemetryOptions};
use agentkit_test_support::http::Request;
use agentkit_test_support::otlp::OtlpReceiver;
use serde_json::json;

const SCRIPT: &str = r#"{"turns": [{"steps": [
  {"toolCalls": [{"name": "list", "input": {"path": "."}}], "usage": {"inputTokens": 10, "outputTokens": 3}},
  {"text": "done", "usage": {"inputTokens": 12, "outputTokens": 1}}
]}]}"#;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// This process's user + system CPU time.
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields
        .get(11..13)
        .map(|f| f.iter().filter_map(|v| v.parse::<u64>().ok()).sum())
        .unwrap_or(0);
    // CLK_TCK is 100 on Linux.
    Duration::from_millis(ticks * 10)
}

struct Round {
    wall: Vec<Duration>,
    cpu: Duration,
}

fn round(dir: &Path, telemetry: TelemetryOptions, turns: usize) -> Round {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let state = tempfile::tempdir().unwrap();
    let options = ServeOptions {
        port: 0,
        state_root: Some(state.path().to_owned()),
        telemetry,
        ..ServeOptions::default()
    };
    let handle = rt.block_on(agentkit::serve(dir, options)).unwrap();
    let addr = handle.local_addr();
    let mut wall = Vec::with_capacity(turns);
    let cpu_before = cpu();
    for i in 0..turns {
        let began = Instant::now();
        let r = Request::post("/bot/v1/session")
            .json(&json!({"message": format!("turn {i}")}))
            .send(addr)
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        let url = r.json()["streamUrl"].as_str().unwrap().to_owned();
        let mut lines = Request::get(&url).stream(addr).unwrap();
        loop {
            let e = lines.next_json().unwrap().expect("the stream ended early");
            if e["type"] == "session.waiting" {
                break;
            }
        }
        wall.push(began.elapsed());
    }
    let cpu = cpu().saturating_sub(cpu_before);
    rt.block_on(handle.close());
    Round { wall, cpu }
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let turns = args
        .iter()
        .position(|a| a == "--turns")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(if quick { 100 } else { 400 });
    let rounds = if quick { 2 } else { 3 };
    let project = tempfile::tempdir().unwrap();
    let agent = project.path().join("bot/agent");
    write(
        &agent.join("agent.toml"),
        "model = \"scripted:script.json\"\n",
    );
    write(&agent.join("instructions.md"), "You are a bench agent.\n");
    write(&agent.join("script.json"), SCRIPT);
    let receiver = OtlpReceiver::start();
    let on = TelemetryOptions {
        traces_endpoint: Some(receiver.traces_url()),
        ..Default::default()
    };
    // Warm up both paths once.
    round(project.path(), TelemetryOptions::default(), 20);
    round(project.path(), on.clone(), 20);
    let (mut off_wall, mut on_wall) = (Vec::new(), Vec::new());
    let (mut off_cpu, mut on_cpu) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..rounds {
        let r = round(project.path(), TelemetryOptions::default(), turns);
        off_wall.extend(r.wall);
        off_cpu += r.cpu;
        let r = round(project.path(), on.clone(), turns);
        on_wall.extend(r.wall);
        on_cpu += r.cpu;
    }
    let n = (turns * rounds) as f64;
    let spans = receiver.spans().len();
    let mean = |v: &[Duration]| v.iter().sum::<Duration>().as_secs_f64() / v.len() as f64;
    let (off_mean, on_mean) = (mean(&off_wall), mean(&on_wall));
    let (off_med, on_med) = (median(&mut off_wall), median(&mut on_wall));
    let (off_cpu_turn, on_cpu_turn) = (off_cpu.as_secs_f64() / n, on_cpu.as_secs_f64() / n);
    println!(
        "tracing overhead per turn ({} turns x {rounds} rounds per mode, sequential)",
        turns
    );
    println!(
        "  wall mean   off {:8.3} ms   on {:8.3} ms   ratio {:.3}",
        off_mean * 1e3,
        on_mean * 1e3,
        on_mean / off_mean
    );
    println!(
        "  wall median off {:8.3} ms   on {:8.3} ms   ratio {:.3}",
        off_med.as_secs_f64() * 1e3,
        on_med.as_secs_f64() * 1e3,
        on_med.as_secs_f64() / off_med.as_secs_f64()
    );
    println!(
        "  cpu / turn  off {:8.3} ms   on {:8.3} ms   ratio {:.3}",
        off_cpu_turn * 1e3,
        on_cpu_turn * 1e3,
        if off_cpu_turn > 0.0 {
            on_cpu_turn / off_cpu_turn
        } else {
            f64::NAN
        }
    );
    println!("  spans received: {spans} ({} exports)", receiver.exports());
}
