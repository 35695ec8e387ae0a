//! `message.appended` on disk carries only its `delta`; readers get the
//! wire shape back (`delta` and the cumulative `text`), rebuilt in order.
//!
//! Storing the cumulative text in every delta made a log grow with the
//! square of a reply (a 23 KB reply in 1,334 deltas was a 15 MB log).
//! The writer drops `text` from the line it writes (the in-memory event,
//! which live subscribers and the tap get, keeps it); every read path
//! runs its events through a [`Rebuild`], which concatenates the deltas
//! of the current message. Logs written before this change carry `text`
//! in every delta and read unchanged (a line with `text` resets the sum).

use agentkit_protocol::{Event, EventType};
use serde_json::Value;

/// Whether an event ends (or begins) a message's run of deltas: after
/// one of these, the next `message.appended` starts a new text.
fn resets(t: EventType) -> bool {
    matches!(
        t,
        EventType::MessageCompleted
            | EventType::StepStarted
            | EventType::StepCompleted
            | EventType::TurnStarted
            | EventType::TurnCompleted
            | EventType::TurnFailed
            | EventType::SessionStarted
    )
}

/// Removes the cumulative `text` of a `message.appended` before it is
/// written, returning it so the caller can put it back.
pub fn strip(event: &mut Event) -> Option<Value> {
    if event.event_type != EventType::MessageAppended {
        return None;
    }
    let obj = event.data.as_object_mut()?;
    // Only a delta whose text can be rebuilt loses it.
    if !obj.get("delta").is_some_and(Value::is_string) {
        return None;
    }
    obj.shift_remove("text")
}

/// Puts back what [`strip`] removed (at the end, where it was).
pub(crate) fn unstrip(event: &mut Event, text: Option<Value>) {
    if let (Some(text), Some(obj)) = (text, event.data.as_object_mut()) {
        obj.insert("text".to_owned(), text);
    }
}

/// What one `message.appended` line says about the text so far.
pub(crate) enum Delta<'a> {
    /// An old-format line: the whole text so far.
    Whole(&'a str),
    /// A stored delta.
    Part(&'a str),
}

pub(crate) fn delta_of(event: &Event) -> Option<Delta<'_>> {
    if event.event_type != EventType::MessageAppended {
        return None;
    }
    if let Some(text) = event.data.get("text").and_then(Value::as_str) {
        return Some(Delta::Whole(text));
    }
    event
        .data
        .get("delta")
        .and_then(Value::as_str)
        .map(Delta::Part)
}

/// Rebuilds the cumulative text of `message.appended` events read in
/// index order.
#[derive(Debug, Default)]
pub struct Rebuild {
    /// The text of the current message so far.
    text: String,
    /// `text` is right for the position: false until the reader passed a
    /// reset, index 0, or was given the prefix.
    known: bool,
}

impl Rebuild {
    /// A rebuild that starts at index 0, where no message is open.
    pub fn at_start() -> Rebuild {
        Rebuild {
            text: String::new(),
            known: true,
        }
    }

    /// A rebuild positioned after a message's first deltas.
    pub fn with_prefix(text: String) -> Rebuild {
        Rebuild { text, known: true }
    }

    /// Does `event` need the prefix before [`apply`](Self::apply) can
    /// complete it?
    pub fn needs_prefix(&self, event: &Event) -> bool {
        !self.known && matches!(delta_of(event), Some(Delta::Part(_)))
    }

    /// Follows one event, completing a stored delta with its `text`.
    pub fn apply(&mut self, event: &mut Event) {
        if resets(event.event_type) {
            self.text.clear();
            self.known = true;
            return;
        }
        match delta_of(event) {
            Some(Delta::Whole(text)) => {
                self.text.clear();
                self.text.push_str(text);
                self.known = true;
            }
            Some(Delta::Part(delta)) => {
                self.text.push_str(delta);
                let text = Value::String(self.text.clone());
                if let Some(obj) = event.data.as_object_mut() {
                    obj.insert("text".to_owned(), text);
                }
            }
            None => {}
        }
    }

    /// Follows an event that already carries its `text` (a live one from
    /// memory). Its text is not copied: should the reader fall back to
    /// the file in the middle of a message, it reads the prefix again.
    pub fn follow_live(&mut self, event: &Event) {
        if resets(event.event_type) {
            self.text.clear();
            self.known = true;
        } else if event.event_type == EventType::MessageAppended {
            self.text.clear();
            self.known = false;
        }
    }
}

/// The text of the message open just before index `end`, from events
/// read backwards: `events` are the events before `end` in index order,
/// the last ones of the log's prefix. `None` when the run starts before
/// the first of them (the caller reads further back).
pub fn prefix_in(events: &[Event], at_log_start: bool) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    let mut base: Option<&str> = None;
    let mut found = at_log_start;
    for event in events.iter().rev() {
        if resets(event.event_type) {
            found = true;
            break;
        }
        match delta_of(event) {
            Some(Delta::Whole(text)) => {
                base = Some(text);
                found = true;
                break;
            }
            Some(Delta::Part(delta)) => parts.push(delta),
            None => {}
        }
    }
    if !found {
        return None;
    }
    let mut text = base.unwrap_or_default().to_owned();
    for part in parts.iter().rev() {
        text.push_str(part);
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use agentkit_protocol::SessionId;
    use serde_json::json;

    fn event(index: u64, t: EventType, data: Value) -> Event {
        Event {
            event_type: t,
            index,
            session_id: SessionId::parse("s").unwrap(),
            turn_id: None,
            at: String::new(),
            data,
        }
    }

    fn deltas(words: &[&str]) -> Vec<Event> {
        let mut out = vec![event(0, EventType::StepStarted, json!({"step": 1}))];
        let mut text = String::new();
        for (i, w) in words.iter().enumerate() {
            text.push_str(w);
            out.push(event(
                i as u64 + 1,
                EventType::MessageAppended,
                json!({"delta": w, "text": text}),
            ));
        }
        out
    }

    #[test]
    fn strip_then_rebuild_gives_back_the_wire_shape() {
        let original = deltas(&["a", "b ", "c"]);
        let mut stored = original.clone();
        for e in &mut stored {
            strip(e);
        }
        assert_eq!(stored[2].data, json!({"delta": "b "}));
        let mut rebuild = Rebuild::at_start();
        for e in &mut stored {
            rebuild.apply(e);
        }
        assert_eq!(stored, original);
    }

    #[test]
    fn a_read_from_the_middle_finds_its_prefix() {
        let mut stored = deltas(&["x", "y", "z"]);
        for e in &mut stored {
            strip(e);
        }
        assert_eq!(prefix_in(&stored[..3], false).as_deref(), Some("xy"));
        assert_eq!(prefix_in(&stored[1..3], false), None);
        assert_eq!(prefix_in(&stored[1..3], true).as_deref(), Some("xy"));
        let rebuild = Rebuild::default();
        assert!(rebuild.needs_prefix(&stored[3]));
        let mut rebuild = Rebuild::with_prefix("xy".into());
        rebuild.apply(&mut stored[3]);
        assert_eq!(stored[3].data["text"], "xyz");
    }

    #[test]
    fn old_lines_with_text_reset_the_sum() {
        let mut old = deltas(&["p", "q"]);
        let mut rebuild = Rebuild::default();
        for e in &mut old {
            rebuild.apply(e);
        }
        assert_eq!(old[2].data, json!({"delta": "q", "text": "pq"}));
        let mut next = event(3, EventType::MessageAppended, json!({"delta": "r"}));
        rebuild.apply(&mut next);
        assert_eq!(next.data["text"], "pqr");
    }
}
