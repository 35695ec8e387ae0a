//! New sessions without a new folder on the request path.
//!
//! Making a session's log costs a `stat`, a `mkdir` and a `create` of its
//! `sessions/<id>/events.ndjson`, and a trip to the blocking pool to do
//! them. With the journal on, a store keeps a few **spare** logs ready
//! instead, made in the background: `<root>/spare/<n>/events.ndjson`,
//! created and held open. A new session
//! ([`FileEventStore::create`](crate::FileEventStore::create)) takes one
//! (no system call), appends to it as to any log, and the background
//! moves the folder to `sessions/<id>` (one `rename`) a moment later.
//!
//! Nothing changes for a reader: until the folder is moved, the store
//! says the session exists ([`Spares::holds`]), reads go through the
//! log's open descriptor, and whoever needs the folder itself (a
//! workspace, a snapshot, a deletion, a log reopened after being closed)
//! moves it first ([`Spares::settle`], idempotent, one mover per folder).
//!
//! Durability is the journal's, as for every log: a sync journals the
//! bytes the log gained, so an acknowledged event survives a power cut
//! whether or not the folder was moved (the journal's replay makes the
//! folder of a record at offset 0). A kill -9 loses nothing that reached
//! the OS either: every line of a log starts with its session's id, so a
//! start moves each spare whose first line is whole to
//! `sessions/<id>` ([`recover`], before the journal is replayed) and
//! deletes the empty ones. A checkpoint's `syncfs` covers the spare
//! folders as it covers `sessions/`.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use agentkit_protocol::SessionId;

use crate::error::{Error, Result};
use crate::store::LOG_FILE;

/// The spares' folder, inside the store's root.
pub(crate) const SPARE_DIR: &str = "spare";
/// How many spares the background keeps ready at most (each holds a
/// descriptor; none are made before an agent's first new session).
const READY_MAX: usize = 16;

/// How many spares the background keeps ready: [`READY_MAX`], or one per
/// 128 descriptors of the soft limit when that is fewer (at least 2), so
/// a refill near a low limit cannot be what runs the process out of
/// descriptors.
fn ready() -> usize {
    static READY: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *READY.get_or_init(|| {
        let limit = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
            .ok()
            .map_or(u64::MAX, |(soft, _)| soft);
        usize::try_from(limit / 128).map_or(READY_MAX, |n| n.clamp(2, READY_MAX))
    })
}

/// How many spares a refill may make when the process holds `open` of
/// its `limit` descriptors: none within `reserve` of the limit, or
/// within a quarter of it when that is more, so the pool never takes the
/// descriptors the turn gate keeps for running turns (its headroom is a
/// sixteenth of the limit by default, `reserve` when set larger).
fn room(open: u64, limit: u64, reserve: Option<u64>) -> usize {
    let keep = reserve.unwrap_or(0).max(limit / 4);
    usize::try_from(limit.saturating_sub(keep).saturating_sub(open)).unwrap_or(usize::MAX)
}

/// How long a count of the process's descriptors serves refills.
const COUNT_FOR: Duration = Duration::from_millis(100);

/// How many descriptors the process holds and its soft limit
/// (`/proc/self/fd`, less the listing's own); `None` where either cannot
/// be read. Listed at most once per [`COUNT_FOR`] (the listing costs in
/// proportion to what is open, and a busy host refills every few new
/// sessions); between listings, the spares made since are added, so the
/// count can only miss what other parts of the process opened meanwhile,
/// which the reserve ([`room`]) is far larger than.
fn descriptors(made: u64) -> Option<(u64, u64)> {
    static LAST: Mutex<Option<(std::time::Instant, u64, u64, u64)>> = Mutex::new(None);
    let mut last = lock(&LAST);
    if let Some((at, open, limit, made_then)) = *last
        && at.elapsed() < COUNT_FOR
    {
        return Some((open + made.saturating_sub(made_then), limit));
    }
    let (limit, _) =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).ok()?;
    let open = (std::fs::read_dir("/proc/self/fd").ok()?.count() as u64).saturating_sub(1);
    *last = Some((std::time::Instant::now(), open, limit, made));
    Some((open, limit))
}

/// Spares made by every store of the process (for [`descriptors`]).
static MADE: AtomicU64 = AtomicU64::new(0);

/// Below this many, a taken spare wakes the background to make more (so
/// spares are made in batches, not one per session).
fn low() -> usize {
    ready() / 2
}
/// The longest first line [`recover`] reads to find a spare's session.
const FIRST_LINE_MAX: u64 = 1024 * 1024;

/// A ready spare: its folder and its open, empty log.
#[derive(Debug)]
struct Spare {
    dir: PathBuf,
    file: File,
}

/// A session whose folder is still a spare: `Some(spare folder)` until it
/// is moved. Its lock makes one mover per folder.
type Moving = Arc<Mutex<Option<PathBuf>>>;

#[derive(Debug, Default)]
struct Queue {
    ready: Vec<Spare>,
    /// Sessions whose folder the background is to move.
    to_move: Vec<SessionId>,
    /// The background task is running (it takes everything queued before
    /// it ends).
    working: bool,
    /// A wake-up for the queued moves is armed (with a move delay).
    armed: bool,
    /// Making a spare failed: no more are made until one is taken again
    /// (new sessions make their folder themselves meanwhile).
    failing: bool,
}

/// The spare logs of one store (see the module docs).
#[derive(Debug)]
pub(crate) struct Spares {
    dir: PathBuf,
    sessions_dir: PathBuf,
    queue: Mutex<Queue>,
    moving: Mutex<HashMap<SessionId, Moving>>,
    next: AtomicU64,
    /// Folders moved into `sessions/` (for tests).
    moved: AtomicU64,
    /// How long a taken spare waits before the background moves it
    /// (`StoreOptions::spare_move_after`).
    move_after: Duration,
    /// Descriptors left free below the limit
    /// (`StoreOptions::spare_fd_reserve`).
    reserve: Option<u64>,
}

impl Spares {
    pub(crate) fn new(
        root: &Path,
        sessions_dir: &Path,
        move_after: Duration,
        reserve: Option<u64>,
    ) -> Arc<Spares> {
        Arc::new(Spares {
            dir: root.join(SPARE_DIR),
            sessions_dir: sessions_dir.to_owned(),
            queue: Mutex::default(),
            moving: Mutex::default(),
            next: AtomicU64::new(0),
            moved: AtomicU64::new(0),
            move_after,
            reserve,
        })
    }

    /// A ready log for the new session `session`, if there is one; from
    /// now on `session` [`holds`](Self::holds) and its folder is moved in
    /// the background. `None` (no spare ready, or no tokio runtime to
    /// make more on): the caller makes the folder itself.
    pub(crate) fn take(self: &Arc<Self>, session: &SessionId) -> Option<File> {
        let handle = tokio::runtime::Handle::try_current().ok()?;
        let (spare, start, arm) = {
            let mut queue = lock(&self.queue);
            let spare = queue.ready.pop();
            if let Some(spare) = &spare {
                lock(&self.moving).insert(
                    session.clone(),
                    Arc::new(Mutex::new(Some(spare.dir.clone()))),
                );
                queue.to_move.push(session.clone());
            }
            let low = queue.ready.len() < low();
            if low {
                // Try again, even after a failure: the disk may have room.
                queue.failing = false;
            }
            let now = !queue.to_move.is_empty() && self.move_after.is_zero();
            let start = (low || now) && !std::mem::replace(&mut queue.working, true);
            let arm = !queue.to_move.is_empty()
                && !self.move_after.is_zero()
                && !std::mem::replace(&mut queue.armed, true);
            (spare, start, arm)
        };
        if start {
            let spares = Arc::clone(self);
            handle.spawn_blocking(move || spares.work());
        }
        if arm {
            let spares = Arc::clone(self);
            let after = self.move_after;
            handle.spawn(async move {
                tokio::time::sleep(after).await;
                let start = {
                    let mut queue = lock(&spares.queue);
                    queue.armed = false;
                    !std::mem::replace(&mut queue.working, true)
                };
                if start {
                    // Detached: it ends when the queue is empty.
                    drop(tokio::task::spawn_blocking(move || spares.work()));
                }
            });
        }
        spare.map(|s| s.file)
    }

    /// Whether `session`'s folder is still a spare (the session exists,
    /// though `sessions/<id>` may not yet).
    pub(crate) fn holds(&self, session: &SessionId) -> bool {
        lock(&self.moving).contains_key(session)
    }

    /// The sessions whose folder is still a spare.
    pub(crate) fn held(&self) -> Vec<SessionId> {
        lock(&self.moving).keys().cloned().collect()
    }

    /// Spares made and ready to be taken.
    pub(crate) fn ready_now(&self) -> usize {
        lock(&self.queue).ready.len()
    }

    /// Folders moved into `sessions/` since the store opened.
    pub(crate) fn moved(&self) -> u64 {
        self.moved.load(Ordering::Relaxed)
    }

    /// Moves `session`'s folder to `sessions/<id>` now if it is still a
    /// spare (blocking: one `rename`). Returns once it is there; nothing
    /// to do for any other session.
    pub(crate) fn settle(&self, session: &SessionId) -> Result<()> {
        let Some(entry) = lock(&self.moving).get(session).cloned() else {
            return Ok(());
        };
        let mut slot = lock(&entry);
        if let Some(from) = slot.take() {
            let to = self.sessions_dir.join(session.as_str());
            if let Err(e) = move_folder(&from, &to) {
                *slot = Some(from);
                return Err(e);
            }
            self.moved.fetch_add(1, Ordering::Relaxed);
        }
        drop(slot);
        let mut moving = lock(&self.moving);
        if moving.get(session).is_some_and(|e| Arc::ptr_eq(e, &entry)) {
            moving.remove(session);
        }
        Ok(())
    }

    /// The background: moves the queued folders and refills the spares,
    /// until nothing is left to do.
    fn work(&self) {
        loop {
            let (moves, refill) = {
                let mut queue = lock(&self.queue);
                let moves = std::mem::take(&mut queue.to_move);
                let refill = if queue.ready.len() < low() && !queue.failing {
                    ready() - queue.ready.len()
                } else {
                    0
                };
                // Near the descriptor limit, only what leaves the turns
                // their room (the listing runs here, in the background).
                let refill = match (refill, descriptors(MADE.load(Ordering::Relaxed))) {
                    (0, _) | (_, None) => refill,
                    (n, Some((open, limit))) => n.min(room(open, limit, self.reserve)),
                };
                if moves.is_empty() && refill == 0 {
                    queue.working = false;
                    return;
                }
                (moves, refill)
            };
            for session in moves {
                if let Err(error) = self.settle(&session) {
                    // It stays a spare: the next reader that needs the
                    // folder tries again, and a start moves it.
                    tracing::warn!(%session, %error, "could not move a new session's folder");
                }
            }
            let mut made = Vec::with_capacity(refill);
            let mut failed = false;
            for _ in 0..refill {
                match self.make() {
                    Ok(spare) => made.push(spare),
                    Err(error) => {
                        tracing::warn!(%error, "could not make a spare session log; new sessions make their own folder");
                        failed = true;
                        break;
                    }
                }
            }
            let mut queue = lock(&self.queue);
            queue.ready.extend(made);
            queue.failing |= failed;
        }
    }

    /// Makes one spare: a new folder under `spare/` and its empty log.
    fn make(&self) -> Result<Spare> {
        let mut tries = 0;
        let dir = loop {
            let dir = self
                .dir
                .join(format!("{:08}", self.next.fetch_add(1, Ordering::Relaxed)));
            match std::fs::create_dir(&dir) {
                Ok(()) => break dir,
                // The first spare of this store makes `spare/` itself.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries == 0 => {
                    tries += 1;
                    std::fs::create_dir_all(&self.dir)
                        .map_err(|e| Error::io("create directory", &self.dir, e))?;
                }
                // Left by an earlier process (kept aside by `recover`).
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tries < 64 => {
                    tries += 1;
                }
                Err(e) => return Err(Error::io("create directory", &dir, e)),
            }
        };
        let path = dir.join(LOG_FILE);
        // Readable too: the journal reads back what a sync covers.
        let file = OpenOptions::new()
            .create_new(true)
            .read(true)
            .append(true)
            .open(&path)
            .map_err(|e| Error::io("create", &path, e))?;
        MADE.fetch_add(1, Ordering::Relaxed);
        Ok(Spare { dir, file })
    }
}

/// What a start found among the spares.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Recovered {
    /// Logs moved to `sessions/<id>` (a kill -9 came before their move).
    pub(crate) moved: usize,
    /// Unused spares deleted.
    pub(crate) deleted: usize,
}

/// At start, before the journal is replayed: moves every spare that holds
/// a session's lines to `sessions/<id>`, and deletes the rest (never
/// taken, or taken and never written: nothing in them was acknowledged).
/// A spare whose session already has a folder is left where it is, with a
/// warning (its lines are the journal's to restore if they were acknowledged).
pub(crate) fn recover(root: &Path, sessions_dir: &Path) -> Result<Recovered> {
    let dir = root.join(SPARE_DIR);
    let mut found = Recovered::default();
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
        Err(e) => return Err(Error::io("read directory", &dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("read directory", &dir, e))?;
        let spare = entry.path();
        if !spare.is_dir() {
            continue;
        }
        match first_session(&spare.join(LOG_FILE)) {
            Some(session) => {
                let to = sessions_dir.join(session.as_str());
                if to.join(LOG_FILE).exists() {
                    tracing::warn!(spare = %spare.display(), %session, "a spare log names a session that has a log already; left where it is");
                    continue;
                }
                move_folder(&spare, &to)?;
                found.moved += 1;
            }
            None => {
                std::fs::remove_dir_all(&spare).map_err(|e| Error::io("delete", &spare, e))?;
                found.deleted += 1;
            }
        }
    }
    if found.moved > 0 {
        tracing::info!(
            moved = found.moved,
            "moved the logs of new sessions a stop left in spare folders"
        );
    }
    Ok(found)
}

/// Moves the spare folder `from` to be the session folder `to`: one
/// `rename`, or, when `to` exists already (something was written into it
/// first), the log alone into it and the empty spare folder deleted.
fn move_folder(from: &Path, to: &Path) -> Result<()> {
    let Err(e) = std::fs::rename(from, to) else {
        return Ok(());
    };
    if !to.is_dir() || to.join(LOG_FILE).exists() {
        return Err(Error::io("move a new session's folder to", to, e));
    }
    let log = to.join(LOG_FILE);
    std::fs::rename(from.join(LOG_FILE), &log)
        .map_err(|e| Error::io("move a new session's log to", &log, e))?;
    std::fs::remove_dir(from).map_err(|e| Error::io("delete", from, e))
}

/// The session a log's first whole line names, if it has one.
fn first_session(log: &Path) -> Option<SessionId> {
    let file = File::open(log).ok()?;
    let mut line = Vec::new();
    BufReader::new(file.take(FIRST_LINE_MAX))
        .read_until(b'\n', &mut line)
        .ok()?;
    if line.last() != Some(&b'\n') {
        return None;
    }
    let first: serde_json::Value = serde_json::from_slice(&line).ok()?;
    SessionId::parse(first.get("sessionId")?.as_str()?).ok()
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::room;

    #[test]
    fn spares_are_made_only_below_three_quarters_of_the_descriptor_limit() {
        assert_eq!(room(100, 1024, None), 668);
        assert_eq!(room(760, 1024, None), 8);
        assert_eq!(room(768, 1024, None), 0);
        assert_eq!(room(1000, 1024, None), 0);
        // At a limit of 256 the gate keeps 32 (a sixteenth, at least 32):
        // a pool filled up to 192 leaves them free.
        assert_eq!(room(180, 256, None), 12);
        // A reserve below a quarter changes nothing.
        assert_eq!(room(100, 1024, Some(64)), 668);
    }

    #[test]
    fn a_larger_reserve_keeps_the_spares_out_of_it() {
        // `--fd-headroom 512` of 1,024: spares only below 512 open.
        assert_eq!(room(100, 1024, Some(512)), 412);
        assert_eq!(room(500, 1024, Some(512)), 12);
        assert_eq!(room(512, 1024, Some(512)), 0);
        // A reserve past the limit: never.
        assert_eq!(room(0, 1024, Some(4096)), 0);
    }
}
