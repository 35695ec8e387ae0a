//! `ctx.services::<agentkit::HostServices>()`: what a Rust tool reaches of
//! its host (the key-value store, reminders, MCP connections), through a
//! real server: deterministic calls over HTTP and a model turn.

use agentkit::{HostServices, ReminderAction, ReminderWhen, RustTool, ServeOptions, ToolContext};
use agentkit_test_support::http::Request;
use serde_json::{Value, json};

use super::mcp::host;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Probe {
    /// `set`, `get`, `remind`, `names` or `time`.
    op: String,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    value: Option<Value>,
}

async fn probe(input: Probe, ctx: ToolContext) -> Result<Value, String> {
    let host = ctx
        .services::<HostServices>()
        .ok_or("no host services")?
        .clone();
    let key = || input.key.clone().unwrap_or_default();
    match input.op.as_str() {
        "set" => {
            let value = input.value.clone().unwrap_or(Value::Null);
            let entry = host
                .kv
                .set(&key(), &value, None)
                .await
                .map_err(|e| e.to_string())?;
            Ok(json!({"slug": host.slug, "set": entry.key}))
        }
        "get" => {
            let entry = host.kv.get(&key()).await.map_err(|e| e.to_string())?;
            Ok(json!({"value": entry.map(|e| e.value)}))
        }
        "remind" => {
            let reminder = host
                .reminders
                .create_for_session(
                    &ctx.session_id,
                    "probe",
                    ReminderWhen::Delay(std::time::Duration::from_secs(3600)),
                    ReminderAction::Prompt {
                        prompt: "check again".into(),
                        until: None,
                    },
                )
                .await
                .map_err(|e| e.to_string())?;
            Ok(json!({"reminderId": reminder.id}))
        }
        "names" => Ok(json!({"names": host.mcp.names()})),
        "files" => {
            let files = &host.files;
            let size = files
                .write(&ctx.session_id, &key(), b"from rust".to_vec())
                .await
                .map_err(|e| e.to_string())?;
            let back = files
                .read(&ctx.session_id, &key())
                .await
                .map_err(|e| e.to_string())?;
            let page = files
                .list(&ctx.session_id, 1000, None)
                .await
                .map_err(|e| e.to_string())?;
            let escape = files
                .write(&ctx.session_id, "../out.txt", b"no".to_vec())
                .await
                .map_err(|e| e.status());
            Ok(json!({
                "size": size,
                "read": String::from_utf8_lossy(&back),
                "listed": page.files.iter().map(|f| f.path.clone()).collect::<Vec<_>>(),
                "escape": escape.err(),
            }))
        }
        "time" => {
            let result = host
                .mcp
                .in_session(&ctx.session_id)
                .call_tool(
                    "time",
                    "get_current_time",
                    json!({"timezone": "Asia/Tokyo"}),
                )
                .await
                .map_err(|e| e.to_string())?;
            Ok(result.to_json())
        }
        other => Err(format!("unknown op `{other}`")),
    }
}

fn options() -> ServeOptions {
    ServeOptions::default().tool(RustTool::new(
        "probe",
        "Reaches the host's services.",
        probe,
    ))
}

const SCRIPT: &str = r#"{"turns": [{"steps": [
    {"toolCalls": [{"name": "probe", "input": {"op": "remind"}}]},
    {"text": "Reminder set."}
]}]}"#;

fn bot() -> Vec<(&'static str, &'static str)> {
    vec![
        ("agent.toml", "model = \"scripted:script.json\"\n"),
        ("script.json", SCRIPT),
        ("instructions.md", "Set reminders.\n"),
    ]
}

fn call(h: &super::mcp::Host, input: Value) -> Value {
    let r = h.send(Request::post("/bot/v1/tools/probe").json(&json!({ "input": input })));
    assert_eq!(r.status, 200, "{}", r.body);
    let body = r.json();
    assert_eq!(body["isError"], false, "{body}");
    body["result"].clone()
}

/// The key-value store is the agent's durable one: what a Rust tool sets
/// survives a restart (and is the same store the host bridge serves).
#[test]
fn a_rust_tool_uses_the_agents_key_value_store() {
    let mut h = host(&[("bot", &bot())], options());
    let set = call(
        &h,
        json!({"op": "set", "key": "greeting", "value": {"text": "hi"}}),
    );
    assert_eq!(set, json!({"slug": "bot", "set": "greeting"}));
    h.restart(options());
    let got = call(&h, json!({"op": "get", "key": "greeting"}));
    assert_eq!(got["value"], json!({"text": "hi"}));
    let missing = call(&h, json!({"op": "get", "key": "other"}));
    assert_eq!(missing["value"], Value::Null);
}

/// A Rust tool called by the model reminds its own conversation: the
/// reminder is bound to the session's channel and continuation.
#[test]
fn a_rust_tool_creates_a_reminder_for_its_session() {
    let h = host(&[("bot", &bot())], options());
    let created = h.send(Request::post("/bot/v1/session").json(&json!({"message": "remind me"})));
    assert_eq!(created.status, 200, "{}", created.body);
    let id = created.json()["sessionId"].as_str().unwrap().to_owned();
    let mut lines = Request::get(&format!("/bot/v1/session/{id}/stream"))
        .stream(h.addr())
        .unwrap();
    let events = lines.until("session.waiting").unwrap();
    let result = events
        .iter()
        .find(|e| e["type"] == "action.result")
        .expect("the probe ran");
    assert_eq!(result["data"]["isError"], false, "{result}");
    let reminder_id = result["data"]["output"]["reminderId"]
        .as_str()
        .expect("a reminder id")
        .to_owned();
    let runtime = h.handle.as_ref().unwrap().runtime("bot").unwrap();
    let reminders = h.rt.block_on(runtime.reminders().list()).unwrap();
    let reminder = reminders.iter().find(|r| r.id == reminder_id).unwrap();
    assert_eq!(reminder.session_id.as_deref(), Some(id.as_str()));
    assert_eq!(reminder.purpose, "probe");
    assert_eq!(reminder.status, "armed");
    assert_eq!(reminder.prompt.as_deref(), Some("check again"));
}

/// `host.files` reads, writes and lists the calling session's
/// workspace, under the one path guard.
#[test]
fn a_rust_tool_reads_writes_and_lists_its_sessions_workspace() {
    let h = host(&[("bot", &bot())], options());
    let created = h.send(Request::post("/bot/v1/session").json(&json!({"message": "remind me"})));
    assert_eq!(created.status, 200, "{}", created.body);
    let id = created.json()["sessionId"].as_str().unwrap().to_owned();
    // A call in the session waits for its first turn to settle.
    Request::get(&format!("/bot/v1/session/{id}/stream"))
        .stream(h.addr())
        .unwrap()
        .until("session.waiting")
        .unwrap();
    let r = h.send(
        Request::post("/bot/v1/tools/probe")
            .json(&json!({"sessionId": id, "input": {"op": "files", "key": "out/rust.txt"}})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let out = r.json()["result"].clone();
    assert_eq!(out["size"], 9, "{out}");
    assert_eq!(out["read"], "from rust", "{out}");
    let listed: Vec<&str> = out["listed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert!(listed.contains(&"out/rust.txt"), "{out}");
    assert!(listed.contains(&"AGENTS.md"), "{out}");
    assert_eq!(out["escape"], 400, "{out}");
    let r = h.send(Request::get(&format!(
        "/bot/v1/session/{id}/files/out/rust.txt"
    )));
    assert_eq!((r.status, r.body.as_str()), (200, "from rust"));
}

/// `host.mcp` reaches the agent's connections, here the real
/// `mcp-server-time` from PyPI as a stdio child.
#[test]
#[allow(clippy::print_stderr)]
fn a_rust_tool_calls_an_mcp_connection() {
    let bin = match agentkit_test_support::pyenv::pyenv_bin("host.mcp from a Rust tool") {
        Ok(bin) => bin,
        Err(skip) => return eprintln!("{skip}"),
    };
    let conn = format!(
        "command = \"{}\"\nargs = [\"--local-timezone\", \"UTC\"]\n",
        bin.join("mcp-server-time").display()
    );
    let mut files = bot();
    files.push(("mcp-connections/time.toml", &conn));
    let h = host(&[("bot", &files)], options());
    assert_eq!(call(&h, json!({"op": "names"})), json!({"names": ["time"]}));
    let time = call(&h, json!({"op": "time"}));
    assert_eq!(time["isError"], false, "{time}");
    assert!(time.to_string().contains("Asia/Tokyo"), "{time}");
}
