//! `POST /v1/responses` and `GET /v1/responses/:id`: the OpenAI Responses
//! API over a session. A response is one turn: its message starts it (a
//! new session, or with `previous_response_id` a follow-up of that
//! response's session), or an `mcp_approval_response` decision resumes
//! the turn the previous response left waiting. The request's `function`
//! tools are the turn's client tools: a call of one ends the response
//! (its `function_call` item), and `function_call_output` items with
//! `previous_response_id` answer it and resume the turn. Streamed, the
//! turn's events become Responses events as they happen; otherwise the
//! request waits for the turn and answers the whole response object.

use std::convert::Infallible;
use std::sync::Arc;

use agentkit_protocol::openai::{
    CreateResponse, OutputContent, OutputItem, Response as ResponseObject, ResponseError,
    ResponseEvent, ResponseInput, ResponseStreamEvent,
};
use agentkit_protocol::{Admission, ClientTool, EventType};
use agentkit_runtime::{FollowUp, Owner, SendRequest, SessionMode};
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::fold::{Anchor, End, Follower, Parked, Piece, replay};
use super::{
    OPENAI_CHANNEL, OaiError, OaiResult, Role, Said, check_model, compose, content_text,
    parse_body, role, sse, unix_time, with_session,
};
use crate::serve::agent::AgentState;
use crate::serve::edge::TurnGate;
use crate::serve::http::{ApiError, Authed};

/// The prefix of an approval request's item id (then the call id).
const APPROVAL_ITEM: &str = "mcpr_";

/// What a request's `input` asks for.
#[derive(Debug)]
enum Input {
    /// Messages to send.
    Messages(Vec<Said>),
    /// Decisions on parked calls: `(callId, approve, reason)`.
    Decisions(Vec<(String, bool, Option<String>)>),
    /// The client's outputs of calls of its function tools.
    Outputs(Vec<(String, agentkit_harness::ToolOutput)>),
}

/// The request's `function` tools, as the turn's client tools; other
/// kinds of tools are refused.
fn client_tools(tools: &[Value]) -> OaiResult<Vec<ClientTool>> {
    let mut out = Vec::new();
    for tool in tools {
        let kind = tool.get("type").and_then(Value::as_str).unwrap_or("?");
        let name = tool.get("name").and_then(Value::as_str);
        let (true, Some(name)) = (kind == "function", name) else {
            return Err(OaiError {
                code: "unsupported_tools".to_owned(),
                ..OaiError::invalid(
                    "tools",
                    format!(
                        "`{kind}` tools are not supported: declare `function` tools (with a `name`), which the client runs; the agent's own tools run on the server"
                    ),
                )
            });
        };
        out.push(ClientTool {
            name: name.to_owned(),
            description: tool
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            parameters: tool
                .get("parameters")
                .filter(|p| !p.is_null())
                .cloned()
                .unwrap_or_else(|| serde_json::json!({"type": "object"})),
        });
    }
    Ok(out)
}

fn read_input(input: Option<ResponseInput>) -> OaiResult<Input> {
    let items = match input {
        None => return Err(OaiError::invalid("input", "`input` is required")),
        Some(ResponseInput::Text(text)) => {
            return Ok(Input::Messages(vec![Said {
                role: Role::User,
                text,
            }]));
        }
        Some(ResponseInput::Items(items)) => items,
    };
    let mut messages = Vec::new();
    let mut decisions = Vec::new();
    let mut outputs = Vec::new();
    for item in &items {
        let kind = item
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message");
        match kind {
            "message" => {
                let content = item.get("content").unwrap_or(&Value::Null);
                let text = content_text(content, "input")?;
                let who = item.get("role").and_then(Value::as_str).unwrap_or("");
                if let Some(role) = role(who, "input", !text.trim().is_empty())? {
                    messages.push(Said { role, text });
                }
            }
            "mcp_approval_response" => {
                let id = item
                    .get("approval_request_id")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let Some(call) = id.strip_prefix(APPROVAL_ITEM) else {
                    return Err(OaiError::invalid(
                        "input",
                        format!(
                            "`approval_request_id` `{id}` names no approval request of this agent (they start with `{APPROVAL_ITEM}`)"
                        ),
                    ));
                };
                let approve = item
                    .get("approve")
                    .and_then(Value::as_bool)
                    .ok_or_else(|| {
                        OaiError::invalid(
                            "input",
                            "an `mcp_approval_response` needs `approve` (true or false)",
                        )
                    })?;
                let reason = item
                    .get("reason")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                decisions.push((call.to_owned(), approve, reason));
            }
            "function_call_output" => {
                let call = item.get("call_id").and_then(Value::as_str).ok_or_else(|| {
                    OaiError::invalid("input", "a `function_call_output` needs its `call_id`")
                })?;
                let output = match item.get("output") {
                    Some(Value::String(s)) => Value::String(s.clone()),
                    Some(other) => Value::String(content_text(other, "input")?),
                    None => Value::String(String::new()),
                };
                outputs.push((
                    call.to_owned(),
                    agentkit_harness::ToolOutput {
                        output,
                        is_error: false,
                    },
                ));
            }
            // The response's own call, echoed back beside its output.
            "function_call" => {}
            other => {
                return Err(OaiError::invalid(
                    "input",
                    format!(
                        "input items of type `{other}` are not supported (messages and `mcp_approval_response` are)"
                    ),
                ));
            }
        }
    }
    if !outputs.is_empty() {
        if !messages.is_empty() || !decisions.is_empty() {
            return Err(OaiError::invalid(
                "input",
                "send `function_call_output` items alone: messages and decisions go in separate requests",
            ));
        }
        return Ok(Input::Outputs(outputs));
    }
    match (messages.is_empty(), decisions.is_empty()) {
        (false, true) => Ok(Input::Messages(messages)),
        (true, false) => Ok(Input::Decisions(decisions)),
        (true, true) => Err(OaiError::invalid("input", "`input` holds no message")),
        (false, false) => Err(OaiError::invalid(
            "input",
            "send approval decisions (`mcp_approval_response`) and new messages in separate requests",
        )),
    }
}

/// `POST /v1/responses`.
pub(super) async fn create(
    State(state): State<AgentState>,
    gate: Option<axum::Extension<Arc<TurnGate>>>,
    authed: Result<Authed, ApiError>,
) -> Result<Response, OaiError> {
    let Authed { owner, body, .. } = authed?;
    let req: CreateResponse = parse_body(&body)?;
    let agent = &state.agent;
    check_model(req.model.as_deref(), &agent.slug)?;
    if req
        .instructions
        .as_deref()
        .is_some_and(|i| !i.trim().is_empty())
    {
        return Err(OaiError::invalid(
            "instructions",
            "`instructions` is not supported: the agent's instructions are its own (instructions.md)",
        ));
    }
    let tools = client_tools(&req.tools)?;
    match &req.tool_choice {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s == "auto" => {}
        Some(other) => {
            return Err(OaiError::invalid(
                "tool_choice",
                format!(
                    "`tool_choice` {other} is not supported: the agent decides its own calls (`auto`)"
                ),
            ));
        }
    }
    let input = read_input(req.input)?;
    let previous = req.previous_response_id.as_deref();
    let anchor = match previous {
        None => {
            let Input::Messages(history) = input else {
                return Err(OaiError::invalid(
                    "input",
                    "an `mcp_approval_response` or a `function_call_output` answers a previous response: give `previous_response_id`",
                ));
            };
            let message = compose(&history, false, "input")?;
            start(&state, gate.as_deref(), &owner, message, tools).await?
        }
        Some(id) => {
            let (prev, next) = latest_of(&state, &owner, id).await?;
            match input {
                Input::Messages(history) => {
                    let message = compose(&history, true, "input")?;
                    follow_up(
                        &state,
                        gate.as_deref(),
                        &owner,
                        &prev.session,
                        message,
                        tools,
                    )
                    .await?
                }
                Input::Outputs(outputs) => {
                    answer(&state, &owner, &prev.session, outputs).await?;
                    Anchor {
                        session: prev.session,
                        index: next,
                    }
                }
                Input::Decisions(decisions) => {
                    decide(&state, &owner, &prev.session, decisions).await?;
                    Anchor {
                        session: prev.session,
                        index: next,
                    }
                }
            }
        }
    };
    let previous = previous.map(str::to_owned);
    let follower = Follower::start(&agent.runtime, &owner, &anchor, state.shutdown.clone()).await?;
    let render = Render::new(&anchor, &agent.slug, previous);
    if req.stream {
        let resp = sse(Body::from_stream(stream(follower, render)));
        return Ok(with_session(resp, &anchor.session));
    }
    let object = wait(follower, render).await;
    Ok(with_session(
        axum::Json(object).into_response(),
        &anchor.session,
    ))
}

/// `GET /v1/responses/:id`: the response as the log holds it now.
pub(super) async fn retrieve(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    authed: Result<Authed, ApiError>,
) -> Result<Response, OaiError> {
    let Authed { owner, .. } = authed?;
    let anchor = response_anchor(&state, &owner, &id).await?;
    let (fold, pieces) = replay(&state.agent.runtime, &owner, &anchor).await?;
    if !fold.found() {
        return Err(no_response(&id));
    }
    let previous = fold.previous.map(|index| {
        Anchor {
            session: anchor.session.clone(),
            index,
        }
        .response_id()
    });
    let mut render = Render::new(&anchor, &state.agent.slug, previous);
    render.response.created_at = unix_time(fold.started_at.as_deref());
    for piece in pieces {
        render.feed(piece);
    }
    Ok(with_session(
        axum::Json(render.response).into_response(),
        &anchor.session,
    ))
}

fn no_response(id: &str) -> OaiError {
    OaiError::not_found("not_found", "response_id", format!("no response `{id}`"))
}

/// The anchor of response `id`, in a session of this front that `owner`
/// may see.
async fn response_anchor(state: &AgentState, owner: &Owner, id: &str) -> OaiResult<Anchor> {
    let anchor = Anchor::of_response(id).ok_or_else(|| no_response(id))?;
    let meta = state
        .agent
        .runtime
        .session(&anchor.session, owner)
        .await
        .map_err(|e| match e {
            agentkit_runtime::Error::SessionNotFound { .. } => no_response(id),
            e => OaiError::from(e),
        })?;
    if meta.channel != OPENAI_CHANNEL {
        return Err(no_response(id));
    }
    Ok(anchor)
}

/// Response `id`'s anchor and the log's length, when it is the latest
/// response of its session (a session is one line of turns: a response
/// continues only from the last).
async fn latest_of(state: &AgentState, owner: &Owner, id: &str) -> OaiResult<(Anchor, u64)> {
    let anchor = response_anchor(state, owner, id).await.map_err(|mut e| {
        e.param = Some("previous_response_id");
        e
    })?;
    let events = state
        .agent
        .runtime
        .events_stored(&anchor.session, owner, anchor.index)
        .await?;
    // A response starts at its message, at a decision, or (when the
    // client's outputs resumed its turn) at the first of them.
    let starts = |e: &&agentkit_protocol::Event| {
        e.event_type == EventType::MessageReceived
            || e.event_type == EventType::ActionApprovalResolved
            || (e.index == anchor.index && e.event_type == EventType::ActionResult)
    };
    let Some(first) = events.iter().find(starts) else {
        return Err(OaiError {
            param: Some("previous_response_id"),
            ..no_response(id)
        });
    };
    let later = events
        .iter()
        .filter(starts)
        .find(|e| e.index > first.index && e.event_type == EventType::MessageReceived);
    if let Some(later) = later {
        let newer = Anchor {
            session: anchor.session.clone(),
            index: later.index,
        };
        return Err(OaiError::invalid(
            "previous_response_id",
            format!(
                "response `{id}` is not the latest of its session (a session is one line of turns; continue from `{}` or later)",
                newer.response_id()
            ),
        ));
    }
    let next = anchor.index + events.len() as u64;
    Ok((anchor, next))
}

/// A new session on the `openai` channel.
async fn start(
    state: &AgentState,
    gate: Option<&Arc<TurnGate>>,
    owner: &Owner,
    message: String,
    client_tools: Vec<ClientTool>,
) -> OaiResult<Anchor> {
    let slot = gate
        .map(|g| g.admit(&state.agent.slug, owner))
        .transpose()?;
    let accepted = state
        .agent
        .runtime
        .send(SendRequest {
            client_tools,
            channel: OPENAI_CHANNEL.to_owned(),
            mode: SessionMode::Chat,
            owner: owner.clone(),
            message,
            continuation: None,
            title: None,
            purpose: None,
            admission: Admission::default(),
            workspace_files: Vec::new(),
            dry_run: false,
            as_of: None,
            output_schema: None,
        })
        .await?;
    if let Some(slot) = slot {
        slot.admitted(&state.agent.runtime, &accepted.session_id);
    }
    Ok(Anchor {
        session: accepted.session_id,
        index: accepted.start_index,
    })
}

/// A follow-up in `session` (the session API's rules: it preempts a
/// running turn).
pub(super) async fn follow_up(
    state: &AgentState,
    gate: Option<&Arc<TurnGate>>,
    owner: &Owner,
    session: &str,
    message: String,
    client_tools: Vec<ClientTool>,
) -> OaiResult<Anchor> {
    let slot = gate
        .map(|g| g.admit(&state.agent.slug, owner))
        .transpose()?;
    let accepted = state
        .agent
        .runtime
        .follow_up(
            session,
            FollowUp {
                client_tools,
                owner: owner.clone(),
                message,
                continuation_token: None,
                admission: Admission::default(),
                workspace_files: Vec::new(),
            },
        )
        .await?;
    if let Some(slot) = slot {
        slot.admitted(&state.agent.runtime, &accepted.session_id);
    }
    Ok(Anchor {
        session: accepted.session_id,
        index: accepted.start_index,
    })
}

/// Hands the client's outputs to the calls of its tools the session's
/// turn waits on: every waiting call must be answered, and every output
/// must answer a waiting call.
async fn answer(
    state: &AgentState,
    owner: &Owner,
    session: &str,
    outputs: Vec<(String, agentkit_harness::ToolOutput)>,
) -> OaiResult<()> {
    let approvals = state.agent.runtime.approvals();
    let awaiting: Vec<String> = approvals
        .awaiting_client(session, owner)
        .await?
        .into_iter()
        .map(|c| c.call_id)
        .collect();
    let stray: Vec<&str> = outputs
        .iter()
        .map(|(call, _)| call.as_str())
        .filter(|call| !awaiting.iter().any(|a| a == call))
        .collect();
    let missing: Vec<&str> = awaiting
        .iter()
        .map(String::as_str)
        .filter(|a| !outputs.iter().any(|(call, _)| call == a))
        .collect();
    if !stray.is_empty() {
        return Err(OaiError::invalid(
            "input",
            format!(
                "no function call `{}` of this response waits for its output (answered already, or its turn ended)",
                stray.join("`, `")
            ),
        ));
    }
    if !missing.is_empty() {
        return Err(OaiError::invalid(
            "input",
            format!(
                "the response waits for the outputs of every call of your tools: `{}` has none",
                missing.join("`, `")
            ),
        ));
    }
    approvals.answer_client(session, owner, outputs).await?;
    Ok(())
}

/// Decides parked calls, as `POST /v1/session/:id/approvals/:callId`
/// does.
async fn decide(
    state: &AgentState,
    owner: &Owner,
    session: &str,
    decisions: Vec<(String, bool, Option<String>)>,
) -> OaiResult<()> {
    for (call, approved, reason) in decisions {
        let decision = agentkit_runtime::Decision {
            approved,
            reason,
            by: owner.principal_id.clone(),
        };
        state
            .agent
            .runtime
            .approvals()
            .resolve(session, &call, decision, owner)
            .await
            .map_err(|e| {
                let mut e = OaiError::from(e);
                e.param = Some("input");
                e
            })?;
    }
    Ok(())
}

/// Builds the response object, and the stream events, from the turn's
/// pieces.
#[derive(Debug)]
pub(super) struct Render {
    pub(super) response: ResponseObject,
    sequence: u64,
    /// The output index of the message being written, and its text.
    open: Option<(usize, String)>,
    messages: usize,
    response_id: String,
}

impl Render {
    fn new(anchor: &Anchor, slug: &str, previous: Option<String>) -> Render {
        let id = anchor.response_id();
        Render {
            response: ResponseObject {
                id: id.clone(),
                object: "response".to_owned(),
                created_at: unix_time(None),
                status: "in_progress".to_owned(),
                model: slug.to_owned(),
                output: Vec::new(),
                usage: None,
                error: None,
                incomplete_details: None,
                previous_response_id: previous,
                instructions: None,
                metadata: serde_json::Map::new(),
                parallel_tool_calls: true,
                tool_choice: "auto".to_owned(),
                tools: Vec::new(),
                temperature: None,
                top_p: None,
                session_id: anchor.session.clone(),
            },
            sequence: 0,
            open: None,
            messages: 0,
            response_id: id,
        }
    }

    fn snapshot(&self) -> Box<ResponseObject> {
        Box::new(self.response.clone())
    }

    /// `response.created` and `response.in_progress`.
    fn opening(&mut self) -> Vec<ResponseEvent> {
        vec![
            ResponseEvent::Created {
                response: self.snapshot(),
            },
            ResponseEvent::InProgress {
                response: self.snapshot(),
            },
        ]
    }

    fn message_id(&self) -> String {
        let tail = self.response_id.trim_start_matches("resp_");
        format!("msg_{tail}.{}", self.messages)
    }

    /// Applies one piece to the response; answers the events that say
    /// so.
    fn feed(&mut self, piece: Piece) -> Vec<ResponseEvent> {
        let mut out = Vec::new();
        match piece {
            Piece::TextStarted => {
                self.messages += 1;
                let id = self.message_id();
                let index = self.response.output.len();
                let item = OutputItem::Message {
                    id: id.clone(),
                    role: "assistant".to_owned(),
                    status: "in_progress".to_owned(),
                    content: Vec::new(),
                };
                self.response.output.push(item.clone());
                self.open = Some((index, String::new()));
                out.push(ResponseEvent::OutputItemAdded {
                    output_index: index,
                    item,
                });
                out.push(ResponseEvent::ContentPartAdded {
                    item_id: id,
                    output_index: index,
                    content_index: 0,
                    part: text_part(String::new()),
                });
            }
            Piece::Text(delta) => {
                if let Some((index, text)) = &mut self.open {
                    text.push_str(&delta);
                    out.push(ResponseEvent::OutputTextDelta {
                        item_id: item_id(&self.response.output[*index]),
                        output_index: *index,
                        content_index: 0,
                        delta,
                        logprobs: Vec::new(),
                    });
                }
            }
            Piece::TextDone(full) => {
                if let Some((index, _)) = self.open.take() {
                    let id = item_id(&self.response.output[index]);
                    let item = OutputItem::Message {
                        id: id.clone(),
                        role: "assistant".to_owned(),
                        status: "completed".to_owned(),
                        content: vec![text_part(full.clone())],
                    };
                    self.response.output[index] = item.clone();
                    out.push(ResponseEvent::OutputTextDone {
                        item_id: id.clone(),
                        output_index: index,
                        content_index: 0,
                        text: full.clone(),
                        logprobs: Vec::new(),
                    });
                    out.push(ResponseEvent::ContentPartDone {
                        item_id: id,
                        output_index: index,
                        content_index: 0,
                        part: text_part(full),
                    });
                    out.push(ResponseEvent::OutputItemDone {
                        output_index: index,
                        item,
                    });
                }
            }
            Piece::Calls(calls) => {
                for call in calls {
                    let index = self.response.output.len();
                    let id = format!("fc_{}", call.call_id);
                    let arguments = call.input.to_string();
                    let item = |arguments: String, status: &str| OutputItem::FunctionCall {
                        id: id.clone(),
                        call_id: call.call_id.clone(),
                        name: call.tool_name.clone(),
                        arguments,
                        status: status.to_owned(),
                    };
                    self.response
                        .output
                        .push(item(arguments.clone(), "in_progress"));
                    out.push(ResponseEvent::OutputItemAdded {
                        output_index: index,
                        item: item(String::new(), "in_progress"),
                    });
                    out.push(ResponseEvent::FunctionCallArgumentsDelta {
                        item_id: id.clone(),
                        output_index: index,
                        delta: arguments.clone(),
                    });
                    out.push(ResponseEvent::FunctionCallArgumentsDone {
                        item_id: id.clone(),
                        output_index: index,
                        name: call.tool_name.clone(),
                        arguments,
                    });
                }
            }
            Piece::CallDone { call_id, .. } => {
                let found = self.response.output.iter().position(|item| {
                    matches!(item, OutputItem::FunctionCall { call_id: c, .. } if *c == call_id)
                });
                if let Some(index) = found
                    && let OutputItem::FunctionCall { status, .. } =
                        &mut self.response.output[index]
                {
                    *status = "completed".to_owned();
                    out.push(ResponseEvent::OutputItemDone {
                        output_index: index,
                        item: self.response.output[index].clone(),
                    });
                }
            }
            Piece::Parked(_) | Piece::Step { .. } => {}
            Piece::Waiting(parked, usage) => {
                for Parked {
                    call_id,
                    tool_name,
                    input,
                } in parked
                {
                    let index = self.response.output.len();
                    let item = OutputItem::McpApprovalRequest {
                        id: format!("{APPROVAL_ITEM}{call_id}"),
                        server_label: self.response.model.clone(),
                        name: tool_name,
                        arguments: input.to_string(),
                    };
                    self.response.output.push(item.clone());
                    out.push(ResponseEvent::OutputItemAdded {
                        output_index: index,
                        item: item.clone(),
                    });
                    out.push(ResponseEvent::OutputItemDone {
                        output_index: index,
                        item,
                    });
                }
                self.response.status = "completed".to_owned();
                self.response.usage = Some(usage.into());
                out.push(ResponseEvent::Completed {
                    response: self.snapshot(),
                });
            }
            // Calls of the client's function tools: their items are
            // complete (the client runs them and answers with
            // `function_call_output`); the response ends here.
            Piece::AwaitingClient(calls, usage) => {
                for call in calls {
                    let found = self.response.output.iter().position(|item| {
                        matches!(item, OutputItem::FunctionCall { call_id: c, .. } if *c == call.call_id)
                    });
                    if let Some(index) = found
                        && let OutputItem::FunctionCall { status, .. } =
                            &mut self.response.output[index]
                    {
                        *status = "completed".to_owned();
                        out.push(ResponseEvent::OutputItemDone {
                            output_index: index,
                            item: self.response.output[index].clone(),
                        });
                    }
                }
                self.response.status = "completed".to_owned();
                self.response.usage = Some(usage.into());
                out.push(ResponseEvent::Completed {
                    response: self.snapshot(),
                });
            }
            Piece::Ended(End {
                ok,
                text,
                reason,
                usage,
            }) => {
                self.response.usage = Some(usage.into());
                if ok {
                    self.response.status = "completed".to_owned();
                    out.push(ResponseEvent::Completed {
                        response: self.snapshot(),
                    });
                } else {
                    self.response.status = "failed".to_owned();
                    self.response.error = Some(ResponseError {
                        code: reason.unwrap_or_else(|| "server_error".to_owned()),
                        message: text,
                    });
                    out.push(ResponseEvent::Failed {
                        response: self.snapshot(),
                    });
                }
            }
        }
        out
    }

    /// Numbers `events` and writes them as server-sent events.
    fn frames(&mut self, events: Vec<ResponseEvent>) -> Bytes {
        let mut body = Vec::new();
        for event in events {
            let name = event.name();
            let numbered = ResponseStreamEvent {
                event,
                sequence_number: self.sequence,
            };
            self.sequence += 1;
            body.extend_from_slice(format!("event: {name}\ndata: ").as_bytes());
            body.extend_from_slice(&serde_json::to_vec(&numbered).unwrap_or_default());
            body.extend_from_slice(b"\n\n");
        }
        Bytes::from(body)
    }
}

fn text_part(text: String) -> OutputContent {
    OutputContent::OutputText {
        text,
        annotations: Vec::new(),
    }
}

fn item_id(item: &OutputItem) -> String {
    match item {
        OutputItem::Message { id, .. }
        | OutputItem::FunctionCall { id, .. }
        | OutputItem::McpApprovalRequest { id, .. } => id.clone(),
    }
}

/// The response's events as they happen, ending with
/// `response.completed` or `response.failed` (or when the server stops).
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
                    render.response.created_at = unix_time(follower.fold.started_at.as_deref());
                    events.extend(render.opening());
                    opened = true;
                }
                for piece in pieces {
                    events.extend(render.feed(piece));
                }
                if !events.is_empty() {
                    let bytes = render.frames(events);
                    return Some((Ok(bytes), (follower, render, opened)));
                }
            }
        },
    )
}

/// The whole response, once the turn ended (or waits for approvals).
async fn wait(mut follower: Follower, mut render: Render) -> ResponseObject {
    while let Some(pieces) = follower.next().await {
        if let Some(at) = follower.fold.started_at.as_deref() {
            render.response.created_at = unix_time(Some(at));
        }
        for piece in pieces {
            render.feed(piece);
        }
    }
    render.response
}
