//! A stored session, run again or kept as a test: `agentkit replay`
//! re-runs a session's turns against a project with the model's answers
//! (and, unless tools run live, the tools' results) taken from its log,
//! then compares the new events with the recorded ones; `agentkit eval
//! add` writes a session as an eval case with the recordings that let
//! `agentkit eval --replay` answer it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agentkit_client::{Client, SessionCursor};
use agentkit_protocol::api::{ClientResult, SendMessage, json_changes};
use agentkit_protocol::{ClientTool, Event, EventData, EventType, MessageReceived};
use futures_util::StreamExt;
use serde_json::Value;

use crate::error::{Error, Result};

/// How to replay.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// The project (or a folder of them; `agent` picks one).
    pub dir: PathBuf,
    pub agent: Option<String>,
    /// Where the ephemeral server keeps its state.
    pub state_root: PathBuf,
    /// Run the tools instead of taking their results from the log.
    pub live_tools: bool,
    /// How long one turn may take.
    pub turn_timeout: Duration,
    /// Run this model live (`provider:id`) instead of answering from the
    /// log, and report where the new run departs from the old one.
    pub model: Option<String>,
    /// The providers' endpoints and keys, for a live model.
    pub providers: agentkit_harness::ProviderConfig,
}

/// How a replay went.
#[derive(Debug, Clone, PartialEq)]
pub struct Replayed {
    /// The replay's own session (on the ephemeral server, now closed).
    pub session_id: String,
    /// How many events were compared.
    pub compared: usize,
    /// The first difference, if any.
    pub divergence: Option<Divergence>,
}

/// The first place a replay departs from the recorded session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    /// The recorded event's index.
    pub index: u64,
    /// The recorded event's type (or the replay's, past the recording).
    pub event_type: String,
    /// A JSON Pointer into the event (`/data/request/system`).
    pub field: String,
    pub before: String,
    pub after: String,
    /// What the field means, when it is worth saying.
    pub note: Option<String>,
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "event {} ({}) differs at {}",
            self.index, self.event_type, self.field
        )?;
        writeln!(f, "- {}", self.before)?;
        write!(f, "+ {}", self.after)?;
        if let Some(note) = &self.note {
            write!(f, "\n  ({note})")?;
        }
        Ok(())
    }
}

/// One turn to run again, started as the recording started it.
#[derive(Debug, Clone, PartialEq)]
enum TurnToRun {
    /// A user message (the messages the turn answered, joined as a turn
    /// joins them), with the tools the client declared for it.
    Send {
        text: String,
        client_tools: Vec<ClientTool>,
        /// How many of its calls still waited (for a decision or for the
        /// client's result) when a restart or a shutdown cut the turn
        /// short: the replay restarts its server once as many wait. 0:
        /// the turn was not cut.
        cut: usize,
    },
    /// A channel's assistant text, emitted without a model.
    Emit { text: String },
    /// A turn that resumed the conversation once the calls a restart
    /// left waiting were answered.
    Resume,
}

/// How a recorded call that waited was answered.
#[derive(Debug, Clone, PartialEq)]
enum Answer {
    Approval {
        approve: bool,
        reason: Option<String>,
    },
    Client {
        output: Value,
        is_error: bool,
    },
}

/// A waiting call's answer, and whether it came only after its turn was
/// cut short (the replay gives it after restarting, before the turn
/// that resumes).
#[derive(Debug, Clone, PartialEq)]
struct Answered {
    answer: Answer,
    after_cut: bool,
}

/// What a recorded session's turns were, in order, and how each of its
/// waiting calls was answered (approval requests and client calls, each
/// in the order they were asked; `None`: never answered).
#[derive(Debug, Clone, Default, PartialEq)]
struct Plan {
    turns: Vec<TurnToRun>,
    approvals: Vec<Option<Answered>>,
    client_calls: Vec<Option<Answered>>,
}

impl Plan {
    /// The user messages, for an eval case: a case sends messages only,
    /// so a turn started otherwise is refused there.
    fn messages(&self, events: &[Event]) -> Result<Vec<String>> {
        let starts = events
            .iter()
            .filter(|e| e.event_type == EventType::TurnStarted);
        let mut out = Vec::new();
        for (turn, e) in self.turns.iter().zip(starts) {
            match turn {
                TurnToRun::Send { text, cut: 0, .. } => out.push(text.clone()),
                TurnToRun::Send { .. } | TurnToRun::Resume => {
                    return Err(Error::Config {
                        message: format!(
                            "event {}: an eval case cannot restart its server mid-turn (a call was answered after a restart); replay the session with `agentkit replay` instead",
                            e.index
                        ),
                    });
                }
                TurnToRun::Emit { .. } => {
                    return Err(Error::Config {
                        message: format!(
                            "event {}: an eval case sends user messages only, and this turn is a channel's emitted text; replay the session with `agentkit replay` instead",
                            e.index
                        ),
                    });
                }
            }
        }
        Ok(out)
    }
}

/// Reads a recorded session's turns and answers. Fails on a turn a
/// replay cannot start as it was started.
fn plan_of(events: &[Event]) -> Result<Plan> {
    use std::collections::HashMap;
    let refuse = |index: u64, why: &str| Error::Config {
        message: format!("event {index}: {why}"),
    };
    // Where each turn ended, and how.
    let mut ended: HashMap<String, (u64, Option<String>)> = HashMap::new();
    // Each call's answer: its index, and what it was.
    let mut answers: HashMap<String, (u64, Answer)> = HashMap::new();
    for e in events {
        let turn = e.turn_id.clone().unwrap_or_default();
        match e.payload() {
            EventData::TurnCompleted(_) => {
                ended.entry(turn).or_insert((e.index, None));
            }
            EventData::TurnFailed(f) => {
                ended.entry(turn).or_insert((e.index, f.reason));
            }
            EventData::ApprovalResolved(r) => {
                answers.entry(r.call_id).or_insert((
                    e.index,
                    Answer::Approval {
                        approve: r.decision == "approve",
                        reason: r.reason,
                    },
                ));
            }
            EventData::ActionResult(r) => {
                answers.entry(r.call_id).or_insert((
                    e.index,
                    Answer::Client {
                        output: r.output,
                        is_error: r.is_error,
                    },
                ));
            }
            _ => {}
        }
    }
    let mut plan = Plan::default();
    // Per turn, its calls still waiting when it ended.
    let mut waiting_at_end: HashMap<String, usize> = HashMap::new();
    let mut answered = |call_id: &str, turn: &str, approval: bool| {
        let end = ended.get(turn).map(|(i, _)| *i);
        let answer = answers.get(call_id).filter(|(_, a)| match a {
            Answer::Approval { .. } => approval,
            Answer::Client { .. } => !approval,
        });
        let after_cut = match (answer, end) {
            (Some((at, _)), Some(end)) => *at > end,
            (None, Some(_)) => true,
            _ => false,
        };
        if after_cut {
            *waiting_at_end.entry(turn.to_owned()).or_default() += 1;
        }
        answer.map(|(_, a)| Answered {
            answer: a.clone(),
            after_cut,
        })
    };
    for e in events {
        let turn = e.turn_id.clone().unwrap_or_default();
        match e.payload() {
            EventData::ApprovalRequested(r) => {
                let a = answered(&r.call_id, &turn, true);
                plan.approvals.push(a);
            }
            EventData::ClientActionsRequested(r) => {
                for c in r.calls {
                    let a = answered(&c.call_id, &turn, false);
                    plan.client_calls.push(a);
                }
            }
            _ => {}
        }
    }
    let mut since_last: Vec<u64> = Vec::new();
    let received_at = |i: u64| {
        events
            .iter()
            .find(|e| e.index == i)
            .and_then(|e| match e.payload() {
                EventData::MessageReceived(m) => Some(m),
                _ => None,
            })
    };
    for e in events {
        match e.payload() {
            EventData::MessageReceived(_) => since_last.push(e.index),
            EventData::TurnStarted(t) => {
                let turn = e.turn_id.clone().unwrap_or_default();
                if let Some(kind) = &t.kind {
                    if kind != "emitted" {
                        return Err(refuse(
                            e.index,
                            &format!("a turn of kind `{kind}` cannot be replayed"),
                        ));
                    }
                    let text = events
                        .iter()
                        .filter(|x| x.turn_id.as_deref() == Some(&turn))
                        .find_map(|x| match x.payload() {
                            EventData::MessageCompleted(m) => Some(m.text),
                            _ => None,
                        })
                        .ok_or_else(|| {
                            refuse(e.index, "an emitted turn with no text cannot be replayed")
                        })?;
                    plan.turns.push(TurnToRun::Emit { text });
                    continue;
                }
                if let Some(resumed) = &t.resumes {
                    if waiting_at_end.get(resumed).copied().unwrap_or(0) == 0 {
                        return Err(refuse(
                            e.index,
                            &format!(
                                "the turn resumes `{resumed}`, which left no call waiting when it ended; a replay cannot reach this state"
                            ),
                        ));
                    }
                    plan.turns.push(TurnToRun::Resume);
                    continue;
                }
                let received = if t.received.is_empty() {
                    std::mem::take(&mut since_last)
                } else {
                    since_last.retain(|i| !t.received.contains(i));
                    t.received
                };
                let messages: Vec<MessageReceived> =
                    received.into_iter().filter_map(received_at).collect();
                let texts: Vec<&str> = messages.iter().map(|m| m.text.as_str()).collect();
                let mut client_tools: Vec<ClientTool> = Vec::new();
                for m in &messages {
                    for tool in &m.client_tools {
                        if !client_tools.iter().any(|t| t.name == tool.name) {
                            client_tools.push(tool.clone());
                        }
                    }
                }
                let cut = waiting_at_end.get(&turn).copied().unwrap_or(0);
                if cut == 0
                    && let Some((end, Some(reason))) = ended.get(&turn)
                    && matches!(reason.as_str(), "restart" | "shutdown")
                {
                    return Err(refuse(
                        *end,
                        &format!(
                            "a {reason} cut the turn short while it ran, with no call waiting: a replay cannot cut it at the same point"
                        ),
                    ));
                }
                plan.turns.push(TurnToRun::Send {
                    text: texts.join("\n\n"),
                    client_tools,
                    cut,
                });
            }
            _ => {}
        }
    }
    Ok(plan)
}

/// Re-runs the turns of the session `recorded` holds against the
/// project, answering every model call from the log, and compares the
/// events. Fails (not a divergence) when the project cannot be served or
/// the session holds what a replay cannot answer.
pub async fn replay(recorded: &[Event], options: ReplayOptions) -> Result<Replayed> {
    let log = agentkit_harness::recorded_log(recorded);
    if let Some(why) = log.unsupported {
        return Err(Error::Config {
            message: format!("this session cannot be replayed: {why}"),
        });
    }
    let plan = plan_of(recorded)?;
    if plan.turns.is_empty() {
        return Err(Error::Config {
            message: "the recorded session has no turn to replay".to_owned(),
        });
    }
    let live_model = options.model.is_some();
    let session = Arc::new(agentkit_harness::RecordedSession::new(
        (!live_model).then(|| log.answers.into_iter().map(|a| a.answer).collect()),
        (!options.live_tools).then_some(log.results),
    ));
    let providers = agentkit_harness::ProviderConfig {
        cassette: Some(agentkit_harness::Cassette::Session(session)),
        ..options.providers.clone()
    };
    let serve_options = crate::ServeOptions {
        port: 0,
        dev: true,
        state_root: Some(options.state_root.clone()),
        providers,
        model: options.model.clone(),
        ..crate::ServeOptions::default()
    };
    let server = Server::start(&options, &serve_options).await?;
    let mut runner = Runner {
        plan: &plan,
        options: &options,
        serve_options: &serve_options,
        server: Some(server),
        cursor: None,
        approvals_seen: 0,
        clients_seen: 0,
        left: Vec::new(),
    };
    let run = runner.run().await;
    if let Some(server) = runner.server.take() {
        server.handle.close().await;
    }
    let (session_id, replayed) = run?;
    let (compared, divergence) = if live_model {
        compare_with(recorded, &replayed, LIVE_MODEL_IGNORED)
    } else {
        compare(recorded, &replayed)
    };
    Ok(Replayed {
        session_id,
        compared,
        divergence,
    })
}

/// The replay's ephemeral server, and a client of the agent replayed.
struct Server {
    handle: crate::ServeHandle,
    slug: String,
    client: Client,
}

impl Server {
    async fn start(options: &ReplayOptions, serve: &crate::ServeOptions) -> Result<Server> {
        let handle = crate::serve(&options.dir, serve.clone()).await?;
        let slugs = handle.slugs();
        let slug = match (&options.agent, slugs.as_slice()) {
            (Some(s), _) if slugs.contains(s) => s.clone(),
            (None, [one]) => one.clone(),
            _ => {
                handle.close().await;
                return Err(Error::Config {
                    message: format!(
                        "choose the agent to replay against (--agent): `{}` holds {}",
                        options.dir.display(),
                        slugs.join(", ")
                    ),
                });
            }
        };
        let client = Client::new(&handle.agent_url(&slug), None);
        Ok(Server {
            handle,
            slug,
            client,
        })
    }
}

/// How a turn's stream ended for the replay.
enum Reached {
    /// The session settled after the turn.
    Settled,
    /// As many calls wait as waited when the recorded turn was cut.
    Cut,
}

/// Runs a plan's turns on the replay's server, in order.
struct Runner<'a> {
    plan: &'a Plan,
    options: &'a ReplayOptions,
    serve_options: &'a crate::ServeOptions,
    /// `None` only while it restarts.
    server: Option<Server>,
    cursor: Option<SessionCursor>,
    /// How many approval requests and client calls the replay has seen.
    approvals_seen: usize,
    clients_seen: usize,
    /// Calls left waiting at a cut (the replay's call id and the recorded
    /// answer), answered once the server restarted.
    left: Vec<(String, Option<Answer>)>,
}

impl Runner<'_> {
    fn server(&self) -> Result<&Server> {
        self.server.as_ref().ok_or_else(|| Error::Config {
            message: "the replay's server did not restart".to_owned(),
        })
    }

    /// Runs every turn; answers the replay's session and its events.
    async fn run(&mut self) -> Result<(String, Vec<Event>)> {
        let timeout = self.options.turn_timeout;
        for (n, turn) in self.plan.turns.iter().enumerate() {
            let ran = tokio::time::timeout(timeout, self.turn(turn)).await;
            match ran {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    return Err(Error::Config {
                        message: format!("replaying turn {}: {e}", n + 1),
                    });
                }
                Err(_) => {
                    return Err(Error::Config {
                        message: format!(
                            "replaying turn {} took longer than {}s",
                            n + 1,
                            timeout.as_secs()
                        ),
                    });
                }
            }
        }
        let Some(cursor) = &self.cursor else {
            return Err(Error::Config {
                message: "the replay sent nothing".to_owned(),
            });
        };
        let events = self
            .server()?
            .client
            .events(&cursor.session_id)
            .await
            .map_err(|e| Error::Config {
                message: format!("reading the replay's events: {e}"),
            })?;
        Ok((cursor.session_id.clone(), events))
    }

    async fn turn(&mut self, turn: &TurnToRun) -> Result<()> {
        let failed = |what: &str, e: &dyn std::fmt::Display| Error::Config {
            message: format!("{what}: {e}"),
        };
        match turn {
            TurnToRun::Send {
                text,
                client_tools,
                cut,
            } => {
                let message = SendMessage {
                    client_tools: client_tools.clone(),
                    ..SendMessage::new(text.clone())
                };
                let client = &self.server()?.client;
                let (accepted, start) = match &self.cursor {
                    None => (client.create_session_with(&message).await, 0),
                    Some(c) => (
                        client
                            .follow_up_as(&c.session_id, &c.continuation_token, &message)
                            .await,
                        c.next_index,
                    ),
                };
                let accepted = accepted.map_err(|e| failed("sending the message", &e))?;
                self.cursor = Some(SessionCursor {
                    session_id: accepted.session_id,
                    continuation_token: accepted.continuation_token,
                    next_index: start,
                });
                match self.follow(*cut).await? {
                    Reached::Settled => Ok(()),
                    Reached::Cut => self.restart().await,
                }
            }
            TurnToRun::Emit { text } => {
                let Some(session) = self.cursor.as_ref().map(|c| c.session_id.clone()) else {
                    return Err(failed("emitting text", &"no session was started before it"));
                };
                let server = self.server()?;
                // The entry point a channel's `emit_assistant_message` takes.
                server
                    .handle
                    .runtime(&server.slug)?
                    .emit_assistant_message(&session, text)
                    .await
                    .map_err(|e| failed("emitting text", &e))?;
                let events = server
                    .client
                    .events(&session)
                    .await
                    .map_err(|e| failed("reading the replay's events", &e))?;
                if let Some(cursor) = self.cursor.as_mut() {
                    cursor.next_index = events.last().map_or(0, |e| e.index + 1);
                }
                Ok(())
            }
            TurnToRun::Resume => {
                let Some(cursor) = &self.cursor else {
                    return Err(failed("resuming", &"no session was started before it"));
                };
                let session = cursor.session_id.clone();
                let left = std::mem::take(&mut self.left);
                if left.is_empty() {
                    return Err(failed("resuming", &"no call of the replay waits"));
                }
                for (call_id, answer) in left {
                    self.answer(&session, &call_id, answer).await?;
                }
                match self.follow(0).await? {
                    Reached::Settled => Ok(()),
                    Reached::Cut => Ok(()),
                }
            }
        }
    }

    /// Gives the recorded answer to the replay's call `call_id` (a call
    /// the recording never answered is left waiting).
    async fn answer(&self, session: &str, call_id: &str, answer: Option<Answer>) -> Result<()> {
        let client = &self.server()?.client;
        let done = match answer {
            Some(Answer::Approval { approve, reason }) => client
                .resolve_approval(session, call_id, approve, reason.as_deref())
                .await
                .map(|_| ()),
            Some(Answer::Client { output, is_error }) => client
                .answer_client_calls(
                    session,
                    vec![ClientResult {
                        call_id: call_id.to_owned(),
                        output,
                        is_error,
                    }],
                )
                .await
                .map(|_| ()),
            None => Ok(()),
        };
        done.map_err(|e| Error::Config {
            message: format!("answering call {call_id} as the recording did: {e}"),
        })
    }

    /// Reads the replay's stream from the cursor until the session
    /// settles after a turn started there, answering waiting calls as
    /// the recording answered them within their turn; with `cut` > 0,
    /// until as many calls wait unanswered.
    async fn follow(&mut self, cut: usize) -> Result<Reached> {
        let Some((session, start)) = self
            .cursor
            .as_ref()
            .map(|c| (c.session_id.clone(), c.next_index))
        else {
            return Err(Error::Config {
                message: "the replay sent nothing".to_owned(),
            });
        };
        let client = self.server()?.client.clone();
        let stream = client
            .stream(&session, start)
            .await
            .map_err(|e| Error::Config {
                message: format!("reading the replay's stream: {e}"),
            })?;
        let mut stream = std::pin::pin!(stream);
        let mut started = false;
        let mut waiting = 0;
        while let Some(event) = stream.next().await {
            let event = event.map_err(|e| Error::Config {
                message: format!("reading the replay's stream: {e}"),
            })?;
            if let Some(c) = self.cursor.as_mut() {
                c.next_index = c.next_index.max(event.index + 1);
            }
            let mut asked: Vec<(String, Option<Answered>, bool)> = Vec::new();
            match event.payload() {
                EventData::TurnStarted(_) => started = true,
                EventData::SessionWaiting
                | EventData::SessionCompleted
                | EventData::SessionFailed(_)
                    if started =>
                {
                    return Ok(Reached::Settled);
                }
                EventData::ApprovalRequested(r) => {
                    let recorded = self.plan.approvals.get(self.approvals_seen).cloned();
                    self.approvals_seen += 1;
                    asked.push((r.call_id, recorded.flatten(), true));
                }
                EventData::ClientActionsRequested(r) => {
                    for c in r.calls {
                        let recorded = self.plan.client_calls.get(self.clients_seen).cloned();
                        self.clients_seen += 1;
                        asked.push((c.call_id, recorded.flatten(), false));
                    }
                }
                _ => {}
            }
            for (call_id, recorded, approval) in asked {
                match recorded {
                    Some(a) if !a.after_cut => {
                        self.answer(&session, &call_id, Some(a.answer)).await?;
                    }
                    Some(a) => {
                        self.left.push((call_id, Some(a.answer)));
                        waiting += 1;
                    }
                    None if cut > 0 => {
                        self.left.push((call_id, None));
                        waiting += 1;
                    }
                    None => {
                        // More calls than the recording: deny them (the
                        // comparison shows where the runs part).
                        let answer = if approval {
                            Answer::Approval {
                                approve: false,
                                reason: Some("the recorded session has no decision".into()),
                            }
                        } else {
                            Answer::Client {
                                output: "the recorded session has no result for this call".into(),
                                is_error: true,
                            }
                        };
                        self.answer(&session, &call_id, Some(answer)).await?;
                    }
                }
            }
            if cut > 0 && waiting >= cut {
                return Ok(Reached::Cut);
            }
        }
        Err(Error::Config {
            message: "the replay's stream ended before the session settled".to_owned(),
        })
    }

    /// Restarts the replay's server on the same state, as the recorded
    /// session's server restarted while its calls waited.
    async fn restart(&mut self) -> Result<()> {
        // The old server closes first: the state is one server's at a time.
        if let Some(old) = self.server.take() {
            old.handle.close().await;
        }
        self.server = Some(Server::start(self.options, self.serve_options).await?);
        Ok(())
    }
}

/// Streamed deltas: how a stream was cut, not what happened (the
/// completed text is compared).
fn compared_type(t: EventType) -> bool {
    !matches!(t, EventType::MessageAppended | EventType::ReasoningAppended)
}

/// Fields that differ between any two runs: ids, times, who decided,
/// and log indices (`received`: deltas are streamed in other cuts, so
/// indices move).
const IGNORED: &[&str] = &[
    "received",
    "callId",
    "durationMs",
    "trace",
    "traceparent",
    "requestedAt",
    "by",
    "from",
];

/// With a live model, what is bound to differ besides: the model, what
/// it counted and cost, and the requests' digests and sizes.
const LIVE_MODEL_IGNORED: &[&str] = &[
    "received",
    "callId",
    "durationMs",
    "trace",
    "traceparent",
    "requestedAt",
    "by",
    "from",
    "request",
    "model",
    "usage",
    "costUsd",
    "estimatedInputTokens",
    "sizing",
];

/// Each turn id of a log, numbered in the order its turns started.
fn turn_numbers(events: &[Event]) -> std::collections::HashMap<&str, usize> {
    events
        .iter()
        .filter(|e| e.event_type == EventType::TurnStarted)
        .filter_map(|e| e.turn_id.as_deref())
        .enumerate()
        .map(|(n, t)| (t, n + 1))
        .collect()
}

/// An event as compared: its type and its data without the fields that
/// differ between runs (`session.started` only by its mode); the turn a
/// turn resumes by its number in the log (`turns`), its id differing.
fn normalized(
    e: &Event,
    ignored: &[&str],
    turns: &std::collections::HashMap<&str, usize>,
) -> Value {
    fn strip(v: &mut Value, ignored: &[&str]) {
        match v {
            Value::Object(map) => {
                for key in ignored {
                    map.remove(*key);
                }
                for v in map.values_mut() {
                    strip(v, ignored);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| strip(v, ignored)),
            _ => {}
        }
    }
    let mut data = if e.event_type == EventType::SessionStarted {
        serde_json::json!({"mode": e.data.get("mode")})
    } else {
        e.data.clone()
    };
    strip(&mut data, ignored);
    // A replay restarts its server by closing it where the recorded one
    // may have been killed: both cut the turn while its calls waited.
    if e.event_type == EventType::TurnFailed && data.get("reason") == Some(&Value::from("shutdown"))
    {
        data["reason"] = Value::from("restart");
    }
    if let Some(resumed) = data.get("resumes").and_then(Value::as_str) {
        let n = turns.get(resumed).copied().unwrap_or(0);
        data["resumes"] = Value::from(format!("turn {n}"));
    }
    serde_json::json!({"type": e.event_type.as_str(), "data": data})
}

/// Compares the recorded events with the replay's, in order; answers how
/// many were compared and the first difference.
pub fn compare(recorded: &[Event], replayed: &[Event]) -> (usize, Option<Divergence>) {
    compare_with(recorded, replayed, IGNORED)
}

/// [`compare`], leaving out the fields `ignored` names.
fn compare_with(
    recorded: &[Event],
    replayed: &[Event],
    ignored: &[&str],
) -> (usize, Option<Divergence>) {
    let before: Vec<&Event> = recorded
        .iter()
        .filter(|e| compared_type(e.event_type))
        .collect();
    let after: Vec<&Event> = replayed
        .iter()
        .filter(|e| compared_type(e.event_type))
        .collect();
    let (turns_before, turns_after) = (turn_numbers(recorded), turn_numbers(replayed));
    for (n, (b, a)) in before.iter().zip(&after).enumerate() {
        let (changes, _) = json_changes(
            &normalized(b, ignored, &turns_before),
            &normalized(a, ignored, &turns_after),
            1,
        );
        if let Some(change) = changes.into_iter().next() {
            let note = note_for(&change.path);
            return (
                n + 1,
                Some(Divergence {
                    index: b.index,
                    event_type: b.event_type.as_str().to_owned(),
                    field: change.path,
                    before: change.before.unwrap_or_else(|| "(absent)".into()),
                    after: change.after.unwrap_or_else(|| "(absent)".into()),
                    note,
                }),
            );
        }
    }
    let n = before.len().min(after.len());
    let divergence = match (before.get(n), after.get(n)) {
        (Some(b), None) => Some(Divergence {
            index: b.index,
            event_type: b.event_type.as_str().to_owned(),
            field: "/type".into(),
            before: b.event_type.as_str().to_owned(),
            after: "(the replay ended)".into(),
            note: None,
        }),
        (None, Some(a)) => Some(Divergence {
            index: recorded.last().map_or(0, |e| e.index + 1),
            event_type: a.event_type.as_str().to_owned(),
            field: "/type".into(),
            before: "(the recording ended)".into(),
            after: a.event_type.as_str().to_owned(),
            note: None,
        }),
        _ => None,
    };
    (n, divergence)
}

/// What a differing field of a step's request digest means.
fn note_for(path: &str) -> Option<String> {
    let part = path.strip_prefix("/data/request/")?;
    let what = match part {
        "system" => "the system prompt (instructions, skills) differs from the recorded run's",
        "tools" => "the tool catalog differs from the recorded run's",
        "messages" => "the conversation sent differs from the recorded run's",
        "params" => "the model's params differ from the recorded run's",
        "model" => "the model differs from the recorded run's",
        _ => return None,
    };
    Some(what.to_owned())
}

/// What `eval add` wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalCaseAdded {
    /// The eval case's id (`<name>`).
    pub id: String,
    pub case_file: PathBuf,
    /// Where its recordings went (`evals/cassettes`).
    pub cassette_dir: PathBuf,
    pub recordings: usize,
    /// What the case may not cover (a subagent that took several steps,
    /// a compaction whose turn can no longer be rebuilt).
    pub warnings: Vec<String>,
}

/// Writes session `session_id` (read through `client`) into `project` as
/// the eval case `name`: its user messages as turns, the tools each turn
/// called (in order) and how it ended as expectations, and a recording
/// per step in `evals/cassettes/`, so that `agentkit eval --replay
/// evals/cassettes` passes on the unchanged project. Refuses to
/// overwrite an existing case.
pub async fn add_eval_case(
    client: &Client,
    session_id: &str,
    name: &str,
    project: &Path,
) -> Result<EvalCaseAdded> {
    let bad = |message: String| Error::Config { message };
    check_case_name(name)?;
    let events = client
        .events(session_id)
        .await
        .map_err(|e| bad(format!("reading session {session_id}: {e}")))?;
    let cassette = client.cassette(session_id).await.map_err(|e| {
        bad(format!(
            "reading the recordings of session {session_id}: {e}"
        ))
    })?;
    write_eval_case(&events, &cassette, session_id, name, project)
}

/// An eval id: letters, digits, `-`, `_` and `.` in parts between `/`,
/// none empty or starting with `.` (it names a file under `evals/`).
fn check_case_name(name: &str) -> Result<()> {
    if name.is_empty()
        || name.split('/').any(|part| {
            part.is_empty()
                || part.starts_with('.')
                || !part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        })
    {
        return Err(Error::Config {
            message: format!(
                "`{name}` is not an eval id: use letters, digits, `-`, `_` and `/` between parts"
            ),
        });
    }
    Ok(())
}

/// [`add_eval_case`] from a session's events and recordings already read
/// (the dev route `POST /v1/dev/evals/cases` reads them in process).
pub(crate) fn write_eval_case(
    events: &[agentkit_protocol::Event],
    cassette: &agentkit_protocol::api::SessionCassette,
    session_id: &str,
    name: &str,
    project: &Path,
) -> Result<EvalCaseAdded> {
    let bad = |message: String| Error::Config { message };
    check_case_name(name)?;
    let turns = plan_of(events)?.messages(events)?;
    if turns.is_empty() {
        return Err(bad(format!("session {session_id} has no turn")));
    }
    let evals = project.join("evals");
    let case_file = evals.join(format!("{name}.eval.toml"));
    if case_file.exists() {
        return Err(Error::WouldOverwrite {
            paths: vec![case_file],
        });
    }
    let text = case_toml(session_id, events, &turns);
    let write = |path: &Path, text: &str| -> Result<()> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| Error::Write {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        std::fs::write(path, text).map_err(|source| Error::Write {
            path: path.to_path_buf(),
            source,
        })
    };
    let settings = evals.join("evals.toml");
    if !settings.exists() {
        write(&settings, "max_concurrency = 4\n")?;
    }
    let cassette_dir = evals.join("cassettes");
    for file in &cassette.files {
        let body = serde_json::to_string_pretty(&file.exchange)
            .map_err(|e| bad(format!("cannot encode recording {}: {e}", file.name)))?;
        write(&cassette_dir.join(&file.name), &body)?;
    }
    write(&case_file, &text)?;
    let mut warnings = Vec::new();
    if cassette.compactions > 0 {
        warnings.push(format!(
            "the session compacted its conversation {} time(s): a replay of the case asks for summaries no recording answers",
            cassette.compactions
        ));
    }
    if let Some(why) = cassette.unsupported.clone() {
        warnings.push(why);
    }
    Ok(EvalCaseAdded {
        id: name.to_owned(),
        case_file,
        cassette_dir,
        recordings: cassette.files.len(),
        warnings,
    })
}

/// The eval file of a session: `[[turns]]` with what each turn sent, the
/// tools it called and how it ended.
fn case_toml(session_id: &str, events: &[Event], turns: &[String]) -> String {
    let quote = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    // Per turn, in order: the tools called and the outcome.
    let mut called: Vec<Vec<String>> = Vec::new();
    let mut ended: Vec<Option<bool>> = Vec::new();
    let mut replies: Vec<Option<String>> = Vec::new();
    let mut decided: Vec<Vec<String>> = Vec::new();
    for e in events {
        match e.payload() {
            EventData::ApprovalResolved(r) => {
                if let Some(d) = decided.last_mut() {
                    let reason = r
                        .reason
                        .map(|r| format!(", reason = {}", quote(&r)))
                        .unwrap_or_default();
                    d.push(format!(
                        "{{ tool = {}, approve = {}{reason} }}",
                        quote(&r.tool_name),
                        r.decision == "approve"
                    ));
                }
            }
            EventData::TurnStarted(_) => {
                decided.push(Vec::new());
                called.push(Vec::new());
                ended.push(None);
                replies.push(None);
            }
            EventData::ActionsRequested(r) if !r.direct => {
                if let Some(c) = called.last_mut() {
                    c.extend(r.calls.into_iter().map(|c| c.tool_name));
                }
            }
            EventData::TurnCompleted(t) => {
                if let Some(o) = ended.last_mut() {
                    *o = Some(true);
                }
                if let Some(r) = replies.last_mut() {
                    *r = Some(t.result);
                }
            }
            EventData::TurnFailed(_) => {
                if let Some(o) = ended.last_mut() {
                    *o = Some(false);
                }
            }
            _ => {}
        }
    }
    let mut out = format!(
        "# Written by `agentkit eval add` from session {session_id}: replay it offline\n# with `agentkit eval --replay evals/cassettes`.\ndescription = {}\n",
        quote(&format!("session {session_id} as it ran"))
    );
    for (i, turn) in turns.iter().enumerate() {
        out.push_str(&format!("\n[[turns]]\nsend = {}\n", quote(turn)));
        if let Some(d) = decided.get(i).filter(|d| !d.is_empty()) {
            out.push_str(&format!("approvals = [{}]\n", d.join(", ")));
        }
        out.push_str("[turns.expect]\n");
        if let Some(Some(ok)) = ended.get(i) {
            out.push_str(&format!("succeeded = {ok}\n"));
        }
        let calls = called.get(i).cloned().unwrap_or_default();
        if !calls.is_empty() {
            let mut unique: Vec<&String> = Vec::new();
            for c in &calls {
                if !unique.contains(&c) {
                    unique.push(c);
                }
            }
            let list = |names: &[&String]| {
                names
                    .iter()
                    .map(|n| quote(n))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            out.push_str(&format!("called_tool = [{}]\n", list(&unique)));
            if calls.len() > 1 {
                let ordered: Vec<&String> = calls.iter().collect();
                out.push_str(&format!("tool_order = [{}]\n", list(&ordered)));
            }
        }
        if let Some(Some(reply)) = replies.get(i) {
            let head: String = reply
                .lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(80)
                .collect();
            if !head.trim().is_empty() {
                out.push_str(&format!("reply = {{ contains = {} }}\n", quote(&head)));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn ev(index: u64, t: EventType, data: Value) -> Event {
        serde_json::from_value(json!({
            "type": t.as_str(), "index": index, "sessionId": "ses_a", "turnId": "turn_1",
            "at": "2026-01-01T00:00:00.000Z", "data": data,
        }))
        .unwrap()
    }

    #[test]
    fn ids_times_and_deltas_are_not_differences() {
        let a = vec![
            ev(0, EventType::MessageAppended, json!({"delta": "Hel"})),
            ev(
                1,
                EventType::ActionResult,
                json!({"callId": "c1", "toolName": "list", "output": 1, "isError": false, "durationMs": 5}),
            ),
        ];
        let mut b = a.clone();
        b[0].data = json!({"delta": "Hello"});
        b[1].data["callId"] = json!("c9");
        b[1].data["durationMs"] = json!(7);
        assert_eq!(compare(&a, &b), (1, None));
        b[1].data["output"] = json!(2);
        let (_, d) = compare(&a, &b);
        let d = d.unwrap();
        assert_eq!((d.index, d.field.as_str()), (1, "/data/output"));
        assert_eq!((d.before.as_str(), d.after.as_str()), ("1", "2"));
    }

    #[test]
    fn a_changed_request_names_its_part() {
        let a = vec![ev(
            3,
            EventType::StepStarted,
            json!({"step": 1, "request": {"model": "openai:m", "system": "aa", "tools": "bb", "messages": "cc", "params": "dd"}}),
        )];
        let mut b = a.clone();
        b[0].data["request"]["system"] = json!("ee");
        let (_, d) = compare(&a, &b);
        let d = d.unwrap();
        assert_eq!(d.field, "/data/request/system");
        assert!(d.to_string().contains("the system prompt"), "{d}");
    }
}
