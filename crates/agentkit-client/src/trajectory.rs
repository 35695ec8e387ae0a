//! Trajectories: a session's event stream folded into the summary that
//! `agentkit run`, `agentkit chat --json`, `agentkit trajectory` and the
//! eval runner read.
//!
//! The fold reads each event's typed payload ([`Event::payload`]); a
//! payload that does not fit its type reads as
//! [`EventData::Unknown`] and is passed over, so a log written by another
//! version still folds. Reading a log's lines is [`crate::parse_ndjson`].

use agentkit_protocol::{Event, EventData, EventType};
use serde::Serialize;
use serde_json::Value;

/// What a session did, turn by turn.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Trajectory {
    /// The session the events belong to (from the first event that names
    /// one).
    pub session_id: Option<String>,
    /// False when any turn failed or the session failed.
    pub ok: bool,
    /// The turns, in the order they started.
    pub turns: Vec<Turn>,
    /// The last turn's reply.
    pub reply: Option<String>,
    /// Every turn's tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Token usage summed over the turns.
    pub usage: Usage,
    /// What the turns cost in US dollars; `null` when any turn's price was
    /// unknown.
    pub cost_usd: Option<f64>,
}

/// One turn: the user messages that started it, its tool calls and how it
/// ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
    pub turn_id: Option<String>,
    /// The user messages the turn answers (several when messages were
    /// coalesced).
    pub messages: Vec<String>,
    pub tool_calls: Vec<ToolCall>,
    /// The text of the last top-level assistant message that finished with
    /// `stop`; `null` when the turn produced none.
    pub reply: Option<String>,
    pub status: TurnStatus,
    /// Why the turn failed (`turn.failed` `message`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The reply parsed and validated against the session's output schema
    /// (`turn.completed` `output`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    pub usage: Usage,
    /// What the turn cost in US dollars (`turn.completed` `costUsd`);
    /// `null` when its price was unknown.
    pub cost_usd: Option<f64>,
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum TurnStatus {
    Completed,
    Failed,
    /// The events end before the turn did (a log cut short, or a turn
    /// still running).
    #[default]
    Running,
}

/// A tool call and its result, paired by `callId`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    pub call_id: String,
    pub tool_name: String,
    pub input: Value,
    /// `null` until the result arrives.
    pub output: Value,
    pub is_error: bool,
    pub duration_ms: Option<u64>,
}

/// Token counts, as `turn.completed` reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
}

impl From<agentkit_protocol::Usage> for Usage {
    fn from(u: agentkit_protocol::Usage) -> Usage {
        Usage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cache_read_tokens: u.cache_read_tokens,
            cache_write_tokens: u.cache_write_tokens,
        }
    }
}

impl Usage {
    /// Adds `other` to these counts.
    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
    }
}

impl Trajectory {
    /// Whether any turn failed.
    pub fn any_turn_failed(&self) -> bool {
        self.turns.iter().any(|t| t.status == TurnStatus::Failed)
    }
}

/// Folds a session's events into its trajectory.
///
/// Events are attributed to turns by `turnId` when they carry one, and
/// otherwise to the turn that is running. A `message.received` that
/// arrives before its turn starts belongs to the next turn.
pub fn from_events(events: &[Event]) -> Trajectory {
    let mut fold = Fold::default();
    for event in events {
        fold.event(event);
    }
    fold.finish()
}

#[derive(Default)]
struct Fold {
    session_id: Option<String>,
    session_failed: bool,
    turns: Vec<Turn>,
    /// The index in `turns` of the turn that is running.
    current: Option<usize>,
    /// User messages not yet attributed to a turn.
    pending_messages: Vec<String>,
}

impl Fold {
    fn event(&mut self, event: &Event) {
        if self.session_id.is_none() {
            self.session_id = Some(event.session_id.to_string());
        }
        let turn_id = event.turn_id.clone();
        match event.payload() {
            EventData::MessageReceived(m) => {
                match turn_id.as_deref().and_then(|id| self.find(id)) {
                    Some(i) => self.turns[i].messages.push(m.text),
                    None => self.pending_messages.push(m.text),
                }
            }
            EventData::TurnStarted(_) => {
                let i = match turn_id.as_deref().and_then(|id| self.find(id)) {
                    Some(i) => i,
                    None => self.push_turn(turn_id),
                };
                let mut pending = std::mem::take(&mut self.pending_messages);
                pending.append(&mut self.turns[i].messages);
                self.turns[i].messages = pending;
                self.current = Some(i);
            }
            EventData::MessageCompleted(m)
                if m.parent_call_id.is_none() && m.finish_reason == "stop" =>
            {
                let i = self.turn_for(turn_id);
                self.turns[i].reply = Some(m.text);
            }
            EventData::ActionsRequested(requested) => {
                let i = self.turn_for(turn_id);
                for call in requested.calls {
                    self.turns[i].tool_calls.push(ToolCall {
                        call_id: call.call_id,
                        tool_name: call.tool_name,
                        input: call.input,
                        ..ToolCall::default()
                    });
                }
            }
            EventData::ActionResult(result) => {
                let i = self.turn_for(turn_id);
                // A result pairs with the latest request of the same id that
                // has no result yet; one without a request is kept as is.
                let slot = self.turns[i]
                    .tool_calls
                    .iter_mut()
                    .rev()
                    .find(|c| c.call_id == result.call_id && c.output.is_null() && !c.is_error);
                let call = match slot {
                    Some(call) => call,
                    None => {
                        self.turns[i].tool_calls.push(ToolCall {
                            call_id: result.call_id.clone(),
                            tool_name: result.tool_name.clone(),
                            ..ToolCall::default()
                        });
                        let last = self.turns[i].tool_calls.len() - 1;
                        &mut self.turns[i].tool_calls[last]
                    }
                };
                call.output = result.output;
                call.is_error = result.is_error;
                call.duration_ms = Some(result.duration_ms);
            }
            EventData::TurnCompleted(done) => {
                let i = self.turn_for(turn_id);
                let turn = &mut self.turns[i];
                turn.status = TurnStatus::Completed;
                turn.usage = done.usage.into();
                turn.cost_usd = known_cost(done.cost_usd, done.usage);
                turn.output = done.output;
                self.end(i);
            }
            EventData::TurnFailed(failed) => {
                let i = self.turn_for(turn_id);
                let turn = &mut self.turns[i];
                turn.status = TurnStatus::Failed;
                turn.error = Some(failed.message);
                if let Some(usage) = failed.usage {
                    turn.usage = usage.into();
                }
                turn.cost_usd = known_cost(failed.cost_usd, failed.usage.unwrap_or_default());
                self.end(i);
            }
            _ if event.event_type == EventType::SessionFailed => self.session_failed = true,
            _ => {}
        }
    }

    fn find(&self, turn_id: &str) -> Option<usize> {
        self.turns
            .iter()
            .position(|t| t.turn_id.as_deref() == Some(turn_id))
    }

    fn push_turn(&mut self, turn_id: Option<String>) -> usize {
        self.turns.push(Turn {
            turn_id,
            ..Turn::default()
        });
        self.turns.len() - 1
    }

    /// The turn an event belongs to: by id, else the running turn, else a
    /// new one (a log that starts mid-turn).
    fn turn_for(&mut self, turn_id: Option<String>) -> usize {
        if let Some(i) = turn_id.as_deref().and_then(|id| self.find(id)) {
            return i;
        }
        match self.current {
            Some(i) if turn_id.is_none() => i,
            _ => {
                let i = self.push_turn(turn_id);
                self.current = Some(i);
                i
            }
        }
    }

    fn end(&mut self, i: usize) {
        if self.current == Some(i) {
            self.current = None;
        }
    }

    fn finish(self) -> Trajectory {
        let mut usage = Usage::default();
        let mut cost_usd = Some(0.0);
        for turn in &self.turns {
            usage.add(turn.usage);
            cost_usd = add_cost(cost_usd, turn.cost_usd);
        }
        let failed = self.turns.iter().any(|t| t.status == TurnStatus::Failed);
        Trajectory {
            session_id: self.session_id,
            ok: !failed && !self.session_failed,
            reply: self.turns.last().and_then(|t| t.reply.clone()),
            tool_calls: self
                .turns
                .iter()
                .flat_map(|t| t.tool_calls.iter().cloned())
                .collect(),
            usage,
            cost_usd,
            turns: self.turns,
        }
    }
}

/// A turn's recorded cost; a turn that used nothing cost nothing, even
/// where no cost was recorded.
fn known_cost(cost: Option<f64>, usage: agentkit_protocol::Usage) -> Option<f64> {
    cost.or_else(|| (usage == agentkit_protocol::Usage::default()).then_some(0.0))
}

/// The sum of two costs in US dollars (rounded to a billionth), unknown
/// when either is.
pub fn add_cost(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(((a? + b?) * 1e9).round() / 1e9)
}

#[cfg(test)]
mod tests {
    use expect_test::{Expect, expect};
    use serde_json::json;

    use super::*;

    fn check(events: &[Value], expected: Expect) {
        let events = typed(events);
        let t = from_events(&events);
        let text = serde_json::to_string_pretty(&t).unwrap_or_default();
        expected.assert_eq(&text);
    }

    /// The events as a log reader sees them (objects that are not events
    /// skipped).
    fn typed(events: &[Value]) -> Vec<Event> {
        events
            .iter()
            .filter_map(|e| crate::ndjson::event_of(e.clone()))
            .collect()
    }

    fn ev(index: u64, kind: &str, turn: Option<&str>, data: Value) -> Value {
        let mut e = json!({
            "type": kind,
            "index": index,
            "sessionId": "ses_1",
            "at": "2026-01-01T00:00:00Z",
            "data": data,
        });
        if let Some(turn) = turn {
            e["turnId"] = json!(turn);
        }
        e
    }

    #[test]
    fn pairs_calls_and_results_and_sums_usage() {
        let t1 = Some("turn_1");
        let t2 = Some("turn_2");
        let events = [
            ev(0, "session.started", None, json!({})),
            ev(
                1,
                "message.received",
                None,
                json!({"text": "weather in NYC?"}),
            ),
            ev(2, "turn.started", t1, json!({})),
            ev(3, "step.started", t1, json!({"step": 1})),
            ev(
                4,
                "message.completed",
                t1,
                json!({"text": "", "finishReason": "tool_call"}),
            ),
            ev(
                5,
                "actions.requested",
                t1,
                json!({"calls": [
                    {"callId": "c1", "toolName": "get_weather", "input": {"city": "NYC"}},
                    {"callId": "c2", "toolName": "convert", "input": {"f": 70}},
                ]}),
            ),
            ev(
                6,
                "action.result",
                t1,
                json!({"callId": "c2", "toolName": "convert", "output": "21C", "isError": true, "durationMs": 3}),
            ),
            ev(
                7,
                "action.result",
                t1,
                json!({"callId": "c1", "toolName": "get_weather", "output": {"tempF": 70}, "isError": false, "durationMs": 12}),
            ),
            ev(
                8,
                "message.completed",
                t1,
                json!({"text": "nested", "finishReason": "stop", "parentCallId": "c1"}),
            ),
            ev(
                9,
                "message.completed",
                t1,
                json!({"text": "It is 70F.", "finishReason": "stop"}),
            ),
            ev(
                10,
                "turn.completed",
                t1,
                json!({"result": "It is 70F.", "usage": {"inputTokens": 10, "outputTokens": 5, "cacheReadTokens": 1, "cacheWriteTokens": 0}}),
            ),
            ev(11, "session.waiting", None, json!({})),
            ev(12, "message.received", t2, json!({"text": "and Paris?"})),
            ev(13, "turn.started", t2, json!({})),
            ev(
                14,
                "turn.failed",
                t2,
                json!({"message": "turn interrupted"}),
            ),
            ev(15, "session.waiting", None, json!({})),
        ];
        check(
            &events,
            expect![[r#"
                {
                  "sessionId": "ses_1",
                  "ok": false,
                  "turns": [
                    {
                      "turnId": "turn_1",
                      "messages": [
                        "weather in NYC?"
                      ],
                      "toolCalls": [
                        {
                          "callId": "c1",
                          "toolName": "get_weather",
                          "input": {
                            "city": "NYC"
                          },
                          "output": {
                            "tempF": 70
                          },
                          "isError": false,
                          "durationMs": 12
                        },
                        {
                          "callId": "c2",
                          "toolName": "convert",
                          "input": {
                            "f": 70
                          },
                          "output": "21C",
                          "isError": true,
                          "durationMs": 3
                        }
                      ],
                      "reply": "It is 70F.",
                      "status": "completed",
                      "usage": {
                        "inputTokens": 10,
                        "outputTokens": 5,
                        "cacheReadTokens": 1,
                        "cacheWriteTokens": 0
                      },
                      "costUsd": null
                    },
                    {
                      "turnId": "turn_2",
                      "messages": [
                        "and Paris?"
                      ],
                      "toolCalls": [],
                      "reply": null,
                      "status": "failed",
                      "error": "turn interrupted",
                      "usage": {
                        "inputTokens": 0,
                        "outputTokens": 0,
                        "cacheReadTokens": 0,
                        "cacheWriteTokens": 0
                      },
                      "costUsd": 0.0
                    }
                  ],
                  "reply": null,
                  "toolCalls": [
                    {
                      "callId": "c1",
                      "toolName": "get_weather",
                      "input": {
                        "city": "NYC"
                      },
                      "output": {
                        "tempF": 70
                      },
                      "isError": false,
                      "durationMs": 12
                    },
                    {
                      "callId": "c2",
                      "toolName": "convert",
                      "input": {
                        "f": 70
                      },
                      "output": "21C",
                      "isError": true,
                      "durationMs": 3
                    }
                  ],
                  "usage": {
                    "inputTokens": 10,
                    "outputTokens": 5,
                    "cacheReadTokens": 1,
                    "cacheWriteTokens": 0
                  },
                  "costUsd": null
                }"#]],
        );
    }

    #[test]
    fn events_without_turn_ids_and_logs_cut_short() {
        let events = typed(&[
            ev(0, "message.received", None, json!({"text": "hi"})),
            ev(1, "turn.started", None, json!({})),
            ev(
                2,
                "message.appended",
                None,
                json!({"delta": "he", "text": "he"}),
            ),
            ev(3, "some.future.event", None, json!({})),
            ev(
                4,
                "message.completed",
                None,
                json!({"text": "hello", "finishReason": "stop"}),
            ),
            // A payload that does not fit its type is passed over.
            ev(5, "message.completed", None, json!({"text": 5})),
        ]);
        assert_eq!(events.len(), 5, "the unknown type is skipped");
        let t = from_events(&events);
        assert_eq!(t.session_id.as_deref(), Some("ses_1"));
        assert!(t.ok, "a running turn has not failed");
        assert_eq!(t.turns.len(), 1);
        assert_eq!(t.turns[0].messages, ["hi"]);
        assert_eq!(t.turns[0].status, TurnStatus::Running);
        assert_eq!(t.reply.as_deref(), Some("hello"));
        assert!(!t.any_turn_failed());
    }

    #[test]
    fn session_failed_is_not_ok() {
        let t = from_events(&typed(&[ev(0, "session.failed", None, json!({}))]));
        assert!(!t.ok);
        assert!(t.turns.is_empty());
    }
}
