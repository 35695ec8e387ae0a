//! Front-end overhead benchmark: one turn through each way in to an
//! agent (the native session API, the OpenAI Responses and Chat
//! Completions routes, streamed and not, and AG-UI), against the same
//! in-process server and `scripted` model.
//!
//! Each turn starts a new session (the script's first turn) and is read
//! to its end over loopback HTTP. Reports per front-end: the median and
//! p99 turn latency (request start to the answer's end), the median time
//! to the first token (request start to the first byte that carries the
//! reply's text; the whole answer for the unstreamed routes), and the
//! process CPU per turn (user + system time of this process, server and
//! client together, over the run, divided by the turns).
//!
//! `cargo bench -p agentkit --bench fronts`; `-- --quick` runs fewer turns.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::Path;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::json;

const TURNS: usize = 300;

/// The reply the script streams, and the first piece a reader sees.
const REPLY: &str = "The forecast for Paris is sunny, 21 degrees, light wind from the west.";
const FIRST: &str = "The forecast";

#[derive(Debug, Clone, Copy)]
enum Front {
    Native,
    Responses,
    ResponsesStream,
    Chat,
    ChatStream,
    AgUi,
}

impl Front {
    fn name(self) -> &'static str {
        match self {
            Front::Native => "session API (POST + NDJSON stream)",
            Front::Responses => "POST /v1/responses",
            Front::ResponsesStream => "POST /v1/responses stream",
            Front::Chat => "POST /v1/chat/completions",
            Front::ChatStream => "POST /v1/chat/completions stream",
            Front::AgUi => "POST /v1/ag-ui",
        }
    }
}

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
    let base = handle.agent_url("bench");
    let http = reqwest::Client::new();
    let turns = if quick { TURNS / 10 } else { TURNS };
    let fronts = [
        Front::Native,
        Front::Responses,
        Front::ResponsesStream,
        Front::Chat,
        Front::ChatStream,
        Front::AgUi,
    ];
    // Warm every route up once.
    for front in fronts {
        turn(&http, &base, front, 0).await;
    }
    println!(
        "agentkit front-end benchmark: {turns} sequential turns each, scripted model, server in-process"
    );
    println!();
    println!(
        "{:<36} {:>7} {:>7} {:>9} {:>13}",
        "front-end", "p50 ms", "p99 ms", "TTFT ms", "CPU ms/turn"
    );
    for front in fronts {
        let cpu_before = cpu_time();
        let mut totals = Vec::with_capacity(turns);
        let mut firsts = Vec::with_capacity(turns);
        for i in 0..turns {
            let (first, total) = turn(&http, &base, front, i + 1).await;
            firsts.push(ms(first));
            totals.push(ms(total));
        }
        let cpu = cpu_time() - cpu_before;
        println!(
            "{:<36} {:>7.2} {:>7.2} {:>9.2} {:>13.3}",
            front.name(),
            percentile(&totals, 0.5),
            percentile(&totals, 0.99),
            percentile(&firsts, 0.5),
            ms(cpu) / turns as f64,
        );
    }
    handle.close().await;
}

/// One turn through `front`: the time to the reply's first text, and to
/// the answer's end.
async fn turn(http: &reqwest::Client, base: &str, front: Front, i: usize) -> (Duration, Duration) {
    let start = Instant::now();
    let message = format!("weather {i}");
    let (url, body) = match front {
        Front::Native => (format!("{base}/v1/session"), json!({"message": message})),
        Front::Responses => (
            format!("{base}/v1/responses"),
            json!({"model": "bench", "input": message}),
        ),
        Front::ResponsesStream => (
            format!("{base}/v1/responses"),
            json!({"model": "bench", "input": message, "stream": true}),
        ),
        Front::Chat => (
            format!("{base}/v1/chat/completions"),
            json!({"model": "bench", "messages": [{"role": "user", "content": message}]}),
        ),
        Front::ChatStream => (
            format!("{base}/v1/chat/completions"),
            json!({"model": "bench", "messages": [{"role": "user", "content": message}], "stream": true}),
        ),
        Front::AgUi => (
            format!("{base}/v1/ag-ui"),
            json!({"threadId": format!("t{i}-{}", start.elapsed().as_nanos()), "runId": "r", "messages": [{"id": "m", "role": "user", "content": message}]}),
        ),
    };
    let resp = http.post(&url).json(&body).send().await.unwrap();
    assert!(resp.status().is_success(), "{:?}", resp.status());
    let resp = match front {
        Front::Native => {
            let accepted: serde_json::Value = resp.json().await.unwrap();
            let stream = accepted["streamUrl"].as_str().unwrap();
            let origin = base.split('/').take(3).collect::<Vec<_>>().join("/");
            http.get(format!("{origin}{stream}?text=false"))
                .send()
                .await
                .unwrap()
        }
        _ => resp,
    };
    let mut first = None;
    let mut seen = String::new();
    let mut body = resp.bytes_stream();
    while let Some(chunk) = body.next().await {
        seen.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        if first.is_none() && seen.contains(FIRST) {
            first = Some(start.elapsed());
        }
        // The native stream stays open: the turn ends at the settle.
        if matches!(front, Front::Native) && seen.contains("\"session.waiting\"") {
            break;
        }
    }
    assert!(seen.contains(FIRST), "{front:?}: {seen}");
    let total = start.elapsed();
    (first.unwrap_or(total), total)
}

fn write_project(dir: &Path) {
    let agent = dir.join("bench").join("agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("agent.toml"),
        "description = \"front-end benchmark\"\nmodel = \"scripted:script.json\"\n",
    )
    .unwrap();
    std::fs::write(agent.join("instructions.md"), "Answer briefly.\n").unwrap();
    std::fs::write(
        agent.join("script.json"),
        json!({"turns": [{"steps": [{"text": REPLY}]}]}).to_string(),
    )
    .unwrap();
}

/// User plus system CPU time of this process so far.
fn cpu_time() -> Duration {
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF).unwrap();
    let tv = |t: nix::sys::time::TimeVal| {
        Duration::new(
            u64::try_from(t.tv_sec()).unwrap_or(0),
            u32::try_from(t.tv_usec()).unwrap_or(0) * 1000,
        )
    };
    tv(usage.user_time()) + tv(usage.system_time())
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
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}
