//! The journal (`[memory] journal = true`): one JSON line per settled
//! turn (`timestamp`, `sessionId`, `turnId`, `principal`, `message`,
//! `reply`, `outcome`) appended to the agent's `memory/journal.jsonl`
//! under its state folder, shared by all of its sessions on this host.
//! With a shared store (`--database-url`) the lines go to the store
//! instead (`agentkit_store::SharedJournal`), so every host's sessions
//! share one journal: the store keeps the newest `JOURNAL_KEEP + 1`
//! times `journal_max_bytes`, and a session's copy holds the newest
//! `journal_max_bytes` of it (what `journal.jsonl` holds on files).
//!
//! A turn never waits on the file: its line goes into a bounded queue
//! (a full queue makes the turn's end wait for room, nothing is dropped)
//! and one writer task appends on the blocking pool, rotating the file
//! past `journal_max_bytes` (`journal.jsonl` becomes `journal.1.jsonl`,
//! and so on, [`JOURNAL_KEEP`] rotated files kept). Shutdown flushes the
//! queue. A session's `read` tool reaches it through a read-only copy
//! made in its workspace ([`JOURNAL_IN_WORKSPACE`]) when a turn first
//! uses a tool.

use std::io::Write;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use agentkit_store::SharedJournal;
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

/// How many rotated files are kept besides `journal.jsonl`.
pub const JOURNAL_KEEP: usize = 5;

/// Where a session's workspace holds its copy of the journal.
pub const JOURNAL_IN_WORKSPACE: &str = ".agentkit/memory/journal.jsonl";

/// How many lines wait for the writer at most.
const QUEUE: usize = 1024;

/// One settled turn, as the journal keeps it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct JournalLine {
    pub(crate) timestamp: String,
    pub(crate) session_id: String,
    pub(crate) turn_id: String,
    pub(crate) principal: String,
    pub(crate) message: String,
    pub(crate) reply: String,
    /// `completed`, `failed` or `interrupted`.
    pub(crate) outcome: &'static str,
}

enum Job {
    Line(String),
    Flush(oneshot::Sender<()>),
}

/// The agent's journal: the queue of its writer.
#[derive(Debug)]
pub(crate) struct Journal {
    path: PathBuf,
    /// The store several hosts share, if any (else the file at `path`).
    shared: Option<Arc<dyn SharedJournal>>,
    max_bytes: u64,
    tx: mpsc::Sender<Job>,
}

/// How many lines a shared journal takes between two trims to its
/// budget (a trim reads the kept lines' sizes).
const TRIM_EVERY: usize = 256;

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Job::Line(_) => f.write_str("Line"),
            Job::Flush(_) => f.write_str("Flush"),
        }
    }
}

/// `memory/journal.jsonl` under `state_dir`.
pub fn journal_path(state_dir: &Path) -> PathBuf {
    state_dir.join("memory").join("journal.jsonl")
}

fn rotated(path: &Path, n: usize) -> PathBuf {
    path.with_file_name(format!("journal.{n}.jsonl"))
}

/// Appends `lines`, rotating first whenever the next line would take the
/// file past `max` (a line alone longer than `max` still goes in, alone).
fn append(path: &Path, lines: &[String], max: u64) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let open = || {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    };
    let mut file = open()?;
    for line in lines {
        let len = line.len() as u64 + 1;
        if size > 0 && size + len > max {
            file.flush()?;
            drop(file);
            rotate(path)?;
            file = open()?;
            size = 0;
        }
        file.write_all(line.as_bytes())?;
        file.write_all(b"\n")?;
        size += len;
    }
    file.flush()
}

fn rotate(path: &Path) -> std::io::Result<()> {
    let last = rotated(path, JOURNAL_KEEP);
    if last.exists() {
        std::fs::remove_file(&last)?;
    }
    for n in (1..JOURNAL_KEEP).rev() {
        let from = rotated(path, n);
        if from.exists() {
            std::fs::rename(&from, rotated(path, n + 1))?;
        }
    }
    std::fs::rename(path, rotated(path, 1))
}

impl Journal {
    /// Starts the writer of the journal (on the current Tokio runtime):
    /// `state_dir`'s file, or `shared`.
    pub(crate) fn start(
        state_dir: &Path,
        max_bytes: u64,
        shared: Option<Arc<dyn SharedJournal>>,
    ) -> Journal {
        let path = journal_path(state_dir);
        let (tx, mut rx) = mpsc::channel::<Job>(QUEUE);
        let file = path.clone();
        let sink = shared.clone();
        let keep = max_bytes.saturating_mul(JOURNAL_KEEP as u64 + 1);
        let mut since_trim = TRIM_EVERY;
        tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                let mut lines = Vec::new();
                let mut acks = Vec::new();
                let mut next = Some(first);
                while let Some(job) = next {
                    match job {
                        Job::Line(l) => lines.push(l),
                        Job::Flush(ack) => acks.push(ack),
                    }
                    next = rx.try_recv().ok();
                }
                if let (Some(sink), false) = (&sink, lines.is_empty()) {
                    let count = lines.len();
                    since_trim += count;
                    let trim = (since_trim >= TRIM_EVERY).then_some(keep);
                    if trim.is_some() {
                        since_trim = 0;
                    }
                    if let Err(e) = sink.append(lines, trim).await {
                        tracing::warn!(error = %e, lines = count, "cannot append to the shared journal");
                    }
                } else if !lines.is_empty() {
                    let path = file.clone();
                    let count = lines.len();
                    let wrote =
                        tokio::task::spawn_blocking(move || append(&path, &lines, max_bytes)).await;
                    match wrote {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => {
                            tracing::warn!(path = %file.display(), error = %e, lines = count, "cannot append to the journal")
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, lines = count, "the journal's writer failed")
                        }
                    }
                }
                for ack in acks {
                    let _ = ack.send(());
                }
            }
        });
        Journal {
            path,
            shared,
            max_bytes,
            tx,
        }
    }

    /// Queues `line`; waits only while the queue is full.
    pub(crate) async fn record(&self, line: &JournalLine) {
        let Ok(text) = serde_json::to_string(line) else {
            return;
        };
        if self.tx.send(Job::Line(text)).await.is_err() {
            tracing::warn!(session = %line.session_id, "the journal's writer has stopped; line not kept");
        }
    }

    /// Waits until every line queued before is in the file.
    pub(crate) async fn flush(&self) {
        let (ack, done) = oneshot::channel();
        if self.tx.send(Job::Flush(ack)).await.is_ok() {
            let _ = done.await;
        }
    }

    /// Copies the journal, as it is now, into `workspace` at
    /// [`JOURNAL_IN_WORKSPACE`], read-only (the session's `read` tool
    /// reaches it; edits never reach the journal), unless the copy there
    /// is already current.
    pub(crate) async fn offer(&self, workspace: &Path) {
        self.flush().await;
        let to = workspace.join(JOURNAL_IN_WORKSPACE);
        if let Some(shared) = &self.shared {
            let lines = match shared.recent(self.max_bytes).await {
                Ok(lines) => lines,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the shared journal");
                    return;
                }
            };
            let copied = tokio::task::spawn_blocking(move || write_copy(&to, &lines)).await;
            if let Ok(Err(e)) = copied {
                tracing::warn!(error = %e, "cannot copy the journal into the workspace");
            }
            return;
        }
        let from = self.path.clone();
        let copied = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            let Ok(journal) = std::fs::metadata(&from) else {
                return Ok(());
            };
            // Unchanged since the last copy (the journal only grows, and
            // a rotation writes it anew): nothing to copy.
            if let Ok(copy) = std::fs::metadata(&to)
                && copy.len() == journal.len()
                && matches!((copy.modified(), journal.modified()), (Ok(c), Ok(j)) if c >= j)
            {
                return Ok(());
            }
            if let Some(dir) = to.parent() {
                std::fs::create_dir_all(dir)?;
            }
            // A read-only copy cannot be written over: replace it.
            match std::fs::remove_file(&to) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            std::fs::copy(&from, &to)?;
            let mut perms = std::fs::metadata(&to)?.permissions();
            perms.set_readonly(true);
            std::fs::set_permissions(&to, perms)
        })
        .await;
        if let Ok(Err(e)) = copied {
            tracing::warn!(error = %e, "cannot copy the journal into the workspace");
        }
    }
}

/// Writes `lines` as the read-only copy at `to`, unless it holds them.
fn write_copy(to: &Path, lines: &[String]) -> std::io::Result<()> {
    if lines.is_empty() {
        return Ok(());
    }
    let mut text = lines.join("\n");
    text.push('\n');
    if std::fs::read_to_string(to).is_ok_and(|old| old == text) {
        return Ok(());
    }
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir)?;
    }
    match std::fs::remove_file(to) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::fs::write(to, text)?;
    let mut perms = std::fs::metadata(to)?.permissions();
    perms.set_readonly(true);
    std::fs::set_permissions(to, perms)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn rotates_past_the_cap_and_keeps_a_bounded_number() {
        let dir = tempfile::tempdir().unwrap();
        let path = journal_path(dir.path());
        let line = "x".repeat(99);
        for _ in 0..20 {
            append(&path, std::slice::from_ref(&line), 250).unwrap();
        }
        // Two lines (200 bytes) per file: 10 files made, 6 kept.
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 2);
        for n in 1..=JOURNAL_KEEP {
            assert!(rotated(&path, n).is_file(), "{n}");
        }
        assert!(!rotated(&path, JOURNAL_KEEP + 1).exists());
    }
}
