//! One response's turn, read from the session's log: where it starts
//! (its [`Anchor`]), which turn is ours, and what it did as [`Piece`]s
//! that `responses.rs` and `chat.rs` render. The same fold reads a live
//! follow (a request waiting for its turn) and a stored log (`GET
//! /v1/responses/:id`, after a restart too).

use agentkit_protocol::{Event, EventData, EventType, ToolCall, Usage};
use agentkit_runtime::{AgentRuntime, Owner};
use tokio_util::sync::CancellationToken;

use super::OaiError;

/// Where a response starts in its session's log: the index of its
/// `message.received`, or the log's length before the approval decision
/// or the client's tool results that resumed a turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Anchor {
    pub(crate) session: String,
    pub(crate) index: u64,
}

impl Anchor {
    /// `resp_<sessionId>.<index>` (a session id never holds a `.`).
    pub(crate) fn response_id(&self) -> String {
        format!("resp_{}.{}", self.session, self.index)
    }

    /// `chatcmpl-<sessionId>.<index>`.
    pub(crate) fn completion_id(&self) -> String {
        format!("chatcmpl-{}.{}", self.session, self.index)
    }

    /// The anchor a response id names, if it is one of ours.
    pub(crate) fn of_response(id: &str) -> Option<Anchor> {
        let (session, index) = id.strip_prefix("resp_")?.rsplit_once('.')?;
        agentkit_protocol::SessionId::parse(session).ok()?;
        Some(Anchor {
            session: session.to_owned(),
            index: index.parse().ok()?,
        })
    }
}

/// A call parked for approval.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Parked {
    pub(crate) call_id: String,
    pub(crate) tool_name: String,
    pub(crate) input: serde_json::Value,
}

/// How our turn ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct End {
    pub(crate) ok: bool,
    /// The reply, or why the turn failed.
    pub(crate) text: String,
    /// `preempted`, `stopped`, `budget`... for a failure that says why.
    pub(crate) reason: Option<String>,
    pub(crate) usage: Usage,
}

/// What one event of our turn meant.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Piece {
    /// A new assistant message begins.
    TextStarted,
    Text(String),
    /// The message is complete: its whole text.
    TextDone(String),
    /// The model asked for these calls (validated arguments).
    Calls(Vec<ToolCall>),
    /// A call finished, with its output.
    CallDone {
        call_id: String,
        output: serde_json::Value,
        is_error: bool,
    },
    /// A model step began (`started`) or ended.
    Step {
        step: u32,
        started: bool,
    },
    /// A call was parked for approval (whether it still waits is the
    /// reader's question: [`Follower`] asks the runtime).
    Parked(Parked),
    /// The turn waits for these decisions (its steps used so much so
    /// far): the response ends here.
    Waiting(Vec<Parked>, Usage),
    /// The turn waits for the client's results of these calls of its
    /// tools: the response ends here.
    AwaitingClient(Vec<ToolCall>, Usage),
    /// The turn ended: the response ends here.
    Ended(End),
}

/// What started the response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Message,
    Decision,
}

/// The fold of one response's events.
#[derive(Debug)]
pub(crate) struct Fold {
    anchor: u64,
    kind: Option<Kind>,
    /// Our turn, once known.
    turn: Option<String>,
    text_open: bool,
    parked: Vec<Parked>,
    done: bool,
    /// The `at` of the event that started the response.
    pub(crate) started_at: Option<String>,
    /// Where the response before this one starts (read by [`replay`]).
    pub(crate) previous: Option<u64>,
    /// What our turn's steps used so far.
    pub(crate) usage: Usage,
}

impl Fold {
    pub(crate) fn new(anchor: u64) -> Fold {
        Fold {
            anchor,
            kind: None,
            turn: None,
            text_open: false,
            parked: Vec::new(),
            done: false,
            started_at: None,
            previous: None,
            usage: Usage::default(),
        }
    }

    /// The response began: its message or its decision was seen.
    pub(crate) fn found(&self) -> bool {
        self.kind.is_some()
    }

    pub(crate) fn done(&self) -> bool {
        self.done
    }

    /// Calls of ours parked so far.
    pub(crate) fn parked(&self) -> &[Parked] {
        &self.parked
    }

    /// Our turn's id, once it started.
    pub(crate) fn turn(&self) -> Option<&str> {
        self.turn.as_deref()
    }

    /// Reads one event.
    pub(crate) fn observe(&mut self, e: &Event) -> Vec<Piece> {
        if self.done || e.index < self.anchor {
            return Vec::new();
        }
        let data = e.payload();
        match (&data, self.kind) {
            (EventData::MessageReceived(_), None) if e.index == self.anchor => {
                self.kind = Some(Kind::Message);
                self.started_at = Some(e.at.clone());
                return Vec::new();
            }
            (EventData::ApprovalResolved(_), None) => {
                self.kind = Some(Kind::Decision);
                self.turn = e.turn_id.clone();
                self.started_at = Some(e.at.clone());
                return Vec::new();
            }
            // A client's result for a call of its tool resumed the turn
            // (the client has it: it is not repeated).
            (EventData::ActionResult(_), None) => {
                self.kind = Some(Kind::Decision);
                self.turn = e.turn_id.clone();
                self.started_at = Some(e.at.clone());
                return Vec::new();
            }
            (_, None) => return Vec::new(),
            (EventData::TurnStarted(t), Some(Kind::Message)) if self.turn.is_none() => {
                if t.received.is_empty() || t.received.contains(&self.anchor) {
                    self.turn = e.turn_id.clone();
                }
                return Vec::new();
            }
            // After a restart a decision resumes the conversation in a
            // new turn.
            (EventData::TurnStarted(t), Some(Kind::Decision))
                if self.turn.is_none() || t.resumes == self.turn =>
            {
                self.turn = e.turn_id.clone();
                return Vec::new();
            }
            // Our message was dropped before a turn took it (a stop).
            _ if e.is_settle() && self.turn.is_none() && self.kind == Some(Kind::Message) => {
                self.done = true;
                return vec![Piece::Ended(End {
                    ok: false,
                    text: "the message was dropped before a turn answered it (the session was stopped)".to_owned(),
                    reason: Some("stopped".to_owned()),
                    usage: Usage::default(),
                })];
            }
            _ => {}
        }
        if self.turn.is_none() || e.turn_id != self.turn {
            return Vec::new();
        }
        match data {
            EventData::MessageAppended(a) if a.parent_call_id.is_none() => {
                if a.delta.is_empty() {
                    return Vec::new();
                }
                let mut out = Vec::new();
                if !self.text_open {
                    self.text_open = true;
                    out.push(Piece::TextStarted);
                }
                out.push(Piece::Text(a.delta));
                out
            }
            EventData::MessageCompleted(m) if m.parent_call_id.is_none() => {
                let mut out = Vec::new();
                if !self.text_open {
                    if m.text.is_empty() {
                        return out;
                    }
                    out.push(Piece::TextStarted);
                    out.push(Piece::Text(m.text.clone()));
                }
                self.text_open = false;
                out.push(Piece::TextDone(m.text));
                out
            }
            EventData::ActionsRequested(a) if !a.direct && !a.calls.is_empty() => {
                vec![Piece::Calls(a.calls)]
            }
            EventData::ActionResult(r) => vec![Piece::CallDone {
                call_id: r.call_id,
                output: r.output,
                is_error: r.is_error,
            }],
            EventData::StepStarted(s) => vec![Piece::Step {
                step: s.step,
                started: true,
            }],
            EventData::StepCompleted(s) => {
                if let Some(u) = s.usage {
                    self.usage += u;
                }
                vec![Piece::Step {
                    step: s.step,
                    started: false,
                }]
            }
            EventData::ApprovalRequested(r) => {
                let parked = Parked {
                    call_id: r.call_id,
                    tool_name: r.tool_name,
                    input: r.input,
                };
                self.parked.push(parked.clone());
                vec![Piece::Parked(parked)]
            }
            EventData::ClientActionsRequested(c) => {
                self.done = true;
                vec![Piece::AwaitingClient(c.calls, self.usage)]
            }
            // A decision after our calls parked: this response ended at
            // the wait (the decision starts the next one).
            EventData::ApprovalResolved(_) if !self.parked.is_empty() => {
                self.done = true;
                vec![Piece::Waiting(std::mem::take(&mut self.parked), self.usage)]
            }
            EventData::TurnCompleted(t) => {
                self.done = true;
                // A response that resumed a turn counts the steps it saw.
                let usage = match self.kind {
                    Some(Kind::Decision) => self.usage,
                    _ => t.usage,
                };
                vec![Piece::Ended(End {
                    ok: true,
                    text: t.result,
                    reason: None,
                    usage,
                })]
            }
            EventData::TurnFailed(t) => {
                self.done = true;
                vec![Piece::Ended(End {
                    ok: false,
                    text: if t.message.trim().is_empty() {
                        "the turn failed".to_owned()
                    } else {
                        t.message
                    },
                    reason: t.reason,
                    usage: t.usage.unwrap_or_default(),
                })]
            }
            _ if e.event_type == EventType::TurnFailed
                || e.event_type == EventType::TurnCompleted =>
            {
                self.done = true;
                vec![Piece::Ended(End {
                    ok: e.event_type == EventType::TurnCompleted,
                    text: String::new(),
                    reason: None,
                    usage: Usage::default(),
                })]
            }
            _ => Vec::new(),
        }
    }
}

/// The calls of `turn` that still wait for a decision.
pub(crate) async fn still_waiting(
    runtime: &AgentRuntime,
    owner: &Owner,
    session: &str,
    turn: Option<&str>,
) -> Vec<Parked> {
    let Ok(pending) = runtime.approvals().pending(session, owner).await else {
        return Vec::new();
    };
    let mut waiting: Vec<Parked> = pending
        .into_iter()
        .filter(|p| turn.is_none_or(|t| t == p.turn_id))
        .map(|p| Parked {
            call_id: p.call_id,
            tool_name: p.tool_name,
            input: p.input,
        })
        .collect();
    waiting.sort_by(|a, b| a.call_id.cmp(&b.call_id));
    waiting
}

/// The response before the one at `anchor`: the latest message, the
/// first decision after calls parked, or the first client output after
/// calls of its tools, before it in the log.
pub(crate) fn previous(events: &[Event], anchor: u64) -> Option<u64> {
    let mut previous = None;
    let mut parked = false;
    let mut client = false;
    for e in events.iter().take_while(|e| e.index < anchor) {
        match e.event_type {
            EventType::MessageReceived => {
                previous = Some(e.index);
                parked = false;
            }
            EventType::ActionApprovalRequested => parked = true,
            EventType::ActionApprovalResolved if parked => {
                previous = Some(e.index);
                parked = false;
            }
            EventType::ActionsClientRequested => client = true,
            EventType::ActionResult if client => {
                previous = Some(e.index);
                client = false;
            }
            _ => {}
        }
    }
    previous
}

/// Follows a response's turn live, from its anchor.
pub(crate) struct Follower {
    sub: agentkit_runtime::Follow,
    pub(crate) fold: Fold,
    runtime: AgentRuntime,
    owner: Owner,
    session: String,
    shutdown: CancellationToken,
}

impl std::fmt::Debug for Follower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follower")
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl Follower {
    pub(crate) async fn start(
        runtime: &AgentRuntime,
        owner: &Owner,
        anchor: &Anchor,
        shutdown: CancellationToken,
    ) -> Result<Follower, OaiError> {
        let sub = runtime
            .subscribe(&anchor.session, owner, anchor.index)
            .await?;
        Ok(Follower {
            sub,
            fold: Fold::new(anchor.index),
            runtime: runtime.clone(),
            owner: owner.clone(),
            session: anchor.session.clone(),
            shutdown,
        })
    }

    /// The pieces of the next event (empty for an event that is not
    /// ours); `None` once the response ended, the server stops or the
    /// log cannot be read.
    pub(crate) async fn next(&mut self) -> Option<Vec<Piece>> {
        if self.fold.done() {
            return None;
        }
        let event = tokio::select! {
            e = self.sub.next_shared() => e,
            () = self.shutdown.cancelled() => return None,
        };
        let event = match event {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(session = %self.session, error = %e, "cannot follow a session for an OpenAI-compatible answer");
                return None;
            }
        };
        let mut pieces = self.fold.observe(&event);
        if pieces.iter().any(|p| matches!(p, Piece::Parked(_))) {
            let waiting =
                still_waiting(&self.runtime, &self.owner, &self.session, self.fold.turn()).await;
            let ours = |w: &Parked| self.fold.parked().iter().any(|p| p.call_id == w.call_id);
            if waiting.iter().any(ours) {
                self.fold.done = true;
                pieces.push(Piece::Waiting(waiting, self.fold.usage));
            }
        }
        Some(pieces)
    }
}

/// The pieces of a stored log read from a response's anchor, and whether
/// the response was found at all. A turn that parked calls still waiting
/// ends with [`Piece::Waiting`].
pub(crate) async fn replay(
    runtime: &AgentRuntime,
    owner: &Owner,
    anchor: &Anchor,
) -> Result<(Fold, Vec<Piece>), OaiError> {
    let events = runtime.events_stored(&anchor.session, owner, 0).await?;
    let mut fold = Fold::new(anchor.index);
    fold.previous = previous(&events, anchor.index);
    let mut pieces = Vec::new();
    for e in &events {
        pieces.extend(fold.observe(e));
    }
    if !fold.done() && !fold.parked().is_empty() {
        let waiting = still_waiting(runtime, owner, &anchor.session, fold.turn()).await;
        if !waiting.is_empty() {
            fold.done = true;
            pieces.push(Piece::Waiting(waiting, fold.usage));
        }
    }
    Ok((fold, pieces))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use agentkit_protocol::SessionId;
    use serde_json::{Value, json};

    use super::*;

    fn ev(index: u64, kind: EventType, turn: Option<&str>, data: Value) -> Event {
        Event {
            event_type: kind,
            index,
            session_id: SessionId::parse("ses_1").unwrap(),
            turn_id: turn.map(str::to_owned),
            at: "2026-12-03T10:00:00Z".into(),
            data,
        }
    }

    /// The pieces of `events` read from `anchor`, one per line.
    fn check(anchor: u64, events: &[Event], expect: expect_test::Expect) {
        let mut fold = Fold::new(anchor);
        let text: Vec<String> = events
            .iter()
            .flat_map(|e| fold.observe(e))
            .map(|p| format!("{p:?}"))
            .collect();
        expect.assert_eq(&text.join("\n"));
    }

    #[test]
    fn response_ids_round_trip() {
        let a = Anchor {
            session: "ses_0a-b".into(),
            index: 12,
        };
        assert_eq!(a.response_id(), "resp_ses_0a-b.12");
        assert_eq!(Anchor::of_response(&a.response_id()), Some(a));
        assert_eq!(Anchor::of_response("resp_x/y.1"), None);
        assert_eq!(Anchor::of_response("resp_x.y"), None);
        assert_eq!(Anchor::of_response("msg_x.1"), None);
    }

    #[test]
    fn our_turn_is_the_one_that_answers_our_message() {
        use EventType::*;
        let events = [
            ev(3, MessageReceived, None, json!({"text": "hi"})),
            // The turn our message preempted ends late.
            ev(
                4,
                TurnFailed,
                Some("t0"),
                json!({"message": "preempted", "reason": "preempted"}),
            ),
            ev(
                5,
                TurnStarted,
                Some("t1"),
                json!({"messages": 1, "received": [3]}),
            ),
            ev(
                6,
                ActionsRequested,
                Some("t1"),
                json!({"calls": [{"callId": "c1", "toolName": "echo", "input": {"a": 1}}]}),
            ),
            ev(
                7,
                ActionResult,
                Some("t1"),
                json!({"callId": "c1", "toolName": "echo", "output": "ok", "isError": false, "durationMs": 1}),
            ),
            ev(8, MessageAppended, Some("t1"), json!({"delta": "Hel"})),
            ev(9, MessageAppended, Some("t1"), json!({"delta": "lo"})),
            ev(
                10,
                MessageCompleted,
                Some("t1"),
                json!({"text": "Hello", "finishReason": "stop"}),
            ),
            ev(
                11,
                TurnCompleted,
                Some("t1"),
                json!({"result": "Hello", "usage": {"inputTokens": 5, "outputTokens": 2}}),
            ),
            ev(12, SessionWaiting, None, json!({})),
        ];
        check(
            3,
            &events,
            expect_test::expect![[r#"
                Calls([ToolCall { call_id: "c1", tool_name: "echo", input: Object {"a": Number(1)} }])
                CallDone { call_id: "c1", output: String("ok"), is_error: false }
                TextStarted
                Text("Hel")
                Text("lo")
                TextDone("Hello")
                Ended(End { ok: true, text: "Hello", reason: None, usage: Usage { input_tokens: 5, output_tokens: 2, cache_read_tokens: 0, cache_write_tokens: 0 } })"#]],
        );
    }

    #[test]
    fn a_parked_call_ends_the_response_and_its_decision_starts_the_next() {
        use EventType::*;
        let events = [
            ev(1, MessageReceived, None, json!({"text": "hi"})),
            ev(
                2,
                TurnStarted,
                Some("t1"),
                json!({"messages": 1, "received": [1]}),
            ),
            ev(
                3,
                ActionsRequested,
                Some("t1"),
                json!({"calls": [{"callId": "c1", "toolName": "rm", "input": {}}]}),
            ),
            ev(
                4,
                ActionApprovalRequested,
                Some("t1"),
                json!({"callId": "c1", "toolName": "rm", "input": {}}),
            ),
            ev(
                5,
                ActionApprovalResolved,
                Some("t1"),
                json!({"callId": "c1", "toolName": "rm", "decision": "approve", "by": "p"}),
            ),
            ev(
                6,
                ActionResult,
                Some("t1"),
                json!({"callId": "c1", "toolName": "rm", "output": "ok", "isError": false, "durationMs": 1}),
            ),
            ev(7, MessageCompleted, Some("t1"), json!({"text": "done"})),
            ev(8, TurnCompleted, Some("t1"), json!({"result": "done"})),
        ];
        check(
            1,
            &events,
            expect_test::expect![[r#"
                Calls([ToolCall { call_id: "c1", tool_name: "rm", input: Object {} }])
                Parked(Parked { call_id: "c1", tool_name: "rm", input: Object {} })
                Waiting([Parked { call_id: "c1", tool_name: "rm", input: Object {} }], Usage { input_tokens: 0, output_tokens: 0, cache_read_tokens: 0, cache_write_tokens: 0 })"#]],
        );
        check(
            5,
            &events,
            expect_test::expect![[r#"
                CallDone { call_id: "c1", output: String("ok"), is_error: false }
                TextStarted
                Text("done")
                TextDone("done")
                Ended(End { ok: true, text: "done", reason: None, usage: Usage { input_tokens: 0, output_tokens: 0, cache_read_tokens: 0, cache_write_tokens: 0 } })"#]],
        );
    }

    #[test]
    fn a_call_of_a_client_tool_ends_the_response_and_its_result_starts_the_next() {
        use EventType::*;
        let call = json!({"callId": "c1", "toolName": "pick", "input": {}});
        let events = [
            ev(1, MessageReceived, None, json!({"text": "hi"})),
            ev(
                2,
                TurnStarted,
                Some("t1"),
                json!({"messages": 1, "received": [1]}),
            ),
            ev(3, ActionsRequested, Some("t1"), json!({"calls": [call]})),
            ev(
                4,
                ActionsClientRequested,
                Some("t1"),
                json!({"calls": [call]}),
            ),
            ev(
                5,
                ActionResult,
                Some("t1"),
                json!({"callId": "c1", "toolName": "pick", "output": "Paris", "isError": false, "durationMs": 0}),
            ),
            ev(
                6,
                MessageCompleted,
                Some("t1"),
                json!({"text": "Paris it is"}),
            ),
            ev(
                7,
                TurnCompleted,
                Some("t1"),
                json!({"result": "Paris it is"}),
            ),
        ];
        check(
            1,
            &events,
            expect_test::expect![[r#"
            Calls([ToolCall { call_id: "c1", tool_name: "pick", input: Object {} }])
            AwaitingClient([ToolCall { call_id: "c1", tool_name: "pick", input: Object {} }], Usage { input_tokens: 0, output_tokens: 0, cache_read_tokens: 0, cache_write_tokens: 0 })"#]],
        );
        check(
            5,
            &events,
            expect_test::expect![[r#"
            TextStarted
            Text("Paris it is")
            TextDone("Paris it is")
            Ended(End { ok: true, text: "Paris it is", reason: None, usage: Usage { input_tokens: 0, output_tokens: 0, cache_read_tokens: 0, cache_write_tokens: 0 } })"#]],
        );
        assert_eq!(previous(&events, 8), Some(5));
    }
}
