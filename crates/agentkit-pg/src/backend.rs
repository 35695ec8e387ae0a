//! PostgreSQL as the runtime's shared store: this crate's tables behind
//! the traits of `agentkit-store`, one [`PgBackend`] per process.

use std::sync::Arc;

use agentkit_events::NewEvent;
use agentkit_protocol::{Event, SessionId};
use agentkit_store::{
    AbFeedback, AbTotals, AbTurn, AgentStores, ArtifactQuery, ArtifactRow, KvRow, Mail, MailSignal,
    MailState, MemoryQuery, MemoryRow, PageQuery, ReminderRecord, SessionRow, SharedAb,
    SharedArtifacts, SharedBackend, SharedError, SharedFollow, SharedIndex, SharedKv, SharedLeases,
    SharedLog, SharedMailbox, SharedMemories, SharedReminders, SharedTicks, StoreFuture, Tagged,
};
use futures_util::FutureExt;
use tokio::sync::broadcast;

use crate::JournalTable;
use crate::error::Error;
use crate::{
    AbTable, ArtifactTable, Database, KvTable, Leases, Mailbox, MemoryTable, PgEventStore,
    PgSubscription, ReminderTable, SessionIndex,
};

impl From<Error> for SharedError {
    fn from(e: Error) -> SharedError {
        match e {
            Error::Busy { session, holder } => SharedError::Busy { session, holder },
            Error::Fenced { session, token } => SharedError::Fenced { session, token },
            Error::KeyTaken { channel } => SharedError::KeyTaken { channel },
            e @ (Error::Connect { .. } | Error::Timeout { .. }) => SharedError::Unavailable {
                message: e.to_string(),
            },
            e => SharedError::Failed {
                message: e.to_string(),
            },
        }
    }
}

/// A future of this crate's, as the seam's.
fn seam<'a, T: Send + 'a>(
    f: impl std::future::Future<Output = crate::Result<T>> + Send + 'a,
) -> StoreFuture<'a, T> {
    f.map(|r| r.map_err(SharedError::from)).boxed()
}

/// The database several hosts share, and this host's leases on it.
/// Cheap to clone.
#[derive(Debug, Clone)]
pub struct PgBackend {
    db: Database,
    leases: Leases,
}

impl PgBackend {
    /// Connects to `url` and applies pending migrations (under the
    /// migration lock: hosts starting together are safe).
    pub async fn open(url: &str) -> crate::Result<PgBackend> {
        let db = Database::connect(url).await?;
        db.migrate().await?;
        let leases = Leases::open(db.clone(), Leases::owner_name()).await;
        Ok(PgBackend { db, leases })
    }

    /// The pool (for the facade's own tables: deliveries, channel states,
    /// eval runs).
    pub fn database(&self) -> &Database {
        &self.db
    }
}

impl SharedBackend for PgBackend {
    fn owner(&self) -> &str {
        self.leases.owner()
    }

    fn agent(&self, slug: &str, tap_capacity: usize) -> AgentStores {
        let db = &self.db;
        AgentStores {
            agent: slug.to_owned(),
            log: Arc::new(PgEventStore::new(
                db.clone(),
                slug,
                self.leases.clone(),
                tap_capacity,
            )),
            index: Arc::new(SessionIndex::new(db.clone(), slug)),
            leases: Arc::new(AgentLeases {
                leases: self.leases.clone(),
                agent: slug.to_owned(),
            }),
            mailbox: Arc::new(Mailbox::new(db.clone(), slug)),
            reminders: Arc::new(ReminderTable::new(db.clone(), slug)),
            ticks: Arc::new(AgentTicks {
                db: db.clone(),
                agent: slug.to_owned(),
            }),
            ab: Arc::new(AbTable::new(db.clone(), slug)),
            kv: Arc::new(KvTable::new(db.clone(), slug)),
            artifacts: Arc::new(ArtifactTable::new(db.clone(), slug)),
            memories: Arc::new(MemoryTable::new(db.clone(), slug)),
            journal: Arc::new(JournalTable::new(db.clone(), slug)),
        }
    }
}

impl SharedLog for PgEventStore {
    fn append_batch<'a>(
        &'a self,
        session: &'a SessionId,
        events: Vec<NewEvent>,
    ) -> StoreFuture<'a, Vec<Event>> {
        seam(PgEventStore::append_batch(self, session, events))
    }

    fn fork<'a>(&'a self, from: &'a SessionId, at: u64, to: &'a SessionId) -> StoreFuture<'a, ()> {
        seam(PgEventStore::fork(self, from, at, to))
    }

    fn read<'a>(&'a self, session: &'a SessionId, start: u64) -> StoreFuture<'a, Vec<Event>> {
        seam(PgEventStore::read(self, session, start))
    }

    fn read_stored<'a>(
        &'a self,
        session: &'a SessionId,
        start: u64,
    ) -> StoreFuture<'a, Vec<Event>> {
        seam(PgEventStore::read_stored(self, session, start))
    }

    fn len<'a>(&'a self, session: &'a SessionId) -> StoreFuture<'a, u64> {
        seam(PgEventStore::len(self, session))
    }

    fn known_len(&self, session: &SessionId) -> Option<u64> {
        PgEventStore::known_len(self, session)
    }

    fn tap(&self) -> broadcast::Receiver<Arc<Event>> {
        PgEventStore::tap(self)
    }

    fn subscribe<'a>(
        &'a self,
        session: &'a SessionId,
        start: u64,
    ) -> StoreFuture<'a, Box<dyn SharedFollow>> {
        seam(async move {
            let follow = PgEventStore::subscribe(self, session, start).await?;
            Ok(Box::new(follow) as Box<dyn SharedFollow>)
        })
    }
}

impl SharedFollow for PgSubscription {
    fn next(&mut self) -> StoreFuture<'_, Event> {
        seam(PgSubscription::next(self))
    }

    fn next_index(&self) -> u64 {
        PgSubscription::next_index(self)
    }
}

impl SharedIndex for SessionIndex {
    fn delete<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        seam(SessionIndex::delete(self, id))
    }

    fn put_detached(&self, row: SessionRow) {
        let index = self.clone();
        tokio::spawn(async move {
            if let Err(e) = SessionIndex::put(&index, &row).await {
                tracing::warn!(error = %e, "cannot update the shared session index");
            }
        });
    }

    fn put<'a>(&'a self, row: &'a SessionRow) -> StoreFuture<'a, ()> {
        seam(SessionIndex::put(self, row))
    }

    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<String>> {
        seam(SessionIndex::get(self, id))
    }

    fn by_key<'a>(&'a self, channel: &'a str, key: &'a str) -> StoreFuture<'a, Option<String>> {
        seam(SessionIndex::by_key(self, channel, key))
    }

    fn page<'a>(&'a self, q: PageQuery<'a>) -> StoreFuture<'a, Vec<String>> {
        seam(async move { SessionIndex::page(self, &q).await })
    }

    fn count(&self) -> StoreFuture<'_, u64> {
        seam(SessionIndex::count(self))
    }

    fn parked(&self) -> StoreFuture<'_, Vec<String>> {
        seam(SessionIndex::parked(self))
    }

    fn stale<'a>(
        &'a self,
        which: agentkit_store::Stale<'a>,
        limit: i64,
    ) -> StoreFuture<'a, Vec<String>> {
        seam(SessionIndex::stale(self, which, limit))
    }
}

/// One agent's view of this host's leases.
#[derive(Debug)]
struct AgentLeases {
    leases: Leases,
    agent: String,
}

impl SharedLeases for AgentLeases {
    fn owner(&self) -> &str {
        self.leases.owner()
    }

    fn holds(&self, session: &str) -> bool {
        self.leases.holds(&self.agent, session)
    }

    fn hold<'a>(&'a self, session: &'a str) -> StoreFuture<'a, bool> {
        seam(async move {
            Ok(self
                .leases
                .hold_noting_takeover(&self.agent, session)
                .await?
                .1)
        })
    }

    fn acquire<'a>(&'a self, session: &'a str) -> StoreFuture<'a, ()> {
        seam(async move {
            self.leases.acquire(&self.agent, session).await?;
            Ok(())
        })
    }

    fn holder<'a>(&'a self, session: &'a str) -> StoreFuture<'a, Option<String>> {
        seam(self.leases.holder(&self.agent, session))
    }

    fn release<'a>(&'a self, session: &'a str) -> StoreFuture<'a, ()> {
        seam(self.leases.release(&self.agent, session))
    }

    fn orphaned(&self, limit: i64) -> StoreFuture<'_, Vec<String>> {
        seam(self.leases.orphaned(&self.agent, limit))
    }
}

impl SharedMailbox for Mailbox {
    fn signals(&self) -> broadcast::Receiver<MailSignal> {
        Mailbox::signals(self)
    }

    fn post<'a>(
        &'a self,
        id: &'a str,
        session: &'a str,
        kind: &'a str,
        payload: &'a str,
        principal: &'a str,
        sender: &'a str,
    ) -> StoreFuture<'a, ()> {
        seam(Mailbox::post(
            self, id, session, kind, payload, principal, sender,
        ))
    }

    fn claim<'a>(&'a self, owner: &'a str, limit: i64) -> StoreFuture<'a, Vec<Mail>> {
        seam(Mailbox::claim(self, owner, limit))
    }

    fn claim_one<'a>(&'a self, id: &'a str, owner: &'a str) -> StoreFuture<'a, Option<Mail>> {
        seam(Mailbox::claim_one(self, id, owner))
    }

    fn finish<'a>(&'a self, id: &'a str, owner: &'a str, outcome: &'a str) -> StoreFuture<'a, ()> {
        seam(Mailbox::finish(self, id, owner, outcome))
    }

    fn unclaim<'a>(&'a self, id: &'a str, owner: &'a str) -> StoreFuture<'a, ()> {
        seam(Mailbox::unclaim(self, id, owner))
    }

    fn state<'a>(&'a self, id: &'a str) -> StoreFuture<'a, MailState> {
        seam(Mailbox::state(self, id))
    }

    fn abandon<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        seam(Mailbox::abandon(self, id))
    }

    fn forget<'a>(&'a self, id: &'a str) -> StoreFuture<'a, ()> {
        seam(Mailbox::forget(self, id))
    }

    fn purge(&self, hours: f64) -> StoreFuture<'_, u64> {
        seam(Mailbox::purge(self, hours))
    }
}

impl SharedReminders for ReminderTable {
    fn insert<'a>(&'a self, rows: &'a [ReminderRecord]) -> StoreFuture<'a, ()> {
        seam(ReminderTable::insert(self, rows))
    }

    fn update<'a>(
        &'a self,
        row: &'a ReminderRecord,
        claimed_by: Option<&'a str>,
    ) -> StoreFuture<'a, bool> {
        seam(ReminderTable::update(self, row, claimed_by))
    }

    fn bind<'a>(&'a self, id: &'a str, session: &'a str) -> StoreFuture<'a, ()> {
        seam(ReminderTable::bind(self, id, session))
    }

    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<ReminderRecord>> {
        seam(ReminderTable::get(self, id))
    }

    fn list(&self, limit: i64) -> StoreFuture<'_, Vec<ReminderRecord>> {
        seam(ReminderTable::list(self, limit))
    }

    fn armed(&self) -> StoreFuture<'_, i64> {
        seam(ReminderTable::armed(self))
    }

    fn claim_due<'a>(
        &'a self,
        now_ms: i64,
        limit: i64,
        host: &'a str,
        claim_secs: f64,
    ) -> StoreFuture<'a, Vec<ReminderRecord>> {
        seam(ReminderTable::claim_due(
            self, now_ms, limit, host, claim_secs,
        ))
    }

    fn claim_one<'a>(
        &'a self,
        id: &'a str,
        host: &'a str,
        claim_secs: f64,
    ) -> StoreFuture<'a, Option<ReminderRecord>> {
        seam(ReminderTable::claim_one(self, id, host, claim_secs))
    }

    fn next_due(&self) -> StoreFuture<'_, Option<i64>> {
        seam(ReminderTable::next_due(self))
    }
}

/// One agent's once-only records and usage.
#[derive(Debug)]
struct AgentTicks {
    db: Database,
    agent: String,
}

impl SharedTicks for AgentTicks {
    fn claim_tick<'a>(
        &'a self,
        schedule: &'a str,
        tick_ms: i64,
        host: &'a str,
    ) -> StoreFuture<'a, bool> {
        seam(crate::claim_tick(
            &self.db,
            &self.agent,
            schedule,
            tick_ms,
            host,
        ))
    }

    fn day_usage<'a>(&'a self, day: &'a str) -> StoreFuture<'a, (i64, i64)> {
        seam(crate::day_usage(&self.db, &self.agent, day))
    }

    fn add_day_usage<'a>(&'a self, day: &'a str, input: i64, output: i64) -> StoreFuture<'a, ()> {
        seam(crate::add_day_usage(
            &self.db,
            &self.agent,
            day,
            input,
            output,
        ))
    }

    fn day_cost<'a>(&'a self, day: &'a str) -> StoreFuture<'a, i64> {
        seam(crate::day_cost(&self.db, &self.agent, day))
    }

    fn add_day_cost<'a>(&'a self, day: &'a str, nano_usd: i64) -> StoreFuture<'a, ()> {
        seam(crate::add_day_cost(&self.db, &self.agent, day, nano_usd))
    }
}

impl SharedAb for AbTable {
    fn record_assignments<'a>(
        &'a self,
        session: &'a str,
        principal: &'a str,
        purpose: Option<&'a str>,
        at_ms: i64,
        assignments: &'a [(String, Option<String>)],
    ) -> StoreFuture<'a, ()> {
        seam(AbTable::record_assignments(
            self,
            session,
            principal,
            purpose,
            at_ms,
            assignments,
        ))
    }

    fn record_turn<'a>(&'a self, turn: &'a AbTurn) -> StoreFuture<'a, ()> {
        seam(AbTable::record_turn(self, turn))
    }

    fn record_feedback<'a>(&'a self, f: AbFeedback<'a>) -> StoreFuture<'a, i64> {
        seam(AbTable::record_feedback(
            self,
            f.session,
            f.principal,
            f.purpose,
            f.assignments,
            f.score,
            f.label,
            f.note,
            f.at_ms,
        ))
    }

    fn not_enrolled<'a>(&'a self, experiment: &'a str) -> StoreFuture<'a, i64> {
        seam(AbTable::not_enrolled(self, experiment))
    }

    fn totals<'a>(&'a self, experiment: &'a str, variant: &'a str) -> StoreFuture<'a, AbTotals> {
        seam(AbTable::totals(self, experiment, variant))
    }

    fn latency_at<'a>(
        &'a self,
        experiment: &'a str,
        variant: &'a str,
        rank: i64,
    ) -> StoreFuture<'a, Option<i64>> {
        seam(AbTable::latency_at(self, experiment, variant, rank))
    }
}

impl SharedKv for KvTable {
    fn get<'a>(&'a self, key: &'a str, now: i64) -> StoreFuture<'a, Option<KvRow>> {
        seam(KvTable::get(self, key, now))
    }

    fn set<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
        expires_at: Option<i64>,
        now: i64,
    ) -> StoreFuture<'a, ()> {
        seam(KvTable::set(self, key, value, expires_at, now))
    }

    fn delete<'a>(&'a self, key: &'a str, now: i64) -> StoreFuture<'a, bool> {
        seam(KvTable::delete(self, key, now))
    }

    fn list<'a>(
        &'a self,
        prefix: &'a str,
        after: &'a str,
        limit: i64,
        now: i64,
    ) -> StoreFuture<'a, Vec<KvRow>> {
        seam(KvTable::list(self, prefix, after, limit, now))
    }
}

impl SharedArtifacts for ArtifactTable {
    fn tag<'a>(&'a self, row: &'a ArtifactRow, max: Option<i64>) -> StoreFuture<'a, Tagged> {
        seam(ArtifactTable::tag(self, row, max))
    }

    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<ArtifactRow>> {
        seam(ArtifactTable::get(self, id))
    }

    fn page<'a>(&'a self, query: ArtifactQuery<'a>) -> StoreFuture<'a, Vec<ArtifactRow>> {
        seam(ArtifactTable::page(self, query))
    }

    fn delete_session<'a>(&'a self, session: &'a str) -> StoreFuture<'a, u64> {
        seam(ArtifactTable::delete_session(self, session))
    }
}

impl SharedMemories for MemoryTable {
    fn insert<'a>(&'a self, row: &'a MemoryRow) -> StoreFuture<'a, ()> {
        seam(MemoryTable::insert(self, row))
    }

    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<MemoryRow>> {
        seam(MemoryTable::get(self, id))
    }

    fn edit<'a>(
        &'a self,
        id: &'a str,
        text: &'a str,
        updated_at_ms: i64,
    ) -> StoreFuture<'a, Option<MemoryRow>> {
        seam(MemoryTable::edit(self, id, text, updated_at_ms))
    }

    fn delete<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        seam(MemoryTable::delete(self, id))
    }

    fn page<'a>(&'a self, query: MemoryQuery<'a>) -> StoreFuture<'a, Vec<MemoryRow>> {
        seam(MemoryTable::page(self, query))
    }
}

impl agentkit_store::SharedJournal for JournalTable {
    fn append<'a>(&'a self, lines: Vec<String>, keep_bytes: Option<u64>) -> StoreFuture<'a, ()> {
        seam(JournalTable::append(self, lines, keep_bytes))
    }

    fn recent<'a>(&'a self, max_bytes: u64) -> StoreFuture<'a, Vec<String>> {
        seam(JournalTable::recent(self, max_bytes))
    }
}
