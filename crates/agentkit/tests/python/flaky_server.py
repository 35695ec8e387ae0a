"""A stdio MCP server that can be told to die, for the restart test.

Tools: `pid` answers the server's process id; `die` exits at once.
"""

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("flaky")


@server.tool()
def pid() -> str:
    """The process id of this server."""
    return str(os.getpid())


@server.tool()
def die() -> str:
    """Exit without answering."""
    os._exit(3)


if __name__ == "__main__":
    server.run("stdio")
