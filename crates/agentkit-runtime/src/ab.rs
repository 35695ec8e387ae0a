//! A/B experiments: enrolling a new session in each of its agent's
//! experiments, and the agent a turn of an enrolled session runs as.
//!
//! Assignment is a pure function of the experiment and a stickiness key
//! (a channel's own continuation key, so a conversation that starts a new
//! session keeps its variant; otherwise the session id): FNV-1a hashes
//! decide enrolment (`traffic`) and the variant (by `weight`). The choice
//! is recorded as `ab.assigned {experiment, variant}` (`variant: null`
//! when the traffic share left the session out) right after
//! `session.started`, so the log is the durable record and a restart
//! reads it back through the fold cache.
//!
//! What each variant's sessions did (turns, tokens, latency, feedback) is
//! kept in SQLite (`ab_metrics.rs`) and reported by `ab_report.rs`.

use std::sync::Arc;

use agentkit_manifest::{Agent, Experiment, Instructions};
use agentkit_protocol::{Event, EventData, EventType};

/// One experiment's assignment of a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Assignment {
    pub(crate) experiment: String,
    /// `None`: not enrolled (outside the experiment's traffic share).
    pub(crate) variant: Option<String>,
}

/// FNV-1a, 64 bits, finalised: stable across builds and platforms (std's hasher is
/// not), so a key keeps its variant after an upgrade.
fn fnv1a(parts: &[&str]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            hash ^= 0xff;
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        for byte in part.bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    // FNV's high bits mix poorly for keys that differ in their last
    // characters; MurmurHash3's finaliser spreads every input bit.
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xff51_afd7_ed55_8ccd);
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    hash ^ (hash >> 33)
}

/// A hash as a number in `[0, 1)`.
fn unit(hash: u64) -> f64 {
    (hash >> 11) as f64 / (1u64 << 53) as f64
}

/// The key a new session's variant sticks to in `experiment`: the
/// principal for `sticky = "principal"`, else the channel's continuation
/// key, else the session id.
pub(crate) fn sticky_key<'a>(
    experiment: &Experiment,
    principal: &'a str,
    continuation: Option<&'a str>,
    session: &'a str,
) -> std::borrow::Cow<'a, str> {
    match experiment.sticky {
        agentkit_manifest::Sticky::Principal => format!("principal:{principal}").into(),
        agentkit_manifest::Sticky::Key => continuation.unwrap_or(session).into(),
    }
}

/// Assigns the session with stickiness key `key` in `experiment`.
pub(crate) fn assign(experiment: &Experiment, key: &str) -> Assignment {
    let enrolled = unit(fnv1a(&["traffic", &experiment.id, key])) < experiment.traffic;
    let total: u64 = experiment
        .variants
        .iter()
        .map(|v| u64::from(v.weight))
        .sum();
    let variant = (enrolled && total > 0)
        .then(|| {
            let mut pick = fnv1a(&["variant", &experiment.id, key]) % total;
            experiment.variants.iter().find_map(|v| {
                let weight = u64::from(v.weight);
                if pick < weight {
                    Some(v.id.clone())
                } else {
                    pick -= weight;
                    None
                }
            })
        })
        .flatten();
    Assignment {
        experiment: experiment.id.clone(),
        variant,
    }
}

/// The assignments a session's events record.
pub(crate) fn recorded(events: &[Event]) -> Vec<Assignment> {
    events
        .iter()
        // Parse only the assignments: the others may hold large tool results.
        .filter(|e| e.event_type == EventType::AbAssigned)
        .filter_map(|e| match e.payload() {
            EventData::AbAssigned(a) => Some(Assignment {
                experiment: a.experiment,
                variant: a.variant,
            }),
            _ => None,
        })
        .collect()
}

/// The agent a turn runs as under `assignments`: each variant's model,
/// instructions file, tool set and `max_steps` replace the agent's, and
/// its `instructions_append` is appended to the instructions. `agent`
/// itself when no variant changes anything.
pub(crate) fn agent_for(agent: &Arc<Agent>, assignments: &[Assignment]) -> Arc<Agent> {
    let variants: Vec<_> = assignments
        .iter()
        .filter_map(|a| {
            let id = a.variant.as_deref()?;
            agent
                .experiments
                .iter()
                .find(|e| e.id == a.experiment)?
                .variants
                .iter()
                .find(|v| v.id == id)
        })
        .filter(|v| {
            v.model.is_some()
                || v.instructions.is_some()
                || v.instructions_append.is_some()
                || v.tools.is_some()
                || v.max_steps.is_some()
        })
        .collect();
    if variants.is_empty() {
        return Arc::clone(agent);
    }
    let mut turned = (**agent).clone();
    for variant in variants {
        if let Some(model) = &variant.model {
            turned.config.model = Some(model.clone());
        }
        if let Some(instructions) = &variant.instructions {
            turned.instructions = Some(instructions.clone());
        }
        if let Some(tools) = &variant.tools {
            turned.tools.retain(|t| tools.contains(&t.name));
        }
        if let Some(max_steps) = variant.max_steps {
            turned.config.harness.max_steps = max_steps;
        }
        if let Some(extra) = &variant.instructions_append {
            let instructions = turned.instructions.get_or_insert_with(|| Instructions {
                files: Vec::new(),
                text: String::new(),
                bytes: 0,
            });
            if !instructions.text.is_empty() {
                instructions.text.push_str("\n\n");
            }
            instructions.text.push_str(extra);
            instructions.bytes = instructions.text.len();
        }
    }
    Arc::new(turned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentkit_manifest::Variant;

    fn experiment(traffic: f64, weights: &[u32]) -> Experiment {
        Experiment {
            id: "e".to_owned(),
            path: "agent/ab.toml".to_owned(),
            description: None,
            traffic,
            sticky: agentkit_manifest::Sticky::Key,
            variants: weights
                .iter()
                .enumerate()
                .map(|(i, w)| Variant {
                    id: format!("v{i}"),
                    weight: *w,
                    model: None,
                    instructions: None,
                    instructions_append: None,
                    tools: None,
                    max_steps: None,
                })
                .collect(),
        }
    }

    #[test]
    fn assignment_follows_traffic_and_weights_and_is_sticky() {
        let e = experiment(0.5, &[1, 3]);
        let n = 20_000;
        let (mut out, mut v0, mut v1) = (0, 0, 0);
        for i in 0..n {
            let key = format!("key-{i}");
            let a = assign(&e, &key);
            assert_eq!(a, assign(&e, &key), "sticky");
            match a.variant.as_deref() {
                None => out += 1,
                Some("v0") => v0 += 1,
                Some(_) => v1 += 1,
            }
        }
        let share = |k: i32| f64::from(k) / f64::from(n);
        assert!((share(out) - 0.5).abs() < 0.02, "traffic: {out}");
        let enrolled = f64::from(v0 + v1);
        assert!(
            (f64::from(v1) / enrolled - 0.75).abs() < 0.02,
            "{v0} / {v1}"
        );
        // Nothing enrolled at traffic 0, everything at 1.
        assert!(assign(&experiment(0.0, &[1, 1]), "k").variant.is_none());
        assert!(assign(&experiment(1.0, &[1, 1]), "k").variant.is_some());
    }
}
