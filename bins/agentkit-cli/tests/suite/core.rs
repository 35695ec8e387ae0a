//! The session core against a real `agentkit serve` child: thousands of
//! sessions under `ulimit -n 1024`, the log of a long reply, and a
//! SIGKILL in the middle of one followed by a byte-identical replay.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentkit_test_support::http::Request;
use agentkit_test_support::process::{ServerProcess, free_port};
use serde_json::{Value, json};

/// A project whose every turn answers `reply` in one step.
fn project(root: &Path, reply: &str) {
    let agent = root.join("bot/agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("agent.toml"),
        "model = \"scripted:script.json\"\n",
    )
    .unwrap();
    let turns: Vec<Value> = (0..30)
        .map(|_| json!({"steps": [{"text": reply}]}))
        .collect();
    std::fs::write(
        agent.join("script.json"),
        serde_json::to_string(&json!({ "turns": turns })).unwrap(),
    )
    .unwrap();
    std::fs::write(agent.join("instructions.md"), "Test agent.\n").unwrap();
}

/// `agentkit serve` on `root`, with the descriptor limit (soft and hard)
/// set to `nofile` when given.
fn start(root: &Path, port: u16, nofile: Option<u32>) -> ServerProcess {
    start_with(root, port, nofile, &[])
}

/// [`start`] with more environment variables.
fn start_with(root: &Path, port: u16, nofile: Option<u32>, env: &[(&str, &str)]) -> ServerProcess {
    let bin = env!("CARGO_BIN_EXE_agentkit");
    let mut cmd = match nofile {
        Some(n) => {
            let mut c = Command::new("sh");
            c.arg("-c")
                .arg(format!("ulimit -n {n} && exec \"$0\" \"$@\""))
                .arg(bin);
            c
        }
        None => Command::new(bin),
    };
    let child = cmd
        .args([
            "serve",
            "--dir",
            "bot",
            "--port",
            &port.to_string(),
            "--state-root",
            "state",
        ])
        .current_dir(root)
        .env("NO_COLOR", "1")
        .envs(env.iter().copied())
        .env_remove("AGENTKIT_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    ServerProcess::healthy(child, port, Duration::from_secs(30))
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// One whole turn: POST, then the stream until the session waits.
fn turn(addr: SocketAddr) -> Result<String, String> {
    turn_counting(addr, &AtomicUsize::new(0))
}

/// [`turn`], honouring a `503 overloaded` with its `Retry-After` (at most
/// five times) as a client should, and counting those answers in `shed`.
fn turn_counting(addr: SocketAddr, shed: &AtomicUsize) -> Result<String, String> {
    let mut tries = 0;
    let r = loop {
        let r = Request::post("/bot/v1/session")
            .json(&json!({"message": "hi"}))
            .send(addr)
            .map_err(|e| format!("post: {e}"))?;
        if r.status != 503 || tries == 5 {
            break r;
        }
        tries += 1;
        shed.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_secs(1));
    };
    if r.status != 200 {
        return Err(format!("post {}: {}", r.status, r.body));
    }
    let id = r.json()["sessionId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let mut lines = Request::get(&format!("/bot/v1/session/{id}/stream"))
        .stream(addr)
        .map_err(|e| format!("stream: {e}"))?;
    let events = lines
        .until("session.waiting")
        .map_err(|e| format!("stream of {id}: {e}"))?;
    if !events.iter().any(|e| e["type"] == "turn.completed") {
        return Err(format!("{id}: no turn.completed in {events:?}"));
    }
    Ok(id)
}

#[cfg(target_os = "linux")]
#[test]
fn thousands_of_sessions_under_a_limit_of_1024_descriptors() {
    const SESSIONS: usize = 2_500;
    const CLIENTS: usize = 4;
    let tmp = tempfile::tempdir().unwrap();
    project(tmp.path(), "Hello there, how can I help you today?");
    let server = start(tmp.path(), free_port(), Some(1024));
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", server.child.id())).unwrap();
    let open_files = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap()
        .to_owned();
    assert!(
        open_files
            .split_whitespace()
            .filter(|w| *w == "1024")
            .count()
            == 2,
        "{open_files}"
    );

    let next = Arc::new(AtomicUsize::new(0));
    // Turns shed with `503` and retried: a few when the machine is loaded
    // (a turn's slot is let go a moment after `session.waiting`), never
    // many.
    let shed = Arc::new(AtomicUsize::new(0));
    let addr = server.addr;
    let workers: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (next, shed) = (next.clone(), shed.clone());
            std::thread::spawn(move || {
                let mut errors = Vec::new();
                while next.fetch_add(1, Ordering::SeqCst) < SESSIONS {
                    if let Err(e) = turn_counting(addr, &shed) {
                        errors.push(e);
                    }
                }
                errors
            })
        })
        .collect();
    let errors: Vec<String> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    assert!(
        errors.is_empty(),
        "{} of {SESSIONS} failed; first: {:?}",
        errors.len(),
        errors.first()
    );
    let shed = shed.load(Ordering::SeqCst);
    assert!(shed * 20 < SESSIONS, "{shed} of {SESSIONS} turns were shed");
    // A new session's folder is moved into `sessions/` in the background
    // (it starts as a spare): the last few may be a moment behind.
    let folders = || {
        std::fs::read_dir(tmp.path().join("state/bot/sessions"))
            .unwrap()
            .count()
    };
    let mut stored = folders();
    for _ in 0..100 {
        if stored == SESSIONS {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        stored = folders();
    }
    assert_eq!(stored, SESSIONS);
    let fds = open_fds(server.child.id());
    if fds > 256 {
        let mut kinds = std::collections::BTreeMap::<String, usize>::new();
        for fd in std::fs::read_dir(format!("/proc/{}/fd", server.child.id())).unwrap() {
            let target = std::fs::read_link(fd.unwrap().path())
                .map(|t| t.to_string_lossy().into_owned())
                .unwrap_or_default();
            let kind = target
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .split(':')
                .next()
                .unwrap_or_default()
                .to_owned();
            *kinds.entry(kind).or_default() += 1;
        }
        panic!("{fds} descriptors held after {SESSIONS} sessions: {kinds:?}");
    }
    // And the server still serves, old sessions included.
    // (Listed in pages of 1,000, following the cursors.)
    let mut listed: Vec<String> = Vec::new();
    let mut cursor = String::new();
    loop {
        let r = Request::get(&format!("/bot/v1/sessions?limit=1000{cursor}"))
            .send(addr)
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        let page = r.json();
        listed.extend(
            page["sessions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["sessionId"].as_str().unwrap().to_owned()),
        );
        match page["nextCursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => break,
        }
    }
    assert_eq!(listed.len(), SESSIONS);
    let oldest = listed[SESSIONS - 1].clone();
    drop(server);

    // Restarted over the 2,500 stored sessions, the server holds about
    // nothing for them: its resident set is that of a server with none.
    let server = start(tmp.path(), free_port(), Some(1024));
    let stored_rss = rss_kib(server.child.id());
    let empty = tempfile::tempdir().unwrap();
    project(empty.path(), "Hello there, how can I help you today?");
    let fresh = start(empty.path(), free_port(), Some(1024));
    let empty_rss = rss_kib(fresh.child.id());
    let per_session = (stored_rss.saturating_sub(empty_rss) * 1024) / SESSIONS as u64;
    assert!(
        per_session <= 2048,
        "{per_session} B per stored session ({stored_rss} KiB with {SESSIONS}, {empty_rss} KiB with none)"
    );
    // A stored session is loaded when addressed.
    let events = Request::get(&format!("/bot/v1/session/{oldest}/events"))
        .send(server.addr)
        .unwrap();
    assert_eq!(events.status, 200);
    assert!(
        events
            .body
            .lines()
            .last()
            .unwrap()
            .contains("session.waiting")
    );
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A reply of `words` words, like a long answer.
fn long_reply(words: usize) -> String {
    (0..words)
        .map(|i| format!("word{}", i % 97))
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn a_long_reply_makes_a_log_linear_in_its_length() {
    let tmp = tempfile::tempdir().unwrap();
    let reply = long_reply(4_000);
    project(tmp.path(), &reply);
    let server = start(tmp.path(), free_port(), None);
    let id = turn(server.addr).unwrap();
    let log = tmp
        .path()
        .join(format!("state/bot/sessions/{id}/events.ndjson"));
    let on_disk = std::fs::metadata(&log).unwrap().len();
    let lines = std::fs::read_to_string(&log).unwrap().lines().count() as u64;
    let bound = 4 * reply.len() as u64 + 300 * lines;
    assert!(
        on_disk <= bound,
        "{on_disk} bytes for a {}-byte reply in {lines} events (bound {bound})",
        reply.len()
    );

    // The wire shape is intact: every delta with the text so far.
    let all = Request::get(&format!("/bot/v1/session/{id}/events"))
        .send(server.addr)
        .unwrap();
    let events: Vec<Value> = all
        .body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let deltas: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "message.appended")
        .collect();
    assert!(deltas.len() > 1_000, "{}", deltas.len());
    let mut so_far = String::new();
    for d in &deltas {
        so_far.push_str(d["data"]["delta"].as_str().unwrap());
        assert_eq!(d["data"]["text"].as_str().unwrap(), so_far);
    }
    assert_eq!(so_far, reply);

    // `text=false`: deltas alone, a stream linear in the reply.
    let bare = Request::get(&format!("/bot/v1/session/{id}/events?text=false"))
        .send(server.addr)
        .unwrap();
    assert_eq!(bare.status, 200);
    assert!(bare.body.len() as u64 <= bound, "{}", bare.body.len());
    let first_delta: Value = bare
        .body
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["type"] == "message.appended")
        .unwrap();
    assert!(first_delta["data"].get("text").is_none(), "{first_delta}");
    let bad = Request::get(&format!("/bot/v1/session/{id}/stream?text=maybe"))
        .send(server.addr)
        .unwrap();
    assert_eq!(bad.status, 400, "{}", bad.body);
}

#[test]
fn a_kill_during_a_long_reply_loses_nothing_a_client_saw() {
    let tmp = tempfile::tempdir().unwrap();
    let reply = long_reply(4_000);
    project(tmp.path(), &reply);
    let port = free_port();
    let mut server = start(tmp.path(), port, None);
    let r = Request::post("/bot/v1/session")
        .json(&json!({"message": "hi"}))
        .send(server.addr)
        .unwrap();
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let token = r.json()["continuationToken"].as_str().unwrap().to_owned();
    let mut stream = Request::get(&format!("/bot/v1/session/{id}/stream"))
        .stream(server.addr)
        .unwrap();
    let mut seen = Vec::new();
    let mut deltas = 0;
    while deltas < 100 {
        let line = stream.next_line().unwrap().unwrap();
        let marker = br#""type":"message.appended""#;
        if line.windows(marker.len()).any(|w| w == marker) {
            deltas += 1;
        }
        seen.push(line);
    }
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    drop(server);

    let server = start(tmp.path(), port, None);
    let read = |addr| {
        Request::get(&format!("/bot/v1/session/{id}/events"))
            .send(addr)
            .unwrap()
            .body
    };
    let after = read(server.addr);
    assert_eq!(after, read(server.addr), "two reads differ");
    let lines: Vec<&[u8]> = after.as_bytes().split(|b| *b == b'\n').collect();
    for (i, line) in seen.iter().enumerate() {
        assert_eq!(
            lines[i],
            &line[..],
            "event {i} changed across the kill:\n{}\n{}",
            String::from_utf8_lossy(line),
            String::from_utf8_lossy(lines[i])
        );
    }
    let events: Vec<Value> = after
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        events
            .iter()
            .enumerate()
            .all(|(i, e)| e["index"] == i as u64)
    );
    let last = events.last().unwrap();
    assert_eq!(last["type"], "session.waiting", "{last}");
    // A stream replay gives the same bytes as `/events`.
    let mut replay = Request::get(&format!("/bot/v1/session/{id}/stream"))
        .stream(server.addr)
        .unwrap();
    for (i, expected) in lines.iter().take(events.len()).enumerate() {
        let line = replay.next_line().unwrap().unwrap();
        assert_eq!(&line[..], *expected, "replayed event {i}");
    }
    // And the session goes on.
    let r = Request::post(&format!("/bot/v1/session/{id}"))
        .json(&json!({"message": "again", "continuationToken": token}))
        .send(server.addr)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
}

/// A new session's log starts in a spare folder, moved to
/// `sessions/<id>` off the request path: a kill -9 right after its first
/// turn is acknowledged, before the folder exists, loses nothing, and the
/// restarted server finds the session complete.
#[cfg(target_os = "linux")]
#[test]
fn a_kill_9_before_a_new_sessions_folder_exists_loses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    project(tmp.path(), "A short and complete reply.");
    let port = free_port();
    // The moves wait ten minutes: the kill comes first.
    let never = [("AGENTKIT_SPARE_MOVE_AFTER_MS", "600000")];
    let mut server = start_with(tmp.path(), port, None, &never);
    let (sessions, spare) = (
        tmp.path().join("state/bot/sessions"),
        tmp.path().join("state/bot/spare"),
    );
    // The agent's first new session makes its own folder, and the spares.
    let first = turn(server.addr).unwrap();
    assert!(sessions.join(&first).join("events.ndjson").is_file());
    let ready = || std::fs::read_dir(&spare).map_or(0, |d| d.count());
    for _ in 0..200 {
        if ready() >= 16 {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    assert!(ready() >= 16, "{} spares made", ready());

    let r = Request::post("/bot/v1/session")
        .json(&json!({"message": "remember me"}))
        .send(server.addr)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let token = r.json()["continuationToken"].as_str().unwrap().to_owned();
    let seen = Request::get(&format!("/bot/v1/session/{id}/stream"))
        .stream(server.addr)
        .unwrap()
        .until("session.waiting")
        .unwrap();
    assert!(
        seen.iter().any(|e| e["type"] == "turn.completed"),
        "{seen:?}"
    );
    // Every reader finds it, though its folder does not exist yet.
    assert!(!sessions.join(&id).exists(), "the folder was made");
    let before = Request::get(&format!("/bot/v1/session/{id}/events"))
        .send(server.addr)
        .unwrap();
    assert_eq!(before.status, 200, "{}", before.body);
    let listed = Request::get("/bot/v1/sessions").send(server.addr).unwrap();
    assert!(listed.body.contains(&id), "{}", listed.body);
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    drop(server);

    let server = start(tmp.path(), port, None);
    assert!(sessions.join(&id).join("events.ndjson").is_file());
    let after = Request::get(&format!("/bot/v1/session/{id}/events"))
        .send(server.addr)
        .unwrap();
    assert_eq!(after.status, 200, "{}", after.body);
    assert_eq!(after.body, before.body);
    let events: Vec<Value> = after
        .body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), seen.len());
    assert_eq!(events[0]["type"], "session.started");
    assert_eq!(events.last().unwrap()["type"], "session.waiting");
    let listed = Request::get("/bot/v1/sessions").send(server.addr).unwrap();
    assert!(listed.body.contains(&id), "{}", listed.body);
    // The spares left unused were deleted at the start.
    assert_eq!(ready(), 0);
    // And the conversation goes on.
    let r = Request::post(&format!("/bot/v1/session/{id}"))
        .json(&json!({"message": "again", "continuationToken": token}))
        .send(server.addr)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
}

/// What the soak's clients were told: sessions created and follow-ups
/// accepted, with the text of each accepted message.
#[derive(Default)]
struct Acknowledged {
    sessions: Vec<(String, Vec<String>)>,
}

#[test]
fn a_short_kill_9_soak_loses_nothing_acknowledged() {
    const KILLS: usize = 3;
    const CLIENTS: usize = 3;
    let tmp = tempfile::tempdir().unwrap();
    project(tmp.path(), &long_reply(300));
    let port = free_port();
    let acked = Arc::new(std::sync::Mutex::new(Acknowledged::default()));
    for round in 0..KILLS {
        let mut server = start(tmp.path(), port, None);
        let addr = server.addr;
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let (acked, stop) = (acked.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut n = 0;
                    while !stop.load(Ordering::SeqCst) {
                        n += 1;
                        let first = format!("r{round}c{c}n{n}");
                        let Ok(r) = Request::post("/bot/v1/session")
                            .json(&json!({ "message": first }))
                            .send(addr)
                        else {
                            break;
                        };
                        if r.status != 200 {
                            continue;
                        }
                        let id = r.json()["sessionId"].as_str().unwrap().to_owned();
                        let token = r.json()["continuationToken"].as_str().unwrap().to_owned();
                        let slot = {
                            let mut a = acked.lock().unwrap();
                            a.sessions.push((id.clone(), vec![first.clone()]));
                            a.sessions.len() - 1
                        };
                        // A follow-up while the reply streams (coalesced or
                        // preempting: accepted either way).
                        let again = format!("{first}-again");
                        if let Ok(r) = Request::post(&format!("/bot/v1/session/{id}"))
                            .json(&json!({"message": again, "continuationToken": token}))
                            .send(addr)
                            && r.status == 200
                        {
                            acked.lock().unwrap().sessions[slot].1.push(again);
                        }
                    }
                })
            })
            .collect();
        // Kill at a point that varies from round to round.
        std::thread::sleep(Duration::from_millis(150 + 170 * round as u64));
        server.child.kill().unwrap();
        server.child.wait().unwrap();
        stop.store(true, Ordering::SeqCst);
        for c in clients {
            c.join().unwrap();
        }
        drop(server);
    }
    let server = start(tmp.path(), port, None);
    let acked = acked.lock().unwrap();
    assert!(
        acked.sessions.len() >= KILLS,
        "the soak acknowledged almost nothing"
    );
    for (id, messages) in &acked.sessions {
        let r = Request::get(&format!("/bot/v1/session/{id}/events"))
            .send(server.addr)
            .unwrap();
        assert_eq!(r.status, 200, "session {id}: {}", r.body);
        let events: Vec<Value> = r
            .body
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(
            events
                .iter()
                .enumerate()
                .all(|(i, e)| e["index"] == i as u64),
            "session {id} is not contiguous"
        );
        let received: Vec<&str> = events
            .iter()
            .filter(|e| e["type"] == "message.received")
            .map(|e| e["data"]["text"].as_str().unwrap())
            .collect();
        for m in messages {
            assert!(received.contains(&m.as_str()), "session {id} lost `{m}`");
        }
        // Recovered: no turn left open.
        let last = events.last().unwrap();
        assert!(
            matches!(last["type"].as_str(), Some("session.waiting")),
            "session {id} ends with {last}"
        );
    }
}
