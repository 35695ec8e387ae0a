//! One writer per session: when a holder dies, many hosts race to take
//! its lease and exactly one wins; the old holder can never append again
//! (fencing), even though it still believes it holds the lease.

use std::time::Duration;

use agentkit_pg::{Database, LEASE_TTL, Leases, PgEventStore};
use agentkit_protocol::{EventType, SessionId};
use agentkit_test_support::pg::throwaway_database;
use serde_json::json;

async fn host(url: &str) -> PgEventStore {
    let db = Database::connect(url).await.unwrap();
    db.migrate().await.unwrap();
    let leases = Leases::new(db.clone(), Leases::owner_name());
    PgEventStore::new(db, "bot", leases, 64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lease_stealing_race_never_yields_two_writers() {
    let Some(db) = throwaway_database() else {
        return;
    };
    let id = SessionId::parse("ses_contested").unwrap();
    let old = host(&db.url).await;
    old.append(&id, EventType::TurnStarted, Some("t1"), json!({}))
        .await
        .unwrap();
    // The holder "dies": its lease is no longer renewed (a stalled
    // process whose heartbeat stopped), but it still thinks it holds it.
    db.query(&format!(
        "UPDATE agentkit_leases SET expires_at = now() - interval '1 second', owner = 'dead-host' WHERE session_id = '{}'",
        id.as_str()
    ));
    // Not before expiry: a live lease is never taken.
    let live = host(&db.url).await;
    db.query("UPDATE agentkit_leases SET expires_at = now() + interval '1 hour'");
    assert!(live.leases().acquire("bot", id.as_str()).await.is_err());
    db.query("UPDATE agentkit_leases SET expires_at = now() - interval '1 second'");

    for round in 0..5 {
        let racers: Vec<PgEventStore> =
            futures_util::future::join_all((0..6).map(|_| host(&db.url))).await;
        let attempts: Vec<_> = racers
            .iter()
            .map(|racer| {
                let racer = racer.clone();
                let id = id.clone();
                tokio::spawn(async move {
                    match racer.leases().acquire("bot", id.as_str()).await {
                        Ok(_) => racer
                            .append(
                                &id,
                                EventType::TurnFailed,
                                Some("t1"),
                                json!({"round": round}),
                            )
                            .await
                            .is_ok(),
                        Err(_) => false,
                    }
                })
            })
            .collect();
        let mut winners = 0;
        for a in attempts {
            winners += usize::from(a.await.unwrap());
        }
        assert_eq!(
            winners, 1,
            "round {round}: exactly one host takes the lease and writes"
        );
        // The old holder still believes it holds a lease: fenced.
        let fenced = old
            .append(&id, EventType::TurnCompleted, Some("t1"), json!({}))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            fenced.contains("lost its lease") || fenced.contains("held by another host"),
            "{fenced}"
        );
        // Expire the winner too, for the next round, as a dead holder: a
        // heartbeat of the dropped winner still in flight renews only its
        // own lease, so it cannot make the lease live again.
        db.query(
            "UPDATE agentkit_leases SET expires_at = now() - interval '1 second', owner = 'dead-host'",
        );
        drop(racers);
    }
    let log = db.query(&format!(
        "SELECT string_agg(idx::text || ':' || type, ',' ORDER BY idx) FROM agentkit_events WHERE session_id = '{}'",
        id.as_str()
    ));
    assert_eq!(
        log,
        "0:turn.started,1:turn.failed,2:turn.failed,3:turn.failed,4:turn.failed,5:turn.failed"
    );
    let token = db.query("SELECT token FROM agentkit_leases");
    assert_eq!(token, "6", "one new token per change of owner");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_heartbeat_keeps_a_lease_and_a_dead_holder_is_found() {
    let Some(db) = throwaway_database() else {
        return;
    };
    let id = SessionId::parse("ses_kept").unwrap();
    let a = host(&db.url).await;
    let b = host(&db.url).await;
    a.append(&id, EventType::TurnStarted, Some("t1"), json!({}))
        .await
        .unwrap();
    // Past the TTL, the heartbeat has renewed it: B cannot take it.
    tokio::time::sleep(LEASE_TTL + Duration::from_millis(500)).await;
    assert!(b.leases().orphaned("bot", 10).await.unwrap().is_empty());
    assert!(
        b.append(&id, EventType::TurnFailed, Some("t1"), json!({}))
            .await
            .is_err()
    );
    // A dies (its heartbeat stops with it): B finds the session orphaned.
    drop(a);
    let deadline = tokio::time::Instant::now() + LEASE_TTL + Duration::from_secs(3);
    loop {
        if b.leases().orphaned("bot", 10).await.unwrap() == vec![id.as_str().to_owned()] {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "no orphan found");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    b.append(&id, EventType::TurnFailed, Some("t1"), json!({}))
        .await
        .unwrap();
    assert_eq!(b.len(&id).await.unwrap(), 2);
}

fn reminder(i: usize) -> agentkit_pg::ReminderRecord {
    agentkit_pg::ReminderRecord {
        id: format!("rem_{i:04}"),
        purpose: "p".into(),
        channel_id: "jobs".into(),
        continuation_token: format!("job:{i}"),
        session_id: None,
        kind: "delay".into(),
        spec: "1m".into(),
        prompt: Some("x".into()),
        until_condition: None,
        status: "armed".into(),
        reason: None,
        next_fire_at_ms: Some(1_000),
        fire_count: 0,
        created_at_ms: 0,
        last_fired_at_ms: None,
        handler: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reminders_are_claimed_once_and_a_dead_claim_is_claimed_again() {
    let Some(db) = throwaway_database() else {
        return;
    };
    let database = Database::connect(&db.url).await.unwrap();
    database.migrate().await.unwrap();
    let table = agentkit_pg::ReminderTable::new(database, "bot");
    table
        .insert(&(0..300).map(reminder).collect::<Vec<_>>())
        .await
        .unwrap();
    // Three hosts claim at once, in rounds: every row goes to one of them.
    let claims: Vec<_> = (0..3)
        .map(|h| {
            let url = db.url.clone();
            tokio::spawn(async move {
                let table =
                    agentkit_pg::ReminderTable::new(Database::connect(&url).await.unwrap(), "bot");
                let mut mine = Vec::new();
                loop {
                    let got = table
                        .claim_due(2_000, 16, &format!("host-{h}"), 60.0)
                        .await
                        .unwrap();
                    if got.is_empty() {
                        return mine;
                    }
                    mine.extend(got.into_iter().map(|r| r.id));
                }
            })
        })
        .collect();
    let mut all = Vec::new();
    for c in claims {
        all.extend(c.await.unwrap());
    }
    all.sort();
    let expected: Vec<String> = (0..300).map(|i| format!("rem_{i:04}")).collect();
    assert_eq!(all, expected, "each due reminder claimed exactly once");
    // Not yet due: not claimed.
    assert!(
        table
            .claim_due(500, 16, "host-x", 60.0)
            .await
            .unwrap()
            .is_empty()
    );
    // A claim whose host died expires and is claimed again.
    db.query("UPDATE agentkit_reminders SET claimed_until = now() - interval '1 second' WHERE id = 'rem_0007'");
    let again = table.claim_due(2_000, 16, "host-y", 60.0).await.unwrap();
    assert_eq!(
        again.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        vec!["rem_0007"]
    );
    // Written back by its claimer, it is fired and done; a stale claimer's
    // write is refused.
    let mut done = again[0].clone();
    done.status = "done".into();
    done.fire_count = 1;
    assert!(!table.update(&done, Some("host-0")).await.unwrap());
    assert!(table.update(&done, Some("host-y")).await.unwrap());
    assert_eq!(table.get("rem_0007").await.unwrap().unwrap().status, "done");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn taking_a_dead_holders_lease_says_so_and_taking_a_released_one_does_not() {
    let Some(db) = throwaway_database() else {
        return;
    };
    let database = Database::connect(&db.url).await.unwrap();
    database.migrate().await.unwrap();
    let a = Leases::new(database.clone(), "host-a".into());
    let b = Leases::new(database.clone(), "host-b".into());
    // A new lease, and one let go after its session settled: nothing to
    // recover.
    assert!(!a.hold_noting_takeover("bot", "ses_1").await.unwrap().1);
    a.release("bot", "ses_1").await.unwrap();
    assert!(!b.hold_noting_takeover("bot", "ses_1").await.unwrap().1);
    // B dies holding it: once expired, A takes it and is told.
    db.query(
        "UPDATE agentkit_leases SET expires_at = now() - interval '1 second', owner = 'dead-host'",
    );
    let (_, took_over) = a.hold_noting_takeover("bot", "ses_1").await.unwrap();
    assert!(took_over);
    // Held by A now: asking again changes nothing.
    assert!(!a.hold_noting_takeover("bot", "ses_1").await.unwrap().1);
}

/// A host holds a liveness lock while it lives: its leases are not taken
/// while it does (however long they last), and are orphaned, then taken
/// over, the moment its connection ends, long before they would expire.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hosts_leases_are_taken_over_as_soon_as_its_liveness_connection_ends() {
    let Some(db) = throwaway_database() else {
        return;
    };
    let database = Database::connect(&db.url).await.unwrap();
    database.migrate().await.unwrap();
    let a = Leases::open(database.clone(), "host-a".into()).await;
    let b = Leases::open(database.clone(), "host-b".into()).await;
    assert_eq!(a.owner(), "host-a:live");
    a.hold("bot", "ses_live").await.unwrap();
    // Far from expiring: only liveness can free it.
    db.query("UPDATE agentkit_leases SET expires_at = now() + interval '1 hour'");
    assert!(b.acquire("bot", "ses_live").await.is_err());
    assert!(b.orphaned("bot", 10).await.unwrap().is_empty());
    assert_eq!(
        b.holder("bot", "ses_live").await.unwrap().as_deref(),
        Some("host-a:live")
    );

    // A's process ends: its connections close and PostgreSQL frees the lock.
    drop(a);
    let freed = std::time::Instant::now();
    let orphaned = loop {
        let found = b.orphaned("bot", 10).await.unwrap();
        if !found.is_empty() || freed.elapsed() > Duration::from_secs(5) {
            break found;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(orphaned, ["ses_live"]);
    assert!(
        freed.elapsed() < Duration::from_secs(2),
        "{:?}",
        freed.elapsed()
    );
    assert_eq!(b.holder("bot", "ses_live").await.unwrap(), None);
    let (_, took_over) = b.hold_noting_takeover("bot", "ses_live").await.unwrap();
    assert!(took_over);

    // A name without the lock (a host that could not take it) keeps the
    // expiry rule: its lease is not orphaned while it lasts.
    let plain = Leases::new(database.clone(), "host-c".into());
    plain.hold("bot", "ses_plain").await.unwrap();
    db.query("UPDATE agentkit_leases SET expires_at = now() + interval '1 hour' WHERE session_id = 'ses_plain'");
    drop(plain);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !b.orphaned("bot", 10)
            .await
            .unwrap()
            .iter()
            .any(|s| s == "ses_plain")
    );
}
