//! Trace context as the log and the wire spell it: the W3C `traceparent`
//! header ([`TraceParent`]), the trace a turn belongs to ([`TurnTrace`],
//! kept in `turn.started` so a turn resumed after a restart stays in its
//! trace), and the one derivation of a child span id from its parent
//! ([`child_span_id`]) that the harness (stamping outgoing requests) and
//! the facade (building spans from events) both use, so they agree on
//! ids without telling each other.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A parsed W3C `traceparent` (version `00`): `00-<trace>-<span>-<flags>`,
/// ids in lowercase hex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceParent {
    /// 32 hex digits, not all zero.
    pub trace_id: String,
    /// 16 hex digits, not all zero: the caller's span.
    pub span_id: String,
    pub sampled: bool,
}

impl TraceParent {
    /// Reads a `traceparent` value; `None` for anything malformed (an
    /// invalid header is ignored, as the W3C recommendation says).
    pub fn parse(value: &str) -> Option<TraceParent> {
        let mut parts = value.trim().split('-');
        let (version, trace, span, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if version.len() != 2 || !is_hex(version) || version == "ff" {
            return None;
        }
        // Version 00 has exactly four fields; later versions may add some.
        if version == "00" && parts.next().is_some() {
            return None;
        }
        if !is_id(trace, 32) || !is_id(span, 16) || flags.len() != 2 || !is_hex(flags) {
            return None;
        }
        let flags = u8::from_str_radix(flags, 16).ok()?;
        Some(TraceParent {
            trace_id: trace.to_ascii_lowercase(),
            span_id: span.to_ascii_lowercase(),
            sampled: flags & 1 == 1,
        })
    }

    /// The same trace with `span_id` as the caller.
    pub fn with_span(&self, span_id: String) -> TraceParent {
        TraceParent {
            trace_id: self.trace_id.clone(),
            span_id,
            sampled: self.sampled,
        }
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let flags = if self.sampled { "01" } else { "00" };
        write!(f, "00-{}-{}-{flags}", self.trace_id, self.span_id)
    }
}

fn is_hex(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn is_id(s: &str, len: usize) -> bool {
    s.len() == len && is_hex(s) && s.bytes().any(|b| b != b'0')
}

/// The trace of a turn, in `turn.started` data (`trace`), and copied into
/// the events that may reach a reader who never saw that `turn.started`
/// (a restart between them): `turn.failed` written by recovery and
/// `action.approval_resolved` written after a restart.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default)]
pub struct TurnTrace {
    /// The turn's own span as the caller of everything it does
    /// (`00-<trace>-<turn span>-01`).
    pub traceparent: String,
    /// The span the turn is a child of: the request that brought its
    /// message, or the turn it resumes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_span_id: Option<String>,
    /// When the turn started (set on copies outside `turn.started`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_started_at: Option<String>,
}

impl TurnTrace {
    pub fn parsed(&self) -> Option<TraceParent> {
        TraceParent::parse(&self.traceparent)
    }
}

/// The span id of the child of span `parent` that `kind` and `key` name
/// (`chat` and a step number, `tool` and a call id, ...): a hash, so every
/// reader of the same events derives the same id. Never all zero.
pub fn child_span_id(parent: &str, kind: &str, key: &str) -> String {
    // FNV-1a, 64 bits, over the three parts with separators.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in [parent, "\u{1f}", kind, "\u{1f}", key] {
        for b in part.bytes() {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    if hash == 0 {
        hash = 1;
    }
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_reads_the_w3c_form_and_refuses_the_rest() {
        let tp = TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
            .unwrap_or_else(|| panic!("valid"));
        assert_eq!(tp.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(tp.span_id, "00f067aa0ba902b7");
        assert!(tp.sampled);
        assert_eq!(
            tp.to_string(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        for bad in [
            "",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00-xbf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn child_span_ids_are_stable_and_distinct() {
        let a = child_span_id("00f067aa0ba902b7", "chat", "1");
        assert_eq!(a, child_span_id("00f067aa0ba902b7", "chat", "1"));
        assert_ne!(a, child_span_id("00f067aa0ba902b7", "chat", "2"));
        assert_ne!(a, child_span_id("00f067aa0ba902b8", "chat", "1"));
        assert_eq!(a.len(), 16);
    }
}
