import { describe, expect, it } from "vitest";

import { levelClass, logText } from "../src/logs";

describe("log lines", () => {
  it("show time, level, target, turn, message and fields", () => {
    const at = new Date(2026, 11, 1, 9, 5, 7, 42).toISOString();
    const text = logText({
      at,
      level: "warn",
      target: "agentkit_runtime::hooks",
      message: "a hook failed",
      sessionId: "ses_1",
      turnId: "turn_9",
      fields: { hook: "audit", attempts: 3 },
    });
    expect(text).toBe("09:05:07.042 WARN agentkit_runtime::hooks [turn_9]: a hook failed hook=audit attempts=3");
  });

  it("keep an unparsable time as it came and need no fields", () => {
    expect(logText({ at: "soon", level: "info", target: "t", message: "m" })).toBe("soon INFO t: m");
  });

  it("mark warnings and errors", () => {
    expect(levelClass("WARN")).toBe("log-warn");
    expect(levelClass("error")).toBe("log-error");
    expect(levelClass("info")).toBe("log");
  });
});
