// TypeScript to JavaScript for the agentkit Node shim: the `typescript`
// package (found from the project, or a folder of config.json), else
// Node's own type stripping (Node 22.6 and later), else nothing.
import { createRequire } from "node:module";
import * as nodeModule from "node:module";
import { join } from "node:path";

export function makeTranspiler(projectRoot, nodeModules) {
  const bases = [];
  if (projectRoot) bases.push(join(projectRoot, "package.json"));
  for (const dir of nodeModules ?? []) bases.push(join(dir, "..", "package.json"));
  for (const base of bases) {
    try {
      const ts = createRequire(base)("typescript");
      return (source, file) =>
        ts.transpileModule(source, {
          fileName: file,
          compilerOptions: {
            module: ts.ModuleKind.ESNext,
            target: ts.ScriptTarget.ES2022,
            jsx: ts.JsxEmit.ReactJSX,
            esModuleInterop: true,
          },
        }).outputText;
    } catch {}
  }
  if (typeof nodeModule.stripTypeScriptTypes === "function") {
    return (source) => nodeModule.stripTypeScriptTypes(source, { mode: "transform" });
  }
  return null;
}
