// A stand-in for the TypeScript framework's package, written by
// `agentkit migrate`. The `define*` functions, route builders and auth
// policies return what they were given, tagged with the function that made
// it, so the migration can read a project's real values and agentkit can
// run its `execute` bodies and route handlers.
export const KIND = Symbol.for("agentkit.kind");
export const ARGS = Symbol.for("agentkit.args");

function tagged(kind, args, value) {
  const target = value !== null && typeof value === "object" ? value : {};
  Object.defineProperty(target, KIND, { value: kind, enumerable: false });
  Object.defineProperty(target, ARGS, { value: args, enumerable: false });
  return target;
}

// A function of the original package this stand-in does not know: it
// records its call, so the migration can report it by name.
export function __stub(name) {
  const fn = (...args) => tagged(name, args, {});
  Object.defineProperty(fn, KIND, { value: `stub:${name}` });
  return fn;
}

// The stem of the file that called a define function (a channel's id, for
// `receive(channel, ...)`), read from the call stack.
function callerStem() {
  const frames = String(new Error().stack ?? "").split("\n");
  for (const frame of frames) {
    const m = frame.match(/(file:\/\/[^\s)]+?)(?::\d+)+\)?\s*$/);
    if (m && !m[1].includes("/july.mjs")) {
      const name = decodeURIComponent(m[1]).split("/").pop() ?? "";
      return name.replace(/\.[^.]*$/, "").replace(/\.(channel|tool|schedule)$/, "");
    }
  }
  return undefined;
}

const define = (kind) => (config) => {
  const value = tagged(kind, [config], config);
  const stem = callerStem();
  if (stem && value && typeof value === "object") Object.defineProperty(value, Symbol.for("agentkit.file"), { value: stem, enumerable: false });
  return value;
};

export const defineAgent = define("defineAgent");
export const defineInstructions = define("defineInstructions");
export const defineTool = define("defineTool");
export const defineSkill = define("defineSkill");
export const defineConnection = define("defineConnection");
export const defineChannel = define("defineChannel");
export const httpChannel = define("httpChannel");
export const defineHook = define("defineHook");
export const defineSchedule = define("defineSchedule");
export const defineEval = define("defineEval");
export const defineEvalConfig = define("defineEvalConfig");
export const defineAB = define("defineAB");
export const githubChannel = define("githubChannel");
export const gitlabChannel = define("gitlabChannel");
export const bitbucketChannel = define("bitbucketChannel");
export const slackChannel = define("slackChannel");

const route = (method) => (path, options = {}) => tagged(method, [path, options], { method, path, ...options });
export const GET = route("GET");
export const POST = route("POST");
export const PUT = route("PUT");
export const PATCH = route("PATCH");
export const DELETE = route("DELETE");

const policy = (kind) => (...args) => tagged(kind, args, {});
export const localDevStrict = policy("localDevStrict");
export const localDev = policy("localDev");
export const loopbackOnly = policy("loopbackOnly");
export const allowAll = policy("allowAll");
export const bearerAuth = policy("bearerAuth");
export const hmacAuth = policy("hmacAuth");
export const hmacSignature = policy("hmacSignature");

export const includes = (expected) => tagged("includes", [expected], {});
export const matches = (schema) => tagged("matches", [schema], {});
export const satisfies = (fn, label) => tagged("satisfies", [fn, label], {});
export const persistEvalRunsToDir = (dir) => tagged("persistEvalRunsToDir", [dir], {});

// The principal a GitHub delivery's actor gets, as agentkit's GitHub pack
// names it.
export const defaultGitHubAuth = (ctx) => ({
  principalId: `github:${ctx?.sender?.login ?? ctx?.payload?.sender?.login ?? "unknown"}`,
});

// The `prompt` template tag: plain interpolation.
export function prompt(strings, ...values) {
  return strings.reduce((out, s, i) => out + s + (i < values.length ? String(values[i]) : ""), "");
}

export default {};
