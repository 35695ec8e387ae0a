//! Custom channels over loopback against a real server: declarative
//! webhook routes (schemas, auth, send, call_tool, templated responses),
//! event deliveries to a local receiver (signature, retries, state, the
//! delivery log), and the GitHub, GitLab and Bitbucket packs end to end
//! against mock provider APIs with the providers' published payloads.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentkit::{EnvLookup, ServeHandle, ServeOptions};
use agentkit_test_support::http::Request;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use serde_json::{Value, json};

/// One request a mock server received.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: String,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// How a mock answers the `n`th request (from 1).
type Answer = fn(&Seen, usize) -> (u16, Value);

/// A mock HTTP peer: records every request and answers with `answer`.
fn mock(rt: &tokio::runtime::Runtime, answer: Answer) -> (SocketAddr, Log) {
    let log: Log = Arc::default();
    async fn any(
        State((log, answer)): State<(Log, Answer)>,
        method: Method,
        uri: Uri,
        headers: HeaderMap,
        body: String,
    ) -> (StatusCode, axum::Json<Value>) {
        let seen = Seen {
            method: method.to_string(),
            path: uri.path().to_owned(),
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("").to_owned()))
                .collect(),
            body,
        };
        let n = {
            let mut l = log.lock().unwrap();
            l.push(seen.clone());
            l.len()
        };
        let (status, body) = answer(&seen, n);
        (StatusCode::from_u16(status).unwrap(), axum::Json(body))
    }
    let app = axum::Router::new()
        .fallback(any)
        .with_state((log.clone(), answer));
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move { axum::serve(listener, app).await });
    (addr, log)
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn env(vars: &[(&str, String)]) -> EnvLookup {
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    EnvLookup(Arc::new(move |name| {
        vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }))
}

fn serve(rt: &tokio::runtime::Runtime, dir: &Path, state: &Path, env: EnvLookup) -> ServeHandle {
    rt.block_on(agentkit::serve(
        dir,
        super::http::with_scraper(ServeOptions {
            port: 0,
            state_root: Some(state.to_path_buf()),
            env,
            ..ServeOptions::default()
        }),
    ))
    .unwrap()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

const INTAKE: &str = r#"
auth = ["local_dev_strict", { bearer = { token = "${INTAKE_TOKEN}", principal = "intake" } }]
state = { count = 0 }

[[routes]]
method = "POST"
path = "/expense/:team"
[routes.body_schema]
type = "object"
required = ["amount", "memo"]
properties = { amount = { type = "number" }, memo = { type = "string" } }
[routes.send]
message = "Record {{ body.amount }} for {{ body.memo }} ({{ params.team }}, {{ auth.principalId }})"
continuation = "intake:{{ params.team }}"
title = "Expenses of {{ params.team }}"
admission = "coalesce"

[[routes]]
method = "POST"
path = "/ask"
body_schema = { type = "object" }
[routes.send]
message = "{{ body.q }}"
wait = true

[[routes]]
method = "GET"
path = "/echo"
[routes.query_schema]
type = "object"
required = ["n"]
properties = { n = { type = "integer" } }
[routes.call_tool]
tool = "echo"
input = { n = "{{ query.n }}" }

[[routes]]
method = "DELETE"
path = "/thing/:id"
[routes.response]
status = "{{ 204 if params.id == 'gone' else 200 }}"
body = { deleted = "{{ params.id }}", n = "{{ params.id | length }}" }

[events."turn.completed"]
post = "${RECEIVER}/hook"
signature_secret = "${HOOK_SECRET}"
signature_header = "X-Signature"
body = { session = "{{ session.id }}", result = "{{ event.data.result }}", before = "{{ state.count }}" }
state = { count = "{{ state.count + 1 }}", stored = "{{ response.status }}" }
"#;

#[test]
fn webhook_routes_validate_authenticate_send_call_and_deliver() {
    let rt = runtime();
    // The receiver fails the first delivery, then stores.
    let (receiver, hits) = mock(&rt, |_, n| {
        if n == 1 {
            (500, json!({}))
        } else {
            (200, json!({"status": "stored"}))
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agents/desk/agent");
    write(&agent.join("agent.toml"), "model = \"test\"\n");
    write(&agent.join("instructions.md"), "You keep the books.\n");
    write(
        &agent.join("tools/echo.toml"),
        "description = \"Echo\"\ncommand = [\"cat\"]\nread_only = true\n[input_schema]\ntype = \"object\"\nproperties.n = { type = \"integer\" }\n",
    );
    write(&agent.join("channels/intake.toml"), INTAKE);
    let env = env(&[
        ("INTAKE_TOKEN", "t0ken".into()),
        ("RECEIVER", format!("http://{receiver}")),
        ("HOOK_SECRET", "hook-secret".into()),
    ]);
    let state = dir.path().join("state");
    let handle = serve(&rt, &dir.path().join("agents"), &state, env);
    let addr = handle.local_addr();
    let send = |r: Request| r.send(addr).unwrap();

    // Auth runs first: a forwarded request without the token is refused.
    let r = send(
        Request::post("/desk/v1/channels/intake/expense/ops")
            .header("x-forwarded-for", "203.0.113.9")
            .json(&json!({"amount": 1, "memo": "x"})),
    );
    assert_eq!((r.status, r.error_code()), (401, "unauthorized".to_owned()));

    // Schema errors: every violation, with its path.
    let r = send(
        Request::post("/desk/v1/channels/intake/expense/ops")
            .bearer("t0ken")
            .json(&json!({"amount": "ten"})),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    let errors = r.json()["error"]["errors"].clone();
    let paths: Vec<&str> = errors
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert!(paths.contains(&"/amount"), "{errors}");
    assert!(errors.to_string().contains("memo"), "{errors}");
    // An empty body reads as `{}`, and so misses both fields.
    let r = send(Request::post("/desk/v1/channels/intake/expense/ops").bearer("t0ken"));
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json()["error"]["errors"].as_array().unwrap().len(),
        2,
        "{}",
        r.body
    );
    assert_eq!(
        send(Request::get("/desk/v1/channels/intake/nope").bearer("t0ken")).status,
        404
    );
    assert_eq!(
        send(Request::get("/desk/v1/channels/intake/ask").bearer("t0ken")).status,
        405
    );

    // send: 202 at once; the same team continues the same session.
    let r = send(
        Request::post("/desk/v1/channels/intake/expense/ops")
            .bearer("t0ken")
            .json(&json!({"amount": 12.5, "memo": "seed potatoes"})),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let first = r.json();
    assert_eq!(first["isNew"], true);
    assert_eq!(first["continuationToken"], "intake:ops");
    let id = first["sessionId"].as_str().unwrap().to_owned();
    let events = log_events(&state, "desk", &id);
    let received = events
        .iter()
        .find(|e| e["type"] == "message.received")
        .unwrap();
    assert_eq!(
        received["data"]["text"],
        "Record 12.5 for seed potatoes (ops, local)"
    );
    let r = send(
        Request::post("/desk/v1/channels/intake/expense/ops")
            .bearer("t0ken")
            .json(&json!({"amount": 3, "memo": "twine"})),
    );
    assert_eq!(r.status, 202);
    assert_eq!(
        (
            r.json()["sessionId"].as_str().unwrap(),
            r.json()["isNew"].clone()
        ),
        (id.as_str(), json!(false))
    );

    // wait = true answers 200 with the turn's reply.
    let r = send(
        Request::post("/desk/v1/channels/intake/ask")
            .bearer("t0ken")
            .json(&json!({"q": "hello"})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["reply"]["ok"], true, "{}", r.body);

    // call_tool: the deterministic call's envelope; the query is typed.
    let r = send(Request::get("/desk/v1/channels/intake/echo?n=7").bearer("t0ken"));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        (r.json()["toolName"].clone(), r.json()["result"].clone()),
        (json!("echo"), json!({"n": 7}))
    );
    let r = send(Request::get("/desk/v1/channels/intake/echo?n=x").bearer("t0ken"));
    assert_eq!(r.status, 400);

    // A templated response.
    let r = send(Request::new("DELETE", "/desk/v1/channels/intake/thing/abc").bearer("t0ken"));
    assert_eq!(
        (r.status, r.json()),
        (200, json!({"deleted": "abc", "n": 3}))
    );
    assert_eq!(
        send(Request::new("DELETE", "/desk/v1/channels/intake/thing/gone").bearer("t0ken")).status,
        204
    );

    // Routes and schemas in /v1/info.
    let info = send(Request::get("/desk/v1/info").bearer("t0ken")).json();
    let routes = &info["channels"][0]["routes"];
    assert_eq!(routes[0]["url"], "/desk/v1/channels/intake/expense/:team");
    assert_eq!(
        routes[0]["bodySchema"]["required"],
        json!(["amount", "memo"])
    );

    // Deliveries: the first attempt fails, the retry is signed and lands,
    // the state is updated from the response, and both are logged.
    wait_for("a first delivery", || !hits.lock().unwrap().is_empty());
    let failed = hits.lock().unwrap()[0].json()["session"]
        .as_str()
        .unwrap()
        .to_owned();
    let retry = || {
        hits.lock()
            .unwrap()
            .iter()
            .skip(1)
            .find(|h| h.json()["session"] == failed.as_str())
            .cloned()
    };
    wait_for("the retried delivery", || retry().is_some());
    let hit = retry().unwrap();
    let sig = agentkit_channels::sign("hook-secret", hit.body.as_bytes());
    assert_eq!(
        hit.header("x-signature"),
        Some(format!("sha256={sig}").as_str())
    );
    assert_eq!(hit.json()["before"], 0, "{}", hit.body);
    assert!(
        !hit.json()["result"].as_str().unwrap().is_empty(),
        "{}",
        hit.body
    );
    let state_file = state.join(format!("desk/channels/intake/state/{failed}.json"));
    wait_for("the state update", || {
        std::fs::read_to_string(&state_file).is_ok_and(|s| s.contains("stored"))
    });
    let st: Value = serde_json::from_str(&std::fs::read_to_string(&state_file).unwrap()).unwrap();
    assert!(st["count"].as_i64().unwrap() >= 1, "{st}");
    let log = std::fs::read_to_string(
        state.join(format!("desk/channels/intake/deliveries/{failed}.ndjson")),
    )
    .unwrap();
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        (lines[0]["ok"].clone(), lines[0]["status"].clone()),
        (json!(false), json!(500))
    );
    assert_eq!(
        (lines[1]["ok"].clone(), lines[1]["attempt"].clone()),
        (json!(true), json!(2))
    );
    rt.block_on(handle.close());
}

/// `${VAR}` references in a route's send templates resolve at startup like
/// every other string of a channel file (`${VAR:-default}` when unset);
/// the minijinja syntax next to them still renders per request.
#[test]
fn route_send_templates_resolve_environment_references() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agents/desk/agent");
    write(&agent.join("agent.toml"), "model = \"test\"\n");
    write(&agent.join("instructions.md"), "You triage.\n");
    write(
        &agent.join("channels/intake.toml"),
        r#"auth = [{ bearer = { token = "t0ken", principal = "intake" } }]
[[routes]]
method = "POST"
path = "/note"
body_schema = { type = "object" }
[routes.send]
message = "${TEAM}/${PREFIX:-triage}: {{ body.text }}"
title = "${TITLE:-untitled} {{ body.text }}"
"#,
    );
    let state = dir.path().join("state");
    let handle = serve(
        &rt,
        &dir.path().join("agents"),
        &state,
        env(&[("TEAM", "ops".into())]),
    );
    let r = Request::post("/desk/v1/channels/intake/note")
        .bearer("t0ken")
        .json(&json!({"text": "disk full"}))
        .send(handle.local_addr())
        .unwrap();
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let events = log_events(&state, "desk", &id);
    let received = events
        .iter()
        .find(|e| e["type"] == "message.received")
        .unwrap();
    assert_eq!(received["data"]["text"], "ops/triage: disk full");
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        agentkit_test_support::fixtures_dir()
            .join("github")
            .join(name),
    )
    .unwrap()
}

fn reviewer() -> PathBuf {
    agentkit_test_support::fixtures_dir().join("channels/pr-reviewer")
}

fn delivery(event: &str, id: &str, body: &[u8], secret: &str) -> Request {
    Request::post("/pr-reviewer/v1/channels/github")
        .header("x-github-event", event)
        .header("x-github-delivery", id)
        .header(
            "x-hub-signature-256",
            &format!("sha256={}", agentkit_channels::sign(secret, body)),
        )
        .header("content-type", "application/json")
        .raw_body(body)
}

fn github_api(seen: &Seen, _n: usize) -> (u16, Value) {
    match (seen.method.as_str(), seen.path.as_str()) {
        ("POST", p) if p.ends_with("/comments") => (201, json!({"id": 4242})),
        ("POST", _) => (201, json!({"state": "ok"})),
        _ => (200, json!({})),
    }
}

#[test]
fn github_pull_request_opened_runs_a_turn_with_status_and_dedup_across_restarts() {
    let rt = runtime();
    let (api, calls) = mock(&rt, github_api);
    let state = tempfile::tempdir().unwrap();
    let secret = "It's a Secret to Everybody";
    let env = || {
        env(&[
            ("GITHUB_WEBHOOK_SECRET", secret.into()),
            ("GITHUB_API_URL", format!("http://{api}")),
            ("GITHUB_TOKEN", "ghp_test".into()),
        ])
    };
    let handle = serve(&rt, &reviewer(), state.path(), env());
    let addr = handle.local_addr();
    let opened = fixture("pull_request.opened.json");

    // Unsigned or wrongly signed: 401 before anything is parsed.
    let r = delivery("pull_request", "d-0", &opened, "wrong")
        .send(addr)
        .unwrap();
    assert_eq!(r.status, 401, "{}", r.body);
    let unsigned = Request::post("/pr-reviewer/v1/channels/github")
        .header("x-github-event", "pull_request")
        .raw_body(&opened)
        .send(addr)
        .unwrap();
    assert_eq!(unsigned.status, 401);

    let r = delivery("pull_request", "d-1", &opened, secret)
        .send(addr)
        .unwrap();
    assert_eq!(r.status, 202, "{}", r.body);
    let first = r.json();
    assert_eq!(first["isNew"], true);
    assert_eq!(first["continuationToken"], "pr:Codertocat/Hello-World#2");
    let id = first["sessionId"].as_str().unwrap().to_owned();

    // The redelivery is acknowledged and ignored.
    let again = delivery("pull_request", "d-1", &opened, secret)
        .send(addr)
        .unwrap();
    assert_eq!(
        (again.status, again.json()["duplicate"].clone()),
        (200, json!(true))
    );

    // The commit status goes pending, then success; the banner is posted
    // once and then edited.
    let sha = "ec26c3e57ca3a959ca5aad62de7213c562f8c821";
    let status_path = format!("/repos/Codertocat/Hello-World/statuses/{sha}");
    let states = || -> Vec<String> {
        calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.path == status_path)
            .map(|c| c.json()["state"].as_str().unwrap_or("").to_owned())
            .collect()
    };
    wait_for("a success status", || {
        states().contains(&"success".to_owned())
    });
    assert_eq!(states(), ["pending", "success"]);
    let calls_now = calls.lock().unwrap().clone();
    let status = calls_now.iter().find(|c| c.path == status_path).unwrap();
    assert_eq!(status.json()["context"], "agentkit/review");
    assert_eq!(status.header("authorization"), Some("Bearer ghp_test"));
    wait_for("the banner edit", || {
        calls.lock().unwrap().iter().any(|c| c.method == "PATCH")
    });
    let banner: Vec<(String, String)> = calls
        .lock()
        .unwrap()
        .iter()
        .filter(|c| c.path.contains("comments"))
        .map(|c| (c.method.clone(), c.path.clone()))
        .collect();
    assert_eq!(
        banner,
        [
            (
                "POST".to_owned(),
                "/repos/Codertocat/Hello-World/issues/2/comments".to_owned()
            ),
            (
                "PATCH".to_owned(),
                "/repos/Codertocat/Hello-World/issues/comments/4242".to_owned()
            )
        ]
    );

    // One turn, with the templated message, owned by the actor.
    let events = log_events(state.path(), "pr-reviewer", &id);
    let received: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "message.received")
        .collect();
    assert_eq!(received.len(), 1);
    assert_eq!(
        received[0]["data"]["text"],
        format!(
            "Review pull request #2 of Codertocat/Hello-World: Update the README with new information. (head {sha}, opened by Codertocat)"
        )
    );

    // A later delivery on the same PR continues the same session.
    let sync = fixture("pull_request.synchronize.json");
    let r = delivery("pull_request", "d-2", &sync, secret)
        .send(addr)
        .unwrap();
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(
        (
            r.json()["sessionId"].as_str().unwrap(),
            r.json()["isNew"].clone()
        ),
        (id.as_str(), json!(false))
    );
    wait_for("the second success", || {
        states().iter().filter(|s| *s == "success").count() == 2
    });

    // Dedup is durable: after a restart, redeliveries are still ignored.
    rt.block_on(handle.close());
    let handle = serve(&rt, &reviewer(), state.path(), env());
    let addr = handle.local_addr();
    for (d, body) in [("d-1", &opened), ("d-2", &sync)] {
        let r = delivery("pull_request", d, body, secret)
            .send(addr)
            .unwrap();
        assert_eq!(
            (r.status, r.json()["duplicate"].clone()),
            (200, json!(true)),
            "{d}: {}",
            r.body
        );
    }
    // A ping is answered; an event no rule matches is skipped.
    let ping = fixture("ping.json");
    assert_eq!(
        delivery("ping", "d-3", &ping, secret)
            .send(addr)
            .unwrap()
            .status,
        200
    );
    let r = delivery("issues", "d-4", b"{}", secret).send(addr).unwrap();
    assert_eq!((r.status, r.json()["skipped"].clone()), (200, json!(true)));
    let info = Request::get("/pr-reviewer/v1/info")
        .send(addr)
        .unwrap()
        .json();
    assert_eq!(
        info["channels"][0]["webhookEvents"],
        json!(["pull_request", "issue_comment"])
    );
    rt.block_on(handle.close());
}

/// A session's events once it waits again, read from its log (the
/// sessions belong to the channel's principals, not the test client).
fn log_events(state: &Path, slug: &str, id: &str) -> Vec<Value> {
    let path = state.join(format!("{slug}/sessions/{id}/events.ndjson"));
    let mut events = Vec::new();
    wait_for("the session to settle", || {
        events = std::fs::read_to_string(&path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .collect();
        events.iter().any(|e| e["type"] == "session.waiting")
    });
    events
}

const GITLAB: &str = r#"
kind = "gitlab"
webhook_secret = "${GITLAB_WEBHOOK_SECRET}"
api_url = "${GITLAB_API_URL}"
token = "${GITLAB_TOKEN}"

[[rules]]
event = "merge_request"
actions = ["open", "reopen", "update"]
[rules.turn]
message = "Review !{{ object_attributes.iid }} of {{ project.path_with_namespace }}: {{ object_attributes.title }}"

[[rules]]
event = "note"
[rules.turn]

[[rules]]
event = "pipeline"
when = { "object_attributes.status" = "success" }
[rules.turn]
message = "Pipeline {{ object_attributes.id }} on {{ object_attributes.ref }}: {{ object_attributes.status }}"

[[rules]]
event = "push"
[rules.task]
command = ["sh", "-c", "cat > \"$PUSH_OUT\"; echo \"$AGENTKIT_GITLAB_EVENT $AGENTKIT_GITLAB_DELIVERY\" >> \"$PUSH_OUT.env\""]
"#;

fn gitlab_fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        agentkit_test_support::fixtures_dir()
            .join("gitlab")
            .join(name),
    )
    .unwrap()
}

fn hook(event: &str, uuid: &str, token: &str, body: &[u8]) -> Request {
    Request::post("/mr-bot/v1/channels/gitlab")
        .header("x-gitlab-event", event)
        .header("x-gitlab-event-uuid", uuid)
        .header("x-gitlab-token", token)
        .header("content-type", "application/json")
        .raw_body(body)
}

#[test]
fn gitlab_merge_request_hooks_run_a_turn_and_post_the_reply_as_a_note() {
    let rt = runtime();
    let (api, calls) = mock(&rt, |_, _| (201, json!({"id": 1})));
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("mr-bot/agent");
    write(&agent.join("agent.toml"), "model = \"test\"\n");
    write(
        &agent.join("instructions.md"),
        "You review merge requests.\n",
    );
    let push_out = dir.path().join("push.json");
    write(
        &agent.join("channels/gitlab.toml"),
        &GITLAB.replace("$PUSH_OUT", &push_out.display().to_string()),
    );
    let env = env(&[
        ("GITLAB_WEBHOOK_SECRET", "gl-secret".into()),
        ("GITLAB_API_URL", format!("http://{api}/api/v4")),
        ("GITLAB_TOKEN", "glpat-test".into()),
    ]);
    let handle = serve(
        &rt,
        &dir.path().join("mr-bot"),
        &dir.path().join("state"),
        env,
    );
    let addr = handle.local_addr();
    let mr = gitlab_fixture("merge_request.open.json");

    let r = hook("Merge Request Hook", "u-0", "wrong", &mr)
        .send(addr)
        .unwrap();
    assert_eq!(r.status, 401);
    let r = hook("Merge Request Hook", "u-1", "gl-secret", &mr)
        .send(addr)
        .unwrap();
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.json()["continuationToken"], "mr:gitlabhq/gitlab-test!1");
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let dup = hook("Merge Request Hook", "u-1", "gl-secret", &mr)
        .send(addr)
        .unwrap();
    assert_eq!(dup.json()["duplicate"], true);
    // `/metrics` counts the deliveries and the duplicate.
    let metrics = super::http::scrape(addr).body;
    for line in [
        "agentkit_channel_deliveries_total{agent=\"mr-bot\",channel=\"gitlab\",kind=\"gitlab\"} 3",
        "agentkit_channel_duplicates_total{agent=\"mr-bot\",channel=\"gitlab\",kind=\"gitlab\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }

    let events = log_events(&dir.path().join("state"), "mr-bot", &id);
    let text = events
        .iter()
        .find(|e| e["type"] == "message.received")
        .unwrap()["data"]["text"]
        .clone();
    assert_eq!(text, "Review !1 of gitlabhq/gitlab-test: MS-Viewport");
    let notes = || {
        calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.path == "/api/v4/projects/1/merge_requests/1/notes")
            .cloned()
            .collect::<Vec<_>>()
    };
    wait_for("the reply note", || !notes().is_empty());
    let note = &notes()[0];
    assert_eq!(note.header("private-token"), Some("glpat-test"));
    assert!(
        !note.json()["body"].as_str().unwrap().is_empty(),
        "{}",
        note.body
    );

    // GitLab's comment example is on another project's merge request
    // (gitlab-org/gitlab-test!1): a session of its own, replied to there;
    // the pipeline example on that merge request continues it.
    let comment = gitlab_fixture("note.merge_request.json");
    let r = hook("Note Hook", "u-2", "gl-secret", &comment)
        .send(addr)
        .unwrap();
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.json()["continuationToken"], "mr:gitlab-org/gitlab-test!1");
    assert_eq!(r.json()["isNew"], true);
    let other = r.json()["sessionId"].as_str().unwrap().to_owned();
    assert_ne!(other, id);
    let on = |path: &'static str| {
        let calls = calls.clone();
        move || {
            calls
                .lock()
                .unwrap()
                .iter()
                .filter(|c| c.path == path)
                .count()
        }
    };
    let comment_notes = on("/api/v4/projects/5/merge_requests/1/notes");
    wait_for("the reply to the comment", || comment_notes() == 1);
    let events = log_events(&dir.path().join("state"), "mr-bot", &other);
    let text = events
        .iter()
        .find(|e| e["type"] == "message.received")
        .unwrap()["data"]["text"]
        .clone();
    assert!(
        text.as_str().unwrap().contains("This MR needs work."),
        "{text}"
    );

    let pipeline = gitlab_fixture("pipeline.json");
    let r = hook("Pipeline Hook", "u-3", "gl-secret", &pipeline)
        .send(addr)
        .unwrap();
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(
        (
            r.json()["sessionId"].as_str().unwrap(),
            r.json()["isNew"].clone()
        ),
        (other.as_str(), json!(false))
    );
    let pipeline_notes = on("/api/v4/projects/1/merge_requests/1/notes");
    wait_for("the reply to the pipeline", || pipeline_notes() == 2);
    let texts: Vec<Value> = log_events(&dir.path().join("state"), "mr-bot", &other)
        .into_iter()
        .filter(|e| e["type"] == "message.received")
        .map(|e| e["data"]["text"].clone())
        .collect();
    assert_eq!(texts[1], "Pipeline 31 on master: success");

    // A push runs the host task with the payload on stdin, after a 202.
    let push = gitlab_fixture("push.json");
    let r = hook("Push Hook", "u-4", "gl-secret", &push)
        .send(addr)
        .unwrap();
    assert_eq!(
        (r.status, r.json()["task"].clone()),
        (202, json!("command")),
        "{}",
        r.body
    );
    let env_file = push_out.with_extension("json.env");
    wait_for("the push task", || env_file.is_file());
    let on_stdin: Value = serde_json::from_slice(&std::fs::read(&push_out).unwrap()).unwrap();
    assert_eq!(on_stdin, serde_json::from_slice::<Value>(&push).unwrap());
    assert_eq!(
        std::fs::read_to_string(&env_file).unwrap().trim(),
        "push u-4"
    );
    rt.block_on(handle.close());
}

const BITBUCKET: &str = r#"
kind = "bitbucket"
webhook_secret = "${BITBUCKET_WEBHOOK_SECRET}"
api_url = "${BITBUCKET_API_URL}"
token = "${BITBUCKET_TOKEN}"

[[rules]]
event = "pull_request"
actions = ["opened", "updated"]
[rules.turn]
message = "Review PR #{{ pullrequest.id }} of {{ repository.full_name }}: {{ pullrequest.title }} ({{ pullrequest.source.branch }} -> {{ pullrequest.destination.branch }}, {{ action }} by {{ actor.username }} on {{ platform }})"
continuation = "pr:{{ repository.full_name }}#{{ pullrequest.id }}"

[[rules]]
event = "pullrequest:comment_created"
[rules.turn]
message = "{{ comment.author.username }} says: {{ comment.text }}"
continuation = "pr:{{ repository.full_name }}#{{ pullrequest.id }}"

[[rules]]
event = "pull_request_comment"
[rules.turn]
"#;

fn bitbucket_fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        agentkit_test_support::fixtures_dir()
            .join("bitbucket")
            .join(name),
    )
    .unwrap()
}

/// A Bitbucket Cloud delivery (`X-Request-UUID`) or, with `dc`, a Data
/// Center one (`X-Request-Id`), signed as both products sign.
fn bitbucket_hook(
    channel: &str,
    key: &str,
    id: &str,
    signature: &str,
    body: &[u8],
    dc: bool,
) -> Request {
    Request::post(&format!("/pr-bot/v1/channels/{channel}"))
        .header("x-event-key", key)
        .header(if dc { "x-request-id" } else { "x-request-uuid" }, id)
        .header("x-hub-signature", &format!("sha256={signature}"))
        .header("content-type", "application/json")
        .raw_body(body)
}

#[test]
fn bitbucket_cloud_and_data_center_hooks_run_turns_and_reply_as_comments() {
    let rt = runtime();
    let (api, calls) = mock(&rt, |_, _| (201, json!({"id": 7})));
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("pr-bot/agent");
    write(&agent.join("agent.toml"), "model = \"test\"\n");
    write(
        &agent.join("instructions.md"),
        "You review pull requests.\n",
    );
    write(&agent.join("channels/bitbucket.toml"), BITBUCKET);
    // A second channel keyed with the secret of the captured Data Center
    // delivery, so its real signature is checked end to end.
    write(
        &agent.join("channels/bitbucket-dc.toml"),
        &BITBUCKET.replace("BITBUCKET_WEBHOOK_SECRET", "BITBUCKET_DC_SECRET"),
    );
    let secret = "bb-secret";
    let env = env(&[
        ("BITBUCKET_WEBHOOK_SECRET", secret.into()),
        ("BITBUCKET_DC_SECRET", "mysecret".into()),
        ("BITBUCKET_API_URL", format!("http://{api}")),
        ("BITBUCKET_TOKEN", "bb-token".into()),
    ]);
    let state = dir.path().join("state");
    let handle = serve(&rt, &dir.path().join("pr-bot"), &state, env);
    let addr = handle.local_addr();
    let sign = |body: &[u8]| agentkit_channels::sign(secret, body);
    let created = bitbucket_fixture("cloud.pullrequest.created.json");

    // A wrong signature is refused before the body is read as JSON.
    for body in [created.as_slice(), b"not json at all".as_slice()] {
        let r = bitbucket_hook(
            "bitbucket",
            "pullrequest:created",
            "r-0",
            &agentkit_channels::sign("wrong", body),
            body,
            false,
        )
        .send(addr)
        .unwrap();
        assert_eq!(r.status, 401, "{}", r.body);
    }
    let r = bitbucket_hook(
        "bitbucket",
        "pullrequest:created",
        "r-1",
        &sign(&created),
        &created,
        false,
    )
    .send(addr)
    .unwrap();
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.json()["isNew"], true);
    assert_eq!(
        r.json()["continuationToken"],
        "pr:kolaszek/repository-name#1"
    );
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let again = bitbucket_hook(
        "bitbucket",
        "pullrequest:created",
        "r-1",
        &sign(&created),
        &created,
        false,
    )
    .send(addr)
    .unwrap();
    assert_eq!(
        (again.status, again.json()["duplicate"].clone()),
        (200, json!(true))
    );

    let events = log_events(&state, "pr-bot", &id);
    let received: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "message.received")
        .collect();
    assert_eq!(received.len(), 1);
    assert_eq!(
        received[0]["data"]["text"],
        "Review PR #1 of kolaszek/repository-name: new commit (new-branch -> master, opened by kolaszek on cloud)"
    );
    let result = events
        .iter()
        .find(|e| e["type"] == "turn.completed")
        .unwrap()["data"]["result"]
        .clone();
    let comments = |path: &str| {
        calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.path == path)
            .cloned()
            .collect::<Vec<_>>()
    };
    let cloud_path = "/2.0/repositories/kolaszek/repository-name/pullrequests/1/comments";
    wait_for("the reply comment", || !comments(cloud_path).is_empty());
    let reply = &comments(cloud_path)[0];
    assert_eq!(reply.method, "POST");
    assert_eq!(reply.header("authorization"), Some("Bearer bb-token"));
    assert_eq!(reply.json(), json!({"content": {"raw": result}}));

    // A comment on the same pull request continues the session.
    let comment = bitbucket_fixture("cloud.pullrequest.comment_created.json");
    let r = bitbucket_hook(
        "bitbucket",
        "pullrequest:comment_created",
        "r-2",
        &sign(&comment),
        &comment,
        false,
    )
    .send(addr)
    .unwrap();
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(
        (
            r.json()["sessionId"].as_str().unwrap(),
            r.json()["isNew"].clone()
        ),
        (id.as_str(), json!(false))
    );
    wait_for("the second comment", || comments(cloud_path).len() == 2);
    let texts: Vec<Value> = log_events(&state, "pr-bot", &id)
        .into_iter()
        .filter(|e| e["type"] == "message.received")
        .map(|e| e["data"]["text"].clone())
        .collect();
    assert_eq!(texts[1], "tkolek says: Could you also update the README?");

    // Data Center: the documented `pr:opened` example, same rules, same
    // normalised fields, the reply through the 1.0 REST API.
    let opened = bitbucket_fixture("dc.pr.opened.json");
    let r = bitbucket_hook(
        "bitbucket",
        "pr:opened",
        "dc-1",
        &sign(&opened),
        &opened,
        true,
    )
    .send(addr)
    .unwrap();
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.json()["continuationToken"], "pr:PROJ/repository#1");
    let dc_id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let events = log_events(&state, "pr-bot", &dc_id);
    assert_eq!(
        events
            .iter()
            .find(|e| e["type"] == "message.received")
            .unwrap()["data"]["text"],
        "Review PR #1 of PROJ/repository: a new file added (a-branch -> master, opened by admin on datacenter)"
    );
    let dc_path = "/rest/api/1.0/projects/PROJ/repos/repository/pull-requests/1/comments";
    wait_for("the Data Center comment", || !comments(dc_path).is_empty());
    let reply = &comments(dc_path)[0];
    assert_eq!(reply.header("authorization"), Some("Bearer bb-token"));
    assert!(
        !reply.json()["text"].as_str().unwrap().is_empty(),
        "{}",
        reply.body
    );

    // A delivery Bitbucket Server signed itself, with its own signature.
    let captured = bitbucket_fixture("dc.pr.comment.added.json");
    let real = "ed11f92d1565a4de586727fe8260558277d58009e8957a79eb4749a7009ce083";
    let r = bitbucket_hook(
        "bitbucket-dc",
        "pr:comment:added",
        "dc-2",
        real,
        &captured,
        true,
    )
    .send(addr)
    .unwrap();
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.json()["continuationToken"], "pr:AT/atlantis-example#5");
    let r = bitbucket_hook(
        "bitbucket-dc",
        "pr:comment:added",
        "dc-3",
        real,
        b"{}",
        true,
    )
    .send(addr)
    .unwrap();
    assert_eq!(r.status, 401, "{}", r.body);
    rt.block_on(handle.close());
}

#[test]
fn a_rust_channel_gets_typed_routes_event_handlers_with_state_and_start() {
    use agentkit::channels::{ChannelDefinition, ChannelResponse, RouteDef, SendOptions};
    use agentkit::manifest::Method;
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("bot/agent");
    write(&agent.join("agent.toml"), "model = \"test\"\n");
    write(&agent.join("instructions.md"), "You help.\n");
    let started = Arc::new(Mutex::new(false));
    let s2 = started.clone();
    let def = ChannelDefinition::new("tickets")
        .state(json!({"replies": 0}))
        .route(
            RouteDef::new(Method::Post, "/report/:team", |args| async move {
                let session = args
                    .ctx
                    .send(
                        format!(
                            "{} ({})",
                            args.body["text"].as_str().unwrap_or(""),
                            args.params["team"]
                        ),
                        SendOptions {
                            continuation_token: Some(format!("t:{}", args.params["team"])),
                            ..SendOptions::default()
                        },
                        &args.auth,
                    )
                    .await?;
                Ok(ChannelResponse::json(
                    202,
                    json!({"sessionId": session.id, "urls": args.ctx.session_urls(&session.id)}),
                ))
            })
            .body_schema(json!({"type": "object", "required": ["text"]})),
        )
        .on_event("turn.completed", |_event, args| async move {
            let n = args.state()?["replies"].as_i64().unwrap_or(0);
            args.set_state(json!({"replies": n + 1}))
        })
        .on_start(move |ctx| {
            let s2 = s2.clone();
            async move {
                let none = !ctx.has_continuation_session("t:none").await;
                *s2.lock().unwrap() = none;
                Ok(())
            }
        });
    let state = dir.path().join("state");
    let handle = rt
        .block_on(agentkit::serve(
            &dir.path().join("bot"),
            ServeOptions {
                port: 0,
                state_root: Some(state.clone()),
                channels: vec![("bot".into(), def)],
                ..ServeOptions::default()
            },
        ))
        .unwrap();
    assert!(*started.lock().unwrap());
    let addr = handle.local_addr();
    let r = Request::post("/bot/v1/channels/tickets/report/ops")
        .json(&json!({}))
        .send(addr)
        .unwrap();
    assert_eq!(r.status, 400);
    let r = Request::post("/bot/v1/channels/tickets/report/ops")
        .json(&json!({"text": "printer on fire"}))
        .send(addr)
        .unwrap();
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(
        r.json()["urls"]["streamUrl"],
        format!("/bot/v1/session/{id}/stream")
    );
    let events = log_events(&state, "bot", &id);
    assert!(
        events
            .iter()
            .any(|e| e["data"]["text"] == "printer on fire (ops)")
    );
    let file = state.join(format!("bot/channels/tickets/state/{id}.json"));
    wait_for("the event handler's state", || {
        std::fs::read_to_string(&file).is_ok_and(|s| s.contains("\"replies\": 1"))
    });
    rt.block_on(handle.close());
}

/// `payload=<url-encoded JSON>`: GitHub's `content_type=form` delivery
/// (spaces as `+`, as browsers and GitHub encode forms).
fn form_encoded(json: &[u8]) -> Vec<u8> {
    let mut out = String::from("payload=");
    for &b in json {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                out.push(char::from(b))
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out.into_bytes()
}

fn github_delivery(channel: &str, event: &str, id: &str, body: &[u8], form: bool) -> Request {
    Request::post(&format!("/forms/v1/channels/{channel}"))
        .header("x-github-event", event)
        .header("x-github-delivery", id)
        .header(
            "x-hub-signature-256",
            &format!("sha256={}", agentkit_channels::sign(SECRET_FORMS, body)),
        )
        .header(
            "content-type",
            if form {
                "application/x-www-form-urlencoded"
            } else {
                "application/json"
            },
        )
        .raw_body(body)
}

const SECRET_FORMS: &str = "form-secret";

/// Every `message.received` text of the channel's sessions, by session.
fn received_texts(state: &Path) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for d in std::fs::read_dir(state.join("forms/sessions"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let log = std::fs::read_to_string(d.path().join("events.ndjson")).unwrap_or_default();
        out.push(
            log.lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|e| e["type"] == "message.received")
                .map(|e| e["data"]["text"].as_str().unwrap_or("").to_owned())
                .collect(),
        );
    }
    out.sort();
    out
}

#[test]
fn github_form_deliveries_are_read_from_their_payload_like_json_ones() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let agent = dir.path().join("forms/agent");
    write(&agent.join("agent.toml"), "model = \"test\"\n");
    write(&agent.join("instructions.md"), "Review.\n");
    // A rule channel, a catch-all channel, and providers that send JSON
    // only.
    write(
        &agent.join("channels/rules.toml"),
        r#"kind = "github"
webhook_secret = "${SECRET}"
[[rules]]
event = "pull_request"
actions = ["opened"]
[rules.turn]
message = "Review #{{ pull_request.number }} of {{ repository.full_name }} ({{ action }} by {{ sender.login }})"
continuation = "{{ delivery }}"
"#,
    );
    write(
        &agent.join("channels/all.toml"),
        "kind = \"github\"\nwebhook_secret = \"${SECRET}\"\n[[rules]]\nevent = \"*\"\n[rules.turn]\ncontinuation = \"{{ delivery }}\"\n",
    );
    write(
        &agent.join("channels/gitlab.toml"),
        "kind = \"gitlab\"\nwebhook_secret = \"${SECRET}\"\n",
    );
    write(
        &agent.join("channels/bitbucket.toml"),
        "kind = \"bitbucket\"\nwebhook_secret = \"${SECRET}\"\n",
    );
    let handle = serve(
        &rt,
        &dir.path().join("forms"),
        state.path(),
        env(&[("SECRET", SECRET_FORMS.into())]),
    );
    let addr = handle.local_addr();
    let opened = fixture("pull_request.opened.json");
    let form = form_encoded(&opened);

    // The same signed delivery as JSON and as a form: the same outcome on
    // the rule channel and on the catch-all channel.
    for channel in ["rules", "all"] {
        for (n, body, is_form) in [(1, &opened, false), (2, &form, true)] {
            let id = format!("{channel}-{n}");
            let r = github_delivery(channel, "pull_request", &id, body, is_form)
                .send(addr)
                .unwrap();
            assert_eq!(r.status, 202, "{channel} {id}: {}", r.body);
            assert_eq!(
                (r.json()["event"].clone(), r.json()["isNew"].clone()),
                (json!("pull_request"), json!(true)),
                "{channel} {id}"
            );
        }
    }
    wait_for("four sessions", || {
        received_texts(state.path()).iter().flatten().count() == 4
    });
    let texts = received_texts(state.path());
    let rule_text = "Review #2 of Codertocat/Hello-World (opened by Codertocat)";
    assert_eq!(
        texts.iter().filter(|t| t[0] == rule_text).count(),
        2,
        "{texts:#?}"
    );
    let catch_all: Vec<&Vec<String>> = texts
        .iter()
        .filter(|t| t[0].starts_with("GitHub `pull_request` (opened) on Codertocat/Hello-World"))
        .collect();
    assert_eq!(catch_all.len(), 2, "{texts:#?}");
    assert_eq!(catch_all[0], catch_all[1]);
    assert!(
        catch_all[0][0].contains("Update the README with new information."),
        "{}",
        catch_all[0][0]
    );

    // Redeliveries are deduplicated by delivery id, whatever the encoding.
    let r = github_delivery("rules", "pull_request", "rules-1", &form, true)
        .send(addr)
        .unwrap();
    assert_eq!(
        (r.status, r.json()["duplicate"].clone()),
        (200, json!(true))
    );

    // A wrong signature is refused before the body is read: a form whose
    // payload is not even JSON is 401, not 400.
    let bad = b"payload=%7Bnot+json";
    let r = Request::post("/forms/v1/channels/rules")
        .header("x-github-event", "pull_request")
        .header("x-github-delivery", "bad-1")
        .header(
            "x-hub-signature-256",
            &format!("sha256={}", agentkit_channels::sign("wrong", bad)),
        )
        .header("content-type", "application/x-www-form-urlencoded")
        .raw_body(bad)
        .send(addr)
        .unwrap();
    assert_eq!(r.status, 401, "{}", r.body);
    // Signed, but no `payload` field, or one that is not JSON: 400 saying so.
    let r = github_delivery("all", "pull_request", "no-payload", b"zen=hi", true)
        .send(addr)
        .unwrap();
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("`payload` field"), "{}", r.body);
    let r = github_delivery("all", "pull_request", "not-json", bad, true)
        .send(addr)
        .unwrap();
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("is not JSON"), "{}", r.body);

    // GitLab and Bitbucket send JSON only: a form body is a clear 415.
    let gitlab_form = form_encoded(&gitlab_fixture("push.json"));
    let r = Request::post("/forms/v1/channels/gitlab")
        .header("x-gitlab-event", "Push Hook")
        .header("x-gitlab-token", SECRET_FORMS)
        .header("content-type", "application/x-www-form-urlencoded")
        .raw_body(&gitlab_form)
        .send(addr)
        .unwrap();
    assert_eq!(r.status, 415, "{}", r.body);
    assert!(
        r.body.contains("GitLab sends webhooks as JSON only"),
        "{}",
        r.body
    );
    let bitbucket_form = form_encoded(&bitbucket_fixture("cloud.pullrequest.created.json"));
    let r = Request::post("/forms/v1/channels/bitbucket")
        .header("x-event-key", "pullrequest:created")
        .header(
            "x-hub-signature",
            &format!(
                "sha256={}",
                agentkit_channels::sign(SECRET_FORMS, &bitbucket_form)
            ),
        )
        .header("content-type", "application/x-www-form-urlencoded")
        .raw_body(&bitbucket_form)
        .send(addr)
        .unwrap();
    assert_eq!(r.status, 415, "{}", r.body);
    assert!(
        r.body.contains("Bitbucket sends webhooks as JSON only"),
        "{}",
        r.body
    );

    rt.block_on(handle.close());
}

#[test]
fn channel_bodies_fit_their_limit_and_a_larger_one_is_413_naming_it() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let agent = dir.path().join("forms/agent");
    write(&agent.join("agent.toml"), "model = \"test\"\n");
    write(&agent.join("instructions.md"), "Review.\n");
    // A GitHub catch-all channel (the packs' 25 MiB), a declarative route
    // with its own small limit, and one with the host's (1 MiB).
    write(
        &agent.join("channels/all.toml"),
        "kind = \"github\"\nwebhook_secret = \"${SECRET}\"\n[[rules]]\nevent = \"*\"\n[rules.turn]\ncontinuation = \"{{ delivery }}\"\n",
    );
    let route = "auth = [\"local_dev_strict\"]\n[[routes]]\nmethod = \"POST\"\npath = \"/\"\nbody_schema = { type = \"object\" }\n[routes.response]\nbody = { ok = true }\n";
    write(
        &agent.join("channels/small.toml"),
        &format!("max_body = \"64KiB\"\n{route}"),
    );
    write(&agent.join("channels/plain.toml"), route);
    let handle = serve(
        &rt,
        &dir.path().join("forms"),
        state.path(),
        env(&[("SECRET", SECRET_FORMS.into())]),
    );
    let addr = handle.local_addr();

    // A 2.7 MiB signed push fits a pack channel's default limit (25 MiB),
    // as JSON and as a form.
    let commits: Vec<Value> = (0..2800)
        .map(|i| {
            json!({"id": format!("{i:040x}"), "message": "x".repeat(960), "author": {"name": "Ada"}})
        })
        .collect();
    let push = serde_json::to_vec(&json!({
        "ref": "refs/heads/main",
        "repository": {"full_name": "Codertocat/Hello-World"},
        "sender": {"login": "Codertocat"},
        "commits": commits,
    }))
    .unwrap();
    assert!(push.len() > 2_700_000, "{}", push.len());
    let r = github_delivery("all", "push", "push-1", &push, false)
        .send(addr)
        .unwrap();
    assert_eq!(r.status, 202, "{}", r.body);
    let r = github_delivery("all", "push", "push-2", &form_encoded(&push), true)
        .send(addr)
        .unwrap();
    assert_eq!(r.status, 202, "{}", r.body);
    // Over a channel's limit: 413 naming it, its own or the host's.
    for (channel, limit) in [("small", "64 KiB"), ("plain", "1 MiB")] {
        let r = Request::post(&format!("/forms/v1/channels/{channel}"))
            .header("content-type", "application/json")
            .raw_body(&push)
            .send(addr)
            .unwrap();
        assert_eq!(r.status, 413, "{}", r.body);
        assert_eq!(r.json()["error"]["code"], "payload_too_large");
        let message = r.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(
            message.contains(&format!("{limit} limit of channel `{channel}`")),
            "{message}"
        );
        let r = Request::post(&format!("/forms/v1/channels/{channel}"))
            .json(&json!({"n": 1}))
            .send(addr)
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let info = Request::get("/forms/v1/info").send(addr).unwrap().json();
    let limits: Vec<(Value, Value)> = info["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["id"].clone(), c["maxBody"].clone()))
        .collect();
    for want in [
        (json!("small"), json!(65536)),
        (json!("all"), json!(26214400)),
        (json!("plain"), json!(1048576)),
    ] {
        assert!(limits.contains(&want), "{limits:?}");
    }
    // The client reads the same entries typed: limits, routes, and what
    // the GitHub pack adds.
    let client = agentkit::client::Client::new(&format!("http://{addr}/forms"), None);
    let info = rt.block_on(client.info()).unwrap();
    let by_id = |id: &str| info.channels.iter().find(|c| c.id == id).unwrap();
    let small = by_id("small");
    assert_eq!(
        (small.kind.as_str(), small.max_body),
        ("webhook", Some(65536))
    );
    assert_eq!(small.pack, None);
    assert_eq!(small.url, "/forms/v1/channels/small");
    assert_eq!(
        (
            small.routes[0].method.as_str(),
            small.routes[0].url.as_str()
        ),
        ("POST", "/forms/v1/channels/small")
    );
    assert_eq!(small.routes[0].body_schema, Some(json!({"type": "object"})));
    let all = by_id("all");
    assert_eq!(
        (all.kind.as_str(), all.max_body),
        ("github", Some(26214400))
    );
    let Some(agentkit_protocol::api::PackInfo::Forge(github)) = &all.pack else {
        panic!("{all:?}");
    };
    assert!(github.signed, "{github:?}");
    // Nothing the server sent is lost in the typed entries.
    let raw = Request::get("/forms/v1/info").send(addr).unwrap().json();
    assert_eq!(
        serde_json::to_value(&info.channels).unwrap(),
        raw["channels"]
    );
    rt.block_on(handle.close());
}
