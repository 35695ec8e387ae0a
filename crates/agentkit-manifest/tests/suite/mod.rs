//! Discovery tests: bundled projects, one fixture per diagnostic, and
//! malformed input.

use std::path::{Path, PathBuf};

use agentkit_manifest::{Discovery, discover};

mod agents;
#[cfg(unix)]
mod coverage;
mod env;
mod invalid;
#[cfg(unix)]
mod io;
mod jwt_policy;
mod layout;
mod ported;
mod robustness;

/// The repository's `fixtures/` folder.
pub(crate) fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// Discovers `dir`, which must be a readable folder.
pub(crate) fn discover_ok(dir: &Path) -> Discovery {
    match discover(dir) {
        Ok(d) => d,
        Err(e) => panic!("discover({}) failed: {e}", dir.display()),
    }
}

/// Writes a file, creating its folders.
pub(crate) fn write(path: &Path, contents: impl AsRef<[u8]>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, contents).unwrap();
}

/// The diagnostics of a discovery, one per line.
pub(crate) fn render(d: &Discovery) -> String {
    d.diagnostics.iter().map(|d| format!("{d}\n")).collect()
}
