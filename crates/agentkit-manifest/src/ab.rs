//! `ab.toml` and `ab/<id>.toml`: live A/B experiments with sticky
//! per-session variants.

use std::path::Path;

use serde::Deserialize;

use crate::config::parse_model_value;
use crate::diagnostic::{Code, Diagnostic};
use crate::model::{Experiment, Instructions, Sticky, Variant};
use crate::names;
use crate::source::Ctx;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExperiment {
    description: Option<String>,
    traffic: Option<f64>,
    sticky: Option<String>,
    #[serde(default)]
    variants: Vec<RawVariant>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVariant {
    id: String,
    weight: Option<u32>,
    model: Option<toml::Value>,
    instructions: Option<String>,
    instructions_append: Option<String>,
    tools: Option<Vec<String>>,
    max_steps: Option<u32>,
}

pub(crate) fn read_experiment(
    ctx: &mut Ctx,
    path: &Path,
    id: &str,
    agent_dir: &Path,
) -> Option<Experiment> {
    let src = ctx.read_text(path)?;
    let raw: RawExperiment = ctx.parse_toml(&src)?;
    let bad = |ctx: &mut Ctx, key: &str, msg: String| {
        ctx.push(
            Diagnostic::error(Code::InvalidExperiment, src.rel.clone(), msg)
                .at(src.key_pos(key))
                .with_hint("an experiment has `traffic` (0–1) and two or more `[[variants]]` with unique `id` and positive `weight`"),
        );
    };
    let mut ok = true;
    let traffic = raw.traffic.unwrap_or(1.0);
    if !(0.0..=1.0).contains(&traffic) {
        bad(
            ctx,
            "traffic",
            format!("`traffic` is {traffic}; it is the enrolled fraction, from 0 to 1"),
        );
        ok = false;
    }
    let sticky = match raw.sticky.as_deref() {
        None | Some("key") => Sticky::Key,
        Some("principal") => Sticky::Principal,
        Some(other) => {
            bad(
                ctx,
                "sticky",
                format!("`sticky` is `{other}`; it is `key` (the default) or `principal`"),
            );
            ok = false;
            Sticky::Key
        }
    };
    if raw.variants.len() < 2 {
        bad(
            ctx,
            "[[variants]]",
            format!(
                "experiment `{id}` has {} variant(s); it needs at least two",
                raw.variants.len()
            ),
        );
        ok = false;
    }
    let mut variants: Vec<Variant> = Vec::new();
    for v in raw.variants {
        if !names::is_valid_slug(&v.id) {
            bad(
                ctx,
                "id",
                format!("variant id `{}` is not a valid name", v.id),
            );
            ok = false;
            continue;
        }
        if variants.iter().any(|p| p.id == v.id) {
            bad(ctx, "id", format!("variant id `{}` appears twice", v.id));
            ok = false;
            continue;
        }
        let weight = v.weight.unwrap_or(1);
        if weight == 0 {
            bad(ctx, "weight", format!("variant `{}` has weight 0", v.id));
            ok = false;
        }
        if v.max_steps == Some(0) {
            bad(
                ctx,
                "max_steps",
                format!(
                    "variant `{}` has `max_steps = 0`; it must be at least 1",
                    v.id
                ),
            );
            ok = false;
        }
        let model = v
            .model
            .as_ref()
            .and_then(|m| parse_model_value(ctx, &src, "model", m, agent_dir));
        let instructions = match &v.instructions {
            Some(file) => match read_instructions(ctx, &src, file, agent_dir) {
                Some(i) => Some(i),
                None => {
                    ok = false;
                    None
                }
            },
            None => None,
        };
        variants.push(Variant {
            id: v.id,
            weight,
            model,
            instructions,
            instructions_append: v.instructions_append,
            tools: v.tools,
            max_steps: v.max_steps,
        });
    }
    ok.then(|| Experiment {
        id: id.to_owned(),
        path: src.rel.clone(),
        description: raw.description,
        traffic,
        sticky,
        variants,
    })
}

/// A variant's `instructions = "<file>"`: a Markdown file inside `agent/`
/// that replaces the agent's instructions for the variant's sessions.
fn read_instructions(
    ctx: &mut Ctx,
    src: &crate::source::SourceText,
    file: &str,
    agent_dir: &Path,
) -> Option<Instructions> {
    let at = src
        .text
        .find(&format!("\"{file}\""))
        .map(|offset| src.position(offset))
        .or_else(|| src.key_pos("instructions"));
    let rel = Path::new(file);
    let inside = !file.is_empty()
        && rel
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
    if !inside {
        ctx.push(
            Diagnostic::error(
                Code::InvalidExperiment,
                src.rel.clone(),
                format!(
                    "variant `instructions = \"{file}\"` must be a relative path inside `agent/`"
                ),
            )
            .at(at)
            .with_hint("for example `instructions = \"ab/terse.md\"`"),
        );
        return None;
    }
    let path = agent_dir.join(rel);
    if !path.is_file() {
        ctx.push(
            Diagnostic::error(
                Code::MissingFile,
                src.rel.clone(),
                format!("variant instructions file `agent/{file}` does not exist"),
            )
            .at(at),
        );
        return None;
    }
    let text = ctx.read_text(&path)?;
    let body = text.text.trim().to_owned();
    Some(Instructions {
        files: vec![text.rel.clone()],
        bytes: body.len(),
        text: body,
    })
}
