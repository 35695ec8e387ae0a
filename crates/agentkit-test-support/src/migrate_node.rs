//! What `agentkit migrate` tests need to load TypeScript under Node: the
//! `node_modules` folder holding `zod` and `typescript` (`.ci/run`
//! installs it into `target/migrate-node`) and a `node` on `PATH`.

use std::path::PathBuf;

/// How to install the packages by hand (the same as `.ci/run`).
pub const SETUP: &str =
    "npm install --prefix target/migrate-node --no-audit --no-fund zod@4.6.7 typescript@5.9.3";

/// The `node_modules` folder: `$AGENTKIT_MIGRATE_NODE_MODULES`, else
/// `<workspace>/target/migrate-node/node_modules`, when it holds `zod` and
/// `typescript` and `node` is on `PATH`.
///
/// Under CI (`CI=true`) a missing one fails the test (this panics);
/// elsewhere it answers why, for the test to print before skipping.
pub fn node_modules(test: &str) -> Result<PathBuf, String> {
    let dir = std::env::var_os("AGENTKIT_MIGRATE_NODE_MODULES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/migrate-node/node_modules")
        });
    let has_node = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("node").is_file()));
    let reason = if !has_node {
        Some(format!("{test}: no `node` on PATH"))
    } else if !dir.join("zod/package.json").is_file()
        || !dir.join("typescript/package.json").is_file()
    {
        Some(format!(
            "{test}: no zod and typescript in {} (install them with `{SETUP}`)",
            dir.display()
        ))
    } else {
        None
    };
    match reason {
        None => Ok(dir.canonicalize().unwrap_or(dir)),
        Some(reason) if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") => {
            panic!("{reason}")
        }
        Some(reason) => Err(format!("skipping {reason}")),
    }
}
