//! Schedules and reminders through a real server on loopback, on a manual
//! clock (no test waits for wall time): dev dispatch exactly once,
//! `--no-schedules`, cadence, a tick recorded once across a restart, a run
//! that overlaps its next tick, and reminders of every kind.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentkit::{ServeHandle, ServeOptions};
use agentkit_runtime::ManualClock;
use agentkit_test_support::http::{Request, Response};
use chrono::{DateTime, TimeZone, Utc};
use serde_json::Value;

/// First turn answers at once; a turn of a message containing "slow" is
/// not distinguishable here, so slow agents use `SLOW_SCRIPT`.
pub(crate) const SCRIPT: &str = r#"{"turns": [{"steps": [{"text": "done"}]}]}"#;
const SLOW_SCRIPT: &str = r#"{"turns": [{"steps": [{"text": "slow", "delayMs": 60000}]}]}"#;

pub(crate) struct Host {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) rt: tokio::runtime::Runtime,
    pub(crate) handle: Option<ServeHandle>,
    pub(crate) clock: ManualClock,
}

pub(crate) fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

pub(crate) fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, h, m, s).unwrap()
}

impl Host {
    /// A host folder with one scripted agent `bot` plus `files`.
    pub(crate) fn new(script: &str, files: &[(&str, &str)], start: DateTime<Utc>) -> Host {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("agents/bot/agent");
        write(
            &project.join("agent.toml"),
            "model = \"scripted:script.json\"\n",
        );
        write(&project.join("script.json"), script);
        write(&project.join("instructions.md"), "You are a test agent.\n");
        for (rel, text) in files {
            write(&project.join(rel), text);
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        Host {
            dir,
            rt,
            handle: None,
            clock: ManualClock::new(start),
        }
    }

    pub(crate) fn agent_dir(&self) -> PathBuf {
        self.dir.path().join("agents/bot/agent")
    }

    pub(crate) fn start(&mut self, options: ServeOptions) {
        let options = ServeOptions {
            port: 0,
            state_root: Some(self.dir.path().join("state")),
            clock: Some(Arc::new(self.clock.clone())),
            ..options
        };
        let handle = self
            .rt
            .block_on(agentkit::serve(&self.dir.path().join("agents"), options))
            .unwrap();
        self.handle = Some(handle);
    }

    pub(crate) fn stop(&mut self) {
        if let Some(h) = self.handle.take() {
            self.rt.block_on(h.close());
        }
    }

    pub(crate) fn handle(&self) -> &ServeHandle {
        self.handle.as_ref().unwrap()
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.handle().local_addr()
    }

    pub(crate) fn send(&self, req: Request) -> Response {
        req.send(self.addr()).unwrap()
    }

    /// Session folders on disk.
    pub(crate) fn session_ids(&self) -> Vec<String> {
        let dir = self.dir.path().join("state/bot/sessions");
        let mut ids: Vec<String> = std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        ids.sort();
        ids
    }

    /// Every stored event of a session, whoever owns it.
    pub(crate) fn events(&self, id: &str) -> Vec<Value> {
        let path = self
            .dir
            .path()
            .join(format!("state/bot/sessions/{id}/events.ndjson"));
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    pub(crate) fn types(&self, id: &str) -> Vec<String> {
        self.events(id)
            .iter()
            .map(|e| e["type"].as_str().unwrap().to_owned())
            .collect()
    }

    /// `schedules[0]` of `GET /bot/v1/info`.
    fn schedule_info(&self) -> Value {
        self.send(Request::get("/bot/v1/info")).json()["schedules"][0].clone()
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Polls `f` until it holds; generous, so a slow machine only waits longer.
pub(crate) fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Lets background tasks run for a moment, for checks that something did
/// NOT happen (they fail if it does within this time).
pub(crate) fn settle() {
    std::thread::sleep(Duration::from_millis(400));
}

const HEARTBEAT: (&str, &str) = (
    "schedules/heartbeat.md",
    "---\ncron: \"* * * * *\"\n---\n\nCheck the incidents.\n",
);

#[test]
fn dev_dispatch_runs_a_schedule_exactly_once() {
    let mut h = Host::new(SCRIPT, &[HEARTBEAT], at(12, 0, 30));
    h.start(ServeOptions {
        dev: true,
        ..Default::default()
    });
    // Under --dev the cadence never fires by itself.
    h.clock.advance(Duration::from_secs(300));
    settle();
    assert!(h.session_ids().is_empty(), "{:?}", h.session_ids());

    let r = h.send(Request::post("/bot/v1/dev/schedules/heartbeat"));
    assert_eq!(r.status, 200, "{}", r.body);
    let body = r.json();
    assert_eq!(body["scheduleId"], "heartbeat");
    let ids = body["sessionIds"].as_array().unwrap();
    assert_eq!(ids.len(), 1);
    let id = ids[0].as_str().unwrap();
    // The caller owns it and can follow it to the end of the task.
    let events = Request::get(&format!("/bot/v1/session/{id}/stream"))
        .stream(h.addr())
        .unwrap()
        .until("session.completed")
        .unwrap();
    assert_eq!(events[1]["data"]["text"], "Check the incidents.");
    h.clock.advance(Duration::from_secs(300));
    settle();
    assert_eq!(h.session_ids(), [id.to_owned()]);
    assert_eq!(
        h.types(id)
            .iter()
            .filter(|t| *t == "message.received")
            .count(),
        1
    );
    let unknown = h.send(Request::post("/bot/v1/dev/schedules/nope"));
    assert_eq!((unknown.status, unknown.error_code()), (404, "not_found".into()));
    // ServeHandle::dispatch_schedule takes the same path.
    let more = h
        .rt
        .block_on(h.handle().dispatch_schedule("bot", "heartbeat"))
        .unwrap();
    assert_eq!(more.len(), 1);
    wait_until("the second task session", || {
        h.types(&more[0]).last().map(String::as_str) == Some("session.completed")
    });
}

#[test]
fn dev_routes_answer_only_under_dev() {
    let mut h = Host::new(SCRIPT, &[HEARTBEAT], at(12, 0, 30));
    h.start(ServeOptions {
        schedules: false,
        ..Default::default()
    });
    for r in [
        h.send(Request::post("/bot/v1/dev/schedules/heartbeat")),
        h.send(Request::get("/bot/v1/dev/reminders")),
    ] {
        assert_eq!((r.status, r.error_code()), (404, "not_found".into()));
    }
    assert!(h.session_ids().is_empty());
}

#[test]
fn no_schedules_keeps_the_cadence_quiet() {
    let mut h = Host::new(SCRIPT, &[HEARTBEAT], at(12, 0, 30));
    h.start(ServeOptions {
        schedules: false,
        ..Default::default()
    });
    for _ in 0..3 {
        h.clock.advance(Duration::from_secs(60));
        settle();
    }
    assert!(h.session_ids().is_empty(), "{:?}", h.session_ids());
    assert_eq!(h.schedule_info()["lastFiredAt"], Value::Null);
}

#[test]
fn schedules_fire_on_cadence_once_per_tick_across_restarts() {
    let mut h = Host::new(SCRIPT, &[HEARTBEAT], at(12, 0, 30));
    h.start(ServeOptions::default());
    assert_eq!(h.schedule_info()["nextFireAt"], "2026-03-02T12:01:00Z");
    h.clock.set(at(12, 1, 0));
    wait_until("the 12:01 tick", || h.session_ids().len() == 1);
    let first = h.session_ids()[0].clone();
    wait_until("the task to complete", || {
        h.types(&first).last().map(String::as_str) == Some("session.completed")
    });
    // The session is a task session owned by the schedule's app principal.
    let started = &h.events(&first)[0];
    assert_eq!(started["data"]["principalId"], "schedule:heartbeat");
    assert_eq!(started["data"]["mode"], "task");
    assert_eq!(h.schedule_info()["lastFiredAt"], "2026-03-02T12:01:00Z");

    // Restart with the wall clock stepped back before the tick: 12:01
    // comes round again but was already fired, so it does not fire twice.
    h.stop();
    h.clock.set(at(12, 0, 59));
    h.start(ServeOptions::default());
    h.clock.set(at(12, 1, 0));
    settle();
    assert_eq!(h.session_ids().len(), 1, "the 12:01 tick fired twice");
    // The next tick fires.
    h.clock.set(at(12, 2, 0));
    wait_until("the 12:02 tick", || h.session_ids().len() == 2);

    // Ticks missed while the server was down are not replayed.
    h.stop();
    h.clock.set(at(12, 30, 30));
    h.start(ServeOptions::default());
    settle();
    assert_eq!(h.session_ids().len(), 2, "missed ticks were replayed");
    h.clock.set(at(12, 31, 0));
    wait_until("the 12:31 tick", || h.session_ids().len() == 3);
}

#[test]
fn a_tick_during_the_previous_run_is_skipped_and_counted() {
    let mut h = Host::new(SLOW_SCRIPT, &[HEARTBEAT], at(12, 0, 30));
    h.start(ServeOptions::default());
    h.clock.set(at(12, 1, 0));
    wait_until("the first run", || h.session_ids().len() == 1);
    let first = h.session_ids()[0].clone();
    wait_until("its turn to start", || {
        h.types(&first).iter().any(|t| t == "turn.started")
    });
    h.clock.set(at(12, 2, 0));
    wait_until("the skipped tick", || h.schedule_info()["skippedTicks"] == 1);
    h.clock.set(at(12, 3, 0));
    wait_until("a second skipped tick", || {
        h.schedule_info()["skippedTicks"] == 2
    });
    assert_eq!(h.session_ids().len(), 1, "runs piled up");
    let info = h.schedule_info();
    assert_eq!(info["running"], true);
    assert_eq!(info["lastFiredAt"], "2026-03-02T12:01:00Z");
}

#[test]
fn toml_schedules_send_a_message_or_call_a_tool() {
    let mut h = Host::new(
        SCRIPT,
        &[
            (
                "schedules/ping.toml",
                "cron = \"*/5 * * * *\"\nmessage = \"Any new alerts?\"\n",
            ),
            (
                "schedules/stamp.toml",
                "cron = \"0 9 * * 1-5\"\n[tool]\nname = \"stamp\"\ninput = { label = \"daily\" }\n",
            ),
            (
                "schedules/relay.toml",
                "cron = \"0 9 * * *\"\nmessage = \"hello\"\nchannel = \"intake\"\n",
            ),
            (
                "channels/intake.toml",
                "kind = \"webhook\"\n[[routes]]\nmethod = \"POST\"\npath = \"/alert\"\n[routes.body_schema]\ntype = \"object\"\n[routes.send]\nmessage = \"alert\"\ncontinuation = \"alert\"\n",
            ),
        ],
        at(8, 59, 30),
    );
    let stamp = h.dir.path().join("stamp.json");
    write(
        &h.agent_dir().join("tools/stamp.toml"),
        &format!(
            "description = \"Writes a stamp file\"\ncommand = [\"sh\", \"-c\", \"cat > '{}'\"]\n[input_schema]\ntype = \"object\"\nrequired = [\"label\"]\nproperties.label = {{ type = \"string\" }}\n",
            stamp.display()
        ),
    );
    h.start(ServeOptions {
        dev: true,
        ..Default::default()
    });
    let r = h.send(Request::post("/bot/v1/dev/schedules/ping"));
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionIds"][0].as_str().unwrap().to_owned();
    Request::get(&format!("/bot/v1/session/{id}/stream"))
        .stream(h.addr())
        .unwrap()
        .until("session.waiting")
        .unwrap();

    let r = h.send(Request::post("/bot/v1/dev/schedules/stamp"));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["sessionIds"], serde_json::json!([]));
    wait_until("the tool to write its stamp", || {
        std::fs::read_to_string(&stamp).is_ok_and(|s| s.contains("daily"))
    });

    let r = h.send(Request::post("/bot/v1/dev/schedules/relay"));
    assert_eq!((r.status, r.error_code()), (501, "not_available".into()));
    assert!(r.body.contains("not available yet"), "{}", r.body);
}
