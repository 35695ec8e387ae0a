// The stream model: NDJSON cut anywhere, and the fold the chat, inbox and
// trace render, over the repository's recorded stream and hand-made ones.

import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  NdjsonSplitter,
  emptySession,
  failureText,
  fold,
  imagesOf,
  pendingApprovals,
  sumCost,
  sumUsage,
  turnDuration,
  usd,
  type Turn,
  type WireEvent,
} from "../src/stream";

const recorded = readFileSync(new URL("../../../../fixtures/streams/weather-turn.ndjson", import.meta.url), "utf8");

function events(ndjson: string): WireEvent[] {
  const s = new NdjsonSplitter();
  return [...s.push(ndjson), ...s.end()].map((l) => l.event);
}

/** Events of one session, numbered, from `[type, data, turnId?]` rows. */
function session(rows: [string, Record<string, unknown>, string?][]): WireEvent[] {
  return rows.map(([type, data, turnId], index) => ({
    type,
    index,
    sessionId: "ses_t",
    ...(turnId ? { turnId } : {}),
    at: new Date(Date.UTC(2026, 0, 1, 0, 0, 0, index * 100)).toISOString(),
    data,
  }));
}

describe("NdjsonSplitter", () => {
  it("yields the same lines however the bytes are cut", () => {
    const bytes = new TextEncoder().encode(recorded + '{"type":"x","index":99,"sessionId":"s","at":"","data":{"t":"é☃"}}');
    const whole = events(recorded + '{"type":"x","index":99,"sessionId":"s","at":"","data":{"t":"é☃"}}');
    expect(whole).toHaveLength(23);
    for (const size of [1, 2, 3, 7, 64, 1000]) {
      const s = new NdjsonSplitter();
      const got = [];
      for (let i = 0; i < bytes.length; i += size) got.push(...s.push(bytes.slice(i, i + size)));
      got.push(...s.end());
      expect(got.map((l) => l.event)).toEqual(whole);
      expect(got.at(-1)?.event.data.t).toBe("é☃");
    }
  });

  it("keeps the raw line and counts malformed ones without throwing", () => {
    const s = new NdjsonSplitter();
    const lines = s.push('{"type":"a","index":0}\r\nnot json\n[1]\n\n{"type":"b","index":1}\n');
    expect(lines.map((l) => l.raw)).toEqual(['{"type":"a","index":0}', '{"type":"b","index":1}']);
    expect(s.malformed).toBe(2);
  });
});

describe("fold", () => {
  it("folds the recorded weather turn", () => {
    const view = fold(emptySession(), events(recorded));
    expect(view.state).toBe("waiting");
    expect(view.channel).toBe("http");
    expect(view.entries.map((e) => e.kind)).toEqual(["user", "turn"]);
    const turn = view.entries[1] as Turn;
    expect(turn.status).toBe("completed");
    expect(turn.steps.map((s) => s.step)).toEqual([1, 2, 3]);
    const tools = turn.parts.filter((p) => p.kind === "tool");
    expect(tools.map((p) => p.kind === "tool" && [p.call.toolName, p.call.status])).toEqual([
      ["get_weather", "done"],
      ["convert_units", "done"],
      ["post_alert", "done"],
    ]);
    const text = turn.parts.filter((p) => p.kind === "text");
    expect(text).toHaveLength(1);
    expect(text[0].kind === "text" && text[0].done).toBe(true);
    expect(turn.parts[0].kind).toBe("reasoning");
    expect(turn.usage?.inputTokens).toBeGreaterThan(0);
    expect(turnDuration(turn)).toBeGreaterThan(0);
  });

  it("builds text from deltas alone (?text=false) and skips replayed indexes", () => {
    const evs = session([
      ["session.started", { channel: "http", mode: "chat", principalId: "local" }],
      ["message.received", { text: "hi" }],
      ["turn.started", { messages: 1 }, "t1"],
      ["step.started", { step: 1 }, "t1"],
      ["message.appended", { delta: "Hel" }, "t1"],
      ["message.appended", { delta: "lo **you**" }, "t1"],
    ]);
    const view = fold(emptySession(), evs);
    const turn = view.entries[1] as Turn;
    expect(view.state).toBe("running");
    expect(turn.parts).toEqual([{ kind: "text", step: 1, text: "Hello **you**", done: false }]);
    // A reconnect from an earlier index replays nothing twice.
    fold(view, evs.slice(3));
    expect(turn.parts).toHaveLength(1);
    expect((turn.parts[0] as { text: string }).text).toBe("Hello **you**");
  });

  it("tracks a parked call through approval and a denial with its reason", () => {
    const view = fold(
      emptySession(),
      session([
        ["message.received", { text: "alert" }],
        ["turn.started", { messages: 1 }, "t1"],
        ["step.started", { step: 1 }, "t1"],
        ["message.completed", { text: "", finishReason: "tool_call" }, "t1"],
        ["actions.requested", { calls: [{ callId: "c1", toolName: "post_alert", input: { city: "Oslo" } }, { callId: "c2", toolName: "post_alert", input: {} }] }, "t1"],
        ["action.approval_requested", { callId: "c1", toolName: "post_alert", input: { city: "Oslo" } }, "t1"],
        ["action.approval_requested", { callId: "c2", toolName: "post_alert", input: {} }, "t1"],
      ]),
    );
    expect(pendingApprovals(view).map((c) => c.callId)).toEqual(["c1", "c2"]);
    const turn = view.entries[1] as Turn;
    // An empty tool-call step leaves no empty text part behind.
    expect(turn.parts.filter((p) => p.kind === "text")).toHaveLength(0);
    fold(view, [
      { type: "action.approval_resolved", index: 7, sessionId: "ses_t", turnId: "t1", at: "2026-01-01T00:00:01Z", data: { callId: "c1", toolName: "post_alert", decision: "approve", by: "local" } },
      { type: "action.approval_resolved", index: 8, sessionId: "ses_t", turnId: "t1", at: "2026-01-01T00:00:01Z", data: { callId: "c2", toolName: "post_alert", decision: "deny", by: "local", reason: "not today" } },
      { type: "action.result", index: 9, sessionId: "ses_t", turnId: "t1", at: "2026-01-01T00:00:02Z", data: { callId: "c2", toolName: "post_alert", output: "the call was denied by local: not today", isError: true, durationMs: 0 } },
    ]);
    expect(pendingApprovals(view)).toEqual([]);
    const [c1, c2] = turn.parts.map((p) => (p.kind === "tool" ? p.call : null));
    expect(c1?.approval).toEqual({ state: "approve", by: "local", reason: undefined });
    expect(c1?.status).toBe("running");
    expect(c2?.approval).toEqual({ state: "deny", by: "local", reason: "not today" });
    expect(c2?.isError).toBe(true);
  });

  it("says a preempted turn was preempted and keeps follow-ups in order", () => {
    const view = fold(
      emptySession(),
      session([
        ["message.received", { text: "first" }],
        ["turn.started", { messages: 1 }, "t1"],
        ["message.received", { text: "second" }],
        ["turn.failed", { message: "turn interrupted", reason: "preempted" }, "t1"],
        ["turn.started", { messages: 1 }, "t2"],
        ["step.started", { step: 1 }, "t2"],
        ["message.completed", { text: "done", finishReason: "stop" }, "t2"],
        ["turn.completed", { result: "done", usage: { inputTokens: 3, outputTokens: 1, cacheReadTokens: 2, cacheWriteTokens: 0 } }, "t2"],
        ["session.waiting", {}],
      ]),
    );
    expect(view.entries.map((e) => (e.kind === "user" ? e.text : `${e.turnId}:${e.status}`))).toEqual([
      "first",
      "t1:failed",
      "second",
      "t2:completed",
    ]);
    expect(failureText(view.entries[1] as Turn)).toMatch(/^preempted/);
    expect(view.state).toBe("waiting");
    expect(sumUsage(view.entries.filter((e): e is Turn => e.kind === "turn"))).toEqual({
      inputTokens: 3,
      outputTokens: 1,
      cacheReadTokens: 2,
      cacheWriteTokens: 0,
    });
  });

  it("shows a deterministic call recorded under a turn id of its own", () => {
    const view = fold(
      emptySession(),
      session([
        ["actions.requested", { calls: [{ callId: "k1", toolName: "get_weather", input: { city: "Oslo" } }] }, "call_1"],
        ["action.result", { callId: "k1", toolName: "get_weather", output: { ok: 1 }, isError: false, durationMs: 5 }, "call_1"],
      ]),
    );
    const turn = view.entries[0] as Turn;
    expect(turn.direct).toBe(true);
    expect(turn.status).toBe("completed");
  });
});

import { curlOf, exampleOf, fillPath, pathParams, queryString } from "../src/schema";

describe("forms", () => {
  it("prefills required properties from a schema", () => {
    expect(
      exampleOf({
        type: "object",
        required: ["condition", "severity", "n"],
        properties: { condition: { type: "string" }, severity: { enum: ["advisory", "watch"] }, n: { type: "integer", minimum: 2 }, details: { type: "string" } },
      }),
    ).toEqual({ condition: "example", severity: "advisory", n: 2 });
    expect(exampleOf(null)).toEqual({});
  });

  it("fills route paths and renders the equivalent curl", () => {
    expect(pathParams("/alert/:city")).toEqual(["city"]);
    expect(fillPath("/a/v1/channels/x/alert/:city", { city: "New York" })).toBe("/a/v1/channels/x/alert/New%20York");
    expect(queryString({ city: "Oslo", n: 2 })).toBe("?city=Oslo&n=2");
    expect(curlOf("POST", "http://h/x", { "content-type": "application/json" }, `{"a":"it's"}`)).toBe(
      `curl -s -X POST 'http://h/x' -H 'content-type: application/json' -d '{"a":"it'\\''s"}'`,
    );
  });
});

import { commandsOf, complete, parse } from "../src/commands";
import { renderMarkdown } from "../src/markdown";

describe("slash commands", () => {
  const info = {
    channels: [
      {
        id: "alerts",
        routes: [
          { method: "POST", path: "/alert/:city", url: "/w/v1/channels/alerts/alert/:city", description: "report" },
          { method: "GET", path: "/weather", url: "/w/v1/channels/alerts/weather" },
        ],
      },
    ],
  };
  const commands = commandsOf(info);

  it("completes and parses route commands", () => {
    expect(complete(commands, "/al").map((c) => c.name)).toEqual(["/alerts/alert/:city", "/alerts/weather"]);
    expect(complete(commands, "/h").map((c) => c.name)).toEqual(["/help"]);
    expect(complete(commands, "hello")).toEqual([]);
    expect(parse(commands, "/help")).toBe("help");
    expect(parse(commands, 'x /alerts')).toBeNull();
    const post = parse(commands, '/alerts/alert/New%20York {"severity": "watch"}');
    expect(post).toMatchObject({ url: "/w/v1/channels/alerts/alert/New%20York", body: '{"severity":"watch"}' });
    expect(parse(commands, '/alerts/weather {"city": "Oslo"}')).toMatchObject({ url: "/w/v1/channels/alerts/weather?city=Oslo" });
    expect(parse(commands, "/alerts/weather nope")).toEqual({ error: expect.stringContaining("must be JSON") });
    expect(parse(commands, "/nope")).toEqual({ error: expect.stringContaining("unknown command") });
  });
});

describe("markdown", () => {
  it("renders replies without their raw HTML or unsafe links", () => {
    const html = renderMarkdown("# T\n\nhi <script>alert(1)</script> [x](javascript:alert(1)) [y](https://a.b)\n\n<div onclick='x'>b</div>");
    expect(html).not.toMatch(/<script|<div|javascript:/);
    expect(html).toContain('<a href="https://a.b"');
    expect(html).toContain("<h1>T</h1>");
    expect(renderMarkdown("```rust\nfn main() {}\n```")).toContain('<span class="hljs-keyword">fn</span>');
  });
});

describe("images", () => {
  it("keeps the image items by path, of a message or a tool's output", () => {
    expect(
      imagesOf([
        { type: "text", text: "the dashboard" },
        { type: "image", mediaType: "image/png", path: ".agentkit/images/c1-0.png" },
        { type: "image", path: "shots/a.png" },
        { type: "image", mediaType: "image/png", data: "iVBOR" },
      ]),
    ).toEqual([{ path: ".agentkit/images/c1-0.png", mediaType: "image/png" }, { path: "shots/a.png" }]);
    expect(imagesOf({ type: "image", path: "a.png" })).toEqual([]);
    expect(imagesOf(undefined)).toEqual([]);
  });

  it("attaches a message's images to its entry", () => {
    const view = fold(
      emptySession(),
      session([["message.received", { text: "look", images: [{ type: "image", mediaType: "image/png", path: "dot.png" }] }]]),
    );
    expect(view.entries[0]).toMatchObject({ kind: "user", text: "look", images: [{ path: "dot.png", mediaType: "image/png" }] });
  });
});

describe("costs", () => {
  it("reads each step's and turn's costUsd from the events", () => {
    const view = fold(
      emptySession(),
      session([
        ["message.received", { text: "first" }],
        ["turn.started", { messages: 1 }, "t1"],
        ["step.started", { step: 1 }, "t1"],
        ["step.completed", { step: 1, durationMs: 5, costUsd: 0.00125 }, "t1"],
        ["step.started", { step: 2 }, "t1"],
        ["step.completed", { step: 2, durationMs: 5, costUsd: null }, "t1"],
        ["turn.completed", { result: "ok", costUsd: null }, "t1"],
        ["message.received", { text: "second" }],
        ["turn.started", { messages: 1 }, "t2"],
        ["step.started", { step: 1 }, "t2"],
        ["step.completed", { step: 1, durationMs: 5 }, "t2"],
        ["turn.completed", { result: "ok" }, "t2"],
      ]),
    );
    const [t1, t2] = view.entries.filter((e): e is Turn => e.kind === "turn");
    expect(t1.steps.map((s) => s.costUsd)).toEqual([0.00125, null]);
    expect(t1.costUsd).toBeNull();
    expect(t2.steps[0].costUsd).toBeUndefined();
    expect(t2.costUsd).toBeUndefined();
    expect(sumCost([t1, t2])).toBeNull();
  });

  const turn = (costUsd?: number | null) => ({ costUsd }) as unknown as Turn;

  it("sums the ended turns' costs; one unknown price makes the total unknown", () => {
    expect(sumCost([turn(0.001), turn(0.0025)])).toBe(0.0035);
    expect(sumCost([turn(0.001), turn(null)])).toBeNull();
    expect(sumCost([turn(), turn()])).toBeUndefined();
    expect(sumCost([turn(), turn(0.5)])).toBe(0.5);
  });

  it("formats dollars with the digits a small cost needs", () => {
    expect(usd(null)).toBe("cost unknown");
    expect(usd(0)).toBe("$0");
    expect(usd(1.23456)).toBe("$1.2346");
    expect(usd(0.000042)).toBe("$0.000042");
    expect(usd(0.0035)).toBe("$0.0035");
  });
});
