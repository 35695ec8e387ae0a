//! The harness integration tests: one binary, real child processes, real
//! temporary folders.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
