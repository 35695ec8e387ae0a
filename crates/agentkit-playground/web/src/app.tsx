// The playground: chat with live streaming, tool calls and approvals
// inline, an inbox of parked calls, the session list, and an inspector of
// the event log (events, raw NDJSON, trace). Everything goes through the
// agent's public HTTP API (api.ts).

import { render } from "preact";
import { useCallback, useEffect, useMemo, useRef, useState } from "preact/hooks";
import {
  Api,
  ApiError,
  bearerToken,
  setBearerToken,
  type Artifact,
  type Caller,
  type Memory,
  type Page,
  type PendingApproval,
  type SessionSummary,
  type WorkspaceEntry,
} from "./api";
import { appendPage, bytes, isImage, times, uploadPath } from "./kept";
import {
  compact,
  messageLine,
  sessionStepOf,
  shares,
  sizeLine,
  tokenBars,
  type StepContext,
  type StepRequest,
} from "./context";
import { levelClass, logText, type LogLine } from "./logs";
import { renderMarkdown } from "./markdown";
import { commandsOf, complete, helpText, parse as parseCommand } from "./commands";
import { curlOf, exampleOf, fillPath, pathParams, queryString } from "./schema";
import { filterGroups, groupOperations, schemaRows, typeOf, type Content, type Doc, type Operation } from "./openapi";
import {
  emptySession,
  failureText,
  fold,
  imagesOf,
  pendingApprovals,
  sumCost,
  sumUsage,
  turnDuration,
  usd,
  type Line,
  type Part,
  type SessionView,
  type ToolCall,
  type Turn,
  type Usage,
} from "./stream";

const meta = (name: string) => document.querySelector<HTMLMetaElement>(`meta[name="${name}"]`)?.content ?? "";
const BASE = meta("agentkit-base");
const SLUG = meta("agentkit-slug");
const DOCS = meta("agentkit-docs") || "/docs/";
const api = new Api(BASE);

const isLoopback = ["localhost", "127.0.0.1", "[::1]", "::1"].includes(location.hostname);

function json(v: unknown): string {
  if (typeof v === "string") return v;
  try {
    return JSON.stringify(v, null, 2);
  } catch {
    return String(v);
  }
}

function errorText(e: unknown): string {
  if (e instanceof ApiError) return `${e.code}: ${e.message}`;
  return String(e);
}

function seconds(ms: number | undefined): string {
  if (ms === undefined) return "";
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(2)} s`;
}

// ---------------------------------------------------------------------------
// The open session: its view model, raw lines, and the follower

interface Open {
  sessionId: string;
  view: SessionView;
  lines: Line[];
  abort: AbortController;
}

function useSession(onActivity: () => void) {
  const [open, setOpen] = useState<Open | null>(null);
  const [, setTick] = useState(0);
  const [streamError, setStreamError] = useState("");
  const current = useRef<Open | null>(null);

  const follow = useCallback(
    async (o: Open) => {
      let delay = 500;
      while (!o.abort.signal.aborted) {
        try {
          await api.follow(
            o.sessionId,
            o.view.lastIndex + 1,
            (lines) => {
              o.lines.push(...lines);
              fold(
                o.view,
                lines.map((l) => l.event),
              );
              setStreamError("");
              setTick((t) => t + 1);
              onActivity();
            },
            o.abort.signal,
          );
          delay = 500;
        } catch (e) {
          if (o.abort.signal.aborted) return;
          setStreamError(errorText(e));
          if (e instanceof ApiError && e.status >= 400 && e.status < 500 && e.status !== 408) return;
        }
        // The server ended the stream (shutdown, stall): resume after the
        // last index seen.
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 5000);
      }
    },
    [onActivity],
  );

  const openSession = useCallback(
    (sessionId: string | null) => {
      current.current?.abort.abort();
      setStreamError("");
      if (!sessionId) {
        current.current = null;
        setOpen(null);
        history.replaceState(null, "", location.pathname);
        return;
      }
      const o: Open = { sessionId, view: emptySession(), lines: [], abort: new AbortController() };
      current.current = o;
      setOpen(o);
      history.replaceState(null, "", `${location.pathname}#${sessionId}`);
      void follow(o);
    },
    [follow],
  );

  useEffect(() => () => current.current?.abort.abort(), []);
  return { open, openSession, streamError };
}

// ---------------------------------------------------------------------------
// Chat

function Markdown({ text }: { text: string }) {
  const html = useMemo(() => renderMarkdown(text), [text]);
  return <div class="md" dangerouslySetInnerHTML={{ __html: html }} />;
}

function UsageFooter({ turn }: { turn: Turn }) {
  const u: Usage | undefined = turn.usage;
  const d = turnDuration(turn);
  return (
    <div class={`usage ${turn.status}`} data-role="usage">
      {turn.status === "running" && <span class="badge running">running…</span>}
      {turn.status === "failed" && <span class="badge failed">{failureText(turn)}</span>}
      {turn.status === "completed" && <span class="badge ok">done</span>}
      {u && (
        <span>
          in {u.inputTokens} · out {u.outputTokens} · cache read {u.cacheReadTokens} · cache write {u.cacheWriteTokens}
        </span>
      )}
      {turn.costUsd !== undefined && (
        <span data-role="cost" title={turn.costUsd === null ? "the model has no price: see the pricing reference" : "what this turn cost"}>
          {usd(turn.costUsd)}
        </span>
      )}
      {d !== undefined && <span>{seconds(d)}</span>}
      {turn.resumes && <span>resumes {turn.resumes}</span>}
      {(turn.messages ?? 1) > 1 && <span>answers {turn.messages} messages (coalesced)</span>}
    </div>
  );
}

function Decide({ sessionId, call, onDone }: { sessionId: string; call: { callId: string }; onDone?: () => void }) {
  const [reason, setReason] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  const decide = async (decision: "approve" | "deny") => {
    setBusy(true);
    setError("");
    try {
      await api.resolve(sessionId, call.callId, decision, reason || undefined);
      onDone?.();
    } catch (e) {
      setError(errorText(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <div class="decide">
      <button class="approve" disabled={busy} onClick={() => decide("approve")}>
        Approve
      </button>
      <input
        class="reason"
        placeholder="reason (optional)"
        value={reason}
        onInput={(e) => setReason((e.target as HTMLInputElement).value)}
      />
      <button class="deny" disabled={busy} onClick={() => decide("deny")}>
        Deny
      </button>
      {error && <span class="error">{error}</span>}
    </div>
  );
}

function ToolCallCard({ call, sessionId }: { call: ToolCall; sessionId: string }) {
  const state = call.approval?.state === "pending" ? "parked" : call.isError ? "error" : call.status;
  // Images a tool returned are shown (the card opens for them).
  const images = call.status === "done" ? imagesOf(call.output) : [];
  return (
    <details
      class={`tool ${state}`}
      data-role="tool-call"
      data-tool={call.toolName}
      open={state === "parked" || images.length > 0}
    >
      <summary>
        <span class="tool-name">{call.toolName}</span>
        <span class={`badge ${state}`}>
          {state === "parked" ? "waiting for approval" : state === "running" ? "running…" : state === "error" ? "error" : "ok"}
        </span>
        {call.durationMs !== undefined && <span class="muted">{seconds(call.durationMs)}</span>}
        {call.approval && call.approval.state !== "pending" && (
          <span class="muted" data-role="decision">
            {call.approval.state === "approve" ? "approved" : "denied"}
            {call.approval.by ? ` by ${call.approval.by}` : ""}
            {call.approval.reason ? `: ${call.approval.reason}` : ""}
          </span>
        )}
      </summary>
      <div class="tool-body">
        <div class="label">input</div>
        <pre class="json">{json(call.input)}</pre>
        {call.status === "done" && (
          <>
            <div class="label">{call.isError ? "error" : "output"}</div>
            <pre class={`json ${call.isError ? "error" : ""}`} data-role="tool-output">
              {json(call.output)}
            </pre>
            {images.map((img) => (
              <FilePreview key={img.path} sessionId={sessionId} path={img.path} role="tool-image" />
            ))}
          </>
        )}
        {call.approval?.state === "pending" && <Decide sessionId={sessionId} call={call} />}
      </div>
    </details>
  );
}

function PartView({ part, sessionId }: { part: Part; sessionId: string }) {
  switch (part.kind) {
    case "text":
      return part.text ? (
        <div class="assistant" data-role="assistant" data-done={String(part.done)}>
          <Markdown text={part.text} />
        </div>
      ) : null;
    case "reasoning":
      return (
        <details class="reasoning" open={!part.done}>
          <summary>reasoning</summary>
          <div class="reasoning-text">{part.text}</div>
        </details>
      );
    case "tool":
      return <ToolCallCard call={part.call} sessionId={sessionId} />;
    case "subagent":
      return (
        <details class={`tool subagent ${part.isError ? "error" : part.done ? "done" : "running"}`}>
          <summary>
            <span class="tool-name">subagent {part.subagent}</span>
            <span class="badge">{part.done ? (part.isError ? "error" : "ok") : "running…"}</span>
          </summary>
          <div class="tool-body">
            <div class="label">prompt</div>
            <pre class="json">{part.prompt}</pre>
            {part.done && (
              <>
                <div class="label">result</div>
                <pre class="json">{json(part.result)}</pre>
              </>
            )}
          </div>
        </details>
      );
  }
}

function Transcript({ view, sessionId }: { view: SessionView; sessionId: string }) {
  return (
    <>
      {view.entries.map((e) =>
        e.kind === "user" ? (
          <div class="user" data-role="user" key={`u${e.index}`}>
            {e.text}
            {e.images?.map((img) => (
              <FilePreview key={img.path} sessionId={sessionId} path={img.path} role="message-image" />
            ))}
          </div>
        ) : (
          <div class="turn" key={e.turnId} data-role="turn" data-status={e.status}>
            {e.direct && <div class="muted">deterministic call</div>}
            {e.parts.map((p, i) => (
              <PartView part={p} sessionId={sessionId} key={i} />
            ))}
            <UsageFooter turn={e} />
          </div>
        ),
      )}
      <SessionTotal view={view} />
    </>
  );
}

/** The session's ended turns, summed: tokens and cost (what `GET /v1/session/:id` reports). */
function SessionTotal({ view }: { view: SessionView }) {
  const ended = view.entries.filter((e): e is Turn => e.kind === "turn" && e.status !== "running");
  if (ended.length === 0) return null;
  const u = sumUsage(ended);
  const cost = sumCost(ended);
  return (
    <div class="usage session-total" data-role="session-total">
      <span>
        session: {ended.length} turn{ended.length === 1 ? "" : "s"} · in {u.inputTokens} · out {u.outputTokens}
      </span>
      {cost !== undefined && <span data-role="session-cost">{usd(cost)}</span>}
    </div>
  );
}

function Chat({
  open,
  streamError,
  onSent,
  info,
}: {
  open: Open | null;
  streamError: string;
  onSent: (id: string) => void;
  info: Record<string, any> | null;
}) {
  const [text, setText] = useState("");
  // Answers of slash commands: shown here only, never part of the session.
  const [notes, setNotes] = useState<{ text: string; ok: boolean }[]>([]);
  const commands = useMemo(() => commandsOf(info), [info]);
  const completions = complete(commands, text);
  const [error, setError] = useState("");
  const [sending, setSending] = useState(false);
  const [attached, setAttached] = useState<File[]>([]);
  const scroller = useRef<HTMLDivElement>(null);
  const view = open?.view;
  const running = view?.state === "running";

  useEffect(() => {
    const el = scroller.current;
    if (el && el.scrollHeight - el.scrollTop - el.clientHeight < 160) el.scrollTop = el.scrollHeight;
  });

  const runCommand = async (message: string) => {
    const parsed = parseCommand(commands, message);
    if (parsed === "help") {
      setNotes((n) => [...n, { text: helpText(commands), ok: true }]);
    } else if (parsed && "error" in parsed) {
      setNotes((n) => [...n, { text: parsed.error, ok: false }]);
    } else if (parsed) {
      const headers: Record<string, string> = {};
      if (parsed.body !== undefined) headers["content-type"] = "application/json";
      const auth = remembered(`${parsed.command.method} ${parsed.command.url}`).auth;
      if (auth) headers.authorization = auth;
      try {
        const resp = await fetch(parsed.url, { method: parsed.command.method, headers, body: parsed.body });
        const body = await resp.text();
        let shown = body;
        try {
          shown = json(JSON.parse(body));
        } catch {
          // not JSON
        }
        setNotes((n) => [...n, { text: `${parsed.command.method} ${parsed.url} → ${resp.status}\n${shown}`, ok: resp.ok }]);
        // A route that sends into a session answers its id: open it.
        const id = (() => {
          try {
            return JSON.parse(body).sessionId;
          } catch {
            return undefined;
          }
        })();
        if (typeof id === "string" && !open) onSent(id);
      } catch (e) {
        setNotes((n) => [...n, { text: errorText(e), ok: false }]);
      }
    }
    setText("");
  };

  const send = async () => {
    const message = text.trim();
    if (!message) return;
    if (message.startsWith("/") && attached.length === 0) {
      await runCommand(message);
      return;
    }
    setSending(true);
    setError("");
    try {
      const accepted = await api.send(open?.sessionId, message, attached);
      setText("");
      setAttached([]);
      if (accepted.coalesced) setError("queued behind the running turn (coalesced)");
      onSent(accepted.sessionId);
    } catch (e) {
      setError(errorText(e));
    } finally {
      setSending(false);
    }
  };
  const stop = async () => {
    if (!open) return;
    try {
      await api.stop(open.sessionId);
    } catch (e) {
      setError(errorText(e));
    }
  };
  const missingToken = open && !api.continuation(open.sessionId);
  const attach = useRef<HTMLInputElement>(null);

  return (
    <section class="chat">
      <div class="transcript" ref={scroller}>
        {!open && (
          <div class="empty">
            <h2>{SLUG}</h2>
            <p>Send a message to start a session. Replies stream live; tool calls, approvals and usage show inline.</p>
          </div>
        )}
        {open && view && <Transcript view={view} sessionId={open.sessionId} />}
        {notes.map((n, i) => (
          <pre class={`note json ${n.ok ? "" : "error"}`} data-role="note" key={i}>
            {n.text}
          </pre>
        ))}
      </div>
      {completions.length > 0 && (
        <ul class="completions" data-role="completions">
          {completions.map((c) => (
            <li key={c.name}>
              <button type="button" class="link" onClick={() => setText(c.name.replace(/\/:[^/]+/g, "/"))}>
                <code>{c.name}</code>
              </button>{" "}
              <span class="muted">
                {c.method} {c.description}
              </span>
            </li>
          ))}
        </ul>
      )}
      {streamError && <div class="error banner">stream: {streamError}</div>}
      {error && <div class="error banner">{error}</div>}
      {missingToken && view && view.entries.length > 0 && (
        <div class="muted banner" data-role="token-note">
          {info?.caller?.operator
            ? "This browser holds no continuation token for this session (it was started elsewhere). As an operator you may still follow it up: the message goes without the token, does not rotate it, and is recorded as yours."
            : "This browser holds no continuation token for this session (it was started elsewhere): it can be inspected and its approvals decided, but not followed up from here."}
        </div>
      )}
      {attached.length > 0 && (
        <div class="attached" data-role="attached">
          {attached.map((f) => (
            <span class="badge" key={f.name} data-file={f.name}>
              {f.name} ({bytes(f.size)}){" "}
              <button
                type="button"
                class="link"
                title="remove"
                onClick={() => setAttached((had) => had.filter((x) => x !== f))}
              >
                ×
              </button>
            </span>
          ))}
        </div>
      )}
      <form
        class="composer"
        onSubmit={(e) => {
          e.preventDefault();
          void send();
        }}
      >
        <textarea
          name="message"
          rows={2}
          placeholder={open ? "Follow up… (/help for commands)" : "Message the agent… (/help for commands)"}
          value={text}
          onInput={(e) => setText((e.target as HTMLTextAreaElement).value)}
          onKeyDown={(e) => {
            if (e.key === "Tab" && completions.length > 0) {
              e.preventDefault();
              setText(completions[0].name.replace(/\/:[^/]+/g, "/"));
            } else if (e.key === "Enter" && !e.shiftKey) {
              e.preventDefault();
              void send();
            }
          }}
        />
        <div class="composer-buttons">
          <input
            type="file"
            name="attach"
            multiple
            hidden
            ref={attach}
            onChange={(e) => {
              const input = e.target as HTMLInputElement;
              const picked = Array.from(input.files ?? []);
              setAttached((had) => [...had.filter((f) => !picked.some((p) => p.name === f.name)), ...picked]);
              input.value = "";
            }}
          />
          <button
            type="button"
            data-role="attach"
            title="Attach files: written into the session's workspace with the message; images reach the model"
            onClick={() => attach.current?.click()}
          >
            Attach
          </button>
          <button type="submit" class="primary" disabled={sending || !text.trim()}>
            {running ? "Send (preempts)" : "Send"}
          </button>
          {running && (
            <button type="button" class="stop" onClick={stop}>
              Stop
            </button>
          )}
        </div>
      </form>
    </section>
  );
}

// ---------------------------------------------------------------------------
// Inspector: events, raw NDJSON, trace

function EventsPane({ lines, sessionId, onForked }: { lines: Line[]; sessionId: string; onForked: (id: string) => void }) {
  const [filter, setFilter] = useState("");
  const [opened, setOpened] = useState<number | null>(null);
  const [forkError, setForkError] = useState("");
  // Fork before `atIndex`, sending `message` in the fork when given; the
  // fork opens in the page. A cut inside a turn answers 409 naming the
  // nearest boundaries, shown as is.
  const fork = (atIndex: number, message?: string) => {
    setForkError("");
    api.fork(sessionId, atIndex, message).then(
      (f) => onForked(f.sessionId),
      (e) => setForkError(errorText(e)),
    );
  };
  const [saved, setSaved] = useState("");
  const [saveError, setSaveError] = useState("");
  // The session as an eval case of the project (`POST
  // /v1/dev/evals/cases`, under --dev), named at a prompt.
  const saveEval = () => {
    const name = window.prompt("Save this session as the eval case named:", "");
    if (!name) return;
    setSaved("");
    setSaveError("");
    api
      .request<{ caseFile: string; recordings: number; warnings: string[] }>("POST", "/v1/dev/evals/cases", {
        sessionId,
        name,
      })
      .then(
        (r) =>
          setSaved(
            `saved ${r.caseFile} (${r.recordings} recording(s))${r.warnings.length ? `; ${r.warnings.join("; ")}` : ""}`,
          ),
        (e) => setSaveError(errorText(e)),
      );
  };
  const shown = filter ? lines.filter((l) => l.event.type.includes(filter)) : lines;
  return (
    <div class="events">
      <div class="event-actions">
        <button class="link" data-role="save-eval" onClick={saveEval}>
          save as eval case
        </button>
        {saved && <span data-role="saved-eval">{saved}</span>}
        {saveError && (
          <span class="error" data-role="save-eval-error">
            {saveError}
          </span>
        )}
      </div>
      <input
        class="filter"
        placeholder="filter by type (turn., action.…)"
        value={filter}
        onInput={(e) => setFilter((e.target as HTMLInputElement).value)}
      />
      <ol class="event-list">
        {shown.map((l) => (
          <li key={l.event.index} data-type={l.event.type}>
            <button class="event-row" onClick={() => setOpened(opened === l.event.index ? null : l.event.index)}>
              <span class="idx">{l.event.index}</span>
              <span class="type">{l.event.type}</span>
              <span class="muted">{l.event.at.slice(11, 23)}</span>
            </button>
            {opened === l.event.index && (
              <>
                <div class="event-actions">
                  <button class="link" data-role="fork" onClick={() => fork(l.event.index + 1)}>
                    fork after this event
                  </button>
                  {l.event.type === "message.received" && (
                    <button
                      class="link"
                      data-role="edit-resend"
                      onClick={() => {
                        const text = window.prompt("Send instead, in a fork:", String((l.event.data as { text?: string }).text ?? ""));
                        if (text) fork(l.event.index, text);
                      }}
                    >
                      edit and resend
                    </button>
                  )}
                </div>
                {forkError && (
                  <div class="error" data-role="fork-error">
                    {forkError}
                  </div>
                )}
                <pre class="json">{json(l.event)}</pre>
              </>
            )}
          </li>
        ))}
      </ol>
    </div>
  );
}

/**
 * A step's provider request as it was sent (`GET …/steps/:step/request`):
 * its tokens by part as bars, the provider's counts, the diff to the
 * session's previous step, and the body itself.
 */
function StepRequestView({ sessionId, turnId, step }: { sessionId: string; turnId: string; step: number }) {
  const [req, setReq] = useState<StepRequest | null>(null);
  const [error, setError] = useState("");
  useEffect(() => {
    let live = true;
    (async () => {
      const n = sessionStepOf(await api.steps(sessionId), turnId, step);
      if (n === undefined) throw new Error(`step ${step} of ${turnId} is not among the session's steps`);
      return api.stepRequest(sessionId, n);
    })().then(
      (r) => live && setReq(r),
      (e: unknown) =>
        live &&
        setError(
          e instanceof ApiError && e.status === 403
            ? "a step's request shows the agent's instructions: it needs --dev or an operator"
            : errorText(e),
        ),
    );
    return () => {
      live = false;
    };
  }, [sessionId, turnId, step]);
  if (error) return <div class="error step-request">{error}</div>;
  if (!req) return <div class="muted step-request">loading…</div>;
  const t = req.tokens;
  const counted = [
    t.countedInput !== null ? `input ${t.countedInput}` : null,
    t.countedCacheRead !== null ? `cache read ${t.countedCacheRead}` : null,
    t.countedCacheWrite !== null ? `cache write ${t.countedCacheWrite}` : null,
  ].filter(Boolean);
  return (
    <div class="step-request" data-role="step-request" data-step={step}>
      <div class="muted">
        session step {req.step} · {req.model ?? "model unknown"}
        {req.costUsd !== undefined ? ` · ${usd(req.costUsd)}` : ""}
      </div>
      <div class="label">tokens (estimated ~{compact(t.estimatedTotal)}{t.trimmed ? ", older tool results trimmed" : ""})</div>
      <div class="token-bars" data-role="token-bars">
        {tokenBars(t).map((b) => (
          <div class="token-bar" key={b.part} data-part={b.part}>
            <span class="token-label">{b.label}</span>
            <span class="track">
              <span class="bar" style={{ left: "0%", width: `${b.pct}%` }} />
            </span>
            <span class="muted">{compact(b.tokens)}</span>
          </div>
        ))}
      </div>
      {counted.length > 0 && <div class="muted" data-role="counted">provider counted: {counted.join(" · ")}</div>}
      <div class="label">changes since the previous step</div>
      {req.diff === null ? (
        <div class="muted" data-role="diff">the session's first step</div>
      ) : req.diff.length === 0 ? (
        <div class="muted" data-role="diff">no change</div>
      ) : (
        <ul class="diff" data-role="diff">
          {req.diff.map((d, i) => (
            <li key={i} class={`diff-${d.op}`}>
              <code>{d.path}</code> {d.op}
              {d.before !== undefined && <pre class="json">- {d.before}</pre>}
              {d.after !== undefined && <pre class="json">+ {d.after}</pre>}
            </li>
          ))}
          {req.diffTruncated && <li class="muted">… more changes not shown</li>}
        </ul>
      )}
      <details data-role="request-body">
        <summary>request body</summary>
        {req.body === null ? (
          <p class="muted">An offline model (test, scripted) sends no provider request: the diff compares the conversations.</p>
        ) : (
          <pre class="json">{json(req.body)}</pre>
        )}
      </details>
    </div>
  );
}

/** What the model saw at one step: fetched when opened. */
function StepContextView({ sessionId, turnId, step }: { sessionId: string; turnId: string; step: number }) {
  const [ctx, setCtx] = useState<StepContext | null>(null);
  const [error, setError] = useState("");
  useEffect(() => {
    let live = true;
    api.stepContext(sessionId, turnId, step).then(
      (c) => live && setCtx(c),
      (e) => live && setError(errorText(e)),
    );
    return () => {
      live = false;
    };
  }, [sessionId, turnId, step]);
  if (error) return <div class="error" data-role="step-context-error">{error}</div>;
  if (!ctx) return <p class="muted">loading the step's context…</p>;
  const share = shares(ctx.size);
  return (
    <div class="step-context" data-role="step-context" data-step={step}>
      <div class="context-size" data-role="context-size">
        {sizeLine(ctx.size)} <span class="muted">(system {share.system}% · tools {share.tools}% · conversation {share.conversation}%)</span>
      </div>
      <details data-role="context-system">
        <summary>system prompt · {ctx.size.systemChars} chars</summary>
        <pre class="json">{ctx.system || "(empty)"}</pre>
      </details>
      <details data-role="context-tools">
        <summary>
          {ctx.tools.length} tools offered · {ctx.size.toolsChars} chars
        </summary>
        <ul>
          {ctx.tools.map((t) => (
            <li key={t.name} data-tool={t.name}>
              <code>{t.name}</code> <span class="muted">{t.description}</span>
            </li>
          ))}
        </ul>
      </details>
      <details open data-role="context-conversation">
        <summary>
          conversation · {ctx.size.messages} messages · {ctx.size.conversationChars} chars
        </summary>
        <ol class="context-messages">
          {ctx.conversation.map((m, i) => {
            const line = messageLine(m);
            return (
              <li key={i} data-role-name={m.role}>
                <span class="badge">{line.label}</span> <pre class="json">{line.text}</pre>
              </li>
            );
          })}
        </ol>
      </details>
    </div>
  );
}

function TracePane({ view, sessionId }: { view: SessionView; sessionId: string }) {
  const [opened, setOpened] = useState<string | null>(null);
  const turns = view.entries.filter((e): e is Turn => e.kind === "turn");
  if (turns.length === 0) return <p class="muted">No turns yet.</p>;
  return (
    <div class="trace">
      {turns.map((t) => {
        const total = turnDuration(t) ?? Math.max(1, Date.now() - Date.parse(t.startedAt));
        const start = Date.parse(t.startedAt);
        const bar = (at: string, ms: number | undefined) => {
          const left = Math.max(0, Math.min(100, ((Date.parse(at) - start) / total) * 100));
          const width = Math.max(0.5, Math.min(100 - left, ((ms ?? 0) / total) * 100));
          return <span class="bar" style={{ left: `${left}%`, width: `${width}%` }} />;
        };
        return (
          <div class="trace-turn" key={t.turnId}>
            <div class="trace-head">
              <code>{t.turnId}</code> <span class={`badge ${t.status}`}>{t.status}</span> {seconds(turnDuration(t))}
              {t.usage && (
                <span class="muted">
                  {" "}
                  · {t.usage.inputTokens} in / {t.usage.outputTokens} out
                </span>
              )}
              {t.costUsd !== undefined && <span class="muted"> · {usd(t.costUsd)}</span>}
            </div>
            {t.steps.map((s) => {
              const key = `${t.turnId}#${s.step}`;
              return (
                <div key={`s${s.step}`}>
                  <div class="trace-row">
                    <span class="trace-label">step {s.step}</span>
                    <span class="track">{bar(s.startedAt, s.durationMs)}</span>
                    <span class="muted">
                      {seconds(s.durationMs)} {s.finishReason ?? ""}{" "}
                      {s.costUsd !== undefined && (
                        <span data-role="step-cost" data-step={s.step}>
                          {usd(s.costUsd)}{" "}
                        </span>
                      )}
                      <button
                        class="link"
                        data-role="open-context"
                        data-step={s.step}
                        onClick={() => setOpened(opened === key ? null : key)}
                      >
                        {opened === key ? "hide context" : "context"}
                      </button>{" "}
                      <button
                        class="link"
                        data-role="open-request"
                        data-step={s.step}
                        onClick={() => setOpened(opened === `${key}/request` ? null : `${key}/request`)}
                      >
                        {opened === `${key}/request` ? "hide request" : "request"}
                      </button>
                    </span>
                  </div>
                  {opened === key && <StepContextView sessionId={sessionId} turnId={t.turnId} step={s.step} />}
                  {opened === `${key}/request` && <StepRequestView sessionId={sessionId} turnId={t.turnId} step={s.step} />}
                </div>
              );
            })}
            {t.parts.map((p) =>
              p.kind === "tool" ? (
                <div class="trace-row tool-row" key={p.call.callId}>
                  <span class="trace-label">⚙ {p.call.toolName}</span>
                  <span class="track">{bar(p.call.resolvedAt ?? p.call.requestedAt, p.call.durationMs)}</span>
                  <span class="muted">
                    {seconds(p.call.durationMs)}
                    {p.call.approval?.state === "pending" ? " · waiting for approval" : ""}
                    {p.call.resolvedAt
                      ? ` · ${p.call.approval?.state === "approve" ? "approved" : "denied"} after ${seconds(
                          Date.parse(p.call.resolvedAt) - Date.parse(p.call.requestedAt),
                        )}`
                      : ""}
                    {p.call.isError ? " · error" : ""}
                  </span>
                </div>
              ) : p.kind === "subagent" ? (
                <div class="trace-row" key={p.callId}>
                  <span class="trace-label">↳ {p.subagent}</span>
                  <span class="muted">{p.done ? (p.isError ? "error" : "done") : "running"}</span>
                </div>
              ) : null,
            )}
            {t.failure && <div class="error">{failureText(t)}</div>}
          </div>
        );
      })}
    </div>
  );
}

/** The host's recent log lines about the session (`GET /v1/logs`). */
function LogsPane({ sessionId }: { sessionId: string }) {
  const [lines, setLines] = useState<LogLine[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = useCallback(() => {
    setError(null);
    api.logs(sessionId).then(setLines, (e: unknown) => {
      const why =
        e instanceof ApiError && (e.status === 401 || e.status === 403)
          ? "the host's logs need the loopback caller or the operator token"
          : String(e instanceof Error ? e.message : e);
      setError(why);
    });
  }, [sessionId]);
  useEffect(load, [load]);
  return (
    <div class="logs" data-role="logs">
      <button onClick={load} data-role="logs-refresh">
        refresh
      </button>
      {error && <div class="error">{error}</div>}
      {lines && lines.length === 0 && <p class="muted">No log lines about this session in the host's recent logs.</p>}
      {lines && lines.length > 0 && (
        <pre class="raw">
          {lines.map((l, i) => (
            <div key={i} class={levelClass(l.level)} data-role="log-line">
              {logText(l)}
            </div>
          ))}
        </pre>
      )}
    </div>
  );
}

/** A listing followed page by page: the first page on mount, the next with `more`. */
function usePaged<T extends { id?: string; path?: string }>(load: (cursor?: string) => Promise<Page<T>>, version = 0) {
  const [items, setItems] = useState<T[] | null>(null);
  const [next, setNext] = useState<string | undefined>(undefined);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  // How many items are shown: a reload fetches as many pages again, so
  // that what was listed stays listed (an upload lands on a later page).
  const shown = useRef(0);
  // Reloads may overlap (a session tagging many artifacts at once): only
  // the latest one's answer is shown.
  const latest = useRef(0);
  const reload = useCallback(() => {
    const mine = ++latest.current;
    setError(null);
    setBusy(true);
    (async () => {
      let page = await load();
      let all = page.items;
      while (page.nextCursor && all.length < shown.current) {
        page = await load(page.nextCursor);
        all = appendPage(all, page.items);
      }
      if (mine !== latest.current) return;
      shown.current = all.length;
      setItems(all);
      setNext(page.nextCursor);
      setBusy(false);
    })().catch((e: unknown) => {
      if (mine !== latest.current) return;
      setError(errorText(e));
      setBusy(false);
    });
  }, [load]);
  useEffect(reload, [reload, version]);
  const more = () => {
    if (!next) return;
    setBusy(true);
    load(next).then(
      (page) => {
        setItems((listed) => {
          const all = appendPage(listed ?? [], page.items);
          shown.current = all.length;
          return all;
        });
        setNext(page.nextCursor);
        setBusy(false);
      },
      (e: unknown) => {
        setError(errorText(e));
        setBusy(false);
      },
    );
  };
  return { items, setItems, next, error, busy, reload, more };
}

function MoreButton({ next, busy, onMore }: { next?: string; busy: boolean; onMore: () => void }) {
  if (!next) return null;
  return (
    <button class="more" data-role="more" disabled={busy} onClick={onMore}>
      more
    </button>
  );
}

/** Artifacts (docs/reference/artifacts.md): one session's, or the agent's as the caller sees them. */
function ArtifactsPane({
  sessionId,
  onOpen,
  version,
}: {
  sessionId?: string;
  onOpen?: (id: string) => void;
  /** Changes when the session tags another: the list reloads. */
  version?: number;
}) {
  const load = useCallback((cursor?: string) => api.artifacts(sessionId, cursor), [sessionId]);
  const { items, next, error, busy, reload, more } = usePaged<Artifact>(load, version);
  return (
    <div class="kept" data-role="artifacts">
      <div class="kept-bar">
        <button onClick={reload} data-role="artifacts-refresh">
          refresh
        </button>
        {docsLink("artifacts", "artifacts reference")}
      </div>
      {error && <div class="error">{error}</div>}
      {items && items.length === 0 && (
        <p class="muted">{sessionId ? "This session has tagged no artifact." : "No artifact yet."}</p>
      )}
      {items && items.length > 0 && (
        <ul class="kept-list">
          {items.map((a) => (
            <li key={a.id} data-role="artifact" data-kind={a.kind} data-artifact={a.id}>
              <div class="kept-head">
                <span class="badge">{a.kind}</span>
                {a.key !== undefined && <code data-role="artifact-key">{a.key}</code>}
                <span class="spacer" />
                {!sessionId && onOpen && (
                  <button class="link" data-role="artifact-session" onClick={() => onOpen(a.sessionId)}>
                    {a.sessionId}
                  </button>
                )}
              </div>
              <pre class="json" data-role="artifact-data">
                {json(a.data)}
              </pre>
              <div class="muted small">{times(a.createdAt, a.updatedAt)}</div>
            </li>
          ))}
        </ul>
      )}
      <MoreButton next={next} busy={busy} onMore={more} />
    </div>
  );
}

function MemoryItem({
  memory,
  onOpen,
  onChanged,
  onDeleted,
}: {
  memory: Memory;
  onOpen: (id: string) => void;
  onChanged: (m: Memory) => void;
  onDeleted: () => void;
}) {
  const [editing, setEditing] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const save = async () => {
    if (editing === null) return;
    setBusy(true);
    setError(null);
    try {
      onChanged(await api.editMemory(memory.id, editing));
      setEditing(null);
    } catch (e) {
      setError(errorText(e));
    }
    setBusy(false);
  };
  const remove = async () => {
    if (!window.confirm(`Delete the memory "${memory.text.slice(0, 80)}"?`)) return;
    setBusy(true);
    setError(null);
    try {
      await api.deleteMemory(memory.id);
      onDeleted();
    } catch (e) {
      setError(errorText(e));
      setBusy(false);
    }
  };
  const prov = memory.provenance ?? {};
  return (
    <li data-role="memory" data-memory={memory.id} data-scope={memory.scope}>
      <div class="kept-head">
        <span class="badge">{memory.scope}</span>
        {prov.principal && <span class="muted">kept by {prov.principal}</span>}
        <span class="spacer" />
        {prov.sessionId && (
          <button class="link" data-role="memory-session" onClick={() => onOpen(prov.sessionId as string)}>
            {prov.sessionId}
            {prov.eventIndex !== undefined ? ` · event ${prov.eventIndex}` : ""}
          </button>
        )}
      </div>
      {editing === null ? (
        <p class="memory-text" data-role="memory-text">
          {memory.text}
        </p>
      ) : (
        <textarea
          name="memory-text"
          rows={3}
          value={editing}
          onInput={(e) => setEditing((e.target as HTMLTextAreaElement).value)}
        />
      )}
      <div class="kept-actions">
        {editing === null ? (
          <button data-role="memory-edit" disabled={busy} onClick={() => setEditing(memory.text)}>
            edit
          </button>
        ) : (
          <>
            <button data-role="memory-save" disabled={busy} onClick={() => void save()}>
              save
            </button>
            <button class="link" disabled={busy} onClick={() => setEditing(null)}>
              cancel
            </button>
          </>
        )}
        <button class="deny" data-role="memory-delete" disabled={busy} onClick={() => void remove()}>
          delete
        </button>
        <span class="spacer" />
        <span class="muted small">{times(memory.createdAt, memory.updatedAt)}</span>
      </div>
      {error && (
        <div class="error" data-role="memory-error">
          {error}
        </div>
      )}
    </li>
  );
}

/** Governed memories (docs/reference/memory.md): those the caller's sessions see; every one for an operator. */
function MemoryView({ onOpen }: { onOpen: (id: string) => void }) {
  const load = useCallback((cursor?: string) => api.memories(cursor), []);
  const { items, setItems, next, error, busy, reload, more } = usePaged<Memory>(load);
  return (
    <section class="page memory-view" data-role="memories">
      <h2>Memory</h2>
      <p class="muted">
        What the model kept with <code>remember</code>: its own principal's notes and the agent-wide ones (every note for
        an operator). Edit or delete them here; {docsLink("memory", "memory reference")}.
      </p>
      <div class="kept-bar">
        <button onClick={reload} data-role="memory-refresh">
          refresh
        </button>
      </div>
      {error && <div class="error">{error}</div>}
      {items && items.length === 0 && <p class="muted">No memory yet.</p>}
      {items && items.length > 0 && (
        <ul class="kept-list">
          {items.map((m) => (
            <MemoryItem
              key={m.id}
              memory={m}
              onOpen={onOpen}
              onChanged={(changed) => setItems((all) => (all ?? []).map((x) => (x.id === changed.id ? changed : x)))}
              onDeleted={() => setItems((all) => (all ?? []).filter((x) => x.id !== m.id))}
            />
          ))}
        </ul>
      )}
      <MoreButton next={next} busy={busy} onMore={more} />
    </section>
  );
}

/**
 * An image of the workspace: straight from its download URL, or, when a
 * bearer token is needed, fetched with it and shown as a `data:` URL (the
 * page's Content-Security-Policy allows `img-src 'self' data:`, not `blob:`).
 */
function FilePreview({ sessionId, path, role = "file-preview" }: { sessionId: string; path: string; role?: string }) {
  const token = bearerToken();
  const [src, setSrc] = useState<string | null>(token ? null : api.fileUrl(sessionId, path));
  useEffect(() => {
    if (!token) return;
    let live = true;
    api
      .fileBlob(sessionId, path)
      .then(
        (blob) =>
          new Promise<string>((resolve, reject) => {
            const reader = new FileReader();
            reader.onload = () => resolve(String(reader.result));
            reader.onerror = () => reject(reader.error);
            reader.readAsDataURL(blob);
          }),
      )
      .then(
        (url) => live && setSrc(url),
        () => live && setSrc(null),
      );
    return () => {
      live = false;
    };
  }, [sessionId, path, token]);
  return src ? <img class="file-preview" data-role={role} data-path={path} src={src} alt={path} title={path} loading="lazy" /> : null;
}

/** A download link: the URL itself, or (with a bearer token) a fetch saved from a blob. */
function DownloadLink({ sessionId, path }: { sessionId: string; path: string }) {
  const url = api.fileUrl(sessionId, path);
  const name = path.split("/").pop() ?? path;
  const [error, setError] = useState<string | null>(null);
  const withToken = async (e: MouseEvent) => {
    if (!bearerToken()) return;
    e.preventDefault();
    try {
      const blob = await api.fileBlob(sessionId, path);
      const a = document.createElement("a");
      a.href = URL.createObjectURL(blob);
      a.download = name;
      a.click();
      setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <>
      <a href={url} download={name} data-role="file-download" onClick={(e) => void withToken(e as MouseEvent)}>
        {path}
      </a>
      {error && <span class="error">{error}</span>}
    </>
  );
}

/** A session's workspace (docs/reference/files.md): listed, downloaded, images shown, files uploaded. */
function FilesPane({ sessionId, version }: { sessionId: string; /** Changes when a turn settles: the list reloads. */ version?: number }) {
  const load = useCallback((cursor?: string) => api.files(sessionId, cursor), [sessionId]);
  const { items, next, error, busy, reload, more } = usePaged<WorkspaceEntry>(load, version);
  const [folder, setFolder] = useState("");
  const [uploadNote, setUploadNote] = useState<{ text: string; ok: boolean } | null>(null);
  const fileInput = useRef<HTMLInputElement>(null);
  const upload = async () => {
    const files = Array.from(fileInput.current?.files ?? []);
    if (files.length === 0) {
      setUploadNote({ text: "choose a file first", ok: false });
      return;
    }
    const done: string[] = [];
    try {
      for (const f of files) {
        const written = await api.upload(sessionId, uploadPath(folder, f.name), f);
        done.push(`${written.path} (${bytes(written.size)})`);
      }
      setUploadNote({ text: `uploaded ${done.join(", ")}`, ok: true });
      if (fileInput.current) fileInput.current.value = "";
    } catch (e) {
      setUploadNote({ text: errorText(e), ok: false });
    }
    reload();
  };
  return (
    <div class="kept" data-role="files">
      <div class="kept-bar">
        <button onClick={reload} data-role="files-refresh">
          refresh
        </button>
        {docsLink("files", "files reference")}
      </div>
      <form
        class="upload"
        data-role="upload"
        onSubmit={(e) => {
          e.preventDefault();
          void upload();
        }}
      >
        <input type="file" name="file" multiple ref={fileInput} />
        <input
          name="folder"
          placeholder="folder (optional)"
          value={folder}
          onInput={(e) => setFolder((e.target as HTMLInputElement).value)}
        />
        <button type="submit">upload</button>
      </form>
      {uploadNote && (
        <div class={uploadNote.ok ? "muted" : "error"} data-role="upload-note">
          {uploadNote.text}
        </div>
      )}
      {error && <div class="error">{error}</div>}
      {items && items.length === 0 && <p class="muted">The workspace is empty.</p>}
      {items && items.length > 0 && (
        <ul class="kept-list files">
          {items.map((f) => (
            <li key={f.path} data-role="file" data-path={f.path} data-type={f.type}>
              <div class="kept-head">
                {f.type === "file" ? <DownloadLink sessionId={sessionId} path={f.path} /> : <code>{f.path}/</code>}
                <span class="spacer" />
                {f.type === "file" && <span class="muted small">{bytes(f.size)}</span>}
                {f.type === "symlink" && <span class="badge">link</span>}
              </div>
              {f.type === "file" && isImage(f.path) && <FilePreview sessionId={sessionId} path={f.path} />}
            </li>
          ))}
        </ul>
      )}
      <MoreButton next={next} busy={busy} onMore={more} />
    </div>
  );
}

/** How many of `lines` are events of one of `types`. */
function countOf(lines: Line[], types: string[]): number {
  return lines.reduce((n, l) => (types.includes(l.event.type) ? n + 1 : n), 0);
}

function Inspector({ open, onOpen }: { open: Open | null; onOpen: (id: string) => void }) {
  const [tab, setTab] = useState<"events" | "raw" | "trace" | "logs" | "artifacts" | "files">("events");
  return (
    <aside class="inspector">
      <nav class="tabs">
        {(["events", "raw", "trace", "logs", "artifacts", "files"] as const).map((t) => (
          <button class={tab === t ? "active" : ""} onClick={() => setTab(t)} data-tab={t}>
            {t === "raw" ? "raw NDJSON" : t}
          </button>
        ))}
      </nav>
      {!open && <p class="muted">Open or start a session to inspect its event log.</p>}
      {open && tab === "events" && <EventsPane lines={open.lines} sessionId={open.sessionId} onForked={onOpen} />}
      {open && tab === "raw" && (
        <pre class="raw" data-role="raw">
          {open.lines.map((l) => l.raw).join("\n")}
        </pre>
      )}
      {open && tab === "trace" && <TracePane view={open.view} sessionId={open.sessionId} />}
      {open && tab === "logs" && <LogsPane sessionId={open.sessionId} />}
      {open && tab === "artifacts" && (
        <ArtifactsPane key={open.sessionId} sessionId={open.sessionId} version={countOf(open.lines, ["artifact.tagged"])} />
      )}
      {open && tab === "files" && (
        <FilesPane
          key={open.sessionId}
          sessionId={open.sessionId}
          version={countOf(open.lines, ["turn.completed", "turn.failed"])}
        />
      )}
    </aside>
  );
}

// ---------------------------------------------------------------------------
// Sessions and the inbox

function SessionList({
  sessions,
  current,
  currentBusy,
  onOpen,
  onNew,
}: {
  sessions: SessionSummary[];
  current: string | undefined;
  /** The open session's state, from its live stream (fresher than the list). */
  currentBusy: boolean;
  onOpen: (id: string) => void;
  onNew: () => void;
}) {
  const [q, setQ] = useState("");
  const needle = q.trim().toLowerCase();
  const shown = needle
    ? sessions.filter((s) => s.sessionId.toLowerCase().includes(needle) || (s.title ?? "").toLowerCase().includes(needle))
    : sessions;
  return (
    <nav class="sessions">
      <button class="primary new" onClick={onNew}>
        New chat
      </button>
      <input class="filter" placeholder="search title or id" value={q} onInput={(e) => setQ((e.target as HTMLInputElement).value)} />
      <ul>
        {shown.map((s) => (
          <li key={s.sessionId}>
            <button
              class={`session ${s.sessionId === current ? "active" : ""}`}
              data-session={s.sessionId}
              onClick={() => onOpen(s.sessionId)}
            >
              <span class="title">{s.title || s.sessionId}</span>
              <span class="muted" data-owner={s.principalId}>
                {s.channel} · {s.mode} · {s.createdAt.slice(0, 16).replace("T", " ")}
                {s.principalId ? ` · ${s.principalId}` : ""}
                {typeof s.costUsd === "number" ? ` · ${usd(s.costUsd)}` : ""}
                {(s.sessionId === current ? currentBusy : s.busy) ? " · busy" : ""}
              </span>
            </button>
          </li>
        ))}
        {shown.length === 0 && <li class="muted">no sessions</li>}
      </ul>
    </nav>
  );
}

interface InboxItem extends PendingApproval {
  sessionId: string;
  title?: string;
}

/** Parked calls of the newest sessions (each session's approvals route; there is no host-wide one). */
const INBOX_SESSIONS = 50;

function Inbox({ sessions, onOpen, refresh }: { sessions: SessionSummary[]; onOpen: (id: string) => void; refresh: number }) {
  const [items, setItems] = useState<InboxItem[] | null>(null);
  const [error, setError] = useState("");
  const [again, setAgain] = useState(0);
  useEffect(() => {
    let live = true;
    const load = async () => {
      try {
        const lists = await Promise.all(
          sessions.slice(0, INBOX_SESSIONS).map(async (s) =>
            (await api.approvals(s.sessionId)).map((a) => ({ ...a, sessionId: s.sessionId, title: s.title })),
          ),
        );
        if (live) {
          setItems(lists.flat().sort((a, b) => a.requestedAt.localeCompare(b.requestedAt)));
          setError("");
        }
      } catch (e) {
        if (live) setError(errorText(e));
      }
    };
    void load();
    const timer = setInterval(load, 3000);
    return () => {
      live = false;
      clearInterval(timer);
    };
  }, [sessions, refresh, again]);
  return (
    <section class="page inbox">
      <h2>Inbox</h2>
      <p class="muted">Calls waiting for a decision, in any session of this agent.</p>
      {error && <div class="error">{error}</div>}
      {items && items.length === 0 && <p class="muted">Nothing waits for approval.</p>}
      {items?.map((a) => (
        <div class="inbox-item tool parked" key={a.callId} data-role="inbox-item">
          <div>
            <span class="tool-name">{a.toolName}</span> in{" "}
            <a href={`#${a.sessionId}`} onClick={(e) => (e.preventDefault(), onOpen(a.sessionId))}>
              {a.title || a.sessionId}
            </a>{" "}
            <span class="muted">
              {a.requestedAt.slice(0, 19).replace("T", " ")}
              {a.live ? "" : " · parked before a restart: deciding it resumes the session"}
            </span>
          </div>
          <pre class="json">{json(a.input)}</pre>
          <Decide sessionId={a.sessionId} call={a} onDone={() => setAgain((n) => n + 1)} />
        </div>
      ))}
    </section>
  );
}

// ---------------------------------------------------------------------------
// The agent's surface: tools, channels, schedules

function docsLink(page: string, label = "reference") {
  return (
    <a class="doclink" href={`${DOCS}reference/${page}`}>
      {label}
    </a>
  );
}

function needsApproval(tool: Record<string, any>): boolean {
  const n = tool.needsApproval;
  return Boolean(n && (typeof n === "object" ? n.mode && n.mode !== "never" : n));
}

function ToolForm({ tool }: { tool: Record<string, any> }) {
  const [input, setInput] = useState(() => json(exampleOf(tool.inputSchema)));
  const [out, setOut] = useState<string>("");
  const call = async () => {
    try {
      const parsed = JSON.parse(input || "{}");
      const answer = await api.callTool(tool.name, parsed);
      setOut(json(answer));
    } catch (e) {
      setOut(errorText(e));
    }
  };
  return (
    <details class="surface-item" data-tool={tool.name}>
      <summary>
        <code>{tool.name}</code> <span class="muted">{tool.description}</span>{" "}
        {tool.execution === "agent" && <span class="badge">agent tool</span>}
        {needsApproval(tool) && <span class="badge parked">needs approval</span>}
      </summary>
      <div class="label">input schema</div>
      <pre class="json">{json(tool.inputSchema ?? {})}</pre>
      {tool.execution !== "agent" && (
        <>
          <div class="label">call deterministically (POST /v1/tools/{tool.name}: no model turn, no approval gate)</div>
          <textarea rows={4} value={input} onInput={(e) => setInput((e.target as HTMLTextAreaElement).value)} />
          <button onClick={call}>Call</button>
          {out && <pre class="json" data-role="call-output">{out}</pre>}
        </>
      )}
    </details>
  );
}

/** The last body tried on each route, so a reload keeps it. */
const TRY_KEY = "agentkit.playground.try";

function remembered(route: string): { body?: string; query?: string; params?: Record<string, string>; auth?: string } {
  try {
    return JSON.parse(localStorage.getItem(TRY_KEY) ?? "{}")[route] ?? {};
  } catch {
    return {};
  }
}

function remember(route: string, value: object): void {
  try {
    const all = JSON.parse(localStorage.getItem(TRY_KEY) ?? "{}");
    all[route] = value;
    localStorage.setItem(TRY_KEY, JSON.stringify(all));
  } catch {
    // storage disabled
  }
}

/** A form built from a channel route's schemas: path parameters, query, body; the answer and the equivalent curl. */
function RouteTry({ route }: { route: Record<string, any> }) {
  const key = `${route.method} ${route.url}`;
  const saved = remembered(key);
  const names = pathParams(route.path ?? route.url);
  const [params, setParams] = useState<Record<string, string>>(
    saved.params ?? Object.fromEntries(names.map((n) => [n, "example"])),
  );
  const [query, setQuery] = useState(saved.query ?? (route.querySchema ? json(exampleOf(route.querySchema)) : ""));
  const [body, setBody] = useState(saved.body ?? (route.bodySchema ? json(exampleOf(route.bodySchema)) : ""));
  const [auth, setAuth] = useState(saved.auth ?? "");
  const [out, setOut] = useState("");
  const hasBody = route.method !== "GET" && route.method !== "HEAD";
  const request = () => {
    const q = query.trim() ? queryString(JSON.parse(query)) : "";
    const url = fillPath(route.url, params) + q;
    const headers: Record<string, string> = {};
    if (hasBody) headers["content-type"] = "application/json";
    if (auth.trim()) headers.authorization = auth.trim();
    const sent = hasBody ? (body.trim() ? JSON.stringify(JSON.parse(body)) : "{}") : undefined;
    return { url, headers, sent };
  };
  let curl = "";
  try {
    const r = request();
    curl = curlOf(route.method, location.origin + r.url, r.headers, r.sent);
  } catch {
    curl = "(the query or body is not valid JSON)";
  }
  const send = async () => {
    try {
      const r = request();
      remember(key, { params, query, body, auth });
      const resp = await fetch(r.url, { method: route.method, headers: r.headers, body: r.sent });
      const text = await resp.text();
      let shown = text;
      try {
        shown = json(JSON.parse(text));
      } catch {
        // not JSON: as sent
      }
      setOut(`${resp.status} ${resp.statusText}\n${shown}`);
    } catch (e) {
      setOut(errorText(e));
    }
  };
  return (
    <div class="route" data-route={key}>
      <div>
        <code>
          {route.method} {route.path}
        </code>{" "}
        <span class="muted">{route.description ?? ""}</span>
      </div>
      {names.map((n) => (
        <label class="field" key={n}>
          <span>:{n}</span>
          <input
            name={`param-${n}`}
            value={params[n] ?? ""}
            onInput={(e) => setParams({ ...params, [n]: (e.target as HTMLInputElement).value })}
          />
        </label>
      ))}
      {route.querySchema && (
        <>
          <div class="label">query (JSON object)</div>
          <textarea name="query" rows={2} value={query} onInput={(e) => setQuery((e.target as HTMLTextAreaElement).value)} />
        </>
      )}
      {hasBody && (
        <>
          <div class="label">body (JSON)</div>
          <textarea name="body" rows={4} value={body} onInput={(e) => setBody((e.target as HTMLTextAreaElement).value)} />
        </>
      )}
      <label class="field">
        <span>Authorization</span>
        <input
          name="authorization"
          placeholder="the channel's own auth, e.g. Bearer …"
          value={auth}
          onInput={(e) => setAuth((e.target as HTMLInputElement).value)}
        />
      </label>
      <button class="try" onClick={send}>
        Try
      </button>
      <pre class="json muted" data-role="curl">
        {curl}
      </pre>
      {out && (
        <pre class="json" data-role="try-output">
          {out}
        </pre>
      )}
    </div>
  );
}

function Reminders() {
  const [list, setList] = useState<any[] | null>(null);
  const [out, setOut] = useState("");
  const load = useCallback(() => {
    api.request<{ reminders: any[] }>("GET", "/v1/dev/reminders").then(
      (d) => setList(d.reminders),
      (e) => setOut(errorText(e)),
    );
  }, []);
  useEffect(load, [load]);
  const fire = async (id: string) => {
    try {
      setOut(json(await api.request("POST", `/v1/dev/reminders/${encodeURIComponent(id)}`, {})));
    } catch (e) {
      setOut(errorText(e));
    }
    load();
  };
  return (
    <>
      {list && list.length === 0 && <p class="muted">no reminders</p>}
      {list?.map((r) => (
        <div class="surface-item" key={r.id}>
          <code>{r.id}</code>{" "}
          <span class="muted">
            {r.purpose ?? ""} · {r.status} · next {r.nextFireAt ?? "—"} · fired {r.fireCount}
          </span>{" "}
          {r.status === "armed" && <button onClick={() => fire(r.id)}>Fire now</button>}
        </div>
      ))}
      {out && <pre class="json">{out}</pre>}
    </>
  );
}

/** Eval runs on the server (the dev routes): start one, watch it, open a case's session. */
function Evals({ cases, onOpen }: { cases: number; onOpen: (id: string) => void }) {
  const [runs, setRuns] = useState<any[]>([]);
  const [shown, setShown] = useState<any | null>(null);
  const [out, setOut] = useState("");
  const load = useCallback(() => {
    api.request<{ runs: any[] }>("GET", "/v1/dev/evals").then(
      (d) => setRuns(d.runs ?? []),
      (e) => setOut(errorText(e)),
    );
  }, []);
  useEffect(load, [load]);
  // Poll while a run is in flight.
  useEffect(() => {
    if (!runs.some((r) => r.status === "running")) return;
    const timer = setTimeout(load, 500);
    return () => clearTimeout(timer);
  }, [runs, load]);
  const start = async () => {
    try {
      await api.request("POST", "/v1/dev/evals", {});
      setOut("");
    } catch (e) {
      setOut(errorText(e));
    }
    load();
  };
  const show = async (id: string) => {
    try {
      setShown(await api.request("GET", `/v1/dev/evals/${encodeURIComponent(id)}`));
    } catch (e) {
      setOut(errorText(e));
    }
  };
  return (
    <div data-role="evals">
      <p class="muted">
        {cases} case(s).{" "}
        <button data-role="run-evals" disabled={cases === 0} onClick={start}>
          Run evals
        </button>
      </p>
      {runs.map((r) => (
        <div class="surface-item" key={r.runId} data-run={r.runId} data-status={r.status}>
          <code>{r.runId}</code>{" "}
          <span class="muted">
            {r.status}
            {r.summary ? ` · ${r.summary.passed}/${r.summary.cases} passed` : ""} · {r.startedAt}
          </span>{" "}
          {r.status === "completed" && <button onClick={() => show(r.runId)}>Show</button>}
        </div>
      ))}
      {shown?.report && (
        <table data-role="eval-report">
          <thead>
            <tr>
              <th>case</th>
              <th>outcome</th>
              <th>pass rate</th>
              <th>sessions</th>
            </tr>
          </thead>
          <tbody>
            {(shown.report.cases ?? []).map((c: any) => (
              <tr key={c.id} data-case={c.id} data-outcome={c.outcome}>
                <td>
                  <code>{c.id}</code>
                </td>
                <td>{c.outcome}</td>
                <td>{Math.round((c.passRate ?? 0) * 100)}%</td>
                <td>
                  {(c.runs ?? [])
                    .filter((r: any) => r.sessionId)
                    .map((r: any) => (
                      <button key={r.sessionId} class="link" onClick={() => onOpen(r.sessionId)}>
                        #{r.iteration}
                      </button>
                    ))}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {out && <pre class="json">{out}</pre>}
    </div>
  );
}

function Surface({
  info,
  dev,
  onOpen,
}: {
  info: Record<string, any> | null;
  dev: boolean;
  onOpen: (id: string) => void;
}) {
  const [dispatched, setDispatched] = useState<Record<string, string>>({});
  if (!info) return <section class="page">loading…</section>;
  const agent = info.project?.agent ?? {};
  const tools: any[] = agent.tools ?? [];
  const skills: any[] = agent.skills ?? [];
  const subagents: any[] = agent.subagents ?? [];
  const connections: any[] = agent.mcpConnections ?? [];
  const hooks: any[] = agent.hooks ?? [];
  const channels: any[] = info.channels ?? [];
  const schedules: any[] = info.schedules ?? [];
  const evals: any[] = (info.project?.evals?.files ?? []).flatMap((f: any) => f.cases ?? []);
  const dispatch = async (id: string) => {
    try {
      const answer = await api.dispatchSchedule(id);
      setDispatched((d) => ({ ...d, [id]: json(answer) }));
    } catch (e) {
      setDispatched((d) => ({ ...d, [id]: errorText(e) }));
    }
  };
  return (
    <section class="page surface">
      <h2>
        {info.slug} <span class="muted">{agent.config?.description ?? ""}</span>
      </h2>
      <h3>Tools {docsLink("tools")}</h3>
      {tools.length === 0 && <p class="muted">no tools</p>}
      {tools.map((t) => (
        <ToolForm tool={t} key={t.name} />
      ))}
      <h3>Skills {docsLink("skills")}</h3>
      {skills.length === 0 && <p class="muted">no skills</p>}
      <ul>
        {skills.map((s) => (
          <li key={s.name}>
            <code>{s.name}</code> <span class="muted">{s.description}</span>
          </li>
        ))}
      </ul>
      <h3>Subagents {docsLink("subagents")}</h3>
      {subagents.length === 0 && <p class="muted">no subagents</p>}
      <ul>
        {subagents.map((s) => (
          <li key={s.id}>
            <code>{s.id}</code> <span class="muted">{s.description ?? ""}</span>
          </li>
        ))}
      </ul>
      <h3>MCP {docsLink("mcp-server", "server")} {docsLink("mcp-connections", "connections")}</h3>
      <p>
        This agent's MCP server: <code>{info.mcp?.path}</code> <span class="muted">({(info.mcp?.tools ?? []).join(", ")})</span>
      </p>
      {connections.length === 0 && <p class="muted">no MCP connections</p>}
      {connections.length > 0 && <pre class="json">{json(info.mcp?.connections?.length ? info.mcp.connections : connections)}</pre>}
      <h3>Channels {docsLink("channels")}</h3>
      {channels.length === 0 && <p class="muted">no custom channels</p>}
      {channels.map((c) => (
        <details class="surface-item" key={c.id} data-channel={c.id}>
          <summary>
            <code>{c.id}</code> <span class="muted">{c.kind ?? ""} · {c.url}</span>
          </summary>
          {(c.routes ?? []).map((r: any) => (
            <RouteTry route={r} key={`${r.method} ${r.url}`} />
          ))}
        </details>
      ))}
      <h3>Hooks {docsLink("hooks")}</h3>
      {hooks.length === 0 ? <p class="muted">no hooks</p> : <pre class="json">{json(info.hooks ?? hooks)}</pre>}
      <h3>Schedules {docsLink("schedules")}</h3>
      {schedules.length === 0 && <p class="muted">no schedules</p>}
      {schedules.map((s) => (
        <div class="surface-item" key={s.id} data-schedule={s.id}>
          <code>{s.id}</code> <span class="muted">{s.cron} · next {s.nextFireAt ?? "—"}</span>{" "}
          {dev ? (
            <button onClick={() => dispatch(s.id)}>Dispatch</button>
          ) : (
            <span class="muted">(dispatch needs --dev)</span>
          )}
          {dispatched[s.id] && <pre class="json">{dispatched[s.id]}</pre>}
        </div>
      ))}
      <h3>Reminders {docsLink("reminders")}</h3>
      {dev ? <Reminders /> : <p class="muted">Listing and firing reminders needs --dev.</p>}
      <h3>Evals {docsLink("evals")}</h3>
      {dev ? (
        <Evals cases={evals.length} onOpen={onOpen} />
      ) : (
        <p class="muted" data-role="evals">
          {evals.length} case(s). Running them from here needs --dev (or run <code>agentkit eval</code>).
        </p>
      )}
    </section>
  );
}

// ---------------------------------------------------------------------------
// The shell

function TokenField({ onChange }: { onChange: () => void }) {
  const [value, setValue] = useState(bearerToken());
  return (
    <form
      class="token"
      onSubmit={(e) => {
        e.preventDefault();
        setBearerToken(value.trim());
        onChange();
      }}
    >
      <input
        type="password"
        name="bearer"
        autocomplete="off"
        placeholder="bearer token"
        value={value}
        onInput={(e) => setValue((e.target as HTMLInputElement).value)}
      />
      <button type="submit">Use</button>
    </form>
  );
}

/** Who the page acts as; an operator sees and acts on every session of the agent. */
function CallerBadge({ caller }: { caller?: Caller }) {
  if (!caller) return null;
  return caller.operator ? (
    <span
      class="badge operator"
      data-role="caller"
      data-operator="true"
      title="operator: every session of this agent is listed and actionable, whoever owns it"
    >
      operator · {caller.principalId}
    </span>
  ) : (
    <span class="muted" data-role="caller" data-operator="false" title={`admitted by ${caller.authenticator}`}>
      {caller.principalId}
    </span>
  );
}

/** A schema as a table of its fields (nested ones indented), or its type when it has none. */
function SchemaTable({ doc, schema, role }: { doc: Doc; schema: Record<string, any>; role: string }) {
  const rows = useMemo(() => schemaRows(doc, schema), [doc, schema]);
  if (rows.length === 0) {
    return (
      <p class="muted" data-role={role}>
        <code>{typeOf(doc, schema)}</code>
      </p>
    );
  }
  return (
    <table class="api-schema" data-role={role} data-schema={typeOf(doc, schema)}>
      <tbody>
        {rows.map((r, i) => (
          <tr key={i} data-field={r.name}>
            <td style={{ paddingLeft: `${r.depth * 16 + 4}px` }}>
              <code>{r.name}</code>
              {r.required && <span class="required" title="required">*</span>}
            </td>
            <td>
              <code>{r.type}</code>
            </td>
            <td class="muted">{r.description}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function ContentList({ doc, content, role }: { doc: Doc; content: Content[]; role: string }) {
  return (
    <>
      {content.map((c) => (
        <div key={c.mediaType} data-media={c.mediaType}>
          <span class="muted">{c.mediaType}</span> <code>{typeOf(doc, c.schema)}</code>
          <SchemaTable doc={doc} schema={c.schema} role={role} />
        </div>
      ))}
    </>
  );
}

function OperationItem({ doc, op }: { doc: Doc; op: Operation }) {
  return (
    <details class="surface-item api-op" data-op={`${op.method} ${op.path}`}>
      <summary>
        <span class={`method method-${op.method.toLowerCase()}`}>{op.method}</span> <code>{op.path}</code>{" "}
        <span class="muted">{op.summary}</span>
      </summary>
      {op.params.length > 0 && (
        <>
          <h4>Parameters</h4>
          <table class="api-schema" data-role="op-params">
            <tbody>
              {op.params.map((p) => (
                <tr key={`${p.in}:${p.name}`} data-param={p.name}>
                  <td>
                    <code>{p.name}</code>
                    {p.required && <span class="required" title="required">*</span>}
                  </td>
                  <td class="muted">{p.in}</td>
                  <td>
                    <code>{p.type}</code>
                  </td>
                  <td class="muted">{p.description}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
      {op.body.length > 0 && (
        <>
          <h4>Request body{op.bodyRequired ? "" : " (optional)"}</h4>
          <ContentList doc={doc} content={op.body} role="op-body" />
        </>
      )}
      <h4>Answers</h4>
      {op.answers.map((a) => (
        <div key={a.status} data-role="op-answer" data-status={a.status}>
          <strong>{a.status}</strong> <span class="muted">{a.description}</span>
          <ContentList doc={doc} content={a.content} role="op-answer-schema" />
        </div>
      ))}
    </details>
  );
}

/** The agent's OpenAPI document (`GET /v1/openapi.json`), browsable: operations by tag, their parameters and schemas. */
function ApiView() {
  const [doc, setDoc] = useState<Doc | null>(null);
  const [error, setError] = useState("");
  const [filter, setFilter] = useState("");
  useEffect(() => {
    api.request<Doc>("GET", "/v1/openapi.json").then(setDoc, (e) => setError(errorText(e)));
  }, []);
  const groups = useMemo(() => (doc ? groupOperations(doc) : []), [doc]);
  const shown = useMemo(() => filterGroups(groups, filter), [groups, filter]);
  return (
    <section class="page api-view" data-role="openapi">
      <h2>API</h2>
      <p class="muted">
        The agent's HTTP API as its OpenAPI 3.1 document describes it (<a href={`${BASE}/v1/openapi.json`}>openapi.json</a>
        {doc ? `, ${doc.info?.title ?? ""} ${doc.info?.version ?? ""}` : ""}), its channels' routes included;{" "}
        {docsLink("http-api", "HTTP API reference")}.
      </p>
      <div class="kept-bar">
        <input
          name="api-filter"
          placeholder="filter: a path, a method, a tag"
          value={filter}
          onInput={(e) => setFilter((e.target as HTMLInputElement).value)}
        />
      </div>
      {error && <div class="error">{error}</div>}
      {doc &&
        shown.map((g) => (
          <section key={g.tag} class="api-group" data-tag={g.tag}>
            <h3>{g.tag}</h3>
            {g.operations.map((op) => (
              <OperationItem key={`${op.method} ${op.path}`} doc={doc} op={op} />
            ))}
          </section>
        ))}
    </section>
  );
}

type View = "chat" | "inbox" | "artifacts" | "memory" | "agent" | "api";

function App() {
  const [view, setView] = useState<View>("chat");
  const [sessions, setSessions] = useState<SessionSummary[]>([]);
  const [info, setInfo] = useState<Record<string, any> | null>(null);
  const [dev, setDev] = useState(false);
  const [authError, setAuthError] = useState("");
  const [showToken, setShowToken] = useState(!isLoopback || bearerToken() !== "");
  const [reload, setReload] = useState(0);
  const refreshTimer = useRef<number | undefined>(undefined);

  const loadSessions = useCallback(async () => {
    try {
      setSessions(await api.sessions());
      setAuthError("");
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) {
        setShowToken(true);
        setAuthError("401 unauthorized: this host needs a bearer token");
      } else setAuthError(errorText(e));
    }
  }, []);

  // Stream activity refreshes the list (busy flags, new sessions) once the
  // stream has been quiet for a moment.
  const onActivity = useCallback(() => {
    window.clearTimeout(refreshTimer.current);
    refreshTimer.current = window.setTimeout(() => void loadSessions(), 400);
  }, [loadSessions]);
  const { open, openSession, streamError } = useSession(onActivity);

  useEffect(() => {
    void loadSessions();
    api.info().then(setInfo, () => setInfo(null));
    // Dev routes answer only under --dev.
    api.request("GET", "/v1/dev/reminders").then(
      () => setDev(true),
      () => setDev(false),
    );
  }, [reload, loadSessions]);

  useEffect(() => {
    const id = location.hash.slice(1);
    if (/^[A-Za-z0-9_-]{1,128}$/.test(id)) openSession(id);
  }, [openSession]);

  const pending = open ? pendingApprovals(open.view).length : 0;

  return (
    <div class="app">
      <header>
        <a class="brand" href="/">
          agentkit
        </a>
        <span class="slug">{SLUG}</span>
        <nav class="views">
          {(["chat", "inbox", "artifacts", "memory", "agent", "api"] as const).map((v) => (
            <button class={view === v ? "active" : ""} onClick={() => setView(v)} data-view={v}>
              {v}
              {v === "chat" && pending > 0 ? <span class="count">{pending}</span> : null}
            </button>
          ))}
        </nav>
        <span class="spacer" />
        {dev && <span class="badge">dev</span>}
        <CallerBadge caller={info?.caller} />
        <a href={DOCS}>docs</a>
        {showToken ? (
          <TokenField onChange={() => setReload((n) => n + 1)} />
        ) : (
          <button class="link" onClick={() => setShowToken(true)}>
            token
          </button>
        )}
      </header>
      {authError && <div class="error banner">{authError}</div>}
      <main class={`view-${view}`}>
        <SessionList
          sessions={sessions}
          current={open?.sessionId}
          currentBusy={open?.view.state === "running"}
          onOpen={(id) => {
            setView("chat");
            openSession(id);
          }}
          onNew={() => {
            setView("chat");
            openSession(null);
          }}
        />
        {view === "chat" && (
          <>
            <Chat
              info={info}
              open={open}
              streamError={streamError}
              onSent={(id) => {
                if (open?.sessionId !== id) openSession(id);
                void loadSessions();
              }}
            />
            <Inspector
              open={open}
              onOpen={(id) => {
                openSession(id);
                void loadSessions();
              }}
            />
          </>
        )}
        {view === "inbox" && (
          <Inbox
            sessions={sessions}
            refresh={reload}
            onOpen={(id) => {
              setView("chat");
              openSession(id);
            }}
          />
        )}
        {view === "artifacts" && (
          <section class="page" data-role="agent-artifacts">
            <h2>Artifacts</h2>
            <p class="muted">
              What the agent tagged, newest first: the artifacts of the caller's sessions (every one for an operator).
            </p>
            <ArtifactsPane
              onOpen={(id) => {
                setView("chat");
                openSession(id);
              }}
            />
          </section>
        )}
        {view === "memory" && (
          <MemoryView
            onOpen={(id) => {
              setView("chat");
              openSession(id);
            }}
          />
        )}
        {view === "api" && <ApiView />}
        {view === "agent" && (
          <Surface
            info={info}
            dev={dev}
            onOpen={(id) => {
              setView("chat");
              openSession(id);
            }}
          />
        )}
      </main>
    </div>
  );
}

const root = document.getElementById("app");
if (root) render(<App />, root);
