//! Artifacts over HTTP against a real server: tagged by a scripted model
//! (`tag_artifact`, a refusal of data that breaks the kind's schema
//! returned to the model, a second tag of the same key updating it) and
//! by a route handler through the host bridge (an undeclared kind and bad
//! data refused with `400`); `artifact.tagged` in the log; `max` evicting
//! the least recently updated; listing in pages with `kind`, `session`,
//! `limit` and `cursor`, its ownership (another principal sees nothing
//! and is refused a session's list; the operator sees all); the same
//! after a restart, and across two hosts on PostgreSQL.

use agentkit::ServeOptions;
use agentkit_test_support::http::Request;
use serde_json::{Value, json};

use super::time::{Host, at, wait_until};

/// Turn 0 tags a finding, then tries one whose severity is not allowed,
/// then answers; turn 1 tags the same finding again (updated).
const SCRIPT: &str = r#"{"turns": [
  {"steps": [
    {"toolCalls": [{"name": "tag_artifact", "input": {"kind": "finding", "key": "src/a.rs:3", "data": {"file": "src/a.rs", "line": 3, "severity": "high"}}}]},
    {"toolCalls": [{"name": "tag_artifact", "input": {"kind": "finding", "data": {"file": "src/b.rs", "line": 9, "severity": "urgent"}}}]},
    {"text": "tagged"}
  ]},
  {"steps": [
    {"toolCalls": [{"name": "tag_artifact", "input": {"kind": "finding", "key": "src/a.rs:3", "data": {"file": "src/a.rs", "line": 4, "severity": "medium"}}}]},
    {"text": "updated"}
  ]}
]}"#;

const ARTIFACTS: &str = r#"agent_tool = true
max = 4

[kinds.finding]
description = "A review finding posted on a pull request"
schema = { type = "object", required = ["file", "line", "severity"], properties = { file = { type = "string" }, line = { type = "integer" }, severity = { enum = ["low", "medium", "high"] } } }

[kinds.journal]
description = "One line of the journal"
schema = { type = "object", required = ["note"] }
"#;

const HTTP: &str = "kind = \"http\"\nauth = [{ bearer = { tokens = { alice = \"token-a\", bob = \"token-b\" } } }]\n";

/// A desk whose handler journals into a session through the bridge.
const DESK: &str = r#"kind = "webhook"
auth = [{ bearer = { token = "desk-token", principal = "desk" } }]
[[routes]]
method = "POST"
path = "/journal/:session"
[routes.body_schema]
type = "object"
required = ["notes"]
[routes.handler]
command = ["python3", "lib/journal.py"]
"#;

const BRIDGE_PY: &str = r#"import json, os, urllib.request, urllib.error
def call(method, path, body=None):
    req = urllib.request.Request(os.environ["AGENTKIT_HOST_URL"] + path, method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"authorization": "Bearer " + os.environ["AGENTKIT_HOST_TOKEN"], "content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
"#;

/// Tags one journal entry per note, then tries an undeclared kind and a
/// journal entry without its required `note`; lists the session's
/// journal through the bridge.
const JOURNAL_PY: &str = r#"import json, sys
import bridge
req = json.load(sys.stdin)
sid = req["params"]["session"]
ids = []
for note in req["body"]["notes"]:
    status, got = bridge.call("POST", "/v1/artifacts", {"sessionId": sid, "kind": "journal", "data": {"note": note}})
    ids.append([status, got.get("artifact", {}).get("id"), got.get("artifact", {}).get("turnId")])
memo = bridge.call("POST", "/v1/artifacts", {"sessionId": sid, "kind": "memo", "data": {}})
bad = bridge.call("POST", "/v1/artifacts", {"sessionId": sid, "kind": "journal", "data": {"text": "x"}})
status, listed = bridge.call("GET", "/v1/artifacts?kind=journal&session=" + sid)
print(json.dumps({"tagged": ids,
    "memo": [memo[0], memo[1].get("error", {}).get("code"), memo[1].get("error", {}).get("message")],
    "bad": [bad[0], bad[1].get("error", {}).get("message")],
    "listed": [a["data"].get("note") for a in listed["artifacts"]]}))
"#;

fn files() -> Vec<(&'static str, &'static str)> {
    vec![
        ("artifacts.toml", ARTIFACTS),
        ("channels/http.toml", HTTP),
        ("channels/desk.toml", DESK),
        ("lib/bridge.py", BRIDGE_PY),
        ("lib/journal.py", JOURNAL_PY),
    ]
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

/// Every artifact `GET path` lists, page by page of `limit`, and the
/// number of pages.
fn list_all(h: &Host, token: &str, path: &str, limit: u32) -> (Vec<Value>, usize) {
    let sep = if path.contains('?') { '&' } else { '?' };
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let url = match &cursor {
            None => format!("{path}{sep}limit={limit}"),
            Some(c) => format!("{path}{sep}limit={limit}&cursor={c}"),
        };
        let r = h.send(Request::get(&url).bearer(token));
        assert_eq!(r.status, 200, "{}", r.body);
        let body = r.json();
        pages += 1;
        all.extend(body["artifacts"].as_array().unwrap().iter().cloned());
        match body["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return (all, pages),
        }
    }
}

fn notes(list: &[Value]) -> Vec<String> {
    list.iter()
        .map(|a| match a["kind"].as_str().unwrap() {
            "journal" => a["data"]["note"].as_str().unwrap().to_owned(),
            kind => format!("{kind}:{}", a["data"]["line"]),
        })
        .collect()
}

#[test]
fn artifacts_are_tagged_by_the_model_and_a_route_handler_listed_in_pages_and_kept_across_a_restart()
{
    let mut h = Host::new(SCRIPT, &files(), at(12, 0, 0));
    h.start(ServeOptions {
        operator_token: Some("op-token".into()),
        ..ServeOptions::default()
    });

    // The model tags a finding; its bad second tag is an error result
    // naming the violation, and nothing is stored for it.
    let r = h.send(
        Request::post("/bot/v1/session")
            .bearer("token-a")
            .json(&json!({"message": "review the PR"})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let continuation = r.json()["continuationToken"].as_str().unwrap().to_owned();
    settled(&h, &id, 1);
    let events = h.events(&id);
    let tagged: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "artifact.tagged")
        .collect();
    assert_eq!(tagged.len(), 1, "{events:#?}");
    let turn = events.iter().find(|e| e["type"] == "turn.started").unwrap()["turnId"].clone();
    assert_eq!(tagged[0]["turnId"], turn);
    assert_eq!(tagged[0]["data"]["kind"], "finding");
    assert_eq!(tagged[0]["data"]["key"], "src/a.rs:3");
    assert!(tagged[0]["data"]["callId"].is_string());
    let refused = events
        .iter()
        .filter(|e| e["type"] == "action.result" && e["data"]["isError"] == true)
        .collect::<Vec<_>>();
    assert_eq!(refused.len(), 1, "{events:#?}");
    let why = refused[0]["data"]["output"].to_string();
    assert!(
        why.contains("/severity") && why.contains("finding"),
        "{why}"
    );

    let r = h.send(Request::get(&format!("/bot/v1/session/{id}/artifacts")).bearer("token-a"));
    assert_eq!(r.status, 200, "{}", r.body);
    let first = r.json()["artifacts"][0].clone();
    assert_eq!(r.json()["artifacts"].as_array().unwrap().len(), 1);
    assert_eq!(first["kind"], "finding");
    assert_eq!(
        first["data"],
        json!({"file": "src/a.rs", "line": 3, "severity": "high"})
    );
    assert_eq!(first["sessionId"], id.as_str());
    assert_eq!(first["turnId"], turn);
    assert!(first["id"].as_str().unwrap().starts_with("art_"));

    // Bob sees none of it and is refused the session's list.
    let r = h.send(Request::get(&format!("/bot/v1/session/{id}/artifacts")).bearer("token-b"));
    assert_eq!(r.status, 403, "{}", r.body);
    let r = h.send(Request::get("/bot/v1/artifacts").bearer("token-b"));
    assert_eq!(r.json()["artifacts"], json!([]));
    let r = h.send(Request::get(&format!("/bot/v1/artifacts?session={id}")).bearer("token-b"));
    assert_eq!(r.status, 403, "{}", r.body);

    // The same key again updates the artifact (same id, creation kept).
    let r = h.send(
        Request::post(&format!("/bot/v1/session/{id}"))
            .bearer("token-a")
            .json(&json!({"message": "again", "continuationToken": continuation})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    settled(&h, &id, 2);
    let again = h
        .events(&id)
        .into_iter()
        .filter(|e| e["type"] == "artifact.tagged")
        .collect::<Vec<_>>();
    assert_eq!(again.len(), 2);
    assert_eq!(again[1]["data"]["updated"], true);
    assert_eq!(again[1]["data"]["artifactId"], first["id"]);
    let r = h.send(Request::get("/bot/v1/artifacts").bearer("token-a"));
    let listed = r.json()["artifacts"].clone();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["id"], first["id"]);
    assert_eq!(listed[0]["createdAt"], first["createdAt"]);
    assert_eq!(listed[0]["data"]["line"], 4);

    // A route handler journals through the bridge: three kept, an
    // undeclared kind and data missing `note` refused with 400.
    let r = h.send(
        Request::post(&format!("/bot/v1/channels/desk/journal/{id}"))
            .bearer("desk-token")
            .json(&json!({"notes": ["one", "two", "three"]})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let out = r.json();
    for t in out["tagged"].as_array().unwrap() {
        assert_eq!(t[0], 200, "{out}");
        // Outside a turn, an artifact belongs to the session's last turn.
        assert_eq!(t[2], again[1]["turnId"], "{out}");
    }
    assert_eq!(out["memo"][0], 400, "{out}");
    assert_eq!(out["memo"][1], "bad_request");
    assert!(
        out["memo"][2]
            .as_str()
            .unwrap()
            .contains("declared: finding, journal"),
        "{out}"
    );
    assert_eq!(out["bad"][0], 400, "{out}");
    assert!(out["bad"][1].as_str().unwrap().contains("note"), "{out}");
    assert_eq!(out["listed"], json!(["three", "two", "one"]));
    let journal_events = h
        .events(&id)
        .into_iter()
        .filter(|e| e["type"] == "artifact.tagged" && e["data"]["kind"] == "journal")
        .collect::<Vec<_>>();
    assert_eq!(journal_events.len(), 3);
    assert!(journal_events.iter().all(|e| e["turnId"].is_null()));

    // `max = 4`: a fourth journal entry evicts the least recently updated
    // artifact, the finding.
    let r = h.send(
        Request::post(&format!("/bot/v1/channels/desk/journal/{id}"))
            .bearer("desk-token")
            .json(&json!({"notes": ["four"]})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let (all, pages) = list_all(&h, "token-a", "/bot/v1/artifacts", 3);
    assert_eq!(pages, 2);
    assert_eq!(notes(&all), ["four", "three", "two", "one"]);

    // Pages of one, filtered by kind and session; a bad cursor is 400.
    let (journal, pages) = list_all(
        &h,
        "token-a",
        &format!("/bot/v1/session/{id}/artifacts?kind=journal"),
        1,
    );
    assert_eq!(pages, 4);
    assert_eq!(notes(&journal), ["four", "three", "two", "one"]);
    let r = h.send(Request::get("/bot/v1/artifacts?kind=finding").bearer("token-a"));
    assert_eq!(r.json()["artifacts"], json!([]));
    let r = h.send(Request::get("/bot/v1/artifacts?cursor=zz").bearer("token-a"));
    assert_eq!(r.status, 400, "{}", r.body);
    let r = h.send(Request::get("/bot/v1/artifacts?limit=0").bearer("token-a"));
    assert_eq!(r.status, 400, "{}", r.body);
    // The operator sees every principal's.
    let (seen, _) = list_all(&h, "op-token", "/bot/v1/artifacts", 100);
    assert_eq!(seen.len(), 4);

    // After a restart, the same.
    h.stop();
    h.start(ServeOptions {
        operator_token: Some("op-token".into()),
        ..ServeOptions::default()
    });
    let (after, _) = list_all(&h, "token-a", "/bot/v1/artifacts", 2);
    assert_eq!(after, all);
}

/// Without `artifacts.toml`, kinds are free (`artifact` by default) and
/// the model is offered no `tag_artifact`; host code still tags.
#[test]
fn without_artifacts_toml_kinds_are_free_and_the_model_has_no_tool() {
    let script = r#"{"turns": [{"steps": [{"toolCalls": [{"name": "tag_artifact", "input": {"data": 1}}]}, {"text": "done"}]}]}"#;
    let files = vec![
        ("channels/http.toml", HTTP),
        ("channels/desk.toml", DESK),
        ("lib/bridge.py", BRIDGE_PY),
        ("lib/journal.py", JOURNAL_PY),
    ];
    let mut h = Host::new(script, &files, at(12, 0, 0));
    h.start(ServeOptions::default());
    let r = h.send(
        Request::post("/bot/v1/session")
            .bearer("token-a")
            .json(&json!({"message": "hi"})),
    );
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    settled(&h, &id, 1);
    let events = h.events(&id);
    let result = events
        .iter()
        .find(|e| e["type"] == "action.result")
        .unwrap();
    assert_eq!(result["data"]["isError"], true, "{result}");
    assert!(!events.iter().any(|e| e["type"] == "artifact.tagged"));

    let r = h.send(
        Request::post(&format!("/bot/v1/channels/desk/journal/{id}"))
            .bearer("desk-token")
            .json(&json!({"notes": ["free"]})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let out = r.json();
    assert_eq!(out["tagged"][0][0], 200, "{out}");
    // Any kind is accepted: `memo` too, and data of any shape.
    assert_eq!(out["memo"][0], 200, "{out}");
    assert_eq!(out["bad"][0], 200, "{out}");
    let r = h.send(Request::get("/bot/v1/artifacts").bearer("token-a"));
    let kinds: Vec<String> = r.json()["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kinds, ["journal", "memo", "journal"]);
}

/// Two hosts on one PostgreSQL database: the model tags on one, the other
/// lists it (same pages, same ownership), and a route handler on the
/// second tags into the first's session once it settled.
#[test]
fn artifacts_are_shared_across_hosts_on_postgresql() {
    let Some(db) = agentkit_test_support::pg::throwaway_database() else {
        return;
    };
    let hosts = Host::on_database(2, SCRIPT, &files(), &db.url);
    let r = hosts[0].send(
        Request::post("/bot/v1/session")
            .bearer("token-a")
            .json(&json!({"message": "review"})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    wait_until("the first turn", || {
        let r = hosts[1]
            .send(Request::get(&format!("/bot/v1/session/{id}/artifacts")).bearer("token-a"));
        r.status == 200 && r.json()["artifacts"].as_array().unwrap().len() == 1
    });
    let r = hosts[1].send(Request::get("/bot/v1/artifacts").bearer("token-b"));
    assert_eq!(r.json()["artifacts"], json!([]));
    wait_until("the session to settle", || {
        hosts[1]
            .send(Request::get(&format!("/bot/v1/session/{id}/events")).bearer("token-a"))
            .body
            .contains("session.waiting")
    });
    let r = hosts[1].send(
        Request::post(&format!("/bot/v1/channels/desk/journal/{id}"))
            .bearer("desk-token")
            .json(&json!({"notes": ["from host 2"]})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["tagged"][0][0], 200, "{}", r.body);
    let (all, _) = list_all(&hosts[0], "token-a", "/bot/v1/artifacts", 1);
    assert_eq!(notes(&all), ["from host 2", "finding:3"]);
    let count: u32 = db
        .query("SELECT count(*) FROM agentkit_artifacts")
        .parse()
        .unwrap();
    assert_eq!(count, 2);
    let tagged: u32 = db
        .query("SELECT count(*) FROM agentkit_events WHERE type = 'artifact.tagged'")
        .parse()
        .unwrap();
    assert_eq!(tagged, 2);
}

/// Tags a finding, then holds the turn until it is stopped.
const SLOW_SCRIPT: &str = r#"{"turns": [{"steps": [
  {"toolCalls": [{"name": "tag_artifact", "input": {"kind": "finding", "data": {"file": "a", "line": 1, "severity": "low"}}}]},
  {"text": "slow", "delayMs": 60000}
]}]}"#;

/// Starts a session whose turn tagged a finding and still runs.
fn running_session(h: &Host) -> String {
    let r = h.send(
        Request::post("/bot/v1/session")
            .bearer("token-a")
            .json(&json!({"message": "review"})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    wait_until("the tag", || {
        let r = h.send(Request::get(&format!("/bot/v1/session/{id}/events")).bearer("token-a"));
        r.body.contains("artifact.tagged")
    });
    id
}

/// After `DELETE`, every route answers 404 for the session.
fn gone_everywhere(h: &Host, id: &str) {
    for path in [
        format!("/bot/v1/session/{id}"),
        format!("/bot/v1/session/{id}/events"),
        format!("/bot/v1/session/{id}/artifacts"),
        format!("/bot/v1/session/{id}/approvals"),
    ] {
        let r = h.send(Request::get(&path).bearer("token-a"));
        assert_eq!(r.status, 404, "{path}: {}", r.body);
    }
    let r = h.send(
        Request::post(&format!("/bot/v1/session/{id}"))
            .bearer("token-a")
            .json(&json!({"message": "still there?", "continuationToken": "x"})),
    );
    assert_eq!(r.status, 404, "{}", r.body);
    let r = h.send(Request::new("DELETE", &format!("/bot/v1/session/{id}")).bearer("token-a"));
    assert_eq!(r.status, 404, "{}", r.body);
    let r = h.send(Request::get("/bot/v1/artifacts").bearer("token-a"));
    assert_eq!(r.json()["artifacts"], json!([]));
    let r = h.send(Request::get("/bot/v1/sessions").bearer("token-a"));
    assert_eq!(r.json()["sessions"], json!([]), "{}", r.body);
}

#[test]
fn deleting_a_running_session_stops_it_and_leaves_nothing_behind() {
    let mut h = Host::new(SLOW_SCRIPT, &files(), at(12, 0, 0));
    h.start(ServeOptions {
        operator_token: Some("op-token".into()),
        ..ServeOptions::default()
    });
    let id = running_session(&h);
    assert!(h.session_ids().contains(&id));
    // Not bob's to delete.
    let r = h.send(Request::new("DELETE", &format!("/bot/v1/session/{id}")).bearer("token-b"));
    assert_eq!(r.status, 403, "{}", r.body);
    let r = h.send(Request::new("DELETE", &format!("/bot/v1/session/{id}")).bearer("token-a"));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json(), json!({"ok": true, "sessionId": id}));
    gone_everywhere(&h, &id);
    // Nothing on disk: no folder, no index row, no artifact row.
    assert!(!h.session_ids().contains(&id), "{:?}", h.session_ids());
    let db = rusqlite::Connection::open(h.dir.path().join("state/bot/agentkit.sqlite")).unwrap();
    let count = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(count("SELECT count(*) FROM sessions"), 0);
    assert_eq!(count("SELECT count(*) FROM artifacts"), 0);

    // An operator deletes another's idle session; a restart finds nothing.
    let r = h.send(
        Request::post("/bot/v1/session")
            .bearer("token-b")
            .json(&json!({"message": "mine"})),
    );
    let second = r.json()["sessionId"].as_str().unwrap().to_owned();
    wait_until("the tag", || {
        let r = h.send(Request::get(&format!("/bot/v1/session/{second}/events")).bearer("token-b"));
        r.body.contains("artifact.tagged")
    });
    let r = h.send(Request::post(&format!("/bot/v1/session/{second}/stop")).bearer("token-b"));
    assert_eq!(r.status, 200, "{}", r.body);
    let r = h.send(Request::new("DELETE", &format!("/bot/v1/session/{second}")).bearer("op-token"));
    assert_eq!(r.status, 200, "{}", r.body);
    h.stop();
    h.start(ServeOptions::default());
    gone_everywhere(&h, &id);
    let r = h.send(Request::get(&format!("/bot/v1/session/{second}")).bearer("token-b"));
    assert_eq!(r.status, 404, "{}", r.body);
    assert!(h.session_ids().is_empty(), "{:?}", h.session_ids());
}

/// On PostgreSQL, a session running on one host is deleted through the
/// other: the turn is stopped where it runs, and no row of it is left.
#[test]
fn deleting_a_session_on_postgresql_leaves_no_row() {
    let Some(db) = agentkit_test_support::pg::throwaway_database() else {
        return;
    };
    let hosts = Host::on_database(2, SLOW_SCRIPT, &files(), &db.url);
    let id = running_session(&hosts[0]);
    let r =
        hosts[1].send(Request::new("DELETE", &format!("/bot/v1/session/{id}")).bearer("token-a"));
    assert_eq!(r.status, 200, "{}", r.body);
    for h in &hosts {
        let r = h.send(Request::get(&format!("/bot/v1/session/{id}")).bearer("token-a"));
        assert_eq!(r.status, 404, "{}", r.body);
    }
    gone_everywhere(&hosts[1], &id);
    for table in [
        "agentkit_sessions WHERE id",
        "agentkit_events WHERE session_id",
        "agentkit_logs WHERE session_id",
        "agentkit_leases WHERE session_id",
        "agentkit_artifacts WHERE session_id",
    ] {
        let n: u32 = db
            .query(&format!("SELECT count(*) FROM {table} = '{id}'"))
            .parse()
            .unwrap();
        assert_eq!(n, 0, "{table}");
    }
}

/// Tags a finding, then takes a few seconds to answer.
const STEADY_SCRIPT: &str = r#"{"turns": [{"steps": [
  {"toolCalls": [{"name": "tag_artifact", "input": {"kind": "finding", "data": {"file": "a", "line": 1, "severity": "low"}}}]},
  {"text": "done", "delayMs": 5000}
]}]}"#;

/// The value of `agentkit_sessions_deleted_total` for `reason`.
fn deleted_total(h: &Host, reason: &str) -> u64 {
    let text = h
        .send(Request::get("/metrics").bearer(super::http::SCRAPER))
        .body;
    let prefix = format!("agentkit_sessions_deleted_total{{agent=\"bot\",reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0, |v| v.trim().parse::<f64>().unwrap() as u64)
}

/// `[sessions]`: the least recently active session beyond `max_sessions`
/// is deleted once its turn has settled (not while it runs), then the
/// others once idle past `retention`; with their folders, index rows and
/// artifacts, each counted by reason.
#[test]
fn sessions_beyond_max_sessions_and_idle_past_their_retention_are_deleted_once_settled() {
    let mut files = files();
    files.push((
        "agent.toml",
        "model = \"scripted:script.json\"\n\n[sessions]\nretention = \"3s\"\nmax_sessions = 2\n",
    ));
    let mut h = Host::new(STEADY_SCRIPT, &files, at(12, 0, 0));
    h.start(ServeOptions::default());
    let mut ids = Vec::new();
    for n in 0..3 {
        let r = h.send(
            Request::post("/bot/v1/session")
                .bearer("token-a")
                .json(&json!({"message": format!("review {n}")})),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        ids.push(r.json()["sessionId"].as_str().unwrap().to_owned());
    }
    // The oldest is beyond `max_sessions` at once, but runs: it stays
    // while its turn does (sweeps every second).
    std::thread::sleep(std::time::Duration::from_millis(2500));
    for id in &ids {
        let r = h.send(Request::get(&format!("/bot/v1/session/{id}")).bearer("token-a"));
        assert_eq!(r.status, 200, "{id} is deleted while it runs: {}", r.body);
    }
    assert_eq!(deleted_total(&h, "max_sessions"), 0);
    wait_until("the oldest session to be deleted", || {
        h.send(Request::get(&format!("/bot/v1/session/{}", ids[0])).bearer("token-a"))
            .status
            == 404
    });
    // Counted once its folder is gone too, a moment after the 404.
    wait_until("the oldest session's deletion to be counted", || {
        deleted_total(&h, "max_sessions") == 1
    });
    wait_until("the other two to be deleted past their retention", || {
        deleted_total(&h, "retention") == 2
    });
    for id in &ids {
        gone_everywhere(&h, id);
    }
    assert!(h.session_ids().is_empty(), "{:?}", h.session_ids());
    let db = rusqlite::Connection::open(h.dir.path().join("state/bot/agentkit.sqlite")).unwrap();
    let count = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(count("SELECT count(*) FROM sessions"), 0);
    assert_eq!(count("SELECT count(*) FROM artifacts"), 0);
    assert_eq!(deleted_total(&h, "request"), 0);
}

/// On PostgreSQL, each period is swept by one host: a session past its
/// retention is deleted once, whichever host swept, and leaves no row.
#[test]
fn retention_on_postgresql_deletes_each_session_once_across_hosts() {
    let Some(db) = agentkit_test_support::pg::throwaway_database() else {
        return;
    };
    let mut files = files();
    files.push((
        "agent.toml",
        "model = \"scripted:script.json\"\n\n[sessions]\nretention = \"2s\"\n",
    ));
    let hosts = Host::on_database(2, SCRIPT, &files, &db.url);
    let mut ids = Vec::new();
    for h in &hosts {
        let r = h.send(
            Request::post("/bot/v1/session")
                .bearer("token-a")
                .json(&json!({"message": "review"})),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let id = r.json()["sessionId"].as_str().unwrap().to_owned();
        wait_until("the turn to settle", || {
            let r = h.send(Request::get(&format!("/bot/v1/session/{id}/events")).bearer("token-a"));
            r.body.contains("session.waiting")
        });
        ids.push(id);
    }
    wait_until("both sessions to be deleted", || {
        hosts
            .iter()
            .map(|h| deleted_total(h, "retention"))
            .sum::<u64>()
            >= 2
    });
    std::thread::sleep(std::time::Duration::from_secs(3));
    let total: u64 = hosts.iter().map(|h| deleted_total(h, "retention")).sum();
    assert_eq!(total, 2, "a session was deleted twice");
    // Gone on every host, the one that created it (and has it loaded)
    // included, its log too.
    for h in &hosts {
        for id in &ids {
            for path in [
                format!("/bot/v1/session/{id}"),
                format!("/bot/v1/session/{id}/events"),
            ] {
                let r = h.send(Request::get(&path).bearer("token-a"));
                assert_eq!(r.status, 404, "{path}: {}", r.body);
            }
        }
    }
    for table in [
        "agentkit_sessions",
        "agentkit_events",
        "agentkit_logs",
        "agentkit_artifacts",
    ] {
        let n: u32 = db
            .query(&format!("SELECT count(*) FROM {table}"))
            .parse()
            .unwrap();
        assert_eq!(n, 0, "{table}");
    }
}
