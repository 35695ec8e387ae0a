//! The store's journal: a batch of syncs waits for the disk once.
//!
//! Without it, making a turn durable costs an `fdatasync` of the
//! session's log and, for a new session, an `fsync` of its folder and of
//! `sessions/`: on a disk that writes each of them synchronously, several
//! waits per new session however many sessions share a batch. With it, a
//! batch of syncs appends the bytes each log gained since its last sync
//! to one append-only segment (`<root>/journal/<seq>.journal`) and
//! `fdatasync`s that one file. The logs are written as before and left to
//! the OS; once a segment is older than the checkpoint interval (or past
//! [`SEGMENT_BYTES`]), the next commit starts a new segment and a
//! background thread `syncfs`es the file system (every log, folder and
//! entry the old segment covers is then on disk) and deletes the old
//! segment: a checkpoint.
//!
//! Opening the store replays the segments a power cut left, in order:
//! each record's bytes are written back at their offset in their log
//! (making the session's folder for a record at offset 0; a record whose
//! bytes the log already holds, as after a crash of the process alone,
//! writes nothing). That is idempotent, since a log only ever grows by
//! whole lines and a record only covers whole lines. A record that starts past the end of its log
//! (whose earlier bytes are gone, as when the folder was deleted by hand)
//! is skipped with a warning rather than leaving a hole; a torn or
//! damaged record ends its segment (it belonged to a batch that was never
//! acknowledged). That happens before the store serves anything; syncing
//! what it wrote and deleting the segments happen in the background (a
//! start after that is interrupted replays them again).
//!
//! One store at a time journals a folder: the journal's `LOCK` file is
//! held while it is open, and a second store opened on the same folder
//! syncs each log itself (and replays nothing).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentkit_protocol::SessionId;

use crate::error::{Error, Result};

/// The journal's folder, inside the store's root.
pub(crate) const JOURNAL_DIR: &str = "journal";
/// A segment past this size is checkpointed at the next commit, whatever
/// its age.
pub(crate) const SEGMENT_BYTES: u64 = 64 * 1024 * 1024;
/// How long opening waits for another store of the folder to let go of
/// the journal.
const LOCK_WAIT: Duration = Duration::from_secs(2);
/// The first bytes of every segment.
const MAGIC: &[u8; 8] = b"akjrnl1\n";
/// A record's header: the body's length and its CRC-32, little-endian.
const HEADER: usize = 8;

/// The bytes `from..to` of one log, to be journaled.
#[derive(Debug)]
pub(crate) struct Span<'a> {
    pub(crate) session: &'a SessionId,
    pub(crate) file: &'a File,
    pub(crate) from: u64,
    pub(crate) to: u64,
}

/// The open journal of one store (see the module docs).
#[derive(Debug)]
pub(crate) struct Journal {
    dir: PathBuf,
    /// Held (locked) while the journal is open.
    _lock: File,
    /// The segment commits go to; opened on the first commit after a
    /// start, a checkpoint or a failed write.
    segment: Option<Segment>,
    next_seq: u64,
    checkpoint_after: Duration,
    /// A checkpoint thread is running (one at a time).
    checkpointing: Arc<AtomicBool>,
    /// Checkpoints finished (for tests and `/metrics`).
    checkpoints: Arc<AtomicU64>,
    /// Reused encoding buffer.
    buffer: Vec<u8>,
}

#[derive(Debug)]
struct Segment {
    file: File,
    path: PathBuf,
    len: u64,
    opened: Instant,
}

/// What a replay did (for its log line).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Replayed {
    pub(crate) segments: usize,
    pub(crate) records: usize,
    /// Records whose bytes the log did not already hold (a power cut).
    pub(crate) rewritten: usize,
    pub(crate) skipped: usize,
}

impl Journal {
    /// Opens the journal of the store rooted at `root`, replaying what a
    /// power cut left into `sessions_dir`. `None` when another store holds
    /// the journal of this folder.
    pub(crate) fn open(
        root: &Path,
        sessions_dir: &Path,
        checkpoint_after: Duration,
    ) -> Result<Option<Journal>> {
        if cfg!(not(target_os = "linux")) {
            return Ok(None);
        }
        let dir = root.join(JOURNAL_DIR);
        let created = !dir.is_dir();
        std::fs::create_dir_all(&dir).map_err(|e| Error::io("create directory", &dir, e))?;
        if created {
            sync_path(root)?;
        }
        let lock_path = dir.join("LOCK");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| Error::io("open", &lock_path, e))?;
        // A store of this folder just dropped may still be letting go (its
        // last sync task ends a moment after its answer): wait a little
        // before deciding that another store holds the journal.
        let deadline = Instant::now() + LOCK_WAIT;
        loop {
            match lock.try_lock() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    tracing::warn!(
                        dir = %dir.display(),
                        "another event store holds this journal; this one syncs each log itself"
                    );
                    return Ok(None);
                }
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(Error::io("lock", &lock_path, e));
                }
            }
        }
        // The spares a stop left hold lines that reached the OS; moved
        // first, so the replay finds their logs where they belong.
        crate::spare::recover(root, sessions_dir)?;
        let (last_seq, segments) = replay(&dir, sessions_dir)?;
        let checkpointing = Arc::new(AtomicBool::new(false));
        if !segments.is_empty() {
            // Counts as a checkpoint in flight: the first rotation waits.
            checkpointing.store(true, Ordering::SeqCst);
            let flag = Arc::clone(&checkpointing);
            let (sessions_dir, journal_dir) = (sessions_dir.to_owned(), dir.clone());
            let run = move || {
                retire(&sessions_dir, &journal_dir, segments);
                flag.store(false, Ordering::SeqCst);
            };
            if let Err(error) = std::thread::Builder::new()
                .name("agentkit-journal".to_owned())
                .spawn(run)
            {
                tracing::warn!(%error, "could not start retiring the replayed journal; it is kept for the next start");
                checkpointing.store(false, Ordering::SeqCst);
            }
        }
        Ok(Some(Journal {
            dir,
            _lock: lock,
            segment: None,
            next_seq: last_seq + 1,
            checkpoint_after,
            checkpointing,
            checkpoints: Arc::default(),
            buffer: Vec::new(),
        }))
    }

    pub(crate) fn checkpoints(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.checkpoints)
    }

    /// Journals `spans` and makes them durable with one `fdatasync`. A
    /// span whose bytes cannot be read back is left out, with its error.
    /// On a write error the segment is given up (the next commit opens a
    /// new one), and the caller syncs the logs itself.
    pub(crate) fn commit(&mut self, spans: &[Span<'_>]) -> Result<Vec<Option<Error>>> {
        self.buffer.clear();
        let mut errors = Vec::with_capacity(spans.len());
        for span in spans {
            errors.push(encode(&mut self.buffer, span).err());
        }
        if self.buffer.is_empty() {
            return Ok(errors);
        }
        self.rotate_if_due();
        if self.segment.is_none() {
            self.segment = Some(self.new_segment()?);
        }
        let Some(segment) = self.segment.as_mut() else {
            return Ok(errors);
        };
        let written = segment
            .file
            .write_all(&self.buffer)
            .and_then(|()| segment.file.sync_data());
        if let Err(e) = written {
            // The segment may end in part of a record now: a replay stops
            // there, so nothing may follow it in this segment.
            let error = Error::io("write", &segment.path, e);
            self.segment = None;
            return Err(error);
        }
        segment.len += self.buffer.len() as u64;
        if self.buffer.capacity() > 4 * 1024 * 1024 {
            self.buffer = Vec::new();
        }
        Ok(errors)
    }

    /// Starts a checkpoint of the current segment if it is old or large
    /// enough and no other checkpoint is running.
    fn rotate_if_due(&mut self) {
        let due = self
            .segment
            .as_ref()
            .is_some_and(|s| s.len >= SEGMENT_BYTES || s.opened.elapsed() >= self.checkpoint_after);
        if !due || self.checkpointing.swap(true, Ordering::SeqCst) {
            return;
        }
        let Some(old) = self.segment.take() else {
            self.checkpointing.store(false, Ordering::SeqCst);
            return;
        };
        let flag = Arc::clone(&self.checkpointing);
        let done = Arc::clone(&self.checkpoints);
        let run = move || {
            checkpoint(old);
            done.fetch_add(1, Ordering::SeqCst);
            flag.store(false, Ordering::SeqCst);
        };
        // Every byte the old segment names was written to its log before
        // the segment was let go, so a `syncfs` from now on covers them.
        if let Err(error) = std::thread::Builder::new()
            .name("agentkit-journal".to_owned())
            .spawn(run)
        {
            tracing::warn!(%error, "could not start a journal checkpoint; the segment is kept for the next start");
            self.checkpointing.store(false, Ordering::SeqCst);
        }
    }

    fn new_segment(&mut self) -> Result<Segment> {
        let path = self.dir.join(segment_name(self.next_seq));
        self.next_seq += 1;
        let mut file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(|e| Error::io("create", &path, e))?;
        file.write_all(MAGIC)
            .and_then(|()| file.sync_data())
            .map_err(|e| Error::io("write", &path, e))?;
        // The segment's entry must be durable before a record in it is
        // acknowledged.
        sync_path(&self.dir)?;
        Ok(Segment {
            file,
            path,
            len: MAGIC.len() as u64,
            opened: Instant::now(),
        })
    }
}

/// For a store opened without its journal: moves the logs a journaled
/// start left in spare folders to `sessions/`, under the journal's lock
/// (a store that holds it is using its spares: they are left alone).
pub(crate) fn recover_spares(root: &Path, sessions_dir: &Path) -> Result<()> {
    if cfg!(not(target_os = "linux")) || !root.join(crate::spare::SPARE_DIR).is_dir() {
        return Ok(());
    }
    let lock_path = root.join(JOURNAL_DIR).join("LOCK");
    let lock = match File::open(&lock_path) {
        Ok(lock) => lock,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("open", &lock_path, e)),
    };
    match lock.try_lock() {
        Ok(()) => crate::spare::recover(root, sessions_dir).map(|_| ()),
        Err(std::fs::TryLockError::WouldBlock) => Ok(()),
        Err(std::fs::TryLockError::Error(e)) => Err(Error::io("lock", &lock_path, e)),
    }
}

/// Appends `span`'s record to `buffer`, reading its bytes back from the
/// log (they are in the page cache: they were just written).
fn encode(buffer: &mut Vec<u8>, span: &Span<'_>) -> Result<()> {
    if span.to <= span.from {
        return Ok(());
    }
    let id = span.session.as_str().as_bytes();
    let id_len = u16::try_from(id.len()).map_err(|_| {
        Error::io(
            "journal",
            span.session.as_str(),
            std::io::Error::other("session id too long"),
        )
    })?;
    let len = usize::try_from(span.to - span.from).unwrap_or(usize::MAX);
    let body_len = 2 + id.len() + 8 + len;
    let body_len_u32 = u32::try_from(body_len).map_err(|_| {
        Error::io(
            "journal",
            span.session.as_str(),
            std::io::Error::other("sync span over 4 GiB"),
        )
    })?;
    let start = buffer.len();
    buffer.extend_from_slice(&body_len_u32.to_le_bytes());
    buffer.extend_from_slice(&[0; 4]);
    buffer.extend_from_slice(&id_len.to_le_bytes());
    buffer.extend_from_slice(id);
    buffer.extend_from_slice(&span.from.to_le_bytes());
    let bytes_at = buffer.len();
    buffer.resize(bytes_at + len, 0);
    if let Err(e) = span.file.read_exact_at(&mut buffer[bytes_at..], span.from) {
        buffer.truncate(start);
        return Err(Error::io("read back", span.session.as_str(), e));
    }
    let crc = crc32fast::hash(&buffer[start + HEADER..]);
    buffer[start + 4..start + HEADER].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// Makes every log the segment covers durable, then deletes it. A failure
/// keeps the segment: the next start replays it.
fn checkpoint(old: Segment) {
    if let Err(error) = syncfs(&old.file) {
        tracing::warn!(segment = %old.path.display(), %error, "journal checkpoint failed; the segment is kept for the next start");
        return;
    }
    drop(old.file);
    if let Err(error) = std::fs::remove_file(&old.path) {
        tracing::warn!(segment = %old.path.display(), %error, "could not delete a checkpointed journal segment");
    }
}

fn segment_name(seq: u64) -> String {
    format!("{seq:016}.journal")
}

fn segment_seq(name: &str) -> Option<u64> {
    name.strip_suffix(".journal")?.parse().ok()
}

/// Replays every segment in `dir` into the logs under `sessions_dir`.
/// Returns the highest segment number seen and the segments
/// (for [`retire`]).
fn replay(dir: &Path, sessions_dir: &Path) -> Result<(u64, Vec<PathBuf>)> {
    let mut segments = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io("read directory", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("read directory", dir, e))?;
        if let Some(seq) = entry.file_name().to_str().and_then(segment_seq) {
            segments.push((seq, entry.path()));
        }
    }
    segments.sort();
    let last_seq = segments.last().map_or(0, |(seq, _)| *seq);
    let mut replayed = Replayed {
        segments: segments.len(),
        ..Replayed::default()
    };
    if segments.is_empty() {
        return Ok((last_seq, Vec::new()));
    }
    let mut logs = Logs::default();
    for (_, path) in &segments {
        replay_segment(path, sessions_dir, &mut logs, &mut replayed)?;
    }
    drop(logs);
    tracing::info!(
        segments = replayed.segments,
        records = replayed.records,
        rewritten = replayed.rewritten,
        skipped = replayed.skipped,
        "replayed the event journal"
    );
    Ok((last_seq, segments.into_iter().map(|(_, p)| p).collect()))
}

/// Makes what a replay wrote durable, then deletes the segments it read:
/// in the background, so a start does not wait for the disk. Until they
/// are deleted a later start replays them again, which changes nothing.
fn retire(sessions_dir: &Path, dir: &Path, segments: Vec<PathBuf>) {
    if let Err(error) = File::open(sessions_dir).and_then(|f| syncfs(&f)) {
        tracing::warn!(dir = %sessions_dir.display(), %error, "could not sync the replayed logs; the journal is kept for the next start");
        return;
    }
    for path in &segments {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                tracing::warn!(segment = %path.display(), %error, "could not delete a replayed journal segment");
            }
        }
    }
    if let Err(error) = sync_path(dir) {
        tracing::warn!(%error, "could not sync the journal folder");
    }
}

/// The lengths of the logs a replay has seen (`None`: the log is not
/// there, and no record at offset 0 made it). No descriptor is held from
/// one record to the next: a journal may name more logs than the process
/// may open at once.
#[derive(Default)]
struct Logs {
    lens: HashMap<SessionId, Option<u64>>,
}

/// Replays one segment, a record at a time (memory: the largest record).
fn replay_segment(
    path: &Path,
    sessions_dir: &Path,
    logs: &mut Logs,
    replayed: &mut Replayed,
) -> Result<()> {
    let file = match File::open(path) {
        Ok(file) => file,
        // Checkpointed (by the store of this folder that was just
        // dropped) between the listing and now.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("open", path, e)),
    };
    let size = file
        .metadata()
        .map_err(|e| Error::io("stat", path, e))?
        .len();
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut magic = [0; MAGIC.len()];
    if reader.read_exact(&mut magic).is_err() || &magic != MAGIC {
        // A segment whose header never reached the disk holds nothing
        // acknowledged.
        tracing::warn!(segment = %path.display(), "journal segment without its header; skipped");
        return Ok(());
    }
    let mut at = MAGIC.len() as u64;
    let mut body = Vec::new();
    while at < size {
        let Some(record) = next_record(&mut reader, size - at, &mut body) else {
            tracing::warn!(segment = %path.display(), offset = at, "torn or damaged journal record; the rest of the segment is ignored");
            break;
        };
        at += record.size;
        let Ok(session) = SessionId::parse(record.session) else {
            tracing::warn!(segment = %path.display(), "journal record for an invalid session id; skipped");
            replayed.skipped += 1;
            continue;
        };
        apply(sessions_dir, logs, &session, &record, replayed)?;
    }
    Ok(())
}

/// Writes one record's bytes into its log, unless the log holds them
/// already or they would start past its end.
fn apply(
    sessions_dir: &Path,
    logs: &mut Logs,
    session: &SessionId,
    record: &Record<'_>,
    replayed: &mut Replayed,
) -> Result<()> {
    let dir = sessions_dir.join(session.as_str());
    let path = dir.join(crate::store::LOG_FILE);
    let known = match logs.lens.get(session) {
        Some(len) => *len,
        None => match std::fs::metadata(&path) {
            Ok(meta) => Some(meta.len()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(Error::io("stat", &path, e)),
        },
    };
    let len = match known {
        Some(len) => len,
        // The record that began the log: make its folder.
        None if record.offset == 0 => {
            std::fs::create_dir_all(&dir).map_err(|e| Error::io("create directory", &dir, e))?;
            0
        }
        None => {
            tracing::warn!(session = %session, offset = record.offset, "journal record past the end of a missing log; skipped");
            replayed.skipped += 1;
            logs.lens.insert(session.clone(), None);
            return Ok(());
        }
    };
    if record.offset > len {
        tracing::warn!(session = %session, offset = record.offset, len, "journal record past the end of its log; skipped");
        replayed.skipped += 1;
        logs.lens.insert(session.clone(), Some(len));
        return Ok(());
    }
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| Error::io("open", &path, e))?;
    // Mostly the log holds these bytes already (the process stopped or
    // crashed; the OS kept what it was given): leave its pages clean.
    if !holds(&file, len, record.offset, record.bytes) {
        file.write_all_at(record.bytes, record.offset)
            .map_err(|e| Error::io("write", &path, e))?;
        replayed.rewritten += 1;
    }
    replayed.records += 1;
    let end = record.offset + record.bytes.len() as u64;
    logs.lens.insert(session.clone(), Some(len.max(end)));
    Ok(())
}

/// Whether `file` (of length `len`) holds `bytes` at `offset`.
fn holds(file: &File, len: u64, offset: u64, bytes: &[u8]) -> bool {
    if offset + bytes.len() as u64 > len {
        return false;
    }
    let mut found = vec![0; bytes.len()];
    file.read_exact_at(&mut found, offset).is_ok() && found == bytes
}

struct Record<'a> {
    session: &'a str,
    offset: u64,
    bytes: &'a [u8],
    /// Its size in the segment, header included.
    size: u64,
}

/// Reads the next record into `body` (at most `left` bytes remain in the
/// segment), if it is whole and its checksum matches.
fn next_record<'a>(reader: &mut impl Read, left: u64, body: &'a mut Vec<u8>) -> Option<Record<'a>> {
    let mut header = [0; HEADER];
    reader.read_exact(&mut header).ok()?;
    let len = u32::from_le_bytes(header[..4].try_into().ok()?);
    let crc = u32::from_le_bytes(header[4..].try_into().ok()?);
    // A length past the end of the segment is a torn or damaged header:
    // do not allocate for it.
    if u64::from(len) > left.saturating_sub(HEADER as u64) {
        return None;
    }
    body.clear();
    body.resize(len as usize, 0);
    reader.read_exact(body).ok()?;
    if crc32fast::hash(body) != crc {
        return None;
    }
    let body: &'a [u8] = body;
    let id_len = u16::from_le_bytes(body.get(..2)?.try_into().ok()?) as usize;
    let session = std::str::from_utf8(body.get(2..2 + id_len)?).ok()?;
    let offset = u64::from_le_bytes(body.get(2 + id_len..10 + id_len)?.try_into().ok()?);
    Some(Record {
        session,
        offset,
        bytes: body.get(10 + id_len..)?,
        size: HEADER as u64 + u64::from(len),
    })
}

/// `syncfs(2)`: every dirty page, inode and folder of the file system
/// that holds `file`.
#[cfg(target_os = "linux")]
fn syncfs(file: &File) -> std::io::Result<()> {
    nix::unistd::syncfs(file).map_err(std::io::Error::from)
}

/// Elsewhere there is no `syncfs`; [`Journal::open`] declines, and a
/// store syncs each log itself.
#[cfg(not(target_os = "linux"))]
fn syncfs(_file: &File) -> std::io::Result<()> {
    Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
}

/// `fsync`s a folder (its entries), as an error.
fn sync_path(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io("sync", dir, e))
}
