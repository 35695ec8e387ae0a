//! Reminders in PostgreSQL (`agentkit_reminders`): rows as the runtime
//! keeps them, claimed for firing with `FOR UPDATE SKIP LOCKED` (hosts
//! never wait for each other's claims) and a claim expiry, so each due
//! reminder fires on one host, and one whose host died is fired again.

use agentkit_store::ReminderRecord;

use crate::database::Database;
use crate::error::{Error, Result};

const COLUMNS: &str = "id, purpose, channel_id, continuation_token, session_id, kind, spec, prompt, until_condition, status, reason, next_fire_at_ms, fire_count, created_at_ms, last_fired_at_ms, handler";

fn of_row(r: &tokio_postgres::Row) -> ReminderRecord {
    ReminderRecord {
        id: r.get(0),
        purpose: r.get(1),
        channel_id: r.get(2),
        continuation_token: r.get(3),
        session_id: r.get(4),
        kind: r.get(5),
        spec: r.get(6),
        prompt: r.get(7),
        until_condition: r.get(8),
        status: r.get(9),
        reason: r.get(10),
        next_fire_at_ms: r.get(11),
        fire_count: r.get(12),
        created_at_ms: r.get(13),
        last_fired_at_ms: r.get(14),
        handler: r.get(15),
    }
}

/// One agent's reminders. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ReminderTable {
    db: Database,
    agent: String,
}

impl ReminderTable {
    pub fn new(db: Database, agent: &str) -> ReminderTable {
        ReminderTable {
            db,
            agent: agent.to_owned(),
        }
    }

    /// Inserts `rows` in one transaction.
    pub async fn insert(&self, rows: &[ReminderRecord]) -> Result<()> {
        let mut client = self.db.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(Error::query("begin inserting reminders"))?;
        let statement = tx
            .prepare_cached(&format!(
                "INSERT INTO agentkit_reminders (agent, {COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)"
            ))
            .await
            .map_err(Error::query("prepare a reminder insert"))?;
        for r in rows {
            tx.execute(
                &statement,
                &[
                    &self.agent,
                    &r.id,
                    &r.purpose,
                    &r.channel_id,
                    &r.continuation_token,
                    &r.session_id,
                    &r.kind,
                    &r.spec,
                    &r.prompt,
                    &r.until_condition,
                    &r.status,
                    &r.reason,
                    &r.next_fire_at_ms,
                    &r.fire_count,
                    &r.created_at_ms,
                    &r.last_fired_at_ms,
                    &r.handler,
                ],
            )
            .await
            .map_err(Error::query("insert a reminder"))?;
        }
        tx.commit()
            .await
            .map_err(Error::query("commit reminders"))?;
        Ok(())
    }

    /// Writes back what can change after creation (status, reason, next
    /// fire, counts, the bound session) and lets go of any claim. With
    /// `claimed_by`, only while that host's claim still stands and the
    /// reminder is armed (a reminder cancelled while it fired stays
    /// cancelled). Whether the row was written.
    pub async fn update(&self, r: &ReminderRecord, claimed_by: Option<&str>) -> Result<bool> {
        let client = self.db.client().await?;
        let n = client
            .execute(
                "UPDATE agentkit_reminders SET session_id = $3, status = $4, reason = $5,
                     next_fire_at_ms = $6, fire_count = $7, last_fired_at_ms = $8,
                     claimed_by = NULL, claimed_until = NULL
                 WHERE agent = $1 AND id = $2
                   AND ($9::text IS NULL OR (claimed_by = $9 AND status = 'armed'))",
                &[
                    &self.agent,
                    &r.id,
                    &r.session_id,
                    &r.status,
                    &r.reason,
                    &r.next_fire_at_ms,
                    &r.fire_count,
                    &r.last_fired_at_ms,
                    &claimed_by,
                ],
            )
            .await
            .map_err(Error::query("update a reminder"))?;
        Ok(n == 1)
    }

    /// Binds reminder `id` to `session` (nothing else changes: a claim
    /// on it stands).
    pub async fn bind(&self, id: &str, session: &str) -> Result<()> {
        let client = self.db.client().await?;
        client
            .execute(
                "UPDATE agentkit_reminders SET session_id = $3 WHERE agent = $1 AND id = $2",
                &[&self.agent, &id, &session],
            )
            .await
            .map_err(Error::query("bind a reminder"))?;
        Ok(())
    }

    /// Reminder `id`.
    pub async fn get(&self, id: &str) -> Result<Option<ReminderRecord>> {
        let client = self.db.client().await?;
        Ok(client
            .query_opt(
                &format!("SELECT {COLUMNS} FROM agentkit_reminders WHERE agent = $1 AND id = $2"),
                &[&self.agent, &id],
            )
            .await
            .map_err(Error::query("read a reminder"))?
            .as_ref()
            .map(of_row))
    }

    /// The newest `limit` reminders.
    pub async fn list(&self, limit: i64) -> Result<Vec<ReminderRecord>> {
        let client = self.db.client().await?;
        Ok(client
            .query(
                &format!(
                    "SELECT {COLUMNS} FROM agentkit_reminders WHERE agent = $1 ORDER BY created_at_ms DESC, id DESC LIMIT $2"
                ),
                &[&self.agent, &limit],
            )
            .await
            .map_err(Error::query("list reminders"))?
            .iter()
            .map(of_row)
            .collect())
    }

    /// How many are armed.
    pub async fn armed(&self) -> Result<i64> {
        let client = self.db.client().await?;
        Ok(client
            .query_one(
                "SELECT count(*) FROM agentkit_reminders WHERE agent = $1 AND status = 'armed'",
                &[&self.agent],
            )
            .await
            .map_err(Error::query("count reminders"))?
            .get(0))
    }

    /// Claims up to `limit` armed reminders due at `now_ms` for `host`
    /// for `claim_secs`: rows another host is claiming right now are
    /// skipped, not waited for; a claim past its expiry is taken again.
    pub async fn claim_due(
        &self,
        now_ms: i64,
        limit: i64,
        host: &str,
        claim_secs: f64,
    ) -> Result<Vec<ReminderRecord>> {
        let client = self.db.client().await?;
        let statement = client
            .prepare_cached(&format!(
                "WITH due AS (
                     SELECT id FROM agentkit_reminders
                     WHERE agent = $1 AND status = 'armed' AND next_fire_at_ms <= $2
                       AND (claimed_until IS NULL OR claimed_until < now())
                     ORDER BY next_fire_at_ms LIMIT $3
                     FOR UPDATE SKIP LOCKED
                 )
                 UPDATE agentkit_reminders r SET claimed_by = $4,
                     claimed_until = now() + make_interval(secs => $5)
                 FROM due WHERE r.agent = $1 AND r.id = due.id
                 RETURNING {}",
                COLUMNS
                    .split(", ")
                    .map(|c| format!("r.{c}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            .await
            .map_err(Error::query("prepare a reminder claim"))?;
        Ok(client
            .query(
                &statement,
                &[&self.agent, &now_ms, &limit, &host, &claim_secs],
            )
            .await
            .map_err(Error::query("claim due reminders"))?
            .iter()
            .map(of_row)
            .collect())
    }

    /// Claims armed reminder `id` for `host` now, whatever its fire time
    /// (a firing by hand): `None` when it is not armed or another host's
    /// claim on it stands.
    pub async fn claim_one(
        &self,
        id: &str,
        host: &str,
        claim_secs: f64,
    ) -> Result<Option<ReminderRecord>> {
        let client = self.db.client().await?;
        Ok(client
            .query_opt(
                &format!(
                    "UPDATE agentkit_reminders SET claimed_by = $3,
                         claimed_until = now() + make_interval(secs => $4)
                     WHERE agent = $1 AND id = $2 AND status = 'armed'
                       AND (claimed_until IS NULL OR claimed_until < now())
                     RETURNING {COLUMNS}"
                ),
                &[&self.agent, &id, &host, &claim_secs],
            )
            .await
            .map_err(Error::query("claim a reminder"))?
            .as_ref()
            .map(of_row))
    }

    /// The earliest fire time of an armed reminder nobody is claiming.
    pub async fn next_due(&self) -> Result<Option<i64>> {
        let client = self.db.client().await?;
        Ok(client
            .query_one(
                "SELECT min(next_fire_at_ms) FROM agentkit_reminders
                 WHERE agent = $1 AND status = 'armed' AND (claimed_until IS NULL OR claimed_until < now())",
                &[&self.agent],
            )
            .await
            .map_err(Error::query("find the next reminder"))?
            .get(0))
    }
}
