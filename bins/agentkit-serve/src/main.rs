//! The `agentkit-serve` binary: the server alone, for containers. It takes
//! the flags of `agentkit serve` (the same struct, from the CLI's serve
//! library) and behaves as it does: banner, warnings, log level, exit codes.

use std::process::ExitCode;

use clap::Parser;

/// jemalloc rather than glibc's malloc: under load the server allocates
/// and frees small buffers on every event and request, and glibc's
/// consolidation and free-list work was about a fifth of its CPU
/// (docs/benchmarks/session-core.md). mimalloc was as fast but held
/// nearly twice the memory.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Serve agentkit agents over HTTP.
#[derive(Debug, Parser)]
#[command(name = "agentkit-serve", version, about)]
struct Args {
    #[command(flatten)]
    serve: agentkit_cli::ServeArgs,
}

fn main() -> ExitCode {
    agentkit_cli::serve_main(Args::parse().serve)
}
