//! The `agentkit-serve` binary: the server alone, for containers.
//!
//! Serving arrives with the sessions issue. Until then this binary checks
//! the project like `agentkit validate` and then says plainly that it
//! cannot serve yet, with a non-zero exit, so no deployment mistakes it for
//! a running server.

#![allow(clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Serve agentkit agents over HTTP (not available in this release).
#[derive(Debug, Parser)]
#[command(name = "agentkit-serve", version, about)]
struct Args {
    /// The project, or a folder of projects.
    #[arg(long, default_value = ".", value_name = "PATH")]
    dir: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match agentkit::discover(&args.dir) {
        Err(e) => eprintln!("error: {e}"),
        Ok(found) => {
            for d in &found.diagnostics {
                eprintln!("{d}");
            }
            eprintln!(
                "error: agentkit-serve cannot serve yet: durable sessions over HTTP arrive in a later release ({} agent(s) discovered, {} error(s))",
                found.host.agents.len(),
                found.diagnostics.error_count()
            );
        }
    }
    ExitCode::from(2)
}
