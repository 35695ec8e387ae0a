//! Observability: OTLP traces built from each agent's events (`spans`,
//! sent by `export`), the Prometheus families of `GET /metrics`
//! (`metrics`), the HTTP layer that makes server spans, honours an
//! incoming `traceparent` and counts requests, and the host routes
//! `/metrics` and `/v1/logs` (the ring of [`crate::logs`]).
//!
//! Off unless configured: with no trace endpoint nothing is kept in the
//! log, nothing is sent, and the HTTP layer only counts.

mod export;
mod metrics;
mod otlp_metrics;
mod spans;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentkit_protocol::trace::TraceParent;
use agentkit_runtime::AgentRuntime;
use axum::Router;
use axum::extract::{MatchedPath, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::http::{ApiError, admit_context, require};
use super::roles::HostGuard;
use crate::error::{Error, Result};

/// How traces are exported and who may read `/metrics`: what
/// [`TelemetryOptions::from_env`] reads from the standard `OTEL_*`
/// variables, or what an embedder sets.
#[derive(Debug, Clone, Default)]
pub struct TelemetryOptions {
    /// The OTLP traces URL: OTLP/HTTP's `…/v1/traces`, or a gRPC
    /// collector's address (`http://host:4317`); `None`: no traces.
    pub traces_endpoint: Option<String>,
    /// The OTLP/HTTP metrics URL (`…/v1/metrics`); `None`: metrics only
    /// at `/metrics`.
    pub metrics_endpoint: Option<String>,
    /// How often metrics are pushed (`OTEL_METRIC_EXPORT_INTERVAL`, 60 s).
    pub metrics_interval: Option<Duration>,
    /// Headers every export carries (`OTEL_EXPORTER_OTLP_HEADERS`).
    pub headers: Vec<(String, String)>,
    /// How long one export may take (`OTEL_EXPORTER_OTLP_TIMEOUT`, 10 s).
    pub timeout: Option<Duration>,
    /// `service.name` (`OTEL_SERVICE_NAME`, default `agentkit`).
    pub service_name: Option<String>,
    /// More resource attributes (`OTEL_RESOURCE_ATTRIBUTES`).
    pub resource_attributes: Vec<(String, String)>,
    /// Put message and tool contents on spans
    /// (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`).
    pub capture_content: bool,
    /// Serve `/metrics` without authentication (`--metrics-public`).
    pub metrics_public: bool,
    /// How traces are sent (`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else
    /// `OTEL_EXPORTER_OTLP_PROTOCOL`).
    pub traces_protocol: OtlpProtocol,
    /// How metrics are pushed (`OTEL_EXPORTER_OTLP_METRICS_PROTOCOL`, else
    /// `OTEL_EXPORTER_OTLP_PROTOCOL`).
    pub metrics_protocol: OtlpProtocol,
}

/// An OTLP transport.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// `http/protobuf`: POST to the signal's URL (the collector's 4318).
    #[default]
    HttpProtobuf,
    /// `grpc`: the collector's gRPC service over HTTP/2 (its 4317); the
    /// endpoint is the collector's address, without a path.
    Grpc,
}

impl OtlpProtocol {
    /// `http/protobuf` or `grpc`; `http/json` and anything else are
    /// refused naming what is supported.
    fn parse(name: &str, var: &str) -> Result<OtlpProtocol> {
        match name.trim() {
            "http/protobuf" => Ok(OtlpProtocol::HttpProtobuf),
            "grpc" => Ok(OtlpProtocol::Grpc),
            other => Err(Error::Config {
                message: format!(
                    "{var} `{other}` is not supported: set it to `http/protobuf` (the collector's port 4318) or `grpc` (its port 4317)"
                ),
            }),
        }
    }
}

impl TelemetryOptions {
    /// Reads the standard variables through `lookup` (the binary passes
    /// the process environment). `grpc` and `http/json` are refused with
    /// a hint: only `http/protobuf` is implemented.
    pub fn from_env(lookup: impl Fn(&str) -> Option<String>) -> Result<TelemetryOptions> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let disabled = get("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let off = disabled || get("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim() == "none");
        let metrics_off =
            disabled || get("OTEL_METRICS_EXPORTER").is_some_and(|v| v.trim() == "none");
        let protocol_of = |signal: &str| -> Result<OtlpProtocol> {
            let var = format!("OTEL_EXPORTER_OTLP_{signal}_PROTOCOL");
            match get(&var) {
                Some(name) => OtlpProtocol::parse(&name, &var),
                None => match get("OTEL_EXPORTER_OTLP_PROTOCOL") {
                    Some(name) => OtlpProtocol::parse(&name, "OTEL_EXPORTER_OTLP_PROTOCOL"),
                    None => Ok(OtlpProtocol::HttpProtobuf),
                },
            }
        };
        // OTLP/HTTP appends the signal's path to the shared endpoint;
        // gRPC takes the collector's address as it is.
        let endpoint_of = |signal: &str, path: &str, protocol: OtlpProtocol| {
            get(&format!("OTEL_EXPORTER_OTLP_{signal}_ENDPOINT")).or_else(|| {
                get("OTEL_EXPORTER_OTLP_ENDPOINT").map(|base| match protocol {
                    OtlpProtocol::HttpProtobuf => {
                        format!("{}/{path}", base.trim_end_matches('/'))
                    }
                    OtlpProtocol::Grpc => base,
                })
            })
        };
        let metrics_protocol = if metrics_off {
            OtlpProtocol::HttpProtobuf
        } else {
            protocol_of("METRICS")?
        };
        let metrics_endpoint = endpoint_of("METRICS", "v1/metrics", metrics_protocol);
        let metrics_interval = get("OTEL_METRIC_EXPORT_INTERVAL")
            .map(|ms| {
                ms.trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|ms| *ms > 0)
                    .map(Duration::from_millis)
                    .ok_or_else(|| Error::Config {
                        message: format!(
                            "OTEL_METRIC_EXPORT_INTERVAL `{ms}` is not a positive number of milliseconds"
                        ),
                    })
            })
            .transpose()?;
        let traces_protocol = if off {
            OtlpProtocol::HttpProtobuf
        } else {
            protocol_of("TRACES")?
        };
        let endpoint = endpoint_of("TRACES", "v1/traces", traces_protocol);
        let mut headers = pairs(get("OTEL_EXPORTER_OTLP_HEADERS").as_deref());
        headers.extend(pairs(get("OTEL_EXPORTER_OTLP_TRACES_HEADERS").as_deref()));
        let timeout = get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
            .or_else(|| get("OTEL_EXPORTER_OTLP_TIMEOUT"))
            .map(|ms| {
                ms.trim()
                    .parse::<u64>()
                    .map(Duration::from_millis)
                    .map_err(|_| Error::Config {
                        message: format!(
                            "OTEL_EXPORTER_OTLP_TIMEOUT `{ms}` is not a number of milliseconds"
                        ),
                    })
            })
            .transpose()?;
        Ok(TelemetryOptions {
            traces_endpoint: endpoint.filter(|_| !off),
            metrics_endpoint: metrics_endpoint.filter(|_| !metrics_off),
            metrics_interval,
            headers,
            timeout,
            service_name: get("OTEL_SERVICE_NAME"),
            resource_attributes: pairs(get("OTEL_RESOURCE_ATTRIBUTES").as_deref()),
            capture_content: get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
            metrics_public: false,
            traces_protocol,
            metrics_protocol,
        })
    }
}

/// `k=v,k2=v2` with percent-encoded values, as the OTel variables spell
/// lists; malformed members are skipped.
fn pairs(s: Option<&str>) -> Vec<(String, String)> {
    s.unwrap_or_default()
        .split(',')
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            let k = k.trim();
            (!k.is_empty()).then(|| (k.to_owned(), percent_decode(v.trim())))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(b) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The resource attributes of every export: `service.name` from
/// `OTEL_SERVICE_NAME`, else from `OTEL_RESOURCE_ATTRIBUTES`, else
/// `agentkit`; the other attributes as given; the version unless given.
fn resource(options: &TelemetryOptions) -> Vec<(String, String)> {
    let given = |key: &str| {
        options
            .resource_attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    let name = options
        .service_name
        .clone()
        .or_else(|| given("service.name"))
        .unwrap_or_else(|| "agentkit".to_owned());
    let mut out = vec![("service.name".to_owned(), name)];
    out.extend(
        options
            .resource_attributes
            .iter()
            .filter(|(k, _)| k != "service.name")
            .cloned(),
    );
    if given("service.version").is_none() {
        out.push((
            "service.version".to_owned(),
            env!("CARGO_PKG_VERSION").to_owned(),
        ));
    }
    out.push(("telemetry.sdk.name".to_owned(), "agentkit".to_owned()));
    out
}

/// The host's telemetry: shared by every agent's watcher and the HTTP
/// layer.
#[derive(Debug, Clone)]
pub(crate) struct Telemetry {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    exporter: Option<export::Exporter>,
    metrics: metrics::Metrics,
    capture: bool,
    metrics_public: bool,
    /// The chain `/metrics` and `/v1/logs` run (the host's default chain,
    /// with its operators) and the agents' roles.
    chain: std::sync::OnceLock<HostGuard>,
    /// Ends the watchers: they drain what their tap holds, then stop.
    closing: CancellationToken,
    watchers: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// Where and how often metrics are pushed, and the push task.
    metrics_push: Option<(export::ExportConfig, Duration)>,
    pusher: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// When the process's counters began (the OTLP start time).
    started: u64,
    /// Each agent's store and MCP connections, for the scrape-time gauges.
    agents: std::sync::Mutex<Vec<(String, AgentRuntime, agentkit_mcp::Connections)>>,
    /// What the HTTP edge counts, once it runs.
    edge: std::sync::OnceLock<Arc<crate::serve::edge::EdgeStats>>,
}

impl Telemetry {
    pub(crate) fn start(options: &TelemetryOptions) -> Telemetry {
        let exporter = options.traces_endpoint.as_ref().map(|endpoint| {
            let resource = resource(options);
            export::Exporter::start(export::ExportConfig {
                endpoint: endpoint.clone(),
                headers: options.headers.clone(),
                timeout: options.timeout.unwrap_or(Duration::from_secs(10)),
                resource,
                protocol: options.traces_protocol,
            })
        });
        let metrics_push = options.metrics_endpoint.as_ref().map(|endpoint| {
            (
                export::ExportConfig {
                    endpoint: endpoint.clone(),
                    headers: options.headers.clone(),
                    timeout: options.timeout.unwrap_or(Duration::from_secs(10)),
                    resource: resource(options),
                    protocol: options.metrics_protocol,
                },
                options.metrics_interval.unwrap_or(Duration::from_secs(60)),
            )
        });
        let telemetry = Telemetry {
            inner: Arc::new(Inner {
                metrics_push,
                pusher: Default::default(),
                started: spans::now_nanos(),
                exporter,
                metrics: metrics::Metrics::new(),
                capture: options.capture_content,
                metrics_public: options.metrics_public,
                chain: Default::default(),
                closing: CancellationToken::new(),
                watchers: Default::default(),
                agents: Default::default(),
                edge: Default::default(),
            }),
        };
        telemetry.start_pusher();
        telemetry
    }

    /// Pushes the metrics every interval until the server closes.
    fn start_pusher(&self) {
        let Some((_, interval)) = &self.inner.metrics_push else {
            return;
        };
        let (this, interval) = (self.clone(), *interval);
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(interval) => this.push_metrics().await,
                    _ = this.inner.closing.cancelled() => return,
                }
            }
        });
        if let Ok(mut pusher) = self.inner.pusher.lock() {
            *pusher = Some(task);
        }
    }

    /// One OTLP export of every family.
    async fn push_metrics(&self) {
        let Some((config, _)) = &self.inner.metrics_push else {
            return;
        };
        let text = self.render_metrics().await;
        let request = otlp_metrics::request(
            &text,
            &config.resource,
            self.inner.started,
            spans::now_nanos(),
        );
        use prost::Message as _;
        export::post_protobuf(config, request.encode_to_vec(), "metrics").await;
    }

    /// The OpenMetrics text, the scrape-time gauges read first.
    async fn render_metrics(&self) -> String {
        let agents = self
            .inner
            .agents
            .lock()
            .map(|a| a.clone())
            .unwrap_or_default();
        for (slug, runtime, connections) in agents {
            // A count the index cannot give now is left as it was.
            let stored = runtime.stored_sessions().await.ok();
            self.inner.metrics.set_state(
                &slug,
                stored,
                runtime.store(),
                runtime.stats(),
                &connections.status(),
            );
        }
        if let Some(edge) = self.inner.edge.get() {
            self.inner.metrics.set_edge(edge);
        }
        self.inner.metrics.render()
    }

    /// Counts an answered HTTP request that never reached the HTTP layer
    /// (a turn the edge refused before routing).
    pub(crate) fn count_http(&self, route: &str, status: u16, seconds: f64) {
        self.inner.metrics.http(route, status, seconds);
    }

    /// Reads the HTTP edge's counts at each scrape.
    pub(crate) fn set_edge(&self, stats: Arc<crate::serve::edge::EdgeStats>) {
        let _ = stats.timings.set(self.inner.metrics.edge_timings());
        let _ = self.inner.edge.set(stats);
    }

    /// Traces are exported (the runtime keeps trace context in the log).
    pub(crate) fn tracing(&self) -> bool {
        self.inner.exporter.is_some()
    }

    /// Sets the chain of the host routes (once, at startup).
    pub(crate) fn set_chain(&self, guard: HostGuard) {
        let _ = self.inner.chain.set(guard);
    }

    /// Follows `runtime`'s events from now on: spans and metrics.
    pub(crate) fn watch(
        &self,
        slug: &str,
        runtime: &AgentRuntime,
        connections: &agentkit_mcp::Connections,
        default_model: Option<&agentkit_manifest::ModelSpec>,
    ) {
        let model = runtime
            .agent()
            .config
            .model
            .clone()
            .or_else(|| default_model.cloned());
        let (provider, model_id) = match &model {
            Some(m) if m.id.is_empty() => (
                m.provider.as_str().to_owned(),
                m.provider.as_str().to_owned(),
            ),
            Some(m) => (m.provider.as_str().to_owned(), m.id.clone()),
            None => ("none".to_owned(), "none".to_owned()),
        };
        let mut spans = spans::SpanState::new(
            spans::AgentInfo {
                name: slug.to_owned(),
                provider,
                model: model_id.clone(),
            },
            self.inner.capture,
        );
        if let Ok(mut agents) = self.inner.agents.lock() {
            agents.push((slug.to_owned(), runtime.clone(), connections.clone()));
        }
        let mut tap = runtime.store().tap();
        let this = self.clone();
        let slug = slug.to_owned();
        let task = tokio::spawn(async move {
            let mut closing = false;
            loop {
                let event = if closing {
                    match tap.try_recv() {
                        Ok(e) => Ok(e),
                        Err(tokio::sync::broadcast::error::TryRecvError::Lagged(n)) => {
                            Err(RecvError::Lagged(n))
                        }
                        Err(_) => return,
                    }
                } else {
                    tokio::select! {
                        e = tap.recv() => e,
                        _ = this.inner.closing.cancelled() => {
                            closing = true;
                            continue;
                        }
                    }
                };
                match event {
                    Ok(e) => {
                        this.inner.metrics.observe(&slug, &model_id, &e);
                        if let Some(exporter) = &this.inner.exporter {
                            for span in spans.apply(&e) {
                                exporter.send(span);
                            }
                        }
                    }
                    Err(RecvError::Lagged(n)) => {
                        tracing::warn!(agent = %slug, lost = n, "telemetry fell behind the event store; events skipped");
                    }
                    Err(RecvError::Closed) => return,
                }
            }
        });
        if let Ok(mut watchers) = self.inner.watchers.lock() {
            watchers.push(task);
        }
    }

    /// After the runtimes stopped: reads what the taps still hold, then
    /// sends every queued span (waiting a few seconds at most).
    pub(crate) async fn close(&self) {
        self.inner.closing.cancel();
        let watchers = self
            .inner
            .watchers
            .lock()
            .map(|mut w| std::mem::take(&mut *w))
            .unwrap_or_default();
        for w in watchers {
            let _ = tokio::time::timeout(Duration::from_secs(5), w).await;
        }
        if let Some(exporter) = &self.inner.exporter {
            exporter.flush(Duration::from_secs(5)).await;
        }
        let pusher = self.inner.pusher.lock().ok().and_then(|mut p| p.take());
        if let Some(pusher) = pusher {
            let _ = pusher.await;
            // The last values, the interrupted turns counted.
            let _ = tokio::time::timeout(Duration::from_secs(5), self.push_metrics()).await;
        }
    }

    fn send(&self, span: opentelemetry_proto::tonic::trace::v1::Span) {
        if let Some(exporter) = &self.inner.exporter {
            exporter.send(span);
        }
    }
}

/// What a channel route answered, put on its response for the HTTP layer
/// to count.
#[derive(Debug, Clone)]
pub(crate) struct Delivery {
    pub(crate) channel: String,
    pub(crate) kind: String,
    pub(crate) duplicate: bool,
}

/// Counts a channel delivery the response carries (the agent is the
/// route's first segment; empty in single mode).
fn count_delivery(telemetry: &Telemetry, route: &str, response: &Response) {
    if let Some(d) = response.extensions().get::<Delivery>() {
        let agent = route
            .split("/v1/")
            .next()
            .unwrap_or_default()
            .trim_start_matches('/');
        telemetry
            .inner
            .metrics
            .delivery(agent, &d.channel, &d.kind, d.duplicate);
    }
}

/// The HTTP layer of every route: counts the request by route and status
/// and, while tracing is on, makes its server span, the child of an
/// incoming `traceparent`, and the caller of what the handler starts.
pub(crate) async fn layer(
    State(telemetry): State<Telemetry>,
    req: Request,
    next: Next,
) -> Response {
    let began = Instant::now();
    let start = spans::now_nanos();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".to_owned());
    // Probes and scrapes are counted, never traced.
    let probe = route == "/metrics" || route.ends_with("/v1/health");
    if !telemetry.tracing() || probe {
        let response = next.run(req).await;
        count_delivery(&telemetry, &route, &response);
        telemetry.inner.metrics.http(
            &route,
            response.status().as_u16(),
            began.elapsed().as_secs_f64(),
        );
        return response;
    }
    let incoming = req
        .headers()
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .and_then(TraceParent::parse);
    let method = req.method().as_str().to_owned();
    let path = req.uri().path().to_owned();
    let own = new_span_id();
    let tp = match &incoming {
        Some(parent) => parent.with_span(own),
        None => TraceParent {
            trace_id: uuid::Uuid::new_v4().simple().to_string(),
            span_id: own,
            sampled: true,
        },
    };
    let response = agentkit_harness::trace::with_incoming(tp.clone(), next.run(req)).await;
    let status = response.status().as_u16();
    count_delivery(&telemetry, &route, &response);
    telemetry
        .inner
        .metrics
        .http(&route, status, began.elapsed().as_secs_f64());
    let attrs = vec![
        spans::kv("http.request.method", &method),
        spans::kv("http.route", &route),
        spans::kv("url.path", &path),
        spans::kv_int("http.response.status_code", u64::from(status)),
    ];
    let error = (status >= 500).then(|| format!("status {status}"));
    telemetry.send(spans::span_of_kind(
        &tp.trace_id,
        &tp.span_id,
        incoming.as_ref().map(|p| p.span_id.as_str()),
        format!("{method} {route}"),
        SpanKind::Server,
        (start, spans::now_nanos()),
        attrs,
        error,
    ));
    response
}

fn new_span_id() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    id[..16].to_owned()
}

/// `GET /metrics` and `GET /v1/logs`.
pub(crate) fn routes(telemetry: Telemetry) -> Router {
    Router::new()
        .route("/metrics", get(metrics_route))
        .route("/v1/logs", get(logs_route))
        .with_state(telemetry)
}

/// The caller's address and headers, read before any await.
fn caller(req: Request) -> (Option<std::net::IpAddr>, HeaderMap) {
    let peer = req
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip());
    (peer, req.headers().clone())
}

async fn admit(
    telemetry: &Telemetry,
    route: &str,
    peer: Option<std::net::IpAddr>,
    headers: &HeaderMap,
) -> std::result::Result<(), ApiError> {
    let Some(guard) = telemetry.inner.chain.get() else {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            agentkit_protocol::ErrorCode::Unauthorized,
            "no auth chain guards this route",
        ));
    };
    let ctx = admit_context(&guard.chain, peer, "GET", headers, b"").await?;
    let role = guard.role_of(&ctx);
    match super::roles::host_need(route) {
        Some(super::roles::Need::Role(need)) => require(role, need),
        _ => Ok(()),
    }
}

async fn metrics_route(State(telemetry): State<Telemetry>, req: Request) -> Response {
    let (peer, headers) = caller(req);
    if !telemetry.inner.metrics_public
        && let Err(e) = admit(&telemetry, "/metrics", peer, &headers).await
    {
        return e.into_response();
    }
    let openmetrics = wants_openmetrics(&headers);
    let text = telemetry.render_metrics().await;
    let (content_type, body) = if openmetrics {
        (
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            text,
        )
    } else {
        (
            "text/plain; version=0.0.4; charset=utf-8",
            metrics::prometheus_text(&text),
        )
    };
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    headers.insert(header::VARY, header::HeaderValue::from_static("accept"));
    (headers, body).into_response()
}

/// Does the `Accept` header ask for OpenMetrics, at least as much as for
/// the Prometheus text format (`text/plain`, `text/*`, `*/*`)? Prometheus
/// asks for both, OpenMetrics first; older scrapers and promtool ask for
/// `text/plain; version=0.0.4` or nothing, and get that.
fn wants_openmetrics(headers: &HeaderMap) -> bool {
    let (mut openmetrics, mut text) = (0.0_f32, 0.0_f32);
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else { continue };
        for range in value.split(',') {
            let mut parts = range.split(';');
            let essence = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            match essence.as_str() {
                "application/openmetrics-text" => openmetrics = openmetrics.max(q),
                "text/plain" | "text/*" | "*/*" => text = text.max(q),
                _ => {}
            }
        }
    }
    openmetrics > 0.0 && openmetrics >= text
}

#[derive(Debug, serde::Deserialize)]
struct LogsQuery {
    session: Option<String>,
    limit: Option<u32>,
    cursor: Option<String>,
}

/// The kind of `GET /v1/logs`'s cursors (a line's `seq`).
const LOG_CURSOR: &str = "l1";

/// `GET /v1/logs?session&limit&cursor`: the newest lines of the ring, one
/// page read oldest first (as a log is), `nextCursor` going back in time.
async fn logs_route(
    State(telemetry): State<Telemetry>,
    Query(q): Query<LogsQuery>,
    req: Request,
) -> Response {
    let (peer, headers) = caller(req);
    if let Err(e) = admit(&telemetry, "/v1/logs", peer, &headers).await {
        return e.into_response();
    }
    let page = match super::paging::page_query(LOG_CURSOR, q.limit, q.cursor.as_deref()) {
        Ok(page) => page,
        Err(e) => return super::http::ApiError::from(e).into_response(),
    };
    let before = match page.after.as_deref().map(str::parse::<u64>) {
        None => None,
        Some(Ok(seq)) => Some(seq),
        Some(Err(_)) => {
            return super::http::ApiError::bad_request(
                "invalid `cursor`: pass the `nextCursor` of the previous page as it is",
            )
            .into_response();
        }
    };
    let (lines, more) = crate::logs::recent(q.session.as_deref(), page.limit, before);
    let mut body = serde_json::json!({"ok": true, "logs": lines});
    if more && let Some(oldest) = lines.first() {
        body["nextCursor"] = serde_json::json!(super::paging::cursor_of(
            LOG_CURSOR,
            &oldest.seq.to_string()
        ));
    }
    super::http::json_ok(body)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn attrs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_service_name_comes_from_the_variable_then_the_attributes() {
        let from_var = resource(&TelemetryOptions {
            service_name: Some("svc".into()),
            resource_attributes: attrs(&[("service.name", "other"), ("team", "ai")]),
            ..Default::default()
        });
        assert_eq!(from_var[0], ("service.name".to_owned(), "svc".to_owned()));
        assert_eq!(
            from_var.iter().filter(|(k, _)| k == "service.name").count(),
            1
        );
        assert!(from_var.contains(&("team".to_owned(), "ai".to_owned())));
        let from_attrs = resource(&TelemetryOptions {
            resource_attributes: attrs(&[("service.name", "other"), ("service.version", "9")]),
            ..Default::default()
        });
        assert_eq!(from_attrs[0].1, "other");
        let versions: Vec<_> = from_attrs
            .iter()
            .filter(|(k, _)| k == "service.version")
            .collect();
        assert_eq!(
            versions,
            vec![&("service.version".to_owned(), "9".to_owned())]
        );
        assert_eq!(resource(&TelemetryOptions::default())[0].1, "agentkit");
    }

    #[test]
    fn openmetrics_only_when_the_accept_header_asks_for_it() {
        let accept = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::ACCEPT, header::HeaderValue::from_str(v).unwrap());
            wants_openmetrics(&h)
        };
        assert!(!wants_openmetrics(&HeaderMap::new()));
        assert!(!accept("text/plain; version=0.0.4"));
        assert!(!accept("*/*"));
        assert!(accept(
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        ));
        assert!(accept("application/openmetrics-text"));
        assert!(!accept("text/plain, application/openmetrics-text; q=0.5"));
        assert!(!accept("application/openmetrics-text; q=0"));
    }

    #[test]
    fn otel_lists_are_split_and_percent_decoded() {
        assert_eq!(
            pairs(Some("a=1, b = x%20y ,=skip,novalue,c=%3D")),
            attrs(&[("a", "1"), ("b", "x y"), ("c", "=")])
        );
        assert_eq!(pairs(None), Vec::new());
    }
}
