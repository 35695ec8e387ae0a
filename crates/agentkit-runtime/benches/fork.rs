//! The cost of forking a session against the length of its log: a chat
//! session grown to each length by scripted turns (about 60 events a
//! turn), then forked at its end, several times; the time per fork and
//! the memory the process grew by while forking.
//!
//! `cargo bench -p agentkit-runtime --bench fork` (`LENGTHS=1000,10000`
//! the log lengths; `FORKS=N` the forks timed at each).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentkit_manifest::Admission;
use agentkit_runtime::{
    AgentRuntime, FollowUp, Owner, RuntimeOptions, SendRequest, SessionMode, SystemClock,
};

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

async fn open(dir: &std::path::Path) -> AgentRuntime {
    let found = agentkit_manifest::discover(&dir.join("bot")).unwrap();
    assert!(found.is_ok(), "{:?}", found.diagnostics);
    AgentRuntime::open(
        Arc::new(found.host.agents[0].agent.clone()),
        RuntimeOptions {
            state_dir: dir.join("state"),
            default_model: None,
            store: Default::default(),
            providers: Default::default(),
            host_bridge: None,
            tool_sources: Vec::new(),
            services: None,
            tracing: false,
            shared: None,
            clock: Arc::new(SystemClock),
        },
    )
    .await
    .unwrap()
}

async fn settled(runtime: &AgentRuntime, id: &str) {
    while runtime.is_busy(id) {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

fn main() {
    let lengths: Vec<usize> = std::env::var("LENGTHS")
        .unwrap_or_else(|_| "1000,10000".to_owned())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let forks: usize = std::env::var("FORKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let agent = tmp.path().join("bot/agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("agent.toml"),
        "model = \"scripted:script.json\"\n",
    )
    .unwrap();
    // A reply of 200 words, streamed a few words per delta.
    let reply = vec!["word"; 200].join(" ");
    std::fs::write(
        agent.join("script.json"),
        format!(r#"{{"turns": [{{"steps": [{{"text": "{reply}"}}]}}]}}"#),
    )
    .unwrap();
    std::fs::write(agent.join("instructions.md"), "Bench agent.\n").unwrap();
    let owner = Owner {
        principal_id: "bench".into(),
        principal_type: "user".into(),
        authenticator: "bench".into(),
        ..Default::default()
    };

    rt.block_on(async {
        let runtime = open(tmp.path()).await;
        println!("| log length (events) | turns | fork, median (ms) | fork, max (ms) | RSS growth over {forks} forks (KiB) |");
        println!("|---|---|---|---|---|");
        for &length in &lengths {
            let accepted = runtime
                .send(SendRequest {
                    client_tools: Vec::new(),
                    channel: "http".into(),
                    mode: SessionMode::Chat,
                    owner: owner.clone(),
                    message: "start".into(),
                    continuation: None,
                    title: None,
                    purpose: None,
                    admission: Admission::Coalesce,
                    workspace_files: Vec::new(),
                    dry_run: false,
                    as_of: None,
                    output_schema: None,
                })
                .await
                .unwrap();
            let id = accepted.session_id.clone();
            let mut token = accepted.continuation_token;
            let mut turns = 1;
            settled(&runtime, &id).await;
            while (runtime.store().len(&id.parse().unwrap()).await.unwrap() as usize) < length {
                let a = runtime
                    .follow_up(
                        &id,
                        FollowUp {
                            client_tools: Vec::new(),
                            owner: owner.clone(),
                            message: format!("more {turns}"),
                            continuation_token: Some(token.clone()),
                            admission: Admission::Coalesce,
                            workspace_files: Vec::new(),
                        },
                    )
                    .await
                    .unwrap();
                token = a.continuation_token;
                turns += 1;
                settled(&runtime, &id).await;
            }
            let len = runtime.store().len(&id.parse().unwrap()).await.unwrap();
            let before = rss_kib();
            let mut times = Vec::new();
            for _ in 0..forks {
                let started = Instant::now();
                let forked = runtime
                    .forks()
                    .fork(&id, &owner, len, None)
                    .await
                    .unwrap();
                times.push(started.elapsed());
                assert_eq!(
                    runtime
                        .store()
                        .len(&forked.session_id.parse().unwrap())
                        .await
                        .unwrap(),
                    len + 1
                );
            }
            let grew = rss_kib().saturating_sub(before);
            times.sort();
            let ms = |d: Duration| d.as_secs_f64() * 1000.0;
            println!(
                "| {len} | {turns} | {:.1} | {:.1} | {grew} |",
                ms(times[times.len() / 2]),
                ms(times[times.len() - 1])
            );
        }
        runtime.shutdown(Duration::from_secs(5)).await;
    });
}
