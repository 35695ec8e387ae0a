//! A real OTLP/HTTP receiver on loopback: `POST /v1/traces` bodies are
//! decoded as `ExportTraceServiceRequest` protobuf (the
//! `opentelemetry-proto` types) into plain [`ReceivedSpan`]s, so a test
//! asserts the spans a server exported, their tree and attributes; and
//! `POST /v1/metrics` bodies as `ExportMetricsServiceRequest` into
//! [`ReceivedPoint`]s.

// Test support: setup failures panic with what failed.
#![allow(clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point};
use prost::Message as _;
use serde_json::Value;

use crate::mock::{MockResponse, MockServer};

/// One exported span, decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedSpan {
    /// Hex, as in a `traceparent`.
    pub trace_id: String,
    pub span_id: String,
    /// `None` for a root span.
    pub parent_span_id: Option<String>,
    pub name: String,
    /// The OTLP `SpanKind` number (1 internal, 2 server, 3 client).
    pub kind: i32,
    pub start_unix_nano: u64,
    pub end_unix_nano: u64,
    pub attributes: BTreeMap<String, Value>,
    /// The status message of a span whose status is an error.
    pub error: Option<String>,
    /// The resource attributes of the export it came in.
    pub resource: BTreeMap<String, Value>,
}

impl ReceivedSpan {
    pub fn attr(&self, key: &str) -> Option<&Value> {
        self.attributes.get(key)
    }

    pub fn attr_str(&self, key: &str) -> Option<&str> {
        self.attr(key).and_then(Value::as_str)
    }

    pub fn attr_int(&self, key: &str) -> Option<i64> {
        self.attr(key).and_then(Value::as_i64)
    }
}

/// One data point of a received metric.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedPoint {
    pub attributes: BTreeMap<String, Value>,
    /// A sum's or gauge's value; a histogram's count.
    pub value: f64,
    /// `sum`, `gauge` or `histogram`.
    pub kind: &'static str,
}

fn number(v: Option<number_data_point::Value>) -> f64 {
    match v {
        Some(number_data_point::Value::AsDouble(d)) => d,
        Some(number_data_point::Value::AsInt(i)) => i as f64,
        None => f64::NAN,
    }
}

/// The receiver: a recording server that answers every export with 200.
#[derive(Debug)]
pub struct OtlpReceiver {
    server: MockServer,
}

impl Default for OtlpReceiver {
    fn default() -> Self {
        OtlpReceiver::start()
    }
}

impl OtlpReceiver {
    pub fn start() -> OtlpReceiver {
        let server = MockServer::start(|req| {
            if req.path != "/v1/traces" && req.path != "/v1/metrics" {
                return MockResponse::text(404, "only /v1/traces and /v1/metrics");
            }
            let mut ok = MockResponse::text(200, "");
            ok.headers = vec![("content-type".into(), "application/x-protobuf".into())];
            ok
        });
        OtlpReceiver { server }
    }

    /// The URL to export to (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`).
    pub fn traces_url(&self) -> String {
        format!("{}/v1/traces", self.server.url())
    }

    /// The base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// How many trace export requests arrived.
    pub fn exports(&self) -> usize {
        self.server
            .requests()
            .iter()
            .filter(|r| r.path == "/v1/traces")
            .count()
    }

    /// The data points of metric `name` in the last metrics export that
    /// has it (sums and gauges: their value; histograms: their count).
    /// Panics on a body that is not OTLP protobuf.
    pub fn metric(&self, name: &str) -> Vec<ReceivedPoint> {
        let mut last = Vec::new();
        for req in self.server.requests() {
            if req.path != "/v1/metrics" {
                continue;
            }
            assert_eq!(req.header("content-type"), Some("application/x-protobuf"));
            let decoded = ExportMetricsServiceRequest::decode(req.body.as_slice())
                .expect("an ExportMetricsServiceRequest");
            for m in decoded
                .resource_metrics
                .into_iter()
                .flat_map(|r| r.scope_metrics)
                .flat_map(|s| s.metrics)
                .filter(|m| m.name == name)
            {
                last = match m.data {
                    Some(metric::Data::Sum(s)) => s
                        .data_points
                        .into_iter()
                        .map(|p| ReceivedPoint {
                            attributes: p
                                .attributes
                                .into_iter()
                                .map(|kv| (kv.key, value(kv.value)))
                                .collect(),
                            value: number(p.value),
                            kind: "sum",
                        })
                        .collect(),
                    Some(metric::Data::Gauge(g)) => g
                        .data_points
                        .into_iter()
                        .map(|p| ReceivedPoint {
                            attributes: p
                                .attributes
                                .into_iter()
                                .map(|kv| (kv.key, value(kv.value)))
                                .collect(),
                            value: number(p.value),
                            kind: "gauge",
                        })
                        .collect(),
                    Some(metric::Data::Histogram(h)) => h
                        .data_points
                        .into_iter()
                        .map(|p| ReceivedPoint {
                            attributes: p
                                .attributes
                                .into_iter()
                                .map(|kv| (kv.key, value(kv.value)))
                                .collect(),
                            value: p.count as f64,
                            kind: "histogram",
                        })
                        .collect(),
                    _ => Vec::new(),
                };
            }
        }
        last
    }

    /// Every span received so far, in arrival order. Panics on a body
    /// that is not OTLP protobuf, or sent with another content type.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        let mut out = Vec::new();
        for req in self.server.requests() {
            if req.path != "/v1/traces" {
                continue;
            }
            assert_eq!(req.method, "POST");
            assert_eq!(
                req.header("content-type"),
                Some("application/x-protobuf"),
                "an OTLP/HTTP export is protobuf"
            );
            let decoded = ExportTraceServiceRequest::decode(req.body.as_slice())
                .expect("an ExportTraceServiceRequest");
            for rs in decoded.resource_spans {
                let resource: BTreeMap<String, Value> = rs
                    .resource
                    .map(|r| r.attributes)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|kv| (kv.key, value(kv.value)))
                    .collect();
                for ss in rs.scope_spans {
                    for s in ss.spans {
                        out.push(ReceivedSpan {
                            trace_id: hex(&s.trace_id),
                            span_id: hex(&s.span_id),
                            parent_span_id: (!s.parent_span_id.is_empty())
                                .then(|| hex(&s.parent_span_id)),
                            name: s.name,
                            kind: s.kind,
                            start_unix_nano: s.start_time_unix_nano,
                            end_unix_nano: s.end_time_unix_nano,
                            attributes: s
                                .attributes
                                .into_iter()
                                .map(|kv| (kv.key, value(kv.value)))
                                .collect(),
                            error: s.status.filter(|st| st.code == 2).map(|st| st.message),
                            resource: resource.clone(),
                        });
                    }
                }
            }
        }
        out
    }

    /// Waits until `done` holds for the spans received (or `timeout`
    /// passed) and returns them.
    pub fn wait_for(
        &self,
        timeout: Duration,
        done: impl Fn(&[ReceivedSpan]) -> bool,
    ) -> Vec<ReceivedSpan> {
        let deadline = Instant::now() + timeout;
        loop {
            let spans = self.spans();
            if done(&spans) || Instant::now() >= deadline {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The spans of one trace as an indented tree of names (children by
/// name, then start: spans that start in the same millisecond still
/// render the same), for an inline snapshot. A span whose parent is not among
/// `spans` is a root.
pub fn render_tree(spans: &[ReceivedSpan]) -> String {
    let ids: std::collections::HashSet<&str> = spans.iter().map(|s| s.span_id.as_str()).collect();
    let mut sorted: Vec<&ReceivedSpan> = spans.iter().collect();
    sorted.sort_by(|a, b| (&a.name, a.start_unix_nano).cmp(&(&b.name, b.start_unix_nano)));
    fn walk(
        out: &mut String,
        all: &[&ReceivedSpan],
        parent: Option<&str>,
        depth: usize,
        ids: &std::collections::HashSet<&str>,
    ) {
        for s in all {
            let p = s.parent_span_id.as_deref().filter(|p| ids.contains(p));
            if p == parent {
                out.push_str(&"  ".repeat(depth));
                out.push_str(&s.name);
                out.push('\n');
                walk(out, all, Some(&s.span_id), depth + 1, ids);
            }
        }
    }
    let mut out = String::new();
    walk(&mut out, &sorted, None, 0, &ids);
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn value(v: Option<AnyValue>) -> Value {
    match v.and_then(|v| v.value) {
        Some(any_value::Value::StringValue(s)) => Value::String(s),
        Some(any_value::Value::IntValue(i)) => Value::from(i),
        Some(any_value::Value::BoolValue(b)) => Value::from(b),
        Some(any_value::Value::DoubleValue(d)) => Value::from(d),
        Some(any_value::Value::ArrayValue(a)) => {
            Value::Array(a.values.into_iter().map(|v| value(Some(v))).collect())
        }
        _ => Value::Null,
    }
}
