//! Forks share their original's events instead of copying them: the
//! prefix is read back whole (deltas with their text so far, the fork's
//! session id), published to nobody, unchanged by what the original
//! appends later or by its deletion, and kept across a reopen; forks of
//! forks reach back through every level.

use std::time::Duration;

use agentkit_events::{FileEventStore, StoreOptions};
use agentkit_protocol::{Event, EventType, SessionId};
use serde_json::json;

use super::{id, store};

async fn say(store: &FileEventStore, session: &SessionId, words: &[&str]) {
    store
        .append(session, EventType::TurnStarted, Some("t"), json!({}))
        .await
        .unwrap();
    for word in words {
        store
            .append(
                session,
                EventType::MessageAppended,
                Some("t"),
                json!({"delta": word, "text": "ignored: the writer keeps deltas only"}),
            )
            .await
            .unwrap();
    }
    store
        .append(session, EventType::TurnCompleted, Some("t"), json!({}))
        .await
        .unwrap();
}

fn texts(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| e.data.get("text").and_then(|t| t.as_str()))
        .map(str::to_owned)
        .collect()
}

/// The files in a session's folder and the bytes of each.
fn folder(root: &std::path::Path, session: &SessionId) -> Vec<(String, u64)> {
    let mut files: Vec<(String, u64)> =
        std::fs::read_dir(root.join("sessions").join(session.as_str()))
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    e.metadata().unwrap().len(),
                )
            })
            .collect();
    files.sort();
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_shares_its_originals_events_and_reads_them_whole() {
    let (dir, store) = store(StoreOptions::default());
    let original = id("fork-from");
    say(&store, &original, &["one ", "two ", "three"]).await; // 0..5
    let original_bytes = std::fs::metadata(super::log_path(&dir, original.as_str()))
        .unwrap()
        .len();

    let fork = id("fork-to");
    let mut tap = store.tap();
    store.fork(&original, 5, &fork).await.unwrap();
    // Nothing was written but links and the base: the fork's own log is
    // empty, and its prefix is the original's file, linked.
    let files = folder(dir.path(), &fork);
    assert_eq!(
        files.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["base-0.ndjson", "base.json", "events.ndjson"]
    );
    assert_eq!(files[0].1, original_bytes);
    assert_eq!(files[2].1, 0);
    assert_eq!(store.len(&fork).await.unwrap(), 5);

    // The original goes on; the fork does not see it.
    say(&store, &original, &["later"]).await; // 5..8
    store
        .append(&fork, EventType::SessionWaiting, None, json!({}))
        .await
        .unwrap();
    // The tap's first event is the fork's own, at index 5.
    let mut first = None;
    for _ in 0..8 {
        let e = tokio::time::timeout(Duration::from_secs(5), tap.recv())
            .await
            .unwrap()
            .unwrap();
        if e.session_id == fork {
            first = Some(e.index);
            break;
        }
    }
    assert_eq!(first, Some(5), "no copied event is published");

    let read = store.read(&fork, 0).await.unwrap();
    assert_eq!(read.len(), 6);
    assert_eq!(texts(&read), ["one ", "one two ", "one two three"]);
    assert!(read.iter().all(|e| e.session_id == fork), "{read:?}");
    assert!(read.iter().enumerate().all(|(i, e)| e.index == i as u64));
    assert_eq!(read[5].event_type, EventType::SessionWaiting);
    // A read from inside the prefix rebuilds the message's text so far,
    // and a subscription replays across the seam, then follows.
    let mut sub = store.subscribe(&fork, 2).await.unwrap();
    let mut seen = Vec::new();
    for _ in 2..6 {
        let e = sub.next().await.unwrap();
        seen.push((e.index, e.data.get("text").cloned()));
    }
    assert_eq!(
        seen,
        [
            (2, Some(json!("one two "))),
            (3, Some(json!("one two three"))),
            (4, None),
            (5, None)
        ]
    );
    store
        .append(&fork, EventType::SessionWaiting, None, json!({}))
        .await
        .unwrap();
    assert_eq!(sub.next().await.unwrap().index, 6);

    // A fork of the fork past its prefix reaches back through both.
    let grandchild = id("fork-of-fork");
    store.fork(&fork, 6, &grandchild).await.unwrap();
    let names: Vec<String> = folder(dir.path(), &grandchild)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        names,
        [
            "base-0.ndjson",
            "base-1.ndjson",
            "base.json",
            "events.ndjson"
        ]
    );
    // And one inside the prefix takes a cut of the original's file only.
    let early = id("fork-early");
    store.fork(&fork, 3, &early).await.unwrap();
    assert_eq!(store.len(&early).await.unwrap(), 3);

    // Deleting the original (its folder, as a session's deletion does)
    // leaves every fork whole, and so does opening the store again.
    store.close(&original);
    std::fs::remove_dir_all(dir.path().join("sessions").join(original.as_str())).unwrap();
    drop(sub);
    drop(store);
    let store = FileEventStore::open(dir.path(), StoreOptions::default()).unwrap();
    let again = store.read(&fork, 0).await.unwrap();
    assert_eq!(again.len(), 7);
    assert_eq!(again[..6], read[..]);
    let deep = store.read(&grandchild, 0).await.unwrap();
    assert_eq!(deep.len(), 6);
    assert_eq!(texts(&deep), ["one ", "one two ", "one two three"]);
    assert!(deep.iter().all(|e| e.session_id == grandchild));
    let cut = store.read(&early, 0).await.unwrap();
    assert_eq!(texts(&cut), ["one ", "one two "]);
    store
        .append(&grandchild, EventType::SessionWaiting, None, json!({}))
        .await
        .unwrap();
    assert_eq!(store.len(&grandchild).await.unwrap(), 7);
    assert!(
        !store
            .sessions()
            .await
            .unwrap()
            .iter()
            .any(|s| s.as_str().starts_with('.')),
        "no half-made fork is listed"
    );
}

#[tokio::test]
async fn a_fork_past_the_end_is_refused_and_leaves_nothing() {
    let (dir, store) = store(StoreOptions::default());
    let original = id("short");
    say(&store, &original, &["a"]).await;
    let fork = id("too-far");
    assert!(store.fork(&original, 4, &fork).await.is_err());
    assert!(!dir.path().join("sessions/too-far").exists());
    assert!(store.fork(&id("missing"), 1, &fork).await.is_err());
}
