//! The cost of many pending reminders: 100,000 armed reminders in
//! `agentkit.sqlite`, then the time to load them at boot, the memory they
//! hold, and how precisely due reminders fire while they are all armed.
//!
//! `CARGO_TARGET_DIR=/tmp/bench-sched cargo bench -p agentkit-runtime --bench reminders`
//! (`REMINDERS=N` changes the count; `DUE=N` the reminders timed for
//! precision; `WRITERS=N` the tasks creating and cancelling reminders
//! while those fire).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentkit_manifest::Admission;
use agentkit_protocol::EventType;
use agentkit_runtime::{
    AgentRuntime, Clock, ManualClock, NewReminder, Owner, ReminderAction, ReminderWhen,
    RuntimeOptions, SendRequest, SessionMode, SystemClock,
};

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

async fn open(dir: &std::path::Path, clock: Arc<dyn Clock>) -> AgentRuntime {
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
            clock,
        },
    )
    .await
    .unwrap()
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let n = env_usize("REMINDERS", 100_000);
    let due = env_usize("DUE", 500);
    let writers_n = env_usize("WRITERS", 4);
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
    std::fs::write(
        agent.join("script.json"),
        r#"{"turns": [{"steps": [{"text": "ok"}]}]}"#,
    )
    .unwrap();
    std::fs::write(agent.join("instructions.md"), "Bench agent.\n").unwrap();

    rt.block_on(async {
        // 1. Create N pending reminders (1 h to 24 h away) in batches.
        let clock = ManualClock::new(chrono::Utc::now());
        let runtime = open(tmp.path(), Arc::new(clock.clone())).await;
        let started = Instant::now();
        for chunk in (0..n).collect::<Vec<_>>().chunks(10_000) {
            let batch = chunk
                .iter()
                .map(|i| NewReminder {
                    purpose: "bench".into(),
                    channel_id: "bench".into(),
                    continuation_token: format!("k{}", i % 1000),
                    when: ReminderWhen::Delay(Duration::from_secs(
                        3600 + (*i as u64 * 37) % 82_800,
                    )),
                    action: ReminderAction::Prompt {
                        prompt: "Re-check the pull request and report only if CI changed.".into(),
                        until: Some("Cancel once CI is green.".into()),
                    },
                })
                .collect();
            runtime.reminders().create_many(batch).await.unwrap();
        }
        let create = started.elapsed();
        runtime.shutdown(Duration::from_secs(5)).await;
        drop(runtime);
        let db = std::fs::metadata(tmp.path().join("state/agentkit.sqlite"))
            .map(|m| m.len())
            .unwrap_or(0);

        // 2. Boot: open the runtime again and load them.
        let before = rss_kib();
        let started = Instant::now();
        let runtime = open(tmp.path(), Arc::new(SystemClock)).await;
        let load = started.elapsed();
        let after = rss_kib();
        assert_eq!(runtime.reminders().armed().await, n);

        // 3. Precision under load: DUE reminders 1-3 s away, fired by the
        //    timer loop with all N armed; lateness = when the wake was
        //    recorded (message.received) minus when it was due.
        let owner = Owner {
            principal_id: "bench".into(),
            principal_type: "app".into(),
            authenticator: "bench".into(),
            ..Default::default()
        };
        runtime
            .send(SendRequest {
                client_tools: Vec::new(),
                channel: "bench".into(),
                mode: SessionMode::Chat,
                owner,
                message: "start".into(),
                continuation: Some("due".into()),
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
        let mut tap = runtime.store().tap();
        let t0 = chrono::Utc::now() + chrono::Duration::seconds(1);
        let mut due_at = std::collections::HashMap::new();
        for i in 0..due {
            let at = t0 + chrono::Duration::milliseconds((i as i64 * 2000) / due.max(1) as i64);
            let r = runtime
                .reminders()
                .create(NewReminder {
                    purpose: "due".into(),
                    channel_id: "bench".into(),
                    continuation_token: "due".into(),
                    when: ReminderWhen::At(at),
                    action: ReminderAction::Prompt {
                        prompt: "wake".into(),
                        until: None,
                    },
                })
                .await
                .unwrap();
            due_at.insert(r.id, at);
        }
        let r = runtime.clone();
        let timers = tokio::spawn(async move { r.reminders().run(r.shutdown_token()).await });
        // Load while they fire: WRITERS tasks creating and cancelling
        // reminders back to back (each a durable write of its own).
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writes = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let mut writers = Vec::new();
        for w in 0..writers_n {
            let (r, stop, writes) = (runtime.clone(), stop.clone(), writes.clone());
            writers.push(tokio::spawn(async move {
                let mut i = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let created = r
                        .reminders()
                        .create(NewReminder {
                            purpose: "load".into(),
                            channel_id: "bench".into(),
                            continuation_token: format!("load{w}-{i}"),
                            when: ReminderWhen::Delay(Duration::from_secs(7200)),
                            action: ReminderAction::Prompt {
                                prompt: "load".into(),
                                until: None,
                            },
                        })
                        .await
                        .unwrap();
                    r.reminders().cancel(&created.id).await.unwrap();
                    writes.fetch_add(2, std::sync::atomic::Ordering::Relaxed);
                    i += 1;
                    // Let the scheduler breathe between pairs, as callers
                    // on other requests would.
                    tokio::task::yield_now().await;
                }
            }));
        }
        let load_started = Instant::now();
        let mut late = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while late.len() < due && Instant::now() < deadline {
            let Ok(Ok(event)) = tokio::time::timeout(Duration::from_secs(5), tap.recv()).await
            else {
                continue;
            };
            if event.event_type != EventType::MessageReceived {
                continue;
            }
            let now = chrono::Utc::now();
            let text = event.data["text"].as_str().unwrap_or_default();
            if let Some(id) = due_at.keys().find(|id| text.contains(id.as_str())) {
                let at = due_at[id];
                late.push((now - at).num_microseconds().unwrap_or(0) as f64 / 1000.0);
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for w in writers {
            w.await.unwrap();
        }
        let load_secs = load_started.elapsed().as_secs_f64();
        let writes = writes.load(std::sync::atomic::Ordering::Relaxed);
        timers.abort();
        late.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let pct = |p: f64| late[((late.len() - 1) as f64 * p) as usize];
        println!("reminders pending:        {n}");
        println!(
            "create (10k per tx):      {:.2} s ({:.0}/s)",
            create.as_secs_f64(),
            n as f64 / create.as_secs_f64()
        );
        println!("agentkit.sqlite size:     {:.1} MiB", db as f64 / 1048576.0);
        println!(
            "load at boot:             {:.0} ms",
            load.as_secs_f64() * 1000.0
        );
        println!(
            "RSS before/after open:    {} / {} KiB (+{:.1} MiB, {:.0} B per reminder)",
            before,
            after,
            (after.saturating_sub(before)) as f64 / 1024.0,
            (after.saturating_sub(before)) as f64 * 1024.0 / n as f64
        );
        println!(
            "load during firing:       {writers_n} writers, {writes} writes ({:.0}/s)",
            writes as f64 / load_secs
        );
        println!("fired on time:            {}/{due}", late.len());
        if !late.is_empty() {
            println!(
                "lateness ms p50/p99/max:  {:.1} / {:.1} / {:.1}",
                pct(0.5),
                pct(0.99),
                late[late.len() - 1]
            );
        }
        runtime.shutdown(Duration::from_secs(5)).await;
    });
}
