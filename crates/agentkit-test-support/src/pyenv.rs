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

/// [`pyenv_bin`] when its Python also imports `module` (a package of the
/// requirements file added after the environment was made, such as
/// `a2a`): under CI a missing module panics, elsewhere it answers why.
pub fn pyenv_with(test: &str, module: &str) -> Result<PathBuf, String> {
    let bin = pyenv_bin(test)?;
    let imports = std::process::Command::new(bin.join("python"))
        .args(["-c", &format!("import {module}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if imports {
        return Ok(bin);
    }
    let reason = format!(
        "{test}: the Python environment at {} cannot import `{module}` (install it with `{SETUP}`)",
        bin.display()
    );
    if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
        panic!("{reason}");
    }
    Err(format!("skipping {reason}"))
}
