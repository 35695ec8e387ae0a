//! NDJSON event logs and streams: lines into typed events.
//!
//! A line that is not a JSON object is an error naming the line. A JSON
//! object that is not an event this version knows (a newer server's event
//! type, a line without an envelope) is passed over, never an error, so a
//! log written by another version still reads.

use agentkit_protocol::Event;
use serde_json::Value;

use crate::error::{NdjsonError, NdjsonErrorReason};

/// Parses one event per line; blank lines and objects that are not known
/// events are skipped.
pub fn parse_ndjson(text: &str) -> Result<Vec<Event>, NdjsonError> {
    let mut events = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(event) = parse_ndjson_line(line, i + 1)?.and_then(event_of) {
            events.push(event);
        }
    }
    Ok(events)
}

/// Parses one line (`number` is its 1-based number, for the error); `None`
/// for a blank line.
pub fn parse_ndjson_line(line: &str, number: usize) -> Result<Option<Value>, NdjsonError> {
    let line = line.trim();
    if line.is_empty() {
        return Ok(None);
    }
    let value: Value = serde_json::from_str(line).map_err(|e| NdjsonError {
        line: number,
        reason: NdjsonErrorReason::Json(e),
    })?;
    if !value.is_object() {
        return Err(NdjsonError {
            line: number,
            reason: NdjsonErrorReason::NotAnObject,
        });
    }
    Ok(Some(value))
}

/// The typed event a JSON object is, if it is one this version knows. A
/// missing `at` (hand-written logs) reads as empty.
pub(crate) fn event_of(mut value: Value) -> Option<Event> {
    if let Some(obj) = value.as_object_mut() {
        obj.entry("at")
            .or_insert_with(|| Value::String(String::new()));
        obj.entry("data").or_insert(Value::Null);
    }
    match serde_json::from_value::<Event>(value) {
        Ok(event) => Some(event),
        Err(e) => {
            tracing::debug!(error = %e, "skipped a line that is not a known event");
            None
        }
    }
}

/// Splits a byte stream into lines, whatever the chunk boundaries.
#[derive(Debug, Default)]
pub(crate) struct LineBuffer {
    partial: Vec<u8>,
    /// Lines handed out so far, for error messages.
    line: usize,
}

impl LineBuffer {
    /// Adds a chunk; returns the complete lines it finished.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        let mut rest = chunk;
        while let Some(at) = rest.iter().position(|&b| b == b'\n') {
            self.partial.extend_from_slice(&rest[..at]);
            rest = &rest[at + 1..];
            out.push(self.take());
        }
        self.partial.extend_from_slice(rest);
        out
    }

    /// The unterminated last line, if any.
    pub(crate) fn finish(&mut self) -> Option<(usize, String)> {
        (!self.partial.is_empty()).then(|| self.take())
    }

    fn take(&mut self) -> (usize, String) {
        self.line += 1;
        let bytes = std::mem::take(&mut self.partial);
        (self.line, String::from_utf8_lossy(&bytes).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_across_chunks_are_joined() {
        let mut buf = LineBuffer::default();
        let mut lines = Vec::new();
        for chunk in ["{\"a\":", "1}\n{\"b", "\":2}\n\n{\"c\":3}"] {
            lines.extend(buf.push(chunk.as_bytes()));
        }
        lines.extend(buf.finish());
        let expected = [
            (1, "{\"a\":1}".to_owned()),
            (2, "{\"b\":2}".to_owned()),
            (3, String::new()),
            (4, "{\"c\":3}".to_owned()),
        ];
        assert_eq!(lines, expected);
        assert_eq!(buf.finish(), None);
    }

    #[test]
    fn multibyte_characters_split_across_chunks_survive() {
        let text = "{\"t\":\"é→\"}\n".as_bytes();
        let mut buf = LineBuffer::default();
        let mut lines = buf.push(&text[..7]);
        lines.extend(buf.push(&text[7..]));
        assert_eq!(lines, [(1, "{\"t\":\"é→\"}".to_owned())]);
    }

    #[test]
    fn parse_ndjson_names_the_bad_line_and_skips_unknown_events() {
        let ok = parse_ndjson(concat!(
            "{\"type\":\"session.started\",\"index\":0,\"sessionId\":\"s\",\"data\":{}}\n\n",
            "  {\"type\":\"some.future.event\",\"index\":1,\"sessionId\":\"s\"}  \n",
            "{\"type\":\"session.waiting\",\"index\":2,\"sessionId\":\"s\",\"at\":\"t\"}\n",
        ))
        .unwrap_or_default();
        assert_eq!(ok.len(), 2);
        assert_eq!(ok[1].index, 2);
        let err = parse_ndjson("{\"type\":\"a\"}\n{oops\n").err();
        let err = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(err.starts_with("line 2 is not JSON"), "{err}");
        let err = parse_ndjson("\n[1]\n").err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("line 2 is not a JSON object"));
    }
}
