//! `hooks/<name>.toml`: observe events, run a command or POST a URL.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::checks;
use crate::diagnostic::{Code, Diagnostic};
use crate::events::check_event_name;
use crate::model::{Hook, HookAction};
use crate::source::Ctx;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHook {
    events: Option<Vec<String>>,
    command: Option<Vec<String>>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    secret: Option<String>,
    timeout: Option<String>,
}

pub(crate) fn read_hook(ctx: &mut Ctx, path: &Path, name: &str) -> Option<Hook> {
    let src = ctx.read_text(path)?;
    let raw: RawHook = ctx.parse_toml(&src)?;
    let mut ok = true;
    let events = raw.events.unwrap_or_default();
    if events.is_empty() {
        ok = false;
        ctx.push(
            Diagnostic::error(
                Code::MissingField,
                src.rel.clone(),
                format!("hook `{name}` needs `events`"),
            )
            .at(src.key_pos("events"))
            .with_hint("e.g. events = [\"turn.completed\"] or [\"*\"]"),
        );
    }
    for e in &events {
        if let Err(d) = check_event_name(&src, "events", e) {
            ok = false;
            ctx.push(d);
        }
    }
    let action = match (raw.command, raw.url) {
        (Some(_), None) if raw.secret.is_some() => {
            ctx.push(
                Diagnostic::error(
                    Code::ConflictingFields,
                    src.rel.clone(),
                    "`secret` goes with `url`, not `command`",
                )
                .at(src.key_pos("secret")),
            );
            None
        }
        (Some(_), None) if !raw.headers.is_empty() => {
            ctx.push(
                Diagnostic::error(
                    Code::ConflictingFields,
                    src.rel.clone(),
                    "`headers` go with `url`, not `command`",
                )
                .at(src.key_pos("headers")),
            );
            None
        }
        (Some(c), None) if !c.is_empty() => Some(HookAction::Command {
            command: c,
            cwd: path.parent().unwrap_or(Path::new(".")).to_path_buf(),
        }),
        (None, Some(url)) => Some(HookAction::Url {
            url,
            headers: raw.headers,
            secret: raw.secret,
        }),
        (Some(_), Some(_)) => {
            ctx.push(
                Diagnostic::error(
                    Code::ConflictingFields,
                    src.rel.clone(),
                    "set `command` or `url`, not both",
                )
                .at(src.key_pos("url")),
            );
            None
        }
        _ => {
            ctx.push(
                Diagnostic::error(Code::MissingField, src.rel.clone(), format!("hook `{name}` needs a `command` (event JSON on stdin) or a `url` (event POSTed)"))
                    .at(src.key_pos("command")),
            );
            None
        }
    };
    let timeout = match raw.timeout.as_deref().map(checks::parse_duration) {
        None => Duration::from_secs(10),
        Some(Ok(d)) => d,
        Some(Err(e)) => {
            ok = false;
            ctx.push(
                Diagnostic::error(
                    Code::InvalidDuration,
                    src.rel.clone(),
                    format!("`timeout`: {e}"),
                )
                .at(src.key_pos("timeout")),
            );
            Duration::from_secs(10)
        }
    };
    let action = action?;
    ok.then(|| Hook {
        name: name.to_owned(),
        path: src.rel.clone(),
        events,
        action,
        timeout,
    })
}
