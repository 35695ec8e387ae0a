//! A real server on loopback, driven over HTTP: every built-in route and
//! status code, the auth matrix, ownership, replay while appending,
//! preemption and stop.

use std::net::SocketAddr;
use std::path::Path;

use agentkit::{ServeHandle, ServeOptions};
use agentkit_test_support::http::{Request, Response};
use serde_json::{Value, json};

/// The first turn of a session answers at once; the second holds for 30 s
/// unless interrupted; the third streams a long text.
const SCRIPT: &str = r#"{"turns": [
  {"steps": [{"text": "Hello from the script."}]},
  {"steps": [{"text": "slow", "delayMs": 30000}]},
  {"steps": [{"text": "LONG"}]}
]}"#;

/// An in-process server on a runtime of its own, closed when dropped.
pub(crate) struct Server {
    pub(crate) _dir: tempfile::TempDir,
    pub(crate) rt: tokio::runtime::Runtime,
    pub(crate) handle: Option<ServeHandle>,
}

impl Server {
    pub(crate) fn addr(&self) -> SocketAddr {
        self.handle.as_ref().unwrap().local_addr()
    }

    fn send(&self, req: Request) -> Response {
        req.send(self.addr()).unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            self.rt.block_on(h.close());
        }
    }
}

/// The operator token the suite's servers get unless a test sets its
/// own: what a scrape of the host's `/metrics` (which needs an
/// `operator`) and `/v1/logs` (an `admin`) sends.
pub(crate) const SCRAPER: &str = "suite-operator-token";

/// `options` with [`SCRAPER`] as the operator token, unless it names one.
pub(crate) fn with_scraper(options: ServeOptions) -> ServeOptions {
    ServeOptions {
        operator_token: options
            .operator_token
            .clone()
            .or_else(|| Some(SCRAPER.to_owned())),
        ..options
    }
}

/// `GET /metrics` as the suite's scraper (an operator).
pub(crate) fn scrape(addr: std::net::SocketAddr) -> Response {
    Request::get("/metrics").bearer(SCRAPER).send(addr).unwrap()
}

pub(crate) fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A host folder with one scripted agent `bot` (plus `extra` files), served
/// with `options`.
pub(crate) fn server(extra: &[(&str, &str)], options: ServeOptions) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let long = (0..300)
        .map(|i| format!("w{i}"))
        .collect::<Vec<_>>()
        .join(" ");
    let project = dir.path().join("agents/bot/agent");
    write(
        &project.join("agent.toml"),
        "model = \"scripted:script.json\"\n",
    );
    write(&project.join("script.json"), &SCRIPT.replace("LONG", &long));
    write(&project.join("instructions.md"), "You are a test agent.\n");
    for (rel, text) in extra {
        write(&project.join(rel), text);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let options = with_scraper(ServeOptions {
        port: 0,
        state_root: Some(dir.path().join("state")),
        ..options
    });
    let handle = rt
        .block_on(agentkit::serve(&dir.path().join("agents"), options))
        .unwrap();
    Server {
        _dir: dir,
        rt,
        handle: Some(handle),
    }
}

fn create(s: &Server, message: &str) -> Value {
    let r = s.send(Request::post("/bot/v1/session").json(&json!({"message": message})));
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

fn stream_until(s: &Server, id: &str, start: u64, t: &str) -> Vec<Value> {
    let mut lines = Request::get(&format!("/bot/v1/session/{id}/stream?startIndex={start}"))
        .stream(s.addr())
        .unwrap();
    assert_eq!(lines.status, 200);
    lines.until(t).unwrap()
}

fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e["type"].as_str().unwrap() {
            "turn.failed" => format!(
                "turn.failed({})",
                e["data"]["reason"].as_str().unwrap_or("")
            ),
            t => t.to_owned(),
        })
        .filter(|t| t.starts_with("turn.") || t.starts_with("session.") || t == "message.received")
        .collect()
}

#[test]
fn host_routes_and_the_session_lifecycle() {
    let s = server(&[], ServeOptions::default());
    let index = s.send(Request::get("/"));
    assert_eq!(index.status, 200);
    assert!(index.body.contains("/bot"), "{}", index.body);
    assert_eq!(s.send(Request::get("/v1/health")).json()["ok"], true);
    assert_eq!(
        s.send(Request::get("/v1/agents")).json()["agents"][0]["slug"],
        "bot"
    );
    assert_eq!(s.send(Request::get("/bot/v1/health")).status, 200);
    let info = s.send(Request::get("/bot/v1/info"));
    assert_eq!(info.status, 200);
    assert_eq!(info.json()["project"]["slug"], "bot");

    let created = create(&s, "hi");
    let id = created["sessionId"].as_str().unwrap();
    let token = created["continuationToken"].as_str().unwrap();
    assert_eq!(created["isNew"], true);
    assert_eq!(created["traceUrl"], format!("/bot/v1/session/{id}/events"));
    let events = stream_until(&s, id, 0, "session.waiting");
    assert_eq!(
        kinds(&events),
        [
            "session.started",
            "message.received",
            "turn.started",
            "turn.completed",
            "session.waiting"
        ]
    );
    assert_eq!(
        events
            .iter()
            .find(|e| e["type"] == "turn.completed")
            .unwrap()["data"]["result"],
        "Hello from the script."
    );

    // The events dump ends; the stream from an index replays from there.
    let dump = s.send(Request::get(&format!("/bot/v1/session/{id}/events")));
    assert_eq!(dump.header("content-type"), Some("application/x-ndjson"));
    assert_eq!(dump.body.lines().count(), events.len());
    let tail = stream_until(&s, id, 3, "session.waiting");
    assert_eq!(tail[0]["index"], 3);

    // Follow-up rotates the token; the old one is stale.
    let r = s.send(
        Request::post(&format!("/bot/v1/session/{id}"))
            .json(&json!({"message": "more", "continuationToken": token})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let fresh = r.json()["continuationToken"].as_str().unwrap().to_owned();
    assert_ne!(fresh, token);
    let stale = s.send(
        Request::post(&format!("/bot/v1/session/{id}"))
            .json(&json!({"message": "again", "continuationToken": token})),
    );
    assert_eq!(
        (stale.status, stale.error_code()),
        (409, "stale_continuation".to_owned())
    );
    // Stop interrupts the slow second turn.
    let mut lines = Request::get(&format!("/bot/v1/session/{id}/stream?startIndex=0"))
        .stream(s.addr())
        .unwrap();
    lines.until("turn.started").unwrap();
    lines.until("turn.started").unwrap();
    let stop = s.send(Request::post(&format!("/bot/v1/session/{id}/stop")));
    assert_eq!(stop.status, 200);
    let events = stream_until(&s, id, 0, "session.waiting");
    let all = stream_until(&s, id, events.len() as u64, "session.waiting");
    assert!(
        kinds(&all).contains(&"turn.failed(stopped)".to_owned()),
        "{:?}",
        kinds(&all)
    );

    let list = s.send(Request::get("/bot/v1/sessions")).json();
    assert_eq!(list["sessions"][0]["sessionId"], id);
}

#[test]
fn bad_requests_get_json_errors_never_500() {
    let s = server(
        &[],
        ServeOptions {
            body_limit: 4096,
            ..ServeOptions::default()
        },
    );
    let check = |r: Response, status: u16, code: &str| {
        assert_eq!(
            (r.status, r.error_code()),
            (status, code.to_owned()),
            "{}",
            r.body
        );
        assert_eq!(r.json()["ok"], false);
    };
    check(
        s.send(Request::post("/bot/v1/session").raw_body(b"{not json")),
        400,
        "bad_request",
    );
    check(
        s.send(Request::post("/bot/v1/session").raw_body(b"")),
        400,
        "bad_request",
    );
    check(
        s.send(Request::post("/bot/v1/session").json(&json!({"message": 5}))),
        400,
        "bad_request",
    );
    check(
        s.send(Request::post("/bot/v1/session").json(&json!({"message": "  "}))),
        400,
        "bad_request",
    );
    check(
        s.send(Request::post("/bot/v1/session").json(&json!({"message": "x".repeat(8000)}))),
        413,
        "payload_too_large",
    );
    check(
        s.send(Request::get("/bot/v1/session/ses_nope/events")),
        404,
        "session_not_found",
    );
    check(
        s.send(Request::post("/bot/v1/session/ses_nope").json(&json!({"message": "x"}))),
        404,
        "session_not_found",
    );
    check(
        s.send(Request::get("/bot/v1/session/a.b/stream")),
        400,
        "invalid_session_id",
    );
    check(
        s.send(Request::get("/bot/v1/session/ses_nope/stream?startIndex=x")),
        400,
        "bad_request",
    );
    check(s.send(Request::get("/nope")), 404, "not_found");
    check(
        s.send(Request::get("/bot/v1/session/ses_x/approvals")),
        404,
        "session_not_found",
    );
    check(
        s.send(
            Request::post("/bot/v1/session/ses_x/approvals/c1").json(&json!({"decision": "maybe"})),
        ),
        400,
        "bad_request",
    );
    check(
        s.send(Request::post("/bot/v1/tools/echo").json(&json!({"input": {}}))),
        404,
        "unknown_tool",
    );
}

#[test]
fn default_chain_admits_direct_loopback_only() {
    let s = server(&[], ServeOptions::default());
    assert_eq!(s.send(Request::get("/bot/v1/sessions")).status, 200);
    assert_eq!(
        s.send(Request::get("/bot/v1/sessions").host("localhost:3000"))
            .status,
        200
    );
    for (name, value) in [
        ("x-forwarded-for", "203.0.113.9"),
        ("forwarded", "for=203.0.113.9"),
        ("x-real-ip", "203.0.113.9"),
        ("x-forwarded-host", "evil.example"),
    ] {
        let r = s.send(Request::get("/bot/v1/sessions").header(name, value));
        assert_eq!(
            (r.status, r.error_code()),
            (401, "unauthorized".to_owned()),
            "{name}"
        );
    }
    assert_eq!(
        s.send(Request::get("/bot/v1/sessions").host("evil.example"))
            .status,
        401
    );
    // Host routes need no auth.
    assert_eq!(
        s.send(Request::get("/v1/health").host("evil.example"))
            .status,
        200
    );
}

#[test]
fn bearer_flag_replaces_the_default_chain() {
    let s = server(
        &[],
        ServeOptions {
            bearer_token: Some("s3cret".into()),
            ..ServeOptions::default()
        },
    );
    assert_eq!(s.send(Request::get("/bot/v1/sessions")).status, 401);
    assert_eq!(
        s.send(Request::get("/bot/v1/sessions").bearer("wrong"))
            .status,
        401
    );
    assert_eq!(
        s.send(Request::get("/bot/v1/sessions").bearer("s3cret"))
            .status,
        200
    );
    // A remote-looking request with the right token is admitted: the token,
    // not the network position, is the credential now.
    assert_eq!(
        s.send(
            Request::get("/bot/v1/sessions")
                .bearer("s3cret")
                .host("agents.example")
                .header("x-forwarded-for", "203.0.113.9")
        )
        .status,
        200
    );
}

#[test]
fn sessions_belong_to_their_principal_over_http() {
    let http_toml = r#"kind = "http"
auth = [{ bearer = { tokens = { alice = "token-a", bob = "token-b" } } }]
"#;
    let s = server(
        &[("channels/http.toml", http_toml)],
        ServeOptions {
            allow_anonymous: true,
            ..ServeOptions::default()
        },
    );
    // The authored chain wins over --allow-anonymous.
    assert_eq!(
        s.send(Request::post("/bot/v1/session").json(&json!({"message": "hi"})))
            .status,
        401
    );
    let r = s.send(
        Request::post("/bot/v1/session")
            .bearer("token-a")
            .json(&json!({"message": "hi"})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let token = r.json()["continuationToken"].as_str().unwrap().to_owned();
    let as_bob = |req: Request| s.send(req.bearer("token-b"));
    for r in [
        as_bob(
            Request::post(&format!("/bot/v1/session/{id}"))
                .json(&json!({"message": "mine", "continuationToken": token})),
        ),
        as_bob(Request::get(&format!("/bot/v1/session/{id}/events"))),
        as_bob(Request::get(&format!("/bot/v1/session/{id}/stream"))),
        as_bob(Request::post(&format!("/bot/v1/session/{id}/stop"))),
    ] {
        assert_eq!(
            (r.status, r.error_code()),
            (403, "forbidden".to_owned()),
            "{}",
            r.body
        );
    }
    assert_eq!(
        as_bob(Request::get("/bot/v1/sessions")).json()["sessions"],
        json!([])
    );
    let alice = s
        .send(Request::get("/bot/v1/sessions").bearer("token-a"))
        .json();
    assert_eq!(alice["sessions"][0]["sessionId"], id.as_str());
}

#[test]
fn a_follow_up_preempts_over_http_and_reject_answers_busy() {
    let s = server(&[], ServeOptions::default());
    let created = create(&s, "one");
    let id = created["sessionId"].as_str().unwrap();
    stream_until(&s, id, 0, "session.waiting");
    let t1 = created["continuationToken"].as_str().unwrap();
    // Turn 2 is the slow one.
    let r = s.send(
        Request::post(&format!("/bot/v1/session/{id}"))
            .json(&json!({"message": "two", "continuationToken": t1})),
    );
    let t2 = r.json()["continuationToken"].as_str().unwrap().to_owned();
    let mut lines = Request::get(&format!("/bot/v1/session/{id}/stream?startIndex=0"))
        .stream(s.addr())
        .unwrap();
    let mut seen = lines.until("turn.started").unwrap();
    seen.extend(lines.until("turn.started").unwrap());
    let busy = s.send(
        Request::post(&format!("/bot/v1/session/{id}"))
            .json(&json!({"message": "no", "continuationToken": t2, "admission": "reject"})),
    );
    assert_eq!(
        (busy.status, busy.error_code()),
        (409, "session_busy".to_owned())
    );
    let r = s.send(
        Request::post(&format!("/bot/v1/session/{id}"))
            .json(&json!({"message": "three", "continuationToken": t2})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    seen.extend(lines.until("session.waiting").unwrap());
    assert_eq!(
        kinds(&seen),
        [
            "session.started",
            "message.received",
            "turn.started",
            "turn.completed",
            "session.waiting",
            "message.received",
            "turn.started",
            "message.received",
            "turn.failed(preempted)",
            "turn.started",
            "turn.completed",
            "session.waiting"
        ]
    );
}

#[test]
fn replay_from_any_index_while_events_are_appended() {
    let s = server(&[], ServeOptions::default());
    let created = create(&s, "one");
    let id = created["sessionId"].as_str().unwrap().to_owned();
    let mut token = created["continuationToken"].as_str().unwrap().to_owned();
    stream_until(&s, &id, 0, "session.waiting");
    // Turn 2 (slow) is preempted by turn 3, which streams ~100 deltas.
    let mut lines = Request::get(&format!("/bot/v1/session/{id}/stream?startIndex=0"))
        .stream(s.addr())
        .unwrap();
    lines.until("turn.started").unwrap();
    for message in ["two", "three"] {
        let r = s.send(
            Request::post(&format!("/bot/v1/session/{id}"))
                .json(&json!({"message": message, "continuationToken": token})),
        );
        token = r.json()["continuationToken"].as_str().unwrap().to_owned();
        // Send "three" only once "two" has its turn running, so it preempts.
        if message == "two" {
            lines.until("turn.started").unwrap();
        }
    }
    // Followers start at scattered indices while the long turn is written;
    // each sees a contiguous run of indices up to the settle event.
    let followers: Vec<_> = [0u64, 1, 4, 9, 17, 40, 77]
        .into_iter()
        .map(|start| {
            let addr = s.addr();
            let id = id.clone();
            std::thread::spawn(move || {
                let mut lines =
                    Request::get(&format!("/bot/v1/session/{id}/stream?startIndex={start}"))
                        .stream(addr)
                        .unwrap();
                let mut got = Vec::new();
                let mut waits = 0;
                while let Some(e) = lines.next_json().unwrap() {
                    got.push(e["index"].as_u64().unwrap());
                    if e["type"] == "session.waiting" {
                        waits += 1;
                        // The first wait is turn 1's; the third turn ends with the second.
                        if e["index"].as_u64().unwrap() > 20 && waits >= 1 {
                            break;
                        }
                    }
                }
                (start, got)
            })
        })
        .collect();
    for f in followers {
        let (start, got) = f.join().unwrap();
        assert_eq!(got.first().copied(), Some(start));
        assert!(
            got.windows(2).all(|w| w[1] == w[0] + 1),
            "gap or duplicate from {start}: {got:?}"
        );
    }
}

/// Raw lines of `id`'s stream (`query` appended) from 0 until the
/// `session.waiting` at or past index `past`.
fn raw_lines(addr: SocketAddr, id: &str, query: &str, past: u64) -> Vec<Vec<u8>> {
    let mut lines = Request::get(&format!("/bot/v1/session/{id}/stream?startIndex=0{query}"))
        .stream(addr)
        .unwrap();
    let mut out = Vec::new();
    while let Some(line) = lines.next_line().unwrap() {
        let e: Value = serde_json::from_slice(&line).unwrap();
        out.push(line);
        if e["type"] == "session.waiting" && e["index"].as_u64().unwrap() >= past {
            break;
        }
    }
    out
}

#[test]
fn streamed_lines_are_the_stored_lines_but_a_deltas_text() {
    let s = server(&[], ServeOptions::default());
    let created = create(&s, "one");
    let id = created["sessionId"].as_str().unwrap().to_owned();
    let token = created["continuationToken"].as_str().unwrap().to_owned();
    let first = stream_until(&s, &id, 0, "session.waiting");
    let settled = first.last().unwrap()["index"].as_u64().unwrap();
    // Followers from index 0 while the long third turn is written: its
    // events reach them live, the first turn's from memory or the file.
    let followers: Vec<_> = ["&text=false", "", "&text=true"]
        .into_iter()
        .map(|query| {
            let (addr, id) = (s.addr(), id.clone());
            std::thread::spawn(move || (query, raw_lines(addr, &id, query, settled + 4)))
        })
        .collect();
    let mut token = token;
    let mut lines = Request::get(&format!(
        "/bot/v1/session/{id}/stream?startIndex={}",
        settled + 1
    ))
    .stream(s.addr())
    .unwrap();
    for message in ["two", "three"] {
        let r = s.send(
            Request::post(&format!("/bot/v1/session/{id}"))
                .json(&json!({"message": message, "continuationToken": token})),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        token = r.json()["continuationToken"].as_str().unwrap().to_owned();
        if message == "two" {
            lines.until("turn.started").unwrap();
        }
    }
    let streams: Vec<_> = followers.into_iter().map(|f| f.join().unwrap()).collect();
    let count = streams[0].1.len();
    // The log, once the session's folder is in place.
    let path = s
        ._dir
        .path()
        .join(format!("state/bot/sessions/{id}/events.ndjson"));
    let mut stored = Vec::new();
    for _ in 0..500 {
        stored = std::fs::read(&path).unwrap_or_default();
        if stored.split(|b| *b == b'\n').count() > count {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let stored: Vec<&[u8]> = stored.split(|b| *b == b'\n').take(count).collect();
    assert_eq!(
        stored.len(),
        count,
        "the log has fewer lines than the stream"
    );
    let deltas = stored
        .iter()
        .filter(|l| l.starts_with(br#"{"type":"message.appended""#))
        .count();
    assert!(deltas > 50, "the long turn streamed {deltas} deltas");
    for (query, got) in &streams {
        assert_eq!(got.len(), count, "{query}");
        for (line, log) in got.iter().zip(&stored) {
            let e: Value = serde_json::from_slice(line).unwrap();
            if *query == "&text=false" || e["type"] != "message.appended" {
                assert_eq!(
                    String::from_utf8_lossy(line),
                    String::from_utf8_lossy(log),
                    "stream{query}"
                );
            } else {
                // With its text so far, and otherwise the stored line.
                let mut bare = e.clone();
                bare["data"].as_object_mut().unwrap().remove("text");
                assert!(e["data"]["text"].is_string(), "{e}");
                assert_eq!(bare, serde_json::from_slice::<Value>(log).unwrap());
            }
        }
    }
}

#[test]
fn single_mode_mounts_at_the_root() {
    let s = server(
        &[],
        ServeOptions {
            mode: agentkit::Mode::Single,
            ..ServeOptions::default()
        },
    );
    let r = s.send(Request::post("/v1/session").json(&json!({"message": "hi"})));
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.json()["traceUrl"]
            .as_str()
            .unwrap()
            .starts_with("/v1/session/")
    );
    assert_eq!(s.send(Request::get("/v1/health")).json()["slug"], "bot");
}

#[test]
fn serve_refuses_a_project_with_errors() {
    let dir = tempfile::tempdir().unwrap();
    write(
        &dir.path().join("bad/agent/agent.toml"),
        "model = \"nope\"\n",
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let err = rt
        .block_on(agentkit::serve(
            &dir.path().join("bad"),
            ServeOptions {
                port: 0,
                ..ServeOptions::default()
            },
        ))
        .unwrap_err();
    assert!(matches!(err, agentkit::Error::Invalid { .. }), "{err}");
}

const ECHO_TOOL: &str = r#"description = "Echo the input back"
command = ["python3", "echo.py"]
[input_schema]
type = "object"
required = ["text"]
properties.text = { type = "string" }
properties.times = { type = "integer", minimum = 1 }
"#;

const ECHO_PY: &str = r#"import json, os, sys, time
args = json.load(sys.stdin)
if args["text"] == "slow":
    time.sleep(30)
if args["text"] == "fail":
    sys.stderr.write("asked to fail\n")
    sys.exit(3)
print(json.dumps({"echo": args["text"] * args.get("times", 1), "cwd": os.getcwd(), "workspace": os.environ["AGENTKIT_WORKSPACE_DIR"], "session": os.environ["AGENTKIT_SESSION_ID"]}))
"#;

fn tool_server() -> Server {
    server(
        &[
            ("tools/echo.toml", ECHO_TOOL),
            ("tools/echo.py", ECHO_PY),
            (
                "tools/note.toml",
                "description = \"Agent-side\"\nexecution = \"agent\"\nscript = \"echo hi\"\n",
            ),
        ],
        ServeOptions::default(),
    )
}

#[test]
fn deterministic_tool_calls_validate_run_and_report() {
    let s = tool_server();
    let r = s.send(
        Request::post("/bot/v1/tools/echo").json(&json!({"input": {"text": "ab", "times": 2}})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let doc = r.json();
    assert_eq!(
        (
            doc["ok"].clone(),
            doc["toolName"].clone(),
            doc["isError"].clone()
        ),
        (json!(true), json!("echo"), json!(false))
    );
    assert_eq!(doc["result"]["echo"], "abab");
    assert_eq!(doc["result"]["session"], "direct");
    assert!(doc["callId"].as_str().unwrap().starts_with("tool_echo_"));
    assert!(doc["durationMs"].is_u64());
    // The ephemeral workspace lived under tool-calls/ and is gone.
    let ws = doc["result"]["workspace"].as_str().unwrap();
    assert!(ws.contains("/tool-calls/tool_echo_"), "{ws}");
    assert!(!Path::new(ws).exists());

    // A failing tool is an error result, not an HTTP error.
    let r = s.send(Request::post("/bot/v1/tools/echo").json(&json!({"input": {"text": "fail"}})));
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["isError"], true);
    assert!(r.body.contains("asked to fail"), "{}", r.body);

    // Refusals, before anything runs.
    let r = s.send(Request::post("/bot/v1/tools/missing").json(&json!({"input": {}})));
    assert_eq!((r.status, r.error_code()), (404, "unknown_tool".to_owned()));
    assert_eq!(r.json()["error"]["available"], json!(["echo"]));
    let r = s.send(Request::post("/bot/v1/tools/note").json(&json!({"input": {}})));
    assert_eq!((r.status, r.error_code()), (400, "bad_request".to_owned()));
    let r = s.send(Request::post("/bot/v1/tools/echo").json(&json!({"input": {"times": 0}})));
    assert_eq!(
        (r.status, r.error_code()),
        (400, "invalid_input".to_owned()),
        "{}",
        r.body
    );
    let errors = r.json()["error"]["errors"].as_array().unwrap().clone();
    let paths: Vec<&str> = errors.iter().map(|e| e["path"].as_str().unwrap()).collect();
    assert!(
        paths.contains(&"") && paths.contains(&"/times"),
        "{errors:?}"
    );
    // The same auth chain as the session API.
    assert_eq!(
        s.send(
            Request::post("/bot/v1/tools/echo")
                .json(&json!({"input": {"text": "x"}}))
                .host("evil.example")
        )
        .status,
        401
    );
}

#[test]
fn session_bound_calls_are_recorded_and_wait_for_no_turn() {
    let s = tool_server();
    let created = create(&s, "one");
    let id = created["sessionId"].as_str().unwrap().to_owned();
    let token = created["continuationToken"].as_str().unwrap().to_owned();
    stream_until(&s, &id, 0, "session.waiting");
    let r = s.send(
        Request::post("/bot/v1/tools/echo")
            .json(&json!({"input": {"text": "in session"}, "sessionId": id})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let doc = r.json();
    assert_eq!(doc["result"]["session"], id.as_str());
    assert!(
        doc["result"]["workspace"]
            .as_str()
            .unwrap()
            .ends_with(&format!("sessions/{id}/workspace"))
    );
    let events: Vec<Value> = s
        .send(Request::get(&format!("/bot/v1/session/{id}/events")))
        .body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let tail = &events[events.len() - 2..];
    assert_eq!(tail[0]["type"], "actions.requested");
    assert_eq!(tail[1]["type"], "action.result");
    assert_eq!(tail[0]["turnId"], tail[1]["turnId"]);
    assert_eq!(tail[1]["data"]["callId"], doc["callId"]);
    // While a turn runs (turn 2 is the slow one), the call is refused.
    s.send(
        Request::post(&format!("/bot/v1/session/{id}"))
            .json(&json!({"message": "two", "continuationToken": token})),
    );
    let mut lines = Request::get(&format!(
        "/bot/v1/session/{id}/stream?startIndex={}",
        events.len()
    ))
    .stream(s.addr())
    .unwrap();
    lines.until("turn.started").unwrap();
    let busy = s.send(
        Request::post("/bot/v1/tools/echo").json(&json!({"input": {"text": "x"}, "sessionId": id})),
    );
    assert_eq!(
        (busy.status, busy.error_code()),
        (409, "session_busy".to_owned())
    );
    let stop = s.send(Request::post(&format!("/bot/v1/session/{id}/stop")));
    assert_eq!(stop.status, 200);
}

/// A message that arrives while a session-bound call runs is admitted by
/// the session's policy: the default (preempt) cancels the call, which
/// answers 200 with the cancellation as its error result, and the
/// message's turn starts once the call's result is recorded. A call for a session that does not
/// exist is 404.
#[test]
fn a_turn_arriving_during_a_session_bound_call_preempts_it() {
    let s = tool_server();
    let created = create(&s, "one");
    let id = created["sessionId"].as_str().unwrap().to_owned();
    let token = created["continuationToken"].as_str().unwrap().to_owned();
    let settled = stream_until(&s, &id, 0, "session.waiting");
    let addr = s.addr();
    let sid = id.clone();
    let call = std::thread::spawn(move || {
        Request::post("/bot/v1/tools/echo")
            .json(&json!({"input": {"text": "slow"}, "sessionId": sid}))
            .send(addr)
            .unwrap()
    });
    let start = settled.last().unwrap()["index"].as_u64().unwrap() + 1;
    let mut lines = Request::get(&format!("/bot/v1/session/{id}/stream?startIndex={start}"))
        .stream(addr)
        .unwrap();
    lines.until("actions.requested").unwrap();
    let started = std::time::Instant::now();
    let r = s.send(
        Request::post(&format!("/bot/v1/session/{id}"))
            .json(&json!({"message": "two", "continuationToken": token})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let answered = call.join().unwrap();
    // Well before the tool's 30 s sleep would have ended.
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    assert_eq!(answered.status, 200, "{}", answered.body);
    let doc = answered.json();
    assert_eq!(doc["isError"], true, "{doc}");
    assert!(doc["result"].to_string().contains("cancelled"), "{doc}");
    let after = lines.until("turn.started").unwrap();
    let kinds: Vec<&str> = after.iter().map(|e| e["type"].as_str().unwrap()).collect();
    // The message is recorded as it arrives, the cancelled call's result
    // follows, then the message's turn starts.
    assert_eq!(
        kinds,
        ["message.received", "action.result", "turn.started"],
        "{after:?}"
    );
    assert_eq!(after[1]["data"]["isError"], true);
    s.send(Request::post(&format!("/bot/v1/session/{id}/stop")));

    let r = s.send(
        Request::post("/bot/v1/tools/echo")
            .json(&json!({"input": {"text": "x"}, "sessionId": "nope"})),
    );
    assert_eq!(r.status, 404, "{}", r.body);
}

/// An experiment's variant model answers a session's turns, unless the
/// host forces one model for every turn (`run --model`, `eval --model`).
#[test]
fn a_variant_model_answers_unless_the_host_forces_one() {
    let extra = [
        (
            "ab.toml",
            "[[variants]]\nid = \"a\"\nmodel = \"scripted:variant.json\"\n[[variants]]\nid = \"b\"\nmodel = \"scripted:variant.json\"\n",
        ),
        (
            "variant.json",
            r#"{"turns": [{"steps": [{"text": "from the variant"}]}]}"#,
        ),
        (
            "forced.json",
            r#"{"turns": [{"steps": [{"text": "from the forced model"}]}]}"#,
        ),
    ];
    for (forced, expected) in [
        (None, "from the variant"),
        (Some("scripted:forced.json"), "from the forced model"),
    ] {
        let s = server(
            &extra,
            ServeOptions {
                model: forced.map(str::to_owned),
                ..Default::default()
            },
        );
        let a = create(&s, "hi");
        let id = a["sessionId"].as_str().unwrap();
        let events = stream_until(&s, id, 0, "session.waiting");
        let assigned = events
            .iter()
            .find(|e| e["type"] == "ab.assigned")
            .expect("an ab.assigned event");
        assert_eq!(assigned["data"]["experiment"], "ab");
        let done = events
            .iter()
            .find(|e| e["type"] == "turn.completed")
            .expect("the turn completed");
        assert_eq!(done["data"]["result"], expected, "forced: {forced:?}");
    }
}
