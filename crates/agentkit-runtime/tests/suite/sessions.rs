//! Chat and task sessions, continuation tokens, ownership, workspaces and
//! recovery after a crash.

use agentkit_events::{FileEventStore, StoreOptions};
use agentkit_protocol::{EventType, SessionId};
use agentkit_runtime::{Error, SessionMode};
use expect_test::expect;
use serde_json::json;

use super::{fixture, follow, new_session, open, owner, types, until, write};

const TWO_TURNS: &str = r#"{"turns": [{"steps": [{"text": "Hello there, how can I help?"}]}, {"steps": [{"text": "Second answer."}]}]}"#;

#[tokio::test]
async fn a_chat_turn_streams_every_step_and_waits() {
    let f = fixture(TWO_TURNS).await;
    let accepted = f.runtime.send(new_session("hi")).await.unwrap();
    assert!(accepted.is_new);
    assert!(accepted.continuation_token.starts_with("http:"));
    let events = until(
        &f.runtime,
        &accepted.session_id,
        EventType::SessionWaiting,
        1,
    )
    .await;
    let mut kinds = types(&events);
    kinds.dedup();
    expect![[r#"
        [
            "session.started",
            "message.received(hi)",
            "turn.started",
            "step.started",
            "message.appended",
            "message.completed",
            "step.completed",
            "turn.completed",
            "session.waiting",
        ]
    "#]]
    .assert_debug_eq(&kinds);
    let done = events
        .iter()
        .find(|e| e.event_type == EventType::TurnCompleted)
        .unwrap();
    assert_eq!(done.data["result"], "Hello there, how can I help?");
    assert!(done.data["usage"]["outputTokens"].as_u64().unwrap() > 0);
    // Indices are contiguous from 0 and every turn event carries its turn id.
    assert!(events.iter().enumerate().all(|(i, e)| e.index == i as u64));
    assert!(
        events
            .iter()
            .filter(|e| e.event_type.as_str().starts_with("step."))
            .all(|e| e.turn_id.is_some())
    );
}

#[tokio::test]
async fn http_tokens_rotate_and_stale_ones_are_refused() {
    let f = fixture(TWO_TURNS).await;
    let first = f.runtime.send(new_session("hi")).await.unwrap();
    until(&f.runtime, &first.session_id, EventType::SessionWaiting, 1).await;
    let second = f
        .runtime
        .follow_up(
            &first.session_id,
            follow("again", &first.continuation_token),
        )
        .await
        .unwrap();
    assert_ne!(second.continuation_token, first.continuation_token);
    assert!(!second.is_new);
    let stale = f
        .runtime
        .follow_up(
            &first.session_id,
            follow("stale", &first.continuation_token),
        )
        .await;
    assert!(matches!(stale, Err(Error::StaleContinuation)), "{stale:?}");
    let events = until(&f.runtime, &first.session_id, EventType::SessionWaiting, 2).await;
    // The second turn saw the first exchange: the script's turn index is
    // the number of user messages already in the history.
    let results: Vec<_> = events
        .iter()
        .filter(|e| e.event_type == EventType::TurnCompleted)
        .map(|e| e.data["result"].clone())
        .collect();
    assert_eq!(
        results,
        [
            json!("Hello there, how can I help?"),
            json!("Second answer.")
        ]
    );
}

/// [`Retention::release_idle_memory`] on the blocking pool, as the host
/// calls it.
async fn release(runtime: &agentkit_runtime::AgentRuntime) -> usize {
    let runtime = runtime.clone();
    tokio::task::spawn_blocking(move || runtime.retention().release_idle_memory())
        .await
        .unwrap()
}

/// What an idle host releases (the logs nobody uses, the database's page
/// caches) comes back when next asked for: the next turn and every read
/// see the session whole.
#[tokio::test]
async fn a_runtime_that_released_its_idle_memory_carries_on() {
    let f = fixture(TWO_TURNS).await;
    let first = f.runtime.send(new_session("hi")).await.unwrap();
    until(&f.runtime, &first.session_id, EventType::SessionWaiting, 1).await;
    release(&f.runtime).await;
    let second = f
        .runtime
        .follow_up(
            &first.session_id,
            follow("again", &first.continuation_token),
        )
        .await
        .unwrap();
    let events = until(&f.runtime, &first.session_id, EventType::SessionWaiting, 2).await;
    assert!(events.iter().enumerate().all(|(i, e)| e.index == i as u64));
    release(&f.runtime).await;
    assert_eq!(
        f.runtime
            .session_meta(&first.session_id)
            .await
            .unwrap()
            .continuation_token,
        second.continuation_token
    );
    let again = until(&f.runtime, &first.session_id, EventType::SessionWaiting, 2).await;
    assert_eq!(again.len(), events.len());
}

#[tokio::test]
async fn task_sessions_complete_and_refuse_follow_ups() {
    let f = fixture(TWO_TURNS).await;
    let mut req = new_session("do the thing");
    req.mode = SessionMode::Task;
    let a = f.runtime.send(req).await.unwrap();
    let events = until(&f.runtime, &a.session_id, EventType::SessionCompleted, 1).await;
    assert!(!types(&events).contains(&"session.waiting".to_owned()));
    let again = f
        .runtime
        .follow_up(&a.session_id, follow("more", &a.continuation_token))
        .await;
    assert!(matches!(again, Err(Error::TaskSession { .. })), "{again:?}");
}

#[tokio::test]
async fn sessions_belong_to_their_principal() {
    let f = fixture(TWO_TURNS).await;
    let a = f.runtime.send(new_session("hi")).await.unwrap();
    let bob = owner("bob");
    let mut req = follow("mine now", &a.continuation_token);
    req.owner = bob.clone();
    assert!(matches!(
        f.runtime.follow_up(&a.session_id, req).await,
        Err(Error::Forbidden { .. })
    ));
    assert!(matches!(
        f.runtime.events(&a.session_id, &bob, 0).await,
        Err(Error::Forbidden { .. })
    ));
    assert!(matches!(
        f.runtime.subscribe(&a.session_id, &bob, 0).await,
        Err(Error::Forbidden { .. })
    ));
    assert!(matches!(
        f.runtime.stop(&a.session_id, &bob).await,
        Err(Error::Forbidden { .. })
    ));
    assert!(
        f.runtime
            .list_page(&bob, &super::page())
            .await
            .unwrap()
            .0
            .is_empty()
    );
    assert_eq!(
        f.runtime
            .list_page(&owner("alice"), &super::page())
            .await
            .unwrap()
            .0
            .len(),
        1
    );
    // Unknown and unsafe ids.
    assert!(matches!(
        f.runtime.events("ses_missing", &bob, 0).await,
        Err(Error::SessionNotFound { .. })
    ));
    assert!(matches!(
        f.runtime.events("../etc", &bob, 0).await,
        Err(Error::InvalidSessionId(_))
    ));
}

#[tokio::test]
async fn channel_keys_map_to_one_session() {
    let f = fixture(TWO_TURNS).await;
    let mut req = new_session("review the PR");
    req.channel = "github".to_owned();
    req.continuation = Some("pr:owner/repo#1".to_owned());
    let a = f.runtime.send(req.clone()).await.unwrap();
    until(&f.runtime, &a.session_id, EventType::SessionWaiting, 1).await;
    let b = f.runtime.send(req).await.unwrap();
    assert_eq!(a.session_id, b.session_id);
    assert!(!b.is_new);
    assert_eq!(b.continuation_token, "pr:owner/repo#1");
    assert_eq!(
        f.runtime
            .session_for("github", "pr:owner/repo#1")
            .await
            .as_deref(),
        Some(a.session_id.as_str())
    );
}

#[tokio::test]
async fn workspaces_are_materialised_and_request_paths_stay_inside() {
    let f = fixture(TWO_TURNS).await;
    let mut req = new_session("hi");
    req.workspace_files = vec![("notes/todo.md".to_owned(), b"- one\n".to_vec())];
    let a = f.runtime.send(req).await.unwrap();
    let ws = f
        .dir
        .path()
        .join("state/sessions")
        .join(&a.session_id)
        .join("workspace");
    assert_eq!(
        std::fs::read_to_string(ws.join("AGENTS.md"))
            .unwrap()
            .trim(),
        "You are a test agent."
    );
    assert!(
        std::fs::read_to_string(ws.join(".agentkit/skills/greet/SKILL.md"))
            .unwrap()
            .contains("Say hello.")
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("seed.txt")).unwrap(),
        "seeded\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("notes/todo.md")).unwrap(),
        "- one\n"
    );
    let mut bad = follow("x", &a.continuation_token);
    bad.workspace_files = vec![("../escape.txt".to_owned(), b"no".to_vec())];
    assert!(matches!(
        f.runtime.follow_up(&a.session_id, bad).await,
        Err(Error::BadRequest { .. })
    ));
    assert!(
        !f.dir
            .path()
            .join("state/sessions")
            .join(&a.session_id)
            .join("escape.txt")
            .exists()
    );
}

#[tokio::test]
async fn a_turn_cut_short_by_a_crash_is_recorded_and_the_session_resumes() {
    let f = fixture(TWO_TURNS).await;
    let root = f.dir.path().to_path_buf();
    drop(f.runtime);
    // What a crash mid-turn leaves on disk: a session whose last turn
    // started and never ended.
    let id = SessionId::parse("ses_crashed").unwrap();
    let store = FileEventStore::open(&root.join("state"), StoreOptions::default()).unwrap();
    store
        .append(&id, EventType::SessionStarted, None, json!({}))
        .await
        .unwrap();
    store
        .append(
            &id,
            EventType::MessageReceived,
            None,
            json!({"text": "first"}),
        )
        .await
        .unwrap();
    store
        .append(&id, EventType::TurnStarted, Some("turn_1"), json!({}))
        .await
        .unwrap();
    store
        .append(
            &id,
            EventType::MessageAppended,
            Some("turn_1"),
            json!({"delta": "par", "text": "par"}),
        )
        .await
        .unwrap();
    store.sync(&id).await.unwrap();
    drop(store);
    write(
        &root.join("state/sessions/ses_crashed/session.json"),
        r#"{"id":"ses_crashed","channel":"http","mode":"chat","owner":{"principalId":"alice","principalType":"user","authenticator":"test"},"continuationToken":"http:abc","createdAt":"2026-11-29T00:00:00.000Z"}"#,
    );
    let runtime = open(&root).await;
    let events = runtime
        .events("ses_crashed", &owner("alice"), 0)
        .await
        .unwrap();
    let kinds = types(&events);
    assert_eq!(
        kinds[4..],
        [
            "turn.failed(restart)".to_owned(),
            "session.waiting".to_owned()
        ]
    );
    let next = runtime
        .follow_up("ses_crashed", follow("second", "http:abc"))
        .await
        .unwrap();
    let events = until(&runtime, &next.session_id, EventType::SessionWaiting, 2).await;
    // The interrupted turn's user message stays in the history (the user
    // did say it) while its partial reply does not, so the script plays its
    // turn 1: one user message came before this one.
    let last = events
        .iter()
        .rev()
        .find(|e| e.event_type == EventType::TurnCompleted)
        .unwrap();
    assert_eq!(last.data["result"], "Second answer.");
    let history = agentkit_runtime::conversation(&events, &Default::default());
    let users: Vec<_> = history
        .iter()
        .filter(|m| matches!(m, agentkit_protocol::Message::User { .. }))
        .collect();
    assert_eq!(users.len(), 2);
    assert!(
        !history.iter().any(
            |m| matches!(m, agentkit_protocol::Message::Assistant { text, .. } if text == "par")
        )
    );
}
