//! The agent's MCP client connections as tools of its turns:
//! `<connection>__<tool>`, each connection opened on first use, calls
//! counted one hop deeper than the session that makes them.

use serde_json::Value;

use super::depths::Depths;

/// The agent's MCP connection tools, offered to every turn as
/// `<connection>__<tool>` (opening each connection on first use). Calls a
/// turn makes to peers go one hop deeper than its session.
#[derive(Debug)]
pub(crate) struct ConnectionTools {
    pub(crate) connections: agentkit_mcp::Connections,
    pub(crate) depths: Depths,
    /// Model-facing name → (connection, tool), filled by `list`.
    names: std::sync::Mutex<std::collections::HashMap<String, (String, String)>>,
}

impl ConnectionTools {
    pub(crate) fn new(connections: agentkit_mcp::Connections, depths: Depths) -> ConnectionTools {
        ConnectionTools {
            connections,
            depths,
            names: Default::default(),
        }
    }
}

/// `<connection>__<tool>`, within what model APIs accept
/// (`[A-Za-z0-9_-]`, at most 64 characters).
pub(crate) fn model_tool_name(connection: &str, tool: &str) -> String {
    let name: String = format!("{connection}__{tool}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    name.chars().take(64).collect()
}

impl agentkit_harness::ExtraTools for ConnectionTools {
    fn list<'a>(
        &'a self,
        session_id: &'a str,
    ) -> agentkit_harness::BoxFuture<'a, Vec<agentkit_harness::ExtraTool>> {
        Box::pin(async move {
            let hops = self.depths.get(session_id);
            let mut out = Vec::new();
            for conn in self.connections.names() {
                let tools = match self
                    .connections
                    .list_tools_in(&conn, hops, Some(session_id))
                    .await
                {
                    Ok(t) => t,
                    Err(e) => {
                        tracing::warn!(connection = %conn, error = %e, "MCP connection tools left out of the turn");
                        continue;
                    }
                };
                let about = self.connections.description(&conn);
                let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
                for t in tools {
                    let name = model_tool_name(&conn, &t.name);
                    names.insert(name.clone(), (conn.clone(), t.name.clone()));
                    let description = match &about {
                        Some(a) => format!("{} (MCP connection `{conn}`: {a})", t.description),
                        None => format!("{} (MCP connection `{conn}`)", t.description),
                    };
                    out.push(agentkit_harness::ExtraTool {
                        name,
                        description,
                        input_schema: t.input_schema,
                        read_only: t.read_only,
                    });
                }
            }
            out
        })
    }

    fn call<'a>(
        &'a self,
        name: &'a str,
        input: &'a Value,
        ctx: &'a agentkit_harness::ToolContext,
    ) -> agentkit_harness::BoxFuture<'a, agentkit_harness::ToolOutput> {
        Box::pin(async move {
            let target = {
                let names = self.names.lock().unwrap_or_else(|e| e.into_inner());
                names.get(name).cloned()
            };
            let Some((conn, tool)) = target else {
                return agentkit_harness::ToolOutput::error(format!("unknown tool `{name}`"));
            };
            let hops = self.depths.get(&ctx.session_id);
            let call = self.connections.call_tool_in(
                &conn,
                &tool,
                input.clone(),
                hops,
                Some(&ctx.session_id),
            );
            tokio::select! {
                _ = ctx.cancel.cancelled() => agentkit_harness::ToolOutput::error("tool call cancelled"),
                r = call => match r {
                    Ok(result) => agentkit_harness::ToolOutput {
                        output: result.model_output(),
                        is_error: result.is_error,
                    },
                    Err(e) => agentkit_harness::ToolOutput::error(e.to_string()),
                },
            }
        })
    }
}
