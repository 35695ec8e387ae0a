//! Walking a folder into a `Host`: which folders are projects, what each
//! agent folder holds, and the checks that span files.

use std::path::{Path, PathBuf};

use crate::ab::read_experiment;
use crate::artifacts::read_artifacts;
use crate::channels::read_channel;
use crate::config::read_agent_config;
use crate::connections::read_connection;
use crate::diagnostic::{Code, Diagnostic, Diagnostics};
use crate::error::{Error, Result};
use crate::evals::read_evals;
use crate::hooks::read_hook;
use crate::model::{
    Agent, ChannelKind, Execution, Host, Instructions, Layout, Project, RouteAction, Sandbox,
    ScheduleAction, Subagent, Tool, Transport,
};
use crate::names::{self, RESERVED_SLUGS};
use crate::schedules::{read_markdown_schedule, read_toml_schedule};
use crate::skills::read_skills;
use crate::source::Ctx;
use crate::tools::read_tool;
use crate::walk::{self, Entry, is_script_source};

/// The result of discovery: what was found, and what is wrong with it.
#[derive(Debug, Clone)]
pub struct Discovery {
    pub host: Host,
    pub diagnostics: Diagnostics,
}

impl Discovery {
    /// True when nothing keeps the host from serving.
    pub fn is_ok(&self) -> bool {
        !self.diagnostics.has_errors()
    }
}

/// Discovers the agent project at `path`, or every project in its child
/// folders. Fails only when `path` is not a readable folder; everything
/// wrong inside it is a diagnostic.
pub fn discover(path: &Path) -> Result<Discovery> {
    let meta = std::fs::metadata(path).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => Error::NotFound {
            path: path.to_path_buf(),
        },
        _ => Error::Io {
            path: path.to_path_buf(),
            source,
        },
    })?;
    if !meta.is_dir() {
        return Err(Error::NotADirectory {
            path: path.to_path_buf(),
        });
    }
    let root = path.canonicalize().map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut ctx = Ctx::new(&root);
    let mut agents = Vec::new();
    let layout = if root.join("agent").is_dir() {
        let slug = root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "agent".to_owned());
        if check_slug(&mut ctx, &root, &slug) {
            agents.push(read_project(&mut ctx, &root, slug));
        }
        Layout::Project
    } else {
        for e in walk::list_dir(&mut ctx, &root) {
            if e.is_dir && e.path.join("agent").is_dir() && check_slug(&mut ctx, &e.path, &e.name) {
                agents.push(read_project(&mut ctx, &e.path, e.name.clone()));
            }
        }
        if agents.is_empty() {
            ctx.push(
                Diagnostic::error(Code::NoAgents, ".", "no agent project here: neither this folder nor any child folder has an `agent/` folder")
                    .with_hint("run `agentkit init <dir>` to scaffold one"),
            );
        }
        Layout::Folder
    };
    check_peers(&mut ctx, &agents);
    let mut diagnostics = ctx.diagnostics;
    diagnostics.sort();
    Ok(Discovery {
        host: Host {
            root,
            layout,
            agents,
        },
        diagnostics,
    })
}

fn check_slug(ctx: &mut Ctx, dir: &Path, slug: &str) -> bool {
    if !names::is_valid_slug(slug) {
        let d = Diagnostic::error(
            Code::InvalidSlug,
            ctx.rel(dir),
            format!("folder name `{slug}` cannot be a URL slug"),
        )
        .with_hint(
            "rename the folder to letters, digits, `-` and `_`, starting with a letter or digit",
        );
        ctx.push(d);
        return false;
    }
    if RESERVED_SLUGS.contains(&slug) {
        let d = Diagnostic::error(
            Code::InvalidSlug,
            ctx.rel(dir),
            format!("`{slug}` is a reserved path segment and cannot be an agent slug"),
        )
        .with_hint(format!("reserved: {}", RESERVED_SLUGS.join(", ")));
        ctx.push(d);
        return false;
    }
    true
}

fn read_project(ctx: &mut Ctx, dir: &Path, slug: String) -> Project {
    let agent = read_agent(ctx, &dir.join("agent"));
    let evals_dir = dir.join("evals");
    let evals = evals_dir.is_dir().then(|| read_evals(ctx, &evals_dir));
    // Eval files are not resolved against the environment; drop their
    // `${…}` text so it is not taken by the next project's agent.
    ctx.take_env_refs();
    if let Some(evals) = &evals {
        check_eval_tools(ctx, &agent, evals);
        // A judge's `scripted:` model file lives in `agent/` too: used.
        let used: Vec<String> = evals
            .files
            .iter()
            .flat_map(|f| &f.cases)
            .flat_map(|c| &c.turns)
            .flat_map(|t| t.expect.judges())
            .filter_map(|j| {
                let entry = script_entry(j.model.as_deref()?.strip_prefix("scripted:")?)?;
                Some(ctx.rel(&agent.dir.join(entry)))
            })
            .collect();
        if !used.is_empty() {
            ctx.diagnostics
                .retain(|d| !(d.code == Code::UnknownEntry && used.contains(&d.path)));
        }
    }
    Project {
        slug,
        path: ctx.rel(dir),
        dir: dir.to_path_buf(),
        agent,
        evals,
    }
}

/// What a top-level entry of `agent/` may be, and what a TypeScript-era
/// name should become.
const AGENT_ENTRIES: &[&str] = &[
    "agent.toml",
    "instructions.md",
    "instructions",
    "tools",
    "skills",
    "mcp-connections",
    "subagents",
    "channels",
    "hooks",
    "schedules",
    "ab.toml",
    "ab",
    "artifacts.toml",
    "sandbox",
    "lib",
];

/// Folders of the TypeScript framework that this host does not have.
const UNSUPPORTED_ENTRIES: &[(&str, &str)] = &[
    (
        "host-connections",
        "host-only MCP connections are not supported; use `mcp-connections/`",
    ),
    ("extensions", "extensions are not supported"),
    (
        "reminders",
        "file-defined reminders are not supported; reminders are created at runtime",
    ),
    (
        "storage.ts",
        "custom storage backends are not supported; state lives under the state root",
    ),
    ("sandbox.ts", "custom sandbox backends are not supported"),
];

fn read_agent(ctx: &mut Ctx, dir: &Path) -> Agent {
    let (config, _) = read_agent_config(ctx, dir);
    let instructions = read_instructions(ctx, dir);
    if instructions.is_none() && !ctx_has_instruction_error(ctx, dir) {
        let d = Diagnostic::error(
            Code::MissingInstructions,
            ctx.rel(dir),
            "the agent has no instructions",
        )
        .with_hint("create `agent/instructions.md` with the always-on system prompt");
        ctx.push(d);
    }
    let mut agent = Agent {
        dir: dir.to_path_buf(),
        config,
        instructions,
        tools: Vec::new(),
        skills: Vec::new(),
        mcp_connections: Vec::new(),
        subagents: Vec::new(),
        channels: Vec::new(),
        hooks: Vec::new(),
        schedules: Vec::new(),
        experiments: Vec::new(),
        artifacts: None,
        sandbox_files: Vec::new(),
        env_refs: Vec::new(),
    };
    // Entries no rule claims wait until the agent's models are known: a
    // `scripted:` model's file (or the folder holding it) is used.
    let mut unclaimed = Vec::new();
    for e in walk::list_dir(ctx, dir) {
        match (e.name.as_str(), e.is_dir) {
            ("agent.toml" | "instructions.md", false) | ("instructions" | "lib", true) => {}
            ("tools", true) => read_tools(ctx, &e, &mut agent),
            ("skills", true) => agent.skills = read_skills(ctx, &e.path),
            ("mcp-connections", true) => {
                for f in toml_files(
                    ctx,
                    &e,
                    "connection",
                    "mcp-connections/<name>.toml with `url`, `command` or `agent`",
                ) {
                    if let Some(c) = read_connection(ctx, &f.path, f.stem()) {
                        agent.mcp_connections.push(c);
                    }
                }
            }
            ("subagents", true) => read_subagents(ctx, &e, &mut agent),
            ("channels", true) => {
                for f in toml_files(
                    ctx,
                    &e,
                    "channel",
                    "channels/<id>.toml with `[[routes]]`, or `kind = \"github\"`",
                ) {
                    if let Some(c) = read_channel(ctx, &f.path, f.stem()) {
                        agent.channels.push(c);
                    }
                }
            }
            ("hooks", true) => {
                for f in toml_files(
                    ctx,
                    &e,
                    "hook",
                    "hooks/<name>.toml with `events` and `command` or `url`",
                ) {
                    if let Some(h) = read_hook(ctx, &f.path, f.stem()) {
                        agent.hooks.push(h);
                    }
                }
            }
            ("schedules", true) => read_schedules(ctx, &e, &mut agent),
            ("ab.toml", false) => {
                if let Some(x) = read_experiment(ctx, &e.path, "ab", dir) {
                    push_experiment(ctx, &mut agent, x);
                }
            }
            ("ab", true) => {
                for f in toml_files(ctx, &e, "experiment", "ab/<id>.toml with `[[variants]]`") {
                    if let Some(x) = read_experiment(ctx, &f.path, f.stem(), dir) {
                        push_experiment(ctx, &mut agent, x);
                    }
                }
            }
            ("artifacts.toml", false) => agent.artifacts = read_artifacts(ctx, &e.path),
            ("sandbox", true) => read_sandbox(ctx, &e, &mut agent),
            _ => unclaimed.push(e),
        }
    }
    let scripts: Vec<&str> = agent
        .config
        .model
        .iter()
        .chain(
            agent
                .experiments
                .iter()
                .flat_map(|x| x.variants.iter().filter_map(|v| v.model.as_ref())),
        )
        .filter(|m| m.provider == crate::model::Provider::Scripted)
        .filter_map(|m| script_entry(&m.id))
        .collect();
    for e in unclaimed {
        if !scripts.contains(&e.name.as_str()) {
            report_unknown_agent_entry(ctx, &e);
        }
    }
    check_references(ctx, &agent);
    agent.env_refs = ctx.take_env_refs();
    agent
}

/// The entry of `agent/` a `scripted:` model's path (relative to `agent/`)
/// goes through: the file itself, or its first folder.
fn script_entry(path: &str) -> Option<&str> {
    let mut parts = Path::new(path)
        .components()
        .skip_while(|c| matches!(c, std::path::Component::CurDir));
    match parts.next() {
        Some(std::path::Component::Normal(first)) => first.to_str(),
        _ => None,
    }
}

/// Adds an experiment unless another file already defined its id
/// (`ab.toml` and `ab/ab.toml` are both `ab`).
fn push_experiment(ctx: &mut Ctx, agent: &mut Agent, x: crate::model::Experiment) {
    if let Some(prev) = agent.experiments.iter().find(|p| p.id == x.id) {
        ctx.push(Diagnostic::error(
            Code::DuplicateName,
            x.path.clone(),
            format!("experiment `{}` is also defined by `{}`", x.id, prev.path),
        ));
    } else {
        agent.experiments.push(x);
    }
}

fn ctx_has_instruction_error(ctx: &Ctx, dir: &Path) -> bool {
    let md = ctx.rel(&dir.join("instructions.md"));
    let folder = ctx.rel(&dir.join("instructions"));
    ctx.diagnostics
        .iter()
        .filter(|d| d.severity == crate::diagnostic::Severity::Error)
        .any(|d| {
            d.path == md
                || d.path.starts_with(&folder)
                || d.code == Code::AmbiguousInstructions && d.path.starts_with(&ctx.rel(dir))
        })
}

/// `instructions.md` or `instructions/*.md` in filename order.
fn read_instructions(ctx: &mut Ctx, dir: &Path) -> Option<Instructions> {
    let md = dir.join("instructions.md");
    let folder = dir.join("instructions");
    let script = ["instructions.ts", "instructions.js"]
        .into_iter()
        .find(|n| dir.join(n).is_file());
    if let Some(script) = script {
        let d = Diagnostic::warning(
            Code::TypescriptDefinition,
            ctx.rel(&dir.join(script)),
            "TypeScript instructions cannot be loaded by this host",
        )
        .with_hint("write the prompt in `instructions.md`, or split it across `instructions/*.md`");
        ctx.push(d);
    }
    let (files, texts): (Vec<String>, Vec<String>) = match (md.is_file(), folder.is_dir()) {
        (true, true) => {
            let d = Diagnostic::error(
                Code::AmbiguousInstructions,
                ctx.rel(&folder),
                "both `instructions.md` and `instructions/` exist",
            )
            .with_hint("keep one: a single file, or a folder of files composed in filename order");
            ctx.push(d);
            return None;
        }
        (false, false) => return None,
        (true, false) => {
            let src = ctx.read_text(&md)?;
            (vec![src.rel], vec![src.text])
        }
        (false, true) => {
            let mut files = Vec::new();
            let mut texts = Vec::new();
            for e in walk::list_dir(ctx, &folder) {
                if !e.is_dir && e.ext() == Some("md") {
                    if let Some(src) = ctx.read_text(&e.path) {
                        files.push(src.rel);
                        texts.push(src.text);
                    }
                } else {
                    ctx.warning(
                        Code::UnknownEntry,
                        &e.path,
                        format!(
                            "`{}` is not composed into the instructions; only `*.md` files are",
                            e.name
                        ),
                    );
                }
            }
            if files.is_empty() {
                return None;
            }
            (files, texts)
        }
    };
    let text = texts
        .iter()
        .map(|t| t.trim_end())
        .collect::<Vec<_>>()
        .join("\n\n");
    if text.trim().is_empty() {
        let rel = files.first().cloned().unwrap_or_default();
        ctx.push(
            Diagnostic::warning(Code::EmptyInstructions, rel, "the instructions are empty")
                .with_hint(
                    "say who the agent is, which tool to use when, and the shape of its answers",
                ),
        );
    }
    Some(Instructions {
        files,
        bytes: text.len(),
        text,
    })
}

/// The `*.toml` files of a definition folder; everything else is reported.
fn toml_files(ctx: &mut Ctx, dir: &Entry, what: &str, shape: &str) -> Vec<Entry> {
    let mut out = Vec::new();
    for e in walk::list_dir(ctx, &dir.path) {
        if !e.is_dir && e.ext() == Some("toml") {
            if check_name(ctx, &e, what, false) {
                out.push(e);
            }
        } else if !e.is_dir && what == "experiment" && e.ext() == Some("md") {
            // A variant's `instructions = "ab/<file>.md"` lives beside it.
        } else if !e.is_dir && is_script_source(&e.name) {
            let stem = walk::definition_stem(&e.name);
            let replaced = dir.path.join(format!("{stem}.toml")).is_file();
            let d = walk::script_definition(
                ctx,
                &e.path,
                replaced,
                format!(
                    "`{}` is a TypeScript/JavaScript {what}, which this host cannot load",
                    e.name
                ),
                format!("write `{}/{stem}.toml` instead ({shape})", dir.name),
            );
            ctx.push(d);
        } else {
            let d = Diagnostic::warning(
                Code::UnknownEntry,
                ctx.rel(&e.path),
                format!("`{}` is not a {what} definition; it is ignored", e.name),
            )
            .with_hint(format!("{what}s are {shape}"));
            ctx.push(d);
        }
    }
    out
}

fn check_name(ctx: &mut Ctx, e: &Entry, what: &str, tool: bool) -> bool {
    let name = e.stem();
    let valid = if tool {
        names::is_valid_tool_name(name)
    } else {
        names::is_valid_slug(name)
    };
    if !valid {
        let rule = if tool {
            "tool names start with a letter and use letters, digits, `-` and `_` (no `__`), at most 64 characters"
        } else {
            "names use letters, digits, `-` and `_`, starting with a letter or digit"
        };
        let d = Diagnostic::error(
            Code::InvalidName,
            ctx.rel(&e.path),
            format!("`{name}` is not a valid {what} name"),
        )
        .with_hint(rule);
        ctx.push(d);
    }
    valid
}

fn read_tools(ctx: &mut Ctx, dir: &Entry, agent: &mut Agent) {
    let mut to_read = Vec::new();
    for e in walk::list_dir(ctx, &dir.path) {
        if e.is_dir {
            continue; // helper folders for tool programs
        }
        if e.ext() == Some("toml") {
            if !check_name(ctx, &e, "tool", true) {
                continue;
            }
            let name = e.stem();
            let reserved = agent
                .config
                .harness
                .builtin_tools
                .iter()
                .map(String::as_str)
                .chain(["task", "remind_me", "load_skill"])
                .find(|b| *b == name);
            if let Some(b) = reserved {
                let d = Diagnostic::error(Code::DuplicateName, ctx.rel(&e.path), format!("tool `{name}` has the name of the built-in `{b}` tool"))
                    .with_hint("rename the file; built-in tools are set in `agent.toml` `[harness] builtin_tools`");
                ctx.push(d);
                continue;
            }
            to_read.push((e.path.clone(), name.to_owned()));
        } else if is_script_source(&e.name)
            && !dir
                .path
                .join(format!("{}.toml", walk::definition_stem(&e.name)))
                .exists()
        {
            let d = walk::script_definition(
                ctx,
                &e.path,
                false,
                format!(
                    "`{}` is a TypeScript/JavaScript tool, which this host cannot load",
                    e.name
                ),
                format!(
                    "write `tools/{}.toml` with `description`, `command` (e.g. [\"node\", \"{}\"]) and `[input_schema]`",
                    walk::definition_stem(&e.name),
                    e.name
                ),
            );
            ctx.push(d);
        }
        // Other files are the programs, scripts and schemas that tool
        // definitions name.
    }
    agent.tools = read_tool_files(ctx, &to_read, &agent.config.harness.sandbox);
}

/// Reads tool files on every core: parsing TOML and checking JSON Schemas
/// dominate the discovery of large projects. Results and diagnostics come
/// back in file order, as a sequential read would give them.
fn read_tool_files(ctx: &mut Ctx, files: &[(PathBuf, String)], sandbox: &Sandbox) -> Vec<Tool> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    if threads < 2 || files.len() < 64 {
        return files
            .iter()
            .filter_map(|(path, name)| read_tool(ctx, path, name, sandbox))
            .collect();
    }
    let chunk = files.len().div_ceil(threads);
    let parts: Vec<(Vec<Tool>, Ctx)> = std::thread::scope(|scope| {
        let handles: Vec<_> = files
            .chunks(chunk)
            .map(|part| {
                let mut local = ctx.fork();
                scope.spawn(move || {
                    let tools: Vec<Tool> = part
                        .iter()
                        .filter_map(|(path, name)| read_tool(&mut local, path, name, sandbox))
                        .collect();
                    (tools, local)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    let mut tools = Vec::with_capacity(files.len());
    for (part, local) in parts {
        tools.extend(part);
        ctx.absorb(local);
    }
    tools
}

const SUBAGENT_IGNORED: &[&str] = &[
    "tools",
    "skills",
    "mcp-connections",
    "subagents",
    "channels",
    "hooks",
    "schedules",
    "sandbox",
    "ab",
    "ab.toml",
    "artifacts.toml",
    "host-connections",
    "extensions",
    "reminders",
];

fn read_subagents(ctx: &mut Ctx, dir: &Entry, agent: &mut Agent) {
    for e in walk::list_dir(ctx, &dir.path) {
        if !e.is_dir {
            let d = Diagnostic::warning(
                Code::UnknownEntry,
                ctx.rel(&e.path),
                format!("`{}` is not a subagent; subagents are folders", e.name),
            )
            .with_hint(format!(
                "create `subagents/{}/agent.toml` with `description`, and `instructions.md`",
                e.stem()
            ));
            ctx.push(d);
            continue;
        }
        if !check_name(ctx, &e, "subagent", false) {
            continue;
        }
        let config_path = e.path.join("agent.toml");
        if !config_path.is_file() {
            let d = Diagnostic::error(Code::MissingFile, ctx.rel(&e.path), format!("subagent `{}` has no `agent.toml`", e.name))
                .with_hint("create it with `description = \"…\"`: the parent model reads it to decide when to delegate");
            ctx.push(d);
            continue;
        }
        let errors_before = ctx.diagnostics.error_count();
        let (config, _) = read_agent_config(ctx, &e.path);
        let instructions = read_instructions(ctx, &e.path);
        for sub in walk::list_dir(ctx, &e.path) {
            match sub.name.as_str() {
                "agent.toml" | "instructions.md" | "instructions" => {}
                name if SUBAGENT_IGNORED.contains(&name) => {
                    let what = if name == "subagents" {
                        "nested subagents are not supported"
                    } else {
                        "subagents inherit the parent's tools, skills and connections"
                    };
                    let d = Diagnostic::warning(
                        Code::SubagentIgnored,
                        ctx.rel(&sub.path),
                        format!("`{name}` inside subagent `{}` is ignored: {what}", e.name),
                    )
                    .with_hint(format!("move it to the root agent's `agent/{name}`"));
                    ctx.push(d);
                }
                _ => report_unknown(
                    ctx,
                    &sub,
                    &["agent.toml", "instructions.md", "instructions"],
                ),
            }
        }
        let Some(description) = config.description.clone().filter(|d| !d.trim().is_empty()) else {
            if ctx.diagnostics.error_count() == errors_before {
                let rel = ctx.rel(&config_path);
                ctx.push(
                    Diagnostic::error(Code::MissingDescription, rel, format!("subagent `{}` needs a `description`", e.name))
                        .with_hint("write it as a routing rule: \"Background research: climate history, records …\""),
                );
            }
            continue;
        };
        agent.subagents.push(Subagent {
            id: e.name.clone(),
            path: ctx.rel(&e.path),
            description,
            model: config.model,
            instructions,
        });
    }
}

fn read_schedules(ctx: &mut Ctx, dir: &Entry, agent: &mut Agent) {
    for e in walk::list_dir(ctx, &dir.path) {
        let schedule = match (e.is_dir, e.ext()) {
            (false, Some("md")) if check_name(ctx, &e, "schedule", false) => {
                read_markdown_schedule(ctx, &e.path, e.stem())
            }
            (false, Some("toml")) if check_name(ctx, &e, "schedule", false) => {
                read_toml_schedule(ctx, &e.path, e.stem())
            }
            (false, Some("md" | "toml")) => None,
            _ if !e.is_dir && is_script_source(&e.name) => {
                let stem = walk::definition_stem(&e.name);
                let replaced = ["md", "toml"]
                    .iter()
                    .any(|ext| dir.path.join(format!("{stem}.{ext}")).is_file());
                let d = walk::script_definition(
                    ctx,
                    &e.path,
                    replaced,
                    format!(
                        "`{}` is a TypeScript/JavaScript schedule, which this host cannot load",
                        e.name
                    ),
                    format!(
                        "write `schedules/{stem}.md` (cron frontmatter + prompt) or `schedules/{stem}.toml` (cron + one action)"
                    ),
                );
                ctx.push(d);
                None
            }
            _ => {
                let d = Diagnostic::warning(
                    Code::UnknownEntry,
                    ctx.rel(&e.path),
                    format!("`{}` is not a schedule; it is ignored", e.name),
                )
                .with_hint("schedules are `<id>.md` with `cron:` frontmatter or `<id>.toml`");
                ctx.push(d);
                None
            }
        };
        if let Some(s) = schedule {
            if let Some(prev) = agent.schedules.iter().find(|p| p.id == s.id) {
                ctx.push(Diagnostic::error(
                    Code::DuplicateName,
                    s.path.clone(),
                    format!("schedule `{}` is also defined by `{}`", s.id, prev.path),
                ));
            } else {
                agent.schedules.push(s);
            }
        }
    }
}

fn read_sandbox(ctx: &mut Ctx, dir: &Entry, agent: &mut Agent) {
    for e in walk::list_dir(ctx, &dir.path) {
        if e.name == "workspace" && e.is_dir {
            agent.sandbox_files = walk::walk_files(ctx, &e.path)
                .into_iter()
                .map(|(rel, _)| rel)
                .collect();
        } else {
            report_unknown(ctx, &e, &["workspace"]);
        }
    }
}

fn report_unknown_agent_entry(ctx: &mut Ctx, e: &Entry) {
    if let Some((_, why)) = UNSUPPORTED_ENTRIES.iter().find(|(n, _)| *n == e.name) {
        ctx.warning(Code::Unsupported, &e.path, format!("`{}`: {why}", e.name));
        return;
    }
    let parent = e.path.parent().unwrap_or(&e.path);
    let ts_equivalent = match e.name.as_str() {
        "agent.ts" | "agent.js" => Some((
            "write `agent/agent.toml` (model, runtime, harness)",
            parent.join("agent.toml").is_file(),
        )),
        "artifacts.ts" | "artifacts.js" => Some((
            "write `agent/artifacts.toml` with `[kinds.<name>]`",
            parent.join("artifacts.toml").is_file(),
        )),
        "ab.ts" | "ab.js" => Some((
            "write `agent/ab.toml` with `[[variants]]`",
            parent.join("ab.toml").is_file() || parent.join("ab").is_dir(),
        )),
        "instructions.ts" | "instructions.js" => Some(("", true)), // reported with the instructions
        _ => None,
    };
    match ts_equivalent {
        Some(("", _)) => {}
        Some((hint, replaced)) => {
            let d = walk::script_definition(
                ctx,
                &e.path,
                replaced,
                format!(
                    "`{}` is a TypeScript/JavaScript definition, which this host cannot load",
                    e.name
                ),
                hint.to_owned(),
            );
            ctx.push(d);
        }
        None if e.name == "evals" => {
            let d = Diagnostic::warning(Code::UnknownEntry, ctx.rel(&e.path), "`agent/evals/` is ignored: evals live in the project's `evals/` folder, beside `agent/`")
                .with_hint("move it up one level");
            ctx.push(d);
        }
        None => report_unknown(ctx, e, AGENT_ENTRIES),
    }
}

fn report_unknown(ctx: &mut Ctx, e: &Entry, known: &[&str]) {
    let hint =
        names::did_you_mean(&e.name, known.iter().copied()).map(|s| format!("did you mean `{s}`?"));
    let kind = if e.is_dir { "folder" } else { "file" };
    let d = Diagnostic::warning(
        Code::UnknownEntry,
        ctx.rel(&e.path),
        format!("unknown {kind} `{}`; agentkit does not discover it", e.name),
    )
    .with_opt_hint(hint.or_else(|| {
        Some(format!(
            "known here: {}; put shared files in `lib/`",
            known.join(", ")
        ))
    }));
    ctx.push(d);
}

/// References between files of one agent: schedules and routes naming
/// channels and tools.
fn check_references(ctx: &mut Ctx, agent: &Agent) {
    let server_tool = |name: &str| -> Result<(), String> {
        match agent.tool(name) {
            Some(t) if t.execution == Execution::Server => Ok(()),
            Some(_) => Err(format!(
                "tool `{name}` runs in the agent's workspace (`execution = \"agent\"`) and cannot be called by the host"
            )),
            None => {
                let hint = names::did_you_mean(name, agent.tools.iter().map(|t| t.name.as_str()));
                Err(format!(
                    "no tool `{name}`{}",
                    hint.map(|h| format!("; did you mean `{h}`?"))
                        .unwrap_or_default()
                ))
            }
        }
    };
    for x in &agent.experiments {
        for v in &x.variants {
            for name in v.tools.iter().flatten() {
                if agent.tool(name).is_none() {
                    let hint =
                        names::did_you_mean(name, agent.tools.iter().map(|t| t.name.as_str()))
                            .map(|s| format!("did you mean `{s}`?"));
                    ctx.push(
                        Diagnostic::error(
                            Code::UnknownReference,
                            x.path.clone(),
                            format!(
                                "variant `{}` of experiment `{}` offers unknown tool `{name}`",
                                v.id, x.id
                            ),
                        )
                        .with_opt_hint(hint),
                    );
                }
            }
        }
    }
    for s in &agent.schedules {
        match &s.action {
            ScheduleAction::Message {
                channel: Some(c), ..
            } => match agent.channel(c) {
                None => {
                    let hint =
                        names::did_you_mean(c, agent.channels.iter().map(|ch| ch.id.as_str()))
                            .map(|s| format!("did you mean `{s}`?"));
                    ctx.push(
                        Diagnostic::error(
                            Code::UnknownReference,
                            s.path.clone(),
                            format!("schedule `{}` hands off to unknown channel `{c}`", s.id),
                        )
                        .with_opt_hint(hint),
                    );
                }
                Some(ch) if ch.kind == ChannelKind::Http => {
                    ctx.push(Diagnostic::error(
                        Code::UnknownReference,
                        s.path.clone(),
                        "omit `channel` to hand a message to the built-in HTTP channel",
                    ));
                }
                Some(_) => {}
            },
            ScheduleAction::Handler { name } => {
                // Files cannot show which handlers the serving program
                // registers; `serve` checks and refuses to start without it.
                ctx.push(
                    Diagnostic::warning(
                        Code::UnknownReference,
                        s.path.clone(),
                        format!(
                            "schedule `{}` runs Rust handler `{name}`: only a program that registers it can serve this agent (`agentkit serve` refuses to start)",
                            s.id
                        ),
                    )
                    .with_hint(format!(
                        "register it with ServeOptions::schedule_handler(\"{name}\", …)"
                    )),
                );
            }
            ScheduleAction::Tool { name, .. } => {
                if let Err(msg) = server_tool(name) {
                    ctx.push(Diagnostic::error(
                        Code::UnknownReference,
                        s.path.clone(),
                        format!("schedule `{}`: {msg}", s.id),
                    ));
                }
            }
            _ => {}
        }
    }
    for c in &agent.channels {
        for r in &c.routes {
            let call = match &r.action {
                RouteAction::CallTool(call) => Some(call),
                RouteAction::CallToolThenSend { call_tool, .. } => Some(call_tool),
                _ => None,
            };
            if let Some(call) = call
                && let Err(msg) = server_tool(&call.tool)
            {
                ctx.push(Diagnostic::error(
                    Code::UnknownReference,
                    c.path.clone(),
                    format!("{} {}: {msg}", r.method.as_str(), r.path),
                ));
            }
        }
    }
}

/// Eval expectations that name tools the agent does not have.
fn check_eval_tools(ctx: &mut Ctx, agent: &Agent, evals: &crate::model::Evals) {
    for f in &evals.files {
        for case in &f.cases {
            for turn in &case.turns {
                let names = turn
                    .expect
                    .called_tool
                    .iter()
                    .map(|c| c.name())
                    .chain(turn.expect.not_called_tool.iter().map(String::as_str))
                    .chain(turn.expect.tool_order.iter().map(String::as_str));
                for name in names {
                    let known = agent.tool(name).is_some()
                        || name.contains("__")
                        || ["task", "remind_me", "load_skill"].contains(&name)
                        || agent.config.harness.builtin_tools.iter().any(|b| b == name);
                    if !known {
                        let hint =
                            names::did_you_mean(name, agent.tools.iter().map(|t| t.name.as_str()))
                                .map(|s| format!("did you mean `{s}`?"));
                        ctx.push(Diagnostic::warning(Code::UnknownReference, f.path.clone(), format!("case `{}` expects tool `{name}`, which the agent does not have", case.id)).with_opt_hint(hint));
                    }
                }
            }
        }
    }
}

/// Peer connections must name another agent of the same host.
fn check_peers(ctx: &mut Ctx, projects: &[Project]) {
    for p in projects {
        for c in &p.agent.mcp_connections {
            let Transport::Peer { agent } = &c.transport else {
                continue;
            };
            if *agent == p.slug {
                ctx.push(Diagnostic::error(
                    Code::PeerSelf,
                    c.path.clone(),
                    format!(
                        "connection `{}` names this agent itself (`{agent}`) as its peer",
                        c.name
                    ),
                ));
            } else if !projects.iter().any(|o| o.slug == *agent) {
                let slugs: Vec<&str> = projects
                    .iter()
                    .map(|o| o.slug.as_str())
                    .filter(|s| *s != p.slug)
                    .collect();
                let hint = names::did_you_mean(agent, slugs.iter().copied())
                    .map(|s| format!("did you mean `{s}`?"))
                    .unwrap_or_else(|| {
                        if slugs.is_empty() {
                            "serve the folder that holds both projects, so the peer is on the same host".to_owned()
                        } else {
                            format!("agents on this host: {}", slugs.join(", "))
                        }
                    });
                ctx.push(
                    Diagnostic::error(
                        Code::UnknownReference,
                        c.path.clone(),
                        format!("connection `{}` names unknown peer agent `{agent}`", c.name),
                    )
                    .with_hint(hint),
                );
            }
        }
    }
}
