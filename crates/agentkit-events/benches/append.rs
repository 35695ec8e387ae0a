//! Event store benchmarks: append throughput across 64 sessions, and
//! fan-out latency from one append to 1,000 live subscribers.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::{Duration, Instant};

use agentkit_events::{FileEventStore, NewEvent, StoreOptions};
use agentkit_protocol::{EventType, SessionId};
use criterion::{Criterion, Throughput};
use serde_json::json;
use tokio::runtime::Runtime;

const SESSIONS: usize = 64;
const PER_SESSION: usize = 500;
const SUBSCRIBERS: usize = 1_000;
const FANOUT_EVENTS: u64 = 200;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Appends `PER_SESSION` small events to each of 64 sessions at once, in
/// batches of `batch` (1 = one `append` call per event).
async fn append_round(store: &FileEventStore, round: u64, batch: usize) {
    let mut tasks = Vec::with_capacity(SESSIONS);
    for n in 0..SESSIONS {
        let store = store.clone();
        let s = SessionId::parse(&format!("r{round}-s{n}")).unwrap();
        tasks.push(tokio::spawn(async move {
            if batch == 1 {
                for _ in 0..PER_SESSION {
                    store
                        .append(
                            &s,
                            EventType::MessageAppended,
                            Some("t1"),
                            json!({"delta": "hi"}),
                        )
                        .await
                        .unwrap();
                }
            } else {
                for _ in 0..PER_SESSION / batch {
                    let events = (0..batch)
                        .map(|_| NewEvent {
                            event_type: EventType::MessageAppended,
                            turn_id: Some("t1".to_owned()),
                            data: json!({"delta": "hi"}),
                        })
                        .collect();
                    store.append_batch(&s, events).await.unwrap();
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

fn append_throughput(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let mut group = c.benchmark_group("append_64_sessions");
    group.throughput(Throughput::Elements((SESSIONS * PER_SESSION) as u64));
    group.sample_size(10);
    let mut round = 0u64;
    for batch in [1usize, 20] {
        group.bench_function(format!("batch_{batch}"), |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    round += 1;
                    // A fresh store per round: the store keeps every log it
                    // opened, and thousands of sessions would run out of
                    // file descriptors.
                    let store = FileEventStore::open(dir.path(), StoreOptions::default()).unwrap();
                    let start = Instant::now();
                    rt.block_on(append_round(&store, round, batch));
                    spent += start.elapsed();
                }
                spent
            });
        });
    }
    group.finish();
}

/// Time from the start of `append` to each of 1,000 subscribers holding the
/// event, over `FANOUT_EVENTS` appends spaced apart.
fn fanout_latency() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let store = FileEventStore::open(dir.path(), StoreOptions::default()).unwrap();
    let s = SessionId::parse("fanout").unwrap();
    let base = Instant::now();
    let mut samples: Vec<u64> = rt.block_on(async {
        store
            .append(&s, EventType::SessionStarted, None, json!({}))
            .await
            .unwrap();
        let mut readers = Vec::with_capacity(SUBSCRIBERS);
        for _ in 0..SUBSCRIBERS {
            let mut sub = store.subscribe(&s, 1).await.unwrap();
            readers.push(tokio::spawn(async move {
                let mut lat = Vec::with_capacity(FANOUT_EVENTS as usize);
                for _ in 0..FANOUT_EVENTS {
                    let event = sub.next().await.unwrap();
                    let sent = event.data["t"].as_u64().unwrap();
                    let now = u64::try_from(base.elapsed().as_nanos()).unwrap();
                    lat.push(now - sent);
                }
                lat
            }));
        }
        for _ in 0..FANOUT_EVENTS {
            let t = u64::try_from(base.elapsed().as_nanos()).unwrap();
            store
                .append(&s, EventType::MessageAppended, None, json!({ "t": t }))
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let mut all = Vec::new();
        for reader in readers {
            all.extend(reader.await.unwrap());
        }
        all
    });
    samples.sort_unstable();
    let pct = |p: f64| {
        let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
        Duration::from_nanos(samples[i])
    };
    println!(
        "fan-out to {SUBSCRIBERS} subscribers over {FANOUT_EVENTS} appends ({} samples): p50 {:?}, p99 {:?}, max {:?}",
        samples.len(),
        pct(0.50),
        pct(0.99),
        pct(1.0)
    );
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    append_throughput(&mut c);
    c.final_summary();
    fanout_latency();
}
