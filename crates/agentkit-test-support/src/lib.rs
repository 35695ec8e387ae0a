//! Helpers shared by agentkit's test suites: fixture paths, a small
//! HTTP client for driving a real server over loopback, a recording mock
//! server for the third parties on the other side ([`mock`]), a mock model
//! provider speaking the OpenAI and Anthropic streaming formats
//! ([`provider`]), the Python environment of the third-party MCP
//! peers, the official MCP conformance suite ([`conformance`]), an
//! identity provider's keys, tokens and JWKS server ([`jwt`]), an OpenID
//! provider stand-in ([`oidc`]), re-running
//! a test with a secret in its parent's environment ([`rerun`]), a
//! mock Slack (Web API and Socket Mode, [`slack`]), and a real OTLP/HTTP
//! trace receiver ([`otlp`]).

pub mod conformance;
pub mod http;
pub mod jwt;
pub mod migrate_node;
pub mod mock;
pub mod oidc;
pub mod otlp;
pub mod pg;
pub mod process;
pub mod provider;
pub mod pyenv;
pub mod rerun;
pub mod slack;

use std::path::PathBuf;

/// The repository's `fixtures/` folder.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// One of the bundled agent projects under `fixtures/agents/`.
pub fn fixture_agent(name: &str) -> PathBuf {
    fixtures_dir().join("agents").join(name)
}
