// A model step's context as GET /v1/session/:id/context answers it (the
// system prompt, the tools offered, the folded conversation, their size),
// and the summary the trace view shows of it. Pure functions, unit-tested.

export interface OfferedTool {
  name: string;
  description: string;
  inputSchema: unknown;
}

export type ContextMessage =
  | { role: "user"; text: string }
  | { role: "assistant"; text: string; toolCalls?: { callId: string; toolName: string; input: unknown }[] }
  | { role: "tool"; callId: string; toolName: string; output: unknown; isError?: boolean };

export interface ContextSize {
  systemChars: number;
  toolsChars: number;
  conversationChars: number;
  messages: number;
  /** The harness's estimate of the request's input tokens. */
  approxTokens: number;
  /** Older tool results were trimmed to fit the model's window. */
  trimmed?: boolean;
}

export interface StepContext {
  sessionId: string;
  turnId: string;
  step: number;
  system: string;
  tools: OfferedTool[];
  conversation: ContextMessage[];
  size: ContextSize;
}

/** `12.3k` style counts. */
export function compact(n: number): string {
  if (n < 1000) return String(n);
  if (n < 10_000) return `${(n / 1000).toFixed(1)}k`;
  return `${Math.round(n / 1000)}k`;
}

/** One line of size: messages, characters, approximate tokens. */
export function sizeLine(size: ContextSize): string {
  const chars = size.systemChars + size.toolsChars + size.conversationChars;
  const trimmed = size.trimmed ? " · older tool results trimmed to fit" : "";
  return `${size.messages} message${size.messages === 1 ? "" : "s"} · ${compact(chars)} chars · ~${compact(size.approxTokens)} tokens${trimmed}`;
}

/** Each part's share of the context, in percent of its characters (rounded; sums may be off by one). */
export function shares(size: ContextSize): { system: number; tools: number; conversation: number } {
  const total = size.systemChars + size.toolsChars + size.conversationChars;
  if (total === 0) return { system: 0, tools: 0, conversation: 0 };
  const pct = (n: number) => Math.round((n / total) * 100);
  return { system: pct(size.systemChars), tools: pct(size.toolsChars), conversation: pct(size.conversationChars) };
}

/** A message as one labelled line of text for the context list. */
export function messageLine(m: ContextMessage): { label: string; text: string } {
  switch (m.role) {
    case "user":
      return { label: "user", text: m.text };
    case "assistant": {
      const calls = (m.toolCalls ?? []).map((c) => `→ ${c.toolName}(${JSON.stringify(c.input)})`);
      return { label: "assistant", text: [m.text, ...calls].filter(Boolean).join("\n") };
    }
    case "tool":
      return {
        label: `tool ${m.toolName}${m.isError ? " (error)" : ""}`,
        text: typeof m.output === "string" ? m.output : JSON.stringify(m.output),
      };
  }
}

/** One model step of `GET /v1/session/:id/steps`. */
export interface SessionStep {
  step: number;
  turnId: string;
  turnStep: number;
  index: number;
  model: string | null;
  costUsd: number | null;
}

/** A step's tokens by part, as `GET …/steps/:step/request` answers them. */
export interface RequestTokens {
  system: number;
  tools: number;
  history: number;
  toolResults: number;
  newMessage: number;
  estimatedTotal: number;
  countedInput: number | null;
  countedCacheRead: number | null;
  countedCacheWrite: number | null;
  trimmed: boolean;
}

export interface RequestDiff {
  path: string;
  op: string;
  before?: string;
  after?: string;
}

/** `GET /v1/session/:id/steps/:step/request`: the provider request as it was sent. */
export interface StepRequest {
  step: number;
  turnId: string;
  turnStep: number;
  model: string | null;
  requestModel?: string | null;
  costUsd: number | null;
  body: unknown;
  tokens: RequestTokens;
  diff: RequestDiff[] | null;
  diffTruncated?: boolean;
}

/** The request's estimated parts, each with its share of their sum (in percent, for bars). */
export function tokenBars(t: RequestTokens): { part: string; label: string; tokens: number; pct: number }[] {
  const parts: [string, string, number][] = [
    ["system", "system prompt", t.system],
    ["tools", "tools", t.tools],
    ["history", "history", t.history],
    ["toolResults", "tool results", t.toolResults],
    ["newMessage", "new message", t.newMessage],
  ];
  const total = parts.reduce((n, [, , v]) => n + v, 0);
  return parts.map(([part, label, tokens]) => ({
    part,
    label,
    tokens,
    pct: total === 0 ? 0 : Math.round((tokens / total) * 1000) / 10,
  }));
}

/** The session step (as `/steps` numbers them) of a turn's step, if listed. */
export function sessionStepOf(steps: SessionStep[], turnId: string, turnStep: number): number | undefined {
  return steps.find((s) => s.turnId === turnId && s.turnStep === turnStep)?.step;
}
