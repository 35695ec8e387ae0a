"""The official A2A Python SDK (a2a-sdk) as a client of an agentkit agent.

Usage: a2a_client.py <agent base URL> <JSONRPC|HTTP+JSON>

Resolves the agent card, then over the chosen binding: sends a message
(blocking), streams a follow-up in the same context, answers an approval
through input-required, starts a slow task (returnImmediately), subscribes
to it and cancels it, gets the first task back, and provokes the errors a
client must map (unknown task, subscribing to a finished one). Prints
what it saw as one JSON object.
"""

import asyncio
import json
import sys
import uuid

import httpx
from google.protobuf.json_format import MessageToDict

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
)


def message(text, context_id=None, task_id=None):
    m = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    if context_id:
        m.context_id = context_id
    if task_id:
        m.task_id = task_id
    return m


def d(proto):
    return MessageToDict(proto)


async def last_task(client, request):
    events = [e async for e in client.send_message(request)]
    return events[-1].task


async def main(base, binding):
    out = {}
    async with httpx.AsyncClient(timeout=60) as http:
        card = await A2ACardResolver(http, base).get_agent_card()
        out["card"] = d(card)

        def client(streaming):
            config = ClientConfig(
                streaming=streaming,
                httpx_client=http,
                supported_protocol_bindings=[binding],
            )
            return ClientFactory(config).create(card)

        blocking = client(False)
        streaming = client(True)

        first = await last_task(blocking, SendMessageRequest(message=message("hello from python")))
        out["send"] = d(first)
        context = first.context_id

        out["stream"] = [
            d(e)
            async for e in streaming.send_message(
                SendMessageRequest(message=message("stream please", context))
            )
        ]

        parked = await last_task(
            blocking, SendMessageRequest(message=message("use the tool", context))
        )
        out["parked"] = d(parked)
        out["approved"] = d(
            await last_task(
                blocking,
                SendMessageRequest(message=message("approve", context, parked.id)),
            )
        )

        slow = await last_task(
            blocking,
            SendMessageRequest(
                message=message("take your time", context),
                configuration=SendMessageConfiguration(return_immediately=True),
            ),
        )
        out["slow"] = d(slow)
        subscribed = []
        started = asyncio.Event()

        async def follow():
            async for e in streaming.subscribe(SubscribeToTaskRequest(id=slow.id)):
                subscribed.append(d(e))
                started.set()

        follower = asyncio.create_task(follow())
        await asyncio.wait_for(started.wait(), 30)
        out["canceled"] = d(await blocking.cancel_task(CancelTaskRequest(id=slow.id)))
        await asyncio.wait_for(follower, 30)
        out["subscribed"] = subscribed

        out["got"] = d(await blocking.get_task(GetTaskRequest(id=first.id, history_length=1)))

        for name, call in [
            ("unknownTask", blocking.get_task(GetTaskRequest(id="ses_nope.1"))),
            (
                "subscribeEnded",
                streaming.subscribe(SubscribeToTaskRequest(id=first.id)).__anext__(),
            ),
            ("cancelEnded", blocking.cancel_task(CancelTaskRequest(id=first.id))),
        ]:
            try:
                await call
                out[name] = None
            except Exception as e:  # the SDK's mapped error class is the point
                out[name] = type(e).__name__
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
