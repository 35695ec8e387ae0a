//! Slack benchmark: a retry storm and a long streamed answer against the
//! mock Slack (`agentkit_test_support::slack`, Web API and Socket Mode).
//!
//! Storm: N mentions, each delivered four times on Slack's retry schedule
//! (at once, +3 s, +1 min, +5 min) compressed a hundredfold, half over
//! Socket Mode and half over the signed Events API; reports deliveries,
//! the HTTP acknowledgement latency (p50, p99), turns run and duplicate
//! replies (must be 0). Long answer: one mention whose scripted answer is
//! W words (about W/4 deltas), streamed and then posted-and-edited;
//! reports messages, Web API calls and lost characters (must be 0).
//!
//! `cargo bench -p agentkit --bench slack --profile dev` (the numbers
//! that matter, duplicates and lost characters, do not depend on the
//! profile, and a cold release build takes a quarter of an hour here);
//! `-- --quick` sends fewer. It fails when a reply is doubled or text is
//! lost. Results: `docs/benchmarks/slack.md`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentkit_test_support::http::Request;
use agentkit_test_support::slack::{MockSlack, app_mention, event_callback};
use hmac::{KeyInit, Mac};

const SECRET: &str = "bench-signing-secret";

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn signature(ts: i64, body: &[u8]) -> String {
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(format!("v0:{ts}:").as_bytes());
    mac.update(body);
    format!("v0={}", hex::encode(mac.finalize().into_bytes()))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn serve(
    rt: &tokio::runtime::Runtime,
    root: &Path,
    mock: &MockSlack,
    answer: &str,
) -> agentkit::ServeHandle {
    let agent = root.join("agents/bot/agent");
    write(
        &agent.join("agent.toml"),
        "model = \"scripted:script.json\"\n",
    );
    write(&agent.join("instructions.md"), "You answer.\n");
    let script = serde_json::json!({"turns": [{"steps": [{"text": answer}]}]});
    write(&agent.join("script.json"), &script.to_string());
    write(
        &agent.join("channels/slack.toml"),
        "kind = \"slack\"\napi_url = \"${SLACK_API_URL}\"\nupdate_interval = \"200ms\"\n",
    );
    write(
        &agent.join("channels/slack-http.toml"),
        "kind = \"slack\"\nmode = \"events\"\napi_url = \"${SLACK_API_URL}\"\nupdate_interval = \"200ms\"\n",
    );
    let vars = [
        ("SLACK_API_URL".to_owned(), mock.api_url()),
        ("SLACK_BOT_TOKEN".to_owned(), "xoxb-bench".to_owned()),
        ("SLACK_APP_TOKEN".to_owned(), "xapp-bench".to_owned()),
        ("SLACK_SIGNING_SECRET".to_owned(), SECRET.to_owned()),
    ];
    rt.block_on(agentkit::serve(
        &root.join("agents"),
        agentkit::ServeOptions {
            port: 0,
            state_root: Some(root.join("state")),
            env: agentkit::EnvLookup(Arc::new(move |name| {
                vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
            })),
            ..Default::default()
        },
    ))
    .unwrap()
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    storm(&rt, if quick { 40 } else { 200 });
    long_answer(&rt, if quick { 4_000 } else { 20_000 });
}

fn storm(rt: &tokio::runtime::Runtime, n: usize) {
    let mock = MockSlack::start();
    let dir = tempfile::tempdir().unwrap();
    let handle = serve(rt, dir.path(), &mock, "Done: the answer to your question.");
    mock.wait_until("a socket", Duration::from_secs(30), MockSlack::connected);
    let events: Vec<(String, String, serde_json::Value)> = (0..n)
        .map(|i| {
            let (channel, ts) = (format!("C{}", i % 7), format!("1700{i:06}.000100"));
            let e = event_callback(
                &format!("EvB{i}"),
                app_mention("U1", &channel, &ts, None, &format!("question {i}")),
            );
            (channel, ts, e)
        })
        .collect();
    let start = Instant::now();
    let mut acks = Vec::new();
    for (attempt, at_ms) in [0u64, 30, 600, 3000].into_iter().enumerate() {
        while start.elapsed() < Duration::from_millis(at_ms) {
            std::thread::sleep(Duration::from_millis(2));
        }
        for (i, (_, _, e)) in events.iter().enumerate() {
            if i % 2 == 0 {
                mock.push_event(e, attempt as u32);
                continue;
            }
            let body = e.to_string();
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs() as i64;
            let mut req = Request::post("/bot/v1/channels/slack-http")
                .header("content-type", "application/json")
                .header("x-slack-request-timestamp", &now.to_string())
                .header("x-slack-signature", &signature(now, body.as_bytes()))
                .raw_body(body.as_bytes());
            if attempt > 0 {
                req = req.header("x-slack-retry-num", &attempt.to_string());
            }
            let sent = Instant::now();
            let r = req.send(handle.local_addr()).unwrap();
            acks.push(sent.elapsed());
            assert_eq!(r.status, 200, "{}", r.body);
        }
    }
    mock.wait_until("every reply", Duration::from_secs(300), |m| {
        events
            .iter()
            .all(|(c, ts, _)| m.thread(c, ts).iter().any(|p| !p.streaming))
    });
    // Late redeliveries would have posted by now.
    std::thread::sleep(Duration::from_millis(500));
    let elapsed = start.elapsed();
    let replies: usize = events
        .iter()
        .map(|(c, ts, _)| mock.thread(c, ts).len())
        .sum();
    let duplicates = replies - n;
    acks.sort();
    println!(
        "Slack retry storm: {n} mentions x 4 deliveries (0, +30 ms, +600 ms, +3 s), half Socket Mode, half Events API"
    );
    println!(
        "{:>11} {:>8} {:>11} {:>11} {:>8} {:>11} {:>9}",
        "deliveries", "socket", "http p50", "http p99", "replies", "duplicates", "seconds"
    );
    println!(
        "{:>11} {:>8} {:>8.2} ms {:>8.2} ms {:>8} {:>11} {:>9.1}",
        n * 4,
        mock.acks().len(),
        percentile(&acks, 0.5).as_secs_f64() * 1e3,
        percentile(&acks, 0.99).as_secs_f64() * 1e3,
        replies,
        duplicates,
        elapsed.as_secs_f64()
    );
    assert_eq!(duplicates, 0, "duplicate replies");
    rt.block_on(handle.close());
}

fn long_answer(rt: &tokio::runtime::Runtime, words: usize) {
    let answer: String = (0..words)
        .map(|i| {
            if i % 40 == 39 {
                format!("w{i}.\n")
            } else {
                format!("w{i} ")
            }
        })
        .collect();
    let answer = answer.trim_end().to_owned();
    println!();
    println!(
        "long streamed answer: {words} words, {} characters, ~{} deltas",
        answer.len(),
        words / 4
    );
    println!(
        "{:>10} {:>9} {:>10} {:>10} {:>6} {:>9}",
        "mode", "messages", "api calls", "lost chars", "dupes", "seconds"
    );
    for streaming in [true, false] {
        let mock = MockSlack::start();
        if !streaming {
            mock.disable_streaming();
        }
        let dir = tempfile::tempdir().unwrap();
        let handle = serve(rt, dir.path(), &mock, &answer);
        mock.wait_until("a socket", Duration::from_secs(30), MockSlack::connected);
        let ts = "1700000100.000100";
        let start = Instant::now();
        mock.push_event(
            &event_callback("EvL", app_mention("U1", "C1", ts, None, "write a lot")),
            0,
        );
        let text = |m: &MockSlack| {
            m.thread("C1", ts)
                .iter()
                .map(|p| p.text.clone())
                .collect::<String>()
        };
        mock.wait_until("the answer", Duration::from_secs(120), |m| {
            text(m).len() >= answer.len() && m.thread("C1", ts).iter().all(|p| !p.streaming)
        });
        let elapsed = start.elapsed();
        let got = text(&mock);
        let lost = answer.len().saturating_sub(
            answer
                .chars()
                .zip(got.chars())
                .take_while(|(a, b)| a == b)
                .count(),
        );
        let calls = mock
            .calls()
            .iter()
            .filter(|c| c.method.starts_with("chat."))
            .count();
        println!(
            "{:>10} {:>9} {:>10} {:>10} {:>6} {:>9.2}",
            if streaming { "stream" } else { "post+edit" },
            mock.thread("C1", ts).len(),
            calls,
            lost,
            got.len().saturating_sub(answer.len()),
            elapsed.as_secs_f64()
        );
        assert_eq!(got, answer, "the text arrived whole");
        rt.block_on(handle.close());
    }
}
