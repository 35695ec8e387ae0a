//! The one provider HTTP layer under both remote providers, against the
//! shared mock provider on loopback: a `Retry-After` honoured, nothing
//! retried once an answer has begun, a retry wait that an interrupt ends,
//! and errors that never show the credentials of a base URL.

use std::time::{Duration, Instant};

use agentkit_harness::{Endpoint, ProviderConfig, TurnOutcome};
use agentkit_manifest::ModelSpec;
use agentkit_test_support::mock::{MockResponse, MockServer};
use agentkit_test_support::provider::{End, MockProvider, Reply, Step};
use serde_json::json;

use super::*;

const KEY: &str = "sk-layer-secret";

#[derive(Clone, Copy, Debug)]
enum Wire {
    OpenAi,
    Anthropic,
}

impl Wire {
    fn project(self) -> TestProject {
        let model = match self {
            Wire::OpenAi => "openai:gpt-mock",
            Wire::Anthropic => "anthropic:claude-mock",
        };
        TestProject::new(&[(
            "agent.toml",
            &format!("model = \"{model}\"\n[harness]\nbuiltin_tools = []\n"),
        )])
    }

    /// The providers with this wire's base URL set to `base` (a mock's
    /// origin, without a path).
    fn providers(self, origin: &str) -> ProviderConfig {
        let mut providers = ProviderConfig::default();
        let endpoint = Endpoint {
            api_key: Some(KEY.into()),
            base_url: match self {
                Wire::OpenAi => format!("{origin}/v1"),
                Wire::Anthropic => origin.to_owned(),
            },
        };
        match self {
            Wire::OpenAi => providers.openai = endpoint,
            Wire::Anthropic => providers.anthropic = endpoint,
        }
        providers
    }

    fn input(self, project: &TestProject, origin: &str) -> TurnInput {
        let model: ModelSpec = project.agent.config.model.clone().unwrap();
        let mut input = project.input(model, "hi");
        input.providers = Arc::new(self.providers(origin));
        input
    }
}

fn failed(outcome: &TurnOutcome) -> &str {
    match outcome {
        TurnOutcome::Failed { message } => message,
        other => panic!("expected a failed turn, got {other:?}"),
    }
}

/// A 429 with `Retry-After: 1`, then an answer: one turn, two requests,
/// and the wait honoured.
async fn a_429_is_retried_after_its_retry_after(wire: Wire) {
    let mock = MockProvider::start(vec![
        Reply::retry_after(429, "1"),
        Step::text("Second time lucky.").into(),
    ]);
    let project = wire.project();
    let started = Instant::now();
    let (outcome, _) = run(wire.input(&project, &mock.server().url())).await;
    assert_eq!(completed(&outcome), "Second time lucky.");
    assert_eq!(mock.requests().len(), 2);
    assert_eq!(mock.remaining(), 0);
    assert!(started.elapsed() >= Duration::from_millis(900), "waited");
    // The retry sent the same request.
    let bodies = mock.bodies();
    assert_eq!(bodies[0], bodies[1]);
}

#[tokio::test]
async fn openai_a_429_is_retried_after_its_retry_after() {
    a_429_is_retried_after_its_retry_after(Wire::OpenAi).await;
}

#[tokio::test]
async fn anthropic_a_429_is_retried_after_its_retry_after() {
    a_429_is_retried_after_its_retry_after(Wire::Anthropic).await;
}

/// A server error after the answer's first byte (the provider's in-stream
/// error event, or a cut connection) fails the turn at once: the next
/// scripted answer is never asked for.
async fn nothing_is_retried_after_the_first_byte(wire: Wire) {
    // A step of one tool call: half of it streams before the error, so
    // bytes arrived but no text reached the client.
    let call_only = || Step::new().call("call_1", "echo", &json!({"word": "never"}));
    let mock = MockProvider::start(vec![
        call_only()
            .end(End::ErrorEvent("Internal server error".into()))
            .into(),
        Step::text("never").into(),
    ]);
    let project = wire.project();
    let (outcome, _) = run(wire.input(&project, &mock.server().url())).await;
    let message = failed(&outcome);
    assert!(message.contains("Internal server error"), "{message}");
    assert_eq!(mock.requests().len(), 1);
    assert_eq!(mock.remaining(), 1);

    let mock = MockProvider::start(vec![
        Step::text("A long answer cut off half way through.")
            .end(End::Cut)
            .into(),
        Step::text("never").into(),
    ]);
    let (outcome, _) = run(wire.input(&project, &mock.server().url())).await;
    let message = failed(&outcome);
    assert!(message.contains("stream ended early"), "{message}");
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn openai_nothing_is_retried_after_the_first_byte() {
    nothing_is_retried_after_the_first_byte(Wire::OpenAi).await;
}

#[tokio::test]
async fn anthropic_nothing_is_retried_after_the_first_byte() {
    nothing_is_retried_after_the_first_byte(Wire::Anthropic).await;
}

/// An interrupt during a retry wait ends the turn at once, without the
/// second request.
async fn an_interrupt_ends_a_retry_wait(wire: Wire) {
    let mock = MockProvider::start(vec![
        Reply::retry_after(503, "30"),
        Step::text("never").into(),
    ]);
    let project = wire.project();
    let input = wire.input(&project, &mock.server().url());
    let cancel = input.cancel.clone();
    let turn = tokio::spawn(run(input));
    let deadline = Instant::now() + Duration::from_secs(10);
    while mock.requests().is_empty() {
        assert!(Instant::now() < deadline, "no request");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Let the 503 arrive and the wait begin.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let cancelled = Instant::now();
    cancel.cancel();
    let (outcome, _) = turn.await.unwrap();
    assert_eq!(outcome, TurnOutcome::Interrupted);
    assert!(cancelled.elapsed() < Duration::from_secs(5), "promptly");
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn openai_an_interrupt_ends_a_retry_wait() {
    an_interrupt_ends_a_retry_wait(Wire::OpenAi).await;
}

#[tokio::test]
async fn anthropic_an_interrupt_ends_a_retry_wait() {
    an_interrupt_ends_a_retry_wait(Wire::Anthropic).await;
}

/// Nothing a turn produced shows the base URL's user and password.
fn assert_clean(outcome: &TurnOutcome, events: &[StepEvent]) {
    let seen = format!("{outcome:?}\n{events:?}\n{}", render(events));
    for leak in ["s3cret", "user:", KEY] {
        assert!(!seen.contains(leak), "`{leak}` leaked: {seen}");
    }
}

/// A base URL with a user and password: neither a refused connection
/// nor a 401 whose body echoes the URL and the credentials shows them.
async fn credentials_in_the_base_url_never_show(wire: Wire) {
    let project = wire.project();

    // Nothing listens on the port: refused (and retried) until it fails.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let (outcome, events) =
        run(wire.input(&project, &format!("http://user:s3cret@127.0.0.1:{port}"))).await;
    let message = failed(&outcome);
    assert!(message.contains("cannot reach"), "{message}");
    assert_clean(&outcome, &events);

    // A server that echoes what it was sent.
    let server = MockServer::start(|req| {
        let headers: Vec<String> = req
            .headers
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        let text = format!(
            "denied http://user:s3cret@{} with {}",
            req.header("host").unwrap_or_default(),
            headers.join(", ")
        );
        MockResponse::json(
            401,
            &json!({"type": "error", "error": {"type": "authentication_error", "message": text}}),
        )
    });
    let origin = format!("http://user:s3cret@{}", server.addr());
    let (outcome, events) = run(wire.input(&project, &origin)).await;
    let message = failed(&outcome);
    assert!(message.contains("401"), "{message}");
    assert!(message.contains("denied http://127.0.0.1:"), "{message}");
    assert_clean(&outcome, &events);
    // The server did get the credentials, and only once: a 401 is final.
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert!(
        requests[0]
            .headers
            .iter()
            .any(|(k, v)| k == "authorization" && v.starts_with("Basic ")),
        "{:?}",
        requests[0].headers
    );
}

#[tokio::test]
async fn openai_credentials_in_the_base_url_never_show() {
    credentials_in_the_base_url_never_show(Wire::OpenAi).await;
}

#[tokio::test]
async fn anthropic_credentials_in_the_base_url_never_show() {
    credentials_in_the_base_url_never_show(Wire::Anthropic).await;
}
