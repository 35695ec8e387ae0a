//! Requests routed to the host running a session, through the database
//! (no host-to-host network): the host that received a follow-up, a stop
//! or an approval decision for a session another live host holds posts
//! it here and `NOTIFY`s; the holder (or, once no live host holds the
//! session, any host) claims it, applies it and writes its outcome back.
//!
//! Each row is applied at most once: a claim moves it from `pending` to
//! `claimed` under `FOR UPDATE SKIP LOCKED`, and a receiver that gives up
//! moves it from `pending` to `abandoned` in one statement, so exactly
//! one of the two happens.

use agentkit_store::{Mail, MailSignal, MailState};

use crate::database::{Database, MAILBOX_CHANNEL};
use crate::error::{Error, Result};

/// One agent's mailbox. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Mailbox {
    db: Database,
    agent: String,
}

const CLAIM_ANY: &str = concat!(
    "
UPDATE agentkit_mailbox m SET state = 'claimed', claimed_by = $2, claimed_at = now()
WHERE m.seq IN (
    SELECT p.seq FROM agentkit_mailbox p
    WHERE p.agent = $1 AND p.state = 'pending'
      AND NOT EXISTS (
          SELECT 1 FROM agentkit_leases l
          WHERE l.agent = p.agent AND l.session_id = p.session_id
            AND l.held AND l.expires_at > now() AND l.owner <> $2 AND NOT ",
    holder_gone!("l.owner"),
    ")
    ORDER BY p.seq LIMIT $3
    FOR UPDATE SKIP LOCKED)
RETURNING m.id, m.session_id, m.kind, m.payload::text, m.principal_id, m.seq"
);

const CLAIM_ONE: &str = concat!(
    "
UPDATE agentkit_mailbox m SET state = 'claimed', claimed_by = $2, claimed_at = now()
WHERE m.seq IN (
    SELECT p.seq FROM agentkit_mailbox p
    WHERE p.id = $1 AND p.state = 'pending'
      AND NOT EXISTS (
          SELECT 1 FROM agentkit_leases l
          WHERE l.agent = p.agent AND l.session_id = p.session_id
            AND l.held AND l.expires_at > now() AND l.owner <> $2 AND NOT ",
    holder_gone!("l.owner"),
    ")
    FOR UPDATE SKIP LOCKED)
RETURNING m.id, m.session_id, m.kind, m.payload::text, m.principal_id, m.seq"
);

fn mail_of(row: &tokio_postgres::Row) -> (i64, Mail) {
    (
        row.get(5),
        Mail {
            id: row.get(0),
            session: row.get(1),
            kind: row.get(2),
            payload: row.get(3),
            principal_id: row.get(4),
        },
    )
}

impl Mailbox {
    /// The mailbox of agent `agent` (its slug) in `db`.
    pub fn new(db: Database, agent: &str) -> Mailbox {
        Mailbox {
            db,
            agent: agent.to_owned(),
        }
    }

    /// The database's mailbox notifications, from now on.
    pub fn signals(&self) -> tokio::sync::broadcast::Receiver<MailSignal> {
        self.db.mail()
    }

    /// Posts request `id` (`kind`, `payload` JSON) for `session`, sent by
    /// `principal` to host `sender`, and notifies every host.
    pub async fn post(
        &self,
        id: &str,
        session: &str,
        kind: &str,
        payload: &str,
        principal: &str,
        sender: &str,
    ) -> Result<()> {
        let client = self.db.client().await?;
        client
            .query_one(
                "WITH posted AS (
                     INSERT INTO agentkit_mailbox (id, agent, session_id, kind, payload, principal_id, sender)
                     VALUES ($1, $2, $3, $4, $5::text::jsonb, $6, $7) RETURNING id)
                 SELECT pg_notify($8, 'posted ' || $2 || ' ' || $3) FROM posted",
                &[
                    &id,
                    &self.agent,
                    &session,
                    &kind,
                    &payload,
                    &principal,
                    &sender,
                    &MAILBOX_CHANNEL,
                ],
            )
            .await
            .map_err(Error::query("post a request to the mailbox"))?;
        Ok(())
    }

    /// Claims up to `limit` pending requests for host `owner`: those of
    /// sessions it holds, and of sessions no live host holds. Oldest
    /// first (a session's requests apply in the order they were posted).
    pub async fn claim(&self, owner: &str, limit: i64) -> Result<Vec<Mail>> {
        let client = self.db.client().await?;
        let statement = client
            .prepare_cached(CLAIM_ANY)
            .await
            .map_err(Error::query("prepare a mailbox claim"))?;
        let rows = client
            .query(&statement, &[&self.agent, &owner, &limit])
            .await
            .map_err(Error::query("claim mailbox requests"))?;
        let mut claimed: Vec<(i64, Mail)> = rows.iter().map(mail_of).collect();
        claimed.sort_by_key(|(seq, _)| *seq);
        Ok(claimed.into_iter().map(|(_, m)| m).collect())
    }

    /// Claims request `id` for host `owner` if it is pending and no other
    /// live host holds its session.
    pub async fn claim_one(&self, id: &str, owner: &str) -> Result<Option<Mail>> {
        let client = self.db.client().await?;
        let row = client
            .query_opt(CLAIM_ONE, &[&id, &owner])
            .await
            .map_err(Error::query("claim a mailbox request"))?;
        Ok(row.as_ref().map(|r| mail_of(r).1))
    }

    /// Records the outcome (JSON) of request `id`, which `owner` claimed,
    /// and notifies its receiver.
    pub async fn finish(&self, id: &str, owner: &str, outcome: &str) -> Result<()> {
        let client = self.db.client().await?;
        client
            .query(
                "WITH done AS (
                     UPDATE agentkit_mailbox SET state = 'done', outcome = $3::text::jsonb, done_at = now()
                     WHERE id = $1 AND claimed_by = $2 AND state = 'claimed' RETURNING id)
                 SELECT pg_notify($4, 'done ' || id) FROM done",
                &[&id, &owner, &outcome, &MAILBOX_CHANNEL],
            )
            .await
            .map_err(Error::query("record a mailbox outcome"))?;
        self.db
            .announce_mail(MailSignal::Done { id: id.to_owned() });
        Ok(())
    }

    /// Puts request `id` back (its claimer found the session held by
    /// another host after all): the holder claims it.
    pub async fn unclaim(&self, id: &str, owner: &str) -> Result<()> {
        let client = self.db.client().await?;
        client
            .query(
                "WITH back AS (
                     UPDATE agentkit_mailbox SET state = 'pending', claimed_by = NULL, claimed_at = NULL
                     WHERE id = $1 AND claimed_by = $2 AND state = 'claimed'
                     RETURNING agent, session_id)
                 SELECT pg_notify($3, 'posted ' || agent || ' ' || session_id) FROM back",
                &[&id, &owner, &MAILBOX_CHANNEL],
            )
            .await
            .map_err(Error::query("put a mailbox request back"))?;
        Ok(())
    }

    /// Where request `id` is.
    pub async fn state(&self, id: &str) -> Result<MailState> {
        let client = self.db.client().await?;
        let row = client
            .query_opt(
                "SELECT state, claimed_by, outcome::text FROM agentkit_mailbox WHERE id = $1",
                &[&id],
            )
            .await
            .map_err(Error::query("read a mailbox request"))?;
        let Some(row) = row else {
            return Ok(MailState::Gone);
        };
        let state: String = row.get(0);
        Ok(match state.as_str() {
            "pending" => MailState::Pending,
            "claimed" => MailState::Claimed {
                by: row.get::<_, Option<String>>(1).unwrap_or_default(),
            },
            "done" => MailState::Done {
                outcome: row.get::<_, Option<String>>(2).unwrap_or_default(),
            },
            _ => MailState::Gone,
        })
    }

    /// Gives request `id` up if no host claimed it yet: true when it will
    /// never be applied.
    pub async fn abandon(&self, id: &str) -> Result<bool> {
        let client = self.db.client().await?;
        let n = client
            .execute(
                "UPDATE agentkit_mailbox SET state = 'abandoned', done_at = now()
                 WHERE id = $1 AND state = 'pending'",
                &[&id],
            )
            .await
            .map_err(Error::query("abandon a mailbox request"))?;
        Ok(n == 1)
    }

    /// Deletes request `id` (its receiver has answered).
    pub async fn forget(&self, id: &str) -> Result<()> {
        let client = self.db.client().await?;
        client
            .execute("DELETE FROM agentkit_mailbox WHERE id = $1", &[&id])
            .await
            .map_err(Error::query("delete a mailbox request"))?;
        Ok(())
    }

    /// Deletes this agent's settled requests older than `hours` (their
    /// receivers died before reading them).
    pub async fn purge(&self, hours: f64) -> Result<u64> {
        let client = self.db.client().await?;
        client
            .execute(
                "DELETE FROM agentkit_mailbox WHERE agent = $1 AND state IN ('done', 'abandoned')
                 AND done_at < now() - make_interval(secs => $2)",
                &[&self.agent, &(hours * 3600.0)],
            )
            .await
            .map_err(Error::query("purge the mailbox"))
    }
}
