//! Opening a log after a start or a crash: check that line `i` is event
//! `i` and cut a torn last line, so no reader ever sees half an event.
//!
//! Opening must not cost a JSON parse of every line (a long session's log
//! is opened again whenever it was closed for being idle): lines this
//! store wrote begin with `{"type":"…","index":N,"sessionId":"…"`, so the
//! index and session are read from that prefix and only the last line is
//! parsed whole (a torn write shows there). A line that does not start
//! that way is parsed whole. Damage inside a line's payload is found when
//! that line is read, as [`Error::Corrupt`].

use std::fs::OpenOptions;
use std::path::Path;

use agentkit_protocol::{Event, EventType, SessionId};

use crate::error::{Error, Result};

/// What a validated log holds.
#[derive(Debug)]
pub(crate) struct Recovered {
    /// `offsets[i]` is the byte offset where the line of event `i` starts.
    pub(crate) offsets: Vec<u64>,
    /// The file's length after recovery: the end of the last whole line.
    pub(crate) end: u64,
}

/// Reads `path`, checks that line `i` is event `first + i` of `session`
/// (`first` is 0 but for a fork's own file, which follows its shared
/// prefix: see `base.rs`), and truncates a torn tail: bytes after the
/// last newline, or a last line that does not parse as an event. Any
/// other bad line (unparseable before the last, or a wrong index or
/// session anywhere) is [`Error::Corrupt`].
pub(crate) fn recover(path: &Path, session: &SessionId, first: u64) -> Result<Recovered> {
    let bytes = std::fs::read(path).map_err(|e| Error::io("read", path, e))?;
    let mut offsets = Vec::new();
    let mut start = 0usize;
    let mut end = 0usize;
    while start < bytes.len() {
        let Some(newline) = bytes[start..].iter().position(|&b| b == b'\n') else {
            // No trailing newline: the write of this line never finished.
            break;
        };
        let line_end = start + newline + 1;
        let is_last = line_end == bytes.len();
        let expected = first + offsets.len() as u64;
        let line = &bytes[start..start + newline];
        let checked = if !is_last && quick_check(line, expected, session) {
            Ok(())
        } else {
            check_line(line, expected, session)
        };
        match checked {
            Ok(()) => {}
            // A complete but unreadable last line is a torn write too (the
            // newline made it to disk before the rest of the line did). A
            // readable line with the wrong index or session is not.
            Err(BadLine::Unreadable(_)) if is_last => break,
            Err(BadLine::Unreadable(reason) | BadLine::Wrong(reason)) => {
                return Err(Error::Corrupt {
                    path: path.to_owned(),
                    line: offsets.len() as u64 + 1,
                    reason,
                });
            }
        }
        offsets.push(start as u64);
        start = line_end;
        end = line_end;
    }
    if end < bytes.len() {
        let file = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        file.set_len(end as u64)
            .map_err(|e| Error::io("truncate", path, e))?;
        file.sync_data().map_err(|e| Error::io("sync", path, e))?;
        tracing::warn!(
            path = %path.display(),
            kept_events = offsets.len(),
            dropped_bytes = bytes.len() - end,
            "truncated a torn last line of an event log"
        );
    }
    Ok(Recovered {
        offsets,
        end: end as u64,
    })
}

/// Why a whole line is not the event it should be.
enum BadLine {
    /// Not an event at all: what a torn write leaves.
    Unreadable(String),
    /// An event, but not this one.
    Wrong(String),
}

/// Does `line` start the way this store writes event `expected` of
/// `session`? (`false` only means "parse it to be sure".)
fn quick_check(line: &[u8], expected: u64, session: &SessionId) -> bool {
    let Some(rest) = line.strip_prefix(br#"{"type":""#) else {
        return false;
    };
    let Some(close) = rest.iter().position(|&b| b == b'"') else {
        return false;
    };
    let Some(rest) = rest[close + 1..].strip_prefix(br#","index":"#) else {
        return false;
    };
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    let Some(index) = std::str::from_utf8(&rest[..digits])
        .ok()
        .and_then(|d| d.parse::<u64>().ok())
    else {
        return false;
    };
    let Some(rest) = rest[digits..].strip_prefix(br#","sessionId":""#) else {
        return false;
    };
    let id = session.as_str().as_bytes();
    index == expected && rest.starts_with(id) && rest.get(id.len()) == Some(&b'"')
}

/// Checks one line (without its newline) against what it must be.
fn check_line(line: &[u8], expected_index: u64, session: &SessionId) -> Result<(), BadLine> {
    let event: Event = serde_json::from_slice(line)
        .map_err(|e| BadLine::Unreadable(format!("not an event: {e}")))?;
    if event.index != expected_index {
        return Err(BadLine::Wrong(format!(
            "index {} where {expected_index} was expected",
            event.index
        )));
    }
    if &event.session_id != session {
        return Err(BadLine::Wrong(format!(
            "event of session `{}` in the log of `{session}`",
            event.session_id
        )));
    }
    Ok(())
}

/// Which events a read keeps: all, or those of some types only, whose
/// other lines are skipped without a parse when they begin the way this
/// store writes them (`{"type":"…",`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Only {
    /// The kept types' names as JSON strings; `None` keeps every event.
    names: Option<Vec<Vec<u8>>>,
    types: Vec<EventType>,
}

impl Only {
    pub(crate) fn types(types: &[EventType]) -> Only {
        let names = types
            .iter()
            .filter_map(|t| serde_json::to_vec(t).ok())
            .collect();
        Only {
            names: Some(names),
            types: types.to_vec(),
        }
    }

    /// Whether `line` is surely of a type not kept.
    fn skips(&self, line: &[u8]) -> bool {
        let Some(names) = &self.names else {
            return false;
        };
        let Some(rest) = line.strip_prefix(br#"{"type":"#) else {
            return false;
        };
        let Some(close) = rest.iter().skip(1).position(|&b| b == b'"') else {
            return false;
        };
        let name = &rest[..close + 2];
        !names.iter().any(|n| n.as_slice() == name)
    }

    fn keeps(&self, event: &Event) -> bool {
        self.names.is_none() || self.types.contains(&event.event_type)
    }
}

/// Parses the lines of a byte range that recovery or the writer already
/// validated (`first` is the index of the first line), keeping only the
/// events `only` keeps.
pub(crate) fn parse_lines_of(
    path: &Path,
    bytes: &[u8],
    first: u64,
    only: &Only,
) -> Result<Vec<Event>> {
    let mut events = Vec::new();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if line.is_empty() || only.skips(line) {
            continue;
        }
        let index = first + i as u64;
        let event: Event = serde_json::from_slice(line).map_err(|e| Error::Corrupt {
            path: path.to_owned(),
            line: index + 1,
            reason: format!("not an event: {e}"),
        })?;
        if event.index != index {
            return Err(Error::Corrupt {
                path: path.to_owned(),
                line: index + 1,
                reason: format!("index {} where {index} was expected", event.index),
            });
        }
        if only.keeps(&event) {
            events.push(event);
        }
    }
    Ok(events)
}
