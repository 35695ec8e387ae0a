//! The `agentkit-serve` binary: the server alone, for containers. It takes
//! the flags of `agentkit serve` (the same struct, from the CLI's serve
//! library) and behaves as it does: banner, warnings, log level, exit codes.

use std::process::ExitCode;

use clap::Parser;

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
