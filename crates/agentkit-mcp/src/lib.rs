//! agentkit MCP: every agent as an MCP server (`ask`, `check`,
//! `call_tool`; under 2026-07-28 `ask` as a task and approvals as input
//! requests, `tasks.rs`), and MCP client connections (stdio, streamable
//! HTTP, peer).
//!
//! rmcp's types stay inside this crate. The server side ([`McpHttp`]) is a
//! stateless streamable-HTTP endpoint over an [`AgentBackend`] that the
//! facade implements with the agent's runtime; it knows nothing of
//! sessions or routing. The client side ([`Connections`]) opens an agent's
//! MCP connections (stdio children, streamable HTTP, peer agents) lazily
//! and reopens them with backoff when they die; an HTTP connection with
//! `oauth = true` sends the access token `oauth.rs` keeps (login,
//! storage 0600, refresh before expiry and on 401).

mod client;
mod oauth;
mod server;
mod tasks;

pub use client::{
    ClientError, ClientOptions, ConnectionSpec, ConnectionStatus, Connections, IdentityFuture,
    IdentitySource, McpCallResult, McpTool, Target,
};
pub use oauth::{
    LoginOptions, OAuthClient, OAuthError, REFRESH_MARGIN, StoredTokens, TokenSource, TokenState,
    login, read_tokens, token_state, write_tokens,
};
pub use server::{
    AgentBackend, AskRequest, BackendError, DEFAULT_MAX_HOPS, DEFAULT_MAX_WAIT, HOPS_HEADER,
    McpBody, McpHttp, McpServerOptions, ProgressSink, Reply, ReplyStatus, ServerToolInfo,
    ToolCallRequest,
};
pub use tasks::{ApprovalAnswer, PendingCall, TaskReport, TaskState};
