// Reads the agent's OpenAPI 3.1 document (`GET /v1/openapi.json`) into
// what the playground's API view shows: operations grouped by tag, each
// with its parameters, request body and answers, and a schema as rows of
// fields (`$ref`s to `#/components/schemas` followed, cycles cut).

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Doc = Record<string, any>;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Schema = Record<string, any>;

const METHODS = ["get", "put", "post", "delete", "patch", "head", "options"];

export interface Param {
  name: string;
  in: string;
  required: boolean;
  type: string;
  description: string;
}

export interface Content {
  mediaType: string;
  schema: Schema;
}

export interface Answer {
  status: string;
  description: string;
  content: Content[];
}

export interface Operation {
  method: string;
  path: string;
  summary: string;
  operationId: string;
  params: Param[];
  body: Content[];
  bodyRequired: boolean;
  answers: Answer[];
}

export interface Group {
  tag: string;
  operations: Operation[];
}

/** One line of a schema: a field at `depth`, its type and whether it is required. */
export interface Row {
  name: string;
  depth: number;
  type: string;
  required: boolean;
  description: string;
}

/** The schema a `$ref` names (`#/components/schemas/X`), or `schema` itself. */
export function resolve(doc: Doc, schema: Schema | undefined): Schema {
  if (!schema || typeof schema !== "object") return {};
  const ref = schema.$ref;
  if (typeof ref !== "string" || !ref.startsWith("#/")) return schema;
  let at: unknown = doc;
  for (const part of ref.slice(2).split("/")) {
    at = at && typeof at === "object" ? (at as Record<string, unknown>)[part.replace(/~1/g, "/").replace(/~0/g, "~")] : undefined;
  }
  return at && typeof at === "object" ? (at as Schema) : {};
}

/** The last segment of a `$ref`: the schema's name. */
function refName(schema: Schema): string | undefined {
  return typeof schema?.$ref === "string" ? schema.$ref.split("/").pop() : undefined;
}

/** A schema's type in one short phrase: `string`, `Event[]`, `"a" | "b"`, `SessionInfo`. */
export function typeOf(doc: Doc, schema: Schema | undefined): string {
  if (!schema || typeof schema !== "object" || Object.keys(schema).length === 0) return "any";
  const name = refName(schema);
  if (name) return name;
  if ("const" in schema) return JSON.stringify(schema.const);
  if (Array.isArray(schema.enum)) return schema.enum.map((v: unknown) => JSON.stringify(v)).join(" | ");
  const alternatives = schema.oneOf ?? schema.anyOf;
  if (Array.isArray(alternatives)) return alternatives.map((s: Schema) => typeOf(doc, s)).join(" | ");
  if (Array.isArray(schema.allOf) && schema.allOf.length === 1) return typeOf(doc, schema.allOf[0]);
  const types: string[] = Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : [];
  const shown = types.map((t) => {
    if (t === "array") return `${typeOf(doc, schema.items)}[]`;
    if (t === "string" && typeof schema.format === "string") return `string (${schema.format})`;
    return t;
  });
  if (shown.length > 0) return shown.join(" | ");
  if (schema.properties) return "object";
  return "any";
}

/**
 * The fields of `schema` as rows, nested fields indented, down to
 * `maxDepth`; a schema already being expanded (a cycle) is not expanded
 * again.
 */
export function schemaRows(doc: Doc, schema: Schema | undefined, maxDepth = 3): Row[] {
  const rows: Row[] = [];
  const walk = (s: Schema | undefined, depth: number, seen: Set<string>) => {
    if (!s || depth > maxDepth) return;
    const name = refName(s);
    if (name && seen.has(name)) return;
    const next = name ? new Set([...seen, name]) : seen;
    const body = resolve(doc, s);
    if (Array.isArray(body.allOf)) {
      for (const part of body.allOf) walk(part, depth, next);
    }
    const type = Array.isArray(body.type) ? body.type : [body.type];
    if (type.includes("array") && body.items) {
      walk(body.items, depth, next);
      return;
    }
    for (const alt of body.oneOf ?? body.anyOf ?? []) {
      if (resolve(doc, alt).properties) walk(alt, depth, next);
    }
    const required: string[] = Array.isArray(body.required) ? body.required : [];
    for (const [field, sub] of Object.entries<Schema>(body.properties ?? {})) {
      const inner = resolve(doc, sub);
      rows.push({
        name: field,
        depth,
        type: typeOf(doc, sub),
        required: required.includes(field),
        description: String(sub.description ?? inner.description ?? ""),
      });
      const target = inner.type === "array" ? inner.items : sub;
      const nested = resolve(doc, target);
      if (nested.properties || nested.allOf) walk(target, depth + 1, next);
    }
  };
  walk(schema, 0, new Set());
  return rows;
}

function contents(content: Record<string, { schema?: Schema }> | undefined): Content[] {
  return Object.entries(content ?? {}).map(([mediaType, c]) => ({ mediaType, schema: c.schema ?? {} }));
}

/** The document's operations grouped by their first tag, in the order tags first appear. */
export function groupOperations(doc: Doc): Group[] {
  const groups = new Map<string, Operation[]>();
  for (const [path, item] of Object.entries<Schema>(doc.paths ?? {})) {
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      const shared: Schema[] = Array.isArray(item.parameters) ? item.parameters : [];
      const own: Schema[] = Array.isArray(op.parameters) ? op.parameters : [];
      const params: Param[] = [...shared, ...own].map((p) => {
        const param = resolve(doc, p);
        return {
          name: String(param.name ?? ""),
          in: String(param.in ?? ""),
          required: param.required === true,
          type: typeOf(doc, param.schema),
          description: String(param.description ?? param.schema?.description ?? ""),
        };
      });
      const body = resolve(doc, op.requestBody);
      const answers: Answer[] = Object.entries<Schema>(op.responses ?? {}).map(([status, r]) => {
        const answer = resolve(doc, r);
        return { status, description: String(answer.description ?? ""), content: contents(answer.content) };
      });
      const tag = Array.isArray(op.tags) && op.tags.length > 0 ? String(op.tags[0]) : "other";
      const list = groups.get(tag) ?? [];
      list.push({
        method: method.toUpperCase(),
        path,
        summary: String(op.summary ?? ""),
        operationId: String(op.operationId ?? ""),
        params,
        body: contents(body.content),
        bodyRequired: body.required === true,
        answers,
      });
      groups.set(tag, list);
    }
  }
  return [...groups.entries()].map(([tag, operations]) => ({ tag, operations }));
}

/** The groups whose operations match `filter` (a path, summary, method or tag fragment), case-insensitive. */
export function filterGroups(groups: Group[], filter: string): Group[] {
  const f = filter.trim().toLowerCase();
  if (!f) return groups;
  return groups
    .map((g) => ({
      tag: g.tag,
      operations: g.tag.toLowerCase().includes(f)
        ? g.operations
        : g.operations.filter((o) => `${o.method} ${o.path} ${o.summary} ${o.operationId}`.toLowerCase().includes(f)),
    }))
    .filter((g) => g.operations.length > 0);
}
