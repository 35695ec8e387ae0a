//! The `agentkit` binary: parses arguments, installs logging, calls the
//! facade, and maps the outcome to an exit code.

// A command-line program prints: that is its job.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod boot;
mod call;
mod chat;
mod cli;
mod db;
mod eval;
mod github;
mod github_doctor;
mod login;
mod mcp;
mod migrate;
mod packs;
mod render;
mod replay;
mod slack;
mod slack_init;

use std::process::ExitCode;

use clap::Parser;

/// jemalloc rather than glibc's malloc: under load the server allocates
/// and frees small buffers on every event and request, and glibc's
/// consolidation and free-list work was about a fifth of its CPU
/// (docs/benchmarks/session-core.md). mimalloc was as fast but held
/// nearly twice the memory.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    agentkit_cli::install_tracing_as(args.default_log(), args.log_json());
    anstream::ColorChoice::write_global(args.color.into());
    match cli::run(args) {
        Ok(code) => code,
        Err(e) => {
            let mut out = anstream::stderr();
            let _ = render::error(&mut out, &e);
            ExitCode::from(agentkit_cli::EXIT_USAGE)
        }
    }
}
