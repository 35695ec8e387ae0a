// Slash commands of the composer: one per custom channel route (from
// `/v1/info`), named `/<channel><route path>`, plus `/help`. Typing
// `/alerts/alert/Oslo {"condition": "hail", "severity": "watch"}` calls
// `POST …/v1/channels/alerts/alert/Oslo` with that body; for a GET route
// the JSON object is the query.

import { fillPath, queryString } from "./schema";

export interface Command {
  name: string;
  method: string;
  /** The route's URL path with its `:name` segments. */
  url: string;
  description: string;
  takesBody: boolean;
}

export interface Invocation {
  command: Command;
  url: string;
  body?: string;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function commandsOf(info: Record<string, any> | null): Command[] {
  const out: Command[] = [];
  for (const c of info?.channels ?? []) {
    for (const r of c.routes ?? []) {
      out.push({
        name: `/${c.id}${r.path}`,
        method: r.method,
        url: r.url,
        description: r.description ?? "",
        takesBody: r.method !== "GET" && r.method !== "HEAD",
      });
    }
  }
  return out;
}

/** The commands a partly typed first word may become. */
export function complete(commands: Command[], text: string): Command[] {
  if (!text.startsWith("/") || /\s/.test(text)) return [];
  const help: Command = { name: "/help", method: "", url: "", description: "list the commands", takesBody: false };
  return [help, ...commands].filter((c) => c.name.startsWith(text) || matches(c.name, text) !== null);
}

/** The `:name` values when `typed` fits `pattern` segment by segment, else null. */
function matches(pattern: string, typed: string): Record<string, string> | null {
  const p = pattern.split("/");
  const t = typed.split("/");
  if (p.length !== t.length) return null;
  const values: Record<string, string> = {};
  for (let i = 0; i < p.length; i++) {
    if (p[i].startsWith(":")) {
      if (!t[i]) return null;
      values[p[i].slice(1)] = decodeURIComponent(t[i]);
    } else if (p[i] !== t[i]) return null;
  }
  return values;
}

/**
 * What a composer text starting with `/` asks for: `"help"`, an
 * invocation, or an error to show; `null` for text that is no command.
 */
export function parse(commands: Command[], text: string): "help" | Invocation | { error: string } | null {
  const trimmed = text.trim();
  if (!trimmed.startsWith("/")) return null;
  const space = trimmed.search(/\s/);
  const head = space < 0 ? trimmed : trimmed.slice(0, space);
  const rest = space < 0 ? "" : trimmed.slice(space).trim();
  if (head === "/help") return "help";
  for (const command of commands) {
    const values = matches(command.name, head);
    if (!values) continue;
    let arg: unknown = undefined;
    if (rest) {
      try {
        arg = JSON.parse(rest);
      } catch {
        return { error: `${command.name}: the argument must be JSON (${rest.slice(0, 40)})` };
      }
    }
    const url = fillPath(command.url, values);
    if (command.takesBody) return { command, url, body: JSON.stringify(arg ?? {}) };
    if (arg !== undefined && (typeof arg !== "object" || Array.isArray(arg) || arg === null)) {
      return { error: `${command.name}: the query must be a JSON object` };
    }
    return { command, url: url + queryString(arg as Record<string, unknown> | undefined) };
  }
  return { error: `unknown command ${head}: /help lists them` };
}

/** What `/help` shows. */
export function helpText(commands: Command[]): string {
  if (commands.length === 0) return "This agent has no custom channel routes: no commands but /help.";
  return [
    "Commands (custom channel routes; a JSON argument is the body, or the query of a GET):",
    ...commands.map((c) => `${c.name}  ${c.method}  ${c.description}`),
  ].join("\n");
}
