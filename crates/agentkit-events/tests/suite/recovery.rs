//! Recovery on open: torn tails are cut, real corruption is an error.

use agentkit_events::{Error, FileEventStore, StoreOptions};
use agentkit_protocol::{Event, EventType};
use serde_json::json;

use super::{id, log_path, store};

/// Writes a valid five-event log for session `s` and returns its bytes and
/// events.
async fn five_event_log() -> (Vec<u8>, Vec<Event>) {
    let (dir, store) = store(StoreOptions::default());
    let s = id("s");
    let mut events = Vec::new();
    for i in 0..5 {
        let data = json!({ "text": "héllo ".repeat(i), "n": i });
        events.push(
            store
                .append(&s, EventType::MessageAppended, Some("turn_1"), data)
                .await
                .map(std::sync::Arc::unwrap_or_clone)
                .unwrap(),
        );
    }
    store.sync(&s).await.unwrap();
    (std::fs::read(log_path(&dir, "s")).unwrap(), events)
}

#[tokio::test]
async fn a_torn_tail_is_cut_at_every_byte_offset() {
    let (bytes, events) = five_event_log().await;
    let root = tempfile::tempdir().unwrap();
    for cut in 0..=bytes.len() {
        let dir = root.path().join(format!("cut{cut}"));
        let path = dir.join("sessions/s/events.ndjson");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &bytes[..cut]).unwrap();

        // The longest prefix of whole lines survives.
        let whole_lines = bytes[..cut].iter().filter(|&&b| b == b'\n').count();
        let kept_bytes = bytes[..cut]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1);

        let store = FileEventStore::open(&dir, StoreOptions::default()).unwrap();
        let s = id("s");
        let recovered = store.read(&s, 0).await.unwrap();
        assert_eq!(recovered, events[..whole_lines], "cut at {cut}");
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            kept_bytes as u64,
            "cut at {cut}"
        );

        let next = store
            .append(&s, EventType::TurnCompleted, None, json!({}))
            .await
            .unwrap();
        assert_eq!(next.index, whole_lines as u64, "cut at {cut}");
        drop(store);

        // And the repaired log reads back whole after another reopen.
        let store = FileEventStore::open(&dir, StoreOptions::default()).unwrap();
        let again = store.read(&s, 0).await.unwrap();
        assert_eq!(again.len(), whole_lines + 1, "cut at {cut}");
        assert_eq!(again[whole_lines], *next);
    }
}

#[tokio::test]
async fn a_complete_but_unreadable_last_line_is_cut() {
    let (mut bytes, events) = five_event_log().await;
    let kept = bytes.len();
    bytes.extend_from_slice(b"{\"type\":\"turn.sta\n");
    let (dir, _) = store(StoreOptions::default());
    let path = log_path(&dir, "s");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &bytes).unwrap();

    let store = FileEventStore::open(dir.path(), StoreOptions::default()).unwrap();
    assert_eq!(store.read(&id("s"), 0).await.unwrap(), events);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), kept as u64);
}

async fn open_damaged(edit: impl FnOnce(&mut Vec<String>)) -> Error {
    let (bytes, _) = five_event_log().await;
    let mut lines: Vec<String> = String::from_utf8(bytes)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    edit(&mut lines);
    let (dir, _) = store(StoreOptions::default());
    let path = log_path(&dir, "s");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let store = FileEventStore::open(dir.path(), StoreOptions::default()).unwrap();
    let err = store.read(&id("s"), 0).await.unwrap_err();
    // The file is left as it was for a human to look at.
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        lines.join("\n") + "\n"
    );
    err
}

#[tokio::test]
async fn a_bad_line_before_the_last_is_corruption() {
    let err = open_damaged(|lines| lines[2] = "not json".to_owned()).await;
    assert!(matches!(&err, Error::Corrupt { line: 3, .. }), "{err}");
}

#[tokio::test]
async fn non_contiguous_indices_are_corruption() {
    let err = open_damaged(|lines| {
        lines.remove(1);
    })
    .await;
    assert!(matches!(&err, Error::Corrupt { line: 2, .. }), "{err}");
    assert!(
        err.to_string().contains("index 2 where 1 was expected"),
        "{err}"
    );

    let err = open_damaged(|lines| lines[4] = lines[4].replace("\"index\":4", "\"index\":9")).await;
    // A whole, parseable last line with a wrong index is not a torn write.
    assert!(matches!(&err, Error::Corrupt { line: 5, .. }), "{err}");
}

#[tokio::test]
async fn an_event_of_another_session_is_corruption() {
    let err = open_damaged(|lines| {
        lines[0] = lines[0].replace("\"sessionId\":\"s\"", "\"sessionId\":\"other\"");
    })
    .await;
    assert!(matches!(&err, Error::Corrupt { line: 1, .. }), "{err}");
}
