"""Drives an agentkit MCP endpoint with the official MCP Python SDK.

Usage: mcp_client.py URL
Prints one JSON document with what the server answered; the Rust test
(`crates/agentkit/tests/suite/mcp_python.rs`) asserts on it.
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


def structured(result):
    return {"isError": bool(result.is_error), "content": result.structured_content}


async def main(url):
    out = {}
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            out["serverName"] = init.server_info.name
            tools = await session.list_tools()
            out["tools"] = [t.name for t in tools.tools]
            first = await session.call_tool("ask", {"message": "hello from python"})
            out["ask"] = structured(first)
            sid = first.structured_content["sessionId"]
            out["checkDone"] = structured(
                await session.call_tool("check", {"sessionId": sid, "waitSeconds": 0})
            )
            out["askSlow"] = structured(
                await session.call_tool("ask", {"message": "take your time", "sessionId": sid})
            )
            out["checkRunning"] = structured(
                await session.call_tool("check", {"sessionId": sid, "waitSeconds": 0})
            )
            out["callTool"] = structured(
                await session.call_tool("call_tool", {"name": "echo", "input": {"text": "py"}})
            )
            out["callToolInvalid"] = structured(
                await session.call_tool("call_tool", {"name": "echo", "input": {}})
            )
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
