//! Migrations racing at start: many hosts (tasks with their own pools,
//! and processes) migrate one database at once; the schema ends up whole
//! and each version is recorded once.

use agentkit_pg::{Database, MIGRATIONS};
use agentkit_test_support::pg::throwaway_database;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn migrations_racing_at_start_apply_each_version_once() {
    let Some(db) = throwaway_database() else {
        return;
    };
    // Eight "hosts", each with its own pool, all starting together.
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let url = db.url.clone();
            tokio::spawn(async move {
                let database = Database::connect(&url).await.unwrap();
                database.migrate().await.unwrap()
            })
        })
        .collect();
    let mut applied: Vec<i32> = Vec::new();
    for task in tasks {
        applied.extend(task.await.unwrap());
    }
    applied.sort_unstable();
    let known: Vec<i32> = MIGRATIONS.iter().map(|m| m.version).collect();
    // Exactly one host applied each version.
    assert_eq!(applied, known);
    let recorded = db.query(
        "SELECT version, count(*) FROM agentkit_migrations GROUP BY version ORDER BY version",
    );
    let expected: Vec<String> = known.iter().map(|v| format!("{v}|1")).collect();
    assert_eq!(recorded, expected.join("\n"));

    let database = Database::connect(&db.url).await.unwrap();
    let status = database.status().await.unwrap();
    assert_eq!(status.pending(), 0);
    assert_eq!(status.current, *known.last().unwrap());
    assert!(status.unknown.is_empty());
    database.check_schema().await.unwrap();
    // A second migration finds nothing to do.
    assert!(database.migrate().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_database_migrated_by_a_newer_binary_is_refused() {
    let Some(db) = throwaway_database() else {
        return;
    };
    let database = Database::connect(&db.url).await.unwrap();
    let before = database.status().await.unwrap();
    assert_eq!(before.current, 0);
    assert_eq!(before.pending(), MIGRATIONS.len());
    assert!(
        database
            .check_schema()
            .await
            .unwrap_err()
            .to_string()
            .contains("agentkit db migrate")
    );
    database.migrate().await.unwrap();
    db.query("INSERT INTO agentkit_migrations (version, name) VALUES (999, 'from_the_future')");
    let error = database.migrate().await.unwrap_err().to_string();
    assert!(
        error.contains("version 999, newer than this binary"),
        "{error}"
    );
    assert_eq!(database.status().await.unwrap().unknown, vec![999]);
}

#[tokio::test]
async fn an_unreachable_server_is_a_clear_error_without_the_password() {
    let error = Database::connect("postgres://bob:hunter2@127.0.0.1:1/nowhere")
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("127.0.0.1:1/nowhere"), "{error}");
    assert!(!error.contains("hunter2"), "{error}");
    let error = Database::connect("mysql://x")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("--database-url: not a PostgreSQL URL"),
        "{error}"
    );
}
