// Module hooks of the agentkit Node shim (written by `agentkit migrate`).
//
// - `@cursor/july` (and `@cursor/bdk`, `@grok/agent-sdk`), with any subpath,
//   resolve to july.mjs, a small stand-in for the original package: its
//   `define*` functions return their argument, tagged with what defined it.
// - TypeScript files load through the `typescript` package (from the
//   project, or a folder named in config.json) or Node's own type
//   stripping; `./x.js` finds `./x.ts`, and `./x` finds `./x.ts`.
// - A package the importing file cannot see (zod in a copied project) is
//   looked up in the project's folder, then in config.json's folders.
import { readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { makeTranspiler } from "./transpile.mjs";

const FRAMEWORK = /^(@cursor\/july|@cursor\/bdk|@grok\/agent-sdk)(\/.*)?$/;
const JULY = new URL("./july.mjs", import.meta.url).href;
let config = { nodeModules: [], projectRoot: null, compiledDir: null, extract: false };
let transpiler;

export async function initialize(data) {
  config = { ...config, ...(data ?? {}) };
}

function parents() {
  const out = [];
  if (config.projectRoot) out.push(pathToFileURL(join(config.projectRoot, "package.json")).href);
  for (const dir of config.nodeModules) out.push(pathToFileURL(join(dir, "..", "package.json")).href);
  return out;
}

export async function resolve(specifier, context, next) {
  if (FRAMEWORK.test(specifier)) {
    const names = importedNames(context.parentURL, specifier);
    return { url: `${JULY}?names=${encodeURIComponent(names.join(","))}`, shortCircuit: true };
  }
  try {
    return await next(specifier, context);
  } catch (error) {
    if (error?.code !== "ERR_MODULE_NOT_FOUND" && error?.code !== "ERR_UNSUPPORTED_DIR_IMPORT") throw error;
    if (specifier.startsWith(".") || specifier.startsWith("/") || specifier.startsWith("file:")) {
      const candidates = specifier.endsWith(".js")
        ? [specifier.slice(0, -3) + ".ts", specifier.slice(0, -3) + ".tsx"]
        : specifier.endsWith(".mjs")
          ? [specifier.slice(0, -4) + ".mts"]
          : [specifier + ".js", specifier + ".ts", specifier + "/index.js", specifier + "/index.ts"];
      for (const candidate of candidates) {
        try {
          return await next(candidate, context);
        } catch {}
      }
      throw error;
    }
    for (const parentURL of parents()) {
      try {
        return await next(specifier, { ...context, parentURL });
      } catch {}
    }
    throw error;
  }
}

// The names a module imports from the framework, so july.mjs can answer
// each (a name the stand-in does not define becomes a tagged stub).
function importedNames(parentURL, specifier) {
  if (!parentURL?.startsWith("file:")) return [];
  let source;
  try {
    source = readFileSync(fileURLToPath(parentURL), "utf8");
  } catch {
    return [];
  }
  const names = new Set();
  const escaped = specifier.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
  const re = new RegExp(`import\\s+(?:type\\s+)?(?:[\\w$]+\\s*,\\s*)?\\{([^}]*)\\}\\s*from\\s*["']${escaped}["']`, "g");
  for (const m of source.matchAll(re)) {
    for (const part of m[1].split(",")) {
      const name = part.trim().replace(/^type\s+/, "").split(/\s+as\s+/)[0].trim();
      if (/^[A-Za-z_$][\w$]*$/.test(name)) names.add(name);
    }
  }
  return [...names];
}

function loadTranspiler() {
  if (transpiler === undefined) transpiler = makeTranspiler(config.projectRoot, config.nodeModules);
  return transpiler;
}

// The JavaScript `agentkit migrate` compiled from a project file, for a
// machine whose Node cannot load TypeScript itself.
// It is used while it is at least as new as its source.
function compiled(file) {
  if (!config.projectRoot || !config.compiledDir || config.extract) return null;
  const rel = relative(config.projectRoot, file);
  if (rel.startsWith("..")) return null;
  const out = join(config.compiledDir, rel + ".js");
  try {
    if (statSync(out).mtimeMs < statSync(file).mtimeMs) return null;
    return readFileSync(out, "utf8");
  } catch {
    return null;
  }
}

// `process.env.X ?? "d"` keeps its default as `${X:-d}` when the migration
// reads a module's values (environment reads answer `${X}` then).
function keepEnvDefaults(source) {
  return source.replace(
    /process\.env\.([A-Za-z_][A-Za-z0-9_]*)\s*(?:\?\?|\|\|)\s*(?:"([^"\\\n]*)"|'([^'\\\n]*)')/g,
    (_, name, a, b) => JSON.stringify(`\${${name}:-${a ?? b}}`),
  );
}

export async function load(url, context, next) {
  if (url.startsWith(JULY + "?")) {
    const names = decodeURIComponent(new URL(url).searchParams.get("names") ?? "")
      .split(",")
      .filter(Boolean);
    const lines = [`import * as S from ${JSON.stringify(JULY)};`, "export * from " + JSON.stringify(JULY) + ";"];
    for (const name of names) {
      lines.push(`const __${name} = S[${JSON.stringify(name)}] ?? S.__stub(${JSON.stringify(name)});`);
      lines.push(`export { __${name} as ${name} };`);
    }
    return { format: "module", source: lines.join("\n"), shortCircuit: true };
  }
  if (/\.(ts|mts|tsx|cts)$/.test(new URL(url).pathname) && url.startsWith("file:")) {
    const file = fileURLToPath(url);
    const js = compiled(file);
    if (js !== null) return { format: "module", source: js, shortCircuit: true };
    let source = readFileSync(file, "utf8");
    if (config.extract) source = keepEnvDefaults(source);
    const transpile = loadTranspiler();
    if (!transpile) {
      throw new Error(
        `cannot load TypeScript file ${file}: install the typescript package (npm install typescript) or use Node 22.6 or later`,
      );
    }
    return { format: "module", source: transpile(source, file), shortCircuit: true };
  }
  if (
    config.extract &&
    config.projectRoot &&
    url.startsWith(pathToFileURL(config.projectRoot).href + "/") &&
    /\.(js|mjs)$/.test(url) &&
    !url.includes("/node_modules/")
  ) {
    const source = keepEnvDefaults(readFileSync(fileURLToPath(url), "utf8"));
    return { format: "module", source, shortCircuit: true };
  }
  return next(url, context);
}

