// The Logs tab: recent host log lines about one session, from the host's
// bounded ring (`GET /v1/logs?session=…`, docs/guides/observability.md).

/** One line of `GET /v1/logs`. */
export interface LogLine {
  at: string;
  level: string;
  target: string;
  message: string;
  sessionId?: string;
  turnId?: string;
  traceId?: string;
  fields?: Record<string, unknown>;
}

/** `12:00:01.250 WARN agentkit_runtime: message key=value …`, in the
 * browser's time zone; the ids are left out (the tab is per session). */
export function logText(line: LogLine): string {
  const at = new Date(line.at);
  const time = Number.isNaN(at.getTime())
    ? line.at
    : `${at.toTimeString().slice(0, 8)}.${String(at.getMilliseconds()).padStart(3, "0")}`;
  const fields = Object.entries(line.fields ?? {})
    .map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`)
    .join(" ");
  const turn = line.turnId ? ` [${line.turnId}]` : "";
  return `${time} ${line.level.toUpperCase()} ${line.target}${turn}: ${line.message}${fields ? " " + fields : ""}`;
}

/** The CSS class of a line's level (`warn`, `error`; others plain). */
export function levelClass(level: string): string {
  const l = level.toLowerCase();
  return l === "warn" || l === "error" ? `log-${l}` : "log";
}
