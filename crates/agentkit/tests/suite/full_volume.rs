//! A state volume that runs out of inodes, for real: the state root is a
//! small tmpfs mounted for the test, filled with files until it is full.
//! New sessions are then refused `507 storage_full` with `Retry-After`
//! (never `500 internal`), sessions already open keep what they had, and
//! once room is made new sessions are served again.
//!
//! Mounting needs `CAP_SYS_ADMIN` (root, as CI runs); elsewhere the test
//! says it skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

use agentkit::ServeOptions;
use agentkit_test_support::http::Request;
use serde_json::{Value, json};

/// A tmpfs mounted at `path` until dropped (lazily unmounted, so an open
/// file of a failing test cannot keep it).
struct Mounted {
    path: PathBuf,
}

impl Mounted {
    fn tmpfs(path: &Path, options: &str) -> Option<Mounted> {
        std::fs::create_dir_all(path).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(path)
            .output()
            .ok()?;
        out.status.success().then(|| Mounted {
            path: path.to_path_buf(),
        })
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

/// Files of one byte in `dir` until the volume has no inode left;
/// answers how many it made.
fn fill(dir: &Path) -> usize {
    std::fs::create_dir_all(dir).unwrap();
    for n in 0.. {
        match std::fs::write(dir.join(format!("f{n}")), b"x") {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(28) => return n,
            Err(e) => panic!("filling the volume: {e}"),
        }
        assert!(n < 100_000, "the volume never filled");
    }
    unreachable!()
}

/// The session's events up to `session.waiting`.
fn settle(addr: std::net::SocketAddr, id: &str) -> Vec<Value> {
    let mut lines = Request::get(&format!("/bot/v1/session/{id}/stream"))
        .stream(addr)
        .unwrap();
    let mut events = Vec::new();
    while let Some(e) = lines.next_json().unwrap() {
        let done = e["type"] == "session.waiting";
        events.push(e);
        if done {
            break;
        }
    }
    events
}

#[test]
#[allow(clippy::print_stderr)]
fn a_full_state_volume_is_answered_507_and_served_again_once_room_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    // Space to spare, few inodes: what a soak creating a million
    // sessions ran out of.
    let Some(mount) = Mounted::tmpfs(&state, "size=64m,nr_inodes=400,mode=0700") else {
        eprintln!("skipped: mounting a small tmpfs for the state root needs CAP_SYS_ADMIN (root)");
        return;
    };
    let agent = dir.path().join("agents/bot/agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(agent.join("agent.toml"), "model = \"test\"\n").unwrap();
    std::fs::write(agent.join("instructions.md"), "Answer.\n").unwrap();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let options = super::http::with_scraper(ServeOptions {
        port: 0,
        state_root: Some(state.clone()),
        ..ServeOptions::default()
    });
    let handle = rt
        .block_on(agentkit::serve(&dir.path().join("agents"), options))
        .unwrap();
    let addr = handle.local_addr();
    let post = |message: &str| {
        Request::post("/bot/v1/session")
            .json(&json!({ "message": message }))
            .send(addr)
            .unwrap()
    };

    // One session while there is room.
    let first = post("before");
    assert_eq!(first.status, 200, "{}", first.body);
    let first_id = first.json()["sessionId"].as_str().unwrap().to_owned();
    settle(addr, &first_id);

    let filler = state.join("filler");
    let made = fill(&filler);
    assert!(made > 0, "the volume was full before the test filled it");

    // Sessions may still be served from logs made ahead of time; once
    // those are spent, every new session is refused as a full volume.
    let mut refused = None;
    for n in 0..200 {
        let r = post(&format!("full {n}"));
        match r.status {
            200 => settle(addr, r.json()["sessionId"].as_str().unwrap()).len(),
            507 => {
                refused = Some(r);
                break;
            }
            other => panic!(
                "a new session on a full volume answered {other}: {}",
                r.body
            ),
        };
    }
    let refused = refused.expect("no new session was refused on a full volume");
    assert_eq!(refused.error_code(), "storage_full", "{}", refused.body);
    assert_eq!(
        refused.header("retry-after"),
        Some("30"),
        "{}",
        refused.body
    );
    assert!(
        !refused.body.contains(state.to_str().unwrap()),
        "the answer names a path of the host: {}",
        refused.body
    );
    // The session made while there was room still reads back.
    let events = Request::get(&format!("/bot/v1/session/{first_id}/events"))
        .send(addr)
        .unwrap();
    assert_eq!(events.status, 200, "{}", events.body);

    // Room again: new sessions are served.
    std::fs::remove_dir_all(&filler).unwrap();
    let again = post("after");
    assert_eq!(again.status, 200, "{}", again.body);
    let events = settle(addr, again.json()["sessionId"].as_str().unwrap());
    assert!(
        events.iter().any(|e| e["type"] == "turn.completed"),
        "{events:?}"
    );

    rt.block_on(handle.close());
    drop(mount);
}
