"""A server tool that uses the host bridge (no dependencies beyond Python).

Input: {"op": "remember" | "recall" | "forget" | "list" | "mcp" | "ask_peer"
| "credential" | "badtoken", ...}. It sends nothing but the credential the
host gave it: the host knows the calling session (and its delegation depth)
from that.
"""

import json
import os
import sys
import urllib.error
import urllib.request


def host(method, path, body=None, token=None):
    req = urllib.request.Request(
        os.environ["AGENTKIT_HOST_URL"] + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={
            "Authorization": "Bearer " + (token or os.environ["AGENTKIT_HOST_TOKEN"]),
            "Content-Type": "application/json",
        },
    )
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as err:
        return err.code, json.load(err)


args = json.load(sys.stdin)
op = args["op"]
if op == "remember":
    body = {"value": args["value"]}
    if "ttlSeconds" in args:
        body["ttlSeconds"] = args["ttlSeconds"]
    status, out = host("PUT", "/v1/kv/" + args["key"], body)
elif op == "recall":
    status, out = host("GET", "/v1/kv/" + args["key"])
elif op == "forget":
    status, out = host("DELETE", "/v1/kv/" + args["key"])
elif op == "list":
    status, out = host("GET", "/v1/kv?prefix=" + args.get("prefix", ""))
elif op == "list_pages":
    # Follows `nextCursor` page by page; answers the keys of each page.
    pages, cursor, status = [], None, 200
    path = args.get("path", "/v1/kv") + "?limit=%d" % args["limit"]
    while status == 200 and len(pages) < 20:
        status, page = host("GET", path + ("&cursor=" + cursor if cursor else ""))
        if status != 200:
            out = page
            break
        items = page.get("entries", page.get("reminders", []))
        pages.append([i.get("key", i.get("id")) for i in items])
        cursor = page.get("nextCursor")
        if not cursor:
            out = {"pages": pages}
            break
elif op == "mcp":
    status, out = host(
        "POST",
        "/v1/mcp/%s/tools/%s" % (args["connection"], args["tool"]),
        {"arguments": args.get("arguments", {})},
    )
elif op == "ask_peer":
    status, out = host("POST", "/v1/mcp/peer/tools/ask", {"arguments": {"message": "ping"}})
elif op == "credential":
    # For the revocation test: the call's own credential, and that it works now.
    status, out = host("GET", "/v1/kv?prefix=")
    out = {"works": status, "url": os.environ["AGENTKIT_HOST_URL"], "token": os.environ["AGENTKIT_HOST_TOKEN"]}
elif op == "connections":
    status, out = host("GET", "/v1/mcp")
elif op == "reminders":
    status, out = host("POST", "/v1/reminders", args.get("reminder", {}))
elif op == "reminders_list":
    status, out = host("GET", "/v1/reminders")
else:  # badtoken
    status, out = host("GET", "/v1/kv?prefix=", token="not-the-token")
print(json.dumps({"status": status, "body": out}))
