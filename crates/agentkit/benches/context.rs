//! Context management benchmark: one session of 200 turns, each calling a
//! tool that returns 5 KB, through the mock provider (OpenAI wire) with a
//! 32,000-token window. Reports the request sizes over time (flat once
//! compaction starts), how often the session was compacted, and the host
//! time per turn early and late in the session (their ratio: the cost of
//! a turn should not grow with the session).
//!
//! Boots `agentkit::serve` in-process; the mock answers from the request
//! itself: a summary to a compaction request, a tool call to a new
//! question, a short answer once the tool result is in.
//!
//! `cargo bench -p agentkit --bench context`; `-- --quick` runs 60 turns.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::{Duration, Instant};

use agentkit_test_support::http::Request;
use agentkit_test_support::provider::{MockProvider, Reply, Step};
use serde_json::{Value, json};

const WINDOW: u64 = 32_000;

fn write(path: &std::path::Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn respond(body: &Value) -> Reply {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let system = messages
        .first()
        .and_then(|m| m["content"].as_str())
        .unwrap_or("");
    if system.starts_with("You compact a conversation") {
        return Step::text(&format!("Summary: {}", "s".repeat(1_500)))
            .tokens(8_000, 400, 0, 0)
            .into();
    }
    let last = messages.last().cloned().unwrap_or(Value::Null);
    if last["role"] == "tool" {
        Step::text("The report is read; nothing stands out.").into()
    } else {
        Step::new()
            .call(
                &format!("call_{}", messages.len()),
                "report",
                &json!({"section": messages.len()}),
            )
            .into()
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let turns = if quick { 60 } else { 200 };
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agents/bot/agent");
    write(
        &agent.join("agent.toml"),
        &format!(
            "[model]\nprovider = \"openai\"\nid = \"gpt-mock\"\ncontext_window = {WINDOW}\nmax_output_tokens = 2000\n[harness]\nbuiltin_tools = []\n"
        ),
    );
    write(&agent.join("instructions.md"), "You read reports.\n");
    write(
        &agent.join("tools/report.toml"),
        "description = \"A 5 KB report section\"\ncommand = [\"python3\", \"-c\", \"print('r' * 5000)\"]\n[input_schema]\ntype = \"object\"\n",
    );
    let mock = MockProvider::responding(respond);
    let mut providers = agentkit::ProviderConfig::default();
    providers.openai.base_url = mock.openai_base_url();
    providers.openai.api_key = Some("sk-mock".into());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(HOST_THREAD)
        .enable_all()
        .build()
        .unwrap();
    let handle = rt
        .block_on(agentkit::serve(
            &dir.path().join("agents"),
            agentkit::ServeOptions {
                port: 0,
                state_root: Some(dir.path().join("state")),
                providers,
                ..agentkit::ServeOptions::default()
            },
        ))
        .unwrap();
    let addr = handle.local_addr();

    let mut session: Option<(String, String)> = None;
    let mut next_index = 0u64;
    let mut sizes = Vec::new(); // the largest step request of each turn, in bytes
    let mut times = Vec::new();
    let mut cpus = Vec::new();
    let mut compactions = 0;
    let mut compacted_at = Vec::new();
    let mut prefix = PrefixReuse::default();
    for i in 0..turns {
        let message = format!("Read section {i} of the report.");
        let started = Instant::now();
        let cpu_before = host_cpu();
        let before = mock.request_count();
        let r = match &session {
            None => Request::post("/bot/v1/session").json(&json!({ "message": message })),
            Some((id, token)) => Request::post(&format!("/bot/v1/session/{id}"))
                .json(&json!({ "message": message, "continuationToken": token })),
        }
        .send(addr)
        .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        let doc = r.json();
        let id = doc["sessionId"].as_str().unwrap().to_owned();
        let token = doc["continuationToken"].as_str().unwrap().to_owned();
        let mut lines = Request::get(&format!(
            "/bot/v1/session/{id}/stream?startIndex={next_index}"
        ))
        .stream(addr)
        .unwrap();
        let mut started_turn = false;
        loop {
            let e = lines.next_json().unwrap().expect("the stream ended");
            next_index = e["index"].as_u64().unwrap() + 1;
            match e["type"].as_str().unwrap() {
                "turn.started" => started_turn = true,
                "context.compacted" => {
                    compactions += 1;
                    compacted_at.push(i);
                }
                "turn.failed" => panic!("turn {i} failed: {e}"),
                "session.waiting" if started_turn => break,
                _ => {}
            }
        }
        times.push(started.elapsed());
        cpus.push(host_cpu().saturating_sub(cpu_before));
        let steps: Vec<Value> = mock
            .requests_from(before)
            .iter()
            .map(|r| r.json())
            .filter(|b| {
                !b["messages"][0]["content"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("You compact")
            })
            .collect();
        for body in &steps {
            prefix.add(body);
        }
        let largest = steps.iter().map(|b| b.to_string().len()).max().unwrap_or(0);
        sizes.push(largest);
        session = Some((id, token));
    }
    rt.block_on(handle.close());

    println!("context bench: {turns} turns, each with a 5 KB tool result, window {WINDOW} tokens");
    for at in [1, 10, 20, 50, 100, 150, 200] {
        if at <= turns {
            println!(
                "  turn {at:>3}: largest request {:>7} bytes (~{} tokens)",
                sizes[at - 1],
                sizes[at - 1] / 4
            );
        }
    }
    let max = sizes.iter().max().copied().unwrap_or(0);
    println!(
        "  largest request of all: {max} bytes (~{} tokens, {:.0} % of the window)",
        max / 4,
        (max / 4) as f64 * 100.0 / WINDOW as f64
    );
    println!("  compactions: {compactions}");
    println!(
        "  prompt-cache reuse: {:.1} % of step-request bytes repeat the previous request's leading messages (what a prefix cache can serve); {} of {} requests changed an earlier message (each compaction does once)",
        prefix.reused as f64 * 100.0 / prefix.total.max(1) as f64,
        prefix.broken,
        prefix.requests
    );
    let mean = |d: &[Duration]| d.iter().sum::<Duration>().as_secs_f64() * 1000.0 / d.len() as f64;
    let tenth = (turns / 10).max(1);
    let early = mean(&times[..tenth]);
    let late = mean(&times[turns - tenth..]);
    println!(
        "  wall time per turn (tool process and mock included, the bench reads only new requests): first {tenth} turns {early:.1} ms, last {tenth} turns {late:.1} ms, ratio {:.2}",
        late / early
    );
    // Requests grow through each compaction cycle and start small again,
    // so a fair comparison is between whole cycles: the first and the last.
    if let [first, second, .., before_last, last] = compacted_at[..] {
        let early = mean(&cpus[first..second]);
        let late = mean(&cpus[before_last..last]);
        println!(
            "  host CPU per turn (the server's threads only): first compaction cycle (turns {}-{}) {early:.1} ms, last (turns {}-{}) {late:.1} ms, ratio {:.2}",
            first + 1,
            second,
            before_last + 1,
            last,
            late / early
        );
    }
}

/// How much of each step request repeats the previous one's leading
/// messages: the part a provider's prefix cache (Anthropic's breakpoints,
/// OpenAI's automatic caching) can serve.
#[derive(Default)]
struct PrefixReuse {
    last: Vec<String>,
    reused: usize,
    total: usize,
    requests: usize,
    /// Requests that kept fewer of the previous request's messages than it
    /// had (the conversation was rewritten, not only extended).
    broken: usize,
}

impl PrefixReuse {
    fn add(&mut self, body: &Value) {
        let mut messages: Vec<String> = vec![body["tools"].to_string()];
        messages.extend(
            body["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .map(Value::to_string),
        );
        let same = messages
            .iter()
            .zip(&self.last)
            .take_while(|(a, b)| a == b)
            .count();
        if self.requests > 0 && same < self.last.len() {
            self.broken += 1;
        }
        self.reused += messages[..same].iter().map(String::len).sum::<usize>();
        self.total += messages.iter().map(String::len).sum::<usize>();
        self.requests += 1;
        self.last = messages;
    }
}

/// The name of the server's runtime threads (workers and blocking pool).
const HOST_THREAD: &str = "bench-host";

/// CPU time the server's threads used so far (user + system, from
/// `/proc/self/task/*/stat`; a blocking thread that exited takes its time
/// with it, so this errs low).
fn host_cpu() -> Duration {
    let tick = 100u64; // USER_HZ on Linux
    let mut ticks = 0u64;
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ...`: comm may hold spaces; fields after `)`.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        if !stat[open + 1..close].starts_with(&HOST_THREAD[..HOST_THREAD.len().min(15)]) {
            continue;
        }
        let fields: Vec<&str> = stat[close + 2..].split(' ').collect();
        let utime: u64 = fields.get(11).and_then(|f| f.parse().ok()).unwrap_or(0);
        let stime: u64 = fields.get(12).and_then(|f| f.parse().ok()).unwrap_or(0);
        ticks += utime + stime;
    }
    Duration::from_millis(ticks * 1000 / tick)
}
