//! Deterministic tool calls benchmark: calls per second over HTTP for a
//! subprocess tool, and the latency the MCP `call_tool` path adds over the
//! plain `POST /v1/tools/:name` route.
//!
//! Boots `agentkit::serve` in-process on a throwaway project with one
//! server tool, `echo` (`cat`: the input comes back as the result, so the
//! cost is the host's, not the tool's), then:
//! - sequential calls over one keep-alive connection: calls/s, p50, p99;
//! - the same with 8 concurrent clients: calls/s;
//! - the same sequential calls through `/v1/mcp` (`tools/call` of
//!   `call_tool`): p50, p99, and the p50 difference with the plain route.
//!
//! `cargo bench -p agentkit --bench tools`; `-- --quick` runs fewer calls.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

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
    let handle = agentkit::serve(
        &root,
        agentkit::ServeOptions {
            port: 0,
            state_root: Some(state.path().to_path_buf()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let base = handle.agent_url(&handle.slugs()[0]);
    let client = reqwest::Client::new();
    let plain_url = format!("{base}/v1/tools/echo");
    let mcp_url = format!("{base}/v1/mcp");
    let plain = |client: reqwest::Client, url: String| async move {
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
    };
    let mcp = |client: reqwest::Client, url: String| async move {
        let r: Value = client
            .post(&url)
            .header("accept", "application/json, text/event-stream")
            .json(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "call_tool", "arguments": {"name": "echo", "input": {"x": 1}}}}),
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
    };

    for _ in 0..20 {
        plain(client.clone(), plain_url.clone()).await;
        mcp(client.clone(), mcp_url.clone()).await;
    }

    println!(
        "agentkit deterministic tool calls (subprocess tool `cat`, server in-process, loopback HTTP)"
    );
    let mut lat = Vec::with_capacity(n);
    let started = Instant::now();
    for _ in 0..n {
        let t = Instant::now();
        plain(client.clone(), plain_url.clone()).await;
        lat.push(t.elapsed());
    }
    let plain_rate = n as f64 / started.elapsed().as_secs_f64();
    let (plain_p50, plain_p99) = percentiles(&mut lat);
    println!(
        "POST /v1/tools/echo, sequential: {n} calls, {plain_rate:.0} calls/s, p50 {:.2} ms, p99 {:.2} ms",
        ms(plain_p50),
        ms(plain_p99)
    );

    let concurrency = 8;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (c, u) = (client.clone(), plain_url.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..n / concurrency {
                plain(c.clone(), u.clone()).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let total = (n / concurrency) * concurrency;
    println!(
        "POST /v1/tools/echo, {concurrency} concurrent clients: {total} calls, {:.0} calls/s",
        total as f64 / started.elapsed().as_secs_f64()
    );

    let mut lat = Vec::with_capacity(n);
    let started = Instant::now();
    for _ in 0..n {
        let t = Instant::now();
        mcp(client.clone(), mcp_url.clone()).await;
        lat.push(t.elapsed());
    }
    let mcp_rate = n as f64 / started.elapsed().as_secs_f64();
    let (mcp_p50, mcp_p99) = percentiles(&mut lat);
    println!(
        "MCP call_tool via /v1/mcp, sequential: {n} calls, {mcp_rate:.0} calls/s, p50 {:.2} ms, p99 {:.2} ms",
        ms(mcp_p50),
        ms(mcp_p99)
    );
    println!(
        "added latency of the MCP path at p50: {:+.2} ms",
        ms(mcp_p50) - ms(plain_p50)
    );
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
