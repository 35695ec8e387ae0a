//! The journal: syncs made durable through one file, replayed after a
//! power cut. A power cut is played by taking back what the OS was never
//! made to write: a new session's folder, the tail of a log past its last
//! direct `fdatasync`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agentkit_events::{FileEventStore, StoreOptions};
use agentkit_protocol::EventType;
use serde_json::json;

use super::{id, log_path};

fn options(checkpoint: Duration) -> StoreOptions {
    StoreOptions {
        journal_checkpoint: checkpoint,
        ..StoreOptions::default()
    }
}

/// No checkpoint during a test: the segments stay for the replay.
fn keep() -> StoreOptions {
    options(Duration::from_secs(3600))
}

fn segments(root: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(root.join("journal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "journal"))
        .collect();
    found.sort();
    found
}

/// Replayed segments are synced and deleted in the background.
async fn retired(root: &Path) -> bool {
    for _ in 0..200 {
        if segments(root).is_empty() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

async fn say(store: &FileEventStore, session: &str, n: usize) {
    let session = id(session);
    for i in 0..n {
        store
            .append(
                &session,
                EventType::MessageReceived,
                Some("t1"),
                json!({"text": format!("line {i} of {session}")}),
            )
            .await
            .unwrap();
    }
    store.sync(&session).await.unwrap();
}

fn truncate(path: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

#[tokio::test]
async fn a_power_cut_after_journaled_syncs_is_replayed_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    // A log from an earlier start, synced by itself.
    {
        let store = FileEventStore::open(
            dir.path(),
            StoreOptions {
                journal: false,
                ..StoreOptions::default()
            },
        )
        .unwrap();
        say(&store, "old", 2).await;
    }
    let old_len = std::fs::metadata(log_path(&dir, "old")).unwrap().len();

    let store = FileEventStore::open(dir.path(), keep()).unwrap();
    say(&store, "fresh", 3).await;
    say(&store, "fresh", 2).await;
    say(&store, "twice", 1).await;
    say(&store, "twice", 4).await;
    // A reopened log's first sync is its own `fdatasync`; the next ones
    // are journaled from where it stood.
    say(&store, "old", 1).await;
    let old_synced = std::fs::metadata(log_path(&dir, "old")).unwrap().len();
    assert!(old_synced > old_len);
    say(&store, "old", 3).await;
    let stats = store.sync_stats();
    assert_eq!(stats.requests, 6);
    assert_eq!(stats.journaled, 5, "{stats:?}");
    drop(store);

    let expected: Vec<(&str, Vec<u8>)> = ["fresh", "twice", "old"]
        .into_iter()
        .map(|s| (s, std::fs::read(log_path(&dir, s)).unwrap()))
        .collect();
    assert_eq!(segments(dir.path()).len(), 1);

    // The power cut: the new session's folder never reached the disk, nor
    // the bytes after each log's first sync.
    std::fs::remove_dir_all(dir.path().join("sessions/fresh")).unwrap();
    truncate(&log_path(&dir, "twice"), 0);
    truncate(&log_path(&dir, "old"), old_synced);

    let store = FileEventStore::open(dir.path(), keep()).unwrap();
    for (session, bytes) in &expected {
        assert_eq!(
            &std::fs::read(log_path(&dir, session)).unwrap(),
            bytes,
            "{session}"
        );
    }
    assert!(retired(dir.path()).await, "replayed segments are deleted");
    // The replayed logs read and continue.
    assert_eq!(store.read(&id("fresh"), 0).await.unwrap().len(), 5);
    assert_eq!(store.read(&id("old"), 0).await.unwrap().len(), 6);
    say(&store, "twice", 1).await;
    assert_eq!(store.read(&id("twice"), 0).await.unwrap().len(), 6);
}

#[tokio::test]
async fn a_torn_or_damaged_journal_tail_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileEventStore::open(dir.path(), keep()).unwrap();
    say(&store, "a", 2).await;
    let a = std::fs::read(log_path(&dir, "a")).unwrap();
    say(&store, "b", 2).await;
    drop(store);
    let segment = segments(dir.path()).remove(0);
    let mut bytes = std::fs::read(&segment).unwrap();
    // Damage the second record (b's): a flipped byte fails its checksum;
    // then a torn record after it.
    let last = bytes.len() - 3;
    bytes[last] ^= 0xff;
    bytes.extend_from_slice(&[200, 0, 0, 0, 1, 2]);
    std::fs::write(&segment, &bytes).unwrap();
    std::fs::remove_dir_all(dir.path().join("sessions/a")).unwrap();
    std::fs::remove_dir_all(dir.path().join("sessions/b")).unwrap();

    let store = FileEventStore::open(dir.path(), keep()).unwrap();
    assert_eq!(std::fs::read(log_path(&dir, "a")).unwrap(), a);
    // b's record was damaged: as if its batch never was acknowledged.
    assert!(!log_path(&dir, "b").exists());
    assert_eq!(store.sessions().await.unwrap(), vec![id("a")]);
}

#[tokio::test]
async fn a_record_past_the_end_of_its_log_is_skipped_not_left_as_a_hole() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileEventStore::open(dir.path(), keep()).unwrap();
    say(&store, "gone", 1).await;
    assert!(store.close(&id("gone")));
    // Reopened: the first sync is direct, the second journaled at an
    // offset past 0.
    say(&store, "gone", 1).await;
    say(&store, "gone", 1).await;
    assert_eq!(store.sync_stats().journaled, 2);
    drop(store);
    std::fs::remove_dir_all(dir.path().join("sessions/gone")).unwrap();

    let store = FileEventStore::open(dir.path(), keep()).unwrap();
    // The offset-0 record brings back a log whose later bytes are then
    // out of reach; the record past its end is skipped, so no log with a
    // hole is made: the first record's lines are all there is.
    let events = store.read(&id("gone"), 0).await.unwrap();
    assert_eq!(events.len(), 1);
    assert!(retired(dir.path()).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn segments_are_checkpointed_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileEventStore::open(dir.path(), options(Duration::ZERO)).unwrap();
    let mut waited = 0;
    for i in 0..40 {
        say(&store, &format!("s{i}"), 2).await;
        if store.sync_stats().checkpoints >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        waited += 1;
    }
    let stats = store.sync_stats();
    assert!(stats.checkpoints >= 3, "{stats:?} after {waited} rounds");
    // The current segment, and at most one being checkpointed.
    assert!(
        segments(dir.path()).len() <= 2,
        "{:?}",
        segments(dir.path())
    );
    assert_eq!(stats.journaled, stats.requests);
}

#[tokio::test]
async fn a_second_store_on_one_folder_syncs_each_log_itself() {
    let dir = tempfile::tempdir().unwrap();
    let first = FileEventStore::open(dir.path(), keep()).unwrap();
    let second = FileEventStore::open(dir.path(), keep()).unwrap();
    say(&first, "a", 1).await;
    say(&second, "b", 1).await;
    assert_eq!(first.sync_stats().journaled, 1);
    let stats = second.sync_stats();
    assert_eq!((stats.requests, stats.journaled), (1, 0));
    // The second store replayed nothing: the first's segment is intact.
    assert_eq!(segments(dir.path()).len(), 1);
}
