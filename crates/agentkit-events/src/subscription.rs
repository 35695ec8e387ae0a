//! Following a session: replay from the file, then live events, with no gap
//! and no duplicate even when the subscriber falls behind.

use std::collections::VecDeque;
use std::sync::Arc;

use agentkit_protocol::Event;
use bytes::Bytes;
use tokio::sync::broadcast::{self, error::RecvError};

use crate::error::{Error, Result};
use crate::store::{Published, SessionLog};
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
    /// Events to yield, with their log line when they came live (a replay
    /// read from the file has none: its deltas get their text back).
    backlog: VecDeque<(Arc<Event>, Option<Bytes>)>,
    /// A live event that arrived ahead of `next`, kept until the gap before
    /// it has been read from the file.
    held: Option<Published>,
    receiver: broadcast::Receiver<Published>,
    /// Completes stored deltas read from the file with their text.
    rebuild: Rebuild,
}

impl Subscription {
    pub(crate) fn new(
        log: Arc<SessionLog>,
        start: u64,
        replay_until: u64,
        receiver: broadcast::Receiver<Published>,
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
    pub(crate) fn seed(&mut self, recent: Vec<Published>) {
        debug_assert_eq!(recent.first().map(|p| p.event.index), Some(self.next));
        if recent.first().map(|p| p.event.index) != Some(self.next) {
            return;
        }
        for p in &recent {
            self.rebuild.follow_live(&p.event);
        }
        if let Some(last) = recent.last() {
            self.replay_until = self.replay_until.min(last.event.index + 1);
        }
        self.backlog = recent
            .into_iter()
            .map(|p| (p.event, Some(p.line)))
            .collect();
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
        self.next_line().await.map(|(event, _)| event)
    }

    /// [`next_shared`](Self::next_shared), with the event's line as the
    /// log holds it (newline included; a delta without its text so far)
    /// when it came live: a reader that writes the stored shape sends
    /// those bytes instead of encoding the event again.
    pub async fn next_line(&mut self) -> Result<(Arc<Event>, Option<Bytes>)> {
        loop {
            if let Some((event, line)) = self.backlog.pop_front() {
                self.next = event.index + 1;
                return Ok((event, line));
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
                self.backlog = events.into_iter().map(|e| (Arc::new(e), None)).collect();
                continue;
            }
            if let Some(p) = self.held.take() {
                if p.event.index == self.next {
                    self.next += 1;
                    self.rebuild.follow_live(&p.event);
                    return Ok((p.event, Some(p.line)));
                }
                if p.event.index > self.next {
                    self.replay_until = p.event.index;
                    self.held = Some(p);
                }
                continue;
            }
            match self.receiver.recv().await {
                Ok(p) if p.event.index < self.next => {}
                Ok(p) if p.event.index == self.next => {
                    self.next += 1;
                    self.rebuild.follow_live(&p.event);
                    return Ok((p.event, Some(p.line)));
                }
                Ok(p) => {
                    // A gap, which only a lag can cause: read it from the file.
                    self.replay_until = p.event.index;
                    self.held = Some(p);
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
