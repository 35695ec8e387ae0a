//! `schedules/<id>.md` (cron frontmatter, body as prompt) and
//! `schedules/<id>.toml` (cron plus exactly one action).

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::checks::{self, CronSchedule};
use crate::diagnostic::{Code, Diagnostic};
use crate::model::{Schedule, ScheduleAction, empty_object};
use crate::source::{Ctx, SourceText};
use crate::tools::toml_to_json;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct MdFrontmatter {
    cron: Option<String>,
    description: Option<String>,
    output_schema: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSchedule {
    cron: Option<String>,
    #[allow(dead_code)]
    description: Option<String>,
    markdown: Option<String>,
    message: Option<String>,
    channel: Option<String>,
    tool: Option<RawToolCall>,
    handler: Option<String>,
    command: Option<Vec<String>>,
    timeout: Option<String>,
    max_output_bytes: Option<u64>,
    env: Option<Vec<String>>,
    output_schema: Option<toml::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToolCall {
    name: String,
    input: Option<toml::Value>,
}

fn check_cron(ctx: &mut Ctx, src: &SourceText, cron: Option<String>) -> Option<String> {
    let Some(cron) = cron else {
        ctx.push(
            Diagnostic::error(Code::MissingField, src.rel.clone(), "schedule needs `cron`")
                .with_hint(
                    "e.g. cron: \"0 9 * * 1-5\" (minute hour day-of-month month day-of-week, UTC)",
                ),
        );
        return None;
    };
    match CronSchedule::parse(&cron) {
        Ok(_) => Some(cron),
        Err(e) => {
            ctx.push(
                Diagnostic::error(Code::InvalidCron, src.rel.clone(), e)
                    .at(src.key_pos("cron"))
                    .with_hint("standard 5-field cron in UTC, e.g. \"*/30 * * * *\""),
            );
            None
        }
    }
}

pub(crate) fn read_markdown_schedule(ctx: &mut Ctx, path: &Path, id: &str) -> Option<Schedule> {
    let src = ctx.read_text(path)?;
    let (fm, body): (MdFrontmatter, String) = ctx.parse_markdown(&src)?;
    let _ = fm.description;
    let cron = check_cron(ctx, &src, fm.cron);
    if body.trim().is_empty() {
        ctx.push(Diagnostic::error(
            Code::MissingField,
            src.rel.clone(),
            format!("schedule `{id}` has no prompt: the Markdown body is empty"),
        ));
        return None;
    }
    let output_schema = match &fm.output_schema {
        Some(schema) => Some(checks::output_schema(ctx, &src, "output_schema", schema)?),
        None => None,
    };
    Some(Schedule {
        id: id.to_owned(),
        path: src.rel.clone(),
        cron: cron?,
        action: ScheduleAction::Markdown {
            prompt: body.trim().to_owned(),
        },
        output_schema,
    })
}

pub(crate) fn read_toml_schedule(ctx: &mut Ctx, path: &Path, id: &str) -> Option<Schedule> {
    let src = ctx.read_text(path)?;
    let raw: RawSchedule = ctx.parse_toml(&src)?;
    let cron = check_cron(ctx, &src, raw.cron);
    let actions: Vec<&str> = [
        ("markdown", raw.markdown.is_some()),
        ("message", raw.message.is_some()),
        ("tool", raw.tool.is_some()),
        ("handler", raw.handler.is_some()),
        ("command", raw.command.is_some()),
    ]
    .into_iter()
    .filter_map(|(k, on)| on.then_some(k))
    .collect();
    if actions.len() != 1 {
        let msg = if actions.is_empty() {
            format!("schedule `{id}` has no action")
        } else {
            format!(
                "schedule `{id}` has {} actions ({}); it must have exactly one",
                actions.len(),
                actions.join(", ")
            )
        };
        let pos = actions
            .get(1)
            .and_then(|k| src.key_pos(k).or_else(|| src.key_pos(&format!("[{k}]"))));
        ctx.push(
            Diagnostic::error(Code::ScheduleActions, src.rel.clone(), msg)
                .at(pos)
                .with_hint("one of `markdown = \"…\"` (a task session), `message = \"…\"` (+ optional `channel`), `[tool]` with `name` and `input`, `handler = \"<name>\"` (a Rust handler the embedder registers), or `command = [\"…\"]` (a program with the host bridge)"),
        );
        return None;
    }
    if raw.channel.is_some() && raw.message.is_none() {
        ctx.push(
            Diagnostic::error(
                Code::ConflictingFields,
                src.rel.clone(),
                "`channel` goes with `message`",
            )
            .at(src.key_pos("channel")),
        );
        return None;
    }
    if raw.output_schema.is_some() && raw.markdown.is_none() && raw.message.is_none() {
        ctx.push(
            Diagnostic::error(
                Code::ConflictingFields,
                src.rel.clone(),
                "`output_schema` goes with `markdown` or `message` (a turn's reply)",
            )
            .at(src.key_pos("output_schema"))
            .with_hint("a tool, command or handler schedule has no model reply to shape"),
        );
        return None;
    }
    let output_schema = match &raw.output_schema {
        Some(schema) => Some(checks::output_schema(ctx, &src, "output_schema", schema)?),
        None => None,
    };
    let command_only = [
        ("timeout", raw.timeout.is_some()),
        ("max_output_bytes", raw.max_output_bytes.is_some()),
        ("env", raw.env.is_some()),
    ];
    if raw.command.is_none()
        && let Some((key, _)) = command_only.iter().find(|(_, set)| *set)
    {
        ctx.push(
            Diagnostic::error(
                Code::ConflictingFields,
                src.rel.clone(),
                format!("`{key}` goes with `command`"),
            )
            .at(src.key_pos(key)),
        );
        return None;
    }
    let action = if raw.command.is_some() {
        // `agent/schedules/<id>.toml`: the command runs in `agent/`.
        let agent_dir = path
            .parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("."));
        let command = crate::command::read_command(
            ctx,
            &src,
            src.key_pos("command"),
            &format!("schedule `{id}`"),
            crate::command::RawCommand {
                command: raw.command,
                timeout: raw.timeout,
                max_output_bytes: raw.max_output_bytes,
                env: raw.env.unwrap_or_default(),
            },
            agent_dir,
        )?;
        ScheduleAction::Command(command)
    } else if let Some(name) = raw.handler {
        if !crate::names::is_valid_slug(&name) {
            ctx.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    src.rel.clone(),
                    format!("`handler = \"{name}\"` is not a valid handler name"),
                )
                .at(src.key_pos("handler"))
                .with_hint("letters, digits, `-` and `_`, starting with a letter or digit"),
            );
            return None;
        }
        ScheduleAction::Handler { name }
    } else if let Some(prompt) = raw.markdown {
        ScheduleAction::Markdown { prompt }
    } else if let Some(message) = raw.message {
        ScheduleAction::Message {
            message,
            channel: raw.channel,
        }
    } else {
        let tool = raw.tool?;
        let input = tool
            .input
            .as_ref()
            .map(toml_to_json)
            .unwrap_or_else(empty_object);
        if !matches!(input, Value::Object(_)) {
            ctx.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    src.rel.clone(),
                    "`tool.input` must be a table",
                )
                .at(src.key_pos("input")),
            );
            return None;
        }
        ScheduleAction::Tool {
            name: tool.name,
            input,
        }
    };
    Some(Schedule {
        id: id.to_owned(),
        path: src.rel.clone(),
        cron: cron?,
        action,
        output_schema,
    })
}
