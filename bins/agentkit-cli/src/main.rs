//! The `agentkit` binary: parses arguments, installs logging, calls the
//! facade, and maps the outcome to an exit code.

// A command-line program prints: that is its job.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod call;
mod chat;
mod cli;
mod github;
mod login;
mod packs;
mod render;
mod serve;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    install_tracing();
    anstream::ColorChoice::write_global(args.color.into());
    match cli::run(args) {
        Ok(code) => code,
        Err(e) => {
            let mut out = anstream::stderr();
            let _ = render::error(&mut out, &e);
            ExitCode::from(cli::EXIT_USAGE)
        }
    }
}

/// Logs go to stderr, filtered by `AGENTKIT_LOG` (default: warnings).
fn install_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("AGENTKIT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
