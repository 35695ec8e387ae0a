//! Test modules of the facade.

mod ab;
mod approvals;
mod channel_api;
mod channels;
mod context;
mod docs;
mod edge;
mod fixtures;
mod github_app;
mod hooks;
mod http;
mod jwt;
mod mcp;
mod mcp_oauth;
mod operators;
mod playground;
mod providers;
mod rough_edges;
mod sandbox;
mod schedule_handlers;
mod services;
mod slack;
mod step_context;
mod time;
mod variables;
