//! One turn at a time: preempt (the default), coalesce, reject, and stop.

use agentkit_manifest::Admission;
use agentkit_protocol::EventType;
use agentkit_runtime::{Error, FollowUp};

use super::{fixture, new_session, owner, types, until};

/// The first turn holds for 30 s (unless interrupted); later turns answer
/// at once.
const SLOW_THEN_FAST: &str = r#"{"turns": [{"steps": [{"text": "slow", "delayMs": 30000}]}, {"steps": [{"text": "fast"}]}]}"#;

fn follow(message: &str, token: &str, admission: Admission) -> FollowUp {
    FollowUp {
        client_tools: Vec::new(),
        owner: owner("alice"),
        message: message.to_owned(),
        continuation_token: Some(token.to_owned()),
        admission,
        workspace_files: Vec::new(),
    }
}

#[tokio::test]
async fn a_follow_up_preempts_the_running_turn() {
    let f = fixture(SLOW_THEN_FAST).await;
    let a = f.runtime.send(new_session("one")).await.unwrap();
    until(&f.runtime, &a.session_id, EventType::TurnStarted, 1).await;
    assert!(f.runtime.is_busy(&a.session_id));
    f.runtime
        .follow_up(
            &a.session_id,
            follow("two", &a.continuation_token, Admission::Preempt),
        )
        .await
        .unwrap();
    let events = until(&f.runtime, &a.session_id, EventType::SessionWaiting, 1).await;
    let kinds: Vec<String> = types(&events)
        .into_iter()
        .filter(|k| {
            k.starts_with("turn.")
                || k.starts_with("message.received")
                || k.starts_with("session.w")
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "message.received(one)",
            "turn.started",
            "message.received(two)",
            "turn.failed(preempted)",
            "turn.started",
            "turn.completed",
            "session.waiting"
        ]
    );
    let failed = events
        .iter()
        .find(|e| e.event_type == EventType::TurnFailed)
        .unwrap();
    assert_eq!(failed.data["message"], "turn interrupted");
}

#[tokio::test]
async fn coalesced_messages_run_together_after_the_turn() {
    let f = fixture(r#"{"turns": [{"steps": [{"text": "slow", "delayMs": 1500}]}, {"steps": [{"text": "fast"}]}]}"#).await;
    let a = f.runtime.send(new_session("one")).await.unwrap();
    until(&f.runtime, &a.session_id, EventType::TurnStarted, 1).await;
    let b = f
        .runtime
        .follow_up(
            &a.session_id,
            follow("two", &a.continuation_token, Admission::Coalesce),
        )
        .await
        .unwrap();
    assert!(b.coalesced);
    f.runtime
        .follow_up(
            &a.session_id,
            follow("three", &b.continuation_token, Admission::Coalesce),
        )
        .await
        .unwrap();
    let events = until(&f.runtime, &a.session_id, EventType::SessionWaiting, 1).await;
    let turns: Vec<_> = events
        .iter()
        .filter(|e| {
            matches!(
                e.event_type,
                EventType::TurnCompleted | EventType::TurnFailed
            )
        })
        .collect();
    assert_eq!(turns.len(), 2, "{:?}", types(&events));
    assert!(
        turns
            .iter()
            .all(|e| e.event_type == EventType::TurnCompleted)
    );
    let second_start = events
        .iter()
        .filter(|e| e.event_type == EventType::TurnStarted)
        .nth(1)
        .unwrap();
    assert_eq!(second_start.data["messages"], 2);
}

#[tokio::test]
async fn reject_answers_busy_and_records_nothing() {
    let f = fixture(SLOW_THEN_FAST).await;
    let a = f.runtime.send(new_session("one")).await.unwrap();
    until(&f.runtime, &a.session_id, EventType::TurnStarted, 1).await;
    let r = f
        .runtime
        .follow_up(
            &a.session_id,
            follow("two", &a.continuation_token, Admission::Reject),
        )
        .await;
    assert!(matches!(r, Err(Error::SessionBusy { .. })), "{r:?}");
    f.runtime
        .stop(&a.session_id, &owner("alice"))
        .await
        .unwrap();
    let events = until(&f.runtime, &a.session_id, EventType::SessionWaiting, 1).await;
    assert!(!types(&events).contains(&"message.received(two)".to_owned()));
}

#[tokio::test]
async fn stop_interrupts_and_clears_the_queue() {
    let f = fixture(SLOW_THEN_FAST).await;
    let a = f.runtime.send(new_session("one")).await.unwrap();
    until(&f.runtime, &a.session_id, EventType::TurnStarted, 1).await;
    // A queued message is dropped by stop.
    let b = f
        .runtime
        .follow_up(
            &a.session_id,
            follow("queued", &a.continuation_token, Admission::Coalesce),
        )
        .await
        .unwrap();
    assert!(b.coalesced);
    assert!(
        f.runtime
            .stop(&a.session_id, &owner("alice"))
            .await
            .unwrap()
    );
    let events = until(&f.runtime, &a.session_id, EventType::SessionWaiting, 1).await;
    let turns: Vec<String> = types(&events)
        .into_iter()
        .filter(|k| k.starts_with("turn."))
        .collect();
    assert_eq!(turns, ["turn.started", "turn.failed(stopped)"]);
    // The drop is recorded, naming the queued message, before the session
    // settles.
    let dropped: Vec<&agentkit_protocol::Event> = events
        .iter()
        .filter(|e| e.event_type == EventType::MessageDropped)
        .collect();
    assert_eq!(dropped.len(), 1, "{:?}", types(&events));
    assert_eq!(
        dropped[0].data["received"],
        serde_json::json!([b.start_index])
    );
    let last_two: Vec<EventType> = events[events.len() - 2..]
        .iter()
        .map(|e| e.event_type)
        .collect();
    assert_eq!(
        last_two,
        [EventType::MessageDropped, EventType::SessionWaiting]
    );
    assert!(!f.runtime.is_busy(&a.session_id));
    assert!(
        !f.runtime
            .stop(&a.session_id, &owner("alice"))
            .await
            .unwrap(),
        "nothing left to stop"
    );
}

#[tokio::test]
async fn shutdown_interrupts_running_turns_with_a_reason() {
    let f = fixture(SLOW_THEN_FAST).await;
    let a = f.runtime.send(new_session("one")).await.unwrap();
    until(&f.runtime, &a.session_id, EventType::TurnStarted, 1).await;
    f.runtime.shutdown(std::time::Duration::from_secs(5)).await;
    let events = f
        .runtime
        .events(&a.session_id, &owner("alice"), 0)
        .await
        .unwrap();
    assert!(
        types(&events).contains(&"turn.failed(shutdown)".to_owned()),
        "{:?}",
        types(&events)
    );
}

#[tokio::test]
async fn reject_also_refuses_while_messages_are_queued() {
    let f = fixture(SLOW_THEN_FAST).await;
    let a = f.runtime.send(new_session("one")).await.unwrap();
    // No waiting: the first message may still be queued, not yet running.
    let r = f
        .runtime
        .follow_up(
            &a.session_id,
            follow("two", &a.continuation_token, Admission::Reject),
        )
        .await;
    assert!(matches!(r, Err(Error::SessionBusy { .. })), "{r:?}");
    f.runtime
        .stop(&a.session_id, &owner("alice"))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_refused_follow_up_keeps_the_token_valid() {
    let f = fixture(SLOW_THEN_FAST).await;
    let a = f.runtime.send(new_session("one")).await.unwrap();
    let mut bad = follow("two", &a.continuation_token, Admission::Coalesce);
    bad.workspace_files = vec![("../../etc/x".to_owned(), b"no".to_vec())];
    assert!(matches!(
        f.runtime.follow_up(&a.session_id, bad).await,
        Err(Error::BadRequest { .. })
    ));
    let ok = f
        .runtime
        .follow_up(
            &a.session_id,
            follow("two", &a.continuation_token, Admission::Coalesce),
        )
        .await;
    assert!(ok.is_ok(), "{ok:?}");
    f.runtime
        .stop(&a.session_id, &owner("alice"))
        .await
        .unwrap();
}
