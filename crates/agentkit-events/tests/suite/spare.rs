//! New sessions on spare logs: no folder made on the request, every
//! reader finds the session before its folder is moved, and a stop
//! before the move (or a power cut) loses nothing.

use std::path::Path;
use std::time::Duration;

use agentkit_events::{FileEventStore, NewEvent, StoreOptions};
use agentkit_protocol::{EventData, EventType, MessageReceived, SessionId};

use super::id;

/// Folders are never moved in the background: what a stop finds.
fn unmoved() -> StoreOptions {
    StoreOptions {
        journal_checkpoint: Duration::from_secs(3600),
        spare_move_after: Duration::from_secs(3600),
        ..StoreOptions::default()
    }
}

fn said(text: &str) -> NewEvent {
    NewEvent::new(
        Some("t1".to_owned()),
        EventData::MessageReceived(MessageReceived {
            text: text.to_owned(),
            images: Vec::new(),
            from: None,
            traceparent: None,
            client_tools: Vec::new(),
        }),
    )
}

fn spares(root: &Path) -> usize {
    std::fs::read_dir(root.join("spare")).map_or(0, |d| d.count())
}

/// A store whose spares are made: its first new session made its own
/// folder and started the background.
async fn primed(root: &Path, options: StoreOptions) -> FileEventStore {
    let store = FileEventStore::open(root, options).unwrap();
    store.create(&id("first"), vec![said("hi")]).await.unwrap();
    assert!(root.join("sessions/first/events.ndjson").is_file());
    for _ in 0..200 {
        // Made, and handed to the pool (a folder is made before that).
        if spares(root) >= 16 && store.spares_ready() >= 16 {
            return store;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no spares were made");
}

#[tokio::test]
async fn a_new_session_needs_no_folder_and_every_reader_finds_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = primed(dir.path(), unmoved()).await;
    let before = spares(dir.path());
    let s = id("new");
    let events = store
        .create(&s, vec![said("one"), said("two")])
        .await
        .unwrap();
    assert_eq!(events.len(), 2);
    store.sync(&s).await.unwrap();
    // No folder yet: the log is a spare taken from the pool.
    assert!(!dir.path().join("sessions/new").exists());
    assert_eq!(spares(dir.path()), before);
    assert!(store.has_log(&s));
    assert!(!store.has_log(&id("nobody")));
    assert_eq!(
        store.sessions().await.unwrap(),
        vec![id("first"), s.clone()]
    );
    assert_eq!(store.len(&s).await.unwrap(), 2);
    let read = store.read(&s, 0).await.unwrap();
    assert_eq!(
        read,
        events
            .iter()
            .map(|e| agentkit_protocol::Event::clone(e))
            .collect::<Vec<_>>()
    );
    let mut follow = store.subscribe(&s, 1).await.unwrap();
    assert_eq!(follow.next().await.unwrap().index, 1);

    // Whoever needs the folder moves it; the log stays the same file.
    store.make_folder(&s).await.unwrap();
    assert!(!store.has_log(&id("nobody")));
    assert!(store.has_log(&s));
    assert_eq!(store.spares_moved(), 1);
    store
        .append(
            &s,
            EventType::MessageReceived,
            Some("t1"),
            serde_json::json!({"text": "three"}),
        )
        .await
        .unwrap();
    let text = std::fs::read_to_string(dir.path().join("sessions/new/events.ndjson")).unwrap();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert_eq!(spares(dir.path()), before - 1);
}

#[tokio::test]
async fn the_background_moves_a_new_sessions_folder() {
    let dir = tempfile::tempdir().unwrap();
    let options = StoreOptions {
        spare_move_after: Duration::from_millis(20),
        ..StoreOptions::default()
    };
    let store = primed(dir.path(), options).await;
    let s = id("moved");
    store.create(&s, vec![said("hi")]).await.unwrap();
    let path = dir.path().join("sessions/moved/events.ndjson");
    for _ in 0..300 {
        if path.is_file() && !store.has_log(&id("nobody")) && store.spares_moved() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(store.spares_moved(), 1);
    assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 1);
}

#[tokio::test]
async fn a_stop_before_the_move_loses_nothing_that_reached_the_os() {
    let dir = tempfile::tempdir().unwrap();
    let s = id("stopped");
    let written = {
        let store = primed(dir.path(), unmoved()).await;
        let mut events = store.create(&s, vec![said("acknowledged")]).await.unwrap();
        store.sync(&s).await.unwrap();
        // Reached the OS, not synced: a kill -9 keeps it too.
        events.extend(store.create(&s, vec![said("unsynced")]).await.unwrap());
        assert!(!dir.path().join("sessions/stopped").exists());
        events
    };
    let reopened = FileEventStore::open(dir.path(), unmoved()).unwrap();
    assert!(dir.path().join("sessions/stopped/events.ndjson").is_file());
    assert_eq!(reopened.read(&s, 0).await.unwrap().len(), written.len());
    // The unused spares are gone.
    assert_eq!(spares(dir.path()), 0);
    assert_eq!(reopened.sessions().await.unwrap(), vec![id("first"), s]);
}

#[tokio::test]
async fn a_power_cut_before_the_move_is_replayed_from_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let s = id("cut");
    let events = {
        let store = primed(dir.path(), unmoved()).await;
        let events = store.create(&s, vec![said("acknowledged")]).await.unwrap();
        store.sync(&s).await.unwrap();
        events
    };
    // The power cut took the spare's folder and its bytes (they were
    // never synced but through the journal).
    for entry in std::fs::read_dir(dir.path().join("spare")).unwrap() {
        std::fs::remove_dir_all(entry.unwrap().path()).unwrap();
    }
    let reopened = FileEventStore::open(dir.path(), unmoved()).unwrap();
    let read: Vec<SessionId> = reopened.sessions().await.unwrap();
    assert_eq!(read, vec![s.clone(), id("first")]);
    assert_eq!(
        reopened.read(&s, 0).await.unwrap(),
        events
            .iter()
            .map(|e| agentkit_protocol::Event::clone(e))
            .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_store_opened_without_its_journal_moves_what_a_stop_left_too() {
    let dir = tempfile::tempdir().unwrap();
    let s = id("left");
    {
        let store = primed(dir.path(), unmoved()).await;
        store.create(&s, vec![said("hi")]).await.unwrap();
        assert!(!dir.path().join("sessions/left").exists());
    }
    let plain = StoreOptions {
        journal: false,
        ..unmoved()
    };
    let reopened = FileEventStore::open(dir.path(), plain).unwrap();
    assert_eq!(reopened.read(&s, 0).await.unwrap().len(), 1);
    assert_eq!(spares(dir.path()), 0);
}
