//! agentkit MCP: every agent as an MCP server (`ask`, `check`,
//! `call_tool`), and MCP client connections (stdio, streamable HTTP, peer).
//!
//! Not built yet: it arrives with the agent-to-agent issue. The connection
//! files it will open are already parsed and validated by
//! `agentkit-manifest`. Until then this crate exports nothing.
