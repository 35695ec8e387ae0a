"""The official A2A Python SDK (a2a-sdk) reading an agentkit agent's
extended agent card, and speaking A2A 0.3's push notification methods.

Usage: a2a_extended.py <agent base URL> <JSONRPC|HTTP+JSON> <bearer token>

Resolves the public card without a credential, then over the chosen
binding: asks for the extended card without a credential (refused), and
with the bearer token. With the SDK's A2A 0.3 JSON-RPC transport (the
one it uses for 0.3 agents): reads the extended card by 0.3's
`agent/getAuthenticatedExtendedCard`, then sets, gets, lists and deletes
a push notification config of a task by 0.3's
`tasks/pushNotificationConfig/*`; a receiver on loopback checks that the
webhook set without an id gets 0.3's body (the task, validated as the
SDK's 0.3 `Task`). Prints what it saw as one JSON object.
"""

import asyncio
import json
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
from google.protobuf.json_format import MessageToDict

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.compat.v0_3 import types as types_v03
from a2a.compat.v0_3.jsonrpc_transport import CompatJsonRpcTransport
from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskPushNotificationConfig,
)


RECEIVED = []
LOCK = threading.Lock()


class Hook(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
        with LOCK:
            RECEIVED.append(
                {
                    "path": self.path,
                    "token": self.headers.get("x-a2a-notification-token"),
                    "authorization": self.headers.get("authorization"),
                    "body": body,
                }
            )
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def d(proto):
    return MessageToDict(proto)


def skill_ids(card):
    return [s.id for s in card.skills]


async def main(base, binding, token):
    out = {}
    hook = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    hook_url = f"http://127.0.0.1:{hook.server_address[1]}"
    auth = {"authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(timeout=60) as anonymous, httpx.AsyncClient(
        timeout=60, headers=auth
    ) as http:
        card = await A2ACardResolver(anonymous, base).get_agent_card()
        out["public"] = {
            "extendedAgentCard": card.capabilities.extended_agent_card,
            "skills": skill_ids(card),
        }

        def client(httpx_client):
            config = ClientConfig(
                streaming=False,
                httpx_client=httpx_client,
                supported_protocol_bindings=[binding],
            )
            return ClientFactory(config).create(card)

        try:
            await client(anonymous).get_extended_agent_card(GetExtendedAgentCardRequest())
            out["withoutCredential"] = None
        except Exception as e:  # the SDK's mapped error class is the point
            out["withoutCredential"] = f"{type(e).__name__}: {e}"

        authed = client(http)
        extended = await authed.get_extended_agent_card(GetExtendedAgentCardRequest())
        out["extended"] = d(extended)

        # A2A 0.3 over the same URL, as the SDK speaks to 0.3 agents.
        url = next(i.url for i in card.supported_interfaces if i.protocol_binding == "JSONRPC")
        legacy = CompatJsonRpcTransport(http, card, url)
        legacy_card = await legacy.get_extended_agent_card(GetExtendedAgentCardRequest())
        out["legacyExtended"] = {
            "skills": skill_ids(legacy_card),
            "interfaces": [
                [i.protocol_binding, i.url] for i in legacy_card.supported_interfaces
            ],
            "securitySchemes": sorted(legacy_card.security_schemes.keys()),
        }

        message = Message(
            message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text="hello")]
        )
        events = [e async for e in authed.send_message(SendMessageRequest(message=message))]
        task = events[-1].task
        out["taskState"] = task.status.state

        created = await legacy.create_task_push_notification_config(
            TaskPushNotificationConfig(
                task_id=task.id,
                url=f"{hook_url}/hook",
                token="tok-03",
                authentication=AuthenticationInfo(scheme="Bearer", credentials="c-03"),
            )
        )
        out["created"] = d(created)
        named = await legacy.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task.id, id="second", url=f"{hook_url}/two")
        )
        out["named"] = d(named)
        got = await legacy.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task.id, id="second")
        )
        out["got"] = d(got)
        listed = await legacy.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        out["listed"] = sorted(c.id for c in listed.configs)
        await legacy.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="second")
        )
        listed = await legacy.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        out["afterDelete"] = sorted(c.id for c in listed.configs)

        # The webhook set on the finished task got the task, in 0.3's shape.
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            with LOCK:
                hooked = [r for r in RECEIVED if r["path"] == "/hook"]
            if hooked:
                break
            await asyncio.sleep(0.1)
        first = hooked[0]
        pushed = types_v03.Task.model_validate(first["body"])
        out["pushed"] = {
            "kind": first["body"].get("kind"),
            "id": pushed.id,
            "state": pushed.status.state.value,
            "token": first["token"],
            "authorization": first["authorization"],
        }
    hook.shutdown()
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
