//! Each agent's built-in HTTP channel: sessions, follow-ups, streams,
//! stop, list, approvals, client tools' results, deterministic tool
//! calls, health, info, and the
//! MCP endpoint behind the same chain. Bodies are the protocol's types
//! (`agentkit_protocol::api`).

use std::convert::Infallible;
use std::sync::Arc;

use agentkit_manifest::Execution;
use agentkit_protocol::api::{
    self, AgentEntry, ApprovalDecision, ApprovalList, ApprovalResolved, CallTool, ClientCallList,
    ClientResults, ClientResultsAccepted, Health, Info, McpInfo, RemindersInfo, SessionInfo,
    SessionList, Stopped,
};
use agentkit_runtime::{FollowUp, HTTP_CHANNEL, Owner, SendRequest, SessionMode};
use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::Value;

use super::agent::{AgentState, Mounted};
use super::edge::{EarlySlot, TurnGate, TurnSlot};
use super::http::{
    ApiError, ApiResult, Authed, is_blank, json_ok, parse_json, read_authenticated, tool_called,
};
use super::paging;

/// The answer to an accepted message, with the agent's stream and trace
/// URLs.
fn accepted(agent: &Mounted, accepted: agentkit_runtime::Accepted) -> api::Accepted {
    let prefix = &agent.prefix;
    let id = &accepted.session_id;
    let playground_url = agent
        .playground
        .then(|| format!("{prefix}/playground#{id}"));
    api::Accepted {
        ok: true,
        playground_url,
        stream_url: format!("{prefix}/v1/session/{id}/stream"),
        trace_url: format!("{prefix}/v1/session/{id}/events"),
        session_id: accepted.session_id,
        continuation_token: accepted.continuation_token,
        is_new: accepted.is_new,
        coalesced: accepted.coalesced,
    }
}

/// The turn slot of a request to the gate (when there is one): the one
/// the edge reserved completed for `owner`, else a new one.
fn admit(
    gate: Option<&Arc<TurnGate>>,
    early: Option<TurnSlot>,
    state: &AgentState,
    owner: &Owner,
) -> ApiResult<Option<TurnSlot>> {
    let Some(gate) = gate else {
        return Ok(None);
    };
    Ok(Some(match early {
        Some(reserved) => gate.admit_reserved(reserved, &state.agent.slug, owner)?,
        None => gate.admit(&state.agent.slug, owner)?,
    }))
}

/// `POST /v1/session`: a new chat session on the HTTP channel.
pub(crate) async fn create(
    State(state): State<AgentState>,
    gate: Option<axum::Extension<Arc<TurnGate>>>,
    request: Request,
) -> ApiResult {
    let early = EarlySlot::of(&request);
    let (owner, req, files) = super::uploads::message(&state, request).await?;
    let slot = admit(gate.as_ref().map(|g| &g.0), early, &state, &owner)?;
    if req.continuation_token.is_some() {
        return Err(ApiError::bad_request(
            "a new session takes no `continuationToken`; follow up with POST /v1/session/:sessionId",
        ));
    }
    let answer = state
        .agent
        .runtime
        .send(SendRequest {
            client_tools: req.client_tools,
            channel: HTTP_CHANNEL.to_owned(),
            mode: SessionMode::Chat,
            owner,
            message: req.message,
            continuation: None,
            title: req.title,
            purpose: req.purpose,
            admission: req.admission.unwrap_or_default(),
            workspace_files: files,
            dry_run: req.dry_run,
            as_of: None,
            output_schema: req.output_schema,
        })
        .await?;
    if let Some(slot) = slot {
        slot.admitted(&state.agent.runtime, &answer.session_id);
    }
    Ok(json_ok(accepted(&state.agent, answer)))
}

/// `POST /v1/session/:id`: a follow-up.
pub(crate) async fn follow_up(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    gate: Option<axum::Extension<Arc<TurnGate>>>,
    request: Request,
) -> ApiResult {
    let early = EarlySlot::of(&request);
    let (owner, req, files) = super::uploads::message(&state, request).await?;
    let slot = admit(gate.as_ref().map(|g| &g.0), early, &state, &owner)?;
    if req.output_schema.is_some() {
        return Err(ApiError::bad_request(
            "`outputSchema` is chosen when a session starts (POST /v1/session); a follow-up keeps it",
        ));
    }
    let answer = state
        .agent
        .runtime
        .follow_up(
            &id,
            FollowUp {
                client_tools: req.client_tools,
                owner,
                message: req.message,
                continuation_token: req.continuation_token,
                admission: req.admission.unwrap_or_default(),
                workspace_files: files,
            },
        )
        .await?;
    if let Some(slot) = slot {
        slot.admitted(&state.agent.runtime, &answer.session_id);
    }
    Ok(json_ok(accepted(&state.agent, answer)))
}

pub(crate) async fn stop(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    let interrupted = state.agent.runtime.stop(&id, &owner).await?;
    Ok(json_ok(Stopped {
        ok: true,
        session_id: id,
        interrupted,
    }))
}

/// `POST /v1/session/:id/fork`: a new session, owned by the caller,
/// whose events are the original's up to `atIndex` (then
/// `session.forked`); with `message`, sent in the fork at once. The fork
/// takes a turn's slot only when it sends a message.
pub(crate) async fn fork(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    gate: Option<axum::Extension<Arc<TurnGate>>>,
    Authed { owner, body, .. }: Authed,
) -> ApiResult {
    let req: agentkit_protocol::api::ForkRequest = parse_json(&body)?;
    let slot = match (&gate, &req.message) {
        (Some(axum::Extension(gate)), Some(_)) => Some(gate.admit(&state.agent.slug, &owner)?),
        _ => None,
    };
    let forked = state
        .agent
        .runtime
        .forks()
        .fork(&id, &owner, req.at_index, req.message)
        .await?;
    if let Some(slot) = slot {
        slot.admitted(&state.agent.runtime, &forked.session_id);
    }
    Ok(json_ok(forked))
}

/// `GET /v1/session/:id`: the session's metadata (not its continuation
/// token, which only the last answer carries).
pub(crate) async fn session_info(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    let runtime = &state.agent.runtime;
    let meta = runtime.session(&id, &owner).await?;
    let (usage, cost_usd) = runtime.usage(&id, &owner).await?;
    Ok(json_ok(SessionInfo {
        usage,
        cost_usd,
        ok: true,
        busy: runtime.is_busy(&id),
        session_id: meta.id,
        channel: meta.channel,
        mode: meta.mode,
        principal_id: meta.owner.principal_id,
        created_at: meta.created_at,
        title: meta.title,
        purpose: meta.purpose,
        dry_run: meta.dry_run,
        as_of: meta.as_of,
        forked_from: meta.forked_from,
    }))
}

fn start_index(query: Option<&str>) -> ApiResult<u64> {
    let Some(query) = query else { return Ok(0) };
    for pair in query.split('&') {
        if let Some(v) = pair.strip_prefix("startIndex=") {
            return v.parse().map_err(|_| {
                ApiError::bad_request(format!(
                    "`startIndex` must be a non-negative integer, not `{v}`"
                ))
            });
        }
    }
    Ok(0)
}

/// `text=false`: the follower wants `message.appended` without its
/// cumulative `text` (the `delta` alone), so a long reply streams in
/// bytes linear in its length.
fn wants_text(query: Option<&str>) -> ApiResult<bool> {
    let Some(query) = query else { return Ok(true) };
    for pair in query.split('&') {
        if let Some(v) = pair.strip_prefix("text=") {
            return match v {
                "true" | "1" => Ok(true),
                "false" | "0" => Ok(false),
                _ => Err(ApiError::bad_request(format!(
                    "`text` must be `true` or `false`, not `{v}`"
                ))),
            };
        }
    }
    Ok(true)
}

fn ndjson(body: Body) -> Response {
    let mut resp = Response::new(body);
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

/// Whether the log's line of `event` leaves out part of it: a delta's
/// text so far (see `agentkit_events::strip_text`).
fn stripped(event: &agentkit_protocol::Event) -> bool {
    event.event_type == agentkit_protocol::EventType::MessageAppended
        && event.data.get("delta").is_some_and(Value::is_string)
        && event.data.get("text").is_some()
}

/// The most bytes of ready events one stream frame gathers.
const FRAME_BYTES: usize = 64 * 1024;

/// The event's line: as the log stores it without `text` (a delta loses
/// its text so far), whole with it.
fn line(event: &agentkit_protocol::Event, text: bool) -> Bytes {
    let mut out = Vec::new();
    write_line(&mut out, event, text);
    Bytes::from(out)
}

/// Appends the event's [`line`] to `out`. An event that cannot be
/// encoded (none can: its data is JSON already) adds an empty line.
fn write_line(out: &mut Vec<u8>, event: &agentkit_protocol::Event, text: bool) {
    let start = out.len();
    let written = if !text && stripped(event) {
        let mut bare = event.clone_envelope();
        bare.data = Value::Object(
            event
                .data
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(k, _)| k.as_str() != "text")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        );
        serde_json::to_writer(&mut *out, &bare)
    } else {
        serde_json::to_writer(&mut *out, event)
    };
    if written.is_err() {
        out.truncate(start);
    }
    out.push(b'\n');
}

pub(crate) async fn stream(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    let start = start_index(query.as_deref())?;
    let text = wants_text(query.as_deref())?;
    let sub = state.agent.runtime.subscribe(&id, &owner, start).await?;
    // A body frame as soon as an event comes, with the events already
    // there behind it (a batch of deltas is one frame, not one each):
    // hyper writes each frame at once, and nothing waits for more. The
    // stream ends when the client goes away (the body is dropped), on a
    // store error, or when the server shuts down.
    let events = futures_util::stream::unfold(Some(sub), move |sub| async move {
        let mut sub = sub?;
        let mut frame = Vec::new();
        match sub.next_shared().await {
            Ok(event) => write_line(&mut frame, &event, text),
            Err(e) => {
                tracing::warn!(error = %e, "stream ended by a store error");
                return None;
            }
        }
        let mut next = Some(sub);
        while frame.len() < FRAME_BYTES
            && let Some(s) = next.as_mut()
        {
            // `next_shared` is cancel-safe: a pending poll loses nothing.
            match futures_util::FutureExt::now_or_never(s.next_shared()) {
                Some(Ok(event)) => write_line(&mut frame, &event, text),
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "stream ended by a store error");
                    next = None;
                }
                None => break,
            }
        }
        Some((Ok::<Bytes, Infallible>(Bytes::from(frame)), next))
    })
    .take_until(state.shutdown.clone().cancelled_owned());
    Ok(ndjson(Body::from_stream(events)))
}

pub(crate) async fn events(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    let start = start_index(query.as_deref())?;
    let text = wants_text(query.as_deref())?;
    let runtime = &state.agent.runtime;
    // The events as stored (deltas without their text so far), written
    // one line at a time as the client reads: a long reply's cumulative
    // texts (the square of its length on the wire) are never all held in
    // memory. From index 0 the text is rebuilt line by line; from further
    // on, the store completes the first message's text.
    let (events, rebuild) = if !text {
        (runtime.events_stored(&id, &owner, start).await?, None)
    } else if start == 0 {
        (
            runtime.events_stored(&id, &owner, 0).await?,
            Some(agentkit_events::Rebuild::at_start()),
        )
    } else {
        (runtime.events(&id, &owner, start).await?, None)
    };
    let lines = events.into_iter().scan(rebuild, move |rebuild, mut e| {
        if let Some(rebuild) = rebuild {
            rebuild.apply(&mut e);
        }
        Some(Ok::<_, std::convert::Infallible>(line(&e, text)))
    });
    Ok(ndjson(Body::from_stream(futures_util::stream::iter(lines))))
}

/// `GET /v1/sessions?limit&cursor&channel&since&updatedSince&status`: one
/// page, newest first.
pub(crate) async fn list(
    State(state): State<AgentState>,
    uri: axum::http::Uri,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    let page = session_page(&uri)?;
    let (sessions, next) = state.agent.runtime.list_page(&owner, &page).await?;
    Ok(json_ok(SessionList {
        ok: true,
        sessions,
        next_cursor: next
            .as_deref()
            .map(|id| paging::cursor_of(SESSION_CURSOR, id)),
    }))
}

/// The page `GET /v1/sessions`'s query asks for; `400` naming what is
/// wrong.
fn session_page(uri: &axum::http::Uri) -> ApiResult<agentkit_runtime::SessionPage> {
    use agentkit_protocol::api::SessionListQuery;
    let axum::extract::Query(q) = axum::extract::Query::<SessionListQuery>::try_from_uri(uri)
        .map_err(|e| ApiError::bad_request(format!("invalid query: {}", e.body_text())))?;
    let page = paging::page_query(SESSION_CURSOR, q.limit, q.cursor.as_deref())?;
    // The key is a session id (the runtime's keyset is on it).
    if page
        .after
        .as_deref()
        .is_some_and(|id| agentkit_protocol::SessionId::parse(id).is_err())
    {
        return Err(ApiError::bad_request(
            "invalid `cursor`: pass the `nextCursor` of the previous page as it is",
        ));
    }
    let since = instant("since", q.since.as_deref())?;
    let updated_since = instant("updatedSince", q.updated_since.as_deref())?;
    let status = q
        .status
        .as_deref()
        .map(|s| match s {
            "running" => Ok(agentkit_runtime::SessionStatus::Running),
            "waiting_approval" => Ok(agentkit_runtime::SessionStatus::WaitingApproval),
            "idle" => Ok(agentkit_runtime::SessionStatus::Idle),
            other => Err(ApiError::bad_request(format!(
                "`status` must be one of `running`, `waiting_approval`, `idle`, not `{other}`"
            ))),
        })
        .transpose()?;
    Ok(agentkit_runtime::SessionPage {
        limit: page.limit,
        before: page.after,
        channel: q.channel.filter(|c| !c.is_empty()),
        since,
        updated_since,
        status,
    })
}

/// Query parameter `name`'s instant, as session metadata stores one (RFC
/// 3339, UTC, milliseconds); `400` naming it when it is not one.
fn instant(name: &str, value: Option<&str>) -> ApiResult<Option<String>> {
    value
        .map(|s| {
            chrono::DateTime::parse_from_rfc3339(s)
                .map(|t| {
                    t.with_timezone(&chrono::Utc)
                        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
                })
                .map_err(|_| {
                    ApiError::bad_request(format!(
                        "`{name}` must be an RFC 3339 instant (2026-01-31T12:00:00Z), not `{s}`"
                    ))
                })
        })
        .transpose()
}

/// The kind of `GET /v1/sessions`'s cursors (a session id after it).
const SESSION_CURSOR: &str = "s1";

/// The kind of a session's approval cursors.
const APPROVAL_CURSOR: &str = "a1";

pub(crate) async fn health(State(state): State<AgentState>, _auth: Authed) -> ApiResult {
    Ok(public_health(State(state)).await)
}

/// Liveness without auth: the slug is no secret (multi mode lists every
/// slug at `/v1/agents`).
pub(crate) async fn public_health(State(state): State<AgentState>) -> Response {
    json_ok(Health {
        ok: true,
        slug: Some(state.agent.slug.clone()),
    })
}

/// The host's `GET /v1/agents` entry of `agent`.
pub(crate) fn agent_entry(agent: &Mounted) -> AgentEntry {
    AgentEntry {
        slug: agent.slug.clone(),
        description: agent.project.agent.config.description.clone(),
        url: format!("/{}", agent.slug),
    }
}

pub(crate) async fn info(
    State(state): State<AgentState>,
    Authed { owner, role, .. }: Authed,
) -> ApiResult {
    let agent = &state.agent;
    let value = |v: Result<Value, serde_json::Error>| v.unwrap_or(Value::Null);
    Ok(json_ok(Info {
        ok: true,
        slug: agent.slug.clone(),
        project: value(serde_json::to_value(&*agent.project)),
        mcp: mcp_info(agent),
        channels: agent.channels.describe(),
        schedules: value(serde_json::to_value(agent.runtime.schedules().status())),
        reminders: RemindersInfo {
            armed: agent.runtime.reminders().armed().await,
        },
        hooks: value(serde_json::to_value(agent.hooks.stats())),
        sandbox: value(serde_json::to_value(agentkit_harness::sandbox_info(
            agent.project.agent.config.harness.sandbox.mode,
        ))),
        caller: Some(api::Caller {
            operator: owner.is_operator(),
            principal_id: owner.principal_id,
            principal_type: owner.principal_type,
            authenticator: owner.authenticator,
            role: Some(role.to_string()),
        }),
    }))
}

/// `POST /v1/tools/:toolName`: a deterministic call, no model turn.
pub(crate) async fn call_tool(
    State(state): State<AgentState>,
    Path(name): Path<String>,
    Authed { owner, body, .. }: Authed,
) -> ApiResult {
    let req: CallTool = if is_blank(&body) {
        CallTool::default()
    } else {
        parse_json(&body)?
    };
    let session = req.session_id.as_deref().map(|id| (id, &owner));
    let outcome = state
        .agent
        .runtime
        .tool_calls()
        .call(&name, req.input, session)
        .await?;
    Ok(json_ok(tool_called(outcome)))
}

/// `GET /v1/session/:id/approvals?limit&cursor`: the calls parked in
/// the session, including those a restart left waiting, newest first, one
/// page of them.
pub(crate) async fn approvals(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    uri: axum::http::Uri,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    let query = super::http::list_query(&uri, APPROVAL_CURSOR)?;
    // The runtime answers every parked call of the session (its fold
    // keeps them); the page is cut here.
    let mut approvals = state.agent.runtime.approvals().pending(&id, &owner).await?;
    let key = |a: &api::PendingApproval| format!("{}\n{}", a.requested_at, a.call_id);
    approvals.sort_by_cached_key(|a| std::cmp::Reverse(key(a)));
    let (approvals, next_cursor) = paging::page(approvals, APPROVAL_CURSOR, &query, key);
    Ok(json_ok(ApprovalList {
        ok: true,
        session_id: id,
        approvals,
        next_cursor,
    }))
}

/// `POST /v1/session/:id/approvals/:callId` with `{"decision":
/// "approve"|"deny", "reason"?}`; the caller's principal is recorded as
/// `by` (`operator:<principalId>` for an operator deciding on a session
/// it does not own).
pub(crate) async fn resolve_approval(
    State(state): State<AgentState>,
    Path((id, call)): Path<(String, String)>,
    Authed { owner, body, .. }: Authed,
) -> ApiResult {
    let req: ApprovalDecision = parse_json(&body)?;
    let approved = req.approved().map_err(ApiError::bad_request)?;
    let decision = agentkit_runtime::Decision {
        approved,
        reason: req.reason,
        by: owner.principal_id.clone(),
    };
    let resolved = state
        .agent
        .runtime
        .approvals()
        .resolve(&id, &call, decision, &owner)
        .await?;
    Ok(json_ok(ApprovalResolved {
        call_id: resolved.call_id,
        decision: resolved.decision.to_owned(),
        by: resolved.by,
        resumed: resolved.resumed,
        ok: true,
        session_id: id,
    }))
}

/// `GET /v1/session/:id/client-calls`: the calls of tools the client
/// declared that wait for its results (in a running turn, or left by a
/// restart), oldest first.
pub(crate) async fn client_calls(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    Authed { owner, .. }: Authed,
) -> ApiResult {
    let calls = state
        .agent
        .runtime
        .approvals()
        .awaiting_client(&id, &owner)
        .await?;
    Ok(json_ok(ClientCallList {
        ok: true,
        session_id: id,
        calls,
    }))
}

/// `POST /v1/session/:id/client-calls` with `{"results": [{"callId",
/// "output", "isError"?}]}`: the client's results, each the output the
/// model sees for its call.
pub(crate) async fn answer_client_calls(
    State(state): State<AgentState>,
    Path(id): Path<String>,
    Authed { owner, body, .. }: Authed,
) -> ApiResult {
    let req: ClientResults = parse_json(&body)?;
    if req.results.is_empty() {
        return Err(ApiError::bad_request(
            "`results` is empty: send one result per waiting call",
        ));
    }
    let results = req
        .results
        .into_iter()
        .map(|r| {
            (
                r.call_id,
                agentkit_harness::ToolOutput {
                    output: r.output,
                    is_error: r.is_error,
                },
            )
        })
        .collect();
    let answered = state
        .agent
        .runtime
        .approvals()
        .answer_client(&id, &owner, results)
        .await?;
    Ok(json_ok(ClientResultsAccepted {
        ok: true,
        session_id: id,
        answered: answered.answered,
        resumed: answered.resumed,
    }))
}

/// `ANY /v1/mcp`: the auth chain first (over the raw body), then the MCP
/// server with the admitted principal.
pub(crate) async fn mcp(State(state): State<AgentState>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let head = parts.clone();
    let (owner, bytes) = match read_authenticated(Request::from_parts(parts, body), &state).await {
        Ok(admitted) => admitted,
        Err(e) => return e.into_response(),
    };
    let req = axum::http::Request::from_parts(head, Body::from(bytes));
    let resp = state.agent.mcp.handle(req, owner).await;
    resp.map(Body::new)
}

/// The `mcp` entry of `GET /v1/info`: where the endpoint is and what it
/// offers.
fn mcp_info(agent: &Mounted) -> McpInfo {
    let backend_tools = agent
        .project
        .agent
        .tools
        .iter()
        .any(|t| t.execution == Execution::Server);
    let mut tools = vec!["ask".to_owned(), "check".to_owned()];
    if backend_tools {
        tools.push("call_tool".to_owned());
    }
    McpInfo {
        path: format!("{}/v1/mcp", agent.prefix),
        tools,
        connections: serde_json::to_value(agent.connections.status()).unwrap_or(Value::Null),
    }
}
