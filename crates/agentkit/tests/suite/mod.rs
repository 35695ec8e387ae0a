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
mod mcp;
mod mcp_oauth;
mod playground;
mod providers;
mod rough_edges;
mod routes;
mod sandbox;
mod schedule_handlers;
mod services;
mod slack;
mod time;
mod triage;
mod variables;
