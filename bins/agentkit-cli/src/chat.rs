//! The commands that talk to sessions: `run` (turns against an ephemeral
//! or running server, trajectory on stdout), `chat` (a REPL that renders
//! replies live) and `trajectory` (summarise a saved event log).

use std::io::{self, BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anstyle::{AnsiColor, Style};
use anyhow::Context;
use serde_json::Value;

use agentkit::client::{Client, SessionCursor};
use agentkit::protocol::{Event, EventData, EventType};
use agentkit::trajectory::{self, Trajectory};

use agentkit_cli::EXIT_INVALID;

use crate::boot::{boot, pick_agent, tokio_runtime};
use crate::render;

const DIM: Style = Style::new().dimmed();
const RED: Style = AnsiColor::Red.on_default().bold();
const CYAN: Style = AnsiColor::Cyan.on_default();

/// The longest tool output `chat` shows, in characters.
const OUTPUT_PREVIEW: usize = 160;

#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// A model provider's API key, as PROVIDER=KEY (repeatable); wins over
    /// the environment and `agentkit login`. Visible in the process list:
    /// prefer the environment on shared machines.
    #[arg(long = "api-key", value_name = "PROVIDER=KEY")]
    api_key: Vec<String>,
    /// The project, or a folder of projects, to boot a temporary server
    /// for (ignored with --url).
    #[arg(long, default_value = ".", value_name = "PATH")]
    dir: PathBuf,
    /// A user message; repeat for several turns in one session.
    #[arg(long, short, required = true, value_name = "TEXT")]
    message: Vec<String>,
    /// The agent to talk to when the folder (or server) holds several.
    #[arg(long, value_name = "SLUG")]
    agent: Option<String>,
    /// Run the agent on this model instead of its own, e.g.
    /// `openai:gpt-4.1-mini`, `anthropic:claude-sonnet-4-5` or `test`
    /// (ignored with --url).
    #[arg(long, value_name = "PROVIDER:MODEL")]
    model: Option<String>,
    /// Also write every event, as NDJSON, to this file.
    #[arg(long, value_name = "FILE")]
    events: Option<PathBuf>,
    /// Use this running server instead of booting one.
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// Sent as `Authorization: Bearer <token>` (with --url).
    #[arg(
        long,
        env = "AGENTKIT_BEARER_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    bearer_token: Option<String>,
    /// What to do with tool calls that wait for approval: ask on the
    /// terminal, approve them all, or deny them all. Defaults to `ask` on
    /// a terminal and `deny` otherwise, so scripts never hang.
    #[arg(long, value_enum, value_name = "MODE")]
    approvals: Option<ApprovalMode>,
}

/// How `run` answers parked calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ApprovalMode {
    Ask,
    Approve,
    Deny,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ChatArgs {
    /// The server: an agent's URL, or a host serving one agent (or pass
    /// --agent).
    #[arg(long, default_value = "http://127.0.0.1:3000", value_name = "URL")]
    url: String,
    /// The agent to talk to on a host that serves several.
    #[arg(long, value_name = "SLUG")]
    agent: Option<String>,
    /// Send one message, print the reply, and exit.
    #[arg(long, short, value_name = "TEXT")]
    message: Option<String>,
    /// Print the trajectory JSON instead of text (one line per turn in the
    /// REPL).
    #[arg(long)]
    json: bool,
    /// Sent as `Authorization: Bearer <token>`.
    #[arg(
        long,
        env = "AGENTKIT_BEARER_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    bearer_token: Option<String>,
    /// What to do with tool calls that wait for approval (as for `run`).
    #[arg(long, value_enum, value_name = "MODE")]
    approvals: Option<ApprovalMode>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct TrajectoryArgs {
    /// An NDJSON event log, as `run --events` or `GET …/events` writes it.
    #[arg(long, value_name = "FILE")]
    events: PathBuf,
}

/// `agentkit trajectory`: exit 1 when a turn failed.
pub(crate) fn trajectory(args: TrajectoryArgs) -> anyhow::Result<ExitCode> {
    let path = &args.events;
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read `{}`", path.display()))?;
    let events = trajectory::parse_ndjson(&text)
        .with_context(|| format!("`{}` is not an event log", path.display()))?;
    let t = trajectory::from_events(&events);
    print_trajectory(&t)?;
    Ok(exit_for(&t))
}

/// `agentkit run`: exit 1 when a turn failed.
pub(crate) fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    tokio_runtime()?.block_on(run_async(args))
}

async fn run_async(args: RunArgs) -> anyhow::Result<ExitCode> {
    // The state root lives outside the project, so session workspaces do
    // not inherit the project's surroundings; it is deleted on exit.
    let mut server = None;
    let mut _state_root = None;
    let client = match &args.url {
        Some(url) => Client::resolve(url, args.agent.as_deref(), args.bearer_token.clone()).await?,
        None => {
            let state = tempfile::Builder::new()
                .prefix("agentkit-run-")
                .tempdir()
                .context("cannot create a temporary state root")?;
            let handle = boot(
                &args.dir,
                state.path(),
                &args.api_key,
                args.model.as_deref(),
            )
            .await?;
            let url = pick_agent(&handle, args.agent.as_deref(), &args.dir);
            _state_root = Some(state);
            let url = match url {
                Ok(url) => url,
                Err(e) => {
                    handle.close().await;
                    return Err(e);
                }
            };
            server = Some(handle);
            Client::new(&url, args.bearer_token.clone())
        }
    };

    let (parked_tx, answering) = approver(&client, args.approvals);
    let mut cursor = None;
    let mut events = Vec::new();
    let mut outcome = Ok(());
    for message in &args.message {
        let on_event = |event: &Event| forward_parked(&parked_tx, event);
        match client.run_turn_with(&mut cursor, message, on_event).await {
            Ok((_, turn)) => events.extend(turn),
            Err(e) => {
                outcome = Err(e);
                break;
            }
        }
    }
    drop(parked_tx);
    answering.abort();
    if let Some(handle) = server {
        handle.close().await;
    }
    // The log is written even when a turn could not be sent: what happened
    // before is still worth reading.
    if let Some(path) = &args.events {
        write_ndjson(path, &events)?;
    }
    outcome?;
    let t = trajectory::from_events(&events);
    print_trajectory(&t)?;
    Ok(exit_for(&t))
}

type Parked = tokio::sync::mpsc::UnboundedSender<Event>;

/// Starts answering parked calls by `mode` (default: ask on a terminal,
/// deny otherwise). Must run inside the tokio runtime.
fn approver(client: &Client, mode: Option<ApprovalMode>) -> (Parked, tokio::task::JoinHandle<()>) {
    let mode = mode.unwrap_or(if io::stdin().is_terminal() {
        ApprovalMode::Ask
    } else {
        ApprovalMode::Deny
    });
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
    (tx, tokio::spawn(answer_approvals(client.clone(), mode, rx)))
}

fn forward_parked(parked: &Parked, event: &Event) {
    if event.event_type == EventType::ActionApprovalRequested {
        let _ = parked.send(event.clone());
    }
}

/// Answers the parked calls `run` and `chat` see, by `mode`.
async fn answer_approvals(
    client: Client,
    mode: ApprovalMode,
    mut parked: tokio::sync::mpsc::UnboundedReceiver<Event>,
) {
    while let Some(event) = parked.recv().await {
        let session = event.session_id.to_string();
        let EventData::ApprovalRequested(requested) = event.payload() else {
            continue;
        };
        let call = requested.call_id;
        let tool = requested.tool_name;
        let input = requested.input.to_string();
        let (approve, reason) = match mode {
            ApprovalMode::Approve => (true, None),
            ApprovalMode::Deny => (
                false,
                Some("denied by `agentkit run` (pass --approvals approve or ask)"),
            ),
            ApprovalMode::Ask => {
                let question = format!("`{tool}` wants to run with {input}. Approve? [y/N] ");
                let answer = tokio::task::spawn_blocking(move || {
                    let mut err = anstream::stderr();
                    let _ = write!(err, "{question}");
                    let _ = err.flush();
                    let mut line = String::new();
                    let _ = io::stdin().lock().read_line(&mut line);
                    line
                })
                .await
                .unwrap_or_default();
                let yes = matches!(answer.trim(), "y" | "Y" | "yes");
                (yes, (!yes).then_some("denied at the terminal"))
            }
        };
        if let Err(e) = client
            .resolve_approval(&session, &call, approve, reason)
            .await
        {
            let mut err = anstream::stderr();
            let _ = writeln!(err, "{RED}error:{RED:#} cannot resolve `{call}`: {e}");
        }
    }
}

/// `agentkit chat`: a one-shot message, or a REPL over stdin.
pub(crate) fn chat(args: ChatArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio_runtime()?;
    let client = rt.block_on(Client::resolve(
        &args.url,
        args.agent.as_deref(),
        args.bearer_token.clone(),
    ))?;
    let (parked, answering) = {
        let _guard = rt.enter();
        approver(&client, args.approvals)
    };
    let outcome = match &args.message {
        Some(message) => rt.block_on(chat_once(&client, message, args.json, &parked)),
        None => chat_repl(&rt, &client, args.json, &parked),
    };
    answering.abort();
    outcome
}

async fn chat_once(
    client: &Client,
    message: &str,
    json: bool,
    parked: &Parked,
) -> anyhow::Result<ExitCode> {
    // What the REPL shows around the reply (tool calls, results, a
    // failure, the usage footer) goes to stderr as it happens, so stdout
    // holds the reply alone for a script.
    let mut err = anstream::stderr();
    let mut renderer = Renderer {
        text: false,
        ..Renderer::default()
    };
    let (_, events) = client
        .run_turn_with(&mut None, message, |e| {
            forward_parked(parked, e);
            if !json {
                let _ = renderer.event(&mut err, e);
            }
        })
        .await?;
    let t = trajectory::from_events(&events);
    if json {
        print_trajectory(&t)?;
    } else {
        renderer.finish(&mut err)?;
        let mut out = anstream::stdout();
        if let Some(reply) = &t.reply {
            writeln!(out, "{reply}")?;
            out.flush()?;
        }
        if let Some(turn) = t.turns.last().filter(|turn| turn.error.is_none()) {
            writeln!(
                err,
                "{DIM}[in {} · out {} tokens]{DIM:#}",
                turn.usage.input_tokens, turn.usage.output_tokens
            )?;
        }
    }
    Ok(exit_for(&t))
}

fn chat_repl(
    rt: &tokio::runtime::Runtime,
    client: &Client,
    json: bool,
    parked: &Parked,
) -> anyhow::Result<ExitCode> {
    let stdin = io::stdin();
    let interactive = stdin.is_terminal();
    let mut out = anstream::stdout();
    if interactive {
        writeln!(
            out,
            "{DIM}chatting with {} — /new starts a new session, /exit quits{DIM:#}",
            client.base_url()
        )?;
    }
    let mut cursor: Option<SessionCursor> = None;
    let mut lines = stdin.lock().lines();
    loop {
        if interactive {
            write!(out, "> ")?;
            out.flush()?;
        }
        let Some(line) = lines.next() else { break };
        let line = line.context("cannot read stdin")?;
        let message = line.trim();
        match message {
            "" => continue,
            "/exit" | "/quit" => break,
            "/new" => {
                cursor = None;
                writeln!(out, "{DIM}(new session){DIM:#}")?;
                continue;
            }
            _ => {}
        }
        let mut renderer = Renderer::default();
        let result = rt.block_on(client.run_turn_with(&mut cursor, message, |event| {
            forward_parked(parked, event);
            if !json {
                // A closed stdout shows up again at the next write below.
                let _ = renderer.event(&mut out, event);
            }
        }));
        match result {
            Ok((_, events)) if json => {
                let t = trajectory::from_events(&events);
                writeln!(out, "{}", serde_json::to_string(&t)?)?;
            }
            Ok(_) => renderer.finish(&mut out)?,
            // The conversation goes on: a refused message (a stale token,
            // say) is reported, not fatal.
            Err(e) => {
                renderer.finish(&mut out)?;
                render::error(&mut anstream::stderr(), &anyhow::Error::new(e))?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes a turn's events as they arrive: streamed text, tool calls
/// (`→ name(input)`) and results (`← output`), failures, and a usage footer.
#[derive(Debug)]
struct Renderer {
    /// Whether the cursor is at the start of a line.
    at_line_start: bool,
    /// Whether reasoning is being streamed (dimmed).
    in_reasoning: bool,
    /// Whether the reply's text, reasoning and usage footer are shown
    /// (`chat --message` prints the reply and footer itself).
    text: bool,
}

impl Default for Renderer {
    fn default() -> Self {
        Renderer {
            at_line_start: true,
            in_reasoning: false,
            text: true,
        }
    }
}

impl Renderer {
    fn event(&mut self, out: &mut impl Write, event: &Event) -> io::Result<()> {
        match event.payload() {
            // Text of subagents belongs to their tool call, not the reply.
            EventData::ReasoningAppended(a) | EventData::MessageAppended(a)
                if a.parent_call_id.is_some() => {}
            EventData::MessageCompleted(m) if m.parent_call_id.is_some() => {}
            EventData::ReasoningAppended(_)
            | EventData::MessageAppended(_)
            | EventData::MessageCompleted(_)
            | EventData::TurnCompleted(_)
                if !self.text => {}
            EventData::ReasoningAppended(a) => {
                self.in_reasoning = true;
                self.write(out, &format!("{DIM}{}{DIM:#}", a.delta))?;
            }
            EventData::MessageAppended(a) => {
                if self.in_reasoning {
                    self.in_reasoning = false;
                    self.newline(out)?;
                }
                self.write(out, &a.delta)?;
            }
            EventData::MessageCompleted(_) => self.newline(out)?,
            EventData::ActionsRequested(requested) => {
                self.newline(out)?;
                for call in &requested.calls {
                    let input = compact(&call.input);
                    writeln!(out, "{CYAN}→ {}({input}){CYAN:#}", call.tool_name)?;
                }
            }
            EventData::ActionResult(result) => {
                self.newline(out)?;
                let output = preview(&result.output);
                if result.is_error {
                    writeln!(out, "{RED}← {output}{RED:#}")?;
                } else {
                    writeln!(out, "{DIM}← {output}{DIM:#}")?;
                }
            }
            EventData::TurnFailed(failed) => {
                self.newline(out)?;
                writeln!(out, "{RED}turn failed: {}{RED:#}", failed.message)?;
            }
            EventData::TurnCompleted(done) => {
                self.newline(out)?;
                writeln!(
                    out,
                    "{DIM}[in {} · out {} tokens]{DIM:#}",
                    done.usage.input_tokens, done.usage.output_tokens
                )?;
            }
            _ if event.event_type == EventType::SessionFailed => {
                self.newline(out)?;
                writeln!(out, "{RED}session failed{RED:#}")?;
            }
            _ => {}
        }
        out.flush()
    }

    fn write(&mut self, out: &mut impl Write, text: &str) -> io::Result<()> {
        if !text.is_empty() {
            write!(out, "{text}")?;
            self.at_line_start = text.ends_with('\n');
        }
        Ok(())
    }

    fn newline(&mut self, out: &mut impl Write) -> io::Result<()> {
        if !self.at_line_start {
            writeln!(out)?;
            self.at_line_start = true;
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut impl Write) -> io::Result<()> {
        self.newline(out)?;
        out.flush()
    }
}

/// JSON on one line; a string as itself.
fn compact(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Tool output on one line, cut to [`OUTPUT_PREVIEW`] characters.
fn preview(v: &Value) -> String {
    let one_line = compact(v).split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= OUTPUT_PREVIEW {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(OUTPUT_PREVIEW).collect();
    cut.push('…');
    cut
}

fn print_trajectory(t: &Trajectory) -> anyhow::Result<()> {
    render::json(&mut anstream::stdout(), &serde_json::to_value(t)?)?;
    Ok(())
}

fn exit_for(t: &Trajectory) -> ExitCode {
    if t.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_INVALID)
    }
}

fn write_ndjson(path: &Path, events: &[Event]) -> anyhow::Result<()> {
    let mut text = String::new();
    for event in events {
        text.push_str(&serde_json::to_string(event)?);
        text.push('\n');
    }
    std::fs::write(path, text).with_context(|| format!("cannot write `{}`", path.display()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn render(events: &[Value]) -> String {
        let given = events.len();
        let events: Vec<Event> = events
            .iter()
            .enumerate()
            .filter_map(|(i, e)| {
                let mut e = e.clone();
                e["index"] = json!(i);
                e["sessionId"] = json!("ses_1");
                e["at"] = json!("");
                serde_json::from_value(e).ok()
            })
            .collect();
        assert_eq!(events.len(), given, "every test event is a known event");
        let events = &events;
        let mut bytes = Vec::new();
        let mut out = anstream::StripStream::new(&mut bytes);
        let mut r = Renderer::default();
        for e in events {
            r.event(&mut out, e).unwrap_or_default();
        }
        r.finish(&mut out).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    #[test]
    fn renders_deltas_tools_failures_and_usage() {
        let long = "x".repeat(500);
        let text = render(&[
            json!({"type": "message.appended", "data": {"delta": "Let me ", "text": "Let me "}}),
            json!({"type": "message.appended", "data": {"delta": "check.", "text": "Let me check."}}),
            json!({"type": "actions.requested", "data": {"calls": [{"callId": "c1", "toolName": "get_weather", "input": {"city": "NYC"}}]}}),
            json!({"type": "action.result", "data": {"callId": "c1", "output": long, "isError": false}}),
            json!({"type": "message.appended", "data": {"delta": "nested", "parentCallId": "c1"}}),
            json!({"type": "message.appended", "data": {"delta": "Sunny.", "text": "Sunny."}}),
            json!({"type": "message.completed", "data": {"text": "Sunny.", "finishReason": "stop"}}),
            json!({"type": "turn.completed", "data": {"usage": {"inputTokens": 12, "outputTokens": 3}}}),
        ]);
        let expected = format!(
            "Let me check.\n→ get_weather({{\"city\":\"NYC\"}})\n← {}…\nSunny.\n[in 12 · out 3 tokens]\n",
            "x".repeat(OUTPUT_PREVIEW)
        );
        assert_eq!(text, expected);
        let failed = render(&[
            json!({"type": "message.appended", "data": {"delta": "par"}}),
            json!({"type": "turn.failed", "data": {"message": "turn interrupted"}}),
        ]);
        assert_eq!(failed, "par\nturn failed: turn interrupted\n");
    }
}
