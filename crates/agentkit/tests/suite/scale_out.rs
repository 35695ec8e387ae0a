//! Three in-process hosts on one PostgreSQL database (a throwaway one per
//! test), each on its own state root and a manual clock set to the same
//! time: every tick of a `* * * * *` schedule fires exactly once, and a
//! thousand reminders fire once each.

use std::time::Duration;

use agentkit::{NewReminder, ReminderAction, ReminderWhen, ServeOptions};
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
    let mut hosts: Vec<Host> = (0..3)
        .map(|_| Host::new(SCRIPT, &[MINUTELY], at(12, 0, 30)))
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
    for minute in 1..=TICKS {
        for h in &hosts {
            h.clock.set(at(12, minute, 0));
        }
        wait_until(&format!("the 12:{minute:02} tick"), || sessions() >= minute);
    }
    settle();
    assert_eq!(sessions(), TICKS, "a tick fired more than once");
    assert_eq!(
        db.query("SELECT count(*), count(DISTINCT tick_ms) FROM agentkit_schedule_ticks"),
        format!("{TICKS}|{TICKS}")
    );
    // Each fired run is a whole task session in the shared log.
    wait_until("every run to complete", || {
        db.query("SELECT count(*) FROM agentkit_events WHERE type = 'session.completed'")
            == TICKS.to_string()
    });
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
                .create_reminders(reminders),
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
        assert_eq!(h.handle().runtime("bot").unwrap().armed_reminders(), 0);
    }
}
