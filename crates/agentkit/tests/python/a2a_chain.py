"""The caller at the head of a chain A -> B -> C: the official A2A Python
SDK (a2a-sdk) streams a message to agentkit agent B, whose turn calls a
remote A2A agent C; then the official MCP Python SDK calls B's `ask`
with a progress token. Both should see C's progress before B's answer.

Usage: a2a_chain.py <agent base URL>

Prints one JSON object: `stream` (the A2A stream's events, in order),
`progress` (the MCP progress notifications' messages, in order) and
`ask` (the MCP call's structured result); then `roundsProgress` and
`roundsAsk`, the same from a 2026-07-28 client that takes input requests
(an elicitation callback), whose `ask` the server waits for as a task.
"""

import asyncio
import json
import sys
import uuid

import httpx
from google.protobuf.json_format import MessageToDict

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest
from mcp import Client, ClientSession
from mcp.types import ElicitResult
from mcp.client.streamable_http import streamable_http_client


async def main(base):
    out = {}
    async with httpx.AsyncClient(timeout=60) as http:
        card = await A2ACardResolver(http, base).get_agent_card()
        client = ClientFactory(
            ClientConfig(streaming=True, httpx_client=http, supported_protocol_bindings=["JSONRPC"])
        ).create(card)
        message = Message(
            message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text="relay this")]
        )
        out["stream"] = [
            MessageToDict(e) async for e in client.send_message(SendMessageRequest(message=message))
        ]

    progress = []

    async def on_progress(value, total, message):
        progress.append({"progress": value, "message": message})

    async with streamable_http_client(f"{base}/v1/mcp") as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool(
                "ask", {"message": "relay this too"}, progress_callback=on_progress
            )
            out["ask"] = result.structured_content
    out["progress"] = progress

    rounds = []

    async def on_rounds_progress(value, total, message):
        rounds.append({"progress": value, "message": message})

    async def decide(context, params):
        return ElicitResult(action="accept", content={"decision": "approve"})

    async with Client(f"{base}/v1/mcp", elicitation_callback=decide) as client:
        result = await client.call_tool(
            "ask", {"message": "relay in rounds"}, progress_callback=on_rounds_progress
        )
        out["roundsAsk"] = result.structured_content
    out["roundsProgress"] = rounds
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
