//! Deterministic tool calls benchmark: calls per second over HTTP for a
//! subprocess tool and a Rust tool, and the latency the MCP `call_tool`
//! path adds over the plain `POST /v1/tools/:name` route.
//!
//! Boots `agentkit::serve` in-process on a throwaway project with one
//! server tool file, `echo` (`cat`: the input comes back as the result, so
//! the cost is the host's, not the tool's), and one Rust tool registered
//! with `ServeOptions::tool(RustTool::new(..))`, `echo_rust` (returns its
//! input), then for each tool:
//! - sequential calls over one keep-alive connection: calls/s, p50, p99;
//! - the same with 8 concurrent clients: calls/s, p50, p99;
//! - the same sequential calls through `/v1/mcp` (`tools/call` of
//!   `call_tool`): calls/s, p50, p99;
//!
//! and the ratios: Rust tool vs subprocess tool, MCP vs plain route.
//!
//! `cargo bench -p agentkit --bench tools`; `-- --quick` runs fewer calls.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench(if quick { 100 } else { 1_000 }));
}

fn write(path: &std::path::Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct EchoInput {
    x: i64,
}

/// One measured row: calls/s, p50, p99.
#[derive(Clone, Copy)]
struct Row {
    rate: f64,
    p50: Duration,
    p99: Duration,
}

impl Row {
    fn print(&self, what: &str, calls: usize) {
        println!(
            "{what}: {calls} calls, {:.0} calls/s, p50 {:.2} ms, p99 {:.2} ms",
            self.rate,
            ms(self.p50),
            ms(self.p99)
        );
    }
}

/// `n` calls from `clients` concurrent clients.
async fn measure<F, Fut>(n: usize, clients: usize, call: F) -> Row
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let call = Arc::new(call);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let call = call.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(n / clients);
            for _ in 0..n / clients {
                let t = Instant::now();
                call().await;
                lat.push(t.elapsed());
            }
            lat
        }));
    }
    let mut lat = Vec::with_capacity(n);
    for t in tasks {
        lat.extend(t.await.unwrap());
    }
    let rate = lat.len() as f64 / started.elapsed().as_secs_f64();
    let (p50, p99) = percentiles(&mut lat);
    Row { rate, p50, p99 }
}

async fn bench(n: usize) {
    let project = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let root = project.path().join("bench");
    let agent = root.join("agent");
    write(&agent.join("agent.toml"), "model = \"test\"\n");
    write(&agent.join("instructions.md"), "Benchmark agent.\n");
    write(
        &agent.join("tools/echo.toml"),
        "description = \"Echo.\"\ncommand = [\"cat\"]\n[input_schema]\ntype = \"object\"\n",
    );
    let options = agentkit::ServeOptions {
        port: 0,
        state_root: Some(state.path().to_path_buf()),
        ..Default::default()
    }
    .tool(agentkit::RustTool::new(
        "echo_rust",
        "Echo, in Rust.",
        |input: EchoInput, _ctx: agentkit::ToolContext| async move { Ok(input) },
    ));
    let handle = agentkit::serve(&root, options).await.unwrap();
    let base = handle.agent_url(&handle.slugs()[0]);
    let client = reqwest::Client::new();
    let mcp_url = format!("{base}/v1/mcp");
    let plain = |tool: &str| {
        let (client, url) = (client.clone(), format!("{base}/v1/tools/{tool}"));
        move || {
            let (client, url) = (client.clone(), url.clone());
            async move {
                let r: Value = client
                    .post(&url)
                    .json(&json!({"input": {"x": 1}}))
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                assert_eq!(r["result"], json!({"x": 1}), "{r}");
            }
        }
    };
    let mcp = |tool: &str| {
        let (client, url, tool) = (client.clone(), mcp_url.clone(), tool.to_owned());
        move || {
            let (client, url, tool) = (client.clone(), url.clone(), tool.clone());
            async move {
                let r: Value = client
                    .post(&url)
                    .header("accept", "application/json, text/event-stream")
                    .json(
                        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                        "name": "call_tool", "arguments": {"name": tool, "input": {"x": 1}}}}),
                    )
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                assert_eq!(
                    r["result"]["structuredContent"]["result"],
                    json!({"x": 1}),
                    "{r}"
                );
            }
        }
    };

    for tool in ["echo", "echo_rust"] {
        for _ in 0..20 {
            plain(tool)().await;
            mcp(tool)().await;
        }
    }

    println!(
        "agentkit deterministic tool calls (server in-process, loopback HTTP; `echo` = subprocess `cat`, `echo_rust` = RustTool)"
    );
    let concurrency = 8;
    let mut rows = std::collections::HashMap::new();
    for tool in ["echo", "echo_rust"] {
        let seq = measure(n, 1, plain(tool)).await;
        seq.print(&format!("POST /v1/tools/{tool}, sequential"), n);
        let par = measure(n, concurrency, plain(tool)).await;
        par.print(
            &format!("POST /v1/tools/{tool}, {concurrency} concurrent clients"),
            n,
        );
        let via_mcp = measure(n, 1, mcp(tool)).await;
        via_mcp.print(&format!("MCP call_tool {tool} via /v1/mcp, sequential"), n);
        rows.insert(tool, (seq, par, via_mcp));
    }
    let (sub, rust) = (rows["echo"], rows["echo_rust"]);
    println!(
        "Rust tool vs subprocess tool: {:.1}x calls/s sequential, {:.1}x with {concurrency} clients (p50 {:.2} vs {:.2} ms)",
        rust.0.rate / sub.0.rate,
        rust.1.rate / sub.1.rate,
        ms(rust.0.p50),
        ms(sub.0.p50)
    );
    for (tool, (seq, _, via_mcp)) in [("echo", sub), ("echo_rust", rust)] {
        println!(
            "MCP call_tool vs plain route ({tool}): {:+.2} ms at p50, {:.2}x the latency, {:.2}x the calls/s",
            ms(via_mcp.p50) - ms(seq.p50),
            ms(via_mcp.p50) / ms(seq.p50),
            via_mcp.rate / seq.rate
        );
    }
    handle.close().await;
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn percentiles(lat: &mut [Duration]) -> (Duration, Duration) {
    lat.sort();
    let at = |q: f64| lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)];
    (at(0.50), at(0.99))
}
