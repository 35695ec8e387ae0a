//! Test modules of the facade.

mod channels;
mod docs;
mod fixtures;
mod hooks;
mod http;
mod mcp;
mod time;
