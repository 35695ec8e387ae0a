//! Test modules of the facade.

mod approvals;
mod channels;
mod docs;
mod fixtures;
mod hooks;
mod http;
mod mcp;
mod time;
