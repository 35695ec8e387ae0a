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
mod operators;
mod playground;
mod providers;
mod sandbox;
mod schedule_handlers;
mod services;
mod step_context;
mod time;
