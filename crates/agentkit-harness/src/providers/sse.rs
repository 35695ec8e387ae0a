//! The one server-sent events parser of the remote providers.
//!
//! It follows the WHATWG parsing rules: lines end in `\n`, `\r\n` or a
//! lone `\r`; lines starting with `:` are comments; the `data` lines of one
//! event join with `\n`; a line without a colon is a field with an empty
//! value; unknown fields (and `id`, `retry`) are ignored; a leading BOM is
//! dropped. Bytes may arrive split anywhere, even inside a UTF-8
//! character.
//!
//! Why not `sse-stream` (already in rmcp's tree): it fails the whole
//! stream on lines the spec says to ignore (a field without a colon, an
//! unknown field, a repeated `event`), losing the rest of that chunk, and
//! it drops an event whose closing blank line never came. OpenAI-compatible
//! servers do both, and [`SseParser::finish`] lets a caller read such a
//! last event.

/// One event: its name (empty when the server sent none) and its data.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    pub(crate) event: String,
    pub(crate) data: String,
}

/// A push parser: feed it chunks, take the events they complete.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    /// The bytes of the line not yet ended.
    pending: Vec<u8>,
    /// The last chunk ended in `\r`: a `\n` that starts the next belongs
    /// to it.
    after_cr: bool,
    /// A line was read (so a BOM can only come first).
    started: bool,
    event: String,
    data: String,
    has_data: bool,
}

impl SseParser {
    /// Reads `bytes`; returns the events they complete, in order.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        let mut rest = bytes;
        if std::mem::take(&mut self.after_cr) && rest.first() == Some(&b'\n') {
            rest = &rest[1..];
        }
        while let Some(end) = rest.iter().position(|b| *b == b'\n' || *b == b'\r') {
            self.pending.extend_from_slice(&rest[..end]);
            let line = std::mem::take(&mut self.pending);
            if let Some(event) = self.line(&line) {
                out.push(event);
            }
            // Keep the allocation for the next line.
            self.pending = line;
            self.pending.clear();
            let cr = rest[end] == b'\r';
            rest = &rest[end + 1..];
            if cr {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    None => self.after_cr = true,
                    Some(_) => {}
                }
            }
        }
        self.pending.extend_from_slice(rest);
        out
    }

    /// The end of the stream: the event it cut before its blank line, if
    /// one had data. The caller decides whether a half event counts.
    pub(crate) fn finish(&mut self) -> Option<SseEvent> {
        let line = std::mem::take(&mut self.pending);
        if !line.is_empty() {
            // The unfinished line cannot complete an event by itself.
            let _ = self.line(&line);
        }
        self.line(b"")
    }

    /// One line without its ending; an empty line dispatches the event.
    fn line(&mut self, line: &[u8]) -> Option<SseEvent> {
        let text = String::from_utf8_lossy(line);
        let mut text: &str = &text;
        if !std::mem::replace(&mut self.started, true) {
            text = text.strip_prefix('\u{feff}').unwrap_or(text);
        }
        if text.is_empty() {
            let event = SseEvent {
                event: std::mem::take(&mut self.event),
                data: std::mem::take(&mut self.data),
            };
            return std::mem::take(&mut self.has_data).then_some(event);
        }
        if text.starts_with(':') {
            return None;
        }
        let (field, value) = text.split_once(':').unwrap_or((text, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
        }
    }

    fn parse_in_two(text: &[u8], split: usize) -> Vec<SseEvent> {
        let (a, b) = text.split_at(split);
        let mut parser = SseParser::default();
        let mut events = parser.push(a);
        events.extend(parser.push(b));
        events.extend(parser.finish());
        events
    }

    #[test]
    fn events_split_anywhere_with_every_line_ending() {
        let text = "\u{feff}event: ping\ndata: {\"type\":\"ping\"}\n\n: comment\r\nevent: x\r\ndata: a\r\ndata: é\r\n\r\ndata:b\rdata\r\r";
        let expected = vec![
            ev("ping", "{\"type\":\"ping\"}"),
            ev("x", "a\né"),
            ev("", "b\n"),
        ];
        for split in 0..=text.len() {
            assert_eq!(parse_in_two(text.as_bytes(), split), expected, "at {split}");
        }
    }

    #[test]
    fn odd_lines_are_ignored_not_fatal() {
        let text = b"retry: 100\nid: 7\nnonsense\nfoo: bar\nevent: a\nevent: b\ndata: x\n\n";
        assert_eq!(parse_in_two(text, 0), vec![ev("b", "x")]);
    }

    #[test]
    fn an_event_without_its_blank_line_comes_from_finish() {
        let mut parser = SseParser::default();
        assert!(parser.push(b"data: {\"a\":1}\ndata: [DO").is_empty());
        assert_eq!(parser.finish(), Some(ev("", "{\"a\":1}\n[DO")));
        assert_eq!(parser.finish(), None);
        // A comment or a name alone is no event.
        let mut parser = SseParser::default();
        assert!(parser.push(b": keep-alive\nevent: x\n").is_empty());
        assert_eq!(parser.finish(), None);
    }
}
