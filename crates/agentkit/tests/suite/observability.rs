//! Observability against a real server: traces exported over OTLP/HTTP
//! to a real receiver on loopback (decoded with the `opentelemetry-proto`
//! types), `/metrics` read with the Python `prometheus_client` parser,
//! and `/v1/logs`.

use std::path::{Path, PathBuf};

use agentkit::{ServeHandle, ServeOptions, TelemetryOptions};
use agentkit_test_support::http::{Request, Response};

use super::http::SCRAPER;
use agentkit_test_support::otlp::{OtlpReceiver, ReceivedSpan, render_tree};
use expect_test::expect;
use serde_json::{Value, json};

/// The caller's trace context on the first request.
const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

const LOOKUP_TOOL: &str = r#"description = "Look a word up"
command = ["python3", "lookup.py"]
[input_schema]
type = "object"
properties.word = { type = "string" }
"#;

const LOOKUP_PY: &str = r#"import json, sys
args = json.load(sys.stdin)
print(json.dumps({"meaning": "a greeting", "word": args.get("word")}))
"#;

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

/// Turn 0: a tool call and a subagent call, then a call that parks;
/// turn 1 is the resumed turn.
const SCRIPT: &str = r#"{"turns": [
  {"steps": [
    {"toolCalls": [{"name": "lookup", "input": {"word": "hello"}},
                   {"name": "task", "input": {"subagent": "helper", "prompt": "Say why"}}],
     "usage": {"inputTokens": 11, "outputTokens": 7, "cacheReadTokens": 3}},
    {"toolCalls": [{"name": "echo", "input": {"text": "hi"}}], "usage": {"inputTokens": 13, "outputTokens": 5}},
    {"text": "unused"}
  ]},
  {"steps": [{"text": "resumed and done", "usage": {"inputTokens": 17, "outputTokens": 2}}]}
]}"#;

const HELPER_SCRIPT: &str = r#"{"turns": [{"steps": [{"text": "because", "usage": {"inputTokens": 5, "outputTokens": 1}}]}]}"#;

const SIMPLE_SCRIPT: &str = r#"{"turns": [
  {"steps": [{"toolCalls": [{"name": "lookup", "input": {"word": "a"}}], "usage": {"inputTokens": 1, "outputTokens": 1}},
             {"text": "one", "usage": {"inputTokens": 10, "outputTokens": 4}}]},
  {"steps": [{"text": "two", "usage": {"inputTokens": 20, "outputTokens": 6}}]},
  {"steps": [{"text": "three", "usage": {"inputTokens": 30, "outputTokens": 8}}]}
]}"#;

struct Host {
    dir: tempfile::TempDir,
    rt: tokio::runtime::Runtime,
    handle: Option<ServeHandle>,
    telemetry: TelemetryOptions,
    providers: agentkit::ProviderConfig,
}

impl Host {
    fn new(files: &[(&str, &str)], telemetry: TelemetryOptions) -> Host {
        Host::with_providers(files, telemetry, Default::default())
    }

    fn with_providers(
        files: &[(&str, &str)],
        telemetry: TelemetryOptions,
        providers: agentkit::ProviderConfig,
    ) -> Host {
        Host::agents(&[("bot", files)], telemetry, providers)
    }

    fn agents(
        agents: &[(&str, &[(&str, &str)])],
        telemetry: TelemetryOptions,
        providers: agentkit::ProviderConfig,
    ) -> Host {
        let dir = tempfile::tempdir().unwrap();
        for (slug, files) in agents {
            let project = dir.path().join("agents").join(slug).join("agent");
            for (rel, text) in *files {
                write(&project.join(rel), text);
            }
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let mut host = Host {
            dir,
            rt,
            handle: None,
            telemetry,
            providers,
        };
        host.start();
        host
    }

    fn start(&mut self) {
        let options = super::http::with_scraper(ServeOptions {
            port: 0,
            state_root: Some(self.dir.path().join("state")),
            telemetry: self.telemetry.clone(),
            providers: self.providers.clone(),
            ..ServeOptions::default()
        });
        let agents: PathBuf = self.dir.path().join("agents");
        let handle = self.rt.block_on(agentkit::serve(&agents, options)).unwrap();
        self.handle = Some(handle);
    }

    /// A graceful stop (spans flushed) and a fresh server over the same
    /// state.
    fn restart(&mut self) {
        self.stop();
        self.start();
    }

    fn stop(&mut self) {
        if let Some(h) = self.handle.take() {
            self.rt.block_on(h.close());
        }
    }

    fn send(&self, req: Request) -> Response {
        req.send(self.handle.as_ref().unwrap().local_addr())
            .unwrap()
    }

    fn create(&self, req: Request) -> String {
        self.create_json(req)["sessionId"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    fn create_json(&self, req: Request) -> Value {
        let r = self.send(req);
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()
    }

    fn follow_up(&self, id: &str, token: &str, message: &str) {
        let r = self.send(
            Request::post(&format!("/bot/v1/session/{id}"))
                .json(&json!({"message": message, "continuationToken": token})),
        );
        assert_eq!(r.status, 200, "{}", r.body);
    }

    /// Reads the stream from 0 until the `n`th event of type `t`.
    fn wait_for(&self, id: &str, t: &str, n: usize) -> Vec<Value> {
        let addr = self.handle.as_ref().unwrap().local_addr();
        let mut lines = Request::get(&format!("/bot/v1/session/{id}/stream?startIndex=0"))
            .stream(addr)
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
        self.stop();
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn traced(receiver: &OtlpReceiver, capture: bool) -> TelemetryOptions {
    TelemetryOptions {
        traces_endpoint: Some(receiver.traces_url()),
        service_name: Some("obs-test".into()),
        resource_attributes: vec![("deployment.environment".into(), "test".into())],
        capture_content: capture,
        ..Default::default()
    }
}

fn agent_files(script: &str) -> Vec<(&str, &str)> {
    vec![
        ("agent.toml", "model = \"scripted:script.json\"\n"),
        ("instructions.md", "You are a test agent.\n"),
        ("script.json", script),
        ("tools/lookup.toml", LOOKUP_TOOL),
        ("tools/lookup.py", LOOKUP_PY),
        ("tools/echo.toml", ECHO_TOOL),
        ("tools/echo.py", ECHO_PY),
        (
            "subagents/helper/agent.toml",
            "description = \"Explains\"\nmodel = \"scripted:helper.json\"\n",
        ),
        ("subagents/helper/instructions.md", "You explain.\n"),
        ("subagents/helper/helper.json", HELPER_SCRIPT),
    ]
}

fn named<'a>(spans: &'a [ReceivedSpan], name: &str) -> Vec<&'a ReceivedSpan> {
    spans.iter().filter(|s| s.name == name).collect()
}

fn one<'a>(spans: &'a [ReceivedSpan], name: &str) -> &'a ReceivedSpan {
    let found = named(spans, name);
    assert_eq!(found.len(), 1, "one `{name}` span: {spans:#?}");
    found[0]
}

#[test]
fn a_turn_parked_across_a_restart_is_one_trace_with_its_tool_subagent_and_wait_spans() {
    let receiver = OtlpReceiver::start();
    let files = agent_files(SCRIPT);
    let mut host = Host::new(&files, traced(&receiver, true));
    let id = host.create(
        Request::post("/bot/v1/session")
            .header(
                "traceparent",
                &format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"),
            )
            .json(&json!({"message": "go"})),
    );
    let events = host.wait_for(&id, "action.approval_requested", 1);
    let call = events.last().unwrap()["data"]["callId"]
        .as_str()
        .unwrap()
        .to_owned();
    host.restart();
    let r = host.send(
        Request::post(&format!("/bot/v1/session/{id}/approvals/{call}"))
            .json(&json!({"decision": "approve"})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let events = host.wait_for(&id, "turn.completed", 1);
    assert_eq!(events.last().unwrap()["data"]["result"], "resumed and done");
    host.stop();

    let spans: Vec<ReceivedSpan> = receiver
        .spans()
        .into_iter()
        .filter(|s| s.trace_id == CALLER_TRACE)
        .collect();
    // One trace: the request, the parked turn, its wait and the call run
    // after the restart, and the turn that resumed it.
    expect![[r#"
        POST /bot/v1/session
          invoke_agent bot
            await_approval echo
            chat script.json
            chat script.json
            execute_tool echo
            execute_tool lookup
            execute_tool task
              invoke_agent helper
                chat helper.json
            invoke_agent bot
              chat script.json
    "#]]
    .assert_eq(&render_tree(&spans));

    let server = one(&spans, "POST /bot/v1/session");
    assert_eq!(server.parent_span_id.as_deref(), Some(CALLER_SPAN));
    assert_eq!(server.kind, 2, "a server span");
    assert_eq!(server.attr_str("http.route"), Some("/bot/v1/session"));
    assert_eq!(server.attr_int("http.response.status_code"), Some(200));
    assert_eq!(server.resource["service.name"], "obs-test");
    assert_eq!(server.resource["deployment.environment"], "test");

    let turns = named(&spans, "invoke_agent bot");
    let (first, resumed) = (turns[0], turns[1]);
    assert_eq!(
        first.parent_span_id.as_deref(),
        Some(server.span_id.as_str())
    );
    assert_eq!(
        resumed.parent_span_id.as_deref(),
        Some(first.span_id.as_str())
    );
    for turn in [first, resumed] {
        assert_eq!(turn.attr_str("gen_ai.operation.name"), Some("invoke_agent"));
        assert_eq!(turn.attr_str("gen_ai.agent.name"), Some("bot"));
        assert_eq!(turn.attr_str("gen_ai.provider.name"), Some("scripted"));
        assert_eq!(turn.attr_str("gen_ai.request.model"), Some("script.json"));
        assert_eq!(turn.attr_str("gen_ai.conversation.id"), Some(id.as_str()));
    }
    // The first turn was interrupted by the shutdown, not failed.
    assert_eq!(
        first.attr_str("agentkit.turn.interrupted"),
        Some("shutdown")
    );
    assert_eq!(first.error, None);
    assert_eq!(resumed.attr_int("gen_ai.usage.input_tokens"), Some(17));
    assert_eq!(resumed.attr_int("gen_ai.usage.output_tokens"), Some(2));
    // Content capture is on: the user message and the reply.
    assert!(
        first
            .attr_str("gen_ai.input.messages")
            .is_some_and(|m| m.contains("\"go\"")),
        "{first:#?}"
    );
    assert!(
        resumed
            .attr_str("gen_ai.output.messages")
            .is_some_and(|m| m.contains("resumed and done"))
    );

    let chats = named(&spans, "chat script.json");
    let step1 = chats
        .iter()
        .find(|c| c.parent_span_id.as_deref() == Some(first.span_id.as_str()))
        .unwrap();
    assert_eq!(step1.attr_str("gen_ai.operation.name"), Some("chat"));
    assert_eq!(step1.attr_str("gen_ai.response.model"), Some("script.json"));
    assert_eq!(step1.attr_int("gen_ai.usage.input_tokens"), Some(11));
    assert_eq!(step1.attr_int("gen_ai.usage.output_tokens"), Some(7));
    assert_eq!(
        step1.attr_int("gen_ai.usage.cache_read.input_tokens"),
        Some(3)
    );
    assert_eq!(
        step1.attr_int("gen_ai.usage.cache_creation.input_tokens"),
        Some(0)
    );
    assert_eq!(
        step1.attr("gen_ai.response.finish_reasons"),
        Some(&json!(["tool_call"]))
    );

    let lookup = one(&spans, "execute_tool lookup");
    assert_eq!(
        lookup.attr_str("gen_ai.operation.name"),
        Some("execute_tool")
    );
    assert_eq!(lookup.attr_str("gen_ai.tool.name"), Some("lookup"));
    assert!(lookup.attr_str("gen_ai.tool.call.id").is_some());
    assert!(
        lookup
            .attr_str("gen_ai.tool.call.arguments")
            .is_some_and(|a| a.contains("hello"))
    );
    assert!(
        lookup
            .attr_str("gen_ai.tool.call.result")
            .is_some_and(|a| a.contains("a greeting"))
    );
    let helper = one(&spans, "invoke_agent helper");
    assert_eq!(helper.attr_int("gen_ai.usage.output_tokens"), Some(1));
    // The subagent's own model step, from its `subagent.step` event.
    let step = one(&spans, "chat helper.json");
    assert_eq!(
        step.parent_span_id.as_deref(),
        Some(helper.span_id.as_str())
    );
    assert_eq!(step.attr_str("gen_ai.provider.name"), Some("scripted"));
    assert_eq!(step.attr_str("gen_ai.agent.name"), Some("helper"));
    assert_eq!(step.attr_int("gen_ai.usage.output_tokens"), Some(1));
    assert!(
        step.start_unix_nano <= step.end_unix_nano
            && helper.start_unix_nano <= step.start_unix_nano,
        "{step:#?}"
    );

    // Span kinds by the GenAI conventions: a model call (`chat`, the
    // subagent's too) is CLIENT (3); agents, tools and waits in the
    // process are INTERNAL (1).
    let kinds: std::collections::BTreeSet<(String, i32)> = spans
        .iter()
        .filter(|s| !s.name.starts_with("POST "))
        .map(|s| (s.name.split(' ').next().unwrap().to_owned(), s.kind))
        .collect();
    assert_eq!(
        kinds.into_iter().collect::<Vec<_>>(),
        [
            ("await_approval".to_owned(), 1),
            ("chat".to_owned(), 3),
            ("execute_tool".to_owned(), 1),
            ("invoke_agent".to_owned(), 1),
        ]
    );

    let wait = one(&spans, "await_approval echo");
    let echo = one(&spans, "execute_tool echo");
    assert_eq!(wait.attr_str("agentkit.approval.decision"), Some("approve"));
    assert_eq!(echo.attr_str("gen_ai.tool.call.id"), Some(call.as_str()));
    // The wait spans the restart: it began before the first turn ended
    // and ended when the call ran.
    assert!(wait.start_unix_nano <= first.end_unix_nano);
    assert!(wait.end_unix_nano <= echo.start_unix_nano + 1_000_000);
    assert!(wait.end_unix_nano > first.end_unix_nano);
}

#[test]
fn content_is_captured_only_when_asked() {
    let receiver = OtlpReceiver::start();
    let files = agent_files(SIMPLE_SCRIPT);
    let mut host = Host::new(&files, traced(&receiver, false));
    let id =
        host.create(Request::post("/bot/v1/session").json(&json!({"message": "secret words"})));
    host.wait_for(&id, "turn.completed", 1);
    host.stop();
    let spans = receiver.spans();
    let turn = one(&spans, "invoke_agent bot");
    assert_eq!(turn.attr_int("gen_ai.usage.input_tokens"), Some(11));
    assert!(named(&spans, "execute_tool lookup").len() == 1);
    for s in &spans {
        for key in [
            "gen_ai.input.messages",
            "gen_ai.output.messages",
            "gen_ai.tool.call.arguments",
            "gen_ai.tool.call.result",
        ] {
            assert_eq!(s.attr(key), None, "{key} on {}", s.name);
        }
        for v in s.attributes.values() {
            assert!(!v.to_string().contains("secret words"), "{s:#?}");
        }
    }
}

#[test]
fn an_incoming_traceparent_reaches_the_provider_request() {
    use agentkit_test_support::provider::{MockProvider, Step};
    let mock = MockProvider::start(vec![Step::text("hello there").into()]);
    let receiver = OtlpReceiver::start();
    let mut providers = agentkit::ProviderConfig::default();
    providers.openai.base_url = mock.openai_base_url();
    providers.openai.api_key = Some("sk-test".into());
    let files = vec![
        (
            "agent.toml",
            "model = \"openai:gpt-test\"\n[harness]\nbuiltin_tools = []\n",
        ),
        ("instructions.md", "You greet.\n"),
    ];
    let mut host = Host::with_providers(&files, traced(&receiver, false), providers);
    let id = host.create(
        Request::post("/bot/v1/session")
            .header(
                "traceparent",
                &format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"),
            )
            .json(&json!({"message": "hi"})),
    );
    host.wait_for(&id, "turn.completed", 1);
    host.stop();
    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    let sent = requests[0]
        .header("traceparent")
        .expect("a traceparent on the provider request");
    let parsed = agentkit::protocol::trace::TraceParent::parse(sent).unwrap();
    assert_eq!(parsed.trace_id, CALLER_TRACE);
    // The provider's caller is the step's `chat` span.
    let spans = receiver.spans();
    let chat = one(&spans, "chat gpt-test");
    assert_eq!(chat.span_id, parsed.span_id);
    assert_eq!(chat.trace_id, CALLER_TRACE);
    assert_eq!(chat.attr_str("gen_ai.provider.name"), Some("openai"));
}

#[test]
fn tracing_off_keeps_no_trace_context_and_sends_none() {
    use agentkit_test_support::provider::{MockProvider, Step};
    let mock = MockProvider::start(vec![Step::text("hello").into()]);
    let mut providers = agentkit::ProviderConfig::default();
    providers.openai.base_url = mock.openai_base_url();
    providers.openai.api_key = Some("sk-test".into());
    let files = vec![
        (
            "agent.toml",
            "model = \"openai:gpt-test\"\n[harness]\nbuiltin_tools = []\n",
        ),
        ("instructions.md", "You greet.\n"),
    ];
    let host = Host::with_providers(&files, TelemetryOptions::default(), providers);
    let id = host.create(
        Request::post("/bot/v1/session")
            .header(
                "traceparent",
                &format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"),
            )
            .json(&json!({"message": "hi"})),
    );
    let events = host.wait_for(&id, "turn.completed", 1);
    assert_eq!(mock.requests()[0].header("traceparent"), None);
    for e in &events {
        assert_eq!(e["data"].get("trace"), None, "{e}");
        assert_eq!(e["data"].get("traceparent"), None, "{e}");
    }
}

#[test]
fn the_otel_variables_configure_export_and_http_json_is_refused() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    };
    let o = TelemetryOptions::from_env(env(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=a%3Db,other=2"),
        ("OTEL_SERVICE_NAME", "svc"),
        ("OTEL_RESOURCE_ATTRIBUTES", "team=ai,region=eu"),
        ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"),
    ]))
    .unwrap();
    assert_eq!(
        o.traces_endpoint.as_deref(),
        Some("http://collector:4318/v1/traces")
    );
    assert_eq!(
        o.metrics_endpoint.as_deref(),
        Some("http://collector:4318/v1/metrics")
    );
    assert_eq!(
        o.headers,
        vec![
            ("x-api-key".into(), "a=b".into()),
            ("other".into(), "2".into())
        ]
    );
    assert_eq!(o.service_name.as_deref(), Some("svc"));
    assert_eq!(o.resource_attributes.len(), 2);
    assert!(o.capture_content);
    let o = TelemetryOptions::from_env(env(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
        (
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://other:4318/custom",
        ),
    ]))
    .unwrap();
    assert_eq!(
        o.traces_endpoint.as_deref(),
        Some("http://other:4318/custom")
    );
    assert!(!o.capture_content);
    assert_eq!(
        TelemetryOptions::from_env(env(&[]))
            .unwrap()
            .traces_endpoint,
        None
    );
    let off = TelemetryOptions::from_env(env(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
        ("OTEL_TRACES_EXPORTER", "none"),
    ]))
    .unwrap();
    assert_eq!(off.traces_endpoint, None);
    assert!(off.metrics_endpoint.is_some(), "metrics stay on");
    let no_metrics = TelemetryOptions::from_env(env(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
        ("OTEL_METRICS_EXPORTER", "none"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "5000"),
    ]))
    .unwrap();
    assert_eq!(no_metrics.metrics_endpoint, None);
    assert!(no_metrics.traces_endpoint.is_some());
    assert_eq!(
        no_metrics.metrics_interval,
        Some(std::time::Duration::from_secs(5))
    );
    let bad = TelemetryOptions::from_env(env(&[("OTEL_METRIC_EXPORT_INTERVAL", "soon")]))
        .unwrap_err()
        .to_string();
    assert!(bad.contains("OTEL_METRIC_EXPORT_INTERVAL `soon`"), "{bad}");
    // gRPC takes the collector's address as it is; http/json is refused.
    let grpc = TelemetryOptions::from_env(env(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
    ]))
    .unwrap();
    assert_eq!(
        grpc.traces_endpoint.as_deref(),
        Some("http://collector:4317")
    );
    assert_eq!(
        grpc.metrics_endpoint.as_deref(),
        Some("http://collector:4317")
    );
    assert_eq!(grpc.traces_protocol, agentkit::OtlpProtocol::Grpc);
    let mixed = TelemetryOptions::from_env(env(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "http/protobuf"),
        (
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
            "http://collector:4318/v1/metrics",
        ),
    ]))
    .unwrap();
    assert_eq!(mixed.metrics_protocol, agentkit::OtlpProtocol::HttpProtobuf);
    assert_eq!(mixed.traces_protocol, agentkit::OtlpProtocol::Grpc);
    let json = TelemetryOptions::from_env(env(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
    ]))
    .unwrap_err()
    .to_string();
    assert!(
        json.contains("`http/json` is not supported") && json.contains("`grpc`"),
        "{json}"
    );
}

/// Parses OpenMetrics text with the Python `prometheus_client` parser and
/// answers `{"name{labels}": value}` for every sample.
fn parse_metrics(python: &Path, text: &str) -> serde_json::Map<String, Value> {
    parse_with(python, "prometheus_client.openmetrics.parser", text)
}

/// The same with `parser` (a `prometheus_client` module with
/// `text_string_to_metric_families`), each family's type under
/// `"TYPE {family}"`.
fn parse_with(python: &Path, parser: &str, text: &str) -> serde_json::Map<String, Value> {
    let script = format!(
        r#"
import json, sys
from {parser} import text_string_to_metric_families
out = {{}}
for family in text_string_to_metric_families(sys.stdin.read()):
    out[f"TYPE {{family.name}}"] = family.type
    for s in family.samples:
        labels = ",".join(f"{{k}}={{v}}" for k, v in sorted(s.labels.items()))
        out[f"{{s.name}}{{{{{{labels}}}}}}"] = s.value
print(json.dumps(out))
"#
    );
    let script = script.as_str();
    let mut child = std::process::Command::new(python)
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the parser refused the text:\n{text}");
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_object()
        .unwrap()
        .clone()
}

#[test]
#[allow(clippy::print_stderr)]
fn metrics_count_a_known_workload_and_parse_as_openmetrics() {
    let bin = match agentkit_test_support::pyenv::pyenv_bin("/metrics parser") {
        Ok(bin) => bin,
        Err(skip) => {
            eprintln!("{skip}");
            return;
        }
    };
    let files = agent_files(SIMPLE_SCRIPT);
    let host = Host::new(
        &files,
        TelemetryOptions {
            metrics_public: false,
            ..Default::default()
        },
    );
    // Two sessions: three turns (one with a tool call), known tokens.
    let first = host.create_json(Request::post("/bot/v1/session").json(&json!({"message": "1"})));
    let a = first["sessionId"].as_str().unwrap().to_owned();
    host.wait_for(&a, "session.waiting", 1);
    host.follow_up(&a, first["continuationToken"].as_str().unwrap(), "2");
    host.wait_for(&a, "session.waiting", 2);
    let b = host.create(Request::post("/bot/v1/session").json(&json!({"message": "3"})));
    host.wait_for(&b, "session.waiting", 1);
    // The default chain (loopback only) guards /metrics.
    let refused = host.send(Request::get("/metrics").header("x-forwarded-for", "10.0.0.1"));
    assert_eq!(refused.status, 401, "{}", refused.body);
    // The loopback caller it admits is a `user`, not an operator.
    let user = host.send(Request::get("/metrics"));
    assert_eq!(user.status, 403, "{}", user.body);
    // The families follow the event store's tap: scrape until the last
    // turn is counted (bounded).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let m = loop {
        // Prometheus's own Accept header: OpenMetrics first.
        let r = host.send(Request::get("/metrics").bearer(SCRAPER).header(
            "accept",
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
        ));
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(
            r.header("content-type")
                .unwrap()
                .starts_with("application/openmetrics-text")
        );
        let m = parse_metrics(&bin.join("python"), &r.body);
        let value = |k: &str| m.get(k).and_then(Value::as_f64);
        // Each settle syncs the log after its `session.waiting`.
        let done = value("agentkit_sessions_active{agent=bot}") == Some(0.0)
            && value("agentkit_turns_completed_total{agent=bot}") == Some(3.0)
            && value("agentkit_event_fsyncs_total{agent=bot}").is_some_and(|n| n >= 3.0);
        if done || std::time::Instant::now() > deadline {
            break m;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let get = |k: &str| {
        m.get(k)
            .and_then(Value::as_f64)
            .unwrap_or_else(|| panic!("{k} in {m:#?}"))
    };
    assert_eq!(get("agentkit_turns_started_total{agent=bot}"), 3.0);
    assert_eq!(get("agentkit_turns_completed_total{agent=bot}"), 3.0);
    assert_eq!(get("agentkit_turn_duration_seconds_count{agent=bot}"), 3.0);
    // Session a runs the script's turns 0 and 1, session b its turn 0:
    // steps 2 + 1 + 2, one tool call in each turn 0.
    assert_eq!(get("agentkit_step_duration_seconds_count{agent=bot}"), 5.0);
    let tokens = |kind: &str| {
        get(&format!(
            "agentkit_tokens_total{{agent=bot,kind={kind},model=script.json}}"
        ))
    };
    assert_eq!(tokens("output"), (1.0 + 4.0) + 6.0 + (1.0 + 4.0));
    assert_eq!(tokens("input"), (1.0 + 10.0) + 20.0 + (1.0 + 10.0));
    assert_eq!(tokens("cache_read"), 0.0);
    assert_eq!(get("agentkit_tool_calls_total{agent=bot,tool=lookup}"), 2.0);
    assert_eq!(
        m.get("agentkit_tool_errors_total{agent=bot,tool=lookup}"),
        None
    );
    assert_eq!(get("agentkit_sessions_active{agent=bot}"), 0.0);
    assert_eq!(get("agentkit_sessions_stored{agent=bot}"), 2.0);
    assert_eq!(
        get("agentkit_http_requests_total{route=/bot/v1/session,status=200}"),
        2.0
    );
    assert_eq!(
        get("agentkit_http_requests_total{route=/bot/v1/session/{id},status=200}"),
        1.0
    );
    assert!(get("agentkit_open_log_handles{agent=bot}") >= 1.0);
    // Every turn appended and synced its log at least once.
    assert!(get("agentkit_event_appends_total{agent=bot}") >= 3.0 * 4.0);
    assert!(
        get("agentkit_event_fsyncs_total{agent=bot}") >= 3.0,
        "{m:#?}"
    );
    assert!(get("agentkit_event_append_seconds_total{agent=bot}") > 0.0);
    assert!(get("agentkit_event_fsync_seconds_total{agent=bot}") > 0.0);
    // On Linux the syncs went through the journal, in batches.
    let batches = get("agentkit_event_sync_batches_total{agent=bot}");
    let journaled = get("agentkit_event_journaled_syncs_total{agent=bot}");
    assert!(batches >= 1.0 && batches <= journaled, "{m:#?}");
    if cfg!(target_os = "linux") {
        assert!(journaled >= 3.0, "{m:#?}");
    }
    assert!(m.contains_key("agentkit_event_journal_checkpoints_total{agent=bot}"));

    // A scraper that asks for the Prometheus text format (or for nothing)
    // gets text 0.0.4, which the Python client's own text parser reads
    // with every family typed as in OpenMetrics and the same samples.
    for accept in [Some("text/plain; version=0.0.4"), None] {
        let mut req = Request::get("/metrics").bearer(SCRAPER);
        if let Some(a) = accept {
            req = req.header("accept", a);
        }
        let r = host.send(req);
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(
            r.header("content-type"),
            Some("text/plain; version=0.0.4; charset=utf-8")
        );
        assert!(!r.body.contains("# EOF"), "{}", r.body);
        let text = parse_with(&bin.join("python"), "prometheus_client.parser", &r.body);
        let types = |m: &serde_json::Map<String, Value>| -> Vec<(String, Value)> {
            m.iter()
                .filter(|(k, _)| k.starts_with("TYPE "))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        assert_eq!(types(&text), types(&m), "{}", r.body);
        assert_eq!(text["TYPE agentkit_turns_started"], "counter", "{}", r.body);
        assert_eq!(
            text["agentkit_turns_started_total{agent=bot}"],
            m["agentkit_turns_started_total{agent=bot}"]
        );
        assert_eq!(
            text["agentkit_turn_duration_seconds_count{agent=bot}"],
            m["agentkit_turn_duration_seconds_count{agent=bot}"]
        );
        // The scrapes themselves are counted after they answer: leave
        // the `/metrics` route out.
        let samples = |m: &serde_json::Map<String, Value>| -> Vec<String> {
            m.keys()
                .filter(|k| !k.starts_with("TYPE ") && !k.contains("route=/metrics"))
                .cloned()
                .collect()
        };
        assert_eq!(samples(&text), samples(&m));
    }
}

#[test]
fn metrics_public_skips_the_chain() {
    let files = agent_files(SIMPLE_SCRIPT);
    let host = Host::new(
        &files,
        TelemetryOptions {
            metrics_public: true,
            ..Default::default()
        },
    );
    let r = host.send(Request::get("/metrics").header("x-forwarded-for", "10.0.0.1"));
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.body.contains("agentkit_open_log_handles{agent=\"bot\"}"),
        "{}",
        r.body
    );
    // The logs stay behind the chain.
    let r = host.send(Request::get("/v1/logs").header("x-forwarded-for", "10.0.0.1"));
    assert_eq!(r.status, 401, "{}", r.body);
}

/// The log ring is the process's: the test binary installs the layer once.
pub(crate) fn install_log_layer() {
    use tracing_subscriber::prelude::*;
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = tracing_subscriber::registry()
            .with(tracing_subscriber::EnvFilter::new("debug"))
            .with(agentkit::logs::log_layer(false))
            .try_init();
    });
}

#[test]
fn the_logs_route_filters_by_session_and_limits() {
    install_log_layer();
    let receiver = OtlpReceiver::start();
    let files = agent_files(SIMPLE_SCRIPT);
    let host = Host::new(&files, traced(&receiver, false));
    let a = host.create(Request::post("/bot/v1/session").json(&json!({"message": "1"})));
    host.wait_for(&a, "turn.completed", 1);
    let b = host.create(Request::post("/bot/v1/session").json(&json!({"message": "2"})));
    let events = host.wait_for(&b, "turn.completed", 1);
    // Its lines name every tenant's ids: an admin's only.
    let r = host.send(Request::get(&format!("/v1/logs?session={a}")));
    assert_eq!(r.status, 403, "{}", r.body);
    let r = host.send(Request::get(&format!("/v1/logs?session={a}")).bearer(SCRAPER));
    assert_eq!(r.status, 200, "{}", r.body);
    let lines = r.json()["logs"].as_array().unwrap().clone();
    assert!(!lines.is_empty());
    assert!(
        lines.iter().all(|l| l["sessionId"] == a.as_str()),
        "{lines:#?}"
    );
    let running = lines
        .iter()
        .find(|l| l["message"] == "turn running")
        .unwrap_or_else(|| panic!("{lines:#?}"));
    assert!(
        running["turnId"]
            .as_str()
            .is_some_and(|t| t.starts_with("turn"))
    );
    // The line carries the trace of its turn.
    let started = events
        .iter()
        .filter(|e| e["type"] == "turn.started")
        .count();
    assert_eq!(started, 1);
    assert_eq!(running["traceId"].as_str().map(str::len), Some(32));
    let r = host.send(Request::get(&format!("/v1/logs?session={b}&limit=1")).bearer(SCRAPER));
    let lines = r.json()["logs"].as_array().unwrap().clone();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert_eq!(lines[0]["sessionId"], b.as_str());
    // Pages of one line, following `nextCursor`, walk back through the
    // same lines as one page of all of them, each once (lines written
    // after the walk began are newer than its first).
    let seqs = |page: &Value| -> Vec<u64> {
        page["logs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["seq"].as_u64().unwrap())
            .collect()
    };
    let mut walked = Vec::new();
    let mut query = "/v1/logs?limit=1".to_owned();
    loop {
        let page = host.send(Request::get(&query).bearer(SCRAPER)).json();
        walked.extend(seqs(&page));
        match page["nextCursor"].as_str() {
            Some(c) => query = format!("/v1/logs?limit=1&cursor={c}"),
            None => break,
        }
    }
    walked.reverse();
    let newest = *walked.last().unwrap();
    let all: Vec<u64> = seqs(
        &host
            .send(Request::get("/v1/logs?limit=1000").bearer(SCRAPER))
            .json(),
    )
    .into_iter()
    .filter(|s| *s <= newest)
    .collect();
    assert!(walked.len() > 1, "{walked:?}");
    assert_eq!(walked, all);
    let r = host.send(Request::get("/v1/logs?cursor=nope").bearer(SCRAPER));
    assert_eq!(r.status, 400, "{}", r.body);
    // Another caller is refused.
    let r = host.send(Request::get("/v1/logs").header("x-forwarded-for", "10.0.0.1"));
    assert_eq!(r.status, 401);
}

#[test]
fn a_peer_agent_call_continues_the_trace_through_mcp_meta() {
    let receiver = OtlpReceiver::start();
    let a_script = r#"{"turns": [{"steps": [
        {"toolCalls": [{"name": "peer__ask", "input": {"message": "hello b"}}]},
        {"text": "a is done"}
    ]}]}"#;
    let b_script = r#"{"turns": [{"steps": [{"text": "b answers"}]}]}"#;
    let a: Vec<(&str, &str)> = vec![
        ("agent.toml", "model = \"scripted:script.json\"\n"),
        ("script.json", a_script),
        ("instructions.md", "Delegate.\n"),
        ("mcp-connections/peer.toml", "agent = \"b\"\n"),
    ];
    let b: Vec<(&str, &str)> = vec![
        ("agent.toml", "model = \"scripted:script.json\"\n"),
        ("script.json", b_script),
        ("instructions.md", "Answer.\n"),
    ];
    let mut host = Host::agents(
        &[("a", &a), ("b", &b)],
        traced(&receiver, false),
        Default::default(),
    );
    let r = host.send(
        Request::post("/a/v1/session")
            .header(
                "traceparent",
                &format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"),
            )
            .json(&json!({"message": "go"})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let addr = host.handle.as_ref().unwrap().local_addr();
    Request::get(&format!("/a/v1/session/{id}/stream?startIndex=0"))
        .stream(addr)
        .unwrap()
        .until("turn.completed")
        .unwrap();
    // The connection's health is a gauge per state.
    let metrics = host.send(Request::get("/metrics").bearer(SCRAPER)).body;
    assert!(
        metrics.contains(
            "agentkit_mcp_connections{agent=\"a\",connection=\"peer\",transport=\"peer\",state=\"connected\"} 1"
        ),
        "{metrics}"
    );
    assert!(metrics.contains(
        "agentkit_mcp_connections{agent=\"a\",connection=\"peer\",transport=\"peer\",state=\"error\"} 0"
    ));
    host.stop();
    let spans: Vec<ReceivedSpan> = receiver
        .spans()
        .into_iter()
        .filter(|s| s.trace_id == CALLER_TRACE)
        .collect();
    let call = one(&spans, "execute_tool peer__ask");
    let peer = one(&spans, "invoke_agent b");
    // The peer's turn is a child of the call that asked it.
    assert_eq!(
        peer.parent_span_id.as_deref(),
        Some(call.span_id.as_str()),
        "{spans:#?}"
    );
    assert_eq!(peer.attr_str("gen_ai.agent.name"), Some("b"));
    one(&spans, "invoke_agent a");
}

/// The value of the sample `line_start` (name and labels, as printed) in
/// OpenMetrics text.
fn sample(text: &str, line_start: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(line_start))
        .and_then(|rest| rest.trim().parse().ok())
}

#[test]
fn schedule_and_reminder_firings_are_counted_with_their_lateness() {
    use super::time::{Host as TimeHost, SCRIPT as DONE, at, wait_until};
    let mut h = TimeHost::new(
        DONE,
        &[(
            "schedules/heartbeat.md",
            "---\ncron: \"* * * * *\"\n---\n\nCheck the incidents.\n",
        )],
        at(12, 0, 30),
    );
    h.start(ServeOptions::default());
    // Two seconds late for the 12:01 tick.
    h.clock.set(at(12, 1, 2));
    wait_until("the 12:01 tick", || h.session_ids().len() == 1);
    let r = h.send(Request::post("/bot/v1/session").json(&json!({"message": "hi"})));
    let token = r.json()["continuationToken"].as_str().unwrap().to_owned();
    let reminder = agentkit::NewReminder {
        purpose: "recheck".into(),
        channel_id: "http".into(),
        continuation_token: token,
        when: agentkit::ReminderWhen::Delay(std::time::Duration::from_secs(30)),
        action: agentkit::ReminderAction::Prompt {
            prompt: "Look again.".into(),
            until: None,
        },
    };
    h.rt.block_on(h.handle().create_reminder("bot", reminder))
        .unwrap();
    // Due at 12:01:32; fired three seconds late, before the next tick
    // (a manual clock that jumps past a tick may skip it).
    h.clock.set(at(12, 1, 35));
    let metrics = || h.send(Request::get("/metrics").bearer(SCRAPER)).body;
    wait_until("the reminder", || {
        sample(&metrics(), "agentkit_reminders_fired_total{agent=\"bot\"}") == Some(1.0)
    });
    let text = metrics();
    let get = |k: &str| sample(&text, k).unwrap_or_else(|| panic!("{k} in {text}"));
    assert_eq!(
        get("agentkit_schedule_ticks_fired_total{agent=\"bot\"}"),
        1.0
    );
    // 12:01 fired at 12:01:02.
    assert_eq!(
        get("agentkit_schedule_lateness_seconds_total{agent=\"bot\"}"),
        2.0
    );
    assert_eq!(
        get("agentkit_reminder_lateness_seconds_total{agent=\"bot\"}"),
        3.0
    );
    assert_eq!(
        get("agentkit_schedule_ticks_skipped_total{agent=\"bot\"}"),
        0.0
    );
}

#[test]
fn a_live_approval_is_a_wait_span_inside_its_turn() {
    let receiver = OtlpReceiver::start();
    let script = r#"{"turns": [{"steps": [
        {"toolCalls": [{"name": "echo", "input": {"text": "hi"}}]},
        {"text": "approved and done"}
    ]}]}"#;
    let files = agent_files(script);
    let mut host = Host::new(&files, traced(&receiver, false));
    let id = host.create(Request::post("/bot/v1/session").json(&json!({"message": "go"})));
    let events = host.wait_for(&id, "action.approval_requested", 1);
    let call = events.last().unwrap()["data"]["callId"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = host.send(
        Request::post(&format!("/bot/v1/session/{id}/approvals/{call}"))
            .json(&json!({"decision": "deny", "reason": "not today"})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    host.wait_for(&id, "turn.completed", 1);
    host.stop();
    let spans = receiver.spans();
    let turn = one(&spans, "invoke_agent bot");
    let trace: Vec<ReceivedSpan> = spans
        .iter()
        .filter(|s| s.trace_id == turn.trace_id)
        .cloned()
        .collect();
    expect![[r#"
        POST /bot/v1/session
          invoke_agent bot
            await_approval echo
            chat script.json
            chat script.json
            execute_tool echo
    "#]]
    .assert_eq(&render_tree(&trace));
    let wait = one(&trace, "await_approval echo");
    assert_eq!(wait.parent_span_id.as_deref(), Some(turn.span_id.as_str()));
    assert_eq!(wait.attr_str("agentkit.approval.decision"), Some("deny"));
    assert_eq!(wait.attr_str("agentkit.approval.reason"), Some("not today"));
    assert!(
        wait.start_unix_nano >= turn.start_unix_nano && wait.end_unix_nano <= turn.end_unix_nano
    );
    // The denied call answered an error to the model.
    let echo = one(&trace, "execute_tool echo");
    assert_eq!(echo.attr_str("error.type"), Some("tool_error"));
    assert!(echo.error.is_some());
    assert_eq!(turn.error, None);
}

#[test]
fn metrics_are_pushed_over_otlp_too() {
    let receiver = OtlpReceiver::start();
    let files = agent_files(SIMPLE_SCRIPT);
    let mut host = Host::new(
        &files,
        TelemetryOptions {
            metrics_endpoint: Some(format!("{}/v1/metrics", receiver.url())),
            metrics_interval: Some(std::time::Duration::from_millis(200)),
            ..Default::default()
        },
    );
    let id = host.create(Request::post("/bot/v1/session").json(&json!({"message": "1"})));
    host.wait_for(&id, "session.waiting", 1);
    // A periodic push, then the last one when the server stops.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while receiver.metric("agentkit_turns_completed").is_empty() {
        assert!(std::time::Instant::now() < deadline, "no metrics pushed");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    host.stop();
    let completed = receiver.metric("agentkit_turns_completed");
    assert_eq!(completed.len(), 1, "{completed:?}");
    assert_eq!(completed[0].kind, "sum");
    assert_eq!(completed[0].value, 1.0);
    assert_eq!(completed[0].attributes["agent"], "bot");
    let tokens: f64 = receiver
        .metric("agentkit_tokens")
        .iter()
        .filter(|p| p.attributes["kind"] == "output")
        .map(|p| p.value)
        .sum();
    assert_eq!(tokens, 1.0 + 4.0);
    let turns = receiver.metric("agentkit_turn_duration_seconds");
    assert_eq!((turns[0].kind, turns[0].value), ("histogram", 1.0));
    assert_eq!(receiver.metric("agentkit_sessions_active")[0].kind, "gauge");
    // Traces stay off: no trace endpoint.
    assert_eq!(receiver.exports(), 0);
}

/// The official gRPC collector side (Python `grpcio` with the
/// `opentelemetry-proto` service stubs), one JSON line per export.
struct GrpcCollector {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<Value>,
    port: u16,
}

impl GrpcCollector {
    fn start(python: &Path) -> GrpcCollector {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/otlp_grpc_receiver.py");
        let mut child = std::process::Command::new(python)
            .arg(script)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead as _;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    break;
                }
            }
        });
        let first = lines
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("the gRPC collector did not start");
        let port = u16::try_from(first["port"].as_u64().unwrap()).unwrap();
        GrpcCollector { child, lines, port }
    }

    /// Exports received until `done` holds for everything seen so far.
    fn until(&self, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut seen = Vec::new();
        while !done(&seen) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(v) => seen.push(v),
                Err(_) => panic!("the collector did not get what was expected: {seen:#?}"),
            }
        }
        seen
    }
}

impl Drop for GrpcCollector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `OTEL_EXPORTER_OTLP_PROTOCOL=grpc`: traces and metrics reach a real gRPC
/// collector (Python's `grpcio` serving the `opentelemetry-proto`
/// services) over HTTP/2, with the GenAI attributes and the configured
/// headers as gRPC metadata.
#[test]
#[allow(clippy::print_stderr)]
fn traces_and_metrics_export_over_grpc_to_a_real_collector() {
    let bin = match agentkit_test_support::pyenv::pyenv_bin("the gRPC collector") {
        Ok(bin) => bin,
        Err(skip) => {
            eprintln!("{skip}");
            return;
        }
    };
    let collector = GrpcCollector::start(&bin.join("python"));
    let address = format!("http://127.0.0.1:{}", collector.port);
    let options = TelemetryOptions::from_env(|k| match k {
        "OTEL_EXPORTER_OTLP_ENDPOINT" => Some(address.clone()),
        "OTEL_EXPORTER_OTLP_PROTOCOL" => Some("grpc".into()),
        "OTEL_EXPORTER_OTLP_HEADERS" => Some("x-tenant=acme".into()),
        "OTEL_METRIC_EXPORT_INTERVAL" => Some("200".into()),
        "OTEL_SERVICE_NAME" => Some("grpc-test".into()),
        _ => None,
    })
    .unwrap();
    let files = agent_files(SIMPLE_SCRIPT);
    let mut host = Host::new(&files, options);
    let id = host.create(Request::post("/bot/v1/session").json(&json!({"message": "hello"})));
    host.wait_for(&id, "turn.completed", 1);
    let seen = collector.until(|seen| {
        let spans = || {
            seen.iter()
                .filter(|e| e["signal"] == "traces")
                .flat_map(|e| e["spans"].as_array().cloned().unwrap_or_default())
        };
        let metrics = seen.iter().any(|e| {
            e["signal"] == "metrics"
                && e["metrics"]
                    .as_array()
                    .is_some_and(|m| m.iter().any(|n| n == "agentkit_turns_completed"))
        });
        spans().any(|s| s["name"] == "invoke_agent bot")
            && spans().any(|s| s["name"] == "execute_tool lookup")
            && metrics
    });
    host.stop();
    let spans: Vec<Value> = seen
        .iter()
        .filter(|e| e["signal"] == "traces")
        .flat_map(|e| e["spans"].as_array().cloned().unwrap_or_default())
        .collect();
    let turn = spans
        .iter()
        .find(|s| s["name"] == "invoke_agent bot")
        .unwrap();
    assert_eq!(turn["attributes"]["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(turn["attributes"]["gen_ai.usage.input_tokens"], 11);
    assert_eq!(turn["attributes"]["gen_ai.conversation.id"], id.as_str());
    assert_eq!(turn["resource"]["service.name"], "grpc-test");
    let tool = spans
        .iter()
        .find(|s| s["name"] == "execute_tool lookup")
        .unwrap();
    assert_eq!(tool["traceId"], turn["traceId"], "one trace");
    let traces = seen.iter().find(|e| e["signal"] == "traces").unwrap();
    assert!(
        traces["metadata"]
            .as_array()
            .unwrap()
            .contains(&json!("x-tenant")),
        "{traces}"
    );
}
