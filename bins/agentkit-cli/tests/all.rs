//! Integration tests of the `agentkit` binary: each test spawns the real
//! executable and checks its output and exit code.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
