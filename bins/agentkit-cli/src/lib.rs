//! What the two server binaries share, so that `agentkit serve` and
//! `agentkit-serve` tell one story: the flag struct ([`ServeArgs`]), the
//! startup (file-descriptor limit, log level), the banner and warnings, how
//! an invalid project is refused, and the exit codes.
//!
//! The facade (`agentkit`) parses no arguments; this library is the one
//! place the server's flags become [`agentkit::ServeOptions`].

// A command-line program prints: that is its job.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod allocator;
mod serve;

pub use serve::{
    EXIT_INVALID, EXIT_USAGE, SERVE_LOG_DEFAULT, ServeArgs, install_tracing, install_tracing_as,
    render_error, render_refusal, run, serve_main,
};
