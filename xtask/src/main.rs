//! Project chores, run as `cargo xtask <task>` (see the matklad/cargo-xtask README).
//!
//! The tasks are plain Rust so they work the same on every machine that has
//! the toolchain: no shell scripts, no extra tools beyond cargo's own
//! subcommands. Arguments are parsed by hand to keep this crate cheap to
//! build.

// A chore binary reports to the terminal; printing is its job.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod bundle;
mod ci;
mod seams;
mod tidy;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;

const HELP: &str = "\
usage: cargo xtask <task> [args...]

tasks:
  ci      fmt check, clippy -D warnings, cargo-deny, rustdoc -D warnings,
          tidy, the playground's type check, unit tests and reproducible
          rebuild (needs Node and npm ci in crates/agentkit-playground/web),
          doctests, then the test suite (nextest when installed)
  tidy    repository conventions: `//!` headers, workspace dependencies,
          no anyhow in library crates, allowed dependency directions,
          ARCHITECTURE.md names every crate, libraries never print,
          the playground bundle and docs copy are fresh
  sync-docs
          copy docs/ into crates/agentkit-playground/docs (the copy the
          binary serves at /docs; tidy fails when it is stale)
  bench   cargo bench -p agentkit-manifest --bench discover [args...]
  bench core [args...]
          the session-core bench: builds the release agentkit-serve (unless
          AGENTKIT_SERVE_BIN is set), then cargo bench -p agentkit --bench
          core -- [args...] (--quick, --only SECTION, --json, --json-file PATH)
  bench sandbox
          cargo bench -p agentkit-harness --bench overhead: the harness's
          cost per step and per tool call, sandboxed and not (their ratio)
  help    this text
";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let task = args.next();
    let rest: Vec<String> = args.collect();
    let result = match task.as_deref() {
        None | Some("help" | "-h" | "--help") => {
            print!("{HELP}");
            Ok(true)
        }
        Some("ci") => no_args("ci", &rest).and_then(|()| ci::run_ci(&workspace_root()?)),
        Some("tidy") => no_args("tidy", &rest).and_then(|()| run_tidy(&workspace_root()?)),
        Some("sync-docs") => no_args("sync-docs", &rest).and_then(|()| {
            let root = workspace_root()?;
            bundle::sync_docs(&root)?;
            println!("copied docs/ to {}/docs", bundle::CRATE);
            Ok(true)
        }),
        Some("bench") => workspace_root().and_then(|root| ci::run_bench(&root, &rest)),
        Some(other) => {
            eprint!("error: unknown task `{other}`\n\n{HELP}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn no_args(task: &str, rest: &[String]) -> anyhow::Result<()> {
    match rest.first() {
        None => Ok(()),
        Some(arg) => anyhow::bail!("`cargo xtask {task}` takes no arguments, got `{arg}`"),
    }
}

/// Runs tidy and prints each problem; `Ok(false)` when there were any.
pub(crate) fn run_tidy(root: &Path) -> anyhow::Result<bool> {
    let problems = tidy::run(root)?;
    for problem in &problems {
        println!("{problem}");
    }
    if problems.is_empty() {
        println!("tidy: ok");
        Ok(true)
    } else {
        println!("tidy: {} problem(s)", problems.len());
        Ok(false)
    }
}

/// The workspace root: xtask lives one level below it.
fn workspace_root() -> anyhow::Result<PathBuf> {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map(Path::to_path_buf)
        .with_context(|| {
            format!(
                "xtask manifest dir {} has no parent",
                manifest_dir.display()
            )
        })
}
