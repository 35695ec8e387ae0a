//! The Python virtual environment that holds the third-party MCP peers
//! tests talk to: the official MCP SDK (package `mcp`) and
//! `mcp-server-time`. `.ci/run` creates it; developers run the same lines.

use std::path::PathBuf;

/// How to create the environment by hand (the same as `.ci/run`).
pub const SETUP: &str = "python3 -m venv target/pyenv && target/pyenv/bin/pip install -r crates/agentkit/tests/python/requirements.txt";

/// The environment's `bin/` folder: `$AGENTKIT_PYENV/bin`, else
/// `<workspace>/target/pyenv/bin`, when it has `python` and
/// `mcp-server-time`.
///
/// When it is missing, a test under CI (`CI=true`) must fail, so this
/// panics there; elsewhere it answers why, for the test to print before
/// skipping.
pub fn pyenv_bin(test: &str) -> Result<PathBuf, String> {
    let root = std::env::var_os("AGENTKIT_PYENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/pyenv"));
    let bin = root.join("bin");
    if bin.join("python").is_file() && bin.join("mcp-server-time").is_file() {
        return Ok(bin);
    }
    let reason = format!(
        "{test}: no Python environment with the MCP SDK at {} (create it with `{SETUP}`)",
        root.display()
    );
    if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
        panic!("{reason}");
    }
    Err(format!("skipping {reason}"))
}
