//! The `command = [...]` of route handlers and schedules: a program the
//! host runs outside a turn, checked once here (program, timeout, output
//! cap, passed-through variables) for both.

use std::path::Path;

use serde::Deserialize;

use crate::checks;
use crate::diagnostic::{Code, Diagnostic, Position};
use crate::model::Command;
use crate::source::{Ctx, SourceText};
use crate::tools::{DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_TOOL_TIMEOUT};

/// The fields a command table has, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCommand {
    pub(crate) command: Option<Vec<String>>,
    pub(crate) timeout: Option<String>,
    pub(crate) max_output_bytes: Option<u64>,
    #[serde(default)]
    pub(crate) env: Vec<String>,
}

/// Checks a command; `what` names it in messages (`POST /alert: handler`,
/// `schedule \`sweep\``). `agent_dir` is where it runs. Every problem is a
/// diagnostic at `pos`; `None` when there was one.
pub(crate) fn read_command(
    ctx: &mut Ctx,
    src: &SourceText,
    pos: Option<Position>,
    what: &str,
    raw: RawCommand,
    agent_dir: &Path,
) -> Option<Command> {
    let errors_at_start = ctx.diagnostics.error_count();
    let err = |ctx: &mut Ctx, code: Code, msg: String, hint: Option<&str>| {
        ctx.push(
            Diagnostic::error(code, src.rel.clone(), msg)
                .at(pos)
                .with_opt_hint(hint.map(str::to_owned)),
        );
    };
    let command = match raw.command {
        Some(c) if c.first().is_some_and(|p| !p.trim().is_empty()) => {
            let program = &c[0];
            if (program.starts_with("./") || program.starts_with("../"))
                && !agent_dir.join(program).is_file()
            {
                err(
                    ctx,
                    Code::MissingFile,
                    format!("{what}: program `{program}` does not exist"),
                    Some("relative programs resolve from the agent folder (`agent/`)"),
                );
            }
            c
        }
        Some(_) => {
            err(
                ctx,
                Code::InvalidValue,
                format!("{what}: `command` must name a program"),
                Some("e.g. command = [\"python3\", \"lib/alert.py\"]"),
            );
            Vec::new()
        }
        None => {
            err(
                ctx,
                Code::MissingField,
                format!("{what} needs a `command`"),
                Some("e.g. command = [\"python3\", \"lib/alert.py\"], run in the agent folder"),
            );
            Vec::new()
        }
    };
    let timeout = match raw.timeout.as_deref().map(checks::parse_duration) {
        None => DEFAULT_TOOL_TIMEOUT,
        Some(Ok(d)) => d,
        Some(Err(e)) => {
            err(
                ctx,
                Code::InvalidDuration,
                format!("{what}: `timeout`: {e}"),
                None,
            );
            DEFAULT_TOOL_TIMEOUT
        }
    };
    if raw.max_output_bytes == Some(0) {
        err(
            ctx,
            Code::InvalidValue,
            format!("{what}: `max_output_bytes` must be positive"),
            None,
        );
    }
    for var in &raw.env {
        if var.is_empty() || !var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            err(
                ctx,
                Code::InvalidValue,
                format!("{what}: `env` entry `{var}` is not an environment variable name"),
                None,
            );
        }
    }
    (ctx.diagnostics.error_count() == errors_at_start).then(|| Command {
        command,
        cwd: agent_dir.to_path_buf(),
        timeout,
        max_output_bytes: raw.max_output_bytes.unwrap_or(DEFAULT_MAX_OUTPUT_BYTES),
        env: raw.env,
    })
}
