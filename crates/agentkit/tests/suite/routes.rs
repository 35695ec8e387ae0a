//! Programmable routes and host code over real HTTP and real children:
//! a host-only tool absent from the provider's request and refused to the
//! model, yet callable by a route and `POST /v1/tools`; route handlers
//! that answer plain JSON, fail without leaking their stderr, see only the
//! headers they asked for, and use the bridge's `get_session` and
//! `emit_assistant_message`; bridge refusals; the tool form and the
//! command form of schedules reporting their sessions and outcome on a
//! cron tick and by hand; and `HostServices::sessions` for Rust code.

use agentkit::ServeOptions;
use agentkit_test_support::http::Request;
use agentkit_test_support::provider::{MockProvider, Step};
use serde_json::{Value, json};

use super::time::{Host, at, wait_until};

const KEY: &str = "sk-mock-secret-key";

/// The bridge client every program below uses (cwd is the agent folder
/// for handlers and schedules, so they import it from `lib/`).
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

const APPROVE_TOOL: &str = r#"description = "Approves a fix (host only)"
expose = "host"
command = ["python3", "-c", "import json,sys; a=json.load(sys.stdin); print(json.dumps({'approved': a['id']}))"]
[input_schema]
type = "object"
required = ["id"]
properties.id = { type = "string" }
"#;

const ECHO_TOOL: &str = r#"description = "Echo the word"
command = ["python3", "-c", "import json,sys; print(json.dumps({'echo': json.load(sys.stdin)['word']}))"]
[input_schema]
type = "object"
required = ["word"]
properties.word = { type = "string" }
"#;

const APPROVE_ROUTE: &str = r#"kind = "webhook"
[[routes]]
method = "POST"
path = "/approve/:id"
[routes.body_schema]
type = "object"
[routes.call_tool]
tool = "approve_fix"
input = { id = "{{ params.id }}" }
"#;

#[test]
fn a_host_only_tool_is_never_offered_to_the_model_but_the_host_can_call_it() {
    let mock = MockProvider::start(vec![
        // The model names the host-only tool anyway (it cannot know it,
        // but a model may guess): the call is refused, nothing runs.
        Step::new()
            .call("call_1", "approve_fix", &json!({"id": "x"}))
            .into(),
        Step::text("I cannot approve.").into(),
    ]);
    let mut providers = agentkit::ProviderConfig::default();
    providers.openai.base_url = mock.openai_base_url();
    providers.openai.api_key = Some(KEY.into());
    let files: Vec<(&str, &str)> = vec![
        (
            "agent.toml",
            "model = \"openai:gpt-mock\"\n[harness]\nbuiltin_tools = []\n",
        ),
        ("instructions.md", "You fix things.\n"),
        ("tools/echo.toml", ECHO_TOOL),
        ("tools/approve_fix.toml", APPROVE_TOOL),
        ("channels/ops.toml", APPROVE_ROUTE),
    ];
    let h = super::mcp::host(
        &[("bot", &files)],
        ServeOptions {
            providers,
            ..ServeOptions::default()
        },
    );
    let created = h.send(Request::post("/bot/v1/session").json(&json!({"message": "approve x"})));
    assert_eq!(created.status, 200, "{}", created.body);
    let id = created.json()["sessionId"].as_str().unwrap().to_owned();
    let events = Request::get(&format!("/bot/v1/session/{id}/stream"))
        .stream(h.addr())
        .unwrap()
        .until("session.waiting")
        .unwrap();

    // Every request the provider saw offered `echo` only.
    let bodies = mock.bodies();
    assert_eq!(bodies.len(), 2, "{bodies:?}");
    for body in &bodies {
        let names: Vec<&str> = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["echo"], "{body}");
    }
    let result = events
        .iter()
        .find(|e| e["type"] == "action.result")
        .unwrap();
    assert_eq!(result["data"]["isError"], true, "{result}");
    assert_eq!(result["data"]["output"], "unknown tool `approve_fix`");

    // The host calls it: `POST /v1/tools/:name` and a route's `call_tool`.
    let r =
        h.send(Request::post("/bot/v1/tools/approve_fix").json(&json!({"input": {"id": "a1"}})));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["result"], json!({"approved": "a1"}));
    let r = h.send(Request::post("/bot/v1/channels/ops/approve/b2").json(&json!({})));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["result"], json!({"approved": "b2"}));

    // The agent's MCP server does not list it to its clients either, and
    // refuses it there.
    let listed = super::mcp::rpc_raw(&h, "/bot/v1/mcp", "tools/list", json!({}), &[]);
    let text = listed.body.clone();
    assert!(text.contains("echo"), "{text}");
    assert!(!text.contains("approve_fix"), "{text}");
}

/// A scripted agent `bot` with the bridge client in `lib/` plus `files`.
fn bot(files: &[(&str, &str)]) -> Host {
    let script = r#"{"turns": [{"steps": [{"text": "first"}]}, {"steps": [{"text": "second"}]}, {"steps": [{"text": "third"}]}]}"#;
    let mut all = vec![("lib/bridge.py", BRIDGE_PY)];
    all.extend_from_slice(files);
    Host::new(script, &all, at(12, 0, 30))
}

const DESK: &str = r#"kind = "webhook"
auth = [{ bearer = { token = "desk-token", principal = "desk" } }]
[state]
greeting = "hello"
[[routes]]
method = "POST"
path = "/tickets"
[routes.body_schema]
type = "object"
required = ["subject"]
[routes.send]
message = "{{ body.subject }}"
continuation = "ticket:{{ body.subject }}"
[[routes]]
method = "POST"
path = "/tickets/:key/reply"
[routes.body_schema]
type = "object"
required = ["text"]
[routes.handler]
command = ["python3", "lib/reply.py"]
headers = ["x-desk-agent"]
[[routes]]
method = "POST"
path = "/broken"
[routes.body_schema]
type = "object"
[routes.handler]
command = ["sh", "-c", "echo 'secret-db-password leaked' >&2; exit 4"]
[[routes]]
method = "GET"
path = "/whoami"
[routes.query_schema]
type = "object"
[routes.handler]
command = ["python3", "-c", "import json,sys,os; r=json.load(sys.stdin); print(json.dumps({'principal': r['principal']['principalId'], 'headers': r['headers'], 'query': r['query'], 'state': r['state'], 'channel': os.environ.get('AGENTKIT_CHANNEL_ID')}))"]
"#;

/// Finds the ticket's session over the bridge, reads it, and appends the
/// reply as an assistant message (no model turn).
const REPLY_PY: &str = r#"import json, sys
import bridge
req = json.load(sys.stdin)
status, sent = bridge.call("POST", "/v1/send", {"channel": "desk", "message": "reply requested", "continuation": "ticket:" + req["params"]["key"]})
sid = sent["sessionId"]
status, got = bridge.call("GET", "/v1/sessions/" + sid)
import time
for _ in range(500):
    status, got = bridge.call("GET", "/v1/sessions/" + sid)
    if not got["session"]["busy"]:
        break
    time.sleep(0.02)
status, emitted = bridge.call("POST", "/v1/sessions/" + sid + "/messages", {"text": req["body"]["text"]})
status, bad = bridge.call("POST", "/v1/send", {"channel": "nowhere", "message": "x"})
status2, http_key = bridge.call("POST", "/v1/send", {"message": "x", "continuation": "k"})
print(json.dumps({"status": 201, "headers": {"x-reply": "done"}, "body": {
    "sessionId": sid, "isNew": sent["isNew"], "channel": got["session"]["channel"],
    "owner": got["session"]["principalId"], "turnId": emitted.get("turnId"),
    "unknownChannel": [status, bad["error"]["code"]], "httpKey": [status2, http_key["error"]["code"]],
    "agentHeader": req["headers"].get("x-desk-agent")}}))
"#;

#[test]
fn route_handlers_answer_fail_quietly_and_reach_sessions_through_the_bridge() {
    let mut h = bot(&[("channels/desk.toml", DESK), ("lib/reply.py", REPLY_PY)]);
    h.start(ServeOptions::default());
    let r = h.send(
        Request::post("/bot/v1/channels/desk/tickets")
            .bearer("desk-token")
            .json(&json!({"subject": "T-1"})),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let session = r.json()["sessionId"].as_str().unwrap().to_owned();

    let r = h.send(
        Request::post("/bot/v1/channels/desk/tickets/T-1/reply")
            .bearer("desk-token")
            .header("x-desk-agent", "ana")
            .json(&json!({"text": "We are on it."})),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.header("x-reply"), Some("done"));
    let body = r.json();
    assert_eq!(body["sessionId"], session.as_str(), "{body}");
    assert_eq!(body["isNew"], false);
    assert_eq!(body["channel"], "desk");
    assert_eq!(body["owner"], "desk");
    assert!(body["turnId"].is_string(), "{body}");
    assert_eq!(body["unknownChannel"], json!([404, "not_found"]));
    assert_eq!(body["httpKey"], json!([400, "bad_request"]));
    assert_eq!(body["agentHeader"], "ana");
    wait_until("the emitted reply", || {
        h.events(&session)
            .iter()
            .any(|e| e["type"] == "message.completed" && e["data"]["text"] == "We are on it.")
    });

    // A failing handler: 502, and its stderr stays in the server log.
    let r = h.send(
        Request::post("/bot/v1/channels/desk/broken")
            .bearer("desk-token")
            .json(&json!({})),
    );
    assert_eq!(r.status, 502, "{}", r.body);
    assert_eq!(r.error_code(), "upstream_error");
    assert!(!r.body.contains("secret-db-password"), "{}", r.body);

    // Plain JSON is a 200 body; only the listed headers reach the program
    // (here none, so not the bearer token); the channel's state does.
    let r = h.send(
        Request::get("/bot/v1/channels/desk/whoami?team=ops")
            .bearer("desk-token")
            .header("x-desk-agent", "ana"),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json(),
        json!({"principal": "desk", "headers": {}, "query": {"team": "ops"}, "state": {"greeting": "hello"}, "channel": "desk"})
    );
}

const RELAY_TOOL: &str = r#"description = "Sends a sweep note into the desk channel"
expose = "host"
command = ["python3", "relay.py"]
"#;

const RELAY_PY: &str = r#"import json, os, sys, urllib.request
req = urllib.request.Request(os.environ["AGENTKIT_HOST_URL"] + "/v1/send", method="POST",
    data=json.dumps({"channel": "desk", "message": "relayed", "continuation": "ticket:relay"}).encode(),
    headers={"authorization": "Bearer " + os.environ["AGENTKIT_HOST_TOKEN"], "content-type": "application/json"})
with urllib.request.urlopen(req) as r:
    print(r.read().decode())
"#;

const SWEEP_PY: &str = r#"import json, sys
import bridge
run = json.load(sys.stdin)
status, sent = bridge.call("POST", "/v1/send", {"channel": "desk", "message": "swept at %s by %s" % (run["tick"], run["principal"]["id"]), "continuation": "ticket:sweep"})
status, tool = bridge.call("POST", "/v1/tools/relay", {"input": {}})
assert tool["isError"] is False, tool
print(json.dumps({"sent": sent["sessionId"]}))
"#;

fn schedule_of(h: &Host, id: &str) -> Value {
    h.send(Request::get("/bot/v1/info")).json()["schedules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id)
        .unwrap()
        .clone()
}

fn schedule_files() -> Vec<(&'static str, &'static str)> {
    vec![
        ("channels/desk.toml", DESK),
        ("tools/relay.toml", RELAY_TOOL),
        ("tools/relay.py", RELAY_PY),
        ("lib/sweep.py", SWEEP_PY),
        (
            "schedules/sweep.toml",
            "cron = \"*/5 * * * *\"\ncommand = [\"python3\", \"lib/sweep.py\"]\ntimeout = \"20s\"\n",
        ),
        (
            "schedules/relay.toml",
            "cron = \"0 9 * * *\"\n[tool]\nname = \"relay\"\n",
        ),
        (
            "schedules/broken.toml",
            "cron = \"0 9 * * *\"\ncommand = [\"sh\", \"-c\", \"echo 'sweep failed: no database' >&2; exit 3\"]\n",
        ),
    ]
}

#[test]
fn command_and_tool_schedules_report_their_sessions_and_outcome() {
    let mut h = bot(&schedule_files());
    h.start(ServeOptions {
        dev: true,
        ..ServeOptions::default()
    });
    // The tool form: its tool's bridge send is the run's session, and a
    // dispatch counts as a firing.
    let r = h.send(Request::post("/bot/v1/dev/schedules/relay"));
    assert_eq!(r.status, 200, "{}", r.body);
    let relay = r.json()["sessionIds"].as_array().unwrap().clone();
    assert_eq!(relay.len(), 1, "{}", r.body);
    let info = schedule_of(&h, "relay");
    assert_eq!(info["lastRun"]["outcome"], "ok", "{info}");
    assert_eq!(info["lastRun"]["sessionIds"], json!(relay));
    assert!(info["lastFiredAt"].is_string(), "{info}");
    let relay_session = relay[0].as_str().unwrap();
    // The session belongs to the schedule's principal: the dispatching
    // caller under --dev.
    let started = &h.events(relay_session)[0];
    assert_eq!(started["data"]["channel"], "desk");

    // The command form: a send and a tool call through the bridge; the
    // tool's own send is one more session of the run.
    let r = h.send(Request::post("/bot/v1/dev/schedules/sweep"));
    assert_eq!(r.status, 200, "{}", r.body);
    let ids = r.json()["sessionIds"].as_array().unwrap().clone();
    assert_eq!(ids.len(), 2, "{}", r.body);
    assert!(ids.contains(&json!(relay_session)), "{}", r.body);
    let swept = ids.iter().find(|s| **s != json!(relay_session)).unwrap();
    let first = h
        .events(swept.as_str().unwrap())
        .into_iter()
        .find(|e| e["type"] == "message.received")
        .unwrap();
    assert_eq!(first["data"]["text"], "swept at None by local", "{first}");

    // A failing command: the dispatch answers its error; `/v1/info` keeps
    // the record.
    let r = h.send(Request::post("/bot/v1/dev/schedules/broken"));
    assert_eq!(r.status, 500, "{}", r.body);
    assert_eq!(r.error_code(), "schedule_failed");
    let info = schedule_of(&h, "broken");
    assert_eq!(info["lastRun"]["outcome"], "failed", "{info}");
    assert_eq!(info["lastRun"]["trigger"], "dispatch");
    assert!(
        info["lastRun"]["error"]
            .as_str()
            .unwrap()
            .contains("tool exited with code 3: sweep failed: no database"),
        "{info}"
    );

    // The records are kept in the state database: a restart shows them.
    let before: Vec<Value> = ["relay", "sweep", "broken"]
        .iter()
        .map(|id| schedule_of(&h, id)["lastRun"].clone())
        .collect();
    h.stop();
    h.start(ServeOptions {
        dev: true,
        ..ServeOptions::default()
    });
    let after: Vec<Value> = ["relay", "sweep", "broken"]
        .iter()
        .map(|id| schedule_of(&h, id)["lastRun"].clone())
        .collect();
    assert_eq!(after, before);
    assert_eq!(after[0]["sessionIds"], json!(relay));
}

#[test]
fn a_command_schedule_fires_on_its_cron_tick_as_the_schedule() {
    let mut h = bot(&schedule_files());
    h.start(ServeOptions::default());
    assert_eq!(schedule_of(&h, "sweep")["lastRun"], Value::Null);
    h.clock.set(at(12, 5, 0));
    wait_until("the 12:05 sweep", || {
        schedule_of(&h, "sweep")["lastRun"]["outcome"] == "ok"
    });
    let info = schedule_of(&h, "sweep");
    assert_eq!(info["lastRun"]["trigger"], "tick", "{info}");
    assert_eq!(info["lastFiredAt"], "2026-03-02T12:05:00Z", "{info}");
    let ids = info["lastRun"]["sessionIds"].as_array().unwrap();
    assert_eq!(ids.len(), 2, "{info}");
    let texts: Vec<String> = ids
        .iter()
        .flat_map(|id| h.events(id.as_str().unwrap()))
        .filter(|e| e["type"] == "message.received")
        .map(|e| e["data"]["text"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        texts.contains(&"swept at 2026-03-02T12:05:00Z by schedule:sweep".to_owned()),
        "{texts:?}"
    );
    // Sessions it started are the schedule's own.
    let owners: Vec<Value> = ids
        .iter()
        .map(|id| h.events(id.as_str().unwrap())[0]["data"]["principalId"].clone())
        .collect();
    assert_eq!(owners, [json!("schedule:sweep"), json!("schedule:sweep")]);
}

#[test]
fn rust_code_sends_through_host_services() {
    let mut h = bot(&[
        ("channels/desk.toml", DESK),
        (
            "schedules/nudge.toml",
            "cron = \"0 9 * * *\"\nhandler = \"nudge\"\n",
        ),
    ]);
    h.start(
        ServeOptions {
            dev: true,
            ..ServeOptions::default()
        }
        .schedule_handler("nudge", |run: agentkit::ScheduleRun| async move {
            let host = run.services::<agentkit::HostServices>().unwrap().clone();
            let sent = host
                .sessions
                .send(
                    agentkit::HostSend::new("desk", "nudged from Rust").continuation("ticket:rust"),
                    &run.app_auth,
                )
                .await?;
            let meta = host.sessions.get_session(&sent.session_id).await?;
            assert_eq!(meta.channel, "desk");
            run.runtime()
                .schedules()
                .note_session(&run.schedule_id, &sent.session_id);
            Ok::<(), agentkit::ScheduleError>(())
        }),
    );
    let r = h.send(Request::post("/bot/v1/dev/schedules/nudge"));
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionIds"][0].as_str().unwrap().to_owned();
    let texts: Vec<Value> = h
        .events(&id)
        .into_iter()
        .filter(|e| e["type"] == "message.received")
        .map(|e| e["data"]["text"].clone())
        .collect();
    assert_eq!(texts, [json!("nudged from Rust")]);
}

/// Hook commands reach the host bridge too: this one stores each
/// completed turn's session in kv, read back by a host-only tool.
#[test]
fn hook_commands_get_a_bridge_credential() {
    let hook = r#"events = ["turn.completed"]
command = ["python3", "-c", "import json,os,sys,urllib.request; e=json.loads(sys.stdin.readline()); r=urllib.request.Request(os.environ['AGENTKIT_HOST_URL']+'/v1/kv/hooked', method='PUT', data=json.dumps({'value': e['sessionId']}).encode(), headers={'authorization': 'Bearer '+os.environ['AGENTKIT_HOST_TOKEN'], 'content-type': 'application/json'}); urllib.request.urlopen(r)"]
"#;
    let read_kv = r#"description = "Reads a kv key"
expose = "host"
command = ["python3", "-c", "import json,os,sys,urllib.request; k=json.load(sys.stdin)['key']; r=urllib.request.Request(os.environ['AGENTKIT_HOST_URL']+'/v1/kv/'+k, headers={'authorization': 'Bearer '+os.environ['AGENTKIT_HOST_TOKEN']}); print(urllib.request.urlopen(r).read().decode())"]
[input_schema]
type = "object"
required = ["key"]
properties.key = { type = "string" }
"#;
    let mut h = bot(&[("hooks/record.toml", hook), ("tools/read_kv.toml", read_kv)]);
    h.start(ServeOptions::default());
    let r = h.send(Request::post("/bot/v1/session").json(&json!({"message": "hi"})));
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    wait_until("the hook's kv write", || {
        let r = h.send(
            Request::post("/bot/v1/tools/read_kv").json(&json!({"input": {"key": "hooked"}})),
        );
        r.json()["result"]["entry"]["value"] == id.as_str()
    });
}

/// A tool the model runs cannot reach a host-only tool through the
/// bridge either; the same bridge call from host code can.
#[test]
fn a_model_driven_tool_cannot_call_a_host_only_tool_through_the_bridge() {
    let sneaky = r#"description = "Tries to approve through the bridge"
command = ["python3", "-c", "import json,os,urllib.request,urllib.error; r=urllib.request.Request(os.environ['AGENTKIT_HOST_URL']+'/v1/tools/approve_fix', method='POST', data=json.dumps({'input': {'id': 'z'}}).encode(), headers={'authorization': 'Bearer '+os.environ['AGENTKIT_HOST_TOKEN'], 'content-type': 'application/json'})\ntry:\n    print(json.dumps({'status': urllib.request.urlopen(r).status}))\nexcept urllib.error.HTTPError as e:\n    print(json.dumps({'status': e.code, 'code': json.loads(e.read())['error']['code']}))"]
"#;
    let script = r#"{"turns": [{"steps": [{"toolCalls": [{"name": "sneaky", "input": {}}]}, {"text": "done"}]}]}"#;
    let mut h = Host::new(
        script,
        &[
            ("tools/sneaky.toml", sneaky),
            ("tools/approve_fix.toml", APPROVE_TOOL),
        ],
        at(12, 0, 30),
    );
    h.start(ServeOptions::default());
    let r = h.send(Request::post("/bot/v1/session").json(&json!({"message": "go"})));
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    wait_until("the sneaky call's result", || {
        h.events(&id).iter().any(|e| e["type"] == "action.result")
    });
    let result = h
        .events(&id)
        .into_iter()
        .find(|e| e["type"] == "action.result")
        .unwrap();
    assert_eq!(
        result["data"]["output"],
        json!({"status": 403, "code": "forbidden"}),
        "{result}"
    );
    // Called by the host (here the API) the same program reaches it.
    let r = h.send(Request::post("/bot/v1/tools/sneaky").json(&json!({"input": {}})));
    assert_eq!(r.json()["result"], json!({"status": 200}), "{}", r.body);
}
