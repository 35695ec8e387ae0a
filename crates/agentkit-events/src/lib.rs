//! The agentkit event store: append-only NDJSON session streams.
//!
//! This crate will own the `EventStore` trait, the file backend
//! (`sessions/<id>/events.ndjson`) with torn-line recovery, and live
//! subscription with replay from any index. It is not built yet: durable
//! sessions arrive with the "Durable sessions over HTTP" issue, and until
//! then this crate deliberately exports nothing, so no caller can mistake a
//! placeholder for a working store.
