//! The host bridge's key-value store on a shared database: what one host
//! sets, another reads, with the SQLite store's expiry and prefix rules.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use agentkit_runtime::{KvStore, MemoryBackend, SharedBackend};
use agentkit_test_support::pg::throwaway_database;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hosts_share_one_key_value_store_in_memory() {
    let store = MemoryBackend::new();
    two_hosts_share_one_key_value_store(&store, &store.host("host-2")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hosts_share_one_key_value_store_in_postgresql() {
    let Some(db) = throwaway_database() else {
        return;
    };
    let host = || async {
        agentkit_test_support::pg::PgBackend::open(&db.url)
            .await
            .unwrap()
    };
    two_hosts_share_one_key_value_store(&host().await, &host().await).await;
}

async fn two_hosts_share_one_key_value_store(one: &dyn SharedBackend, two: &dyn SharedBackend) {
    let now = Arc::new(AtomicI64::new(1_000_000));
    let clock = {
        let now = now.clone();
        Arc::new(move || now.load(Ordering::SeqCst))
    };
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = KvStore::open_with_clock(dir_a.path(), clock.clone())
        .unwrap()
        .shared(one, "bot");
    let b = KvStore::open_with_clock(dir_b.path(), clock)
        .unwrap()
        .shared(two, "bot");
    let other_agent = KvStore::open(dir_b.path()).unwrap().shared(two, "other");

    a.set("100%_done", &json!({"n": 1}), None).await.unwrap();
    a.set("1000", &json!("x"), Some(Duration::from_secs(10)))
        .await
        .unwrap();
    a.set("zz", &json!(true), None).await.unwrap();
    let got = b.get("100%_done").await.unwrap().unwrap();
    assert_eq!(got.value, json!({"n": 1}));
    assert!(other_agent.get("100%_done").await.unwrap().is_none());
    // `%` and `_` in a prefix are characters, not patterns.
    let listed: Vec<String> = b
        .list("100%", 10)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.key)
        .collect();
    assert_eq!(listed, vec!["100%_done"]);
    assert_eq!(b.list("1", 10).await.unwrap().len(), 2);
    // Past its TTL the entry is gone on every host.
    now.fetch_add(10_001, Ordering::SeqCst);
    assert!(b.get("1000").await.unwrap().is_none());
    assert!(!a.delete("1000").await.unwrap());
    assert!(b.delete("zz").await.unwrap());
    assert!(a.get("zz").await.unwrap().is_none());
    // The host's own SQLite file holds none of it.
    let local = KvStore::open(dir_a.path()).unwrap();
    assert!(local.get("100%_done").await.unwrap().is_none());
}
