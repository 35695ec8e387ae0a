//! A log linear in what was said (deltas on disk, the wire shape on every
//! read) and a bounded set of open logs.

use agentkit_events::{FileEventStore, NewEvent, StoreOptions};
use agentkit_protocol::{Event, EventType};
use serde_json::{Value, json};

use super::{id, log_path, store};

/// A step whose reply arrives as `words` deltas, each with the text so
/// far, the way the harness reports it.
fn reply(words: usize) -> (Vec<NewEvent>, String) {
    let mut events = vec![NewEvent {
        event_type: EventType::StepStarted,
        turn_id: Some("turn_1".into()),
        data: json!({"step": 1}),
    }];
    let mut text = String::new();
    for i in 0..words {
        let delta = format!("word{i} ");
        text.push_str(&delta);
        events.push(NewEvent {
            event_type: EventType::MessageAppended,
            turn_id: Some("turn_1".into()),
            data: json!({"delta": delta, "text": text}),
        });
    }
    events.push(NewEvent {
        event_type: EventType::MessageCompleted,
        turn_id: Some("turn_1".into()),
        data: json!({"text": text, "finishReason": "stop"}),
    });
    (events, text)
}

fn texts(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.event_type == EventType::MessageAppended)
        .map(|e| e.data["text"].as_str().unwrap_or("<none>").to_owned())
        .collect()
}

#[tokio::test]
async fn a_long_reply_is_stored_as_deltas_and_read_back_whole() {
    let (dir, store) = store(StoreOptions::default());
    let s = id("ses_long");
    let (batch, text) = reply(4_000);
    let expected: Vec<Value> = batch.iter().map(|e| e.data.clone()).collect();
    // Appended in bursts, as the runtime does.
    let mut appended = Vec::new();
    for chunk in batch.chunks(7) {
        appended.extend(store.append_batch(&s, chunk.to_vec()).await.unwrap());
    }
    // What the appender gets back is the wire shape.
    let back: Vec<Value> = appended.iter().map(|e| e.data.clone()).collect();
    assert_eq!(back, expected);

    let on_disk = std::fs::metadata(log_path(&dir, "ses_long")).unwrap().len();
    let reply_bytes = text.len() as u64;
    let events = batch.len() as u64;
    assert!(
        on_disk <= 4 * reply_bytes + 300 * events,
        "{on_disk} bytes on disk for a {reply_bytes}-byte reply in {events} events"
    );
    let line = std::fs::read_to_string(log_path(&dir, "ses_long")).unwrap();
    let third = line.lines().nth(3).unwrap();
    assert!(third.contains(r#""data":{"delta":"word2 "}"#), "{third}");

    // Every read path gives the cumulative text back.
    let read = store.read(&s, 0).await.unwrap();
    let got: Vec<Value> = read.iter().map(|e| e.data.clone()).collect();
    assert_eq!(got, expected);
    // From the middle of the message, the prefix is read back.
    let tail = store.read(&s, 2_500).await.unwrap();
    assert_eq!(tail[0].data, expected[2_500]);
    assert_eq!(texts(&tail).last().unwrap(), &text);
    // Reopened (a restart), the same.
    drop(store);
    let store = FileEventStore::open(dir.path(), StoreOptions::default()).unwrap();
    let mut sub = store.subscribe(&s, 1_234).await.unwrap();
    let mut followed = Vec::new();
    for _ in 1_234..events {
        followed.push(sub.next().await.unwrap().data);
    }
    assert_eq!(followed, expected[1_234..].to_vec());
}

#[tokio::test]
async fn deltas_written_before_the_change_still_read() {
    let (dir, store) = store(StoreOptions::default());
    let s = id("ses_old");
    store
        .append(&s, EventType::SessionStarted, None, json!({}))
        .await
        .unwrap();
    drop(store);
    // An old log: every delta carries the text so far.
    let path = log_path(&dir, "ses_old");
    let mut old = std::fs::read_to_string(&path).unwrap();
    for (i, (delta, text)) in [("a", "a"), ("b", "ab")].iter().enumerate() {
        old.push_str(&format!(
            "{{\"type\":\"message.appended\",\"index\":{},\"sessionId\":\"ses_old\",\"at\":\"2026-01-01T00:00:00.000Z\",\"data\":{{\"delta\":\"{delta}\",\"text\":\"{text}\"}}}}\n",
            i + 1
        ));
    }
    std::fs::write(&path, old).unwrap();
    let store = FileEventStore::open(dir.path(), StoreOptions::default()).unwrap();
    // New deltas go on from the old text.
    store
        .append(
            &s,
            EventType::MessageAppended,
            None,
            json!({"delta": "c", "text": "abc"}),
        )
        .await
        .unwrap();
    assert_eq!(texts(&store.read(&s, 0).await.unwrap()), ["a", "ab", "abc"]);
    assert_eq!(texts(&store.read(&s, 3).await.unwrap()), ["abc"]);
}

#[tokio::test]
async fn idle_logs_are_closed_past_the_bound_and_reopen_on_use() {
    let (_dir, store) = store(StoreOptions {
        max_open_logs: 16,
        ..StoreOptions::default()
    });
    for i in 0..200 {
        let s = id(&format!("ses_{i:03}"));
        store
            .append(&s, EventType::SessionStarted, None, json!({"i": i}))
            .await
            .unwrap();
        store.sync(&s).await.unwrap();
        assert!(store.open_logs() <= 16, "{} open", store.open_logs());
    }
    // A followed log stays open however many others come and go, and its
    // follower sees what is appended later.
    let followed = id("ses_000");
    let mut sub = store.subscribe(&followed, 0).await.unwrap();
    assert_eq!(sub.next().await.unwrap().data, json!({"i": 0}));
    for i in 200..260 {
        let s = id(&format!("ses_{i:03}"));
        store
            .append(&s, EventType::SessionStarted, None, json!({"i": i}))
            .await
            .unwrap();
    }
    store
        .append(
            &followed,
            EventType::TurnStarted,
            None,
            json!({"later": true}),
        )
        .await
        .unwrap();
    assert_eq!(sub.next().await.unwrap().data, json!({"later": true}));
    // Every closed log reads back whole.
    for i in 0..260 {
        let s = id(&format!("ses_{i:03}"));
        let events = store.read(&s, 0).await.unwrap();
        assert_eq!(events[0].data, json!({"i": i}));
    }
    assert!(store.open_logs() <= 16 + 1);
}

#[tokio::test]
async fn followers_near_the_end_are_served_from_memory_exactly_as_from_the_file() {
    let (dir, store) = store(StoreOptions::default());
    let s = id("ses_recent");
    let (mut batch, _) = reply(60);
    // A line bigger than the recent events' byte budget, mid-log: the ones
    // kept in memory restart after it.
    batch.insert(
        30,
        NewEvent {
            event_type: EventType::ActionResult,
            turn_id: Some("turn_1".into()),
            data: json!({"callId": "c1", "output": "x".repeat(100_000)}),
        },
    );
    for chunk in batch.chunks(5) {
        store.append_batch(&s, chunk.to_vec()).await.unwrap();
    }
    let total = batch.len() as u64;
    // The file's answer, through a reopened store (nothing in memory).
    let cold = FileEventStore::open(dir.path(), StoreOptions::default()).unwrap();
    let whole: Vec<Value> = cold
        .read(&s, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.data)
        .collect();
    assert_eq!(whole.len() as u64, total);
    for start in 0..=total {
        let mut sub = store.subscribe(&s, start).await.unwrap();
        let mut got = Vec::new();
        for _ in start..total {
            got.push(sub.next().await.unwrap().data);
        }
        assert_eq!(got, whole[start as usize..].to_vec(), "from index {start}");
    }
    // A follower served from memory goes on live without a gap: a new
    // message's deltas, with their text.
    let mut sub = store.subscribe(&s, total - 3).await.unwrap();
    for _ in 0..3 {
        sub.next().await.unwrap();
    }
    let (more, text) = reply(3);
    store.append_batch(&s, more.clone()).await.unwrap();
    let mut followed = Vec::new();
    for _ in 0..more.len() {
        followed.push(sub.next().await.unwrap());
    }
    assert_eq!(followed[0].index, total);
    assert_eq!(texts(&followed).last().unwrap(), &text);
    let reread: Vec<Value> = store
        .read(&s, total)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.data)
        .collect();
    let live: Vec<Value> = followed.into_iter().map(|e| e.data).collect();
    assert_eq!(live, reread);
}
