//! A2A throughput: `SendMessage` over the JSON-RPC binding, each a real
//! turn of the offline `test` model that the call waits for, beside MCP
//! `ask` (the same work through `tools/call`) and `GetTask`.
//!
//! Boots `agentkit::serve` in-process on a throwaway project (one agent,
//! `model = "test"`, no tools, so a turn is one model step) and measures,
//! each sequential and with 8 concurrent clients:
//! - `SendMessage` starting a new context (a new session) per call;
//! - `SendMessage` continuing the client's own context (a follow-up);
//! - MCP `tools/call` of `ask` (a new session per call);
//! - MCP `tools/call` of `check` on a finished session (no model, no
//!   turn: the protocol's own cost, as a plain MCP server's tool call);
//! - `GetTask` of a finished task (a read of its log);
//!
//! and prints messages/s, p50, p99, then the process's peak and current
//! resident memory (client and server share the process).
//!
//! `cargo bench -p agentkit --bench a2a`; `-- --quick` runs fewer calls.

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
    runtime.block_on(bench(if quick { 80 } else { 800 }));
}

fn write(path: &std::path::Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// `n` calls from `clients` concurrent clients; each client's call gets
/// its index (to keep its own context).
async fn measure<F, Fut>(n: usize, clients: usize, call: F) -> (f64, Duration, Duration)
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let call = Arc::new(call);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for client in 0..clients {
        let call = call.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(n / clients);
            for _ in 0..n / clients {
                let t = Instant::now();
                call(client).await;
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
    lat.sort();
    let at = |q: f64| lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)];
    (rate, at(0.50), at(0.99))
}

fn message(text: &str, context: Option<&str>) -> Value {
    let mut m = json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"text": text}]});
    if let Some(c) = context {
        m["contextId"] = json!(c);
    }
    json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": m}})
}

async fn rpc(client: &reqwest::Client, url: &str, body: &Value) -> Value {
    client
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .json(body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn completed(v: &Value) -> &Value {
    let task = &v["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{v}");
    task
}

/// The process's resident memory now and at its peak, in MiB.
fn memory() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

async fn bench(n: usize) {
    let project = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let root = project.path().join("bench");
    let agent = root.join("agent");
    write(&agent.join("agent.toml"), "model = \"test\"\n");
    write(&agent.join("instructions.md"), "Benchmark agent.\n");
    let options = agentkit::ServeOptions {
        port: 0,
        state_root: Some(state.path().to_path_buf()),
        ..Default::default()
    };
    let handle = agentkit::serve(&root, options).await.unwrap();
    let base = handle.agent_url(&handle.slugs()[0]);
    let client = reqwest::Client::new();
    let a2a = format!("{base}/a2a");
    let mcp = format!("{base}/v1/mcp");

    // Warm up, and one context per client for the follow-ups.
    let concurrency = 8;
    let mut contexts = Vec::new();
    for _ in 0..concurrency {
        let v = rpc(&client, &a2a, &message("hello", None)).await;
        contexts.push(completed(&v)["contextId"].as_str().unwrap().to_owned());
    }
    let contexts = Arc::new(contexts);
    let done = rpc(&client, &a2a, &message("a task to read", None)).await;
    let task_id = completed(&done)["id"].as_str().unwrap().to_owned();
    let session_id = completed(&done)["contextId"].as_str().unwrap().to_owned();

    let send_new = {
        let (client, url) = (client.clone(), a2a.clone());
        move |_: usize| {
            let (client, url) = (client.clone(), url.clone());
            async move {
                completed(&rpc(&client, &url, &message("hi", None)).await);
            }
        }
    };
    let send_follow_up = {
        let (client, url, contexts) = (client.clone(), a2a.clone(), contexts.clone());
        move |i: usize| {
            let (client, url) = (client.clone(), url.clone());
            let context = contexts[i].clone();
            async move {
                completed(&rpc(&client, &url, &message("again", Some(&context))).await);
            }
        }
    };
    let ask = {
        let (client, url) = (client.clone(), mcp.clone());
        move |_: usize| {
            let (client, url) = (client.clone(), url.clone());
            async move {
                let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "ask", "arguments": {"message": "hi"}}});
                let v = rpc(&client, &url, &body).await;
                assert_eq!(
                    v["result"]["structuredContent"]["status"], "completed",
                    "{v}"
                );
            }
        }
    };
    let check = {
        let (client, url, id) = (client.clone(), mcp.clone(), session_id.clone());
        move |_: usize| {
            let (client, url, id) = (client.clone(), url.clone(), id.clone());
            async move {
                let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "check", "arguments": {"sessionId": id, "waitSeconds": 0}}});
                let v = rpc(&client, &url, &body).await;
                assert_eq!(v["result"]["isError"], false, "{v}");
            }
        }
    };
    let get = {
        let (client, url, id) = (client.clone(), a2a.clone(), task_id.clone());
        move |_: usize| {
            let (client, url, id) = (client.clone(), url.clone(), id.clone());
            async move {
                let body =
                    json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": id}});
                let v = rpc(&client, &url, &body).await;
                assert_eq!(
                    v["result"]["status"]["state"], "TASK_STATE_COMPLETED",
                    "{v}"
                );
            }
        }
    };

    println!(
        "agentkit A2A (server in-process, loopback HTTP, JSON-RPC binding; `test` model: each message is a real turn, waited for; {} cores)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let print = |what: &str, calls: usize, (rate, p50, p99): (f64, Duration, Duration)| {
        println!(
            "{what}: {calls} calls, {rate:.0}/s, p50 {:.2} ms, p99 {:.2} ms",
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3
        );
    };
    for clients in [1, concurrency] {
        let label = |what: &str| format!("{what}, {clients} client(s)");
        print(
            &label("A2A SendMessage, new context"),
            n,
            measure(n, clients, send_new.clone()).await,
        );
        print(
            &label("A2A SendMessage, follow-up in the client's context"),
            n,
            measure(n, clients, send_follow_up.clone()).await,
        );
        print(
            &label("MCP tools/call ask, new session"),
            n,
            measure(n, clients, ask.clone()).await,
        );
        print(
            &label("MCP tools/call check, a finished session"),
            n,
            measure(n, clients, check.clone()).await,
        );
        print(
            &label("A2A GetTask"),
            n,
            measure(n, clients, get.clone()).await,
        );
    }
    let (rss, peak) = memory();
    println!(
        "resident memory (server and client in one process): {rss:.1} MiB now, {peak:.1} MiB peak"
    );
    handle.close().await;
}
