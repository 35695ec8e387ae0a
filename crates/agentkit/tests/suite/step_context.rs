//! A step's context rebuilt from the log stays what the provider was sent
//! when the conversation outgrows the model's window: turn after turn
//! through a small window, compactions included, the rebuilt conversation
//! equals the request's messages (the summary first once compacted), and
//! its size is the estimate the turn checked.

use agentkit::ServeOptions;
use agentkit_test_support::http::Request;
use agentkit_test_support::provider::{MockProvider, Step};
use serde_json::{Value, json};

use super::mcp::host;

const TOKEN: &str = "op-step-context";

fn is_summary_request(body: &Value) -> bool {
    body["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with("You compact a conversation"))
}

/// What the wire message says, as the fold would write it.
fn text_of(wire: &Value) -> &str {
    wire["content"].as_str().unwrap_or("")
}

#[test]
fn the_rebuilt_context_follows_compaction() {
    let reply = format!("Noted. {}", "r".repeat(800));
    let mock = MockProvider::start(Vec::new());
    mock.push((0..40).map(|_| Step::text(&reply).into()));
    let mut providers = agentkit::ProviderConfig::default();
    providers.openai.base_url = mock.openai_base_url();
    providers.openai.api_key = Some("sk-mock".into());
    let agent_toml = "[model]\nprovider = \"openai\"\nid = \"gpt-mock\"\ncontext_window = 4000\nmax_output_tokens = 500\n";
    let files: Vec<(&str, &str)> = vec![
        ("agent.toml", agent_toml),
        ("instructions.md", "You keep notes.\n"),
    ];
    let h = host(
        &[("bot", &files)],
        ServeOptions {
            providers,
            operator_token: Some(TOKEN.into()),
            ..ServeOptions::default()
        },
    );
    let mut session: Option<(String, String)> = None;
    let mut compacted_turns = 0;
    let mut turns_after_compaction = 0;
    for i in 0..10 {
        let message = format!("note {i}: {}", "m".repeat(800));
        let (path, body) = match &session {
            None => ("/bot/v1/session".to_owned(), json!({ "message": message })),
            Some((id, token)) => (
                format!("/bot/v1/session/{id}"),
                json!({ "message": message, "continuationToken": token }),
            ),
        };
        let before = mock.requests().len();
        let r = h.send(Request::post(&path).bearer(TOKEN).json(&body));
        assert_eq!(r.status, 200, "{}", r.body);
        let id = r.json()["sessionId"].as_str().unwrap().to_owned();
        let token = r.json()["continuationToken"].as_str().unwrap().to_owned();
        let mut lines = Request::get(&format!("/bot/v1/session/{id}/stream"))
            .bearer(TOKEN)
            .stream(h.addr())
            .unwrap();
        let mut events = Vec::new();
        while events
            .iter()
            .filter(|e: &&Value| e["type"] == "turn.completed")
            .count()
            < i + 1
        {
            events.push(lines.next_json().unwrap().expect("the stream ended early"));
        }
        let turn_id = events
            .iter()
            .rfind(|e| e["type"] == "turn.started")
            .unwrap()["turnId"]
            .as_str()
            .unwrap()
            .to_owned();
        let this_turn = events
            .iter()
            .skip_while(|e| e["turnId"] != turn_id.as_str())
            .collect::<Vec<_>>();
        let compacted = this_turn.iter().any(|e| e["type"] == "context.compacted");
        compacted_turns += usize::from(compacted);
        if compacted_turns > 0 && !compacted {
            turns_after_compaction += 1;
        }
        let bodies = mock.bodies();
        let sent = bodies[before..]
            .iter()
            .find(|b| !is_summary_request(b))
            .expect("a step request");
        let ctx = h
            .send(
                Request::get(&format!(
                    "/bot/v1/session/{id}/context?turnId={turn_id}&step=1"
                ))
                .bearer(TOKEN),
            )
            .json();
        let wire = sent["messages"].as_array().unwrap();
        let folded = ctx["conversation"].as_array().unwrap();
        assert_eq!(folded.len(), wire.len() - 1, "turn {i}: {ctx}");
        for (w, f) in wire[1..].iter().zip(folded) {
            assert_eq!(w["role"], f["role"], "turn {i}");
            assert_eq!(text_of(w), f["text"].as_str().unwrap(), "turn {i}");
        }
        if compacted_turns > 0 {
            let first = folded[0]["text"].as_str().unwrap();
            assert!(
                first.starts_with("[Summary of the earlier conversation"),
                "turn {i}: {first}"
            );
        }
        // The size is the estimate the turn recorded for the step.
        let estimated = this_turn
            .iter()
            .find(|e| e["type"] == "step.completed")
            .map(|e| e["data"]["estimatedInputTokens"].clone());
        assert_eq!(
            Some(ctx["size"]["approxTokens"].clone()),
            estimated,
            "turn {i}"
        );
        session = Some((id, token));
        if turns_after_compaction >= 2 {
            break;
        }
    }
    assert!(compacted_turns >= 1, "the session never compacted");
    assert!(turns_after_compaction >= 1);
}
