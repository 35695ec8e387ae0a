//! The `/metrics` families over OTLP/HTTP too: every export interval (and
//! once when the server stops) the OpenMetrics text the registry renders
//! is read back into `ExportMetricsServiceRequest` protobuf (counters as
//! cumulative monotonic sums, gauges, histograms with their explicit
//! bounds) and posted to the collector. One source of values: what a
//! scrape sees is what the collector gets.

use std::collections::BTreeMap;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum, metric, number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;

use super::spans::kv;

/// One sample line: `name{labels} value`.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
}

/// Reads `key="value",…` (with `\"`, `\\` and `\n` escapes).
fn parse_labels(s: &str) -> Option<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek() == Some(&',') || chars.peek() == Some(&' ') {
            chars.next();
        }
        if chars.peek().is_none() {
            return Some(out);
        }
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if chars.next() != Some('"') {
            return None;
        }
        let mut value = String::new();
        loop {
            match chars.next()? {
                '\\' => match chars.next()? {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                '"' => break,
                c => value.push(c),
            }
        }
        out.push((key.trim().to_owned(), value));
    }
}

fn parse_sample(line: &str) -> Option<Sample> {
    let (left, value) = line.rsplit_once(' ')?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    let (name, labels) = match left.split_once('{') {
        Some((name, rest)) => (name, parse_labels(rest.strip_suffix('}')?)?),
        None => (left, Vec::new()),
    };
    Some(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

fn attributes(labels: &[(String, String)]) -> Vec<KeyValue> {
    labels.iter().map(|(k, v)| kv(k, v)).collect()
}

/// The families of OpenMetrics `text` as OTLP metrics, stamped `now`,
/// counting from `start`.
fn metrics(text: &str, start: u64, now: u64) -> Vec<Metric> {
    let mut families: Vec<(String, String, String, Vec<Sample>)> = Vec::new();
    let mut help: BTreeMap<String, String> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            if let Some((name, text)) = rest.split_once(' ') {
                help.insert(name.to_owned(), text.to_owned());
            }
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            if let Some((name, kind)) = rest.split_once(' ') {
                let description = help.get(name).cloned().unwrap_or_default();
                families.push((name.to_owned(), kind.to_owned(), description, Vec::new()));
            }
        } else if !line.starts_with('#')
            && let (Some(sample), Some(family)) = (parse_sample(line), families.last_mut())
        {
            family.3.push(sample);
        }
    }
    let number = |s: &Sample| NumberDataPoint {
        attributes: attributes(&s.labels),
        start_time_unix_nano: start,
        time_unix_nano: now,
        value: Some(number_data_point::Value::AsDouble(s.value)),
        ..Default::default()
    };
    let mut out = Vec::new();
    for (name, kind, description, samples) in families {
        let data = match kind.as_str() {
            "counter" => metric::Data::Sum(Sum {
                data_points: samples
                    .iter()
                    .filter(|s| s.name.ends_with("_total"))
                    .map(number)
                    .collect(),
                aggregation_temporality: AggregationTemporality::Cumulative as i32,
                is_monotonic: true,
            }),
            "gauge" => metric::Data::Gauge(Gauge {
                data_points: samples.iter().map(number).collect(),
            }),
            "histogram" => metric::Data::Histogram(Histogram {
                data_points: histogram_points(&name, &samples, start, now),
                aggregation_temporality: AggregationTemporality::Cumulative as i32,
            }),
            _ => continue,
        };
        out.push(Metric {
            name,
            description,
            data: Some(data),
            ..Default::default()
        });
    }
    out
}

/// One data point per label set: the `_bucket` samples (cumulative, by
/// `le`) become per-bucket counts over the finite bounds.
fn histogram_points(
    name: &str,
    samples: &[Sample],
    start: u64,
    now: u64,
) -> Vec<HistogramDataPoint> {
    #[derive(Default)]
    struct Point {
        buckets: Vec<(f64, f64)>,
        sum: f64,
        count: f64,
    }
    let mut points: BTreeMap<Vec<(String, String)>, Point> = BTreeMap::new();
    for s in samples {
        let mut labels = s.labels.clone();
        let le = labels
            .iter()
            .position(|(k, _)| k == "le")
            .map(|i| labels.remove(i).1);
        let point = points.entry(labels).or_default();
        match s.name.strip_prefix(name) {
            Some("_bucket") => {
                let bound = match le.as_deref() {
                    Some("+Inf") => f64::INFINITY,
                    Some(v) => v.parse().unwrap_or(f64::INFINITY),
                    None => continue,
                };
                point.buckets.push((bound, s.value));
            }
            Some("_sum") => point.sum = s.value,
            Some("_count") => point.count = s.value,
            _ => {}
        }
    }
    points
        .into_iter()
        .map(|(labels, mut p)| {
            p.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut previous = 0.0;
            let mut counts = Vec::new();
            for (_, cumulative) in &p.buckets {
                counts.push((cumulative - previous).max(0.0) as u64);
                previous = *cumulative;
            }
            HistogramDataPoint {
                attributes: attributes(&labels),
                start_time_unix_nano: start,
                time_unix_nano: now,
                count: p.count as u64,
                sum: Some(p.sum),
                explicit_bounds: p
                    .buckets
                    .iter()
                    .map(|(b, _)| *b)
                    .filter(|b| b.is_finite())
                    .collect(),
                bucket_counts: counts,
                ..Default::default()
            }
        })
        .collect()
}

/// The request for one export of `text`.
pub(crate) fn request(
    text: &str,
    resource: &[(String, String)],
    start: u64,
    now: u64,
) -> ExportMetricsServiceRequest {
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: resource.iter().map(|(k, v)| kv(k, v)).collect(),
                ..Default::default()
            }),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: "agentkit".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                metrics: metrics(text, start, now),
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const TEXT: &str = r#"# HELP agentkit_turns_started Turns started, by agent.
# TYPE agentkit_turns_started counter
agentkit_turns_started_total{agent="bot"} 3
# HELP agentkit_sessions_active Sessions with a turn running, by agent.
# TYPE agentkit_sessions_active gauge
agentkit_sessions_active{agent="bot"} 1
# HELP agentkit_http_request_duration_seconds Latency.
# TYPE agentkit_http_request_duration_seconds histogram
agentkit_http_request_duration_seconds_sum{route="/bot/v1/session/{id}"} 0.3
agentkit_http_request_duration_seconds_count{route="/bot/v1/session/{id}"} 3
agentkit_http_request_duration_seconds_bucket{le="0.1",route="/bot/v1/session/{id}"} 1
agentkit_http_request_duration_seconds_bucket{le="0.5",route="/bot/v1/session/{id}"} 3
agentkit_http_request_duration_seconds_bucket{le="+Inf",route="/bot/v1/session/{id}"} 3
# EOF
"#;

    #[test]
    fn openmetrics_text_becomes_otlp_sums_gauges_and_histograms() {
        let m = metrics(TEXT, 1, 2);
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].name, "agentkit_turns_started");
        assert_eq!(m[0].description, "Turns started, by agent.");
        let Some(metric::Data::Sum(sum)) = &m[0].data else {
            panic!("{m:?}")
        };
        assert!(sum.is_monotonic);
        assert_eq!(
            sum.data_points[0].value,
            Some(number_data_point::Value::AsDouble(3.0))
        );
        assert_eq!(sum.data_points[0].attributes, vec![kv("agent", "bot")]);
        let Some(metric::Data::Gauge(g)) = &m[1].data else {
            panic!("{m:?}")
        };
        assert_eq!(g.data_points.len(), 1);
        let Some(metric::Data::Histogram(h)) = &m[2].data else {
            panic!("{m:?}")
        };
        let p = &h.data_points[0];
        assert_eq!(p.attributes, vec![kv("route", "/bot/v1/session/{id}")]);
        assert_eq!((p.count, p.sum), (3, Some(0.3)));
        assert_eq!(p.explicit_bounds, vec![0.1, 0.5]);
        assert_eq!(p.bucket_counts, vec![1, 2, 0]);
    }

    #[test]
    fn labels_read_their_escapes() {
        assert_eq!(
            parse_labels(r#"a="x\"y",b="c\\d""#).unwrap(),
            vec![("a".into(), "x\"y".into()), ("b".into(), "c\\d".into())]
        );
        assert_eq!(parse_labels(r#"a=x"#), None);
    }
}
