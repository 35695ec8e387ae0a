//! Subscriptions: replay plus live follow, exactly once and in order, under
//! concurrent appends and with subscribers that fall behind.

use std::time::Duration;

use agentkit_events::{FileEventStore, StoreOptions, Subscription};
use agentkit_protocol::{EventType, SessionId};
use serde_json::json;

use super::{id, store};

const TOTAL: u64 = 2_000;

/// A small deterministic generator, so failures reproduce.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// Reads from `sub` until index `end - 1` and checks it saw exactly
/// `start..end`.
async fn expect_exactly(mut sub: Subscription, start: u64, end: u64) {
    for expected in start..end {
        let event = tokio::time::timeout(Duration::from_secs(20), sub.next())
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for index {expected} (start {start})"))
            .unwrap();
        assert_eq!(event.index, expected, "subscriber from {start}");
        assert_eq!(event.data, json!({ "i": expected }));
    }
}

async fn append_all(store: FileEventStore, s: SessionId, from: u64, to: u64) {
    for i in from..to {
        store
            .append(&s, EventType::MessageAppended, None, json!({ "i": i }))
            .await
            .unwrap();
        if i % 7 == 0 {
            tokio::task::yield_now().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn subscribers_from_any_index_see_every_event_once_while_appends_race() {
    let (_dir, store) = store(StoreOptions::default());
    let s = id("race");
    // The session must exist before anyone subscribes.
    append_all(store.clone(), s.clone(), 0, 1).await;
    let writer = tokio::spawn(append_all(store.clone(), s.clone(), 1, TOTAL));

    let mut rng = Lcg(0x5eed);
    let mut readers = Vec::new();
    for _ in 0..12 {
        // Subscribe at a random moment, from a random index: behind the
        // writer, at it, or ahead of it.
        let wait_for = rng.below(TOTAL);
        let start = rng.below(TOTAL);
        let (store, s) = (store.clone(), s.clone());
        readers.push(tokio::spawn(async move {
            while store.len(&s).await.unwrap() < wait_for {
                tokio::task::yield_now().await;
            }
            let sub = store.subscribe(&s, start).await.unwrap();
            expect_exactly(sub, start, TOTAL).await;
        }));
    }
    // Two more at the edges: from 0, and from the very end.
    let sub0 = store.subscribe(&s, 0).await.unwrap();
    let sub_end = store.subscribe(&s, TOTAL - 1).await.unwrap();
    readers.push(tokio::spawn(expect_exactly(sub0, 0, TOTAL)));
    readers.push(tokio::spawn(expect_exactly(sub_end, TOTAL - 1, TOTAL)));

    writer.await.unwrap();
    for reader in readers {
        reader.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_subscriber_catches_up_from_the_file() {
    let (_dir, store) = store(StoreOptions {
        broadcast_capacity: 2,
        ..StoreOptions::default()
    });
    let s = id("lag");
    append_all(store.clone(), s.clone(), 0, 1).await;
    let mut slow = store.subscribe(&s, 0).await.unwrap();
    let writer = tokio::spawn(append_all(store.clone(), s.clone(), 1, 600));
    for expected in 0..600 {
        if expected % 50 == 0 {
            // Fall far behind now and then.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let event = tokio::time::timeout(Duration::from_secs(20), slow.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(event.index, expected);
    }
    writer.await.unwrap();
    assert_eq!(slow.next_index(), 600);
}

#[tokio::test]
async fn a_subscription_replays_a_reopened_log_then_follows_live() {
    let (dir, store) = store(StoreOptions::default());
    let s = id("replay");
    append_all(store.clone(), s.clone(), 0, 3000).await;
    drop(store);

    let store = FileEventStore::open(dir.path(), StoreOptions::default()).unwrap();
    let mut sub = store.subscribe(&s, 1500).await.unwrap();
    for expected in 1500..3000 {
        assert_eq!(sub.next().await.unwrap().index, expected);
    }
    // Nothing more yet; a timed-out `next` loses nothing.
    let idle = tokio::time::timeout(Duration::from_millis(20), sub.next()).await;
    assert!(idle.is_err());
    append_all(store.clone(), s.clone(), 3000, 3002).await;
    assert_eq!(sub.next().await.unwrap().index, 3000);
    assert_eq!(sub.next().await.unwrap().index, 3001);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tap_sees_every_session_in_order_and_counts_what_it_missed() {
    let (_dir, store) = store(StoreOptions::default());
    let mut tap = store.tap();
    let (a, b) = (id("tap-a"), id("tap-b"));
    let wa = tokio::spawn(append_all(store.clone(), a.clone(), 0, 300));
    let wb = tokio::spawn(append_all(store.clone(), b.clone(), 0, 300));
    let (mut next_a, mut next_b) = (0, 0);
    while next_a < 300 || next_b < 300 {
        let event = tokio::time::timeout(Duration::from_secs(20), tap.recv())
            .await
            .expect("tap timed out")
            .unwrap();
        let next = if event.session_id == a {
            &mut next_a
        } else {
            &mut next_b
        };
        assert_eq!(event.index, *next, "per-session order on the tap");
        *next += 1;
    }
    wa.await.unwrap();
    wb.await.unwrap();

    // A receiver that falls behind is told how many events it missed.
    let (_dir, small) = super::store(StoreOptions {
        tap_capacity: 4,
        ..StoreOptions::default()
    });
    let mut slow = small.tap();
    append_all(small.clone(), id("tap-c"), 0, 10).await;
    match slow.recv().await {
        Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => assert_eq!(n, 6),
        other => panic!("expected a lag report, got {other:?}"),
    }
}
