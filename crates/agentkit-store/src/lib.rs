//! The storage seam of the session runtime: what it needs from a store
//! that several hosts share, as traits over plain rows.
//!
//! The runtime keeps one agent's sessions on this host's files by
//! default (`agentkit-events` and its own SQLite index). When hosts share
//! a store (`--database-url`), it reaches that store only through the
//! traits here, bundled per agent in [`AgentStores`] by a
//! [`SharedBackend`]: the event logs ([`SharedLog`]), the session index
//! ([`SharedIndex`]), one writer per session ([`SharedLeases`]), requests
//! routed to the host holding a session ([`SharedMailbox`]), reminders
//! ([`SharedReminders`]), once-only records and the day's usage
//! ([`SharedTicks`]), A/B rows ([`SharedAb`]), the host bridge's kv
//! ([`SharedKv`]), the agent's artifacts ([`SharedArtifacts`]) and its
//! governed memories ([`SharedMemories`]).
//!
//! Two backends implement them: PostgreSQL (`agentkit-pg`, wired by the
//! facade) and [`memory::MemoryBackend`], which keeps everything in this
//! process: the runtime's own tests run several runtimes ("hosts") over
//! one of it. Rows are plain data (JSON as text where the runtime owns
//! the shape): a backend never needs the runtime's types.

use std::fmt::Debug;
use std::sync::Arc;

use agentkit_events::NewEvent;
use agentkit_protocol::{Event, SessionId};
use futures_util::future::BoxFuture;
use tokio::sync::broadcast;

pub mod memory;

/// What a shared store answers when it cannot do what was asked.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SharedError {
    /// An append was refused: this host does not hold the session's lease
    /// (another one took it over), so it must not write.
    #[error(
        "session `{session}`: this host lost its lease (fencing token {token}); it no longer writes"
    )]
    Fenced { session: String, token: i64 },
    /// Another live host holds the session's lease (a turn runs there).
    #[error("session `{session}` is held by another host ({holder}); retry shortly")]
    Busy { session: String, holder: String },
    /// Another host made the session of this channel key first.
    #[error("channel `{channel}`: another host started the session of this key first")]
    KeyTaken { channel: String },
    /// The store cannot be reached now (no connection, a timeout): worth
    /// a retry, answered `503`.
    #[error("{message}")]
    Unavailable { message: String },
    /// Anything else (a failed statement, a corrupt row), answered `500`.
    #[error("{message}")]
    Failed { message: String },
}

/// The results of a shared store.
pub type Result<T, E = SharedError> = std::result::Result<T, E>;

/// A shared store's answer, later.
pub type StoreFuture<'a, T> = BoxFuture<'a, Result<T>>;

/// Several hosts' store: gives each agent its share. Cheap to clone
/// behind an `Arc`; one per process.
pub trait SharedBackend: Send + Sync + Debug {
    /// This host's name among the others (the owner of its leases and
    /// claims): unique per process.
    fn owner(&self) -> &str;
    /// The stores of agent `slug` (its name in the shared tables, the same
    /// on every host). `tap_capacity` bounds the live tap of its log.
    fn agent(&self, slug: &str, tap_capacity: usize) -> AgentStores;
}

/// One agent's share of a [`SharedBackend`].
#[derive(Debug, Clone)]
pub struct AgentStores {
    /// The agent's name in the shared tables.
    pub agent: String,
    pub log: Arc<dyn SharedLog>,
    pub index: Arc<dyn SharedIndex>,
    pub leases: Arc<dyn SharedLeases>,
    pub mailbox: Arc<dyn SharedMailbox>,
    pub reminders: Arc<dyn SharedReminders>,
    pub ticks: Arc<dyn SharedTicks>,
    pub ab: Arc<dyn SharedAb>,
    pub kv: Arc<dyn SharedKv>,
    pub artifacts: Arc<dyn SharedArtifacts>,
    pub memories: Arc<dyn SharedMemories>,
    pub journal: Arc<dyn SharedJournal>,
}

/// The agent's journal (`[memory] journal = true`) as its hosts share
/// it: lines in the order appended, the oldest let go past a budget.
pub trait SharedJournal: Send + Sync + Debug {
    /// Appends `lines` in order; with `keep_bytes`, then lets go of the
    /// oldest lines past that many bytes in all (each line counted with
    /// its newline; the newest is always kept).
    fn append<'a>(&'a self, lines: Vec<String>, keep_bytes: Option<u64>) -> StoreFuture<'a, ()>;
    /// The newest lines, oldest first, whose bytes (each with its
    /// newline) add up to at most `max_bytes`; the newest one always.
    fn recent<'a>(&'a self, max_bytes: u64) -> StoreFuture<'a, Vec<String>>;
}

/// The newest of `lines` (oldest first) that fit in `max_bytes`, each
/// counted with its newline; the newest one always: how every store
/// answers [`SharedJournal::recent`] and trims to `keep_bytes`.
pub fn newest_within(lines: &[String], max_bytes: u64) -> usize {
    let mut total = 0u64;
    let mut kept = 0;
    for line in lines.iter().rev() {
        total += line.len() as u64 + 1;
        if kept > 0 && total > max_bytes {
            break;
        }
        kept += 1;
    }
    kept
}

/// The agent's session logs: contiguous indices per session, appended
/// only by the host holding the session's lease (fenced).
pub trait SharedLog: Send + Sync + Debug {
    /// Appends `events` with contiguous indices. A host holding no lease
    /// on the session takes it with the append ([`SharedError::Busy`]
    /// while another live host holds it); a host whose lease was taken
    /// over is refused ([`SharedError::Fenced`]).
    fn append_batch<'a>(
        &'a self,
        session: &'a SessionId,
        events: Vec<NewEvent>,
    ) -> StoreFuture<'a, Vec<Event>>;
    /// Starts the new session `to`'s log with `from`'s events `0..at`
    /// (`at` at most `from`'s length), as stored, inside the store: no
    /// event passes through the host, none is published, and no lease
    /// is taken (nobody else knows `to` yet; its next append takes it).
    fn fork<'a>(&'a self, from: &'a SessionId, at: u64, to: &'a SessionId) -> StoreFuture<'a, ()>;
    /// Every event from `start`, in the wire shape.
    fn read<'a>(&'a self, session: &'a SessionId, start: u64) -> StoreFuture<'a, Vec<Event>>;
    /// Every event from `start`, as stored (a backend may leave out what
    /// folding does not need: the cumulative text of deltas).
    fn read_stored<'a>(&'a self, session: &'a SessionId, start: u64)
    -> StoreFuture<'a, Vec<Event>>;
    /// How many events the session holds.
    fn len<'a>(&'a self, session: &'a SessionId) -> StoreFuture<'a, u64>;
    /// The log's length when this host knows it without reading (its own
    /// appends under a lease it still holds).
    fn known_len(&self, session: &SessionId) -> Option<u64>;
    /// Every event this host appends, live.
    fn tap(&self) -> broadcast::Receiver<Arc<Event>>;
    /// Follows `session` from `start`: replay, then live events, each
    /// once, whoever appends them.
    fn subscribe<'a>(
        &'a self,
        session: &'a SessionId,
        start: u64,
    ) -> StoreFuture<'a, Box<dyn SharedFollow>>;
}

/// Following one session's log.
pub trait SharedFollow: Send + Debug {
    /// The next event, each exactly once, in index order. Cancel-safe.
    fn next(&mut self) -> StoreFuture<'_, Event>;
    /// The index of the event [`next`](Self::next) yields.
    fn next_index(&self) -> u64;
}

/// One session's row in the index. `meta` is the runtime's JSON
/// metadata, stored as it gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRow {
    pub id: String,
    pub channel: String,
    pub continuation: String,
    pub principal_id: String,
    pub parked: bool,
    pub meta: String,
    /// The session's last activity (RFC 3339, UTC, milliseconds): when
    /// this row was last written.
    pub updated_at: String,
}

/// What a listed session is doing, as the index answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// A live host holds the session's lease (a turn runs, or is about
    /// to) and no tool call waits for approval.
    Running,
    /// A tool call waits for a human's decision (the parked flag), while
    /// its turn waits live or after it ended.
    WaitingApproval,
    /// Neither.
    Idle,
}

/// Which rows a page of the index holds: newest first (by id, which
/// sorts by creation time), before the `before` id.
#[derive(Debug, Clone, Copy, Default)]
pub struct PageQuery<'a> {
    pub principal: Option<&'a str>,
    /// Only the sessions of this tenant (the `tenant` of the metadata's
    /// owner): `Some(None)` the tenant-less ones, `None` every tenant.
    pub tenant: Option<Option<&'a str>>,
    pub channel: Option<&'a str>,
    pub before: Option<&'a str>,
    /// Only sessions created at or after this RFC 3339 time.
    pub since: Option<&'a str>,
    /// Only sessions whose row was written at or after this RFC 3339 time
    /// (UTC, milliseconds, as [`SessionRow::updated_at`]).
    pub updated_since: Option<&'a str>,
    /// Only sessions doing this. The index of one host has no leases: it
    /// answers [`Activity::Running`] with an error, and the others from
    /// the parked flag alone (its runtime knows which turns run).
    pub activity: Option<Activity>,
    pub limit: i64,
}

/// Which sessions are past what `[sessions]` keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stale<'a> {
    /// Whose row was last written before this RFC 3339 time (UTC,
    /// milliseconds, as [`SessionRow::updated_at`]).
    UpdatedBefore(&'a str),
    /// Beyond the newest this many, by last write.
    Beyond(u64),
}

/// The agent's session index.
pub trait SharedIndex: Send + Sync + Debug {
    /// Inserts or replaces a row ([`SharedError::KeyTaken`] when another
    /// session already has its channel key).
    fn put<'a>(&'a self, row: &'a SessionRow) -> StoreFuture<'a, ()>;
    /// [`put`](Self::put) without waiting (bookkeeping such as the parked
    /// flag): a failure is logged. The rows of one session are written in
    /// call order where the backend can keep it (the local index: one
    /// writer queue).
    fn put_detached(&self, row: SessionRow);
    /// [`put_detached`](Self::put_detached) of a row whose keys (channel,
    /// continuation, owner, parked flag) have not changed since its last
    /// put: only its metadata and last activity are new (the end of a
    /// turn). A backend may write less for it.
    fn put_activity(&self, row: SessionRow) {
        self.put_detached(row);
    }
    /// A session's metadata.
    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<String>>;
    /// The id of the session a channel key continues.
    fn by_key<'a>(&'a self, channel: &'a str, key: &'a str) -> StoreFuture<'a, Option<String>>;
    /// A page of metadata, newest first.
    fn page<'a>(&'a self, query: PageQuery<'a>) -> StoreFuture<'a, Vec<String>>;
    /// How many sessions there are.
    fn count(&self) -> StoreFuture<'_, u64>;
    /// The metadata of every parked session.
    fn parked(&self) -> StoreFuture<'_, Vec<String>>;
    /// The ids of up to `limit` sessions `which` names, least recently
    /// written first. Parked sessions (a call waits for a decision) are
    /// never among them; whether one runs a turn is the caller's to check.
    fn stale<'a>(&'a self, which: Stale<'a>, limit: i64) -> StoreFuture<'a, Vec<String>>;
    /// Deletes session `id` from the store, in one transaction: its row,
    /// its log and its lease. True when it had a row. A host's own index
    /// (whose logs are files the runtime deletes) need not implement it.
    fn delete<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(std::future::ready(Err(SharedError::Failed {
            message: format!("this session index cannot delete session `{id}`"),
        })))
    }
}

/// One writer per session: the host holding a session's lease is the
/// only one appending to it. Leases are taken by the first append (or
/// [`hold`](Self::hold)), renewed by the backend while this host lives,
/// let go when the session settles, and taken over once expired.
pub trait SharedLeases: Send + Sync + Debug {
    /// This host's name (the owner of its leases).
    fn owner(&self) -> &str;
    /// Whether this host believes it holds `session`'s lease.
    fn holds(&self, session: &str) -> bool;
    /// Holds `session`'s lease, taking it if this host holds none: true
    /// when it was just taken from a host that died holding it (the log
    /// may end mid-turn). [`SharedError::Busy`] while another live host
    /// holds it.
    fn hold<'a>(&'a self, session: &'a str) -> StoreFuture<'a, bool>;
    /// Takes `session`'s lease afresh (a takeover): a new one, one let go,
    /// one expired, or this host's own.
    fn acquire<'a>(&'a self, session: &'a str) -> StoreFuture<'a, ()>;
    /// The other live host holding `session`'s lease, if one does.
    fn holder<'a>(&'a self, session: &'a str) -> StoreFuture<'a, Option<String>>;
    /// Lets `session` go (it settled).
    fn release<'a>(&'a self, session: &'a str) -> StoreFuture<'a, ()>;
    /// Sessions whose holder died (held, not renewed in time).
    fn orphaned(&self, limit: i64) -> StoreFuture<'_, Vec<String>>;
}

/// One routed request, as its claimer reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mail {
    pub id: String,
    pub session: String,
    /// What it asks (`message`, `stop`, `decision`, ...).
    pub kind: String,
    /// The request, as JSON text.
    pub payload: String,
    pub principal_id: String,
}

/// Where a posted request is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MailState {
    Pending,
    /// A host (`by`) is applying it.
    Claimed {
        by: String,
    },
    /// Applied; its outcome, as JSON text.
    Done {
        outcome: String,
    },
    /// Given up by its receiver, or gone.
    Gone,
}

/// What the mailbox says happened. `Missed` when signals may have been
/// lost (look at the table).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MailSignal {
    /// A request for a session of `agent` was posted.
    Posted {
        agent: String,
        session: String,
    },
    /// Request `id` has its outcome.
    Done {
        id: String,
    },
    Missed,
}

/// Requests for a session another host holds: posted by the host that
/// received them, claimed by the holder (or any host when none lives),
/// applied at most once.
pub trait SharedMailbox: Send + Sync + Debug {
    /// Posts and signals.
    fn signals(&self) -> broadcast::Receiver<MailSignal>;
    #[allow(clippy::too_many_arguments)]
    fn post<'a>(
        &'a self,
        id: &'a str,
        session: &'a str,
        kind: &'a str,
        payload: &'a str,
        principal: &'a str,
        sender: &'a str,
    ) -> StoreFuture<'a, ()>;
    /// Claims up to `limit` pending requests for sessions `owner` holds,
    /// or that no live host holds.
    fn claim<'a>(&'a self, owner: &'a str, limit: i64) -> StoreFuture<'a, Vec<Mail>>;
    /// Claims request `id` for `owner` if it is pending and no other live
    /// host holds its session.
    fn claim_one<'a>(&'a self, id: &'a str, owner: &'a str) -> StoreFuture<'a, Option<Mail>>;
    /// Records request `id`'s outcome (JSON text) and signals it.
    fn finish<'a>(&'a self, id: &'a str, owner: &'a str, outcome: &'a str) -> StoreFuture<'a, ()>;
    /// Puts a claimed request back (its claimer could not apply it).
    fn unclaim<'a>(&'a self, id: &'a str, owner: &'a str) -> StoreFuture<'a, ()>;
    fn state<'a>(&'a self, id: &'a str) -> StoreFuture<'a, MailState>;
    /// Gives a pending request up: true when it was still pending (no one
    /// will apply it).
    fn abandon<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool>;
    /// Deletes a request whose outcome was read.
    fn forget<'a>(&'a self, id: &'a str) -> StoreFuture<'a, ()>;
    /// Deletes requests older than `hours`; how many.
    fn purge(&self, hours: f64) -> StoreFuture<'_, u64>;
}

/// One reminder's row (`kind`, `spec` and `status` as the runtime writes
/// them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReminderRecord {
    pub id: String,
    pub purpose: String,
    pub channel_id: String,
    pub continuation_token: String,
    pub session_id: Option<String>,
    pub kind: String,
    pub spec: String,
    pub prompt: Option<String>,
    pub until_condition: Option<String>,
    pub status: String,
    pub reason: Option<String>,
    pub next_fire_at_ms: Option<i64>,
    pub fire_count: i64,
    pub created_at_ms: i64,
    pub last_fired_at_ms: Option<i64>,
    /// A run-form reminder's handler, by the name every host registered
    /// it under; `None` for the prompt form.
    pub handler: Option<String>,
}

/// The agent's reminders, claimed once across hosts.
pub trait SharedReminders: Send + Sync + Debug {
    fn insert<'a>(&'a self, rows: &'a [ReminderRecord]) -> StoreFuture<'a, ()>;
    /// Replaces a row; with `claimed_by`, only while that host's claim
    /// stands (false when it does not) and the claim is let go.
    fn update<'a>(
        &'a self,
        row: &'a ReminderRecord,
        claimed_by: Option<&'a str>,
    ) -> StoreFuture<'a, bool>;
    /// Binds reminder `id` to `session` (a claim on it stands).
    fn bind<'a>(&'a self, id: &'a str, session: &'a str) -> StoreFuture<'a, ()>;
    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<ReminderRecord>>;
    /// The newest `limit` rows.
    fn list(&self, limit: i64) -> StoreFuture<'_, Vec<ReminderRecord>>;
    /// How many are armed.
    fn armed(&self) -> StoreFuture<'_, i64>;
    /// Claims up to `limit` armed reminders due at `now_ms` for `host`,
    /// for `claim_secs` (an expired claim may be taken again).
    fn claim_due<'a>(
        &'a self,
        now_ms: i64,
        limit: i64,
        host: &'a str,
        claim_secs: f64,
    ) -> StoreFuture<'a, Vec<ReminderRecord>>;
    /// Claims reminder `id` if it is armed and unclaimed.
    fn claim_one<'a>(
        &'a self,
        id: &'a str,
        host: &'a str,
        claim_secs: f64,
    ) -> StoreFuture<'a, Option<ReminderRecord>>;
    /// When the next armed reminder is due.
    fn next_due(&self) -> StoreFuture<'_, Option<i64>>;
    /// Turns `host`'s claim on `id`, after a firing that failed before
    /// writing back, into one that lapses in `retry_secs`, so the reminder
    /// fires again then. A store whose claims always lapse leaves it be
    /// (the default).
    fn claim_failed<'a>(
        &'a self,
        _id: &'a str,
        _host: &'a str,
        _retry_secs: f64,
    ) -> StoreFuture<'a, ()> {
        Box::pin(std::future::ready(Ok(())))
    }
}

/// Records made once across hosts, and the agent's daily usage.
pub trait SharedTicks: Send + Sync + Debug {
    /// Records tick `tick_ms` of schedule `schedule`: true for the one
    /// host that recorded it first.
    fn claim_tick<'a>(
        &'a self,
        schedule: &'a str,
        tick_ms: i64,
        host: &'a str,
    ) -> StoreFuture<'a, bool>;
    /// Input and output tokens of `day` (`YYYY-MM-DD`, UTC).
    fn day_usage<'a>(&'a self, day: &'a str) -> StoreFuture<'a, (i64, i64)>;
    fn add_day_usage<'a>(&'a self, day: &'a str, input: i64, output: i64) -> StoreFuture<'a, ()>;
    /// What the agent's turns of `day` cost, in billionths of a US dollar
    /// (integers, so every host's sums are exact).
    fn day_cost<'a>(&'a self, day: &'a str) -> StoreFuture<'a, i64>;
    fn add_day_cost<'a>(&'a self, day: &'a str, nano_usd: i64) -> StoreFuture<'a, ()>;
}

/// One ended turn of an enrolled session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbTurn {
    pub session_id: String,
    pub turn_id: String,
    /// `completed`, `failed` or `interrupted`.
    pub outcome: String,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_read_tokens: i64,
    pub cache_write_tokens: i64,
    pub latency_ms: i64,
    pub tool_calls: i64,
    pub tool_errors: i64,
    pub ended_at_ms: i64,
}

/// What one variant's rows add up to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AbTotals {
    pub sessions: i64,
    pub eval_sessions: i64,
    pub turns: i64,
    pub failed: i64,
    pub interrupted: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_read_tokens: i64,
    pub cache_write_tokens: i64,
    pub latency_sum: i64,
    pub latency_sum_sq: f64,
    pub tool_calls: i64,
    pub tool_errors: i64,
    /// Live feedback (every label but `eval`): count, sum, sum of squares.
    pub feedback_n: i64,
    pub feedback_sum: f64,
    pub feedback_sum_sq: f64,
    /// The eval runner's latest verdict per eval session.
    pub eval_total: i64,
    pub eval_passed: i64,
}

/// One feedback record on an enrolled session.
#[derive(Debug, Clone, Copy)]
pub struct AbFeedback<'a> {
    pub session: &'a str,
    pub principal: &'a str,
    pub purpose: Option<&'a str>,
    /// `(experiment, variant)`; `None` for a session not enrolled.
    pub assignments: &'a [(String, Option<String>)],
    pub score: f64,
    pub label: Option<&'a str>,
    pub note: Option<&'a str>,
    pub at_ms: i64,
}

/// The agent's A/B rows: every host's assignments, turns and feedback.
pub trait SharedAb: Send + Sync + Debug {
    fn record_assignments<'a>(
        &'a self,
        session: &'a str,
        principal: &'a str,
        purpose: Option<&'a str>,
        at_ms: i64,
        assignments: &'a [(String, Option<String>)],
    ) -> StoreFuture<'a, ()>;
    fn record_turn<'a>(&'a self, turn: &'a AbTurn) -> StoreFuture<'a, ()>;
    /// Records feedback; its id.
    fn record_feedback<'a>(&'a self, feedback: AbFeedback<'a>) -> StoreFuture<'a, i64>;
    /// Makes every record queued before this call visible to the reads
    /// below (a store that queues turn rows without waiting flushes).
    fn settle(&self) -> StoreFuture<'_, ()> {
        Box::pin(std::future::ready(Ok(())))
    }
    /// Sessions assigned no variant of `experiment`.
    fn not_enrolled<'a>(&'a self, experiment: &'a str) -> StoreFuture<'a, i64>;
    fn totals<'a>(&'a self, experiment: &'a str, variant: &'a str) -> StoreFuture<'a, AbTotals>;
    /// The `rank`-th smallest turn latency (0-based) of a variant.
    fn latency_at<'a>(
        &'a self,
        experiment: &'a str,
        variant: &'a str,
        rank: i64,
    ) -> StoreFuture<'a, Option<i64>>;
}

/// A kv entry: key, JSON text, expiry (ms since the epoch).
pub type KvRow = (String, String, Option<i64>);

/// The host bridge's kv store of the agent.
pub trait SharedKv: Send + Sync + Debug {
    fn get<'a>(&'a self, key: &'a str, now: i64) -> StoreFuture<'a, Option<KvRow>>;
    fn set<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
        expires_at: Option<i64>,
        now: i64,
    ) -> StoreFuture<'a, ()>;
    /// True when a live entry was deleted.
    fn delete<'a>(&'a self, key: &'a str, now: i64) -> StoreFuture<'a, bool>;
    /// Live entries under `prefix` whose key sorts after `after` (byte
    /// order; `""`: from the first), in key order.
    fn list<'a>(
        &'a self,
        prefix: &'a str,
        after: &'a str,
        limit: i64,
        now: i64,
    ) -> StoreFuture<'a, Vec<KvRow>>;
}

/// One artifact's row. `data` is JSON text; `principal_id` is the
/// principal owning the session that tagged it last (who may list it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactRow {
    pub id: String,
    pub kind: String,
    pub key: Option<String>,
    pub data: String,
    pub session_id: String,
    pub principal_id: String,
    pub turn_id: Option<String>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

/// Which artifacts a page holds: newest first by id (ids sort by
/// creation time), before the `before` id.
#[derive(Debug, Clone, Copy, Default)]
pub struct ArtifactQuery<'a> {
    pub principal: Option<&'a str>,
    pub session: Option<&'a str>,
    pub kind: Option<&'a str>,
    pub before: Option<&'a str>,
    pub limit: i64,
}

/// What [`SharedArtifacts::tag`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tagged {
    /// The stored row: the given one, or the existing artifact of its kind
    /// and key with the given data, session, turn and update time (its id
    /// and creation time kept).
    pub row: ArtifactRow,
    /// An artifact of this kind and key existed and was replaced.
    pub updated: bool,
    /// How many of the least recently updated artifacts went to keep
    /// `max`.
    pub evicted: u64,
}

/// The agent's artifacts: records its sessions keep beyond their logs.
pub trait SharedArtifacts: Send + Sync + Debug {
    /// Stores `row`; with a `key`, the artifact of the same kind and key
    /// is updated instead of a new one made. With `max`, the least
    /// recently updated artifacts beyond it are deleted in the same
    /// transaction.
    fn tag<'a>(&'a self, row: &'a ArtifactRow, max: Option<i64>) -> StoreFuture<'a, Tagged>;
    /// One artifact by id.
    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<ArtifactRow>>;
    /// A page, newest first.
    fn page<'a>(&'a self, query: ArtifactQuery<'a>) -> StoreFuture<'a, Vec<ArtifactRow>>;
    /// Deletes every artifact of `session`; how many.
    fn delete_session<'a>(&'a self, session: &'a str) -> StoreFuture<'a, u64>;
}

/// One governed memory's row. `scope` is `principal` (only
/// `principal_id`'s sessions see it) or `agent` (every session does);
/// `principal_id`, `session_id`, `turn_id` and `event_index` are where it
/// was remembered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryRow {
    pub id: String,
    pub text: String,
    pub scope: String,
    pub principal_id: String,
    pub session_id: String,
    pub turn_id: Option<String>,
    pub event_index: Option<i64>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

/// The scope of a memory every session of the agent sees.
pub const AGENT_SCOPE: &str = "agent";

/// Which memories a page holds: newest first by id (ids sort by creation
/// time), before the `before` id. With `principal`, only those that
/// principal's sessions see (its own principal-scoped ones and every
/// agent-scoped one).
#[derive(Debug, Clone, Copy, Default)]
pub struct MemoryQuery<'a> {
    pub principal: Option<&'a str>,
    pub before: Option<&'a str>,
    pub limit: i64,
}

/// The agent's governed memories.
pub trait SharedMemories: Send + Sync + Debug {
    fn insert<'a>(&'a self, row: &'a MemoryRow) -> StoreFuture<'a, ()>;
    /// One memory by id.
    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<MemoryRow>>;
    /// Replaces a memory's text; the updated row, `None` when it is gone.
    fn edit<'a>(
        &'a self,
        id: &'a str,
        text: &'a str,
        updated_at_ms: i64,
    ) -> StoreFuture<'a, Option<MemoryRow>>;
    /// True when a memory was deleted.
    fn delete<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool>;
    /// A page, newest first.
    fn page<'a>(&'a self, query: MemoryQuery<'a>) -> StoreFuture<'a, Vec<MemoryRow>>;
}
