//! A stored session, run again or kept as a test: `agentkit replay`
//! re-runs a session's turns against a project with the model's answers
//! (and, unless tools run live, the tools' results) taken from its log,
//! then compares the new events with the recorded ones; `agentkit eval
//! add` writes a session as an eval case with the recordings that let
//! `agentkit eval --replay` answer it.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentkit_client::{Client, SessionCursor};
use agentkit_protocol::api::{SendMessage, json_changes};
use agentkit_protocol::{Event, EventData, EventType};
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

/// One turn to send again: its user message (the messages it answered,
/// joined as a turn joins them).
#[derive(Debug, Clone, PartialEq)]
struct TurnToSend {
    text: String,
}

/// What a recorded session's turns were sent, in order.
fn turns_of(events: &[Event]) -> Result<Vec<TurnToSend>> {
    let mut turns = Vec::new();
    let mut since_last: Vec<u64> = Vec::new();
    let text_at = |i: u64| {
        events
            .iter()
            .find(|e| e.index == i)
            .and_then(|e| match e.payload() {
                EventData::MessageReceived(m) => Some(m.text),
                _ => None,
            })
    };
    for e in events {
        match e.payload() {
            EventData::MessageReceived(_) => since_last.push(e.index),
            EventData::TurnStarted(t) => {
                if t.kind.is_some() || t.resumes.is_some() {
                    return Err(Error::Config {
                        message: format!(
                            "event {}: a turn with no message of its own (a channel's emitted text, or a call decided after a restart) cannot be replayed",
                            e.index
                        ),
                    });
                }
                let received = if t.received.is_empty() {
                    std::mem::take(&mut since_last)
                } else {
                    since_last.retain(|i| !t.received.contains(i));
                    t.received
                };
                let texts: Vec<String> = received.into_iter().filter_map(text_at).collect();
                turns.push(TurnToSend {
                    text: texts.join("\n\n"),
                });
            }
            _ => {}
        }
    }
    Ok(turns)
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
    let turns = turns_of(recorded)?;
    if turns.is_empty() {
        return Err(Error::Config {
            message: "the recorded session has no turn to replay".to_owned(),
        });
    }
    let decisions: VecDeque<(bool, Option<String>)> = recorded
        .iter()
        .filter_map(|e| match e.payload() {
            EventData::ApprovalResolved(r) => Some((r.decision == "approve", r.reason)),
            _ => None,
        })
        .collect();
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
    let handle = crate::serve(&options.dir, serve_options).await?;
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
    let run = run_turns(&client, &turns, decisions, options.turn_timeout).await;
    handle.close().await;
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

/// Sends each turn's message and waits for it to settle, deciding parked
/// calls as the recording decided them; answers the replay's session and
/// its events.
async fn run_turns(
    client: &Client,
    turns: &[TurnToSend],
    decisions: VecDeque<(bool, Option<String>)>,
    timeout: Duration,
) -> Result<(String, Vec<Event>)> {
    let decisions = Arc::new(Mutex::new(decisions));
    let mut cursor: Option<SessionCursor> = None;
    for (n, turn) in turns.iter().enumerate() {
        let decider = client.clone();
        let queue = decisions.clone();
        let on_event = move |e: &Event| {
            if e.event_type != EventType::ActionApprovalRequested {
                return;
            }
            let EventData::ApprovalRequested(r) = e.payload() else {
                return;
            };
            let next = queue.lock().ok().and_then(|mut q| q.pop_front());
            let (approve, reason) =
                next.unwrap_or((false, Some("the recorded session has no decision".into())));
            let client = decider.clone();
            let session = e.session_id.to_string();
            tokio::spawn(async move {
                if let Err(e) = client
                    .resolve_approval(&session, &r.call_id, approve, reason.as_deref())
                    .await
                {
                    tracing::warn!(error = %e, "replay: cannot decide a parked call");
                }
            });
        };
        let sent = tokio::time::timeout(
            timeout,
            client.run_turn_as(&mut cursor, &SendMessage::new(turn.text.clone()), on_event),
        )
        .await;
        match sent {
            Ok(Ok(_)) => {}
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
    let Some(cursor) = cursor else {
        return Err(Error::Config {
            message: "the replay sent nothing".to_owned(),
        });
    };
    let events = client
        .events(&cursor.session_id)
        .await
        .map_err(|e| Error::Config {
            message: format!("reading the replay's events: {e}"),
        })?;
    Ok((cursor.session_id, events))
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

/// An event as compared: its type and its data without the fields that
/// differ between runs (`session.started` only by its mode).
fn normalized(e: &Event, ignored: &[&str]) -> Value {
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
    for (n, (b, a)) in before.iter().zip(&after).enumerate() {
        let (changes, _) = json_changes(&normalized(b, ignored), &normalized(a, ignored), 1);
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
    /// What the case may not cover (compactions, subagents, approvals).
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
    let turns = turns_of(events)?;
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
    if events
        .iter()
        .any(|e| e.event_type == EventType::ActionApprovalRequested)
    {
        warnings.push(
            "the session had calls parked for approval: an eval run denies them, so the case departs from the session there".to_owned(),
        );
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
fn case_toml(session_id: &str, events: &[Event], turns: &[TurnToSend]) -> String {
    let quote = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    // Per turn, in order: the tools called and the outcome.
    let mut called: Vec<Vec<String>> = Vec::new();
    let mut ended: Vec<Option<bool>> = Vec::new();
    let mut replies: Vec<Option<String>> = Vec::new();
    for e in events {
        match e.payload() {
            EventData::TurnStarted(_) => {
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
        out.push_str(&format!(
            "\n[[turns]]\nsend = {}\n[turns.expect]\n",
            quote(&turn.text)
        ));
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
