//! The session index in pages: 1,050 sessions listed newest first by
//! keyset pages with no duplicate or gap, per owner, channel, creation
//! time, last activity and what each is doing (leases included).

use agentkit_pg::{Database, SessionIndex, SessionRow};
use agentkit_store::{Activity, PageQuery};
use agentkit_test_support::pg::throwaway_database;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_paged_newest_first_with_filters() {
    let Some(db) = throwaway_database() else {
        return;
    };
    let database = Database::connect(&db.url).await.unwrap();
    database.migrate().await.unwrap();
    let index = SessionIndex::new(database.clone(), "bot");
    // Another agent's sessions are never listed.
    SessionIndex::new(database, "other")
        .put(&SessionRow {
            id: "ses_zzz".into(),
            channel: "http".into(),
            continuation: "k".into(),
            principal_id: "alice".into(),
            parked: false,
            meta: json!({"id": "ses_zzz", "createdAt": "2030-01-01T00:00:00.000Z"}).to_string(),
            updated_at: "2030-01-01T00:00:00.000Z".into(),
        })
        .await
        .unwrap();
    for i in 0..1050u32 {
        let id = format!("ses_{i:06}");
        let created = format!("2020-01-01T{:02}:{:02}:00.000Z", i / 60 % 24, i % 60);
        index
            .put(&SessionRow {
                id: id.clone(),
                channel: if i % 3 == 0 { "other" } else { "http" }.into(),
                continuation: format!("k{i}"),
                principal_id: if i % 2 == 0 { "alice" } else { "bob" }.into(),
                // Every tenth waits for approval.
                parked: i % 10 == 0,
                meta: json!({"id": id, "createdAt": created}).to_string(),
                // Active again a day after it was created, in reverse
                // order: the oldest the most recently.
                updated_at: format!(
                    "2020-01-02T{:02}:{:02}:00.000Z",
                    (1049 - i) / 60 % 24,
                    (1049 - i) % 60
                ),
            })
            .await
            .unwrap();
    }
    let page_all = |principal: Option<&'static str>,
                    channel: Option<&'static str>,
                    since: Option<&'static str>| {
        page_where(
            index.clone(),
            PageQuery {
                principal,
                channel,
                since,
                ..PageQuery::default()
            },
        )
    };
    let all = page_all(None, None, None).await;
    assert_eq!(all.len(), 1050);
    assert!(all.windows(2).all(|w| w[0] > w[1]), "not newest first");
    assert_eq!(all[0], "ses_001049");
    assert_eq!(page_all(Some("alice"), None, None).await.len(), 525);
    let other = page_all(None, Some("other"), None).await;
    assert_eq!(other.len(), 350);
    // 1,050 minutes from midnight wrap at 24 h: i in 0..1050 at i minutes,
    // so 16:00 or later is i >= 960.
    let late = page_all(None, None, Some("2020-01-01T16:00:00.000Z")).await;
    assert_eq!(late.len(), 90);
    assert_eq!(
        page_all(Some("bob"), Some("http"), Some("2020-01-01T16:00:00.000Z"))
            .await
            .len(),
        30
    );
    // Written at or after 2020-01-02T17:00 (row i at (1049 - i) minutes
    // past midnight): i <= 29.
    let recent = page_where(
        index.clone(),
        PageQuery {
            updated_since: Some("2020-01-02T17:00:00.000Z"),
            ..PageQuery::default()
        },
    )
    .await;
    assert_eq!(recent.len(), 30);
    assert_eq!(recent.first().map(String::as_str), Some("ses_000029"));
    // A live lease makes a session running unless a call of it waits for
    // approval; a let-go or expired one does not.
    let (client, connection) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    for (id, held, expires) in [
        ("ses_000020", true, "now() + interval '1 minute'"),
        ("ses_000021", true, "now() + interval '1 minute'"),
        ("ses_000030", false, "now() + interval '1 minute'"),
        ("ses_000031", true, "now() - interval '1 minute'"),
    ] {
        client
            .execute(
                &format!(
                    "INSERT INTO agentkit_leases (agent, session_id, owner, token, held, expires_at) \
                     VALUES ('bot', $1, 'host-a', 1, $2, {expires})"
                ),
                &[&id as &(dyn tokio_postgres::types::ToSql + Sync), &held],
            )
            .await
            .unwrap();
    }
    let doing = |activity| {
        page_where(
            index.clone(),
            PageQuery {
                activity: Some(activity),
                ..PageQuery::default()
            },
        )
    };
    assert_eq!(doing(Activity::Running).await, ["ses_000021"]);
    let waiting = doing(Activity::WaitingApproval).await;
    assert_eq!(waiting.len(), 105, "every parked one, held or not");
    assert!(waiting.contains(&"ses_000020".to_owned()));
    assert!(waiting.contains(&"ses_000030".to_owned()));
    let idle = doing(Activity::Idle).await;
    assert_eq!(idle.len(), 1050 - 105 - 1);
    assert!(idle.contains(&"ses_000031".to_owned()), "its holder died");
    assert!(!idle.contains(&"ses_000021".to_owned()));
    // Filters combine, and pages of a filtered listing still chain.
    let both = page_where(
        index.clone(),
        PageQuery {
            activity: Some(Activity::WaitingApproval),
            updated_since: Some("2020-01-02T17:00:00.000Z"),
            ..PageQuery::default()
        },
    )
    .await;
    assert_eq!(both, ["ses_000020", "ses_000010", "ses_000000"]);
}

/// Every id `query` selects, read in pages of 100 chained by `before`.
async fn page_where(index: SessionIndex, query: PageQuery<'static>) -> Vec<String> {
    let mut all: Vec<String> = Vec::new();
    loop {
        let last = all.last().cloned();
        let page = index
            .page(&PageQuery {
                before: last.as_deref(),
                limit: 100,
                ..query
            })
            .await
            .unwrap();
        let page: Vec<String> = page
            .iter()
            .map(|m| {
                serde_json::from_str::<serde_json::Value>(m).unwrap()["id"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        if page.is_empty() {
            return all;
        }
        all.extend(page);
    }
}
