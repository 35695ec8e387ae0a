//! The schema: embedded, versioned migrations, applied in order under an
//! advisory lock so that hosts starting together apply each one once.

use serde::Serialize;

use crate::database::Database;
use crate::error::{Error, Result};

/// One schema version.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    pub version: i32,
    pub name: &'static str,
    pub sql: &'static str,
}

/// Every schema version this binary knows, oldest first.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "sessions_and_events",
        sql: include_str!("../migrations/0001_sessions_and_events.sql"),
    },
    Migration {
        version: 2,
        name: "leases",
        sql: include_str!("../migrations/0002_leases.sql"),
    },
    Migration {
        version: 3,
        name: "schedule_ticks",
        sql: include_str!("../migrations/0003_schedule_ticks.sql"),
    },
    Migration {
        version: 4,
        name: "kv",
        sql: include_str!("../migrations/0004_kv.sql"),
    },
    Migration {
        version: 5,
        name: "reminders",
        sql: include_str!("../migrations/0005_reminders.sql"),
    },
    Migration {
        version: 6,
        name: "channels",
        sql: include_str!("../migrations/0006_deliveries.sql"),
    },
    Migration {
        version: 7,
        name: "usage_daily",
        sql: include_str!("../migrations/0007_usage_daily.sql"),
    },
    Migration {
        version: 8,
        name: "mailbox",
        sql: include_str!("../migrations/0008_mailbox.sql"),
    },
    Migration {
        version: 9,
        name: "reminder_handlers",
        sql: include_str!("../migrations/0009_reminder_handlers.sql"),
    },
    Migration {
        version: 10,
        name: "ab",
        sql: include_str!("../migrations/0010_ab.sql"),
    },
    Migration {
        version: 11,
        name: "eval_runs",
        sql: include_str!("../migrations/0011_eval_runs.sql"),
    },
    Migration {
        version: 12,
        name: "cost_daily",
        sql: include_str!("../migrations/0012_cost_daily.sql"),
    },
    Migration {
        version: 13,
        name: "session_updated_at",
        sql: include_str!("../migrations/0013_session_updated_at.sql"),
    },
    Migration {
        version: 14,
        name: "artifacts",
        sql: include_str!("../migrations/0014_artifacts.sql"),
    },
    Migration {
        version: 15,
        name: "memories",
        sql: include_str!("../migrations/0015_memories.sql"),
    },
    Migration {
        version: 16,
        name: "memory journal",
        sql: include_str!("../migrations/0016_memory_journal.sql"),
    },
    Migration {
        version: 17,
        name: "a2a push follows",
        sql: include_str!("../migrations/0017_a2a_push_follows.sql"),
    },
];

/// The advisory lock every migrating host takes (`agentkit` migrations).
const MIGRATION_LOCK: i64 = 0x6167_6b74_6d69_6772;

/// How long a host waits for another one's migration to finish.
const LOCK_WAIT: &str = "60s";

const BOOKKEEPING: &str = "CREATE TABLE IF NOT EXISTS agentkit_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)";

/// One version and whether (and when) it was applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MigrationStatus {
    pub version: i32,
    pub name: String,
    /// RFC 3339; `None` while pending.
    pub applied_at: Option<String>,
}

/// What `agentkit db status` reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SchemaStatus {
    /// `host:port/database`.
    pub database: String,
    /// The highest applied version (0: none).
    pub current: i32,
    /// The highest version this binary knows.
    pub latest: i32,
    /// Every known version, applied or pending.
    pub migrations: Vec<MigrationStatus>,
    /// Versions recorded in the database that this binary does not know
    /// (a newer agentkit migrated it).
    pub unknown: Vec<i32>,
}

impl SchemaStatus {
    /// Versions still to apply.
    pub fn pending(&self) -> usize {
        self.migrations
            .iter()
            .filter(|m| m.applied_at.is_none())
            .count()
    }
}

fn latest() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

impl Database {
    /// Applies every pending migration, each in its own transaction, under
    /// the migration advisory lock (a host that finds another migrating
    /// waits for it, then finds nothing left to do). Returns the versions
    /// this call applied. Refuses a database migrated by a newer binary.
    pub async fn migrate(&self) -> Result<Vec<i32>> {
        // A connection of its own: the session-level lock goes with it
        // whatever happens to this future.
        let mut client = self.dedicated().await?;
        client
            .batch_execute(&format!("SET lock_timeout = '{LOCK_WAIT}'"))
            .await
            .map_err(Error::query("set the lock timeout"))?;
        client
            .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(Error::query("take the migration lock"))?;
        client
            .batch_execute(BOOKKEEPING)
            .await
            .map_err(Error::query("create agentkit_migrations"))?;
        let applied: Vec<i32> = client
            .query(
                "SELECT version FROM agentkit_migrations ORDER BY version",
                &[],
            )
            .await
            .map_err(Error::query("read agentkit_migrations"))?
            .iter()
            .map(|row| row.get(0))
            .collect();
        if let Some(&found) = applied.last()
            && found > latest()
        {
            return Err(Error::SchemaTooNew {
                found,
                known: latest(),
            });
        }
        let mut done = Vec::new();
        for migration in MIGRATIONS {
            if applied.contains(&migration.version) {
                continue;
            }
            let tx = client
                .transaction()
                .await
                .map_err(Error::query("begin a migration"))?;
            tx.batch_execute(migration.sql)
                .await
                .map_err(Error::query("apply a migration"))?;
            tx.execute(
                "INSERT INTO agentkit_migrations (version, name) VALUES ($1, $2)",
                &[&migration.version, &migration.name],
            )
            .await
            .map_err(Error::query("record a migration"))?;
            tx.commit()
                .await
                .map_err(Error::query("commit a migration"))?;
            tracing::info!(version = migration.version, name = migration.name, database = %self.target(), "applied a schema migration");
            done.push(migration.version);
        }
        client
            .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(Error::query("release the migration lock"))?;
        Ok(done)
    }

    /// Which versions are applied, without changing anything.
    pub async fn status(&self) -> Result<SchemaStatus> {
        let client = self.client().await?;
        let exists: bool = client
            .query_one("SELECT to_regclass('agentkit_migrations') IS NOT NULL", &[])
            .await
            .map_err(Error::query("look for agentkit_migrations"))?
            .get(0);
        let mut recorded: Vec<(i32, String)> = Vec::new();
        if exists {
            for row in client
                .query(
                    "SELECT version, to_char(applied_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') FROM agentkit_migrations ORDER BY version",
                    &[],
                )
                .await
                .map_err(Error::query("read agentkit_migrations"))?
            {
                recorded.push((row.get(0), row.get(1)));
            }
        }
        let migrations = MIGRATIONS
            .iter()
            .map(|m| MigrationStatus {
                version: m.version,
                name: m.name.to_owned(),
                applied_at: recorded
                    .iter()
                    .find(|(v, _)| *v == m.version)
                    .map(|(_, at)| at.clone()),
            })
            .collect();
        Ok(SchemaStatus {
            database: self.target().to_owned(),
            current: recorded.last().map_or(0, |(v, _)| *v),
            latest: latest(),
            migrations,
            unknown: recorded
                .iter()
                .map(|(v, _)| *v)
                .filter(|v| MIGRATIONS.iter().all(|m| m.version != *v))
                .collect(),
        })
    }

    /// Fails unless every known migration is applied (for a host started
    /// with migrations off) and none is unknown.
    pub async fn check_schema(&self) -> Result<()> {
        let status = self.status().await?;
        if status.current > status.latest {
            return Err(Error::SchemaTooNew {
                found: status.current,
                known: status.latest,
            });
        }
        if status.pending() > 0 {
            return Err(Error::SchemaTooOld {
                found: status.current,
                known: status.latest,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_increase_from_one() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version, i as i32 + 1, "{}", m.name);
            assert!(!m.sql.trim().is_empty());
        }
    }
}
