//! Spans from events: a per-agent state machine that reads each event the
//! agent's store appends and answers the spans it completes, as OTLP
//! protobuf `Span`s, by the OpenTelemetry GenAI conventions
//! (`invoke_agent {agent}`, `chat {model}`, `execute_tool {tool}`, and
//! `await_approval {tool}` for a parked call's wait).
//!
//! Ids come from the log, never from this process: a turn's span id and
//! trace are in its `turn.started` (`trace`), and every child's id is
//! [`child_span_id`] of its parent, which is also what the harness put on
//! the outgoing provider request. So a turn parked before a restart and
//! resumed after it is one trace, and a step's `chat` span is the parent
//! of the provider's own server span.

use std::collections::HashMap;

use agentkit_protocol::trace::{TraceParent, TurnTrace, child_span_id};
use agentkit_protocol::{Event, EventData, EventType, Usage};
use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::{Span, Status, status};

/// The most turns (and parked calls) followed at once per agent; beyond
/// it new turns go untraced rather than growing memory.
const MAX_TURNS: usize = 10_000;
/// The most message texts kept for content capture, waiting for their turn.
const MAX_MESSAGES: usize = 4096;

/// Turn failure reasons that are interruptions, not errors.
const INTERRUPTS: &[&str] = &["preempted", "stopped", "shutdown", "restart"];

/// Who the spans are about.
#[derive(Debug, Clone)]
pub(crate) struct AgentInfo {
    pub(crate) name: String,
    pub(crate) provider: String,
    pub(crate) model: String,
}

#[derive(Debug)]
struct StepState {
    n: u32,
    start: u64,
    end: Option<u64>,
    finish: Option<String>,
    text: Option<String>,
}

#[derive(Debug)]
struct CallState {
    start: u64,
    arguments: Option<serde_json::Value>,
}

#[derive(Debug)]
struct TurnState {
    tp: TraceParent,
    parent: Option<String>,
    /// `None` for a turn known only from a copy of its trace (its
    /// `invoke_agent` span was sent by the process that ran it).
    start: Option<u64>,
    input: Vec<String>,
    step: Option<StepState>,
    calls: HashMap<String, CallState>,
    waits: HashMap<String, u64>,
    subagents: HashMap<String, (u64, String)>,
}

impl TurnState {
    fn new(trace: &TurnTrace, start: Option<u64>) -> Option<TurnState> {
        Some(TurnState {
            tp: trace.parsed()?,
            parent: trace.parent_span_id.clone(),
            start,
            input: Vec::new(),
            step: None,
            calls: HashMap::new(),
            waits: HashMap::new(),
            subagents: HashMap::new(),
        })
    }
}

/// The spans of one agent's events.
#[derive(Debug)]
pub(crate) struct SpanState {
    agent: AgentInfo,
    capture: bool,
    turns: HashMap<(String, String), TurnState>,
    messages: HashMap<(String, u64), String>,
}

impl SpanState {
    pub(crate) fn new(agent: AgentInfo, capture: bool) -> SpanState {
        SpanState {
            agent,
            capture,
            turns: HashMap::new(),
            messages: HashMap::new(),
        }
    }

    /// Reads one event; answers the spans it ends.
    pub(crate) fn apply(&mut self, e: &Event) -> Vec<Span> {
        // Deltas are most events and end no span: not parsed.
        if matches!(
            e.event_type,
            EventType::MessageAppended | EventType::ReasoningAppended
        ) {
            return Vec::new();
        }
        let session = e.session_id.as_str();
        let at = nanos(&e.at);
        let turn_key = e.turn_id.clone().map(|t| (session.to_owned(), t));
        let mut out = Vec::new();
        match e.payload() {
            EventData::MessageReceived(m) if self.capture && self.messages.len() < MAX_MESSAGES => {
                self.messages.insert((session.to_owned(), e.index), m.text);
            }
            EventData::TurnStarted(s) => {
                let Some(key) = turn_key else { return out };
                if let Some(resumed) = &s.resumes {
                    self.turns.remove(&(session.to_owned(), resumed.clone()));
                }
                let input: Vec<String> = s
                    .received
                    .iter()
                    .filter_map(|i| self.messages.remove(&(session.to_owned(), *i)))
                    .collect();
                if self.turns.len() >= MAX_TURNS {
                    return out;
                }
                if let Some(mut turn) = s.trace.as_ref().and_then(|t| TurnState::new(t, Some(at))) {
                    turn.input = input;
                    self.turns.insert(key, turn);
                }
            }
            EventData::StepStarted(s) => {
                if let Some(turn) = turn_key.and_then(|k| self.turns.get_mut(&k)) {
                    turn.step = Some(StepState {
                        n: s.step,
                        start: at,
                        end: None,
                        finish: None,
                        text: None,
                    });
                }
            }
            EventData::MessageCompleted(m) if m.parent_call_id.is_none() => {
                if let Some(step) = turn_key
                    .and_then(|k| self.turns.get_mut(&k))
                    .and_then(|t| t.step.as_mut())
                {
                    step.end = Some(at);
                    step.finish = Some(m.finish_reason);
                    step.text = Some(m.text);
                }
            }
            EventData::StepCompleted(s) => {
                if let Some(turn) = turn_key.and_then(|k| self.turns.get_mut(&k))
                    && let Some(step) = turn.step.take().filter(|st| st.n == s.step)
                {
                    out.push(chat_span(
                        &self.agent,
                        self.capture,
                        session,
                        turn,
                        step,
                        s.usage,
                        at,
                    ));
                }
            }
            EventData::ActionsRequested(a) => {
                if let Some(turn) = turn_key.and_then(|k| self.turns.get_mut(&k)) {
                    for call in a.calls {
                        turn.calls.insert(
                            call.call_id,
                            CallState {
                                start: at,
                                arguments: Some(call.input),
                            },
                        );
                    }
                }
            }
            EventData::ApprovalRequested(r) => {
                if let Some(turn) = turn_key.and_then(|k| self.turns.get_mut(&k)) {
                    turn.waits.insert(r.call_id, at);
                }
            }
            EventData::ApprovalResolved(r) => {
                let Some(key) = turn_key else { return out };
                // Decided after a restart: the turn is known from the copy.
                if !self.turns.contains_key(&key)
                    && self.turns.len() < MAX_TURNS
                    && let Some(turn) = r.trace.as_ref().and_then(|t| TurnState::new(t, None))
                {
                    self.turns.insert(key.clone(), turn);
                }
                let Some(turn) = self.turns.get_mut(&key) else {
                    return out;
                };
                let start = turn
                    .waits
                    .remove(&r.call_id)
                    .or_else(|| r.requested_at.as_deref().map(nanos));
                if let Some(start) = start {
                    let mut attrs = vec![
                        kv("gen_ai.tool.name", &r.tool_name),
                        kv("gen_ai.tool.call.id", &r.call_id),
                        kv("gen_ai.conversation.id", session),
                        kv("agentkit.approval.decision", &r.decision),
                        kv("agentkit.approval.by", &r.by),
                    ];
                    if let Some(reason) = &r.reason {
                        attrs.push(kv("agentkit.approval.reason", reason));
                    }
                    out.push(span(
                        &turn.tp.trace_id,
                        &child_span_id(&turn.tp.span_id, "approval", &r.call_id),
                        Some(&turn.tp.span_id),
                        format!("await_approval {}", r.tool_name),
                        (start, at),
                        attrs,
                        None,
                    ));
                }
                // The call runs from the decision on.
                let call = turn.calls.entry(r.call_id).or_insert(CallState {
                    start: at,
                    arguments: None,
                });
                call.start = at;
            }
            EventData::ActionResult(r) => {
                if let Some(turn) = turn_key.and_then(|k| self.turns.get_mut(&k)) {
                    let call = turn.calls.remove(&r.call_id);
                    let start = call
                        .as_ref()
                        .map(|c| c.start)
                        .unwrap_or_else(|| at.saturating_sub(r.duration_ms * 1_000_000));
                    let mut attrs = vec![
                        kv("gen_ai.operation.name", "execute_tool"),
                        kv("gen_ai.tool.name", &r.tool_name),
                        kv("gen_ai.tool.call.id", &r.call_id),
                        kv("gen_ai.tool.type", "function"),
                        kv("gen_ai.conversation.id", session),
                    ];
                    if self.capture {
                        if let Some(args) = call.and_then(|c| c.arguments) {
                            attrs.push(kv("gen_ai.tool.call.arguments", &args.to_string()));
                        }
                        attrs.push(kv("gen_ai.tool.call.result", &r.output.to_string()));
                    }
                    let error = r.is_error.then(|| {
                        attrs.push(kv("error.type", "tool_error"));
                        "the tool reported an error".to_owned()
                    });
                    out.push(span(
                        &turn.tp.trace_id,
                        &child_span_id(&turn.tp.span_id, "tool", &r.call_id),
                        Some(&turn.tp.span_id),
                        format!("execute_tool {}", r.tool_name),
                        (start, at),
                        attrs,
                        error,
                    ));
                }
            }
            EventData::SubagentCalled(s) => {
                if let Some(turn) = turn_key.and_then(|k| self.turns.get_mut(&k)) {
                    turn.subagents.insert(s.call_id, (at, s.prompt));
                }
            }
            EventData::SubagentStep(s) => {
                if let Some(turn) = turn_key.and_then(|k| self.turns.get(&k)) {
                    // Under the subagent's `invoke_agent` span, with the id
                    // the harness put on the step's provider request.
                    let tool_span = child_span_id(&turn.tp.span_id, "tool", &s.call_id);
                    let invoke = child_span_id(&tool_span, "invoke_agent", &s.call_id);
                    let mut attrs = vec![
                        kv("gen_ai.operation.name", "chat"),
                        kv("gen_ai.provider.name", &s.provider),
                        kv("gen_ai.request.model", &s.model),
                        kv("gen_ai.response.model", &s.model),
                        kv("gen_ai.agent.name", &s.subagent),
                        kv("gen_ai.conversation.id", session),
                    ];
                    if let Some(usage) = &s.usage {
                        usage_attrs(&mut attrs, usage);
                    }
                    attrs.push(kv_strings(
                        "gen_ai.response.finish_reasons",
                        std::slice::from_ref(&s.finish_reason),
                    ));
                    out.push(span_of_kind(
                        &turn.tp.trace_id,
                        &child_span_id(&invoke, "chat", &s.step.to_string()),
                        Some(&invoke),
                        format!("chat {}", s.model),
                        SpanKind::Client,
                        (at.saturating_sub(s.duration_ms * 1_000_000), at),
                        attrs,
                        None,
                    ));
                }
            }
            EventData::SubagentCompleted(s) => {
                if let Some(turn) = turn_key.and_then(|k| self.turns.get_mut(&k))
                    && let Some((start, prompt)) = turn.subagents.remove(&s.call_id)
                {
                    let tool_span = child_span_id(&turn.tp.span_id, "tool", &s.call_id);
                    let mut attrs = vec![
                        kv("gen_ai.operation.name", "invoke_agent"),
                        kv("gen_ai.agent.name", &s.subagent),
                        kv("gen_ai.conversation.id", session),
                        kv("gen_ai.tool.call.id", &s.call_id),
                    ];
                    usage_attrs(&mut attrs, &s.usage);
                    if self.capture {
                        attrs.push(kv("gen_ai.input.messages", &user_messages(&[prompt])));
                        attrs.push(kv(
                            "gen_ai.output.messages",
                            &assistant_message(&s.result, "stop"),
                        ));
                    }
                    let error = s.is_error.then(|| {
                        attrs.push(kv("error.type", "subagent_error"));
                        s.result.clone()
                    });
                    out.push(span(
                        &turn.tp.trace_id,
                        &child_span_id(&tool_span, "invoke_agent", &s.call_id),
                        Some(&tool_span),
                        format!("invoke_agent {}", s.subagent),
                        (start, at),
                        attrs,
                        error,
                    ));
                }
            }
            EventData::TurnCompleted(c) => {
                if let Some(mut turn) = turn_key.and_then(|k| self.turns.remove(&k)) {
                    out.extend(self.unfinished_step(session, &mut turn, at));
                    out.extend(self.turn_span(session, turn, at, Some(&c.usage), Ok(&c.result)));
                }
            }
            EventData::TurnFailed(f) => {
                let Some(key) = turn_key else { return out };
                let turn = self.turns.remove(&key).or_else(|| {
                    // Recorded by recovery: known only from the copy.
                    let trace = f.trace.as_ref()?;
                    let start = trace.turn_started_at.as_deref().map(nanos);
                    TurnState::new(trace, start)
                });
                if let Some(mut turn) = turn {
                    out.extend(self.unfinished_step(session, &mut turn, at));
                    let reason = f.reason.as_deref();
                    out.extend(self.turn_span(
                        session,
                        turn,
                        at,
                        f.usage.as_ref(),
                        Err((reason, &f.message)),
                    ));
                }
            }
            _ => {}
        }
        out
    }
}

#[allow(clippy::too_many_arguments)]
fn chat_span(
    agent: &AgentInfo,
    capture: bool,
    session: &str,
    turn: &TurnState,
    step: StepState,
    usage: Option<Usage>,
    at: u64,
) -> Span {
    let model = &agent.model;
    let mut attrs = vec![
        kv("gen_ai.operation.name", "chat"),
        kv("gen_ai.provider.name", &agent.provider),
        kv("gen_ai.request.model", model),
        kv("gen_ai.response.model", model),
        kv("gen_ai.conversation.id", session),
    ];
    if let Some(usage) = &usage {
        usage_attrs(&mut attrs, usage);
    }
    let finish = step.finish.clone().unwrap_or_else(|| "stop".to_owned());
    attrs.push(kv_strings(
        "gen_ai.response.finish_reasons",
        std::slice::from_ref(&finish),
    ));
    if capture && let Some(text) = &step.text {
        attrs.push(kv(
            "gen_ai.output.messages",
            &assistant_message(text, &finish),
        ));
    }
    if capture && step.n == 1 && !turn.input.is_empty() {
        attrs.push(kv("gen_ai.input.messages", &user_messages(&turn.input)));
    }
    // A model call leaves the process: the GenAI conventions make
    // inference spans `CLIENT` (agent and tool spans stay `INTERNAL`).
    span_of_kind(
        &turn.tp.trace_id,
        &child_span_id(&turn.tp.span_id, "chat", &step.n.to_string()),
        Some(&turn.tp.span_id),
        format!("chat {model}"),
        SpanKind::Client,
        (step.start, step.end.unwrap_or(at)),
        attrs,
        None,
    )
}

impl SpanState {
    /// The `chat` span of a step whose reply arrived but which did not
    /// complete (its calls parked, then the turn ended): without usage.
    fn unfinished_step(&self, session: &str, turn: &mut TurnState, at: u64) -> Option<Span> {
        let step = turn.step.take().filter(|s| s.end.is_some())?;
        Some(chat_span(
            &self.agent,
            self.capture,
            session,
            turn,
            step,
            None,
            at,
        ))
    }

    /// The turn's `invoke_agent` span, unless another process sent it.
    fn turn_span(
        &self,
        session: &str,
        turn: TurnState,
        at: u64,
        usage: Option<&Usage>,
        result: Result<&str, (Option<&str>, &str)>,
    ) -> Option<Span> {
        let start = turn.start?;
        let mut attrs = vec![
            kv("gen_ai.operation.name", "invoke_agent"),
            kv("gen_ai.agent.name", &self.agent.name),
            kv("gen_ai.provider.name", &self.agent.provider),
            kv("gen_ai.request.model", &self.agent.model),
            kv("gen_ai.conversation.id", session),
        ];
        if let Some(usage) = usage {
            usage_attrs(&mut attrs, usage);
        }
        if self.capture && !turn.input.is_empty() {
            attrs.push(kv("gen_ai.input.messages", &user_messages(&turn.input)));
        }
        let error = match result {
            Ok(text) => {
                if self.capture {
                    attrs.push(kv(
                        "gen_ai.output.messages",
                        &assistant_message(text, "stop"),
                    ));
                }
                None
            }
            Err((Some(reason), _)) if INTERRUPTS.contains(&reason) => {
                attrs.push(kv("agentkit.turn.interrupted", reason));
                None
            }
            Err((reason, message)) => {
                attrs.push(kv("error.type", reason.unwrap_or("turn_failed")));
                Some(message.to_owned())
            }
        };
        Some(span(
            &turn.tp.trace_id,
            &turn.tp.span_id,
            turn.parent.as_deref(),
            format!("invoke_agent {}", self.agent.name),
            (start, at),
            attrs,
            error,
        ))
    }
}

/// A finished span.
pub(crate) fn span(
    trace_id: &str,
    span_id: &str,
    parent: Option<&str>,
    name: String,
    (start, end): (u64, u64),
    attributes: Vec<KeyValue>,
    error: Option<String>,
) -> Span {
    span_of_kind(
        trace_id,
        span_id,
        parent,
        name,
        SpanKind::Internal,
        (start, end),
        attributes,
        error,
    )
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn span_of_kind(
    trace_id: &str,
    span_id: &str,
    parent: Option<&str>,
    name: String,
    kind: SpanKind,
    (start, end): (u64, u64),
    attributes: Vec<KeyValue>,
    error: Option<String>,
) -> Span {
    Span {
        trace_id: hex_bytes(trace_id),
        span_id: hex_bytes(span_id),
        parent_span_id: parent.map(hex_bytes).unwrap_or_default(),
        name,
        kind: kind as i32,
        start_time_unix_nano: start,
        end_time_unix_nano: end.max(start),
        attributes,
        status: error.map(|message| Status {
            message,
            code: status::StatusCode::Error as i32,
        }),
        ..Default::default()
    }
}

fn usage_attrs(attrs: &mut Vec<KeyValue>, usage: &Usage) {
    attrs.push(kv_int("gen_ai.usage.input_tokens", usage.input_tokens));
    attrs.push(kv_int("gen_ai.usage.output_tokens", usage.output_tokens));
    attrs.push(kv_int(
        "gen_ai.usage.cache_read.input_tokens",
        usage.cache_read_tokens,
    ));
    attrs.push(kv_int(
        "gen_ai.usage.cache_creation.input_tokens",
        usage.cache_write_tokens,
    ));
}

/// `gen_ai.input.messages` for user text, in the conventions' JSON shape.
fn user_messages(texts: &[String]) -> String {
    let messages: Vec<_> = texts
        .iter()
        .map(|t| serde_json::json!({"role": "user", "parts": [{"type": "text", "content": t}]}))
        .collect();
    serde_json::Value::Array(messages).to_string()
}

/// `gen_ai.output.messages` for one assistant reply.
fn assistant_message(text: &str, finish: &str) -> String {
    serde_json::json!([{"role": "assistant", "parts": [{"type": "text", "content": text}], "finish_reason": finish}])
        .to_string()
}

pub(crate) fn kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key_strindex: 0,
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.to_owned())),
        }),
    }
}

pub(crate) fn kv_int(key: &str, value: u64) -> KeyValue {
    KeyValue {
        key_strindex: 0,
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::IntValue(
                i64::try_from(value).unwrap_or(i64::MAX),
            )),
        }),
    }
}

fn kv_strings(key: &str, values: &[String]) -> KeyValue {
    KeyValue {
        key_strindex: 0,
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::ArrayValue(ArrayValue {
                values: values
                    .iter()
                    .map(|v| AnyValue {
                        value: Some(any_value::Value::StringValue(v.clone())),
                    })
                    .collect(),
            })),
        }),
    }
}

/// An event's `at` (RFC 3339) as Unix nanoseconds; 0 if unreadable.
pub(crate) fn nanos(at: &str) -> u64 {
    chrono::DateTime::parse_from_rfc3339(at)
        .ok()
        .and_then(|t| t.timestamp_nanos_opt())
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(0)
}

/// Now, as Unix nanoseconds.
pub(crate) fn now_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn hex_bytes(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .filter_map(|i| u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok())
        .collect()
}
