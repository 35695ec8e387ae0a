// Reads the real values of a project's modules for `agentkit migrate`:
// imports each file named on the command line (under register.mjs's
// hooks) and prints one JSON line per file with its default export, zod
// schemas converted by zod's own JSON Schema converter.
//
// Environment variables read while loading answer `${NAME}`, never their
// values, so no secret of the migrating machine lands in the output.
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { pathToFileURL } from "node:url";
import { makeTranspiler } from "./transpile.mjs";

// First, with AGENTKIT_SHIM_COMPILE set: every TypeScript file of the
// project compiled to JavaScript under the shim's compiled/ folder, so the
// migrated project runs on a Node without a TypeScript loader.
const shim = globalThis.__agentkitShim ?? {};
if (process.env.AGENTKIT_SHIM_COMPILE === "1" && shim.projectRoot && shim.compiledDir) {
  const transpile = makeTranspiler(shim.projectRoot, shim.nodeModules);
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== "node_modules" && !entry.name.startsWith(".")) walk(path);
      } else if (/\.(ts|mts|tsx)$/.test(entry.name) && !entry.name.endsWith(".d.ts") && transpile) {
        try {
          const out = join(shim.compiledDir, relative(shim.projectRoot, path) + ".js");
          mkdirSync(dirname(out), { recursive: true });
          writeFileSync(out, transpile(readFileSync(path, "utf8"), path));
        } catch (e) {
          process.stderr.write(`cannot compile ${path}: ${e?.message ?? e}\n`);
        }
      }
    }
  };
  walk(shim.projectRoot);
}

const KIND = Symbol.for("agentkit.kind");
const ARGS = Symbol.for("agentkit.args");
const KEEP = new Set(["PATH", "HOME", "TMPDIR", "LANG", "NODE_OPTIONS", "NODE_DEBUG", "NODE_V8_COVERAGE", "FORCE_COLOR", "NO_COLOR", "TERM"]);
const realEnv = process.env;
process.env = new Proxy(realEnv, {
  get(target, key) {
    if (typeof key !== "string") return target[key];
    if (KEEP.has(key)) return target[key];
    return `\${${key}}`;
  },
  has: () => true,
});

let zod;
async function converter() {
  if (zod !== undefined) return zod;
  zod = null;
  try {
    const mod = await import("zod");
    const z = mod.z ?? mod.default ?? mod;
    if (typeof z.toJSONSchema === "function") zod = (s) => z.toJSONSchema(s, { target: "draft-2020-12", io: "input", unrepresentable: "any" });
    else if (typeof mod.toJSONSchema === "function") zod = (s) => mod.toJSONSchema(s, { target: "draft-2020-12", io: "input", unrepresentable: "any" });
  } catch {}
  if (!zod) {
    try {
      const mod = await import("zod-to-json-schema");
      const f = mod.zodToJsonSchema ?? mod.default;
      zod = (s) => f(s, { target: "jsonSchema2019-09", $refStrategy: "none" });
    } catch {}
  }
  return zod;
}

function isZod(v) {
  return v !== null && typeof v === "object" && (("_zod" in v && typeof v.safeParse === "function") || ("_def" in v && typeof v.safeParse === "function"));
}

async function ser(v, depth = 0) {
  if (depth > 64) return { $code: "(too deep)" };
  if (v === undefined) return undefined;
  if (v === null || typeof v === "boolean" || typeof v === "string") return v;
  if (typeof v === "number") return Number.isFinite(v) ? v : { $code: String(v) };
  if (typeof v === "bigint") return Number(v);
  if (typeof v === "symbol") return { $code: String(v) };
  if (typeof v === "function") {
    if (typeof v[KIND] === "string" && v[KIND].startsWith("stub:")) return { $code: v[KIND].slice(5) };
    return { $function: String(v) };
  }
  if (v instanceof RegExp) return { $regex: v.source, flags: v.flags };
  if (v instanceof Date) return v.toISOString();
  if (isZod(v)) {
    const convert = await converter();
    if (!convert) return { $code: "a zod schema (zod's JSON Schema converter was not found)" };
    try {
      const schema = convert(v);
      delete schema.$schema;
      return { $schema: schema };
    } catch (e) {
      return { $code: `a zod schema that does not convert to JSON Schema: ${e?.message ?? e}` };
    }
  }
  if (v[KIND] && Array.isArray(v[ARGS]) && !String(v[KIND]).startsWith("define") && !/Channel$/.test(v[KIND])) {
    const args = [];
    for (const a of v[ARGS]) args.push((await ser(a, depth + 1)) ?? null);
    return { $call: v[KIND], args };
  }
  if (Array.isArray(v)) {
    const out = [];
    for (const item of v) out.push((await ser(item, depth + 1)) ?? null);
    return out;
  }
  if (v instanceof Map) return ser(Object.fromEntries(v), depth + 1);
  if (v instanceof Set) return ser([...v], depth + 1);
  const out = {};
  for (const key of Object.keys(v)) {
    const s = await ser(v[key], depth + 1);
    if (s !== undefined) out[key] = s;
  }
  if (v[KIND]) return { $call: v[KIND], args: [out] };
  return out;
}

for (const file of process.argv.slice(2)) {
  try {
    const mod = await import(pathToFileURL(file).href);
    const value = await ser(mod.default);
    process.stdout.write(JSON.stringify({ file, value: value ?? null }) + "\n");
  } catch (e) {
    const message = String(e?.message ?? e).split("\n")[0];
    process.stdout.write(JSON.stringify({ file, error: message }) + "\n");
  }
}
