//! The step view over HTTP: every step's request rebuilt from the log is
//! the JSON body the mock provider received, through tool calls, a
//! subagent, a compaction and a restart in the middle of the session; the list
//! carries each step's model, usage and cost; the token breakdown and the
//! diff to the previous step say what changed.

use agentkit::ServeOptions;
use agentkit_test_support::http::Request;
use agentkit_test_support::provider::{MockProvider, Step};
use serde_json::{Value, json};

use super::mcp::{Host, host};

const TOKEN: &str = "op-steps";

fn options(mock: &MockProvider) -> ServeOptions {
    let mut providers = agentkit::ProviderConfig::default();
    providers.openai.base_url = mock.openai_base_url();
    providers.openai.api_key = Some("sk-mock".into());
    ServeOptions {
        providers,
        operator_token: Some(TOKEN.into()),
        ..ServeOptions::default()
    }
}

fn is_summary_request(body: &Value) -> bool {
    body["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with("You compact a conversation"))
}

/// A request of the subagent's own loop (not a step of the session).
fn is_subagent_request(body: &Value) -> bool {
    body["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with("You count things."))
}

/// Sends one message (a new session or a follow-up) and waits for its
/// turn to settle; returns the session id and the new token.
fn turn(h: &Host, session: Option<&(String, String)>, message: &str) -> (String, String) {
    let (path, body, start) = match session {
        None => (
            "/bot/v1/session".to_owned(),
            json!({ "message": message }),
            0,
        ),
        Some((id, token)) => {
            let events =
                h.send(Request::get(&format!("/bot/v1/session/{id}/events")).bearer(TOKEN));
            (
                format!("/bot/v1/session/{id}"),
                json!({ "message": message, "continuationToken": token }),
                events.body.lines().count(),
            )
        }
    };
    let r = h.send(Request::post(&path).bearer(TOKEN).json(&body));
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let token = r.json()["continuationToken"].as_str().unwrap().to_owned();
    let mut lines = Request::get(&format!("/bot/v1/session/{id}/stream?startIndex={start}"))
        .bearer(TOKEN)
        .stream(h.addr())
        .unwrap();
    let mut started = false;
    while let Some(e) = lines.next_json().unwrap() {
        started |= e["type"] == "turn.started";
        assert_ne!(e["type"], "turn.failed", "{e}");
        if started && e["type"] == "session.waiting" {
            break;
        }
    }
    (id, token)
}

#[test]
fn every_rebuilt_step_request_is_what_the_provider_received() {
    // A step whose request ends with the user's message lists the
    // workspace; one that ends with the listing answers; a compaction's
    // summary request gets a summary. Counted input tokens follow the
    // request's size.
    let reply = format!("Noted. {}", "r".repeat(700));
    let mock = MockProvider::responding(move |body| {
        if is_summary_request(body) {
            return Step::text("Earlier: notes were kept.").into();
        }
        if is_subagent_request(body) {
            return Step::text("Three.").tokens(50, 2, 0, 0).into();
        }
        let messages = body["messages"].as_array().unwrap();
        let input = body.to_string().len() as u64 / 4;
        let last = messages.last().unwrap();
        if last["role"] == "tool" {
            Step::text(&reply).tokens(input, 200, 0, 0).into()
        } else {
            let n = messages.iter().filter(|m| m["role"] == "user").count();
            // Every third turn delegates to the subagent.
            let call = if last["content"].as_str().unwrap_or("").contains("delegate") {
                Step::new().call(
                    &format!("c{n}"),
                    "task",
                    &json!({"subagent": "helper", "prompt": "count the notes"}),
                )
            } else {
                Step::new().call(&format!("c{n}"), "list", &json!({"path": "."}))
            };
            call.tokens(input, 20, 0, 0).into()
        }
    });
    let agent_toml = "[model]\nprovider = \"openai\"\nid = \"gpt-mock\"\ncontext_window = 4000\nmax_output_tokens = 500\nparams = { temperature = 0.3 }\n[model.pricing]\ninput = 1\noutput = 4\n[harness]\nbuiltin_tools = [\"list\"]\n";
    let files: Vec<(&str, &str)> = vec![
        ("agent.toml", agent_toml),
        ("instructions.md", "You keep notes.\n"),
        (
            "subagents/helper/agent.toml",
            "description = \"Counts things\"\n[harness]\nbuiltin_tools = []\n",
        ),
        ("subagents/helper/instructions.md", "You count things.\n"),
    ];
    let mut h = host(&[("bot", &files)], options(&mock));
    let mut session: Option<(String, String)> = None;
    for i in 0..8 {
        let ask = if i % 3 == 1 { "delegate" } else { "note" };
        let message = format!("{ask} {i}: {}", "m".repeat(700));
        session = Some(turn(&h, session.as_ref(), &message));
        if i == 3 {
            h.restart(options(&mock));
        }
    }
    let (id, _) = session.unwrap();
    let sent: Vec<Value> = mock
        .bodies()
        .into_iter()
        .filter(|b| !is_summary_request(b) && !is_subagent_request(b))
        .collect();
    let delegated = mock
        .bodies()
        .iter()
        .filter(|b| is_subagent_request(b))
        .count();
    assert!(delegated >= 2, "the subagent never ran");
    let compactions = mock
        .bodies()
        .iter()
        .filter(|b| is_summary_request(b))
        .count();
    assert!(compactions >= 1, "the session never compacted");

    let list = h
        .send(Request::get(&format!("/bot/v1/session/{id}/steps")).bearer(TOKEN))
        .json();
    let steps = list["steps"].as_array().unwrap();
    assert_eq!(steps.len(), sent.len(), "{list}");
    assert_eq!(steps.len(), 16);
    assert_eq!(steps[0]["model"], "openai:gpt-mock");
    assert_eq!(steps[0]["turnStep"], 1);
    assert_eq!(steps[1]["turnStep"], 2);
    for s in steps {
        let (input, output) = (
            s["usage"]["inputTokens"].as_f64().unwrap(),
            s["usage"]["outputTokens"].as_f64().unwrap(),
        );
        let cost = s["costUsd"].as_f64().unwrap();
        assert!((cost - (input + 4.0 * output) / 1e6).abs() < 1e-9, "{s}");
    }

    for (n, wire) in sent.iter().enumerate() {
        let view = h
            .send(
                Request::get(&format!("/bot/v1/session/{id}/steps/{}/request", n + 1))
                    .bearer(TOKEN),
            )
            .json();
        assert_eq!(&view["body"], wire, "step {}: {view}", n + 1);
        let tokens = &view["tokens"];
        assert_eq!(tokens["countedInput"], steps[n]["usage"]["inputTokens"]);
        assert!(tokens["system"].as_u64().unwrap() > 0);
        assert!(tokens["newMessage"].as_u64().unwrap() > 100, "{tokens}");
        if n == 0 {
            assert_eq!(view["diff"], Value::Null);
        } else if n % 2 == 1 {
            // The second step of a turn adds the call and its result.
            let diff = view["diff"].as_array().unwrap();
            let added: Vec<&Value> = diff.iter().filter(|d| d["op"] == "added").collect();
            assert!(added.len() >= 2, "step {}: {diff:?}", n + 1);
            assert!(tokens["toolResults"].as_u64().unwrap() > 0, "{tokens}");
        }
    }

    // Refusals: no such step, not a number, not an operator.
    let r = h.send(Request::get(&format!("/bot/v1/session/{id}/steps/99/request")).bearer(TOKEN));
    assert_eq!(r.status, 404, "{}", r.body);
    let r = h.send(Request::get(&format!("/bot/v1/session/{id}/steps/zero/request")).bearer(TOKEN));
    assert_eq!(r.status, 400, "{}", r.body);
    let r = h.send(Request::get(&format!(
        "/bot/v1/session/{id}/steps/1/request"
    )));
    assert_eq!(r.status, 403, "{}", r.body);
}
