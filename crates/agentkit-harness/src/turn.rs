//! The agent loop: one turn, from the user's message to the model's final
//! answer, through as many steps and tool calls as it takes.

use std::future::{Future, poll_fn};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use agentkit_manifest::{Agent, Approval, Execution, ModelSpec, Tool, schema_errors};
use agentkit_protocol::{Message, Sizing, ToolCall, Usage};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::approvals::{ApprovalGate, Decision};
use crate::builtins;
use crate::dynamic::DynTool;
use crate::providers::{Model, StepRequest, StepSink, send};
use crate::step::{FinishReason, StepEvent};
use crate::tools::HostHandle;
use crate::tools::{ToolContext, ToolOutput, run_server_tool};

/// Everything one turn needs.
#[derive(Debug, Clone)]
pub struct TurnInput {
    pub agent: Arc<Agent>,
    /// The resolved model (the host picks it: agent config, A/B variant,
    /// `AGENTKIT_MODEL` or the dev fallback).
    pub model: ModelSpec,
    /// Earlier turns, folded from the event log.
    pub history: Vec<Message>,
    /// This turn's message(s); several coalesced messages become one user
    /// message, joined by blank lines.
    pub user_messages: Vec<String>,
    /// Images attached to this turn's message(s) (workspace paths, see
    /// `MessageReceived::images`).
    pub user_images: Vec<agentkit_protocol::ImageRef>,
    /// The session workspace. It exists once `prepare_workspace` ran (or
    /// from the start, when there is none).
    pub workspace: PathBuf,
    /// Makes the workspace on first use: called once before the turn's
    /// first tool call, so a turn that calls no tool never builds one.
    pub prepare_workspace: Option<Arc<dyn PrepareWorkspace>>,
    pub session_id: String,
    pub turn_id: String,
    /// Fired to interrupt the turn; running tools are killed.
    pub cancel: CancellationToken,
    /// Endpoints and keys of the remote providers.
    pub providers: Arc<crate::credentials::ProviderConfig>,
    /// A dry-run session: tools not annotated `read_only` (and the
    /// built-ins that change the workspace) answer a stub saying what would
    /// have happened instead of running.
    pub dry_run: bool,
    /// The host bridge server tools get in their environment.
    pub host: Option<crate::tools::HostBridge>,
    /// The host's reminders, for the built-in `remind_me` tool (`None`:
    /// the tool answers that reminders are disabled on this host).
    pub reminders: Option<std::sync::Arc<dyn crate::ReminderHost>>,
    /// Tools beyond the agent's files: Rust tools and MCP tools. A name
    /// the agent's files or the built-ins already use is ignored.
    pub tools: Vec<Arc<dyn DynTool>>,
    /// Tools the client declared for this turn (an AG-UI front-end's):
    /// offered beside the agent's own; a call of one waits for the
    /// client's result at `approvals` (`ApprovalGate::park_client`). The
    /// host refuses names the agent's tools already use.
    pub client_tools: Vec<agentkit_protocol::ClientTool>,
    /// Handed to every tool call (`ToolContext::services`).
    pub services: Option<HostHandle>,
    /// Where calls that need approval wait. `None`: such calls are denied
    /// with a result saying approvals are not available in this host.
    pub approvals: Option<Arc<dyn ApprovalGate>>,
    /// The instant a frozen session lives at (ISO-8601 with an offset):
    /// the system prompt states it as the current time, and tools get it
    /// (`ToolContext::as_of`, `AGENTKIT_AS_OF`).
    pub as_of: Option<String>,
    /// The session's channel, continuation key and purpose, handed to
    /// every tool call (`ToolContext::origin`).
    pub origin: crate::tools::CallOrigin,
    /// What the session's earlier turns used (for `max_tokens_per_session`).
    pub prior_usage: Usage,
    /// What all the agent's turns used today, UTC (for `max_tokens_per_day`).
    pub day_usage: Usage,
    /// What the session's earlier turns cost in US dollars, as far as
    /// their prices were known (for `max_cost_usd_per_session`).
    pub prior_cost_usd: f64,
    /// What all the agent's turns cost today, UTC (for
    /// `max_cost_usd_per_day`).
    pub day_cost_usd: f64,
    /// The session's earlier estimates against what the provider counted
    /// (the `sizing` of its completed turns): calibrates this turn's.
    pub prior_sizing: Sizing,
}

/// Materialises a session's workspace when a turn first needs it.
pub trait PrepareWorkspace: Send + Sync + std::fmt::Debug {
    /// Makes the workspace exist; an error is shown to the model as the
    /// result of the calls that needed it.
    fn prepare(&self) -> crate::tools::BoxFuture<'_, Result<(), String>>;
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnOutcome {
    /// The model answered without asking for more tool calls. `output`:
    /// the reply parsed and validated against the agent's `output_schema`.
    Completed {
        result: String,
        usage: Usage,
        output: Option<Value>,
        /// The estimated and counted sizes of the turn's requests (zero
        /// when nothing sized them).
        sizing: Sizing,
        /// What the turn cost in US dollars; `None` when a price is unknown.
        cost_usd: Option<f64>,
    },
    /// The provider failed, `max_steps` was reached or the turn timed out.
    Failed { message: String },
    /// `cancel` fired.
    Interrupted,
    /// A `[harness]` token or money budget would be exceeded: `limit`
    /// names it.
    OverBudget {
        limit: &'static str,
        message: String,
        usage: Usage,
        cost_usd: Option<f64>,
    },
}

/// Runs one turn, reporting each step on `events`. A closed receiver does
/// not stop the turn. Tool errors are results the model sees, never a
/// failed turn.
pub async fn run_turn(input: TurnInput, events: mpsc::Sender<StepEvent>) -> TurnOutcome {
    tracing::debug!(session = %input.session_id, turn = %input.turn_id, "turn running");
    let cancel = input.cancel.clone();
    let timeout = input.agent.config.harness.turn_timeout;
    let clock = TurnClock::new(timeout);
    // Dropping the loop future (interrupt or timeout) drops any running
    // tool calls, whose guards kill their process groups.
    let steps = run_steps(&input, &events, &clock);
    tokio::pin!(steps);
    loop {
        let wake = clock.deadline();
        tokio::select! {
            biased;
            _ = cancel.cancelled() => return TurnOutcome::Interrupted,
            outcome = &mut steps => return outcome,
            _ = tokio::time::sleep_until(wake) => {
                if clock.expired() {
                    return TurnOutcome::Failed {
                        message: format!("turn timed out after {}", humantime::format_duration(timeout)),
                    };
                }
            }
        }
    }
}

/// The turn's timeout, which does not run while a call waits for a human:
/// a turn may wait hours for an approval (`approval_timeout` bounds that).
#[derive(Debug)]
struct TurnClock {
    timeout: std::time::Duration,
    state: std::sync::Mutex<ClockState>,
}

#[derive(Debug)]
struct ClockState {
    start: tokio::time::Instant,
    parked_total: std::time::Duration,
    parked_now: usize,
    parked_since: tokio::time::Instant,
}

/// Keeps the turn clock stopped while it lives.
struct Parked<'a>(&'a TurnClock);

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.parked_now = st.parked_now.saturating_sub(1);
        if st.parked_now == 0 {
            let since = st.parked_since;
            st.parked_total += since.elapsed();
        }
    }
}

impl TurnClock {
    fn new(timeout: std::time::Duration) -> TurnClock {
        let now = tokio::time::Instant::now();
        TurnClock {
            timeout,
            state: std::sync::Mutex::new(ClockState {
                start: now,
                parked_total: std::time::Duration::ZERO,
                parked_now: 0,
                parked_since: now,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ClockState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn park(&self) -> Parked<'_> {
        let mut st = self.lock();
        if st.parked_now == 0 {
            st.parked_since = tokio::time::Instant::now();
        }
        st.parked_now += 1;
        Parked(self)
    }

    /// When the turn times out if nothing parks or unparks meanwhile.
    fn deadline(&self) -> tokio::time::Instant {
        let st = self.lock();
        let far = tokio::time::Instant::now() + std::time::Duration::from_secs(365 * 24 * 3600);
        if st.parked_now > 0 {
            return far;
        }
        st.start
            .checked_add(self.timeout + st.parked_total)
            .unwrap_or(far)
    }

    fn expired(&self) -> bool {
        let st = self.lock();
        st.parked_now == 0 && st.start.elapsed() >= self.timeout.saturating_add(st.parked_total)
    }
}

async fn run_steps(
    input: &TurnInput,
    events: &mpsc::Sender<StepEvent>,
    clock: &TurnClock,
) -> TurnOutcome {
    let turn_index = input
        .history
        .iter()
        .filter(|m| matches!(m, Message::User { .. }))
        .count();
    let model =
        match Model::for_turn(&input.model, &input.agent, turn_index, &input.providers).await {
            Ok(model) => model,
            Err(message) => return TurnOutcome::Failed { message },
        };

    let mut conversation = input.history.clone();
    if !input.user_messages.is_empty() {
        conversation.push(Message::User {
            text: input.user_messages.join("\n\n"),
            images: input.user_images.clone(),
        });
    }
    let mut usage = Usage::default();
    let pricing = crate::pricing::price(&input.model);
    let provider = input.model.provider;
    let priced = |u: &Usage| pricing.map(|p| crate::pricing::cost_of(provider, &p, u));
    let model_label = format!("{}:{}", provider.as_str(), input.model.id);
    // What the turn has cost so far (`None` once any part's price is
    // unknown).
    let mut cost = priced(&Usage::default());
    let harness = &input.agent.config.harness;
    let max_steps = harness.max_steps;
    let window = crate::context::window(&input.model, &input.agent);
    // Sizing a request serialises the whole conversation: only when a
    // window or a token budget needs the estimate.
    let sized = window.is_some()
        || harness.max_tokens_per_session.is_some()
        || harness.max_tokens_per_day.is_some()
        || harness.max_input_tokens_per_turn.is_some();
    // The tools offered: the turn's dynamic ones, then the client's.
    let offered = crate::client_tools::with_client_tools(&input.tools, &input.client_tools);
    let fixed = if sized {
        crate::context::fixed_tokens(&input.agent, &offered, input.as_of.as_deref())
    } else {
        0
    };
    // Estimates are raised when the provider counted more than estimated
    // in the session's earlier turns (fixed for the turn, so a restart
    // and the step-context view size requests as the turn did).
    let factor = crate::context::calibration(input.prior_sizing);
    let cal = |raw: u64| crate::context::calibrated(raw, factor);
    let mut sizing = Sizing::default();
    // The part of `conversation` that came from earlier turns.
    let mut history_len = input.history.len();
    let mut compacted = false;
    let mut invalid_outputs = 0;
    // What the steps' requests share is digested once.
    let digests = crate::providers::TurnDigests::new(
        &input.model,
        &input.agent,
        &offered,
        input.as_of.as_deref(),
    );

    for step in 1..=max_steps {
        // `raw`: the uncalibrated estimate; `estimate`: calibrated.
        let mut raw = if sized {
            fixed + crate::context::conversation_tokens(&conversation)
        } else {
            0
        };
        let mut estimate = cal(raw);
        let mut trimmed = None;
        if let Some(w) = window {
            if estimate > w.threshold
                && harness.compaction
                && !compacted
                && let Some(n) = crate::context::split_point(&conversation[..history_len])
            {
                let summary = crate::complete::complete(
                    &input.model,
                    &input.agent.dir,
                    crate::context::SUMMARY_PROMPT,
                    &crate::context::transcript(&conversation[..n]),
                    &input.providers,
                )
                .await;
                let summary = match summary {
                    Ok(s) => s,
                    Err(message) => {
                        return TurnOutcome::Failed {
                            message: format!("compacting the conversation failed: {message}"),
                        };
                    }
                };
                usage += summary.usage;
                let summary_cost = priced(&summary.usage);
                cost = crate::pricing::add_cost(cost, summary_cost);
                let mut next = vec![crate::context::summary_message(&summary.text)];
                next.extend(conversation.drain(n..));
                conversation = next;
                history_len = history_len - n + 1;
                compacted = true;
                raw = fixed + crate::context::conversation_tokens(&conversation);
                let after = cal(raw);
                send(
                    events,
                    StepEvent::ContextCompacted {
                        messages: n,
                        summary: summary.text,
                        tokens_before: estimate,
                        tokens_after: after,
                        usage: summary.usage,
                        cost_usd: summary_cost,
                    },
                )
                .await;
                estimate = after;
            }
            if estimate > w.threshold {
                let (fit, total) = crate::context::trim_to_fit(
                    &conversation,
                    fixed,
                    crate::context::uncalibrated(w.threshold, factor),
                );
                raw = total;
                estimate = cal(raw);
                trimmed = Some(fit);
            }
            if estimate > w.limit() {
                return TurnOutcome::Failed {
                    message: format!(
                        "the request needs about {estimate} input tokens, more than the {} this model takes (context window {} minus {} kept for the reply), even after compaction and trimming: send less, or start a new session",
                        w.limit(),
                        w.tokens,
                        w.reserve
                    ),
                };
            }
        }
        if let Some(limit) = harness.max_tokens_per_session {
            let used = input.prior_usage.input_tokens
                + input.prior_usage.output_tokens
                + usage.input_tokens
                + usage.output_tokens;
            if used + estimate > limit {
                return TurnOutcome::OverBudget {
                    limit: "max_tokens_per_session",
                    message: format!(
                        "max_tokens_per_session ({limit}) would be exceeded: the session has used {used} tokens and the next request needs about {estimate}"
                    ),
                    usage,
                    cost_usd: cost,
                };
            }
        }
        if let Some(limit) = harness.max_tokens_per_day {
            let used = input.day_usage.input_tokens
                + input.day_usage.output_tokens
                + usage.input_tokens
                + usage.output_tokens;
            if used + estimate > limit {
                return TurnOutcome::OverBudget {
                    limit: "max_tokens_per_day",
                    message: format!(
                        "max_tokens_per_day ({limit}) would be exceeded: the agent's turns used {used} tokens today (UTC) and the next request needs about {estimate}"
                    ),
                    usage,
                    cost_usd: cost,
                };
            }
        }
        if let Some(over) = money_budget(input, usage, cost, &model_label) {
            return over;
        }
        if let Some(limit) = harness.max_input_tokens_per_turn
            && usage.input_tokens + estimate > limit
        {
            return TurnOutcome::OverBudget {
                limit: "max_input_tokens_per_turn",
                message: format!(
                    "max_input_tokens_per_turn ({limit}) would be exceeded: the turn has sent {} input tokens and the next request needs about {estimate}",
                    usage.input_tokens
                ),
                usage,
                cost_usd: cost,
            };
        }
        let started = Instant::now();
        let sent = trimmed.as_deref().unwrap_or(&conversation);
        // Images the tools returned, read back from the workspace for
        // this request only.
        let hydrated = crate::images::hydrate(&input.workspace, sent);
        let request = StepRequest {
            agent: &input.agent,
            conversation: hydrated.as_deref().unwrap_or(sent),
            step,
            turn_id: &input.turn_id,
            cancel: &input.cancel,
            tools: &offered,
            as_of: input.as_of.as_deref(),
        };
        send(
            events,
            StepEvent::StepStarted {
                step,
                request: Some(digests.of(request.conversation)),
            },
        )
        .await;
        let mut sink = StepSink::new(events);
        let reply = match crate::trace::in_child(
            "chat",
            &step.to_string(),
            model.step(&request, &mut sink),
        )
        .await
        {
            Ok(reply) => reply,
            Err(message) => return TurnOutcome::Failed { message },
        };
        let text = sink.finish().await;
        let step_usage = reply.usage;
        usage += reply.usage;
        let step_cost = priced(&step_usage);
        cost = crate::pricing::add_cost(cost, step_cost);
        let counted = crate::context::counted_input(input.model.provider, &step_usage);
        if sized && counted > 0 {
            sizing += Sizing {
                estimated_input_tokens: raw,
                counted_input_tokens: counted,
            };
        }
        let calls = reply.tool_calls;
        // A final reply under an output schema must parse and validate.
        let checked = match (&input.agent.config.output_schema, calls.is_empty()) {
            (Some(schema), true) => Some(crate::output::check(schema, &text)),
            _ => None,
        };
        let finish_reason = match (&checked, calls.is_empty()) {
            (Some(Err(_)), _) => FinishReason::InvalidOutput,
            (_, true) => FinishReason::Stop,
            (_, false) => FinishReason::ToolCall,
        };
        send(
            events,
            StepEvent::MessageCompleted {
                text: text.clone(),
                finish_reason,
            },
        )
        .await;

        if calls.is_empty() {
            send(
                events,
                StepEvent::StepCompleted {
                    step,
                    duration_ms: millis(started),
                    usage: Some(step_usage),
                    estimated_input_tokens: sized.then_some(estimate),
                    model: model_label.clone(),
                    cost_usd: step_cost,
                },
            )
            .await;
            let output = match checked {
                None => None,
                Some(Ok(value)) => Some(value),
                Some(Err(errors)) => {
                    if invalid_outputs >= crate::output::RETRIES {
                        return TurnOutcome::Failed {
                            message: format!(
                                "the reply did not match `output_schema` after {} attempts: {errors}",
                                invalid_outputs + 1
                            ),
                        };
                    }
                    invalid_outputs += 1;
                    conversation.push(Message::Assistant {
                        text,
                        tool_calls: Vec::new(),
                    });
                    conversation.push(Message::user(crate::output::retry_prompt(&errors)));
                    continue;
                }
            };
            return TurnOutcome::Completed {
                result: text,
                usage,
                output,
                sizing,
                cost_usd: cost,
            };
        }

        send(
            events,
            StepEvent::ActionsRequested {
                calls: calls.clone(),
            },
        )
        .await;
        let (outputs, delegated, delegated_cost) = run_calls(input, &calls, events, clock).await;
        usage += delegated;
        cost = crate::pricing::add_cost(cost, delegated_cost);
        conversation.push(Message::Assistant {
            text,
            tool_calls: calls.clone(),
        });
        for (call, out) in calls.into_iter().zip(outputs) {
            conversation.push(Message::Tool {
                call_id: call.call_id,
                tool_name: call.tool_name,
                output: out.output,
                is_error: out.is_error,
            });
        }
        send(
            events,
            StepEvent::StepCompleted {
                step,
                duration_ms: millis(started),
                usage: Some(step_usage),
                estimated_input_tokens: sized.then_some(estimate),
                model: model_label.clone(),
                cost_usd: step_cost,
            },
        )
        .await;
        if let Some(limit) = harness.max_output_tokens_per_turn
            && usage.output_tokens >= limit
        {
            return TurnOutcome::OverBudget {
                limit: "max_output_tokens_per_turn",
                message: format!(
                    "max_output_tokens_per_turn ({limit}) reached: the turn's replies used {} output tokens",
                    usage.output_tokens
                ),
                usage,
                cost_usd: cost,
            };
        }
    }
    TurnOutcome::Failed {
        message: format!("max_steps ({max_steps}) reached"),
    }
}

/// The money budgets of `[harness.budget]`, checked before each step: a
/// turn does not start, or goes no further, once the session's or the
/// day's cost reached its budget. A turn whose cost is unknown (a model
/// with no price) is refused while a money budget is set: it could not
/// be held to it.
fn money_budget(
    input: &TurnInput,
    usage: Usage,
    cost: Option<f64>,
    model: &str,
) -> Option<TurnOutcome> {
    let harness = &input.agent.config.harness;
    let budgets = [
        (
            "max_cost_usd_per_session",
            harness.max_cost_usd_per_session,
            input.prior_cost_usd,
            "the session has cost",
        ),
        (
            "max_cost_usd_per_day",
            harness.max_cost_usd_per_day,
            input.day_cost_usd,
            "the agent's turns cost today (UTC)",
        ),
    ];
    for (name, limit, before, what) in budgets {
        let Some(limit) = limit else { continue };
        let message = match cost {
            None => format!(
                "{name} ({limit} USD) cannot be kept: the price of `{model}` (or of a subagent's model) is unknown; set `[model.pricing]` in agent.toml"
            ),
            Some(c) if before + c >= limit => format!(
                "{name} ({limit} USD) reached: {what} {:.6} USD",
                crate::pricing::round(before + c)
            ),
            Some(_) => continue,
        };
        return Some(TurnOutcome::OverBudget {
            limit: name,
            message,
            usage,
            cost_usd: cost,
        });
    }
    None
}

fn millis(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

type CallFuture<'a> = Pin<Box<dyn Future<Output = (usize, ToolOutput, u64)> + Send + 'a>>;

/// Runs the calls of one step concurrently, emitting each result as it
/// arrives. Returns the outputs in call order.
async fn run_calls(
    input: &TurnInput,
    calls: &[ToolCall],
    events: &mpsc::Sender<StepEvent>,
    clock: &TurnClock,
) -> (Vec<ToolOutput>, Usage, Option<f64>) {
    // Subagents' usage and cost, counted in the turn's.
    let delegated = std::sync::Mutex::new((Usage::default(), Some(0.0)));
    let delegated_ref = &delegated;
    let mut outputs: Vec<Option<ToolOutput>> = vec![None; calls.len()];
    let mut pending: Vec<Option<CallFuture<'_>>> = Vec::new();
    // Calls of the client's tools: they wait for the client once the
    // server's calls of the step are done.
    let mut client: Vec<(usize, &ToolCall)> = Vec::new();
    let prepared = match &input.prepare_workspace {
        Some(prep) if !calls.is_empty() => prep.prepare().await,
        _ => Ok(()),
    };
    for (i, call) in calls.iter().enumerate() {
        if let Err(e) = &prepared {
            let out = ToolOutput::error(format!("the workspace could not be prepared: {e}"));
            emit_result(events, call, &out, 0).await;
            outputs[i] = Some(out);
            continue;
        }
        match check_call(input, call) {
            Err(message) => {
                let out = ToolOutput::error(message);
                emit_result(events, call, &out, 0).await;
                outputs[i] = Some(out);
            }
            Ok((Callable::Client, _)) => client.push((i, call)),
            Ok((callable, _)) if input.dry_run && !callable.read_only() => {
                let out = ToolOutput {
                    output: serde_json::json!({
                        "dryRun": true,
                        "message": format!("dry run: `{}` was not run; it would have been called with this input", call.tool_name),
                        "input": call.input,
                    }),
                    is_error: false,
                };
                emit_result(events, call, &out, 0).await;
                outputs[i] = Some(out);
            }
            Ok((callable, needs_approval)) => {
                let ctx = ToolContext {
                    call_id: call.call_id.clone(),
                    session_id: input.session_id.clone(),
                    workspace_dir: input.workspace.clone(),
                    cancel: input.cancel.clone(),
                    host: input.host.clone(),
                    services: input.services.clone(),
                    as_of: input.as_of.clone(),
                    origin: crate::tools::CallOrigin {
                        model_turn: true,
                        ..input.origin.clone()
                    },
                    progress: crate::tools::Progress::to_turn(
                        events.clone(),
                        &call.call_id,
                        &call.tool_name,
                    ),
                };
                let span_key = call.call_id.clone();
                let fut: CallFuture<'_> = Box::pin(crate::trace::in_child(
                    "tool",
                    &span_key,
                    async move {
                        if needs_approval {
                            let decision = await_approval(input, call, events, clock).await;
                            if !decision.approved {
                                let reason =
                                    decision.reason.as_deref().unwrap_or("no reason given");
                                let out = ToolOutput::error(format!(
                                    "the call was denied by {}: {reason}",
                                    decision.by
                                ));
                                return (i, out, 0);
                            }
                        }
                        let started = Instant::now();
                        // Replaying a stored session: its recorded result
                        // (a delegation runs its subagent, answered from
                        // the log too, so its events are compared).
                        if let Some(crate::Cassette::Session(session)) = &input.providers.cassette
                            && !matches!(callable, Callable::Builtin("task"))
                            && let Some(out) = session.result(&call.tool_name, &call.input)
                        {
                            return (i, out, 0);
                        }
                        let out = match callable {
                            Callable::Server(tool) => {
                                run_server_tool(tool, &call.input, &ctx).await
                            }
                            Callable::Dynamic(tool) => {
                                let run = tool.call(call.input.clone(), ctx.clone());
                                tokio::select! {
                                    out = run => out,
                                    _ = ctx.cancel.cancelled() => ToolOutput::error("the call was interrupted"),
                                }
                            }
                            Callable::Builtin("task") => {
                                let (out, used, used_cost) = crate::trace::in_child(
                                    "invoke_agent",
                                    &call.call_id,
                                    run_subagent(input, call, events),
                                )
                                .await;
                                if let Ok(mut total) = delegated_ref.lock() {
                                    total.0 += used;
                                    total.1 = crate::pricing::add_cost(total.1, used_cost);
                                }
                                out
                            }
                            Callable::Builtin("remind_me") => match &input.reminders {
                                Some(host) => {
                                    match host.remind(&input.session_id, &call.input).await {
                                        Ok(output) => ToolOutput {
                                            output,
                                            is_error: false,
                                        },
                                        Err(message) => ToolOutput::error(message),
                                    }
                                }
                                None => ToolOutput::error("reminders are disabled on this host"),
                            },
                            Callable::Builtin(name) => {
                                builtins::run(&input.agent, name, &call.input, &ctx).await
                            }
                            Callable::Client => {
                                ToolOutput::error("a client tool's call waits for the client")
                            }
                        };
                        (i, out, millis(started))
                    },
                ));
                pending.push(Some(fut));
            }
        }
    }

    // A small FuturesUnordered: the calls run concurrently in this task,
    // so dropping the turn drops (and kills) them at once.
    loop {
        let next = poll_fn(|cx| {
            let mut any = false;
            for slot in pending.iter_mut() {
                if let Some(fut) = slot {
                    any = true;
                    if let Poll::Ready(done) = fut.as_mut().poll(cx) {
                        *slot = None;
                        return Poll::Ready(Some(done));
                    }
                }
            }
            if any {
                Poll::Pending
            } else {
                Poll::Ready(None)
            }
        })
        .await;
        let Some((i, mut out, duration_ms)) = next else {
            break;
        };
        if let Some(call) = calls.get(i) {
            // Inline image bytes go into the workspace; the log and the
            // conversation keep a reference.
            if crate::images::has_images(&out.output) {
                out.output = crate::images::stash(
                    &input.workspace,
                    &call.call_id,
                    std::mem::take(&mut out.output),
                );
            }
            emit_result(events, call, &out, duration_ms).await;
        }
        if let Some(slot) = outputs.get_mut(i) {
            *slot = Some(out);
        }
    }
    if !client.is_empty() {
        let calls: Vec<&ToolCall> = client.iter().map(|(_, c)| *c).collect();
        let results = await_client(input, &calls, events, clock).await;
        for ((i, call), out) in client.into_iter().zip(results) {
            emit_result(events, call, &out, 0).await;
            if let Some(slot) = outputs.get_mut(i) {
                *slot = Some(out);
            }
        }
    }
    let outputs = outputs
        .into_iter()
        .map(|o| o.unwrap_or_else(|| ToolOutput::error("tool call produced no result")))
        .collect();
    let (used, used_cost) = delegated
        .lock()
        .map(|u| *u)
        .unwrap_or((Usage::default(), None));
    (outputs, used, used_cost)
}

/// Parks a call until the host's gate decides (or `approval_timeout`
/// denies it), recording the request and the decision. The turn's own
/// timeout does not run meanwhile.
async fn await_approval(
    input: &TurnInput,
    call: &ToolCall,
    events: &mpsc::Sender<StepEvent>,
    clock: &TurnClock,
) -> Decision {
    let Some(gate) = &input.approvals else {
        return Decision::deny("approvals are not available in this host", "system");
    };
    // Park before recording the request, so that nobody can decide before
    // the call waits.
    let wait = gate.park(&input.turn_id, &call.call_id);
    send(
        events,
        StepEvent::ApprovalRequested {
            call_id: call.call_id.clone(),
            tool_name: call.tool_name.clone(),
            input: call.input.clone(),
        },
    )
    .await;
    let parked = clock.park();
    let decision = match input.agent.config.harness.approval_timeout {
        Some(limit) => tokio::time::timeout(limit, wait)
            .await
            .unwrap_or_else(|_| Decision::deny("timed out", "timeout")),
        None => wait.await,
    };
    drop(parked);
    send(
        events,
        StepEvent::ApprovalResolved {
            call_id: call.call_id.clone(),
            tool_name: call.tool_name.clone(),
            decision: decision.clone(),
        },
    )
    .await;
    decision
}

/// Waits for the client's results of calls of its tools, recording
/// `actions.client_requested` once they are parked. The turn's own timeout
/// does not run meanwhile; `approval_timeout` bounds the wait.
async fn await_client(
    input: &TurnInput,
    calls: &[&ToolCall],
    events: &mpsc::Sender<StepEvent>,
    clock: &TurnClock,
) -> Vec<ToolOutput> {
    let Some(gate) = &input.approvals else {
        return calls
            .iter()
            .map(|_| ToolOutput::error("this host cannot wait for a client's results"))
            .collect();
    };
    // Park before recording the request, so that no result can arrive
    // before the call waits.
    let waits: Vec<_> = calls
        .iter()
        .map(|c| gate.park_client(&input.turn_id, &c.call_id))
        .collect();
    send(
        events,
        StepEvent::ClientActionsRequested {
            calls: calls.iter().map(|c| (*c).clone()).collect(),
        },
    )
    .await;
    let parked = clock.park();
    let limit = input.agent.config.harness.approval_timeout;
    let deadline = limit.map(|l| tokio::time::Instant::now() + l);
    let mut out = Vec::new();
    for wait in waits {
        let got = match deadline {
            Some(at) => tokio::time::timeout_at(at, wait).await.map_err(|_| {
                ToolOutput::error(format!(
                    "the client did not answer within approval_timeout ({})",
                    limit
                        .map(humantime::format_duration)
                        .map(|d| d.to_string())
                        .unwrap_or_default()
                ))
            }),
            None => Ok(wait.await),
        };
        out.push(match got {
            Ok(Some(result)) => result,
            Ok(None) => ToolOutput::error("the wait for the client's result was withdrawn"),
            Err(timed_out) => timed_out,
        });
    }
    drop(parked);
    out
}

/// The agent subagent `id` of `parent` runs as, and its model (the
/// parent's `model` when it names none); `None` when there is no such
/// subagent.
pub fn subagent_agent(parent: &Agent, model: &ModelSpec, id: &str) -> Option<(Agent, ModelSpec)> {
    let sub = parent.subagents.iter().find(|s| s.id == id)?;
    let model = sub.model.clone().unwrap_or_else(|| model.clone());
    let mut child = parent.clone();
    // Paths in the subagent's own agent.toml (a scripted model) are
    // relative to its folder.
    child.dir = parent.dir.join("subagents").join(&sub.id);
    child.instructions = sub.instructions.clone();
    // Subagents do not delegate further.
    child.subagents = Vec::new();
    child.config.model = Some(model.clone());
    // The parent's reply format is the parent's: a subagent answers text.
    child.config.output_schema = None;
    Some((child, model))
}

/// The built-in `task` tool: runs the subagent's own loop on the prompt,
/// with its instructions and model (the parent's when it names none) and
/// the parent's tools, and answers its final text. The child's steps are
/// not recorded on the stream (they would read as the parent's); the
/// stream gets `subagent.called` and `subagent.completed`.
async fn run_subagent(
    input: &TurnInput,
    call: &ToolCall,
    events: &mpsc::Sender<StepEvent>,
) -> (ToolOutput, Usage, Option<f64>) {
    let id = call
        .input
        .get("subagent")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let prompt = call
        .input
        .get("prompt")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let Some((child, model)) = subagent_agent(&input.agent, &input.model, &id) else {
        return (
            ToolOutput::error(format!("no subagent `{id}`")),
            Usage::default(),
            Some(0.0),
        );
    };
    let child_input = TurnInput {
        agent: Arc::new(child),
        model,
        history: Vec::new(),
        user_messages: vec![prompt.clone()],
        user_images: Vec::new(),
        workspace: input.workspace.clone(),
        prepare_workspace: input.prepare_workspace.clone(),
        session_id: input.session_id.clone(),
        turn_id: format!("{}-{}", input.turn_id, call.call_id),
        cancel: input.cancel.child_token(),
        providers: input.providers.clone(),
        dry_run: input.dry_run,
        host: input.host.clone(),
        reminders: input.reminders.clone(),
        tools: input.tools.clone(),
        // The client's tools are the parent turn's.
        client_tools: Vec::new(),
        services: input.services.clone(),
        approvals: input.approvals.clone(),
        as_of: input.as_of.clone(),
        origin: input.origin.clone(),
        // A subagent's turn is bounded by its own limits; its usage counts
        // toward the parent turn's.
        prior_usage: Usage::default(),
        day_usage: Usage::default(),
        prior_cost_usd: 0.0,
        day_cost_usd: 0.0,
        prior_sizing: Sizing::default(),
    };
    send(
        events,
        StepEvent::SubagentCalled {
            call_id: call.call_id.clone(),
            subagent: id.clone(),
            prompt,
        },
    )
    .await;
    let (tx, mut rx) = mpsc::channel(256);
    let provider = child_input.model.provider.as_str().to_owned();
    let model_id = child_input.model.id.clone();
    let child_turn = crate::boxed_turn(child_input, tx);
    // The subagent's messages stay inside it; each of its steps is
    // reported (`subagent.step`), for its `chat` span.
    let parent = events.clone();
    let (call_id, subagent) = (call.call_id.clone(), id.clone());
    let drain = async move {
        let mut finish = FinishReason::Stop;
        while let Some(event) = rx.recv().await {
            match event {
                StepEvent::MessageCompleted { finish_reason, .. } => finish = finish_reason,
                StepEvent::StepCompleted {
                    step,
                    duration_ms,
                    usage,
                    cost_usd,
                    ..
                } => {
                    let step = StepEvent::SubagentStep {
                        call_id: call_id.clone(),
                        subagent: subagent.clone(),
                        step,
                        provider: provider.clone(),
                        model: model_id.clone(),
                        duration_ms,
                        usage,
                        finish_reason: finish.as_str().to_owned(),
                        cost_usd,
                    };
                    send(&parent, step).await;
                }
                _ => {}
            }
        }
    };
    let (outcome, ()) = tokio::join!(child_turn, drain);
    let (out, usage, cost) = match outcome {
        TurnOutcome::Completed {
            result,
            usage,
            cost_usd,
            ..
        } => (
            ToolOutput {
                output: Value::String(result),
                is_error: false,
            },
            usage,
            cost_usd,
        ),
        TurnOutcome::Failed { message } => (
            ToolOutput::error(format!("subagent `{id}` failed: {message}")),
            Usage::default(),
            Some(0.0),
        ),
        TurnOutcome::OverBudget {
            message,
            usage,
            cost_usd,
            ..
        } => (
            ToolOutput::error(format!("subagent `{id}` stopped: {message}")),
            usage,
            cost_usd,
        ),
        TurnOutcome::Interrupted => (
            ToolOutput::error(format!("subagent `{id}` was interrupted")),
            Usage::default(),
            Some(0.0),
        ),
    };
    let result = match &out.output {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    send(
        events,
        StepEvent::SubagentCompleted {
            call_id: call.call_id.clone(),
            subagent: id,
            is_error: out.is_error,
            result,
            usage,
        },
    )
    .await;
    (out, usage, cost)
}

async fn emit_result(
    events: &mpsc::Sender<StepEvent>,
    call: &ToolCall,
    out: &ToolOutput,
    duration_ms: u64,
) {
    send(
        events,
        StepEvent::ActionResult {
            call_id: call.call_id.clone(),
            tool_name: call.tool_name.clone(),
            output: out.output.clone(),
            is_error: out.is_error,
            duration_ms,
        },
    )
    .await;
}

/// What a call runs.
#[derive(Debug, Clone, Copy)]
enum Callable<'a> {
    Server(&'a Tool),
    Builtin(&'static str),
    Dynamic(&'a Arc<dyn DynTool>),
    /// A tool the client declared: the client runs it.
    Client,
}

impl Callable<'_> {
    /// Safe to run in a dry-run session.
    fn read_only(&self) -> bool {
        match self {
            Callable::Server(tool) => tool.annotations.read_only,
            Callable::Dynamic(tool) => tool.spec().read_only,
            Callable::Client => false,
            Callable::Builtin(name) => {
                matches!(
                    *name,
                    "read" | "list" | "grep" | "glob" | "load_skill" | "task"
                )
            }
        }
    }
}

/// The tool a call may run and whether it needs approval, or the error
/// result the model gets instead.
fn check_call<'a>(input: &'a TurnInput, call: &ToolCall) -> Result<(Callable<'a>, bool), String> {
    let agent = &input.agent;
    let Some(tool) = agent.tool(&call.tool_name) else {
        if let Some(b) = builtins::enabled(agent)
            .into_iter()
            .find(|b| b.name == call.tool_name)
        {
            check_schema(&b.schema, b.name, &call.input)?;
            return Ok((Callable::Builtin(b.name), false));
        }
        if let Some(tool) = input.client_tools.iter().find(|t| t.name == call.tool_name) {
            check_schema(&tool.parameters, &tool.name, &call.input)?;
            return Ok((Callable::Client, false));
        }
        if let Some(tool) = input.tools.iter().find(|t| t.spec().name == call.tool_name) {
            let spec = tool.spec();
            check_schema(&spec.input_schema, &spec.name, &call.input)?;
            let needs = needs_approval(&spec.needs_approval, &call.input);
            return Ok((Callable::Dynamic(tool), needs));
        }
        return Err(format!("unknown tool `{}`", call.tool_name));
    };
    if tool.execution == Execution::Agent {
        return Err(format!(
            "`{}` is an agent tool: run its script in your workspace (.agentkit/tools/) instead of calling it",
            tool.name
        ));
    }
    if !tool.offered_to_model() {
        // `expose = "host"`: never offered, so a model naming it is
        // answered as for any tool it does not have.
        return Err(format!("unknown tool `{}`", call.tool_name));
    }
    validate_input(tool, &call.input)?;
    let needs = needs_approval(&tool.needs_approval, &call.input);
    Ok((Callable::Server(tool), needs))
}

/// Does this (validated) input need a human's approval?
pub(crate) fn needs_approval(rule: &Approval, input: &Value) -> bool {
    match rule {
        Approval::Never => false,
        Approval::Always => true,
        // A schema that does not compile cannot clear a call.
        // Formats asserted, as in input validation (`agentkit_manifest::schema_errors`).
        Approval::When(schema) => jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .should_validate_formats(true)
            .build(schema)
            .map_or(true, |v| v.is_valid(input)),
    }
}

fn validate_input(tool: &Tool, input: &Value) -> Result<(), String> {
    check_schema(&tool.input_schema, &tool.name, input)
}

/// Every schema violation of `input`, as one message the model can act on.
fn check_schema(schema: &Value, name: &str, input: &Value) -> Result<(), String> {
    let problems = schema_errors(schema, input)
        .map_err(|e| format!("tool `{name}` has an invalid input schema: {e}"))?;
    if problems.is_empty() {
        return Ok(());
    }
    let problems: Vec<String> = problems
        .iter()
        .map(|(at, message)| {
            if at.is_empty() {
                message.clone()
            } else {
                format!("{at}: {message}")
            }
        })
        .collect();
    Err(format!(
        "invalid input for `{name}`: {}",
        problems.join("; ")
    ))
}
