//! Appending, reading back, reopening, and the ids the store refuses.

use agentkit_events::{Error, FileEventStore, NewEvent, StoreOptions};
use agentkit_protocol::{Event, EventType, SessionId};
use serde_json::json;

use super::{id, log_path, store};

fn indices<E: std::borrow::Borrow<Event>>(events: &[E]) -> Vec<u64> {
    events.iter().map(|e| e.borrow().index).collect()
}

#[tokio::test]
async fn append_then_read_round_trips_through_the_file() {
    let (dir, store) = store(StoreOptions::default());
    let s = id("ses_1");
    let first = store
        .append(&s, EventType::SessionStarted, None, json!({"mode": "chat"}))
        .await
        .unwrap();
    let second = store
        .append(&s, EventType::TurnStarted, Some("turn_1"), json!({}))
        .await
        .unwrap();
    assert_eq!((first.index, second.index), (0, 1));
    assert_eq!(first.session_id, s);
    assert_eq!(second.turn_id.as_deref(), Some("turn_1"));
    // `at` is ISO-8601 UTC with milliseconds, like 2026-11-29T21:04:05.123Z.
    assert_eq!(first.at.len(), 24, "{}", first.at);
    assert!(first.at.ends_with('Z') && first.at.as_bytes()[10] == b'T');

    assert_eq!(
        store.read(&s, 0).await.unwrap(),
        vec![Event::clone(&first), Event::clone(&second)]
    );
    assert_eq!(
        store.read(&s, 1).await.unwrap(),
        vec![Event::clone(&second)]
    );
    assert_eq!(store.read(&s, 2).await.unwrap(), vec![]);
    assert_eq!(store.read(&s, 99).await.unwrap(), vec![]);
    assert_eq!(store.len(&s).await.unwrap(), 2);

    let text = std::fs::read_to_string(log_path(&dir, "ses_1")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(text.ends_with('\n'));
    assert!(
        lines[1].starts_with(
            r#"{"type":"turn.started","index":1,"sessionId":"ses_1","turnId":"turn_1","at":""#
        ),
        "{}",
        lines[1]
    );
}

#[tokio::test]
async fn indices_stay_contiguous_across_a_reopen() {
    let (dir, store) = store(StoreOptions::default());
    let s = id("ses_reopen");
    for i in 0..3 {
        store
            .append(&s, EventType::MessageAppended, None, json!({ "i": i }))
            .await
            .unwrap();
    }
    store.sync(&s).await.unwrap();
    drop(store);

    let store = FileEventStore::open(dir.path(), StoreOptions::default()).unwrap();
    assert_eq!(store.len(&s).await.unwrap(), 3);
    let batch = (0..4)
        .map(|i| NewEvent {
            event_type: EventType::MessageAppended,
            turn_id: None,
            data: json!({ "i": 3 + i }),
        })
        .collect();
    let appended = store.append_batch(&s, batch).await.unwrap();
    assert_eq!(indices(&appended), vec![3, 4, 5, 6]);
    let durable = store
        .append_durable(&s, EventType::TurnCompleted, Some("t"), json!({}))
        .await
        .unwrap();
    assert_eq!(durable.index, 7);
    let all = store.read(&s, 0).await.unwrap();
    assert_eq!(indices(&all), (0..8).collect::<Vec<_>>());
    assert_eq!(all[5].data, json!({"i": 5}));
}

#[tokio::test]
async fn sessions_are_independent_and_listed() {
    let (dir, store) = store(StoreOptions::default());
    let (a, b) = (id("a"), id("b-2"));
    let mut tasks = Vec::new();
    for s in [a.clone(), b.clone()] {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..50 {
                store
                    .append(&s, EventType::MessageAppended, None, json!(null))
                    .await
                    .unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(store.len(&a).await.unwrap(), 50);
    assert_eq!(store.len(&b).await.unwrap(), 50);
    // A directory that is not a valid id, or has no log, is not a session.
    std::fs::create_dir_all(dir.path().join("sessions/has.dot")).unwrap();
    std::fs::create_dir_all(dir.path().join("sessions/empty")).unwrap();
    assert_eq!(store.sessions().await.unwrap(), vec![a, b]);
}

#[tokio::test]
async fn concurrent_appends_to_one_session_get_distinct_contiguous_indices() {
    let (_dir, store) = store(StoreOptions::default());
    let s = id("busy");
    let mut tasks = Vec::new();
    for t in 0..8 {
        let (store, s) = (store.clone(), s.clone());
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            for i in 0..100 {
                let e = store
                    .append(&s, EventType::MessageAppended, None, json!([t, i]))
                    .await
                    .unwrap();
                mine.push(e.index);
            }
            mine
        }));
    }
    let mut seen = Vec::new();
    for task in tasks {
        let mine = task.await.unwrap();
        // Each task's own appends are ordered.
        assert!(mine.windows(2).all(|w| w[0] < w[1]));
        seen.extend(mine);
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..800).collect::<Vec<_>>());
    let all = store.read(&s, 0).await.unwrap();
    assert_eq!(indices(&all), (0..800).collect::<Vec<_>>());
}

#[tokio::test]
async fn unknown_sessions_are_not_found_and_not_created() {
    let (dir, store) = store(StoreOptions::default());
    let s = id("nobody");
    assert!(matches!(
        store.read(&s, 0).await,
        Err(Error::SessionNotFound { .. })
    ));
    assert!(matches!(
        store.len(&s).await,
        Err(Error::SessionNotFound { .. })
    ));
    assert!(matches!(
        store.subscribe(&s, 0).await,
        Err(Error::SessionNotFound { .. })
    ));
    assert!(!dir.path().join("sessions/nobody").exists());
    assert_eq!(store.sessions().await.unwrap(), Vec::<SessionId>::new());
}

#[test]
fn invalid_session_ids_are_rejected_before_touching_disk() {
    let dir = tempfile::tempdir().unwrap();
    let _store = FileEventStore::open(dir.path(), StoreOptions::default()).unwrap();
    let long = "x".repeat(129);
    for bad in ["../x", "a/b", "", ".", "..", "a.b", "/etc", &long] {
        assert!(SessionId::parse(bad).is_err(), "{bad:?}");
        // The wire form is checked too: an id from a request body or a log
        // line goes through the same rule.
        let wire = serde_json::to_string(bad).unwrap();
        assert!(serde_json::from_str::<SessionId>(&wire).is_err(), "{bad:?}");
    }
    // Nothing but the empty sessions directory (and the journal's) exists.
    let mut entries: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    entries.sort();
    assert_eq!(entries, ["journal", "sessions"]);
    assert_eq!(
        std::fs::read_dir(dir.path().join("sessions"))
            .unwrap()
            .count(),
        0
    );
}

/// Many sessions syncing at once through the one syncer: every sync
/// answers, is counted, and what it synced is on disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_syncs_all_land_and_are_counted() {
    let (dir, store) = super::store(StoreOptions::default());
    let n = 64;
    let mut tasks = Vec::new();
    for i in 0..n {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let session = super::id(&format!("s{i}"));
            store
                .append(&session, EventType::SessionStarted, None, json!({}))
                .await
                .unwrap();
            store.sync(&session).await.unwrap();
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    // How many batches depends on timing; every request is counted.
    assert_eq!(store.sync_stats().requests, n);
    for i in 0..n {
        let text = std::fs::read_to_string(super::log_path(&dir, &format!("s{i}"))).unwrap();
        assert_eq!(text.lines().count(), 1);
    }
    // A closed log syncs through the same path.
    let s0 = super::id("s0");
    assert!(store.close(&s0));
    store.sync(&s0).await.unwrap();
    assert_eq!(store.sync_stats().requests, n + 1);
}

/// An idle host closes the logs nobody uses: a followed log stays open,
/// and a closed one opens again when next read or appended to, its
/// events and indices intact.
#[tokio::test]
async fn unused_logs_close_and_open_again_when_next_asked_for() {
    let (_dir, store) = super::store(StoreOptions::default());
    let (a, b) = (super::id("a"), super::id("b"));
    for s in [&a, &b] {
        store
            .append(s, EventType::SessionStarted, None, json!({}))
            .await
            .unwrap();
    }
    assert_eq!(store.open_logs(), 2);
    let followed = store.subscribe(&b, 0).await.unwrap();
    assert_eq!(store.close_unused(), 1);
    assert_eq!(store.open_logs(), 1);
    assert_eq!(store.read(&a, 0).await.unwrap().len(), 1);
    let next = store
        .append(
            &a,
            EventType::MessageReceived,
            None,
            json!({"text": "again"}),
        )
        .await
        .unwrap();
    assert_eq!(next.index, 1);
    drop(followed);
    assert_eq!(store.close_unused(), 2);
    assert_eq!(store.open_logs(), 0);
    assert_eq!(indices(&store.read(&a, 0).await.unwrap()), vec![0, 1]);
}
