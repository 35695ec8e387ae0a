//! What turns cost, over HTTP against the mock provider: `costUsd` on
//! each `step.completed` and `turn.completed` from the usage the provider
//! counted (cache reads at their own price), the session's total in
//! `GET /v1/session/:id` and the sessions list, `agentkit_cost_usd_total`
//! at `/metrics`, `null` (never 0) for a model with no price, and the
//! money budgets of `[harness.budget]` refusing and stopping turns.

use agentkit_test_support::http::Request;
use agentkit_test_support::provider::{MockProvider, Step};
use serde_json::{Value, json};

use super::context::{of_type, options, serve, turn};

const PRICED: &str = "[model]\nprovider = \"openai\"\nid = \"gpt-mock\"\n[model.pricing]\ninput = 2.0\noutput = 10.0\ncache_read = 0.5\n";

fn close(v: &Value, want: f64) -> bool {
    v.as_f64().is_some_and(|x| (x - want).abs() < 1e-12)
}

fn cost_metric(h: &super::mcp::Host, model: &str) -> Option<f64> {
    let text = h
        .send(Request::get("/metrics").bearer(super::http::SCRAPER))
        .body;
    text.lines()
        .find(|l| {
            l.starts_with("agentkit_cost_usd_total{")
                && l.contains("agent=\"bot\"")
                && l.contains(&format!("model=\"{model}\""))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
}

#[test]
fn steps_turns_and_sessions_carry_their_cost() {
    let mock = MockProvider::start(Vec::new());
    let h = serve(
        &mock,
        &format!("{PRICED}[harness]\nbuiltin_tools = [\"list\"]\n"),
    );
    // Step 1: 1,000 input tokens of which 400 cached, 100 output:
    // 600 × 2 + 400 × 0.5 + 100 × 10 = 2,400 micro-dollars.
    // Step 2: 2,000 × 2 + 50 × 10 = 4,500.
    mock.push([
        Step::new()
            .call("c1", "list", &json!({"path": "."}))
            .tokens(1000, 100, 400, 0)
            .into(),
        Step::text("done").tokens(2000, 50, 0, 0).into(),
    ]);
    let (id, token, events) = turn(&h, None, "list it");
    let steps = of_type(&events, "step.completed");
    assert_eq!(steps.len(), 2, "{events:?}");
    assert!(close(&steps[0]["data"]["costUsd"], 0.0024), "{}", steps[0]);
    assert!(close(&steps[1]["data"]["costUsd"], 0.0045), "{}", steps[1]);
    assert_eq!(steps[0]["data"]["model"], "openai:gpt-mock");
    let done = of_type(&events, "turn.completed");
    assert!(close(&done[0]["data"]["costUsd"], 0.0069), "{}", done[0]);

    mock.push([Step::text("again").tokens(1000, 0, 0, 0).into()]);
    let (_, _, events) = turn(&h, Some((&id, &token)), "more");
    assert!(close(
        &of_type(&events, "turn.completed")[0]["data"]["costUsd"],
        0.002
    ));
    let info = h
        .send(Request::get(&format!("/bot/v1/session/{id}")))
        .json();
    assert!(close(&info["costUsd"], 0.0089), "{info}");
    let list = h.send(Request::get("/bot/v1/sessions")).json();
    assert!(close(&list["sessions"][0]["costUsd"], 0.0089), "{list}");

    // The metric is fed from the same events, by agent and model.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let seen = cost_metric(&h, "gpt-mock");
        if seen.is_some_and(|c| (c - 0.0089).abs() < 1e-9) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "agentkit_cost_usd_total is {seen:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn a_model_with_no_price_costs_null_not_zero() {
    let mock = MockProvider::start(vec![Step::text("hi").tokens(100, 10, 0, 0).into()]);
    let h = serve(
        &mock,
        "model = \"openai:local-llama\"\n[harness]\nbuiltin_tools = []\n",
    );
    let (id, _, events) = turn(&h, None, "hello");
    let step = of_type(&events, "step.completed")[0];
    assert!(
        step["data"].as_object().unwrap().contains_key("costUsd"),
        "{step}"
    );
    assert_eq!(step["data"]["costUsd"], Value::Null);
    assert_eq!(
        of_type(&events, "turn.completed")[0]["data"]["costUsd"],
        Value::Null
    );
    let info = h
        .send(Request::get(&format!("/bot/v1/session/{id}")))
        .json();
    assert_eq!(info["costUsd"], Value::Null, "{info}");
    let list = h.send(Request::get("/bot/v1/sessions")).json();
    assert_eq!(list["sessions"][0]["costUsd"], Value::Null, "{list}");
    assert_eq!(cost_metric(&h, "local-llama"), None);

    // With a money budget, a turn that cannot be priced is refused.
    let h = serve(
        &mock,
        "model = \"openai:local-llama\"\n[harness]\nbuiltin_tools = []\n[harness.budget]\nmax_cost_usd_per_session = 1\n",
    );
    let before = mock.requests().len();
    let (_, _, events) = turn(&h, None, "hello");
    let failed = of_type(&events, "turn.failed");
    assert_eq!(failed[0]["data"]["limit"], "max_cost_usd_per_session");
    let message = failed[0]["data"]["message"].as_str().unwrap();
    assert!(
        message.contains("price of `openai:local-llama`"),
        "{message}"
    );
    assert_eq!(mock.requests().len(), before);
}

#[test]
fn the_session_money_budget_stops_between_steps_and_refuses_the_next_turn() {
    let mock = MockProvider::start(Vec::new());
    let h = serve(
        &mock,
        &format!(
            "{PRICED}[harness]\nbuiltin_tools = [\"list\"]\n[harness.budget]\nmax_cost_usd_per_session = 0.005\n"
        ),
    );
    // The first step costs 2,000 × 2 + 100 × 10 = 5,000 micro-dollars: the
    // budget is reached, so the step its tool call asks for never starts.
    mock.push([
        Step::new()
            .call("c1", "list", &json!({"path": "."}))
            .tokens(2000, 100, 0, 0)
            .into(),
        Step::text("never sent").into(),
    ]);
    let before = mock.requests().len();
    let (id, token, events) = turn(&h, None, "list it");
    let failed = of_type(&events, "turn.failed");
    assert_eq!(failed.len(), 1, "{events:?}");
    assert_eq!(failed[0]["data"]["reason"], "budget");
    assert_eq!(failed[0]["data"]["limit"], "max_cost_usd_per_session");
    assert!(close(&failed[0]["data"]["costUsd"], 0.005), "{}", failed[0]);
    assert_eq!(of_type(&events, "action.result").len(), 1);
    assert_eq!(mock.requests().len(), before + 1);
    // The next turn of the session is refused before any request.
    let (_, _, events) = turn(&h, Some((&id, &token)), "again");
    assert_eq!(
        of_type(&events, "turn.failed")[0]["data"]["limit"],
        "max_cost_usd_per_session"
    );
    assert_eq!(mock.requests().len(), before + 1);
    let info = h
        .send(Request::get(&format!("/bot/v1/session/{id}")))
        .json();
    assert!(close(&info["costUsd"], 0.005), "{info}");
    // Another session has its own budget (and gets the reply the first
    // turn never asked for).
    let (_, _, events) = turn(&h, None, "new session");
    assert_eq!(of_type(&events, "turn.completed").len(), 1, "{events:?}");
}

#[test]
fn the_daily_money_budget_spans_sessions_and_restarts() {
    let mock = MockProvider::start(Vec::new());
    let mut h = serve(
        &mock,
        &format!(
            "{PRICED}[harness]\nbuiltin_tools = []\n[harness.budget]\nmax_cost_usd_per_day = 0.005\n"
        ),
    );
    // 1,000 × 2 + 100 × 10 = 3,000 micro-dollars a turn.
    for message in ["one", "two"] {
        mock.push([Step::text("ok").tokens(1000, 100, 0, 0).into()]);
        let (_, _, events) = turn(&h, None, message);
        assert_eq!(of_type(&events, "turn.completed").len(), 1, "{events:?}");
    }
    // 0.006 spent today across two sessions: a third session is refused.
    let before = mock.requests().len();
    let (_, _, events) = turn(&h, None, "three");
    let failed = of_type(&events, "turn.failed");
    assert_eq!(
        failed[0]["data"]["limit"], "max_cost_usd_per_day",
        "{events:?}"
    );
    assert_eq!(mock.requests().len(), before);
    h.restart(options(&mock));
    let (_, _, events) = turn(&h, None, "after a restart");
    assert_eq!(
        of_type(&events, "turn.failed")[0]["data"]["limit"],
        "max_cost_usd_per_day",
        "{events:?}"
    );
    assert_eq!(mock.requests().len(), before);
}
