// Drives an agentkit agent's AG-UI endpoint with the official client
// (`@ag-ui/client`'s HttpAgent).
//
// Usage: node agui_client.mjs MODULES_DIR BOT_URL GUARD_URL TOKEN
// Prints one JSON document of the events the client saw and the messages
// it kept; the Rust test (crates/agentkit/tests/suite/agui.rs) asserts on
// it.
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [, , modules, botUrl, guardUrl, token] = process.argv;
const { HttpAgent } = await import(
  pathToFileURL(join(modules, "node_modules/@ag-ui/client/dist/index.mjs")).href
);

function collector() {
  const events = [];
  return {
    events,
    subscriber: {
      onEvent({ event }) {
        const { timestamp, rawEvent, ...rest } = event;
        events.push(rest);
      },
    },
  };
}

function messages(list) {
  return list.map((m) => ({
    role: m.role,
    content: m.content ?? null,
    toolCalls: (m.toolCalls ?? []).map((t) => t.function.name),
  }));
}

async function run(agent, params) {
  const c = collector();
  const result = await agent.runAgent(params, c.subscriber);
  return { events: c.events, newMessages: messages(result.newMessages) };
}

const headers = { Authorization: `Bearer ${token}` };
const out = {};

const bot = new HttpAgent({ url: botUrl, headers, threadId: "thread-1" });
bot.addMessage({ id: "u1", role: "user", content: "hello over AG-UI" });
out.first = await run(bot, { runId: "run-1" });
bot.addMessage({ id: "u2", role: "user", content: "and again" });
out.second = await run(bot, { runId: "run-2" });

const guard = new HttpAgent({ url: guardUrl, headers, threadId: "thread-g" });
guard.addMessage({ id: "g1", role: "user", content: "please echo" });
out.interrupted = await run(guard, { runId: "run-g1" });
const finished = out.interrupted.events.find((e) => e.type === "RUN_FINISHED");
const interrupts = finished?.outcome?.interrupts ?? [];
out.resumed = await run(guard, {
  runId: "run-g2",
  resume: interrupts.map((i) => ({
    interruptId: i.id,
    status: "resolved",
    payload: { approved: true },
  })),
});
// A front-end tool: the run ends at its call, the client answers it
// with a tool message on the next run, and the turn goes on.
const front = new HttpAgent({ url: botUrl, headers, threadId: "thread-f" });
const pickCity = {
  name: "pick_city",
  description: "Ask the user to pick a city.",
  parameters: {
    type: "object",
    properties: { question: { type: "string" } },
    required: ["question"],
  },
};
front.addMessage({ id: "f1", role: "user", content: "which city?" });
out.frontCalled = await run(front, {
  runId: "run-f1",
  tools: [pickCity],
  context: [{ description: "page", value: "checkout" }],
});
const call = out.frontCalled.events.find(
  (e) => e.type === "TOOL_CALL_START" && e.toolCallName === "pick_city",
);
front.addMessage({ id: "f2", role: "tool", toolCallId: call.toolCallId, content: "Paris" });
out.frontAnswered = await run(front, { runId: "run-f2", tools: [pickCity] });
console.log(JSON.stringify(out));
