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
//! no environment. `${VAR}`, `${VAR:-default}` and `${VAR:?message}`
//! references are recorded ([`EnvRef`]) and left for the host to resolve
//! ([`expand_env`]); [`unset_env_refs`] reports the unset ones given a
//! lookup.
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
mod vars;

mod checks;
mod command;
mod events;
mod walk;

mod ab;
mod artifacts;
mod channels;
mod config;
mod connections;
mod evals;
mod hooks;
mod host_config;
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
pub use host_config::{HostAuth, HostConfig, HostOidc, HostServer, SecretRef, read_host_config};
pub use model::{
    Admission, Agent, AgentConfig, Approval, ArtifactKind, Artifacts, AuthConfig, AuthPolicy,
    BUILTIN_TOOLS, BearerToken, CallToolAction, CalledTool, Channel, ChannelKind, Command,
    Connection, DEFAULT_JUDGE_THRESHOLD, DEFAULT_WORKER_IDLE, Delivery, EnvRef, EvalApproval,
    EvalCase, EvalFile, EvalTurn, Evals, EvalsConfig, Execution, Expect, Experiment, Expose,
    FileExpect, HarnessConfig, Hook, HookAction, Host, Instructions, JOURNAL_MAX_BYTES, Judge,
    Layout, LocalConfig, MAX_WORKER_CONCURRENCY, MemoryConfig, Method, ModelSpec,
    OAuthClientSettings, Pricing, Project, Provider, Route, RouteAction, RouteHandler,
    RouteResponse, Runtime, Sandbox, SandboxLimits, SandboxMode, Schedule, ScheduleAction,
    SendAction, Skill, Sticky, Subagent, TextMatch, Tool, ToolAnnotations, Transport, Variant,
    Worker, WorkerScope,
};
pub use names::{RESERVED_SLUGS, did_you_mean, is_valid_slug, is_valid_tool_name};
pub use tools::{DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_TOOL_TIMEOUT};
pub use vars::{MissingVariable, RefKind, try_expand_env};

/// Replaces every `${NAME}` in `s` with `lookup(NAME)`, `${NAME:-default}`
/// with `default` when the variable is unset or empty, and anything else
/// unset with the empty string (an empty secret never admits anything); an
/// unclosed `${` and text that is no reference stay as written. The one
/// expansion the host uses for auth secrets, channel settings, hooks and
/// connections. A `${NAME:?message}` left unset also reads as empty here:
/// the host refuses to start before that can happen (see
/// [`unset_env_refs`] and [`try_expand_env`]).
///
/// ```
/// let env = |n: &str| (n == "A").then(|| "x".to_owned());
/// assert_eq!(agentkit_manifest::expand_env("a${A}b${B}c${D", env), "axbc${D");
/// assert_eq!(agentkit_manifest::expand_env("${B:-http://127.0.0.1:8080}", env), "http://127.0.0.1:8080");
/// ```
pub fn expand_env(s: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    // Not strict, so it cannot fail; the original text is no worse an answer.
    vars::expand(s, lookup, false).unwrap_or_else(|_| s.to_owned())
}

/// Diagnostics for every `${VAR}` reference whose variable `is_set` says
/// is missing, one per variable and file: a warning (`env-unset`) for a
/// plain `${VAR}`, an error (`env-required`) with the reference's message
/// for `${VAR:?message}`, nothing for `${VAR:-default}`. `serve` refuses
/// to start on the errors; `validate` reports both. Secrets by reference
/// (`${file:…}`, `${secret:…}`) are the host's to check.
pub fn unset_env_refs(host: &Host, is_set: impl Fn(&str) -> bool) -> Vec<Diagnostic> {
    let mut out: Vec<Diagnostic> = Vec::new();
    // (file, variable, required): one diagnostic of each kind per file.
    let mut seen: Vec<(&str, &str, bool)> = Vec::new();
    for p in &host.agents {
        for r in &p.agent.env_refs {
            let key = (r.path.as_str(), r.name.as_str(), r.required.is_some());
            if r.kind != RefKind::Env
                || r.default.is_some()
                || seen.contains(&key)
                || is_set(&r.name)
            {
                continue;
            }
            seen.push(key);
            let at = Some(Position {
                line: r.line,
                column: 1,
            });
            let d = match &r.required {
                Some(message) => {
                    let missing = MissingVariable {
                        name: r.name.clone(),
                        message: message.clone(),
                    };
                    Diagnostic::error(
                        Code::EnvRequired,
                        r.path.clone(),
                        format!("`${{{}:?…}}`: {missing}", r.name),
                    )
                    .with_hint(format!(
                        "export {} before serving; the host does not start without it",
                        r.name
                    ))
                }
                None => Diagnostic::warning(
                    Code::EnvUnset,
                    r.path.clone(),
                    format!("`${{{}}}` is not set in this environment", r.name),
                )
                .with_hint(format!(
                    "export {0} before serving, or the value stays empty; `${{{0}:-default}}` gives it a default",
                    r.name
                )),
            };
            out.push(d.at(at));
        }
    }
    out
}
