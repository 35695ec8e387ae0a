// The playground's only way to the server: the agent's public HTTP API
// (docs/reference/http-api.md), so every call runs the agent's auth chain.
// The bearer token, when one is set, lives in localStorage and goes in the
// Authorization header: never in a URL.

import type { SessionStep, StepContext, StepRequest } from "./context";
import type { LogLine } from "./logs";
import { NdjsonSplitter, type Line } from "./stream";

const TOKEN_KEY = "agentkit.playground.bearer";

export function bearerToken(): string {
  try {
    return localStorage.getItem(TOKEN_KEY) ?? "";
  } catch {
    return "";
  }
}

export function setBearerToken(token: string): void {
  try {
    if (token) localStorage.setItem(TOKEN_KEY, token);
    else localStorage.removeItem(TOKEN_KEY);
  } catch {
    // storage disabled: the token lasts for this page only
  }
}

/** An answer with `ok: false`, or a transport failure. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** What forking a session answers. */
export interface Forked {
  sessionId: string;
  continuationToken: string;
  forkedFrom: { sessionId: string; atIndex: number };
}

export interface Accepted {
  sessionId: string;
  continuationToken: string;
  isNew: boolean;
  coalesced: boolean;
  streamUrl: string;
}

export interface SessionSummary {
  sessionId: string;
  channel: string;
  mode: string;
  createdAt: string;
  title?: string;
  busy: boolean;
  /** The owner; listed only to an operator, who sees every principal's sessions. */
  principalId?: string;
  /** What the session's ended turns cost in US dollars; `null` when a price was unknown. */
  costUsd?: number | null;
}

/** `caller` of GET /v1/info: who the page talks to the server as. */
export interface Caller {
  principalId: string;
  principalType: string;
  authenticator: string;
  operator: boolean;
}

export interface PendingApproval {
  callId: string;
  toolName: string;
  input: unknown;
  turnId: string;
  requestedAt: string;
  live: boolean;
}

/** A record kept by the agent (docs/reference/artifacts.md). */
export interface Artifact {
  id: string;
  kind: string;
  key?: string;
  data: unknown;
  sessionId: string;
  turnId?: string;
  createdAt: string;
  updatedAt: string;
}

/** A governed memory (docs/reference/memory.md). */
export interface Memory {
  id: string;
  text: string;
  scope: string;
  provenance?: { sessionId?: string; turnId?: string; eventIndex?: number; principal?: string };
  createdAt: string;
  updatedAt: string;
}

/** One entry of a session's workspace (docs/reference/files.md). */
export interface WorkspaceEntry {
  path: string;
  type: "file" | "dir" | "symlink";
  size: number;
  modifiedAt: string;
}

/** How many artifacts, memories or files one page of a view lists; "more" asks for the next. */
export const PAGE = 50;

/** One page of a listing: its items and the cursor of the next page, if any. */
export interface Page<T> {
  items: T[];
  nextCursor?: string;
}

/** `path` with `?`/`&` and the cursor appended when there is one. */
function paged(path: string, cursor?: string): string {
  if (!cursor) return path;
  return `${path}${path.includes("?") ? "&" : "?"}cursor=${encodeURIComponent(cursor)}`;
}

/** A workspace path, each segment encoded, the slashes kept. */
export function encodePath(path: string): string {
  return path.split("/").map(encodeURIComponent).join("/");
}

/** Continuation tokens by session id, kept so that a reload can follow up. */
const TOKENS_KEY = "agentkit.playground.tokens";

function tokensOf(base: string): Record<string, string> {
  try {
    const all = JSON.parse(localStorage.getItem(TOKENS_KEY) ?? "{}");
    return all[base] ?? {};
  } catch {
    return {};
  }
}

/** The API's error object of a failed answer, as an `ApiError`. */
async function errorOf(resp: Response): Promise<ApiError> {
  let code = "error";
  let message = `${resp.status}`;
  try {
    const doc = await resp.json();
    code = doc.error?.code ?? code;
    message = doc.error?.message ?? message;
  } catch {
    // not JSON
  }
  return new ApiError(resp.status, code, message);
}

export class Api {
  constructor(readonly base: string) {}

  private headers(json: boolean): Headers {
    const h = new Headers();
    if (json) h.set("content-type", "application/json");
    const token = bearerToken();
    if (token) h.set("authorization", `Bearer ${token}`);
    return h;
  }

  /** `path` is under the agent's base, or with `host` under the host's root. */
  async request<T = Record<string, unknown>>(method: string, path: string, body?: unknown, host = false): Promise<T> {
    let resp: Response;
    try {
      resp = await fetch((host ? "" : this.base) + path, {
        method,
        // A FormData body goes as multipart/form-data (the browser sets its boundary).
        headers: this.headers(body !== undefined && !(body instanceof FormData)),
        body: body === undefined ? undefined : body instanceof FormData ? body : JSON.stringify(body),
      });
    } catch (e) {
      throw new ApiError(0, "network", `cannot reach the server: ${String(e)}`);
    }
    const text = await resp.text();
    let doc: { ok?: boolean; error?: { code?: string; message?: string } } & Record<string, unknown>;
    try {
      doc = JSON.parse(text);
    } catch {
      throw new ApiError(resp.status, "bad_answer", `${method} ${path}: ${resp.status} ${text.slice(0, 200)}`);
    }
    if (!resp.ok || doc.ok === false) {
      throw new ApiError(resp.status, doc.error?.code ?? "error", doc.error?.message ?? `${resp.status}`);
    }
    return doc as T;
  }

  info() {
    return this.request<Record<string, any>>("GET", "/v1/info");
  }

  /** Every session of the caller, newest first, following `nextCursor` page by page. */
  async sessions() {
    const all: SessionSummary[] = [];
    let cursor: string | undefined;
    do {
      const query = cursor ? `?limit=1000&cursor=${encodeURIComponent(cursor)}` : "?limit=1000";
      const page = await this.request<{ sessions: SessionSummary[]; nextCursor?: string }>("GET", `/v1/sessions${query}`);
      all.push(...page.sessions);
      cursor = page.nextCursor;
    } while (cursor);
    return all;
  }

  /**
   * Sends a message: as JSON, or with `files` as multipart/form-data, each
   * file written into the session's workspace at its name before the turn
   * (docs/reference/files.md).
   */
  async send(sessionId: string | undefined, message: string, files: File[] = []): Promise<Accepted> {
    if (files.length > 0) {
      const form = new FormData();
      form.append("message", message);
      const token = sessionId ? this.continuation(sessionId) : undefined;
      if (token) form.append("continuationToken", token);
      if (!sessionId) form.append("title", message.slice(0, 60));
      for (const f of files) form.append("file", f, f.name);
      const accepted = await this.request<Accepted>("POST", sessionId ? `/v1/session/${sessionId}` : "/v1/session", form);
      this.remember(accepted.sessionId, accepted.continuationToken);
      return accepted;
    }
    const accepted = sessionId
      ? await this.request<Accepted>("POST", `/v1/session/${sessionId}`, {
          message,
          continuationToken: this.continuation(sessionId),
        })
      : await this.request<Accepted>("POST", "/v1/session", { message, title: message.slice(0, 60) });
    this.remember(accepted.sessionId, accepted.continuationToken);
    return accepted;
  }

  /** Forks `sessionId` before its event `atIndex`; `message` is sent in the fork at once. */
  async fork(sessionId: string, atIndex: number, message?: string): Promise<Forked> {
    const forked = await this.request<Forked>("POST", `/v1/session/${sessionId}/fork`, {
      atIndex,
      ...(message ? { message } : {}),
    });
    this.remember(forked.sessionId, forked.continuationToken);
    return forked;
  }

  stop(sessionId: string) {
    return this.request<{ interrupted: boolean }>("POST", `/v1/session/${sessionId}/stop`, {});
  }

  approvals(sessionId: string) {
    return this.request<{ approvals: PendingApproval[] }>("GET", `/v1/session/${sessionId}/approvals`).then(
      (d) => d.approvals,
    );
  }

  resolve(sessionId: string, callId: string, decision: "approve" | "deny", reason?: string) {
    return this.request("POST", `/v1/session/${sessionId}/approvals/${encodeURIComponent(callId)}`, {
      decision,
      ...(reason ? { reason } : {}),
    });
  }

  callTool(name: string, input: unknown, sessionId?: string) {
    return this.request("POST", `/v1/tools/${encodeURIComponent(name)}`, {
      input,
      ...(sessionId ? { sessionId } : {}),
    });
  }

  /** What the model was sent at one step (under --dev or to an operator). */
  stepContext(sessionId: string, turnId: string, step: number) {
    const q = `turnId=${encodeURIComponent(turnId)}&step=${step}`;
    return this.request<StepContext>("GET", `/v1/session/${sessionId}/context?${q}`);
  }

  /** The session's model steps, numbered from 1 (`GET /v1/session/:id/steps`). */
  steps(sessionId: string) {
    return this.request<{ steps: SessionStep[] }>("GET", `/v1/session/${sessionId}/steps`).then((d) => d.steps);
  }

  /** A step's provider request as it was sent, its tokens by part and the diff to the step before. */
  stepRequest(sessionId: string, step: number) {
    return this.request<StepRequest>("GET", `/v1/session/${sessionId}/steps/${step}/request`);
  }

  /** Recent host log lines about a session (`GET /v1/logs`, host-level). */
  logs(sessionId: string, limit = 200) {
    const q = `session=${encodeURIComponent(sessionId)}&limit=${limit}`;
    return this.request<{ logs: LogLine[] }>("GET", `/v1/logs?${q}`, undefined, true).then((d) => d.logs);
  }

  /** One page of artifacts: the agent's (as the caller sees them) or one session's. */
  async artifacts(sessionId?: string, cursor?: string, limit = PAGE): Promise<Page<Artifact>> {
    const path = `${sessionId ? `/v1/session/${sessionId}/artifacts` : "/v1/artifacts"}?limit=${limit}`;
    const page = await this.request<{ artifacts: Artifact[]; nextCursor?: string }>("GET", paged(path, cursor));
    return { items: page.artifacts, nextCursor: page.nextCursor };
  }

  /** One page of the memories the caller's sessions see (every one for an operator). */
  async memories(cursor?: string, limit = PAGE): Promise<Page<Memory>> {
    const page = await this.request<{ memories: Memory[]; nextCursor?: string }>(
      "GET",
      paged(`/v1/memory?limit=${limit}`, cursor),
    );
    return { items: page.memories, nextCursor: page.nextCursor };
  }

  editMemory(id: string, text: string) {
    return this.request<{ memory: Memory }>("PUT", `/v1/memory/${encodeURIComponent(id)}`, { text }).then((d) => d.memory);
  }

  deleteMemory(id: string) {
    return this.request("DELETE", `/v1/memory/${encodeURIComponent(id)}`);
  }

  /** One page of a session's workspace entries. */
  async files(sessionId: string, cursor?: string, limit = PAGE): Promise<Page<WorkspaceEntry>> {
    const page = await this.request<{ files: WorkspaceEntry[]; nextCursor?: string }>(
      "GET",
      paged(`/v1/session/${sessionId}/files?limit=${limit}`, cursor),
    );
    return { items: page.files, nextCursor: page.nextCursor };
  }

  /** Where a workspace file downloads from (the bearer token, if any, goes in a header: see `fileBlob`). */
  fileUrl(sessionId: string, path: string): string {
    return `${this.base}/v1/session/${sessionId}/files/${encodePath(path)}`;
  }

  /** A workspace file's bytes, fetched with the bearer token. */
  async fileBlob(sessionId: string, path: string): Promise<Blob> {
    let resp: Response;
    try {
      resp = await fetch(this.fileUrl(sessionId, path), { headers: this.headers(false) });
    } catch (e) {
      throw new ApiError(0, "network", `cannot reach the server: ${String(e)}`);
    }
    if (!resp.ok) throw await errorOf(resp);
    return resp.blob();
  }

  /** Writes `body` as the workspace file `path` (PUT …/files/*path). */
  async upload(sessionId: string, path: string, body: Blob): Promise<{ path: string; size: number }> {
    let resp: Response;
    try {
      resp = await fetch(this.fileUrl(sessionId, path), { method: "PUT", headers: this.headers(false), body });
    } catch (e) {
      throw new ApiError(0, "network", `cannot reach the server: ${String(e)}`);
    }
    if (!resp.ok) throw await errorOf(resp);
    return resp.json();
  }

  dispatchSchedule(id: string) {
    return this.request("POST", `/v1/dev/schedules/${encodeURIComponent(id)}`, {});
  }

  /** The continuation token this browser last received for the session. */
  continuation(sessionId: string): string | undefined {
    return tokensOf(this.base)[sessionId];
  }

  private remember(sessionId: string, token: string): void {
    try {
      const all = JSON.parse(localStorage.getItem(TOKENS_KEY) ?? "{}");
      all[this.base] = { ...(all[this.base] ?? {}), [sessionId]: token };
      localStorage.setItem(TOKENS_KEY, JSON.stringify(all));
    } catch {
      // storage disabled
    }
  }

  /**
   * Follows the session's stream from `startIndex` until `signal` aborts,
   * calling `onLines` with each batch of parsed lines. Resolves when the
   * server ends the stream; rejects on an error answer.
   */
  async follow(
    sessionId: string,
    startIndex: number,
    onLines: (lines: Line[]) => void,
    signal: AbortSignal,
  ): Promise<void> {
    const resp = await fetch(`${this.base}/v1/session/${sessionId}/stream?startIndex=${startIndex}&text=false`, {
      headers: this.headers(false),
      signal,
    });
    if (!resp.ok || !resp.body) throw await errorOf(resp);
    const splitter = new NdjsonSplitter();
    const reader = resp.body.getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      const lines = splitter.push(value);
      if (lines.length > 0) onLines(lines);
    }
    const rest = splitter.end();
    if (rest.length > 0) onLines(rest);
  }
}
