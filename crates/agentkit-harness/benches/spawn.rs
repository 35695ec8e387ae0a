//! What one server tool call costs the host, and whether that grows with
//! the host's memory: a `printf` tool run through `run_server_tool`,
//! sandboxed and not, with this process first at about 30 MiB of resident
//! memory and then at about 500 MiB (allocated and touched here before the
//! calls, as a busy server holds it). Per row: wall time per call (p50,
//! p99) and this process's CPU per call (`/proc/self/stat`, utime + stime
//! of every thread; the children's own CPU is not counted), sequential and
//! with 8 calls in flight.
//!
//! Then a Python tool (`python3`, answering its input's word count) called
//! through a worker (`worker = true`, the shipped `agentkit_worker.py`)
//! and spawned per call, sandboxed both: wall time per call as the host
//! sees it (p50, p99) and this process's CPU per call.
//!
//! `cargo bench -p agentkit-harness --bench spawn [-- --quick]`

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentkit_harness::{ToolContext, run_server_tool};
use agentkit_manifest::{SandboxMode, Tool};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let calls = if quick { 200 } else { 1_000 };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("bench");
    write(
        &root.join("agent/agent.toml"),
        "[harness]\nbuiltin_tools = []\n",
    );
    write(&root.join("agent/instructions.md"), "Bench.\n");
    write(
        &root.join("agent/tools/stamp.toml"),
        "description = \"Prints ok\"\ncommand = [\"printf\", \"ok\"]\n",
    );
    let found = agentkit_manifest::discover(&root).unwrap();
    assert!(found.is_ok(), "{:?}", found.diagnostics);
    let agent = found.host.agents[0].agent.clone();
    let sandboxed = agent.tool("stamp").unwrap().clone();
    let mut open = sandboxed.clone();
    open.sandbox.mode = SandboxMode::Off;
    let workspace = tmp.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let status = agentkit_harness::sandbox_status();
    println!(
        "spawn cost per server tool call (`printf ok`; sandbox: {})",
        match status.abi {
            Some(abi) => format!("Landlock ABI {abi}"),
            None => format!("unavailable: {}", status.reason.as_deref().unwrap_or("")),
        }
    );
    println!(
        "{:>8} {:>10} {:>3} {:>7} {:>9} {:>9} {:>10}",
        "RSS MiB", "sandbox", "c", "calls", "p50 ms", "p99 ms", "CPU ms"
    );
    let mut ballast: Vec<Vec<u8>> = Vec::new();
    for target_mib in [30u64, 500] {
        grow_to(&mut ballast, target_mib);
        let rss = rss_mib();
        for (label, tool) in [("on", &sandboxed), ("off", &open)] {
            for concurrency in [1usize, 8] {
                let row = rt.block_on(measure(tool, &workspace, calls, concurrency));
                println!(
                    "{:>8} {:>10} {:>3} {:>7} {:>9.3} {:>9.3} {:>10.3}",
                    rss, label, concurrency, calls, row.p50, row.p99, row.cpu_ms
                );
            }
        }
    }
    println!(
        "(CPU ms: this process's CPU per call, every thread, children excluded; RSS: \
         this process's resident memory while measuring)"
    );
    drop(ballast);

    // A Python tool, through a worker and spawned per call.
    let tools = root.join("agent/tools");
    let helpers = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/workers");
    std::fs::copy(
        helpers.join("agentkit_worker.py"),
        tools.join("agentkit_worker.py"),
    )
    .unwrap();
    write(
        &tools.join("count_worker.py"),
        "from agentkit_worker import serve\n\ndef handle(input, context):\n    return {\"words\": len(input[\"text\"].split())}\n\nserve(handle)\n",
    );
    write(
        &tools.join("count.py"),
        "import json, sys\ninput = json.load(sys.stdin)\nprint(json.dumps({\"words\": len(input[\"text\"].split())}))\n",
    );
    write(
        &tools.join("count_worker.toml"),
        "description = \"Counts words\"\ncommand = [\"python3\", \"count_worker.py\"]\nworker = true\n",
    );
    write(
        &tools.join("count.toml"),
        "description = \"Counts words\"\ncommand = [\"python3\", \"count.py\"]\n",
    );
    let found = agentkit_manifest::discover(&root).unwrap();
    assert!(found.is_ok(), "{:?}", found.diagnostics);
    let agent = found.host.agents[0].agent.clone();
    let python_calls = if quick { 50 } else { 300 };
    println!("\nPython tool (word count), sandboxed, {python_calls} sequential calls");
    println!(
        "{:>22} {:>9} {:>9} {:>10}",
        "", "p50 ms", "p99 ms", "CPU ms"
    );
    for (label, name) in [
        ("through a worker", "count_worker"),
        ("spawned per call", "count"),
    ] {
        let tool = agent.tool(name).unwrap().clone();
        let row = rt.block_on(measure_input(
            &tool,
            &workspace,
            python_calls,
            json!({"text": "the quick brown fox"}),
            json!({"words": 4}),
        ));
        println!(
            "{label:>22} {:>9.3} {:>9.3} {:>10.3}",
            row.p50, row.p99, row.cpu_ms
        );
    }
}

struct Row {
    p50: f64,
    p99: f64,
    cpu_ms: f64,
}

/// `calls` sequential calls of `tool` with `input`, each answering
/// `expected`.
async fn measure_input(
    tool: &Tool,
    workspace: &Path,
    calls: usize,
    input: Value,
    expected: Value,
) -> Row {
    let one = || {
        let ctx = ToolContext {
            progress: Default::default(),
            call_id: "c".into(),
            session_id: "bench".into(),
            workspace_dir: workspace.to_path_buf(),
            cancel: CancellationToken::new(),
            host: None,
            services: None,
            as_of: None,
            origin: Default::default(),
        };
        let (tool, input, expected) = (tool.clone(), input.clone(), expected.clone());
        async move {
            let out = run_server_tool(&tool, &input, &ctx).await;
            assert_eq!(out.output, expected, "{out:?}");
        }
    };
    for _ in 0..5 {
        one().await;
    }
    let cpu = self_cpu_ms();
    let mut lat = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        one().await;
        lat.push(t.elapsed());
    }
    let cpu_ms = (self_cpu_ms() - cpu) / calls as f64;
    lat.sort();
    let p = |q: f64| lat[((lat.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    Row {
        p50: p(0.5),
        p99: p(0.99),
        cpu_ms,
    }
}

async fn measure(tool: &Tool, workspace: &Path, calls: usize, concurrency: usize) -> Row {
    let tool = Arc::new(tool.clone());
    // Warm-up: the sandbox's caches, the interpreter resolution.
    for _ in 0..10 {
        call(&tool, workspace).await;
    }
    let cpu = self_cpu_ms();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let tool = tool.clone();
        let workspace = workspace.to_path_buf();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            for _ in 0..calls / concurrency {
                let t = Instant::now();
                call(&tool, &workspace).await;
                lat.push(t.elapsed());
            }
            lat
        }));
    }
    let mut lat: Vec<Duration> = Vec::new();
    for t in tasks {
        lat.extend(t.await.unwrap());
    }
    let cpu_ms = (self_cpu_ms() - cpu) / lat.len() as f64;
    lat.sort();
    let p = |q: f64| lat[((lat.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    Row {
        p50: p(0.5),
        p99: p(0.99),
        cpu_ms,
    }
}

async fn call(tool: &Tool, workspace: &Path) {
    let ctx = ToolContext {
        progress: Default::default(),
        call_id: "c".into(),
        session_id: "bench".into(),
        workspace_dir: workspace.to_path_buf(),
        cancel: CancellationToken::new(),
        host: None,
        services: None,
        as_of: None,
        origin: Default::default(),
    };
    let out = run_server_tool(tool, &json!({}), &ctx).await;
    assert!(!out.is_error, "{:?}", out.output);
    assert_eq!(out.output, json!("ok"));
}

/// Allocates and touches memory until this process's RSS is about
/// `target` MiB.
fn grow_to(ballast: &mut Vec<Vec<u8>>, target: u64) {
    while rss_mib() + 2 < target {
        let mib = (target - rss_mib()).min(16) as usize;
        let mut chunk = vec![0u8; mib << 20];
        for i in (0..chunk.len()).step_by(4096) {
            chunk[i] = 1;
        }
        ballast.push(chunk);
    }
}

fn rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(0)
        / 1024
}

fn self_cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    // After the `)`: state is field 3, utime 14 and stime 15 (1-based).
    let ticks = |i: usize| fields.get(i - 3).and_then(|v| v.parse::<f64>().ok());
    let total = ticks(14).unwrap_or(0.0) + ticks(15).unwrap_or(0.0);
    total * 1000.0 / 100.0
}
