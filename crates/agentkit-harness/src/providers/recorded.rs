//! Answers from a recorded session, for `agentkit replay`: every model
//! call (a step, or a compaction's summary) takes the next answer the
//! session's log recorded, in order, and, unless tools run live, every
//! tool call takes the result the log recorded for the same tool and
//! input. No provider is called.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use agentkit_protocol::{ToolCall, Usage};
use serde_json::Value;

use super::{ModelReply, StepRequest, StepSink};
use crate::tools::ToolOutput;

/// One model answer of a recorded session.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecordedAnswer {
    pub reasoning: Option<String>,
    pub text: String,
    pub tool_calls: Vec<RecordedToolCall>,
    pub usage: Usage,
}

/// A tool call a recorded answer asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedToolCall {
    pub tool_name: String,
    pub input: Value,
    /// The id the call had (a replay gives it again, so the requests
    /// that carry it are as long as the recorded ones); `None`: a fresh
    /// one.
    pub call_id: Option<String>,
}

/// A tool call's recorded result.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedResult {
    pub tool_name: String,
    pub input: Value,
    pub output: Value,
    pub is_error: bool,
}

/// Recorded tool results by tool name and input (as JSON text), each
/// list in the order the calls came.
type Results = HashMap<(String, String), VecDeque<(Value, bool)>>;

/// A recorded session's answers, taken in order, and its tool results
/// (`None`: tools run live).
#[derive(Debug)]
pub struct RecordedSession {
    /// `None`: the model runs live (only tool results come from the log).
    answers: Option<Mutex<VecDeque<RecordedAnswer>>>,
    results: Option<Mutex<Results>>,
}

impl RecordedSession {
    /// `answers`: the model's answers in order (`None`: the model runs
    /// live); `results`: the tools' (`None`: they run live).
    pub fn new(answers: Option<Vec<RecordedAnswer>>, results: Option<Vec<RecordedResult>>) -> Self {
        let results = results.map(|all| {
            let mut map = Results::new();
            for r in all {
                map.entry((r.tool_name, r.input.to_string()))
                    .or_default()
                    .push_back((r.output, r.is_error));
            }
            Mutex::new(map)
        });
        RecordedSession {
            answers: answers.map(|a| Mutex::new(a.into())),
            results,
        }
    }

    /// Does the log answer the model (else the model runs live)?
    pub fn answers_model(&self) -> bool {
        self.answers.is_some()
    }

    /// How many recorded answers no call took.
    pub fn unused_answers(&self) -> usize {
        self.answers
            .as_ref()
            .and_then(|a| a.lock().ok().map(|a| a.len()))
            .unwrap_or(0)
    }

    pub(crate) fn next_answer(&self) -> Option<RecordedAnswer> {
        self.answers.as_ref()?.lock().ok()?.pop_front()
    }

    /// The recorded result of a call of `tool` with `input`; `None` when
    /// tools run live. A call the log has no result for answers an error
    /// saying so (the replay then diverges there).
    pub fn result(&self, tool: &str, input: &Value) -> Option<ToolOutput> {
        let results = self.results.as_ref()?;
        let taken = results.lock().ok().and_then(|mut m| {
            m.get_mut(&(tool.to_owned(), input.to_string()))?
                .pop_front()
        });
        Some(match taken {
            Some((output, is_error)) => ToolOutput { output, is_error },
            None => ToolOutput::error(format!(
                "replay: the recorded session has no result for this call of `{tool}`"
            )),
        })
    }

    /// Answers one step with the next recorded answer.
    pub(crate) async fn step(
        &self,
        request: &StepRequest<'_>,
        sink: &mut StepSink<'_>,
    ) -> Result<ModelReply, String> {
        let Some(answer) = self.next_answer() else {
            return Err("replay: the recorded session has no more model answers".to_owned());
        };
        if let Some(r) = answer.reasoning.as_ref().filter(|r| !r.is_empty()) {
            sink.reasoning(r).await;
        }
        if !answer.text.is_empty() {
            sink.text(&answer.text).await;
        }
        Ok(ModelReply {
            tool_calls: answer
                .tool_calls
                .into_iter()
                .enumerate()
                .map(|(i, c)| ToolCall {
                    call_id: c.call_id.unwrap_or_else(|| request.call_id(i)),
                    tool_name: c.tool_name,
                    input: c.input,
                })
                .collect(),
            usage: answer.usage,
        })
    }
}

/// A model answer of a stored session's log, with what asked for it.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedAnswer {
    pub asked: Asked,
    pub answer: RecordedAnswer,
}

/// What asked a logged model answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Asked {
    /// Step `step` of turn `turn_id`.
    Step { turn_id: String, step: u32 },
    /// The summary request of the compaction logged at event `index` of
    /// turn `turn_id`, which folded its first `messages` messages.
    Compaction {
        turn_id: String,
        index: u64,
        messages: usize,
    },
    /// The one step of subagent `subagent`, run by a `task` call of turn
    /// `turn_id` on `prompt`.
    Subagent {
        turn_id: String,
        subagent: String,
        prompt: String,
    },
}

/// What a stored session's log recorded of its model and tool calls, in
/// order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecordedLog {
    pub answers: Vec<LoggedAnswer>,
    pub results: Vec<RecordedResult>,
    /// A part of the session a replay cannot answer from the log (a
    /// subagent that took several steps: the log keeps its final answer,
    /// not the messages between its steps), when there is one.
    pub unsupported: Option<String>,
}

/// Reads the model answers (reasoning, text, tool calls, usage) and tool
/// results a session's events recorded.
pub fn recorded_log(events: &[agentkit_protocol::Event]) -> RecordedLog {
    use agentkit_protocol::EventData;
    let mut log = RecordedLog::default();
    let mut current: Option<usize> = None;
    let mut inputs: HashMap<String, (String, Value)> = HashMap::new();
    // Per `task` call: the subagent's prompt and its steps' usage.
    let mut subagents: HashMap<String, (String, Vec<(String, Usage)>)> = HashMap::new();
    let turn_of = |e: &agentkit_protocol::Event| e.turn_id.clone().unwrap_or_default();
    for e in events {
        match e.payload() {
            EventData::ContextCompacted(c) => log.answers.push(LoggedAnswer {
                asked: Asked::Compaction {
                    turn_id: turn_of(e),
                    index: e.index,
                    messages: c.messages,
                },
                answer: RecordedAnswer {
                    text: c.summary,
                    usage: c.usage,
                    ..RecordedAnswer::default()
                },
            }),
            EventData::StepStarted(s) => {
                current = Some(log.answers.len());
                log.answers.push(LoggedAnswer {
                    asked: Asked::Step {
                        turn_id: turn_of(e),
                        step: s.step,
                    },
                    answer: RecordedAnswer::default(),
                });
            }
            EventData::ReasoningCompleted(r) => {
                if let Some(a) = current.and_then(|i| log.answers.get_mut(i)) {
                    let kept = a.answer.reasoning.get_or_insert_with(String::new);
                    kept.push_str(&r.text);
                }
            }
            EventData::MessageCompleted(m) => {
                if let Some(a) = current.and_then(|i| log.answers.get_mut(i)) {
                    a.answer.text = m.text;
                }
            }
            EventData::ActionsRequested(r) => {
                if let Some(a) = current.and_then(|i| log.answers.get_mut(i)) {
                    a.answer.tool_calls = r
                        .calls
                        .iter()
                        .map(|c| RecordedToolCall {
                            tool_name: c.tool_name.clone(),
                            input: c.input.clone(),
                            call_id: Some(c.call_id.clone()),
                        })
                        .collect();
                }
                for c in r.calls {
                    inputs.insert(c.call_id, (c.tool_name, c.input));
                }
            }
            EventData::ActionResult(r) => {
                let input = inputs
                    .get(&r.call_id)
                    .map(|(_, input)| input.clone())
                    .unwrap_or(Value::Null);
                log.results.push(RecordedResult {
                    tool_name: r.tool_name,
                    input,
                    output: r.output,
                    is_error: r.is_error,
                });
            }
            EventData::StepCompleted(s) => {
                if let Some(a) = current.take().and_then(|i| log.answers.get_mut(i)) {
                    a.answer.usage = s.usage.unwrap_or_default();
                }
            }
            EventData::SubagentCalled(s) => {
                subagents.insert(s.call_id, (s.prompt, Vec::new()));
            }
            EventData::SubagentStep(s) => {
                if let Some((_, steps)) = subagents.get_mut(&s.call_id) {
                    steps.push((s.finish_reason, s.usage.unwrap_or_default()));
                }
            }
            EventData::SubagentCompleted(s) => {
                let (prompt, steps) = subagents.remove(&s.call_id).unwrap_or_default();
                match steps.as_slice() {
                    // One step that answered: its text is the result.
                    [(finish, usage)] if finish == "stop" && !s.is_error => {
                        log.answers.push(LoggedAnswer {
                            asked: Asked::Subagent {
                                turn_id: turn_of(e),
                                subagent: s.subagent,
                                prompt,
                            },
                            answer: RecordedAnswer {
                                text: s.result,
                                usage: *usage,
                                ..RecordedAnswer::default()
                            },
                        });
                    }
                    _ => {
                        log.unsupported.get_or_insert_with(|| {
                            format!(
                                "subagent `{}` took {} step(s) with tool calls or an error; the log keeps its final answer, not the messages between its steps",
                                s.subagent,
                                steps.len()
                            )
                        });
                    }
                }
            }
            _ => {}
        }
    }
    log
}
