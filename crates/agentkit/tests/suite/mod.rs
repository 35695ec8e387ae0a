//! Test modules of the facade.

mod approvals;
mod channel_api;
mod channels;
mod docs;
mod fixtures;
mod hooks;
mod http;
mod mcp;
mod providers;
mod services;
mod time;
