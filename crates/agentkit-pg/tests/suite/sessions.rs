//! The session index in pages: 1,050 sessions listed newest first by
//! keyset pages with no duplicate or gap, per owner, channel and creation
//! time.

use agentkit_pg::{Database, SessionIndex, SessionRow};
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
                parked: false,
                meta: json!({"id": id, "createdAt": created}).to_string(),
            })
            .await
            .unwrap();
    }
    let ids = |metas: Vec<String>| -> Vec<String> {
        metas
            .iter()
            .map(|m| {
                serde_json::from_str::<serde_json::Value>(m).unwrap()["id"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    };
    let page_all = |principal: Option<&'static str>,
                    channel: Option<&'static str>,
                    since: Option<&'static str>| {
        let index = index.clone();
        async move {
            let mut all: Vec<String> = Vec::new();
            loop {
                let page = ids(index
                    .page(
                        principal,
                        channel,
                        all.last().map(String::as_str),
                        since,
                        100,
                    )
                    .await
                    .unwrap());
                if page.is_empty() {
                    return all;
                }
                all.extend(page);
            }
        }
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
}
