//! The client's "has this turn settled" check: the protocol's one fold
//! ([`TurnFold`]), read as a yes or no.

use agentkit_protocol::{Event, Seen, TurnFold};

/// Decides when a turn's events are all in: our turn is the first that
/// starts after our `message.received` (or, on a server that records no
/// `message.received`, the first that starts), and the session settles
/// after it ends. Events of an earlier turn that a resumed stream replays
/// are passed over. A terminal session state (`session.completed` /
/// `session.failed`) ends the read whatever the turn did, since nothing
/// follows it.
#[derive(Debug)]
pub struct Settle(TurnFold);

impl Settle {
    /// A fold waiting for the turn that answers `message`.
    pub fn new(message: &str) -> Settle {
        Settle(TurnFold::answering(message))
    }

    /// Reads one event; true once the session settled after our turn.
    pub fn observe(&mut self, event: &Event) -> bool {
        self.0.observe(event) == Seen::Settled
    }
}

#[cfg(test)]
mod tests {
    use agentkit_protocol::{EventType, SessionId};
    use serde_json::{Value, json};

    use super::*;

    fn ev(kind: EventType, turn: Option<&str>, data: Value) -> Event {
        Event {
            event_type: kind,
            index: 0,
            session_id: SessionId::parse("ses_1").unwrap_or_else(|_| unreachable!()),
            turn_id: turn.map(str::to_owned),
            at: String::new(),
            data,
        }
    }

    fn plain(kind: EventType, turn: Option<&str>) -> Event {
        ev(kind, turn, json!({}))
    }

    fn received(text: &str) -> Event {
        ev(EventType::MessageReceived, None, json!({"text": text}))
    }

    #[test]
    fn settles_after_our_turn_only() {
        use EventType::*;
        let mut s = Settle::new("and Paris?");
        let seq = [
            // A stream resumed mid-turn replays the end of an earlier turn.
            plain(StepCompleted, Some("t1")),
            plain(TurnCompleted, Some("t1")),
            plain(SessionWaiting, None),
            received(" and Paris? "),
            plain(TurnStarted, Some("t2")),
            // A preempted turn ending late is not ours.
            plain(TurnFailed, Some("t1")),
            plain(SessionWaiting, None),
            plain(TurnCompleted, Some("t2")),
        ];
        for e in &seq {
            assert!(!s.observe(e), "{e:?}");
        }
        assert!(s.observe(&plain(SessionWaiting, None)));
    }

    #[test]
    fn settles_without_message_received_and_on_terminal_states() {
        use EventType::*;
        let mut s = Settle::new("hi");
        assert!(!s.observe(&plain(TurnStarted, None)));
        assert!(!s.observe(&plain(TurnCompleted, None)));
        assert!(s.observe(&plain(SessionWaiting, None)));

        let mut s = Settle::new("hi");
        assert!(!s.observe(&received("something else")));
        assert!(!s.observe(&plain(TurnStarted, Some("t0"))));
        assert!(!s.observe(&plain(TurnCompleted, Some("t0"))));
        assert!(!s.observe(&plain(SessionWaiting, None)));
        assert!(s.observe(&plain(SessionFailed, None)));
    }
}
