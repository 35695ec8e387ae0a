//! Rust schedule handlers (`handler = "<name>"` in `schedules/<id>.toml`)
//! through a real server on a manual clock: `receive` into a channel,
//! `call_tool`, `wait_until` keeping the run going (a tick during it is
//! skipped) and awaited on shutdown, the app principal, dev dispatch
//! exactly once, and an unregistered handler refusing to start.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentkit::{Receive, ScheduleRun, ServeOptions};
use agentkit_test_support::http::Request;
use serde_json::{Value, json};

use super::time::{Host, SCRIPT, at, settle, wait_until, write};

const SWEEP: (&str, &str) = (
    "schedules/sweep.toml",
    "cron = \"*/5 * * * *\"\nhandler = \"sweep\"\n",
);
const INTAKE: (&str, &str) = (
    "channels/intake.toml",
    "kind = \"webhook\"\n[[routes]]\nmethod = \"POST\"\npath = \"/alert\"\n[routes.body_schema]\ntype = \"object\"\n[routes.send]\nmessage = \"alert\"\ncontinuation = \"alert\"\n",
);

/// What the handler saw on each call: (tick, principal, tool result).
#[derive(Default)]
struct Seen {
    calls: Mutex<Vec<(Option<String>, String, Value)>>,
}

/// The handler the tests register: hands a message into `intake` under a
/// fixed key, calls the `stamp` tool, and keeps a background job going
/// until `gate` is released.
fn sweep_handler(
    seen: Arc<Seen>,
    gate: Arc<tokio::sync::Semaphore>,
    done: Arc<AtomicUsize>,
) -> impl Fn(
    ScheduleRun,
) -> futures_util::future::BoxFuture<'static, Result<(), agentkit::ScheduleError>>
+ Send
+ Sync
+ 'static {
    move |run: ScheduleRun| {
        let (seen, gate, done) = (seen.clone(), gate.clone(), done.clone());
        Box::pin(async move {
            let n = seen.calls.lock().unwrap().len();
            run.receive(
                Receive::new(format!("sweep {n}"))
                    .channel("intake")
                    .continuation("sweep:main"),
            )
            .await?;
            let stamped = run.call_tool("stamp", json!({"label": "rust"})).await?;
            // `host`: the services Rust tools get, here their reminders.
            let host = run.services::<agentkit::HostServices>().unwrap();
            assert_eq!(host.slug, "bot");
            host.reminders.list().await?;
            seen.calls.lock().unwrap().push((
                run.tick.map(|t| t.to_rfc3339()),
                run.app_auth.principal_id.clone(),
                stamped.result.clone(),
            ));
            run.wait_until(async move {
                let _permit = gate.acquire().await;
                done.fetch_add(1, Ordering::SeqCst);
            });
            Ok(())
        })
    }
}

fn host_with_sweep(start: chrono::DateTime<chrono::Utc>) -> Host {
    let h = Host::new(SCRIPT, &[SWEEP, INTAKE], start);
    write(
        &h.agent_dir().join("tools/stamp.toml"),
        "description = \"Echoes its input\"\ncommand = [\"cat\"]\n[input_schema]\ntype = \"object\"\nrequired = [\"label\"]\nproperties.label = { type = \"string\" }\n",
    );
    h
}

fn sweep_info(h: &Host) -> Value {
    h.send(Request::get("/bot/v1/info")).json()["schedules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "sweep")
        .unwrap()
        .clone()
}

fn texts(h: &Host, id: &str) -> Vec<String> {
    h.events(id)
        .iter()
        .filter(|e| e["type"] == "message.received")
        .map(|e| e["data"]["text"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_rust_handler_fires_on_cadence_with_receive_call_tool_and_wait_until() {
    let mut h = host_with_sweep(at(12, 4, 30));
    let seen = Arc::new(Seen::default());
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    h.start(ServeOptions::default().schedule_handler(
        "sweep",
        sweep_handler(seen.clone(), gate.clone(), done.clone()),
    ));
    assert_eq!(sweep_info(&h)["nextFireAt"], "2026-03-02T12:05:00Z");

    h.clock.set(at(12, 5, 0));
    wait_until("the first run", || seen.calls.lock().unwrap().len() == 1);
    let (tick, principal, stamped) = seen.calls.lock().unwrap()[0].clone();
    assert_eq!(tick.as_deref(), Some("2026-03-02T12:05:00+00:00"));
    assert_eq!(principal, "schedule:sweep");
    assert_eq!(stamped, json!({"label": "rust"}));
    let ids = h.session_ids();
    assert_eq!(ids.len(), 1, "{ids:?}");
    let sid = ids[0].clone();
    wait_until("the handed-off turn", || {
        h.types(&sid).last().map(String::as_str) == Some("session.waiting")
    });
    let started = &h.events(&sid)[0];
    assert_eq!(started["data"]["channel"], "intake");
    assert_eq!(started["data"]["principalId"], "schedule:sweep");
    assert_eq!(texts(&h, &sid), ["sweep 0"]);

    // The wait_until work is still going: the run counts as running, so
    // the next tick is skipped and counted, not piled up.
    assert_eq!(sweep_info(&h)["running"], true);
    h.clock.set(at(12, 10, 0));
    wait_until("the skipped tick", || sweep_info(&h)["skippedTicks"] == 1);
    assert_eq!(seen.calls.lock().unwrap().len(), 1);

    // Once it ends, the next tick runs again, into the same conversation
    // (the continuation key maps to the session the first run started).
    gate.add_permits(1);
    wait_until("the background work", || done.load(Ordering::SeqCst) == 1);
    wait_until("the run to settle", || sweep_info(&h)["running"] == false);
    h.clock.set(at(12, 15, 0));
    wait_until("the second run", || seen.calls.lock().unwrap().len() == 2);
    wait_until("the second message", || texts(&h, &sid).len() == 2);
    assert_eq!(texts(&h, &sid), ["sweep 0", "sweep 1"]);
    assert_eq!(h.session_ids(), std::slice::from_ref(&sid));
    assert_eq!(sweep_info(&h)["lastFiredAt"], "2026-03-02T12:15:00Z");
    gate.add_permits(1);
    wait_until("the second background work", || {
        done.load(Ordering::SeqCst) == 2
    });
}

#[test]
fn dev_dispatch_runs_a_rust_handler_exactly_once_and_reports_failures() {
    let mut h = host_with_sweep(at(12, 4, 30));
    let seen = Arc::new(Seen::default());
    let gate = Arc::new(tokio::sync::Semaphore::new(100));
    let done = Arc::new(AtomicUsize::new(0));
    let fails = Arc::new(AtomicUsize::new(0));
    let fails2 = fails.clone();
    write(
        &h.agent_dir().join("schedules/broken.toml"),
        "cron = \"0 0 * * *\"\nhandler = \"broken\"\n",
    );
    h.start(
        ServeOptions {
            dev: true,
            ..Default::default()
        }
        .schedule_handler("sweep", sweep_handler(seen.clone(), gate, done.clone()))
        .schedule_handler("broken", move |_run: ScheduleRun| {
            let fails = fails2.clone();
            async move {
                fails.fetch_add(1, Ordering::SeqCst);
                Err::<(), _>(std::io::Error::other("upstream said no"))
            }
        }),
    );
    // Under --dev the cadence never fires by itself.
    h.clock.set(at(12, 20, 0));
    settle();
    assert!(seen.calls.lock().unwrap().is_empty());

    let r = h.send(Request::post("/bot/v1/dev/schedules/sweep"));
    assert_eq!(r.status, 200, "{}", r.body);
    let body = r.json();
    assert_eq!(body["scheduleId"], "sweep");
    let ids = body["sessionIds"].as_array().unwrap().clone();
    assert_eq!(ids.len(), 1, "{body}");
    assert_eq!(h.session_ids(), [ids[0].as_str().unwrap().to_owned()]);
    {
        let calls = seen.calls.lock().unwrap();
        assert_eq!(calls.len(), 1, "the handler ran more than once");
        // A dispatch by hand has no tick and runs as the caller.
        assert_eq!(calls[0].0, None);
        assert_ne!(calls[0].1, "schedule:sweep");
    }
    wait_until("the background work", || done.load(Ordering::SeqCst) == 1);
    h.clock.set(at(12, 30, 0));
    settle();
    assert_eq!(seen.calls.lock().unwrap().len(), 1);

    // ServeHandle::dispatch_schedule takes the same path, as the schedule.
    let more =
        h.rt.block_on(h.handle().dispatch_schedule("bot", "sweep"))
            .unwrap();
    assert_eq!(more, [ids[0].as_str().unwrap().to_owned()]);
    assert_eq!(seen.calls.lock().unwrap()[1].1, "schedule:sweep");

    // A failing handler: 500 with a code, once, and nothing started.
    let r = h.send(Request::post("/bot/v1/dev/schedules/broken"));
    assert_eq!(
        (r.status, r.error_code()),
        (500, "schedule_failed".into()),
        "{}",
        r.body
    );
    assert_eq!(fails.load(Ordering::SeqCst), 1);
    assert_eq!(h.session_ids().len(), 1);
}

#[test]
fn shutdown_waits_for_wait_until_work_within_the_grace_period() {
    let mut h = host_with_sweep(at(12, 4, 30));
    let marker = h.dir.path().join("background.txt");
    let m2 = marker.clone();
    h.start(
        ServeOptions {
            dev: true,
            shutdown_grace: Duration::from_secs(5),
            ..Default::default()
        }
        .schedule_handler("sweep", move |run: ScheduleRun| {
            let marker = m2.clone();
            async move {
                run.wait_until(async move {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    std::fs::write(&marker, "finished").unwrap();
                });
                // Work that never ends is cut off when the grace runs out.
                run.wait_until(std::future::pending::<()>());
                Ok::<(), agentkit::ScheduleError>(())
            }
        }),
    );
    let r = h.send(Request::post("/bot/v1/dev/schedules/sweep"));
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(!marker.exists());
    let handle = h.handle.take().unwrap();
    let began = Instant::now();
    h.rt.block_on(async {
        // Close with a short grace: the finite work ends within it, the
        // endless one does not stop close from returning.
        let _ = tokio::time::timeout(Duration::from_secs(120), handle.close()).await;
    });
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "finished");
    assert!(
        began.elapsed() < Duration::from_secs(100),
        "close did not honour its grace period"
    );
}

#[test]
fn an_unregistered_handler_keeps_the_server_from_starting() {
    let h = host_with_sweep(at(12, 4, 30));
    let root = h.dir.path().join("agents");
    let err =
        h.rt.block_on(agentkit::serve(
            &root,
            ServeOptions {
                port: 0,
                state_root: Some(h.dir.path().join("state")),
                ..Default::default()
            }
            .schedule_handler("other", |_run: ScheduleRun| async {
                Ok::<(), agentkit::ScheduleError>(())
            }),
        ))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`sweep`") && err.contains("not registered") && err.contains("other"),
        "{err}"
    );
    // validate cannot know what a program registers: a warning, not an error.
    let found = agentkit::validate(&root, |_| true).unwrap();
    assert!(!found.diagnostics.has_errors(), "{:?}", found.diagnostics);
    let warning = found
        .diagnostics
        .iter()
        .find(|d| d.message.contains("Rust handler `sweep`"))
        .unwrap_or_else(|| panic!("{:?}", found.diagnostics));
    assert_eq!(warning.severity, agentkit::Severity::Warning);
}
