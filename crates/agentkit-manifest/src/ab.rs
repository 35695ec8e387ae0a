//! `ab.toml` and `ab/<id>.toml`: live A/B experiments with sticky
//! per-session variants.

use std::path::Path;

use serde::Deserialize;

use crate::config::parse_model_value;
use crate::diagnostic::{Code, Diagnostic};
use crate::model::{Experiment, Variant};
use crate::names;
use crate::source::Ctx;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExperiment {
    description: Option<String>,
    traffic: Option<f64>,
    #[serde(default)]
    variants: Vec<RawVariant>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVariant {
    id: String,
    weight: Option<u32>,
    model: Option<toml::Value>,
    instructions_append: Option<String>,
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
        let model = v
            .model
            .as_ref()
            .and_then(|m| parse_model_value(ctx, &src, "model", m, agent_dir));
        variants.push(Variant {
            id: v.id,
            weight,
            model,
            instructions_append: v.instructions_append,
        });
    }
    ok.then(|| Experiment {
        id: id.to_owned(),
        path: src.rel.clone(),
        description: raw.description,
        traffic,
        variants,
    })
}
