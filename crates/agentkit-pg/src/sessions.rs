//! The session index in PostgreSQL (`agentkit_sessions`): who owns each
//! session, on which channel, its continuation key and its metadata, as
//! the SQLite index of one host keeps them.

use agentkit_store::SessionRow;

use crate::database::Database;
use crate::error::{Error, Result};

/// One agent's session index. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SessionIndex {
    db: Database,
    agent: String,
}

const UPSERT: &str = "INSERT INTO agentkit_sessions
        (agent, id, channel, continuation, principal_id, parked, meta, updated_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
    ON CONFLICT (agent, id) DO UPDATE SET channel = EXCLUDED.channel,
        continuation = EXCLUDED.continuation, principal_id = EXCLUDED.principal_id,
        parked = EXCLUDED.parked, meta = EXCLUDED.meta, updated_at = EXCLUDED.updated_at";

/// The parameters of `UPSERT`.
struct PutParams {
    agent: String,
    row: SessionRow,
}

impl crate::group::Params for PutParams {
    fn params(&self) -> Vec<&(dyn tokio_postgres::types::ToSql + Sync)> {
        let r = &self.row;
        vec![
            &self.agent,
            &r.id,
            &r.channel,
            &r.continuation,
            &r.principal_id,
            &r.parked,
            &r.meta,
            &r.updated_at,
        ]
    }
}

impl SessionIndex {
    pub fn new(db: Database, agent: &str) -> SessionIndex {
        SessionIndex {
            db,
            agent: agent.to_owned(),
        }
    }

    /// The database this index lives in.
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// Inserts or replaces `row`.
    pub async fn put(&self, row: &SessionRow) -> Result<()> {
        let params = PutParams {
            agent: self.agent.clone(),
            row: row.clone(),
        };
        let written = self
            .db
            .grouped(
                UPSERT,
                (self.agent.clone(), row.id.clone()),
                std::sync::Arc::new(params),
            )
            .await;
        match written {
            Ok(_) => Ok(()),
            Err(Error::Query { source: e, .. })
                if e.as_db_error().is_some_and(|d| {
                    *d.code() == tokio_postgres::error::SqlState::UNIQUE_VIOLATION
                        && d.constraint() == Some("agentkit_sessions_one_per_key")
                }) =>
            {
                Err(Error::KeyTaken {
                    channel: row.channel.clone(),
                })
            }
            Err(e) => Err(e),
        }
    }

    /// The metadata of session `id`.
    pub async fn get(&self, id: &str) -> Result<Option<String>> {
        let client = self.db.client().await?;
        let statement = client
            .prepare_cached("SELECT meta FROM agentkit_sessions WHERE agent = $1 AND id = $2")
            .await
            .map_err(Error::query("prepare a session read"))?;
        Ok(client
            .query_opt(&statement, &[&self.agent, &id])
            .await
            .map_err(Error::query("read a session"))?
            .map(|r| r.get(0)))
    }

    /// The session `(channel, key)` continues.
    pub async fn by_key(&self, channel: &str, key: &str) -> Result<Option<String>> {
        let client = self.db.client().await?;
        let statement = client
            .prepare_cached(
                "SELECT id FROM agentkit_sessions WHERE agent = $1 AND channel = $2 AND continuation = $3 LIMIT 1",
            )
            .await
            .map_err(Error::query("prepare a key lookup"))?;
        Ok(client
            .query_opt(&statement, &[&self.agent, &channel, &key])
            .await
            .map_err(Error::query("look up a continuation key"))?
            .map(|r| r.get(0)))
    }

    /// One page of the agent's sessions' metadata, newest (greatest id)
    /// first: the ids below `before`, of `principal` and `channel` when
    /// given, created at or after `since` and written at or after
    /// `updated_since` (RFC 3339 as stored), doing `activity`, at most
    /// `limit`. Keyset paging on the primary key (or the owner index);
    /// a running session is one a live host holds the lease of (the
    /// leases table, every host's) with no call parked for approval.
    pub async fn page(&self, q: &agentkit_store::PageQuery<'_>) -> Result<Vec<String>> {
        use agentkit_store::Activity;
        let mut sql = String::from("SELECT s.meta FROM agentkit_sessions s WHERE s.agent = $1");
        let mut args: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![&self.agent];
        for (clause, value) in [
            ("s.principal_id =", &q.principal),
            ("s.channel =", &q.channel),
            ("s.id <", &q.before),
            ("(s.meta::jsonb ->> 'createdAt') >=", &q.since),
            ("s.updated_at >=", &q.updated_since),
        ] {
            if let Some(v) = value {
                args.push(v);
                sql.push_str(&format!(" AND {clause} ${}", args.len()));
            }
        }
        match &q.tenant {
            Some(Some(tenant)) => {
                args.push(tenant);
                sql.push_str(&format!(
                    " AND (s.meta::jsonb -> 'owner' ->> 'tenant') = ${}",
                    args.len()
                ));
            }
            Some(None) => sql.push_str(" AND (s.meta::jsonb -> 'owner' ->> 'tenant') IS NULL"),
            None => {}
        }
        if let Some(activity) = q.activity {
            let running = "EXISTS (SELECT 1 FROM agentkit_leases l WHERE l.agent = s.agent \
                AND l.session_id = s.id AND l.held AND l.expires_at > now())";
            sql.push_str(&match activity {
                Activity::Running => format!(" AND NOT s.parked AND {running}"),
                Activity::WaitingApproval => " AND s.parked".to_owned(),
                Activity::Idle => format!(" AND NOT s.parked AND NOT {running}"),
            });
        }
        args.push(&q.limit);
        sql.push_str(&format!(" ORDER BY s.id DESC LIMIT ${}", args.len()));
        self.metas(&sql, &args).await
    }

    /// The ids of up to `limit` unparked sessions past what `[sessions]`
    /// keeps, least recently written first.
    pub async fn stale(&self, which: agentkit_store::Stale<'_>, limit: i64) -> Result<Vec<String>> {
        use agentkit_store::Stale;
        let client = self.db.client().await?;
        let rows = match which {
            Stale::UpdatedBefore(at) => {
                client
                    .query(
                        "SELECT id FROM agentkit_sessions WHERE agent = $1 AND updated_at < $2 \
                         AND NOT parked ORDER BY updated_at, id LIMIT $3",
                        &[&self.agent, &at, &limit],
                    )
                    .await
            }
            Stale::Beyond(keep) => {
                let keep = i64::try_from(keep).unwrap_or(i64::MAX);
                client
                    .query(
                        "SELECT id FROM (SELECT id, parked, updated_at FROM agentkit_sessions \
                         WHERE agent = $1 ORDER BY updated_at DESC, id DESC OFFSET $2) s \
                         WHERE NOT parked ORDER BY updated_at, id LIMIT $3",
                        &[&self.agent, &keep, &limit],
                    )
                    .await
            }
        }
        .map_err(Error::query("list sessions past their retention"))?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Deletes session `id`: its row, its log (events and length) and its
    /// lease, in one transaction. True when it had a row.
    pub async fn delete(&self, id: &str) -> Result<bool> {
        let mut client = self.db.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(Error::query("begin deleting a session"))?;
        for table in ["agentkit_events", "agentkit_logs", "agentkit_leases"] {
            tx.execute(
                &format!("DELETE FROM {table} WHERE agent = $1 AND session_id = $2"),
                &[&self.agent, &id],
            )
            .await
            .map_err(Error::query("delete a session's log"))?;
        }
        let rows = tx
            .execute(
                "DELETE FROM agentkit_sessions WHERE agent = $1 AND id = $2",
                &[&self.agent, &id],
            )
            .await
            .map_err(Error::query("delete a session"))?;
        tx.commit()
            .await
            .map_err(Error::query("commit deleting a session"))?;
        Ok(rows > 0)
    }

    /// How many sessions of the agent the database holds.
    pub async fn count(&self) -> Result<u64> {
        let client = self.db.client().await?;
        let n: i64 = client
            .query_one(
                "SELECT count(*) FROM agentkit_sessions WHERE agent = $1",
                &[&self.agent],
            )
            .await
            .map_err(Error::query("count sessions"))?
            .get(0);
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// The sessions that may have a call waiting for approval.
    pub async fn parked(&self) -> Result<Vec<String>> {
        self.metas(
            "SELECT meta FROM agentkit_sessions WHERE agent = $1 AND parked",
            &[&self.agent],
        )
        .await
    }

    async fn metas(
        &self,
        sql: &str,
        args: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<String>> {
        let client = self.db.client().await?;
        Ok(client
            .query(sql, args)
            .await
            .map_err(Error::query("list sessions"))?
            .iter()
            .map(|r| r.get(0))
            .collect())
    }
}
