//! Three in-process hosts on one PostgreSQL database (a throwaway one per
//! test), each on its own state root and a manual clock set to the same
//! time: every tick of a `* * * * *` schedule fires exactly once, a
//! thousand reminders fire once each, and a run-form reminder (a Rust
//! handler registered by name on every host) fires once per tick.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentkit::{
    NewReminder, ReminderAction, ReminderOutcome, ReminderTick, ReminderWhen, ServeOptions,
};
use agentkit_test_support::pg::throwaway_database;

use super::time::{Host, SCRIPT, at, settle, wait_until};

const MINUTELY: (&str, &str) = (
    "schedules/heartbeat.md",
    "---\ncron: \"* * * * *\"\n---\n\nCheck the incidents.\n",
);

#[test]
fn every_tick_of_a_minutely_schedule_fires_once_across_three_hosts() {
    let Some(db) = throwaway_database() else {
        return;
    };
    const TICKS: u32 = 8;
    // Hosts never share a clock to the millisecond: each runs a few
    // hundred milliseconds off the others (the offsets once seen on three
    // real hosts), and a tick's key must not carry them.
    const OFFSETS_MS: [i64; 3] = [355, 352, 365];
    let off = |i: usize| chrono::Duration::milliseconds(OFFSETS_MS[i]);
    let mut hosts: Vec<Host> = (0..3)
        .map(|i| Host::new(SCRIPT, &[MINUTELY], at(12, 0, 30) + off(i)))
        .collect();
    for h in &mut hosts {
        h.start(ServeOptions {
            database_url: Some(db.url.clone()),
            ..ServeOptions::default()
        });
    }
    let sessions = || -> u32 {
        db.query("SELECT count(*) FROM agentkit_sessions")
            .parse()
            .unwrap()
    };
    let completed = || -> u32 {
        db.query("SELECT count(*) FROM agentkit_events WHERE type = 'session.completed'")
            .parse()
            .unwrap()
    };
    for minute in 1..=TICKS {
        for (i, h) in hosts.iter().enumerate() {
            h.clock.set(at(12, minute, 0) + off(i));
        }
        // Each run ends before the next tick: a host still running the
        // previous one would leave the tick to the others (as one host
        // skips a tick that overlaps its previous run).
        wait_until(&format!("the 12:{minute:02} tick"), || {
            sessions() >= minute && completed() >= minute
        });
    }
    settle();
    assert_eq!(sessions(), TICKS, "a tick fired more than once");
    assert_eq!(
        db.query("SELECT count(*), count(DISTINCT tick_ms) FROM agentkit_schedule_ticks"),
        format!("{TICKS}|{TICKS}")
    );
    // Each key is the tick's whole minute.
    assert_eq!(
        db.query("SELECT count(*) FROM agentkit_schedule_ticks WHERE tick_ms % 60000 <> 0"),
        "0"
    );
    // Each fired run is a whole task session in the shared log.
    assert_eq!(completed(), TICKS);
}

#[test]
fn a_thousand_reminders_fire_once_each_across_three_hosts() {
    let Some(db) = throwaway_database() else {
        return;
    };
    const REMINDERS: usize = 1000;
    let mut hosts: Vec<Host> = (0..3)
        .map(|_| Host::new(SCRIPT, &[], at(12, 0, 0)))
        .collect();
    for h in &mut hosts {
        h.start(ServeOptions {
            database_url: Some(db.url.clone()),
            ..ServeOptions::default()
        });
    }
    // Each wakes a conversation of its own (a channel key per reminder).
    let reminders: Vec<NewReminder> = (0..REMINDERS)
        .map(|i| NewReminder {
            purpose: "recheck".into(),
            channel_id: "jobs".into(),
            continuation_token: format!("job:{i}"),
            when: ReminderWhen::Delay(Duration::from_secs(60)),
            action: ReminderAction::Prompt {
                prompt: format!("job {i}"),
                until: None,
            },
        })
        .collect();
    let created = hosts[0]
        .rt
        .block_on(
            hosts[0]
                .handle()
                .runtime("bot")
                .unwrap()
                .reminders()
                .create_many(reminders),
        )
        .unwrap();
    assert_eq!(created, REMINDERS);
    for h in &hosts {
        h.clock.set(at(12, 1, 1));
    }
    let count = |sql: &str| -> usize { db.query(sql).parse().unwrap() };
    wait_until("every reminder to fire", || {
        count("SELECT count(*) FROM agentkit_reminders WHERE status = 'done'") == REMINDERS
    });
    settle();
    assert_eq!(
        count("SELECT count(*) FROM agentkit_reminders WHERE status = 'done' AND fire_count = 1"),
        REMINDERS
    );
    // One conversation per reminder, woken once.
    assert_eq!(count("SELECT count(*) FROM agentkit_sessions"), REMINDERS);
    assert_eq!(
        count("SELECT count(*) FROM agentkit_events WHERE type = 'message.received'"),
        REMINDERS
    );
    // The fired ones are gone from every host's view of what is armed.
    for h in &hosts {
        let runtime = h.handle().runtime("bot").unwrap();
        assert_eq!(h.rt.block_on(runtime.reminders().armed()), 0);
    }
}

/// Two hosts of the `pr-reviewer` fixture on one database, against a mock
/// GitHub API: the same delivery sent to both at once runs one turn.
#[test]
fn a_duplicate_github_delivery_to_two_hosts_runs_one_turn() {
    use std::sync::Arc;

    use agentkit::EnvLookup;
    use agentkit_test_support::http::Request;
    use agentkit_test_support::mock::{MockResponse, MockServer};
    use serde_json::json;

    let Some(db) = throwaway_database() else {
        return;
    };
    let api = MockServer::start(|r| match r.method.as_str() {
        "POST" if r.path.ends_with("/comments") => MockResponse::json(201, &json!({"id": 4242})),
        "POST" => MockResponse::json(201, &json!({"state": "ok"})),
        _ => MockResponse::json(200, &json!({})),
    });
    let secret = "It's a Secret to Everybody";
    let api_url = api.url();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let project = agentkit_test_support::fixtures_dir().join("channels/pr-reviewer");
    let states = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let hosts: Vec<agentkit::ServeHandle> = states
        .iter()
        .map(|state| {
            let api_url = api_url.clone();
            let env = EnvLookup(Arc::new(move |name: &str| match name {
                "GITHUB_WEBHOOK_SECRET" => Some(secret.to_owned()),
                "GITHUB_API_URL" => Some(api_url.clone()),
                "GITHUB_TOKEN" => Some("ghp_test".to_owned()),
                _ => None,
            }));
            rt.block_on(agentkit::serve(
                &project,
                ServeOptions {
                    port: 0,
                    state_root: Some(state.path().to_path_buf()),
                    env,
                    database_url: Some(db.url.clone()),
                    ..ServeOptions::default()
                },
            ))
            .unwrap()
        })
        .collect();
    let body = std::fs::read(
        agentkit_test_support::fixtures_dir().join("github/pull_request.opened.json"),
    )
    .unwrap();
    let delivery = |id: &str| {
        Request::post("/pr-reviewer/v1/channels/github")
            .header("x-github-event", "pull_request")
            .header("x-github-delivery", id)
            .header(
                "x-hub-signature-256",
                &format!("sha256={}", agentkit_channels::sign(secret, &body)),
            )
            .header("content-type", "application/json")
            .raw_body(&body)
    };
    let addrs: Vec<_> = hosts.iter().map(|h| h.local_addr()).collect();
    // The same delivery reaches both hosts at once (a retry racing the
    // original, or two balancers).
    let answers: Vec<(u16, serde_json::Value)> = std::thread::scope(|s| {
        let sent: Vec<_> = addrs
            .iter()
            .map(|addr| {
                let request = delivery("d-shared");
                s.spawn(move || {
                    let r = request.send(*addr).unwrap();
                    (r.status, r.json())
                })
            })
            .collect();
        sent.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let mut statuses: Vec<u16> = answers.iter().map(|(s, _)| *s).collect();
    statuses.sort_unstable();
    assert_eq!(statuses, vec![200, 202], "{answers:?}");
    assert!(
        answers.iter().any(|(_, v)| v["duplicate"] == true),
        "{answers:?}"
    );
    let count = |sql: &str| -> usize { db.query(sql).parse().unwrap() };
    let settled = |n: usize| {
        count("SELECT count(*) FROM agentkit_events WHERE type = 'turn.completed'") == n
            && count("SELECT count(*) FROM agentkit_events WHERE type = 'session.waiting'") == n
    };
    wait_until("the review turn", || settled(1));
    // A new delivery for the same pull request, on whichever host did
    // not run the first turn, continues the same session (one per channel
    // key across hosts) and edits the banner the first turn posted (the
    // channel's state is shared).
    let ran_on = answers.iter().position(|(s, _)| *s == 202).unwrap();
    let r = delivery("d-second").send(addrs[1 - ran_on]).unwrap();
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.json()["isNew"], false, "{}", r.body);
    wait_until("the second review turn", || settled(2));
    settle();
    assert_eq!(count("SELECT count(*) FROM agentkit_sessions"), 1);
    assert_eq!(
        count("SELECT count(*) FROM agentkit_deliveries WHERE delivery_id = 'd-shared'"),
        1
    );
    let banners = api
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/comments"))
        .count();
    assert_eq!(banners, 1, "the banner is posted once, then edited");
    for h in hosts {
        rt.block_on(h.close());
    }
}

/// `max_tokens_per_day` counts the turns of every host on the database.
#[test]
fn the_daily_budget_counts_every_hosts_turns() {
    use agentkit_test_support::http::Request;
    use serde_json::{Value, json};

    let Some(db) = throwaway_database() else {
        return;
    };
    let script = r#"{"turns": [{"steps": [{"text": "ok", "usage": {"inputTokens": 5000, "outputTokens": 10}}]}]}"#;
    let agent_toml = (
        "agent.toml",
        "model = \"scripted:script.json\"\n[harness]\nmax_tokens_per_day = 10300\n",
    );
    let mut hosts: Vec<Host> = (0..2)
        .map(|_| Host::new(script, &[agent_toml], at(12, 0, 0)))
        .collect();
    for h in &mut hosts {
        h.start(ServeOptions {
            database_url: Some(db.url.clone()),
            ..ServeOptions::default()
        });
    }
    let turn = |h: &Host| -> Vec<Value> {
        let r = h.send(Request::post("/bot/v1/session").json(&json!({"message": "hi"})));
        assert_eq!(r.status, 200, "{}", r.body);
        let id = r.json()["sessionId"].as_str().unwrap().to_owned();
        Request::get(&format!("/bot/v1/session/{id}/stream"))
            .stream(h.addr())
            .unwrap()
            .until("session.waiting")
            .unwrap()
    };
    for _ in 0..2 {
        let events = turn(&hosts[0]);
        assert!(
            events.iter().any(|e| e["type"] == "turn.completed"),
            "{events:?}"
        );
    }
    // 10,020 tokens used today on the first host: the second refuses a
    // turn whose request would pass the budget.
    let events = turn(&hosts[1]);
    let failed: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "turn.failed")
        .collect();
    assert_eq!(failed.len(), 1, "{events:?}");
    assert_eq!(failed[0]["data"]["limit"], "max_tokens_per_day");
    assert_eq!(
        db.query("SELECT input_tokens + output_tokens FROM agentkit_usage_daily"),
        "10020"
    );
}

/// `max_cost_usd_per_day` counts the cost of every host's turns on the
/// database.
#[test]
fn the_daily_money_budget_counts_every_hosts_turns() {
    use agentkit_test_support::http::Request;
    use serde_json::{Value, json};

    let Some(db) = throwaway_database() else {
        return;
    };
    let script = r#"{"turns": [{"steps": [{"text": "ok", "usage": {"inputTokens": 5000, "outputTokens": 10}}]}]}"#;
    // 5,000 × 1 + 10 × 1 = 5,010 micro-dollars a turn.
    let agent_toml = (
        "agent.toml",
        "[model]\nprovider = \"scripted\"\nid = \"script.json\"\n[model.pricing]\ninput = 1\noutput = 1\n[harness.budget]\nmax_cost_usd_per_day = 0.01\n",
    );
    let mut hosts: Vec<Host> = (0..2)
        .map(|_| Host::new(script, &[agent_toml], at(12, 0, 0)))
        .collect();
    for h in &mut hosts {
        h.start(ServeOptions {
            database_url: Some(db.url.clone()),
            ..ServeOptions::default()
        });
    }
    let turn = |h: &Host| -> Vec<Value> {
        let r = h.send(Request::post("/bot/v1/session").json(&json!({"message": "hi"})));
        assert_eq!(r.status, 200, "{}", r.body);
        let id = r.json()["sessionId"].as_str().unwrap().to_owned();
        Request::get(&format!("/bot/v1/session/{id}/stream"))
            .stream(h.addr())
            .unwrap()
            .until("session.waiting")
            .unwrap()
    };
    for _ in 0..2 {
        let events = turn(&hosts[0]);
        let done: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] == "turn.completed")
            .collect();
        assert_eq!(done.len(), 1, "{events:?}");
        assert_eq!(done[0]["data"]["costUsd"], json!(0.00501));
    }
    // 0.01002 spent today on the first host: the second refuses a turn.
    let events = turn(&hosts[1]);
    let failed: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "turn.failed")
        .collect();
    assert_eq!(failed.len(), 1, "{events:?}");
    assert_eq!(failed[0]["data"]["limit"], "max_cost_usd_per_day");
    assert_eq!(
        db.query("SELECT cost_nano_usd FROM agentkit_cost_daily"),
        "10020000"
    );
}

/// A run-form handler that counts its calls (on this host) and delivers
/// `RUN <n>` into the conversation three times, then stops.
fn counting_handler(
    calls: Arc<AtomicUsize>,
) -> impl Fn(ReminderTick) -> futures_util::future::BoxFuture<'static, ReminderOutcome> + Send + Sync
{
    move |tick: ReminderTick| {
        calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            if tick.fire_count >= 3 {
                return ReminderOutcome::Stop;
            }
            tick.followup
                .send(format!("RUN {}", tick.fire_count))
                .await
                .unwrap();
            ReminderOutcome::Delivered
        })
    }
}

fn poll_reminder(token: &str, when: ReminderWhen, handler: &str) -> NewReminder {
    NewReminder {
        purpose: "poll".into(),
        channel_id: "jobs".into(),
        continuation_token: token.into(),
        when,
        action: ReminderAction::Named(handler.into()),
    }
}

#[test]
fn a_run_form_reminder_fires_once_per_tick_across_three_hosts() {
    let Some(db) = throwaway_database() else {
        return;
    };
    let mut hosts: Vec<Host> = (0..3)
        .map(|_| Host::new(SCRIPT, &[], at(12, 0, 0)))
        .collect();
    let calls: Vec<Arc<AtomicUsize>> = (0..3).map(|_| Arc::default()).collect();
    for (h, calls) in hosts.iter_mut().zip(&calls) {
        h.start(
            ServeOptions {
                database_url: Some(db.url.clone()),
                ..ServeOptions::default()
            }
            .reminder_handler("poll", counting_handler(calls.clone())),
        );
    }
    let handle = hosts[0].handle();
    // An unnamed closure cannot fire on another host: refused, saying why.
    let unnamed = hosts[0].rt.block_on(handle.create_reminder(
        "bot",
        NewReminder {
            action: ReminderAction::Run(Arc::new(|_tick: ReminderTick| async {
                ReminderOutcome::Stop
            })),
            ..poll_reminder(
                "job:x",
                ReminderWhen::Delay(Duration::from_secs(60)),
                "poll",
            )
        },
    ));
    let refused = unnamed.unwrap_err().to_string();
    assert!(refused.contains("must name its handler"), "{refused}");
    // A name no host registered is refused at creation.
    let unknown = hosts[0].rt.block_on(handle.create_reminder(
        "bot",
        poll_reminder(
            "job:x",
            ReminderWhen::Delay(Duration::from_secs(60)),
            "nope",
        ),
    ));
    let unknown = unknown.unwrap_err().to_string();
    assert!(unknown.contains("no reminder handler `nope`"), "{unknown}");

    let reminder = hosts[0]
        .rt
        .block_on(handle.create_reminder(
            "bot",
            poll_reminder(
                "job:1",
                ReminderWhen::Every(Duration::from_secs(600)),
                "poll",
            ),
        ))
        .unwrap();
    assert_eq!(reminder.form, "run");
    assert_eq!(reminder.handler.as_deref(), Some("poll"));
    let total = || {
        calls
            .iter()
            .map(|c| c.load(Ordering::SeqCst))
            .sum::<usize>()
    };
    let fire_count = || -> usize {
        db.query(&format!(
            "SELECT fire_count FROM agentkit_reminders WHERE id = '{}'",
            reminder.id
        ))
        .parse()
        .unwrap()
    };
    for tick in 1..=3usize {
        for h in &hosts {
            h.clock.set(at(12, 10 * tick as u32, 1));
        }
        wait_until(&format!("tick {tick}"), || fire_count() == tick);
        settle();
        assert_eq!(total(), tick, "tick {tick} fired on more than one host");
    }
    // The fourth tick stops it.
    for h in &hosts {
        h.clock.set(at(12, 40, 1));
    }
    let status = || {
        db.query(&format!(
            "SELECT status, coalesce(reason, '') FROM agentkit_reminders WHERE id = '{}'",
            reminder.id
        ))
    };
    wait_until("the stop", || status() == "done|stopped");
    settle();
    assert_eq!(total(), 4);
    assert_eq!(fire_count(), 3);
    // One conversation, woken three times.
    assert_eq!(
        db.query("SELECT count(*) FROM agentkit_sessions"),
        "1",
        "one conversation for the reminder's key"
    );
    assert_eq!(
        db.query("SELECT count(*) FROM agentkit_events WHERE type = 'message.received'"),
        "3"
    );
}

#[test]
fn a_run_form_reminder_fired_by_hand_on_a_host_without_its_handler_records_the_failure() {
    let Some(db) = throwaway_database() else {
        return;
    };
    let calls = Arc::new(AtomicUsize::new(0));
    let mut with = Host::new(SCRIPT, &[], at(12, 0, 0));
    with.start(
        ServeOptions {
            database_url: Some(db.url.clone()),
            ..ServeOptions::default()
        }
        .reminder_handler("poll", counting_handler(calls.clone())),
    );
    let mut without = Host::new(SCRIPT, &[], at(12, 0, 0));
    without.start(ServeOptions {
        database_url: Some(db.url.clone()),
        ..ServeOptions::default()
    });
    let create = |key: &str| {
        with.rt
            .block_on(with.handle().create_reminder(
                "bot",
                poll_reminder(key, ReminderWhen::Delay(Duration::from_secs(3600)), "poll"),
            ))
            .unwrap()
    };
    let (first, second) = (create("job:1"), create("job:2"));
    // Fired by hand (`POST /v1/dev/reminders/:id`'s path) on the host that
    // has the handler: it runs there, once.
    let fired = with
        .rt
        .block_on(with.handle().dispatch_reminder("bot", &first.id))
        .unwrap();
    assert_eq!(fired.outcome, ReminderOutcome::Delivered);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    // Fired again: it was a one-shot, now done.
    let again = with
        .rt
        .block_on(with.handle().dispatch_reminder("bot", &first.id))
        .unwrap_err()
        .to_string();
    assert!(again.contains("only armed reminders fire"), "{again}");
    // On a host without a handler of that name: a failed firing, recorded
    // with its reason, not a silent loss.
    let failed = without
        .rt
        .block_on(without.handle().dispatch_reminder("bot", &second.id))
        .unwrap();
    assert_eq!(failed.outcome, ReminderOutcome::Skip);
    let reason = failed.reminder.reason.unwrap_or_default();
    assert!(
        reason.contains("firing failed: no reminder handler `poll` is registered on this host"),
        "{reason}"
    );
    assert_eq!(
        db.query(&format!(
            "SELECT status FROM agentkit_reminders WHERE id = '{}'",
            second.id
        )),
        "done"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[test]
fn a_reminder_firing_on_one_host_wakes_a_conversation_running_on_another() {
    let Some(db) = throwaway_database() else {
        return;
    };
    const SCRIPT: &str = r#"{"turns": [
        {"steps": [{"text": "first"}]},
        {"steps": [{"text": "a slow second turn", "delayMs": 3000}]},
        {"steps": [{"text": "woken"}]}
    ]}"#;
    // A runs the conversation and fires no reminders; B fires them.
    let mut a = Host::new(SCRIPT, &[], at(12, 0, 0));
    a.start(ServeOptions {
        database_url: Some(db.url.clone()),
        reminders: Some(false),
        ..ServeOptions::default()
    });
    let mut b = Host::new(SCRIPT, &[], at(12, 0, 0));
    b.start(ServeOptions {
        database_url: Some(db.url.clone()),
        ..ServeOptions::default()
    });
    let count = |sql: &str| -> usize { db.query(sql).parse().unwrap() };
    let r = a.send(
        agentkit_test_support::http::Request::post("/bot/v1/session")
            .json(&serde_json::json!({"message": "hi"})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let token = r.json()["continuationToken"].as_str().unwrap().to_owned();
    wait_until("the first turn", || {
        count("SELECT count(*) FROM agentkit_events WHERE type = 'turn.completed'") == 1
    });
    let r = a.send(
        agentkit_test_support::http::Request::post(&format!("/bot/v1/session/{id}"))
            .json(&serde_json::json!({"message": "take your time", "continuationToken": token})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let token = r.json()["continuationToken"].as_str().unwrap().to_owned();
    wait_until("the slow turn", || {
        count("SELECT count(*) FROM agentkit_events WHERE type = 'turn.started'") == 2
    });
    let reminder =
        b.rt.block_on(b.handle().create_reminder(
            "bot",
            NewReminder {
                purpose: "nudge".into(),
                channel_id: "http".into(),
                continuation_token: token,
                when: ReminderWhen::Delay(Duration::from_secs(60)),
                action: ReminderAction::Prompt {
                    prompt: "any news?".into(),
                    until: None,
                },
            },
        ))
        .unwrap();
    assert_eq!(reminder.session_id.as_deref(), Some(id.as_str()));
    b.clock.set(at(12, 1, 1));
    // B's wake is routed to A, which queues it behind the running turn
    // (coalesce), then runs it.
    wait_until("the reminder to fire", || {
        db.query(&format!(
            "SELECT status, fire_count FROM agentkit_reminders WHERE id = '{}'",
            reminder.id
        )) == "done|1"
    });
    assert_eq!(
        db.query(&format!(
            "SELECT coalesce(reason, '') FROM agentkit_reminders WHERE id = '{}'",
            reminder.id
        )),
        ""
    );
    wait_until("the woken turn", || {
        count("SELECT count(*) FROM agentkit_events WHERE type = 'turn.completed'") == 3
    });
    assert_eq!(
        count("SELECT count(*) FROM agentkit_events WHERE type = 'turn.failed'"),
        0,
        "the wake did not interrupt the running turn"
    );
    assert_eq!(
        count(
            "SELECT count(*) FROM agentkit_events WHERE type = 'message.received' AND data LIKE '%any news?%'"
        ),
        1
    );
}

#[test]
fn a_session_made_on_one_host_is_forked_from_another() {
    let Some(db) = throwaway_database() else {
        return;
    };
    const SCRIPT: &str = r#"{"turns": [
        {"steps": [{"text": "first"}]},
        {"steps": [{"text": "second"}]}
    ]}"#;
    use agentkit_test_support::http::Request;
    use serde_json::{Value, json};
    let mut a = Host::new(SCRIPT, &[], at(12, 0, 0));
    a.start(ServeOptions {
        database_url: Some(db.url.clone()),
        ..ServeOptions::default()
    });
    let mut b = Host::new(SCRIPT, &[], at(12, 0, 0));
    b.start(ServeOptions {
        database_url: Some(db.url.clone()),
        ..ServeOptions::default()
    });
    let r = a.send(Request::post("/bot/v1/session").json(&json!({"message": "hi"})));
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let events_of = |host: &Host, id: &str| -> Vec<Value> {
        let r = host.send(Request::get(&format!("/bot/v1/session/{id}/events")));
        assert_eq!(r.status, 200, "{}", r.body);
        r.body
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    wait_until("the first turn to settle", || {
        events_of(&a, &id)
            .last()
            .is_some_and(|e| e["type"] == "session.waiting")
    });
    let original = events_of(&a, &id);
    let cut = original.len();
    let r = b.send(
        Request::post(&format!("/bot/v1/session/{id}/fork"))
            .json(&json!({"atIndex": cut, "message": "again"})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let fork = r.json()["sessionId"].as_str().unwrap().to_owned();
    // The fork's turn runs on B; A reads the same log from the database.
    wait_until("the fork's turn to settle", || {
        events_of(&a, &fork).last().is_some_and(|e| {
            e["type"] == "session.waiting" && e["index"].as_u64() > Some(cut as u64)
        })
    });
    let forked = events_of(&a, &fork);
    assert_eq!(forked[cut]["type"], "session.forked");
    assert_eq!(forked[cut]["data"]["fromSessionId"], id.as_str());
    let replies: Vec<_> = forked
        .iter()
        .filter(|e| e["type"] == "message.completed")
        .map(|e| e["data"]["text"].clone())
        .collect();
    assert_eq!(replies, [json!("first"), json!("second")]);
    assert_eq!(events_of(&b, &id), original, "the original is untouched");
    let info = a.send(Request::get(&format!("/bot/v1/session/{fork}")));
    assert_eq!(info.json()["forkedFrom"]["sessionId"], id.as_str());
}
