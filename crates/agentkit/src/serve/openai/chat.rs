//! `POST /v1/chat/completions`: the Chat Completions API over a session.
//! A request's `messages` start a new session (an earlier history
//! carried in its first message), or continue one: the session named by
//! the `x-agentkit-session-id` header, or the one the same principal's
//! `user` value keyed. A continued session gets only the user text after
//! the history's last assistant message. The reply is all the assistant
//! text of the turn; the agent's tool calls run on the server and are not
//! shown (the session's events have them).

use std::convert::Infallible;
use std::sync::Arc;

use agentkit_protocol::Usage;
use agentkit_protocol::openai::{
    ChatChoice, ChatCompletion, ChatCompletionChunk, ChatReply, ChatUsage, ChunkChoice, ChunkDelta,
    CreateChatCompletion, ErrorBody, ErrorDetail,
};
use agentkit_runtime::{Owner, SendRequest, SessionMode};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use super::fold::{Anchor, End, Follower, Parked, Piece};
use super::responses::follow_up;
use super::{
    OPENAI_CHANNEL, OaiError, OaiResult, SESSION_HEADER, Said, check_model, compose, content_text,
    parse_body, refuse_tools, role, sse, unix_time, with_session,
};
use crate::serve::agent::AgentState;
use crate::serve::edge::TurnGate;
use crate::serve::http::{ApiError, Authed};

/// `POST /v1/chat/completions`.
pub(super) async fn create(
    State(state): State<AgentState>,
    gate: Option<axum::Extension<Arc<TurnGate>>>,
    headers: HeaderMap,
    authed: Result<Authed, ApiError>,
) -> Result<Response, OaiError> {
    let Authed { owner, body, .. } = authed?;
    let req: CreateChatCompletion = parse_body(&body)?;
    let agent = &state.agent;
    check_model(req.model.as_deref(), &agent.slug)?;
    refuse_tools(&req.tools)?;
    if req.n.is_some_and(|n| n != 1) {
        return Err(OaiError::invalid("n", "only `n: 1` is served"));
    }
    let mut history = Vec::new();
    for m in &req.messages {
        let text = content_text(&m.content, "messages")?;
        if let Some(role) = role(&m.role, "messages", !text.trim().is_empty())? {
            history.push(Said { role, text });
        }
    }
    let named = headers
        .get(SESSION_HEADER)
        .map(|v| {
            v.to_str()
                .map(str::to_owned)
                .map_err(|_| OaiError::invalid("headers", "`x-agentkit-session-id` is not text"))
        })
        .transpose()?;
    let gate = gate.as_deref();
    let anchor = match (named, req.user.as_deref().filter(|u| !u.is_empty())) {
        (Some(session), _) => {
            let meta = agent.runtime.session(&session, &owner).await?;
            if meta.channel != OPENAI_CHANNEL {
                return Err(OaiError::invalid(
                    "headers",
                    format!(
                        "session `{session}` is on the `{}` channel; chat completions continue only sessions of the `{OPENAI_CHANNEL}` channel",
                        meta.channel
                    ),
                ));
            }
            let message = compose(&history, true, "messages")?;
            follow_up(&state, gate, &owner, &session, message, Vec::new()).await?
        }
        (None, key) => {
            // A `user` value keys one conversation per principal.
            let key = key.map(|user| super::principal_key(&owner, user));
            let existing = match key.as_deref() {
                Some(k) => agent.runtime.session_for(OPENAI_CHANNEL, k).await,
                None => None,
            };
            if let Some(id) = &existing {
                agent.runtime.session(id, &owner).await?;
            }
            let continuing = existing.is_some();
            let message = compose(&history, continuing, "messages")?;
            send(&state, gate, &owner, message, key).await?
        }
    };
    let follower = Follower::start(&agent.runtime, &owner, &anchor, state.shutdown.clone()).await?;
    let render = Render {
        id: anchor.completion_id(),
        created: unix_time(None),
        model: agent.slug.clone(),
        approvals: format!("{}/v1/session/{}/approvals", agent.prefix, anchor.session),
        messages: 0,
        text: String::new(),
        end: None,
    };
    if req.stream {
        let usage = req.stream_options.is_some_and(|o| o.include_usage);
        let resp = sse(Body::from_stream(stream(follower, render, usage)));
        return Ok(with_session(resp, &anchor.session));
    }
    let render = wait(follower, render).await;
    let resp = match render.end.clone() {
        Some(Finish::Failed(end)) => failed(&end).into_response(),
        _ => axum::Json(render.completion()).into_response(),
    };
    Ok(with_session(resp, &anchor.session))
}

/// Starts (or, with `key` known, continues) a session on the `openai`
/// channel.
async fn send(
    state: &AgentState,
    gate: Option<&Arc<TurnGate>>,
    owner: &Owner,
    message: String,
    key: Option<String>,
) -> OaiResult<Anchor> {
    let slot = gate
        .map(|g| g.admit(&state.agent.slug, owner))
        .transpose()?;
    let accepted = state
        .agent
        .runtime
        .send(SendRequest {
            client_tools: Vec::new(),
            channel: OPENAI_CHANNEL.to_owned(),
            mode: SessionMode::Chat,
            owner: owner.clone(),
            message,
            continuation: key,
            title: None,
            purpose: None,
            admission: agentkit_protocol::Admission::default(),
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

/// The error answer of a failed turn (never retried by the SDKs: the
/// message is in the session).
fn failed(end: &End) -> OaiError {
    OaiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        end.reason
            .clone()
            .unwrap_or_else(|| "turn_failed".to_owned()),
        format!("the agent's turn failed: {}", end.text),
    )
}

#[derive(Debug, Clone)]
enum Finish {
    Done(Usage),
    Failed(End),
}

/// The reply as it is written.
#[derive(Debug)]
struct Render {
    id: String,
    created: u64,
    model: String,
    /// Where the session's parked calls are decided.
    approvals: String,
    messages: usize,
    text: String,
    end: Option<Finish>,
}

impl Render {
    /// The text one piece adds to the reply.
    fn feed(&mut self, piece: Piece) -> Option<String> {
        let delta = match piece {
            Piece::TextStarted => {
                self.messages += 1;
                (self.messages > 1).then(|| "\n\n".to_owned())
            }
            Piece::Text(delta) => Some(delta),
            Piece::Waiting(parked, usage) => {
                let mut note = String::new();
                for Parked {
                    call_id, tool_name, ..
                } in parked
                {
                    if !self.text.is_empty() || !note.is_empty() {
                        note.push_str("\n\n");
                    }
                    note.push_str(&format!(
                        "[approval needed] the agent's call of `{tool_name}` (call `{call_id}`) waits for a human's decision: POST {}/{call_id} with {{\"decision\": \"approve\"}} or {{\"decision\": \"deny\"}}; the turn then goes on in this session.",
                        self.approvals
                    ));
                }
                self.end = Some(Finish::Done(usage));
                Some(note)
            }
            // Client tools are AG-UI's (a completion's turn declares
            // none): the reply ends at such a wait.
            Piece::AwaitingClient(_, usage) => {
                self.end = Some(Finish::Done(usage));
                None
            }
            Piece::Ended(end) => {
                self.end = Some(if end.ok {
                    Finish::Done(end.usage)
                } else {
                    Finish::Failed(end)
                });
                None
            }
            Piece::TextDone(_)
            | Piece::Calls(_)
            | Piece::CallDone { .. }
            | Piece::Parked(_)
            | Piece::Step { .. } => None,
        };
        if let Some(d) = &delta {
            self.text.push_str(d);
        }
        delta.filter(|d| !d.is_empty())
    }

    fn usage(&self) -> ChatUsage {
        match &self.end {
            Some(Finish::Done(u)) => (*u).into(),
            Some(Finish::Failed(end)) => end.usage.into(),
            None => ChatUsage::default(),
        }
    }

    fn completion(&self) -> ChatCompletion {
        ChatCompletion {
            id: self.id.clone(),
            object: "chat.completion".to_owned(),
            created: self.created,
            model: self.model.clone(),
            choices: vec![ChatChoice {
                index: 0,
                message: ChatReply {
                    role: "assistant".to_owned(),
                    content: self.text.clone(),
                    refusal: None,
                },
                finish_reason: "stop".to_owned(),
                logprobs: None,
            }],
            usage: self.usage(),
        }
    }

    fn chunk(&self, delta: ChunkDelta, finish: Option<&str>) -> ChatCompletionChunk {
        ChatCompletionChunk {
            id: self.id.clone(),
            object: "chat.completion.chunk".to_owned(),
            created: self.created,
            model: self.model.clone(),
            choices: vec![ChunkChoice {
                index: 0,
                delta,
                finish_reason: finish.map(str::to_owned),
                logprobs: None,
            }],
            usage: None,
        }
    }
}

fn frame(body: &mut Vec<u8>, value: &impl serde::Serialize) {
    body.extend_from_slice(b"data: ");
    body.extend_from_slice(&serde_json::to_vec(value).unwrap_or_default());
    body.extend_from_slice(b"\n\n");
}

/// The chunks as the turn writes them: the role first, the text, a last
/// chunk with `finish_reason`, the usage when asked, then `[DONE]`; a
/// failed turn ends with an `error` event.
fn stream(
    follower: Follower,
    render: Render,
    include_usage: bool,
) -> impl futures_util::Stream<Item = Result<Bytes, Infallible>> + Send {
    futures_util::stream::unfold(Some((follower, render, false)), move |state| async move {
        let (mut follower, mut render, mut opened) = state?;
        loop {
            let pieces = follower.next().await?;
            let mut body = Vec::new();
            if !opened && follower.fold.found() {
                render.created = unix_time(follower.fold.started_at.as_deref());
                let first = ChunkDelta {
                    role: Some("assistant".to_owned()),
                    content: Some(String::new()),
                };
                frame(&mut body, &render.chunk(first, None));
                opened = true;
            }
            for piece in pieces {
                if let Some(text) = render.feed(piece) {
                    let delta = ChunkDelta {
                        role: None,
                        content: Some(text),
                    };
                    frame(&mut body, &render.chunk(delta, None));
                }
            }
            let last = render.end.is_some();
            match render.end.clone() {
                Some(Finish::Failed(end)) => {
                    let e = failed(&end);
                    frame(
                        &mut body,
                        &ErrorBody {
                            error: ErrorDetail {
                                message: format!("the agent's turn failed: {}", end.text),
                                kind: "server_error".to_owned(),
                                param: None,
                                code: Some(e.code),
                            },
                        },
                    );
                    body.extend_from_slice(b"data: [DONE]\n\n");
                }
                Some(Finish::Done(_)) => {
                    frame(
                        &mut body,
                        &render.chunk(ChunkDelta::default(), Some("stop")),
                    );
                    if include_usage {
                        let mut chunk = render.chunk(ChunkDelta::default(), None);
                        chunk.choices.clear();
                        chunk.usage = Some(render.usage());
                        frame(&mut body, &chunk);
                    }
                    body.extend_from_slice(b"data: [DONE]\n\n");
                }
                None => {}
            }
            if !body.is_empty() {
                let next = (!last).then_some((follower, render, opened));
                return Some((Ok(Bytes::from(body)), next));
            }
        }
    })
}

/// The reply once the turn ended (or waits for approvals).
async fn wait(mut follower: Follower, mut render: Render) -> Render {
    while let Some(pieces) = follower.next().await {
        if let Some(at) = follower.fold.started_at.as_deref() {
            render.created = unix_time(Some(at));
        }
        for piece in pieces {
            render.feed(piece);
        }
    }
    render
}
