"""The official A2A Python SDK (a2a-sdk) registering push notification
webhooks with an agentkit agent, and a webhook receiver.

Usage: a2a_push.py <agent base URL> <JSONRPC|HTTP+JSON>

Starts an HTTP receiver on loopback, then over the chosen binding: sends a
message whose configuration registers a webhook (token and Bearer
credentials); sends a message that parks a call for approval and
registers a second webhook on that task with
CreateTaskPushNotificationConfig; gets and lists the configs, approves
the call, waits for the completed push, deletes a config and checks it
is gone. Every body received is parsed as the SDK's StreamResponse (so
it is valid A2A). Prints what it saw as one JSON object.
"""

import asyncio
import json
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
from google.protobuf.json_format import MessageToDict, ParseDict

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    TaskPushNotificationConfig,
)

RECEIVED = []
LOCK = threading.Lock()


class Hook(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        parsed = ParseDict(json.loads(body), StreamResponse())
        with LOCK:
            RECEIVED.append(
                {
                    "path": self.path,
                    "token": self.headers.get("x-a2a-notification-token"),
                    "authorization": self.headers.get("authorization"),
                    "event": MessageToDict(parsed),
                }
            )
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def message(text, context_id=None, task_id=None):
    m = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    if context_id:
        m.context_id = context_id
    if task_id:
        m.task_id = task_id
    return m


def state_of(event):
    if "task" in event:
        return event["task"]["status"]["state"]
    if "statusUpdate" in event:
        return event["statusUpdate"]["status"]["state"]
    return None


def received(path):
    with LOCK:
        return [r for r in RECEIVED if r["path"] == path]


async def until(what, check, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        if check():
            return
        await asyncio.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}: {RECEIVED}")


async def main(base, binding):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    hook = f"http://127.0.0.1:{server.server_address[1]}"
    tag = binding.replace("+", "")
    out = {}
    async with httpx.AsyncClient(timeout=60) as http:
        card = await A2ACardResolver(http, base).get_agent_card()
        out["pushCapability"] = card.capabilities.push_notifications
        client = ClientFactory(
            ClientConfig(streaming=False, httpx_client=http, supported_protocol_bindings=[binding])
        ).create(card)

        # A webhook registered with the message itself.
        first_path = f"/{tag}/first"
        config = SendMessageConfiguration(
            return_immediately=True,
            task_push_notification_config=TaskPushNotificationConfig(
                url=hook + first_path,
                token="tok-first",
                authentication=AuthenticationInfo(scheme="Bearer", credentials="s3cret"),
            ),
        )
        events = [e async for e in client.send_message(SendMessageRequest(message=message("hello"), configuration=config))]
        first = events[-1].task
        context = first.context_id
        await until("the first task's completed push", lambda: any(state_of(r["event"]) == "TASK_STATE_COMPLETED" for r in received(first_path)))
        out["first"] = received(first_path)
        out["firstId"] = first.id

        # Turn 1 of the session streams; turn 2 parks a call.
        await anext(aiter(client.send_message(SendMessageRequest(message=message("next", context)))))
        events = [e async for e in client.send_message(SendMessageRequest(message=message("use the tool", context)))]
        parked = events[-1].task
        out["parkedState"] = MessageToDict(parked)["status"]["state"]

        later_path = f"/{tag}/later"
        created = await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=parked.id, id="later", url=hook + later_path, token="tok-later")
        )
        out["created"] = MessageToDict(created)
        await until("the parked task's snapshot", lambda: len(received(later_path)) >= 1)
        out["got"] = MessageToDict(
            await client.get_task_push_notification_config(GetTaskPushNotificationConfigRequest(task_id=parked.id, id="later"))
        )
        out["listed"] = MessageToDict(
            await client.list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest(task_id=parked.id))
        )
        [e async for e in client.send_message(SendMessageRequest(message=message("approve", context, parked.id)))]
        await until("the approved task's completed push", lambda: any(state_of(r["event"]) == "TASK_STATE_COMPLETED" for r in received(later_path)))
        out["later"] = received(later_path)

        await client.delete_task_push_notification_config(DeleteTaskPushNotificationConfigRequest(task_id=parked.id, id="later"))
        try:
            await client.get_task_push_notification_config(GetTaskPushNotificationConfigRequest(task_id=parked.id, id="later"))
            out["afterDelete"] = None
        except Exception as e:  # the SDK's mapped error class is the point
            out["afterDelete"] = type(e).__name__
        try:
            await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id="ses_nope.1", url=hook + "/x")
            )
            out["unknownTask"] = None
        except Exception as e:
            out["unknownTask"] = type(e).__name__
    server.shutdown()
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
