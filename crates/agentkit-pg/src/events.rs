//! The event logs in PostgreSQL: `agentkit_events` holds every event,
//! `agentkit_logs` each log's length. An append is one statement: it
//! checks this host's lease of the session (fencing), takes the next
//! indices under the log's counter row, inserts the events and
//! `NOTIFY`s, all or nothing. Appends that wait together are one commit
//! (`group.rs`). Followers read the table (the source of truth) and
//! wait on notifications between reads; on the appending host they take
//! its appends from its announcement instead.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use agentkit_events::{NewEvent, Rebuild};
use agentkit_protocol::{Event, EventType, SessionId};
use chrono::{SecondsFormat, Utc};
use serde_json::Value;
use tokio::sync::broadcast::{self, error::RecvError};

use crate::database::{Database, Grown, GrownLog};
use crate::error::{Error, Result};
use crate::lease::{LEASE_TTL, Leases};

/// How many sessions keep the tail of what this host appended to them
/// (the least recently appended go first), and how many events each.
const TAIL_SESSIONS: usize = 512;
const TAIL_EVENTS: usize = 64;

/// How many events one read fetches at most.
const READ_CHUNK: i64 = 1024;
/// How long a follower waits for a notification before reading the
/// table anyway (a notification lost with a dropped connection costs at
/// most this much delay, never an event).
const POLL_EVERY: Duration = Duration::from_secs(1);

/// The counter and the events of an append, written only from the
/// `lease` row the statement's first CTE gave (fencing). `$5` the count,
/// `$6..$9` the columns. Shared by `APPEND` and `APPEND_TAKING`.
macro_rules! append_from_lease {
    () => {
        ", counter AS (
    INSERT INTO agentkit_logs (agent, session_id, len)
    SELECT $1, $2, $5 FROM lease
    ON CONFLICT (agent, session_id) DO UPDATE SET len = agentkit_logs.len + EXCLUDED.len
    RETURNING len
), appended AS (
    INSERT INTO agentkit_events (agent, session_id, idx, type, turn_id, at, data)
    SELECT $1, $2, counter.len - $5 + t.ord - 1, t.type, t.turn_id, t.at, t.data
    FROM counter, unnest($6::text[], $7::text[], $8::text[], $9::text[])
        WITH ORDINALITY AS t(type, turn_id, at, data, ord)
)"
    };
}

const APPEND: &str = concat!(
    "
WITH lease AS (
    SELECT 1 FROM agentkit_leases
    WHERE agent = $1 AND session_id = $2 AND owner = $3 AND token = $4 AND held
    FOR SHARE
)",
    append_from_lease!(),
    "
SELECT len, pg_notify('agentkit_events', $1 || ' ' || $2 || ' ' || len) FROM counter"
);

// The first append of a session this host holds no lease on: takes the
// lease (as `lease.rs`'s `ACQUIRE`: a new one, one let go, one expired,
// or this host's own) and appends in the same statement, so taking a
// lease costs no round trip of its own. No row when another live host
// holds it. The counter and the events are written only from the lease
// row the upsert returned, so fencing holds as in `APPEND`.
const APPEND_TAKING: &str = concat!(
    "
WITH lease AS (
",
    lease_upsert!(),
    "
    RETURNING token
)",
    append_from_lease!(),
    "
SELECT counter.len, pg_notify('agentkit_events', $1 || ' ' || $2 || ' ' || counter.len), lease.token
FROM counter, lease"
);

// A fork's log: the new session's counter and a copy of the original's
// first `$4` rows, in one statement inside the database. Nothing when the
// original holds fewer (the counter's row is then not made either).
const FORK: &str = "
WITH source AS (
    SELECT len FROM agentkit_logs WHERE agent = $1 AND session_id = $2 AND len >= $4
), counter AS (
    INSERT INTO agentkit_logs (agent, session_id, len)
    SELECT $1, $3, $4 FROM source
    RETURNING len
), copied AS (
    INSERT INTO agentkit_events (agent, session_id, idx, type, turn_id, at, data)
    SELECT agent, $3, idx, type, turn_id, at, data FROM agentkit_events
    WHERE agent = $1 AND session_id = $2 AND idx < $4 AND EXISTS (SELECT 1 FROM counter)
)
SELECT len FROM counter";

const READ: &str = "SELECT idx, type, turn_id, at, data FROM agentkit_events
    WHERE agent = $1 AND session_id = $2 AND idx >= $3 AND idx < $4 ORDER BY idx LIMIT $5";

const READ_BACK: &str = "SELECT idx, type, turn_id, at, data FROM agentkit_events
    WHERE agent = $1 AND session_id = $2 AND idx < $3 ORDER BY idx DESC LIMIT $4";

/// One agent's event logs in PostgreSQL. Cheap to clone.
#[derive(Debug, Clone)]
pub struct PgEventStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    db: Database,
    agent: String,
    leases: Leases,
    /// Every event this host appended, for its observers (hooks, channel
    /// deliveries run where the event was recorded: once).
    tap: broadcast::Sender<Arc<Event>>,
    /// The last events this host appended to each recent session, in the
    /// wire shape and contiguous: a follower starting there (the stream
    /// a client opens after its `POST`) replays them without a read.
    tails: std::sync::Mutex<hashlink::LruCache<String, VecDeque<Arc<Event>>>>,
}

impl PgEventStore {
    /// The logs of agent `agent` (its slug) in `db`; appends hold leases
    /// as `owner` (this host).
    pub fn new(db: Database, agent: &str, leases: Leases, tap_capacity: usize) -> PgEventStore {
        PgEventStore {
            inner: Arc::new(Inner {
                db,
                agent: agent.to_owned(),
                leases,
                tap: broadcast::channel(tap_capacity.max(1)).0,
                tails: std::sync::Mutex::new(hashlink::LruCache::new(TAIL_SESSIONS)),
            }),
        }
    }

    /// The leases this store's appends hold.
    pub fn leases(&self) -> &Leases {
        &self.inner.leases
    }

    /// Appends one event (see [`append_batch`](Self::append_batch)).
    pub async fn append(
        &self,
        session: &SessionId,
        event_type: EventType,
        turn_id: Option<&str>,
        data: Value,
    ) -> Result<Event> {
        let new = NewEvent {
            event_type,
            turn_id: turn_id.map(str::to_owned),
            data,
        };
        let mut events = self.append_batch(session, vec![new]).await?;
        events.pop().ok_or_else(|| Error::Corrupt {
            table: "agentkit_events",
            reason: "an append wrote no event".to_owned(),
        })
    }

    /// Appends `events` with contiguous indices in one statement. Takes
    /// the session's lease first if this host does not hold it
    /// ([`Error::Busy`] when another live host does); fails with
    /// [`Error::Fenced`] (and forgets the lease) when another host took
    /// it over. Committed (durable) when this returns.
    pub async fn append_batch(
        &self,
        session: &SessionId,
        events: Vec<NewEvent>,
    ) -> Result<Vec<Event>> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let agent = &self.inner.agent;
        let leases = &self.inner.leases;
        let at = Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true);
        let n = events.len() as i64;
        let mut types = Vec::with_capacity(events.len());
        let mut turns = Vec::with_capacity(events.len());
        let mut ats = Vec::with_capacity(events.len());
        let mut datas = Vec::with_capacity(events.len());
        let mut out = Vec::with_capacity(events.len());
        for new in events {
            let mut event = Event {
                event_type: new.event_type,
                index: 0,
                session_id: session.clone(),
                turn_id: new.turn_id,
                at: at.clone(),
                data: new.data,
            };
            let text = agentkit_events::strip_text(&mut event);
            types.push(event.event_type.as_str().to_owned());
            turns.push(event.turn_id.clone());
            ats.push(at.clone());
            datas.push(event.data.to_string());
            if let (Some(text), Some(obj)) = (text, event.data.as_object_mut()) {
                obj.insert("text".to_owned(), text);
            }
            out.push(event);
        }
        let columns = Arc::new(Columns {
            session: session.as_str().to_owned(),
            owner: leases.owner().to_owned(),
            n,
            types,
            turns,
            ats,
            datas,
        });
        let (len, token) = loop {
            let Some(token) = leases.token(agent, session.as_str()) else {
                let row = self.run_append(true, 0, &columns).await?;
                if let Some(row) = row {
                    let token: i64 = row.get(2);
                    leases.took(agent, session.as_str(), token);
                    break (row.get::<_, i64>(0), token);
                }
                // Another live host holds it: `Busy` names it (or, let go
                // meanwhile, the lease is this host's now: append as its
                // holder).
                leases.acquire(agent, session.as_str()).await?;
                continue;
            };
            {
                let row = self.run_append(false, token, &columns).await?;
                let Some(row) = row else {
                    leases.lost(agent, session.as_str(), token);
                    return Err(Error::Fenced {
                        session: session.as_str().to_owned(),
                        token,
                    });
                };
                break (row.get::<_, i64>(0), token);
            }
        };
        leases.note_len(agent, session.as_str(), token, len as u64);
        let first = (len - n) as u64;
        for (i, event) in out.iter_mut().enumerate() {
            event.index = first + i as u64;
        }
        // One shared copy for the tap, the kept tail and the followers.
        let shared: Arc<[Arc<Event>]> = out.iter().map(|e| Arc::new(e.clone())).collect();
        for event in shared.iter() {
            let _ = self.inner.tap.send(event.clone());
        }
        self.keep_tail(session, &shared);
        self.inner
            .db
            .announce(agent, session.as_str(), len as u64, shared);
        Ok(out)
    }

    /// Runs one of the two append statements (`APPEND_TAKING`, or
    /// `APPEND` with the held lease's token) in the next group commit:
    /// the appended log's row, or none when the lease check refused it.
    async fn run_append(
        &self,
        taking: bool,
        token: i64,
        columns: &Arc<Columns>,
    ) -> Result<Option<tokio_postgres::Row>> {
        let params = AppendParams {
            agent: self.inner.agent.clone(),
            lease: if taking {
                Lease::Ttl(LEASE_TTL.as_secs_f64())
            } else {
                Lease::Token(token)
            },
            columns: columns.clone(),
        };
        self.inner
            .db
            .grouped(
                if taking { APPEND_TAKING } else { APPEND },
                (self.inner.agent.clone(), columns.session.clone()),
                Arc::new(params),
            )
            .await
    }

    /// Starts `to`'s log with `from`'s events `0..at`, copied inside the
    /// database in one statement: no event passes through this host and
    /// none is announced. `to` must be a new session.
    pub async fn fork(&self, from: &SessionId, at: u64, to: &SessionId) -> Result<()> {
        let client = self.inner.db.client().await?;
        let statement = client
            .prepare_cached(FORK)
            .await
            .map_err(Error::query("prepare a fork"))?;
        let at_i = i64::try_from(at).unwrap_or(i64::MAX);
        let row = client
            .query_opt(
                &statement,
                &[&self.inner.agent, &from.as_str(), &to.as_str(), &at_i],
            )
            .await
            .map_err(Error::query("fork a log"))?;
        if row.is_none() {
            return Err(Error::Missing {
                what: format!("cannot fork `{from}` before event {at}: it has fewer events"),
            });
        }
        Ok(())
    }

    /// The log's length as this host's own appends left it, while it
    /// still holds the lease they were made under (no other host can
    /// have appended since): see [`Leases::known_len`].
    pub fn known_len(&self, session: &SessionId) -> Option<u64> {
        self.inner
            .leases
            .known_len(&self.inner.agent, session.as_str())
    }

    /// Every event this host appends, live, from now on.
    pub fn tap(&self) -> broadcast::Receiver<Arc<Event>> {
        self.inner.tap.subscribe()
    }

    /// How many events `session` holds (0 for a log not yet written).
    pub async fn len(&self, session: &SessionId) -> Result<u64> {
        let client = self.inner.db.client().await?;
        let statement = client
            .prepare_cached("SELECT len FROM agentkit_logs WHERE agent = $1 AND session_id = $2")
            .await
            .map_err(Error::query("prepare a length read"))?;
        let row = client
            .query_opt(&statement, &[&self.inner.agent, &session.as_str()])
            .await
            .map_err(Error::query("read a log's length"))?;
        Ok(row.map_or(0, |r| r.get::<_, i64>(0) as u64))
    }

    /// Whether `session` has a log.
    pub async fn exists(&self, session: &SessionId) -> Result<bool> {
        let client = self.inner.db.client().await?;
        let row = client
            .query_opt(
                "SELECT 1 FROM agentkit_logs WHERE agent = $1 AND session_id = $2",
                &[&self.inner.agent, &session.as_str()],
            )
            .await
            .map_err(Error::query("look for a log"))?;
        Ok(row.is_some())
    }

    /// The events of `session` in `start..end`, as stored (each
    /// `message.appended` with its `delta` only).
    pub async fn read_stored_range(
        &self,
        session: &SessionId,
        start: u64,
        end: u64,
    ) -> Result<Vec<Event>> {
        let client = self.inner.db.client().await?;
        let statement = client
            .prepare_cached(READ)
            .await
            .map_err(Error::query("prepare a read"))?;
        let end = i64::try_from(end).unwrap_or(i64::MAX);
        let mut out = Vec::new();
        let mut from = i64::try_from(start).unwrap_or(i64::MAX);
        loop {
            let rows = client
                .query(
                    &statement,
                    &[
                        &self.inner.agent,
                        &session.as_str(),
                        &from,
                        &end,
                        &READ_CHUNK,
                    ],
                )
                .await
                .map_err(Error::query("read events"))?;
            let got = rows.len() as i64;
            for row in rows {
                out.push(event_of(session, &row)?);
            }
            if got < READ_CHUNK {
                return Ok(out);
            }
            from = out.last().map_or(end, |e| e.index as i64 + 1);
        }
    }

    /// Every event of `session` from `start` on, as stored.
    pub async fn read_stored(&self, session: &SessionId, start: u64) -> Result<Vec<Event>> {
        self.read_stored_range(session, start, u64::MAX).await
    }

    /// The events of `session` in `start..end`, in the wire shape (each
    /// `message.appended` with its cumulative `text`).
    pub async fn read_range(
        &self,
        session: &SessionId,
        start: u64,
        end: u64,
    ) -> Result<Vec<Event>> {
        let mut events = self.read_stored_range(session, start, end).await?;
        let mut rebuild = if start == 0 {
            Rebuild::at_start()
        } else {
            Rebuild::default()
        };
        self.rebuild(session, &mut rebuild, start, &mut events)
            .await?;
        Ok(events)
    }

    /// Every event of `session` from `start` on, in the wire shape.
    pub async fn read(&self, session: &SessionId, start: u64) -> Result<Vec<Event>> {
        self.read_range(session, start, u64::MAX).await
    }

    /// Completes the stored deltas among `events` (which start at
    /// `start`), reading the prefix of a message the range begins inside.
    async fn rebuild(
        &self,
        session: &SessionId,
        rebuild: &mut Rebuild,
        start: u64,
        events: &mut [Event],
    ) -> Result<()> {
        for event in events.iter_mut() {
            if rebuild.needs_prefix(event) {
                *rebuild = Rebuild::with_prefix(self.prefix_before(session, start).await?);
            }
            rebuild.apply(event);
        }
        Ok(())
    }

    /// The text of the message whose deltas run up to `end` (exclusive),
    /// read backwards a chunk at a time.
    async fn prefix_before(&self, session: &SessionId, end: u64) -> Result<String> {
        const CHUNK: i64 = 256;
        let client = self.inner.db.client().await?;
        let statement = client
            .prepare_cached(READ_BACK)
            .await
            .map_err(Error::query("prepare a backwards read"))?;
        let mut hi = end as i64;
        let mut tail: Vec<Event> = Vec::new();
        loop {
            let rows = client
                .query(
                    &statement,
                    &[&self.inner.agent, &session.as_str(), &hi, &CHUNK],
                )
                .await
                .map_err(Error::query("read events backwards"))?;
            let mut chunk = rows
                .iter()
                .rev()
                .map(|row| event_of(session, row))
                .collect::<Result<Vec<_>>>()?;
            let lo = chunk.first().map_or(0, |e| e.index as i64);
            chunk.append(&mut tail);
            if let Some(text) = agentkit_events::text_prefix_in(&chunk, lo == 0) {
                return Ok(text);
            }
            if lo == 0 {
                return Ok(String::new());
            }
            tail = chunk;
            hi = lo;
        }
    }

    /// Keeps `appended` (this host's committed append) as the tail of
    /// `session`'s log: after the tail kept, or instead of it when
    /// another host appended in between.
    fn keep_tail(&self, session: &SessionId, appended: &[Arc<Event>]) {
        let Some(first) = appended.first() else {
            return;
        };
        let mut tails = self.inner.tails.lock().unwrap_or_else(|e| e.into_inner());
        let key = session.as_str();
        let contiguous = tails
            .get(key)
            .and_then(|t| t.back())
            .is_some_and(|last| last.index + 1 == first.index);
        if !contiguous {
            tails.insert(key.to_owned(), VecDeque::new());
        }
        if let Some(tail) = tails.get_mut(key) {
            tail.extend(appended.iter().cloned());
            while tail.len() > TAIL_EVENTS {
                tail.pop_front();
            }
        }
    }

    /// The kept tail of `session` from `start`, and the index after it,
    /// when `start` is inside it (or right after it).
    fn tail_from(&self, session: &SessionId, start: u64) -> Option<(VecDeque<Event>, u64)> {
        let mut tails = self.inner.tails.lock().unwrap_or_else(|e| e.into_inner());
        let tail = tails.get(session.as_str())?;
        let (first, end) = (tail.front()?.index, tail.back()?.index + 1);
        if start < first || start > end {
            return None;
        }
        Some((
            tail.iter()
                .skip((start - first) as usize)
                .map(|e| Event::clone(e))
                .collect(),
            end,
        ))
    }

    /// Follows `session` from `start`: every event with `index >= start`
    /// exactly once, in order, whichever host appends it.
    pub async fn subscribe(&self, session: &SessionId, start: u64) -> Result<PgSubscription> {
        let mut follow = PgSubscription {
            store: self.clone(),
            session: session.clone(),
            next: start,
            backlog: VecDeque::new(),
            grown: self.inner.db.grown(),
            known_len: 0,
            caught_up: false,
            rebuild: if start == 0 {
                Rebuild::at_start()
            } else {
                Rebuild::default()
            },
        };
        // Read after subscribing to the announcements: an append that
        // lands meanwhile is in the tail or announced, never missed.
        if let Some((events, end)) = self.tail_from(session, start) {
            follow.backlog = events;
            follow.rebuild = Rebuild::default();
            // While this host holds the lease its last append ended at
            // `end`, no other host appended after it.
            follow.caught_up = self.known_len(session) == Some(end);
        }
        Ok(follow)
    }

    /// The ids of every session of this agent with a log.
    pub async fn sessions(&self) -> Result<Vec<SessionId>> {
        let client = self.inner.db.client().await?;
        let rows = client
            .query(
                "SELECT session_id FROM agentkit_logs WHERE agent = $1 ORDER BY session_id",
                &[&self.inner.agent],
            )
            .await
            .map_err(Error::query("list logs"))?;
        Ok(rows
            .iter()
            .filter_map(|r| SessionId::parse(r.get::<_, &str>(0)).ok())
            .collect())
    }
}

fn event_of(session: &SessionId, row: &tokio_postgres::Row) -> Result<Event> {
    let corrupt = |reason: String| Error::Corrupt {
        table: "agentkit_events",
        reason,
    };
    let idx: i64 = row.get(0);
    let kind: &str = row.get(1);
    let data: &str = row.get(4);
    Ok(Event {
        event_type: kind
            .parse()
            .map_err(|e| corrupt(format!("{session} #{idx}: {e}")))?,
        index: idx as u64,
        session_id: session.clone(),
        turn_id: row.get(2),
        at: row.get(3),
        data: serde_json::from_str(data).map_err(|e| corrupt(format!("{session} #{idx}: {e}")))?,
    })
}

/// A live view of one session's log in PostgreSQL, from some index on.
#[derive(Debug)]
pub struct PgSubscription {
    store: PgEventStore,
    session: SessionId,
    next: u64,
    backlog: VecDeque<Event>,
    grown: broadcast::Receiver<Grown>,
    /// The longest length a notification announced.
    known_len: u64,
    /// The last read found the log's end: what comes next is announced
    /// (the notifications were subscribed to before the first read), so
    /// the table is read again only once something is, or after a poll.
    caught_up: bool,
    rebuild: Rebuild,
}

impl PgSubscription {
    /// The index of the event [`next`](Self::next) yields.
    pub fn next_index(&self) -> u64 {
        self.next
    }

    /// Waits for the next event. Cancel-safe: an event is taken off the
    /// backlog only when it is returned, and the table is read again from
    /// `next` after an interrupted read.
    pub async fn next(&mut self) -> Result<Event> {
        loop {
            if let Some(event) = self.backlog.pop_front() {
                self.next = event.index + 1;
                return Ok(event);
            }
            if self.caught_up {
                self.wait().await;
                self.caught_up = false;
                continue;
            }
            let end = self.next.saturating_add(READ_CHUNK as u64);
            let mut events = self
                .store
                .read_stored_range(&self.session, self.next, end)
                .await?;
            self.caught_up = (events.len() as u64) < READ_CHUNK as u64;
            if !events.is_empty() {
                if events[0].index != self.next {
                    return Err(Error::Corrupt {
                        table: "agentkit_events",
                        reason: format!("{}: a gap before index {}", self.session, self.next),
                    });
                }
                let start = self.next;
                let mut rebuild = std::mem::take(&mut self.rebuild);
                let rebuilt = self
                    .store
                    .rebuild(&self.session, &mut rebuild, start, &mut events)
                    .await;
                self.rebuild = rebuild;
                rebuilt?;
                self.backlog = events.into();
            }
        }
    }

    /// Until a notification says the log grew past `next`, or a second.
    /// When this host appended what comes next, the events it announced
    /// are the backlog and the table is not read.
    async fn wait(&mut self) {
        if self.known_len > self.next {
            return;
        }
        let deadline = tokio::time::Instant::now() + POLL_EVERY;
        loop {
            match tokio::time::timeout_at(deadline, self.grown.recv()).await {
                Err(_) => return,
                Ok(Ok(Some(grown))) => {
                    let GrownLog {
                        agent,
                        session,
                        len,
                        events,
                    } = &*grown;
                    if session == self.session.as_str() && *agent == self.store.inner.agent {
                        if let Some(events) = events
                            && self.take_appended(events)
                        {
                            return;
                        }
                        // The database's notification of an append this
                        // host made can overtake the host's own
                        // announcement: while it holds the lease, that
                        // announcement (with the events) is coming.
                        if events.is_none()
                            && *len > self.next
                            && self
                                .store
                                .inner
                                .leases
                                .holds(&self.store.inner.agent, session)
                        {
                            continue;
                        }
                        self.known_len = self.known_len.max(*len);
                        if *len > self.next {
                            return;
                        }
                    }
                }
                // The listener reconnected, or we fell behind: read.
                Ok(Ok(None)) | Ok(Err(RecvError::Lagged(_))) => return,
                Ok(Err(RecvError::Closed)) => {
                    tokio::time::sleep_until(deadline).await;
                    return;
                }
            }
        }
    }
}

impl PgSubscription {
    /// Takes this host's appended `events` as the backlog when they go on
    /// from `next` with no gap (else the table is read). A delta taken so
    /// carries its message's text already; a later read of the table
    /// that starts inside a message looks its prefix up again.
    fn take_appended(&mut self, events: &[Arc<Event>]) -> bool {
        let Some(first) = events.first() else {
            return false;
        };
        if first.index > self.next || events.last().is_none_or(|e| e.index < self.next) {
            return false;
        }
        let skip = (self.next - first.index) as usize;
        self.backlog = events[skip..].iter().map(|e| Event::clone(e)).collect();
        self.rebuild = Rebuild::default();
        true
    }
}

/// The lease parameter of an append: the time to live of one it takes,
/// or the token of the one it holds.
enum Lease {
    Ttl(f64),
    Token(i64),
}

/// The parameters of one append statement.
struct AppendParams {
    agent: String,
    lease: Lease,
    columns: Arc<Columns>,
}

impl crate::group::Params for AppendParams {
    fn params(&self) -> Vec<&(dyn tokio_postgres::types::ToSql + Sync)> {
        let c = &*self.columns;
        let lease: &(dyn tokio_postgres::types::ToSql + Sync) = match &self.lease {
            Lease::Ttl(ttl) => ttl,
            Lease::Token(token) => token,
        };
        vec![
            &self.agent,
            &c.session,
            &c.owner,
            lease,
            &c.n,
            &c.types,
            &c.turns,
            &c.ats,
            &c.datas,
        ]
    }
}

/// One batch's parameters of the append statements, one array per column.
struct Columns {
    session: String,
    owner: String,
    n: i64,
    types: Vec<String>,
    turns: Vec<Option<String>>,
    ats: Vec<String>,
    datas: Vec<String>,
}
