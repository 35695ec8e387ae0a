import { describe, expect, it } from "vitest";
import { filterGroups, groupOperations, schemaRows, typeOf } from "../src/openapi";

const doc = {
  openapi: "3.1.0",
  paths: {
    "/v1/session": {
      post: {
        tags: ["sessions"],
        summary: "Start a session",
        operationId: "postSession",
        requestBody: { required: true, content: { "application/json": { schema: { $ref: "#/components/schemas/SendMessage" } } } },
        responses: {
          "200": { description: "OK", content: { "application/json": { schema: { $ref: "#/components/schemas/Accepted" } } } },
        },
      },
    },
    "/v1/session/{sessionId}/events": {
      get: {
        tags: ["sessions"],
        summary: "The session's events",
        parameters: [
          { name: "sessionId", in: "path", required: true, schema: { type: "string" } },
          { name: "startIndex", in: "query", schema: { type: ["integer", "null"], description: "where to start" } },
        ],
        responses: { "200": { description: "One event per line", content: { "application/x-ndjson": { schema: { $ref: "#/components/schemas/Event" } } } } },
      },
    },
    "/v1/tools/{toolName}": { post: { tags: ["tools"], summary: "Call a tool", responses: {} } },
  },
  components: {
    schemas: {
      SendMessage: {
        type: "object",
        required: ["message"],
        properties: {
          message: { type: "string", description: "the text" },
          admission: { oneOf: [{ const: "preempt" }, { const: "reject" }] },
          workspaceFiles: { type: "object", additionalProperties: { type: "string" } },
        },
      },
      Accepted: { type: "object", properties: { sessionId: { type: "string" }, events: { type: "array", items: { $ref: "#/components/schemas/Event" } } } },
      Event: { type: "object", required: ["index"], properties: { index: { type: "integer", format: "uint64" }, parent: { $ref: "#/components/schemas/Event" } } },
    },
  },
};

describe("openapi", () => {
  it("groups operations by tag, in document order", () => {
    const groups = groupOperations(doc);
    expect(groups.map((g) => [g.tag, g.operations.map((o) => `${o.method} ${o.path}`)])).toEqual([
      ["sessions", ["POST /v1/session", "GET /v1/session/{sessionId}/events"]],
      ["tools", ["POST /v1/tools/{toolName}"]],
    ]);
    const events = groups[0].operations[1];
    expect(events.params).toEqual([
      { name: "sessionId", in: "path", required: true, type: "string", description: "" },
      { name: "startIndex", in: "query", required: false, type: "integer | null", description: "where to start" },
    ]);
    expect(groups[0].operations[0].bodyRequired).toBe(true);
    expect(groups[0].operations[0].body[0].mediaType).toBe("application/json");
  });

  it("names types in short", () => {
    expect(typeOf(doc, { $ref: "#/components/schemas/Event" })).toBe("Event");
    expect(typeOf(doc, { type: "array", items: { $ref: "#/components/schemas/Event" } })).toBe("Event[]");
    expect(typeOf(doc, { oneOf: [{ const: "a" }, { const: "b" }] })).toBe('"a" | "b"');
    expect(typeOf(doc, { type: "integer", format: "uint64" })).toBe("integer");
    expect(typeOf(doc, { type: "string", format: "binary" })).toBe("string (binary)");
    expect(typeOf(doc, {})).toBe("any");
  });

  it("lists a schema's fields with $refs followed and cycles cut", () => {
    const rows = schemaRows(doc, { $ref: "#/components/schemas/Accepted" }).map(
      (r) => `${"  ".repeat(r.depth)}${r.name}${r.required ? "*" : ""}: ${r.type}`,
    );
    expect(rows).toEqual(["sessionId: string", "events: Event[]", "  index*: integer", "  parent: Event"]);
    const send = schemaRows(doc, { $ref: "#/components/schemas/SendMessage" });
    expect(send.map((r) => [r.name, r.required, r.description])).toEqual([
      ["message", true, "the text"],
      ["admission", false, ""],
      ["workspaceFiles", false, ""],
    ]);
  });

  it("filters by path, method, summary or tag", () => {
    const groups = groupOperations(doc);
    expect(filterGroups(groups, "events").map((g) => g.operations.length)).toEqual([1]);
    expect(filterGroups(groups, "TOOLS").map((g) => g.tag)).toEqual(["tools"]);
    expect(filterGroups(groups, "post").flatMap((g) => g.operations.map((o) => o.path))).toEqual(["/v1/session", "/v1/tools/{toolName}"]);
    expect(filterGroups(groups, "")).toBe(groups);
  });
});
