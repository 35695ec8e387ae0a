//! Approvals over HTTP against a real server: a call parks, is listed,
//! is approved or denied live, is withdrawn when its turn is preempted,
//! and survives a restart: approving it afterwards runs the tool and
//! resumes the conversation from the event log.

use std::path::{Path, PathBuf};

use agentkit::{ServeHandle, ServeOptions};
use agentkit_test_support::http::{Request, Response};
use serde_json::{Value, json};

const ECHO_TOOL: &str = r#"description = "Echo, after a human agrees"
command = ["python3", "echo.py"]
needs_approval = true
[input_schema]
type = "object"
required = ["text"]
properties.text = { type = "string" }
"#;

const ECHO_PY: &str = r#"import json, sys
args = json.load(sys.stdin)
print(json.dumps({"echo": args["text"]}))
"#;

/// Turn 0 asks for the parked call, then answers; turn 1 is what a
/// resumed (or later) turn says; turn 2 holds until interrupted.
pub(super) const SCRIPT: &str = r#"{"turns": [
  {"steps": [{"toolCalls": [{"name": "echo", "input": {"text": "hi"}}]}, {"text": "after approval"}]},
  {"steps": [{"text": "resumed and done"}]},
  {"steps": [{"text": "slow", "delayMs": 30000}]}
]}"#;

pub(super) struct Host {
    dir: tempfile::TempDir,
    rt: tokio::runtime::Runtime,
    handle: Option<ServeHandle>,
}

impl Host {
    pub(super) fn new(agent_toml_extra: &str) -> Host {
        Host::with_script(agent_toml_extra, SCRIPT)
    }

    pub(super) fn with_script(agent_toml_extra: &str, script: &str) -> Host {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("agents/bot/agent");
        let files = [
            (
                "agent.toml",
                format!("model = \"scripted:script.json\"\n{agent_toml_extra}"),
            ),
            ("instructions.md", "You are a test agent.\n".to_owned()),
            ("script.json", script.to_owned()),
            ("tools/echo.toml", ECHO_TOOL.to_owned()),
            ("tools/echo.py", ECHO_PY.to_owned()),
        ];
        for (rel, text) in files {
            write(&project.join(rel), &text);
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let mut host = Host {
            dir,
            rt,
            handle: None,
        };
        host.start();
        host
    }

    /// The server's state root.
    pub(super) fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    pub(super) fn agents(&self) -> PathBuf {
        self.dir.path().join("agents")
    }

    pub(super) fn start(&mut self) {
        let options = ServeOptions {
            port: 0,
            state_root: Some(self.dir.path().join("state")),
            ..ServeOptions::default()
        };
        let handle = self
            .rt
            .block_on(agentkit::serve(&self.agents(), options))
            .unwrap();
        self.handle = Some(handle);
    }

    /// A graceful stop and a fresh server over the same state.
    pub(super) fn restart(&mut self) {
        if let Some(h) = self.handle.take() {
            self.rt.block_on(h.close());
        }
        self.start();
    }

    pub(super) fn addr(&self) -> std::net::SocketAddr {
        self.handle.as_ref().unwrap().local_addr()
    }

    pub(super) fn send(&self, req: Request) -> Response {
        req.send(self.handle.as_ref().unwrap().local_addr())
            .unwrap()
    }

    pub(super) fn create(&self, message: &str) -> Value {
        let r = self.send(Request::post("/bot/v1/session").json(&json!({"message": message})));
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()
    }

    /// Reads the stream from 0 until an event of type `t` satisfying
    /// `pred` arrives; returns everything up to it.
    pub(super) fn wait_for(&self, id: &str, t: &str, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
        let addr = self.handle.as_ref().unwrap().local_addr();
        let mut lines = Request::get(&format!("/bot/v1/session/{id}/stream?startIndex=0"))
            .stream(addr)
            .unwrap();
        let mut seen = Vec::new();
        loop {
            let event = lines
                .next_json()
                .unwrap()
                .unwrap_or_else(|| panic!("stream ended before {t}: {seen:#?}"));
            let hit = event["type"] == t && pred(&event);
            seen.push(event);
            if hit {
                return seen;
            }
        }
    }

    pub(super) fn approvals(&self, id: &str) -> Vec<Value> {
        let r = self.send(Request::get(&format!("/bot/v1/session/{id}/approvals")));
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()["approvals"].as_array().unwrap().clone()
    }

    pub(super) fn decide(&self, id: &str, call: &str, body: Value) -> Response {
        self.send(Request::post(&format!("/bot/v1/session/{id}/approvals/{call}")).json(&body))
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            self.rt.block_on(h.close());
        }
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn results(events: &[Value]) -> Vec<(Value, bool)> {
    events
        .iter()
        .filter(|e| e["type"] == "action.result")
        .map(|e| (e["data"]["output"].clone(), e["data"]["isError"] == true))
        .collect()
}

fn parked(host: &Host) -> (String, String) {
    let id = host.create("go")["sessionId"].as_str().unwrap().to_owned();
    let events = host.wait_for(&id, "action.approval_requested", |_| true);
    let call = events.last().unwrap()["data"]["callId"]
        .as_str()
        .unwrap()
        .to_owned();
    (id, call)
}

#[test]
fn a_live_approval_runs_the_call_and_the_turn_goes_on() {
    let host = Host::new("");
    let (id, call) = parked(&host);
    let pending = host.approvals(&id);
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0]["callId"], call.as_str());
    assert_eq!(pending[0]["toolName"], "echo");
    assert_eq!(pending[0]["input"], json!({"text": "hi"}));
    assert_eq!(pending[0]["live"], true);

    let r = host.decide(&id, &call, json!({"decision": "approve"}));
    assert_eq!(r.status, 200, "{}", r.body);
    let answer = r.json();
    assert_eq!(answer["decision"], "approve");
    assert_eq!(answer["resumed"], false);
    let by = answer["by"].as_str().unwrap().to_owned();
    assert!(!by.is_empty());

    let events = host.wait_for(&id, "turn.completed", |_| true);
    assert_eq!(events.last().unwrap()["data"]["result"], "after approval");
    let resolved = events
        .iter()
        .find(|e| e["type"] == "action.approval_resolved")
        .unwrap();
    assert_eq!(resolved["data"]["decision"], "approve");
    assert_eq!(resolved["data"]["by"], by.as_str());
    assert_eq!(results(&events), vec![(json!({"echo": "hi"}), false)]);
    assert!(host.approvals(&id).is_empty());
    // Nothing waits any more: the next start need not read this log.
    host.wait_for(&id, "session.waiting", |_| true);
    // The session index says so (the next start loads only parked ones).
    let db = rusqlite::Connection::open(host.dir.path().join("state/bot/agentkit.sqlite")).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let parked: i64 = db
            .query_row("SELECT parked FROM sessions WHERE id = ?1", [&id], |r| {
                r.get(0)
            })
            .unwrap();
        if parked == 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still parked");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }

    // Deciding twice, or on a call that never parked.
    let again = host.decide(&id, &call, json!({"decision": "deny"}));
    assert_eq!(
        (again.status, again.error_code()),
        (409, "approval_resolved".into())
    );
    let unknown = host.decide(&id, "nope", json!({"decision": "approve"}));
    assert_eq!(
        (unknown.status, unknown.error_code()),
        (404, "approval_not_found".into())
    );
    let bad = host.decide(&id, &call, json!({"decision": "yes"}));
    assert_eq!((bad.status, bad.error_code()), (400, "bad_request".into()));
}

#[test]
fn a_denial_reaches_the_model_with_its_reason() {
    let host = Host::new("");
    let (id, call) = parked(&host);
    let r = host.decide(
        &id,
        &call,
        json!({"decision": "deny", "reason": "not on a Friday"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let events = host.wait_for(&id, "turn.completed", |_| true);
    let found = results(&events);
    assert_eq!(found.len(), 1);
    let (output, is_error) = &found[0];
    assert!(is_error);
    let text = output.as_str().unwrap();
    assert!(
        text.starts_with("the call was denied by ") && text.ends_with(": not on a Friday"),
        "{text}"
    );
}

#[test]
fn a_preempted_turn_withdraws_its_parked_call() {
    let host = Host::new("");
    let (id, call) = parked(&host);
    let token = host.send(Request::get("/bot/v1/sessions")).json();
    assert_eq!(token["sessions"][0]["busy"], true);
    let stop = host.send(Request::post(&format!("/bot/v1/session/{id}/stop")).json(&json!({})));
    assert_eq!(stop.status, 200, "{}", stop.body);
    let events = host.wait_for(&id, "turn.failed", |_| true);
    let resolved = events
        .iter()
        .find(|e| e["type"] == "action.approval_resolved")
        .expect("the parked call is withdrawn");
    assert_eq!(resolved["data"]["decision"], "deny");
    assert_eq!(resolved["data"]["by"], "system");
    assert_eq!(resolved["data"]["reason"], "turn interrupted");
    assert!(host.approvals(&id).is_empty());
    let late = host.decide(&id, &call, json!({"decision": "approve"}));
    assert_eq!(late.status, 409, "{}", late.body);
}

#[test]
fn a_parked_call_survives_a_restart_and_approving_it_resumes_the_turn() {
    let mut host = Host::new("");
    let (id, call) = parked(&host);
    host.restart();

    // Still listed after the restart, no longer live.
    let pending = host.approvals(&id);
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0]["callId"], call.as_str());
    assert_eq!(pending[0]["live"], false);

    let r = host.decide(&id, &call, json!({"decision": "approve"}));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["resumed"], true);

    let events = host.wait_for(&id, "turn.completed", |_| true);
    // The first turn was cut short by the shutdown; the call ran on
    // approval, under that turn; a new turn resumed it.
    let first_turn = events
        .iter()
        .find(|e| e["type"] == "action.approval_requested")
        .unwrap()["turnId"]
        .clone();
    let failed = events.iter().find(|e| e["type"] == "turn.failed").unwrap();
    assert_eq!(failed["data"]["reason"], "shutdown");
    let result = events
        .iter()
        .find(|e| e["type"] == "action.result")
        .unwrap();
    assert_eq!(result["turnId"], first_turn);
    assert_eq!(result["data"]["output"], json!({"echo": "hi"}));
    let resumed = events
        .iter()
        .rev()
        .find(|e| e["type"] == "turn.started")
        .unwrap();
    assert_eq!(resumed["data"]["resumes"], first_turn);
    assert_eq!(events.last().unwrap()["data"]["result"], "resumed and done");

    // The conversation the next turn sees carries the approved result.
    let stored: Vec<agentkit::protocol::Event> = events
        .iter()
        .map(|e| serde_json::from_value(e.clone()).unwrap())
        .collect();
    let conversation = agentkit_runtime::conversation(&stored, &Default::default());
    let tool_message = conversation
        .iter()
        .find(|m| matches!(m, agentkit::protocol::Message::Tool { .. }))
        .expect("the tool result is part of the conversation");
    let agentkit::protocol::Message::Tool { output, .. } = tool_message else {
        unreachable!()
    };
    assert_eq!(output, &json!({"echo": "hi"}));
}

#[test]
fn an_approval_timeout_denies_a_call_left_parked_by_a_restart() {
    let mut host = Host::new("[harness]\napproval_timeout = \"2s\"\n");
    let (id, call) = parked(&host);
    host.restart();
    let events = host.wait_for(&id, "action.approval_resolved", |_| true);
    let resolved = events.last().unwrap();
    assert_eq!(resolved["data"]["callId"], call.as_str());
    assert_eq!(resolved["data"]["decision"], "deny");
    assert_eq!(resolved["data"]["by"], "timeout");
    assert_eq!(resolved["data"]["reason"], "timed out");
    // The model hears of the denial in a resumed turn.
    let events = host.wait_for(&id, "turn.completed", |_| true);
    assert_eq!(
        results(&events),
        vec![(json!("the call was denied by timeout: timed out"), true)]
    );
}

/// The typed client against the same server: every answer it reads is
/// the protocol's body (`Accepted`, `ApprovalList`, `ApprovalResolved`,
/// `ToolCalled`, `Stopped`, `Info`, `SessionList`), with the values the
/// server gave.
#[test]
fn the_client_reads_every_answer_as_the_protocol_types() {
    let host = Host::new("");
    let addr = host.handle.as_ref().unwrap().local_addr();
    let client = agentkit::client::Client::new(&format!("http://{addr}/bot"), None);
    let rt = &host.rt;

    let accepted = rt.block_on(client.create_session("go")).unwrap();
    let id = accepted.session_id.clone();
    assert!(accepted.ok && accepted.is_new && !accepted.coalesced);
    assert_eq!(accepted.stream_url, format!("/bot/v1/session/{id}/stream"));
    assert_eq!(accepted.trace_url, format!("/bot/v1/session/{id}/events"));
    let events = host.wait_for(&id, "action.approval_requested", |_| true);
    let call = events.last().unwrap()["data"]["callId"]
        .as_str()
        .unwrap()
        .to_owned();

    let listed = rt.block_on(client.approvals(&id)).unwrap();
    assert_eq!((listed.ok, listed.session_id.as_str()), (true, id.as_str()));
    let [pending] = listed.approvals.as_slice() else {
        panic!("{listed:?}");
    };
    assert_eq!(
        (
            pending.call_id.as_str(),
            pending.tool_name.as_str(),
            pending.live
        ),
        (call.as_str(), "echo", true)
    );
    assert_eq!(pending.input, json!({"text": "hi"}));

    let resolved = rt
        .block_on(client.resolve_approval(&id, &call, false, Some("not now")))
        .unwrap();
    assert_eq!(
        (
            resolved.ok,
            resolved.session_id.as_str(),
            resolved.call_id.as_str(),
            resolved.decision.as_str(),
            resolved.resumed
        ),
        (true, id.as_str(), call.as_str(), "deny", false)
    );
    host.wait_for(&id, "session.waiting", |_| true);
    // Deciding twice is refused with the server's code.
    let again = rt
        .block_on(client.resolve_approval(&id, &call, true, None))
        .unwrap_err();
    assert_eq!(again.code(), Some("approval_resolved"), "{again}");

    // A direct call: no approval, a typed envelope.
    let called = rt
        .block_on(client.call_tool("echo", &json!({"text": "direct"}), None))
        .unwrap();
    assert_eq!(
        (called.ok, called.tool_name.as_str(), called.is_error),
        (true, "echo", false)
    );
    assert_eq!(called.result, json!({"echo": "direct"}));

    // Nothing runs: stopping interrupts nothing.
    let stopped = rt.block_on(client.stop(&id)).unwrap();
    assert_eq!(
        (stopped.ok, stopped.session_id.as_str(), stopped.interrupted),
        (true, id.as_str(), false)
    );
    // A follow-up (script turn 1), then one that holds (turn 2): stopping
    // it interrupts it.
    let next = rt
        .block_on(client.follow_up(&id, &accepted.continuation_token, "again"))
        .unwrap();
    assert!(!next.is_new);
    let turns = std::cell::Cell::new(0);
    host.wait_for(&id, "turn.completed", |_| {
        turns.set(turns.get() + 1);
        turns.get() == 2
    });
    rt.block_on(client.follow_up(&id, &next.continuation_token, "hold"))
        .unwrap();
    let turns = std::cell::Cell::new(0);
    host.wait_for(&id, "turn.started", |_| {
        turns.set(turns.get() + 1);
        turns.get() == 3
    });
    let stopped = rt.block_on(client.stop(&id)).unwrap();
    assert!(stopped.interrupted, "{stopped:?}");

    let info = rt.block_on(client.info()).unwrap();
    assert_eq!(info.slug, "bot");
    assert!(info.channels.is_empty(), "{:?}", info.channels);
    assert_eq!(info.mcp.path, "/bot/v1/mcp");
    assert!(info.caller.is_some());
    let sessions = rt.block_on(client.sessions()).unwrap();
    assert!(sessions.ok);
    assert_eq!(
        sessions
            .sessions
            .iter()
            .map(|s| s.session_id.as_str())
            .collect::<Vec<_>>(),
        [id.as_str()]
    );
}

#[test]
fn approvals_are_listed_newest_first_in_pages_that_follow_the_cursor() {
    let host = Host::with_script(
        "",
        r#"{"turns": [{"steps": [{"toolCalls": [
            {"name": "echo", "input": {"text": "a"}},
            {"name": "echo", "input": {"text": "b"}},
            {"name": "echo", "input": {"text": "c"}}
        ]}, {"text": "done"}]}]}"#,
    );
    let id = host.create("go")["sessionId"].as_str().unwrap().to_owned();
    let parked = std::cell::Cell::new(0);
    host.wait_for(&id, "action.approval_requested", |_| {
        parked.set(parked.get() + 1);
        parked.get() == 3
    });
    let all = host.approvals(&id);
    assert_eq!(all.len(), 3, "{all:#?}");
    let key = |a: &Value| format!("{}\n{}", a["requestedAt"], a["callId"]);
    assert!(
        all.windows(2).all(|w| key(&w[0]) > key(&w[1])),
        "not newest first: {all:#?}"
    );
    let page = |query: &str| {
        let r = host.send(Request::get(&format!(
            "/bot/v1/session/{id}/approvals?{query}"
        )));
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()
    };
    let first = page("limit=2");
    assert_eq!(first["approvals"].as_array().unwrap()[..], all[..2]);
    let cursor = first["nextCursor"].as_str().unwrap();
    let second = page(&format!("limit=2&cursor={cursor}"));
    assert_eq!(second["approvals"].as_array().unwrap()[..], all[2..]);
    assert!(second.get("nextCursor").is_none(), "{second}");
    assert!(page("").get("nextCursor").is_none());
    for bad in ["limit=0", "cursor=s1zz", "limit=x"] {
        let r = host.send(Request::get(&format!(
            "/bot/v1/session/{id}/approvals?{bad}"
        )));
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
}
