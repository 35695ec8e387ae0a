//! agentkit channels: webhook routes, continuation tokens, admission, and
//! the GitHub, GitLab, Bitbucket and Slack packs.
//!
//! Not built yet: it arrives with the channels issue. Channel files
//! (routes, verb/schema rules, auth chains, event deliveries) are already
//! parsed and validated by `agentkit-manifest`. Until then this crate
//! exports nothing.
