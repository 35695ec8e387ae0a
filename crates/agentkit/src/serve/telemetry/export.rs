//! The OTLP trace exporter: spans queue on a bounded channel (a full
//! queue drops and counts, never blocks a turn), a task sends them in
//! batches as `ExportTraceServiceRequest` protobuf, every second or at 512
//! spans, and once more on flush: over OTLP/HTTP through the process's one
//! HTTP client, or as a unary gRPC call over HTTP/2 (the same protobuf in
//! gRPC's length-prefixed frame, `grpc-status` checked) through a client
//! that speaks HTTP/2 from the first byte, as gRPC servers expect.

use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message as _;
use tokio::sync::{mpsc, oneshot};

use super::spans::kv;

/// Spans waiting to be sent, at most.
const QUEUE: usize = 8192;
/// Spans per request, at most.
const BATCH: usize = 512;
/// How often queued spans are sent.
const INTERVAL: Duration = Duration::from_secs(1);

enum Msg {
    Span(Box<Span>),
    Flush(oneshot::Sender<()>),
}

/// Where and how traces go.
#[derive(Debug, Clone)]
pub(crate) struct ExportConfig {
    pub(crate) endpoint: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) timeout: Duration,
    pub(crate) resource: Vec<(String, String)>,
    pub(crate) protocol: super::OtlpProtocol,
}

/// The sending half, cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Exporter {
    tx: mpsc::Sender<Msg>,
    dropped: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Msg")
    }
}

impl Exporter {
    pub(crate) fn start(config: ExportConfig) -> Exporter {
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::spawn(run(config, rx));
        Exporter {
            tx,
            dropped: Default::default(),
        }
    }

    pub(crate) fn send(&self, span: Span) {
        if self.tx.try_send(Msg::Span(Box::new(span))).is_err() {
            let n = self
                .dropped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if n.is_power_of_two() {
                tracing::warn!(
                    dropped = n + 1,
                    "the trace export queue is full; spans dropped"
                );
            }
        }
    }

    /// Sends what is queued; waits at most `wait`.
    pub(crate) async fn flush(&self, wait: Duration) {
        let (done, answered) = oneshot::channel();
        if self.tx.send(Msg::Flush(done)).await.is_ok() {
            let _ = tokio::time::timeout(wait, answered).await;
        }
    }
}

async fn run(config: ExportConfig, mut rx: mpsc::Receiver<Msg>) {
    let mut batch: Vec<Span> = Vec::new();
    let mut tick = tokio::time::interval(INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            msg = rx.recv() => match msg {
                Some(Msg::Span(span)) => {
                    batch.push(*span);
                    if batch.len() >= BATCH {
                        post(&config, std::mem::take(&mut batch)).await;
                    }
                }
                Some(Msg::Flush(done)) => {
                    if !batch.is_empty() {
                        post(&config, std::mem::take(&mut batch)).await;
                    }
                    let _ = done.send(());
                }
                None => {
                    if !batch.is_empty() {
                        post(&config, batch).await;
                    }
                    return;
                }
            },
            _ = tick.tick() => {
                if !batch.is_empty() {
                    post(&config, std::mem::take(&mut batch)).await;
                }
            }
        }
    }
}

/// One export request; a failure is logged (without the URL's
/// credentials) and the batch dropped.
async fn post(config: &ExportConfig, spans: Vec<Span>) {
    let body = traces_request(config, spans).encode_to_vec();
    post_protobuf(config, body, "traces").await;
}

fn traces_request(config: &ExportConfig, spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: config.resource.iter().map(|(k, v)| kv(k, v)).collect(),
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "agentkit".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                spans,
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    }
}

/// POSTs one OTLP/HTTP protobuf body to `config.endpoint`; a failure is
/// logged (without the URL's credentials) and the data dropped.
pub(crate) async fn post_protobuf(config: &ExportConfig, body: Vec<u8>, what: &str) {
    if config.protocol == super::OtlpProtocol::Grpc {
        if let Err(e) = post_grpc(config, body, what).await {
            tracing::warn!(
                error = %agentkit_harness::redact_credentials(&e),
                signal = what,
                "cannot export telemetry over gRPC"
            );
        }
        return;
    }
    let client = match agentkit_harness::http_client() {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, signal = what, "cannot export telemetry");
            return;
        }
    };
    let mut req = client
        .post(&config.endpoint)
        .timeout(config.timeout)
        .header("content-type", "application/x-protobuf")
        .body(body);
    for (k, v) in &config.headers {
        req = req.header(k, v);
    }
    match req.send().await {
        Ok(r) if r.status().is_success() => {}
        Ok(r) => {
            tracing::warn!(status = %r.status(), signal = what, "the collector refused an export")
        }
        Err(e) => tracing::warn!(
            error = %agentkit_harness::redact_credentials(&e.to_string()),
            signal = what,
            "cannot export telemetry"
        ),
    }
}

/// The gRPC method of each signal's OTLP service.
fn grpc_method(what: &str) -> &'static str {
    match what {
        "metrics" => "opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
        _ => "opentelemetry.proto.collector.trace.v1.TraceService/Export",
    }
}

/// The client of gRPC exports: HTTP/2 from the first byte (`h2c` on
/// `http://`, and over TLS on `https://`), built once.
fn grpc_client() -> std::result::Result<&'static reqwest::Client, String> {
    static CLIENT: std::sync::OnceLock<std::result::Result<reqwest::Client, String>> =
        std::sync::OnceLock::new();
    CLIENT
        .get_or_init(|| {
            reqwest::Client::builder()
                .http2_prior_knowledge()
                .connect_timeout(Duration::from_secs(10))
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// gRPC's length-prefixed message: an uncompressed flag, the length (4
/// bytes, big-endian), the protobuf.
fn grpc_frame(body: &[u8]) -> std::result::Result<Vec<u8>, String> {
    let len = u32::try_from(body.len()).map_err(|_| "an export over 4 GiB".to_owned())?;
    let mut framed = Vec::with_capacity(body.len() + 5);
    framed.push(0);
    framed.extend_from_slice(&len.to_be_bytes());
    framed.extend_from_slice(body);
    Ok(framed)
}

/// One unary OTLP gRPC call. A collector that refuses answers a
/// `grpc-status` other than 0 in the headers (gRPC's trailers-only
/// response); one that accepts answers 200 with the service's response
/// message.
async fn post_grpc(
    config: &ExportConfig,
    body: Vec<u8>,
    what: &str,
) -> std::result::Result<(), String> {
    let client = grpc_client()?;
    let url = format!(
        "{}/{}",
        config.endpoint.trim_end_matches('/'),
        grpc_method(what)
    );
    let mut req = client
        .post(&url)
        .timeout(config.timeout)
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header(
            "grpc-timeout",
            format!("{}m", config.timeout.as_millis().max(1)),
        )
        .body(grpc_frame(&body)?);
    for (k, v) in &config.headers {
        req = req.header(k, v);
    }
    let response = req.send().await.map_err(|e| e.to_string())?;
    let status = response.status();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let grpc_status = header("grpc-status");
    let grpc_message = header("grpc-message").unwrap_or_default();
    if !status.is_success() {
        return Err(format!("the collector answered HTTP {status}"));
    }
    match grpc_status.as_deref() {
        None | Some("0") => {}
        Some(code) => {
            return Err(format!(
                "the collector answered grpc-status {code}: {grpc_message}"
            ));
        }
    }
    // Read the response message so the stream completes.
    response.bytes().await.map_err(|e| e.to_string())?;
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod grpc_tests {
    #[test]
    fn frames_are_length_prefixed_and_methods_named_by_signal() {
        let framed = super::grpc_frame(b"abc").unwrap();
        assert_eq!(framed, [0, 0, 0, 0, 3, b'a', b'b', b'c']);
        assert_eq!(
            super::grpc_method("traces"),
            "opentelemetry.proto.collector.trace.v1.TraceService/Export"
        );
        assert_eq!(
            super::grpc_method("metrics"),
            "opentelemetry.proto.collector.metrics.v1.MetricsService/Export"
        );
    }
}
