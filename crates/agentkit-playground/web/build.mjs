// Builds the playground into ../dist, the folder the agentkit-playground
// crate embeds: `npm ci && npm run build` from this folder. The output is
// reproducible (esbuild, pinned by package-lock.json; content-hashed names)
// and records the hash of the sources it was built from in
// dist/source-hash.txt, which `cargo xtask tidy` recomputes: a change to
// the sources without a rebuild fails CI.

import { createHash } from "node:crypto";
import { cpSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, "..", "dist");

/** The files the bundle is built from; xtask/src/tidy.rs lists the same. */
export const SOURCES = ["build.mjs", "index.html", "package.json", "package-lock.json", "tsconfig.json", "public", "src"];

function walk(path, out) {
  if (statSync(path).isDirectory()) {
    for (const name of readdirSync(path).sort()) walk(join(path, name), out);
  } else {
    out.push(path);
  }
}

/**
 * sha256 over each source file in path order: its path relative to this
 * folder (with `/`), a newline, its length in bytes, a newline, its bytes.
 */
export function sourceHash() {
  const files = [];
  for (const s of SOURCES) walk(join(here, s), files);
  const rel = files.map((f) => relative(here, f).split("\\").join("/")).sort();
  const h = createHash("sha256");
  for (const r of rel) {
    const bytes = readFileSync(join(here, r));
    h.update(`${r}\n${bytes.length}\n`);
    h.update(bytes);
  }
  return h.digest("hex");
}

async function build() {
  rmSync(dist, { recursive: true, force: true });
  mkdirSync(join(dist, "assets"), { recursive: true });
  const result = await esbuild.build({
    absWorkingDir: here,
    entryPoints: { app: "src/app.tsx", docs: "src/docs.ts", style: "src/style.css" },
    outdir: join(dist, "assets"),
    entryNames: "[name]-[hash]",
    chunkNames: "chunk-[hash]",
    bundle: true,
    splitting: true,
    format: "esm",
    target: "es2022",
    minify: true,
    legalComments: "eof",
    jsx: "automatic",
    jsxImportSource: "preact",
    metafile: true,
    logLevel: "warning",
  });
  const outputs = Object.entries(result.metafile.outputs);
  const entry = (name) => {
    const found = outputs.find(([, o]) => o.entryPoint && o.entryPoint.includes(name));
    if (!found) throw new Error(`no output for ${name}`);
    return "/playground/assets/" + relative(join(dist, "assets"), join(here, found[0]));
  };
  const html = readFileSync(join(here, "index.html"), "utf8")
    .replace("%APP%", entry("src/app.tsx"))
    .replace("%STYLE%", entry("src/style.css"));
  writeFileSync(join(dist, "index.html"), html);
  cpSync(join(here, "public"), dist, { recursive: true });
  writeFileSync(join(dist, "source-hash.txt"), sourceHash() + "\n");
  let total = 0;
  for (const [path, o] of outputs) {
    total += o.bytes;
    console.log(`${relative(here, path)}  ${(o.bytes / 1024).toFixed(1)} KiB`);
  }
  console.log(`total ${(total / 1024).toFixed(1)} KiB`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await build();
}
