//! The mailbox: a request for a session another host holds is claimed by
//! that host only, by exactly one of many racing claimers once no live
//! host holds the session, and never after its receiver abandoned it.

use agentkit_pg::{Database, Leases, MailSignal, MailState, Mailbox};
use agentkit_test_support::pg::throwaway_database;

async fn open(url: &str) -> Database {
    let db = Database::connect(url).await.unwrap();
    db.migrate().await.unwrap();
    db
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_request_is_claimed_by_the_holder_once_and_an_abandoned_one_never() {
    let Some(pg) = throwaway_database() else {
        return;
    };
    let db = open(&pg.url).await;
    let holder = Leases::new(db.clone(), "holder".into());
    holder.acquire("bot", "ses_1").await.unwrap();
    let mailbox = Mailbox::new(db.clone(), "bot");
    let mut signals = mailbox.signals();
    // The listener says when it listens (what was posted before, it
    // cannot have heard: readers look at the table then).
    let listening = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        while signals.recv().await.unwrap() != MailSignal::Missed {}
    })
    .await;
    assert!(listening.is_ok(), "the listener never listened");
    mailbox
        .post(
            "mail_1",
            "ses_1",
            "stop",
            r#"{"kind":"stop"}"#,
            "alice",
            "receiver",
        )
        .await
        .unwrap();
    // Every host hears of it (the LISTEN connection).
    let heard = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            if let Ok(MailSignal::Posted { agent, session }) = signals.recv().await {
                break (agent, session);
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(heard, ("bot".to_owned(), "ses_1".to_owned()));
    // Another host may not take a request for a session the holder holds.
    assert!(mailbox.claim("other", 10).await.unwrap().is_empty());
    assert!(
        mailbox
            .claim_one("mail_1", "other")
            .await
            .unwrap()
            .is_none()
    );
    let claimed = mailbox.claim("holder", 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].payload, r#"{"kind": "stop"}"#);
    assert_eq!(claimed[0].principal_id, "alice");
    // Claimed: the receiver can no longer abandon it; nobody claims it again.
    assert!(!mailbox.abandon("mail_1").await.unwrap());
    assert!(mailbox.claim("holder", 10).await.unwrap().is_empty());
    mailbox
        .finish(
            "mail_1",
            "holder",
            r#"{"outcome":"stopped","interrupted":true}"#,
        )
        .await
        .unwrap();
    assert_eq!(
        mailbox.state("mail_1").await.unwrap(),
        MailState::Done {
            outcome: r#"{"outcome": "stopped", "interrupted": true}"#.into()
        }
    );
    mailbox.forget("mail_1").await.unwrap();
    assert_eq!(mailbox.state("mail_1").await.unwrap(), MailState::Gone);

    // Abandoned while pending: never applied.
    mailbox
        .post("mail_2", "ses_1", "stop", "{}", "alice", "receiver")
        .await
        .unwrap();
    assert!(mailbox.abandon("mail_2").await.unwrap());
    assert!(mailbox.claim("holder", 10).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn once_no_live_host_holds_the_session_exactly_one_racing_host_claims_it() {
    let Some(pg) = throwaway_database() else {
        return;
    };
    let db = open(&pg.url).await;
    let holder = Leases::new(db.clone(), "holder".into());
    holder.acquire("bot", "ses_2").await.unwrap();
    let mailbox = Mailbox::new(db.clone(), "bot");
    for i in 0..20 {
        mailbox
            .post(
                &format!("mail_{i:02}"),
                "ses_2",
                "message",
                "{}",
                "alice",
                "receiver",
            )
            .await
            .unwrap();
    }
    // The holder dies: its lease expires.
    pg.query("UPDATE agentkit_leases SET expires_at = now() - interval '1 second'");
    let racers: Vec<_> = (0..8)
        .map(|i| {
            let mailbox = mailbox.clone();
            tokio::spawn(async move {
                let me = format!("host-{i}");
                let mut mine = Vec::new();
                for _ in 0..5 {
                    mine.extend(
                        mailbox
                            .claim(&me, 3)
                            .await
                            .unwrap()
                            .into_iter()
                            .map(|m| m.id),
                    );
                }
                mine
            })
        })
        .collect();
    let mut all = Vec::new();
    for racer in racers {
        all.extend(racer.await.unwrap());
    }
    all.sort();
    let expected: Vec<String> = (0..20).map(|i| format!("mail_{i:02}")).collect();
    assert_eq!(all, expected, "each request claimed exactly once");
}
