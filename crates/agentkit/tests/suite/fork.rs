//! Forking a session over HTTP against a real server: the fork's log is
//! the original's prefix then `session.forked`, its workspace a copy, a
//! message sent with the fork runs at once; the original is untouched and
//! goes on; forks of forks, a fork after a restart, and the refusals
//! (inside a turn, past the end, a session that does not exist).

use agentkit_test_support::http::Request;
use serde_json::{Value, json};

use super::approvals::Host;

/// The stored events of session `id`, from 0.
fn events(host: &Host, id: &str) -> Vec<Value> {
    let r = host.send(Request::get(&format!("/bot/v1/session/{id}/events")));
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn fork(host: &Host, id: &str, body: Value) -> agentkit_test_support::http::Response {
    host.send(Request::post(&format!("/bot/v1/session/{id}/fork")).json(&body))
}

/// A session whose first turn parked a call, was approved and answered,
/// so it waits: its id, its continuation token and its events.
fn answered_session(host: &Host) -> (String, String, Vec<Value>) {
    let created = host.create("one");
    let id = created["sessionId"].as_str().unwrap().to_owned();
    let token = created["continuationToken"].as_str().unwrap().to_owned();
    let parked = host.wait_for(&id, "action.approval_requested", |_| true);
    let call = parked.last().unwrap()["data"]["callId"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = host.decide(&id, &call, json!({"decision": "approve"}));
    assert_eq!(r.status, 200, "{}", r.body);
    let seen = host.wait_for(&id, "session.waiting", |_| true);
    (id, token, seen)
}

/// What a copied event must keep: its type, turn and data.
fn kept(e: &Value) -> (Value, Value, Value) {
    (e["type"].clone(), e["turnId"].clone(), e["data"].clone())
}

#[test]
fn a_fork_copies_the_prefix_and_goes_on_while_the_original_is_untouched() {
    let host = Host::new("");
    let (id, token, first) = answered_session(&host);
    let cut = first.len() as u64;
    // A file the first turn's workspace holds: the fork gets a copy.
    let workspace = host.state().join(format!("bot/sessions/{id}/workspace"));
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("notes.txt"), "kept").unwrap();
    let before = events(&host, &id);

    let r = fork(&host, &id, json!({"atIndex": cut, "message": "again"}));
    assert_eq!(r.status, 200, "{}", r.body);
    let forked = r.json();
    let fork_id = forked["sessionId"].as_str().unwrap().to_owned();
    assert_ne!(fork_id, id);
    assert_eq!(
        forked["forkedFrom"],
        json!({"sessionId": id, "atIndex": cut})
    );
    assert!(
        forked["continuationToken"]
            .as_str()
            .unwrap()
            .starts_with("http:")
    );

    // The fork: the prefix (its own session id), `session.forked`, then
    // the new message's turn, which is the script's second turn (one
    // user message was already in the history).
    let done = host.wait_for(&fork_id, "session.waiting", |e| {
        e["index"].as_u64() > Some(cut)
    });
    let prefix: Vec<_> = done[..cut as usize].iter().map(kept).collect();
    let original: Vec<_> = before[..cut as usize].iter().map(kept).collect();
    assert_eq!(prefix, original);
    assert!(done.iter().all(|e| e["sessionId"] == fork_id.as_str()));
    assert_eq!(done[cut as usize]["type"], "session.forked");
    assert_eq!(
        done[cut as usize]["data"],
        json!({"fromSessionId": id, "atIndex": cut})
    );
    let text: Vec<_> = done
        .iter()
        .filter(|e| e["type"] == "message.completed")
        .map(|e| e["data"]["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(text.last().map(String::as_str), Some("resumed and done"));
    let fork_ws = host
        .state()
        .join(format!("bot/sessions/{fork_id}/workspace/notes.txt"));
    assert_eq!(std::fs::read_to_string(fork_ws).unwrap(), "kept");

    // The original is as it was, and goes on by itself.
    assert_eq!(events(&host, &id), before);
    let info = host.send(Request::get(&format!("/bot/v1/session/{fork_id}")));
    assert_eq!(
        info.json()["forkedFrom"],
        json!({"sessionId": id, "atIndex": cut})
    );
    let original_info = host.send(Request::get(&format!("/bot/v1/session/{id}")));
    assert!(
        original_info.json().get("forkedFrom").is_none(),
        "{}",
        original_info.body
    );
    let listed = host.send(Request::get("/bot/v1/sessions")).json();
    let ids: Vec<_> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap().to_owned())
        .collect();
    assert!(ids.contains(&fork_id) && ids.contains(&id), "{ids:?}");
    // Forking left the original's token alone.
    let r = host.send(
        Request::post(&format!("/bot/v1/session/{id}"))
            .json(&json!({"message": "two", "continuationToken": token})),
    );
    assert_eq!(r.status, 200, "{}", r.body);

    // A fork of the fork, at its end, with no message: nothing runs, the
    // log ends with its own `session.forked`.
    let fork_len = events(&host, &fork_id).len() as u64;
    let r = fork(&host, &fork_id, json!({"atIndex": fork_len}));
    assert_eq!(r.status, 200, "{}", r.body);
    let again = r.json()["sessionId"].as_str().unwrap().to_owned();
    let log = events(&host, &again);
    assert_eq!(log.len() as u64, fork_len + 1);
    assert_eq!(
        log.last().unwrap()["data"]["fromSessionId"],
        fork_id.as_str()
    );
    assert_eq!(
        log.iter().filter(|e| e["type"] == "session.forked").count(),
        2,
        "the fork's own `session.forked` is copied too"
    );
}

#[test]
fn a_fork_inside_a_turn_past_the_end_or_of_a_missing_session_is_refused() {
    let host = Host::new("");
    let (id, _, first) = answered_session(&host);
    let len = events(&host, &id).len() as u64;
    let requested = first
        .iter()
        .find(|e| e["type"] == "action.approval_requested")
        .unwrap()["index"]
        .as_u64()
        .unwrap();
    let r = fork(&host, &id, json!({"atIndex": requested}));
    assert_eq!(r.status, 409, "{}", r.body);
    let body = r.json();
    assert_eq!(body["error"]["code"], "inside_turn", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    let turn_end = first
        .iter()
        .find(|e| e["type"] == "turn.completed")
        .unwrap()["index"]
        .as_u64()
        .unwrap();
    assert!(
        message.contains(&format!("atIndex 1 or {}", turn_end + 1)),
        "the nearest boundaries are named: {message}"
    );
    for bad in [0, len + 1] {
        let r = fork(&host, &id, json!({"atIndex": bad}));
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
    let r = fork(&host, &id, json!({"at": 1}));
    assert_eq!(r.status, 400, "{}", r.body);
    let r = fork(&host, "ses_missing", json!({"atIndex": 1}));
    assert_eq!(r.status, 404, "{}", r.body);
    // Nothing was made by the refusals.
    let listed = host.send(Request::get("/bot/v1/sessions")).json();
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 1, "{listed}");
}

#[test]
fn a_stored_session_is_forked_after_a_restart() {
    let mut host = Host::new("");
    let (id, _, first) = answered_session(&host);
    host.restart();
    let r = fork(
        &host,
        &id,
        json!({"atIndex": first.len(), "message": "after"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let fork_id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let done = host.wait_for(&fork_id, "session.waiting", |e| {
        e["index"].as_u64() > Some(first.len() as u64)
    });
    assert_eq!(
        done.iter()
            .filter(|e| e["type"] == "message.received")
            .count(),
        2
    );
    // The fork's first turn after the copy is a new turn id.
    let turns: std::collections::BTreeSet<_> =
        done.iter().filter_map(|e| e["turnId"].as_str()).collect();
    assert_eq!(turns.len(), 2, "{turns:?}");
}
