//! `agent.toml`: the model, runtime and harness settings of an agent or
//! subagent.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::checks;
use crate::diagnostic::{Code, Diagnostic};
use crate::model::{
    AgentConfig, AuthConfig, BUILTIN_TOOLS, HarnessConfig, LocalConfig, MemoryConfig, ModelSpec,
    Pricing, Provider, SessionsConfig,
};
use crate::names;
use crate::source::{Ctx, SourceText};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAgent {
    name: Option<String>,
    description: Option<String>,
    model: Option<toml::Value>,
    runtime: Option<String>,
    harness: Option<RawHarness>,
    output_schema: Option<toml::Value>,
    local: Option<RawLocal>,
    sessions: Option<RawSessions>,
    memory: Option<RawMemory>,
    auth: Option<RawAuth>,
    /// Accepted from TypeScript-era projects; only the host reads it.
    cloud: Option<toml::Value>,
    /// Cursor-only settings, read so they warn instead of failing.
    hosting: Option<toml::Value>,
    architecture: Option<toml::Value>,
    persistent: Option<toml::Value>,
}

/// Settings of Cursor's managed hosting and project formats, which this
/// host reads past: each with what agentkit does instead.
const CURSOR_ONLY: &[(&str, &str, &str)] = &[
    (
        "hosting",
        "`hosting` configures Cursor's managed deployment; agentkit does not deploy for you, so it is ignored",
        "run `agentkit serve` (or the `agentkit-serve` container) where the agent should live; egress is that machine's, and secrets are its environment variables, read as `${VAR}`",
    ),
    (
        "architecture",
        "`architecture` picks a Cursor SDK project format; agentkit has one format (this folder), so it is ignored",
        "remove it",
    ),
    (
        "persistent",
        "`persistent` asks Cursor hosting for a long-lived runtime; `agentkit serve` is one long-lived process already, so it is ignored",
        "remove it; sessions and their state survive restarts under the state root",
    ),
];

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHarness {
    builtin_tools: Option<Vec<String>>,
    max_steps: Option<u32>,
    turn_timeout: Option<String>,
    approval_timeout: Option<String>,
    sandbox: Option<crate::sandbox::RawSandbox>,
    compaction: Option<String>,
    compaction_threshold: Option<f64>,
    max_input_tokens_per_turn: Option<u64>,
    max_output_tokens_per_turn: Option<u64>,
    max_tokens_per_session: Option<u64>,
    max_tokens_per_day: Option<u64>,
    budget: Option<RawBudget>,
}

/// `[harness.budget]`: budgets in money.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBudget {
    max_cost_usd_per_session: Option<f64>,
    max_cost_usd_per_day: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLocal {
    cwd: Option<String>,
}

/// `[sessions]`: how long settled sessions are kept.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSessions {
    retention: Option<String>,
    max_sessions: Option<u64>,
}

/// `[memory]`: the shared journal.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMemory {
    journal: Option<bool>,
    journal_max_bytes: Option<u64>,
}

/// `[auth]`: roles from token claims.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAuth {
    /// The role of a principal no rule names (`user`).
    default_role: Option<String>,
    /// `[auth.roles]`: role → rules (`"groups:agents-ops"`).
    #[serde(default)]
    roles: std::collections::BTreeMap<String, Vec<String>>,
    /// The claim that names a principal's tenant (`org_id`).
    tenant_claim: Option<String>,
}

/// Reads `agent.toml` in `agent_dir`, if present. Returns the defaults
/// when the file is missing or broken (the broken file is a diagnostic).
pub(crate) fn read_agent_config(ctx: &mut Ctx, agent_dir: &Path) -> (AgentConfig, bool) {
    let path = agent_dir.join("agent.toml");
    if !path.is_file() {
        return (AgentConfig::default(), false);
    }
    let Some(src) = ctx.read_text(&path) else {
        return (AgentConfig::default(), true);
    };
    let Some(raw) = ctx.parse_toml::<RawAgent>(&src) else {
        return (AgentConfig::default(), true);
    };
    let mut config = AgentConfig {
        name: raw.name,
        description: raw.description,
        ..AgentConfig::default()
    };

    if let Some(model) = &raw.model {
        config.model = parse_model_value(ctx, &src, "model", model, agent_dir);
    }
    match raw.runtime.as_deref() {
        None | Some("local") => {}
        Some("cloud") => ctx.push(
            Diagnostic::warning(
                Code::Unsupported,
                src.rel.clone(),
                "`runtime = \"cloud\"` is not supported by this host; turns run locally",
            )
            .at(src.key_pos("runtime"))
            .with_hint("remove `runtime` or set it to \"local\""),
        ),
        Some(other) => ctx.push(
            Diagnostic::error(
                Code::InvalidValue,
                src.rel.clone(),
                format!("unknown runtime `{other}`"),
            )
            .at(src.key_pos("runtime"))
            .with_hint("the only runtime is \"local\""),
        ),
    }
    if raw.cloud.is_some() {
        ctx.push(
            Diagnostic::warning(
                Code::Unsupported,
                src.rel.clone(),
                "`[cloud]` settings are not supported by this host and are ignored",
            )
            .at(src.key_pos("[cloud]").or_else(|| src.key_pos("cloud"))),
        );
    }
    if let Some(schema) = &raw.output_schema {
        config.output_schema = checks::output_schema(ctx, &src, "output_schema", schema);
    }
    let cursor_only = [&raw.hosting, &raw.architecture, &raw.persistent];
    for ((key, message, hint), value) in CURSOR_ONLY.iter().zip(cursor_only) {
        if value.is_some() {
            ctx.push(
                Diagnostic::warning(Code::Unsupported, src.rel.clone(), *message)
                    .at(src
                        .key_pos(&format!("[{key}]"))
                        .or_else(|| src.key_pos(key)))
                    .with_hint(*hint),
            );
        }
    }
    if let Some(h) = raw.harness {
        let project_dir = agent_dir.parent().unwrap_or(agent_dir);
        config.harness = read_harness(ctx, &src, h, project_dir);
    }
    if let Some(sessions) = raw.sessions {
        config.sessions = read_sessions(ctx, &src, sessions);
    }
    if let Some(memory) = raw.memory {
        config.memory = read_memory(ctx, &src, memory);
    }
    if let Some(auth) = raw.auth {
        config.auth = read_auth(ctx, &src, auth);
    }
    if let Some(local) = raw.local
        && let Some(cwd) = local.cwd
    {
        let p = Path::new(&cwd);
        if !p.is_absolute() {
            ctx.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    src.rel.clone(),
                    format!("`local.cwd` must be an absolute path, not `{cwd}`"),
                )
                .at(src.key_pos("cwd")),
            );
        } else {
            config.local = LocalConfig {
                cwd: Some(p.to_path_buf()),
            };
        }
    }
    (config, true)
}

/// The role names `[auth.roles]` and `default_role` take.
const ROLES: [&str; 4] = ["viewer", "user", "operator", "admin"];

fn read_auth(ctx: &mut Ctx, src: &SourceText, raw: RawAuth) -> AuthConfig {
    let mut out = AuthConfig::default();
    match raw.tenant_claim {
        Some(claim) if claim.is_empty() || claim.split('.').any(str::is_empty) => ctx.push(
            Diagnostic::error(
                Code::InvalidAuth,
                src.rel.clone(),
                format!("`auth.tenant_claim` is `{claim}`, not a claim name"),
            )
            .at(src.key_pos("tenant_claim"))
            .with_hint(
                "for example `org_id` or `organization.id` (docs/reference/auth.md#tenants)",
            ),
        ),
        claim => out.tenant_claim = claim,
    }
    let bad_role = |ctx: &mut Ctx, key: &str, name: &str| {
        ctx.push(
            Diagnostic::error(
                Code::InvalidAuth,
                src.rel.clone(),
                format!(
                    "`{key}` names the role `{name}`; roles are viewer, user, operator and admin"
                ),
            )
            .at(src.key_pos(key))
            .with_hint("see docs/reference/auth.md#roles"),
        );
    };
    if let Some(role) = raw.default_role {
        if ROLES.contains(&role.as_str()) {
            out.default_role = Some(role);
        } else {
            bad_role(ctx, "default_role", &role);
        }
    }
    for (role, rules) in raw.roles {
        if !ROLES.contains(&role.as_str()) {
            bad_role(ctx, "roles", &role);
            continue;
        }
        for rule in &rules {
            let shaped = rule
                .split_once(':')
                .is_some_and(|(c, v)| !c.is_empty() && !v.is_empty());
            if !shaped {
                ctx.push(
                    Diagnostic::error(
                        Code::InvalidAuth,
                        src.rel.clone(),
                        format!("`auth.roles.{role}`: `{rule}` is not `<claim>:<value>`"),
                    )
                    .at(src.key_pos(&role))
                    .with_hint("for example `groups:agents-ops`, `realm_access.roles:ops` or `principal:jwt:alice`"),
                );
            }
        }
        out.roles.push((role, rules));
    }
    out
}

/// The smallest `journal_max_bytes`: one line fits.
const JOURNAL_MIN_BYTES: u64 = 256;

fn read_memory(ctx: &mut Ctx, src: &SourceText, raw: RawMemory) -> MemoryConfig {
    let mut out = MemoryConfig {
        journal: raw.journal.unwrap_or(false),
        ..MemoryConfig::default()
    };
    match raw.journal_max_bytes {
        Some(n) if n < JOURNAL_MIN_BYTES => ctx.push(
            Diagnostic::error(
                Code::InvalidValue,
                src.rel.clone(),
                format!("`memory.journal_max_bytes` is {n}; it is at least {JOURNAL_MIN_BYTES}"),
            )
            .at(src.key_pos("journal_max_bytes"))
            .with_hint("leave it out for 1 MiB per file (docs/reference/memory.md)"),
        ),
        Some(n) => out.journal_max_bytes = n,
        None => {}
    }
    out
}

fn read_sessions(ctx: &mut Ctx, src: &SourceText, raw: RawSessions) -> SessionsConfig {
    let mut out = SessionsConfig::default();
    if let Some(t) = raw.retention {
        match checks::parse_duration(&t) {
            Ok(d) if d < std::time::Duration::from_secs(1) => ctx.push(
                Diagnostic::error(
                    Code::InvalidDuration,
                    src.rel.clone(),
                    format!("`sessions.retention` is `{t}`; it is at least one second"),
                )
                .at(src.key_pos("retention"))
                .with_hint("write e.g. `30d`, or leave it out to keep sessions until deleted"),
            ),
            Ok(d) => out.retention = Some(d),
            Err(e) => ctx.push(
                Diagnostic::error(
                    Code::InvalidDuration,
                    src.rel.clone(),
                    format!("`sessions.retention`: {e}"),
                )
                .at(src.key_pos("retention"))
                .with_hint("write e.g. `30d`, or leave it out to keep sessions until deleted"),
            ),
        }
    }
    match raw.max_sessions {
        Some(0) => ctx.push(
            Diagnostic::error(
                Code::InvalidValue,
                src.rel.clone(),
                "`sessions.max_sessions` must be at least 1",
            )
            .at(src.key_pos("max_sessions"))
            .with_hint("leave it out to keep any number"),
        ),
        n => out.max_sessions = n,
    }
    out
}

fn read_harness(
    ctx: &mut Ctx,
    src: &SourceText,
    h: RawHarness,
    project_dir: &Path,
) -> HarnessConfig {
    let mut out = HarnessConfig::default();
    if let Some(sandbox) = h.sandbox {
        out.sandbox = crate::sandbox::read_harness_sandbox(ctx, src, sandbox, project_dir);
    }
    if let Some(tools) = h.builtin_tools {
        for t in &tools {
            if !BUILTIN_TOOLS.contains(&t.as_str()) {
                let hint = names::did_you_mean(t, BUILTIN_TOOLS.iter().copied())
                    .map(|s| format!("did you mean `{s}`?"))
                    .unwrap_or_else(|| format!("built-in tools: {}", BUILTIN_TOOLS.join(", ")));
                ctx.push(
                    Diagnostic::error(
                        Code::InvalidValue,
                        src.rel.clone(),
                        format!("unknown built-in tool `{t}`"),
                    )
                    .at(src.key_pos("builtin_tools"))
                    .with_hint(hint),
                );
            }
        }
        out.builtin_tools = tools;
    }
    if let Some(n) = h.max_steps {
        if n == 0 {
            ctx.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    src.rel.clone(),
                    "`max_steps` must be at least 1",
                )
                .at(src.key_pos("max_steps")),
            );
        } else {
            out.max_steps = n;
        }
    }
    if let Some(t) = h.approval_timeout {
        match checks::parse_duration(&t) {
            Ok(d) => out.approval_timeout = Some(d),
            Err(e) => ctx.push(
                Diagnostic::error(
                    Code::InvalidDuration,
                    src.rel.clone(),
                    format!("`approval_timeout`: {e}"),
                )
                .at(src.key_pos("approval_timeout")),
            ),
        }
    }
    match h.compaction.as_deref() {
        None | Some("auto") => {}
        Some("off") => out.compaction = false,
        Some(other) => ctx.push(
            Diagnostic::error(
                Code::InvalidValue,
                src.rel.clone(),
                format!("`compaction` is `{other}`; it is `auto` (the default) or `off`"),
            )
            .at(src.key_pos("compaction")),
        ),
    }
    if let Some(t) = h.compaction_threshold {
        if t > 0.0 && t < 1.0 {
            out.compaction_threshold = t;
        } else {
            ctx.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    src.rel.clone(),
                    format!("`compaction_threshold` is {t}; it is a fraction of the window, between 0 and 1"),
                )
                .at(src.key_pos("compaction_threshold")),
            );
        }
    }
    for (key, value, slot) in [
        (
            "max_input_tokens_per_turn",
            h.max_input_tokens_per_turn,
            &mut out.max_input_tokens_per_turn,
        ),
        (
            "max_output_tokens_per_turn",
            h.max_output_tokens_per_turn,
            &mut out.max_output_tokens_per_turn,
        ),
        (
            "max_tokens_per_session",
            h.max_tokens_per_session,
            &mut out.max_tokens_per_session,
        ),
        (
            "max_tokens_per_day",
            h.max_tokens_per_day,
            &mut out.max_tokens_per_day,
        ),
    ] {
        match value {
            Some(0) => ctx.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    src.rel.clone(),
                    format!("`{key}` must be at least 1 (leave it out for no limit)"),
                )
                .at(src.key_pos(key)),
            ),
            Some(n) => *slot = Some(n),
            None => {}
        }
    }
    if let Some(budget) = h.budget {
        for (key, value, slot) in [
            (
                "max_cost_usd_per_session",
                budget.max_cost_usd_per_session,
                &mut out.max_cost_usd_per_session,
            ),
            (
                "max_cost_usd_per_day",
                budget.max_cost_usd_per_day,
                &mut out.max_cost_usd_per_day,
            ),
        ] {
            match value {
                Some(n) if n.is_finite() && n > 0.0 => *slot = Some(n),
                Some(n) => ctx.push(
                    Diagnostic::error(
                        Code::InvalidValue,
                        src.rel.clone(),
                        format!(
                            "`harness.budget.{key}` is {n}; it is an amount of US dollars above 0"
                        ),
                    )
                    .at(src.key_pos(key).or_else(|| src.key_pos("harness.budget")))
                    .with_hint("leave it out for no limit"),
                ),
                None => {}
            }
        }
    }
    if let Some(t) = h.turn_timeout {
        match checks::parse_duration(&t) {
            Ok(d) => out.turn_timeout = d,
            Err(e) => ctx.push(
                Diagnostic::error(
                    Code::InvalidDuration,
                    src.rel.clone(),
                    format!("`turn_timeout`: {e}"),
                )
                .at(src.key_pos("turn_timeout")),
            ),
        }
    }
    out
}

/// Parses a `model` value: `"provider:id"` or `{ provider, id, params }`.
pub(crate) fn parse_model_value(
    ctx: &mut Ctx,
    src: &SourceText,
    key: &str,
    value: &toml::Value,
    agent_dir: &Path,
) -> Option<ModelSpec> {
    let pos = src.key_pos(key);
    let result = match value {
        toml::Value::String(s) => parse_model_string(s),
        toml::Value::Table(t) => parse_model_table(t),
        other => Err((
            format!(
                "`{key}` must be a string like \"openai:gpt-4.1-mini\" or a table, not a {}",
                other.type_str()
            ),
            None,
        )),
    };
    if let toml::Value::Table(t) = value
        && let Some(toml::Value::Array(_)) = t.get("params")
    {
        ctx.push(
            Diagnostic::warning(
                Code::Unsupported,
                src.rel.clone(),
                format!("`{key}.params` as a list of `{{ id, value }}` is the Cursor SDK's form; those Cursor model parameters are ignored"),
            )
            .at(src.key_pos("params").or(pos))
            .with_hint("agentkit passes `params` to the provider as a table, e.g. `params = { temperature = 0.2, reasoning_effort = \"high\" }`"),
        );
    }
    match result {
        Ok(mut spec) => {
            if let toml::Value::Table(t) = value
                && let Some(pricing) = t.get("pricing")
            {
                spec.pricing = parse_pricing(ctx, src, key, pricing);
            }
            if spec.provider == Provider::Scripted && !agent_dir.join(&spec.id).is_file() {
                ctx.push(
                    Diagnostic::error(
                        Code::MissingFile,
                        src.rel.clone(),
                        format!("model script `{}` does not exist", spec.id),
                    )
                    .at(pos)
                    .with_hint("scripted model paths are relative to the `agent/` folder"),
                );
            }
            Some(spec)
        }
        Err((message, hint)) => {
            ctx.push(
                Diagnostic::error(Code::InvalidModel, src.rel.clone(), message)
                    .at(pos)
                    .with_opt_hint(hint),
            );
            None
        }
    }
}

type ModelError = (String, Option<String>);

/// Reads `[model.pricing]`; every bad key is its own diagnostic, and a
/// table with any leaves the model without prices (`None`).
fn parse_pricing(
    ctx: &mut Ctx,
    src: &SourceText,
    key: &str,
    value: &toml::Value,
) -> Option<Pricing> {
    let table_pos = src
        .key_pos(&format!("{key}.pricing"))
        .or_else(|| src.key_pos("pricing"));
    let at = |k: &str| src.key_pos(k).or(table_pos);
    let hint = "prices are US dollars per million tokens: `input`, `output`, `cache_read`, `cache_write` (the cache prices default to `input`)";
    let toml::Value::Table(t) = value else {
        ctx.push(
            Diagnostic::error(
                Code::InvalidValue,
                src.rel.clone(),
                format!(
                    "`{key}.pricing` must be a table, not a {}",
                    value.type_str()
                ),
            )
            .at(table_pos)
            .with_hint(hint),
        );
        return None;
    };
    let mut ok = true;
    let mut prices = [None; 4];
    for (name, v) in t {
        let Some(slot) = Pricing::KEYS.iter().position(|k| k == name) else {
            let did = names::did_you_mean(name, Pricing::KEYS)
                .map(|s| format!("did you mean `{s}`? "))
                .unwrap_or_default();
            ctx.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    src.rel.clone(),
                    format!("unknown price `{name}` in `[{key}.pricing]`"),
                )
                .at(at(name))
                .with_hint(format!("{did}{hint}")),
            );
            ok = false;
            continue;
        };
        let price = match v {
            toml::Value::Float(f) => Some(*f),
            toml::Value::Integer(n) => Some(*n as f64),
            _ => None,
        };
        match price {
            Some(p) if p.is_finite() && p >= 0.0 => prices[slot] = Some(p),
            _ => {
                ctx.push(
                    Diagnostic::error(
                        Code::InvalidValue,
                        src.rel.clone(),
                        format!("`{key}.pricing.{name}` is {v}; a price is a number of US dollars, 0 or more"),
                    )
                    .at(at(name))
                    .with_hint(hint),
                );
                ok = false;
            }
        }
    }
    for (slot, name) in [(0, "input"), (1, "output")] {
        if prices[slot].is_none() && !t.contains_key(name) {
            ctx.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    src.rel.clone(),
                    format!("`[{key}.pricing]` needs `{name}`"),
                )
                .at(table_pos)
                .with_hint(hint),
            );
            ok = false;
        }
    }
    let [Some(input), Some(output), cache_read, cache_write] = prices else {
        return None;
    };
    ok.then_some(Pricing {
        input,
        output,
        cache_read: cache_read.unwrap_or(input),
        cache_write: cache_write.unwrap_or(input),
    })
}

fn provider_from(name: &str) -> Result<Provider, ModelError> {
    Provider::ALL
        .iter()
        .copied()
        .find(|p| p.as_str() == name)
        .ok_or_else(|| {
            let known: Vec<&str> = Provider::ALL.iter().map(|p| p.as_str()).collect();
            let hint = names::did_you_mean(name, known.iter().copied())
                .map(|s| format!("did you mean `{s}`?"))
                .unwrap_or_else(|| format!("providers: {}", known.join(", ")));
            (format!("unknown model provider `{name}`"), Some(hint))
        })
}

/// Parses `provider:id` (`test` alone is allowed).
pub fn parse_model_string(s: &str) -> Result<ModelSpec, (String, Option<String>)> {
    let s = s.trim();
    if s == "test" {
        return Ok(ModelSpec {
            provider: Provider::Test,
            id: String::new(),
            params: serde_json::Map::new(),
            context_window: None,
            max_output_tokens: None,
            pricing: None,
        });
    }
    let Some((provider, id)) = s.split_once(':') else {
        return Err((
            format!("model `{s}` names no provider"),
            Some(format!(
                "write `provider:model`, e.g. \"openai:{s}\" or \"anthropic:{s}\""
            )),
        ));
    };
    let provider = provider_from(provider)?;
    if id.is_empty() && provider != Provider::Test {
        return Err((format!("model `{s}` has an empty model id"), None));
    }
    Ok(ModelSpec {
        provider,
        id: id.to_owned(),
        params: serde_json::Map::new(),
        context_window: None,
        max_output_tokens: None,
        pricing: None,
    })
}

fn parse_model_table(t: &toml::Table) -> Result<ModelSpec, ModelError> {
    for key in t.keys() {
        const KEYS: [&str; 6] = [
            "provider",
            "id",
            "params",
            "context_window",
            "max_output_tokens",
            "pricing",
        ];
        if !KEYS.contains(&key.as_str()) {
            let hint = names::did_you_mean(key, KEYS).map(|s| format!("did you mean `{s}`?"));
            return Err((format!("unknown field `{key}` in `[model]`"), hint));
        }
    }
    let provider = match t.get("provider") {
        Some(toml::Value::String(p)) => provider_from(p)?,
        Some(_) => return Err(("`model.provider` must be a string".to_owned(), None)),
        None => {
            return Err((
                "`[model]` needs `provider`".to_owned(),
                Some("e.g. provider = \"openai\"".to_owned()),
            ));
        }
    };
    let id = match t.get("id") {
        Some(toml::Value::String(id)) => id.clone(),
        Some(_) => return Err(("`model.id` must be a string".to_owned(), None)),
        None if provider == Provider::Test => String::new(),
        None => return Err(("`[model]` needs `id`".to_owned(), None)),
    };
    let params = match t.get("params") {
        None => serde_json::Map::new(),
        // The Cursor SDK's `[{ id, value }]`: warned about by the caller.
        Some(toml::Value::Array(_)) => serde_json::Map::new(),
        Some(toml::Value::Table(p)) => match serde_json::to_value(p) {
            Ok(Value::Object(m)) => m,
            _ => {
                return Err((
                    "`model.params` must be a table of plain values".to_owned(),
                    None,
                ));
            }
        },
        Some(_) => return Err(("`model.params` must be a table".to_owned(), None)),
    };
    let count = |key: &str| -> Result<Option<u64>, ModelError> {
        match t.get(key) {
            None => Ok(None),
            Some(toml::Value::Integer(n)) if *n > 0 => Ok(Some(*n as u64)),
            Some(_) => Err((
                format!("`model.{key}` must be a positive integer (tokens)"),
                None,
            )),
        }
    };
    let context_window = count("context_window")?;
    let max_output_tokens = count("max_output_tokens")?;
    if let (Some(w), Some(o)) = (context_window, max_output_tokens)
        && o >= w
    {
        return Err((
            format!("`model.max_output_tokens` ({o}) must be less than `context_window` ({w})"),
            None,
        ));
    }
    Ok(ModelSpec {
        provider,
        id,
        params,
        context_window,
        max_output_tokens,
        pricing: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_strings() {
        let m = parse_model_string("openai:gpt-4.1-mini").ok();
        assert_eq!(
            m.map(|m| (m.provider, m.id)),
            Some((Provider::Openai, "gpt-4.1-mini".to_owned()))
        );
        assert!(parse_model_string("test").is_ok());
        assert!(parse_model_string("gpt-4.1").is_err());
        let err = parse_model_string("opnai:gpt").err().and_then(|e| e.1);
        assert_eq!(err.as_deref(), Some("did you mean `openai`?"));
    }
}
