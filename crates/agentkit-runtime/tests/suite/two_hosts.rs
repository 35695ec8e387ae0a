//! Two runtimes ("hosts") over one shared store, the in-memory one and
//! PostgreSQL (under `CI=true`; skipped, saying so, without a server): a
//! session made on one is read and continued on the other; a stop or a
//! decision that reaches the host not running the turn is routed
//! (through the store's mailbox) to the one that is; a host that dies
//! mid-turn has its session taken over and the interrupted turn recorded
//! once (in memory, where a host can be made to look dead; the facade's
//! suite kills real PostgreSQL hosts).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agentkit_protocol::EventType;
use agentkit_runtime::{AgentRuntime, Decision, MemoryBackend, RuntimeOptions, SharedBackend};

use super::{follow, new_session, owner, types, until, write};

const ECHO_TOOL: &str = r#"description = "Echo, after a human agrees"
command = ["cat"]
needs_approval = true
[input_schema]
type = "object"
required = ["text"]
properties.text = { type = "string" }
"#;

/// Writes the project both hosts serve: a model that plays `script`.
fn project(root: &Path, script: &str) {
    let project = root.join("bot");
    write(
        &project.join("agent/agent.toml"),
        "model = \"scripted:script.json\"\n",
    );
    write(&project.join("agent/script.json"), script);
    write(
        &project.join("agent/instructions.md"),
        "You are a test agent.\n",
    );
    write(&project.join("agent/tools/echo.toml"), ECHO_TOOL);
}

/// Where the hosts of a test keep what they share.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Memory,
    Postgres,
}

/// The store of one test: the in-memory one, or a throwaway PostgreSQL
/// database (its guard drops it).
enum Store {
    Memory(MemoryBackend),
    Postgres(agentkit_test_support::pg::PgDatabase),
}

impl Store {
    /// `None` when PostgreSQL is wanted and there is none (outside CI).
    fn new(kind: Kind) -> Option<Store> {
        Some(match kind {
            Kind::Memory => Store::Memory(MemoryBackend::new()),
            Kind::Postgres => Store::Postgres(agentkit_test_support::pg::throwaway_database()?),
        })
    }

    /// Host `name`'s handle on it.
    async fn host(&self, name: &str) -> Arc<dyn SharedBackend> {
        match self {
            Store::Memory(m) => Arc::new(m.host(name)),
            Store::Postgres(db) => Arc::new(
                agentkit_test_support::pg::PgBackend::open(&db.url)
                    .await
                    .unwrap(),
            ),
        }
    }
}

/// A host over `store`: its own state folder (`<root>/<host>/bot`, so the
/// agent's name in the store is `bot` on every host).
async fn host(root: &Path, store: &Store, name: &str) -> AgentRuntime {
    host_with_clock(root, store, name, Arc::new(agentkit_runtime::SystemClock)).await
}

async fn host_with_clock(
    root: &Path,
    store: &Store,
    name: &str,
    clock: Arc<dyn agentkit_runtime::Clock>,
) -> AgentRuntime {
    let found = agentkit_manifest::discover(&root.join("bot")).unwrap();
    assert!(found.is_ok(), "{:?}", found.diagnostics);
    let agent = Arc::new(found.host.agents[0].agent.clone());
    AgentRuntime::open(
        agent,
        RuntimeOptions {
            state_dir: root.join(name).join("bot"),
            default_model: None,
            store: Default::default(),
            providers: Default::default(),
            host_bridge: None,
            clock,
            tool_sources: Vec::new(),
            services: None,
            tracing: false,
            shared: Some(store.host(name).await),
        },
    )
    .await
    .unwrap()
}

struct Pair {
    _dir: tempfile::TempDir,
    a: AgentRuntime,
    b: AgentRuntime,
    store: Store,
}

async fn pair(kind: Kind, script: &str) -> Option<Pair> {
    let store = Store::new(kind)?;
    let dir = tempfile::tempdir().unwrap();
    project(dir.path(), script);
    let a = host(dir.path(), &store, "host-a").await;
    let b = host(dir.path(), &store, "host-b").await;
    Some(Pair {
        _dir: dir,
        a,
        b,
        store,
    })
}

/// Runs `test` over the in-memory store, then over PostgreSQL.
macro_rules! on_both_stores {
    ($name:ident, $memory:ident, $postgres:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $memory() {
            $name(Kind::Memory).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $postgres() {
            $name(Kind::Postgres).await;
        }
    };
}

on_both_stores!(
    session_continued_elsewhere,
    a_session_made_on_one_host_is_read_and_continued_on_the_other_in_memory,
    a_session_made_on_one_host_is_read_and_continued_on_the_other_in_postgresql
);
on_both_stores!(
    decision_routed,
    a_decision_sent_to_the_other_host_reaches_the_parked_call_in_memory,
    a_decision_sent_to_the_other_host_reaches_the_parked_call_in_postgresql
);
on_both_stores!(
    stop_routed,
    a_stop_sent_to_the_other_host_stops_the_turn_there_in_memory,
    a_stop_sent_to_the_other_host_stops_the_turn_there_in_postgresql
);

async fn session_continued_elsewhere(kind: Kind) {
    let script = r#"{"turns": [{"steps": [{"text": "one"}]}, {"steps": [{"text": "two"}]}]}"#;
    let Some(p) = pair(kind, script).await else {
        return;
    };
    let accepted = p.a.send(new_session("q1")).await.unwrap();
    let id = accepted.session_id.clone();
    until(&p.a, &id, EventType::SessionWaiting, 1).await;
    // Host B has never seen the session: the store's index and log answer.
    let seen_on_b = until(&p.b, &id, EventType::SessionWaiting, 1).await;
    assert_eq!(
        types(&seen_on_b),
        types(&until(&p.a, &id, EventType::SessionWaiting, 1).await)
    );
    let token =
        p.b.session(&id, &owner("alice"))
            .await
            .unwrap()
            .continuation_token;
    // The first turn settled and let its lease go: B runs the second.
    p.b.follow_up(&id, follow("q2", &token)).await.unwrap();
    let events = until(&p.a, &id, EventType::SessionWaiting, 2).await;
    let texts: Vec<&str> = events
        .iter()
        .filter(|e| e.event_type == EventType::MessageCompleted)
        .filter_map(|e| e.data["text"].as_str())
        .collect();
    assert_eq!(texts, ["one", "two"], "{:?}", types(&events));
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.index, i as u64, "contiguous indices across hosts");
    }
    if let Store::Memory(m) = &p.store {
        assert_eq!(m.log_len("bot", &id), events.len());
    }
    // Neither host wrote the session to its own files.
    let dir = p._dir.path();
    assert!(
        !dir.join("host-a/bot/sessions")
            .join(&id)
            .join("events.ndjson")
            .exists()
    );
    assert!(
        !dir.join("host-b/bot/sessions")
            .join(&id)
            .join("events.ndjson")
            .exists()
    );
}

async fn decision_routed(kind: Kind) {
    let script = r#"{"turns": [{"steps": [{"toolCalls": [{"name": "echo", "input": {"text": "hi"}}]}, {"text": "after approval"}]}]}"#;
    let Some(p) = pair(kind, script).await else {
        return;
    };
    let id = p.a.send(new_session("q1")).await.unwrap().session_id;
    until(&p.a, &id, EventType::ActionApprovalRequested, 1).await;
    let pending = p.b.approvals().pending(&id, &owner("alice")).await.unwrap();
    assert_eq!(pending.len(), 1, "host B lists the call parked on A");
    let approve = Decision {
        approved: true,
        reason: None,
        by: "alice".to_owned(),
    };
    p.b.approvals()
        .resolve(&id, &pending[0].call_id, approve, &owner("alice"))
        .await
        .unwrap();
    let events = until(&p.b, &id, EventType::SessionWaiting, 1).await;
    let said = events
        .iter()
        .rfind(|e| e.event_type == EventType::MessageCompleted)
        .expect("the turn completes");
    assert_eq!(said.data["text"], "after approval", "{:?}", types(&events));
    let resolved: Vec<_> = events
        .iter()
        .filter(|e| e.event_type == EventType::ActionApprovalResolved)
        .collect();
    assert_eq!(resolved.len(), 1, "decided once: {:?}", types(&events));
}

async fn stop_routed(kind: Kind) {
    let script = r#"{"turns": [{"steps": [{"text": "slow", "delayMs": 30000}]}]}"#;
    let Some(p) = pair(kind, script).await else {
        return;
    };
    let id = p.a.send(new_session("q1")).await.unwrap().session_id;
    until(&p.a, &id, EventType::TurnStarted, 1).await;
    let stopped = tokio::time::timeout(Duration::from_secs(10), p.b.stop(&id, &owner("alice")))
        .await
        .expect("the routed stop is answered")
        .unwrap();
    assert!(stopped, "host A stopped the turn it runs");
    let events = until(&p.b, &id, EventType::TurnFailed, 1).await;
    let failed = events.last().unwrap();
    assert_eq!(failed.data["reason"], "stopped", "{:?}", types(&events));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_hosts_session_is_taken_over_and_its_turn_recorded_once() {
    let script = r#"{"turns": [{"steps": [{"text": "slow", "delayMs": 30000}]}, {"steps": [{"text": "after"}]}]}"#;
    let p = pair(Kind::Memory, script).await.unwrap();
    let Store::Memory(store) = &p.store else {
        unreachable!("made in memory")
    };
    let id = p.a.send(new_session("q1")).await.unwrap().session_id;
    until(&p.a, &id, EventType::TurnStarted, 1).await;
    // Host A stops renewing its leases: B's sweeper takes the session over.
    store.stop_host("host-a");
    let events = until(&p.b, &id, EventType::TurnFailed, 1).await;
    let failed = events.last().unwrap();
    assert_eq!(failed.data["reason"], "restart", "{:?}", types(&events));
    // The session goes on from B; A can no longer write to it.
    let token =
        p.b.session(&id, &owner("alice"))
            .await
            .unwrap()
            .continuation_token;
    p.b.follow_up(&id, follow("q2", &token)).await.unwrap();
    let events = until(&p.b, &id, EventType::TurnCompleted, 1).await;
    let said = events
        .iter()
        .rfind(|e| e.event_type == EventType::MessageCompleted)
        .unwrap();
    assert_eq!(said.data["text"], "after", "{:?}", types(&events));
    let failures = events
        .iter()
        .filter(|e| e.event_type == EventType::TurnFailed)
        .count();
    assert_eq!(
        failures,
        1,
        "the interruption is recorded once: {:?}",
        types(&events)
    );
}

const MINUTELY: &str = "---\ncron: \"* * * * *\"\n---\n\nCheck the incidents.\n";

/// Two hosts whose clocks run a few hundred milliseconds apart, both
/// running the schedule and reminder timers: each cron tick makes one
/// task session, and a reminder wakes its conversation once.
async fn timers_fire_once(kind: Kind) {
    use agentkit_runtime::{ManualClock, NewReminder, ReminderAction, ReminderWhen};
    use chrono::TimeZone;
    let Some(store) = Store::new(kind) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    project(dir.path(), r#"{"turns": [{"steps": [{"text": "ok"}]}]}"#);
    write(
        &dir.path().join("bot/agent/schedules/heartbeat.md"),
        MINUTELY,
    );
    let at = |minute: u32, second: u32, ms: i64| {
        chrono::Utc
            .with_ymd_and_hms(2026, 12, 3, 12, minute, second)
            .unwrap()
            + chrono::Duration::milliseconds(ms)
    };
    const OFFSETS_MS: [i64; 2] = [355, 352];
    let mut hosts = Vec::new();
    for (i, name) in ["host-a", "host-b"].into_iter().enumerate() {
        let clock = ManualClock::new(at(0, 30, OFFSETS_MS[i]));
        let runtime = host_with_clock(dir.path(), &store, name, Arc::new(clock.clone())).await;
        tokio::spawn(runtime.schedules().run(runtime.shutdown_token()));
        let r = runtime.clone();
        tokio::spawn(async move { r.reminders().run(r.shutdown_token()).await });
        hosts.push((runtime, clock));
    }
    let reminder = hosts[0]
        .0
        .reminders()
        .create(NewReminder {
            purpose: "recheck".into(),
            channel_id: "jobs".into(),
            continuation_token: "job:1".into(),
            when: ReminderWhen::Delay(Duration::from_secs(60)),
            action: ReminderAction::Prompt {
                prompt: "recheck job 1".into(),
                until: None,
            },
        })
        .await
        .unwrap();
    const TICKS: u32 = 3;
    for minute in 1..=TICKS {
        for (i, (_, clock)) in hosts.iter().enumerate() {
            clock.set(at(minute, 0, OFFSETS_MS[i]));
        }
        // The tick's session (and, from 12:02, the reminder's).
        let want = u64::from(minute) + u64::from(minute >= 2);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while hosts[1].0.stored_sessions().await.unwrap() < want {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the 12:{minute:02} tick made no session"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Each run ends before the next tick: a host still running the
        // previous one skips the tick (as one host skips a tick that
        // overlaps its previous run), and a manual clock brings no other.
        let operator = agentkit_runtime::Owner {
            principal_id: "ops".to_owned(),
            principal_type: "operator".to_owned(),
            authenticator: "test".to_owned(),
            ..Default::default()
        };
        let page = agentkit_runtime::SessionPage {
            limit: 100,
            ..Default::default()
        };
        loop {
            let (sessions, _) = hosts[1].0.list_page(&operator, &page).await.unwrap();
            let running = sessions
                .iter()
                .any(|s| hosts.iter().any(|(rt, _)| rt.is_active(&s.session_id)));
            // The schedule's run, too: it counts as running a moment
            // after its session settles (a loaded machine stretches that
            // moment), and a tick it sees running is skipped.
            let scheduled = hosts
                .iter()
                .any(|(rt, _)| rt.schedules().status().iter().any(|s| s.running));
            if !running && !scheduled {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the 12:{minute:02} runs did not settle"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // Both hosts had every chance to fire twice.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        hosts[0].0.stored_sessions().await.unwrap(),
        u64::from(TICKS) + 1,
        "one session per tick and one for the reminder"
    );
    let fired = hosts[1].0.reminders().get(&reminder.id).await.unwrap();
    assert_eq!(fired.fire_count, 1, "{fired:?}");
}

on_both_stores!(
    timers_fire_once,
    cron_ticks_and_a_reminder_fire_once_across_two_hosts_in_memory,
    cron_ticks_and_a_reminder_fire_once_across_two_hosts_in_postgresql
);
