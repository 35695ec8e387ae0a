//! `GET /v1/sessions` in pages: 1,100 stored sessions listed newest first
//! by `limit` and `cursor` with no duplicate or gap, the `channel` and
//! `since` filters, the client following cursors, and a bad cursor or
//! limit answered `400`; the `status` and `updatedSince` filters over
//! sessions idle, waiting for approval and running.

use std::path::{Path, PathBuf};

use agentkit::EdgeOptions;
use agentkit_protocol::api::SessionListQuery;
use agentkit_test_support::http::Request;
use serde_json::{Value, json};

use super::edge::server;

/// The file called `name` under `dir`, at any depth.
fn find(dir: &Path, name: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if entry.file_name() == name {
            return Some(path);
        }
        if path.is_dir()
            && let Some(found) = find(&path, name)
        {
            return Some(found);
        }
    }
    None
}

/// Every session id of the listing `query` selects, page by page, and the
/// number of pages.
fn list_all(addr: std::net::SocketAddr, query: &str) -> (Vec<Value>, usize) {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            None => format!("/v1/sessions?{query}"),
            Some(c) => format!("/v1/sessions?{query}&cursor={c}"),
        };
        let r = Request::get(&path).send(addr).unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        let body = r.json();
        pages += 1;
        all.extend(body["sessions"].as_array().unwrap().iter().cloned());
        match body["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return (all, pages),
        }
    }
}

#[test]
fn sessions_are_listed_in_pages_newest_first_with_filters() {
    let s = server(EdgeOptions::default());
    let r = Request::post("/v1/session")
        .json(&json!({"message": "hi"}))
        .send(s.addr())
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let newest = r.json()["sessionId"].as_str().unwrap().to_owned();

    // 1,100 more sessions in the index, older than the one served: ids
    // that sort below it, created a second apart from 2020-01-01, every
    // third on channel `other`.
    let db_path = find(s._dir.path(), "agentkit.sqlite").unwrap();
    let newest_dir = find(s._dir.path(), &newest).unwrap();
    let sessions_dir = newest_dir.parent().unwrap();
    let db = rusqlite::Connection::open(&db_path).unwrap();
    db.busy_timeout(std::time::Duration::from_secs(10)).unwrap();
    let (principal, meta): (String, String) = db
        .query_row(
            "SELECT principal_id, meta FROM sessions WHERE id = ?1",
            [&newest],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let template: Value = serde_json::from_str(&meta).unwrap();
    let tx = db.unchecked_transaction().unwrap();
    for i in 0..1100u32 {
        let id = format!("ses_0000{i:06}");
        let channel = if i % 3 == 0 { "other" } else { "http" };
        let created = chrono::DateTime::from_timestamp(1_577_836_800 + i64::from(i), 0)
            .unwrap()
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let mut meta = template.clone();
        meta["id"] = json!(id);
        meta["channel"] = json!(channel);
        meta["continuationToken"] = json!(format!("key-{i}"));
        meta["createdAt"] = json!(created);
        // Every hundredth was active again in 2021.
        let updated = if i % 100 == 0 {
            "2021-06-01T00:00:00.000Z".to_owned()
        } else {
            created.clone()
        };
        meta["updatedAt"] = json!(updated);
        tx.execute(
            "INSERT INTO sessions (id, channel, continuation, principal_id, parked, meta, updated_at) VALUES (?1, ?2, ?3, ?4, 0, ?5, ?6)",
            rusqlite::params![id, channel, format!("key-{i}"), principal, meta.to_string(), updated],
        )
        .unwrap();
        std::fs::create_dir_all(sessions_dir.join(&id)).unwrap();
    }
    tx.commit().unwrap();
    drop(db);

    // Pages of 250: every session once, newest first.
    let (all, pages) = list_all(s.addr(), "limit=250");
    assert_eq!(pages, 5);
    let ids: Vec<&str> = all
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 1101);
    assert_eq!(ids[0], newest);
    assert!(
        ids.windows(2).all(|w| w[0] > w[1]),
        "not strictly newest first"
    );
    assert_eq!(ids[1], "ses_0000001099");
    assert_eq!(ids[1100], "ses_0000000000");

    // The default page is 100, with a cursor; the largest is 1,000.
    let r = Request::get("/v1/sessions").send(s.addr()).unwrap();
    assert_eq!(r.json()["sessions"].as_array().unwrap().len(), 100);
    assert!(r.json()["nextCursor"].is_string());
    let r = Request::get("/v1/sessions?limit=5000")
        .send(s.addr())
        .unwrap();
    assert_eq!(r.json()["sessions"].as_array().unwrap().len(), 1000);

    // Filters, paged too.
    let (other, _) = list_all(s.addr(), "limit=100&channel=other");
    assert_eq!(other.len(), 367);
    assert!(other.iter().all(|s| s["channel"] == "other"));
    let (recent, _) = list_all(
        s.addr(),
        "limit=100&since=2020-01-01T00%3A10%3A00%2B00%3A00",
    );
    // 600 s after the first: the 500 youngest stored ones, and the new one.
    assert_eq!(recent.len(), 501);
    let (both, _) = list_all(s.addr(), "channel=other&since=2020-01-01T00:10:00Z");
    assert_eq!(both.len(), 167);
    // Active lately: the eleven old ones active again, and the new one,
    // in pages of 5 still newest first.
    let (lately, pages) = list_all(s.addr(), "limit=5&updatedSince=2021-01-01T00:00:00Z");
    let ids: Vec<&str> = lately
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(pages, 3);
    assert_eq!(ids.len(), 12);
    assert_eq!(ids[0], newest);
    assert_eq!(ids[1], "ses_0000001000");
    assert_eq!(ids[11], "ses_0000000000");
    assert_eq!(lately[1]["updatedAt"], "2021-06-01T00:00:00.000Z");
    let (none, _) = list_all(s.addr(), "updatedSince=2099-01-01T00:00:00Z");
    assert!(none.is_empty());

    // The client follows cursors.
    let client = agentkit_client::Client::new(&format!("http://{}", s.addr()), None);
    let listed =
        s.rt.block_on(client.all_sessions(&SessionListQuery {
            limit: Some(300),
            channel: Some("http".into()),
            ..SessionListQuery::default()
        }))
        .unwrap();
    assert_eq!(listed.len(), 734);
    assert_eq!(listed[0].session_id, newest);

    // Bad input is named.
    for bad in [
        "cursor=nope",
        "cursor=s1zz",
        "cursor=s12e2e",
        "limit=0",
        "limit=many",
        "since=yesterday",
    ] {
        let r = Request::get(&format!("/v1/sessions?{bad}"))
            .send(s.addr())
            .unwrap();
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
        assert_eq!(r.error_code(), "bad_request", "{bad}: {}", r.body);
    }
}

/// The ids `GET /bot/v1/sessions?{query}` lists (one page).
fn listed(host: &super::approvals::Host, query: &str) -> Vec<String> {
    let r = host.send(Request::get(&format!("/bot/v1/sessions?{query}")));
    assert_eq!(r.status, 200, "{query}: {}", r.body);
    r.json()["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap().to_owned())
        .collect()
}

/// Waits (at most 10 s) until listing `query` gives `want`: the index
/// row of a turn's end is written behind its event.
fn await_listed(host: &super::approvals::Host, query: &str, want: &[&str]) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let got = listed(host, query);
        if got == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{query}: listed {got:?}, not {want:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn sessions_are_filtered_by_status_and_last_activity() {
    let host =
        super::approvals::Host::with_script("", r#"{"turns": [{"steps": [{"text": "ok"}]}]}"#);
    let script = host.agents().join("bot/agent/script.json");
    let set_turn =
        |turn: &str| std::fs::write(&script, format!(r#"{{"turns": [{turn}]}}"#)).unwrap();
    let id_of = |v: &Value| v["sessionId"].as_str().unwrap().to_owned();

    // Idle: its one turn completed.
    let idle = host.create("hi");
    let idle_id = id_of(&idle);
    host.wait_for(&idle_id, "turn.completed", |_| true);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let before_others = chrono::Utc::now();
    std::thread::sleep(std::time::Duration::from_millis(20));
    // Waiting for approval: its call parked (its turn waits live).
    set_turn(
        r#"{"steps": [{"toolCalls": [{"name": "echo", "input": {"text": "hi"}}]}, {"text": "done"}]}"#,
    );
    let waiting_id = id_of(&host.create("go"));
    host.wait_for(&waiting_id, "action.approval_requested", |_| true);
    // Running: its turn holds.
    set_turn(r#"{"steps": [{"text": "slow", "delayMs": 30000}]}"#);
    let running_id = id_of(&host.create("slow"));
    host.wait_for(&running_id, "turn.started", |_| true);

    await_listed(&host, "status=running", &[running_id.as_str()]);
    await_listed(&host, "status=waiting_approval", &[waiting_id.as_str()]);
    await_listed(&host, "status=idle", &[idle_id.as_str()]);
    // Filters combine, and a status page chains by cursor.
    await_listed(&host, "status=idle&channel=other", &[]);
    let r = host.send(Request::get("/bot/v1/sessions?limit=1"));
    let cursor = r.json()["nextCursor"].as_str().unwrap().to_owned();
    assert_eq!(
        listed(&host, &format!("status=idle&limit=1&cursor={cursor}")),
        [idle_id.as_str()]
    );
    assert_eq!(
        listed(&host, &format!("status=running&limit=1&cursor={cursor}")),
        Vec::<String>::new(),
        "the running session is newer than the cursor"
    );

    // Active since: the two made after the instant, newest first.
    let since = before_others.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let since_q = format!("updatedSince={}", since.replace(':', "%3A"));
    await_listed(&host, &since_q, &[running_id.as_str(), waiting_id.as_str()]);
    // Each listed session says when it was last active.
    let r = host.send(Request::get("/bot/v1/sessions"));
    for s in r.json()["sessions"].as_array().unwrap() {
        assert!(
            s["updatedAt"].as_str().unwrap() >= s["createdAt"].as_str().unwrap(),
            "{s}"
        );
    }

    // A follow-up's turn ending makes the idle session active again.
    set_turn(r#"{"steps": [{"text": "again"}]}"#);
    let r = host.send(
        Request::post(&format!("/bot/v1/session/{idle_id}")).json(&json!({
            "message": "again",
            "continuationToken": idle["continuationToken"],
        })),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let ended = std::cell::Cell::new(0);
    host.wait_for(&idle_id, "turn.completed", |_| {
        ended.set(ended.get() + 1);
        ended.get() == 2
    });
    await_listed(
        &host,
        &since_q,
        &[running_id.as_str(), waiting_id.as_str(), idle_id.as_str()],
    );
    let r = host.send(Request::get(&format!(
        "/bot/v1/sessions?{since_q}&status=idle"
    )));
    let entry = &r.json()["sessions"][0];
    assert!(entry["updatedAt"].as_str().unwrap() > entry["createdAt"].as_str().unwrap());

    // The client passes both filters.
    let client = agentkit_client::Client::new(&format!("http://{}/bot", host.addr()), None);
    let listed = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(client.all_sessions(&SessionListQuery {
            limit: Some(1),
            status: Some("waiting_approval".into()),
            updated_since: Some(since.clone()),
            ..SessionListQuery::default()
        }))
        .unwrap();
    let ids: Vec<&str> = listed.iter().map(|s| s.session_id.as_str()).collect();
    assert_eq!(ids, [waiting_id.as_str()]);

    // Bad values are refused, naming the parameter (and what it accepts).
    for (bad, named) in [
        (
            "status=busy",
            "`status` must be one of `running`, `waiting_approval`, `idle`",
        ),
        ("status=", "`status`"),
        ("updatedSince=yesterday", "`updatedSince`"),
        ("updatedSince=2026-13-01T00:00:00Z", "`updatedSince`"),
    ] {
        let r = host.send(Request::get(&format!("/bot/v1/sessions?{bad}")));
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
        assert_eq!(r.error_code(), "bad_request", "{bad}: {}", r.body);
        assert!(r.body.contains(named), "{bad}: {}", r.body);
    }
}
