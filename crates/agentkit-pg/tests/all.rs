//! The one integration-test binary of `agentkit-pg`: the PostgreSQL
//! backend against a real server (a throwaway database per test; skipped
//! with a message when no server is reachable outside CI).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
