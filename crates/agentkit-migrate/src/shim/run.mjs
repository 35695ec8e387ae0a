// Runs a part of a migrated project under Node for agentkit, talking to
// agentkit through the host bridge (AGENTKIT_HOST_URL, AGENTKIT_HOST_TOKEN):
//
//   node --import ./register.mjs ./run.mjs tool <module>
//       a server tool: the input on stdin, `execute(input, ctx)`'s result on stdout
//   node --import ./register.mjs ./run.mjs route <module> <METHOD> <path>
//       a route handler: agentkit's handler request on stdin, {status, headers, body} on stdout
//   node --import ./register.mjs ./run.mjs schedule <module>
//       a schedule's `run(...)`
//   node --import ./register.mjs ./run.mjs hook <module>
//       a hook: the event on stdin, its handler in `events` (or "*") called
import { isAbsolute, join } from "node:path";
import { pathToFileURL } from "node:url";

const [mode, target, ...rest] = process.argv.slice(2);

function enc(key) {
  return encodeURIComponent(key).replace(/%3A/g, ":");
}

async function bridge(method, path, body) {
  const base = process.env.AGENTKIT_HOST_URL;
  const token = process.env.AGENTKIT_HOST_TOKEN;
  if (!base || !token) throw new Error("the host bridge is not available (AGENTKIT_HOST_URL is not set)");
  const res = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(60_000),
  });
  const answer = await res.json().catch(() => ({}));
  if (!res.ok) {
    const error = new Error(`host bridge ${method} ${path}: ${res.status} ${answer?.error?.message ?? ""}`.trim());
    error.status = res.status;
    error.code = answer?.error?.code;
    throw error;
  }
  return answer;
}

const host = {
  mcp: {
    names: async () => (await bridge("GET", "/v1/mcp")).names,
    listTools: async (name) => (await bridge("GET", `/v1/mcp/${enc(name)}/tools`)).tools,
    callTool: async (name, tool, args) =>
      (await bridge("POST", `/v1/mcp/${enc(name)}/tools/${enc(tool)}`, { arguments: args ?? {} })).result,
  },
  kv: {
    async get(key) {
      try {
        return (await bridge("GET", `/v1/kv/${enc(key)}`)).entry.value;
      } catch (e) {
        if (e.status === 404) return undefined;
        throw e;
      }
    },
    async put(key, value, options) {
      const ttl = options?.ttlSeconds ?? (options?.ttlMs ? Math.ceil(options.ttlMs / 1000) : undefined);
      await bridge("PUT", `/v1/kv/${enc(key)}`, ttl ? { value, ttlSeconds: ttl } : { value });
    },
    async set(key, value, options) {
      return host.kv.put(key, value, options);
    },
    async delete(key) {
      return (await bridge("DELETE", `/v1/kv/${enc(key)}`)).deleted;
    },
    async list(prefix = "") {
      return (await bridge("GET", `/v1/kv?prefix=${encodeURIComponent(prefix)}`)).entries;
    },
  },
  github: {
    request: async (method, path, body, options) =>
      (await bridge("POST", "/v1/github", { method, path, body, channel: options?.channel })).result,
  },
  slack: {
    call: async (method, body, options) => (await bridge("POST", "/v1/slack", { method, body, channel: options?.channel })).result,
  },
  reminders: {
    create: async (reminder) => (await bridge("POST", "/v1/reminders", reminder)).reminder,
    cancel: async (id) => (await bridge("DELETE", `/v1/reminders/${enc(id)}`)).reminder,
    list: async () => (await bridge("GET", "/v1/reminders")).reminders,
  },
};

async function callTool(name, input) {
  const r = await bridge("POST", `/v1/tools/${enc(name)}`, { input: input ?? {} });
  return { toolName: r.toolName, callId: r.callId, isError: r.isError, result: r.result, durationMs: r.durationMs };
}

function channelId(channel, fallback) {
  if (typeof channel === "string") return channel;
  const file = channel?.[Symbol.for("agentkit.file")];
  return file ?? fallback;
}

function sendInto(channel) {
  return async (message, options = {}) => {
    const r = await bridge("POST", "/v1/send", {
      message,
      channel,
      continuation: options.continuationToken ?? options.continuation,
      admission: options.admission,
      title: options.title,
      purpose: options.purpose,
      workspaceFiles: options.workspaceFiles,
      dryRun: options.dryRun,
    });
    return { id: r.sessionId, sessionId: r.sessionId, continuationToken: r.continuationToken, isNew: r.isNew, coalesced: r.coalesced };
  };
}

async function getSession(id) {
  try {
    return (await bridge("GET", `/v1/sessions/${enc(id)}`)).session;
  } catch (e) {
    if (e.status === 404) return null;
    throw e;
  }
}

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString("utf8");
  return text.trim() ? JSON.parse(text) : {};
}

async function load(file) {
  const path = isAbsolute(file) ? file : join(process.cwd(), file);
  const mod = await import(pathToFileURL(path).href);
  return mod.default;
}

function print(value) {
  process.stdout.write(typeof value === "string" ? value : JSON.stringify(value ?? null));
}

async function runTool() {
  const input = await readStdin();
  const tool = await load(target);
  if (typeof tool?.execute !== "function") throw new Error(`${target} exports no execute function`);
  const ctx = {
    toolCallId: process.env.AGENTKIT_TOOL_CALL_ID,
    workspaceDir: process.env.AGENTKIT_WORKSPACE_DIR,
    session: {
      id: process.env.AGENTKIT_SESSION_ID,
      channelId: process.env.AGENTKIT_CHANNEL_ID,
      continuationKey: process.env.AGENTKIT_CONTINUATION_KEY,
      purpose: process.env.AGENTKIT_PURPOSE,
      dryRun: false,
    },
    host,
    callTool,
    signal: AbortSignal.timeout(24 * 3600 * 1000),
  };
  try {
    const result = await tool.execute(input, ctx);
    print(result === undefined ? null : result);
  } catch (e) {
    print({ content: [{ type: "text", text: String(e?.message ?? e) }], isError: true });
  }
}

async function runRoute() {
  const [method, path] = rest;
  const request = await readStdin();
  const channel = await load(target);
  const routes = channel?.routes ?? [];
  const route = routes.find((r) => r?.method === method && r?.path === path);
  if (!route || typeof route.handler !== "function") throw new Error(`${target} has no ${method} ${path} route with a handler`);
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(request.query ?? {})) query.set(k, String(v));
  const url = `http://agentkit.local/v1/channels/${request.channel}${request.path}${query.size ? "?" + query : ""}`;
  const hasBody = !["GET", "HEAD"].includes(method);
  const req = new Request(url, {
    method,
    headers: request.headers ?? {},
    body: hasBody ? JSON.stringify(request.body ?? {}) : undefined,
  });
  const pending = [];
  const args = {
    body: request.body,
    query: request.query,
    params: request.params ?? {},
    auth: request.principal,
    requestIp: "127.0.0.1",
    host,
    callTool,
    send: sendInto(request.channel),
    receive: (ch, options = {}) => sendInto(channelId(ch, request.channel))(options.message, options),
    getSession,
    waitUntil: (p) => pending.push(Promise.resolve(p).catch((e) => console.error(e))),
    channel: { id: request.channel, state: request.state ?? {} },
    state: request.state ?? {},
  };
  const response = await route.handler(req, args);
  await Promise.all(pending);
  if (!(response instanceof Response)) {
    print(response ?? { status: 204 });
    return;
  }
  const text = await response.text();
  let body = text;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {}
  const headers = {};
  for (const [k, v] of response.headers) if (k !== "content-type" && k !== "content-length") headers[k] = v;
  print({ status: response.status, headers, body });
}

async function runSchedule() {
  const schedule = await load(target);
  if (typeof schedule?.run !== "function") throw new Error(`${target} exports no run function`);
  const pending = [];
  const sessions = [];
  const receive = async (ch, options = {}) => {
    const sent = await sendInto(channelId(ch, "http"))(options.message, options);
    sessions.push(sent.id);
    return sent;
  };
  await schedule.run({
    receive,
    callTool,
    host,
    mcp: host.mcp,
    appAuth: { principalId: "schedule", principalType: "app" },
    waitUntil: (p) => pending.push(Promise.resolve(p)),
  });
  await Promise.all(pending);
  print({ ok: true, sessionIds: sessions });
}

async function runHook() {
  const event = await readStdin();
  const hook = await load(target);
  const events = hook?.events ?? {};
  const handler = events[event.type] ?? events["*"];
  if (typeof handler !== "function") return;
  const ctx = {
    session: { id: event.sessionId, purpose: undefined },
    host,
    callTool,
    logger: console,
  };
  await handler.call(events, event, ctx);
}

try {
  if (mode === "tool") await runTool();
  else if (mode === "hook") await runHook();
  else if (mode === "route") await runRoute();
  else if (mode === "schedule") await runSchedule();
  else throw new Error(`unknown mode ${mode}; expected tool, route or schedule`);
} catch (e) {
  console.error(String(e?.stack ?? e));
  process.exitCode = 1;
}
