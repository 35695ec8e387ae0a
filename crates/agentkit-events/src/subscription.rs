//! Following a session: replay from the file, then live events, with no gap
//! and no duplicate even when the subscriber falls behind.

use std::collections::VecDeque;
use std::sync::Arc;

use agentkit_protocol::Event;
use tokio::sync::broadcast::{self, error::RecvError};

use crate::error::{Error, Result};
use crate::store::SessionLog;
use crate::text::Rebuild;

/// How many events one catch-up read fetches at most.
const REPLAY_CHUNK: u64 = 1024;

/// A live view of one session's stream from some index on.
///
/// [`next`](Self::next) yields every event with `index >= start` exactly
/// once, in order. Events already stored when the subscription began are
/// read from the file; later ones arrive by broadcast. A subscriber that
/// falls more than `broadcast_capacity` events behind re-reads the range it
/// missed from the file instead of losing it.
#[derive(Debug)]
pub struct Subscription {
    log: Arc<SessionLog>,
    /// The index the next yielded event must have.
    next: u64,
    /// Events below this index are read from the file, not the channel.
    replay_until: u64,
    backlog: VecDeque<Arc<Event>>,
    /// A live event that arrived ahead of `next`, kept until the gap before
    /// it has been read from the file.
    held: Option<Arc<Event>>,
    receiver: broadcast::Receiver<Arc<Event>>,
    /// Completes stored deltas read from the file with their text.
    rebuild: Rebuild,
}

impl Subscription {
    pub(crate) fn new(
        log: Arc<SessionLog>,
        start: u64,
        replay_until: u64,
        receiver: broadcast::Receiver<Arc<Event>>,
    ) -> Subscription {
        Subscription {
            log,
            next: start,
            replay_until,
            backlog: VecDeque::new(),
            held: None,
            receiver,
            rebuild: if start == 0 {
                Rebuild::at_start()
            } else {
                Rebuild::default()
            },
        }
    }

    /// Serves the start of the replay from `recent` (the log's last
    /// published events, from `next` to the end of the snapshot, as
    /// live subscribers got them: their text is whole), so nothing is
    /// read from the file.
    pub(crate) fn seed(&mut self, recent: Vec<Arc<Event>>) {
        debug_assert_eq!(recent.first().map(|e| e.index), Some(self.next));
        if recent.first().map(|e| e.index) != Some(self.next) {
            return;
        }
        for event in &recent {
            self.rebuild.follow_live(event);
        }
        if let Some(last) = recent.last() {
            self.replay_until = self.replay_until.min(last.index + 1);
        }
        self.backlog = recent.into();
    }

    /// The index of the event [`next`](Self::next) will yield.
    pub fn next_index(&self) -> u64 {
        self.next
    }

    /// Waits for the next event. Cancel-safe: dropping the future loses
    /// nothing, and a later call yields the same event.
    pub async fn next(&mut self) -> Result<Event> {
        self.next_shared().await.map(Arc::unwrap_or_clone)
    }

    /// [`next`](Self::next), sharing the event with the other followers
    /// instead of copying it (for a reader that only serializes it).
    pub async fn next_shared(&mut self) -> Result<Arc<Event>> {
        loop {
            if let Some(event) = self.backlog.pop_front() {
                self.next = event.index + 1;
                return Ok(event);
            }
            if self.next < self.replay_until {
                let end = self.replay_until.min(self.next + REPLAY_CHUNK);
                let mut events = self.log.read_range(self.next, end).await?;
                if events.first().map(|e| e.index) != Some(self.next) {
                    return Err(Error::Task(format!(
                        "replay from index {} returned nothing",
                        self.next
                    )));
                }
                self.log
                    .rebuild(&mut self.rebuild, self.next, &mut events)
                    .await?;
                self.backlog = events.into_iter().map(Arc::new).collect();
                continue;
            }
            if let Some(event) = self.held.take() {
                if event.index == self.next {
                    self.next += 1;
                    self.rebuild.follow_live(&event);
                    return Ok(event);
                }
                if event.index > self.next {
                    self.replay_until = event.index;
                    self.held = Some(event);
                }
                continue;
            }
            match self.receiver.recv().await {
                Ok(event) if event.index < self.next => {}
                Ok(event) if event.index == self.next => {
                    self.next += 1;
                    self.rebuild.follow_live(&event);
                    return Ok(event);
                }
                Ok(event) => {
                    // A gap, which only a lag can cause: read it from the file.
                    self.replay_until = event.index;
                    self.held = Some(event);
                }
                Err(RecvError::Lagged(_)) => {
                    // The channel dropped events we had not seen; everything
                    // published so far is in the file.
                    self.replay_until = self.log.published();
                }
                Err(RecvError::Closed) => {
                    return Err(Error::Task("event log closed".to_owned()));
                }
            }
        }
    }
}
