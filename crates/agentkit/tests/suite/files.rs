//! A session's workspace over HTTP against a real server: listed in
//! pages, downloaded with its content type, written with `PUT` (the cap
//! answered `413` naming it; `..`, absolute paths and a symbolic link out
//! refused with `400`; another principal `403`, no session `404`); sent
//! as `multipart/form-data` with a message, the files read by the
//! scripted model's `read` call; and read, written and listed by a route
//! handler through the host bridge.

use agentkit::ServeOptions;
use agentkit_test_support::http::Request;
use serde_json::{Value, json};

use super::time::{Host, at, wait_until};

const SCRIPT: &str = r#"{"turns": [{"steps": [{"text": "first"}]}]}"#;

/// Turn 0 reads the uploaded brief, turn 1 the follow-up's file.
const READER: &str = r#"{"turns": [
  {"steps": [{"toolCalls": [{"name": "read", "input": {"path": "uploads/brief.txt"}}]}, {"text": "read it"}]},
  {"steps": [{"toolCalls": [{"name": "read", "input": {"path": "more/second.txt"}}]}, {"text": "read again"}]}
]}"#;

const HTTP: &str = "kind = \"http\"\nauth = [{ bearer = { tokens = { alice = \"token-a\", bob = \"token-b\" } } }]\n";

fn settled(h: &Host, id: &str, waits: usize) {
    wait_until("the session to settle", || {
        h.types(id)
            .iter()
            .filter(|t| *t == "session.waiting")
            .count()
            >= waits
    });
}

fn host() -> Host {
    host_with(SCRIPT)
}

fn host_with(script: &str) -> Host {
    let mut h = Host::new(script, &[("channels/http.toml", HTTP)], at(12, 0, 0));
    h.start(ServeOptions {
        operator_token: Some("op-token".into()),
        ..ServeOptions::default()
    });
    h
}

fn put(path: &str, token: &str, body: &[u8]) -> Request {
    Request::new("PUT", path)
        .bearer(token)
        .header("content-type", "application/octet-stream")
        .raw_body(body)
}

/// Every entry `GET …/files` lists, page by page of `limit`.
fn list_all(h: &Host, id: &str, limit: u32) -> (Vec<Value>, usize) {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let url = match &cursor {
            None => format!("/bot/v1/session/{id}/files?limit={limit}"),
            Some(c) => format!("/bot/v1/session/{id}/files?limit={limit}&cursor={c}"),
        };
        let r = h.send(Request::get(&url).bearer("token-a"));
        assert_eq!(r.status, 200, "{}", r.body);
        let body = r.json();
        pages += 1;
        all.extend(body["files"].as_array().unwrap().iter().cloned());
        match body["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return (all, pages),
        }
    }
}

#[test]
fn a_workspace_is_listed_downloaded_and_written_by_its_owner_only() {
    let h = host();
    let r = h.send(
        Request::post("/bot/v1/session")
            .bearer("token-a")
            .json(&json!({"message": "hi", "workspaceFiles": {"notes/a.txt": "hello"}})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    settled(&h, &id, 1);
    let base = format!("/bot/v1/session/{id}/files");

    // The listing: depth first, relative paths, sizes, types, times.
    let r = h.send(Request::get(&base).bearer("token-a"));
    assert_eq!(r.status, 200, "{}", r.body);
    let files = r.json()["files"].as_array().unwrap().clone();
    let paths: Vec<&str> = files.iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert!(paths.contains(&"AGENTS.md"), "{paths:?}");
    let notes = paths.iter().position(|p| *p == "notes").unwrap();
    assert_eq!(paths[notes + 1], "notes/a.txt", "{paths:?}");
    let a = &files[notes + 1];
    assert_eq!(a["type"], "file");
    assert_eq!(a["size"], 5);
    assert!(a["modifiedAt"].as_str().unwrap().ends_with('Z'), "{a}");
    assert_eq!(files[notes]["type"], "dir");
    assert!(r.json()["nextCursor"].is_null());
    // In pages of one, the same entries in the same order.
    let (paged, pages) = list_all(&h, &id, 1);
    assert_eq!(paged, files);
    assert_eq!(pages, files.len());
    let r = h.send(Request::get(&format!("{base}?cursor=zz")).bearer("token-a"));
    assert_eq!(r.status, 400, "{}", r.body);

    // Download: the bytes and a content type from the extension.
    let r = h.send(Request::get(&format!("{base}/notes/a.txt")).bearer("token-a"));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body, "hello");
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    let r = h.send(Request::get(&format!("{base}/notes/missing.txt")).bearer("token-a"));
    assert_eq!(
        (r.status, r.error_code().as_str()),
        (404, "not_found"),
        "{}",
        r.body
    );
    let r = h.send(Request::get(&format!("{base}/notes")).bearer("token-a"));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("folder"), "{}", r.body);

    // Upload: parents created, answered with its size, then downloadable
    // (a name without a known extension is `application/octet-stream`).
    let r = h.send(put(
        &format!("{base}/out/deep/data.bin"),
        "token-a",
        b"\x01\x02abc",
    ));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["size"], 5);
    assert_eq!(r.json()["path"], "out/deep/data.bin");
    let r = h.send(Request::get(&format!("{base}/out/deep/data.bin")).bearer("token-a"));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/octet-stream"));
    assert_eq!(r.body.as_bytes(), b"\x01\x02abc");
    let on_disk = h
        .dir
        .path()
        .join(format!("state/bot/sessions/{id}/workspace"));
    assert_eq!(
        std::fs::read(on_disk.join("out/deep/data.bin")).unwrap(),
        b"\x01\x02abc"
    );
    // Overwritten in place.
    let r = h.send(put(&format!("{base}/notes/a.txt"), "token-a", b"changed"));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        std::fs::read_to_string(on_disk.join("notes/a.txt")).unwrap(),
        "changed"
    );

    // Refusals: over the cap (413 naming it), out of the workspace (400),
    // onto a folder (400).
    let big = vec![b'x'; agentkit_runtime::MAX_FILE_BYTES + 1];
    let r = h.send(put(&format!("{base}/big.txt"), "token-a", &big));
    assert_eq!(r.status, 413, "{}", r.body);
    assert_eq!(r.error_code(), "payload_too_large");
    assert!(r.body.contains("8388608"), "{}", r.body);
    assert!(!on_disk.join("big.txt").exists());
    let exact = vec![b'x'; agentkit_runtime::MAX_FILE_BYTES];
    let r = h.send(put(&format!("{base}/exact.txt"), "token-a", &exact));
    assert_eq!(r.status, 200, "{}", r.body);
    let outside = tempfile::tempdir().unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(outside.path(), on_disk.join("link")).unwrap();
    for bad in [
        "../escape.txt",
        "notes/../../escape.txt",
        "%2e%2e/escape.txt",
        "/etc/passwd-copy",
        "link/x.txt",
    ] {
        let r = h.send(put(&format!("{base}/{bad}"), "token-a", b"no"));
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
        assert_eq!(r.error_code(), "bad_request", "{bad}");
    }
    assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
    assert!(!on_disk.parent().unwrap().join("escape.txt").exists());
    let r = h.send(Request::get(&format!("{base}/link/x.txt")).bearer("token-a"));
    assert_eq!(r.status, 400, "{}", r.body);
    let r = h.send(put(&format!("{base}/notes"), "token-a", b"no"));
    assert_eq!(r.status, 400, "{}", r.body);

    // Ownership as for the session: bob is refused, the operator is not,
    // an unknown session is 404.
    for req in [
        Request::get(&base),
        Request::get(&format!("{base}/notes/a.txt")),
        Request::new("PUT", &format!("{base}/bob.txt")).raw_body(b"bob"),
    ] {
        let r = h.send(req.bearer("token-b"));
        assert_eq!(r.status, 403, "{}", r.body);
    }
    assert!(!on_disk.join("bob.txt").exists());
    let r = h.send(Request::get(&format!("{base}/notes/a.txt")).bearer("op-token"));
    assert_eq!((r.status, r.body.as_str()), (200, "changed"));
    let r = h.send(put(&format!("{base}/op.txt"), "op-token", b"op"));
    assert_eq!(r.status, 200, "{}", r.body);
    let unknown = "/bot/v1/session/01ARZ3NDEKTSV4RRFFQ69G5FAV/files";
    let r = h.send(Request::get(unknown).bearer("token-a"));
    assert_eq!(r.status, 404, "{}", r.body);
    let r = h.send(put(&format!("{unknown}/x.txt"), "token-a", b"x"));
    assert_eq!(r.status, 404, "{}", r.body);
    let r = h.send(Request::get(&base));
    assert_eq!(r.status, 401, "{}", r.body);
}

const BOUNDARY: &str = "agentkit-test-boundary";

/// A `multipart/form-data` body: `(name, file name, bytes)` per part.
pub(super) fn multipart(parts: &[(&str, Option<&str>, &[u8])]) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, file, data) in parts {
        body.extend_from_slice(format!("--{BOUNDARY}\r\n").as_bytes());
        let disposition = match file {
            Some(f) => format!("form-data; name=\"{name}\"; filename=\"{f}\""),
            None => format!("form-data; name=\"{name}\""),
        };
        body.extend_from_slice(format!("content-disposition: {disposition}\r\n").as_bytes());
        if file.is_some() {
            body.extend_from_slice(b"content-type: application/octet-stream\r\n");
        }
        body.extend_from_slice(b"\r\n");
        body.extend_from_slice(data);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    body
}

/// A multipart POST, with `token` as its bearer (none when empty).
pub(super) fn post_form(path: &str, token: &str, body: &[u8]) -> Request {
    let req = Request::post(path);
    let req = if token.is_empty() {
        req
    } else {
        req.bearer(token)
    };
    req.header(
        "content-type",
        &format!("multipart/form-data; boundary={BOUNDARY}"),
    )
    .raw_body(body)
}

/// The output of the session's `read` calls, in order.
fn read_results(h: &Host, id: &str) -> Vec<String> {
    h.events(id)
        .iter()
        .filter(|e| e["type"] == "action.result")
        .map(|e| e["data"]["output"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn a_multipart_message_brings_files_the_turn_reads() {
    let h = host_with(READER);
    let body = multipart(&[
        ("message", None, b"please read the brief"),
        (
            "json",
            None,
            br#"{"title": "with files", "workspaceFiles": {"notes/n.txt": "from json"}}"#,
        ),
        ("file", Some("uploads/brief.txt"), b"the brief says 42"),
        ("file", Some("shot.png"), b"\x89PNG\r\n\x1a\n\x00\x01"),
    ]);
    let r = h.send(post_form("/bot/v1/session", "token-a", &body));
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let token = r.json()["continuationToken"].as_str().unwrap().to_owned();
    settled(&h, &id, 1);
    // The model's `read` of the upload saw its content.
    assert_eq!(read_results(&h, &id), ["the brief says 42"]);
    let received = h
        .events(&id)
        .into_iter()
        .find(|e| e["type"] == "message.received")
        .unwrap();
    assert_eq!(received["data"]["text"], "please read the brief");
    let r = h.send(Request::get(&format!("/bot/v1/session/{id}")).bearer("token-a"));
    assert_eq!(r.json()["title"], "with files");
    let ws = h
        .dir
        .path()
        .join(format!("state/bot/sessions/{id}/workspace"));
    assert_eq!(
        std::fs::read(ws.join("shot.png")).unwrap(),
        b"\x89PNG\r\n\x1a\n\x00\x01"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("notes/n.txt")).unwrap(),
        "from json"
    );
    let r = h.send(Request::get(&format!("/bot/v1/session/{id}/files/shot.png")).bearer("token-a"));
    assert_eq!(r.header("content-type"), Some("image/png"));

    // A follow-up: the token as a plain field, one file.
    let body = multipart(&[
        ("message", None, b"and this one"),
        ("continuationToken", None, token.as_bytes()),
        ("upload", Some("more/second.txt"), b"second file"),
    ]);
    let r = h.send(post_form(
        &format!("/bot/v1/session/{id}"),
        "token-a",
        &body,
    ));
    assert_eq!(r.status, 200, "{}", r.body);
    let token = r.json()["continuationToken"].as_str().unwrap().to_owned();
    settled(&h, &id, 2);
    assert_eq!(read_results(&h, &id), ["the brief says 42", "second file"]);

    // Refusals, before anything is written: a path out of the workspace,
    // a file over the cap, a body over the multipart cap, no message, a
    // path sent twice, a `json` part that is not an object.
    let before = h.types(&id).len();
    let big = vec![b'x'; agentkit_runtime::MAX_FILE_BYTES + 1];
    let huge = vec![b'x'; 16 * 1024 * 1024 + 1];
    let cases: Vec<(Vec<u8>, u16, &str)> = vec![
        (
            multipart(&[
                ("message", None, b"x"),
                ("continuationToken", None, token.as_bytes()),
                ("file", Some("../escape.txt"), b"no"),
            ]),
            400,
            "workspace",
        ),
        (
            multipart(&[
                ("message", None, b"x"),
                ("continuationToken", None, token.as_bytes()),
                ("file", Some("big.txt"), &big),
            ]),
            413,
            "8388608",
        ),
        (
            multipart(&[("message", None, b"x"), ("file", Some("huge.txt"), &huge)]),
            413,
            "16777216",
        ),
        (
            multipart(&[
                ("continuationToken", None, token.as_bytes()),
                ("file", Some("a.txt"), b"a"),
            ]),
            400,
            "message",
        ),
        (
            multipart(&[
                ("message", None, b"x"),
                ("continuationToken", None, token.as_bytes()),
                ("json", None, br#"{"workspaceFiles": {"a.txt": "1"}}"#),
                ("file", Some("a.txt"), b"2"),
            ]),
            400,
            "twice",
        ),
        (
            multipart(&[("message", None, b"x"), ("json", None, b"[1]")]),
            400,
            "JSON object",
        ),
    ];
    for (body, status, says) in cases {
        let r = h.send(post_form(
            &format!("/bot/v1/session/{id}"),
            "token-a",
            &body,
        ));
        assert_eq!(r.status, status, "{}", r.body);
        assert!(r.body.contains(says), "{says}: {}", r.body);
    }
    assert_eq!(h.types(&id).len(), before);
    assert!(!ws.join("big.txt").exists());
    assert!(!ws.parent().unwrap().join("escape.txt").exists());
    // A JSON message keeps the server's body limit (1 MiB), named.
    let long = "x".repeat(1024 * 1024 + 10);
    let r = h.send(
        Request::post("/bot/v1/session")
            .bearer("token-a")
            .json(&json!({"message": long})),
    );
    assert_eq!(r.status, 413, "{}", r.body);
    assert!(r.body.contains("1048576"), "{}", r.body);
    // Another principal's session is refused, its files unwritten.
    let body = multipart(&[("message", None, b"x"), ("file", Some("bob.txt"), b"b")]);
    let r = h.send(post_form(
        &format!("/bot/v1/session/{id}"),
        "token-b",
        &body,
    ));
    assert_eq!(r.status, 403, "{}", r.body);
    assert!(!ws.join("bob.txt").exists());
}

/// A desk whose handler works on a session's workspace through the
/// bridge and starts a session seeded from a host folder.
const DESK: &str = r#"kind = "webhook"
auth = [{ bearer = { token = "desk-token", principal = "desk" } }]
[[routes]]
method = "POST"
path = "/files/:session"
[routes.body_schema]
type = "object"
required = ["seed"]
[routes.handler]
command = ["python3", "lib/files.py"]
"#;

const FILES_PY: &str = r#"import json, os, sys, urllib.request, urllib.error
def call(method, path, body=None, raw=None):
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(os.environ["AGENTKIT_HOST_URL"] + path, method=method, data=data,
        headers={"authorization": "Bearer " + os.environ["AGENTKIT_HOST_TOKEN"], "content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers.get("content-type"), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("content-type"), e.read()
req = json.load(sys.stdin)
sid = req["params"]["session"]
base = "/v1/sessions/" + sid + "/files"
wrote = call("PUT", base + "/reports/r.txt", raw=b"from the handler")
status, ctype, body = call("GET", base + "/notes/a.txt")
listed = json.loads(call("GET", base + "?limit=100")[2])
escape = call("PUT", base + "/../x.txt", raw=b"no")
missing = call("GET", base + "/nope.txt")
sent = json.loads(call("POST", "/v1/send", {"message": "seeded", "workspaceDir": req["body"]["seed"],
    "workspaceFiles": {"extra.txt": "explicit"}})[2])
relative = call("POST", "/v1/send", {"message": "seeded", "workspaceDir": "relative/dir"})
print(json.dumps({"wrote": [wrote[0], json.loads(wrote[2])],
    "read": [status, ctype, body.decode()],
    "listed": [f["path"] for f in listed["files"]],
    "escape": escape[0], "missing": missing[0],
    "sent": sent.get("sessionId"), "relative": [relative[0], json.loads(relative[2])["error"]["message"]]}))
"#;

#[test]
fn a_route_handler_reads_writes_and_lists_a_workspace_and_seeds_a_send_from_a_folder() {
    let mut h = Host::new(
        SCRIPT,
        &[
            ("channels/http.toml", HTTP),
            ("channels/desk.toml", DESK),
            ("lib/files.py", FILES_PY),
        ],
        at(12, 0, 0),
    );
    h.start(ServeOptions::default());
    let r = h.send(
        Request::post("/bot/v1/session")
            .bearer("token-a")
            .json(&json!({"message": "hi", "workspaceFiles": {"notes/a.txt": "alice's note"}})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    settled(&h, &id, 1);

    let seed = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(seed.path().join("docs/deep")).unwrap();
    std::fs::write(seed.path().join("docs/deep/spec.md"), "# spec").unwrap();
    std::fs::write(seed.path().join("extra.txt"), "from the folder").unwrap();
    std::fs::write(seed.path().join("blob.bin"), b"\x00\xff\x01").unwrap();
    let r = h.send(
        Request::post(&format!("/bot/v1/channels/desk/files/{id}"))
            .bearer("desk-token")
            .json(&json!({"seed": seed.path()})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let out = r.json();
    assert_eq!(out["wrote"][0], 200, "{out}");
    assert_eq!(out["wrote"][1]["size"], 16, "{out}");
    assert_eq!(
        out["read"],
        json!([200, "text/plain; charset=utf-8", "alice's note"])
    );
    let listed: Vec<&str> = out["listed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert!(listed.contains(&"reports/r.txt"), "{out}");
    assert!(listed.contains(&"notes/a.txt"), "{out}");
    assert_eq!(out["escape"], 400, "{out}");
    assert_eq!(out["missing"], 404, "{out}");
    assert_eq!(out["relative"][0], 400, "{out}");
    assert!(
        out["relative"][1].as_str().unwrap().contains("absolute"),
        "{out}"
    );

    // The handler's write is in the session's workspace, as its owner
    // downloads it.
    let r = h
        .send(Request::get(&format!("/bot/v1/session/{id}/files/reports/r.txt")).bearer("token-a"));
    assert_eq!((r.status, r.body.as_str()), (200, "from the handler"));

    // The send copied the folder in before its turn; the explicit file
    // won over the folder's.
    let sent = out["sent"].as_str().unwrap().to_owned();
    settled(&h, &sent, 1);
    let ws = h
        .dir
        .path()
        .join(format!("state/bot/sessions/{sent}/workspace"));
    assert_eq!(
        std::fs::read_to_string(ws.join("docs/deep/spec.md")).unwrap(),
        "# spec"
    );
    assert_eq!(std::fs::read(ws.join("blob.bin")).unwrap(), b"\x00\xff\x01");
    assert_eq!(
        std::fs::read_to_string(ws.join("extra.txt")).unwrap(),
        "explicit"
    );
}

/// Turn 0 holds for a few seconds; turn 1 reads the follow-up's file.
const HELD: &str = r#"{"turns": [
  {"steps": [{"text": "held", "delayMs": 3000}]},
  {"steps": [{"toolCalls": [{"name": "read", "input": {"path": "more/second.txt"}}]}, {"text": "read it"}]}
]}"#;

/// On PostgreSQL, a multipart follow-up sent to the host that does not
/// run the session is routed to the one that does, its files with it
/// (binary ones too); the file routes answer each host's own copy.
#[test]
fn a_multipart_follow_up_to_another_host_brings_its_files_to_the_running_one() {
    let Some(db) = agentkit_test_support::pg::throwaway_database() else {
        return;
    };
    let hosts = Host::on_database(2, HELD, &[("channels/http.toml", HTTP)], &db.url);
    let r = hosts[0].send(
        Request::post("/bot/v1/session")
            .bearer("token-a")
            .json(&json!({"message": "hold on"})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let token = r.json()["continuationToken"].as_str().unwrap().to_owned();
    let body = multipart(&[
        ("message", None, b"and this"),
        ("continuationToken", None, token.as_bytes()),
        ("admission", None, b"coalesce"),
        ("file", Some("more/second.txt"), b"second file"),
        ("file", Some("more/bin.dat"), b"\x00\x9f\xff"),
    ]);
    let r = hosts[1].send(post_form(
        &format!("/bot/v1/session/{id}"),
        "token-a",
        &body,
    ));
    assert_eq!(r.status, 200, "{}", r.body);
    let events = |h: &Host| -> Vec<Value> {
        h.send(Request::get(&format!("/bot/v1/session/{id}/events")).bearer("token-a"))
            .body
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    wait_until("both turns", || {
        events(&hosts[1])
            .iter()
            .filter(|e| e["type"] == "turn.completed")
            .count()
            == 2
    });
    let read: Vec<Value> = events(&hosts[1])
        .into_iter()
        .filter(|e| e["type"] == "action.result")
        .map(|e| e["data"]["output"].clone())
        .collect();
    assert_eq!(read, [json!("second file")]);
    let ws = hosts[0]
        .dir
        .path()
        .join(format!("state/bot/sessions/{id}/workspace"));
    assert_eq!(
        std::fs::read(ws.join("more/bin.dat")).unwrap(),
        b"\x00\x9f\xff"
    );
    let r = hosts[0].send(
        Request::get(&format!("/bot/v1/session/{id}/files/more/second.txt")).bearer("token-a"),
    );
    assert_eq!((r.status, r.body.as_str()), (200, "second file"));
    // The other host's copy of the workspace is its own.
    let r = hosts[1].send(
        Request::get(&format!("/bot/v1/session/{id}/files/more/second.txt")).bearer("token-a"),
    );
    assert_eq!(r.status, 404, "{}", r.body);
}
