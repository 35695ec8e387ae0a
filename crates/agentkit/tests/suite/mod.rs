//! Test modules of the facade.

mod docs;
mod fixtures;
mod http;
mod mcp;
