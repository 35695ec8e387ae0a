"""Drives an agentkit agent with the official OpenAI Python SDK.

Usage: openai_client.py PHASE BASE_URL [ARGS...]
Prints one JSON document of what the SDK parsed (event by event for the
streams); the Rust test (`crates/agentkit/tests/suite/openai.rs`) asserts
on it.

Phases:
  main BASE_URL KEY OTHER_KEY    responses and chat completions, streaming
                                 and not, continuation, errors, ownership
  approval BASE_URL KEY          an approval the turn waits on, answered
  function BASE_URL KEY          a client function tool's call, answered by
                                 a function_call_output
  after_restart BASE_URL KEY ID  retrieve ID and continue from it
"""

import json
import sys

import openai
from openai import OpenAI


def item(i):
    d = {"type": i.type}
    if i.type == "message":
        d["status"] = i.status
        d["text"] = "".join(c.text for c in i.content)
    elif i.type == "function_call":
        d["name"] = i.name
        d["arguments"] = json.loads(i.arguments) if i.arguments else i.arguments
        d["status"] = i.status
    elif i.type == "mcp_approval_request":
        d["id"] = i.id
        d["name"] = i.name
        d["server_label"] = i.server_label
        d["arguments"] = json.loads(i.arguments)
    return d


def response(r):
    return {
        "id": r.id,
        "status": r.status,
        "model": r.model,
        "output": [item(i) for i in r.output],
        "output_text": r.output_text,
        "usage": None
        if r.usage is None
        else {
            "input_tokens": r.usage.input_tokens,
            "output_tokens": r.usage.output_tokens,
            "total_tokens": r.usage.total_tokens,
        },
        "previous_response_id": r.previous_response_id,
        "error": None if r.error is None else {"code": r.error.code, "message": r.error.message},
    }


def stream_events(stream):
    """Each event as the SDK parsed it: its type and the fields that
    matter, with sequence numbers checked to count up from 0."""
    events = []
    final = None
    expected = 0
    for e in stream:
        assert e.sequence_number == expected, (e.sequence_number, expected)
        expected += 1
        d = {"type": e.type}
        if e.type in ("response.output_item.added", "response.output_item.done"):
            d["output_index"] = e.output_index
            d["item"] = item(e.item)
        elif e.type == "response.output_text.delta":
            d["delta"] = e.delta
            d["output_index"] = e.output_index
        elif e.type == "response.output_text.done":
            d["text"] = e.text
        elif e.type == "response.function_call_arguments.delta":
            d["delta"] = json.loads(e.delta)
        elif e.type == "response.function_call_arguments.done":
            d["arguments"] = json.loads(e.arguments)
        elif e.type in ("response.created", "response.in_progress"):
            d["status"] = e.response.status
            d["id"] = e.response.id
        elif e.type in ("response.completed", "response.failed"):
            final = response(e.response)
        events.append(d)
    return events, final


def error(f):
    try:
        f()
    except openai.APIStatusError as e:
        body = e.body if isinstance(e.body, dict) else {}
        return {
            "class": type(e).__name__,
            "status": e.status_code,
            "code": body.get("code"),
            "type": body.get("type"),
            "param": body.get("param"),
            "message": body.get("message"),
        }
    return None


def main_phase(base, key, other_key):
    client = OpenAI(base_url=base, api_key=key, max_retries=0)
    out = {}
    first = client.responses.create(model="bot", input="hello there")
    out["first"] = response(first)
    with client.responses.create(
        model="bot", input="and again", previous_response_id=first.id, stream=True
    ) as stream:
        out["second_events"], out["second"] = stream_events(stream)
    out["retrieved"] = response(client.responses.retrieve(out["second"]["id"]))
    # Items: a history of user and assistant messages seeds a new session.
    seeded = client.responses.create(
        model="bot",
        input=[
            {"role": "user", "content": "my name is Ada"},
            {"role": "assistant", "content": "Hello Ada."},
            {"role": "user", "content": [{"type": "input_text", "text": "what is my name?"}]},
        ],
    )
    out["seeded"] = response(seeded)

    completion = client.chat.completions.create(
        model="bot", messages=[{"role": "user", "content": "chat hello"}]
    )
    raw = client.chat.completions.with_raw_response.create(
        model="bot", messages=[{"role": "user", "content": "chat raw"}]
    )
    session = raw.headers.get("x-agentkit-session-id")
    out["chat"] = {
        "id": completion.id,
        "object": completion.object,
        "model": completion.model,
        "content": completion.choices[0].message.content,
        "role": completion.choices[0].message.role,
        "finish_reason": completion.choices[0].finish_reason,
        "usage": completion.usage.model_dump(include={"prompt_tokens", "completion_tokens", "total_tokens"}),
        "raw_session": session,
    }
    chunks = []
    stream = client.chat.completions.create(
        model="bot",
        messages=[
            {"role": "user", "content": "chat raw"},
            {"role": "assistant", "content": raw.parse().choices[0].message.content},
            {"role": "user", "content": "chat streamed"},
        ],
        stream=True,
        stream_options={"include_usage": True},
        extra_headers={"x-agentkit-session-id": session},
    )
    for c in stream:
        chunks.append(
            {
                "id": c.id,
                "object": c.object,
                "choices": [
                    {
                        "role": ch.delta.role,
                        "content": ch.delta.content,
                        "finish_reason": ch.finish_reason,
                    }
                    for ch in c.choices
                ],
                "usage": None if c.usage is None else c.usage.total_tokens,
            }
        )
    out["chat_chunks"] = chunks
    # `user` keys one conversation per principal.
    keyed = [
        client.chat.completions.with_raw_response.create(
            model="bot", messages=[{"role": "user", "content": text}], user="conv-1"
        )
        for text in ("keyed one", "keyed two")
    ]
    out["keyed_sessions"] = [r.headers.get("x-agentkit-session-id") for r in keyed]
    out["keyed_second"] = keyed[1].parse().choices[0].message.content

    out["errors"] = {
        "model": error(lambda: client.responses.create(model="nope", input="x")),
        "tools": error(
            lambda: client.responses.create(
                model="bot",
                input="x",
                tools=[{"type": "web_search"}],
            )
        ),
        "chat_tools": error(
            lambda: client.chat.completions.create(
                model="bot",
                messages=[{"role": "user", "content": "x"}],
                tools=[{"type": "function", "function": {"name": "f"}}],
            )
        ),
        "instructions": error(
            lambda: client.responses.create(model="bot", input="x", instructions="be terse")
        ),
        "system": error(
            lambda: client.chat.completions.create(
                model="bot",
                messages=[{"role": "system", "content": "be terse"}, {"role": "user", "content": "x"}],
            )
        ),
        "unknown": error(lambda: client.responses.retrieve("resp_nope.1")),
        "not_latest": error(
            lambda: client.responses.create(model="bot", input="x", previous_response_id=first.id)
        ),
        "auth": error(
            lambda: OpenAI(base_url=base, api_key="wrong", max_retries=0).responses.create(
                model="bot", input="x"
            )
        ),
        "other_owner": error(
            lambda: OpenAI(base_url=base, api_key=other_key, max_retries=0).responses.retrieve(first.id)
        ),
    }
    return out


def approval_phase(base, key):
    client = OpenAI(base_url=base, api_key=key, max_retries=0)
    out = {}
    waiting = client.responses.create(model="guard", input="please echo")
    out["waiting"] = response(waiting)
    requests = [i for i in waiting.output if i.type == "mcp_approval_request"]
    with client.responses.create(
        model="guard",
        previous_response_id=waiting.id,
        input=[
            {"type": "mcp_approval_response", "approval_request_id": r.id, "approve": True}
            for r in requests
        ],
        stream=True,
    ) as stream:
        out["resumed_events"], out["resumed"] = stream_events(stream)
    out["again"] = error(
        lambda: client.responses.create(
            model="guard",
            previous_response_id=waiting.id,
            input=[{"type": "mcp_approval_response", "approval_request_id": requests[0].id, "approve": True}],
        )
    )
    return out


def function_phase(base, key):
    client = OpenAI(base_url=base, api_key=key, max_retries=0)
    out = {}
    tools = [
        {
            "type": "function",
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        }
    ]
    first = client.responses.create(model="desk", input="weather please", tools=tools)
    out["first"] = response(first)
    calls = [i for i in first.output if i.type == "function_call"]
    out["calls"] = [c.name for c in calls]
    with client.responses.create(
        model="desk",
        previous_response_id=first.id,
        tools=tools,
        input=[
            {"type": "function_call_output", "call_id": c.call_id, "output": "sunny, 21 C"}
            for c in calls
        ],
        stream=True,
    ) as stream:
        out["answered_events"], out["answered"] = stream_events(stream)
    out["again"] = error(
        lambda: client.responses.create(
            model="desk",
            previous_response_id=first.id,
            input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "rain"}],
        )
    )
    bot = OpenAI(base_url=base.replace("/desk/", "/bot/"), api_key=key, max_retries=0)
    out["clash"] = error(
        lambda: bot.responses.create(
            model="bot",
            input="x",
            tools=[{"type": "function", "name": "echo", "parameters": {"type": "object"}}],
        )
    )
    return out


def after_restart_phase(base, key, rid):
    client = OpenAI(base_url=base, api_key=key, max_retries=0)
    out = {"retrieved": response(client.responses.retrieve(rid))}
    out["continued"] = response(
        client.responses.create(model="bot", input="after the restart", previous_response_id=rid)
    )
    return out


if __name__ == "__main__":
    phase = sys.argv[1]
    if phase == "main":
        result = main_phase(*sys.argv[2:5])
    elif phase == "approval":
        result = approval_phase(*sys.argv[2:4])
    elif phase == "function":
        result = function_phase(*sys.argv[2:4])
    else:
        result = after_restart_phase(*sys.argv[2:5])
    print(json.dumps(result, indent=1))
