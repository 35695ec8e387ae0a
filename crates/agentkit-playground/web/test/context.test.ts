import { describe, expect, it } from "vitest";
import { compact, messageLine, sessionStepOf, shares, sizeLine, tokenBars, type ContextSize } from "../src/context";

const size: ContextSize = { systemChars: 200, toolsChars: 600, conversationChars: 1200, messages: 3, approxTokens: 500 };

describe("step context summary", () => {
  it("says how big the context is", () => {
    expect(sizeLine(size)).toBe("3 messages · 2.0k chars · ~500 tokens");
    expect(sizeLine({ ...size, messages: 1, conversationChars: 48_800, approxTokens: 12_400 })).toBe(
      "1 message · 50k chars · ~12k tokens",
    );
    expect(compact(999)).toBe("999");
    expect(sizeLine({ ...size, trimmed: true })).toBe("3 messages · 2.0k chars · ~500 tokens · older tool results trimmed to fit");
  });

  it("splits it into system, tools and conversation", () => {
    expect(shares(size)).toEqual({ system: 10, tools: 30, conversation: 60 });
    expect(shares({ ...size, systemChars: 0, toolsChars: 0, conversationChars: 0 })).toEqual({
      system: 0,
      tools: 0,
      conversation: 0,
    });
  });

  it("labels each message of the folded conversation", () => {
    expect(messageLine({ role: "user", text: "hi" })).toEqual({ label: "user", text: "hi" });
    expect(
      messageLine({
        role: "assistant",
        text: "",
        toolCalls: [{ callId: "c1", toolName: "echo", input: { text: "hi" } }],
      }),
    ).toEqual({ label: "assistant", text: '→ echo({"text":"hi"})' });
    expect(messageLine({ role: "tool", callId: "c1", toolName: "echo", output: { echo: "hi" }, isError: true })).toEqual({
      label: "tool echo (error)",
      text: '{"echo":"hi"}',
    });
  });
});

describe("step requests", () => {
  it("splits the estimated tokens into bars", () => {
    const bars = tokenBars({
      system: 50,
      tools: 150,
      history: 0,
      toolResults: 25,
      newMessage: 25,
      estimatedTotal: 260,
      countedInput: null,
      countedCacheRead: null,
      countedCacheWrite: null,
      trimmed: false,
    });
    expect(bars.map((b) => [b.part, b.pct])).toEqual([
      ["system", 20],
      ["tools", 60],
      ["history", 0],
      ["toolResults", 10],
      ["newMessage", 10],
    ]);
  });

  it("finds a turn's step among the session's", () => {
    const steps = [
      { step: 1, turnId: "t1", turnStep: 1, index: 3, model: null, costUsd: null },
      { step: 2, turnId: "t1", turnStep: 2, index: 9, model: null, costUsd: null },
      { step: 3, turnId: "t2", turnStep: 1, index: 14, model: null, costUsd: null },
    ];
    expect(sessionStepOf(steps, "t2", 1)).toBe(3);
    expect(sessionStepOf(steps, "t2", 2)).toBeUndefined();
  });
});
