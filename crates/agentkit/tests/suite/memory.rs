//! Memory over HTTP against a real server: the journal
//! (`[memory] journal = true`) gets one line per settled turn, shared by
//! every session and readable through the `read` tool, rotated past its
//! cap; governed memories (`remember` / `recall` / `forget`) scoped to a
//! principal or to the whole agent, listed, read, edited and deleted over
//! `/v1/memory` with ownership, kept across a restart and shared across
//! hosts on PostgreSQL.

use agentkit::ServeOptions;
use agentkit_test_support::http::Request;
use serde_json::{Value, json};

use super::time::{Host, at, wait_until};

const HTTP: &str = "kind = \"http\"\nauth = [{ bearer = { tokens = { alice = \"token-a\", bob = \"token-b\" } } }]\n";

/// Turn 0 reads the journal through the `read` tool; later turns answer.
const JOURNAL_SCRIPT: &str = r#"{"turns": [
  {"steps": [
    {"toolCalls": [{"name": "read", "input": {"path": ".agentkit/memory/journal.jsonl"}}]},
    {"text": "read it"}
  ]},
  {"steps": [{"text": "noted twice"}]}
]}"#;

fn journal_toml(extra: &str) -> String {
    format!("model = \"scripted:script.json\"\n\n[memory]\njournal = true\n{extra}")
}

fn settled(h: &Host, id: &str, waits: usize) {
    wait_until("the session to settle", || {
        h.types(id)
            .iter()
            .filter(|t| *t == "session.waiting")
            .count()
            >= waits
    });
}

fn start_session(h: &Host, token: &str, message: &str) -> (String, String) {
    let r = h.send(
        Request::post("/bot/v1/session")
            .bearer(token)
            .json(&json!({"message": message})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    (
        r.json()["sessionId"].as_str().unwrap().to_owned(),
        r.json()["continuationToken"].as_str().unwrap().to_owned(),
    )
}

/// Sends a follow-up; the next continuation token.
fn follow_up(h: &Host, token: &str, id: &str, continuation: &str, message: &str) -> String {
    let r = h.send(
        Request::post(&format!("/bot/v1/session/{id}"))
            .bearer(token)
            .json(&json!({"message": message, "continuationToken": continuation})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["continuationToken"].as_str().unwrap().to_owned()
}

fn lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn the_journal_gets_a_line_per_settled_turn_shared_by_every_session() {
    let toml = journal_toml("");
    let files = [("agent.toml", toml.as_str()), ("channels/http.toml", HTTP)];
    let mut h = Host::new(JOURNAL_SCRIPT, &files, at(12, 0, 0));
    h.start(ServeOptions::default());

    // Alice: two turns (the first reads a journal that does not exist yet).
    let (a, cont) = start_session(&h, "token-a", "first from alice");
    settled(&h, &a, 1);
    follow_up(&h, "token-a", &a, &cont, "second from alice");
    settled(&h, &a, 2);
    // Bob's first turn reads Alice's two lines through `read`.
    let (b, _) = start_session(&h, "token-b", "first from bob");
    settled(&h, &b, 1);
    let events = h.events(&b);
    let read = events
        .iter()
        .find(|e| e["type"] == "action.result")
        .unwrap();
    assert_eq!(read["data"]["isError"], false, "{read}");
    let seen = read["data"]["output"].to_string();
    assert!(
        seen.contains("first from alice") && seen.contains("second from alice"),
        "{seen}"
    );
    assert!(!seen.contains("first from bob"), "{seen}");

    // A clean shutdown leaves every line in the file.
    h.stop();
    let journal = h.dir.path().join("state/bot/memory/journal.jsonl");
    let got = lines(&journal);
    assert_eq!(got.len(), 3, "{got:#?}");
    let summary: Vec<(String, String, String, String)> = got
        .iter()
        .map(|l| {
            (
                l["sessionId"].as_str().unwrap().to_owned(),
                l["principal"].as_str().unwrap().to_owned(),
                l["message"].as_str().unwrap().to_owned(),
                l["reply"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                a.clone(),
                "alice".into(),
                "first from alice".into(),
                "read it".into()
            ),
            (
                a.clone(),
                "alice".into(),
                "second from alice".into(),
                "noted twice".into()
            ),
            (
                b.clone(),
                "bob".into(),
                "first from bob".into(),
                "read it".into()
            ),
        ]
    );
    for l in &got {
        assert_eq!(l["outcome"], "completed");
        assert!(l["turnId"].as_str().unwrap().starts_with("turn_"), "{l}");
        chrono::DateTime::parse_from_rfc3339(l["timestamp"].as_str().unwrap()).unwrap();
    }
    // The workspace copy is read-only.
    let copy = h.dir.path().join(format!(
        "state/bot/sessions/{b}/workspace/.agentkit/memory/journal.jsonl"
    ));
    assert!(std::fs::metadata(copy).unwrap().permissions().readonly());
}

#[test]
fn the_journal_rotates_past_its_cap() {
    let toml = journal_toml("journal_max_bytes = 256\n");
    let script = r#"{"turns": [{"steps": [{"text": "ok"}]}]}"#;
    let files = [("agent.toml", toml.as_str()), ("channels/http.toml", HTTP)];
    let mut h = Host::new(script, &files, at(12, 0, 0));
    h.start(ServeOptions::default());
    let (a, cont) = start_session(&h, "token-a", &"a".repeat(100));
    settled(&h, &a, 1);
    let cont = follow_up(&h, "token-a", &a, &cont, &"b".repeat(100));
    settled(&h, &a, 2);
    follow_up(&h, "token-a", &a, &cont, &"c".repeat(100));
    settled(&h, &a, 3);
    h.stop();
    // Each line is over half the cap: one per file, the newest current.
    let dir = h.dir.path().join("state/bot/memory");
    let message = |f: &str| {
        let got = lines(&dir.join(f));
        assert_eq!(got.len(), 1, "{f}: {got:#?}");
        got[0]["message"].as_str().unwrap().chars().next().unwrap()
    };
    assert_eq!(message("journal.jsonl"), 'c');
    assert_eq!(message("journal.1.jsonl"), 'b');
    assert_eq!(message("journal.2.jsonl"), 'a');
}
