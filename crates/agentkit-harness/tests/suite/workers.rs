//! Tool workers (`worker = true`): one real long-lived process per tool,
//! written with the shipped Python and Node helpers
//! (`fixtures/workers/`), that answers calls one JSON line at a time; a
//! worker that crashes, hangs, writes garbage or is killed mid-call fails
//! its calls and is replaced; calls beyond `concurrency` wait their turn;
//! and a worker under the sandbox reads no more than a spawned call of the
//! same tool.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentkit_harness::{
    ToolContext, ToolOutput, run_server_tool, sandbox_status, session_worker_slots,
};
use agentkit_manifest::{Approval, Execution, Tool, ToolAnnotations, Worker, WorkerScope};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::write;

/// The shipped protocol helpers.
fn helpers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/workers")
}

/// A worker tool in `dir` running `command`, with the helpers beside it.
fn worker_tool(dir: &Path, command: &[&str], concurrency: u32) -> Tool {
    for helper in ["agentkit_worker.py", "agentkit_worker.mjs"] {
        std::fs::copy(helpers().join(helper), dir.join(helper)).unwrap();
    }
    Tool {
        name: "w".into(),
        path: "tools/w.toml".into(),
        description: "test worker".into(),
        execution: Execution::Server,
        command: command.iter().map(|s| s.to_string()).collect(),
        cwd: dir.to_path_buf(),
        script: None,
        timeout: Duration::from_secs(10),
        max_output_bytes: 1024 * 1024,
        env: Vec::new(),
        needs_approval: Approval::Never,
        annotations: ToolAnnotations::default(),
        input_schema: json!({"type": "object"}),
        sandbox: agentkit_manifest::Sandbox {
            network: true,
            ..Default::default()
        },
        expose: Default::default(),
        worker: Some(Worker {
            concurrency,
            ..Worker::default()
        }),
    }
}

fn ctx(workspace: &Path) -> ToolContext {
    ToolContext {
        progress: Default::default(),
        call_id: "call-1".into(),
        session_id: "sess-1".into(),
        workspace_dir: workspace.to_path_buf(),
        cancel: CancellationToken::new(),
        host: None,
        services: None,
        as_of: None,
        origin: Default::default(),
    }
}

/// A Python worker: `pid` answers its pid; `crash` exits 3; `hang`
/// sleeps; `garbage` writes a line that is not an answer; `sleep` writes
/// its pid to `pid.txt` then sleeps; `fail` raises; `read` reads a file.
const PY_WORKER: &str = r#"
import os, sys, time
from agentkit_worker import serve

def handle(input, context):
    op = input.get("op")
    if op == "crash":
        sys.stderr.write("about to crash\n"); sys.stderr.flush()
        os._exit(3)
    if op == "hang":
        time.sleep(60)
    if op == "garbage":
        sys.stdout.write("this is not json\n"); sys.stdout.flush()
        time.sleep(60)
    if op == "sleep":
        with open(input["pidFile"], "w") as f:
            f.write(str(os.getpid()))
        time.sleep(input.get("seconds", 60))
    if op == "fail":
        raise ValueError("city is required")
    if op == "read":
        with open(input["path"]) as f:
            return {"read": f.read().strip()}
    return {"pid": os.getpid(), "input": input, "session": context["sessionId"], "call": context["callId"]}

serve(handle)
"#;

fn py_worker(dir: &Path, timeout: Duration) -> Tool {
    write(&dir.join("worker.py"), PY_WORKER);
    let mut t = worker_tool(dir, &["python3", "worker.py"], 1);
    t.timeout = timeout;
    t
}

async fn call(t: &Tool, input: Value, workspace: &Path) -> ToolOutput {
    run_server_tool(t, &input, &ctx(workspace)).await
}

fn pid_of(out: &ToolOutput) -> u64 {
    assert!(!out.is_error, "{out:?}");
    out.output["pid"].as_u64().unwrap()
}

fn message(out: &ToolOutput) -> String {
    assert!(out.is_error, "{out:?}");
    out.output.as_str().unwrap().to_owned()
}

/// True once `pid` is gone or a zombie.
async fn gone(pid: u64) -> bool {
    for _ in 0..150 {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return true,
            Ok(stat)
                if stat
                    .rsplit(')')
                    .next()
                    .is_some_and(|s| s.trim_start().starts_with('Z')) =>
            {
                return true;
            }
            Ok(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test]
async fn a_python_worker_answers_every_call_from_one_process_with_its_context() {
    let dir = tempfile::tempdir().unwrap();
    let t = py_worker(dir.path(), Duration::from_secs(10));
    let first = call(&t, json!({"n": 1}), dir.path()).await;
    let second = call(&t, json!({"n": 2}), dir.path()).await;
    assert_eq!(
        pid_of(&first),
        pid_of(&second),
        "one process: {first:?} {second:?}"
    );
    assert_eq!(first.output["input"], json!({"n": 1}));
    assert_eq!(second.output["input"], json!({"n": 2}));
    assert_eq!(second.output["session"], "sess-1");
    assert_eq!(second.output["call"], "call-1");
    // An exception is the call's error result; the worker goes on.
    let failed = call(&t, json!({"op": "fail"}), dir.path()).await;
    assert_eq!(message(&failed), "ValueError: city is required");
    assert_eq!(
        pid_of(&call(&t, json!({}), dir.path()).await),
        pid_of(&first)
    );
}

/// A worker with no call in flight for its `idle_timeout` is stopped
/// (its process ends); the next call starts a new one. A call in flight
/// keeps it, however long it takes.
#[tokio::test]
async fn a_worker_idle_past_its_idle_timeout_is_stopped_and_the_next_call_starts_another() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = py_worker(dir.path(), Duration::from_secs(10));
    t.worker = Some(Worker {
        concurrency: 1,
        idle_timeout: Duration::from_millis(1_000),
        scope: WorkerScope::Agent,
    });
    let scratch = dir.path().join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    t.sandbox.write.push(scratch.clone());
    let first = pid_of(&call(&t, json!({}), dir.path()).await);
    // Calls closer together than the timeout keep it.
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(pid_of(&call(&t, json!({}), dir.path()).await), first);
    }
    // A call that runs longer than the timeout is not cut short.
    let pid_file = scratch.join("slow.pid");
    let slow = call(
        &t,
        json!({"op": "sleep", "pidFile": pid_file, "seconds": 1.5}),
        dir.path(),
    )
    .await;
    assert_eq!(pid_of(&slow), first, "{slow:?}");
    // Idle past it: the process ends by itself.
    assert!(
        gone(first).await || {
            tokio::time::sleep(Duration::from_secs(2)).await;
            gone(first).await
        }
    );
    let next = pid_of(&call(&t, json!({}), dir.path()).await);
    assert_ne!(next, first);
}

#[tokio::test]
async fn a_node_worker_speaks_the_same_protocol() {
    let dir = tempfile::tempdir().unwrap();
    write(
        &dir.path().join("worker.mjs"),
        "import { serve } from \"./agentkit_worker.mjs\";\n\
         serve(async (input, context) => {\n\
           if (input.op === \"fail\") throw new Error(\"no such city\");\n\
           return { pid: process.pid, input, session: context.sessionId };\n\
         });\n",
    );
    let t = worker_tool(dir.path(), &["node", "worker.mjs"], 1);
    let first = call(&t, json!({"n": 1}), dir.path()).await;
    let second = call(&t, json!({"n": 2}), dir.path()).await;
    assert_eq!(pid_of(&first), pid_of(&second));
    assert_eq!(second.output["input"], json!({"n": 2}));
    assert_eq!(
        message(&call(&t, json!({"op": "fail"}), dir.path()).await),
        "no such city"
    );
}

#[tokio::test]
async fn a_worker_that_crashes_fails_its_call_and_the_next_call_gets_a_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let t = py_worker(dir.path(), Duration::from_secs(10));
    let before = pid_of(&call(&t, json!({}), dir.path()).await);
    let crashed = message(&call(&t, json!({"op": "crash"}), dir.path()).await);
    assert!(crashed.contains("exited with status 3"), "{crashed}");
    assert!(
        crashed.contains("about to crash"),
        "stderr quoted: {crashed}"
    );
    let after = pid_of(&call(&t, json!({}), dir.path()).await);
    assert_ne!(before, after);
}

#[tokio::test]
async fn a_worker_that_hangs_past_the_timeout_is_killed_and_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let t = py_worker(dir.path(), Duration::from_millis(1500));
    // Started (and its interpreter loaded) by a call with time to spare:
    // the timeout is not the worker's identity, so both share it.
    let patient = Tool {
        timeout: Duration::from_secs(60),
        ..t.clone()
    };
    let before = pid_of(&call(&patient, json!({}), dir.path()).await);
    let started = Instant::now();
    let hung = message(&call(&t, json!({"op": "hang"}), dir.path()).await);
    assert_eq!(hung, "tool timed out after 1s 500ms");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(gone(before).await, "the hung worker {before} survived");
    let after = pid_of(&call(&patient, json!({}), dir.path()).await);
    assert_ne!(before, after);
}

#[tokio::test]
async fn a_worker_that_writes_garbage_is_killed_and_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let t = py_worker(dir.path(), Duration::from_secs(10));
    let before = pid_of(&call(&t, json!({}), dir.path()).await);
    let garbage = message(&call(&t, json!({"op": "garbage"}), dir.path()).await);
    assert!(garbage.contains("not an answer"), "{garbage}");
    assert!(garbage.contains("this is not json"), "{garbage}");
    assert!(
        gone(before).await,
        "the worker {before} survived its garbage"
    );
    assert_ne!(before, pid_of(&call(&t, json!({}), dir.path()).await));
}

async fn read_pid(path: &Path) -> u64 {
    for _ in 0..200 {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no pid in {}", path.display());
}

#[tokio::test]
async fn a_worker_killed_mid_call_fails_the_call_and_a_cancel_kills_the_worker() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = py_worker(dir.path(), Duration::from_secs(30));
    // The worker writes its pid where the sandbox lets it: the tool's
    // write paths.
    let scratch = dir.path().join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    t.sandbox.write.push(scratch.clone());
    let pid_file = scratch.join("pid.txt");

    let t = Arc::new(t);
    let (t2, d2, p2) = (t.clone(), dir.path().to_path_buf(), pid_file.clone());
    let running =
        tokio::spawn(async move { call(&t2, json!({"op": "sleep", "pidFile": p2}), &d2).await });
    let pid = read_pid(&pid_file).await;
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let killed = message(&running.await.unwrap());
    assert!(killed.contains("killed by signal 9"), "{killed}");

    // A cancelled call takes its worker down with it.
    std::fs::remove_file(&pid_file).unwrap();
    let token = CancellationToken::new();
    let mut c = ctx(dir.path());
    c.cancel = token.clone();
    let (t3, p3) = (t.clone(), pid_file.clone());
    let running = tokio::spawn(async move {
        run_server_tool(&t3, &json!({"op": "sleep", "pidFile": p3}), &c).await
    });
    let pid = read_pid(&pid_file).await;
    token.cancel();
    assert_eq!(message(&running.await.unwrap()), "tool call cancelled");
    assert!(
        gone(pid).await,
        "the worker {pid} outlived a cancelled call"
    );
    pid_of(&call(&t, json!({}), dir.path()).await);
}

#[tokio::test]
async fn calls_beyond_the_concurrency_wait_their_turn() {
    let dir = tempfile::tempdir().unwrap();
    // Each call reports how many calls the worker had at once.
    write(
        &dir.path().join("worker.mjs"),
        "import { serve } from \"./agentkit_worker.mjs\";\n\
         let now = 0;\n\
         serve(async (input) => {\n\
           now += 1; const seen = now;\n\
           await new Promise((r) => setTimeout(r, input.ms));\n\
           now -= 1;\n\
           return { seen, pid: process.pid };\n\
         });\n",
    );
    let t = Arc::new(worker_tool(dir.path(), &["node", "worker.mjs"], 2));
    // Start the worker first, so every call below finds it running.
    pid_of(&call(&t, json!({"ms": 1}), dir.path()).await);
    let started = Instant::now();
    let calls: Vec<_> = (0..6)
        .map(|_| {
            let (t, d) = (t.clone(), dir.path().to_path_buf());
            tokio::spawn(async move { call(&t, json!({"ms": 300}), &d).await })
        })
        .collect();
    let mut seen = Vec::new();
    for c in calls {
        let out = c.await.unwrap();
        assert!(!out.is_error, "{out:?}");
        seen.push(out.output["seen"].as_u64().unwrap());
    }
    assert!(seen.iter().all(|&n| n <= 2), "at most 2 at once: {seen:?}");
    assert!(seen.contains(&2), "2 at once at some point: {seen:?}");
    assert!(
        started.elapsed() >= Duration::from_millis(850),
        "6 calls of 300 ms two at a time take three rounds: {:?}",
        started.elapsed()
    );

    // A call that waits past its timeout fails alone; the worker stays.
    let mut short = worker_tool(dir.path(), &["node", "worker.mjs"], 1);
    short.timeout = Duration::from_millis(1600);
    let patient = Tool {
        timeout: Duration::from_secs(60),
        ..short.clone()
    };
    let short = Arc::new(short);
    let pid = pid_of(&call(&patient, json!({"ms": 1}), dir.path()).await);
    let calls: Vec<_> = (0..3)
        .map(|i| {
            let (t, d) = (short.clone(), dir.path().to_path_buf());
            tokio::spawn(async move {
                // In order: each call queues behind the previous one.
                tokio::time::sleep(Duration::from_millis(20 * i)).await;
                call(&t, json!({"ms": 1000}), &d).await
            })
        })
        .collect();
    let mut outs = Vec::new();
    for c in calls {
        outs.push(c.await.unwrap());
    }
    assert!(!outs[0].is_error, "{:?}", outs[0]);
    assert!(!outs[1].is_error, "{:?}", outs[1]);
    let waited = message(&outs[2]);
    assert!(waited.contains("waiting for its worker"), "{waited}");
    assert_eq!(
        pid_of(&call(&short, json!({"ms": 1}), dir.path()).await),
        pid
    );
}

#[tokio::test]
#[allow(clippy::print_stderr)]
async fn a_worker_under_the_sandbox_cannot_read_what_a_spawned_call_cannot() {
    let status = sandbox_status();
    if !status.available {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        assert!(!ci, "this CI host cannot sandbox: {status:?}");
        eprintln!("skipping: {status:?}");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let tools = root.path().join("proj/agent/tools");
    let workspace = root.path().join("state/sessions/s1/workspace");
    let outside = root.path().join("outside/canary.txt");
    let other = root.path().join("state/sessions/s2/workspace/notes.txt");
    write(&outside, "OUTSIDE-CANARY\n");
    write(&other, "OTHER-SESSION\n");
    write(&tools.join("data.txt"), "TOOL-DATA\n");
    std::fs::create_dir_all(&workspace).unwrap();
    let worker = py_worker(&tools, Duration::from_secs(10));
    write(
        &tools.join("read.py"),
        "import json, sys\npath = json.load(sys.stdin)[\"path\"]\nprint(json.dumps({\"read\": open(path).read().strip()}))\n",
    );
    let mut spawned = worker.clone();
    spawned.name = "spawned".into();
    spawned.worker = None;
    spawned.command = vec!["python3".into(), "read.py".into()];

    for t in [&worker, &spawned] {
        let ok = call(
            t,
            json!({"op": "read", "path": tools.join("data.txt")}),
            &workspace,
        )
        .await;
        assert_eq!(
            ok.output,
            json!({"read": "TOOL-DATA"}),
            "{}: {ok:?}",
            t.name
        );
        for canary in [&outside, &other] {
            let out = call(t, json!({"op": "read", "path": canary}), &workspace).await;
            assert!(
                out.is_error,
                "{} read {}: {out:?}",
                t.name,
                canary.display()
            );
            let text = out.output.to_string();
            assert!(
                !text.contains("CANARY") && !text.contains("OTHER-SESSION"),
                "{text}"
            );
            assert!(
                text.contains("Permission"),
                "{} on {}: {text}",
                t.name,
                canary.display()
            );
        }
    }
}

/// A worker that keeps state: how many calls it had, and a note written
/// into its session's workspace.
const SESSION_WORKER: &str = r#"
import os
from agentkit_worker import serve

count = 0

def handle(input, context):
    global count
    count += 1
    if input.get("op") == "note":
        with open(os.path.join(context["workspaceDir"], "note.txt"), "w") as f:
            f.write(context["sessionId"])
    if input.get("op") == "read":
        with open(input["path"]) as f:
            return {"read": f.read()}
    return {"pid": os.getpid(), "count": count, "session": context["sessionId"]}

serve(handle)
"#;

/// `scope = "session"`: one worker per session, which keeps that
/// session's state between calls and writes its workspace (granted as to
/// a spawned call of the session) but reads no other session's; it is
/// stopped after its idle timeout, its slot goes with it, and the
/// session's next call starts afresh.
#[tokio::test]
#[allow(clippy::print_stderr)]
async fn a_session_scoped_worker_keeps_one_sessions_state_and_ends_when_idle() {
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("agent/tools");
    std::fs::create_dir_all(&tools).unwrap();
    write(&tools.join("counter.py"), SESSION_WORKER);
    let mut t = worker_tool(&tools, &["python3", "counter.py"], 1);
    t.name = "counter".into();
    t.worker = Some(Worker {
        concurrency: 1,
        idle_timeout: Duration::from_millis(1_000),
        scope: WorkerScope::Session,
    });
    let (ws_a, ws_b) = (
        dir.path().join("state/sessions/a/workspace"),
        dir.path().join("state/sessions/b/workspace"),
    );
    std::fs::create_dir_all(&ws_a).unwrap();
    write(&ws_b.join("secret.txt"), "B-ONLY\n");
    let run = |session: &'static str, ws: &Path, input: Value| {
        let ctx = ToolContext {
            progress: Default::default(),
            session_id: session.into(),
            ..ctx(ws)
        };
        let t = t.clone();
        async move { run_server_tool(&t, &input, &ctx).await }
    };
    let a1 = run("a", &ws_a, json!({})).await;
    let a2 = run("a", &ws_a, json!({"op": "note"})).await;
    let b1 = run("b", &ws_b, json!({})).await;
    assert_eq!(
        (a1.output["count"].clone(), a2.output["count"].clone()),
        (json!(1), json!(2)),
        "{a1:?} {a2:?}"
    );
    assert_eq!(b1.output["count"], 1, "{b1:?}");
    let (pid_a, pid_b) = (pid_of(&a1), pid_of(&b1));
    assert_eq!(pid_of(&a2), pid_a);
    assert_ne!(pid_a, pid_b);
    assert_eq!(a2.output["session"], "a");
    assert_eq!(std::fs::read_to_string(ws_a.join("note.txt")).unwrap(), "a");
    assert!(session_worker_slots() >= 2);

    let status = sandbox_status();
    if status.available {
        let out = run(
            "a",
            &ws_a,
            json!({"op": "read", "path": ws_b.join("secret.txt")}),
        )
        .await;
        assert!(
            out.is_error,
            "session a's worker read b's workspace: {out:?}"
        );
        assert!(!out.output.to_string().contains("B-ONLY"), "{out:?}");
    } else {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        assert!(!ci, "this CI host cannot sandbox: {status:?}");
        eprintln!("sandbox part skipped: {status:?}");
    }

    // Idle past the timeout: both end, and their slots with them.
    for pid in [pid_a, pid_b] {
        assert!(
            gone(pid).await || {
                tokio::time::sleep(Duration::from_secs(2)).await;
                gone(pid).await
            },
            "worker {pid} still runs"
        );
    }
    let mut slots = session_worker_slots();
    for _ in 0..100 {
        if slots == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        slots = session_worker_slots();
    }
    assert_eq!(slots, 0);
    let again = run("a", &ws_a, json!({})).await;
    assert_eq!(again.output["count"], 1, "{again:?}");
    assert_ne!(pid_of(&again), pid_a);
}
