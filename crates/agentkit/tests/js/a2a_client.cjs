// The official A2A JavaScript SDK (@a2a-js/sdk) as a client of an
// agentkit agent. Usage: node a2a_client.cjs <agent base URL> <JSONRPC|HTTP+JSON>
// (with NODE_PATH naming the node_modules that hold the SDK).
//
// Resolves the agent card, then over the chosen binding: sends a message
// (blocking), streams a follow-up in the same context, answers an approval
// through input-required, starts a slow task (returnImmediately) and
// cancels it, gets the first task back, and provokes an unknown task.
// Prints what it saw as one JSON object.

const { ClientFactory, ClientFactoryOptions } = require("@a2a-js/sdk/client");
const { Role, TaskState } = require("@a2a-js/sdk");

function message(text, contextId = "", taskId = "") {
  return {
    messageId: crypto.randomUUID(),
    contextId,
    taskId,
    role: Role.ROLE_USER,
    parts: [{ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" }],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

function request(msg, configuration = undefined) {
  return { tenant: "", message: msg, configuration, metadata: undefined };
}

function summary(task) {
  const state = TaskState[task.status.state];
  const text = (parts) =>
    (parts || []).map((p) => (p.content && p.content.$case === "text" ? p.content.value : "")).join("");
  return {
    id: task.id,
    contextId: task.contextId,
    state,
    reply: task.artifacts.length ? text(task.artifacts[0].parts) : null,
    statusText: task.status.message ? text(task.status.message.parts) : null,
  };
}

async function main(base, binding) {
  const out = {};
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: [binding] }),
  );
  // The card URL in full: a base with a path would lose it to URL resolution.
  const client = await factory.createFromUrl(`${base}/.well-known/agent-card.json`, "");

  const first = await client.sendMessage(request(message("hello from node")));
  out.send = summary(first);
  const context = first.contextId;

  out.stream = [];
  for await (const event of client.sendMessageStream(request(message("stream please", context)))) {
    const p = event.payload;
    out.stream.push(p.$case === "statusUpdate" ? `statusUpdate:${TaskState[p.value.status.state]}` : p.$case);
  }

  const parked = await client.sendMessage(request(message("use the tool", context)));
  out.parked = summary(parked);
  out.approved = summary(await client.sendMessage(request(message("approve", context, parked.id))));

  const slow = await client.sendMessage(
    request(message("take your time", context), {
      acceptedOutputModes: [],
      taskPushNotificationConfig: undefined,
      historyLength: undefined,
      returnImmediately: true,
    }),
  );
  out.slow = summary(slow);
  out.canceled = summary(await client.cancelTask({ tenant: "", id: slow.id, metadata: undefined }));
  out.got = summary(await client.getTask({ tenant: "", id: first.id, historyLength: undefined }));
  try {
    await client.getTask({ tenant: "", id: "ses_nope.1", historyLength: undefined });
    out.unknownTask = null;
  } catch (e) {
    out.unknownTask = e.constructor.name;
  }
  console.log(JSON.stringify(out));
}

main(process.argv[2], process.argv[3]).catch((e) => {
  console.error(e);
  process.exit(1);
});
