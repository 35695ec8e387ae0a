//! Load benchmark: sessions per second, turn latency and memory of an
//! in-process server under concurrent clients.
//!
//! Boots `agentkit::serve` on a throwaway project whose model is a
//! `scripted` one-step reply (no tools, no network), then for each
//! concurrency level runs N sessions, each one `POST /v1/session` plus the
//! stream read until `session.waiting`, through [`agentkit::client`].
//! Reports turns/s, p50/p99 turn latency (POST start to `session.waiting`),
//! p50 POST latency, p99 time to first event (from the start of the POST
//! to the first streamed line) and the resident set size. The server runs in this process, so the RSS is the server's plus
//! the clients' (both are small next to the session state).
//!
//! `cargo bench -p agentkit --bench load`; `-- --quick` runs fewer sessions.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentkit::client::Client;
use futures_util::StreamExt;

/// (concurrency, sessions) per level.
const LEVELS: &[(usize, usize)] = &[(1, 200), (8, 800), (64, 2_000)];

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench(quick));
}

async fn bench(quick: bool) {
    let project = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    write_project(project.path());
    let options = agentkit::ServeOptions {
        port: 0,
        state_root: Some(state.path().to_path_buf()),
        ..Default::default()
    };
    let handle = agentkit::serve(project.path(), options).await.unwrap();
    let slug = handle.slugs().remove(0);
    let client = Client::new(&handle.agent_url(&slug), None);

    // One turn to warm up connections and lazy state.
    let (_, events) = client.run_turn(&mut None, "warm up").await.unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.event_type == agentkit::protocol::EventType::TurnCompleted),
        "{events:?}"
    );

    let idle_kb = rss_kb();
    println!("agentkit load benchmark (server in-process; RSS is the whole bench process)");
    println!("idle RSS after boot: {:.1} MiB", idle_kb as f64 / 1024.0);
    println!();
    println!(
        "{:>11} {:>8} {:>8} {:>7} {:>7} {:>12} {:>12} {:>13}",
        "concurrency",
        "sessions",
        "turns/s",
        "p50 ms",
        "p99 ms",
        "p50 POST ms",
        "p99 TTFE ms",
        "peak RSS MiB"
    );
    for &(concurrency, sessions) in LEVELS {
        let sessions = if quick { sessions / 10 } else { sessions };
        let r = level(&client, concurrency, sessions).await;
        println!(
            "{:>11} {:>8} {:>8.0} {:>7.2} {:>7.2} {:>12.2} {:>12.2} {:>13.1}",
            concurrency,
            sessions,
            sessions as f64 / r.wall.as_secs_f64(),
            percentile(&r.latencies, 0.50),
            percentile(&r.latencies, 0.99),
            percentile(&r.posts, 0.50),
            percentile(&r.first_event, 0.99),
            r.peak_rss_kb as f64 / 1024.0,
        );
    }
    println!();
    println!(
        "idle RSS after the runs: {:.1} MiB",
        rss_kb() as f64 / 1024.0
    );
    handle.close().await;
}

/// One session's timings, in milliseconds from the start of the POST.
struct Sample {
    /// Until `session.waiting` was read.
    total: f64,
    /// Until the POST answered.
    post: f64,
    /// Until the first streamed line.
    first_event: f64,
}

struct LevelResult {
    wall: Duration,
    /// Milliseconds, per session.
    latencies: Vec<f64>,
    posts: Vec<f64>,
    first_event: Vec<f64>,
    peak_rss_kb: u64,
}

async fn level(client: &Client, concurrency: usize, sessions: usize) -> LevelResult {
    let next = Arc::new(AtomicUsize::new(0));
    let running = Arc::new(AtomicBool::new(true));
    let peak = Arc::new(AtomicU64::new(rss_kb()));
    let sampler = {
        let (running, peak) = (running.clone(), peak.clone());
        tokio::spawn(async move {
            while running.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kb(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let start = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let (client, next) = (client.clone(), next.clone());
        workers.push(tokio::spawn(async move {
            let mut samples: Vec<Sample> = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < sessions {
                let t0 = Instant::now();
                let accepted = client.create_session("hello").await.unwrap();
                let posted = t0.elapsed();
                let stream = client.stream(&accepted.session_id, 0).await.unwrap();
                let mut stream = std::pin::pin!(stream);
                let mut first = None;
                while let Some(event) = stream.next().await {
                    first.get_or_insert_with(|| t0.elapsed());
                    if event.unwrap().is_settle() {
                        break;
                    }
                }
                samples.push(Sample {
                    total: ms(t0.elapsed()),
                    post: ms(posted),
                    first_event: ms(first.unwrap()),
                });
            }
            samples
        }));
    }
    let mut latencies = Vec::with_capacity(sessions);
    let mut posts = Vec::with_capacity(sessions);
    let mut first_event = Vec::with_capacity(sessions);
    for w in workers {
        for sample in w.await.unwrap() {
            latencies.push(sample.total);
            posts.push(sample.post);
            first_event.push(sample.first_event);
        }
    }
    let wall = start.elapsed();
    running.store(false, Ordering::Relaxed);
    sampler.await.unwrap();
    LevelResult {
        wall,
        latencies,
        posts,
        first_event,
        peak_rss_kb: peak.load(Ordering::Relaxed),
    }
}

fn write_project(dir: &Path) {
    let agent = dir.join("bench").join("agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("agent.toml"),
        "description = \"load benchmark\"\nmodel = \"scripted:script.json\"\n",
    )
    .unwrap();
    std::fs::write(agent.join("instructions.md"), "Answer briefly.\n").unwrap();
    std::fs::write(
        agent.join("script.json"),
        r#"{"turns":[{"steps":[{"text":"ok"}]}]}"#,
    )
    .unwrap();
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

/// `VmRSS` of this process, in KiB (0 where `/proc` is missing).
fn rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
