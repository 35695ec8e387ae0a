//! Live A/B experiments over HTTP: a variant's tool set, instructions
//! file and `max_steps` reach the provider's request; turns, tokens,
//! tool calls and feedback are credited to the right variant in
//! `GET /v1/ab`, with intervals against the control, and survive a
//! restart; feedback is the session owner's and its body is checked.

use agentkit::ServeOptions;
use agentkit_test_support::http::Request;
use agentkit_test_support::provider::{MockProvider, Step};
use serde_json::{Value, json};

use super::mcp::{Host, host};

const ECHO_TOOL: &str = r#"description = "Echo the word"
command = ["python3", "-c", "import json,sys; print(json.dumps({'echo': json.load(sys.stdin)['word']}))"]
[input_schema]
type = "object"
required = ["word"]
properties.word = { type = "string" }
"#;

const SECRET_TOOL: &str = r#"description = "Only the control offers this"
command = ["python3", "-c", "print('{}')"]
[input_schema]
type = "object"
"#;

/// Sends `message` on a new session as `token` (if any); answers the
/// session id and its events up to the session settling.
fn turn(h: &Host, message: &str, token: Option<&str>) -> (String, Vec<Value>) {
    let mut req = Request::post("/bot/v1/session").json(&json!({ "message": message }));
    if let Some(t) = token {
        req = req.bearer(t);
    }
    let created = h.send(req);
    assert_eq!(created.status, 200, "{}", created.body);
    let id = created.json()["sessionId"].as_str().unwrap().to_owned();
    let mut stream = Request::get(&format!("/bot/v1/session/{id}/stream"));
    if let Some(t) = token {
        stream = stream.bearer(t);
    }
    let mut lines = stream.stream(h.addr()).unwrap();
    let mut events = Vec::new();
    while let Some(e) = lines.next_json().unwrap() {
        let settled = e["type"] == "session.waiting";
        events.push(e);
        if settled {
            break;
        }
    }
    (id, events)
}

fn variant_of(events: &[Value]) -> String {
    let assigned = events
        .iter()
        .find(|e| e["type"] == "ab.assigned")
        .expect("an ab.assigned event");
    assigned["data"]["variant"].as_str().unwrap().to_owned()
}

fn tool_names(body: &Value) -> Vec<String> {
    let mut names: Vec<String> = body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap_or("?").to_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The variant's tool set and instructions file are what the provider is
/// sent; the control keeps the agent's.
#[test]
fn a_variants_tools_and_instructions_reach_the_provider() {
    let mock = MockProvider::start(Vec::new());
    let files: Vec<(&str, &str)> = vec![
        (
            "agent.toml",
            "model = \"openai:gpt-mock\"\n[harness]\nbuiltin_tools = []\n",
        ),
        ("instructions.md", "You are the control agent.\n"),
        ("tools/echo.toml", ECHO_TOOL),
        ("tools/secret.toml", SECRET_TOOL),
        ("ab/lean.md", "You are the lean variant.\n"),
        (
            "ab/shape.toml",
            "[[variants]]\nid = \"control\"\n[[variants]]\nid = \"lean\"\ninstructions = \"ab/lean.md\"\ntools = [\"echo\"]\n",
        ),
    ];
    let mut providers = agentkit::ProviderConfig::default();
    providers.openai.base_url = mock.openai_base_url();
    providers.openai.api_key = Some("sk-mock".into());
    let h = host(
        &[("bot", &files)],
        ServeOptions {
            providers,
            ..ServeOptions::default()
        },
    );
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..40 {
        mock.push([Step::text("ok").into()]);
        let (_, events) = turn(&h, &format!("q{i}"), None);
        let variant = variant_of(&events);
        let body = mock.bodies().last().cloned().unwrap();
        let system = body["messages"][0]["content"].to_string();
        match variant.as_str() {
            "lean" => {
                assert_eq!(tool_names(&body), ["echo"], "{body}");
                assert!(system.contains("lean variant"), "{system}");
                assert!(!system.contains("control agent"), "{system}");
            }
            _ => {
                assert_eq!(tool_names(&body), ["echo", "secret"], "{body}");
                assert!(system.contains("control agent"), "{system}");
            }
        }
        seen.insert(variant);
        if seen.len() == 2 && i >= 3 {
            break;
        }
    }
    assert_eq!(seen.len(), 2, "both variants ran: {seen:?}");
}

fn ab(h: &Host) -> Value {
    let r = h.send(Request::get("/bot/v1/ab"));
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

fn feedback(h: &Host, id: &str, body: &Value) -> agentkit_test_support::http::Response {
    h.send(Request::post(&format!("/bot/v1/session/{id}/feedback")).json(body))
}

/// A control whose turns call a tool and complete, against a variant
/// whose `max_steps = 1` makes every turn fail: the report counts each
/// side's sessions, turns, failures, tokens and tool calls exactly,
/// credits feedback to the right variant, compares both with intervals,
/// and reads the same after a restart (feedback keeps arriving after it).
#[test]
fn metrics_and_feedback_are_credited_per_variant_and_survive_a_restart() {
    let control = r#"{"turns": [{"steps": [
        {"toolCalls": [{"name": "echo", "input": {"word": "a"}}], "usage": {"inputTokens": 50, "outputTokens": 5}},
        {"text": "control done", "usage": {"inputTokens": 100, "outputTokens": 10}}
    ]}]}"#;
    let files: Vec<(&str, &str)> = vec![
        ("agent.toml", "model = \"scripted:control.json\"\n"),
        ("control.json", control),
        ("instructions.md", "Test agent.\n"),
        ("tools/echo.toml", ECHO_TOOL),
        (
            "ab.toml",
            "description = \"one step only\"\n[[variants]]\nid = \"control\"\n[[variants]]\nid = \"short\"\nmax_steps = 1\n",
        ),
    ];
    let mut h = host(&[("bot", &files)], ServeOptions::default());
    let mut by_variant = std::collections::BTreeMap::<String, Vec<String>>::new();
    for i in 0..16 {
        let (id, events) = turn(&h, &format!("q{i}"), None);
        let variant = variant_of(&events);
        let ended = events
            .iter()
            .find(|e| e["type"] == "turn.completed" || e["type"] == "turn.failed")
            .unwrap();
        if variant == "short" {
            assert_eq!(ended["type"], "turn.failed", "{ended}");
            assert!(
                ended["data"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("max_steps (1)")
            );
        } else {
            assert_eq!(ended["type"], "turn.completed", "{ended}");
        }
        by_variant.entry(variant).or_default().push(id);
    }
    let (controls, shorts) = (&by_variant["control"], &by_variant["short"]);
    assert!(controls.len() >= 2 && shorts.len() >= 2, "{by_variant:?}");
    // Outcomes: 1 for every control session (plus one 0.5), 0 for the rest.
    for id in controls {
        let r = feedback(&h, id, &json!({"score": 1, "label": "helpful"}));
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(
            r.json()["credited"],
            json!([{"experiment": "ab", "variant": "control"}])
        );
    }
    assert_eq!(
        feedback(&h, &controls[0], &json!({"score": 0.5})).status,
        200
    );
    for id in shorts {
        let r = feedback(&h, id, &json!({"score": 0, "note": "it gave up"}));
        assert_eq!(r.json()["credited"][0]["variant"], "short", "{}", r.body);
    }

    let check = |doc: &Value, extra_short_feedback: u64| {
        let x = &doc["experiments"][0];
        assert_eq!(x["id"], "ab");
        assert_eq!(x["control"], "control");
        assert_eq!(x["notEnrolled"], 0);
        let v = |id: &str| {
            x["variants"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["id"] == id)
                .unwrap()
                .clone()
        };
        let (c, s) = (v("control"), v("short"));
        let (nc, ns) = (controls.len() as u64, shorts.len() as u64);
        assert_eq!(c["sessions"], nc, "{x}");
        assert_eq!(c["turns"], nc);
        assert_eq!(c["failedTurns"], 0);
        assert_eq!(c["failureRate"], 0.0);
        assert_eq!(c["usage"]["inputTokens"], 150 * nc);
        assert_eq!(c["usage"]["outputTokens"], 15 * nc);
        assert_eq!(c["toolCalls"], nc);
        assert_eq!(c["toolErrors"], 0);
        assert!(c["latencyMs"]["p95"].as_u64().unwrap() >= c["latencyMs"]["p50"].as_u64().unwrap());
        assert_eq!(c["feedback"]["count"], nc + 1);
        let mean = (nc as f64 + 0.5) / (nc as f64 + 1.0);
        assert!((c["feedback"]["mean"].as_f64().unwrap() - mean).abs() < 1e-9);
        assert_eq!(s["sessions"], ns);
        assert_eq!(s["turns"], ns);
        assert_eq!(s["failedTurns"], ns);
        assert_eq!(s["failureRate"], 1.0);
        // The one step ran its tool call before the limit stopped it.
        assert_eq!(s["toolCalls"], ns);
        assert_eq!(s["feedback"]["count"], ns + extra_short_feedback);
        let cmp = |metric: &str| {
            x["comparisons"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["metric"] == metric)
                .unwrap_or_else(|| panic!("no {metric} comparison: {x}"))
                .clone()
        };
        let f = cmp("turns.failureRate");
        assert_eq!(f["variant"], "short");
        assert_eq!(f["difference"], 1.0);
        assert_eq!(f["significant"], true, "{f}");
        assert_eq!(f["method"], "agresti-caffo-95");
        let lo = f["ci95"][0].as_f64().unwrap();
        assert!(lo > 0.0 && lo < 1.0, "{f}");
        let fb = cmp("feedback.score");
        assert!(fb["difference"].as_f64().unwrap() < -0.9, "{fb}");
        assert_eq!(fb["controlN"], nc + 1);
        assert!(cmp("turns.latencyMs")["ci95"][0].is_number());
    };
    let before = ab(&h);
    check(&before, 0);
    // Aggregates only: no session id or principal in the report.
    let text = before.to_string();
    assert!(controls.iter().all(|id| !text.contains(id.as_str())));
    assert!(!text.contains("local"), "{text}");

    h.restart(ServeOptions::default());
    assert_eq!(ab(&h), before, "the report survives a restart");
    let r = feedback(&h, &shorts[0], &json!({"score": 0}));
    assert_eq!(r.json()["credited"][0]["variant"], "short", "{}", r.body);
    check(&ab(&h), 1);
}

/// Feedback is the session owner's, and its body is checked.
#[test]
fn feedback_belongs_to_the_sessions_owner_and_is_checked() {
    let files: Vec<(&str, &str)> = vec![
        ("agent.toml", "model = \"scripted:s.json\"\n"),
        ("s.json", r#"{"turns": [{"steps": [{"text": "hi"}]}]}"#),
        ("instructions.md", "Test agent.\n"),
        (
            "channels/http.toml",
            "kind = \"http\"\nauth = [{ bearer = { tokens = { alice = \"token-a\", bob = \"token-b\" } } }]\n",
        ),
        (
            "ab.toml",
            "[[variants]]\nid = \"a\"\n[[variants]]\nid = \"b\"\n",
        ),
    ];
    let h = host(&[("bot", &files)], ServeOptions::default());
    let (id, _) = turn(&h, "hello", Some("token-a"));
    let post = |token: &str, body: Value| {
        h.send(
            Request::post(&format!("/bot/v1/session/{id}/feedback"))
                .bearer(token)
                .json(&body),
        )
    };
    let r = post("token-b", json!({"score": 1}));
    assert_eq!(r.status, 403, "{}", r.body);
    let r =
        h.send(Request::post(&format!("/bot/v1/session/{id}/feedback")).json(&json!({"score": 1})));
    assert_eq!(r.status, 401, "{}", r.body);
    for bad in [
        json!({}),
        json!({"score": "good"}),
        json!({"score": 1, "label": ""}),
        json!({"score": 1, "label": "x".repeat(65)}),
        json!({"score": 1, "note": "n".repeat(4097)}),
        json!({"score": 0.5, "label": "eval"}),
        json!({"score": 1, "extra": true}),
    ] {
        let r = post("token-a", bad.clone());
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
    let r = h.send(
        Request::post("/bot/v1/session/ses_nope/feedback")
            .bearer("token-a")
            .json(&json!({"score": 1})),
    );
    assert_eq!(r.status, 404, "{}", r.body);
    let r = post("token-a", json!({"score": 4, "label": "stars"}));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["credited"][0]["experiment"], "ab");
    // The report is behind the same chain.
    assert_eq!(h.send(Request::get("/bot/v1/ab")).status, 401);
    let doc = h.send(Request::get("/bot/v1/ab").bearer("token-b")).json();
    let total: u64 = doc["experiments"][0]["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["feedback"]["count"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(total, 1, "{doc}");
}
