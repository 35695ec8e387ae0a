//! Several `agentkit serve` processes on one PostgreSQL database (a
//! throwaway database per test): a session created on one host, followed
//! on another and continued on a third makes one contiguous log; a host
//! killed mid-turn has its session taken over by another within 5 s; a
//! follow-up, a stop, an approval decision or a tool call in the session
//! sent to a host that does not run the session is routed to the one that
//! does (the mailbox); an A2A webhook registered on a host killed -9 is
//! delivered by another, once.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agentkit_test_support::http::Request;
use agentkit_test_support::pg::{PgDatabase, throwaway_database};
use agentkit_test_support::process::{ServerProcess, free_port};
use serde_json::{Value, json};

/// A project whose turns play `turns` (scripted steps).
fn project(root: &Path, turns: Value) {
    let agent = root.join("bot/agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("agent.toml"),
        "model = \"scripted:script.json\"\n",
    )
    .unwrap();
    std::fs::write(
        agent.join("script.json"),
        serde_json::to_string(&json!({ "turns": turns })).unwrap(),
    )
    .unwrap();
    std::fs::write(agent.join("instructions.md"), "Test agent.\n").unwrap();
    std::fs::create_dir_all(agent.join("tools")).unwrap();
    std::fs::write(
        agent.join("tools/stamp.toml"),
        "description = \"Answer ok\"\ncommand = [\"sh\", \"-c\", \"echo ok\"]\nread_only = true\n\n[input_schema]\ntype = \"object\"\n",
    )
    .unwrap();
}

/// Host `name`: `agentkit serve` on the shared database, with its own
/// state folder (its own disk).
fn host(root: &Path, name: &str, db: &PgDatabase) -> ServerProcess {
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_agentkit"))
        .args(["serve", "--dir", "bot", "--port", &port.to_string()])
        .args(["--state-root", &format!("state-{name}")])
        .current_dir(root)
        .env("AGENTKIT_DATABASE_URL", &db.url)
        .env("NO_COLOR", "1")
        .env_remove("AGENTKIT_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    ServerProcess::healthy(child, port, Duration::from_secs(30))
}

fn create(addr: SocketAddr) -> (String, String) {
    let r = Request::post("/bot/v1/session")
        .json(&json!({"message": "hi"}))
        .send(addr)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    (
        v["sessionId"].as_str().unwrap().to_owned(),
        v["continuationToken"].as_str().unwrap().to_owned(),
    )
}

fn follow_up(addr: SocketAddr, id: &str, token: &str) -> agentkit_test_support::http::Response {
    Request::post(&format!("/bot/v1/session/{id}"))
        .json(&json!({"message": "and then?", "continuationToken": token}))
        .send(addr)
        .unwrap()
}

fn indices(events: &[Value]) -> Vec<u64> {
    events
        .iter()
        .map(|e| e["index"].as_u64().unwrap())
        .collect()
}

#[test]
fn a_session_created_on_a_followed_on_b_and_continued_on_c_is_one_log() {
    let Some(db) = throwaway_database() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    project(
        tmp.path(),
        json!([
            {"steps": [{"text": "Hello from the first turn, word by word."}]},
            {"steps": [{"text": "And this is the second turn.", "delayMs": 300}]}
        ]),
    );
    let a = host(tmp.path(), "a", &db);
    let b = host(tmp.path(), "b", &db);
    let c = host(tmp.path(), "c", &db);

    let (id, token) = create(a.addr);
    let mut stream = Request::get(&format!("/bot/v1/session/{id}/stream"))
        .stream(b.addr)
        .unwrap();
    assert_eq!(stream.status, 200);
    let first = stream.until("session.waiting").unwrap();
    let text = first
        .iter()
        .rev()
        .find(|e| e["type"] == "message.appended")
        .map(|e| e["data"]["text"].clone());
    assert_eq!(
        text,
        Some(json!("Hello from the first turn, word by word."))
    );

    // C continues the session A created (the token A answered).
    let r = follow_up(c.addr, &id, &token);
    assert_eq!(r.status, 200, "{}", r.body);
    let token = r.json()["continuationToken"].as_str().unwrap().to_owned();
    let second = stream.until("session.waiting").unwrap();
    assert!(
        second.iter().any(|e| e["type"] == "turn.completed"),
        "{second:?}"
    );
    // The follower on B saw one gap-free sequence, live across hosts.
    let mut seen = first.clone();
    seen.extend(second);
    assert_eq!(indices(&seen), (0..seen.len() as u64).collect::<Vec<_>>());

    // Every host reads the same log; A follows up with C's rotated token.
    let on_a = Request::get(&format!("/bot/v1/session/{id}/events"))
        .send(a.addr)
        .unwrap();
    assert_eq!(on_a.status, 200, "{}", on_a.body);
    let stored: Vec<Value> = on_a
        .body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(stored, seen);
    let r = follow_up(a.addr, &id, &token);
    assert_eq!(r.status, 200, "{}", r.body);
    let token = r.json()["continuationToken"].as_str().unwrap().to_owned();
    stream.until("session.waiting").unwrap();
    // A deterministic call inside the session on B lets the session go
    // when it ends: C takes the next message. (A lets the session go just
    // after recording `session.waiting`: a call that arrives in between is
    // refused with "retry shortly", and retried.)
    let deadline = Instant::now() + Duration::from_secs(10);
    let call = loop {
        let call = Request::post("/bot/v1/tools/stamp")
            .json(&json!({"input": {}, "sessionId": id}))
            .send(b.addr)
            .unwrap();
        if call.status != 409 || Instant::now() > deadline {
            break call;
        }
        assert_eq!(call.error_code(), "session_busy", "{}", call.body);
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(call.status, 200, "{}", call.body);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = follow_up(c.addr, &id, &token);
        if r.status == 200 {
            break;
        }
        assert_eq!(r.error_code(), "session_busy", "{}", r.body);
        assert!(
            Instant::now() < deadline,
            "the call's host kept the session"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    stream.until("session.waiting").unwrap();
    let counted = db.query(&format!(
        "SELECT count(*), min(idx), max(idx) FROM agentkit_events WHERE session_id = '{id}'"
    ));
    let n: Vec<i64> = counted.split('|').map(|s| s.parse().unwrap()).collect();
    assert_eq!((n[1], n[2]), (0, n[0] - 1), "contiguous: {counted}");
    // Listed on every host.
    for host in [&a, &b, &c] {
        let list = Request::get("/bot/v1/sessions").send(host.addr).unwrap();
        assert!(list.body.contains(&id), "{}", list.body);
    }
}

#[test]
fn a_host_killed_mid_turn_has_its_session_taken_over_within_5_s() {
    let Some(db) = throwaway_database() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    project(
        tmp.path(),
        json!([
            {"steps": [{"text": "never finished", "delayMs": 60000}]},
            {"steps": [{"text": "Picked up elsewhere."}]}
        ]),
    );
    let mut a = host(tmp.path(), "a", &db);
    let b = host(tmp.path(), "b", &db);
    let c = host(tmp.path(), "c", &db);

    let (id, token) = create(a.addr);
    let mut stream = Request::get(&format!("/bot/v1/session/{id}/stream"))
        .stream(b.addr)
        .unwrap();
    stream.until("turn.started").unwrap();

    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let killed = Instant::now();
    let failed = stream.until("turn.failed").unwrap();
    let took = killed.elapsed();
    let failed = failed.last().unwrap();
    assert_eq!(failed["data"]["reason"], "restart", "{failed}");
    assert!(took < Duration::from_secs(5), "takeover took {took:?}");
    stream.until("session.waiting").unwrap();

    // The follow-up is accepted on a live host and runs there.
    let r = follow_up(c.addr, &id, &token);
    assert_eq!(r.status, 200, "{}", r.body);
    let next = stream.until("session.waiting").unwrap();
    assert!(
        next.iter().any(|e| e["type"] == "turn.completed"),
        "{next:?}"
    );
    let log = Request::get(&format!("/bot/v1/session/{id}/events"))
        .send(b.addr)
        .unwrap();
    let stored: Vec<Value> = log
        .body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        indices(&stored),
        (0..stored.len() as u64).collect::<Vec<_>>()
    );
    // Exactly one turn was recorded as interrupted.
    let interrupted = stored
        .iter()
        .filter(|e| e["type"] == "turn.failed" && e["data"]["reason"] == "restart")
        .count();
    assert_eq!(interrupted, 1);
}

#[test]
fn an_ab_experiment_keeps_each_sessions_variant_and_reports_every_hosts_turns() {
    let Some(db) = throwaway_database() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    project(
        tmp.path(),
        json!([{"steps": [{"text": "one"}]}, {"steps": [{"text": "two"}]}]),
    );
    std::fs::create_dir_all(tmp.path().join("bot/agent/ab")).unwrap();
    std::fs::write(tmp.path().join("bot/agent/ab/lean.md"), "Be lean.\n").unwrap();
    std::fs::write(
        tmp.path().join("bot/agent/ab/shape.toml"),
        "[[variants]]\nid = \"control\"\n[[variants]]\nid = \"lean\"\ninstructions = \"ab/lean.md\"\n",
    )
    .unwrap();
    let hosts = [
        host(tmp.path(), "a", &db),
        host(tmp.path(), "b", &db),
        host(tmp.path(), "c", &db),
    ];
    const SESSIONS: usize = 6;
    let mut variants = Vec::new();
    for i in 0..SESSIONS {
        let (first, second) = (&hosts[i % 3], &hosts[(i + 1) % 3]);
        let (id, token) = create(first.addr);
        let mut stream = Request::get(&format!("/bot/v1/session/{id}/stream"))
            .stream(second.addr)
            .unwrap();
        stream.until("session.waiting").unwrap();
        // The second turn runs on another host, as the same variant: the
        // assignment is in the shared log, read by whichever host runs.
        let r = follow_up(second.addr, &id, &token);
        assert_eq!(r.status, 200, "{}", r.body);
        stream.until("session.waiting").unwrap();
        let assigned = |h: &ServerProcess| -> Vec<Value> {
            let events = Request::get(&format!("/bot/v1/session/{id}/events"))
                .send(h.addr)
                .unwrap();
            events
                .body
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .filter(|e| e["type"] == "ab.assigned")
                .map(|e| e["data"]["variant"].clone())
                .collect()
        };
        let on_first = assigned(first);
        assert_eq!(on_first.len(), 1, "one assignment: {on_first:?}");
        assert_eq!(on_first, assigned(second));
        variants.push(on_first[0].as_str().unwrap().to_owned());
        // Feedback posted on a third host is credited to the variant.
        let third = &hosts[(i + 2) % 3];
        let f = Request::post(&format!("/bot/v1/session/{id}/feedback"))
            .json(&json!({"score": 1.0}))
            .send(third.addr)
            .unwrap();
        assert_eq!(f.status, 200, "{}", f.body);
        assert_eq!(f.json()["credited"][0]["variant"], variants[i].as_str());
    }
    // Every host reports every host's sessions, turns and feedback.
    let reports: Vec<Value> = hosts
        .iter()
        .map(|h| {
            let r = Request::get("/bot/v1/ab").send(h.addr).unwrap();
            assert_eq!(r.status, 200, "{}", r.body);
            r.json()
        })
        .collect();
    for report in &reports[1..] {
        assert_eq!(
            report["experiments"][0]["variants"],
            reports[0]["experiments"][0]["variants"]
        );
    }
    let shape = &reports[0]["experiments"][0];
    assert_eq!(shape["id"], "shape", "{shape}");
    for v in shape["variants"].as_array().unwrap() {
        let id = v["id"].as_str().unwrap();
        let sessions = variants.iter().filter(|x| *x == id).count() as u64;
        assert_eq!(v["sessions"], sessions, "{v}");
        assert_eq!(v["turns"], 2 * sessions, "{v}");
        if sessions > 0 {
            assert_eq!(v["feedback"]["count"], sessions, "{v}");
        }
    }
    let turns: u64 = shape["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["turns"].as_u64().unwrap())
        .sum();
    assert_eq!(turns, 2 * SESSIONS as u64);
    assert_eq!(
        db.query("SELECT count(DISTINCT session_id) FROM agentkit_ab_turns"),
        SESSIONS.to_string()
    );
}

#[test]
fn agentkit_db_migrate_and_status() {
    let Some(db) = throwaway_database() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        super::agentkit_with(tmp.path(), args, |c| {
            c.env("AGENTKIT_DATABASE_URL", &db.url);
        })
    };
    let before = run(&["db", "status", "--json"]);
    assert_eq!(before.code, 1, "{}", before.stderr);
    let doc: Value = serde_json::from_str(&before.stdout).unwrap();
    assert_eq!(doc["current"], 0);
    let migrated = run(&["db", "migrate"]);
    assert_eq!(migrated.code, 0, "{}", migrated.stderr);
    assert!(
        migrated
            .stdout
            .contains("applied 1, 2, 3, 4, 5, 6, 7, 8, 9"),
        "{}",
        migrated.stdout
    );
    assert!(
        !migrated.stdout.contains("postgres://"),
        "{}",
        migrated.stdout
    );
    let again = run(&["db", "migrate", "--json"]);
    let doc: Value = serde_json::from_str(&again.stdout).unwrap();
    assert_eq!(doc["applied"], json!([]));
    let after = run(&["db", "status"]);
    assert_eq!(after.code, 0, "{}", after.stderr);
    assert!(after.stdout.contains("(0 pending)"), "{}", after.stdout);
    assert!(
        after.stdout.contains("sessions_and_events"),
        "{}",
        after.stdout
    );
    let unreachable = super::agentkit(
        tmp.path(),
        &[
            "db",
            "status",
            "--database-url",
            "postgres://u:pw@127.0.0.1:1/x",
        ],
    );
    assert_ne!(unreachable.code, 0);
    assert!(
        unreachable.stderr.contains("127.0.0.1:1/x"),
        "{}",
        unreachable.stderr
    );
    assert!(
        !unreachable.stderr.contains("pw@"),
        "{}",
        unreachable.stderr
    );
}

#[test]
fn migrate_processes_racing_apply_each_version_once() {
    let Some(db) = throwaway_database() else {
        return;
    };
    let children: Vec<_> = (0..4)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_agentkit"))
                .args(["db", "migrate", "--json"])
                .env("AGENTKIT_DATABASE_URL", &db.url)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut applied: Vec<i64> = Vec::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        applied.extend(
            doc["applied"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap()),
        );
    }
    applied.sort_unstable();
    let latest: i64 = db
        .query("SELECT max(version) FROM agentkit_migrations")
        .parse()
        .unwrap();
    assert_eq!(
        applied,
        (1..=latest).collect::<Vec<_>>(),
        "each version applied by one process"
    );
    assert_eq!(
        db.query("SELECT count(*) = count(DISTINCT version) FROM agentkit_migrations"),
        "t"
    );
}

#[test]
fn a_call_parked_on_a_killed_host_is_approved_on_another() {
    let Some(db) = throwaway_database() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    project(
        tmp.path(),
        json!([{"steps": [
            {"text": "Stamping.", "toolCalls": [{"name": "guarded", "input": {}}]},
            {"text": "Stamped."}
        ]}]),
    );
    std::fs::write(
        tmp.path().join("bot/agent/tools/guarded.toml"),
        "description = \"Needs a human\"\ncommand = [\"sh\", \"-c\", \"echo stamped\"]\nneeds_approval = true\n\n[input_schema]\ntype = \"object\"\n",
    )
    .unwrap();
    let mut a = host(tmp.path(), "a", &db);
    let b = host(tmp.path(), "b", &db);
    let c = host(tmp.path(), "c", &db);
    let (id, _) = create(a.addr);
    let mut stream = Request::get(&format!("/bot/v1/session/{id}/stream"))
        .stream(b.addr)
        .unwrap();
    let parked = stream.until("action.approval_requested").unwrap();
    let call = parked.last().unwrap()["data"]["callId"]
        .as_str()
        .unwrap()
        .to_owned();
    let approve = |addr| {
        Request::post(&format!("/bot/v1/session/{id}/approvals/{call}"))
            .json(&json!({"decision": "approve"}))
            .send(addr)
            .unwrap()
    };
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let failed = stream.until("turn.failed").unwrap();
    assert_eq!(failed.last().unwrap()["data"]["reason"], "restart");
    stream.until("session.waiting").unwrap();
    // The call stays parked, listed on every host, and is approved on a
    // host other than the one that took over: the tool runs there and a
    // new turn resumes the conversation.
    let listed = Request::get(&format!("/bot/v1/session/{id}/approvals"))
        .send(b.addr)
        .unwrap();
    assert!(listed.body.contains(&call), "{}", listed.body);
    // The decision goes to the host that did not take the session over.
    let taker = db.query(&format!(
        "SELECT split_part(owner, ':', 2) FROM agentkit_leases WHERE session_id = '{id}'"
    ));
    let other = if taker == b.child.id().to_string() {
        c.addr
    } else {
        b.addr
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let r = loop {
        let r = approve(other);
        if r.status != 409 || Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["resumed"], true, "{}", r.body);
    let resumed = stream.until("turn.started").unwrap();
    assert!(
        resumed
            .iter()
            .any(|e| e["type"] == "action.result" && e["data"]["callId"] == call.as_str()),
        "{resumed:?}"
    );
    let started = resumed.last().unwrap();
    assert!(started["data"]["resumes"].is_string(), "{started}");
}

/// The pid part of the host that last held session `id`'s lease.
fn lease_owner_pid(db: &PgDatabase, id: &str) -> String {
    db.query(&format!(
        "SELECT split_part(owner, ':', 2) FROM agentkit_leases WHERE session_id = '{id}'"
    ))
}

fn count(db: &PgDatabase, sql: &str) -> i64 {
    db.query(sql).parse().unwrap()
}

#[test]
fn a_follow_up_sent_to_b_preempts_the_turn_running_on_a_and_c_follows_the_reply() {
    let Some(db) = throwaway_database() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    project(
        tmp.path(),
        json!([
            {"steps": [{"text": "a long first turn", "delayMs": 60000}]},
            {"steps": [{"text": "The routed reply."}]}
        ]),
    );
    let a = host(tmp.path(), "a", &db);
    let b = host(tmp.path(), "b", &db);
    let c = host(tmp.path(), "c", &db);
    let (id, token) = create(a.addr);
    let mut stream = Request::get(&format!("/bot/v1/session/{id}/stream"))
        .stream(c.addr)
        .unwrap();
    stream.until("turn.started").unwrap();
    // A stale token is refused by the owner, as it would be locally, and
    // nothing rotates.
    let stale = follow_up(b.addr, &id, "http:stale");
    assert_eq!(stale.status, 409, "{}", stale.body);
    assert_eq!(stale.error_code(), "stale_continuation", "{}", stale.body);
    // `reject` holds across hosts: A refuses it, and the token does not
    // rotate (the next message uses it).
    let rejected = Request::post(&format!("/bot/v1/session/{id}"))
        .json(&json!({"message": "not now", "continuationToken": token, "admission": "reject"}))
        .send(b.addr)
        .unwrap();
    assert_eq!(rejected.status, 409, "{}", rejected.body);
    assert_eq!(rejected.error_code(), "session_busy", "{}", rejected.body);
    // B does not run the turn: the message is routed to A, which preempts
    // its turn and runs the message.
    let r = Request::post(&format!("/bot/v1/session/{id}"))
        .json(&json!({"message": "and then?", "continuationToken": token, "admission": "preempt"}))
        .send(b.addr)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let rotated = r.json()["continuationToken"].as_str().unwrap().to_owned();
    assert_ne!(rotated, token);
    let seen = stream.until("session.waiting").unwrap();
    let failed = seen.iter().find(|e| e["type"] == "turn.failed").unwrap();
    assert_eq!(failed["data"]["reason"], "preempted", "{failed}");
    let reply = seen
        .iter()
        .rev()
        .find(|e| e["type"] == "message.appended")
        .unwrap();
    assert_eq!(reply["data"]["text"], "The routed reply.", "{reply}");
    assert_eq!(lease_owner_pid(&db, &id), a.child.id().to_string());
    assert_eq!(
        count(
            &db,
            &format!(
                "SELECT count(*) FROM agentkit_events WHERE session_id = '{id}' AND type = 'message.received'"
            )
        ),
        2
    );
    // The old token was rotated away on A; the new one works on any host.
    let old = follow_up(c.addr, &id, &token);
    assert_eq!(old.status, 409, "{}", old.body);
    assert_eq!(old.error_code(), "stale_continuation", "{}", old.body);
    // Settled requests leave no row behind.
    assert_eq!(count(&db, "SELECT count(*) FROM agentkit_mailbox"), 0);
    let next = follow_up(c.addr, &id, &rotated);
    assert_eq!(next.status, 200, "{}", next.body);
}

#[test]
fn stop_sent_to_b_stops_the_turn_running_on_a() {
    let Some(db) = throwaway_database() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    project(
        tmp.path(),
        json!([{"steps": [{"text": "a long turn", "delayMs": 60000}]}]),
    );
    let a = host(tmp.path(), "a", &db);
    let b = host(tmp.path(), "b", &db);
    let (id, _) = create(a.addr);
    let mut stream = Request::get(&format!("/bot/v1/session/{id}/stream"))
        .stream(b.addr)
        .unwrap();
    stream.until("turn.started").unwrap();
    let stopped_at = Instant::now();
    let stop = Request::post(&format!("/bot/v1/session/{id}/stop"))
        .json(&json!({}))
        .send(b.addr)
        .unwrap();
    assert_eq!(stop.status, 200, "{}", stop.body);
    assert_eq!(stop.json()["interrupted"], true, "{}", stop.body);
    let failed = stream.until("turn.failed").unwrap();
    assert_eq!(failed.last().unwrap()["data"]["reason"], "stopped");
    assert!(stopped_at.elapsed() < Duration::from_secs(10));
    stream.until("session.waiting").unwrap();
    // Nothing runs now: a second stop says so, from any host.
    let again = Request::post(&format!("/bot/v1/session/{id}/stop"))
        .json(&json!({}))
        .send(b.addr)
        .unwrap();
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.json()["interrupted"], false, "{}", again.body);
}

#[test]
fn an_approval_decided_on_b_resolves_the_call_parked_in_a_turn_on_a() {
    let Some(db) = throwaway_database() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    project(
        tmp.path(),
        json!([{"steps": [
            {"text": "Stamping.", "toolCalls": [{"name": "guarded", "input": {}}]},
            {"text": "Stamped."}
        ]}]),
    );
    std::fs::write(
        tmp.path().join("bot/agent/tools/guarded.toml"),
        "description = \"Needs a human\"\ncommand = [\"sh\", \"-c\", \"echo stamped\"]\nneeds_approval = true\n\n[input_schema]\ntype = \"object\"\n",
    )
    .unwrap();
    let a = host(tmp.path(), "a", &db);
    let b = host(tmp.path(), "b", &db);
    let c = host(tmp.path(), "c", &db);
    let (id, _) = create(a.addr);
    let mut stream = Request::get(&format!("/bot/v1/session/{id}/stream"))
        .stream(c.addr)
        .unwrap();
    let parked = stream.until("action.approval_requested").unwrap();
    let call = parked.last().unwrap()["data"]["callId"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = Request::post(&format!("/bot/v1/session/{id}/approvals/{call}"))
        .json(&json!({"decision": "approve"}))
        .send(b.addr)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    // The call was waiting in A's running turn: it goes on there.
    assert_eq!(r.json()["resumed"], false, "{}", r.body);
    let rest = stream.until("session.waiting").unwrap();
    assert!(
        rest.iter()
            .any(|e| e["type"] == "action.result" && e["data"]["callId"] == call.as_str()),
        "{rest:?}"
    );
    assert!(
        rest.iter().any(|e| e["type"] == "turn.completed"),
        "{rest:?}"
    );
    let turns = count(
        &db,
        &format!(
            "SELECT count(*) FROM agentkit_events WHERE session_id = '{id}' AND type = 'turn.started'"
        ),
    );
    assert_eq!(turns, 1, "one turn, not a resumed one");
    assert_eq!(lease_owner_pid(&db, &id), a.child.id().to_string());
    // Deciding again is refused (already decided), from any host.
    let twice = Request::post(&format!("/bot/v1/session/{id}/approvals/{call}"))
        .json(&json!({"decision": "approve"}))
        .send(c.addr)
        .unwrap();
    assert_eq!(twice.status, 409, "{}", twice.body);
}

#[test]
fn a_routed_follow_up_waiting_when_its_owner_is_killed_is_applied_once_by_the_taker() {
    let Some(db) = throwaway_database() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    project(
        tmp.path(),
        json!([
            {"steps": [{"text": "never finished", "delayMs": 60000}]},
            {"steps": [{"text": "Applied after the takeover."}]}
        ]),
    );
    let mut a = host(tmp.path(), "a", &db);
    let b = host(tmp.path(), "b", &db);
    let c = host(tmp.path(), "c", &db);
    let (id, token) = create(a.addr);
    let mut stream = Request::get(&format!("/bot/v1/session/{id}/stream"))
        .stream(c.addr)
        .unwrap();
    stream.until("turn.started").unwrap();
    // A freezes (it holds the lease and will not read its mailbox), then
    // dies while B's request waits for it.
    let frozen = Command::new("kill")
        .args(["-STOP", &a.child.id().to_string()])
        .status()
        .unwrap();
    assert!(frozen.success());
    let addr = b.addr;
    let (sid, stoken) = (id.clone(), token.clone());
    let sent = std::thread::spawn(move || {
        let started = Instant::now();
        let r = follow_up(addr, &sid, &stoken);
        (r, started.elapsed())
    });
    let waiting = Instant::now() + Duration::from_secs(5);
    while count(
        &db,
        "SELECT count(*) FROM agentkit_mailbox WHERE state = 'pending'",
    ) == 0
    {
        assert!(Instant::now() < waiting, "the request was not posted");
        std::thread::sleep(Duration::from_millis(20));
    }
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let (r, took) = sent.join().unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(took < Duration::from_secs(10), "{took:?}");
    let seen = stream.until("session.waiting").unwrap();
    let failed = seen.iter().find(|e| e["type"] == "turn.failed").unwrap();
    assert_eq!(failed["data"]["reason"], "restart", "{failed}");
    let next = stream.until("session.waiting").unwrap();
    assert!(
        next.iter().any(|e| e["type"] == "turn.completed"),
        "{next:?}"
    );
    std::thread::sleep(Duration::from_millis(500));
    let received = count(
        &db,
        &format!(
            "SELECT count(*) FROM agentkit_events WHERE session_id = '{id}' AND type = 'message.received'"
        ),
    );
    assert_eq!(received, 2, "the routed message was applied once");
    let interrupted = count(
        &db,
        &format!(
            "SELECT count(*) FROM agentkit_events WHERE session_id = '{id}' AND type = 'turn.failed'"
        ),
    );
    assert_eq!(interrupted, 1);
    let n: Vec<i64> = db
        .query(&format!(
            "SELECT count(*), max(idx) FROM agentkit_events WHERE session_id = '{id}'"
        ))
        .split('|')
        .map(|s| s.parse().unwrap())
        .collect();
    assert_eq!(n[1], n[0] - 1, "contiguous");
    drop(b);
}

fn call_stamp(addr: SocketAddr, id: &str) -> agentkit_test_support::http::Response {
    Request::post("/bot/v1/tools/stamp")
        .json(&json!({"input": {}, "sessionId": id}))
        .send(addr)
        .unwrap()
}

#[test]
fn a_tool_call_in_a_session_running_on_a_is_routed_there_and_applied_by_b_once_a_dies() {
    let Some(db) = throwaway_database() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    project(
        tmp.path(),
        json!([{"steps": [{"text": "never finished", "delayMs": 60000}]}]),
    );
    let mut a = host(tmp.path(), "a", &db);
    let b = host(tmp.path(), "b", &db);
    let (id, _) = create(a.addr);
    let mut stream = Request::get(&format!("/bot/v1/session/{id}/stream"))
        .stream(b.addr)
        .unwrap();
    stream.until("turn.started").unwrap();
    // A runs a turn: the call sent to B is routed to A, which refuses it
    // as it would refuse it locally (its own message, not B's "held by
    // another host").
    let busy = call_stamp(b.addr, &id);
    assert_eq!(busy.status, 409, "{}", busy.body);
    assert_eq!(busy.error_code(), "session_busy", "{}", busy.body);
    assert!(busy.body.contains("is running a turn"), "{}", busy.body);
    assert_eq!(count(&db, "SELECT count(*) FROM agentkit_mailbox"), 0);
    // A freezes (it holds the lease and will not read its mailbox), then
    // dies while B's call waits in the mailbox: once the lease expires,
    // B applies the call itself, after recording the interrupted turn.
    let frozen = Command::new("kill")
        .args(["-STOP", &a.child.id().to_string()])
        .status()
        .unwrap();
    assert!(frozen.success());
    let addr = b.addr;
    let sid = id.clone();
    let sent = std::thread::spawn(move || {
        let started = Instant::now();
        (call_stamp(addr, &sid), started.elapsed())
    });
    let waiting = Instant::now() + Duration::from_secs(5);
    while count(
        &db,
        "SELECT count(*) FROM agentkit_mailbox WHERE state = 'pending' AND kind = 'tool'",
    ) == 0
    {
        assert!(Instant::now() < waiting, "the call was not routed");
        std::thread::sleep(Duration::from_millis(20));
    }
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let (r, took) = sent.join().unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(took < Duration::from_secs(10), "{took:?}");
    let v = r.json();
    assert_eq!(v["isError"], false, "{v}");
    assert!(v["result"].to_string().contains("ok"), "{v}");
    let seen = stream.until("action.result").unwrap();
    let kinds: Vec<&str> = seen.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let failed = seen
        .iter()
        .position(|e| e["type"] == "turn.failed")
        .unwrap();
    assert_eq!(seen[failed]["data"]["reason"], "restart", "{kinds:?}");
    let requested = seen
        .iter()
        .position(|e| e["type"] == "actions.requested")
        .unwrap();
    assert!(failed < requested, "{kinds:?}");
    let calls = count(
        &db,
        &format!(
            "SELECT count(*) FROM agentkit_events WHERE session_id = '{id}' AND type = 'action.result'"
        ),
    );
    assert_eq!(calls, 1, "the routed call ran once");
    drop(b);
}

#[test]
fn a_cron_tick_fires_once_across_hosts_started_at_arbitrary_sub_second_offsets() {
    let Some(db) = throwaway_database() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    project(tmp.path(), json!([{"steps": [{"text": "Checked."}]}]));
    let schedules = tmp.path().join("bot/agent/schedules");
    std::fs::create_dir_all(&schedules).unwrap();
    std::fs::write(
        schedules.join("heartbeat.md"),
        "---\ncron: \"* * * * *\"\n---\n\nCheck the incidents.\n",
    )
    .unwrap();
    // Each host arms its cadence when it starts, on the wall clock: start
    // them at fractions of a second apart that nothing lines up.
    let mut hosts = Vec::new();
    for (name, pause_ms) in [("a", 0), ("b", 137), ("c", 411)] {
        std::thread::sleep(Duration::from_millis(pause_ms));
        hosts.push(host(tmp.path(), name, &db));
    }
    // The first whole minute after all three are up: every host is armed
    // for it.
    let now_ms = chrono::Utc::now().timestamp_millis();
    let tick_ms = (now_ms / 60_000 + 1) * 60_000;
    let deadline = Instant::now() + Duration::from_millis((tick_ms - now_ms) as u64 + 30_000);
    let fired = format!("SELECT count(*) FROM agentkit_schedule_ticks WHERE tick_ms = {tick_ms}");
    let completed = "SELECT count(*) FROM agentkit_events WHERE type = 'session.completed'";
    while count(&db, &fired) < 1
        || count(&db, completed) < count(&db, "SELECT count(*) FROM agentkit_schedule_ticks")
    {
        assert!(
            Instant::now() < deadline,
            "the tick at {tick_ms} ms did not fire and complete: {}",
            db.query("SELECT tick_ms FROM agentkit_schedule_ticks")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Let every host's timer go off and claim (or not) before counting.
    std::thread::sleep(Duration::from_secs(3));
    let ticks = db.query("SELECT string_agg(tick_ms::text, ',') FROM agentkit_schedule_ticks");
    assert_eq!(
        count(&db, &fired),
        1,
        "the tick fired more than once: {ticks}"
    );
    assert_eq!(
        count(
            &db,
            "SELECT count(*) - count(DISTINCT tick_ms) FROM agentkit_schedule_ticks"
        ),
        0,
        "{ticks}"
    );
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM agentkit_schedule_ticks WHERE tick_ms % 60000 <> 0"
        ),
        0,
        "a tick's key carries a host's milliseconds: {ticks}"
    );
    // One task session per tick, not one per host.
    assert_eq!(
        count(&db, "SELECT count(*) FROM agentkit_sessions"),
        count(&db, "SELECT count(*) FROM agentkit_schedule_ticks"),
        "{ticks}"
    );
    drop(hosts);
}

/// The ids `GET /bot/v1/sessions?{query}` on `addr` lists, once they are
/// `want` (the index rows are written behind the events; at most 10 s).
fn await_listed(addr: SocketAddr, query: &str, want: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = Request::get(&format!("/bot/v1/sessions?{query}"))
            .send(addr)
            .unwrap();
        assert_eq!(r.status, 200, "{query}: {}", r.body);
        let got: Vec<String> = r.json()["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["sessionId"].as_str().unwrap().to_owned())
            .collect();
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{query} on {addr}: listed {got:?}, not {want:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn every_host_lists_sessions_by_status_and_last_activity_whichever_runs_them() {
    let Some(db) = throwaway_database() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    project(tmp.path(), json!([{"steps": [{"text": "ok"}]}]));
    std::fs::write(
        tmp.path().join("bot/agent/tools/guarded.toml"),
        "description = \"Needs a human\"\ncommand = [\"sh\", \"-c\", \"echo stamped\"]\nneeds_approval = true\n\n[input_schema]\ntype = \"object\"\n",
    )
    .unwrap();
    // Every turn plays the script as it is when the turn starts.
    let set_turn = |turn: Value| {
        std::fs::write(
            tmp.path().join("bot/agent/script.json"),
            serde_json::to_string(&json!({ "turns": [turn] })).unwrap(),
        )
        .unwrap();
    };
    let a = host(tmp.path(), "a", &db);
    let b = host(tmp.path(), "b", &db);
    let until = |id: &str, t: &str| {
        Request::get(&format!("/bot/v1/session/{id}/stream"))
            .stream(b.addr)
            .unwrap()
            .until(t)
            .unwrap();
    };

    // Idle, made on A.
    let (idle, _) = create(a.addr);
    until(&idle, "session.waiting");
    std::thread::sleep(Duration::from_millis(20));
    let after_idle = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    std::thread::sleep(Duration::from_millis(20));
    // Waiting for approval, in a turn on B.
    set_turn(json!({"steps": [
        {"toolCalls": [{"name": "guarded", "input": {}}]},
        {"text": "Stamped."}
    ]}));
    let (waiting, _) = create(b.addr);
    until(&waiting, "action.approval_requested");
    // Running on A.
    set_turn(json!({"steps": [{"text": "a long turn", "delayMs": 60000}]}));
    let (running, _) = create(a.addr);
    until(&running, "turn.started");

    // Both hosts answer alike: the index and the leases are shared.
    for addr in [a.addr, b.addr] {
        await_listed(addr, "status=running", &[running.as_str()]);
        await_listed(addr, "status=waiting_approval", &[waiting.as_str()]);
        await_listed(addr, "status=idle", &[idle.as_str()]);
        await_listed(
            addr,
            &format!("updatedSince={}", after_idle.replace(':', "%3A")),
            &[running.as_str(), waiting.as_str()],
        );
        await_listed(
            addr,
            &format!(
                "status=idle&updatedSince={}",
                after_idle.replace(':', "%3A")
            ),
            &[],
        );
    }
    let r = Request::get("/bot/v1/sessions?status=asleep")
        .send(b.addr)
        .unwrap();
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("`status`"), "{}", r.body);
}

/// A Responses request to `addr` with the client's `pick_city` function
/// tool.
fn respond_with_pick(addr: SocketAddr, input: Value, previous: Option<&str>) -> Value {
    let mut body = json!({"model": "bot", "input": input, "tools": [{
        "type": "function", "name": "pick_city", "description": "Ask the user to pick a city.",
        "parameters": {"type": "object", "properties": {"question": {"type": "string"}}}}]});
    if let Some(previous) = previous {
        body["previous_response_id"] = json!(previous);
    }
    let r = Request::post("/bot/v1/responses")
        .json(&body)
        .send(addr)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

#[test]
fn a_client_tools_result_sent_to_b_reaches_the_turn_waiting_on_a_or_resumes_it_once_a_dies() {
    let Some(db) = throwaway_database() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    project(
        tmp.path(),
        json!([
            {"steps": [
                {"text": "", "toolCalls": [{"id": "call-pick", "name": "pick_city", "input": {"question": "Which city?"}}]},
                {"text": "Off to the city you picked."}
            ]},
            {"steps": [{"text": "Resumed on another host."}]}
        ]),
    );
    let mut a = host(tmp.path(), "a", &db);
    let b = host(tmp.path(), "b", &db);

    // Live: the call waits in A's turn; the output sent to B is routed
    // there and the turn goes on on A (no new turn).
    let waiting = respond_with_pick(a.addr, json!("plan a trip"), None);
    let id = waiting["session_id"].as_str().unwrap().to_owned();
    assert_eq!(waiting["output"][0]["call_id"], "call-pick", "{waiting}");
    let listed = Request::get(&format!("/bot/v1/session/{id}/client-calls"))
        .send(b.addr)
        .unwrap();
    assert!(listed.body.contains("call-pick"), "{}", listed.body);
    let done = respond_with_pick(
        b.addr,
        json!([{"type": "function_call_output", "call_id": "call-pick", "output": "Paris"}]),
        Some(waiting["id"].as_str().unwrap()),
    );
    assert_eq!(done["status"], "completed", "{done}");
    assert!(
        done.to_string().contains("Off to the city you picked."),
        "{done}"
    );
    let turns = count(
        &db,
        &format!(
            "SELECT count(*) FROM agentkit_events WHERE session_id = '{id}' AND type = 'turn.started'"
        ),
    );
    assert_eq!(turns, 1, "one turn, not a resumed one");
    assert_eq!(lease_owner_pid(&db, &id), a.child.id().to_string());

    // A dies while a call waits: B takes the session over and the
    // native API's result, sent to B, resumes the turn there.
    let waiting = respond_with_pick(a.addr, json!("plan another"), None);
    let id = waiting["session_id"].as_str().unwrap().to_owned();
    let mut stream = Request::get(&format!("/bot/v1/session/{id}/stream"))
        .stream(b.addr)
        .unwrap();
    stream.until("actions.client_requested").unwrap();
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let failed = stream.until("turn.failed").unwrap();
    assert_eq!(failed.last().unwrap()["data"]["reason"], "restart");
    let deadline = Instant::now() + Duration::from_secs(10);
    let r = loop {
        let r = Request::post(&format!("/bot/v1/session/{id}/client-calls"))
            .json(&json!({"results": [{"callId": "call-pick", "output": "Oslo"}]}))
            .send(b.addr)
            .unwrap();
        if r.status != 409 || Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["resumed"], true, "{}", r.body);
    let rest = stream.until("turn.completed").unwrap();
    let started = rest
        .iter()
        .rev()
        .find(|e| e["type"] == "turn.started")
        .unwrap();
    assert!(started["data"]["resumes"].is_string(), "{started}");
    assert_eq!(
        rest.last().unwrap()["data"]["result"],
        "Resumed on another host."
    );
}

/// A webhook receiver on loopback: every POST's JSON body, in order.
fn webhook_receiver() -> (SocketAddr, std::sync::Arc<std::sync::Mutex<Vec<Value>>>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = got.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let seen = seen.clone();
            std::thread::spawn(move || {
                conn.set_read_timeout(Some(Duration::from_secs(10))).ok();
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                // Keep-alive: one request after another on the connection.
                loop {
                    let mut length = 0;
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let header = line.trim_end();
                        if header.is_empty() {
                            break;
                        }
                        if let Some((name, value)) = header.split_once(':')
                            && name.eq_ignore_ascii_case("content-length")
                        {
                            length = value.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    if let Ok(v) = serde_json::from_slice::<Value>(&body) {
                        seen.lock().unwrap().push(v);
                    }
                    if conn
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    (addr, got)
}

/// The task state a pushed `StreamResponse` carries, or "".
fn pushed_state(event: &Value) -> &str {
    event["task"]["status"]["state"]
        .as_str()
        .or_else(|| event["statusUpdate"]["status"]["state"].as_str())
        .unwrap_or_default()
}

/// A2A push notifications outlive the host that registered them: a
/// webhook registered on A for a task parked at an approval is followed
/// by B once A is killed (-9), and the task's completion after the
/// approval (decided on B) reaches the webhook exactly once.
#[test]
fn a_push_webhook_registered_on_a_killed_host_is_delivered_by_another_once() {
    let Some(db) = throwaway_database() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    project(
        tmp.path(),
        // The turn that resumes after the approval is the script's second.
        json!([
            {"steps": [{"text": "Stamping.", "toolCalls": [{"name": "guarded", "input": {}}]}]},
            {"steps": [{"text": "Stamped."}]}
        ]),
    );
    std::fs::write(
        tmp.path().join("bot/agent/tools/guarded.toml"),
        "description = \"Needs a human\"\ncommand = [\"sh\", \"-c\", \"echo stamped\"]\nneeds_approval = true\n\n[input_schema]\ntype = \"object\"\n",
    )
    .unwrap();
    let push_host = |name: &str| {
        let port = free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_agentkit"))
            .args(["serve", "--dir", "bot", "--port", &port.to_string()])
            .args(["--state-root", &format!("state-{name}")])
            .arg("--a2a-push-private-networks")
            .current_dir(tmp.path())
            .env("AGENTKIT_DATABASE_URL", &db.url)
            .env("NO_COLOR", "1")
            .env_remove("AGENTKIT_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        ServerProcess::healthy(child, port, Duration::from_secs(30))
    };
    let mut a = push_host("a");
    let b = push_host("b");
    let (receiver, got) = webhook_receiver();
    let rpc = |addr, method: &str, params: Value| {
        let r = Request::post("/bot/a2a")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
            .send(addr)
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        let v = r.json();
        assert!(v["error"].is_null(), "{method}: {v}");
        v["result"].clone()
    };
    // The task parks at the approval (a blocking send returns there).
    let sent = rpc(
        a.addr,
        "SendMessage",
        json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "stamp it"}]}}),
    );
    let task = &sent["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{task}"
    );
    let task_id = task["id"].as_str().unwrap().to_owned();
    let session = task["contextId"].as_str().unwrap().to_owned();
    let call = task["status"]["message"]["parts"][1]["data"]["approvals"][0]["callId"]
        .as_str()
        .unwrap()
        .to_owned();
    rpc(
        a.addr,
        "CreateTaskPushNotificationConfig",
        json!({"taskId": task_id, "id": "hook", "url": format!("http://{receiver}/hook"), "token": "tok"}),
    );
    // A pushes the task as registered.
    let deadline = Instant::now() + Duration::from_secs(10);
    while got.lock().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "A pushed nothing");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        pushed_state(&got.lock().unwrap()[0]),
        "TASK_STATE_INPUT_REQUIRED"
    );
    let follower = |db: &PgDatabase| {
        db.query(&format!(
            "SELECT split_part(holder, ':', 2) FROM agentkit_a2a_push_follows WHERE task_id = '{task_id}'"
        ))
    };
    assert_eq!(follower(&db), a.child.id().to_string());

    a.child.kill().unwrap();
    a.child.wait().unwrap();
    // B claims the task within 5 s (its next sweep, a second apart: A's
    // liveness lock went with its connection).
    let killed = Instant::now();
    while follower(&db) != b.child.id().to_string() {
        assert!(
            killed.elapsed() < Duration::from_secs(5),
            "B did not take the task over within 5 s: {}",
            follower(&db)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The decision on B (once B holds the session: 409 until then).
    let deadline = Instant::now() + Duration::from_secs(15);
    let r = loop {
        let r = Request::post(&format!("/bot/v1/session/{session}/approvals/{call}"))
            .json(&json!({"decision": "approve"}))
            .send(b.addr)
            .unwrap();
        if r.status != 409 || Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(r.status, 200, "{}", r.body);
    let completed = || {
        got.lock()
            .unwrap()
            .iter()
            .filter(|e| pushed_state(e) == "TASK_STATE_COMPLETED")
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while completed() == 0 {
        assert!(
            Instant::now() < deadline,
            "no completion pushed: {:?}",
            got.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Nothing more arrives: the completion came once, and the row is gone.
    std::thread::sleep(Duration::from_secs(3));
    let pushed = got.lock().unwrap().clone();
    assert_eq!(completed(), 1, "{pushed:?}");
    assert_eq!(
        pushed
            .iter()
            .filter(|e| pushed_state(e) == "TASK_STATE_INPUT_REQUIRED")
            .count(),
        1,
        "the parked state was pushed once: {pushed:?}"
    );
    let last = pushed.last().unwrap();
    assert_eq!(
        last["statusUpdate"]["status"]["message"]["parts"][0]["text"], "Stamped.",
        "{pushed:?}"
    );
    assert_eq!(
        count(
            &db,
            &format!("SELECT count(*) FROM agentkit_a2a_push_follows WHERE task_id = '{task_id}'")
        ),
        0
    );
}
