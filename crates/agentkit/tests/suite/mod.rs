//! Test modules of the facade.

mod approvals;
mod channel_api;
mod channels;
mod docs;
mod fixtures;
mod hooks;
mod http;
mod mcp;
mod services;
mod time;
