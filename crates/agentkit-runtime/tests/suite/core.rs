//! The session core under the conditions real traffic brings: one key
//! raced by two first deliveries, folders deleted under a running server,
//! workspaces made only when a turn needs them, and long replies whose
//! later turns do not read the whole log again.

use agentkit_protocol::EventType;
use serde_json::Value;

use super::{fixture, follow, new_session, owner, until};

const REPLIES: &str = r#"{"turns": [{"steps": [{"text": "one"}]}, {"steps": [{"text": "two"}]}, {"steps": [{"text": "three"}]}]}"#;

#[tokio::test]
async fn two_first_deliveries_with_one_new_key_make_one_session() {
    let f = fixture(REPLIES).await;
    for round in 0..20 {
        let mut req = new_session("first");
        req.channel = "github".to_owned();
        req.continuation = Some(format!("pr:owner/repo#{round}"));
        let mut other = req.clone();
        other.message = "second".to_owned();
        let (a, b) = tokio::join!(f.runtime.send(req), f.runtime.send(other));
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!(a.session_id, b.session_id, "round {round}");
        assert_eq!(
            [a.is_new, b.is_new].iter().filter(|n| **n).count(),
            1,
            "exactly one created, round {round}"
        );
        // Both messages are in the one log (in one turn or two).
        until(&f.runtime, &a.session_id, EventType::SessionWaiting, 1).await;
        while f.runtime.is_active(&a.session_id) {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let events = f
            .runtime
            .events(&a.session_id, &owner("alice"), 0)
            .await
            .unwrap();
        assert_eq!(events[0].event_type, EventType::SessionStarted);
        let received = events
            .iter()
            .filter(|e| e.event_type == EventType::MessageReceived)
            .count();
        assert_eq!(received, 2, "round {round}");
    }
    assert_eq!(super::folders(&f.dir.path().join("state"), 20).await, 20);

    // A key continues its session whoever sends, as the session's owner.
    let mut from_bob = new_session("from bob");
    from_bob.channel = "github".to_owned();
    from_bob.continuation = Some("pr:owner/repo#0".to_owned());
    from_bob.owner = owner("bob");
    let b = f.runtime.send(from_bob).await.unwrap();
    assert!(!b.is_new);
    assert_eq!(
        f.runtime.session_meta(&b.session_id).await.unwrap().owner,
        owner("alice")
    );
}

#[tokio::test]
async fn a_deleted_folder_deletes_the_session_without_a_restart() {
    let f = fixture(REPLIES).await;
    let a = f.runtime.send(new_session("hi")).await.unwrap();
    until(&f.runtime, &a.session_id, EventType::SessionWaiting, 1).await;
    let mut keyed = new_session("hi");
    keyed.channel = "github".to_owned();
    keyed.continuation = Some("pr:x#1".to_owned());
    let k = f.runtime.send(keyed.clone()).await.unwrap();
    until(&f.runtime, &k.session_id, EventType::SessionWaiting, 1).await;
    assert_eq!(
        f.runtime
            .list_page(&owner("alice"), &super::page())
            .await
            .unwrap()
            .0
            .len(),
        2
    );
    for id in [&a.session_id, &k.session_id] {
        while f.runtime.is_active(id) {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    let sessions = f.dir.path().join("state/sessions");
    super::folders(&f.dir.path().join("state"), 2).await;
    std::fs::remove_dir_all(sessions.join(&a.session_id)).unwrap();
    std::fs::remove_dir_all(sessions.join(&k.session_id)).unwrap();

    let listed = f
        .runtime
        .list_page(&owner("alice"), &super::page())
        .await
        .unwrap()
        .0;
    assert!(listed.is_empty(), "{listed:?}");
    assert!(matches!(
        f.runtime.subscribe(&a.session_id, &owner("alice"), 0).await,
        Err(agentkit_runtime::Error::SessionNotFound { .. })
    ));
    assert!(f.runtime.session_for("github", "pr:x#1").await.is_none());
    // The key is free again: it starts a new session.
    let again = f.runtime.send(keyed).await.unwrap();
    assert!(again.is_new);
    assert_ne!(again.session_id, k.session_id);
}

#[tokio::test]
async fn the_workspace_is_made_when_something_needs_it_not_at_create() {
    let f = fixture(REPLIES).await;
    let a = f.runtime.send(new_session("hi")).await.unwrap();
    until(&f.runtime, &a.session_id, EventType::SessionWaiting, 1).await;
    let ws = f
        .dir
        .path()
        .join("state/sessions")
        .join(&a.session_id)
        .join("workspace");
    // A turn that called no tool built nothing.
    assert!(!ws.exists());
    // Files sent with a message need it: seeds first, then the files.
    f.runtime
        .follow_up(
            &a.session_id,
            agentkit_runtime::FollowUp {
                client_tools: Vec::new(),
                workspace_files: vec![("seed.txt".into(), b"from the message\n".to_vec())],
                ..follow("again", &a.continuation_token)
            },
        )
        .await
        .unwrap();
    assert!(ws.join("AGENTS.md").is_file());
    assert_eq!(
        std::fs::read_to_string(ws.join("seed.txt")).unwrap(),
        "from the message\n"
    );
    until(&f.runtime, &a.session_id, EventType::SessionWaiting, 2).await;
}

#[tokio::test]
async fn later_turns_see_the_whole_conversation_after_a_restart() {
    let f = fixture(REPLIES).await;
    let a = f.runtime.send(new_session("q1")).await.unwrap();
    until(&f.runtime, &a.session_id, EventType::SessionWaiting, 1).await;
    let b = f
        .runtime
        .follow_up(&a.session_id, follow("q2", &a.continuation_token))
        .await
        .unwrap();
    until(&f.runtime, &a.session_id, EventType::SessionWaiting, 2).await;
    f.runtime.shutdown(std::time::Duration::from_secs(5)).await;
    drop(f.runtime);

    // A new runtime over the same state: its cache starts cold and is
    // built from the log; the fold it hands the third turn holds both
    // earlier exchanges.
    let runtime = super::open(f.dir.path()).await;
    runtime
        .follow_up(&a.session_id, follow("q3", &b.continuation_token))
        .await
        .unwrap();
    let events = until(&runtime, &a.session_id, EventType::SessionWaiting, 3).await;
    let history = agentkit_runtime::conversation(&events, &Default::default());
    let said: Vec<Value> = history
        .iter()
        .map(|m| serde_json::to_value(m).unwrap()["text"].clone())
        .collect();
    assert_eq!(said, ["q1", "one", "q2", "two", "q3", "three"]);
}

#[tokio::test]
async fn a_restart_reads_the_fold_snapshot_and_the_logs_tail_not_the_whole_log() {
    // One reply of ~900 words is ~300 deltas: past the snapshot threshold
    // in one turn.
    let long = vec!["word"; 900].join(" ");
    let script = format!(
        r#"{{"turns": [{{"steps": [{{"text": "{long}"}}]}}, {{"steps": [{{"text": "short"}}]}}]}}"#
    );
    let f = fixture(&script).await;
    let a = f.runtime.send(new_session("q1")).await.unwrap();
    until(&f.runtime, &a.session_id, EventType::SessionWaiting, 1).await;
    f.runtime.shutdown(std::time::Duration::from_secs(5)).await;
    drop(f.runtime);
    let dir = f.dir.path().join("state/sessions").join(&a.session_id);
    let snapshot = dir.join("fold.ndjson");
    let text = std::fs::read_to_string(&snapshot).expect("a snapshot after a long turn");
    let log = std::fs::read_to_string(dir.join("events.ndjson")).unwrap();
    assert!(
        text.len() * 2 < log.len(),
        "the snapshot ({} B) is a fraction of the log ({} B)",
        text.len(),
        log.len()
    );
    assert!(
        !text.contains("message.appended"),
        "no deltas in the snapshot"
    );

    // Mark the snapshot's copy of the first message: a restart that folds
    // the snapshot shows the mark, one that read the log would not.
    std::fs::write(
        &snapshot,
        text.replace(r#""text":"q1""#, r#""text":"q1 (snapshot)""#),
    )
    .unwrap();
    let runtime = super::open(f.dir.path()).await;
    let said = |history: Vec<agentkit_protocol::Message>| -> Vec<Value> {
        history
            .iter()
            .map(|m| serde_json::to_value(m).unwrap()["text"].clone())
            .collect()
    };
    let seen = runtime
        .conversation(&a.session_id, &owner("alice"))
        .await
        .unwrap();
    assert_eq!(
        said(seen),
        [Value::from("q1 (snapshot)"), Value::from(long.clone())]
    );
    // The log's tail after the snapshot still joins it.
    runtime
        .follow_up(&a.session_id, follow("q2", &a.continuation_token))
        .await
        .unwrap();
    until(&runtime, &a.session_id, EventType::SessionWaiting, 2).await;
    let seen = runtime
        .conversation(&a.session_id, &owner("alice"))
        .await
        .unwrap();
    assert_eq!(seen.len(), 4);
    runtime.shutdown(std::time::Duration::from_secs(5)).await;
    drop(runtime);

    // Without a snapshot (or with a foreign one) the log is read whole.
    std::fs::write(&snapshot, "not a snapshot\n").unwrap();
    let runtime = super::open(f.dir.path()).await;
    let seen = runtime
        .conversation(&a.session_id, &owner("alice"))
        .await
        .unwrap();
    assert_eq!(
        said(seen),
        [
            Value::from("q1"),
            Value::from(long),
            Value::from("q2"),
            Value::from("short")
        ]
    );
}

#[tokio::test]
async fn experiments_enrol_sessions_by_weight_and_the_variant_model_answers() {
    let f = fixture(r#"{"turns": [{"steps": [{"text": "control"}]}]}"#).await;
    f.runtime.shutdown(std::time::Duration::from_secs(5)).await;
    drop(f.runtime);
    let agent = f.dir.path().join("bot/agent");
    std::fs::write(
        agent.join("ab.toml"),
        "traffic = 1\n[[variants]]\nid = \"control\"\n[[variants]]\nid = \"other\"\nmodel = \"scripted:other.json\"\n",
    )
    .unwrap();
    std::fs::write(
        agent.join("other.json"),
        r#"{"turns": [{"steps": [{"text": "variant"}]}]}"#,
    )
    .unwrap();
    let runtime = super::open(f.dir.path()).await;
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    let mut ids = Vec::new();
    for i in 0..60 {
        let a = runtime.send(new_session(&format!("q{i}"))).await.unwrap();
        let events = until(&runtime, &a.session_id, EventType::SessionWaiting, 1).await;
        let assigned: Vec<Value> = events
            .iter()
            .filter(|e| e.event_type == EventType::AbAssigned)
            .map(|e| e.data.clone())
            .collect();
        assert_eq!(assigned.len(), 1, "{assigned:?}");
        assert_eq!(assigned[0]["experiment"], "ab");
        let variant = assigned[0]["variant"].as_str().unwrap().to_owned();
        let reply = events
            .iter()
            .find(|e| e.event_type == EventType::TurnCompleted)
            .map(|e| e.data["result"].clone())
            .unwrap();
        let expected = if variant == "other" {
            "variant"
        } else {
            "control"
        };
        assert_eq!(reply, expected, "the turn ran on its variant's model");
        *seen.entry(variant).or_default() += 1;
        ids.push(a);
    }
    // Weights 1:1 over 60 sessions.
    assert!(seen.values().all(|n| (15..=45).contains(n)), "{seen:?}");

    // The assignment is read back from the log after a restart.
    runtime.shutdown(std::time::Duration::from_secs(5)).await;
    drop(runtime);
    let runtime = super::open(f.dir.path()).await;
    let a = &ids[0];
    let events = runtime
        .events(&a.session_id, &owner("alice"), 0)
        .await
        .unwrap();
    let variant = events
        .iter()
        .find(|e| e.event_type == EventType::AbAssigned)
        .map(|e| e.data["variant"].clone())
        .unwrap();
    runtime
        .follow_up(&a.session_id, follow("again", &a.continuation_token))
        .await
        .unwrap();
    let events = until(&runtime, &a.session_id, EventType::SessionWaiting, 2).await;
    let last = events
        .iter()
        .rev()
        .find(|e| e.event_type == EventType::TurnCompleted)
        .map(|e| e.data["result"].clone())
        .unwrap();
    let expected = if variant == "other" {
        "variant"
    } else {
        "control"
    };
    assert_eq!(last, expected);
}

/// `sticky = "principal"`: every session of one principal gets one
/// variant (however many sessions it starts), principals spread over the
/// variants, and the report counts each variant's sessions.
#[tokio::test]
async fn a_principal_sticky_experiment_keeps_each_callers_variant() {
    let f = fixture(r#"{"turns": [{"steps": [{"text": "ok"}]}]}"#).await;
    f.runtime.shutdown(std::time::Duration::from_secs(5)).await;
    drop(f.runtime);
    std::fs::write(
        f.dir.path().join("bot/agent/ab.toml"),
        "sticky = \"principal\"\n[[variants]]\nid = \"a\"\n[[variants]]\nid = \"b\"\n",
    )
    .unwrap();
    let runtime = super::open(f.dir.path()).await;
    let mut per_variant = std::collections::BTreeMap::<String, u64>::new();
    for p in 0..30 {
        let mut variants = std::collections::BTreeSet::new();
        for s in 0..3 {
            let mut req = new_session(&format!("p{p} s{s}"));
            req.owner = owner(&format!("user-{p}"));
            let a = runtime.send(req).await.unwrap();
            let events = runtime
                .events(&a.session_id, &owner(&format!("user-{p}")), 0)
                .await
                .unwrap();
            let variant = events
                .iter()
                .find(|e| e.event_type == EventType::AbAssigned)
                .and_then(|e| e.data["variant"].as_str().map(str::to_owned))
                .unwrap();
            *per_variant.entry(variant.clone()).or_default() += 1;
            variants.insert(variant);
        }
        assert_eq!(variants.len(), 1, "user-{p} kept one variant: {variants:?}");
    }
    assert_eq!(per_variant.len(), 2, "{per_variant:?}");
    let report = runtime.ab().report().await.unwrap();
    let x = &report.experiments[0];
    assert_eq!(x.sticky, "principal");
    for v in &x.variants {
        assert_eq!(v.sessions, per_variant[&v.id], "{}", v.id);
    }
}

/// A folder deleted by hand in the middle of a page does not cut the
/// listing short: the page is filled from the sessions after it, and the
/// cursor leads on to the rest.
#[tokio::test]
async fn pages_stay_full_across_a_deleted_folder() {
    let f = fixture(REPLIES).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let s = f.runtime.send(new_session("hi")).await.unwrap();
        until(&f.runtime, &s.session_id, EventType::SessionWaiting, 1).await;
        while f.runtime.is_active(&s.session_id) {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        ids.push(s.session_id);
    }
    let sessions = f.dir.path().join("state/sessions");
    super::folders(&f.dir.path().join("state"), 3).await;
    std::fs::remove_dir_all(sessions.join(&ids[1])).unwrap();

    let mut seen = Vec::new();
    let mut page = agentkit_runtime::SessionPage {
        limit: 1,
        ..super::page()
    };
    loop {
        let (listed, next) = f.runtime.list_page(&owner("alice"), &page).await.unwrap();
        assert!(listed.len() <= 1);
        seen.extend(listed.into_iter().map(|s| s.session_id));
        match next {
            Some(cursor) => page.before = Some(cursor),
            None => break,
        }
    }
    // Newest first, the deleted one left out, none lost.
    assert_eq!(seen, [ids[2].clone(), ids[0].clone()]);
}
