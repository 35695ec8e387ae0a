//! One writer per session: a lease row per session (owner, fencing
//! token, expiry renewed by this host's heartbeat). Every append checks
//! the token (`events.rs`), so a host that lost a lease never appends
//! again; a lease still held past its expiry is a dead host's, and
//! another host takes it over.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

use crate::database::Database;
use crate::error::{Error, Result};

/// How long a lease lasts without a renewal.
pub const LEASE_TTL: Duration = Duration::from_millis(2500);
/// How often this host renews every lease it holds.
const HEARTBEAT: Duration = Duration::from_millis(500);
/// The advisory-lock namespace of the hosts' liveness locks (the literal
/// in `holder_gone!`).
const LIVE_NS: i32 = 1_634_430_070;
/// How often the liveness connection is checked (and reopened).
const LIVE_CHECK: Duration = Duration::from_secs(1);

// `prev` is the row before this statement: a lease still marked held by
// another owner that this statement takes was expired (the WHERE allows
// nothing else), so its holder died. A snapshot a concurrent statement
// made stale can only claim a takeover that was not one (an extra check
// by the caller), never hide one.
const ACQUIRE: &str = concat!(
    "
WITH prev AS (
    SELECT held AND owner <> $3 AS dead_holder FROM agentkit_leases
    WHERE agent = $1 AND session_id = $2
)
",
    lease_upsert!(),
    "
RETURNING token, coalesce((SELECT dead_holder FROM prev), FALSE)"
);

// Locks the rows in (agent, session) order, as a group commit of appends
// (`events.rs`) does: the two never wait on each other in a cycle.
const RENEW: &str = "WITH mine AS (
    SELECT agent, session_id FROM agentkit_leases WHERE owner = $1 AND held
    ORDER BY agent, session_id FOR UPDATE
)
UPDATE agentkit_leases l SET expires_at = now() + make_interval(secs => $2)
    FROM mine WHERE l.agent = mine.agent AND l.session_id = mine.session_id
    RETURNING l.agent, l.session_id, l.token";

const RELEASE: &str = "UPDATE agentkit_leases SET held = FALSE, expires_at = now()
    WHERE agent = $1 AND session_id = $2 AND owner = $3 AND token = $4";

/// The parameters of `RELEASE`.
struct ReleaseParams {
    agent: String,
    session: String,
    owner: String,
    token: i64,
}

impl crate::group::Params for ReleaseParams {
    fn params(&self) -> Vec<&(dyn tokio_postgres::types::ToSql + Sync)> {
        vec![&self.agent, &self.session, &self.owner, &self.token]
    }
}

type Key = (String, String);

/// A lease this host holds.
#[derive(Debug, Clone, Copy)]
struct Held {
    token: i64,
    taken: Instant,
    /// The log's length after the last append under this token, if one
    /// returned: while the token is the same, no other host appended.
    len: Option<u64>,
}

/// The leases one host holds. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Leases {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    db: Database,
    owner: String,
    /// `(agent, session)` → fencing token, when it was taken, and the
    /// log's length after this host's last append under that token.
    held: Mutex<HashMap<Key, Held>>,
    heartbeat: OnceLock<tokio::task::JoinHandle<()>>,
    /// Holds the liveness lock's connection (see [`Leases::open`]).
    liveness: OnceLock<tokio::task::JoinHandle<()>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        for task in [self.heartbeat.get(), self.liveness.get()]
            .into_iter()
            .flatten()
        {
            task.abort();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Leases {
    /// The leases of this host, named `owner` in the table (unique per
    /// process: `host:pid:random`). Renewed by a heartbeat task while
    /// this value lives.
    pub fn new(db: Database, owner: String) -> Leases {
        let leases = Leases {
            inner: Arc::new(Inner {
                db,
                owner,
                held: Mutex::new(HashMap::new()),
                heartbeat: OnceLock::new(),
                liveness: OnceLock::new(),
            }),
        };
        let weak = Arc::downgrade(&leases.inner);
        leases
            .inner
            .heartbeat
            .get_or_init(|| tokio::spawn(heartbeat(weak)));
        leases
    }

    /// The leases of this host, named `<name>:live` and holding a
    /// liveness lock while it lives: an advisory lock on a connection of
    /// its own, which PostgreSQL frees the moment that connection ends.
    /// Other hosts take the leases of a host whose lock is free over at
    /// once (a kill -9 takes the time of their next sweep), instead of
    /// waiting for the leases to expire. The lock is taken before any
    /// lease, and retaken if its connection drops (meanwhile this host's
    /// sessions may be taken over: fencing keeps that safe). When the
    /// lock cannot be taken (its key is another live host's, or the
    /// connection fails) the host is named `name` and its leases only
    /// expire.
    pub async fn open(db: Database, name: String) -> Leases {
        let live = format!("{name}:live");
        match hold_liveness(&db, &live).await {
            Ok(Some(client)) => {
                let leases = Leases::new(db, live);
                let weak = Arc::downgrade(&leases.inner);
                leases
                    .inner
                    .liveness
                    .get_or_init(|| tokio::spawn(keep_alive(weak, client)));
                leases
            }
            Ok(None) => {
                tracing::warn!(host = %name, "the liveness lock of this host's name is held by another: its leases only expire");
                Leases::new(db, name)
            }
            Err(e) => {
                tracing::warn!(host = %name, error = %e, "cannot take a liveness lock: this host's leases only expire");
                Leases::new(db, name)
            }
        }
    }

    /// A name unique to this process, for [`Leases::new`].
    pub fn owner_name() -> String {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_else(|_| "host".to_owned());
        let tag = uuid::Uuid::new_v4().simple().to_string();
        format!("{host}:{}:{}", std::process::id(), &tag[..8])
    }

    /// This host's name in the lease table.
    pub fn owner(&self) -> &str {
        &self.inner.owner
    }

    /// The token of the lease this host holds on `session`, taking the
    /// lease if it holds none. [`Error::Busy`] when another host holds it
    /// and its lease has not expired.
    pub async fn hold(&self, agent: &str, session: &str) -> Result<i64> {
        Ok(self.hold_noting_takeover(agent, session).await?.0)
    }

    /// [`hold`](Self::hold), saying whether the lease was just taken from
    /// a host that died holding it (its expired lease was still marked
    /// held): the session's log may end mid-turn.
    pub async fn hold_noting_takeover(&self, agent: &str, session: &str) -> Result<(i64, bool)> {
        let key = (agent.to_owned(), session.to_owned());
        if let Some(held) = lock(&self.inner.held).get(&key) {
            return Ok((held.token, false));
        }
        self.take(agent, session).await
    }

    /// Takes the lease of `session`: a new one, one that was let go, one
    /// that expired (its holder died), or this host's own.
    pub async fn acquire(&self, agent: &str, session: &str) -> Result<i64> {
        Ok(self.take(agent, session).await?.0)
    }

    /// [`acquire`](Self::acquire), with whether a dead holder's lease was
    /// taken.
    async fn take(&self, agent: &str, session: &str) -> Result<(i64, bool)> {
        let client = self.inner.db.client().await?;
        let statement = client
            .prepare_cached(ACQUIRE)
            .await
            .map_err(Error::query("prepare a lease"))?;
        let row = client
            .query_opt(
                &statement,
                &[
                    &agent,
                    &session,
                    &self.inner.owner,
                    &LEASE_TTL.as_secs_f64(),
                ],
            )
            .await
            .map_err(Error::query("take a lease"))?;
        let Some(row) = row else {
            let holder = client
                .query_opt(
                    "SELECT owner FROM agentkit_leases WHERE agent = $1 AND session_id = $2",
                    &[&agent, &session],
                )
                .await
                .map_err(Error::query("read a lease"))?
                .map(|r| r.get::<_, String>(0))
                .unwrap_or_default();
            return Err(Error::Busy {
                session: session.to_owned(),
                holder,
            });
        };
        let token: i64 = row.get(0);
        let took_over: bool = row.get(1);
        self.took(agent, session, token);
        Ok((token, took_over))
    }

    /// Records a lease this host just took (by itself, or with an append).
    pub(crate) fn took(&self, agent: &str, session: &str, token: i64) {
        lock(&self.inner.held).insert(
            (agent.to_owned(), session.to_owned()),
            Held {
                token,
                taken: Instant::now(),
                len: None,
            },
        );
    }

    /// The token of the lease this host believes it holds on `session`.
    pub(crate) fn token(&self, agent: &str, session: &str) -> Option<i64> {
        lock(&self.inner.held)
            .get(&(agent.to_owned(), session.to_owned()))
            .map(|h| h.token)
    }

    /// Notes the log's length after an append under `token`.
    pub(crate) fn note_len(&self, agent: &str, session: &str, token: i64, len: u64) {
        let mut held = lock(&self.inner.held);
        if let Some(h) = held.get_mut(&(agent.to_owned(), session.to_owned()))
            && h.token == token
        {
            h.len = Some(h.len.map_or(len, |l| l.max(len)));
        }
    }

    /// The length of `session`'s log as this host's own appends left it,
    /// while it holds the lease they were made under (so no other host
    /// appended since): reading the log for what is new can be skipped.
    /// `None` when this host holds no lease or has not appended under it.
    /// A lease lost without this host noticing yet may make this stale;
    /// its next append is refused then (fencing), so nothing is written
    /// from the stale view.
    pub fn known_len(&self, agent: &str, session: &str) -> Option<u64> {
        lock(&self.inner.held)
            .get(&(agent.to_owned(), session.to_owned()))
            .and_then(|h| h.len)
    }

    /// The other live host holding `session`'s lease, if one does.
    pub async fn holder(&self, agent: &str, session: &str) -> Result<Option<String>> {
        let client = self.inner.db.client().await?;
        let row = client
            .query_opt(
                concat!(
                    "SELECT owner FROM agentkit_leases
                 WHERE agent = $1 AND session_id = $2 AND held AND expires_at > now() AND owner <> $3
                   AND NOT ",
                    holder_gone!("owner")
                ),
                &[&agent, &session, &self.inner.owner],
            )
            .await
            .map_err(Error::query("read a lease"))?;
        Ok(row.map(|r| r.get(0)))
    }

    /// Whether this host believes it holds `session`'s lease.
    pub fn holds(&self, agent: &str, session: &str) -> bool {
        lock(&self.inner.held).contains_key(&(agent.to_owned(), session.to_owned()))
    }

    /// Forgets a lease an append found taken over.
    pub(crate) fn lost(&self, agent: &str, session: &str, token: i64) {
        let key = (agent.to_owned(), session.to_owned());
        let mut held = lock(&self.inner.held);
        if held.get(&key).is_some_and(|h| h.token == token) {
            held.remove(&key);
            tracing::warn!(session, token, "lost a session's lease to another host");
        }
    }

    /// Lets `session` go (it settled): any host may take it now, with
    /// nothing to recover.
    pub async fn release(&self, agent: &str, session: &str) -> Result<()> {
        let token = lock(&self.inner.held).remove(&(agent.to_owned(), session.to_owned()));
        let Some(Held { token, .. }) = token else {
            return Ok(());
        };
        let params = ReleaseParams {
            agent: agent.to_owned(),
            session: session.to_owned(),
            owner: self.inner.owner.clone(),
            token,
        };
        self.inner
            .db
            .grouped(
                RELEASE,
                (agent.to_owned(), session.to_owned()),
                Arc::new(params),
            )
            .await?;
        Ok(())
    }

    /// Sessions of `agent` whose holder died: held, and not renewed in
    /// time, or held by a host whose liveness lock is free (its
    /// connection ended: see [`Leases::open`]). Another host takes them over ([`acquire`](Self::acquire)).
    pub async fn orphaned(&self, agent: &str, limit: i64) -> Result<Vec<String>> {
        let client = self.inner.db.client().await?;
        let rows = client
            .query(
                concat!(
                    "SELECT session_id FROM agentkit_leases
                 WHERE agent = $1 AND held AND owner <> $2
                   AND (expires_at < now() OR ",
                    holder_gone!("owner"),
                    ")
                 ORDER BY expires_at LIMIT $3"
                ),
                &[&agent, &self.inner.owner, &limit],
            )
            .await
            .map_err(Error::query("find orphaned leases"))?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Renews every lease this host holds, and forgets those another host
    /// took over meanwhile.
    pub async fn renew(&self) -> Result<usize> {
        let started = Instant::now();
        let client = self.inner.db.client().await?;
        let statement = client
            .prepare_cached(RENEW)
            .await
            .map_err(Error::query("prepare a renewal"))?;
        let rows = client
            .query(&statement, &[&self.inner.owner, &LEASE_TTL.as_secs_f64()])
            .await
            .map_err(Error::query("renew leases"))?;
        let renewed: HashMap<Key, i64> = rows
            .iter()
            .map(|r| ((r.get(0), r.get(1)), r.get(2)))
            .collect();
        let mut held = lock(&self.inner.held);
        // A lease taken while the renewal ran is not in its answer.
        held.retain(|key, h| h.taken >= started || renewed.get(key) == Some(&h.token));
        Ok(held.len())
    }
}

async fn heartbeat(leases: Weak<Inner>) {
    let mut tick = tokio::time::interval(HEARTBEAT);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(inner) = leases.upgrade() else {
            return;
        };
        let leases = Leases { inner };
        if let Err(e) = leases.renew().await {
            tracing::warn!(error = %e, "cannot renew session leases");
        }
    }
}

/// Takes the liveness lock of `owner` on a connection of its own: the
/// connection, or `None` when another connection holds that lock.
async fn hold_liveness(db: &Database, owner: &str) -> Result<Option<tokio_postgres::Client>> {
    let client = db.dedicated().await?;
    let locked: bool = client
        .query_one(
            "SELECT pg_try_advisory_lock($1, hashtext($2) & 2147483647)",
            &[&LIVE_NS, &owner],
        )
        .await
        .map_err(Error::query("take a liveness lock"))?
        .get(0);
    Ok(locked.then_some(client))
}

/// Keeps the liveness lock's connection open while the leases live,
/// reopening it (and retaking the lock) when it ends.
async fn keep_alive(leases: Weak<Inner>, mut client: tokio_postgres::Client) {
    loop {
        tokio::time::sleep(LIVE_CHECK).await;
        let Some(inner) = leases.upgrade() else {
            return;
        };
        if !client.is_closed() {
            continue;
        }
        tracing::warn!("the liveness connection to PostgreSQL ended; reconnecting");
        match hold_liveness(&inner.db, &inner.owner).await {
            Ok(Some(again)) => client = again,
            Ok(None) => {
                tracing::warn!("the liveness lock is held by another connection; retrying");
            }
            Err(e) => tracing::warn!(error = %e, "cannot retake the liveness lock"),
        }
    }
}
