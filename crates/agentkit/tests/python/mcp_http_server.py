"""A streamable-HTTP MCP server built with the official MCP Python SDK,
for an agentkit agent to reach through an `mcp-connections/` file.

Usage: mcp_http_server.py <port> both|legacy

`both` serves what the SDK serves: MCP 2026-07-28 (`server/discover`,
per-request `_meta`) beside the 2025-11-25 `initialize` handshake.
`legacy` is the same server with the SDK's 2026 revisions taken out
before it loads, run with sessions (`Mcp-Session-Id`), as a 2025-11-25
server is: a request before the `initialize` handshake is refused.

Its one tool, `shout`, answers its `text` in capitals, with the protocol
revision of the request that asked.
"""

import sys

if sys.argv[2] == "legacy":
    import mcp_types.version

    mcp_types.version.MODERN_PROTOCOL_VERSIONS = ()

import uvicorn
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("shouter")


@server.tool()
def shout(text: str, ctx: Context) -> str:
    """Answer the text in capitals."""
    version = getattr(ctx.request_context, "protocol_version", None) or "unknown"
    return f"{text.upper()} ({version})"


if __name__ == "__main__":
    legacy = sys.argv[2] == "legacy"
    app = server.streamable_http_app(stateless_http=not legacy, json_response=True)
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
