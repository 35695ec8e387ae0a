//! One loaded session: its metadata, its workspace, its fold cache, and the
//! state machine of its turns ([`TurnState`]).
//!
//! Every change of a session's turn state happens in one of the methods
//! below, under the session's short `state` lock; nothing awaits while
//! holding it. The worker (`worker.rs`) drives the transitions:
//!
//! ```text
//!            enqueue                 next_turn               end_turn
//!   Idle ──────────────▶ Between ───────────────▶ Turn ───────────────▶ Between
//!    ▲  ◀─────────────── (worker)  ◀───────────────────────────────────────┘
//!    │     release (nothing queued)
//!    │  claim (idle, nothing queued)       release_call
//!    └──────────────────────────▶ Call ────────────────▶ Idle, or Between
//!                                                         when messages came
//! ```

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

use agentkit_manifest::Admission;
use agentkit_protocol::SessionId;
use tokio_util::sync::CancellationToken;

use crate::fold;
use crate::meta::SessionMeta;

#[derive(Debug)]
pub(crate) struct Session {
    pub(crate) id: SessionId,
    pub(crate) meta: Mutex<SessionMeta>,
    pub(crate) state: Mutex<TurnState>,
    pub(crate) workspace: PathBuf,
    /// The workspace was materialised (it is, before the first turn or
    /// call that needs it, not at create).
    pub(crate) workspace_ready: AtomicBool,
    /// Signalled when the session's worker lets go (the session is idle).
    pub(crate) idle: tokio::sync::Notify,
    /// What the fold, approvals and recovery read, kept incrementally
    /// (async: a refresh reads the log's new tail under it).
    pub(crate) fold: tokio::sync::Mutex<fold::FoldCache>,
    /// Loaded from the index: its log may end in a turn a crash cut short.
    pub(crate) needs_recovery: AtomicBool,
    /// Done once the recovery ran.
    pub(crate) recovery: tokio::sync::OnceCell<()>,
}

impl Session {
    pub(crate) fn new(
        id: SessionId,
        meta: SessionMeta,
        workspace: PathBuf,
        needs_recovery: bool,
    ) -> Session {
        Session {
            id,
            meta: Mutex::new(meta),
            state: Mutex::new(TurnState::default()),
            workspace,
            workspace_ready: AtomicBool::new(false),
            idle: tokio::sync::Notify::new(),
            fold: tokio::sync::Mutex::new(if needs_recovery {
                fold::FoldCache::default()
            } else {
                fold::FoldCache::new_session()
            }),
            needs_recovery: AtomicBool::new(needs_recovery),
            recovery: tokio::sync::OnceCell::new(),
        }
    }

    /// The session's turn state, locked (a short lock: never held across
    /// an `.await`).
    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, TurnState> {
        crate::util::lock(&self.state)
    }

    /// The session's metadata, locked (a short lock).
    pub(crate) fn meta(&self) -> std::sync::MutexGuard<'_, SessionMeta> {
        crate::util::lock(&self.meta)
    }
}

/// Why a running turn was cut short (`turn.failed`'s `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interrupt {
    /// A message arrived under the `preempt` policy.
    Preempted,
    /// `stop` was called.
    Stopped,
    /// The server is shutting down (nothing else cancelled it).
    Shutdown,
}

impl Interrupt {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Interrupt::Preempted => "preempted",
            Interrupt::Stopped => "stopped",
            Interrupt::Shutdown => "shutdown",
        }
    }
}

/// What holds the session now.
#[derive(Debug, Default)]
pub(crate) enum Phase {
    /// Nobody: no worker, nothing running.
    #[default]
    Idle,
    /// A worker holds the session between turns: picking the next batch,
    /// or recording that the session settled.
    Between,
    /// A turn runs; `interrupt` says why it was cancelled, once it was.
    Turn {
        cancel: CancellationToken,
        interrupt: Option<Interrupt>,
    },
    /// A deterministic call (or an approved call resumed outside a turn)
    /// holds the session.
    Call { cancel: CancellationToken },
}

/// A message waiting for the next turn.
#[derive(Debug, Clone)]
pub(crate) struct Queued {
    pub(crate) text: String,
    /// Images attached to it (`MessageReceived::images`).
    pub(crate) images: Vec<agentkit_protocol::ImageRef>,
    /// The index of its `message.received`.
    pub(crate) index: u64,
    /// The request it came with, while tracing is on.
    pub(crate) traceparent: Option<agentkit_protocol::trace::TraceParent>,
    /// Tools the client declared for the turn that answers it
    /// (`MessageReceived::client_tools`).
    pub(crate) client_tools: Vec<agentkit_protocol::ClientTool>,
}

/// The next turn the worker runs.
#[derive(Debug)]
pub(crate) struct NextTurn {
    pub(crate) batch: Vec<Queued>,
    /// The turn this one resumes (a call it parked was decided).
    pub(crate) resume: Option<String>,
    pub(crate) cancel: CancellationToken,
}

/// The answer of [`TurnState::claim`].
#[derive(Debug)]
pub(crate) enum Claim {
    /// The session is the caller's until [`TurnState::release_call`].
    Claimed,
    /// A turn runs or messages wait: `session_busy`.
    Busy,
    /// The worker is settling the session: wait for it to let go.
    Settling,
}

/// A session's turns: what runs, what waits.
#[derive(Debug, Default)]
pub(crate) struct TurnState {
    phase: Phase,
    /// Messages waiting for the next turn.
    queue: Vec<Queued>,
    /// A turn cut short while a call waited for approval, to resume now
    /// that the call has its result.
    resume: Option<String>,
    /// Who stopped the running turn, when an operator did it on a session
    /// it does not own (recorded on `turn.failed` as `by`).
    stopped_by: Option<String>,
    /// The `message.received` indices of queued messages a stop dropped,
    /// and who stopped, until the worker records them
    /// (`message.dropped`) as it settles.
    dropped: Vec<u64>,
    dropped_by: Option<String>,
}

impl TurnState {
    /// A turn or call runs.
    pub(crate) fn is_running(&self) -> bool {
        matches!(self.phase, Phase::Turn { .. } | Phase::Call { .. })
    }

    /// A turn or call runs, or work waits for one.
    pub(crate) fn is_busy(&self) -> bool {
        self.is_running() || self.has_work()
    }

    /// Anything at all holds the session (a worker settling included):
    /// such a session is not unloaded, forgotten or claimed.
    pub(crate) fn is_active(&self) -> bool {
        !matches!(self.phase, Phase::Idle) || self.has_work() || !self.dropped.is_empty()
    }

    fn has_work(&self) -> bool {
        !self.queue.is_empty() || self.resume.is_some()
    }

    /// A worker still has something to do: a turn to run, or dropped
    /// messages to record.
    fn holds_worker(&self) -> bool {
        self.has_work() || !self.dropped.is_empty()
    }

    /// The indices of the messages a stop dropped, and who stopped, to
    /// record (once).
    pub(crate) fn take_dropped(&mut self) -> (Vec<u64>, Option<String>) {
        (std::mem::take(&mut self.dropped), self.dropped_by.take())
    }

    /// The cancellation of what runs now.
    pub(crate) fn running_token(&self) -> Option<CancellationToken> {
        match &self.phase {
            Phase::Turn { cancel, .. } | Phase::Call { cancel } => Some(cancel.clone()),
            Phase::Idle | Phase::Between => None,
        }
    }

    /// Queues a message admitted under `admission` (a `reject` was
    /// refused before). Returns whether a worker must be started and
    /// whether the message was coalesced into a running turn's successor.
    pub(crate) fn enqueue(&mut self, message: Queued, admission: Admission) -> (bool, bool) {
        let running = self.is_running();
        self.queue.push(message);
        if running && admission == Admission::Preempt {
            self.cancel(Interrupt::Preempted);
        }
        let start_worker = matches!(self.phase, Phase::Idle);
        if start_worker {
            self.phase = Phase::Between;
        }
        (start_worker, running && admission == Admission::Coalesce)
    }

    /// Starts the next turn, if work waits: the batch of queued messages
    /// (and the turn to resume), under a fresh child of `shutdown`.
    pub(crate) fn next_turn(&mut self, shutdown: &CancellationToken) -> Option<NextTurn> {
        if !self.has_work() {
            return None;
        }
        let cancel = shutdown.child_token();
        self.phase = Phase::Turn {
            cancel: cancel.clone(),
            interrupt: None,
        };
        Some(NextTurn {
            batch: std::mem::take(&mut self.queue),
            resume: self.resume.take(),
            cancel,
        })
    }

    /// Why the running turn was cancelled (`shutdown` when nobody said).
    pub(crate) fn interrupt(&self) -> Interrupt {
        match &self.phase {
            Phase::Turn {
                interrupt: Some(why),
                ..
            } => *why,
            _ => Interrupt::Shutdown,
        }
    }

    /// The turn ended; the worker still holds the session.
    pub(crate) fn end_turn(&mut self) {
        self.phase = Phase::Between;
    }

    /// The worker lets go unless work arrived meanwhile. Returns whether
    /// it let go.
    pub(crate) fn release(&mut self) -> bool {
        if self.holds_worker() {
            return false;
        }
        self.phase = Phase::Idle;
        true
    }

    /// Takes an idle session for a deterministic call.
    pub(crate) fn claim(&mut self, shutdown: &CancellationToken) -> Claim {
        if self.is_busy() {
            return Claim::Busy;
        }
        if !matches!(self.phase, Phase::Idle) {
            return Claim::Settling;
        }
        self.phase = Phase::Call {
            cancel: shutdown.child_token(),
        };
        Claim::Claimed
    }

    /// Ends a call. Returns whether messages (or a resume) arrived during
    /// it, so a worker must run them (the session stays held for it).
    pub(crate) fn release_call(&mut self) -> bool {
        if self.holds_worker() {
            self.phase = Phase::Between;
            true
        } else {
            self.phase = Phase::Idle;
            false
        }
    }

    /// Resumes `turn` when the session is next released.
    pub(crate) fn set_resume(&mut self, turn: String) {
        self.resume = Some(turn);
    }

    /// Drops queued messages and cancels what runs. Returns whether
    /// something ran.
    #[cfg(test)]
    pub(crate) fn stop(&mut self) -> bool {
        self.stop_by(None)
    }

    /// [`stop`](Self::stop), remembering `by` for the `turn.failed` it
    /// causes and the `message.dropped` of the queued messages.
    pub(crate) fn stop_by(&mut self, by: Option<String>) -> bool {
        if !self.queue.is_empty() {
            self.dropped.extend(self.queue.drain(..).map(|q| q.index));
            self.dropped_by = by.clone();
        }
        let stopped = self.cancel(Interrupt::Stopped);
        if stopped {
            self.stopped_by = by;
        }
        stopped
    }

    /// Who stopped the turn that just ended (once).
    pub(crate) fn take_stopped_by(&mut self) -> Option<String> {
        self.stopped_by.take()
    }

    fn cancel(&mut self, why: Interrupt) -> bool {
        match &mut self.phase {
            Phase::Turn { cancel, interrupt } => {
                cancel.cancel();
                *interrupt = Some(why);
                true
            }
            Phase::Call { cancel } => {
                cancel.cancel();
                true
            }
            Phase::Idle | Phase::Between => false,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]
    use super::*;

    fn msg(text: &str, index: u64) -> Queued {
        Queued {
            images: Vec::new(),
            text: text.to_owned(),
            index,
            traceparent: None,
            client_tools: Vec::new(),
        }
    }

    #[test]
    fn a_message_starts_one_worker_and_runs_as_one_batch() {
        let shutdown = CancellationToken::new();
        let mut s = TurnState::default();
        assert_eq!(s.enqueue(msg("a", 1), Admission::Coalesce), (true, false));
        assert_eq!(s.enqueue(msg("b", 2), Admission::Coalesce), (false, false));
        let turn = s.next_turn(&shutdown).expect("work waits");
        assert_eq!(turn.batch.len(), 2);
        assert!(s.is_running());
        // Coalesced behind the running turn.
        assert_eq!(s.enqueue(msg("c", 9), Admission::Coalesce), (false, true));
        s.end_turn();
        assert!(!s.release(), "c waits");
        assert_eq!(s.next_turn(&shutdown).map(|t| t.batch.len()), Some(1));
        s.end_turn();
        assert!(s.release());
        assert!(!s.is_active());
    }

    #[test]
    fn preempt_cancels_the_running_turn_and_says_why() {
        let shutdown = CancellationToken::new();
        let mut s = TurnState::default();
        s.enqueue(msg("a", 1), Admission::Preempt);
        let turn = s.next_turn(&shutdown).expect("work waits");
        s.enqueue(msg("b", 2), Admission::Preempt);
        assert!(turn.cancel.is_cancelled());
        assert_eq!(s.interrupt(), Interrupt::Preempted);
        assert!(s.stop());
        assert_eq!(s.interrupt(), Interrupt::Stopped);
        s.end_turn();
        // The worker records the drop (as it settles) before it lets go.
        assert!(!s.release(), "b's drop is not recorded yet");
        assert_eq!(s.take_dropped(), (vec![2], None));
        assert!(s.release(), "stop dropped b");
    }

    #[test]
    fn a_call_claims_only_an_idle_session() {
        let shutdown = CancellationToken::new();
        let mut s = TurnState::default();
        assert!(matches!(s.claim(&shutdown), Claim::Claimed));
        assert!(matches!(s.claim(&shutdown), Claim::Busy));
        // A message during the call waits for it, then needs a worker.
        assert_eq!(s.enqueue(msg("a", 1), Admission::Coalesce), (false, true));
        assert!(s.release_call());
        assert!(matches!(s.claim(&shutdown), Claim::Busy));
        let _ = s.next_turn(&shutdown);
        s.end_turn();
        assert!(matches!(s.claim(&shutdown), Claim::Settling));
        assert!(s.release());
        assert!(matches!(s.claim(&shutdown), Claim::Claimed));
        assert!(!s.release_call());
        assert_eq!(s.interrupt(), Interrupt::Shutdown);
    }
}
