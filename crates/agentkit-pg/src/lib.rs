//! The agentkit PostgreSQL backend: what several hosts behind one load
//! balancer share when they are started with `--database-url`.
//!
//! [`Database`] is a connection pool over one database URL. Its schema is
//! a list of embedded, versioned migrations ([`MIGRATIONS`]) applied at
//! start under a PostgreSQL advisory lock, so many hosts starting at once
//! apply each version once ([`Database::migrate`], [`Database::status`]:
//! `agentkit db migrate|status`).
//!
//! [`PgEventStore`] keeps every session's event log in one table: an
//! append takes the next index under the log's counter row in one
//! transaction, so indices are contiguous whichever host appends, and
//! `NOTIFY` wakes the followers of every host, which read what is new from
//! the table (the source of truth), so a follower sees each event exactly
//! once and in order. [`SessionIndex`] is the session index (metadata,
//! continuation keys) in PostgreSQL. [`Mailbox`] routes a request for a
//! session another host runs to that host, through a table and `NOTIFY`.
//!
//! This crate knows SQL and the wire types of `agentkit-protocol`; it
//! knows nothing of what a session means beyond its stored row.

/// The lease upsert (no `RETURNING`): a new lease, one let go, one
/// expired, or this host's own; nothing when another live host holds it.
/// `$1` agent, `$2` session, `$3` owner, `$4` seconds to hold it. Shared
/// by `lease.rs`'s `ACQUIRE` and `events.rs`'s `APPEND_TAKING`.
// Whether the holder `owner` of a lease row is gone: it is a host that
// holds a liveness lock while it lives (its name ends `:live`, see
// `lease.rs::Leases::open`), and no connection holds that lock any more.
// PostgreSQL frees the lock the moment the host's connection ends (a
// kill -9 included), so its leases are taken over without waiting for
// them to expire. `1634430070` is the lock namespace (`LIVE_NS`).
macro_rules! holder_gone {
    ($owner:literal) => {
        concat!(
            "(",
            $owner,
            " LIKE '%:live' AND NOT EXISTS (SELECT 1 FROM pg_locks k WHERE k.locktype = 'advisory' AND k.classid = 1634430070 AND k.objid = (hashtext(",
            $owner,
            ") & 2147483647)::oid AND k.objsubid = 2 AND k.granted))"
        )
    };
}

macro_rules! lease_upsert {
    () => {
        concat!(
            "INSERT INTO agentkit_leases (agent, session_id, owner, token, held, expires_at)
VALUES ($1, $2, $3, 1, TRUE, now() + make_interval(secs => $4))
ON CONFLICT (agent, session_id) DO UPDATE SET
    token = CASE WHEN agentkit_leases.owner = EXCLUDED.owner AND agentkit_leases.held
                 THEN agentkit_leases.token ELSE agentkit_leases.token + 1 END,
    owner = EXCLUDED.owner,
    held = TRUE,
    expires_at = EXCLUDED.expires_at
WHERE agentkit_leases.owner = EXCLUDED.owner
   OR NOT agentkit_leases.held
   OR agentkit_leases.expires_at < now()
   OR ",
            holder_gone!("agentkit_leases.owner")
        )
    };
}

mod ab;
mod artifacts;
mod backend;
mod database;
mod error;
mod eval_runs;
mod events;
mod group;
mod journal;
mod kv;
mod lease;
mod mailbox;
mod memories;
mod migrate;
mod push_follows;
mod reminders;
mod sessions;
mod ticks;
mod tls;

pub use ab::AbTable;
pub use agentkit_store::{
    AbTotals, AbTurn, KvRow, Mail, MailSignal, MailState, ReminderRecord, SessionRow,
};
pub use artifacts::ArtifactTable;
pub use backend::PgBackend;
pub use database::{Database, redacted};
pub use error::{Error, Result};
pub use eval_runs::{EvalRunRow, EvalRunTable};
pub use events::{PgEventStore, PgSubscription};
pub use journal::JournalTable;
pub use kv::KvTable;
pub use lease::{LEASE_TTL, Leases};
pub use mailbox::Mailbox;
pub use memories::MemoryTable;
pub use migrate::{MIGRATIONS, Migration, MigrationStatus, SchemaStatus};
pub use push_follows::{
    claim_push_follow, end_push_follow, orphaned_push_follows, pushed_through, renew_push_follows,
};
pub use reminders::ReminderTable;
pub use sessions::SessionIndex;
pub use ticks::{
    add_day_cost, add_day_usage, channel_state, claim_tick, day_cost, day_usage, first_delivery,
    set_channel_state,
};
