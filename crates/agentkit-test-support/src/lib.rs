//! Helpers shared by agentkit's test suites: fixture paths, a small
//! HTTP client for driving a real server over loopback, and the Python
//! environment of the third-party MCP peers.

pub mod http;
pub mod pyenv;

use std::path::PathBuf;

/// The repository's `fixtures/` folder.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// One of the bundled agent projects under `fixtures/agents/`.
pub fn fixture_agent(name: &str) -> PathBuf {
    fixtures_dir().join("agents").join(name)
}
