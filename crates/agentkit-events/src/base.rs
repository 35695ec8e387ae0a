//! A fork's shared prefix: a fork's log does not copy the events it
//! starts with, it names them.
//!
//! A session forked before event `at` of another holds, in its folder,
//! hard links to the files that store the original's events `0..at`
//! (`base-<k>.ndjson`) and `base.json`, which says how many events and
//! bytes of each it takes. Its own `events.ndjson` starts at index `at`.
//! Making a fork is therefore a few links and one small file, whatever
//! the original's length: no event is read, encoded or written again.
//!
//! It holds because a log only grows: the original keeps appending to
//! the file the fork links, and the fork reads only the bytes it named,
//! which were made durable (`fdatasync`) before it named them. A torn tail
//! cut at recovery lies past any synced byte. Deleting the original
//! unlinks its name, not the fork's, so the fork keeps its prefix (and
//! the file's later bytes stay on disk until the last fork goes too).
//!
//! A fork of a fork links the same files: its prefix is the first
//! segments of its original's, the last one cut, and then (when it cuts
//! past the original's own start) the original's own file. A chain of
//! forks has one segment per level it reaches back.
//!
//! The lines of a segment carry the session id they were written for;
//! readers give them the fork's.

use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use agentkit_protocol::{Event, SessionId};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::recovery::{Only, parse_lines_of};
use crate::store::LOG_FILE;

/// The file naming a fork's prefix, in its folder.
pub(crate) const BASE_FILE: &str = "base.json";

/// What `base.json` holds.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    /// The session forked, and before which of its events.
    from: String,
    at: u64,
    segments: Vec<SegmentRecord>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct SegmentRecord {
    /// The link's name, in the fork's folder.
    file: String,
    /// The index of its first event, and how many events and bytes of
    /// the file the fork takes.
    first: u64,
    events: u64,
    bytes: u64,
}

/// One stretch of a log's prefix: events `first..first + offsets.len()`
/// are the first `end` bytes of the file at `path`.
#[derive(Debug)]
pub(crate) struct Segment {
    path: PathBuf,
    first: u64,
    /// Where each event's line starts in the file.
    offsets: Vec<u64>,
    end: u64,
}

/// The events a log starts with that live in other files: none for a
/// session that is not a fork.
#[derive(Debug, Default)]
pub(crate) struct Base {
    segments: Vec<Segment>,
}

/// A piece of a new fork's prefix: `events` events (from index `first`)
/// in the first `bytes` bytes of the file at `path`.
#[derive(Debug, Clone)]
pub(crate) struct Piece {
    pub(crate) path: PathBuf,
    pub(crate) first: u64,
    pub(crate) events: u64,
    pub(crate) bytes: u64,
}

impl Base {
    /// The prefix of the log in `dir`, if it is a fork's (else empty).
    pub(crate) fn load(dir: &Path) -> Result<Base> {
        let path = dir.join(BASE_FILE);
        let text = match std::fs::read(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Base::default()),
            Err(e) => return Err(Error::io("read", &path, e)),
        };
        let record: Record = serde_json::from_slice(&text).map_err(|e| Error::Corrupt {
            path: path.clone(),
            line: 1,
            reason: format!("not a fork's base: {e}"),
        })?;
        let mut segments = Vec::with_capacity(record.segments.len());
        let mut next = 0;
        for s in record.segments {
            let file = dir.join(&s.file);
            let corrupt = |reason: String| Error::Corrupt {
                path: file.clone(),
                line: 0,
                reason,
            };
            if s.first != next || s.file.contains('/') {
                return Err(corrupt(format!(
                    "segment starts at event {} where {next} was expected",
                    s.first
                )));
            }
            let offsets = line_starts(&file, s.bytes)?;
            if offsets.len() as u64 != s.events {
                return Err(corrupt(format!(
                    "{} lines in its first {} bytes where {} events were named",
                    offsets.len(),
                    s.bytes,
                    s.events
                )));
            }
            next = s.first + s.events;
            segments.push(Segment {
                path: file,
                first: s.first,
                offsets,
                end: s.bytes,
            });
        }
        Ok(Base { segments })
    }

    /// How many events the prefix holds: the index the log's own file
    /// starts at.
    pub(crate) fn len(&self) -> u64 {
        self.segments
            .last()
            .map_or(0, |s| s.first + s.offsets.len() as u64)
    }

    /// Events `start..end` of the prefix (clamped to it) that `only`
    /// keeps, as stored, with `session` as their session. Blocking.
    pub(crate) fn read(
        &self,
        session: &SessionId,
        start: u64,
        end: u64,
        only: &Only,
    ) -> Result<Vec<Event>> {
        let end = end.min(self.len());
        let mut events = Vec::new();
        for s in &self.segments {
            let (lo, hi) = (
                start.max(s.first),
                end.min(s.first + s.offsets.len() as u64),
            );
            if lo >= hi {
                continue;
            }
            let from = s.offsets[as_usize(lo - s.first)];
            let to = s
                .offsets
                .get(as_usize(hi - s.first))
                .copied()
                .unwrap_or(s.end);
            let file = std::fs::File::open(&s.path).map_err(|e| Error::io("open", &s.path, e))?;
            let mut bytes = vec![0; as_usize(to - from)];
            file.read_exact_at(&mut bytes, from)
                .map_err(|e| Error::io("read", &s.path, e))?;
            let mut read = parse_lines_of(&s.path, &bytes, lo, only)?;
            for event in &mut read {
                event.session_id = session.clone();
            }
            events.append(&mut read);
        }
        Ok(events)
    }

    /// The pieces a fork before event `at` (at most [`len`](Self::len))
    /// takes of this prefix: its segments up to `at`, the last one cut.
    pub(crate) fn pieces(&self, at: u64) -> Vec<Piece> {
        self.segments
            .iter()
            .filter(|s| s.first < at)
            .map(|s| {
                let events = (at - s.first).min(s.offsets.len() as u64);
                let bytes = s.offsets.get(as_usize(events)).copied().unwrap_or(s.end);
                Piece {
                    path: s.path.clone(),
                    first: s.first,
                    events,
                    bytes,
                }
            })
            .collect()
    }
}

/// Makes the folder of a fork of `from` before event `at`, named `to`,
/// under `sessions_dir`: links to `pieces` (whose bytes are durable),
/// `base.json` and an empty own log, built aside and moved in place at
/// once, so a crash leaves either no fork or a whole one. Blocking.
pub(crate) fn make(
    sessions_dir: &Path,
    from: &SessionId,
    at: u64,
    to: &SessionId,
    pieces: &[Piece],
) -> Result<()> {
    let dir = sessions_dir.join(to.as_str());
    // Not a session id, so listings skip it.
    let aside = sessions_dir.join(format!(".fork-{to}"));
    if aside.exists() {
        std::fs::remove_dir_all(&aside).map_err(|e| Error::io("remove", &aside, e))?;
    }
    std::fs::create_dir(&aside).map_err(|e| Error::io("create directory", &aside, e))?;
    let mut segments = Vec::with_capacity(pieces.len());
    for (k, piece) in pieces.iter().enumerate() {
        let file = format!("base-{k}.ndjson");
        let link = aside.join(&file);
        std::fs::hard_link(&piece.path, &link).map_err(|e| Error::io("link", &link, e))?;
        segments.push(SegmentRecord {
            file,
            first: piece.first,
            events: piece.events,
            bytes: piece.bytes,
        });
    }
    let record = Record {
        from: from.as_str().to_owned(),
        at,
        segments,
    };
    let path = aside.join(BASE_FILE);
    let text = serde_json::to_vec(&record).map_err(|source| Error::Encode {
        session: to.clone(),
        source,
    })?;
    let mut file = std::fs::File::create(&path).map_err(|e| Error::io("create", &path, e))?;
    file.write_all(&text)
        .and_then(|()| file.sync_data())
        .map_err(|e| Error::io("write", &path, e))?;
    let log = aside.join(LOG_FILE);
    std::fs::File::create(&log).map_err(|e| Error::io("create", &log, e))?;
    sync_dir(&aside)?;
    std::fs::rename(&aside, &dir).map_err(|e| Error::io("rename", &aside, e))?;
    sync_dir(sessions_dir)
}

/// Where each line starts in the first `bytes` bytes of `path`, which end
/// with a whole line.
fn line_starts(path: &Path, bytes: u64) -> Result<Vec<u64>> {
    let file = std::fs::File::open(path).map_err(|e| Error::io("open", path, e))?;
    let mut text = vec![0; as_usize(bytes)];
    file.read_exact_at(&mut text, 0)
        .map_err(|e| Error::io("read", path, e))?;
    if text.last().is_some_and(|b| *b != b'\n') {
        return Err(Error::Corrupt {
            path: path.to_owned(),
            line: 0,
            reason: format!("its first {bytes} bytes do not end with a whole line"),
        });
    }
    let mut starts = Vec::new();
    let mut start = 0u64;
    for newline in memchr::memchr_iter(b'\n', &text) {
        starts.push(start);
        start = newline as u64 + 1;
    }
    Ok(starts)
}

fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io("sync", dir, e))
}

fn as_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}
