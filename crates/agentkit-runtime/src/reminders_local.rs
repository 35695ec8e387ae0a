//! This host's reminders, in `agentkit.sqlite` (written by the one SQLite
//! writer), behind the same trait as a shared store's
//! (`agentkit_store::SharedReminders`): the reminders part creates, claims,
//! fires and re-arms through one path whichever store it runs on.
//!
//! The armed rows are also kept in memory, ordered by their next fire
//! time, so finding what is due reads no table. A claim is this process's
//! mark that a firing is under way. Unlike a shared store's it does not
//! lapse while the firing runs: the one process that could fire the
//! reminder again is the one firing it, and a handler may run for longer
//! than any claim time. A firing that failed before writing back turns its
//! claim into one that lapses (`claim_failed`), so it is retried later.
//! Every change is written before it is answered, so the table is the
//! truth for reads of ended reminders and after a restart.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentkit_store::{ReminderRecord, SharedError, SharedReminders, StoreFuture};
use futures_util::FutureExt;

use crate::db::Db;
use crate::error::{Error, Result};
use crate::reminder_types::{
    HANDLER_LOST_ON_RESTART, ReminderRow, ReminderStatus, from_record, to_record,
};
use crate::util::lock;

#[derive(Debug)]
pub(crate) struct LocalReminders {
    db: Arc<Db>,
    armed: Mutex<Armed>,
}

/// The armed reminders, by fire time, and the claims on them.
#[derive(Debug, Default)]
struct Armed {
    due: BTreeSet<(i64, String)>,
    rows: HashMap<String, ReminderRow>,
    /// Firings under way (no end), or failed (until when they stand).
    claims: HashMap<String, Option<Instant>>,
}

impl Armed {
    fn arm(&mut self, row: ReminderRow) {
        if let Some(at) = row.next_fire_at_ms {
            self.due.insert((at, row.id.clone()));
        }
        self.rows.insert(row.id.clone(), row);
    }

    fn remove(&mut self, id: &str) -> Option<ReminderRow> {
        self.claims.remove(id);
        let row = self.rows.remove(id)?;
        if let Some(at) = row.next_fire_at_ms {
            self.due.remove(&(at, row.id.clone()));
        }
        Some(row)
    }

    fn claimed(&self, id: &str) -> bool {
        self.claims
            .get(id)
            .is_some_and(|until| until.is_none_or(|t| t >= Instant::now()))
    }
}

fn failed(e: &Error) -> SharedError {
    SharedError::Failed {
        message: format!("the reminders table: {e}"),
    }
}

impl LocalReminders {
    /// Loads the armed reminders. Run-form ones are disarmed first: their
    /// handlers lived in the previous process.
    pub(crate) fn open(db: Arc<Db>) -> Result<LocalReminders> {
        let lost = db.disarm_run_form(HANDLER_LOST_ON_RESTART)?;
        if lost > 0 {
            tracing::warn!(
                count = lost,
                "run-form reminders disarmed: their handlers are gone after the restart (handler_lost_on_restart); re-arm them from the code that created them"
            );
        }
        let mut armed = Armed::default();
        for row in db.armed_reminders()? {
            armed.arm(row);
        }
        Ok(LocalReminders {
            db,
            armed: Mutex::new(armed),
        })
    }

    fn claim(armed: &mut Armed, id: &str) -> Option<ReminderRecord> {
        let record = to_record(armed.rows.get(id)?);
        armed.claims.insert(id.to_owned(), None);
        Some(record)
    }
}

impl SharedReminders for LocalReminders {
    fn insert<'a>(&'a self, rows: &'a [ReminderRecord]) -> StoreFuture<'a, ()> {
        async move {
            let rows = rows
                .iter()
                .cloned()
                .map(from_record)
                .collect::<Result<Vec<_>>>()
                .map_err(|e| failed(&e))?;
            self.db
                .insert_reminders(rows.clone())
                .await
                .map_err(|e| failed(&e))?;
            let mut armed = lock(&self.armed);
            for row in rows {
                if row.status == ReminderStatus::Armed {
                    armed.arm(row);
                }
            }
            Ok(())
        }
        .boxed()
    }

    fn update<'a>(
        &'a self,
        r: &'a ReminderRecord,
        claimed_by: Option<&'a str>,
    ) -> StoreFuture<'a, bool> {
        async move {
            let row = from_record(r.clone()).map_err(|e| failed(&e))?;
            {
                let mut armed = lock(&self.armed);
                // A firing writes back only while its claim stands on a
                // reminder still armed (not cancelled meanwhile).
                if claimed_by.is_some()
                    && (!armed.rows.contains_key(&row.id)
                        || armed.claims.get(&row.id) != Some(&None))
                {
                    return Ok(false);
                }
                armed.remove(&row.id);
                if row.status == ReminderStatus::Armed {
                    armed.arm(row.clone());
                }
            }
            self.db
                .update_reminder(&row)
                .await
                .map_err(|e| failed(&e))?;
            Ok(true)
        }
        .boxed()
    }

    fn bind<'a>(&'a self, id: &'a str, session: &'a str) -> StoreFuture<'a, ()> {
        async move {
            let row = {
                let mut armed = lock(&self.armed);
                let Some(row) = armed.rows.get_mut(id) else {
                    return Ok(());
                };
                row.session_id = Some(session.to_owned());
                row.clone()
            };
            self.db.update_reminder(&row).await.map_err(|e| failed(&e))
        }
        .boxed()
    }

    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<ReminderRecord>> {
        let armed = lock(&self.armed).rows.get(id).map(to_record);
        let read = match armed {
            Some(record) => Ok(Some(record)),
            None => self
                .db
                .reminder(id)
                .map(|row| row.as_ref().map(to_record))
                .map_err(|e| failed(&e)),
        };
        std::future::ready(read).boxed()
    }

    fn list(&self, limit: i64) -> StoreFuture<'_, Vec<ReminderRecord>> {
        let rows = self
            .db
            .all_reminders(usize::try_from(limit).unwrap_or(0))
            .map_err(|e| failed(&e));
        let listed = rows.map(|rows| {
            // The in-memory row carries what the table does not keep (a
            // named handler).
            let armed = lock(&self.armed);
            rows.iter()
                .map(|r| to_record(armed.rows.get(&r.id).unwrap_or(r)))
                .collect()
        });
        std::future::ready(listed).boxed()
    }

    fn armed(&self) -> StoreFuture<'_, i64> {
        let n = lock(&self.armed).rows.len();
        std::future::ready(Ok(i64::try_from(n).unwrap_or(i64::MAX))).boxed()
    }

    fn claim_due<'a>(
        &'a self,
        now_ms: i64,
        limit: i64,
        _host: &'a str,
        _claim_secs: f64,
    ) -> StoreFuture<'a, Vec<ReminderRecord>> {
        let mut armed = lock(&self.armed);
        let due: Vec<String> = armed
            .due
            .iter()
            .take_while(|(at, _)| *at <= now_ms)
            .filter(|(_, id)| !armed.claimed(id))
            .take(usize::try_from(limit).unwrap_or(0))
            .map(|(_, id)| id.clone())
            .collect();
        let claimed = due
            .iter()
            .filter_map(|id| LocalReminders::claim(&mut armed, id))
            .collect();
        std::future::ready(Ok(claimed)).boxed()
    }

    fn claim_one<'a>(
        &'a self,
        id: &'a str,
        _host: &'a str,
        _claim_secs: f64,
    ) -> StoreFuture<'a, Option<ReminderRecord>> {
        let mut armed = lock(&self.armed);
        let claimed = if armed.claimed(id) {
            None
        } else {
            LocalReminders::claim(&mut armed, id)
        };
        std::future::ready(Ok(claimed)).boxed()
    }

    fn claim_failed<'a>(
        &'a self,
        id: &'a str,
        _host: &'a str,
        retry_secs: f64,
    ) -> StoreFuture<'a, ()> {
        let until = Instant::now() + Duration::from_secs_f64(retry_secs.max(0.0));
        if let Some(claim) = lock(&self.armed).claims.get_mut(id) {
            *claim = Some(until);
        }
        std::future::ready(Ok(())).boxed()
    }

    fn next_due(&self) -> StoreFuture<'_, Option<i64>> {
        let armed = lock(&self.armed);
        let next = armed
            .due
            .iter()
            .find(|(_, id)| !armed.claimed(id))
            .map(|(at, _)| *at);
        std::future::ready(Ok(next)).boxed()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn record(id: &str) -> ReminderRecord {
        ReminderRecord {
            id: id.to_owned(),
            purpose: "p".to_owned(),
            channel_id: "http".to_owned(),
            continuation_token: "c".to_owned(),
            session_id: None,
            kind: "every".to_owned(),
            spec: "1h".to_owned(),
            prompt: Some("wake".to_owned()),
            until_condition: None,
            status: "armed".to_owned(),
            reason: None,
            next_fire_at_ms: Some(1_000),
            fire_count: 0,
            created_at_ms: 0,
            last_fired_at_ms: None,
            handler: None,
        }
    }

    #[tokio::test]
    async fn a_claim_stands_while_its_firing_runs_and_lapses_only_once_the_firing_failed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = LocalReminders::open(Db::open_shared(dir.path()).expect("db")).expect("open");
        store.insert(&[record("r1")]).await.expect("insert");

        let claimed = store.claim_due(2_000, 10, "h", 0.0).await.expect("claim");
        assert_eq!(claimed.len(), 1, "the due reminder is claimed");
        // A claim time of zero would have lapsed at once: a firing under
        // way is not fired twice however long it runs.
        std::thread::sleep(Duration::from_millis(5));
        assert!(
            store
                .claim_due(2_000, 10, "h", 0.0)
                .await
                .expect("claim")
                .is_empty()
        );
        assert!(
            store
                .claim_one("r1", "h", 0.0)
                .await
                .expect("claim")
                .is_none()
        );
        assert_eq!(store.next_due().await.expect("next"), None);

        // The firing failed before writing back: retried once the lapse is
        // over, not before.
        store
            .claim_failed("r1", "h", 3_600.0)
            .await
            .expect("failed");
        assert!(
            store
                .claim_due(2_000, 10, "h", 0.0)
                .await
                .expect("claim")
                .is_empty()
        );
        store.claim_failed("r1", "h", 0.0).await.expect("failed");
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(store.next_due().await.expect("next"), Some(1_000));
        let again = store.claim_due(2_000, 10, "h", 0.0).await.expect("claim");
        assert_eq!(again.len(), 1, "the failed firing is claimed again");

        // The firing writes back once; its claim goes with the row.
        let mut done = again.into_iter().next().expect("row");
        done.status = "done".to_owned();
        done.next_fire_at_ms = None;
        assert!(store.update(&done, Some("h")).await.expect("update"));
        assert!(!store.update(&done, Some("h")).await.expect("update"));
    }
}
