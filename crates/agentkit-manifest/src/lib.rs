//! Discovers and validates agentkit agent projects.
//!
//! An agent is a folder of ordinary files (`agent/agent.toml`,
//! `instructions.md`, `tools/*.toml`, `skills/`, `mcp-connections/`,
//! `subagents/`, `channels/`, `hooks/`, `schedules/`, `ab.toml`,
//! `sandbox/workspace/`, and `evals/` beside `agent/`). [`discover`] walks
//! such a folder, or a folder of them, into a [`Host`] and returns it with
//! its [`Diagnostics`]: bad input is data, and one bad file never hides
//! another.
//!
//! This crate reads files and nothing else: no network, no async runtime,
//! no environment. `${VAR}` references are recorded ([`EnvRef`]) and left
//! for the host to resolve; [`unset_env_refs`] reports the unset ones given
//! a lookup.
//!
//! ```no_run
//! let found = agentkit_manifest::discover(std::path::Path::new("fixtures/agents"))?;
//! for d in &found.diagnostics {
//!     eprintln!("{d}");
//! }
//! for project in &found.host.agents {
//!     println!("{}: {} tools", project.slug, project.agent.tools.len());
//! }
//! # Ok::<(), agentkit_manifest::Error>(())
//! ```

mod diagnostic;
mod error;
mod model;
mod names;
mod source;

mod checks;
mod events;
mod walk;

mod ab;
mod channels;
mod config;
mod connections;
mod evals;
mod hooks;
mod sandbox;
mod schedules;
mod skills;
mod tools;

mod discover;

pub use checks::{
    CompiledSchema, CronSchedule, check_json_schema, check_template, parse_duration, schema_errors,
};
pub use config::parse_model_string;
pub use diagnostic::{Code, Diagnostic, Diagnostics, Position, Severity};
pub use discover::{Discovery, discover};
pub use error::{Error, Result};
pub use evals::MAX_EVAL_CONCURRENCY;
pub use model::{
    Admission, Agent, AgentConfig, Approval, AuthPolicy, BUILTIN_TOOLS, BearerToken,
    CallToolAction, CalledTool, Channel, ChannelKind, Connection, DEFAULT_JUDGE_THRESHOLD,
    Delivery, EnvRef, EvalCase, EvalFile, EvalTurn, Evals, EvalsConfig, Execution, Expect,
    Experiment, FileExpect, HarnessConfig, Hook, HookAction, Host, Instructions, Judge, Layout,
    LocalConfig, Method, ModelSpec, Project, Provider, Route, RouteAction, RouteResponse, Runtime,
    Sandbox, SandboxLimits, SandboxMode, Schedule, ScheduleAction, SendAction, Skill, Sticky,
    Subagent, TextMatch, Tool, ToolAnnotations, Transport, Variant,
};
pub use names::{RESERVED_SLUGS, did_you_mean, is_valid_slug, is_valid_tool_name};
pub use tools::{DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_TOOL_TIMEOUT};

/// Replaces every `${NAME}` in `s` with `lookup(NAME)`, empty when it
/// answers `None` (an empty secret never admits anything); an unclosed
/// `${` stays as written. The one expansion the host uses for auth
/// secrets, channel templates' environment and connection headers.
///
/// ```
/// let env = |n: &str| (n == "A").then(|| "x".to_owned());
/// assert_eq!(agentkit_manifest::expand_env("a${A}b${B}c${D", env), "axbc${D");
/// ```
pub fn expand_env(s: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find('}') {
            Some(end) => {
                out.push_str(&lookup(&after[..end]).unwrap_or_default());
                rest = &after[end + 1..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// Diagnostics for every `${VAR}` reference whose variable `is_set` says
/// is missing, one per variable and file.
pub fn unset_env_refs(host: &Host, is_set: impl Fn(&str) -> bool) -> Vec<Diagnostic> {
    let mut out: Vec<Diagnostic> = Vec::new();
    for p in &host.agents {
        for r in &p.agent.env_refs {
            if is_set(&r.name)
                || out
                    .iter()
                    .any(|d| d.path == r.path && d.message.contains(&format!("`${{{}}}`", r.name)))
            {
                continue;
            }
            out.push(
                Diagnostic::warning(
                    Code::EnvUnset,
                    r.path.clone(),
                    format!("`${{{}}}` is not set in this environment", r.name),
                )
                .at(Some(Position {
                    line: r.line,
                    column: 1,
                }))
                .with_hint(format!(
                    "export {} before serving, or the value stays empty",
                    r.name
                )),
            );
        }
    }
    out
}
