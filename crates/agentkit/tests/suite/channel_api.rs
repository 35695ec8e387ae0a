//! The Rust channel API's session helpers over a real server: a channel
//! handler resolves a parked approval, appends assistant text without a
//! model turn, and starts sessions frozen at an instant; on a shared
//! database, its stop reaching another host stops the turn where it runs.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use agentkit::channels::{
    ApprovalDecision, ChannelDefinition, ChannelResponse, RouteDef, SendOptions,
};
use agentkit::manifest::Method;
use agentkit::{ServeHandle, ServeOptions};
use agentkit_test_support::http::Request;
use serde_json::{Value, json};

const ECHO_TOOL: &str = r#"description = "Echo, after a human agrees"
command = ["python3", "echo.py"]
needs_approval = true
[input_schema]
type = "object"
required = ["text"]
properties.text = { type = "string" }
"#;

const ECHO_PY: &str = r#"import json, sys
args = json.load(sys.stdin)
print(json.dumps({"echo": args["text"]}))
"#;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

struct Host {
    _dir: tempfile::TempDir,
    rt: tokio::runtime::Runtime,
    handle: Option<ServeHandle>,
    /// The request bodies the mock model received.
    model_requests: Requests,
}

type Requests = Arc<Mutex<Vec<Value>>>;

/// A Chat Completions server that records each request body and answers
/// "noted" (a server that ignores `stream: true` and answers one object,
/// which the `openai` provider accepts).
async fn model_mock(requests: Requests) -> SocketAddr {
    use axum::routing::post;
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        post(move |body: axum::Json<Value>| {
            let requests = requests.clone();
            async move {
                requests.lock().unwrap().push(body.0);
                axum::Json(json!({
                    "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": "noted"}}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
                }))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

impl Host {
    /// An agent `bot` on the scripted model `script` (or, when `script`
    /// is empty, the `openai` provider against [`model_mock`]), with the
    /// channel `def` mounted.
    fn new(script: &str, def: ChannelDefinition) -> Host {
        Host::with(script, def, &[], ServeOptions::default())
    }

    /// [`Host::new`] with more agent files and serve options.
    fn with(
        script: &str,
        def: ChannelDefinition,
        files: &[(&str, &str)],
        options: ServeOptions,
    ) -> Host {
        let dir = tempfile::tempdir().unwrap();
        let agent = dir.path().join("bot/agent");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let model_requests = Requests::default();
        let mut providers = agentkit::ProviderConfig::default();
        if script.is_empty() {
            let addr = rt.block_on(model_mock(model_requests.clone()));
            providers.openai = agentkit::Endpoint {
                api_key: Some("sk-test".into()),
                base_url: format!("http://{addr}/v1"),
            };
            write(&agent.join("agent.toml"), "model = \"openai:gpt-test\"\n");
        } else {
            write(
                &agent.join("agent.toml"),
                "model = \"scripted:script.json\"\n",
            );
        }
        write(&agent.join("instructions.md"), "You are a test agent.\n");
        write(&agent.join("script.json"), script);
        write(&agent.join("tools/echo.toml"), ECHO_TOOL);
        write(&agent.join("tools/echo.py"), ECHO_PY);
        for (rel, text) in files {
            write(&agent.join(rel), text);
        }
        let handle = rt
            .block_on(agentkit::serve(
                &dir.path().join("bot"),
                ServeOptions {
                    port: 0,
                    state_root: Some(dir.path().join("state")),
                    channels: vec![("bot".into(), def)],
                    providers,
                    ..options
                },
            ))
            .unwrap();
        Host {
            _dir: dir,
            rt,
            handle: Some(handle),
            model_requests,
        }
    }

    fn addr(&self) -> std::net::SocketAddr {
        self.handle.as_ref().unwrap().local_addr()
    }

    fn post(&self, path: &str, body: Value) -> agentkit_test_support::http::Response {
        Request::post(path).json(&body).send(self.addr()).unwrap()
    }

    /// The session's stream from 0 up to the `n`th event of type `t`.
    fn until(&self, id: &str, t: &str, n: usize) -> Vec<Value> {
        let mut lines = Request::get(&format!("/bot/v1/session/{id}/stream?startIndex=0"))
            .stream(self.addr())
            .unwrap();
        let mut seen = Vec::new();
        let mut hits = 0;
        loop {
            let event = lines
                .next_json()
                .unwrap()
                .unwrap_or_else(|| panic!("stream ended before {t}: {seen:#?}"));
            let hit = event["type"] == t;
            seen.push(event);
            if hit {
                hits += 1;
                if hits == n {
                    return seen;
                }
            }
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            self.rt.block_on(h.close());
        }
    }
}

/// `POST /msg {text}`: a message into the session keyed `c:1`.
fn message_route() -> RouteDef {
    RouteDef::new(Method::Post, "/msg", |args| async move {
        let s = args
            .ctx
            .send(
                args.body["text"].as_str().unwrap_or("").to_owned(),
                SendOptions {
                    continuation_token: Some("c:1".into()),
                    ..SendOptions::default()
                },
                &args.auth,
            )
            .await?;
        Ok(ChannelResponse::json(202, json!({"sessionId": s.id})))
    })
    .body_schema(json!({"type": "object", "required": ["text"]}))
}

#[test]
fn a_channel_handler_approves_a_parked_call_and_the_turn_goes_on() {
    let script = r#"{"turns": [
      {"steps": [{"toolCalls": [{"name": "echo", "input": {"text": "hi"}}]}, {"text": "after approval"}]}
    ]}"#;
    let def = ChannelDefinition::new("chat").route(message_route()).route(
        RouteDef::new(Method::Post, "/decide", |args| async move {
            let decision = if args.body["approve"] == true {
                ApprovalDecision::approve()
            } else {
                ApprovalDecision::deny("no")
            };
            let r = args
                .ctx
                .resolve_approval(
                    args.body["session"].as_str().unwrap_or(""),
                    args.body["call"].as_str().unwrap_or(""),
                    decision,
                    &args.auth,
                )
                .await?;
            Ok(ChannelResponse::json(
                200,
                json!({"by": r.by, "decision": r.decision, "principal": args.auth.principal_id}),
            ))
        })
        .body_schema(json!({"type": "object", "required": ["session", "call"]})),
    );
    let host = Host::new(script, def);
    let r = host.post("/bot/v1/channels/chat/msg", json!({"text": "go"}));
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let events = host.until(&id, "action.approval_requested", 1);
    let call = events.last().unwrap()["data"]["callId"]
        .as_str()
        .unwrap()
        .to_owned();

    // Another session's id, or a call that never parked, is refused.
    let r = host.post(
        "/bot/v1/channels/chat/decide",
        json!({"session": "ses_nope", "call": call, "approve": true}),
    );
    assert_eq!(
        (r.status, r.error_code()),
        (404, "session_not_found".into())
    );
    let r = host.post(
        "/bot/v1/channels/chat/decide",
        json!({"session": id, "call": "nope", "approve": true}),
    );
    assert_eq!(
        (r.status, r.error_code()),
        (404, "approval_not_found".into())
    );

    let r = host.post(
        "/bot/v1/channels/chat/decide",
        json!({"session": id, "call": call, "approve": true}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let answer = r.json();
    assert_eq!(answer["decision"], "approve");
    assert_eq!(answer["by"], answer["principal"]);

    let events = host.until(&id, "turn.completed", 1);
    assert_eq!(events.last().unwrap()["data"]["result"], "after approval");
    let resolved = events
        .iter()
        .find(|e| e["type"] == "action.approval_resolved")
        .unwrap();
    assert_eq!(resolved["data"]["by"], answer["principal"]);
    let result = events
        .iter()
        .find(|e| e["type"] == "action.result")
        .unwrap();
    assert_eq!(result["data"]["output"], json!({"echo": "hi"}));
    assert_eq!(result["data"]["isError"], false);
}

#[test]
fn emitted_assistant_text_is_a_short_turn_the_model_sees_later() {
    let def = ChannelDefinition::new("chat").route(message_route()).route(
        RouteDef::new(Method::Post, "/say", |args| async move {
            let turn = args
                .ctx
                .emit_assistant_message(
                    args.body["session"].as_str().unwrap_or(""),
                    args.body["text"].as_str().unwrap_or(""),
                )
                .await?;
            Ok(ChannelResponse::json(200, json!({"turnId": turn})))
        })
        .body_schema(json!({"type": "object", "required": ["session", "text"]})),
    );
    let host = Host::new("", def);
    let r = host.post("/bot/v1/channels/chat/msg", json!({"text": "hello"}));
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    host.until(&id, "session.waiting", 1);
    assert_eq!(host.model_requests.lock().unwrap().len(), 1);

    let r = host.post(
        "/bot/v1/channels/chat/say",
        json!({"session": id, "text": "Your build 42 is green."}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let turn = r.json()["turnId"].as_str().unwrap().to_owned();
    let events = host.until(&id, "session.waiting", 2);
    let emitted: Vec<String> = events
        .iter()
        .filter(|e| e["turnId"] == turn.as_str())
        .map(|e| format!("{} {}", e["type"].as_str().unwrap(), e["data"]))
        .collect();
    assert_eq!(
        emitted,
        vec![
            r#"turn.started {"messages":0,"kind":"emitted","received":[]}"#.to_owned(),
            r#"message.appended {"delta":"Your build 42 is green.","text":"Your build 42 is green."}"#.to_owned(),
            r#"message.completed {"text":"Your build 42 is green.","finishReason":"stop"}"#.to_owned(),
            r#"turn.completed {"result":"Your build 42 is green.","usage":{"inputTokens":0,"outputTokens":0,"cacheReadTokens":0,"cacheWriteTokens":0},"kind":"emitted","costUsd":0.0}"#.to_owned(),
        ]
    );
    // No model was called for it.
    assert_eq!(host.model_requests.lock().unwrap().len(), 1);

    // The next turn's request carries it as an assistant message, after
    // the first exchange and before the new user message.
    let r = host.post("/bot/v1/channels/chat/msg", json!({"text": "thanks"}));
    assert_eq!(r.status, 202, "{}", r.body);
    host.until(&id, "session.waiting", 3);
    let requests = host.model_requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2);
    let said: Vec<String> = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            format!(
                "{}: {}",
                m["role"].as_str().unwrap(),
                m["content"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        said,
        vec![
            "user: hello",
            "assistant: noted",
            "assistant: Your build 42 is green.",
            "user: thanks"
        ]
    );

    // Empty text, and another channel's session, are refused.
    let r = host.post(
        "/bot/v1/channels/chat/say",
        json!({"session": id, "text": " "}),
    );
    assert_eq!((r.status, r.error_code()), (400, "bad_request".into()));
    let r = host.post(
        "/bot/v1/channels/chat/say",
        json!({"session": "ses_other", "text": "x"}),
    );
    assert_eq!(
        (r.status, r.error_code()),
        (404, "session_not_found".into())
    );
}

#[test]
fn emitting_into_a_session_running_a_turn_answers_busy() {
    let script = r#"{"turns": [{"steps": [{"text": "slow", "delayMs": 30000}]}]}"#;
    let def = ChannelDefinition::new("chat").route(message_route()).route(
        RouteDef::new(Method::Post, "/say", |args| async move {
            args.ctx
                .emit_assistant_message(args.body["session"].as_str().unwrap_or(""), "hi")
                .await?;
            Ok(ChannelResponse::json(200, json!({})))
        })
        .body_schema(json!({"type": "object", "required": ["session"]})),
    );
    let host = Host::new(script, def);
    let r = host.post("/bot/v1/channels/chat/msg", json!({"text": "go"}));
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    host.until(&id, "turn.started", 1);
    let r = host.post("/bot/v1/channels/chat/say", json!({"session": id}));
    assert_eq!((r.status, r.error_code()), (409, "session_busy".into()));
}

/// `POST /frozen {at, text}`: a new session frozen at `at`.
fn frozen_route() -> RouteDef {
    RouteDef::new(Method::Post, "/frozen", |args| async move {
        let s = args
            .ctx
            .send(
                args.body["text"].as_str().unwrap_or("").to_owned(),
                SendOptions {
                    as_of: args.body["at"].as_str().map(str::to_owned),
                    ..SendOptions::default()
                },
                &args.auth,
            )
            .await?;
        Ok(ChannelResponse::json(202, json!({"sessionId": s.id})))
    })
    .body_schema(json!({"type": "object", "required": ["at", "text"]}))
}

#[test]
fn a_session_frozen_at_an_instant_tells_the_model_and_keeps_it() {
    let def = ChannelDefinition::new("chat")
        .route(frozen_route())
        .route(message_route());
    let host = Host::new("", def);
    let r = host.post(
        "/bot/v1/channels/chat/frozen",
        json!({"at": "2025-01-15T10:30:00+01:00", "text": "What day is it?"}),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let events = host.until(&id, "session.waiting", 1);
    assert_eq!(events[0]["data"]["asOf"], "2025-01-15T10:30:00+01:00");
    let system = |i: usize| host.model_requests.lock().unwrap()[i]["messages"][0].clone();
    assert_eq!(system(0)["role"], "system");
    assert_eq!(
        system(0)["content"],
        "You are a test agent.\n\nThe current date and time is 2025-01-15T10:30:00+01:00."
    );
    let r = Request::get(&format!("/bot/v1/session/{id}"))
        .send(host.addr())
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["asOf"], "2025-01-15T10:30:00+01:00");
    assert_eq!(r.json()["channel"], "chat");

    // A session that is not frozen is told nothing about time.
    let r = host.post("/bot/v1/channels/chat/msg", json!({"text": "hi"}));
    let other = r.json()["sessionId"].as_str().unwrap().to_owned();
    host.until(&other, "session.waiting", 1);
    assert_eq!(system(1)["content"], "You are a test agent.");
    let r = Request::get(&format!("/bot/v1/session/{other}"))
        .send(host.addr())
        .unwrap();
    assert_eq!(r.json()["asOf"], Value::Null);

    // No time zone, or no instant at all: 400, and no session.
    for bad in ["2025-01-15T10:30:00", "next tuesday"] {
        let r = host.post(
            "/bot/v1/channels/chat/frozen",
            json!({"at": bad, "text": "x"}),
        );
        assert_eq!(r.status, 400, "{}", r.body);
        let message = r.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(
            message.contains("ISO-8601") && message.contains(bad),
            "{message}"
        );
    }
    assert_eq!(host.model_requests.lock().unwrap().len(), 2);
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Nothing {}

const WHEN_TOOL: &str = r#"description = "Says when the session lives"
command = ["python3", "when.py"]
[input_schema]
type = "object"
"#;

const WHEN_PY: &str = r#"import json, os
print(json.dumps({"asOf": os.environ.get("AGENTKIT_AS_OF")}))
"#;

const FROZEN_CHANNEL: &str = r#"kind = "webhook"
[[routes]]
method = "POST"
path = "/run"
[routes.body_schema]
type = "object"
required = ["at"]
[routes.send]
message = "When is it?"
as_of = "{{ body.at }}"
"#;

#[test]
fn tools_of_a_frozen_session_get_its_instant_from_a_templated_channel() {
    let script = r#"{"turns": [{"steps": [
      {"toolCalls": [{"name": "when", "input": {}}, {"name": "when_rust", "input": {}}]},
      {"text": "done"}
    ]}]}"#;
    let options = ServeOptions::default().tool(agentkit::RustTool::new(
        "when_rust",
        "Says when the session lives.",
        |_: Nothing, ctx: agentkit::ToolContext| async move { Ok(json!({"asOf": ctx.as_of})) },
    ));
    let host = Host::with(
        script,
        ChannelDefinition::new("chat"),
        &[
            ("tools/when.toml", WHEN_TOOL),
            ("tools/when.py", WHEN_PY),
            ("channels/frozen.toml", FROZEN_CHANNEL),
        ],
        options,
    );
    let r = host.post(
        "/bot/v1/channels/frozen/run",
        json!({"at": "2024-02-29T23:59:59Z"}),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let events = host.until(&id, "turn.completed", 1);
    let mut results: Vec<String> = events
        .iter()
        .filter(|e| e["type"] == "action.result")
        .map(|e| format!("{} {}", e["data"]["toolName"], e["data"]["output"]))
        .collect();
    results.sort();
    assert_eq!(
        results,
        vec![
            r#""when" {"asOf":"2024-02-29T23:59:59Z"}"#,
            r#""when_rust" {"asOf":"2024-02-29T23:59:59Z"}"#,
        ]
    );
    let r = host.post("/bot/v1/channels/frozen/run", json!({"at": "yesterday"}));
    assert_eq!((r.status, r.error_code()), (400, "bad_request".into()));
}

/// The handler argument `host`: a channel handler reaches the agent's
/// services (here its key-value store, which a later request reads back).
#[test]
fn a_channel_handler_reaches_the_host_services() {
    let def = ChannelDefinition::new("chat")
        .route(
            RouteDef::new(Method::Post, "/remember", |args| async move {
                let host = args
                    .ctx
                    .services::<agentkit::HostServices>()
                    .expect("served by agentkit");
                let entry = host
                    .kv
                    .set("note", &args.body["note"], None)
                    .await
                    .expect("the kv store takes the note");
                Ok(ChannelResponse::json(
                    200,
                    json!({"slug": host.slug, "key": entry.key}),
                ))
            })
            .body_schema(json!({"type": "object", "required": ["note"]})),
        )
        .route(RouteDef::new(
            Method::Delete,
            "/remember",
            |args| async move {
                let host = args
                    .ctx
                    .services::<agentkit::HostServices>()
                    .expect("served by agentkit");
                let entry = host.kv.get("note").await.ok().flatten();
                Ok(ChannelResponse::json(
                    200,
                    json!({"note": entry.map(|e| e.value)}),
                ))
            },
        ));
    let h = Host::new(r#"{"turns": []}"#, def);
    let r = h.post(
        "/bot/v1/channels/chat/remember",
        json!({"note": "oven at 6"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json(), json!({"slug": "bot", "key": "note"}));
    let r = Request::new("DELETE", "/bot/v1/channels/chat/remember")
        .send(h.addr())
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["note"], "oven at 6");
}

/// `POST /stop`: the channel's own stop action for the key `c:1`.
fn stop_route() -> RouteDef {
    RouteDef::new(Method::Post, "/stop", |args| async move {
        let interrupted = args.ctx.interrupt_continuation("c:1").await?;
        Ok(ChannelResponse::json(
            200,
            json!({"interrupted": interrupted}),
        ))
    })
    .body_schema(json!({"type": "object"}))
}

#[test]
fn a_channels_stop_reaching_another_host_stops_the_turn_where_it_runs() {
    let Some(db) = agentkit_test_support::pg::throwaway_database() else {
        return;
    };
    let script = r#"{"turns": [{"steps": [{"text": "a long turn", "delayMs": 60000}]}]}"#;
    let on_db = || ServeOptions {
        database_url: Some(db.url.clone()),
        ..ServeOptions::default()
    };
    let def = || {
        ChannelDefinition::new("chat")
            .route(message_route())
            .route(stop_route())
    };
    let a = Host::with(script, def(), &[], on_db());
    let b = Host::with(script, def(), &[], on_db());
    let r = a.post("/bot/v1/channels/chat/msg", json!({"text": "go"}));
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    a.until(&id, "turn.started", 1);
    // B does not run the turn: its stop is routed to A.
    let r = b.post("/bot/v1/channels/chat/stop", json!({}));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["interrupted"], true, "{}", r.body);
    let events = b.until(&id, "turn.failed", 1);
    assert_eq!(events.last().unwrap()["data"]["reason"], "stopped");
}
