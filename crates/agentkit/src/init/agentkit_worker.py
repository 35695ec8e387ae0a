"""agentkit's tool-worker protocol for Python: one call per line on stdin,
one answer per line on stdout (docs/reference/tools.md, "Workers").

    from agentkit_worker import serve

    def handle(input, context):
        return {"greeting": f"hello {input['name']}"}

    serve(handle)
"""

import json
import sys


def serve(handle):
    """Answers each call with handle(input, context): its return value is
    the tool's output, an exception its error result. Returns when stdin
    ends (agentkit stopped)."""
    for line in sys.stdin:
        if not line.strip():
            continue
        call = json.loads(line)
        try:
            answer = {"id": call["id"], "output": handle(call["input"], call["context"])}
        except Exception as error:  # the call fails; the worker goes on
            answer = {"id": call["id"], "error": f"{type(error).__name__}: {error}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
