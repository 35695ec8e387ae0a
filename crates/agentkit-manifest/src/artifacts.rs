//! `artifacts.toml`: the kinds of records an agent keeps beyond its
//! conversation (a finding it posted, a journal entry), each with a
//! description and an optional JSON Schema for its data; whether the
//! model gets the `tag_artifact` tool; how many are kept.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::diagnostic::{Code, Diagnostic};
use crate::model::{ArtifactKind, Artifacts};
use crate::names;
use crate::source::{Ctx, SourceText};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawArtifacts {
    #[serde(default)]
    agent_tool: bool,
    max: Option<i64>,
    #[serde(default)]
    kinds: BTreeMap<String, RawKind>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKind {
    description: Option<String>,
    schema: Option<toml::Value>,
}

/// Where kind `name` is written: its `[kinds.<name>]` header, else the
/// line naming it in an inline `kinds` table, else `kinds`.
fn kind_pos(src: &SourceText, name: &str) -> Option<crate::diagnostic::Position> {
    src.key_pos(&format!("kinds.{name}"))
        .or_else(|| {
            src.text
                .find(&format!("{name} ="))
                .or_else(|| src.text.find(&format!("{name}=")))
                .map(|offset| src.position(offset))
        })
        .or_else(|| src.key_pos("kinds"))
}

/// Where kind `name`'s `key` is written (`schema = …` under its header),
/// else the kind itself.
fn field_pos(src: &SourceText, name: &str, key: &str) -> Option<crate::diagnostic::Position> {
    let header = format!("[kinds.{name}]");
    if let Some(start) = src.text.find(&header) {
        let mut offset = start;
        for (i, line) in src.text[start..].split_inclusive('\n').enumerate() {
            let trimmed = line.trim_start();
            if i > 0 && trimmed.starts_with('[') {
                break;
            }
            if i > 0
                && trimmed
                    .strip_prefix(key)
                    .is_some_and(|r| r.trim_start().starts_with('='))
            {
                return Some(src.position(offset + (line.len() - trimmed.len())));
            }
            offset += line.len();
        }
    }
    kind_pos(src, name)
}

pub(crate) fn read_artifacts(ctx: &mut Ctx, path: &Path) -> Option<Artifacts> {
    let src = ctx.read_text(path)?;
    let raw: RawArtifacts = ctx.parse_toml(&src)?;
    let mut ok = true;
    let max = match raw.max {
        None => None,
        Some(n) if n >= 1 => u64::try_from(n).ok(),
        Some(n) => {
            ctx.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    src.rel.clone(),
                    format!("`max` is {n}; it is how many artifacts to keep, at least 1"),
                )
                .at(src.key_pos("max"))
                .with_hint("leave `max` out to keep every artifact"),
            );
            ok = false;
            None
        }
    };
    if raw.agent_tool && raw.kinds.is_empty() {
        ctx.push(
            Diagnostic::error(
                Code::MissingField,
                src.rel.clone(),
                "`agent_tool = true` offers the model `tag_artifact`, which needs at least one kind",
            )
            .at(src.key_pos("agent_tool"))
            .with_hint(
                "declare a kind: [kinds.finding] with `description` (and an optional `schema`)",
            ),
        );
        ok = false;
    }
    let mut kinds = Vec::new();
    for (name, kind) in raw.kinds {
        if !names::is_valid_slug(&name) {
            ctx.push(
                Diagnostic::error(
                    Code::InvalidName,
                    src.rel.clone(),
                    format!("artifact kind `{name}` is not a valid name"),
                )
                .at(kind_pos(&src, &name))
                .with_hint("a kind is letters, digits, `_` and `-`, starting with a letter or digit, at most 64 characters"),
            );
            ok = false;
            continue;
        }
        let description = kind.description.unwrap_or_default();
        if description.trim().is_empty() {
            ctx.push(
                Diagnostic::error(
                    Code::MissingDescription,
                    src.rel.clone(),
                    format!("artifact kind `{name}` has no description"),
                )
                .at(field_pos(&src, &name, "description"))
                .with_hint("say what one such record is, e.g. description = \"A review finding posted on a pull request\"; the model reads it"),
            );
            ok = false;
        }
        let schema = match kind.schema {
            None => None,
            Some(table) => match schema_of(&table) {
                Ok(schema) => Some(schema),
                Err(message) => {
                    ctx.push(
                        Diagnostic::error(
                            Code::InvalidSchema,
                            src.rel.clone(),
                            format!("artifact kind `{name}`: `schema` {message}"),
                        )
                        .at(field_pos(&src, &name, "schema"))
                        .with_hint("`schema` is a JSON Schema (draft 2020-12) written as a table, e.g. schema = { type = \"object\", required = [\"file\"] }"),
                    );
                    ok = false;
                    None
                }
            },
        };
        kinds.push(ArtifactKind {
            name,
            description: description.trim().to_owned(),
            schema,
        });
    }
    ok.then(|| Artifacts {
        path: src.rel.clone(),
        agent_tool: raw.agent_tool,
        max,
        kinds,
    })
}

/// A `schema` table as a JSON Schema object that compiles.
fn schema_of(table: &toml::Value) -> Result<Value, String> {
    match serde_json::to_value(table) {
        Ok(value @ Value::Object(_)) => crate::checks::check_json_schema(&value)
            .map(|()| value)
            .map_err(|e| format!("is not a valid JSON Schema: {e}")),
        _ => Err("must be a table (a JSON Schema object)".to_owned()),
    }
}
