"""An A2A server built with the official A2A Python SDK (a2a-sdk), for an
agentkit agent to call as a remote A2A connection.

Usage: a2a_server.py <port> [--no-streaming]

Its one skill echoes: a message is answered `remote echo: <text>`; a
message starting with `book` asks for input first (`which day?`), and the
answer completes the task with `booked for <answer>`. Every request's
`x-agentkit-hops` header is echoed too, so the test sees the depth. The
reply is written as an artifact in three appended pieces, which a
streaming client sees one by one; the card says `streaming: true` unless
`--no-streaming` is given.
"""

import sys

import uvicorn
from starlette.applications import Starlette

from a2a.helpers.proto_helpers import new_task
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    TaskState,
)

HOPS = {}


class Echo(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue):
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        text = context.get_user_input()
        waiting = context.current_task is not None
        if not waiting:
            await event_queue.enqueue_event(
                new_task(
                    context.task_id,
                    context.context_id,
                    TaskState.TASK_STATE_SUBMITTED,
                    history=[context.message],
                )
            )
        await updater.start_work()
        if text.startswith("book") and not waiting:
            await updater.requires_input(updater.new_agent_message([Part(text="which day?")]))
            return
        hops = HOPS.get("last", "none")
        pieces = ["booked for ", text] if waiting else ["remote echo: ", text]
        pieces.append(f" (hops {hops})")
        for i, piece in enumerate(pieces):
            await updater.add_artifact(
                [Part(text=piece)],
                artifact_id="reply",
                name="reply",
                append=i > 0,
                last_chunk=i == len(pieces) - 1,
            )
        await updater.complete()

    async def cancel(self, context, event_queue):
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


class RecordHops:
    """ASGI middleware: remembers the last request's `x-agentkit-hops`."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "POST":
            headers = dict(scope["headers"])
            HOPS["last"] = headers.get(b"x-agentkit-hops", b"none").decode()
        await self.app(scope, receive, send)


def main(port, streaming):
    url = f"http://127.0.0.1:{port}/"
    card = AgentCard(
        name="remote-echo",
        description="Echoes messages; books things after asking which day",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id="echo", name="echo", description="Echoes what it is told", tags=["echo"]
            )
        ],
    )
    handler = DefaultRequestHandler(
        agent_executor=Echo(), task_store=InMemoryTaskStore(), agent_card=card
    )
    app = Starlette(
        routes=create_agent_card_routes(card) + create_jsonrpc_routes(handler, "/")
    )

    uvicorn.run(RecordHops(app), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(int(sys.argv[1]), "--no-streaming" not in sys.argv[2:])
