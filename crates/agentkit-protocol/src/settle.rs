//! The one "has this turn settled" fold: which turn answers a message,
//! how it ended, and when the session settled after it. The client's
//! stream reader, the MCP `ask`, channel replies and Slack threads all
//! read a session's events through it, so they agree on what "the turn"
//! and "done" mean.

use serde_json::Value;

use crate::{Event, EventData, EventType};

/// How the turn ended.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnEnd {
    /// `turn.completed` (else `turn.failed`).
    pub ok: bool,
    /// The reply (`result`), or why the turn failed (never empty for a
    /// failure).
    pub text: String,
    /// The reply validated against the agent's `output_schema`.
    pub output: Option<Value>,
}

impl TurnEnd {
    /// The end `event` records, if it ends a turn. A payload that does
    /// not fit its type still ends the turn, with no text when it
    /// completed.
    pub fn of(event: &Event) -> Option<TurnEnd> {
        if !event.is_turn_end() {
            return None;
        }
        Some(match event.payload() {
            EventData::TurnCompleted(done) => TurnEnd {
                ok: true,
                text: done.result,
                output: done.output,
            },
            EventData::TurnFailed(failed) => TurnEnd {
                ok: false,
                text: failure_text(failed.message),
                output: None,
            },
            _ => TurnEnd {
                ok: event.event_type == EventType::TurnCompleted,
                text: if event.event_type == EventType::TurnCompleted {
                    String::new()
                } else {
                    failure_text(String::new())
                },
                output: None,
            },
        })
    }
}

fn failure_text(message: String) -> String {
    if message.trim().is_empty() {
        "the turn failed".to_owned()
    } else {
        message
    }
}

/// What one event meant to the fold.
#[derive(Debug, Clone, PartialEq)]
pub enum Seen {
    /// Nothing yet (or an event of another turn).
    Nothing,
    /// Our turn started.
    Started,
    /// Our turn ended.
    Ended(TurnEnd),
    /// The session settled after our turn (or ended for good: a task
    /// session's `session.completed` / `session.failed`).
    Settled,
}

/// Follows a session's events to the turn that answers a message.
///
/// Our turn is the first that starts after our `message.received` (any
/// `message.received` when the fold was not told the text; for
/// [`answering`](TurnFold::answering), on a server that records none, the
/// first turn that starts). Events of an earlier
/// turn that a resumed stream replays, and a preempted turn ending late,
/// are passed over. A terminal session state ends the read whatever the
/// turn did, since nothing follows it.
#[derive(Debug, Clone)]
pub struct TurnFold {
    /// The text of our message, trimmed; `None`: any message.
    message: Option<String>,
    /// A turn may start before any `message.received` was seen.
    lenient: bool,
    saw_message: bool,
    received_ours: bool,
    /// The index of our `message.received`, once seen.
    our_index: Option<u64>,
    turn_id: Option<String>,
    started: bool,
    ended: Option<TurnEnd>,
}

impl TurnFold {
    /// The fold of the turn that answers `message` (or, on a server that
    /// records no `message.received`, of the first turn that starts).
    pub fn answering(message: &str) -> TurnFold {
        TurnFold {
            message: Some(message.trim().to_owned()),
            lenient: true,
            ..TurnFold::after_next_message()
        }
    }

    /// The fold of the first turn after the next `message.received`,
    /// whatever it says (a follower that starts right before a message it
    /// did not write).
    pub fn after_next_message() -> TurnFold {
        TurnFold {
            message: None,
            lenient: false,
            saw_message: false,
            received_ours: false,
            our_index: None,
            turn_id: None,
            started: false,
            ended: None,
        }
    }

    /// Is `event` part of our turn (it started, and it carries our turn's
    /// id)?
    pub fn is_ours(&self, event: &Event) -> bool {
        self.started && (self.turn_id.is_none() || self.turn_id == event.turn_id)
    }

    /// How our turn ended, once it did.
    pub fn ended(&self) -> Option<&TurnEnd> {
        self.ended.as_ref()
    }

    /// Reads one event.
    pub fn observe(&mut self, event: &Event) -> Seen {
        match event.event_type {
            EventType::MessageReceived => {
                self.saw_message = true;
                let ours = match &self.message {
                    None => true,
                    Some(text) => matches!(
                        event.payload(),
                        EventData::MessageReceived(m) if m.text.trim() == text
                    ),
                };
                if ours && !self.received_ours {
                    self.our_index = Some(event.index);
                }
                self.received_ours |= ours;
                Seen::Nothing
            }
            // A stop dropped our message before any turn took it: no turn
            // will answer it.
            EventType::MessageDropped
                if !self.started
                    && self.ended.is_none()
                    && matches!(
                        (event.payload(), self.our_index),
                        (EventData::MessageDropped(d), Some(ours)) if d.received.contains(&ours)
                    ) =>
            {
                let end = TurnEnd {
                    ok: false,
                    text: "the message was dropped by a stop before a turn took it".to_owned(),
                    output: None,
                };
                self.ended = Some(end.clone());
                Seen::Ended(end)
            }
            EventType::TurnStarted
                if !self.started && (self.received_ours || (self.lenient && !self.saw_message)) =>
            {
                self.started = true;
                self.turn_id = event.turn_id.clone();
                Seen::Started
            }
            _ if event.is_turn_end() && self.ended.is_none() && self.is_ours(event) => {
                match TurnEnd::of(event) {
                    Some(end) => {
                        self.ended = Some(end.clone());
                        Seen::Ended(end)
                    }
                    None => Seen::Nothing,
                }
            }
            EventType::SessionWaiting if self.ended.is_some() => Seen::Settled,
            // Our message was dropped before a turn took it (a stop
            // cleared the queue): nothing more will answer it.
            EventType::SessionWaiting
                if self.received_ours && self.message.is_some() && !self.started =>
            {
                Seen::Settled
            }
            EventType::SessionWaiting => Seen::Nothing,
            _ if event.is_settle() => Seen::Settled,
            _ => Seen::Nothing,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;
    use crate::SessionId;

    fn ev(kind: EventType, turn: Option<&str>, data: Value) -> Event {
        Event {
            event_type: kind,
            index: 0,
            session_id: SessionId::parse("ses_1").unwrap(),
            turn_id: turn.map(str::to_owned),
            at: String::new(),
            data,
        }
    }

    fn plain(kind: EventType, turn: Option<&str>) -> Event {
        ev(kind, turn, json!({}))
    }

    #[test]
    fn a_dropped_message_ends_its_fold_and_another_one_does_not() {
        use EventType::*;
        let mut ours = TurnFold::answering("second");
        let mut other = TurnFold::answering("third");
        let received = |text: &str, index: u64| {
            let mut e = ev(MessageReceived, None, json!({ "text": text }));
            e.index = index;
            e
        };
        let seq = [received("second", 4), received("third", 9)];
        for e in &seq {
            assert_eq!(ours.observe(e), Seen::Nothing);
            assert_eq!(other.observe(e), Seen::Nothing);
        }
        let dropped = ev(MessageDropped, None, json!({"received": [4]}));
        match ours.observe(&dropped) {
            Seen::Ended(end) => assert!(!end.ok && end.text.contains("dropped")),
            seen => panic!("{seen:?}"),
        }
        assert_eq!(other.observe(&dropped), Seen::Nothing);
        assert_eq!(ours.observe(&plain(SessionWaiting, None)), Seen::Settled);
    }

    #[test]
    fn our_turn_is_the_one_after_our_message() {
        use EventType::*;
        let mut f = TurnFold::answering("and Paris?");
        let seq = [
            plain(StepCompleted, Some("t1")),
            ev(TurnCompleted, Some("t1"), json!({"result": "old"})),
            plain(SessionWaiting, None),
            ev(MessageReceived, None, json!({"text": "something else"})),
            ev(MessageReceived, None, json!({"text": " and Paris? "})),
        ];
        for e in &seq {
            assert_eq!(f.observe(e), Seen::Nothing, "{e:?}");
        }
        assert_eq!(f.observe(&plain(TurnStarted, Some("t2"))), Seen::Started);
        // A preempted turn ending late is not ours.
        assert_eq!(f.observe(&plain(TurnFailed, Some("t1"))), Seen::Nothing);
        assert_eq!(f.observe(&plain(SessionWaiting, None)), Seen::Nothing);
        let end = f.observe(&ev(
            TurnCompleted,
            Some("t2"),
            json!({"result": "Sunny.", "output": {"t": 1}}),
        ));
        assert_eq!(
            end,
            Seen::Ended(TurnEnd {
                ok: true,
                text: "Sunny.".into(),
                output: Some(json!({"t": 1}))
            })
        );
        assert_eq!(f.observe(&plain(SessionWaiting, None)), Seen::Settled);
        // A message a stop dropped before its turn started settles too.
        let mut f = TurnFold::answering("hi");
        f.observe(&ev(MessageReceived, None, json!({"text": "hi"})));
        assert_eq!(f.observe(&plain(SessionWaiting, None)), Seen::Settled);
        assert_eq!(f.ended(), None);
    }

    #[test]
    fn failures_terminal_states_and_servers_without_message_received() {
        use EventType::*;
        let mut f = TurnFold::answering("hi");
        assert_eq!(f.observe(&plain(TurnStarted, None)), Seen::Started);
        assert_eq!(
            f.observe(&ev(TurnFailed, None, json!({"message": ""}))),
            Seen::Ended(TurnEnd {
                ok: false,
                text: "the turn failed".into(),
                output: None
            })
        );
        // Without a message first, only the lenient fold takes a turn.
        let mut f = TurnFold::after_next_message();
        assert_eq!(f.observe(&plain(TurnStarted, Some("t0"))), Seen::Nothing);
        let mut f = TurnFold::after_next_message();
        f.observe(&ev(MessageReceived, None, json!({"text": "x"})));
        assert_eq!(f.observe(&plain(SessionFailed, None)), Seen::Settled);
        // A payload that does not fit still ends the turn.
        let mut f = TurnFold::after_next_message();
        f.observe(&ev(MessageReceived, None, json!({"text": "x"})));
        f.observe(&plain(TurnStarted, Some("t")));
        let odd = ev(TurnCompleted, Some("t"), json!({"result": 5}));
        assert_eq!(
            f.observe(&odd),
            Seen::Ended(TurnEnd {
                ok: true,
                text: String::new(),
                output: None
            })
        );
    }
}
