// A starting value for a JSON Schema, to prefill the forms that call a
// tool or try a channel route: required properties only, the first enum
// value or `example`-ish placeholders (as the offline `test` model does).

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Schema = Record<string, any>;

export function exampleOf(schema: Schema | null | undefined, depth = 0): unknown {
  if (!schema || typeof schema !== "object" || depth > 6) return {};
  if ("default" in schema) return schema.default;
  if ("const" in schema) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  if (Array.isArray(schema.examples) && schema.examples.length > 0) return schema.examples[0];
  const type = Array.isArray(schema.type) ? schema.type.find((t: string) => t !== "null") : schema.type;
  switch (type) {
    case "string":
      return "example";
    case "integer":
    case "number":
      return typeof schema.minimum === "number" ? schema.minimum : 1;
    case "boolean":
      return false;
    case "array":
      return typeof schema.minItems === "number" && schema.minItems > 0 ? [exampleOf(schema.items, depth + 1)] : [];
    default: {
      const out: Record<string, unknown> = {};
      const props: Schema = schema.properties ?? {};
      for (const name of schema.required ?? []) out[name] = exampleOf(props[name], depth + 1);
      return out;
    }
  }
}

/** The `:name` segments of a route path. */
export function pathParams(path: string): string[] {
  return path
    .split("/")
    .filter((s) => s.startsWith(":"))
    .map((s) => s.slice(1));
}

/** A route URL with its `:name` segments filled in (URL-encoded). */
export function fillPath(url: string, values: Record<string, string>): string {
  return url
    .split("/")
    .map((s) => (s.startsWith(":") ? encodeURIComponent(values[s.slice(1)] ?? "") : s))
    .join("/");
}

/** A query string from a flat object (`?a=1&b=x`), empty for none. */
export function queryString(query: Record<string, unknown> | null | undefined): string {
  if (!query) return "";
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v !== undefined && v !== null) params.set(k, typeof v === "string" ? v : JSON.stringify(v));
  }
  const s = params.toString();
  return s ? `?${s}` : "";
}

/** The shell-quoted curl command of a request, for copying. */
export function curlOf(method: string, url: string, headers: Record<string, string>, body?: string): string {
  const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const parts = ["curl -s", method === "GET" ? "" : `-X ${method}`, q(url)];
  for (const [k, v] of Object.entries(headers)) parts.push(`-H ${q(`${k}: ${v}`)}`);
  if (body !== undefined) parts.push(`-d ${q(body)}`);
  return parts.filter(Boolean).join(" ");
}
