//! The suites of `agentkit-pg`.

mod events;
mod journal;
mod leases;
mod mailbox;
mod migrations;
mod sessions;
mod tls;
