//! The suites of `agentkit-pg`.

mod events;
mod leases;
mod mailbox;
mod migrations;
mod sessions;
mod tls;
