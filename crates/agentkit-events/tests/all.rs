//! The one integration-test binary of `agentkit-events`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
