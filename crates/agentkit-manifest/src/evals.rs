//! `evals/`: `evals.toml` and every `**/*.eval.toml`.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::checks;
use crate::diagnostic::{Code, Diagnostic};
use crate::model::{EvalCase, EvalFile, EvalTurn, Evals, EvalsConfig, Expect};
use crate::names;
use crate::source::{Ctx, SourceText};
use crate::walk;

/// The most eval turns in flight at once: model providers limit requests.
pub const MAX_EVAL_CONCURRENCY: u32 = 200;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEvalFile {
    description: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
    timeout: Option<String>,
    iterations: Option<u32>,
    dry_run: Option<bool>,
    send: Option<String>,
    #[serde(default)]
    workspace_files: BTreeMap<String, String>,
    expect: Option<Expect>,
    turns: Option<Vec<EvalTurn>>,
    cases: Option<Vec<RawCase>>,
    output_schema: Option<toml::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCase {
    id: String,
    description: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
    dry_run: Option<bool>,
    send: Option<String>,
    #[serde(default)]
    workspace_files: BTreeMap<String, String>,
    expect: Option<Expect>,
    turns: Option<Vec<EvalTurn>>,
    output_schema: Option<toml::Value>,
}

pub(crate) fn read_evals(ctx: &mut Ctx, dir: &Path) -> Evals {
    let config_path = dir.join("evals.toml");
    let config = if config_path.is_file() {
        read_config(ctx, &config_path)
    } else {
        None
    };
    let mut files = Vec::new();
    for (rel, path) in walk::walk_files(ctx, dir) {
        if let Some(stem) = rel.strip_suffix(".eval.toml") {
            let id = match stem.strip_suffix("/index") {
                Some(parent) => parent.to_owned(),
                None if stem == "index" => "index".to_owned(),
                None => stem.to_owned(),
            };
            if let Some(f) = read_eval_file(ctx, &path, &id) {
                if let Some(prev) = files.iter().find(|p: &&EvalFile| p.id == f.id) {
                    ctx.push(Diagnostic::error(
                        Code::DuplicateName,
                        f.path.clone(),
                        format!("eval id `{}` is also used by `{}`", f.id, prev.path),
                    ));
                } else {
                    files.push(f);
                }
            }
        } else if walk::is_script_source(&rel)
            && (rel.contains(".eval.") || rel.ends_with("evals.config.ts"))
        {
            let (equivalent, hint) = if rel.ends_with("evals.config.ts") {
                (
                    "evals.toml".to_owned(),
                    "write `evals/evals.toml` with `max_concurrency`".to_owned(),
                )
            } else {
                let id = rel.split(".eval.").next().unwrap_or(&rel);
                (
                    format!("{id}.eval.toml"),
                    format!("write `evals/{id}.eval.toml`"),
                )
            };
            let replaced = dir.join(&equivalent).is_file();
            let d = walk::script_definition(
                ctx,
                &path,
                replaced,
                "TypeScript evals cannot be run by this host".to_owned(),
                hint,
            );
            ctx.push(d);
        }
    }
    if !files.is_empty() && !config_path.is_file() {
        let d = Diagnostic::error(
            Code::EvalsConfigMissing,
            ctx.rel(&config_path),
            "evals exist but `evals/evals.toml` does not",
        )
        .with_hint("create it with `max_concurrency = 8` (at most 200)");
        ctx.push(d);
    }
    Evals { config, files }
}

fn read_config(ctx: &mut Ctx, path: &Path) -> Option<EvalsConfig> {
    let src = ctx.read_text(path)?;
    let table: toml::Table = ctx.parse_toml(&src)?;
    if !table.contains_key("max_concurrency") {
        ctx.push(
            Diagnostic::error(
                Code::MissingField,
                src.rel.clone(),
                "`max_concurrency` is required",
            )
            .with_hint(format!(
                "how many eval turns may run at once, 1 to {MAX_EVAL_CONCURRENCY}"
            )),
        );
        return None;
    }
    let config: EvalsConfig = ctx.parse_toml(&src)?;
    if config.max_concurrency == 0 || config.max_concurrency > MAX_EVAL_CONCURRENCY {
        ctx.push(
            Diagnostic::error(
                Code::InvalidValue,
                src.rel.clone(),
                format!(
                    "`max_concurrency` is {}; it must be 1 to {MAX_EVAL_CONCURRENCY}",
                    config.max_concurrency
                ),
            )
            .at(src.key_pos("max_concurrency"))
            .with_hint("model providers limit concurrent requests; 200 is the hard cap"),
        );
        return None;
    }
    Some(config)
}

fn read_eval_file(ctx: &mut Ctx, path: &Path, id: &str) -> Option<EvalFile> {
    let src = ctx.read_text(path)?;
    let raw: RawEvalFile = ctx.parse_toml(&src)?;
    let timeout = match raw.timeout.as_deref().map(checks::parse_duration) {
        None => None,
        Some(Ok(d)) => Some(d),
        Some(Err(e)) => {
            ctx.push(
                Diagnostic::error(
                    Code::InvalidDuration,
                    src.rel.clone(),
                    format!("`timeout`: {e}"),
                )
                .at(src.key_pos("timeout")),
            );
            return None;
        }
    };
    let iterations = raw.iterations.unwrap_or(1);
    if iterations == 0 {
        ctx.push(
            Diagnostic::error(
                Code::InvalidValue,
                src.rel.clone(),
                "`iterations` must be at least 1",
            )
            .at(src.key_pos("iterations")),
        );
        return None;
    }
    let forms = [raw.send.is_some(), raw.turns.is_some(), raw.cases.is_some()]
        .iter()
        .filter(|b| **b)
        .count();
    if forms != 1 {
        let msg = if forms == 0 {
            "eval has nothing to run"
        } else {
            "eval sets more than one of `send`, `[[turns]]` and `[[cases]]`"
        };
        ctx.push(
            Diagnostic::error(Code::InvalidEval, src.rel.clone(), msg)
                .with_hint("one turn: `send` + `[expect]`; several turns: `[[turns]]`; several datapoints: `[[cases]]` with `id`"),
        );
        return None;
    }
    let file_schema = match &raw.output_schema {
        Some(schema) => Some(checks::output_schema(ctx, &src, "output_schema", schema)?),
        None => None,
    };
    let mut cases = Vec::new();
    if let Some(raw_cases) = raw.cases {
        if raw.expect.is_some() || !raw.workspace_files.is_empty() {
            ctx.push(Diagnostic::error(
                Code::InvalidEval,
                src.rel.clone(),
                "with `[[cases]]`, `expect` and `workspace_files` go inside each case",
            ));
            return None;
        }
        for c in raw_cases {
            if !names::is_valid_slug(&c.id) {
                ctx.push(
                    Diagnostic::error(
                        Code::InvalidEval,
                        src.rel.clone(),
                        format!(
                            "case id `{}` must be one path segment of letters, digits, `-` and `_`",
                            c.id
                        ),
                    )
                    .at(find(&src, &c.id)),
                );
                return None;
            }
            let case_id = format!("{id}/{}", c.id);
            if cases.iter().any(|p: &EvalCase| p.id == case_id) {
                ctx.push(
                    Diagnostic::error(
                        Code::InvalidEval,
                        src.rel.clone(),
                        format!("case id `{}` appears twice", c.id),
                    )
                    .at(find_nth(&src, &c.id, 1)),
                );
                return None;
            }
            let output_schema = match &c.output_schema {
                Some(schema) => Some(checks::output_schema(ctx, &src, "output_schema", schema)?),
                None => file_schema.clone(),
            };
            let turns = turns_of(ctx, &src, c.send, c.workspace_files, c.expect, c.turns)?;
            let mut tags = raw.tags.clone();
            tags.extend(c.tags);
            cases.push(EvalCase {
                id: case_id,
                description: c.description.or_else(|| raw.description.clone()),
                tags,
                timeout,
                iterations,
                dry_run: c.dry_run.or(raw.dry_run),
                output_schema,
                turns,
            });
        }
    } else {
        let turns = turns_of(
            ctx,
            &src,
            raw.send,
            raw.workspace_files,
            raw.expect,
            raw.turns,
        )?;
        cases.push(EvalCase {
            id: id.to_owned(),
            description: raw.description,
            tags: raw.tags,
            timeout,
            iterations,
            dry_run: raw.dry_run,
            output_schema: file_schema,
            turns,
        });
    }
    for case in &cases {
        for turn in &case.turns {
            if !check_expect(ctx, &src, &turn.expect) {
                return None;
            }
        }
    }
    Some(EvalFile {
        id: id.to_owned(),
        path: src.rel.clone(),
        cases,
    })
}

fn find(src: &SourceText, needle: &str) -> Option<crate::diagnostic::Position> {
    find_nth(src, needle, 0)
}

/// The position of the `n`th (0-based) occurrence of `"needle"`.
fn find_nth(src: &SourceText, needle: &str, n: usize) -> Option<crate::diagnostic::Position> {
    src.text
        .match_indices(&format!("\"{needle}\""))
        .nth(n)
        .map(|(o, _)| src.position(o))
}

fn turns_of(
    ctx: &mut Ctx,
    src: &SourceText,
    send: Option<String>,
    workspace_files: BTreeMap<String, String>,
    expect: Option<Expect>,
    turns: Option<Vec<EvalTurn>>,
) -> Option<Vec<EvalTurn>> {
    match (send, turns) {
        (Some(send), None) => Some(vec![EvalTurn {
            send,
            workspace_files,
            approvals: Vec::new(),
            expect: expect.unwrap_or_default(),
        }]),
        (None, Some(turns))
            if !turns.is_empty() && expect.is_none() && workspace_files.is_empty() =>
        {
            Some(turns)
        }
        _ => {
            ctx.push(Diagnostic::error(
                Code::InvalidEval,
                src.rel.clone(),
                "a case needs either `send` (+ `expect`) or a non-empty `[[turns]]`, not both",
            ));
            None
        }
    }
}

fn check_expect(ctx: &mut Ctx, src: &SourceText, e: &Expect) -> bool {
    let mut regexes: Vec<&str> = Vec::new();
    let invalid = |ctx: &mut Ctx, needle: &str, message: String| {
        ctx.push(
            Diagnostic::error(Code::InvalidValue, src.rel.clone(), message)
                .at(src.text.find(needle).map(|o| src.position(o))),
        );
        false
    };
    if let Some(reply) = &e.reply {
        regexes.extend(reply.matches.as_deref());
        if let Some(schema) = &reply.json_schema
            && let Err(msg) = checks::check_json_schema(schema)
        {
            return invalid(
                ctx,
                "json_schema",
                format!("`reply.json_schema` is not a valid JSON Schema: {msg}"),
            );
        }
        if reply.judge.is_none() && (reply.model.is_some() || reply.threshold.is_some()) {
            return invalid(
                ctx,
                "threshold",
                "`reply.model` and `reply.threshold` belong to `reply.judge`".to_owned(),
            );
        }
    }
    for judge in e.judges() {
        if judge.rubric.trim().is_empty() {
            return invalid(ctx, "judge", "a judge's rubric is empty".to_owned());
        }
        if !(0.0..=1.0).contains(&judge.threshold()) {
            return invalid(
                ctx,
                "threshold",
                format!(
                    "judge threshold {} must be between 0 and 1",
                    judge.threshold()
                ),
            );
        }
        if let Some(model) = &judge.model
            && let Err((msg, _)) = crate::config::parse_model_string(model)
        {
            return invalid(ctx, model, format!("judge model `{model}`: {msg}"));
        }
    }
    for f in &e.files {
        regexes.extend(f.matches.as_deref());
        if !crate::channels::is_safe_relative(&f.path) {
            ctx.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    src.rel.clone(),
                    format!(
                        "file expectation path `{}` must be relative to the workspace",
                        f.path
                    ),
                )
                .at(find(src, &f.path)),
            );
            return false;
        }
    }
    for c in &e.called_tool {
        if let crate::model::CalledTool::WithInput { input, .. } = c {
            regexes.extend(input.values().map(String::as_str));
        }
    }
    for r in regexes {
        if let Err(msg) = checks::check_regex(r) {
            ctx.push(
                Diagnostic::error(
                    Code::InvalidRegex,
                    src.rel.clone(),
                    format!("regex `{r}`: {msg}"),
                )
                .at(src.text.find(r).map(|o| src.position(o))),
            );
            return false;
        }
    }
    true
}
