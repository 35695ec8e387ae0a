//! `POST /v1/ag-ui`: the AG-UI 1.0 protocol over a session, for agent
//! front-ends (CopilotKit and `@ag-ui/client`'s `HttpAgent`). A thread is
//! one session on the `ag-ui` channel per principal (keyed by
//! `<principal>:<threadId>`), a run one turn; a call parked for approval
//! ends the run with an `interrupt` outcome, and the next run's `resume`
//! decides it. The run's front-end `tools` are the turn's client tools: a
//! call of one ends the run (`RUN_FINISHED`), and the next run's `tool`
//! messages are its results, which resume the turn. The turn's events are
//! read by the OpenAI front's fold and written as AG-UI events over
//! server-sent events.

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::Arc;

use agentkit_protocol::agui::{
    AguiEvent, Interrupt, Outcome, PROTOCOL_VERSION, RunAgentInput, TokenUsage,
};
use agentkit_protocol::{Admission, ClientTool, ErrorCode, SessionMode};
use agentkit_runtime::{Owner, SendRequest};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::routing::post;
use serde_json::{Value, json};

use super::agent::AgentState;
use super::edge::TurnGate;
use super::http::{ApiError, ApiResult, Authed, parse_json};
use super::openai::fold::{Anchor, End, Follower, Parked, Piece};
use super::openai::{Said, compose, content_text, role, sse};

/// The channel AG-UI threads live on.
pub(crate) const AGUI_CHANNEL: &str = "ag-ui";

pub(crate) fn routes() -> Router<AgentState> {
    Router::new().route("/v1/ag-ui", post(run))
}

async fn run(
    State(state): State<AgentState>,
    gate: Option<axum::Extension<Arc<TurnGate>>>,
    Authed { owner, body, .. }: Authed,
) -> ApiResult {
    let input: RunAgentInput = parse_json(&body)?;
    if input.thread_id.is_empty() || input.run_id.is_empty() {
        return Err(ApiError::bad_request("`threadId` and `runId` are required"));
    }
    let runtime = &state.agent.runtime;
    // One thread per principal: another principal's thread of the same
    // name is another session.
    let key = super::openai::principal_key(&owner, &input.thread_id);
    let existing = runtime.session_for(AGUI_CHANNEL, &key).await;
    if let Some(id) = &existing {
        runtime.session(id, &owner).await?;
    }
    // The calls of front-end tools the thread's turn waits on, and the
    // results this run brings for them.
    let awaiting: Vec<String> = match existing.as_deref() {
        Some(id) => runtime
            .approvals()
            .awaiting_client(id, &owner)
            .await?
            .into_iter()
            .map(|c| c.call_id)
            .collect(),
        None => Vec::new(),
    };
    let (results, text_after) = tool_results(&input.messages, &awaiting)?;
    let mut answered = HashSet::new();
    let answering = existing.clone().filter(|_| !results.is_empty());
    let anchor = if let Some(session) = answering {
        if text_after {
            return Err(ApiError::bad_request(
                "a run that answers front-end tool calls takes no new user message: send the `tool` messages first, then the message in the next run",
            ));
        }
        let missing: Vec<&str> = awaiting
            .iter()
            .filter(|a| !results.iter().any(|(call, _)| call == *a))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(ApiError::bad_request(format!(
                "the run answers some of the thread's front-end tool calls but not {}: send a `tool` message for each",
                missing.join(", ")
            )));
        }
        let next = runtime.events_stored(&session, &owner, 0).await?.len() as u64;
        answered.extend(
            runtime
                .approvals()
                .answer_client(&session, &owner, results)
                .await?
                .answered,
        );
        Anchor {
            session,
            index: next,
        }
    } else if !awaiting.is_empty() && input.resume.is_empty() {
        return Err(ApiError::new(
            axum::http::StatusCode::CONFLICT,
            ErrorCode::SessionBusy,
            format!(
                "thread `{}` waits for the results of front-end tool calls ({}): send each as a `tool` message with its `toolCallId`",
                input.thread_id,
                awaiting.join(", ")
            ),
        ));
    } else if input.resume.is_empty() {
        let mut history = Vec::new();
        for m in &input.messages {
            let who = m.get("role").and_then(Value::as_str).unwrap_or("");
            // The thread's tool results and reasoning are the agent's own
            // output echoed back: the session has them.
            if matches!(who, "tool" | "reasoning" | "activity") {
                continue;
            }
            let text = content_text(m.get("content").unwrap_or(&Value::Null), "messages")?;
            if let Some(role) = role(who, "messages", !text.trim().is_empty())? {
                history.push(Said { role, text });
            }
        }
        let message = with_context(
            compose(&history, existing.is_some(), "messages")?,
            &input.context,
        );
        let client_tools = input
            .tools
            .iter()
            .map(|t| ClientTool {
                name: t.name.clone(),
                description: t.description.clone(),
                parameters: t
                    .parameters
                    .clone()
                    .unwrap_or_else(|| json!({"type": "object"})),
            })
            .collect();
        let slot = gate
            .as_deref()
            .map(|g| g.admit(&state.agent.slug, &owner))
            .transpose()?;
        let accepted = runtime
            .send(SendRequest {
                channel: AGUI_CHANNEL.to_owned(),
                mode: SessionMode::Chat,
                owner: owner.clone(),
                message,
                continuation: Some(key),
                title: None,
                purpose: None,
                admission: Admission::default(),
                workspace_files: Vec::new(),
                dry_run: false,
                as_of: None,
                output_schema: None,
                client_tools,
            })
            .await?;
        if let Some(slot) = slot {
            slot.admitted(runtime, &accepted.session_id);
        }
        Anchor {
            session: accepted.session_id,
            index: accepted.start_index,
        }
    } else {
        let Some(session) = existing else {
            return Err(ApiError::bad_request(format!(
                "thread `{}` has no run to resume",
                input.thread_id
            )));
        };
        let next = runtime.events_stored(&session, &owner, 0).await?.len() as u64;
        resume(&state, &owner, &session, &input).await?;
        Anchor {
            session,
            index: next,
        }
    };
    let follower = Follower::start(runtime, &owner, &anchor, state.shutdown.clone())
        .await
        .map_err(ApiError::from)?;
    let render = Render {
        thread_id: input.thread_id,
        run_id: input.run_id,
        message_prefix: format!("msg_{}.{}", anchor.session, anchor.index),
        messages: 0,
        open_message: None,
        steps: HashSet::new(),
        calls: HashSet::new(),
        answered,
    };
    Ok(sse(Body::from_stream(stream(follower, render))))
}

/// The results `messages` brings for the calls in `awaiting`: its `tool`
/// messages (after the last assistant message) whose `toolCallId` names
/// one; an `error` makes the result an error. Also whether user text
/// follows them.
fn tool_results(
    messages: &[Value],
    awaiting: &[String],
) -> ApiResult<(Vec<(String, agentkit_harness::ToolOutput)>, bool)> {
    let tail_from = messages
        .iter()
        .rposition(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
        .map_or(0, |i| i + 1);
    let mut results = Vec::new();
    let mut text_after = false;
    for m in &messages[tail_from..] {
        match m.get("role").and_then(Value::as_str) {
            Some("tool") => {
                let Some(call) = m.get("toolCallId").and_then(Value::as_str) else {
                    continue;
                };
                if !awaiting.iter().any(|a| a == call) {
                    continue;
                }
                let text = content_text(m.get("content").unwrap_or(&Value::Null), "messages")?;
                let output = match m.get("error").and_then(Value::as_str) {
                    Some(error) => agentkit_harness::ToolOutput::error(error),
                    None => agentkit_harness::ToolOutput {
                        output: Value::String(text),
                        is_error: false,
                    },
                };
                results.push((call.to_owned(), output));
            }
            Some("user") => {
                let text = content_text(m.get("content").unwrap_or(&Value::Null), "messages")?;
                text_after |= !results.is_empty() && !text.trim().is_empty();
            }
            _ => {}
        }
    }
    Ok((results, text_after))
}

/// The run's user message with its `context` items before it: the model
/// reads them as part of what the user sent.
fn with_context(message: String, context: &[agentkit_protocol::agui::Context]) -> String {
    if context.is_empty() {
        return message;
    }
    let mut text = String::from("Context from the application:\n");
    for item in context {
        text.push_str(&format!(
            "- {}: {}\n",
            item.description.trim(),
            item.value.trim()
        ));
    }
    text.push('\n');
    text.push_str(&message);
    text
}

/// Decides the parked calls the resume entries answer.
async fn resume(
    state: &AgentState,
    owner: &Owner,
    session: &str,
    input: &RunAgentInput,
) -> ApiResult<()> {
    for entry in &input.resume {
        let payload = entry.payload.as_ref();
        let approved = entry.status == "resolved"
            && payload
                .and_then(|p| p.get("approved"))
                .and_then(Value::as_bool)
                != Some(false);
        let reason = payload
            .and_then(|p| p.get("reason"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| (entry.status == "cancelled").then(|| "cancelled".to_owned()));
        let decision = agentkit_runtime::Decision {
            approved,
            reason,
            by: owner.principal_id.clone(),
        };
        state
            .agent
            .runtime
            .approvals()
            .resolve(session, &entry.interrupt_id, decision, owner)
            .await?;
    }
    Ok(())
}

/// Writes the turn's pieces as AG-UI events.
#[derive(Debug)]
struct Render {
    thread_id: String,
    run_id: String,
    message_prefix: String,
    messages: usize,
    open_message: Option<String>,
    /// Steps started in this run and not yet finished.
    steps: HashSet<u32>,
    /// Calls started in this run.
    calls: HashSet<String>,
    /// Calls of front-end tools this run brought the results of: the
    /// client has them, so no `TOOL_CALL_RESULT` repeats them.
    answered: HashSet<String>,
}

impl Render {
    fn started(&self) -> AguiEvent {
        AguiEvent::RunStarted {
            thread_id: self.thread_id.clone(),
            run_id: self.run_id.clone(),
            protocol_version: PROTOCOL_VERSION.to_owned(),
        }
    }

    /// Closes the steps still open: a run ends with none.
    fn close_steps(&mut self, out: &mut Vec<AguiEvent>) {
        let mut open: Vec<u32> = self.steps.drain().collect();
        open.sort_unstable();
        for step in open {
            out.push(AguiEvent::StepFinished {
                step_name: step_name(step),
            });
        }
    }

    fn feed(&mut self, piece: Piece) -> Vec<AguiEvent> {
        let mut out = Vec::new();
        match piece {
            Piece::Step { step, started } => {
                if started {
                    self.steps.insert(step);
                    out.push(AguiEvent::StepStarted {
                        step_name: step_name(step),
                    });
                } else if self.steps.remove(&step) {
                    out.push(AguiEvent::StepFinished {
                        step_name: step_name(step),
                    });
                }
            }
            Piece::TextStarted => {
                self.messages += 1;
                let id = format!("{}.{}", self.message_prefix, self.messages);
                self.open_message = Some(id.clone());
                out.push(AguiEvent::TextMessageStart {
                    message_id: id,
                    role: "assistant".to_owned(),
                });
            }
            Piece::Text(delta) => {
                if let Some(id) = &self.open_message {
                    out.push(AguiEvent::TextMessageContent {
                        message_id: id.clone(),
                        delta,
                    });
                }
            }
            Piece::TextDone(_) => {
                if let Some(id) = self.open_message.take() {
                    out.push(AguiEvent::TextMessageEnd { message_id: id });
                }
            }
            Piece::Calls(calls) => {
                for call in calls {
                    self.calls.insert(call.call_id.clone());
                    out.push(AguiEvent::ToolCallStart {
                        tool_call_id: call.call_id.clone(),
                        tool_call_name: call.tool_name.clone(),
                    });
                    out.push(AguiEvent::ToolCallArgs {
                        tool_call_id: call.call_id.clone(),
                        delta: call.input.to_string(),
                    });
                    out.push(AguiEvent::ToolCallEnd {
                        tool_call_id: call.call_id,
                    });
                }
            }
            Piece::CallDone { call_id, .. } if self.answered.contains(&call_id) => {}
            Piece::CallDone {
                call_id, output, ..
            } => {
                let content = match output {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                out.push(AguiEvent::ToolCallResult {
                    message_id: format!("res_{call_id}"),
                    tool_call_id: call_id,
                    content,
                    role: "tool".to_owned(),
                });
            }
            Piece::Parked(_) => {}
            // Calls of front-end tools (already streamed as
            // `TOOL_CALL_*`): the run ends, the client runs them and
            // answers on the next run.
            Piece::AwaitingClient(_, usage) => {
                self.close_steps(&mut out);
                out.push(AguiEvent::RunFinished {
                    thread_id: self.thread_id.clone(),
                    run_id: self.run_id.clone(),
                    result: None,
                    outcome: Outcome::Success,
                    usage: vec![TokenUsage::from(usage)],
                });
            }
            Piece::Waiting(parked, usage) => {
                self.close_steps(&mut out);
                let interrupts = parked
                    .into_iter()
                    .map(|Parked { call_id, tool_name, input }| Interrupt {
                        message: format!("the agent's call of `{tool_name}` with {input} waits for a human's approval"),
                        id: call_id.clone(),
                        reason: "tool_approval".to_owned(),
                        tool_call_id: call_id,
                        response_schema: json!({
                            "type": "object",
                            "properties": {
                                "approved": {"type": "boolean"},
                                "reason": {"type": "string"},
                            },
                            "required": ["approved"],
                        }),
                    })
                    .collect();
                out.push(AguiEvent::RunFinished {
                    thread_id: self.thread_id.clone(),
                    run_id: self.run_id.clone(),
                    result: None,
                    outcome: Outcome::Interrupt { interrupts },
                    usage: vec![TokenUsage::from(usage)],
                });
            }
            Piece::Ended(End {
                ok,
                text,
                reason,
                usage,
            }) => {
                self.close_steps(&mut out);
                out.push(if ok {
                    AguiEvent::RunFinished {
                        thread_id: self.thread_id.clone(),
                        run_id: self.run_id.clone(),
                        result: Some(Value::String(text)),
                        outcome: Outcome::Success,
                        usage: vec![TokenUsage::from(usage)],
                    }
                } else {
                    AguiEvent::RunError {
                        message: text,
                        code: Some(reason.unwrap_or_else(|| "turn_failed".to_owned())),
                    }
                });
            }
        }
        out
    }
}

fn step_name(step: u32) -> String {
    format!("step {step}")
}

fn frames(events: &[AguiEvent]) -> Bytes {
    let mut body = Vec::new();
    for e in events {
        body.extend_from_slice(b"data: ");
        body.extend_from_slice(&serde_json::to_vec(e).unwrap_or_default());
        body.extend_from_slice(b"\n\n");
    }
    Bytes::from(body)
}

/// `RUN_STARTED`, the turn's events, then `RUN_FINISHED` or `RUN_ERROR`.
fn stream(
    follower: Follower,
    render: Render,
) -> impl futures_util::Stream<Item = Result<Bytes, Infallible>> + Send {
    futures_util::stream::unfold(
        (follower, render, false),
        |(mut follower, mut render, mut opened)| async move {
            loop {
                let pieces = follower.next().await?;
                let mut events = Vec::new();
                if !opened && follower.fold.found() {
                    events.push(render.started());
                    opened = true;
                }
                for piece in pieces {
                    events.extend(render.feed(piece));
                }
                if !events.is_empty() {
                    return Some((Ok(frames(&events)), (follower, render, opened)));
                }
            }
        },
    )
}
