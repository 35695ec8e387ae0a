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
        // Expire the winner too, for the next round.
        db.query("UPDATE agentkit_leases SET expires_at = now() - interval '1 second'");
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
