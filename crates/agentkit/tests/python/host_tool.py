"""A server tool that uses the host bridge (no dependencies beyond Python).

Input: {"op": "remember" | "recall" | "forget" | "list" | "mcp" | "badtoken", ...}.
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
            # Counts this call towards the session's delegation depth.
            "x-agentkit-session": os.environ.get("AGENTKIT_SESSION_ID", ""),
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
elif op == "mcp":
    status, out = host(
        "POST",
        "/v1/mcp/%s/tools/%s" % (args["connection"], args["tool"]),
        {"arguments": args.get("arguments", {})},
    )
elif op == "connections":
    status, out = host("GET", "/v1/mcp")
elif op == "reminders":
    status, out = host("POST", "/v1/reminders", args.get("reminder", {}))
elif op == "reminders_list":
    status, out = host("GET", "/v1/reminders")
else:  # badtoken
    status, out = host("GET", "/v1/kv?prefix=", token="not-the-token")
print(json.dumps({"status": status, "body": out}))
