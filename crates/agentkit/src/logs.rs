//! Structured logs: a `tracing` layer the binary installs ([`log_layer`])
//! that keeps the most recent lines in a bounded in-memory ring (served
//! by `GET /v1/logs`, filterable by session) and, with `--log-format
//! json`, writes each line as one JSON object on stderr. Every line
//! carries the session and turn ids its event names (`session`, `turn`
//! fields) and the trace id of the work in hand, where known.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::{LazyLock, Mutex};

use serde::Serialize;
use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;

/// How many lines the ring keeps.
pub const RING_LINES: usize = 2000;
/// The longest message or field value kept, in bytes.
const MAX_VALUE: usize = 4096;

/// The next line's [`LogLine::seq`].
static NEXT_SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

static RING: LazyLock<Mutex<VecDeque<LogLine>>> =
    LazyLock::new(|| Mutex::new(VecDeque::with_capacity(RING_LINES)));

/// One log line.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LogLine {
    /// The line's number since the process started (gap-free as written;
    /// the ring forgets the oldest): `GET /v1/logs` pages by it.
    pub seq: u64,
    pub at: String,
    pub level: String,
    pub target: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub fields: Map<String, Value>,
}

/// The layer that fills the ring, and writes JSON lines to stderr when
/// `json` is set (`--log-format json`; text logs stay the binary's `fmt`
/// layer).
pub fn log_layer(json: bool) -> LogLayer {
    LogLayer { json }
}

/// See [`log_layer`].
#[derive(Debug, Clone, Copy)]
pub struct LogLayer {
    json: bool,
}

#[derive(Default)]
struct Fields {
    message: String,
    session: Option<String>,
    turn: Option<String>,
    rest: Map<String, Value>,
}

fn cut(mut s: String) -> String {
    if s.len() > MAX_VALUE {
        let mut end = MAX_VALUE;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        let text = || match &value {
            Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        match field.name() {
            "message" => self.message = cut(text()),
            "session" | "session_id" => self.session = Some(cut(text())),
            "turn" | "turn_id" => self.turn = Some(cut(text())),
            name => {
                let value = match value {
                    Value::String(s) => Value::String(cut(s)),
                    v => v,
                };
                self.rest.insert(name.to_owned(), value);
            }
        }
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::String(value.to_owned()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::from(value));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let mut s = String::new();
        let _ = write!(s, "{value:?}");
        self.put(field, Value::String(s));
    }
}

impl<S: tracing::Subscriber> Layer<S> for LogLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let meta = event.metadata();
        let trace_id = agentkit_harness::trace::current()
            .or_else(agentkit_harness::trace::incoming)
            .map(|tp| tp.trace_id);
        let line = LogLine {
            seq: NEXT_SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            level: meta.level().to_string(),
            target: meta.target().to_owned(),
            message: fields.message,
            session_id: fields.session,
            turn_id: fields.turn,
            trace_id,
            fields: fields.rest,
        };
        if self.json
            && let Ok(text) = serde_json::to_string(&line)
        {
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "{text}");
        }
        if let Ok(mut ring) = RING.lock() {
            if ring.len() >= RING_LINES {
                ring.pop_front();
            }
            ring.push_back(line);
        }
    }
}

/// The last `limit` lines (of `session`, when given) written before line
/// `before` (any, when `None`), oldest first, and whether older ones
/// remain.
pub fn recent(session: Option<&str>, limit: usize, before: Option<u64>) -> (Vec<LogLine>, bool) {
    let Ok(ring) = RING.lock() else {
        return (Vec::new(), false);
    };
    let mut older = ring
        .iter()
        .rev()
        .filter(|l| before.is_none_or(|b| l.seq < b))
        .filter(|l| session.is_none_or(|s| l.session_id.as_deref() == Some(s)));
    let mut out: Vec<LogLine> = older.by_ref().take(limit).cloned().collect();
    let more = older.next().is_some();
    out.reverse();
    (out, more)
}
