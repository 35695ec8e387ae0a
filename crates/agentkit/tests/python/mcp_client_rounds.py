"""Drives an agentkit MCP endpoint with the official MCP Python SDK's
`Client` in both revisions, for the approval of a tool call.

Usage: mcp_client_rounds.py URL

`modern` negotiates 2026-07-28 (`server/discover`): the agent's approval
comes back as an input request, which the elicitation callback approves
(recording what it was shown), and the SDK retries the call. `legacy`
runs the 2025-11-25 `initialize` handshake, where the same call answers
`waiting_approval`. Prints one JSON document; the Rust test
(`crates/agentkit/tests/suite/mcp_revisions.rs`) asserts on it.
"""

import asyncio
import json
import sys

from mcp import Client
from mcp.types import ElicitResult

TASKS = "io.modelcontextprotocol/tasks"


async def run(url, mode):
    asked = []

    async def approve(context, params):
        dumped = params.model_dump(by_alias=True, mode="json")
        asked.append({"message": dumped.get("message"), "meta": dumped.get("_meta")})
        return ElicitResult(action="accept", content={"decision": "approve"})

    async with Client(url, mode=mode, elicitation_callback=approve) as client:
        result = await client.call_tool("ask", {"message": "echo hi"})
        caps = client.server_capabilities.model_dump(by_alias=True, mode="json", exclude_none=True)
        return {
            "protocol": client.protocol_version,
            "tasksExtension": TASKS in (caps.get("extensions") or {}),
            "asked": asked,
            "ask": {"isError": bool(result.is_error), "content": result.structured_content},
        }


async def main(url):
    out = {"modern": await run(url, "auto"), "legacy": await run(url, "legacy")}
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
