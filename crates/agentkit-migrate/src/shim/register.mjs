// Registers the agentkit Node shim's module hooks (hooks.mjs) with the
// settings in config.json beside this file.
import { readFileSync } from "node:fs";
import { register } from "node:module";
import { dirname, isAbsolute, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
let config = {};
try {
  config = JSON.parse(readFileSync(join(here, "config.json"), "utf8"));
} catch {}
const abs = (p) => (isAbsolute(p) ? p : join(here, p));
const data = {
  nodeModules: (config.nodeModules ?? []).map(abs),
  projectRoot: config.projectRoot ? abs(config.projectRoot) : null,
  compiledDir: config.compiledDir ? abs(config.compiledDir) : null,
  extract: process.env.AGENTKIT_SHIM_EXTRACT === "1",
};
globalThis.__agentkitShim = data;
register("./hooks.mjs", import.meta.url, { data });
