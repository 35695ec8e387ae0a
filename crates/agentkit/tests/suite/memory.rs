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

/// A session's events read over HTTP (the hosts keep no log file on
/// PostgreSQL).
fn events_over_http(h: &Host, token: &str, id: &str) -> Vec<Value> {
    let r = h.send(Request::get(&format!("/bot/v1/session/{id}/events")).bearer(token));
    r.body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn settled_over_http(h: &Host, token: &str, id: &str, waits: usize) {
    wait_until("the session to settle", || {
        events_over_http(h, token, id)
            .iter()
            .filter(|e| e["type"] == "session.waiting")
            .count()
            >= waits
    });
}

/// With `--database-url` the journal is the hosts' one: a session on the
/// second host reads the lines of turns the first host ran, and no host
/// keeps a file of its own.
#[test]
fn the_journal_is_shared_across_hosts_on_postgresql() {
    let Some(db) = agentkit_test_support::pg::throwaway_database() else {
        return;
    };
    let toml = journal_toml("");
    let files = [("agent.toml", toml.as_str()), ("channels/http.toml", HTTP)];
    let mut hosts: Vec<Host> = (0..2)
        .map(|_| Host::new(JOURNAL_SCRIPT, &files, at(12, 0, 0)))
        .collect();
    for h in &mut hosts {
        h.start(ServeOptions {
            database_url: Some(db.url.clone()),
            ..ServeOptions::default()
        });
    }
    let (a, cont) = start_session(&hosts[0], "token-a", "first from alice");
    settled_over_http(&hosts[0], "token-a", &a, 1);
    follow_up(&hosts[0], "token-a", &a, &cont, "second from alice");
    settled_over_http(&hosts[0], "token-a", &a, 2);
    let (b, _) = start_session(&hosts[1], "token-b", "first from bob");
    settled_over_http(&hosts[1], "token-b", &b, 1);
    let events = events_over_http(&hosts[1], "token-b", &b);
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
    for h in &hosts {
        assert!(
            !h.dir.path().join("state/bot/memory/journal.jsonl").exists(),
            "a host kept a journal file of its own"
        );
    }
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

/// Turn 0 keeps a note for its principal and one for the whole agent.
const REMEMBER: &str = r#"{"turns": [{"steps": [
  {"toolCalls": [
    {"name": "remember", "input": {"text": "likes green tea"}},
    {"name": "remember", "input": {"text": "the office closes at six", "scope": "agent"}}
  ]},
  {"text": "kept"}
]}]}"#;

/// Turn 0 recalls what it can about tea and the office.
const RECALL: &str = r#"{"turns": [{"steps": [
  {"toolCalls": [{"name": "recall", "input": {"query": "TEA office"}}]},
  {"text": "recalled"}
]}]}"#;

fn memory_files() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            "agent.toml",
            "model = \"scripted:script.json\"\n\n[harness]\nbuiltin_tools = [\"remember\", \"recall\", \"forget\"]\n",
        ),
        ("channels/http.toml", HTTP),
    ]
}

/// The first `action.result` outputs of session `id`, in order.
fn results(h: &Host, id: &str) -> Vec<Value> {
    h.events(id)
        .into_iter()
        .filter(|e| e["type"] == "action.result")
        .map(|e| {
            assert_eq!(e["data"]["isError"], false, "{e}");
            e["data"]["output"].clone()
        })
        .collect()
}

fn recalled(h: &Host, id: &str) -> Vec<String> {
    results(h, id)[0]["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap().to_owned())
        .collect()
}

fn listed(h: &Host, token: &str) -> Vec<String> {
    let r = h.send(Request::get("/bot/v1/memory").bearer(token));
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap().to_owned())
        .collect()
}

fn put(h: &Host, token: &str, id: &str, body: Value) -> agentkit_test_support::http::Response {
    h.send(
        Request::new("PUT", &format!("/bot/v1/memory/{id}"))
            .bearer(token)
            .json(&body),
    )
}

fn delete(h: &Host, token: &str, id: &str) -> agentkit_test_support::http::Response {
    h.send(Request::new("DELETE", &format!("/bot/v1/memory/{id}")).bearer(token))
}

fn set_script(h: &Host, script: &str) {
    std::fs::write(h.agent_dir().join("script.json"), script).unwrap();
}

#[test]
fn memories_are_recalled_by_their_principal_edited_and_deleted_over_http_and_kept_across_a_restart()
{
    let mut h = Host::new(REMEMBER, &memory_files(), at(12, 0, 0));
    let operator = || ServeOptions {
        operator_token: Some("op-token".into()),
        ..ServeOptions::default()
    };
    h.start(operator());

    // Alice's first session keeps two notes; each is a typed event whose
    // index is the memory's provenance.
    let (a1, _) = start_session(&h, "token-a", "remember things");
    settled(&h, &a1, 1);
    let kept = results(&h, &a1);
    let (mine, ours) = (
        kept[0]["memoryId"].as_str().unwrap().to_owned(),
        kept[1]["memoryId"].as_str().unwrap().to_owned(),
    );
    assert!(mine.starts_with("mem_"), "{mine}");
    assert_eq!(kept[1]["scope"], "agent");
    let events = h.events(&a1);
    let remembered: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "memory.remembered")
        .collect();
    assert_eq!(remembered.len(), 2, "{events:#?}");
    assert_eq!(remembered[0]["data"]["memoryId"], mine.as_str());
    assert_eq!(remembered[0]["data"]["text"], "likes green tea");
    assert!(remembered[0]["data"]["callId"].is_string());
    let r = h.send(Request::get(&format!("/bot/v1/memory/{mine}")).bearer("token-a"));
    assert_eq!(r.status, 200, "{}", r.body);
    let m = r.json()["memory"].clone();
    assert_eq!(m["scope"], "principal");
    assert_eq!(m["provenance"]["sessionId"], a1.as_str());
    assert_eq!(m["provenance"]["principal"], "alice");
    assert_eq!(m["provenance"]["turnId"], remembered[0]["turnId"]);
    assert_eq!(m["provenance"]["eventIndex"], remembered[0]["index"]);

    // Another session of Alice's recalls both; Bob's only the agent's.
    set_script(&h, RECALL);
    let (a2, _) = start_session(&h, "token-a", "what do you know?");
    settled(&h, &a2, 1);
    let mut got = recalled(&h, &a2);
    got.sort();
    assert_eq!(got, ["likes green tea", "the office closes at six"]);
    assert!(results(&h, &a2)[0]["memories"][0]["id"].is_string());
    let (b1, _) = start_session(&h, "token-b", "what do you know?");
    settled(&h, &b1, 1);
    assert_eq!(recalled(&h, &b1), ["the office closes at six"]);

    // Listing: Alice sees both, Bob the agent's, the operator all; pages.
    assert_eq!(listed(&h, "token-a").len(), 2);
    assert_eq!(listed(&h, "token-b"), ["the office closes at six"]);
    assert_eq!(listed(&h, "op-token").len(), 2);
    let r = h.send(Request::get("/bot/v1/memory?limit=1").bearer("token-a"));
    let first = r.json();
    assert_eq!(first["memories"].as_array().unwrap().len(), 1);
    let cursor = first["nextCursor"].as_str().unwrap().to_owned();
    let r =
        h.send(Request::get(&format!("/bot/v1/memory?limit=1&cursor={cursor}")).bearer("token-a"));
    assert_eq!(r.json()["memories"].as_array().unwrap().len(), 1);
    assert!(r.json()["nextCursor"].is_null(), "{}", r.body);
    assert_ne!(r.json()["memories"][0]["id"], first["memories"][0]["id"]);
    let r = h.send(Request::get("/bot/v1/memory?cursor=zz").bearer("token-a"));
    assert_eq!(r.status, 400, "{}", r.body);

    // Ownership: Bob cannot see Alice's note, nor change the agent's one
    // Alice kept; a blank text is refused.
    let r = h.send(Request::get(&format!("/bot/v1/memory/{mine}")).bearer("token-b"));
    assert_eq!(r.status, 404, "{}", r.body);
    assert_eq!(put(&h, "token-b", &mine, json!({"text": "x"})).status, 404);
    assert_eq!(delete(&h, "token-b", &mine).status, 404);
    let r = put(&h, "token-b", &ours, json!({"text": "closes at noon"}));
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], "forbidden");
    assert_eq!(delete(&h, "token-b", &ours).status, 403);
    let r = put(&h, "token-a", &mine, json!({"text": "  "}));
    assert_eq!(r.status, 400, "{}", r.body);
    let r = put(&h, "token-a", &mine, json!({"text": "x", "extra": 1}));
    assert_eq!(r.status, 400, "{}", r.body);
    let r = h.send(Request::get("/bot/v1/memory/mem_nope").bearer("token-a"));
    assert_eq!(r.status, 404, "{}", r.body);

    // Alice edits hers; the operator deletes the agent's.
    let r = put(&h, "token-a", &mine, json!({"text": "likes black tea"}));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["memory"]["text"], "likes black tea");
    assert_ne!(r.json()["memory"]["updatedAt"], m["updatedAt"]);
    assert_eq!(r.json()["memory"]["createdAt"], m["createdAt"]);
    let r = delete(&h, "op-token", &ours);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["memoryId"], ours.as_str());
    assert_eq!(
        h.send(Request::get(&format!("/bot/v1/memory/{ours}")).bearer("op-token"))
            .status,
        404
    );

    // After a restart, the same.
    h.stop();
    h.start(operator());
    assert_eq!(listed(&h, "token-a"), ["likes black tea"]);
    assert!(listed(&h, "token-b").is_empty());

    // `forget`: Bob's session cannot forget Alice's note; hers can.
    set_script(
        &h,
        &format!(
            r#"{{"turns": [{{"steps": [{{"toolCalls": [{{"name": "forget", "input": {{"id": "{mine}"}}}}]}}, {{"text": "done"}}]}}]}}"#
        ),
    );
    let (b2, _) = start_session(&h, "token-b", "forget it");
    settled(&h, &b2, 1);
    let refused = h
        .events(&b2)
        .into_iter()
        .find(|e| e["type"] == "action.result")
        .unwrap();
    assert_eq!(refused["data"]["isError"], true, "{refused}");
    assert_eq!(listed(&h, "token-a"), ["likes black tea"]);
    let (a3, _) = start_session(&h, "token-a", "forget it");
    settled(&h, &a3, 1);
    assert_eq!(results(&h, &a3)[0]["forgotten"], mine.as_str());
    assert!(h.types(&a3).iter().any(|t| t == "memory.forgotten"));
    assert!(listed(&h, "token-a").is_empty());
}

/// Without the built-ins in `builtin_tools`, the model is offered none.
#[test]
fn the_memory_tools_are_opt_in() {
    let files = [("channels/http.toml", HTTP)];
    let mut h = Host::new(RECALL, &files, at(12, 0, 0));
    h.start(ServeOptions::default());
    let (a, _) = start_session(&h, "token-a", "recall");
    settled(&h, &a, 1);
    let result = h
        .events(&a)
        .into_iter()
        .find(|e| e["type"] == "action.result")
        .unwrap();
    assert_eq!(result["data"]["isError"], true, "{result}");
}

/// Two hosts on one PostgreSQL database: a memory kept on one is recalled
/// by the same principal's session on the other, edited there and seen
/// edited on the first.
#[test]
fn memories_are_shared_across_hosts_on_postgresql() {
    let Some(db) = agentkit_test_support::pg::throwaway_database() else {
        return;
    };
    let mut hosts: Vec<Host> = [REMEMBER, RECALL]
        .iter()
        .map(|s| Host::new(s, &memory_files(), at(12, 0, 0)))
        .collect();
    for h in &mut hosts {
        h.start(ServeOptions {
            database_url: Some(db.url.clone()),
            ..ServeOptions::default()
        });
    }
    let r = hosts[0].send(
        Request::post("/bot/v1/session")
            .bearer("token-a")
            .json(&json!({"message": "remember"})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let a1 = r.json()["sessionId"].as_str().unwrap().to_owned();
    wait_until("the memories", || listed(&hosts[1], "token-a").len() == 2);
    assert_eq!(listed(&hosts[1], "token-b"), ["the office closes at six"]);
    let r = hosts[1].send(
        Request::post("/bot/v1/session")
            .bearer("token-a")
            .json(&json!({"message": "recall"})),
    );
    let a2 = r.json()["sessionId"].as_str().unwrap().to_owned();
    let recalled_there = || {
        let r =
            hosts[1].send(Request::get(&format!("/bot/v1/session/{a2}/events")).bearer("token-a"));
        r.body
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|e| e["type"] == "action.result")
    };
    wait_until("the recall", || recalled_there().is_some());
    let out = recalled_there().unwrap()["data"]["output"].to_string();
    assert!(
        out.contains("likes green tea") && out.contains("closes at six"),
        "{out}"
    );
    let r = hosts[1].send(Request::get("/bot/v1/memory").bearer("token-a"));
    let mine = r.json()["memories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["scope"] == "principal")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = put(
        &hosts[1],
        "token-a",
        &mine,
        json!({"text": "likes black tea"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = hosts[0].send(Request::get(&format!("/bot/v1/memory/{mine}")).bearer("token-a"));
    assert_eq!(r.json()["memory"]["text"], "likes black tea");
    assert_eq!(r.json()["memory"]["provenance"]["sessionId"], a1.as_str());
    assert_eq!(delete(&hosts[0], "token-b", &mine).status, 404);
    assert_eq!(delete(&hosts[0], "token-a", &mine).status, 200);
    assert_eq!(listed(&hosts[1], "token-a"), ["the office closes at six"]);
}

/// A desk whose handler keeps and reads memories through the bridge.
const DESK: &str = r#"kind = "webhook"
auth = [{ bearer = { token = "desk-token", principal = "desk" } }]
[[routes]]
method = "POST"
path = "/memo/:session"
[routes.body_schema]
type = "object"
[routes.handler]
command = ["python3", "lib/memo.py"]
"#;

/// Remembers two memories in the session (one the principal's, one the
/// agent's), recalls as alice and as bob, pages the list, edits, deletes.
const MEMO_PY: &str = r#"import json, os, sys, urllib.request, urllib.error
def call(method, path, body=None):
    req = urllib.request.Request(os.environ["AGENTKIT_HOST_URL"] + path, method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"authorization": "Bearer " + os.environ["AGENTKIT_HOST_TOKEN"], "content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
sid = json.load(sys.stdin)["params"]["session"]
out = {}
s, tea = call("POST", "/v1/memory", {"sessionId": sid, "text": "alice likes green tea"})
s2, office = call("POST", "/v1/memory", {"sessionId": sid, "text": "the office closes at six", "scope": "agent"})
out["remembered"] = [s, tea["memory"]["scope"], tea["memory"]["provenance"]["principal"], s2, office["memory"]["scope"]]
out["alice"] = [m["text"] for m in call("GET", "/v1/memory?principal=alice&q=tea+office")[1]["memories"]]
out["bob"] = [m["text"] for m in call("GET", "/v1/memory?principal=bob&q=tea+office")[1]["memories"]]
pages, cursor = [], None
while True:
    s, page = call("GET", "/v1/memory?limit=1" + ("&cursor=" + cursor if cursor else ""))
    pages.append([m["text"] for m in page["memories"]])
    cursor = page.get("nextCursor")
    if not cursor:
        break
out["pages"] = pages
s, edited = call("PUT", "/v1/memory/" + tea["memory"]["id"], {"text": "alice likes black tea"})
out["edited"] = [s, edited["memory"]["text"]]
out["deleted"] = call("DELETE", "/v1/memory/" + office["memory"]["id"])[0]
out["gone"] = call("GET", "/v1/memory/" + office["memory"]["id"])[0]
out["noSession"] = call("POST", "/v1/memory", {"text": "where?"})[0]
out["noPrincipal"] = call("GET", "/v1/memory?q=tea")[0]
out["teaId"] = tea["memory"]["id"]
print(json.dumps(out))
"#;

/// Host code keeps, recalls, pages, edits and deletes memories through
/// the host bridge, seeing every principal's; what it keeps is the
/// session principal's, as the `remember` tool's is.
#[test]
fn host_code_keeps_and_reads_memories_through_the_bridge() {
    let mut files = memory_files();
    files.push(("channels/desk.toml", DESK));
    files.push(("lib/memo.py", MEMO_PY));
    let mut h = Host::new(
        r#"{"turns": [{"steps": [{"text": "hi"}]}]}"#,
        &files,
        at(12, 0, 0),
    );
    h.start(ServeOptions::default());
    let (sid, _) = start_session(&h, "token-a", "hello");
    settled(&h, &sid, 1);
    let r = h.send(
        Request::post(&format!("/bot/v1/channels/desk/memo/{sid}"))
            .bearer("desk-token")
            .json(&json!({})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let v: Value = r.json();
    let v = if v.get("remembered").is_some() {
        v
    } else {
        v["body"].clone()
    };
    assert_eq!(
        v["remembered"],
        json!([200, "principal", "alice", 200, "agent"]),
        "{v}"
    );
    assert_eq!(
        v["alice"],
        json!(["the office closes at six", "alice likes green tea"]),
        "{v}"
    );
    assert_eq!(v["bob"], json!(["the office closes at six"]), "{v}");
    assert_eq!(
        v["pages"],
        json!([["the office closes at six"], ["alice likes green tea"]]),
        "{v}"
    );
    assert_eq!(v["edited"], json!([200, "alice likes black tea"]));
    assert_eq!(v["deleted"], 200);
    assert_eq!(v["gone"], 404);
    assert_eq!(v["noSession"], 400);
    assert_eq!(v["noPrincipal"], 400);
    // Alice sees the edit through the public API; the log has both
    // remembered events.
    assert_eq!(listed(&h, "token-a"), ["alice likes black tea"]);
    let remembered = h
        .types(&sid)
        .iter()
        .filter(|t| *t == "memory.remembered")
        .count();
    assert_eq!(remembered, 2);
}
