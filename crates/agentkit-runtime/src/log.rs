//! The event log of one agent's sessions, on one of two backends: the
//! files of one host (`agentkit-events`, the default), or a store shared
//! by several hosts (`agentkit_store::SharedLog`: PostgreSQL with
//! `--database-url`, or the in-memory store). The runtime appends, reads
//! and follows through this enum and never names a backend elsewhere.

use std::sync::Arc;

use agentkit_events::{FileEventStore, NewEvent, Subscription};
use agentkit_protocol::{Event, EventData, SessionId};
use agentkit_store::{SharedFollow, SharedLog};
use tokio::sync::broadcast;

use crate::error::Result;

/// Where the sessions' events are kept. Cheap to clone.
#[derive(Debug, Clone)]
pub enum EventLog {
    /// `sessions/<id>/events.ndjson` on this host.
    File(FileEventStore),
    /// The store several hosts share (`agentkit_events` in PostgreSQL).
    Shared(Arc<dyn SharedLog>),
}

/// Following one session: replay, then live events.
#[derive(Debug)]
pub enum Follow {
    File(Subscription),
    Shared(Box<dyn SharedFollow>),
}

impl Follow {
    /// The next event, each exactly once, in index order. Cancel-safe.
    pub async fn next(&mut self) -> Result<Event> {
        Ok(match self {
            Follow::File(s) => s.next().await?,
            Follow::Shared(s) => s.next().await?,
        })
    }

    /// [`next`](Self::next), shared with the other followers of this host
    /// rather than copied (for a reader that only serializes it).
    pub async fn next_shared(&mut self) -> Result<std::sync::Arc<Event>> {
        Ok(match self {
            Follow::File(s) => s.next_shared().await?,
            Follow::Shared(s) => std::sync::Arc::new(s.next().await?),
        })
    }

    /// The index of the event [`next`](Self::next) yields.
    pub fn next_index(&self) -> u64 {
        match self {
            Follow::File(s) => s.next_index(),
            Follow::Shared(s) => s.next_index(),
        }
    }
}

/// A shared store's appended events, as the file store answers them.
fn shared(events: Vec<Event>) -> Vec<Arc<Event>> {
    events.into_iter().map(Arc::new).collect()
}

impl EventLog {
    /// Appends one event and returns it with its index.
    pub async fn append(
        &self,
        session: &SessionId,
        turn_id: Option<&str>,
        data: EventData,
    ) -> Result<Arc<Event>> {
        Ok(match self {
            EventLog::File(s) => {
                s.append(session, data.event_type(), turn_id, data.to_value())
                    .await?
            }
            EventLog::Shared(s) => {
                let event = NewEvent::new(turn_id.map(str::to_owned), data);
                let mut appended = s.append_batch(session, vec![event]).await?;
                Arc::new(appended.pop().ok_or_else(|| {
                    crate::Error::Shared(agentkit_store::SharedError::Failed {
                        message: format!("session `{session}`: the store appended nothing"),
                    })
                })?)
            }
        })
    }

    /// Appends `events` with contiguous indices.
    pub async fn append_batch(
        &self,
        session: &SessionId,
        events: Vec<NewEvent>,
    ) -> Result<Vec<Arc<Event>>> {
        Ok(match self {
            EventLog::File(s) => s.append_batch(session, events).await?,
            EventLog::Shared(s) => shared(s.append_batch(session, events).await?),
        })
    }

    /// Starts `to`'s log with `from`'s events `0..at`: on files the
    /// prefix is shared, not copied (hard links to the original's files;
    /// see `agentkit_events`'s `base.rs`); the shared database copies the
    /// rows inside itself, in one statement. Nothing is published either
    /// way: the events happened in the original.
    pub async fn fork(&self, from: &SessionId, at: u64, to: &SessionId) -> Result<()> {
        match self {
            EventLog::File(s) => s.fork(from, at, to).await?,
            EventLog::Shared(s) => s.fork(from, at, to).await?,
        }
        Ok(())
    }

    /// [`append_batch`](Self::append_batch) of the first events of a
    /// session whose id was just made: on files its log needs no folder
    /// made on the request (`FileEventStore::create`).
    pub async fn create(
        &self,
        session: &SessionId,
        events: Vec<NewEvent>,
    ) -> Result<Vec<Arc<Event>>> {
        Ok(match self {
            EventLog::File(s) => s.create(session, events).await?,
            EventLog::Shared(s) => shared(s.append_batch(session, events).await?),
        })
    }

    /// Whether the session's log is on this host's files (its folder, or
    /// the spare it starts in; see `FileEventStore::has_log`). Always
    /// `true` on a shared store, where a folder is only a local copy.
    pub fn has_log(&self, session: &SessionId) -> bool {
        match self {
            EventLog::File(s) => s.has_log(session),
            EventLog::Shared(_) => true,
        }
    }

    /// Makes sure the session's folder exists as `sessions/<id>` before
    /// something is written into it or it is deleted (a new session's
    /// starts as a spare moved there in the background).
    pub async fn make_folder(&self, session: &SessionId) -> Result<()> {
        match self {
            EventLog::File(s) => Ok(s.make_folder(session).await?),
            EventLog::Shared(_) => Ok(()),
        }
    }

    /// A durable point. PostgreSQL commits every append, so only the
    /// files need it.
    pub async fn sync(&self, session: &SessionId) -> Result<()> {
        match self {
            EventLog::File(s) => Ok(s.sync(session).await?),
            EventLog::Shared(_) => Ok(()),
        }
    }

    /// Every event from `start`, in the wire shape.
    pub async fn read(&self, session: &SessionId, start: u64) -> Result<Vec<Event>> {
        Ok(match self {
            EventLog::File(s) => s.read(session, start).await?,
            EventLog::Shared(s) => s.read(session, start).await?,
        })
    }

    /// Every event from `start`, as stored (deltas without their text).
    pub async fn read_stored(&self, session: &SessionId, start: u64) -> Result<Vec<Event>> {
        Ok(match self {
            EventLog::File(s) => s.read_stored(session, start).await?,
            EventLog::Shared(s) => s.read_stored(session, start).await?,
        })
    }

    /// The events before `end` whose type is one of `types`, as stored:
    /// the files skip the other lines unparsed (see
    /// `FileEventStore::read_stored_of`).
    pub async fn read_stored_of(
        &self,
        session: &SessionId,
        end: u64,
        types: &[agentkit_protocol::EventType],
    ) -> Result<Vec<Event>> {
        Ok(match self {
            EventLog::File(s) => s.read_stored_of(session, end, types).await?,
            EventLog::Shared(s) => {
                let mut events = s.read_stored(session, 0).await?;
                events.retain(|e| e.index < end && types.contains(&e.event_type));
                events
            }
        })
    }

    /// The log's length when this host knows it without reading: on a
    /// shared database, while it holds the lease its own appends were
    /// made under (see `agentkit_store::SharedLog::known_len`). The files are
    /// read every time (a local read costs no round trip).
    pub fn known_len(&self, session: &SessionId) -> Option<u64> {
        match self {
            EventLog::File(_) => None,
            EventLog::Shared(s) => s.known_len(session),
        }
    }

    /// How many events the session holds.
    pub async fn len(&self, session: &SessionId) -> Result<u64> {
        Ok(match self {
            EventLog::File(s) => s.len(session).await?,
            EventLog::Shared(s) => s.len(session).await?,
        })
    }

    /// How many session logs are open now (the database holds none open).
    pub fn open_logs(&self) -> usize {
        match self {
            EventLog::File(s) => s.open_logs(),
            EventLog::Shared(_) => 0,
        }
    }

    /// Appends and fsyncs of the file store since it opened (for
    /// `/metrics`); on a shared database, appends are its commits and are
    /// not counted here.
    pub fn latency(&self) -> agentkit_events::StoreLatency {
        match self {
            EventLog::File(s) => s.latency(),
            EventLog::Shared(_) => agentkit_events::StoreLatency::default(),
        }
    }

    /// How the file store's syncs were batched and made durable (the
    /// journal's commits and checkpoints); nothing on a shared database.
    pub fn sync_stats(&self) -> agentkit_events::SyncStats {
        match self {
            EventLog::File(s) => s.sync_stats(),
            EventLog::Shared(_) => agentkit_events::SyncStats::default(),
        }
    }

    /// Lets go of an idle session's open file (nothing to do in the
    /// database).
    pub fn close(&self, session: &SessionId) -> bool {
        match self {
            EventLog::File(s) => s.close(session),
            EventLog::Shared(_) => true,
        }
    }

    /// Every event this host records, live (hooks and channel deliveries
    /// run where an event was recorded, so once).
    pub fn tap(&self) -> broadcast::Receiver<Arc<Event>> {
        match self {
            EventLog::File(s) => s.tap(),
            EventLog::Shared(s) => s.tap(),
        }
    }

    /// Follows `session` from `start`.
    pub async fn subscribe(&self, session: &SessionId, start: u64) -> Result<Follow> {
        Ok(match self {
            EventLog::File(s) => Follow::File(s.subscribe(session, start).await?),
            EventLog::Shared(s) => Follow::Shared(s.subscribe(session, start).await?),
        })
    }
}
