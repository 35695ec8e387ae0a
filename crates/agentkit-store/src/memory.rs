//! A shared store kept in this process: what the PostgreSQL backend
//! does, with maps behind one lock. Several runtimes ("hosts") made from
//! one [`MemoryBackend`] ([`MemoryBackend::host`]) share its sessions,
//! leases and mailbox, as hosts on one database do; [`MemoryBackend::stop_host`]
//! makes a host look dead (its leases expired) without dropping it.
//! For tests and embedders' experiments: nothing survives the process.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use agentkit_events::NewEvent;
use agentkit_protocol::{Event, SessionId};
use tokio::sync::{Notify, broadcast};

use crate::{
    AbFeedback, AbTotals, AbTurn, Activity, AgentStores, ArtifactQuery, ArtifactRow, KvRow, Mail,
    MailSignal, MailState, MemoryQuery, MemoryRow, PageQuery, ReminderRecord, Result, SessionRow,
    SharedAb, SharedArtifacts, SharedBackend, SharedError, SharedFollow, SharedIndex, SharedKv,
    SharedLeases, SharedLog, SharedMailbox, SharedMemories, SharedReminders, SharedTicks, Stale,
    StoreFuture, Tagged,
};

/// One host's handle on an in-memory shared store. Cheap to clone.
#[derive(Debug, Clone)]
pub struct MemoryBackend {
    shared: Arc<Shared>,
    owner: Arc<str>,
}

#[derive(Debug)]
struct Shared {
    data: Mutex<Data>,
    /// Woken on every append (followers look at their log again).
    appended: Notify,
    mail: broadcast::Sender<MailSignal>,
}

type Key = (String, String);

#[derive(Debug, Default)]
struct Data {
    logs: HashMap<Key, Vec<Event>>,
    sessions: BTreeMap<Key, SessionRow>,
    leases: HashMap<Key, Lease>,
    dead: HashSet<String>,
    /// In the order posted.
    mail: Vec<MailRow>,
    reminders: BTreeMap<Key, (ReminderRecord, Option<(String, Instant)>)>,
    ticks: HashSet<(String, String, i64)>,
    usage: HashMap<Key, (i64, i64)>,
    cost: HashMap<Key, i64>,
    assignments: Vec<Assignment>,
    turns: HashMap<(String, String, String), AbTurn>,
    feedback: Vec<Feedback>,
    kv: BTreeMap<Key, (String, Option<i64>)>,
    /// By (agent, id).
    artifacts: BTreeMap<Key, ArtifactRow>,
    /// By (agent, id).
    memories: BTreeMap<Key, MemoryRow>,
    /// By agent, oldest first.
    journal: HashMap<String, Vec<String>>,
}

#[derive(Debug, Clone)]
struct Lease {
    owner: String,
    token: i64,
    held: bool,
}

#[derive(Debug)]
struct MailRow {
    agent: String,
    mail: Mail,
    state: MailState,
    settled_at: Option<Instant>,
}

#[derive(Debug)]
struct Assignment {
    agent: String,
    session: String,
    experiment: String,
    variant: Option<String>,
    purpose: Option<String>,
}

#[derive(Debug)]
struct Feedback {
    id: i64,
    agent: String,
    session: String,
    score: f64,
    label: Option<String>,
}

fn lock(m: &Mutex<Data>) -> MutexGuard<'_, Data> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn key(agent: &str, id: &str) -> Key {
    (agent.to_owned(), id.to_owned())
}

fn ready<'a, T: Send + 'a>(value: Result<T>) -> StoreFuture<'a, T> {
    Box::pin(std::future::ready(value))
}

impl Default for MemoryBackend {
    fn default() -> Self {
        MemoryBackend::new()
    }
}

impl MemoryBackend {
    /// An empty store and its first host, `host-1`.
    pub fn new() -> MemoryBackend {
        let (mail, _) = broadcast::channel(1024);
        MemoryBackend {
            shared: Arc::new(Shared {
                data: Mutex::default(),
                appended: Notify::new(),
                mail,
            }),
            owner: Arc::from("host-1"),
        }
    }

    /// Another host on the same store, named `owner`.
    pub fn host(&self, owner: &str) -> MemoryBackend {
        MemoryBackend {
            shared: Arc::clone(&self.shared),
            owner: Arc::from(owner),
        }
    }

    /// Makes host `owner` look dead: its leases expire (others take its
    /// sessions over) and it is no one's holder any more.
    pub fn stop_host(&self, owner: &str) {
        lock(&self.shared.data).dead.insert(owner.to_owned());
    }

    /// How many events session `id` of `agent` holds (for tests).
    pub fn log_len(&self, agent: &str, id: &str) -> usize {
        lock(&self.shared.data)
            .logs
            .get(&key(agent, id))
            .map_or(0, Vec::len)
    }
}

impl SharedBackend for MemoryBackend {
    fn owner(&self) -> &str {
        &self.owner
    }

    fn agent(&self, slug: &str, tap_capacity: usize) -> AgentStores {
        let (tap, _) = broadcast::channel(tap_capacity.max(1));
        let part = Arc::new(Part {
            backend: self.clone(),
            agent: slug.to_owned(),
            tap,
        });
        AgentStores {
            agent: slug.to_owned(),
            log: part.clone(),
            index: part.clone(),
            leases: part.clone(),
            mailbox: part.clone(),
            reminders: part.clone(),
            ticks: part.clone(),
            ab: part.clone(),
            kv: part.clone(),
            artifacts: part.clone(),
            memories: part.clone(),
            journal: part,
        }
    }
}

/// One agent's share, as one host sees it.
#[derive(Debug)]
struct Part {
    backend: MemoryBackend,
    agent: String,
    tap: broadcast::Sender<Arc<Event>>,
}

impl Part {
    fn data(&self) -> MutexGuard<'_, Data> {
        lock(&self.backend.shared.data)
    }

    fn me(&self) -> &str {
        &self.backend.owner
    }

    fn key(&self, id: &str) -> Key {
        key(&self.agent, id)
    }

    /// Takes `session`'s lease for this host: whether a dead holder's was
    /// taken. Busy while another live host holds it.
    fn take(&self, data: &mut Data, session: &str) -> Result<bool> {
        let k = self.key(session);
        let me = self.me().to_owned();
        let (token, took_over) = match data.leases.get(&k) {
            Some(l) if l.held && l.owner != me && !data.dead.contains(&l.owner) => {
                return Err(SharedError::Busy {
                    session: session.to_owned(),
                    holder: l.owner.clone(),
                });
            }
            Some(l) if l.held && l.owner == me => return Ok(false),
            Some(l) => (l.token + 1, l.held),
            None => (1, false),
        };
        data.leases.insert(
            k,
            Lease {
                owner: me,
                token,
                held: true,
            },
        );
        Ok(took_over)
    }

    fn holder_in(&self, data: &Data, session: &str) -> Option<String> {
        data.leases
            .get(&self.key(session))
            .filter(|l| l.held && l.owner != self.me() && !data.dead.contains(&l.owner))
            .map(|l| l.owner.clone())
    }
}

impl SharedLog for Part {
    fn append_batch<'a>(
        &'a self,
        session: &'a SessionId,
        events: Vec<NewEvent>,
    ) -> StoreFuture<'a, Vec<Event>> {
        let appended = (|| {
            let mut data = self.data();
            if data.dead.contains(self.me()) {
                return Err(SharedError::Fenced {
                    session: session.to_string(),
                    token: 0,
                });
            }
            self.take(&mut data, session.as_str())?;
            let log = data.logs.entry(self.key(session.as_str())).or_default();
            let at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            let mut out = Vec::with_capacity(events.len());
            for e in events {
                let event = Event {
                    event_type: e.event_type,
                    index: log.len() as u64,
                    session_id: session.clone(),
                    turn_id: e.turn_id,
                    at: at.clone(),
                    data: e.data,
                };
                log.push(event.clone());
                out.push(event);
            }
            Ok(out)
        })();
        if let Ok(events) = &appended {
            self.backend.shared.appended.notify_waiters();
            for e in events {
                let _ = self.tap.send(Arc::new(e.clone()));
            }
        }
        ready(appended)
    }

    fn fork<'a>(&'a self, from: &'a SessionId, at: u64, to: &'a SessionId) -> StoreFuture<'a, ()> {
        let mut data = self.data();
        let prefix: Vec<Event> = data
            .logs
            .get(&self.key(from.as_str()))
            .map(|log| log.iter().take(at as usize).cloned().collect())
            .unwrap_or_default();
        if (prefix.len() as u64) < at {
            return ready(Err(SharedError::Failed {
                message: format!(
                    "cannot fork `{from}` before event {at}: it has {}",
                    prefix.len()
                ),
            }));
        }
        let copies = prefix
            .into_iter()
            .map(|e| Event {
                session_id: to.clone(),
                ..e
            })
            .collect();
        data.logs.insert(self.key(to.as_str()), copies);
        ready(Ok(()))
    }

    fn read<'a>(&'a self, session: &'a SessionId, start: u64) -> StoreFuture<'a, Vec<Event>> {
        let data = self.data();
        let events = data
            .logs
            .get(&self.key(session.as_str()))
            .map(|log| log.iter().skip(start as usize).cloned().collect())
            .unwrap_or_default();
        ready(Ok(events))
    }

    fn read_stored<'a>(
        &'a self,
        session: &'a SessionId,
        start: u64,
    ) -> StoreFuture<'a, Vec<Event>> {
        self.read(session, start)
    }

    fn len<'a>(&'a self, session: &'a SessionId) -> StoreFuture<'a, u64> {
        let n = self
            .data()
            .logs
            .get(&self.key(session.as_str()))
            .map_or(0, Vec::len);
        ready(Ok(n as u64))
    }

    fn known_len(&self, _session: &SessionId) -> Option<u64> {
        None
    }

    fn tap(&self) -> broadcast::Receiver<Arc<Event>> {
        self.tap.subscribe()
    }

    fn subscribe<'a>(
        &'a self,
        session: &'a SessionId,
        start: u64,
    ) -> StoreFuture<'a, Box<dyn SharedFollow>> {
        ready(Ok(Box::new(MemoryFollow {
            shared: Arc::clone(&self.backend.shared),
            key: self.key(session.as_str()),
            next: start,
        }) as Box<dyn SharedFollow>))
    }
}

/// Following one session of an in-memory store.
#[derive(Debug)]
struct MemoryFollow {
    shared: Arc<Shared>,
    key: Key,
    next: u64,
}

impl SharedFollow for MemoryFollow {
    fn next(&mut self) -> StoreFuture<'_, Event> {
        Box::pin(async move {
            loop {
                let woken = self.shared.appended.notified();
                tokio::pin!(woken);
                woken.as_mut().enable();
                let event = lock(&self.shared.data)
                    .logs
                    .get(&self.key)
                    .and_then(|log| log.get(self.next as usize).cloned());
                if let Some(event) = event {
                    self.next += 1;
                    return Ok(event);
                }
                woken.await;
            }
        })
    }

    fn next_index(&self) -> u64 {
        self.next
    }
}

fn created_at(meta: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(meta).ok()?;
    value.get("createdAt")?.as_str().map(str::to_owned)
}

impl SharedIndex for Part {
    fn delete<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        let k = self.key(id);
        let mut data = self.data();
        data.logs.remove(&k);
        data.leases.remove(&k);
        ready(Ok(data.sessions.remove(&k).is_some()))
    }

    fn put_detached(&self, row: SessionRow) {
        if let Err(e) = futures_util::FutureExt::now_or_never(self.put(&row)).unwrap_or(Ok(())) {
            tracing::warn!(error = %e, "cannot update the session index");
        }
    }

    fn put<'a>(&'a self, row: &'a SessionRow) -> StoreFuture<'a, ()> {
        let mut data = self.data();
        let taken = !row.continuation.is_empty()
            && data.sessions.iter().any(|((agent, id), other)| {
                *agent == self.agent
                    && *id != row.id
                    && other.channel == row.channel
                    && other.continuation == row.continuation
            });
        if taken {
            return ready(Err(SharedError::KeyTaken {
                channel: row.channel.clone(),
            }));
        }
        data.sessions.insert(self.key(&row.id), row.clone());
        ready(Ok(()))
    }

    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<String>> {
        let meta = self
            .data()
            .sessions
            .get(&self.key(id))
            .map(|r| r.meta.clone());
        ready(Ok(meta))
    }

    fn by_key<'a>(&'a self, channel: &'a str, key: &'a str) -> StoreFuture<'a, Option<String>> {
        let data = self.data();
        let id = data
            .sessions
            .iter()
            .find(|((agent, _), r)| {
                *agent == self.agent && r.channel == channel && r.continuation == key
            })
            .map(|(_, r)| r.id.clone());
        ready(Ok(id))
    }

    fn page<'a>(&'a self, q: PageQuery<'a>) -> StoreFuture<'a, Vec<String>> {
        let data = self.data();
        let metas = data
            .sessions
            .iter()
            .rev()
            .filter(|((agent, id), r)| {
                *agent == self.agent
                    && q.principal.is_none_or(|p| r.principal_id == p)
                    && q.channel.is_none_or(|c| r.channel == c)
                    && q.before.is_none_or(|b| id.as_str() < b)
                    && q.since
                        .is_none_or(|s| created_at(&r.meta).is_some_and(|at| at.as_str() >= s))
                    && q.updated_since.is_none_or(|s| r.updated_at.as_str() >= s)
                    && q.activity.is_none_or(|a| {
                        let running = data
                            .leases
                            .get(&(agent.clone(), id.clone()))
                            .is_some_and(|l| l.held && !data.dead.contains(&l.owner));
                        match a {
                            Activity::Running => running && !r.parked,
                            Activity::WaitingApproval => r.parked,
                            Activity::Idle => !running && !r.parked,
                        }
                    })
            })
            .take(usize::try_from(q.limit).unwrap_or(0))
            .map(|(_, r)| r.meta.clone())
            .collect();
        ready(Ok(metas))
    }

    fn count(&self) -> StoreFuture<'_, u64> {
        let n = self
            .data()
            .sessions
            .keys()
            .filter(|(agent, _)| *agent == self.agent)
            .count();
        ready(Ok(n as u64))
    }

    fn parked(&self) -> StoreFuture<'_, Vec<String>> {
        let metas = self
            .data()
            .sessions
            .iter()
            .filter(|((agent, _), r)| *agent == self.agent && r.parked)
            .map(|(_, r)| r.meta.clone())
            .collect();
        ready(Ok(metas))
    }

    fn stale<'a>(&'a self, which: Stale<'a>, limit: i64) -> StoreFuture<'a, Vec<String>> {
        let data = self.data();
        // Newest first, as `Beyond` counts them.
        let mut rows: Vec<&SessionRow> = data
            .sessions
            .iter()
            .filter(|((agent, _), _)| *agent == self.agent)
            .map(|(_, r)| r)
            .collect();
        rows.sort_by(|a, b| (&b.updated_at, &b.id).cmp(&(&a.updated_at, &a.id)));
        let picked: Vec<&SessionRow> = match which {
            Stale::UpdatedBefore(at) => rows
                .into_iter()
                .filter(|r| r.updated_at.as_str() < at)
                .collect(),
            Stale::Beyond(keep) => rows
                .into_iter()
                .skip(usize::try_from(keep).unwrap_or(usize::MAX))
                .collect(),
        };
        let ids = picked
            .into_iter()
            .rev()
            .filter(|r| !r.parked)
            .take(usize::try_from(limit).unwrap_or(0))
            .map(|r| r.id.clone())
            .collect();
        ready(Ok(ids))
    }
}

impl SharedLeases for Part {
    fn owner(&self) -> &str {
        self.me()
    }

    fn holds(&self, session: &str) -> bool {
        let data = self.data();
        !data.dead.contains(self.me())
            && data
                .leases
                .get(&self.key(session))
                .is_some_and(|l| l.held && l.owner == self.me())
    }

    fn hold<'a>(&'a self, session: &'a str) -> StoreFuture<'a, bool> {
        let mut data = self.data();
        ready(self.take(&mut data, session))
    }

    fn acquire<'a>(&'a self, session: &'a str) -> StoreFuture<'a, ()> {
        let mut data = self.data();
        ready(self.take(&mut data, session).map(|_| ()))
    }

    fn holder<'a>(&'a self, session: &'a str) -> StoreFuture<'a, Option<String>> {
        let data = self.data();
        ready(Ok(self.holder_in(&data, session)))
    }

    fn release<'a>(&'a self, session: &'a str) -> StoreFuture<'a, ()> {
        let mut data = self.data();
        if let Some(l) = data.leases.get_mut(&self.key(session))
            && l.owner == self.me()
        {
            l.held = false;
        }
        ready(Ok(()))
    }

    fn orphaned(&self, limit: i64) -> StoreFuture<'_, Vec<String>> {
        let data = self.data();
        let ids = data
            .leases
            .iter()
            .filter(|((agent, _), l)| {
                *agent == self.agent && l.held && data.dead.contains(&l.owner)
            })
            .map(|((_, id), _)| id.clone())
            .take(usize::try_from(limit).unwrap_or(0))
            .collect();
        ready(Ok(ids))
    }
}

impl Part {
    fn claim_where(&self, owner: &str, limit: usize, only: Option<&str>) -> Vec<Mail> {
        let mut data = self.data();
        let mut claimable = Vec::new();
        for (i, row) in data.mail.iter().enumerate() {
            if claimable.len() >= limit {
                break;
            }
            let held_elsewhere = data
                .leases
                .get(&key(&row.agent, &row.mail.session))
                .is_some_and(|l| l.held && l.owner != owner && !data.dead.contains(&l.owner));
            if row.state == MailState::Pending
                && !held_elsewhere
                && only.map_or(row.agent == self.agent, |id| row.mail.id == id)
            {
                claimable.push(i);
            }
        }
        claimable
            .into_iter()
            .map(|i| {
                let row = &mut data.mail[i];
                row.state = MailState::Claimed {
                    by: owner.to_owned(),
                };
                row.mail.clone()
            })
            .collect()
    }

    /// Applies `change` to request `id` while `owner` has it claimed: its
    /// agent and session, or `None` when it is not claimed by `owner`.
    fn settle_claimed(
        &self,
        id: &str,
        owner: &str,
        change: impl FnOnce(&mut MailRow),
    ) -> Option<(String, String)> {
        let mut data = self.data();
        let claimed = MailState::Claimed {
            by: owner.to_owned(),
        };
        let row = data
            .mail
            .iter_mut()
            .find(|r| r.mail.id == id && r.state == claimed)?;
        change(row);
        Some((row.agent.clone(), row.mail.session.clone()))
    }

    fn signal(&self, signal: MailSignal) {
        let _ = self.backend.shared.mail.send(signal);
    }
}

impl SharedMailbox for Part {
    fn signals(&self) -> broadcast::Receiver<MailSignal> {
        self.backend.shared.mail.subscribe()
    }

    fn post<'a>(
        &'a self,
        id: &'a str,
        session: &'a str,
        kind: &'a str,
        payload: &'a str,
        principal: &'a str,
        _sender: &'a str,
    ) -> StoreFuture<'a, ()> {
        {
            self.data().mail.push(MailRow {
                agent: self.agent.clone(),
                mail: Mail {
                    id: id.to_owned(),
                    session: session.to_owned(),
                    kind: kind.to_owned(),
                    payload: payload.to_owned(),
                    principal_id: principal.to_owned(),
                },
                state: MailState::Pending,
                settled_at: None,
            });
        }
        self.signal(MailSignal::Posted {
            agent: self.agent.clone(),
            session: session.to_owned(),
        });
        ready(Ok(()))
    }

    fn claim<'a>(&'a self, owner: &'a str, limit: i64) -> StoreFuture<'a, Vec<Mail>> {
        ready(Ok(self.claim_where(
            owner,
            usize::try_from(limit).unwrap_or(0),
            None,
        )))
    }

    fn claim_one<'a>(&'a self, id: &'a str, owner: &'a str) -> StoreFuture<'a, Option<Mail>> {
        ready(Ok(self.claim_where(owner, 1, Some(id)).pop()))
    }

    fn finish<'a>(&'a self, id: &'a str, owner: &'a str, outcome: &'a str) -> StoreFuture<'a, ()> {
        let done = self.settle_claimed(id, owner, |row| {
            row.state = MailState::Done {
                outcome: outcome.to_owned(),
            };
            row.settled_at = Some(Instant::now());
        });
        if done.is_some() {
            self.signal(MailSignal::Done { id: id.to_owned() });
        }
        ready(Ok(()))
    }

    fn unclaim<'a>(&'a self, id: &'a str, owner: &'a str) -> StoreFuture<'a, ()> {
        let back = self.settle_claimed(id, owner, |row| row.state = MailState::Pending);
        if let Some((agent, session)) = back {
            self.signal(MailSignal::Posted { agent, session });
        }
        ready(Ok(()))
    }

    fn state<'a>(&'a self, id: &'a str) -> StoreFuture<'a, MailState> {
        let state = self
            .data()
            .mail
            .iter()
            .find(|r| r.mail.id == id)
            .map_or(MailState::Gone, |r| r.state.clone());
        ready(Ok(state))
    }

    fn abandon<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        let mut data = self.data();
        let abandoned = match data
            .mail
            .iter_mut()
            .find(|r| r.mail.id == id && r.state == MailState::Pending)
        {
            Some(row) => {
                row.state = MailState::Gone;
                row.settled_at = Some(Instant::now());
                true
            }
            None => false,
        };
        ready(Ok(abandoned))
    }

    fn forget<'a>(&'a self, id: &'a str) -> StoreFuture<'a, ()> {
        self.data().mail.retain(|r| r.mail.id != id);
        ready(Ok(()))
    }

    fn purge(&self, hours: f64) -> StoreFuture<'_, u64> {
        let horizon = Duration::from_secs_f64((hours * 3600.0).max(0.0));
        let mut data = self.data();
        let before = data.mail.len();
        data.mail.retain(|r| {
            r.agent != self.agent || r.settled_at.is_none_or(|at| at.elapsed() < horizon)
        });
        ready(Ok((before - data.mail.len()) as u64))
    }
}

impl SharedReminders for Part {
    fn insert<'a>(&'a self, rows: &'a [ReminderRecord]) -> StoreFuture<'a, ()> {
        let mut data = self.data();
        for r in rows {
            data.reminders.insert(self.key(&r.id), (r.clone(), None));
        }
        ready(Ok(()))
    }

    fn update<'a>(
        &'a self,
        r: &'a ReminderRecord,
        claimed_by: Option<&'a str>,
    ) -> StoreFuture<'a, bool> {
        let mut data = self.data();
        let Some((row, claim)) = data.reminders.get_mut(&self.key(&r.id)) else {
            return ready(Ok(false));
        };
        if let Some(host) = claimed_by
            && (claim.as_ref().is_none_or(|(by, _)| by != host) || row.status != "armed")
        {
            return ready(Ok(false));
        }
        row.session_id.clone_from(&r.session_id);
        row.status.clone_from(&r.status);
        row.reason.clone_from(&r.reason);
        row.next_fire_at_ms = r.next_fire_at_ms;
        row.fire_count = r.fire_count;
        row.last_fired_at_ms = r.last_fired_at_ms;
        *claim = None;
        ready(Ok(true))
    }

    fn bind<'a>(&'a self, id: &'a str, session: &'a str) -> StoreFuture<'a, ()> {
        if let Some((row, _)) = self.data().reminders.get_mut(&self.key(id)) {
            row.session_id = Some(session.to_owned());
        }
        ready(Ok(()))
    }

    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<ReminderRecord>> {
        let row = self
            .data()
            .reminders
            .get(&self.key(id))
            .map(|(r, _)| r.clone());
        ready(Ok(row))
    }

    fn list(&self, limit: i64) -> StoreFuture<'_, Vec<ReminderRecord>> {
        let data = self.data();
        let mut rows: Vec<ReminderRecord> = data
            .reminders
            .iter()
            .filter(|((agent, _), _)| *agent == self.agent)
            .map(|(_, (r, _))| r.clone())
            .collect();
        rows.sort_by(|a, b| (b.created_at_ms, &b.id).cmp(&(a.created_at_ms, &a.id)));
        rows.truncate(usize::try_from(limit).unwrap_or(0));
        ready(Ok(rows))
    }

    fn armed(&self) -> StoreFuture<'_, i64> {
        let n = self
            .data()
            .reminders
            .iter()
            .filter(|((agent, _), (r, _))| *agent == self.agent && r.status == "armed")
            .count();
        ready(Ok(n as i64))
    }

    fn claim_due<'a>(
        &'a self,
        now_ms: i64,
        limit: i64,
        host: &'a str,
        claim_secs: f64,
    ) -> StoreFuture<'a, Vec<ReminderRecord>> {
        let now = Instant::now();
        let until = now + Duration::from_secs_f64(claim_secs.max(0.0));
        let mut data = self.data();
        let mut due: Vec<(i64, Key)> = data
            .reminders
            .iter()
            .filter(|((agent, _), (r, claim))| {
                *agent == self.agent
                    && r.status == "armed"
                    && r.next_fire_at_ms.is_some_and(|at| at <= now_ms)
                    && claim.as_ref().is_none_or(|(_, until)| *until < now)
            })
            .map(|(k, (r, _))| (r.next_fire_at_ms.unwrap_or_default(), k.clone()))
            .collect();
        due.sort();
        due.truncate(usize::try_from(limit).unwrap_or(0));
        let claimed = due
            .into_iter()
            .filter_map(|(_, k)| {
                let (row, claim) = data.reminders.get_mut(&k)?;
                *claim = Some((host.to_owned(), until));
                Some(row.clone())
            })
            .collect();
        ready(Ok(claimed))
    }

    fn claim_one<'a>(
        &'a self,
        id: &'a str,
        host: &'a str,
        claim_secs: f64,
    ) -> StoreFuture<'a, Option<ReminderRecord>> {
        let now = Instant::now();
        let mut data = self.data();
        let claimed = data
            .reminders
            .get_mut(&self.key(id))
            .filter(|(r, claim)| {
                r.status == "armed" && claim.as_ref().is_none_or(|(_, until)| *until < now)
            })
            .map(|(r, claim)| {
                *claim = Some((
                    host.to_owned(),
                    now + Duration::from_secs_f64(claim_secs.max(0.0)),
                ));
                r.clone()
            });
        ready(Ok(claimed))
    }

    fn next_due(&self) -> StoreFuture<'_, Option<i64>> {
        let now = Instant::now();
        let next = self
            .data()
            .reminders
            .iter()
            .filter(|((agent, _), (r, claim))| {
                *agent == self.agent
                    && r.status == "armed"
                    && claim.as_ref().is_none_or(|(_, until)| *until < now)
            })
            .filter_map(|(_, (r, _))| r.next_fire_at_ms)
            .min();
        ready(Ok(next))
    }
}

impl SharedTicks for Part {
    fn claim_tick<'a>(
        &'a self,
        schedule: &'a str,
        tick_ms: i64,
        _host: &'a str,
    ) -> StoreFuture<'a, bool> {
        let first = self
            .data()
            .ticks
            .insert((self.agent.clone(), schedule.to_owned(), tick_ms));
        ready(Ok(first))
    }

    fn day_usage<'a>(&'a self, day: &'a str) -> StoreFuture<'a, (i64, i64)> {
        let usage = self
            .data()
            .usage
            .get(&self.key(day))
            .copied()
            .unwrap_or_default();
        ready(Ok(usage))
    }

    fn add_day_usage<'a>(&'a self, day: &'a str, input: i64, output: i64) -> StoreFuture<'a, ()> {
        let mut data = self.data();
        let usage = data.usage.entry(self.key(day)).or_default();
        usage.0 += input;
        usage.1 += output;
        ready(Ok(()))
    }

    fn day_cost<'a>(&'a self, day: &'a str) -> StoreFuture<'a, i64> {
        let cost = self
            .data()
            .cost
            .get(&self.key(day))
            .copied()
            .unwrap_or_default();
        ready(Ok(cost))
    }

    fn add_day_cost<'a>(&'a self, day: &'a str, nano_usd: i64) -> StoreFuture<'a, ()> {
        let mut data = self.data();
        *data.cost.entry(self.key(day)).or_default() += nano_usd;
        ready(Ok(()))
    }
}

impl Part {
    fn assign(
        data: &mut Data,
        agent: &str,
        session: &str,
        purpose: Option<&str>,
        assignments: &[(String, Option<String>)],
    ) {
        for (experiment, variant) in assignments {
            let known = data
                .assignments
                .iter()
                .any(|a| a.agent == agent && a.session == session && a.experiment == *experiment);
            if !known {
                data.assignments.push(Assignment {
                    agent: agent.to_owned(),
                    session: session.to_owned(),
                    experiment: experiment.clone(),
                    variant: variant.clone(),
                    purpose: purpose.map(str::to_owned),
                });
            }
        }
    }

    /// The sessions assigned `variant` of `experiment`, and their purposes.
    fn enrolled(&self, data: &Data, experiment: &str, variant: &str) -> Vec<(String, bool)> {
        data.assignments
            .iter()
            .filter(|a| {
                a.agent == self.agent
                    && a.experiment == experiment
                    && a.variant.as_deref() == Some(variant)
            })
            .map(|a| (a.session.clone(), a.purpose.as_deref() == Some("eval")))
            .collect()
    }
}

impl SharedArtifacts for Part {
    fn tag<'a>(&'a self, row: &'a ArtifactRow, max: Option<i64>) -> StoreFuture<'a, Tagged> {
        let mut data = self.data();
        let agent = self.agent.clone();
        let existing = row.key.as_ref().and_then(|k| {
            data.artifacts
                .iter()
                .find(|((a, _), r)| *a == agent && r.kind == row.kind && r.key.as_ref() == Some(k))
                .map(|(_, r)| r.clone())
        });
        let (stored, updated) = match existing {
            Some(old) => (
                ArtifactRow {
                    id: old.id,
                    created_at_ms: old.created_at_ms,
                    ..row.clone()
                },
                true,
            ),
            None => (row.clone(), false),
        };
        data.artifacts
            .insert(key(&agent, &stored.id), stored.clone());
        let mut evicted = 0;
        if let Some(max) = max {
            let mut mine: Vec<(i64, String)> = data
                .artifacts
                .iter()
                .filter(|((a, _), _)| *a == agent)
                .map(|((_, id), r)| (r.updated_at_ms, id.clone()))
                .collect();
            let over = mine.len().saturating_sub(usize::try_from(max).unwrap_or(0));
            mine.sort();
            for (_, id) in mine.into_iter().take(over) {
                data.artifacts.remove(&key(&agent, &id));
                evicted += 1;
            }
        }
        ready(Ok(Tagged {
            row: stored,
            updated,
            evicted,
        }))
    }

    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<ArtifactRow>> {
        ready(Ok(self.data().artifacts.get(&self.key(id)).cloned()))
    }

    fn page<'a>(&'a self, q: ArtifactQuery<'a>) -> StoreFuture<'a, Vec<ArtifactRow>> {
        let data = self.data();
        let rows = data
            .artifacts
            .iter()
            .rev()
            .filter(|((a, id), r)| {
                *a == self.agent
                    && q.before.is_none_or(|b| id.as_str() < b)
                    && q.principal.is_none_or(|p| r.principal_id == p)
                    && q.session.is_none_or(|s| r.session_id == s)
                    && q.kind.is_none_or(|k| r.kind == k)
            })
            .take(usize::try_from(q.limit).unwrap_or(0))
            .map(|(_, r)| r.clone())
            .collect();
        ready(Ok(rows))
    }

    fn delete_session<'a>(&'a self, session: &'a str) -> StoreFuture<'a, u64> {
        let mut data = self.data();
        let before = data.artifacts.len();
        let agent = self.agent.clone();
        data.artifacts
            .retain(|(a, _), r| *a != agent || r.session_id != session);
        ready(Ok((before - data.artifacts.len()) as u64))
    }
}

impl SharedMemories for Part {
    fn insert<'a>(&'a self, row: &'a MemoryRow) -> StoreFuture<'a, ()> {
        self.data().memories.insert(self.key(&row.id), row.clone());
        ready(Ok(()))
    }

    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<MemoryRow>> {
        ready(Ok(self.data().memories.get(&self.key(id)).cloned()))
    }

    fn edit<'a>(
        &'a self,
        id: &'a str,
        text: &'a str,
        updated_at_ms: i64,
    ) -> StoreFuture<'a, Option<MemoryRow>> {
        let mut data = self.data();
        let row = data.memories.get_mut(&self.key(id)).map(|r| {
            r.text = text.to_owned();
            r.updated_at_ms = updated_at_ms;
            r.clone()
        });
        ready(Ok(row))
    }

    fn delete<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        ready(Ok(self.data().memories.remove(&self.key(id)).is_some()))
    }

    fn page<'a>(&'a self, q: MemoryQuery<'a>) -> StoreFuture<'a, Vec<MemoryRow>> {
        let data = self.data();
        let rows = data
            .memories
            .iter()
            .rev()
            .filter(|((a, id), r)| {
                *a == self.agent
                    && q.before.is_none_or(|b| id.as_str() < b)
                    && q.principal
                        .is_none_or(|p| r.scope == crate::AGENT_SCOPE || r.principal_id == p)
            })
            .take(usize::try_from(q.limit).unwrap_or(0))
            .map(|(_, r)| r.clone())
            .collect();
        ready(Ok(rows))
    }
}

impl SharedAb for Part {
    fn record_assignments<'a>(
        &'a self,
        session: &'a str,
        _principal: &'a str,
        purpose: Option<&'a str>,
        _at_ms: i64,
        assignments: &'a [(String, Option<String>)],
    ) -> StoreFuture<'a, ()> {
        let mut data = self.data();
        Part::assign(&mut data, &self.agent, session, purpose, assignments);
        ready(Ok(()))
    }

    fn record_turn<'a>(&'a self, turn: &'a AbTurn) -> StoreFuture<'a, ()> {
        self.data()
            .turns
            .entry((
                self.agent.clone(),
                turn.session_id.clone(),
                turn.turn_id.clone(),
            ))
            .or_insert_with(|| turn.clone());
        ready(Ok(()))
    }

    fn record_feedback<'a>(&'a self, f: AbFeedback<'a>) -> StoreFuture<'a, i64> {
        let mut data = self.data();
        Part::assign(&mut data, &self.agent, f.session, f.purpose, f.assignments);
        let id = data.feedback.len() as i64 + 1;
        data.feedback.push(Feedback {
            id,
            agent: self.agent.clone(),
            session: f.session.to_owned(),
            score: f.score,
            label: f.label.map(str::to_owned),
        });
        ready(Ok(id))
    }

    fn not_enrolled<'a>(&'a self, experiment: &'a str) -> StoreFuture<'a, i64> {
        let n = self
            .data()
            .assignments
            .iter()
            .filter(|a| a.agent == self.agent && a.experiment == experiment && a.variant.is_none())
            .count();
        ready(Ok(n as i64))
    }

    fn totals<'a>(&'a self, experiment: &'a str, variant: &'a str) -> StoreFuture<'a, AbTotals> {
        let data = self.data();
        let sessions = self.enrolled(&data, experiment, variant);
        let mut t = AbTotals {
            sessions: sessions.len() as i64,
            eval_sessions: sessions.iter().filter(|(_, eval)| *eval).count() as i64,
            ..AbTotals::default()
        };
        for (session, eval) in &sessions {
            for ((agent, s, _), turn) in &data.turns {
                if *agent != self.agent || s != session {
                    continue;
                }
                t.turns += 1;
                t.failed += i64::from(turn.outcome == "failed");
                t.interrupted += i64::from(turn.outcome == "interrupted");
                t.input_tokens += turn.input_tokens;
                t.output_tokens += turn.output_tokens;
                t.cache_read_tokens += turn.cache_read_tokens;
                t.cache_write_tokens += turn.cache_write_tokens;
                t.latency_sum += turn.latency_ms;
                t.latency_sum_sq += (turn.latency_ms as f64).powi(2);
                t.tool_calls += turn.tool_calls;
                t.tool_errors += turn.tool_errors;
            }
            let feedback = data
                .feedback
                .iter()
                .filter(|f| f.agent == self.agent && f.session == *session);
            let mut latest_eval: Option<&Feedback> = None;
            for f in feedback {
                if f.label.as_deref() == Some("eval") {
                    if latest_eval.is_none_or(|l| l.id < f.id) {
                        latest_eval = Some(f);
                    }
                } else {
                    t.feedback_n += 1;
                    t.feedback_sum += f.score;
                    t.feedback_sum_sq += f.score * f.score;
                }
            }
            if *eval && let Some(f) = latest_eval {
                t.eval_total += 1;
                t.eval_passed += i64::from(f.score >= 1.0);
            }
        }
        ready(Ok(t))
    }

    fn latency_at<'a>(
        &'a self,
        experiment: &'a str,
        variant: &'a str,
        rank: i64,
    ) -> StoreFuture<'a, Option<i64>> {
        let data = self.data();
        let sessions: HashSet<String> = self
            .enrolled(&data, experiment, variant)
            .into_iter()
            .map(|(s, _)| s)
            .collect();
        let mut latencies: Vec<i64> = data
            .turns
            .iter()
            .filter(|((agent, s, _), _)| *agent == self.agent && sessions.contains(s))
            .map(|(_, t)| t.latency_ms)
            .collect();
        latencies.sort_unstable();
        ready(Ok(usize::try_from(rank)
            .ok()
            .and_then(|r| latencies.get(r).copied())))
    }
}

impl SharedKv for Part {
    fn get<'a>(&'a self, key: &'a str, now: i64) -> StoreFuture<'a, Option<KvRow>> {
        let row = self
            .data()
            .kv
            .get(&self.key(key))
            .filter(|(_, expires)| expires.is_none_or(|at| at > now))
            .map(|(value, expires)| (key.to_owned(), value.clone(), *expires));
        ready(Ok(row))
    }

    fn set<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
        expires_at: Option<i64>,
        _now: i64,
    ) -> StoreFuture<'a, ()> {
        self.data()
            .kv
            .insert(self.key(key), (value.to_owned(), expires_at));
        ready(Ok(()))
    }

    fn delete<'a>(&'a self, key: &'a str, now: i64) -> StoreFuture<'a, bool> {
        let removed = self.data().kv.remove(&self.key(key));
        ready(Ok(removed.is_some_and(|(_, expires)| {
            expires.is_none_or(|at| at > now)
        })))
    }

    fn list<'a>(
        &'a self,
        prefix: &'a str,
        after: &'a str,
        limit: i64,
        now: i64,
    ) -> StoreFuture<'a, Vec<KvRow>> {
        let data = self.data();
        let rows = data
            .kv
            .range(self.key(prefix)..)
            .take_while(|((agent, k), _)| *agent == self.agent && k.starts_with(prefix))
            .filter(|((_, k), _)| k.as_bytes() > after.as_bytes())
            .filter(|(_, (_, expires))| expires.is_none_or(|at| at > now))
            .take(usize::try_from(limit).unwrap_or(0))
            .map(|((_, k), (value, expires))| (k.clone(), value.clone(), *expires))
            .collect();
        ready(Ok(rows))
    }
}

impl crate::SharedJournal for Part {
    fn append<'a>(&'a self, lines: Vec<String>, keep_bytes: Option<u64>) -> StoreFuture<'a, ()> {
        let mut data = self.data();
        let journal = data.journal.entry(self.agent.clone()).or_default();
        journal.extend(lines);
        if let Some(keep) = keep_bytes {
            let kept = crate::newest_within(journal, keep);
            journal.drain(..journal.len() - kept);
        }
        ready(Ok(()))
    }

    fn recent<'a>(&'a self, max_bytes: u64) -> StoreFuture<'a, Vec<String>> {
        let data = self.data();
        let lines = data
            .journal
            .get(&self.agent)
            .map_or_else(Vec::new, |journal| {
                let kept = crate::newest_within(journal, max_bytes);
                journal[journal.len() - kept..].to_vec()
            });
        ready(Ok(lines))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use agentkit_protocol::EventType;
    use serde_json::json;

    use super::*;

    fn event() -> NewEvent {
        NewEvent {
            event_type: EventType::MessageReceived,
            turn_id: None,
            data: json!({"text": "hi"}),
        }
    }

    /// Pages by last activity and by what each session does: a live lease
    /// is running, a parked flag waits for approval (held or not), a dead
    /// host's lease counts for nothing.
    #[tokio::test]
    async fn pages_filter_by_last_activity_and_status() {
        let store = MemoryBackend::new();
        let (a, b) = (store.agent("bot", 8), store.host("host-2").agent("bot", 8));
        for (id, parked, at) in [
            ("ses_1", false, "2020-01-01T00:00:00.000Z"),
            ("ses_2", true, "2021-01-01T00:00:00.000Z"),
            ("ses_3", false, "2022-01-01T00:00:00.000Z"),
            ("ses_4", true, "2023-01-01T00:00:00.000Z"),
            ("ses_5", false, "2024-01-01T00:00:00.000Z"),
        ] {
            a.index
                .put(&SessionRow {
                    id: id.into(),
                    channel: "http".into(),
                    continuation: id.into(),
                    principal_id: "p".into(),
                    parked,
                    meta: json!({"id": id}).to_string(),
                    updated_at: at.into(),
                })
                .await
                .unwrap();
        }
        a.leases.hold("ses_3").await.unwrap();
        a.leases.hold("ses_4").await.unwrap();
        b.leases.hold("ses_5").await.unwrap();
        let ids = |metas: Vec<String>| -> Vec<String> {
            metas
                .iter()
                .map(|m| {
                    serde_json::from_str::<serde_json::Value>(m).unwrap()["id"]
                        .as_str()
                        .unwrap()
                        .to_owned()
                })
                .collect()
        };
        let page = |activity, updated_since| {
            let index = b.index.clone();
            async move {
                ids(index
                    .page(PageQuery {
                        activity,
                        updated_since,
                        limit: 10,
                        ..PageQuery::default()
                    })
                    .await
                    .unwrap())
            }
        };
        assert_eq!(
            page(Some(Activity::Running), None).await,
            ["ses_5", "ses_3"]
        );
        assert_eq!(
            page(Some(Activity::WaitingApproval), None).await,
            ["ses_4", "ses_2"]
        );
        assert_eq!(page(Some(Activity::Idle), None).await, ["ses_1"]);
        assert_eq!(
            page(None, Some("2022-01-01T00:00:00.000Z")).await,
            ["ses_5", "ses_4", "ses_3"]
        );
        store.stop_host("host-2");
        assert_eq!(page(Some(Activity::Running), None).await, ["ses_3"]);
        assert_eq!(page(Some(Activity::Idle), None).await, ["ses_5", "ses_1"]);
    }

    #[tokio::test]
    async fn one_writer_per_session_until_its_host_dies() {
        let store = MemoryBackend::new();
        let (a, b) = (store.agent("bot", 8), store.host("host-2").agent("bot", 8));
        let id = SessionId::parse("ses_1").unwrap();
        let first = a
            .log
            .append_batch(&id, vec![event(), event()])
            .await
            .unwrap();
        assert_eq!(first.iter().map(|e| e.index).collect::<Vec<_>>(), [0, 1]);
        assert!(a.leases.holds("ses_1"), "the first append took the lease");
        assert!(matches!(
            b.log.append_batch(&id, vec![event()]).await,
            Err(SharedError::Busy { holder, .. }) if holder == "host-1"
        ));
        assert_eq!(
            b.leases.holder("ses_1").await.unwrap().as_deref(),
            Some("host-1")
        );
        // Host 1 stops renewing: its session is orphaned, host 2 takes it
        // over (saying so), and host 1 can no longer write.
        store.stop_host("host-1");
        assert_eq!(b.leases.orphaned(10).await.unwrap(), ["ses_1"]);
        assert!(b.leases.hold("ses_1").await.unwrap(), "a takeover");
        assert!(matches!(
            a.log.append_batch(&id, vec![event()]).await,
            Err(SharedError::Fenced { .. })
        ));
        let next = b.log.append_batch(&id, vec![event()]).await.unwrap();
        assert_eq!(next[0].index, 2);
        assert!(b.leases.orphaned(10).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn mail_is_claimed_by_the_holder_and_applied_once() {
        let store = MemoryBackend::new();
        let (a, b) = (store.agent("bot", 8), store.host("host-2").agent("bot", 8));
        let id = SessionId::parse("ses_1").unwrap();
        a.log.append_batch(&id, vec![event()]).await.unwrap();
        let mut signals = a.mailbox.signals();
        b.mailbox
            .post("m1", "ses_1", "stop", "{}", "alice", "host-2")
            .await
            .unwrap();
        assert!(matches!(
            signals.recv().await,
            Ok(MailSignal::Posted { .. })
        ));
        assert!(
            b.mailbox.claim("host-2", 10).await.unwrap().is_empty(),
            "held by host 1"
        );
        let claimed = a.mailbox.claim("host-1", 10).await.unwrap();
        assert_eq!(claimed.len(), 1);
        assert!(
            a.mailbox.claim("host-1", 10).await.unwrap().is_empty(),
            "once"
        );
        assert!(
            !b.mailbox.abandon("m1").await.unwrap(),
            "claimed: not abandoned"
        );
        a.mailbox
            .finish("m1", "host-1", "{\"ok\":true}")
            .await
            .unwrap();
        assert_eq!(
            b.mailbox.state("m1").await.unwrap(),
            MailState::Done {
                outcome: "{\"ok\":true}".into()
            }
        );
    }
}
