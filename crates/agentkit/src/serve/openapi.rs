//! The OpenAPI 3.1 document of one agent's HTTP API (`GET
//! /v1/openapi.json`, `agentkit openapi`): every route the agent's router
//! mounts, with the JSON Schemas of the protocol types its handlers read
//! and answer (`agentkit_protocol`'s, derived by schemars, so a field
//! added to a body shows here), and each custom channel route with the
//! body and query schemas its file declares. A test checks every route of
//! the router's source appears here, and every path here answers.

use agentkit_protocol::Event;
use agentkit_protocol::ab::{AbReport, Feedback, FeedbackRecorded};
use agentkit_protocol::api::{
    Accepted, ApprovalDecision, ApprovalList, ApprovalResolved, CallTool, ClientCallList,
    ClientResults, ClientResultsAccepted, ErrorBody, Health, Info, PageQuery, SendMessage,
    SessionInfo, SessionList, SessionListQuery, StepContext, Stopped, ToolCalled,
};
use agentkit_protocol::openai;
use axum::Router;
use axum::extract::State;
use axum::routing::get;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value, json};

use super::agent::{AgentState, Mounted};
use super::http::{ApiResult, Authed, json_ok};

pub(crate) fn routes() -> Router<AgentState> {
    Router::new().route("/v1/openapi.json", get(document_route))
}

async fn document_route(State(state): State<AgentState>, _auth: Authed) -> ApiResult {
    Ok(json_ok(document(&state.agent)))
}

/// What a route reads.
enum Body {
    None,
    /// A JSON body of this schema; `required: false` for a route that
    /// reads an empty body as `{}`.
    Json(Value, bool),
    /// Raw bytes of any content type (a file).
    Bytes,
}

/// What a route answers with `200`.
enum Answer {
    Json(Value),
    /// NDJSON lines, one event each.
    Ndjson(Value),
    /// JSON, or with `stream: true` server-sent events.
    JsonOrSse(Value),
    /// Server-sent events only.
    Sse,
    /// JSON of a shape the route's own feature documents.
    AnyJson,
    /// A file's bytes, of the content type its extension names.
    Bytes,
}

/// Which error body a route answers with.
#[derive(Clone, Copy)]
enum Errors {
    Agentkit,
    OpenAi,
    /// The MCP server's JSON-RPC errors (and its transport's plain ones).
    JsonRpc,
}

struct Op {
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    tag: &'static str,
    query: Vec<Value>,
    body: Body,
    answer: Answer,
    errors: Errors,
    /// The JSON body may come as `multipart/form-data` with files.
    multipart: bool,
}

fn op(method: &'static str, path: &'static str, tag: &'static str, summary: &'static str) -> Op {
    Op {
        method,
        path,
        summary,
        tag,
        query: Vec::new(),
        body: Body::None,
        answer: Answer::AnyJson,
        errors: Errors::Agentkit,
        multipart: false,
    }
}

impl Op {
    fn body(mut self, schema: Value) -> Op {
        self.body = Body::Json(schema, true);
        self
    }

    fn optional_body(mut self, schema: Value) -> Op {
        self.body = Body::Json(schema, false);
        self
    }

    fn with_files(mut self) -> Op {
        self.multipart = true;
        self
    }

    fn bytes_body(mut self) -> Op {
        self.body = Body::Bytes;
        self
    }

    fn answer(mut self, answer: Answer) -> Op {
        self.answer = answer;
        self
    }

    fn query(mut self, params: Vec<Value>) -> Op {
        self.query.extend(params);
        self
    }

    fn mcp(mut self) -> Op {
        self.errors = Errors::JsonRpc;
        self
    }

    fn openai(mut self) -> Op {
        self.errors = Errors::OpenAi;
        self
    }
}

/// A `$ref` to `T`'s schema (added to the components).
fn schema_of<T: JsonSchema>(generator: &mut SchemaGenerator) -> Value {
    generator.subschema_for::<T>().to_value()
}

/// Query parameters from the properties of a query type's schema.
fn query_of<T: JsonSchema>(generator: &mut SchemaGenerator) -> Vec<Value> {
    let schema = generator.root_schema_for::<T>();
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .map(|(name, s)| {
                    let mut s = s.clone();
                    let description = s
                        .as_object_mut()
                        .and_then(|o| o.remove("description"))
                        .unwrap_or(Value::Null);
                    let mut p = json!({
                        "name": name,
                        "in": "query",
                        "required": required.contains(&name.as_str()),
                        "schema": s,
                    });
                    if let Value::String(d) = description {
                        p["description"] = Value::String(d);
                    }
                    p
                })
                .collect()
        })
        .unwrap_or_default()
}

fn query_param(name: &str, schema: Value, description: &str) -> Value {
    json!({"name": name, "in": "query", "required": false, "schema": schema, "description": description})
}

/// Every route of the agent's router, in the order of the HTTP reference.
fn operations(g: &mut SchemaGenerator) -> Vec<Op> {
    let start_index = query_param(
        "startIndex",
        json!({"type": "integer", "minimum": 0}),
        "the first event's index (default 0)",
    );
    let text = query_param(
        "text",
        json!({"type": "string", "enum": ["true", "false", "1", "0"]}),
        "`false`: `message.appended` without its cumulative `text`",
    );
    let event = schema_of::<Event>(g);
    let mut ops = vec![
        op("post", "/v1/session", "sessions", "Start a session with its first message")
            .body(schema_of::<SendMessage>(g))
            .with_files()
            .answer(Answer::Json(schema_of::<Accepted>(g))),
        op("post", "/v1/session/{sessionId}", "sessions", "Send a follow-up")
            .body(schema_of::<SendMessage>(g))
            .with_files()
            .answer(Answer::Json(schema_of::<Accepted>(g))),
        op("get", "/v1/session/{sessionId}", "sessions", "The session's metadata")
            .answer(Answer::Json(schema_of::<SessionInfo>(g))),
        op(
            "delete",
            "/v1/session/{sessionId}",
            "sessions",
            "Delete the session: stop its turn, then remove its log, workspace, index row and artifacts",
        )
        .answer(Answer::Json(schema_of::<agentkit_protocol::api::SessionDeleted>(g))),
        op(
            "post",
            "/v1/session/{sessionId}/stop",
            "sessions",
            "Interrupt the running turn, drop queued messages",
        )
        .answer(Answer::Json(schema_of::<Stopped>(g))),
        op(
            "post",
            "/v1/session/{sessionId}/fork",
            "sessions",
            "A new session from this one's events up to a turn boundary",
        )
        .body(schema_of::<agentkit_protocol::api::ForkRequest>(g))
        .answer(Answer::Json(schema_of::<agentkit_protocol::api::Forked>(g))),
        op(
            "get",
            "/v1/session/{sessionId}/stream",
            "sessions",
            "Replay, then follow live events (NDJSON; the stream stays open)",
        )
        .query(vec![start_index.clone(), text.clone()])
        .answer(Answer::Ndjson(event.clone())),
        op(
            "get",
            "/v1/session/{sessionId}/events",
            "sessions",
            "The stored events (NDJSON)",
        )
        .query(vec![start_index, text])
        .answer(Answer::Ndjson(event)),
        op("get", "/v1/sessions", "sessions", "The caller's sessions, newest first")
            .query(query_of::<SessionListQuery>(g))
            .answer(Answer::Json(schema_of::<SessionList>(g))),
        op(
            "get",
            "/v1/session/{sessionId}/context",
            "sessions",
            "What the model was sent at one step (under --dev or to an operator)",
        )
        .query(vec![
            json!({"name": "turnId", "in": "query", "required": true, "schema": {"type": "string"}}),
            json!({"name": "step", "in": "query", "required": true, "schema": {"type": "integer", "minimum": 1}}),
        ])
        .answer(Answer::Json(schema_of::<StepContext>(g))),
        op(
            "get",
            "/v1/session/{sessionId}/steps",
            "sessions",
            "The session's model steps, with model, usage and cost",
        )
        .answer(Answer::Json(schema_of::<agentkit_protocol::api::StepList>(g))),
        op(
            "get",
            "/v1/session/{sessionId}/steps/{step}/request",
            "sessions",
            "A step's provider request as it was sent, its tokens by part and the diff to the step before (under --dev or to an operator)",
        )
        .answer(Answer::Json(schema_of::<agentkit_protocol::api::StepRequestView>(g))),
        op(
            "get",
            "/v1/session/{sessionId}/cassette",
            "sessions",
            "One eval recording per step of the session, for `agentkit eval --replay` (under --dev or to an operator)",
        )
        .answer(Answer::Json(schema_of::<agentkit_protocol::api::SessionCassette>(g))),
        op(
            "get",
            "/v1/session/{sessionId}/approvals",
            "approvals",
            "The calls waiting for a human's decision",
        )
        .query(query_of::<PageQuery>(g))
        .answer(Answer::Json(schema_of::<ApprovalList>(g))),
        op(
            "post",
            "/v1/session/{sessionId}/approvals/{callId}",
            "approvals",
            "Approve or deny a parked call",
        )
        .body(schema_of::<ApprovalDecision>(g))
        .answer(Answer::Json(schema_of::<ApprovalResolved>(g))),
        op(
            "get",
            "/v1/session/{sessionId}/client-calls",
            "client tools",
            "The calls of tools the client declared that wait for the client's results",
        )
        .answer(Answer::Json(schema_of::<ClientCallList>(g))),
        op(
            "post",
            "/v1/session/{sessionId}/client-calls",
            "client tools",
            "The client's results for calls of its tools: the waiting turn goes on (or, after a restart, a new turn resumes it)",
        )
        .body(schema_of::<ClientResults>(g))
        .answer(Answer::Json(schema_of::<ClientResultsAccepted>(g))),
        op(
            "post",
            "/v1/tools/{toolName}",
            "tools",
            "Call a server tool deterministically, no model turn",
        )
        .optional_body(schema_of::<CallTool>(g))
        .answer(Answer::Json(schema_of::<ToolCalled>(g))),
        op(
            "post",
            "/v1/session/{sessionId}/feedback",
            "ab",
            "An outcome for the session, credited to its A/B variants",
        )
        .body(schema_of::<Feedback>(g))
        .answer(Answer::Json(schema_of::<FeedbackRecorded>(g))),
        op("get", "/v1/ab", "ab", "Every experiment's per-variant metrics")
            .answer(Answer::Json(schema_of::<AbReport>(g))),
        op(
            "get",
            "/v1/artifacts",
            "artifacts",
            "The caller's artifacts (every one for an operator), newest first",
        )
        .query(query_of::<agentkit_protocol::api::ArtifactListQuery>(g))
        .answer(Answer::Json(schema_of::<agentkit_protocol::api::ArtifactList>(g))),
        op(
            "get",
            "/v1/session/{sessionId}/artifacts",
            "artifacts",
            "One session's artifacts, newest first",
        )
        .query(query_of::<agentkit_protocol::api::ArtifactListQuery>(g))
        .answer(Answer::Json(schema_of::<agentkit_protocol::api::ArtifactList>(g))),
        op(
            "get",
            "/v1/memory",
            "memory",
            "The memories the caller's sessions see (every one for an operator), newest first",
        )
        .query(query_of::<PageQuery>(g))
        .answer(Answer::Json(schema_of::<agentkit_protocol::api::MemoryList>(g))),
        op("get", "/v1/memory/{memoryId}", "memory", "One memory")
            .answer(Answer::Json(schema_of::<agentkit_protocol::api::MemoryAnswer>(g))),
        op(
            "put",
            "/v1/memory/{memoryId}",
            "memory",
            "Replace a memory's text (its principal or an operator)",
        )
        .body(schema_of::<agentkit_protocol::api::EditMemory>(g))
        .answer(Answer::Json(schema_of::<agentkit_protocol::api::MemoryAnswer>(g))),
        op(
            "delete",
            "/v1/memory/{memoryId}",
            "memory",
            "Delete a memory (its principal or an operator)",
        )
        .answer(Answer::Json(schema_of::<agentkit_protocol::api::MemoryDeleted>(g))),
        op(
            "get",
            "/v1/session/{sessionId}/files",
            "files",
            "One page of the session's workspace entries, depth first",
        )
        .query(query_of::<agentkit_protocol::api::PageQuery>(g))
        .answer(Answer::Json(schema_of::<agentkit_protocol::api::WorkspaceList>(g))),
        op(
            "get",
            "/v1/session/{sessionId}/files/{path}",
            "files",
            "Download a workspace file",
        )
        .answer(Answer::Bytes),
        op(
            "put",
            "/v1/session/{sessionId}/files/{path}",
            "files",
            "Write a workspace file (the body, at most 8 MiB)",
        )
        .bytes_body()
        .answer(Answer::Json(schema_of::<agentkit_protocol::api::FileWritten>(g))),
        op("get", "/v1/health", "agent", "The agent is up and the caller admitted")
            .answer(Answer::Json(schema_of::<Health>(g))),
        op("get", "/v1/info", "agent", "The agent's discovered project")
            .answer(Answer::Json(schema_of::<Info>(g))),
        op("get", "/v1/openapi.json", "agent", "This document"),
        op(
            "post",
            "/v1/mcp",
            "mcp",
            "The agent's MCP server (stateless streamable HTTP, JSON-RPC)",
        )
        .body(json!({"type": "object"}))
        .mcp(),
        // A2A v1.0 (docs/reference/a2a.md): the card, JSON-RPC, and the
        // HTTP+JSON binding; their bodies are A2A's own, checked by the
        // official SDKs' tests.
        op(
            "get",
            "/.well-known/agent-card.json",
            "a2a",
            "The agent's A2A card (public)",
        ),
        op("post", "/a2a", "a2a", "A2A JSON-RPC binding")
            .body(json!({"type": "object"}))
            .mcp(),
        op("post", "/a2a/message:send", "a2a", "A2A SendMessage (HTTP+JSON)")
            .body(json!({"type": "object"})),
        op(
            "post",
            "/a2a/message:stream",
            "a2a",
            "A2A SendStreamingMessage (server-sent events)",
        )
        .body(json!({"type": "object"}))
        .answer(Answer::Sse),
        op("get", "/a2a/tasks", "a2a", "A2A ListTasks: the caller's tasks, newest first, in pages"),
        op("get", "/a2a/tasks/{id}", "a2a", "A2A GetTask"),
        op(
            "post",
            "/a2a/tasks/{id}",
            "a2a",
            "A2A CancelTask (`:cancel`) or SubscribeToTask (`:subscribe`)",
        ),
        op(
            "post",
            "/a2a/tasks/{id}/pushNotificationConfigs",
            "a2a",
            "A2A CreateTaskPushNotificationConfig: a webhook for the task's changes",
        )
        .body(json!({"type": "object"})),
        op(
            "get",
            "/a2a/tasks/{id}/pushNotificationConfigs",
            "a2a",
            "A2A ListTaskPushNotificationConfigs",
        ),
        op(
            "get",
            "/a2a/tasks/{id}/pushNotificationConfigs/{config}",
            "a2a",
            "A2A GetTaskPushNotificationConfig",
        ),
        op(
            "delete",
            "/a2a/tasks/{id}/pushNotificationConfigs/{config}",
            "a2a",
            "A2A DeleteTaskPushNotificationConfig",
        ),
        op(
            "get",
            "/a2a/extendedAgentCard",
            "a2a",
            "A2A extended card (answers unsupported)",
        ),
        op(
            "post",
            "/v1/responses",
            "openai",
            "A turn in the OpenAI Responses format (server-sent events with `stream: true`)",
        )
        .body(schema_of::<openai::CreateResponse>(g))
        .answer(Answer::JsonOrSse(schema_of::<openai::Response>(g)))
        .openai(),
        op(
            "get",
            "/v1/responses/{responseId}",
            "openai",
            "A response as the session's log holds it",
        )
        .answer(Answer::Json(schema_of::<openai::Response>(g)))
        .openai(),
        op(
            "post",
            "/v1/chat/completions",
            "openai",
            "A turn in the OpenAI Chat Completions format (server-sent chunks with `stream: true`)",
        )
        .body(schema_of::<openai::CreateChatCompletion>(g))
        .answer(Answer::JsonOrSse(
            schema_of::<openai::ChatCompletion>(g),
        ))
        .openai(),
        op(
            "post",
            "/v1/ag-ui",
            "ag-ui",
            "A run in the AG-UI 1.0 protocol (server-sent events)",
        )
        .body(schema_of::<agentkit_protocol::agui::RunAgentInput>(g))
        .answer(Answer::Sse),
        op(
            "post",
            "/v1/dev/schedules/{id}",
            "dev",
            "--dev only: dispatch a schedule once",
        ),
        op("get", "/v1/dev/reminders", "dev", "--dev only: list reminders"),
        op(
            "post",
            "/v1/dev/reminders/{id}",
            "dev",
            "--dev only: fire a reminder now",
        ),
        op(
            "get",
            "/v1/dev/sessions/{id}/files/{path}",
            "dev",
            "--dev only: a file of a session's workspace",
        ),
        op("get", "/v1/dev/evals", "dev", "--dev only: the eval runs"),
        op("post", "/v1/dev/evals", "dev", "--dev only: start an eval run"),
        op("get", "/v1/dev/evals/{run}", "dev", "--dev only: one eval run"),
        op(
            "post",
            "/v1/dev/evals/cases",
            "dev",
            "--dev only: write a session into the project as an eval case",
        )
        .body(json!({"type": "object"})),
    ];
    ops.sort_by_key(|o| (o.path, o.method));
    ops
}

/// The path parameters of `path` (`{name}` segments); a session id has
/// its own schema.
fn path_params(path: &str, session_id: &Value) -> Vec<Value> {
    path.split('/')
        .filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| {
            let schema = if name == "sessionId" {
                session_id.clone()
            } else {
                json!({"type": "string", "minLength": 1})
            };
            json!({"name": name, "in": "path", "required": true, "schema": schema})
        })
        .collect()
}

fn operation(op: &Op, errors: &Map<String, Value>, session_id: &Value) -> Value {
    let mut o = json!({
        "summary": op.summary,
        "tags": [op.tag],
        "operationId": operation_id(op.method, op.path),
    });
    let mut params = path_params(op.path, session_id);
    params.extend(op.query.iter().cloned());
    if !params.is_empty() {
        o["parameters"] = Value::Array(params);
    }
    match &op.body {
        Body::Json(schema, required) => {
            o["requestBody"] = json!({
                "required": required,
                "content": {"application/json": {"schema": schema}},
            });
            if op.multipart {
                // `message` and the other string fields as parts, the
                // rest as a `json` part; a part with a file name is a
                // workspace file (docs/reference/files.md).
                o["requestBody"]["content"]["multipart/form-data"] = json!({"schema": {
                    "type": "object",
                    "required": ["message"],
                    "properties": {
                        "message": {"type": "string"},
                        "continuationToken": {"type": "string"},
                        "json": {"type": "string", "description": "a JSON object of the message's other fields"},
                        "file": {"type": "array", "items": {"type": "string", "format": "binary"}, "description": "files, each written at its file name"},
                    },
                }});
            }
        }
        Body::Bytes => {
            o["requestBody"] = json!({
                "required": true,
                "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
            });
        }
        Body::None => {}
    }
    let ok = match &op.answer {
        Answer::Json(s) => {
            json!({"description": "OK", "content": {"application/json": {"schema": s}}})
        }
        Answer::Ndjson(s) => json!({
            "description": "One event per line",
            "content": {"application/x-ndjson": {"schema": s}},
        }),
        Answer::JsonOrSse(s) => json!({
            "description": "The whole object, or with `stream: true` its events",
            "content": {
                "application/json": {"schema": s},
                "text/event-stream": {"schema": {"type": "string"}},
            },
        }),
        Answer::Sse => json!({
            "description": "The run's events",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        }),
        Answer::AnyJson => {
            json!({"description": "OK", "content": {"application/json": {"schema": {}}}})
        }
        Answer::Bytes => json!({
            "description": "The file, of the content type its extension names",
            "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
        }),
    };
    let error = match op.errors {
        Errors::Agentkit => "AgentkitError",
        Errors::OpenAi => "OpenAiError",
        Errors::JsonRpc => "JsonRpcError",
    };
    let error = errors.get(error).cloned().unwrap_or(Value::Null);
    o["responses"] = json!({"200": ok, "default": error});
    o
}

fn operation_id(method: &str, path: &str) -> String {
    let mut id = method.to_owned();
    for seg in path.split('/').filter(|s| !s.is_empty() && *s != "v1") {
        let seg = seg.trim_start_matches('{').trim_end_matches('}');
        let mut chars = seg.chars().filter(|c| c.is_ascii_alphanumeric());
        if let Some(first) = chars.next() {
            id.push(first.to_ascii_uppercase());
            id.extend(chars);
        }
    }
    id
}

/// The document of `agent`.
pub(crate) fn document(agent: &Mounted) -> Value {
    let settings = schemars::generate::SchemaSettings::draft2020_12().with(|s| {
        s.definitions_path = "/components/schemas".into();
        s.meta_schema = None;
    });
    let mut g = settings.into_generator();
    let agentkit_error = schema_of::<ErrorBody>(&mut g);
    let openai_error = schema_of::<openai::ErrorBody>(&mut g);
    let errors: Map<String, Value> = [
        (
            "AgentkitError".to_owned(),
            json!({"description": "An error: `{ok: false, error: {code, message}}`", "content": {"application/json": {"schema": agentkit_error}}}),
        ),
        (
            "JsonRpcError".to_owned(),
            json!({"description": "A JSON-RPC error, or the transport's refusal", "content": {"application/json": {"schema": {}}, "text/plain": {"schema": {"type": "string"}}}}),
        ),
        (
            "OpenAiError".to_owned(),
            json!({"description": "An error in OpenAI's shape", "content": {"application/json": {"schema": openai_error}}}),
        ),
    ]
    .into_iter()
    .collect();
    let ops = operations(&mut g);
    let session_id = schema_of::<agentkit_protocol::SessionId>(&mut g);
    let mut paths = Map::new();
    for op in &ops {
        let entry = paths.entry(op.path.to_owned()).or_insert_with(|| json!({}));
        entry[op.method] = operation(op, &errors, &session_id);
    }
    channel_paths(agent, &mut paths, &errors);
    let schemas = g.take_definitions(true);
    let description = agent
        .project
        .agent
        .config
        .description
        .clone()
        .unwrap_or_default();
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": format!("agentkit agent `{}`", agent.slug),
            "version": env!("CARGO_PKG_VERSION"),
            "description": description,
        },
        "servers": [{"url": if agent.prefix.is_empty() { "/".to_owned() } else { agent.prefix.clone() }}],
        "security": [{"bearerAuth": []}, {}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
        },
    })
}

/// Each custom channel route, with the schemas its file declares.
fn channel_paths(agent: &Mounted, paths: &mut Map<String, Value>, errors: &Map<String, Value>) {
    for channel in agent.channels.describe() {
        for route in channel.routes {
            // `:name` segments are OpenAPI's `{name}`.
            let url = route
                .url
                .strip_prefix(&agent.prefix)
                .unwrap_or(&route.url)
                .split('/')
                .map(|seg| match seg.strip_prefix(':') {
                    Some(name) => format!("{{{name}}}"),
                    None => seg.to_owned(),
                })
                .collect::<Vec<_>>()
                .join("/");
            let mut params = path_params(&url, &Value::Null);
            let method = route.method.to_ascii_lowercase();
            let mut o = json!({
                "summary": route.description.clone().unwrap_or_else(|| format!("a route of channel `{}`", channel.id)),
                "tags": [format!("channel:{}", channel.id)],
                "operationId": operation_id(&method, &url),
                "responses": {
                    "2XX": {"description": "The route's answer", "content": {"application/json": {"schema": {}}}},
                    "default": errors.get("AgentkitError").cloned().unwrap_or(Value::Null),
                },
            });
            if let Some(schema) = route.body_schema {
                o["requestBody"] =
                    json!({"required": true, "content": {"application/json": {"schema": schema}}});
            }
            if let Some(Value::Object(q)) = route.query_schema {
                let required: Vec<String> = q
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| {
                        r.iter()
                            .filter_map(|v| v.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                let query: Vec<Value> = q
                    .get("properties")
                    .and_then(Value::as_object)
                    .map(|p| {
                        p.iter()
                            .map(|(name, s)| json!({"name": name, "in": "query", "required": required.contains(name), "schema": s}))
                            .collect()
                    })
                    .unwrap_or_default();
                params.extend(query);
            }
            if !params.is_empty() {
                o["parameters"] = Value::Array(params);
            }
            let entry = paths.entry(url).or_insert_with(|| json!({}));
            entry[method] = o;
        }
    }
}
