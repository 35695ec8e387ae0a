//! Group commit across sessions: every `fsync` of the store goes through
//! one [`Syncer`], which drains whatever requests are waiting in one
//! blocking task. With the journal (`journal.rs`, the default on Linux) a
//! batch costs one trip to the blocking pool and **one** `fdatasync`, of
//! the journal, however many sessions settle together; without it, one
//! `fdatasync` per log, one `fsync` per new session folder and one of the
//! shared `sessions/` folder.
//!
//! A request's answer is its own log's result: one failing file never
//! fails another's sync. Folder syncs are best effort (as before: a
//! failure weakens only a brand-new session's power-cut guarantee, and is
//! logged). A journal that cannot be written is given up for that batch:
//! its logs are synced one by one instead.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agentkit_protocol::SessionId;
use tokio::sync::oneshot;

use crate::error::{Error, Result};
use crate::journal::{Journal, Span};
use crate::spare::Spares;

/// One log to make durable.
#[derive(Debug)]
pub(crate) enum SyncJob {
    /// `fdatasync` the log itself.
    File {
        file: Arc<File>,
        path: PathBuf,
        /// The log's folder is new: its entry in `sessions/` must be made
        /// durable too.
        new_dir: bool,
    },
    /// Journal the log's bytes `from..to` (see `journal.rs`).
    Journal {
        file: Arc<File>,
        path: PathBuf,
        session: SessionId,
        from: u64,
        to: u64,
    },
}

impl SyncJob {
    fn new_dir(&self) -> bool {
        matches!(self, SyncJob::File { new_dir: true, .. })
    }

    /// The same log, synced by itself (when the journal failed). A log
    /// still in a spare folder is moved to its own first, so the folder
    /// synced beside it is the one that names it.
    fn into_direct(self, spares: Option<&Arc<Spares>>) -> SyncJob {
        match self {
            SyncJob::Journal {
                file,
                path,
                session,
                ..
            } => {
                if let Some(spares) = spares
                    && let Err(error) = spares.settle(&session)
                {
                    tracing::warn!(%session, %error, "could not move a new session's folder before syncing it");
                }
                SyncJob::File {
                    file,
                    path,
                    new_dir: true,
                }
            }
            job => job,
        }
    }
}

#[derive(Debug, Default)]
struct Queue {
    jobs: Vec<(SyncJob, oneshot::Sender<Result<()>>)>,
    /// A drain task is running (it takes every job queued before it ends).
    draining: bool,
}

#[derive(Debug)]
pub(crate) struct Syncer {
    sessions_dir: PathBuf,
    queue: Mutex<Queue>,
    /// Taken only by the drain task (one at a time).
    journal: Option<Mutex<Journal>>,
    /// The spare logs new sessions take (with the journal only).
    spares: Option<Arc<Spares>>,
    /// Requests taken, and the batches they were synced in.
    requests: AtomicU64,
    batches: AtomicU64,
    /// Requests made durable through the journal.
    journaled: AtomicU64,
    checkpoints: Arc<AtomicU64>,
}

/// How many syncs a store did, and in how many batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SyncStats {
    /// Sync requests (one per settle of a session, mostly).
    pub requests: u64,
    /// The batches they were served in.
    pub batches: u64,
    /// Requests made durable through the journal (the rest synced their
    /// log themselves).
    pub journaled: u64,
    /// Journal segments checkpointed (synced to disk and deleted).
    pub checkpoints: u64,
}

impl Syncer {
    pub(crate) fn new(
        sessions_dir: PathBuf,
        journal: Option<Journal>,
        spares: Option<Arc<Spares>>,
    ) -> Arc<Syncer> {
        let checkpoints = journal
            .as_ref()
            .map(Journal::checkpoints)
            .unwrap_or_default();
        Arc::new(Syncer {
            sessions_dir,
            queue: Mutex::default(),
            journal: journal.map(Mutex::new),
            spares,
            requests: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            journaled: AtomicU64::new(0),
            checkpoints,
        })
    }

    /// The spare logs, when new sessions may take one.
    pub(crate) fn spares(&self) -> Option<&Arc<Spares>> {
        self.spares.as_ref()
    }

    /// Syncs can go through the journal.
    pub(crate) fn journals(&self) -> bool {
        self.journal.is_some()
    }

    pub(crate) fn stats(&self) -> SyncStats {
        SyncStats {
            requests: self.requests.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
            journaled: self.journaled.load(Ordering::Relaxed),
            checkpoints: self.checkpoints.load(Ordering::Relaxed),
        }
    }

    /// Makes `job`'s log durable, together with whatever else is waiting.
    pub(crate) async fn sync(self: &Arc<Self>, job: SyncJob) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut queue = lock(&self.queue);
            queue.jobs.push((job, tx));
            !std::mem::replace(&mut queue.draining, true)
        };
        if start {
            let syncer = Arc::clone(self);
            // Not awaited here: the task drains jobs queued after ours too,
            // and a caller dropped while it runs does not stop it.
            tokio::task::spawn_blocking(move || syncer.drain());
        }
        rx.await
            .map_err(|_| Error::Task("the sync task stopped".to_owned()))?
    }

    /// Syncs batches until the queue is empty.
    fn drain(&self) {
        loop {
            let batch = {
                let mut queue = lock(&self.queue);
                if queue.jobs.is_empty() {
                    queue.draining = false;
                    return;
                }
                std::mem::take(&mut queue.jobs)
            };
            self.batches.fetch_add(1, Ordering::Relaxed);
            self.requests
                .fetch_add(batch.len() as u64, Ordering::Relaxed);
            let (journaled, direct): (Vec<_>, Vec<_>) = batch
                .into_iter()
                .partition(|(job, _)| matches!(job, SyncJob::Journal { .. }));
            let (mut results, direct) = self.journal_all(journaled, direct);
            results.extend(sync_all(direct));
            // Each new log's folder was synced beside its log (on the
            // same thread, so a batch of new sessions waits for the disk
            // once, not once per folder); the shared folder that names
            // them, once for the whole batch; only then are they durable.
            if results
                .iter()
                .any(|(job, _, result)| job.new_dir() && result.is_ok())
            {
                sync_dir(&self.sessions_dir);
            }
            for (_, tx, result) in results {
                // An error only means the caller went away.
                let _ = tx.send(result);
            }
        }
    }

    /// Commits the journal jobs with one write and one `fdatasync`.
    /// Returns their results and the jobs still to sync directly (`direct`,
    /// and every journal job if the journal could not be written).
    fn journal_all(&self, journaled: Vec<Job>, mut direct: Vec<Job>) -> (Vec<Done>, Vec<Job>) {
        if journaled.is_empty() {
            return (Vec::new(), direct);
        }
        let Some(journal) = &self.journal else {
            direct.extend(
                journaled
                    .into_iter()
                    .map(|(job, tx)| (job.into_direct(self.spares.as_ref()), tx)),
            );
            return (Vec::new(), direct);
        };
        let spans: Vec<Span<'_>> = journaled
            .iter()
            .filter_map(|(job, _)| match job {
                SyncJob::Journal {
                    file,
                    session,
                    from,
                    to,
                    ..
                } => Some(Span {
                    session,
                    file,
                    from: *from,
                    to: *to,
                }),
                SyncJob::File { .. } => None,
            })
            .collect();
        let committed = lock(journal).commit(&spans);
        drop(spans);
        match committed {
            Ok(errors) => {
                let mut done = Vec::with_capacity(journaled.len());
                for ((job, tx), error) in journaled.into_iter().zip(errors) {
                    match error {
                        None => {
                            self.journaled.fetch_add(1, Ordering::Relaxed);
                            done.push((job, tx, Ok(())));
                        }
                        // Its bytes could not be read back: sync the log.
                        Some(error) => {
                            tracing::warn!(%error, "could not journal a log; syncing it directly");
                            direct.push((job.into_direct(self.spares.as_ref()), tx));
                        }
                    }
                }
                (done, direct)
            }
            Err(error) => {
                tracing::warn!(%error, "the event journal could not be written; syncing each log directly");
                direct.extend(
                    journaled
                        .into_iter()
                        .map(|(job, tx)| (job.into_direct(self.spares.as_ref()), tx)),
                );
                (Vec::new(), direct)
            }
        }
    }
}

type Job = (SyncJob, oneshot::Sender<Result<()>>);

/// The most threads one batch syncs on at once.
const SYNC_THREADS: usize = 16;

type Done = (SyncJob, oneshot::Sender<Result<()>>, Result<()>);

/// `fdatasync`s every job's log. Concurrently: the file system folds
/// syncs in flight together into one journal commit, where one after the
/// other each would wait for its own.
fn sync_all(batch: Vec<(SyncJob, oneshot::Sender<Result<()>>)>) -> Vec<Done> {
    let one = |(job, tx): (SyncJob, oneshot::Sender<Result<()>>)| {
        let (SyncJob::File { file, path, .. } | SyncJob::Journal { file, path, .. }) = &job;
        let result = file.sync_data().map_err(|e| Error::io("sync", path, e));
        if job.new_dir()
            && result.is_ok()
            && let Some(dir) = path.parent()
        {
            sync_dir(dir);
        }
        (job, tx, result)
    };
    if batch.len() == 1 {
        return batch.into_iter().map(one).collect();
    }
    let threads = batch.len().min(SYNC_THREADS);
    let mut chunks: Vec<Vec<_>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, job) in batch.into_iter().enumerate() {
        chunks[i % threads].push(job);
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| scope.spawn(move || chunk.into_iter().map(one).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            // A sync does not panic; if a thread did, its callers see
            // their channel closed ("the sync task stopped").
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

/// Makes a directory's entries durable. Best effort: a failure here only
/// weakens the power-cut guarantee for a brand-new session, so it is logged.
pub(crate) fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    if let Err(error) = File::open(dir).and_then(|d| d.sync_all()) {
        tracing::warn!(dir = %dir.display(), %error, "could not sync a new session directory");
    }
    #[cfg(not(unix))]
    let _ = dir;
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
