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

    /// `n` hosts of the same project, each started on database `url`.
    pub(crate) fn on_database(
        n: usize,
        script: &str,
        files: &[(&str, &str)],
        url: &str,
    ) -> Vec<Host> {
        (0..n)
            .map(|_| {
                let mut h = Host::new(script, files, at(12, 0, 0));
                h.start(ServeOptions {
                    database_url: Some(url.to_owned()),
                    ..ServeOptions::default()
                });
                h
            })
            .collect()
    }

    pub(crate) fn agent_dir(&self) -> PathBuf {
        self.dir.path().join("agents/bot/agent")
    }

    pub(crate) fn start(&mut self, options: ServeOptions) {
        let options = super::http::with_scraper(ServeOptions {
            port: 0,
            state_root: Some(self.dir.path().join("state")),
            clock: Some(Arc::new(self.clock.clone())),
            ..options
        });
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
        let text = std::fs::read_to_string(path).unwrap_or_default();
        // Whole lines only: the server may be writing the last one.
        let whole = text.rfind('\n').map_or("", |end| &text[..end]);
        whole
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
    assert_eq!(
        (unknown.status, unknown.error_code()),
        (404, "not_found".into())
    );
    // ServeHandle::dispatch_schedule takes the same path.
    let more =
        h.rt.block_on(h.handle().dispatch_schedule("bot", "heartbeat"))
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
    wait_until("the skipped tick", || {
        h.schedule_info()["skippedTicks"] == 1
    });
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
    // The tool writes outside its workspace: its sandbox grants the folder.
    let stamps = h.dir.path().join("stamps");
    std::fs::create_dir_all(&stamps).unwrap();
    let stamp = stamps.join("stamp.json");
    write(
        &h.agent_dir().join("tools/stamp.toml"),
        &format!(
            "description = \"Writes a stamp file\"\ncommand = [\"sh\", \"-c\", \"cat > '{}'\"]\nsandbox = {{ write = [\"{}\"] }}\n[input_schema]\ntype = \"object\"\nrequired = [\"label\"]\nproperties.label = {{ type = \"string\" }}\n",
            stamp.display(),
            stamps.display()
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

    // A hand-off to a custom channel: a session on that channel.
    let r = h.send(Request::post("/bot/v1/dev/schedules/relay"));
    assert_eq!(r.status, 200, "{}", r.body);
    let relayed = r.json()["sessionIds"][0].as_str().unwrap().to_owned();
    wait_until("the relayed turn", || {
        h.types(&relayed).last().map(String::as_str) == Some("session.waiting")
    });
    let started = &h.events(&relayed)[0];
    assert_eq!(started["data"]["channel"], "intake");
    assert_eq!(h.events(&relayed)[1]["data"]["text"], "hello");
}

fn new_http_session(h: &Host) -> (String, String) {
    let r = h.send(Request::post("/bot/v1/session").json(&serde_json::json!({"message": "hi"})));
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let token = r.json()["continuationToken"].as_str().unwrap().to_owned();
    wait_until("the first turn", || {
        h.types(&id).last().map(String::as_str) == Some("session.waiting")
    });
    (id, token)
}

fn received(h: &Host, id: &str) -> Vec<String> {
    h.events(id)
        .iter()
        .filter(|e| e["type"] == "message.received")
        .map(|e| e["data"]["text"].as_str().unwrap().to_owned())
        .collect()
}

fn prompt_reminder(token: &str, when: ReminderWhen, prompt: &str) -> NewReminder {
    NewReminder {
        purpose: "ci_recheck".into(),
        channel_id: "http".into(),
        continuation_token: token.into(),
        when,
        action: ReminderAction::Prompt {
            prompt: prompt.into(),
            until: Some("Cancel once CI is green.".into()),
        },
    }
}

use agentkit::{NewReminder, ReminderAction, ReminderOutcome, ReminderWhen};

#[test]
fn reminders_of_every_kind_wake_their_conversation() {
    let mut h = Host::new(SCRIPT, &[], at(12, 0, 0));
    h.start(ServeOptions::default());
    let (id, token) = new_http_session(&h);
    let handle = h.handle();
    let mk = |when, prompt: &str| {
        h.rt.block_on(handle.create_reminder("bot", prompt_reminder(&token, when, prompt)))
            .unwrap()
    };
    let delay = mk(ReminderWhen::Delay(Duration::from_secs(20 * 60)), "DELAY");
    assert_eq!(
        delay.next_fire_at.as_deref(),
        Some("2026-03-02T12:20:00.000Z")
    );
    assert_eq!(delay.session_id.as_deref(), Some(id.as_str()));
    let every = mk(ReminderWhen::Every(Duration::from_secs(30 * 60)), "EVERY");
    let cron = mk(ReminderWhen::Cron("0 13 * * *".into()), "CRON");
    let instant = mk(ReminderWhen::At(at(12, 45, 0)), "AT");
    // The run form: host-side policy, three deliveries then stop.
    let run =
        h.rt.block_on(handle.create_reminder(
            "bot",
            NewReminder {
                purpose: "poll".into(),
                channel_id: "http".into(),
                continuation_token: token.clone(),
                when: ReminderWhen::Every(Duration::from_secs(10 * 60)),
                action: ReminderAction::Run(Arc::new(|tick: agentkit::ReminderTick| async move {
                    if tick.fire_count >= 3 {
                        return ReminderOutcome::Stop;
                    }
                    tick.followup
                        .send(format!("RUN {}", tick.fire_count))
                        .await
                        .unwrap();
                    ReminderOutcome::Delivered
                })),
            },
        ))
        .unwrap();
    let rt = handle.runtime("bot").unwrap().clone();
    let count = |text: &str| {
        received(&h, &id)
            .iter()
            .filter(|t| t.contains(text))
            .count()
    };
    let fire_counts = |rid: &str| h.rt.block_on(rt.reminders().get(rid)).unwrap().fire_count;

    for (m, expect) in [
        (10, vec![("RUN 0", 1)]),
        (20, vec![("DELAY", 1), ("RUN 1", 1)]),
        (30, vec![("EVERY", 1), ("RUN 2", 1)]),
        (40, vec![("RUN 3", 0)]),
        (45, vec![("AT", 1)]),
    ] {
        h.clock.set(at(12, m, 0));
        for (text, n) in expect {
            if n > 0 {
                wait_until(&format!("{text} at 12:{m}"), || count(text) == n);
            }
        }
        wait_until("the firings to settle", || {
            !rt.is_active(&id)
                && h.rt
                    .block_on(rt.reminders().list())
                    .unwrap()
                    .iter()
                    .all(|r| {
                        r.next_fire_at
                            .as_deref()
                            .is_none_or(|t| t > format!("2026-03-02T12:{m}:00.000Z").as_str())
                    })
        });
    }
    h.clock.set(at(13, 0, 0));
    // A firing's message lands before its row is re-armed: wait for both.
    wait_until("CRON and the second EVERY", || {
        count("CRON") == 1
            && count("EVERY") == 2
            && h.rt
                .block_on(rt.reminders().get(&cron.id))
                .unwrap()
                .next_fire_at
                .as_deref()
                == Some("2026-03-03T13:00:00.000Z")
            && fire_counts(&every.id) == 2
    });

    // The prompt carries the purpose and the `until` condition.
    let delayed = received(&h, &id)
        .into_iter()
        .find(|t| t.contains("DELAY"))
        .unwrap();
    assert!(
        delayed.contains("ci_recheck") && delayed.contains("Cancel once CI is green."),
        "{delayed}"
    );
    assert_eq!(
        h.rt.block_on(rt.reminders().get(&delay.id)).unwrap().status,
        "done"
    );
    assert_eq!(
        h.rt.block_on(rt.reminders().get(&instant.id))
            .unwrap()
            .status,
        "done"
    );
    assert_eq!(
        h.rt.block_on(rt.reminders().get(&every.id)).unwrap().status,
        "armed"
    );
    assert_eq!(fire_counts(&every.id), 2);
    assert_eq!(
        h.rt.block_on(rt.reminders().get(&cron.id))
            .unwrap()
            .next_fire_at
            .as_deref(),
        Some("2026-03-03T13:00:00.000Z")
    );
    let run_state = h.rt.block_on(rt.reminders().get(&run.id)).unwrap();
    assert_eq!(
        (run_state.status.as_str(), run_state.fire_count),
        ("done", 3)
    );
    assert_eq!(count("RUN 3"), 0);

    // Wakes coalesce: no turn was ever interrupted by a reminder.
    assert!(
        !h.types(&id).iter().any(|t| t == "turn.failed"),
        "{:?}",
        h.types(&id)
    );
    // ... and they do not rotate the HTTP token.
    let r = h.send(
        Request::post(&format!("/bot/v1/session/{id}"))
            .json(&serde_json::json!({"message": "still mine", "continuationToken": token})),
    );
    assert_eq!(r.status, 200, "{}", r.body);

    // Cancel stops a recurring reminder.
    assert_eq!(
        h.rt.block_on(handle.cancel_reminder("bot", &every.id))
            .unwrap()
            .status,
        "cancelled"
    );
    h.clock.set(at(14, 0, 0));
    settle();
    assert_eq!(count("EVERY"), 2);
}

#[test]
fn reminders_survive_a_restart_and_fire_late_rather_than_never() {
    let mut h = Host::new(SCRIPT, &[], at(12, 0, 0));
    h.start(ServeOptions::default());
    let (id, token) = new_http_session(&h);
    let handle = h.handle();
    let prompt =
        h.rt.block_on(handle.create_reminder(
            "bot",
            prompt_reminder(
                &token,
                ReminderWhen::Delay(Duration::from_secs(20 * 60)),
                "LATE",
            ),
        ))
        .unwrap();
    let run =
        h.rt.block_on(handle.create_reminder(
            "bot",
            NewReminder {
                purpose: "poll".into(),
                channel_id: "http".into(),
                continuation_token: token.clone(),
                when: ReminderWhen::Every(Duration::from_secs(60)),
                action: ReminderAction::Run(Arc::new(|_tick: agentkit::ReminderTick| async {
                    ReminderOutcome::Delivered
                })),
            },
        ))
        .unwrap();
    // Down from 12:00:00 to 13:00: both times passed while it was down.
    h.stop();
    h.clock.set(at(13, 0, 0));
    h.start(ServeOptions::default());
    wait_until("the late firing", || {
        received(&h, &id).iter().any(|t| t.contains("LATE"))
    });
    let rt = h.handle().runtime("bot").unwrap().clone();
    // The firing's message lands before its row is marked done.
    wait_until("the late reminder marked done", || {
        h.rt.block_on(rt.reminders().get(&prompt.id))
            .is_ok_and(|r| r.status == "done")
    });
    let late = h.rt.block_on(rt.reminders().get(&prompt.id)).unwrap();
    assert_eq!(
        late.last_fired_at.as_deref(),
        Some("2026-03-02T13:00:00.000Z")
    );
    // The run handler died with the previous process.
    let lost = h.rt.block_on(rt.reminders().get(&run.id)).unwrap();
    assert_eq!(lost.status, "disarmed");
    assert_eq!(
        lost.reason.as_deref(),
        Some(agentkit_runtime::HANDLER_LOST_ON_RESTART)
    );
    assert_eq!(lost.fire_count, 0);
    assert_eq!(
        h.send(Request::get("/bot/v1/info")).json()["reminders"]["armed"],
        0
    );
}

#[test]
fn dev_mode_keeps_reminder_timers_off_and_fires_by_hand() {
    let mut h = Host::new(SCRIPT, &[], at(12, 0, 0));
    h.start(ServeOptions {
        dev: true,
        ..Default::default()
    });
    let (id, token) = new_http_session(&h);
    let r =
        h.rt.block_on(h.handle().create_reminder(
            "bot",
            prompt_reminder(
                &token,
                ReminderWhen::Delay(Duration::from_secs(60)),
                "BY HAND",
            ),
        ))
        .unwrap();
    h.clock.set(at(13, 0, 0));
    settle();
    assert!(!received(&h, &id).iter().any(|t| t.contains("BY HAND")));
    let list = h.send(Request::get("/bot/v1/dev/reminders")).json();
    assert!(list.get("nextCursor").is_none(), "{list}");
    assert_eq!(list["reminders"][0]["id"], r.id.as_str());
    assert_eq!(list["reminders"][0]["status"], "armed");
    assert_eq!(list["reminders"][0]["kind"], "delay");
    assert_eq!(list["reminders"][0]["spec"], "1m");
    let fired = h.send(Request::post(&format!("/bot/v1/dev/reminders/{}", r.id)));
    assert_eq!(fired.status, 200, "{}", fired.body);
    assert_eq!(fired.json()["outcome"], "delivered");
    assert_eq!(fired.json()["sessionId"], id.as_str());
    wait_until("the wake", || {
        received(&h, &id).iter().any(|t| t.contains("BY HAND"))
    });
    // A one-shot fires once: firing it again is refused.
    let again = h.send(Request::post(&format!("/bot/v1/dev/reminders/{}", r.id)));
    assert_eq!(again.status, 400, "{}", again.body);
    let missing = h.send(Request::post("/bot/v1/dev/reminders/rem_nope"));
    assert_eq!(missing.status, 404);
}

#[test]
fn dev_reminders_are_listed_newest_first_in_pages_that_follow_the_cursor() {
    let mut h = Host::new(SCRIPT, &[], at(12, 0, 0));
    h.start(ServeOptions {
        dev: true,
        ..Default::default()
    });
    let (_, token) = new_http_session(&h);
    let mut made = Vec::new();
    for minute in 1..=5u64 {
        let r =
            h.rt.block_on(h.handle().create_reminder(
                "bot",
                prompt_reminder(
                    &token,
                    ReminderWhen::Delay(Duration::from_secs(60 * minute)),
                    "LATER",
                ),
            ))
            .unwrap();
        made.push(r.id);
        // Each made a millisecond apart at least (the key is its time).
        h.clock.advance(Duration::from_millis(5));
    }
    let ids = |page: &serde_json::Value| -> Vec<String> {
        page["reminders"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let first = h.send(Request::get("/bot/v1/dev/reminders?limit=2")).json();
    let cursor = first["nextCursor"].as_str().expect("more pages").to_owned();
    let second = h
        .send(Request::get(&format!(
            "/bot/v1/dev/reminders?limit=2&cursor={cursor}"
        )))
        .json();
    let cursor = second["nextCursor"]
        .as_str()
        .expect("a third page")
        .to_owned();
    let third = h
        .send(Request::get(&format!(
            "/bot/v1/dev/reminders?limit=2&cursor={cursor}"
        )))
        .json();
    assert!(third.get("nextCursor").is_none(), "{third}");
    let seen: Vec<String> = [ids(&first), ids(&second), ids(&third)].concat();
    let newest_first: Vec<String> = made.iter().rev().cloned().collect();
    assert_eq!(seen, newest_first);
    let bad = h.send(Request::get("/bot/v1/dev/reminders?limit=0"));
    assert_eq!(bad.status, 400, "{}", bad.body);
}

#[test]
fn a_dispatch_answers_the_outcome_of_the_sessions_it_started() {
    const FAILING: &str = r#"{"turns": [{"steps": [{"error": "the model is down"}]}]}"#;
    let mut h = Host::new(FAILING, &[HEARTBEAT], at(12, 0, 30));
    h.start(ServeOptions {
        dev: true,
        ..Default::default()
    });
    // Waiting (bounded) for the task session: its turn failed, so the
    // dispatch did not go well, whatever the run's own record says.
    let r = h.send(Request::post("/bot/v1/dev/schedules/heartbeat?wait=30"));
    assert_eq!(r.status, 200, "{}", r.body);
    let body = r.json();
    assert_eq!(body["outcome"], "failed", "{body}");
    assert_eq!(body["sessions"][0]["outcome"], "failed", "{body}");
    assert!(
        body["sessions"][0]["error"]
            .as_str()
            .unwrap()
            .contains("the model is down"),
        "{body}"
    );
    // Without waiting, a session still running says so.
    let mut h = Host::new(SLOW_SCRIPT, &[HEARTBEAT], at(12, 0, 30));
    h.start(ServeOptions {
        dev: true,
        ..Default::default()
    });
    let r = h.send(Request::post("/bot/v1/dev/schedules/heartbeat"));
    let body = r.json();
    assert_eq!(body["outcome"], "running", "{body}");
    assert_eq!(body["sessions"][0]["outcome"], "running", "{body}");
}
