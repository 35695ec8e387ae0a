//! Context management over HTTP against the mock provider with a small
//! window: a long session never sends a request over the window, older
//! turns are compacted once the threshold is crossed (`context.compacted`
//! in the log, the summary request's usage counted), a restart sends the
//! same conversation the process before it would have, an oversized
//! message fails clearly without reaching the provider, and token budgets
//! stop turns naming the limit.

use agentkit::ServeOptions;
use agentkit_test_support::http::Request;
use agentkit_test_support::provider::{MockProvider, Step};
use serde_json::{Value, json};

use super::mcp::{Host, host};

pub(crate) fn options(mock: &MockProvider) -> ServeOptions {
    let mut providers = agentkit::ProviderConfig::default();
    providers.openai.base_url = mock.openai_base_url();
    providers.openai.api_key = Some("sk-mock".into());
    ServeOptions {
        providers,
        ..ServeOptions::default()
    }
}

pub(crate) fn serve(mock: &MockProvider, agent_toml: &str) -> Host {
    let files: Vec<(&str, &str)> = vec![
        ("agent.toml", agent_toml),
        ("instructions.md", "You keep notes.\n"),
    ];
    host(&[("bot", &files)], options(mock))
}

/// Sends `message` (a new session, or a follow-up of `session`) and
/// returns the session id, the new token and the events of this turn.
pub(crate) fn turn(
    h: &Host,
    session: Option<(&str, &str)>,
    message: &str,
) -> (String, String, Vec<Value>) {
    let (path, body) = match session {
        None => ("/bot/v1/session".to_owned(), json!({ "message": message })),
        Some((id, token)) => (
            format!("/bot/v1/session/{id}"),
            json!({ "message": message, "continuationToken": token }),
        ),
    };
    // Events from this turn on: the log's length before the message.
    let start = session.map_or(0, |(id, _)| {
        let events = h.send(Request::get(&format!("/bot/v1/session/{id}/events")));
        events.body.lines().count() as u64
    });
    let r = h.send(Request::post(&path).json(&body));
    assert_eq!(r.status, 200, "{}", r.body);
    let doc = r.json();
    let id = doc["sessionId"].as_str().unwrap().to_owned();
    let token = doc["continuationToken"].as_str().unwrap().to_owned();
    let mut lines = Request::get(&format!("/bot/v1/session/{id}/stream?startIndex={start}"))
        .stream(h.addr())
        .unwrap();
    let mut events = Vec::new();
    let mut started = false;
    while let Some(e) = lines.next_json().unwrap() {
        started |= e["type"] == "turn.started";
        let done = started && e["type"] == "session.waiting";
        events.push(e);
        if done {
            break;
        }
    }
    (id, token, events)
}

pub(crate) fn of_type<'a>(events: &'a [Value], t: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == t).collect()
}

fn is_summary_request(body: &Value) -> bool {
    body["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with("You compact a conversation"))
}

const WINDOW: u64 = 4_000;

/// Twelve turns of ~800-character messages and replies through a 4,000
/// token window: every request stays under the window, compaction runs
/// when the threshold is crossed, and after a restart the next request
/// carries exactly the conversation the turn before it ended with.
#[test]
fn a_long_session_is_compacted_and_never_overflows_the_window() {
    let reply = format!("Noted. {}", "r".repeat(800));
    let mock = MockProvider::start(Vec::new());
    // Every request (turn steps and summaries alike) gets the same reply.
    mock.push((0..60).map(|_| Step::text(&reply).into()));
    let agent_toml = format!(
        "[model]\nprovider = \"openai\"\nid = \"gpt-mock\"\ncontext_window = {WINDOW}\nmax_output_tokens = 500\n"
    );
    let mut h = serve(&mock, &agent_toml);
    let mut session: Option<(String, String)> = None;
    let mut compactions = Vec::new();
    let mut compacted_at = None;
    for i in 0..12 {
        let message = format!("note {i}: {}", "m".repeat(800));
        let before = mock.requests().len();
        let (id, token, events) = turn(
            &h,
            session.as_ref().map(|(a, b)| (a.as_str(), b.as_str())),
            &message,
        );
        assert_eq!(
            of_type(&events, "turn.completed").len(),
            1,
            "turn {i}: {events:?}"
        );
        for c in of_type(&events, "context.compacted") {
            compactions.push((*c).clone());
            compacted_at.get_or_insert(i);
        }
        // One step request per turn, plus a summary request when it compacted.
        let bodies = mock.bodies();
        let new = &bodies[before..];
        let summaries = new.iter().filter(|b| is_summary_request(b)).count();
        assert_eq!(
            summaries,
            of_type(&events, "context.compacted").len(),
            "turn {i}"
        );
        assert_eq!(new.len(), 1 + summaries, "turn {i}");
        session = Some((id, token));
    }
    let at = compacted_at.expect("the session was compacted");
    assert!(at >= 2, "not before the threshold: compacted at turn {at}");
    // No request was ever near the window (bytes / 4 overestimates tokens).
    for body in mock.bodies() {
        let tokens = body.to_string().len() as u64 / 4;
        assert!(tokens < WINDOW, "a request of ~{tokens} tokens");
    }
    let first = &compactions[0]["data"];
    assert!(first["messages"].as_u64().unwrap() >= 2, "{first}");
    assert!(
        first["tokensAfter"].as_u64().unwrap() < first["tokensBefore"].as_u64().unwrap(),
        "{first}"
    );
    assert!(first["summary"].as_str().unwrap().starts_with("Noted."));
    // The summary request's usage is in the turn's.
    assert!(
        first["usage"]["inputTokens"].as_u64().unwrap() > 0,
        "{first}"
    );
    // Every later request starts with the summary, not the first note.
    let last = mock.bodies().last().cloned().unwrap();
    let user0 = last["messages"][1]["content"].as_str().unwrap();
    assert!(
        user0.starts_with("[Summary of the earlier conversation"),
        "{user0}"
    );
    assert!(!last.to_string().contains("note 0:"));

    // A restart: the next request is the last one's conversation plus its
    // reply and the new message.
    let (id, token) = session.unwrap();
    let previous = mock.bodies().last().cloned().unwrap();
    h.restart(options(&mock));
    let before = mock.requests().len();
    let (_, _, events) = turn(&h, Some((&id, &token)), "after the restart");
    assert_eq!(of_type(&events, "turn.completed").len(), 1, "{events:?}");
    let bodies = mock.bodies();
    let next = bodies[before..]
        .iter()
        .find(|b| !is_summary_request(b))
        .unwrap();
    // (The sizes are chosen so this turn does not compact again.)
    assert!(
        of_type(&events, "context.compacted").is_empty(),
        "{events:?}"
    );
    let mut expected = previous["messages"].as_array().unwrap().clone();
    expected.push(json!({"role": "assistant", "content": reply}));
    expected.push(json!({"role": "user", "content": "after the restart"}));
    assert_eq!(next["messages"].as_array().unwrap(), &expected);
    assert!(
        compactions.len() >= 2,
        "compacted more than once: {}",
        compactions.len()
    );
    // The session's usage is visible and counts the summaries.
    let info = h
        .send(Request::get(&format!("/bot/v1/session/{id}")))
        .json();
    assert!(info["usage"]["inputTokens"].as_u64().unwrap() > 0, "{info}");
}

/// A message that cannot fit even alone fails the turn with a message
/// saying so, and the provider never sees it.
#[test]
fn an_oversized_message_fails_clearly_without_a_request() {
    let mock = MockProvider::start(vec![Step::text("fine").into()]);
    let h = serve(
        &mock,
        "[model]\nprovider = \"openai\"\nid = \"gpt-mock\"\ncontext_window = 2000\nmax_output_tokens = 200\n",
    );
    let (_, _, events) = turn(&h, None, &"x".repeat(20_000));
    let failed = of_type(&events, "turn.failed");
    assert_eq!(failed.len(), 1, "{events:?}");
    let message = failed[0]["data"]["message"].as_str().unwrap();
    assert!(
        message.contains("more than the 1800 this model takes"),
        "{message}"
    );
    assert_eq!(mock.requests().len(), 0);
    assert_eq!(mock.remaining(), 1);
}

/// Budgets stop turns with `reason: "budget"` and the limit's name.
#[test]
fn budgets_stop_turns_naming_the_limit() {
    let mock = MockProvider::start(Vec::new());
    let h = serve(
        &mock,
        "model = \"openai:gpt-mock\"\n[harness]\nmax_tokens_per_session = 230\nbuiltin_tools = []\n",
    );
    mock.push([Step::text("one").tokens(100, 10, 0, 0).into()]);
    let (id, token, events) = turn(&h, None, "hi");
    assert_eq!(of_type(&events, "turn.completed").len(), 1);
    mock.push([Step::text("two").tokens(100, 10, 0, 0).into()]);
    let (_, token, events) = turn(&h, Some((&id, &token)), "again");
    assert_eq!(of_type(&events, "turn.completed").len(), 1);
    // 220 used: the third turn's request would go past 230: refused before it is sent.
    let before = mock.requests().len();
    let (_, _, events) = turn(&h, Some((&id, &token)), "more");
    let failed = of_type(&events, "turn.failed");
    assert_eq!(failed.len(), 1, "{events:?}");
    assert_eq!(failed[0]["data"]["reason"], "budget");
    assert_eq!(failed[0]["data"]["limit"], "max_tokens_per_session");
    let info = h
        .send(Request::get(&format!("/bot/v1/session/{id}")))
        .json();
    assert_eq!(info["usage"]["inputTokens"], 200, "{info}");
    assert_eq!(info["usage"]["outputTokens"], 20, "{info}");
    assert_eq!(mock.requests().len(), before);

    // A step that asks for more tools after 50 output tokens goes past
    // max_output_tokens_per_turn = 40.
    let h = serve(
        &mock,
        "model = \"openai:gpt-mock\"\n[harness]\nmax_output_tokens_per_turn = 40\nbuiltin_tools = [\"list\"]\n",
    );
    mock.push([Step::new()
        .call("c1", "list", &json!({"path": "."}))
        .tokens(10, 50, 0, 0)
        .into()]);
    let (_, _, events) = turn(&h, None, "list it");
    let failed = of_type(&events, "turn.failed");
    assert_eq!(failed.len(), 1, "{events:?}");
    assert_eq!(failed[0]["data"]["limit"], "max_output_tokens_per_turn");
    assert_eq!(failed[0]["data"]["usage"]["outputTokens"], 50);

    // An input budget smaller than the first request: refused before it
    // is sent.
    let h = serve(
        &mock,
        "model = \"openai:gpt-mock\"\n[harness]\nmax_input_tokens_per_turn = 5\n",
    );
    let before = mock.requests().len();
    let (_, _, events) = turn(&h, None, "hello there, how are you today?");
    let failed = of_type(&events, "turn.failed");
    assert_eq!(
        failed[0]["data"]["limit"], "max_input_tokens_per_turn",
        "{events:?}"
    );
    assert_eq!(mock.requests().len(), before);
}

const OUTPUT_AGENT: &str = r#"model = "openai:gpt-mock"
[harness]
builtin_tools = []
[output_schema]
type = "object"
required = ["city", "celsius"]
additionalProperties = false
[output_schema.properties]
city = { type = "string" }
celsius = { type = "number" }
"#;

/// `output_schema`: the provider is asked for JSON natively, a reply that
/// does not match is sent back with what was wrong, the valid one is
/// `turn.completed.data.output`, and the refused reply is not part of
/// what later turns see; three bad replies fail the turn.
#[test]
fn structured_output_is_validated_and_retried() {
    let mock = MockProvider::start(vec![
        Step::text("It is 21 degrees in Paris.").into(),
        Step::text(r#"{"city": "Paris", "celsius": "21"}"#).into(),
        Step::text("```json\n{\"city\": \"Paris\", \"celsius\": 21}\n```").into(),
    ]);
    let h = serve(&mock, OUTPUT_AGENT);
    let (id, token, events) = turn(&h, None, "Weather in Paris as JSON");
    let done = of_type(&events, "turn.completed");
    assert_eq!(done.len(), 1, "{events:?}");
    assert_eq!(
        done[0]["data"]["output"],
        json!({"city": "Paris", "celsius": 21})
    );
    let reasons: Vec<&str> = of_type(&events, "message.completed")
        .iter()
        .map(|m| m["data"]["finishReason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons, ["invalid_output", "invalid_output", "stop"]);
    let bodies = mock.bodies();
    assert_eq!(bodies.len(), 3);
    assert_eq!(bodies[0]["response_format"]["type"], "json_schema");
    assert_eq!(
        bodies[0]["response_format"]["json_schema"]["schema"]["required"],
        json!(["city", "celsius"])
    );
    let retry = bodies[1]["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(retry["role"], "user");
    assert!(
        retry["content"].as_str().unwrap().contains("not JSON"),
        "{retry}"
    );
    let retry = bodies[2]["messages"].as_array().unwrap().last().unwrap();
    assert!(
        retry["content"].as_str().unwrap().contains("/celsius"),
        "{retry}"
    );

    // The next turn sees only the accepted reply.
    mock.push([Step::text(r#"{"city": "Oslo", "celsius": 3}"#).into()]);
    let (_, _, events) = turn(&h, Some((&id, &token)), "And Oslo?");
    assert_eq!(
        of_type(&events, "turn.completed")[0]["data"]["output"]["city"],
        "Oslo"
    );
    let next = mock.bodies().last().cloned().unwrap();
    let said = next["messages"].to_string();
    assert!(!said.contains("21 degrees"), "{said}");
    assert!(!said.contains("does not match"), "{said}");
    assert_eq!(
        next["messages"].as_array().unwrap().len(),
        4,
        "system, question, accepted reply, question: {said}"
    );

    // Three replies that never match fail the turn, saying why.
    mock.push((0..3).map(|_| Step::text("no JSON here").into()));
    let (_, _, events) = turn(&h, None, "again");
    let failed = of_type(&events, "turn.failed");
    assert_eq!(failed.len(), 1, "{events:?}");
    let message = failed[0]["data"]["message"].as_str().unwrap();
    assert!(
        message.contains("did not match `output_schema` after 3 attempts"),
        "{message}"
    );
}

/// `max_tokens_per_day` counts every session's turns of the agent in the
/// host's state (UTC day), and a restart keeps the count.
#[test]
fn the_daily_budget_spans_sessions_and_restarts() {
    let mock = MockProvider::start(Vec::new());
    let mut h = serve(
        &mock,
        "model = \"openai:gpt-mock\"\n[harness]\nmax_tokens_per_day = 230\nbuiltin_tools = []\n",
    );
    for message in ["one", "two"] {
        mock.push([Step::text("ok").tokens(100, 10, 0, 0).into()]);
        let (_, _, events) = turn(&h, None, message);
        assert_eq!(of_type(&events, "turn.completed").len(), 1, "{events:?}");
    }
    // 220 used today across two sessions: a third session's turn is refused.
    let before = mock.requests().len();
    let (_, _, events) = turn(&h, None, "three");
    let failed = of_type(&events, "turn.failed");
    assert_eq!(failed.len(), 1, "{events:?}");
    assert_eq!(failed[0]["data"]["limit"], "max_tokens_per_day");
    assert_eq!(mock.requests().len(), before);
    h.restart(options(&mock));
    let (_, _, events) = turn(&h, None, "after a restart");
    assert_eq!(
        of_type(&events, "turn.failed")[0]["data"]["limit"],
        "max_tokens_per_day",
        "{events:?}"
    );
    assert_eq!(mock.requests().len(), before);
}

/// `outputSchema` on `POST /v1/session`: that session's replies must
/// match it (asked natively of OpenAI), follow-ups keep it, a follow-up
/// cannot change it, and a schema that does not compile is a 400.
#[test]
fn a_session_can_bring_its_own_output_schema() {
    let mock = MockProvider::start(vec![
        Step::text(r#"{"ok": true}"#).into(),
        Step::text(r#"{"ok": false}"#).into(),
    ]);
    let h = serve(
        &mock,
        "model = \"openai:gpt-mock\"\n[harness]\nbuiltin_tools = []\n",
    );
    let schema =
        json!({"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}});
    let r = h.send(
        Request::post("/bot/v1/session").json(&json!({"message": "check", "outputSchema": schema})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let token = r.json()["continuationToken"].as_str().unwrap().to_owned();
    let mut lines = Request::get(&format!("/bot/v1/session/{id}/stream"))
        .stream(h.addr())
        .unwrap();
    let done = lines.until("turn.completed").unwrap();
    assert_eq!(done.last().unwrap()["data"]["output"], json!({"ok": true}));
    assert_eq!(
        mock.bodies()[0]["response_format"]["json_schema"]["schema"],
        schema
    );
    let (_, _, events) = turn(&h, Some((&id, &token)), "again");
    assert_eq!(
        of_type(&events, "turn.completed")[0]["data"]["output"],
        json!({"ok": false})
    );
    assert_eq!(
        mock.bodies()[1]["response_format"]["json_schema"]["schema"],
        schema
    );
    let r = h.send(
        Request::post(&format!("/bot/v1/session/{id}"))
            .json(&json!({"message": "x", "outputSchema": schema})),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    let r = h.send(
        Request::post("/bot/v1/session")
            .json(&json!({"message": "x", "outputSchema": {"type": 7}})),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(mock.requests().len(), 2);
}

/// `output_schema` on a Markdown schedule and on a channel route's
/// `send`: the session each starts asks the provider for that schema, its
/// `turn.completed` carries the value, and a route that waits answers it
/// as `reply.output`.
#[test]
fn schedules_and_routes_take_an_output_schema() {
    let mock = MockProvider::start(vec![
        Step::text(r#"{"incidents": 2}"#).into(),
        Step::text(r#"{"severity": "high"}"#).into(),
    ]);
    let digest = "---\ncron: \"0 8 * * *\"\noutput_schema:\n  type: object\n  required: [incidents]\n  properties:\n    incidents: { type: integer }\n---\nCount yesterday's incidents.\n";
    let desk = r#"[[routes]]
method = "POST"
path = "/triage"
[routes.body_schema]
type = "object"
[routes.send]
message = "Triage: {{ body.text }}"
wait = true
[routes.send.output_schema]
type = "object"
required = ["severity"]
properties = { severity = { enum = ["low", "high"] } }
"#;
    let files: Vec<(&str, &str)> = vec![
        (
            "agent.toml",
            "model = \"openai:gpt-mock\"\n[harness]\nbuiltin_tools = []\n",
        ),
        ("instructions.md", "You triage.\n"),
        ("schedules/digest.md", digest),
        ("channels/desk.toml", desk),
    ];
    let h = host(
        &[("bot", &files)],
        ServeOptions {
            dev: true,
            ..options(&mock)
        },
    );
    let r = h.send(Request::post("/bot/v1/dev/schedules/digest"));
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionIds"][0].as_str().unwrap().to_owned();
    let mut lines = Request::get(&format!("/bot/v1/session/{id}/stream"))
        .stream(h.addr())
        .unwrap();
    let done = lines.until("turn.completed").unwrap();
    assert_eq!(
        done.last().unwrap()["data"]["output"],
        json!({"incidents": 2})
    );
    assert_eq!(
        mock.bodies()[0]["response_format"]["json_schema"]["schema"]["required"],
        json!(["incidents"])
    );

    let r = h.send(Request::post("/bot/v1/channels/desk/triage").json(&json!({"text": "db down"})));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json()["reply"]["output"],
        json!({"severity": "high"}),
        "{}",
        r.body
    );
    assert_eq!(
        mock.bodies()[1]["response_format"]["json_schema"]["schema"]["required"],
        json!(["severity"])
    );
}

/// The estimate is calibrated against what the provider counted: after a
/// turn whose request the provider counted at far more tokens than the
/// harness estimated, the next request of that session is sized up and,
/// here, refused before it is sent; a session whose provider counts less
/// is never sized down, and its second turn runs.
#[test]
fn estimates_are_calibrated_against_the_counted_tokens() {
    let mock = MockProvider::start(Vec::new());
    let agent_toml = "[model]\nprovider = \"openai\"\nid = \"gpt-mock\"\ncontext_window = 6000\nmax_output_tokens = 1000\n[harness]\nbuiltin_tools = []\n";
    let h = serve(&mock, agent_toml);
    let long = format!("Please keep this note: {}", "n".repeat(10_000));
    let mut sessions = Vec::new();
    // The first session's provider counts 30,000 tokens; the second's 12.
    for counted in [30_000, 12] {
        mock.push([Step::text("Kept.").tokens(counted, 4, 0, 0).into()]);
        let (id, token, events) = turn(&h, None, &long);
        let done = of_type(&events, "turn.completed");
        assert_eq!(done.len(), 1, "{events:?}");
        let sizing = &done[0]["data"]["sizing"];
        assert_eq!(sizing["countedInputTokens"], counted, "{sizing}");
        let estimated = sizing["estimatedInputTokens"].as_u64().unwrap();
        assert!((2_500..5_000).contains(&estimated), "{sizing}");
        let step = of_type(&events, "step.completed");
        assert_eq!(step[0]["data"]["estimatedInputTokens"], estimated);
        sessions.push((id, token));
    }

    // Calibrated ×3 (the cap), the same history no longer fits.
    let before = mock.requests().len();
    let (id, token) = &sessions[0];
    let (_, _, events) = turn(&h, Some((id, token)), "And now?");
    let failed = of_type(&events, "turn.failed");
    assert_eq!(failed.len(), 1, "{events:?}");
    let message = failed[0]["data"]["message"].as_str().unwrap();
    assert!(
        message.contains("more than the 5000 this model takes"),
        "{message}"
    );
    assert_eq!(mock.requests().len(), before, "nothing was sent");

    // Counted low, the estimate stands: the second turn runs, sized as before.
    mock.push([Step::text("Still here.").into()]);
    let (id, token) = &sessions[1];
    let (_, _, events) = turn(&h, Some((id, token)), "And now?");
    assert_eq!(of_type(&events, "turn.completed").len(), 1, "{events:?}");
    let step = of_type(&events, "step.completed");
    let estimated = step[0]["data"]["estimatedInputTokens"].as_u64().unwrap();
    assert!(estimated < 4_000, "{estimated}");
    assert_eq!(mock.requests().len(), before + 1);
}
