//! Operators over HTTP against a real server: the `--operator-token`
//! holder, and the loopback caller under `--dev`, list, read, stream,
//! follow up, stop and resolve approvals on a session an `allow_all`
//! channel made for `anonymous`; each action is recorded with who did it,
//! `/v1/info` says who is an operator, and a non-operator is still refused.

use agentkit::ServeOptions;
use agentkit_test_support::http::{Request, Response};
use serde_json::{Value, json};

use super::http::{Server, server};

/// Turn 0 parks a call and finishes after it; later turns answer at once,
/// except turn 2, which holds until it is stopped.
const SCRIPT: &str = r#"{"turns": [
  {"steps": [{"toolCalls": [{"name": "echo", "input": {"text": "hi"}}]}, {"text": "after approval"}]},
  {"steps": [{"text": "second"}]},
  {"steps": [{"text": "slow", "delayMs": 30000}]},
  {"steps": [{"text": "fourth"}]}
]}"#;

const ECHO_TOOL: &str = r#"description = "Echo, after a human agrees"
command = ["python3", "echo.py"]
needs_approval = true
[input_schema]
type = "object"
required = ["text"]
properties.text = { type = "string" }
"#;

const ECHO_PY: &str = r#"import json, sys
print(json.dumps({"echo": json.load(sys.stdin)["text"]}))
"#;

/// A public intake channel: whoever posts is `anonymous`.
const INTAKE: &str = r#"auth = ["allow_all"]
[[routes]]
method = "POST"
path = "/report"
[routes.body_schema]
type = "object"
required = ["text"]
properties.text = { type = "string" }
[routes.send]
message = "{{ body.text }}"
continuation = "report:{{ body.text }}"
"#;

fn host(http_toml: Option<&str>, options: ServeOptions) -> Server {
    let mut files = vec![
        ("script.json", SCRIPT),
        ("tools/echo.toml", ECHO_TOOL),
        ("tools/echo.py", ECHO_PY),
        ("channels/intake.toml", INTAKE),
    ];
    if let Some(http) = http_toml {
        files.push(("channels/http.toml", http));
    }
    server(&files, options)
}

fn send(s: &Server, req: Request) -> Response {
    req.send(s.addr()).unwrap()
}

/// A session made by an anonymous caller of the intake channel, parked on
/// its approval.
fn anonymous_session(s: &Server, as_operator: &dyn Fn(Request) -> Request) -> (String, String) {
    let r = send(
        s,
        Request::post("/bot/v1/channels/intake/report")
            .host("intake.example")
            .header("x-forwarded-for", "203.0.113.5")
            .json(&json!({"text": "disk full"})),
    );
    // A send route answers 202: accepted, the turn runs on.
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let events = until(s, &id, as_operator, "action.approval_requested");
    let call = events.last().unwrap()["data"]["callId"]
        .as_str()
        .unwrap()
        .to_owned();
    (id, call)
}

/// The session's stream, replayed from 0 as the operator, up to the
/// `n`-th event of type `t`.
fn until_nth(
    s: &Server,
    id: &str,
    as_operator: &dyn Fn(Request) -> Request,
    t: &str,
    n: usize,
) -> Vec<Value> {
    let req = as_operator(Request::get(&format!(
        "/bot/v1/session/{id}/stream?startIndex=0"
    )));
    let mut lines = req.stream(s.addr()).unwrap();
    assert_eq!(lines.status, 200);
    let mut seen = Vec::new();
    let mut hits = 0;
    loop {
        let event = lines
            .next_json()
            .unwrap()
            .unwrap_or_else(|| panic!("stream ended before {t}: {seen:#?}"));
        let hit = event["type"] == t;
        seen.push(event);
        if hit {
            hits += 1;
            if hits == n {
                return seen;
            }
        }
    }
}

fn until(s: &Server, id: &str, as_operator: &dyn Fn(Request) -> Request, t: &str) -> Vec<Value> {
    until_nth(s, id, as_operator, t, 1)
}

/// Everything an operator may do to `id`, checked through the API, with
/// `by` the label its actions are recorded under.
fn operate(s: &Server, id: &str, call: &str, op: &dyn Fn(Request) -> Request, by: &str) {
    // Listed with its owner.
    let list = send(s, op(Request::get("/bot/v1/sessions"))).json();
    let listed = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["sessionId"] == id)
        .unwrap_or_else(|| panic!("{list}"))
        .clone();
    assert_eq!(listed["principalId"], "anonymous");
    assert_eq!(listed["channel"], "intake");
    let meta = send(s, op(Request::get(&format!("/bot/v1/session/{id}"))));
    assert_eq!(meta.status, 200, "{}", meta.body);
    assert_eq!(meta.json()["principalId"], "anonymous");
    // The whole log replays.
    let events = send(s, op(Request::get(&format!("/bot/v1/session/{id}/events"))));
    assert_eq!(events.status, 200);
    assert!(events.body.contains("action.approval_requested"));
    // The approval is listed and resolved; the decision names the operator.
    let pending = send(
        s,
        op(Request::get(&format!("/bot/v1/session/{id}/approvals"))),
    );
    assert_eq!(pending.json()["approvals"][0]["callId"], call);
    let r = send(
        s,
        op(Request::post(&format!(
            "/bot/v1/session/{id}/approvals/{call}"
        )))
        .json(&json!({"decision": "approve"})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["by"], by);
    let events = until(s, id, op, "turn.completed");
    assert_eq!(events.last().unwrap()["data"]["result"], "after approval");
    let resolved = events
        .iter()
        .find(|e| e["type"] == "action.approval_resolved")
        .unwrap();
    assert_eq!(resolved["data"]["by"], by);
    // A follow-up into the channel session: recorded as from the operator.
    let r = send(
        s,
        op(Request::post(&format!("/bot/v1/session/{id}"))).json(&json!({"message": "status?"})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let events = until_nth(s, id, op, "turn.completed", 2);
    let received: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "message.received")
        .collect();
    assert_eq!(received[0]["data"].get("from"), None);
    assert_eq!(received[1]["data"], json!({"text": "status?", "from": by}));
    assert_eq!(events.last().unwrap()["data"]["result"], "second");
    // The slow turn is stopped by the operator.
    send(
        s,
        op(Request::post(&format!("/bot/v1/session/{id}"))).json(&json!({"message": "slow"})),
    );
    until_nth(s, id, op, "turn.started", 3);
    let r = send(s, op(Request::post(&format!("/bot/v1/session/{id}/stop"))));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["interrupted"], true);
    let events = until(s, id, op, "turn.failed");
    assert_eq!(events.last().unwrap()["data"]["reason"], "stopped");
    assert_eq!(events.last().unwrap()["data"]["by"], by);
}

/// A non-operator gets `403` on every route of someone else's session and
/// does not see it listed.
fn refused(s: &Server, id: &str, call: &str, who: &dyn Fn(Request) -> Request) {
    for req in [
        Request::get(&format!("/bot/v1/session/{id}")),
        Request::get(&format!("/bot/v1/session/{id}/events")),
        Request::get(&format!("/bot/v1/session/{id}/stream")),
        Request::get(&format!("/bot/v1/session/{id}/approvals")),
        Request::post(&format!("/bot/v1/session/{id}/approvals/{call}"))
            .json(&json!({"decision": "approve"})),
        Request::post(&format!("/bot/v1/session/{id}")).json(&json!({"message": "x"})),
        Request::post(&format!("/bot/v1/session/{id}/stop")),
    ] {
        let r = send(s, who(req));
        assert_eq!(
            (r.status, r.error_code()),
            (403, "forbidden".to_owned()),
            "{}",
            r.body
        );
    }
    let list = send(s, who(Request::get("/bot/v1/sessions"))).json();
    assert!(
        list["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x["sessionId"] != id && x.get("principalId").is_none()),
        "{list}"
    );
}

#[test]
fn the_operator_token_holder_acts_on_an_anonymous_session() {
    let s = host(
        None,
        ServeOptions {
            operator_token: Some("op-7f3a9c".into()),
            ..ServeOptions::default()
        },
    );
    let op = |r: Request| r.bearer("op-7f3a9c");
    let (id, call) = anonymous_session(&s, &op);
    // The local caller (the default chain) is no operator here.
    let plain = |r: Request| r;
    refused(&s, &id, &call, &plain);
    // A wrong operator token is no credential at all from afar.
    let far = |r: Request| {
        r.bearer("op-7f3a9d")
            .host("agents.example")
            .header("x-forwarded-for", "203.0.113.9")
    };
    assert_eq!(send(&s, far(Request::get("/bot/v1/sessions"))).status, 401);
    // /v1/info says who is asking.
    let info = send(&s, op(Request::get("/bot/v1/info"))).json();
    assert_eq!(
        info["caller"],
        json!({"principalId": "operator", "principalType": "operator",
               "authenticator": "operatorToken", "operator": true, "role": "admin"})
    );
    let info = send(&s, Request::get("/bot/v1/info")).json();
    assert_eq!(info["caller"]["operator"], false);
    assert_eq!(info["caller"]["principalId"], "local");
    // The token works from a remote-looking peer, as a credential should.
    let remote_op = |r: Request| {
        op(r)
            .host("agents.example")
            .header("x-forwarded-for", "203.0.113.9")
    };
    operate(&s, &id, &call, &remote_op, "operator:operator");
}

#[test]
fn an_operator_follows_up_an_http_session_without_its_token() {
    let s = host(
        None,
        ServeOptions {
            operator_token: Some("op-7f3a9c".into()),
            ..ServeOptions::default()
        },
    );
    // The local user's own HTTP session, parked on turn 0.
    let r = send(
        &s,
        Request::post("/bot/v1/session").json(&json!({"message": "go"})),
    );
    let created = r.json();
    let id = created["sessionId"].as_str().unwrap().to_owned();
    let token = created["continuationToken"].as_str().unwrap().to_owned();
    let op = |r: Request| r.bearer("op-7f3a9c");
    let parked = until(&s, &id, &op, "action.approval_requested");
    let call = parked.last().unwrap()["data"]["callId"].as_str().unwrap();
    let r = send(
        &s,
        Request::post(&format!("/bot/v1/session/{id}/approvals/{call}"))
            .json(&json!({"decision": "deny", "reason": "not now"})),
    );
    assert_eq!(r.json()["by"], "local");
    until(&s, &id, &op, "turn.completed");
    let r = send(
        &s,
        op(Request::post(&format!("/bot/v1/session/{id}"))).json(&json!({"message": "ping"})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    until_nth(&s, &id, &op, "turn.completed", 2);
    // The owner's token was not rotated by the operator's message.
    let r = send(
        &s,
        Request::post(&format!("/bot/v1/session/{id}"))
            .json(&json!({"message": "mine", "continuationToken": token})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // A session the operator starts is stored as its principal's, as a
    // plain user: its reach is not inherited by whatever acts as the owner.
    let r = send(
        &s,
        op(Request::post("/bot/v1/session")).json(&json!({"message": "mine"})),
    );
    let own = r.json()["sessionId"].as_str().unwrap().to_owned();
    let db = rusqlite::Connection::open(s._dir.path().join("state/bot/agentkit.sqlite")).unwrap();
    let meta: String = db
        .query_row("SELECT meta FROM sessions WHERE id = ?1", [&own], |r| {
            r.get(0)
        })
        .unwrap();
    let meta: Value = serde_json::from_str(&meta).unwrap();
    assert_eq!(meta["owner"]["principalId"], "operator");
    assert_eq!(meta["owner"]["principalType"], "user");
    // Without the operator token, a tokenless follow-up stays refused.
    let r = send(
        &s,
        Request::post(&format!("/bot/v1/session/{id}")).json(&json!({"message": "x"})),
    );
    assert_eq!(r.status, 409, "{}", r.body);
}

#[test]
fn under_dev_the_loopback_caller_is_the_operator() {
    let http = r#"kind = "http"
auth = ["local_dev_strict", { bearer = { tokens = { alice = "token-a" } } }]
"#;
    let s = host(
        Some(http),
        ServeOptions {
            dev: true,
            ..ServeOptions::default()
        },
    );
    let local = |r: Request| r;
    let (id, call) = anonymous_session(&s, &local);
    // Alice, from afar, is admitted but owns nothing here.
    let alice = |r: Request| {
        r.bearer("token-a")
            .host("agents.example")
            .header("x-forwarded-for", "203.0.113.9")
    };
    refused(&s, &id, &call, &alice);
    let info = send(&s, alice(Request::get("/bot/v1/info"))).json();
    assert_eq!(info["caller"]["principalId"], "alice");
    assert_eq!(info["caller"]["operator"], false);
    let info = send(&s, Request::get("/bot/v1/info")).json();
    assert_eq!(info["caller"]["principalId"], "local");
    assert_eq!(info["caller"]["operator"], true);
    operate(&s, &id, &call, &local, "operator:local");
}

#[test]
fn the_operator_token_must_differ_from_the_bearer_token() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("bot");
    let agent = project.join("agent");
    super::http::write(&agent.join("agent.toml"), "model = \"test\"\n");
    super::http::write(&agent.join("instructions.md"), "Test.\n");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let err = rt
        .block_on(agentkit::serve(
            &project,
            ServeOptions {
                port: 0,
                bearer_token: Some("same".into()),
                operator_token: Some("same".into()),
                ..ServeOptions::default()
            },
        ))
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("operator token must differ"),
        "{err}"
    );
}

#[test]
fn a_steps_context_is_rebuilt_for_an_operator() {
    let s = host(
        None,
        ServeOptions {
            operator_token: Some("op-7f3a9c".into()),
            ..ServeOptions::default()
        },
    );
    let op = |r: Request| r.bearer("op-7f3a9c");
    let (id, call) = anonymous_session(&s, &op);
    let r = send(
        &s,
        op(Request::post(&format!(
            "/bot/v1/session/{id}/approvals/{call}"
        )))
        .json(&json!({"decision": "approve"})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let events = until(&s, &id, &op, "turn.completed");
    let turn = events.last().unwrap()["turnId"]
        .as_str()
        .unwrap()
        .to_owned();
    let context = |step: u32, who: &dyn Fn(Request) -> Request| {
        send(
            &s,
            who(Request::get(&format!(
                "/bot/v1/session/{id}/context?turnId={turn}&step={step}"
            ))),
        )
    };
    let first = context(1, &op);
    assert_eq!(first.status, 200, "{}", first.body);
    let first = first.json();
    assert_eq!(first["system"], "You are a test agent.");
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools[0], "echo", "{tools:?}");
    assert_eq!(
        first["tools"][0]["inputSchema"]["required"],
        json!(["text"])
    );
    assert_eq!(
        first["conversation"],
        json!([{"role": "user", "text": "disk full"}])
    );
    // The second step saw the first one's call and its result.
    let second = context(2, &op).json();
    let conversation = second["conversation"].as_array().unwrap();
    assert_eq!(conversation.len(), 3, "{conversation:#?}");
    assert_eq!(conversation[1]["toolCalls"][0]["toolName"], "echo");
    assert_eq!(
        conversation[1]["toolCalls"][0]["input"],
        json!({"text": "hi"})
    );
    assert_eq!(conversation[2]["output"], json!({"echo": "hi"}));
    let size = &second["size"];
    assert_eq!(size["messages"], 3);
    assert_eq!(size["systemChars"], "You are a test agent.".len());
    assert!(
        size["conversationChars"].as_u64().unwrap()
            > first["size"]["conversationChars"].as_u64().unwrap()
    );
    let total = size["systemChars"].as_u64().unwrap()
        + size["toolsChars"].as_u64().unwrap()
        + size["conversationChars"].as_u64().unwrap();
    // The harness's own estimate: about a quarter of what is sent.
    let estimate = size["approxTokens"].as_u64().unwrap();
    assert!(
        estimate > total / 8 && estimate < total,
        "{estimate} for {total} chars"
    );
    assert_eq!(size["trimmed"], false);
    // No such step; and not for a caller who is no operator (off --dev),
    // even on their own session.
    assert_eq!(context(3, &op).status, 404);
    let mine = send(
        &s,
        Request::post("/bot/v1/session").json(&json!({"message": "go"})),
    );
    let mine = mine.json()["sessionId"].as_str().unwrap().to_owned();
    let r = send(
        &s,
        Request::get(&format!("/bot/v1/session/{mine}/context?turnId=x&step=1")),
    );
    assert_eq!((r.status, r.error_code()), (403, "forbidden".to_owned()));
}
