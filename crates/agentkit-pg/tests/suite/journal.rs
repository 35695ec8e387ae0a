//! The agent's journal shared by hosts: lines appended on either host are
//! one journal in order, read back newest-within-a-budget, and trimmed to
//! the bytes kept.

use agentkit_pg::{Database, JournalTable};
use agentkit_test_support::pg::throwaway_database;

async fn host(url: &str) -> JournalTable {
    let db = Database::connect(url).await.unwrap();
    db.migrate().await.unwrap();
    JournalTable::new(db, "bot")
}

fn line(n: usize) -> String {
    // 9 bytes with its newline.
    format!("line-{n:03}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_hosts_append_to_one_journal_read_and_trimmed_by_bytes() {
    let Some(db) = throwaway_database() else {
        return;
    };
    let (a, b) = (host(&db.url).await, host(&db.url).await);
    a.append(vec![line(0), line(1)], None).await.unwrap();
    b.append(vec![line(2)], None).await.unwrap();
    a.append(vec![line(3), line(4)], None).await.unwrap();
    let all: Vec<String> = (0..5).map(line).collect();
    assert_eq!(b.recent(1 << 20).await.unwrap(), all);
    // The newest that fit in 27 bytes (three lines), oldest first.
    assert_eq!(a.recent(27).await.unwrap(), all[2..].to_vec());
    // A budget smaller than one line still gives the newest.
    assert_eq!(a.recent(1).await.unwrap(), all[4..].to_vec());
    // Another agent's journal is its own.
    let other = JournalTable::new(Database::connect(&db.url).await.unwrap(), "other");
    assert!(other.recent(1 << 20).await.unwrap().is_empty());

    // Trimming keeps the newest lines within the budget, on every host.
    b.append(vec![line(5)], Some(18)).await.unwrap();
    assert_eq!(a.recent(1 << 20).await.unwrap(), vec![line(4), line(5)]);
}
