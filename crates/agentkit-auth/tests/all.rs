//! The one integration-test binary of agentkit-auth.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
