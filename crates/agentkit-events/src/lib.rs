//! The agentkit event store: append-only NDJSON session streams with replay
//! from any index and live follow.
//!
//! Each session's stream lives at `<root>/sessions/<id>/events.ndjson`, one
//! [`Event`](agentkit_protocol::Event) per line, line `i` holding index `i`.
//! [`FileEventStore`] appends, reads, and hands out [`Subscription`]s that
//! replay stored events and then follow live ones, each exactly once and in
//! order. Appends to one session are serialised by a per-session lock;
//! different sessions never wait for each other. The PostgreSQL backend
//! (`agentkit-pg`) stores the same lines and reads them back through the
//! same [`Rebuild`].
//!
//! # Durability
//!
//! Each session has a buffered writer. An append encodes its lines into the
//! buffer; the appender that finds no other append queued on the session
//! flushes the buffer to the OS for the whole group (group commit), and
//! every append returns only after its lines were flushed. Subscribers are
//! sent an event only after that flush, so nobody ever sees an event that a
//! crash could take back. `fsync` (`sync_data`) happens only at durable
//! points: [`FileEventStore::sync`] and [`FileEventStore::append_durable`],
//! which the runtime calls whenever a session settles (waits for its next
//! message, or ends). A new session's folder entry is made durable with its
//! log's first sync, not when it is created.
//!
//! On Linux a sync goes through the store's journal (`<root>/journal/`,
//! see `journal.rs`): syncs waiting together append the bytes their logs
//! gained to one segment file and share one `fdatasync` of it; segments
//! are checkpointed (`syncfs`, then deleted) in the background about once
//! a second, and a start after a power cut replays what is left into the
//! logs before anything reads them. [`StoreOptions::journal`] turns it off.
//!
//! With the journal, a new session ([`FileEventStore::create`]) costs no
//! `mkdir` or `create` on its request: it takes a spare log made in the
//! background (`<root>/spare/<n>/events.ndjson`, see `spare.rs`), whose
//! folder is moved to `sessions/<id>` a moment later; every reader finds
//! the session meanwhile, and a start moves what a stop left in a spare.
//!
//! So a **process crash loses nothing** whose append returned, and a
//! **power cut can lose the events after the last sync** (the file then ends
//! earlier, or in a torn line). On first use after a start, a log is
//! recovered: a torn last line (no trailing newline, or not parseable JSON)
//! is truncated away with a `tracing` warning; any other bad line, or an
//! index that is not its line number, is [`Error::Corrupt`] rather than a
//! guess.
//!
//! # Forks
//!
//! [`FileEventStore::fork`] starts a session with another's first events
//! without copying them: the fork's folder holds hard links to the files
//! holding them and `base.json`, which names how much of each it takes;
//! its own `events.ndjson` starts at the next index (see `base.rs`).
//!
//! If a write or flush fails (disk full), the session's log turns read-only
//! and every later append returns [`Error::SessionFailed`] until the store is
//! reopened, which recovers the file.
//!
//! File writes happen inline under the session lock (they only copy into
//! the OS page cache); opening, replay reads and `fsync` run on tokio's
//! blocking pool.
//!
//! # Size and descriptors
//!
//! A `message.appended` line stores only its `delta`: every read (replay,
//! [`FileEventStore::read`], subscriptions) gives back the wire shape with
//! the cumulative `text`, rebuilt from the deltas, so a log grows with
//! what was said rather than with its square. Old logs whose deltas carry
//! `text` read unchanged.
//!
//! A log holds one descriptor while it is open. At most
//! [`StoreOptions::max_open_logs`] idle logs stay open; past that the least
//! recently used are closed (a log that is followed or being appended to
//! stays open), and reopened on next use. Reopening checks each line's
//! index from its prefix and parses only the last line, so its cost is a
//! scan of the file, not a parse of every event.

mod base;
mod error;
mod journal;
mod recovery;
mod spare;
mod store;
mod subscription;
mod sync;
mod text;

pub use error::{Error, Exhausted, Result};
pub use store::{FileEventStore, NewEvent, StoreLatency, StoreOptions};
pub use subscription::Subscription;
pub use sync::SyncStats;
/// The stored shape of `message.appended` (its `delta` only) and the
/// rebuild of its cumulative `text`, for other backends of the log.
pub use text::{Rebuild, prefix_in as text_prefix_in, strip as strip_text};
