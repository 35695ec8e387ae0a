//! The file backend: one `sessions/<id>/events.ndjson` per session, a
//! writer per session behind a short lock, and group commit.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use agentkit_protocol::{Event, EventType, SessionId};
use chrono::{SecondsFormat, Utc};
use serde_json::Value;
use tokio::sync::{OnceCell, broadcast, watch};

use crate::error::{Error, Result};
use crate::recovery::{parse_lines, recover};
use crate::subscription::Subscription;

/// The name of a session's log inside its directory.
const LOG_FILE: &str = "events.ndjson";

/// How a [`FileEventStore`] buffers and fans out.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// How many events a live subscriber may fall behind before it has to
    /// catch up from the file (it never loses events; it only pays a read).
    pub broadcast_capacity: usize,
    /// The size of each session's write buffer, in bytes.
    pub write_buffer_bytes: usize,
    /// How many events a [`FileEventStore::tap`] receiver may fall behind
    /// before it misses some (it is told how many, as `Lagged`).
    pub tap_capacity: usize,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            broadcast_capacity: 128,
            write_buffer_bytes: 8 * 1024,
            tap_capacity: 4096,
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

/// The durable event store on the local file system.
///
/// Cheap to clone; clones share the open logs.
#[derive(Debug, Clone)]
pub struct FileEventStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    sessions_dir: PathBuf,
    options: StoreOptions,
    /// Logs are opened (and recovered) on first use; the cell makes sure
    /// that happens once even when several callers arrive together.
    logs: Mutex<HashMap<SessionId, Arc<OnceCell<Arc<SessionLog>>>>>,
    /// Every published event of every session, for observers (hooks,
    /// channel deliveries).
    tap: broadcast::Sender<Arc<Event>>,
}

impl FileEventStore {
    /// Opens the store rooted at `root`, creating `<root>/sessions/`.
    /// Session logs are opened and recovered lazily, on first use.
    pub fn open(root: &Path, options: StoreOptions) -> Result<FileEventStore> {
        let sessions_dir = root.join("sessions");
        std::fs::create_dir_all(&sessions_dir)
            .map_err(|e| Error::io("create directory", &sessions_dir, e))?;
        Ok(FileEventStore {
            inner: Arc::new(Inner {
                sessions_dir,
                tap: broadcast::channel(options.tap_capacity.max(1)).0,
                options,
                logs: Mutex::new(HashMap::new()),
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
    ) -> Result<Event> {
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
    ) -> Result<Vec<Event>> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        self.log(session, true).await?.append(events).await
    }

    /// [`append`](Self::append), then [`sync`](Self::sync): the event
    /// survives a power cut once this returns.
    pub async fn append_durable(
        &self,
        session: &SessionId,
        event_type: EventType,
        turn_id: Option<&str>,
        data: Value,
    ) -> Result<Event> {
        let event = self.append(session, event_type, turn_id, data).await?;
        self.sync(session).await?;
        Ok(event)
    }

    /// Flushes and `fsync`s (`sync_data`) the session's log: a durable
    /// point. Everything appended before the call survives a power cut.
    pub async fn sync(&self, session: &SessionId) -> Result<()> {
        self.log(session, false).await?.sync().await
    }

    /// Every event of `session` from `start_index` on, read from the file.
    pub async fn read(&self, session: &SessionId, start_index: u64) -> Result<Vec<Event>> {
        let log = self.log(session, false).await?;
        let end = log.published();
        log.read_range(start_index, end).await
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
        let (receiver, replay_until) = {
            let state = lock(&log.state);
            (log.sender.subscribe(), state.published)
        };
        Ok(Subscription::new(log, start_index, replay_until, receiver))
    }

    /// How many events `session` holds.
    pub async fn len(&self, session: &SessionId) -> Result<u64> {
        Ok(self.log(session, false).await?.published())
    }

    /// The ids of every session with a log, sorted. Directories whose name
    /// is not a valid session id are skipped.
    pub async fn sessions(&self) -> Result<Vec<SessionId>> {
        let dir = self.inner.sessions_dir.clone();
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
            ids.sort();
            Ok(ids)
        })
        .await
    }

    /// The open log of `session`, opening (and recovering) it on first use.
    /// Without `create`, a session with no log file is `SessionNotFound`.
    async fn log(&self, session: &SessionId, create: bool) -> Result<Arc<SessionLog>> {
        let cell = {
            let mut logs = lock(&self.inner.logs);
            Arc::clone(logs.entry(session.clone()).or_default())
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
    /// A second handle on the file, for `sync_data` outside the lock.
    sync_file: Arc<File>,
}

#[derive(Debug, Clone, Copy)]
struct Flushed {
    published: u64,
    failed: bool,
}

#[derive(Debug)]
struct LogState {
    writer: BufWriter<File>,
    /// Events written to the buffer (the next index to assign).
    len: u64,
    /// Events that reached the OS and were sent to subscribers.
    published: u64,
    /// `offsets[i]`: where the line of event `i` starts.
    offsets: Vec<u64>,
    /// The logical file length, buffered bytes included.
    end: u64,
    /// Events written but not yet flushed, in index order.
    unpublished: Vec<Arc<Event>>,
    /// Reused encoding buffer.
    scratch: Vec<u8>,
    /// The first write error; the log is read-only from then on.
    failed: Option<String>,
}

impl SessionLog {
    fn open(inner: &Inner, session: SessionId, create: bool) -> Result<SessionLog> {
        let dir = inner.sessions_dir.join(session.as_str());
        let path = dir.join(LOG_FILE);
        let exists = path.is_file();
        if !exists && !create {
            return Err(Error::SessionNotFound { session });
        }
        if !exists {
            std::fs::create_dir_all(&dir).map_err(|e| Error::io("create directory", &dir, e))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| Error::io("open", &path, e))?;
        if !exists {
            sync_dir(&dir);
        }
        let recovered = recover(&path, &session)?;
        let sync_file = file.try_clone().map_err(|e| Error::io("open", &path, e))?;
        let len = recovered.offsets.len() as u64;
        let (sender, _) = broadcast::channel(inner.options.broadcast_capacity.max(1));
        let (flushed, _) = watch::channel(Flushed {
            published: len,
            failed: false,
        });
        Ok(SessionLog {
            session,
            path,
            state: Mutex::new(LogState {
                writer: BufWriter::with_capacity(inner.options.write_buffer_bytes.max(1), file),
                len,
                published: len,
                offsets: recovered.offsets,
                end: recovered.end,
                unpublished: Vec::new(),
                scratch: Vec::new(),
                failed: None,
            }),
            pending: AtomicUsize::new(0),
            sender,
            tap: inner.tap.clone(),
            flushed,
            sync_file: Arc::new(sync_file),
        })
    }

    pub(crate) fn published(&self) -> u64 {
        lock(&self.state).published
    }

    async fn append(&self, batch: Vec<NewEvent>) -> Result<Vec<Event>> {
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
    fn write_batch(&self, batch: Vec<NewEvent>) -> Result<(Vec<Event>, bool)> {
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

    fn write_locked(&self, state: &mut LogState, batch: Vec<NewEvent>) -> Result<Vec<Event>> {
        if state.failed.is_some() {
            return Err(self.failed_error(state));
        }
        let at = Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true);
        let mut events = Vec::with_capacity(batch.len());
        let mut starts = Vec::with_capacity(batch.len());
        // Encode the whole batch before writing any of it, so an encoding
        // error leaves the log untouched.
        state.scratch.clear();
        for (i, new) in batch.into_iter().enumerate() {
            let event = Event {
                event_type: new.event_type,
                index: state.len + i as u64,
                session_id: self.session.clone(),
                turn_id: new.turn_id,
                at: at.clone(),
                data: new.data,
            };
            starts.push(state.end + state.scratch.len() as u64);
            serde_json::to_writer(&mut state.scratch, &event).map_err(|source| Error::Encode {
                session: self.session.clone(),
                source,
            })?;
            state.scratch.push(b'\n');
            events.push(event);
        }
        if let Err(e) = state.writer.write_all(&state.scratch) {
            let error = Error::io("write", &self.path, e);
            self.fail(state, &error);
            return Err(error);
        }
        state.len += events.len() as u64;
        state.end += state.scratch.len() as u64;
        state.offsets.extend(starts);
        state
            .unpublished
            .extend(events.iter().cloned().map(Arc::new));
        Ok(events)
    }

    /// Pushes buffered lines to the OS, then sends them to subscribers.
    /// Publishing under the lock keeps the broadcast in index order and
    /// makes `subscribe`'s snapshot exact.
    fn flush_locked(&self, state: &mut LogState) -> Result<()> {
        if state.failed.is_some() {
            return Err(self.failed_error(state));
        }
        if let Err(e) = state.writer.flush() {
            let error = Error::io("write", &self.path, e);
            self.fail(state, &error);
            return Err(error);
        }
        for event in state.unpublished.drain(..) {
            // An error only means nobody is listening right now.
            let _ = self.tap.send(event.clone());
            let _ = self.sender.send(event);
        }
        state.published = state.len;
        let published = state.published;
        self.flushed.send_modify(|f| f.published = published);
        Ok(())
    }

    fn fail(&self, state: &mut LogState, error: &Error) {
        tracing::error!(session = %self.session, %error, "event log write failed; log is now read-only");
        state.failed = Some(error.to_string());
        self.flushed.send_modify(|f| f.failed = true);
    }

    fn failed_error(&self, state: &LogState) -> Error {
        Error::SessionFailed {
            session: self.session.clone(),
            reason: state
                .failed
                .clone()
                .unwrap_or_else(|| "unknown error".to_owned()),
        }
    }

    async fn sync(&self) -> Result<()> {
        {
            let mut state = lock(&self.state);
            self.flush_locked(&mut state)?;
        }
        let file = Arc::clone(&self.sync_file);
        let path = self.path.clone();
        blocking(move || file.sync_data().map_err(|e| Error::io("sync", &path, e))).await
    }

    /// Events `start..end` (clamped to what is published), from the file.
    pub(crate) async fn read_range(&self, start: u64, end: u64) -> Result<Vec<Event>> {
        let (from, to) = {
            let state = lock(&self.state);
            let end = end.min(state.published);
            if start >= end {
                return Ok(Vec::new());
            }
            let from = state.offsets[as_usize(start)];
            let to = if end < state.len {
                state.offsets[as_usize(end)]
            } else {
                state.end
            };
            (from, to)
        };
        let path = self.path.clone();
        blocking(move || {
            let mut file = File::open(&path).map_err(|e| Error::io("open", &path, e))?;
            file.seek(SeekFrom::Start(from))
                .map_err(|e| Error::io("seek", &path, e))?;
            let mut bytes = vec![0; as_usize(to - from)];
            file.read_exact(&mut bytes)
                .map_err(|e| Error::io("read", &path, e))?;
            parse_lines(&path, &bytes, start)
        })
        .await
    }
}

/// Makes a new directory entry durable. Best effort: a failure here only
/// weakens the power-cut guarantee for a brand-new session, so it is logged.
fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    if let Err(error) = File::open(dir).and_then(|d| d.sync_all()) {
        tracing::warn!(dir = %dir.display(), %error, "could not sync a new session directory");
    }
    #[cfg(not(unix))]
    let _ = dir;
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
