//! The file backend: one `sessions/<id>/events.ndjson` per session, a
//! writer per session behind a short lock, and group commit.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use agentkit_protocol::{Event, EventData, EventType, SessionId};
use chrono::{SecondsFormat, Utc};
use hashlink::LinkedHashMap;
use serde_json::Value;
use tokio::sync::{OnceCell, broadcast, watch};

use crate::base::{self, Base, Piece};
use crate::error::{Error, Result};
use crate::journal::Journal;
use crate::recovery::{Only, Recovered, parse_lines_of, recover};
use crate::spare::Spares;
use crate::subscription::Subscription;
use crate::sync::{SyncJob, SyncStats, Syncer};
use crate::text::{self, Rebuild};

/// The name of a session's log inside its directory.
pub(crate) const LOG_FILE: &str = "events.ndjson";

/// How a [`FileEventStore`] buffers and fans out.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// How many events a live subscriber may fall behind before it has to
    /// catch up from the file (it never loses events; it only pays a read).
    pub broadcast_capacity: usize,
    /// The most session logs kept open (one descriptor each) while nobody
    /// uses them: past it, the least recently used idle logs are closed
    /// and reopened on next use. Logs in use (followed, being appended to)
    /// stay open whatever this says.
    pub max_open_logs: usize,
    /// How many events a [`FileEventStore::tap`] receiver may fall behind
    /// before it misses some (it is told how many, as `Lagged`).
    pub tap_capacity: usize,
    /// Make syncs durable through the store's journal (`<root>/journal/`):
    /// one `fdatasync` per batch of settling sessions instead of one per
    /// log and folder. On by default; Linux only (elsewhere each log is
    /// synced itself, as when this is off).
    pub journal: bool,
    /// How old a journal segment gets before the next sync starts a new
    /// one and checkpoints the old (a `syncfs` in the background, then
    /// the segment is deleted). Bounds what a start after a power cut
    /// replays.
    pub journal_checkpoint: std::time::Duration,
    /// How long a new session's log stays in its spare folder before the
    /// background moves it to `sessions/<id>` (see
    /// [`FileEventStore::create`]). Zero (the default): as soon as the
    /// background runs. Readers find the session either way; a longer
    /// delay batches the moves (and lets a test stop a server before
    /// one).
    pub spare_move_after: std::time::Duration,
    /// Descriptors the spare logs leave free below the soft limit: no
    /// spare is made while fewer remain. `None` (the default): a quarter
    /// of the limit. A host passes its turn gate's headroom
    /// (`--fd-headroom`) so that, however large it is set, the spares
    /// never take what the gate keeps for running turns (the larger of
    /// the two applies).
    pub spare_fd_reserve: Option<u64>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            broadcast_capacity: 128,
            max_open_logs: 128,
            tap_capacity: 4096,
            journal: true,
            journal_checkpoint: std::time::Duration::from_secs(1),
            spare_move_after: std::time::Duration::ZERO,
            spare_fd_reserve: None,
        }
    }
}

/// An event to append: the store adds `index`, `sessionId` and `at`.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// What happened.
    pub event_type: EventType,
    /// The turn it belongs to, if any.
    pub turn_id: Option<String>,
    /// The payload.
    pub data: Value,
}

impl NewEvent {
    /// A new event of `data`'s type: the payload is written as readers
    /// read it ([`EventData::to_value`]). Writers above the store build
    /// events this way only (`cargo xtask tidy` checks).
    pub fn new(turn_id: Option<String>, data: EventData) -> NewEvent {
        NewEvent {
            event_type: data.event_type(),
            turn_id,
            data: data.to_value(),
        }
    }

    /// A copy of a stored event, to append to another session's log (a
    /// fork): the same type, turn and payload, written as it was read.
    pub fn copy_of(event: &Event) -> NewEvent {
        NewEvent {
            event_type: event.event_type,
            turn_id: event.turn_id.clone(),
            data: event.data.clone(),
        }
    }
}

/// The durable event store on the local file system.
///
/// Cheap to clone; clones share the open logs.
#[derive(Debug, Clone)]
pub struct FileEventStore {
    inner: Arc<Inner>,
}

/// The open logs, least recently asked for first.
#[derive(Debug, Default)]
struct LogTable {
    slots: LinkedHashMap<SessionId, Slot>,
}

#[derive(Debug)]
struct Slot {
    cell: Arc<OnceCell<Arc<SessionLog>>>,
}

impl Slot {
    /// Nobody but the table holds this log (or its opening): closing it
    /// now cannot split one session over two open logs.
    fn is_idle(&self) -> bool {
        Arc::strong_count(&self.cell) == 1
            && self
                .cell
                .get()
                .is_none_or(|log| Arc::strong_count(log) == 1)
    }
}

impl LogTable {
    /// Closes the least recently used idle logs until at most
    /// three quarters of `max` are open (so the scan is rare).
    fn close_idle(&mut self, max: usize) {
        if self.slots.len() <= max {
            return;
        }
        let target = max - max / 4;
        let excess = self.slots.len().saturating_sub(target);
        // From the least recently used on: the logs in use are skipped.
        let idle: Vec<SessionId> = self
            .slots
            .iter()
            .filter(|(_, slot)| slot.is_idle())
            .map(|(id, _)| id.clone())
            .take(excess)
            .collect();
        for id in idle {
            self.slots.remove(&id);
        }
    }
}

#[derive(Debug)]
struct Inner {
    sessions_dir: PathBuf,
    options: StoreOptions,
    /// Logs are opened (and recovered) on first use; the cell makes sure
    /// that happens once even when several callers arrive together.
    logs: Mutex<LogTable>,
    /// Every published event of every session, for observers (hooks,
    /// channel deliveries).
    tap: broadcast::Sender<Arc<Event>>,
    /// Every `fsync` of the store (group commit across sessions).
    syncer: Arc<Syncer>,
    /// How long appends and syncs took, summed (for `/metrics`).
    latency: Latency,
}

#[derive(Debug, Default)]
struct Latency {
    appends: std::sync::atomic::AtomicU64,
    append_nanos: std::sync::atomic::AtomicU64,
    syncs: std::sync::atomic::AtomicU64,
    sync_nanos: std::sync::atomic::AtomicU64,
}

fn record(
    count: &std::sync::atomic::AtomicU64,
    nanos: &std::sync::atomic::AtomicU64,
    began: std::time::Instant,
) {
    use std::sync::atomic::Ordering;
    count.fetch_add(1, Ordering::Relaxed);
    nanos.fetch_add(
        u64::try_from(began.elapsed().as_nanos()).unwrap_or(u64::MAX),
        Ordering::Relaxed,
    );
}

/// How many appends (batches) and syncs a store did, and how long they
/// took in all, since it opened: a mean latency is the ratio of the
/// rates.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StoreLatency {
    pub appends: u64,
    pub append_seconds: f64,
    pub syncs: u64,
    pub sync_seconds: f64,
}

impl FileEventStore {
    /// Opens the store rooted at `root`, creating `<root>/sessions/`.
    /// Session logs are opened and recovered lazily, on first use.
    pub fn open(root: &Path, options: StoreOptions) -> Result<FileEventStore> {
        let sessions_dir = root.join("sessions");
        std::fs::create_dir_all(&sessions_dir)
            .map_err(|e| Error::io("create directory", &sessions_dir, e))?;
        let journal = if options.journal {
            Journal::open(root, &sessions_dir, options.journal_checkpoint)?
        } else {
            // Spares an earlier, journaled start left behind are moved in
            // place all the same (see `spare.rs`).
            crate::journal::recover_spares(root, &sessions_dir)?;
            None
        };
        // Spares only with the journal: a new session's first sync must
        // not need its folder (the journal's record at offset 0 makes it).
        let spares = journal.is_some().then(|| {
            Spares::new(
                root,
                &sessions_dir,
                options.spare_move_after,
                options.spare_fd_reserve,
            )
        });
        Ok(FileEventStore {
            inner: Arc::new(Inner {
                syncer: Syncer::new(sessions_dir.clone(), journal, spares),
                sessions_dir,
                tap: broadcast::channel(options.tap_capacity.max(1)).0,
                options,
                logs: Mutex::new(LogTable::default()),
                latency: Latency::default(),
            }),
        })
    }

    /// Appends one event to `session` (creating its log if needed) and
    /// returns it with its index and timestamp. When this returns, the event
    /// has reached the OS and live subscribers have been sent it.
    pub async fn append(
        &self,
        session: &SessionId,
        event_type: EventType,
        turn_id: Option<&str>,
        data: Value,
    ) -> Result<Arc<Event>> {
        let new = NewEvent {
            event_type,
            turn_id: turn_id.map(str::to_owned),
            data,
        };
        let mut events = self.append_batch(session, vec![new]).await?;
        events
            .pop()
            .ok_or_else(|| Error::Task("append wrote no event".to_owned()))
    }

    /// Appends `events` with contiguous indices, under one lock and one
    /// write: the cheap way to record a burst of deltas.
    pub async fn append_batch(
        &self,
        session: &SessionId,
        events: Vec<NewEvent>,
    ) -> Result<Vec<Arc<Event>>> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let began = std::time::Instant::now();
        let appended = self.log(session, true).await?.append(events).await;
        let l = &self.inner.latency;
        record(&l.appends, &l.append_nanos, began);
        appended
    }

    /// Makes `to` a fork of `from` before its event `at` (`1..=len`):
    /// `to`'s log starts with `from`'s events `0..at` (their session id
    /// is `to`'s when read), shared, not copied: a few hard links and one
    /// small file, whatever `at` (see `base.rs`). `to` must have no log.
    /// Nothing is published: the events happened in the original. The
    /// next append to `to` gets index `at`.
    pub async fn fork(&self, from: &SessionId, at: u64, to: &SessionId) -> Result<()> {
        let began = std::time::Instant::now();
        // The original's own file must be where its name says.
        self.make_folder(from).await?;
        let log = self.log(from, false).await?;
        let pieces = log.fork_pieces(at).await?;
        drop(log);
        let (dir, from, to) = (self.inner.sessions_dir.clone(), from.clone(), to.clone());
        blocking(move || base::make(&dir, &from, at, &to, &pieces)).await?;
        let l = &self.inner.latency;
        record(&l.appends, &l.append_nanos, began);
        Ok(())
    }

    /// [`append_batch`](Self::append_batch) of the first events of a
    /// session whose id was just made (the caller knows no log of it
    /// exists): with the journal on, the log is a spare made in the
    /// background, so this touches no file system metadata (no `stat`,
    /// `mkdir` or `create`) and needs no trip to the blocking pool. Its
    /// folder is moved to `sessions/<id>` in the background; until then
    /// [`has_log`](Self::has_log) says it exists and every read works.
    pub async fn create(
        &self,
        session: &SessionId,
        events: Vec<NewEvent>,
    ) -> Result<Vec<Arc<Event>>> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let began = std::time::Instant::now();
        let log = match self.spare_log(session) {
            Some(log) => log,
            None => self.log(session, true).await?,
        };
        let appended = log.append(events).await;
        let l = &self.inner.latency;
        record(&l.appends, &l.append_nanos, began);
        appended
    }

    /// A new log for `session` on a spare, registered as open, if one is
    /// ready and `session` has no open log.
    fn spare_log(&self, session: &SessionId) -> Option<Arc<SessionLog>> {
        let spares = self.inner.syncer.spares()?;
        let mut logs = lock(&self.inner.logs);
        if logs.slots.contains_key(session) {
            return None;
        }
        let file = spares.take(session)?;
        let log = Arc::new(SessionLog::new(&self.inner, session.clone(), file, None));
        logs.slots.insert(
            session.clone(),
            Slot {
                cell: Arc::new(OnceCell::from(Arc::clone(&log))),
            },
        );
        logs.close_idle(self.inner.options.max_open_logs.max(1));
        Some(log)
    }

    /// Whether `session` has a log: its folder, or a spare not yet moved
    /// there (see [`create`](Self::create)). A `stat` unless it is a
    /// spare.
    pub fn has_log(&self, session: &SessionId) -> bool {
        // The spare first: once it is no longer held, its folder is there.
        self.inner
            .syncer
            .spares()
            .is_some_and(|spares| spares.holds(session))
            || self
                .inner
                .sessions_dir
                .join(session.as_str())
                .join(LOG_FILE)
                .is_file()
    }

    /// Makes sure `session`'s folder is `sessions/<id>` (moves it there
    /// now if it is still a spare): for whoever writes into the folder
    /// itself (a workspace, a snapshot) or deletes it.
    pub async fn make_folder(&self, session: &SessionId) -> Result<()> {
        let Some(spares) = self.inner.syncer.spares() else {
            return Ok(());
        };
        if !spares.holds(session) {
            return Ok(());
        }
        let (spares, session) = (Arc::clone(spares), session.clone());
        blocking(move || spares.settle(&session)).await
    }

    /// Spare logs ready for new sessions now (none without the journal).
    pub fn spares_ready(&self) -> usize {
        self.inner.syncer.spares().map_or(0, |s| s.ready_now())
    }

    /// New sessions' folders moved from a spare since the store opened
    /// (the rest are still spares, or made by the request itself).
    pub fn spares_moved(&self) -> u64 {
        self.inner.syncer.spares().map_or(0, |s| s.moved())
    }

    /// How long appends and syncs took (see [`StoreLatency`]).
    pub fn latency(&self) -> StoreLatency {
        use std::sync::atomic::Ordering;
        let l = &self.inner.latency;
        StoreLatency {
            appends: l.appends.load(Ordering::Relaxed),
            append_seconds: l.append_nanos.load(Ordering::Relaxed) as f64 / 1e9,
            syncs: l.syncs.load(Ordering::Relaxed),
            sync_seconds: l.sync_nanos.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }

    /// [`append`](Self::append), then [`sync`](Self::sync): the event
    /// survives a power cut once this returns.
    pub async fn append_durable(
        &self,
        session: &SessionId,
        event_type: EventType,
        turn_id: Option<&str>,
        data: Value,
    ) -> Result<Arc<Event>> {
        let event = self.append(session, event_type, turn_id, data).await?;
        self.sync(session).await?;
        Ok(event)
    }

    /// How many log syncs this store did, and in how many batches (group
    /// commit across sessions: sessions settling together share a batch).
    pub fn sync_stats(&self) -> SyncStats {
        self.inner.syncer.stats()
    }

    /// Flushes and `fsync`s (`sync_data`) the session's log: a durable
    /// point. Everything appended before the call survives a power cut.
    pub async fn sync(&self, session: &SessionId) -> Result<()> {
        let began = std::time::Instant::now();
        let synced = self.sync_log(session).await;
        let l = &self.inner.latency;
        record(&l.syncs, &l.sync_nanos, began);
        synced
    }

    async fn sync_log(&self, session: &SessionId) -> Result<()> {
        let open = {
            let logs = lock(&self.inner.logs);
            logs.slots
                .get(session)
                .and_then(|slot| slot.cell.get().cloned())
        };
        if let Some(log) = open {
            let synced = log.sync().await;
            drop(log);
            // A log held while it synced was skipped by the last scan for
            // idle logs: scan again now that it is let go, or a burst of
            // syncs would leave the table above its bound until the next
            // session opens.
            let max = self.inner.options.max_open_logs.max(1);
            let mut logs = lock(&self.inner.logs);
            if logs.slots.len() > max {
                logs.close_idle(max);
            }
            return synced;
        }
        // A closed log has nothing buffered: everything appended reached
        // the OS before it was closed, so syncing the file is enough (no
        // need to open and recover it).
        let path = self
            .inner
            .sessions_dir
            .join(session.as_str())
            .join(LOG_FILE);
        let opened = {
            let path = path.clone();
            let (spares, session) = (self.inner.syncer.spares().cloned(), session.clone());
            blocking(move || {
                if let Some(spares) = spares {
                    spares.settle(&session)?;
                }
                match File::open(&path) {
                    Ok(file) => Ok(Some(file)),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                    Err(e) => Err(Error::io("open", &path, e)),
                }
            })
            .await?
        };
        let Some(file) = opened else {
            return Ok(());
        };
        self.inner
            .syncer
            .sync(SyncJob::File {
                file: Arc::new(file),
                path,
                // It may have been closed before its first sync.
                new_dir: true,
            })
            .await
    }

    /// Every event of `session` from `start_index` on, read from the file,
    /// in the wire shape (each `message.appended` with its cumulative
    /// `text`).
    pub async fn read(&self, session: &SessionId, start_index: u64) -> Result<Vec<Event>> {
        self.read_range(session, start_index, u64::MAX).await
    }

    /// Every event of `session` from `start_index` on, as stored: each
    /// `message.appended` carries its `delta` only. For readers that skip
    /// the deltas (the runtime's fold) and should not pay for rebuilding
    /// the text of every one.
    pub async fn read_stored(&self, session: &SessionId, start_index: u64) -> Result<Vec<Event>> {
        let log = self.log(session, false).await?;
        let end = log.published();
        log.read_range(start_index, end).await
    }

    /// The events of `session` before `end_index` whose type is one of
    /// `types`, as stored (like [`read_stored`](Self::read_stored)). The
    /// other lines are skipped without being parsed: the cheap way to
    /// fold a long log over a few kinds of event (a fork's checks).
    pub async fn read_stored_of(
        &self,
        session: &SessionId,
        end_index: u64,
        types: &[EventType],
    ) -> Result<Vec<Event>> {
        let log = self.log(session, false).await?;
        log.read_range_of(0, end_index, Only::types(types)).await
    }

    /// The events of `session` in `start_index..end_index` (clamped to what
    /// is stored), like [`read`](Self::read).
    pub async fn read_range(
        &self,
        session: &SessionId,
        start_index: u64,
        end_index: u64,
    ) -> Result<Vec<Event>> {
        let log = self.log(session, false).await?;
        let mut events = log.read_range(start_index, end_index).await?;
        let mut rebuild = if start_index == 0 {
            Rebuild::at_start()
        } else {
            Rebuild::default()
        };
        log.rebuild(&mut rebuild, start_index, &mut events).await?;
        Ok(events)
    }

    /// How many session logs are open now (one descriptor each).
    pub fn open_logs(&self) -> usize {
        lock(&self.inner.logs)
            .slots
            .values()
            .filter(|slot| slot.cell.get().is_some())
            .count()
    }

    /// Closes every open log nobody uses (an idle host lets go of its
    /// descriptors and buffers; a log is opened again when next asked
    /// for). Answers how many it closed.
    pub fn close_unused(&self) -> usize {
        let mut logs = lock(&self.inner.logs);
        let before = logs.slots.len();
        logs.slots.retain(|_, slot| !slot.is_idle());
        before - logs.slots.len()
    }

    /// Forgets `session`'s open log if nobody uses it (its folder was
    /// deleted, say). Returns whether it was dropped or was not open.
    pub fn close(&self, session: &SessionId) -> bool {
        let mut logs = lock(&self.inner.logs);
        match logs.slots.get(session) {
            Some(slot) if slot.is_idle() => {
                logs.slots.remove(session);
                true
            }
            Some(_) => false,
            None => true,
        }
    }

    /// Follows `session` from `start_index`: the subscription replays what
    /// is already stored and then yields live events, each exactly once and
    /// in index order, however appends race with this call.
    /// Every event of every session, live, from now on: each one once it
    /// has reached the OS, in index order per session. For observers that
    /// must never slow a turn down (hooks, channel deliveries): a receiver
    /// that falls more than `tap_capacity` events behind gets
    /// `RecvError::Lagged(n)` and should count the `n` it missed.
    pub fn tap(&self) -> broadcast::Receiver<Arc<Event>> {
        self.inner.tap.subscribe()
    }

    pub async fn subscribe(&self, session: &SessionId, start_index: u64) -> Result<Subscription> {
        let log = self.log(session, false).await?;
        // Taking the receiver and the length under the session lock means
        // every event is either below `replay_until` (read from the file) or
        // sent to this receiver; publishing happens under the same lock.
        let (receiver, replay_until, recent) = {
            let state = lock(&log.state);
            (
                log.sender.subscribe(),
                state.published,
                SessionLog::recent_from(&state, start_index),
            )
        };
        let mut subscription = Subscription::new(log, start_index, replay_until, receiver);
        if let Some(recent) = recent {
            subscription.seed(recent);
        }
        Ok(subscription)
    }

    /// How many events `session` holds.
    pub async fn len(&self, session: &SessionId) -> Result<u64> {
        Ok(self.log(session, false).await?.published())
    }

    /// The ids of every session with a log, sorted. Directories whose name
    /// is not a valid session id are skipped.
    pub async fn sessions(&self) -> Result<Vec<SessionId>> {
        let dir = self.inner.sessions_dir.clone();
        // Before the listing: a folder moved meanwhile is in one or the
        // other.
        let held = self
            .inner
            .syncer
            .spares()
            .map(|s| s.held())
            .unwrap_or_default();
        blocking(move || {
            let entries =
                std::fs::read_dir(&dir).map_err(|e| Error::io("read directory", &dir, e))?;
            let mut ids = Vec::new();
            for entry in entries {
                let entry = entry.map_err(|e| Error::io("read directory", &dir, e))?;
                let Some(id) = entry
                    .file_name()
                    .to_str()
                    .and_then(|name| SessionId::parse(name).ok())
                else {
                    continue;
                };
                if entry.path().join(LOG_FILE).is_file() {
                    ids.push(id);
                }
            }
            ids.extend(held);
            ids.sort();
            ids.dedup();
            Ok(ids)
        })
        .await
    }

    /// The open log of `session`, opening (and recovering) it on first use.
    /// Without `create`, a session with no log file is `SessionNotFound`.
    async fn log(&self, session: &SessionId, create: bool) -> Result<Arc<SessionLog>> {
        let cell = {
            let mut logs = lock(&self.inner.logs);
            let (cell, fresh) = match logs.slots.to_back(session) {
                Some(slot) => (Arc::clone(&slot.cell), false),
                None => {
                    let cell = Arc::default();
                    logs.slots.insert(
                        session.clone(),
                        Slot {
                            cell: Arc::clone(&cell),
                        },
                    );
                    (cell, true)
                }
            };
            if fresh {
                logs.close_idle(self.inner.options.max_open_logs.max(1));
            }
            cell
        };
        let log = cell
            .get_or_try_init(|| {
                let inner = Arc::clone(&self.inner);
                let session = session.clone();
                blocking(move || SessionLog::open(&inner, session, create).map(Arc::new))
            })
            .await?;
        Ok(Arc::clone(log))
    }
}

/// One session's open log.
#[derive(Debug)]
pub(crate) struct SessionLog {
    session: SessionId,
    path: PathBuf,
    state: Mutex<LogState>,
    /// Appenders between "about to take the lock" and "wrote my lines";
    /// the appender that brings it to zero flushes for everyone (group
    /// commit). No `.await` sits inside that window, so a cancelled append
    /// can never leave the count stuck.
    pending: AtomicUsize,
    sender: broadcast::Sender<Arc<Event>>,
    /// The store-wide tap (see [`FileEventStore::tap`]).
    tap: broadcast::Sender<Arc<Event>>,
    /// The published length, for appenders waiting on someone else's flush.
    flushed: watch::Sender<Flushed>,
    /// The log, opened for appending: one descriptor, written under the
    /// state lock and synced outside it.
    file: Arc<File>,
    /// A fork's first events, in its original's files (see `base.rs`);
    /// empty for any other log. The file above holds the events after.
    base: Arc<Base>,
    /// The log's folder is new: the first sync makes its entries durable
    /// too (not the create, so no fsync sits on the path of a request).
    new_entry: std::sync::atomic::AtomicBool,
    syncer: Arc<Syncer>,
}

#[derive(Debug, Clone, Copy)]
struct Flushed {
    published: u64,
    failed: bool,
}

#[derive(Debug)]
struct LogState {
    /// Encoded lines not yet written to the file (the group-commit
    /// buffer: the last appender of a group writes them all).
    buffer: Vec<u8>,
    /// Events written to the buffer (the next index to assign).
    len: u64,
    /// Events that reached the OS and were sent to subscribers.
    published: u64,
    /// The index of the file's first event: 0, or a fork's prefix length.
    first: u64,
    /// `offsets[i]`: where the line of event `first + i` starts.
    offsets: Vec<u64>,
    /// The logical file length, buffered bytes included.
    end: u64,
    /// Events written but not yet flushed, in index order.
    unpublished: Vec<Arc<Event>>,
    /// The last published events (at most [`RECENT_EVENTS`], and
    /// [`RECENT_BYTES`] of their lines): a follower that starts a little
    /// behind the end (the stream a client opens right after its `POST`)
    /// is served from here, without a trip to the blocking pool, an
    /// `open` and a parse of the file.
    recent: VecDeque<Arc<Event>>,
    /// The line bytes of `recent`.
    recent_bytes: u64,
    /// Reused encoding buffer.
    scratch: Vec<u8>,
    /// The first write error (as text, and what it ran out of); the log
    /// is read-only from then on.
    failed: Option<(String, Option<crate::Exhausted>)>,
    /// The file's bytes up to here are durable (synced, or journaled).
    synced: u64,
    /// Whether the bytes the file had when it was opened are durable is
    /// not known: the next sync `fdatasync`s the file itself, and only
    /// the ones after it may go through the journal.
    direct: bool,
}

impl SessionLog {
    fn open(inner: &Inner, session: SessionId, create: bool) -> Result<SessionLog> {
        // A log closed while its folder was still a spare: move it first.
        if let Some(spares) = inner.syncer.spares() {
            spares.settle(&session)?;
        }
        let dir = inner.sessions_dir.join(session.as_str());
        let path = dir.join(LOG_FILE);
        let exists = path.is_file();
        if !exists && !create {
            return Err(Error::SessionNotFound { session });
        }
        if !exists {
            std::fs::create_dir_all(&dir).map_err(|e| Error::io("create directory", &dir, e))?;
        }
        let base = if exists {
            Base::load(&dir)?
        } else {
            Base::default()
        };
        // Readable too: the journal reads back what a sync covers.
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)
            .map_err(|e| Error::io("open", &path, e))?;
        // A log this call made is empty: nothing to check.
        let recovered = if exists {
            Some(recover(&path, &session, base.len())?)
        } else {
            None
        };
        let mut log = SessionLog::new(inner, session, file, recovered);
        log.rest_on(base);
        Ok(log)
    }

    /// Puts this new log after a fork's prefix `base`.
    fn rest_on(&mut self, base: Base) {
        let first = base.len();
        if first == 0 {
            return;
        }
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        state.first = first;
        state.len += first;
        state.published += first;
        let published = state.published;
        self.flushed.send_modify(|f| f.published = published);
        self.base = Arc::new(base);
    }

    /// The log of `session` over `file`, opened for reading and appending:
    /// `recovered` from a file that existed, or `None` for a new, empty
    /// one (whose folder and entry the first sync makes durable).
    fn new(
        inner: &Inner,
        session: SessionId,
        file: File,
        recovered: Option<Recovered>,
    ) -> SessionLog {
        let exists = recovered.is_some();
        let recovered = recovered.unwrap_or(Recovered {
            offsets: Vec::new(),
            end: 0,
        });
        let path = inner.sessions_dir.join(session.as_str()).join(LOG_FILE);
        let len = recovered.offsets.len() as u64;
        let (sender, _) = broadcast::channel(inner.options.broadcast_capacity.max(1));
        let (flushed, _) = watch::channel(Flushed {
            published: len,
            failed: false,
        });
        SessionLog {
            session,
            path,
            state: Mutex::new(LogState {
                buffer: Vec::new(),
                len,
                published: len,
                first: 0,
                offsets: recovered.offsets,
                end: recovered.end,
                unpublished: Vec::new(),
                recent: VecDeque::new(),
                recent_bytes: 0,
                scratch: Vec::new(),
                failed: None,
                synced: 0,
                direct: exists,
            }),
            pending: AtomicUsize::new(0),
            sender,
            tap: inner.tap.clone(),
            flushed,
            file: Arc::new(file),
            base: Arc::default(),
            new_entry: std::sync::atomic::AtomicBool::new(!exists),
            syncer: Arc::clone(&inner.syncer),
        }
    }

    pub(crate) fn published(&self) -> u64 {
        lock(&self.state).published
    }

    async fn append(&self, batch: Vec<NewEvent>) -> Result<Vec<Arc<Event>>> {
        let (events, flushed_by_me) = self.write_batch(batch)?;
        let Some(last) = events.last().map(|e| e.index) else {
            return Ok(events);
        };
        if !flushed_by_me {
            // Another appender was queued behind us; it flushes our lines
            // with its own. Wait for that so that "append returned" always
            // means "the event reached the OS".
            let mut flushed = self.flushed.subscribe();
            let state = *flushed
                .wait_for(|f| f.failed || f.published > last)
                .await
                .map_err(|_| Error::Task("event log closed".to_owned()))?;
            if state.published <= last {
                return Err(self.failed_error(&lock(&self.state)));
            }
        }
        Ok(events)
    }

    /// Encodes and buffers `batch`; flushes if no other append is waiting.
    /// Returns the events and whether this call flushed them.
    fn write_batch(&self, batch: Vec<NewEvent>) -> Result<(Vec<Arc<Event>>, bool)> {
        self.pending.fetch_add(1, Ordering::SeqCst);
        let mut state = lock(&self.state);
        let written = self.write_locked(&mut state, batch);
        let last = self.pending.fetch_sub(1, Ordering::SeqCst) == 1;
        let flushed = if last {
            self.flush_locked(&mut state)
        } else {
            Ok(())
        };
        drop(state);
        let events = written?;
        flushed?;
        Ok((events, last))
    }

    /// The appended events are shared with the subscribers, not copied.
    fn write_locked(&self, state: &mut LogState, batch: Vec<NewEvent>) -> Result<Vec<Arc<Event>>> {
        if state.failed.is_some() {
            return Err(self.failed_error(state));
        }
        let mut events = Vec::with_capacity(batch.len());
        self.encode_locked(state, batch, |event| events.push(Arc::new(event)))?;
        state.unpublished.extend(events.iter().cloned());
        Ok(events)
    }

    /// Encodes `batch` as the log's next lines into its buffer, the whole
    /// batch before any of it is buffered (an encoding error leaves the
    /// log untouched), and hands each event to `each` in the wire shape.
    /// A delta's line keeps only its delta (see [`text::strip`]).
    fn encode_locked(
        &self,
        state: &mut LogState,
        batch: Vec<NewEvent>,
        mut each: impl FnMut(Event),
    ) -> Result<()> {
        let at = Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true);
        let count = batch.len() as u64;
        let mut starts = Vec::with_capacity(batch.len());
        state.scratch.clear();
        for (i, new) in batch.into_iter().enumerate() {
            let mut event = Event {
                event_type: new.event_type,
                index: state.len + i as u64,
                session_id: self.session.clone(),
                turn_id: new.turn_id,
                at: at.clone(),
                data: new.data,
            };
            starts.push(state.end + state.scratch.len() as u64);
            let cumulative = text::strip(&mut event);
            let encoded = serde_json::to_writer(&mut state.scratch, &event);
            text::unstrip(&mut event, cumulative);
            encoded.map_err(|source| Error::Encode {
                session: self.session.clone(),
                source,
            })?;
            state.scratch.push(b'\n');
            each(event);
        }
        let scratch = std::mem::take(&mut state.scratch);
        state.buffer.extend_from_slice(&scratch);
        state.end += scratch.len() as u64;
        state.scratch = scratch;
        state.len += count;
        state.offsets.extend(starts);
        Ok(())
    }

    /// Pushes buffered lines to the OS, then sends them to subscribers.
    /// Publishing under the lock keeps the broadcast in index order and
    /// makes `subscribe`'s snapshot exact.
    fn flush_locked(&self, state: &mut LogState) -> Result<()> {
        if state.failed.is_some() {
            return Err(self.failed_error(state));
        }
        if !state.buffer.is_empty() {
            let written = (&*self.file).write_all(&state.buffer);
            state.buffer.clear();
            if state.buffer.capacity() > 64 * 1024 {
                state.buffer.shrink_to(64 * 1024);
            }
            if let Err(e) = written {
                let error = Error::io("write", &self.path, e);
                self.fail(state, &error);
                return Err(error);
            }
        }
        let unpublished = std::mem::take(&mut state.unpublished);
        for event in unpublished {
            // An error only means nobody is listening right now.
            let _ = self.tap.send(event.clone());
            let _ = self.sender.send(event.clone());
            remember(state, event);
        }
        state.published = state.len;
        let published = state.published;
        self.flushed.send_modify(|f| f.published = published);
        Ok(())
    }

    /// The published events from `start` on, if the recent ones reach
    /// back that far (under the state lock, with the subscription's
    /// snapshot).
    fn recent_from(state: &LogState, start: u64) -> Option<Vec<Arc<Event>>> {
        let first = state.recent.front()?.index;
        if start < first || start >= state.published {
            return None;
        }
        let skip = as_usize(start - first);
        Some(state.recent.iter().skip(skip).cloned().collect())
    }

    fn fail(&self, state: &mut LogState, error: &Error) {
        tracing::error!(session = %self.session, %error, "event log write failed; log is now read-only");
        state.failed = Some((error.to_string(), error.exhausted()));
        self.flushed.send_modify(|f| f.failed = true);
    }

    fn failed_error(&self, state: &LogState) -> Error {
        let (reason, exhausted) = state
            .failed
            .clone()
            .unwrap_or_else(|| ("unknown error".to_owned(), None));
        Error::SessionFailed {
            session: self.session.clone(),
            reason,
            exhausted,
        }
    }

    async fn sync(&self) -> Result<()> {
        let (from, to, direct) = {
            let mut state = lock(&self.state);
            self.flush_locked(&mut state)?;
            (state.synced, state.end, state.direct)
        };
        if from >= to && !direct && !self.new_entry.load(Ordering::SeqCst) {
            // Nothing was written since the last sync.
            return Ok(());
        }
        let journaled = !direct && self.syncer.journals();
        let new_dir = !journaled && self.new_entry.swap(false, Ordering::SeqCst);
        let job = if journaled {
            // A new log's folder and entry are in the journal's record at
            // offset 0, so no folder is synced here.
            SyncJob::Journal {
                file: Arc::clone(&self.file),
                path: self.path.clone(),
                session: self.session.clone(),
                from,
                to,
            }
        } else {
            SyncJob::File {
                file: Arc::clone(&self.file),
                path: self.path.clone(),
                new_dir,
            }
        };
        let synced = self.syncer.sync(job).await;
        match &synced {
            Ok(()) => {
                let mut state = lock(&self.state);
                state.synced = state.synced.max(to);
                state.direct = false;
                if journaled {
                    self.new_entry.store(false, Ordering::SeqCst);
                }
            }
            // The folder's entry is still to be made durable.
            Err(_) if new_dir => self.new_entry.store(true, Ordering::SeqCst),
            Err(_) => {}
        }
        synced
    }

    /// Completes the stored deltas among `events` (which start at index
    /// `start`) with their cumulative text, reading the prefix of a
    /// message the range begins inside of.
    pub(crate) async fn rebuild(
        &self,
        rebuild: &mut Rebuild,
        start: u64,
        events: &mut [Event],
    ) -> Result<()> {
        for event in events.iter_mut() {
            if rebuild.needs_prefix(event) {
                *rebuild = Rebuild::with_prefix(self.prefix_before(start).await?);
            }
            rebuild.apply(event);
        }
        Ok(())
    }

    /// The text of the message whose deltas run up to index `end`
    /// (exclusive), read backwards from the file a chunk at a time.
    async fn prefix_before(&self, end: u64) -> Result<String> {
        const CHUNK: u64 = 256;
        let mut hi = end;
        let mut tail: Vec<Event> = Vec::new();
        loop {
            let lo = hi.saturating_sub(CHUNK);
            let mut chunk = self.read_range(lo, hi).await?;
            chunk.append(&mut tail);
            if let Some(text) = text::prefix_in(&chunk, lo == 0) {
                return Ok(text);
            }
            if lo == 0 {
                return Ok(String::new());
            }
            tail = chunk;
            hi = lo;
        }
    }

    /// Events `start..end` (clamped to what is published), from the file,
    /// as stored (deltas without their cumulative text).
    pub(crate) async fn read_range(&self, start: u64, end: u64) -> Result<Vec<Event>> {
        self.read_range_of(start, end, Only::default()).await
    }

    /// [`read_range`](Self::read_range), keeping only what `only` keeps.
    async fn read_range_of(&self, start: u64, end: u64, only: Only) -> Result<Vec<Event>> {
        let (own, own_start, base_end) = {
            let state = lock(&self.state);
            let end = end.min(state.published);
            if start >= end {
                return Ok(Vec::new());
            }
            let own_start = start.max(state.first);
            let own = (own_start < end).then(|| {
                let from = state.offsets[as_usize(own_start - state.first)];
                let to = if end < state.len {
                    state.offsets[as_usize(end - state.first)]
                } else {
                    state.end
                };
                (from, to)
            });
            (own, own_start, end.min(state.first))
        };
        // Through the log's own descriptor: no `open`, and a log whose
        // folder is still a spare reads the same.
        let (path, file) = (self.path.clone(), Arc::clone(&self.file));
        let (base, session) = (Arc::clone(&self.base), self.session.clone());
        blocking(move || {
            let mut events = if start < base_end {
                base.read(&session, start, base_end, &only)?
            } else {
                Vec::new()
            };
            if let Some((from, to)) = own {
                let mut bytes = vec![0; as_usize(to - from)];
                file.read_exact_at(&mut bytes, from)
                    .map_err(|e| Error::io("read", &path, e))?;
                events.append(&mut parse_lines_of(&path, &bytes, own_start, &only)?);
            }
            Ok(events)
        })
        .await
    }

    /// What a fork before event `at` shares of this log: the pieces of
    /// its own prefix, then its own file's first lines, made durable
    /// first. `at` must be at most the published length.
    async fn fork_pieces(&self, at: u64) -> Result<Vec<Piece>> {
        let (own, published) = {
            let mut state = lock(&self.state);
            self.flush_locked(&mut state)?;
            let own = (at > state.first).then(|| {
                let events = at - state.first;
                let bytes = state
                    .offsets
                    .get(as_usize(events))
                    .copied()
                    .unwrap_or(state.end);
                Piece {
                    path: self.path.clone(),
                    first: state.first,
                    events,
                    bytes,
                }
            });
            (own, state.published)
        };
        if at > published {
            return Err(Error::Task(format!(
                "cannot fork `{}` before event {at}: it has {published}",
                self.session
            )));
        }
        let mut pieces = self.base.pieces(at);
        if let Some(own) = own {
            // The fork names these bytes: they must outlive a power cut
            // before it does (the journal may not have them yet).
            let (path, file) = (self.path.clone(), Arc::clone(&self.file));
            blocking(move || file.sync_data().map_err(|e| Error::io("sync", &path, e))).await?;
            pieces.push(own);
        }
        Ok(pieces)
    }
}

/// How many published events a log keeps in memory for new followers.
const RECENT_EVENTS: usize = 32;
/// The most line bytes those events may add up to.
const RECENT_BYTES: u64 = 64 * 1024;

/// Adds a just-published event to the log's recent ones (its line's size
/// from the offsets), dropping the oldest past either bound. An event too
/// large for the budget empties it: the recent ones must stay contiguous.
fn remember(state: &mut LogState, event: Arc<Event>) {
    let size = line_size(state, event.index);
    if size > RECENT_BYTES {
        state.recent.clear();
        state.recent_bytes = 0;
        return;
    }
    state.recent_bytes += size;
    state.recent.push_back(event);
    while state.recent.len() > RECENT_EVENTS || state.recent_bytes > RECENT_BYTES {
        let Some(old) = state.recent.pop_front() else {
            break;
        };
        state.recent_bytes = state
            .recent_bytes
            .saturating_sub(line_size(state, old.index));
    }
}

/// The bytes of event `index`'s line, from the offsets (0 for a fork's
/// prefix, which is never among the recent events).
fn line_size(state: &LogState, index: u64) -> u64 {
    let Some(i) = index.checked_sub(state.first) else {
        return 0;
    };
    let i = as_usize(i);
    let start = state.offsets.get(i).copied().unwrap_or(state.end);
    let end = state.offsets.get(i + 1).copied().unwrap_or(state.end);
    end.saturating_sub(start)
}

/// Runs blocking file work off the async worker threads.
async fn blocking<T, F>(f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Task(e.to_string()))?
}

/// Locks a mutex, ignoring poison: no code holding these locks panics, and
/// a poisoned event log is better served than a crashed server.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn as_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}
