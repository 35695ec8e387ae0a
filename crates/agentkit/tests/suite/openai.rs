//! The OpenAI-compatible routes (`/<slug>/v1/responses`,
//! `/<slug>/v1/chat/completions`) driven by the official `openai` Python
//! SDK against a real server with the offline `test` model: responses and
//! chat completions, streamed (checked event by event as the SDK parsed
//! them) and not, continuation by `previous_response_id` (across a
//! restart too), an approval the turn waits on and its answer, errors in
//! OpenAI's shape, auth and ownership.

use std::path::PathBuf;

use agentkit::ServeOptions;
use agentkit_test_support::http::Request;
use serde_json::{Value, json};

use super::mcp::{Host, host};

const ECHO_TOOL: &str = r#"description = "Echo the input back."
command = ["python3", "-c", "import json,sys; print(json.dumps({'echo': json.load(sys.stdin)}))"]
[input_schema]
type = "object"
required = ["text"]
properties.text = { type = "string" }
"#;

const GUARDED_TOOL: &str = r#"description = "Echo, after a human agrees."
command = ["python3", "-c", "import json,sys; print(json.dumps({'echo': json.load(sys.stdin)}))"]
needs_approval = true
[input_schema]
type = "object"
required = ["text"]
properties.text = { type = "string" }
"#;

/// Alice and Bob hold bearer tokens (the SDK's `api_key`).
const HTTP_CHANNEL: &str = r#"kind = "http"
auth = [{ bearer = { tokens = { alice = "sk-alice", bob = "sk-bob" } } }]
"#;

fn agents() -> Host {
    host(
        &[
            (
                "bot",
                &[
                    ("agent.toml", "model = \"test\"\n"),
                    ("instructions.md", "You are a test agent.\n"),
                    ("tools/echo.toml", ECHO_TOOL),
                    ("channels/http.toml", HTTP_CHANNEL),
                ],
            ),
            (
                "guard",
                &[
                    ("agent.toml", "model = \"test\"\n"),
                    ("instructions.md", "You are a careful agent.\n"),
                    ("tools/echo.toml", GUARDED_TOOL),
                    ("channels/http.toml", HTTP_CHANNEL),
                ],
            ),
            (
                "desk",
                &[
                    ("agent.toml", "model = \"test\"\n"),
                    (
                        "instructions.md",
                        "You are a desk agent with no tools of its own.\n",
                    ),
                    ("channels/http.toml", HTTP_CHANNEL),
                ],
            ),
        ],
        ServeOptions::default(),
    )
}

/// Runs a phase of `tests/python/openai_client.py`; `None` (after saying
/// why) when there is no Python environment outside CI.
#[allow(clippy::print_stderr)]
fn sdk(args: &[&str]) -> Option<Value> {
    let bin = match agentkit_test_support::pyenv::pyenv_bin("openai SDK") {
        Ok(bin) => bin,
        Err(skip) => {
            eprintln!("{skip}");
            return None;
        }
    };
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/openai_client.py");
    let out = std::process::Command::new(bin.join("python"))
        .arg(&script)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the openai SDK script failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

/// The stream's events, one per line, with the session id replaced by
/// `S`.
fn lines(events: &Value, session: &str) -> String {
    events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.to_string().replace(session, "S"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn session_of(response_id: &str) -> String {
    let tail = response_id.strip_prefix("resp_").unwrap();
    tail.rsplit_once('.').unwrap().0.to_owned()
}

#[test]
fn the_official_python_sdk_drives_responses_and_chat_completions() {
    let mut h = agents();
    let base = format!("http://{}/bot/v1", h.addr());
    let Some(v) = sdk(&["main", &base, "sk-alice", "sk-bob"]) else {
        return;
    };

    // A response, not streamed: the agent's own call, then its reply.
    let first = &v["first"];
    let session = session_of(first["id"].as_str().unwrap());
    assert_eq!(first["status"], "completed");
    assert_eq!(first["model"], "bot");
    expect_test::expect![[r#"
        [
          {
            "type": "function_call",
            "name": "echo",
            "arguments": {
              "text": "example"
            },
            "status": "completed"
          },
          {
            "type": "message",
            "status": "completed",
            "text": "You said: hello there\nI called echo({\"text\":\"example\"}) → {\"echo\":{\"text\":\"example\"}}"
          }
        ]"#]]
    .assert_eq(&serde_json::to_string_pretty(&first["output"]).unwrap());
    assert_eq!(first["output_text"], first["output"][1]["text"]);
    let usage = &first["usage"];
    assert!(usage["input_tokens"].as_u64().unwrap() > 0, "{usage}");
    assert_eq!(
        usage["total_tokens"].as_u64(),
        Some(usage["input_tokens"].as_u64().unwrap() + usage["output_tokens"].as_u64().unwrap())
    );

    // Streamed, continuing the same session: every event as the SDK
    // parsed it.
    let second = &v["second"];
    assert_eq!(session_of(second["id"].as_str().unwrap()), session);
    assert_eq!(second["previous_response_id"], first["id"]);
    let id = second["id"].as_str().unwrap().replace(&session, "S");
    let events = lines(&v["second_events"], &session);
    let events = events.replace(&id, "R");
    expect_test::expect![[r#"
        {"type":"response.created","status":"in_progress","id":"R"}
        {"type":"response.in_progress","status":"in_progress","id":"R"}
        {"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","name":"echo","arguments":"","status":"in_progress"}}
        {"type":"response.function_call_arguments.delta","delta":{"text":"example"}}
        {"type":"response.function_call_arguments.done","arguments":{"text":"example"}}
        {"type":"response.output_item.done","output_index":0,"item":{"type":"function_call","name":"echo","arguments":{"text":"example"},"status":"completed"}}
        {"type":"response.output_item.added","output_index":1,"item":{"type":"message","status":"in_progress","text":""}}
        {"type":"response.content_part.added"}
        {"type":"response.output_text.delta","delta":"You said: and again\n","output_index":1}
        {"type":"response.output_text.delta","delta":"I called echo({\"text\":\"example\"}) → ","output_index":1}
        {"type":"response.output_text.delta","delta":"{\"echo\":{\"text\":\"example\"}}","output_index":1}
        {"type":"response.output_text.done","text":"You said: and again\nI called echo({\"text\":\"example\"}) → {\"echo\":{\"text\":\"example\"}}"}
        {"type":"response.content_part.done"}
        {"type":"response.output_item.done","output_index":1,"item":{"type":"message","status":"completed","text":"You said: and again\nI called echo({\"text\":\"example\"}) → {\"echo\":{\"text\":\"example\"}}"}}
        {"type":"response.completed"}"#]]
    .assert_eq(&events);
    assert_eq!(second["status"], "completed");
    assert!(second["usage"]["output_tokens"].as_u64().unwrap() > 0);
    // What `GET /v1/responses/:id` answers is what the stream ended with.
    assert_eq!(v["retrieved"], *second);

    // A history of items seeds a new session.
    let seeded = &v["seeded"];
    assert_ne!(session_of(seeded["id"].as_str().unwrap()), session);
    let text = seeded["output_text"].as_str().unwrap();
    assert!(
        text.starts_with("You said: The conversation so far:\n\n[user]\nmy name is Ada\n\n[assistant]\nHello Ada.\n\n[user]\nwhat is my name?"),
        "{text}"
    );

    // Chat completions.
    let chat = &v["chat"];
    assert_eq!(chat["object"], "chat.completion");
    assert_eq!(chat["model"], "bot");
    assert_eq!(chat["role"], "assistant");
    assert_eq!(chat["finish_reason"], "stop");
    assert!(
        chat["content"]
            .as_str()
            .unwrap()
            .starts_with("You said: chat hello\nI called echo"),
        "{chat}"
    );
    assert!(chat["usage"]["total_tokens"].as_u64().unwrap() > 0);
    let raw_session = chat["raw_session"].as_str().unwrap().to_owned();
    let chunks = v["chat_chunks"].as_array().unwrap();
    // Role first, text, the finish, then the usage chunk.
    assert_eq!(chunks[0]["choices"][0]["role"], "assistant");
    let text: String = chunks
        .iter()
        .flat_map(|c| c["choices"].as_array().unwrap())
        .filter_map(|c| c["content"].as_str())
        .collect();
    assert!(
        text.starts_with("You said: chat streamed\n"),
        "only the new user text reaches the continued session: {text}"
    );
    let n = chunks.len();
    assert_eq!(chunks[n - 2]["choices"][0]["finish_reason"], "stop");
    assert_eq!(chunks[n - 1]["choices"], json!([]));
    assert!(chunks[n - 1]["usage"].as_u64().unwrap() > 0);
    let ids: Vec<&str> = chunks.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert!(ids.iter().all(|id| *id == ids[0]));
    assert!(
        ids[0].starts_with(&format!("chatcmpl-{raw_session}.")),
        "{ids:?}"
    );
    let keyed = v["keyed_sessions"].as_array().unwrap();
    assert_eq!(keyed[0], keyed[1], "one `user` value, one session");
    assert!(
        v["keyed_second"]
            .as_str()
            .unwrap()
            .starts_with("You said: keyed two")
    );

    // Errors in OpenAI's shape, as the SDK raised them.
    expect_test::expect![[r#"
        model: {"class":"NotFoundError","status":404,"code":"model_not_found","type":"not_found_error","param":"model","message":"the model `nope` does not exist here: this endpoint serves the agent `bot`, whose slug is its model name"}
        tools: {"class":"BadRequestError","status":400,"code":"unsupported_tools","type":"invalid_request_error","param":"tools","message":"`web_search` tools are not supported: declare `function` tools (with a `name`), which the client runs; the agent's own tools run on the server"}
        chat_tools: {"class":"BadRequestError","status":400,"code":"unsupported_tools","type":"invalid_request_error","param":"tools","message":"client-declared tools (function) are not supported: the agent's own tools run on the server; send no `tools`"}
        instructions: {"class":"BadRequestError","status":400,"code":"bad_request","type":"invalid_request_error","param":"instructions","message":"`instructions` is not supported: the agent's instructions are its own (instructions.md)"}
        system: {"class":"BadRequestError","status":400,"code":"bad_request","type":"invalid_request_error","param":"messages","message":"a `system` message is not supported: the agent's instructions are its own (instructions.md); send the text as a user message"}
        unknown: {"class":"NotFoundError","status":404,"code":"not_found","type":"not_found_error","param":"response_id","message":"no response `resp_nope.1`"}
        not_latest: {"class":"BadRequestError","status":400,"code":"bad_request","type":"invalid_request_error","param":"previous_response_id","message":"response `R1` is not the latest of its session (a session is one line of turns; continue from `R2` or later)"}
        auth: {"class":"AuthenticationError","status":401,"code":"unauthorized","type":"authentication_error","param":null,"message":"no auth policy admitted the request"}
        other_owner: {"class":"PermissionDeniedError","status":403,"code":"forbidden","type":"permission_error","param":null,"message":"session `S` belongs to another principal"}"#]]
    .assert_eq(
        &v["errors"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, e)| format!("{k}: {e}"))
            .collect::<Vec<_>>()
            .join("\n")
            .replace(second["id"].as_str().unwrap(), "R2")
            .replace(first["id"].as_str().unwrap(), "R1")
            .replace(&session, "S"),
    );

    // The session is an ordinary one on the `openai` channel.
    let info = h.send(Request::get(&format!("/bot/v1/session/{session}")).bearer("sk-alice"));
    assert_eq!(info.status, 200, "{}", info.body);
    assert_eq!(info.json()["channel"], "openai");

    // A response id outlives the server: retrieved and continued after a
    // restart.
    h.restart(ServeOptions::default());
    let base = format!("http://{}/bot/v1", h.addr());
    let rid = second["id"].as_str().unwrap();
    let after = sdk(&["after_restart", &base, "sk-alice", rid]).unwrap();
    assert_eq!(after["retrieved"], *second);
    let continued = &after["continued"];
    assert_eq!(session_of(continued["id"].as_str().unwrap()), session);
    assert!(
        continued["output_text"]
            .as_str()
            .unwrap()
            .starts_with("You said: after the restart")
    );
}

#[test]
fn an_approval_the_turn_waits_on_is_an_mcp_approval_request_answered_by_the_next_request() {
    let h = agents();
    let base = format!("http://{}/guard/v1", h.addr());
    let Some(v) = sdk(&["approval", &base, "sk-alice"]) else {
        return;
    };
    let waiting = &v["waiting"];
    assert_eq!(waiting["status"], "completed");
    let output = waiting["output"].as_array().unwrap();
    assert_eq!(output.len(), 2, "{waiting}");
    assert_eq!(output[0]["type"], "function_call");
    assert_eq!(output[0]["status"], "in_progress");
    assert_eq!(output[1]["type"], "mcp_approval_request");
    assert_eq!(output[1]["name"], "echo");
    assert_eq!(output[1]["server_label"], "guard");
    assert_eq!(output[1]["arguments"], json!({"text": "example"}));

    let resumed = &v["resumed"];
    let session = session_of(waiting["id"].as_str().unwrap());
    assert_eq!(session_of(resumed["id"].as_str().unwrap()), session);
    assert_eq!(resumed["status"], "completed");
    let events = lines(&v["resumed_events"], &session);
    let events = events.replace(
        resumed["id"]
            .as_str()
            .unwrap()
            .replace(&session, "S")
            .as_str(),
        "R",
    );
    let types: Vec<&str> = v["resumed_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(types.first(), Some(&"response.created"), "{events}");
    assert_eq!(types.last(), Some(&"response.completed"), "{events}");
    assert!(
        resumed["output_text"]
            .as_str()
            .unwrap()
            .contains("I called echo({\"text\":\"example\"}) → {\"echo\":{\"text\":\"example\"}}"),
        "{resumed}"
    );
    // The call was decided: deciding it again is a conflict.
    let again = &v["again"];
    assert_eq!(again["status"], 409, "{again}");
    assert_eq!(again["class"], "ConflictError");
}

#[test]
fn a_client_function_tool_ends_the_response_and_a_function_call_output_resumes_it() {
    let h = agents();
    let base = format!("http://{}/desk/v1", h.addr());
    let Some(v) = sdk(&["function", &base, "sk-alice"]) else {
        return;
    };
    // The `test` model calls the client's tool: the response ends at it.
    let first = &v["first"];
    assert_eq!(first["status"], "completed", "{first}");
    assert_eq!(
        first["output"],
        json!([{"type": "function_call", "name": "get_weather", "arguments": {"city": "example"}, "status": "completed"}])
    );
    assert_eq!(v["calls"], json!(["get_weather"]));
    // Its output resumes the turn in the same session: the model saw it.
    let answered = &v["answered"];
    let session = session_of(first["id"].as_str().unwrap());
    assert_eq!(session_of(answered["id"].as_str().unwrap()), session);
    assert_eq!(answered["status"], "completed", "{answered}");
    assert_eq!(answered["previous_response_id"], first["id"]);
    assert_eq!(
        answered["output_text"],
        "You said: weather please\nI called get_weather({\"city\":\"example\"}) → sunny, 21 C"
    );
    let types: Vec<&str> = v["answered_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(types.first(), Some(&"response.created"));
    assert_eq!(types.last(), Some(&"response.completed"));
    assert!(
        !types.contains(&"response.function_call_arguments.delta"),
        "{types:?}"
    );
    // Answered already: nothing waits for it.
    let again = &v["again"];
    assert_eq!(again["status"], 400, "{again}");
    assert!(
        again["message"]
            .as_str()
            .unwrap()
            .contains("waits for its output"),
        "{again}"
    );
    // A function named as one of the agent's own tools is refused.
    let clash = &v["clash"];
    assert_eq!(clash["status"], 400, "{clash}");
    assert!(
        clash["message"]
            .as_str()
            .unwrap()
            .contains("client tool `echo` clashes with the agent's own tool"),
        "{clash}"
    );
}

/// The Python examples of `docs/reference/openai-compatible.md`, run in
/// order as one script against an agent named as they name it.
#[test]
#[allow(clippy::print_stderr)]
fn the_docs_sdk_examples_run_as_written() {
    let bin = match agentkit_test_support::pyenv::pyenv_bin("openai docs examples") {
        Ok(bin) => bin,
        Err(skip) => return eprintln!("{skip}"),
    };
    let h = host(
        &[(
            "weather",
            &[
                ("agent.toml", "model = \"test\"\n"),
                ("instructions.md", "You tell the weather.\n"),
                ("tools/clear_cache.toml", GUARDED_TOOL),
                (
                    "channels/http.toml",
                    "kind = \"http\"\nauth = [{ bearer = { token = \"sk-my-token\" } }]\n",
                ),
            ],
        )],
        ServeOptions::default(),
    );
    let doc = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/reference/openai-compatible.md"),
    )
    .unwrap();
    let mut script = String::new();
    let mut inside = false;
    for line in doc.lines() {
        match (inside, line.trim_end()) {
            (false, "```python") => inside = true,
            (true, "```") => {
                inside = false;
                script.push('\n');
            }
            (true, line) => {
                script.push_str(line);
                script.push('\n');
            }
            _ => {}
        }
    }
    assert!(script.contains("client.responses.create"), "{script}");
    let script = script.replace("http://localhost:8080", &format!("http://{}", h.addr()));
    let out = std::process::Command::new(bin.join("python"))
        .arg("-c")
        .arg(&script)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the docs' examples failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The approval example resumed the parked call, which then ran.
    assert!(stdout.contains("I called clear_cache"), "{stdout}");
    assert!(stdout.contains("tokens:"), "{stdout}");
}
