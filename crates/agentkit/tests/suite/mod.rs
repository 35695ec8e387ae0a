//! Test modules of the facade.

mod channels;
mod docs;
mod fixtures;
mod http;
mod mcp;
mod time;
