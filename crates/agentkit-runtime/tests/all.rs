//! Integration tests of the session runtime: real files, real event logs,
//! the harness's scripted model, and the admission policies.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
