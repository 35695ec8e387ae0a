// The session's event stream, as the playground reads it: NDJSON lines cut
// from arbitrary network chunks, and the fold of those events into what
// the chat, the inbox and the trace show. Pure code (no DOM, no fetch), so
// the unit tests drive it with recorded streams.

/** One event, as `GET /v1/session/:id/stream` sends it (docs/reference/events.md). */
export interface WireEvent {
  type: string;
  index: number;
  sessionId: string;
  turnId?: string;
  at: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  data: any;
}

/** A parsed line and its exact text, for the raw pane. */
export interface Line {
  event: WireEvent;
  raw: string;
}

/**
 * Splits a byte stream into NDJSON lines. Chunks may end anywhere, even
 * inside a multi-byte character: the decoder keeps the partial bytes and
 * the splitter keeps the partial line until the next chunk completes it.
 */
export class NdjsonSplitter {
  private buffer = "";
  private readonly decoder = new TextDecoder();
  /** Lines that were not JSON objects: counted, never thrown. */
  malformed = 0;

  push(chunk: Uint8Array | string): Line[] {
    this.buffer +=
      typeof chunk === "string" ? chunk : this.decoder.decode(chunk, { stream: true });
    const lines: Line[] = [];
    let newline = this.buffer.indexOf("\n");
    while (newline >= 0) {
      const raw = this.buffer.slice(0, newline).replace(/\r$/, "");
      this.buffer = this.buffer.slice(newline + 1);
      this.take(raw, lines);
      newline = this.buffer.indexOf("\n");
    }
    return lines;
  }

  /** The end of the stream: a last line without its newline still counts. */
  end(): Line[] {
    const lines: Line[] = [];
    this.buffer += this.decoder.decode();
    const rest = this.buffer;
    this.buffer = "";
    this.take(rest, lines);
    return lines;
  }

  private take(raw: string, into: Line[]): void {
    if (raw.trim() === "") return;
    try {
      const event = JSON.parse(raw) as WireEvent;
      if (event && typeof event === "object" && typeof event.type === "string") {
        into.push({ event, raw });
        return;
      }
    } catch {
      // counted below
    }
    this.malformed += 1;
  }
}

export interface Usage {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
}

export type ApprovalState =
  | { state: "pending"; requestedAt: string }
  | { state: "approve" | "deny"; by?: string; reason?: string };

export interface ToolCall {
  callId: string;
  toolName: string;
  input: unknown;
  step?: number;
  status: "running" | "parked" | "done";
  output?: unknown;
  isError?: boolean;
  durationMs?: number;
  approval?: ApprovalState;
  requestedAt: string;
  /** When a parked call was decided: it runs from then. */
  resolvedAt?: string;
}

export type Part =
  | { kind: "text"; step: number; text: string; done: boolean }
  | { kind: "reasoning"; step: number; text: string; done: boolean }
  | { kind: "tool"; call: ToolCall }
  | {
      kind: "subagent";
      callId: string;
      subagent: string;
      prompt: string;
      result?: unknown;
      isError?: boolean;
      usage?: Usage;
      done: boolean;
    };

export interface Step {
  step: number;
  startedAt: string;
  durationMs?: number;
  /** `step.completed`'s cost in US dollars; `null` when the model has no price. */
  costUsd?: number | null;
  finishReason?: string;
}

export interface Turn {
  kind: "turn";
  turnId: string;
  startedAt: string;
  endedAt?: string;
  status: "running" | "completed" | "failed";
  /** `turn.failed`: why, and `reason` for interrupts (`preempted`, `stopped`, …). */
  failure?: { message: string; reason?: string };
  usage?: Usage;
  /** `turn.completed`'s (or a budget failure's) cost in US dollars; `null` when a price is unknown. */
  costUsd?: number | null;
  result?: string;
  /** How many queued messages the turn answers (more than 1 after coalescing). */
  messages?: number;
  resumes?: string;
  /** `kind: "emitted"` on a turn a channel recorded without a model call. */
  emitted?: boolean;
  /** No `turn.started` was seen: a deterministic call recorded under a turn id of its own. */
  direct?: boolean;
  steps: Step[];
  parts: Part[];
  firstIndex: number;
}

export interface UserMessage {
  kind: "user";
  text: string;
  at: string;
  index: number;
  /** The images attached to the message, by workspace path (`message.received`'s `images`). */
  images?: ImageRef[];
}

/** An image in the log: recorded by its workspace path, never its bytes. */
export interface ImageRef {
  path: string;
  mediaType?: string;
}

/**
 * The images by path among content items: `message.received`'s `images`,
 * or a tool's output when it is a list of content items
 * (`{"type": "image", "mediaType", "path"}`; inline data is written into
 * the workspace before the result is recorded).
 */
export function imagesOf(items: unknown): ImageRef[] {
  if (!Array.isArray(items)) return [];
  const out: ImageRef[] = [];
  for (const item of items) {
    if (item && typeof item === "object" && item.type === "image" && typeof item.path === "string") {
      out.push({ path: item.path, ...(typeof item.mediaType === "string" ? { mediaType: item.mediaType } : {}) });
    }
  }
  return out;
}

export type Entry = UserMessage | Turn;

export interface SessionView {
  sessionId?: string;
  channel?: string;
  mode?: string;
  principalId?: string;
  title?: string | null;
  /** `waiting`, `completed`, `failed`, or `running` while a turn runs. */
  state: "new" | "running" | "waiting" | "completed" | "failed";
  entries: Entry[];
  /** The index of the last event folded, -1 before any. */
  lastIndex: number;
}

export function emptySession(): SessionView {
  return { state: "new", entries: [], lastIndex: -1 };
}

/** Turn duration in milliseconds, once it ended. */
export function turnDuration(turn: Turn): number | undefined {
  if (!turn.endedAt) return undefined;
  const ms = Date.parse(turn.endedAt) - Date.parse(turn.startedAt);
  return Number.isFinite(ms) ? ms : undefined;
}

/** Every call of the session that waits for a decision. */
export function pendingApprovals(view: SessionView): ToolCall[] {
  const out: ToolCall[] = [];
  for (const e of view.entries) {
    if (e.kind !== "turn") continue;
    for (const p of e.parts) {
      if (p.kind === "tool" && p.call.approval?.state === "pending") out.push(p.call);
    }
  }
  return out;
}

/**
 * Folds events into the view, in place, and returns it. Events at or below
 * `lastIndex` are skipped, so a reconnect that replays a little is harmless.
 */
export function fold(view: SessionView, events: Iterable<WireEvent>): SessionView {
  for (const event of events) {
    if (event.index <= view.lastIndex) continue;
    view.lastIndex = event.index;
    apply(view, event);
  }
  return view;
}

function turnOf(view: SessionView, event: WireEvent): Turn | undefined {
  if (!event.turnId) return undefined;
  for (let i = view.entries.length - 1; i >= 0; i--) {
    const e = view.entries[i];
    if (e.kind === "turn" && e.turnId === event.turnId) return e;
  }
  // A deterministic call (`POST /v1/tools/:name` with a sessionId) records
  // `actions.requested` / `action.result` under a turn id of its own.
  const turn: Turn = {
    kind: "turn",
    turnId: event.turnId,
    startedAt: event.at,
    status: "running",
    direct: true,
    steps: [],
    parts: [],
    firstIndex: event.index,
  };
  view.entries.push(turn);
  return turn;
}

function currentStep(turn: Turn): number {
  return turn.steps.length > 0 ? turn.steps[turn.steps.length - 1].step : 0;
}

function openPart(turn: Turn, kind: "text" | "reasoning"): Extract<Part, { kind: "text" | "reasoning" }> {
  const step = currentStep(turn);
  const last = turn.parts[turn.parts.length - 1];
  if (last && last.kind === kind && !last.done && last.step === step) return last;
  const part = { kind, step, text: "", done: false } as Extract<Part, { kind: "text" | "reasoning" }>;
  turn.parts.push(part);
  return part;
}

function findCall(turn: Turn, callId: string): ToolCall | undefined {
  for (const p of turn.parts) {
    if (p.kind === "tool" && p.call.callId === callId) return p.call;
  }
  return undefined;
}

function callOf(turn: Turn, data: { callId: string; toolName?: string; input?: unknown }, at: string): ToolCall {
  const found = findCall(turn, data.callId);
  if (found) return found;
  const call: ToolCall = {
    callId: data.callId,
    toolName: data.toolName ?? "?",
    input: data.input,
    step: currentStep(turn),
    status: "running",
    requestedAt: at,
  };
  turn.parts.push({ kind: "tool", call });
  return call;
}

function closeTurn(view: SessionView, turn: Turn, at: string): void {
  turn.endedAt = at;
  for (const p of turn.parts) {
    if (p.kind === "text" || p.kind === "reasoning") p.done = true;
  }
  if (view.state === "running") view.state = "waiting";
}

function apply(view: SessionView, event: WireEvent): void {
  const data = event.data ?? {};
  switch (event.type) {
    case "session.started":
      view.sessionId = event.sessionId;
      view.channel = data.channel;
      view.mode = data.mode;
      view.principalId = data.principalId;
      view.title = data.title;
      return;
    case "message.received": {
      const images = imagesOf(data.images);
      view.entries.push({
        kind: "user",
        text: String(data.text ?? ""),
        at: event.at,
        index: event.index,
        ...(images.length > 0 ? { images } : {}),
      });
      return;
    }
    case "turn.started": {
      const turn = turnOf(view, event);
      if (!turn) return;
      turn.direct = false;
      turn.startedAt = event.at;
      turn.messages = data.messages;
      turn.resumes = data.resumes;
      turn.emitted = data.kind === "emitted";
      view.state = "running";
      return;
    }
    case "step.started": {
      const turn = turnOf(view, event);
      turn?.steps.push({ step: Number(data.step ?? turn.steps.length + 1), startedAt: event.at });
      return;
    }
    case "step.completed": {
      const turn = turnOf(view, event);
      const step = turn?.steps.find((s) => s.step === data.step);
      if (step) {
        step.durationMs = data.durationMs;
        if ("costUsd" in data) step.costUsd = data.costUsd ?? null;
      }
      return;
    }
    case "reasoning.appended": {
      const turn = turnOf(view, event);
      if (turn) openPart(turn, "reasoning").text += String(data.delta ?? "");
      return;
    }
    case "reasoning.completed": {
      const turn = turnOf(view, event);
      if (!turn) return;
      const part = openPart(turn, "reasoning");
      if (typeof data.text === "string") part.text = data.text;
      part.done = true;
      return;
    }
    case "message.appended": {
      const turn = turnOf(view, event);
      if (!turn) return;
      const part = openPart(turn, "text");
      // With `?text=false` only the delta comes; with the default the
      // cumulative text is the authority.
      if (typeof data.text === "string") part.text = data.text;
      else part.text += String(data.delta ?? "");
      return;
    }
    case "message.completed": {
      const turn = turnOf(view, event);
      if (!turn) return;
      const text = typeof data.text === "string" ? data.text : "";
      const last = turn.parts[turn.parts.length - 1];
      const open = last && last.kind === "text" && !last.done && last.step === currentStep(turn);
      if (text === "" && !open) {
        const step = turn.steps.find((s) => s.step === currentStep(turn));
        if (step) step.finishReason = data.finishReason;
        return;
      }
      const part = openPart(turn, "text");
      part.text = text;
      part.done = true;
      const step = turn.steps.find((s) => s.step === part.step);
      if (step) step.finishReason = data.finishReason;
      return;
    }
    case "actions.requested": {
      const turn = turnOf(view, event);
      if (!turn) return;
      for (const c of data.calls ?? []) callOf(turn, c, event.at);
      return;
    }
    case "action.approval_requested": {
      const turn = turnOf(view, event);
      if (!turn) return;
      const call = callOf(turn, data, event.at);
      call.status = "parked";
      call.approval = { state: "pending", requestedAt: event.at };
      return;
    }
    case "action.approval_resolved": {
      const turn = turnOf(view, event);
      if (!turn) return;
      const call = callOf(turn, data, event.at);
      call.approval = { state: data.decision === "approve" ? "approve" : "deny", by: data.by, reason: data.reason };
      call.resolvedAt = event.at;
      if (call.status === "parked") call.status = "running";
      return;
    }
    case "action.result": {
      const turn = turnOf(view, event);
      if (!turn) return;
      const call = callOf(turn, data, event.at);
      call.status = "done";
      call.output = data.output;
      call.isError = Boolean(data.isError);
      call.durationMs = data.durationMs;
      if (turn.direct) {
        turn.status = "completed";
        turn.endedAt = event.at;
      }
      return;
    }
    case "subagent.called": {
      const turn = turnOf(view, event);
      turn?.parts.push({
        kind: "subagent",
        callId: data.callId,
        subagent: data.subagent,
        prompt: String(data.prompt ?? ""),
        done: false,
      });
      return;
    }
    case "subagent.completed": {
      const turn = turnOf(view, event);
      if (!turn) return;
      const part = turn.parts.find((p) => p.kind === "subagent" && p.callId === data.callId);
      if (part && part.kind === "subagent") {
        part.result = data.result;
        part.isError = Boolean(data.isError);
        part.usage = data.usage;
        part.done = true;
      }
      return;
    }
    case "turn.completed": {
      const turn = turnOf(view, event);
      if (!turn) return;
      turn.status = "completed";
      turn.usage = data.usage;
      if ("costUsd" in data) turn.costUsd = data.costUsd ?? null;
      turn.result = data.result;
      closeTurn(view, turn, event.at);
      return;
    }
    case "turn.failed": {
      const turn = turnOf(view, event);
      if (!turn) return;
      turn.status = "failed";
      turn.failure = { message: String(data.message ?? "turn failed"), reason: data.reason };
      if (data.usage) turn.usage = data.usage;
      if ("costUsd" in data) turn.costUsd = data.costUsd ?? null;
      // A withdrawn call is resolved by its own event; one a shutdown left
      // parked stays pending (it can still be decided).
      closeTurn(view, turn, event.at);
      return;
    }
    case "session.waiting":
      view.state = "waiting";
      return;
    case "session.completed":
      view.state = "completed";
      return;
    case "session.failed":
      view.state = "failed";
      return;
    default:
      return;
  }
}

/** What a failed turn's footer says: the interrupt reason in words, else the message. */
export function failureText(turn: Turn): string {
  const f = turn.failure;
  if (!f) return "";
  switch (f.reason) {
    case "preempted":
      return "preempted: a newer message took over this turn";
    case "stopped":
      return "stopped";
    case "shutdown":
      return "interrupted: the server stopped";
    case "restart":
      return "interrupted: the server restarted mid-turn";
    default:
      return f.message;
  }
}

/** The usage footer's numbers, summed over a session's turns when asked. */
export function sumUsage(turns: Turn[]): Usage {
  const total: Usage = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };
  for (const t of turns) {
    if (!t.usage) continue;
    total.inputTokens += t.usage.inputTokens ?? 0;
    total.outputTokens += t.usage.outputTokens ?? 0;
    total.cacheReadTokens += t.usage.cacheReadTokens ?? 0;
    total.cacheWriteTokens += t.usage.cacheWriteTokens ?? 0;
  }
  return total;
}

/**
 * What a session's ended turns cost, as `GET /v1/session/:id` sums it:
 * `null` when a turn's price was unknown, `undefined` when no turn reports
 * a cost (events from before costs were recorded).
 */
export function sumCost(turns: Turn[]): number | null | undefined {
  let total: number | undefined;
  for (const t of turns) {
    if (t.costUsd === undefined) continue;
    if (t.costUsd === null) return null;
    total = (total ?? 0) + t.costUsd;
  }
  return total === undefined ? undefined : Math.round(total * 1e9) / 1e9;
}

/** A cost in US dollars for people: `$0.0123`, `$0.000042`; `null` is an unknown price. */
export function usd(cost: number | null): string {
  if (cost === null) return "cost unknown";
  if (cost === 0) return "$0";
  const digits = cost >= 0.01 ? 4 : Math.min(9, 1 - Math.floor(Math.log10(cost)));
  return `$${cost.toFixed(digits)}`;
}
