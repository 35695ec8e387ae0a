//! The one integration-test binary of agentkit-manifest.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
