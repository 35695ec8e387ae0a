//! One project's conversion, folder by folder: each source file becomes
//! agentkit files, or a report entry saying why not and what to write.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::error::{self, Result};
use crate::node::{self, NodeStatus};
use crate::report::ProjectReport;
use crate::{MigrateOptions, literal, toml_out};

/// Folders never read or copied.
const SKIPPED_DIRS: &[&str] = &[
    "node_modules",
    ".git",
    ".agent-serve",
    ".agentkit",
    "dist",
    ".turbo",
];
/// Where the shim and the original sources go in the output project.
const SHIM_DIR: &str = "agent/lib/agentkit-node";
const ORIGINAL_DIR: &str = "agent/lib/original";

/// The address space a Node child may use: V8 reserves guard regions for
/// WebAssembly memories (undici's HTTP parser, so every `fetch`) that do
/// not fit under the sandbox's default 8 GiB.
const NODE_MEMORY_MB: u64 = 16384;

const TS_EXTENSIONS: &[&str] = &["ts", "mts", "cts", "tsx", "js", "mjs", "cjs", "jsx"];

pub(crate) fn project(
    src: &Path,
    to: &Path,
    name: &str,
    options: &MigrateOptions,
    node_status: &NodeStatus,
) -> Result<ProjectReport> {
    let files = walk(src)?;
    let mut cx = Cx {
        src: src.to_path_buf(),
        to: to.to_path_buf(),
        files,
        values: HashMap::new(),
        from_node: BTreeSet::new(),
        node: false,
        uses_shim: false,
        node_modules: Vec::new(),
        root_settings: None,
        shim_outside_tools: false,
        report: ProjectReport {
            name: name.to_owned(),
            to: to.to_path_buf(),
            ..ProjectReport::default()
        },
    };
    std::fs::create_dir_all(to).map_err(error::io("create", to))?;
    let definitions: Vec<String> = cx
        .files
        .iter()
        .filter(|f| is_definition(f))
        .cloned()
        .collect();
    for rel in &definitions {
        let path = src.join(rel);
        let text = std::fs::read_to_string(&path).map_err(error::io("read", &path))?;
        if let Some(value) = literal::default_export(&text) {
            cx.values.insert(rel.clone(), value);
        }
    }
    if let Some(program) = node_status.program() {
        cx.load_under_node(program, options, &definitions)?;
    }

    cx.agent_settings("agent/agent.ts", "agent/agent.toml", false)?;
    cx.instructions("agent")?;
    cx.skills()?;
    cx.tools()?;
    cx.connections()?;
    cx.subagents()?;
    cx.channels()?;
    cx.schedules()?;
    cx.hooks()?;
    cx.copy_tree("agent/sandbox/workspace")?;
    cx.evals()?;
    cx.lib_files()?;
    cx.leftovers();
    cx.write_root_settings()?;

    if cx.node && !cx.uses_shim {
        remove_dir(&to.join(SHIM_DIR))?;
        remove_dir(&to.join(ORIGINAL_DIR))?;
        let lib = to.join("agent/lib");
        if std::fs::read_dir(&lib).is_ok_and(|mut d| d.next().is_none()) {
            remove_dir(&lib)?;
        }
    } else if cx.uses_shim {
        cx.report.converted(
            "(the project's sources)",
            ORIGINAL_DIR,
            "copied for the Node shim",
        );
        cx.report.converted("(the Node shim)", SHIM_DIR, "written");
    }
    Ok(cx.report)
}

struct Cx {
    src: PathBuf,
    to: PathBuf,
    /// Every file of the project, relative, with `/`.
    files: Vec<String>,
    /// Each definition file's default export.
    values: HashMap<String, Value>,
    /// The files whose value came from Node.
    from_node: BTreeSet<String>,
    /// Node loaded the project: code can run under the shim.
    node: bool,
    /// A written file runs code under the shim.
    uses_shim: bool,
    /// The `node_modules` folders the shim reads (for tools' sandboxes).
    node_modules: Vec<PathBuf>,
    /// The root agent's settings, written last (the sandbox must let the
    /// shim read the `node_modules` folders once something uses it).
    root_settings: Option<(String, Map<String, Value>)>,
    /// A route handler or schedule runs under the shim (in the agent's
    /// sandbox, not a tool's own).
    shim_outside_tools: bool,
    report: ProjectReport,
}

fn remove_dir(path: &Path) -> Result<()> {
    if path.exists() {
        std::fs::remove_dir_all(path).map_err(error::io("remove", path))?;
    }
    Ok(())
}

/// Every file under `root`, relative with `/`, sorted; skipped folders left out.
fn walk(root: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(error::io("read", &dir))?;
        for entry in entries {
            let entry = entry.map_err(error::io("read", &dir))?;
            let path = entry.path();
            let file_type = entry.file_type().map_err(error::io("read", &path))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if file_type.is_dir() {
                if !SKIPPED_DIRS.contains(&name.as_str()) {
                    stack.push(path);
                }
            } else if file_type.is_file()
                && let Ok(rel) = path.strip_prefix(root)
            {
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    out.sort();
    Ok(out)
}

fn extension(rel: &str) -> &str {
    rel.rsplit_once('.').map_or("", |(_, e)| e)
}

fn is_code(rel: &str) -> bool {
    TS_EXTENSIONS.contains(&extension(rel)) && !rel.ends_with(".d.ts")
}

/// `tools/get_weather.ts` → `get_weather`; a kind suffix is dropped
/// (`lookup.tool.ts` → `lookup`).
fn stem(rel: &str) -> String {
    let file = rel.rsplit('/').next().unwrap_or(rel);
    let base = file.split_once('.').map_or(file, |(b, _)| b);
    base.to_owned()
}

/// The files whose default export defines something.
fn is_definition(rel: &str) -> bool {
    if !is_code(rel) {
        return false;
    }
    let parts: Vec<&str> = rel.split('/').collect();
    match parts.as_slice() {
        ["agent", file] => matches!(
            stem(file).as_str(),
            "agent" | "instructions" | "ab" | "sandbox"
        ),
        ["agent", "subagents", _, file] => stem(file) == "agent",
        ["agent", dir, _] => matches!(
            *dir,
            "tools"
                | "skills"
                | "mcp-connections"
                | "host-connections"
                | "channels"
                | "hooks"
                | "schedules"
                | "ab"
        ),
        ["evals", ..] => true,
        _ => false,
    }
}

/// The config object of `defineX({...})` (any of `kinds`).
fn config<'a>(value: &'a Value, kinds: &[&str]) -> Option<&'a Map<String, Value>> {
    let call = value.get("$call")?.as_str()?;
    if !kinds.contains(&call) {
        return None;
    }
    value.get("args")?.get(0)?.as_object()
}

fn callee(value: &Value) -> Option<&str> {
    value.get("$call").and_then(Value::as_str)
}

/// Whether a value is plain data (no function, call or code marker).
fn is_plain(value: &Value) -> bool {
    match value {
        Value::Object(map) => {
            !map.keys().any(|k| {
                k.starts_with('$')
                    && matches!(
                        k.as_str(),
                        "$function" | "$call" | "$code" | "$regex" | "$schema"
                    )
            }) && map.values().all(is_plain)
        }
        Value::Array(items) => items.iter().all(is_plain),
        _ => true,
    }
}

/// A JSON Schema from a tool's or route's schema value: zod converted by
/// Node, or a plain JSON Schema object.
fn schema(value: Option<&Value>) -> Option<Value> {
    let value = value?;
    if let Some(s) = value.get("$schema") {
        return Some(s.clone());
    }
    if value.is_object()
        && is_plain(value)
        && (value.get("type").is_some() || value.get("properties").is_some())
    {
        return Some(value.clone());
    }
    None
}

fn short(value: &Value) -> String {
    let text = match value {
        Value::Object(map) => map
            .get("$function")
            .or_else(|| map.get("$code"))
            .and_then(Value::as_str)
            .map_or_else(|| value.to_string(), ToOwned::to_owned),
        _ => value.to_string(),
    };
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() > 80 {
        format!("{}…", one_line.chars().take(79).collect::<String>())
    } else {
        one_line
    }
}

/// `${NAME}` for a function whose source reads `process.env.NAME`
/// (`() => process.env.GITHUB_WEBHOOK_SECRET`).
fn env_of_function(value: &Value) -> Option<String> {
    let source = value.get("$function")?.as_str()?;
    env_names(source)
        .into_iter()
        .next()
        .map(|n| format!("${{{n}}}"))
}

/// Every `process.env.NAME` (or `process.env["NAME"]`) in `source`.
fn env_names(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find("process.env") {
        rest = &rest[at + "process.env".len()..];
        let name: String = if let Some(r) = rest.strip_prefix('.') {
            r.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        } else if let Some(r) = rest.strip_prefix("[\"").or_else(|| rest.strip_prefix("['")) {
            r.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        } else {
            String::new()
        };
        if !name.is_empty() && !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// Cursor model ids have no agentkit provider; ids of OpenAI's and
/// Anthropic's models get theirs.
fn model(id: &str) -> Option<String> {
    let id = id.trim();
    if id == "test"
        || id.starts_with("openai:")
        || id.starts_with("anthropic:")
        || id.starts_with("scripted:")
    {
        return Some(id.to_owned());
    }
    if id.starts_with("claude") {
        return Some(format!("anthropic:{id}"));
    }
    if ["gpt-", "o1", "o3", "o4"].iter().any(|p| id.starts_with(p)) {
        return Some(format!("openai:{id}"));
    }
    None
}

const MODEL_HINT: &str = "set `model = \"openai:<id>\"` or `\"anthropic:<id>\"` in agent.toml; without one the host default is used (`AGENTKIT_MODEL`, or the offline `test` model under `serve --dev`)";

fn auth_chain(value: &Value, source: &str, report: &mut ProjectReport) -> Option<Value> {
    let items: Vec<&Value> = match value {
        Value::Array(items) => items.iter().collect(),
        other => vec![other],
    };
    let mut chain = Vec::new();
    for item in items {
        let args = item.get("args").and_then(Value::as_array);
        let first = args.and_then(|a| a.first());
        let policy = match callee(item) {
            Some("localDevStrict") => json!("local_dev_strict"),
            Some("localDev") => json!("local_dev"),
            Some("loopbackOnly") => json!("loopback_only"),
            Some("allowAll") => json!("allow_all"),
            Some("bearerAuth") => match first {
                Some(Value::String(token)) if !token.is_empty() => {
                    json!({"bearer": {"token": token}})
                }
                Some(f) if env_of_function(f).is_some() => {
                    json!({"bearer": {"token": env_of_function(f)}})
                }
                _ => {
                    report.manual(
                        source,
                        format!("auth policy `bearerAuth({})`", first.map(short).unwrap_or_default()),
                        "the token is computed by code (or the policy is a verifier function)",
                        "write `{ bearer = { token = \"${TOKEN_VAR}\" } }` in the channel's `auth`, or a Rust verifier (docs/reference/auth.md)",
                    );
                    continue;
                }
            },
            _ => {
                report.manual(
                    source,
                    format!("auth policy `{}`", short(item)),
                    "it is not one of the framework's stock policies",
                    "write the matching agentkit policy in `auth` (bearer, shared_secret, hmac_signature, jwt; docs/reference/channels.md#auth)",
                );
                continue;
            }
        };
        chain.push(policy);
    }
    (!chain.is_empty()).then_some(Value::Array(chain))
}

impl Cx {
    fn how(&self, rel: &str) -> &'static str {
        if self.from_node.contains(rel) {
            "converted (values read under Node)"
        } else {
            "converted"
        }
    }

    fn write(&mut self, target: &str, text: &str) -> Result<()> {
        let path = self.to.join(target);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(error::io("create", parent))?;
        }
        std::fs::write(&path, text).map_err(error::io("write", &path))
    }

    fn copy(&mut self, rel: &str, target: &str) -> Result<()> {
        let from = self.src.join(rel);
        let to = self.to.join(target);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(error::io("create", parent))?;
        }
        std::fs::copy(&from, &to).map_err(error::io("copy", &from))?;
        self.report.converted(rel, target, "copied");
        Ok(())
    }

    fn copy_tree(&mut self, prefix: &str) -> Result<()> {
        let files: Vec<String> = self
            .files
            .iter()
            .filter(|f| f.starts_with(&format!("{prefix}/")))
            .cloned()
            .collect();
        for rel in files {
            self.copy(&rel, &rel)?;
        }
        Ok(())
    }

    fn write_toml(&mut self, source: &str, target: &str, value: &Value) -> Result<()> {
        let comment = format!("Converted by `agentkit migrate` from {source}.");
        match toml_out::document(&comment, value) {
            Some(text) => {
                self.write(target, &text)?;
                let how = self.how(source);
                self.report.converted(source, target, how);
            }
            None => self.report.manual(
                source,
                "the whole file",
                "its value does not write as TOML",
                format!("write {target} by hand"),
            ),
        }
        Ok(())
    }

    fn files_under(&self, prefix: &str) -> Vec<String> {
        self.files
            .iter()
            .filter(|f| f.starts_with(prefix))
            .cloned()
            .collect()
    }

    /// Copies the project to `agent/lib/original`, writes the shim, and
    /// loads every definition under it.
    fn load_under_node(
        &mut self,
        program: &Path,
        options: &MigrateOptions,
        definitions: &[String],
    ) -> Result<()> {
        let original = self.to.join(ORIGINAL_DIR);
        for rel in self.files.clone() {
            let from = self.src.join(&rel);
            let to = original.join(&rel);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).map_err(error::io("create", parent))?;
            }
            std::fs::copy(&from, &to).map_err(error::io("copy", &from))?;
        }
        let mut node_modules: Vec<PathBuf> = Vec::new();
        let own = self.src.join("node_modules");
        if own.is_dir() {
            node_modules.push(crate::absolute(&own).unwrap_or(own));
        }
        for dir in &options.node_modules {
            let dir = crate::absolute(dir).unwrap_or_else(|_| dir.clone());
            if dir.is_dir() && !node_modules.contains(&dir) {
                node_modules.push(dir);
            }
        }
        let shim = self.to.join(SHIM_DIR);
        node::write_shim(&shim, "../original", &node_modules)?;
        self.node_modules = node_modules;
        let files: Vec<PathBuf> = definitions.iter().map(|rel| original.join(rel)).collect();
        let shim_abs = crate::absolute(&shim).unwrap_or(shim);
        let original_abs = crate::absolute(&original).unwrap_or_else(|_| original.clone());
        let files: Vec<PathBuf> = files
            .iter()
            .map(|f| crate::absolute(f).unwrap_or_else(|_| f.clone()))
            .collect();
        match node::extract(program, &shim_abs, &original_abs, &files) {
            Ok(found) => {
                self.node = true;
                for rel in definitions {
                    let key = original_abs.join(rel);
                    match found.get(&key) {
                        Some(Ok(value)) => {
                            self.report.modules_loaded += 1;
                            self.values.insert(rel.clone(), value.clone());
                            self.from_node.insert(rel.clone());
                        }
                        Some(Err(message)) => {
                            self.report.modules_failed += 1;
                            self.report.manual(
                            rel,
                            "loading the module under Node",
                            format!("it failed: {message}"),
                            "its values were read from its source instead; check the converted file (code it runs was not converted)",
                            );
                        }
                        None => {}
                    }
                }
            }
            Err(message) => {
                self.report.modules_failed += definitions.len();
                self.report.manual(
                    "(the project)",
                    "loading the modules under Node",
                    message,
                    "values were read from the modules' source; fix the error and migrate again to convert tools, route handlers and schedules that run code",
                );
            }
        }
        Ok(())
    }

    /// The command that runs `module` (relative to the project) under the
    /// shim, from a program running in `cwd_depth` folders below `agent/`.
    fn shim_command(
        &mut self,
        from_tools: bool,
        mode: &str,
        module: &str,
        extra: &[&str],
    ) -> Value {
        self.uses_shim = true;
        self.shim_outside_tools |= !from_tools;
        let up = if from_tools { "../" } else { "./" };
        let mut command = vec![
            "node".to_owned(),
            "--import".to_owned(),
            format!("{up}lib/agentkit-node/register.mjs"),
            format!("{up}lib/agentkit-node/run.mjs"),
            mode.to_owned(),
            format!("{up}lib/original/{module}"),
        ];
        command.extend(extra.iter().map(|s| (*s).to_owned()));
        json!(command)
    }

    /// `process.env` names a module and the project's `lib/` read.
    fn env_of(&self, rel: &str) -> Vec<String> {
        let mut names = Vec::new();
        let mut sources = vec![rel.to_owned()];
        sources.extend(
            self.files_under("agent/lib/")
                .into_iter()
                .filter(|f| is_code(f)),
        );
        for file in sources {
            if let Ok(text) = std::fs::read_to_string(self.src.join(&file)) {
                for name in env_names(&text) {
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
            }
        }
        names
    }

    fn agent_settings(&mut self, rel: &str, target: &str, subagent: bool) -> Result<()> {
        let Some(value) = self.values.get(rel).cloned() else {
            if self.files.iter().any(|f| f == rel) {
                self.report.manual(
                    rel,
                    "the agent's settings",
                    "its default export is not a `defineAgent({...})` this migration can read",
                    format!("write {target} (docs/reference/agent-toml.md)"),
                );
            } else if subagent {
                self.report.manual(
                    rel,
                    "the subagent's settings",
                    "the subagent has no agent.ts",
                    format!("write {target} with a `description`"),
                );
            }
            return Ok(());
        };
        let Some(cfg) = config(&value, &["defineAgent"]) else {
            self.report.manual(
                rel,
                "the agent's settings",
                "its default export is not `defineAgent({...})`",
                format!("write {target} (docs/reference/agent-toml.md)"),
            );
            return Ok(());
        };
        let mut out = Map::new();
        for (key, v) in cfg {
            match (key.as_str(), v) {
                ("name" | "description", Value::String(s)) => {
                    out.insert(key.clone(), json!(s));
                }
                ("model", Value::String(id)) => match model(id) {
                    Some(m) => {
                        out.insert("model".into(), json!(m));
                    }
                    None => self.report.manual(rel, format!("model `{id}`"), "it is a Cursor model, which agentkit cannot run", MODEL_HINT),
                },
                ("model", Value::Object(m)) => {
                    let id = m.get("id").and_then(Value::as_str).unwrap_or("");
                    match model(id) {
                        Some(mapped) => {
                            out.insert("model".into(), json!(mapped));
                        }
                        None => self.report.manual(rel, format!("model `{id}`"), "it is a Cursor model, which agentkit cannot run", MODEL_HINT),
                    }
                    if let Some(params) = m.get("params").filter(|p| p.as_array().is_some_and(|a| !a.is_empty())) {
                        self.report.manual(
                            rel,
                            format!("model params {}", short(params)),
                            "Cursor's model parameters (effort, fast) have no meaning for other providers",
                            "write provider parameters as `[model] params = { temperature = 0.2, reasoning_effort = \"high\" }`",
                        );
                    }
                }
                ("runtime", Value::String(r)) if r == "local" => {}
                ("runtime", r) => self.report.manual(rel, format!("runtime {}", short(r)), "agentkit runs turns locally only", "nothing: turns run on this host (`[local] cwd` sets where workspaces live)"),
                ("cloud", _) => self.report.manual(rel, "`cloud` settings", "agentkit has no cloud runtime", "clone the repositories into the workspace (sandbox/workspace or a channel's workspace_files)"),
                ("local", Value::Object(local)) => {
                    if let Some(Value::String(cwd)) = local.get("cwd") {
                        if Path::new(cwd).is_absolute() {
                            out.insert("local".into(), json!({"cwd": cwd}));
                        } else {
                            self.report.manual(rel, format!("local.cwd `{cwd}`"), "agentkit needs an absolute path", "write `[local] cwd = \"/absolute/path\"`");
                        }
                    }
                    for k in local.keys().filter(|k| k.as_str() != "cwd") {
                        self.report.manual(rel, format!("local.{k}"), "agentkit has no such setting", "see [harness.sandbox] in docs/reference/agent-toml.md");
                    }
                }
                ("tools", Value::Array(tools)) => {
                    let mut builtins = Vec::new();
                    for t in tools.iter().filter_map(Value::as_str) {
                        match t {
                            "read" | "grep" | "glob" | "shell" => builtins.push(t.to_owned()),
                            "edit" => {
                                builtins.push("edit".to_owned());
                                builtins.push("write".to_owned());
                            }
                            "ls" => builtins.push("list".to_owned()),
                            "mcp" => {}
                            other => self.report.manual(rel, format!("built-in tool `{other}`"), "agentkit has no such built-in", "choose from read, write, edit, list, grep, glob, shell in `[harness] builtin_tools`"),
                        }
                    }
                    builtins.dedup();
                    out.insert("harness".into(), json!({"builtin_tools": builtins}));
                }
                (k @ ("hosting" | "persistent" | "architecture" | "concurrency" | "builtinTools" | "instructions"), v) => {
                    let (why, instead) = match k {
                        "hosting" => ("agentkit does not deploy", "run `agentkit serve` where the agent lives, with its secrets in the environment"),
                        "persistent" => ("`agentkit serve` is one long-lived process", "nothing"),
                        "architecture" => ("there is one project format", "nothing"),
                        "concurrency" => ("agentkit runs one turn per session; there is no agent-wide cap", "bound load with `[harness] turn_timeout` and the token budgets"),
                        "instructions" => ("inline instructions are not read from agent settings", "write instructions.md"),
                        _ => ("its shape is not documented", "set `[harness] builtin_tools`"),
                    };
                    if k == "instructions"
                        && let Value::String(text) = v {
                            let dir = target.rsplit_once('/').map_or("", |(d, _)| d);
                            let path = format!("{dir}/instructions.md");
                            if !self.to.join(&path).exists() {
                                self.write(&path, &format!("{}\n", text.trim_end()))?;
                                self.report.converted(rel, &path, "converted (the `instructions` field)");
                                continue;
                            }
                        }
                    self.report.manual(rel, format!("`{k}`"), why, instead);
                }
                (k, v) => self.report.manual(rel, format!("`{k}: {}`", short(v)), "agentkit has no such agent setting", "see docs/reference/agent-toml.md"),
            }
        }
        if subagent && !out.contains_key("description") {
            self.report.manual(
                rel,
                "`description`",
                "a subagent needs one (the parent reads it to decide when to delegate)",
                "add `description` to the subagent's agent.toml",
            );
        }
        if !subagent {
            self.root_settings = Some((rel.to_owned(), out));
            return Ok(());
        }
        self.write_toml(rel, target, &Value::Object(out))
    }

    fn write_root_settings(&mut self) -> Result<()> {
        let (rel, mut out) = self
            .root_settings
            .take()
            .unwrap_or_else(|| ("(the Node shim)".to_owned(), Map::new()));
        if self.uses_shim && self.shim_outside_tools {
            // Route handlers and schedule commands run in the agent's
            // sandbox: the shim reads zod (and typescript) from these
            // folders, and Node needs the address space (see NODE_MEMORY_MB).
            let harness = out.entry("harness").or_insert_with(|| json!({}));
            if let Some(h) = harness.as_object_mut() {
                let mut sandbox = Map::new();
                if !self.node_modules.is_empty() {
                    sandbox.insert("read".into(), json!(self.node_modules));
                }
                sandbox.insert("limits".into(), json!({"memory_mb": NODE_MEMORY_MB}));
                h.insert("sandbox".into(), Value::Object(sandbox));
            }
        }
        if self.uses_shim {
            self.report.notes.push(format!(
                "tools, route handlers and schedules that run the original code need `node` on the serving host's PATH; the shim finds zod in {} (or run `npm install` in {ORIGINAL_DIR}); their sandbox allows {NODE_MEMORY_MB} MiB of address space, which Node's WebAssembly (fetch) needs",
                if self.node_modules.is_empty() { "the project's node_modules".to_owned() } else { self.node_modules.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ") }
            ));
        }
        if out.is_empty() && rel.starts_with('(') {
            return Ok(());
        }
        self.write_toml(&rel, "agent/agent.toml", &Value::Object(out))
    }

    /// `agent/instructions.md`, `instructions/*.md` or `instructions.ts`
    /// of the agent folder `dir` (`agent` or `agent/subagents/<id>`).
    fn instructions(&mut self, dir: &str) -> Result<()> {
        let md = format!("{dir}/instructions.md");
        if self.files.contains(&md) {
            return self.copy(&md, &md);
        }
        let parts: Vec<String> = self
            .files_under(&format!("{dir}/instructions/"))
            .into_iter()
            .filter(|f| {
                f.ends_with(".md") && f.matches('/').count() == dir.matches('/').count() + 2
            })
            .collect();
        if !parts.is_empty() {
            for part in parts {
                self.copy(&part, &part)?;
            }
            return Ok(());
        }
        let Some(ts) = self
            .files
            .iter()
            .find(|f| f.starts_with(&format!("{dir}/instructions.")) && is_code(f))
            .cloned()
        else {
            return Ok(());
        };
        let text = match self.values.get(&ts) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(v) => config(v, &["defineInstructions"])
                .and_then(|c| c.get("markdown"))
                .and_then(Value::as_str)
                .map(ToOwned::to_owned),
            None => None,
        };
        match text {
            Some(text) => {
                self.write(&md, &format!("{}\n", text.trim_end()))?;
                let how = self.how(&ts);
                self.report.converted(&ts, &md, how);
            }
            None => self.report.manual(&ts, "the instructions", "they are computed by code this migration cannot evaluate (migrate with Node to read them)", format!("write {md}")),
        }
        Ok(())
    }

    fn skills(&mut self) -> Result<()> {
        for rel in self.files_under("agent/skills/") {
            let depth = rel.matches('/').count();
            if depth >= 3 {
                // A packaged skill's folder: copied whole.
                self.copy(&rel, &rel)?;
                continue;
            }
            if rel.ends_with(".md") {
                self.copy(&rel, &rel)?;
                continue;
            }
            if !is_code(&rel) {
                self.copy(&rel, &rel)?;
                continue;
            }
            let name = stem(&rel);
            let Some(cfg) = self.defined(
                &rel,
                "defineSkill",
                format!("skill `{name}`"),
                format!("write agent/skills/{name}.md with `description` frontmatter"),
            ) else {
                continue;
            };
            let description = cfg.get("description").and_then(Value::as_str);
            let body = cfg
                .get("markdown")
                .or_else(|| cfg.get("content"))
                .and_then(Value::as_str);
            let (Some(description), Some(body)) = (description, body) else {
                self.report.manual(
                    &rel,
                    format!("skill `{name}`"),
                    "its description or markdown is computed by code",
                    format!("write agent/skills/{name}.md"),
                );
                continue;
            };
            let front = format!(
                "---\ndescription: {}\n---\n\n{}\n",
                json!(description),
                body.trim_end()
            );
            let files = cfg
                .get("files")
                .and_then(Value::as_object)
                .filter(|f| !f.is_empty());
            let how = self.how(&rel);
            match files {
                Some(files) => {
                    let front = format!(
                        "---\nname: {name}\ndescription: {}\n---\n\n{}\n",
                        json!(description),
                        body.trim_end()
                    );
                    let target = format!("agent/skills/{name}/SKILL.md");
                    self.write(&target, &front)?;
                    self.report.converted(&rel, &target, how);
                    for (path, content) in files {
                        match content.as_str() {
                            Some(text) if !path.contains("..") && !path.starts_with('/') => {
                                let t = format!("agent/skills/{name}/{path}");
                                self.write(&t, text)?;
                                self.report.converted(&rel, &t, how);
                            }
                            _ => self.report.manual(
                                &rel,
                                format!("skill file `{path}`"),
                                "its content is not a string",
                                format!("write agent/skills/{name}/{path}"),
                            ),
                        }
                    }
                }
                None => {
                    let target = format!("agent/skills/{name}.md");
                    self.write(&target, &front)?;
                    self.report.converted(&rel, &target, how);
                }
            }
        }
        Ok(())
    }

    /// The options object of `rel`'s default export when it is a
    /// `define(...)` call this migration can read; otherwise `None`, and
    /// the file is reported as `what` to write by hand as `instead`.
    fn defined(
        &mut self,
        rel: &str,
        define: &str,
        what: String,
        instead: String,
    ) -> Option<Map<String, Value>> {
        let cfg = self
            .values
            .get(rel)
            .and_then(|v| config(v, &[define]))
            .cloned();
        if cfg.is_none() {
            self.report.manual(
                rel,
                what,
                format!("its default export is not a `{define}({{...}})` this migration can read"),
                instead,
            );
        }
        cfg
    }

    fn tools(&mut self) -> Result<()> {
        for rel in self.files_under("agent/tools/") {
            if rel.matches('/').count() != 2 || !is_code(&rel) {
                if !is_code(&rel) {
                    // A tool's data file or script: kept beside the tools.
                    self.copy(&rel, &rel)?;
                }
                continue;
            }
            let name = stem(&rel);
            let Some(cfg) = self.defined(
                &rel,
                "defineTool",
                format!("tool `{name}`"),
                format!("write agent/tools/{name}.toml (docs/reference/tools.md)"),
            ) else {
                continue;
            };
            self.tool(&rel, &name, &cfg)?;
        }
        Ok(())
    }

    fn tool(&mut self, rel: &str, name: &str, cfg: &Map<String, Value>) -> Result<()> {
        let target = format!("agent/tools/{name}.toml");
        let mut out = Map::new();
        match cfg.get("description") {
            Some(Value::String(d)) => {
                out.insert("description".into(), json!(d));
            }
            other => {
                self.report.manual(
                    rel,
                    "`description`",
                    format!(
                        "it is computed by code ({})",
                        other.map(short).unwrap_or_else(|| "missing".into())
                    ),
                    format!("write `description` in {target}"),
                );
                out.insert(
                    "description".into(),
                    json!(format!(
                        "The `{name}` tool (its description was not converted)"
                    )),
                );
            }
        }
        let agent_tool = cfg.get("execution").and_then(Value::as_str) == Some("agent");
        if !agent_tool
            && !self.node
            && cfg
                .get("execute")
                .and_then(|e| e.get("$function"))
                .is_some()
        {
            self.report.manual(
                rel,
                format!("tool `{name}`"),
                "its `execute` body is TypeScript, which runs only under Node (none was used)",
                format!("migrate again with Node on PATH, or write agent/tools/{name}.toml with a `command` that reads the input as JSON on stdin and prints the result"),
            );
            return Ok(());
        }
        let input_schema = match cfg.get("inputSchema") {
            None => Some(json!({"type": "object", "properties": {}})),
            some => schema(some),
        };
        let Some(input_schema) = input_schema else {
            let why = if self.node {
                "it is not a zod schema or JSON Schema object"
            } else {
                "it is a zod schema, which converts only under Node"
            };
            self.report.manual(rel, format!("tool `{name}`"), format!("its inputSchema could not be converted: {why}"), format!("write agent/tools/{name}.toml with `[input_schema]` (JSON Schema), or migrate with Node"));
            return Ok(());
        };
        if agent_tool {
            let Some(Value::String(script)) = cfg.get("script") else {
                self.report.manual(
                    rel,
                    format!("agent tool `{name}`"),
                    "its script is computed by code",
                    format!(
                        "write agent/tools/{name}.toml with `execution = \"agent\"` and `script`"
                    ),
                );
                return Ok(());
            };
            out.insert("execution".into(), json!("agent"));
            out.insert("script".into(), json!(script));
        } else {
            if cfg
                .get("execute")
                .and_then(|e| e.get("$function"))
                .is_none()
            {
                self.report.manual(
                    rel,
                    format!("tool `{name}`"),
                    "it has no `execute` function",
                    format!("write agent/tools/{name}.toml with a `command`"),
                );
                return Ok(());
            }
            if !self.node {
                self.report.manual(
                    rel,
                    format!("tool `{name}`"),
                    "its `execute` body is TypeScript, which runs only under Node (none was used)",
                    format!("migrate again with Node on PATH, or write agent/tools/{name}.toml with a `command` that reads the input as JSON on stdin and prints the result"),
                );
                return Ok(());
            }
            let command = self.shim_command(true, "tool", rel, &[]);
            out.insert("command".into(), command);
            out.insert("timeout".into(), json!("60s"));
            let env = self.env_of(rel);
            if !env.is_empty() {
                out.insert("env".into(), json!(env));
            }
            // The tool's own folder is readable; the shim and the original
            // sources are in agent/lib, zod in the node_modules folders.
            let mut read = vec![json!("agent/lib")];
            read.extend(self.node_modules.iter().map(|p| json!(p)));
            out.insert(
                "sandbox".into(),
                json!({"read": read, "limits": {"memory_mb": NODE_MEMORY_MB}}),
            );
            match cfg.get("needsApproval") {
                Some(Value::Bool(true)) => {
                    out.insert("needs_approval".into(), json!(true));
                }
                Some(Value::Bool(false)) | None => {}
                Some(other) => {
                    out.insert("needs_approval".into(), json!(true));
                    self.report.manual(rel, format!("needsApproval {}", short(other)), "an approval predicate is code; every call now waits for approval", "write `needs_approval` as a JSON Schema the input must match to need approval");
                }
            }
        }
        match cfg.get("effect").and_then(Value::as_str) {
            Some("read") => {
                out.insert("read_only".into(), json!(true));
            }
            Some("write") | None => {}
            Some(other) => self.report.manual(
                rel,
                format!("effect `{other}`"),
                "unknown effect",
                "set read_only / destructive in the tool file",
            ),
        }
        for key in cfg.keys() {
            if !matches!(
                key.as_str(),
                "description"
                    | "execution"
                    | "inputSchema"
                    | "script"
                    | "execute"
                    | "needsApproval"
                    | "effect"
            ) {
                let why = if key == "dryRunResult" {
                    "agentkit's dry-run stub is fixed"
                } else {
                    "agentkit tools have no such field"
                };
                self.report
                    .manual(rel, format!("`{key}`"), why, "see docs/reference/tools.md");
            }
        }
        let schema_file = format!("agent/tools/{name}.schema.json");
        let text = serde_json::to_string_pretty(&input_schema).unwrap_or_default();
        self.write(&schema_file, &(text + "\n"))?;
        out.insert(
            "input_schema_file".into(),
            json!(format!("{name}.schema.json")),
        );
        self.write_toml(rel, &target, &Value::Object(out))?;
        let how = self.how(rel);
        self.report.converted(rel, &schema_file, how);
        Ok(())
    }

    fn connections(&mut self) -> Result<()> {
        for rel in self.files_under("agent/host-connections/") {
            self.report.manual(
                &rel,
                "a host-only MCP connection",
                "agentkit has no host-only connections",
                "write it as agent/mcp-connections/<name>.toml (the model then sees its tools too)",
            );
        }
        for rel in self.files_under("agent/mcp-connections/") {
            if !is_code(&rel) {
                continue;
            }
            let name = stem(&rel);
            let target = format!("agent/mcp-connections/{name}.toml");
            let Some(cfg) = self.defined(
                &rel,
                "defineConnection",
                format!("connection `{name}`"),
                format!("write {target} (docs/reference/mcp-connections.md)"),
            ) else {
                continue;
            };
            if cfg.contains_key("cursorAccount") {
                self.report.manual(&rel, format!("connection `{name}` (cursorAccount)"), "Cursor account connectors are brokered by Cursor's backend", format!("write {target} per server with its `url` and `oauth = true`, then `agentkit mcp login {name}`"));
                continue;
            }
            let mut out = Map::new();
            let mut ok = true;
            for (key, v) in &cfg {
                match (key.as_str(), v) {
                    ("description" | "url" | "agent" | "command" | "cwd", Value::String(_)) => {
                        out.insert(key.clone(), v.clone());
                    }
                    ("args", Value::Array(_)) | ("headers" | "env", Value::Object(_))
                        if is_plain(v) =>
                    {
                        out.insert(key.clone(), v.clone());
                    }
                    ("oauth", Value::Bool(b)) => {
                        out.insert("oauth".into(), json!(b));
                    }
                    ("advertiseTools", _) => {}
                    (k, v) => {
                        ok &= !matches!(k, "url" | "agent" | "command");
                        self.report.manual(
                            &rel,
                            format!("`{k}: {}`", short(v)),
                            "computed by code, or not an agentkit connection field",
                            format!("write it in {target} (`${{VAR}}` for secrets)"),
                        );
                    }
                }
            }
            if ok {
                self.write_toml(&rel, &target, &Value::Object(out))?;
            }
        }
        Ok(())
    }

    fn subagents(&mut self) -> Result<()> {
        let ids: BTreeSet<String> = self
            .files_under("agent/subagents/")
            .iter()
            .filter_map(|f| f.split('/').nth(2).map(ToOwned::to_owned))
            .collect();
        for id in ids {
            let dir = format!("agent/subagents/{id}");
            let ts = self
                .files
                .iter()
                .find(|f| f.starts_with(&format!("{dir}/agent.")) && is_code(f))
                .cloned();
            match ts {
                Some(ts) => self.agent_settings(&ts, &format!("{dir}/agent.toml"), true)?,
                None => self.report.manual(
                    &dir,
                    "the subagent's settings",
                    "it has no agent.ts",
                    format!("write {dir}/agent.toml with a `description`"),
                ),
            }
            self.instructions(&dir)?;
            for rel in self.files_under(&format!("{dir}/")) {
                let rest = &rel[dir.len() + 1..];
                if rest.starts_with("agent.")
                    || rest == "instructions.md"
                    || rest.starts_with("instructions")
                {
                    continue;
                }
                let what = rest.split('/').next().unwrap_or(rest);
                self.report.manual(&rel, format!("`{what}` of a subagent"), "subagents share their parent's tools, skills and connections (the framework ignored these too)", "move it to the parent agent if it is needed");
            }
        }
        Ok(())
    }

    fn channels(&mut self) -> Result<()> {
        for rel in self.files_under("agent/channels/") {
            if !is_code(&rel) {
                continue;
            }
            let id = stem(&rel);
            let Some(value) = self.values.get(&rel).cloned() else {
                self.report.manual(
                    &rel,
                    format!("channel `{id}`"),
                    "its default export is not a channel definition this migration can read",
                    format!("write agent/channels/{id}.toml (docs/reference/channels.md)"),
                );
                continue;
            };
            match callee(&value) {
                Some("defineChannel") => self.webhook_channel(&rel, &id, &value)?,
                Some("httpChannel") => self.http_channel(&rel, &id, &value)?,
                Some("githubChannel") => self.github_channel(&rel, &id, &value)?,
                Some("slackChannel") => self.slack_channel(&rel, &id, &value)?,
                Some(pack @ ("gitlabChannel" | "bitbucketChannel")) => {
                    let kind = pack.trim_end_matches("Channel");
                    self.report.manual(&rel, format!("the {kind} channel `{id}`"), "its handlers are code, and the pack's settings differ", format!("write agent/channels/{id}.toml with `kind = \"{kind}\"` (docs/guides/{kind}.md)"));
                }
                _ => self.report.manual(
                    &rel,
                    format!("channel `{id}`"),
                    "its default export is not a channel definition this migration knows",
                    format!("write agent/channels/{id}.toml (docs/reference/channels.md)"),
                ),
            }
        }
        Ok(())
    }

    fn http_channel(&mut self, rel: &str, id: &str, value: &Value) -> Result<()> {
        let cfg = config(value, &["httpChannel"]).cloned().unwrap_or_default();
        let mut out = Map::new();
        out.insert("kind".into(), json!("http"));
        for (key, v) in &cfg {
            match key.as_str() {
                "auth" => {
                    if let Some(chain) = auth_chain(v, rel, &mut self.report) {
                        out.insert("auth".into(), chain);
                    }
                }
                k => self.report.manual(rel, format!("`{k}`"), "the built-in HTTP channel takes only its auth chain", "a custom webhook channel with a route handler can rewrite messages before `send`"),
            }
        }
        if id != "http" {
            self.report.manual(
                rel,
                format!("`httpChannel` in channels/{id}.ts"),
                "the built-in channel's file must be channels/http.toml",
                "it was written as agent/channels/http.toml",
            );
        }
        self.write_toml(rel, "agent/channels/http.toml", &Value::Object(out))
    }

    fn webhook_channel(&mut self, rel: &str, id: &str, value: &Value) -> Result<()> {
        let cfg = config(value, &["defineChannel"])
            .cloned()
            .unwrap_or_default();
        let target = format!("agent/channels/{id}.toml");
        let mut out = Map::new();
        let mut routes = Vec::new();
        for (key, v) in &cfg {
            match key.as_str() {
                "description" if v.is_string() => {
                    out.insert("description".into(), v.clone());
                }
                "auth" => {
                    if let Some(chain) = auth_chain(v, rel, &mut self.report) {
                        out.insert("auth".into(), chain);
                    }
                }
                "state" if is_plain(v) => {
                    out.insert("state".into(), v.clone());
                }
                "routes" => {
                    for route in v.as_array().into_iter().flatten() {
                        if let Some(r) = self.route(rel, id, route) {
                            routes.push(r);
                        }
                    }
                }
                "events" => {
                    for event in v.as_object().into_iter().flat_map(|m| m.keys()) {
                        self.report.manual(
                            rel,
                            format!("event handler `{event}`"),
                            "event handlers are code run in the framework's process",
                            format!("write `[events.\"{event}\"]` with `post = \"<url>\"` in {target} to deliver the event to a service, or a hook with a command (docs/reference/hooks.md)"),
                        );
                    }
                }
                k => self.report.manual(
                    rel,
                    format!("`{k}: {}`", short(v)),
                    "agentkit channels have no such field, or it is code",
                    "see docs/reference/channels.md",
                ),
            }
        }
        if routes.is_empty() && !out.contains_key("events") {
            self.report.manual(
                rel,
                format!("channel `{id}`"),
                "none of its routes could be converted",
                format!("write {target} by hand"),
            );
            return Ok(());
        }
        // A secret the channel's auth reads stays with the host.
        let auth_text = out.get("auth").map(Value::to_string).unwrap_or_default();
        for route in &mut routes {
            let Some(handler) = route.get_mut("handler").and_then(Value::as_object_mut) else {
                continue;
            };
            let kept: Vec<Value> = handler
                .get("env")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|n| {
                    n.as_str()
                        .is_some_and(|name| !auth_text.contains(&["${", name].concat()))
                })
                .cloned()
                .collect();
            if kept.is_empty() {
                handler.remove("env");
            } else {
                handler.insert("env".into(), Value::Array(kept));
            }
        }
        out.insert("routes".into(), Value::Array(routes));
        self.write_toml(rel, &target, &Value::Object(out))
    }

    fn route(&mut self, rel: &str, id: &str, route: &Value) -> Option<Value> {
        let method = callee(route)?.to_owned();
        let args = route.get("args")?.as_array()?;
        let Some(path) = args.first().and_then(Value::as_str).map(ToOwned::to_owned) else {
            self.report.manual(
                rel,
                format!("a {method} route"),
                "its path is computed by code",
                "write the route in the channel's TOML",
            );
            return None;
        };
        let opts = args
            .get(1)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let what = format!("route {method} {path}");
        let mut out = Map::new();
        out.insert("method".into(), json!(method));
        out.insert("path".into(), json!(path));
        if let Some(Value::String(d)) = opts.get("description") {
            out.insert("description".into(), json!(d));
        }
        let Some(handler) = opts
            .get("handler")
            .and_then(|h| h.get("$function"))
            .and_then(Value::as_str)
        else {
            self.report.manual(
                rel,
                &what,
                "it has no handler function",
                "give the route a `send`, `call_tool` or `handler` action",
            );
            return None;
        };
        if !self.node {
            self.report.manual(
                rel,
                &what,
                "its handler is TypeScript, which runs only under Node (none was used)",
                format!("migrate again with Node on PATH, or write `[routes.handler] command = [...]` (a program reading the request as JSON on stdin) or a declarative `send` in agent/channels/{id}.toml"),
            );
            return None;
        }
        for (key, field) in [
            ("querySchema", "query_schema"),
            ("bodySchema", "body_schema"),
        ] {
            match opts.get(key) {
                None => {}
                some => match schema(some) {
                    Some(s) => {
                        out.insert(field.into(), s);
                    }
                    None => {
                        self.report.manual(rel, &what, format!("its {key} is a zod schema, which converts only under Node"), format!("migrate with Node, or write `[routes.{field}]` as JSON Schema in agent/channels/{id}.toml"));
                        return None;
                    }
                },
            }
        }
        if method == "GET" && !out.contains_key("query_schema") {
            out.insert("query_schema".into(), json!({"type": "object"}));
        }
        if matches!(method.as_str(), "POST" | "PUT" | "PATCH") && !out.contains_key("body_schema") {
            out.insert("body_schema".into(), json!({"type": "object"}));
        }
        let headers = header_names(handler);
        let command = self.shim_command(false, "route", rel, &[&method, &path]);
        let mut h = Map::new();
        h.insert("command".into(), command);
        h.insert("timeout".into(), json!("60s"));
        let env = self.env_of(rel);
        if !env.is_empty() {
            h.insert("env".into(), json!(env));
        }
        if !headers.is_empty() {
            h.insert("headers".into(), json!(headers));
        }
        out.insert("handler".into(), Value::Object(h));
        for key in opts.keys() {
            if !matches!(
                key.as_str(),
                "description" | "querySchema" | "bodySchema" | "handler"
            ) {
                self.report.manual(
                    rel,
                    format!("{what}: `{key}`"),
                    "agentkit routes have no such option",
                    "see docs/reference/channels.md#routes",
                );
            }
        }
        Some(Value::Object(out))
    }

    fn github_channel(&mut self, rel: &str, id: &str, value: &Value) -> Result<()> {
        let cfg = config(value, &["githubChannel"])
            .cloned()
            .unwrap_or_default();
        let target = format!("agent/channels/{id}.toml");
        let mut out = Map::new();
        out.insert("kind".into(), json!("github"));
        let mut rules = Vec::new();
        let mut secret = None;
        for (key, v) in &cfg {
            match (key.as_str(), v) {
                ("description", Value::String(_)) => {
                    out.insert("description".into(), v.clone());
                }
                ("botName", Value::String(b)) => {
                    out.insert("bot_name".into(), json!(b));
                }
                ("apiBaseUrl" | "apiUrl" | "baseUrl", Value::String(u)) => {
                    out.insert("api_url".into(), json!(u));
                }
                ("webhookEvents", Value::Array(_)) if is_plain(v) => {
                    out.insert("events".into(), v.clone());
                }
                ("credentials", Value::Object(c)) => {
                    for (ck, cv) in c {
                        let text = match cv {
                            Value::String(s) => Some(s.clone()),
                            f => env_of_function(f),
                        };
                        match (ck.as_str(), text) {
                            ("webhookSecret", Some(s)) => secret = Some(s),
                            ("token", Some(s)) => {
                                out.insert("token".into(), json!(s));
                            }
                            ("appId", Some(s)) => {
                                out.insert("app_id".into(), json!(s));
                            }
                            ("privateKey", Some(s)) => {
                                out.insert("private_key".into(), json!(s));
                            }
                            ("installationId", Some(s)) => {
                                out.insert("installation_id".into(), json!(s));
                            }
                            (k, _) => self.report.manual(rel, format!("credentials.{k}"), "computed by code, or no such GitHub setting", "see docs/guides/github.md (webhook_secret, token, app_id, private_key)"),
                        }
                    }
                }
                ("progress", Value::Object(p)) => {
                    let mut progress = Map::new();
                    match p.get("commitStatus") {
                        Some(Value::Object(cs)) => {
                            let context = cs
                                .get("context")
                                .and_then(Value::as_str)
                                .unwrap_or("agentkit");
                            progress.insert("commit_status".into(), json!({"context": context}));
                        }
                        Some(Value::Bool(true)) => {
                            progress.insert("commit_status".into(), json!({"context": "agentkit"}));
                        }
                        _ => {}
                    }
                    if let Some(Value::Bool(b)) = p.get("banner") {
                        progress.insert("banner".into(), json!(b));
                    }
                    for k in p
                        .keys()
                        .filter(|k| !matches!(k.as_str(), "commitStatus" | "banner"))
                    {
                        self.report.manual(rel, format!("progress.{k}"), "agentkit's GitHub progress surfaces are the commit status and the banner", "nothing, or a tool posting it through the host bridge's /v1/github");
                    }
                    if !progress.is_empty() {
                        out.insert("progress".into(), Value::Object(progress));
                    }
                }
                (hook, f) if hook.starts_with("on") && f.get("$function").is_some() => {
                    if let Some(rule) = self.github_rule(rel, hook, f) {
                        rules.push(rule);
                    }
                }
                (k, v) => self.report.manual(
                    rel,
                    format!("`{k}: {}`", short(v)),
                    "not a GitHub pack setting agentkit has",
                    "see docs/guides/github.md",
                ),
            }
        }
        out.insert(
            "webhook_secret".into(),
            json!(secret.unwrap_or_else(|| "${GITHUB_WEBHOOK_SECRET}".to_owned())),
        );
        if rules.is_empty() {
            self.report.manual(
                rel,
                "the channel's hooks",
                "no hook converted into a rule",
                format!("write `[[rules]]` in {target} (docs/guides/github.md)"),
            );
        }
        out.insert("rules".into(), Value::Array(rules));
        self.write_toml(rel, &target, &Value::Object(out))
    }

    /// `slackChannel({...})`: the pack's settings; its handlers are code.
    fn slack_channel(&mut self, rel: &str, id: &str, value: &Value) -> Result<()> {
        let cfg = config(value, &["slackChannel"])
            .cloned()
            .unwrap_or_default();
        let target = format!("agent/channels/{id}.toml");
        if matches!(cfg.get("cursorAccount"), Some(Value::Bool(true))) {
            self.report.manual(
                rel,
                format!("the Slack channel `{id}` (cursorAccount)"),
                "it posts through Cursor's Slack app, which agentkit cannot use",
                format!("create a Slack app (`agentkit slack manifest`) and write {target} with `kind = \"slack\"` (docs/guides/slack.md)"),
            );
            return Ok(());
        }
        let mut out = Map::new();
        out.insert("kind".into(), json!("slack"));
        for (key, v) in &cfg {
            match (key.as_str(), v) {
                ("description", Value::String(_)) => {
                    out.insert("description".into(), v.clone());
                }
                ("envPrefix", Value::String(p)) => {
                    out.insert("env_prefix".into(), json!(p));
                }
                ("toolApprovals", Value::Bool(b)) => {
                    out.insert("tool_approvals".into(), json!(b));
                }
                ("interactivity", Value::Bool(_)) => {}
                ("apiUrl", Value::String(u)) => {
                    out.insert("api_url".into(), json!(u));
                }
                ("mode", Value::String(m)) if m == "socket" || m == "events" => {
                    out.insert("mode".into(), json!(m));
                }
                ("credentials", Value::Object(c)) => {
                    for (ck, cv) in c {
                        let text = match cv {
                            Value::String(s) => Some(s.clone()),
                            f => env_of_function(f),
                        };
                        let field = match ck.as_str() {
                            "botToken" => Some("bot_token"),
                            "appToken" => Some("app_token"),
                            "signingSecret" => Some("signing_secret"),
                            _ => None,
                        };
                        match (field, text) {
                            (Some(field), Some(t)) => {
                                out.insert(field.into(), json!(t));
                            }
                            _ => self.report.manual(rel, format!("credentials.{ck}"), "computed by code, or no such Slack setting", "set bot_token, app_token or signing_secret as `${VAR}` (docs/reference/channels.md#slack-settings)"),
                        }
                    }
                }
                ("engagement", Value::Object(e)) => {
                    let mut engagement = Map::new();
                    for (flag, field) in [
                        ("mentions", "mentions"),
                        ("directMessages", "direct_messages"),
                    ] {
                        if let Some(Value::Bool(b)) = e.get(flag) {
                            engagement.insert(field.into(), json!(b));
                        }
                    }
                    if let Some(Value::Object(posts)) = e.get("channelPosts") {
                        let mut watch = Map::new();
                        if let Some(Value::Array(allow)) = posts.get("allow") {
                            let names: Vec<&str> = allow.iter().filter_map(Value::as_str).collect();
                            if names.iter().any(|n| n.starts_with('#')) {
                                self.report.manual(
                                    rel,
                                    format!(
                                        "engagement.channelPosts.allow {}",
                                        short(&json!(names))
                                    ),
                                    "agentkit watches channels by id, not by name",
                                    format!(
                                        "replace each `#name` with its channel id (C…) in {target}"
                                    ),
                                );
                            }
                            watch.insert("allow".into(), json!(names));
                        }
                        if let Some(Value::String(p)) = posts.get("posts") {
                            watch.insert("posts".into(), json!(p));
                        }
                        if let Some(ms) = posts.get("debounceMs").and_then(Value::as_u64) {
                            watch.insert("debounce".into(), json!(format!("{ms}ms")));
                        }
                        engagement.insert("channel_posts".into(), Value::Object(watch));
                    }
                    if !engagement.is_empty() {
                        out.insert("engagement".into(), Value::Object(engagement));
                    }
                }
                ("suggestedPrompts", Value::Array(prompts)) if is_plain(v) => {
                    let prompts: Vec<Value> = prompts
                        .iter()
                        .filter_map(|p| Some(json!({"title": p.get("title")?.as_str()?, "message": p.get("message")?.as_str()?})))
                        .collect();
                    out.insert("assistant".into(), json!({"suggested_prompts": prompts}));
                }
                (hook, f) if hook.starts_with("on") && f.get("$function").is_some() => {
                    self.report.manual(
                        rel,
                        format!("handler `{hook}`"),
                        "it is code; the pack's defaults (mentions and direct messages start or continue a thread's session) apply instead",
                        format!("write `[[rules]]` in {target} for what it filtered or prepared (a `turn` or a `task`)"),
                    );
                }
                (k, v) => self.report.manual(
                    rel,
                    format!("`{k}: {}`", short(v)),
                    "not a Slack pack setting agentkit has",
                    "see docs/reference/channels.md#slack-settings",
                ),
            }
        }
        self.write_toml(rel, &target, &Value::Object(out))
    }

    /// A rule for one hook (`onPullRequest`): its event, the actions its
    /// body names, a draft check, and a turn as the actor.
    fn github_rule(&mut self, rel: &str, hook: &str, f: &Value) -> Option<Value> {
        let source = f.get("$function").and_then(Value::as_str).unwrap_or("");
        let (event, known): (&str, &[&str]) = match hook {
            "onPullRequest" => (
                "pull_request",
                &[
                    "opened",
                    "reopened",
                    "synchronize",
                    "ready_for_review",
                    "edited",
                    "closed",
                    "labeled",
                ],
            ),
            "onIssueComment" => ("issue_comment", &["created", "edited", "deleted"]),
            "onPullRequestReview" => ("pull_request_review", &["submitted", "edited", "dismissed"]),
            "onPullRequestReviewComment" => (
                "pull_request_review_comment",
                &["created", "edited", "deleted"],
            ),
            "onCheckSuite" => ("check_suite", &["completed", "requested", "rerequested"]),
            "onCheckRun" => ("check_run", &["completed", "created", "rerequested"]),
            "onIssues" => (
                "issues",
                &["opened", "edited", "closed", "reopened", "labeled"],
            ),
            "onPush" => ("push", &[]),
            "onWorkflowRun" => ("workflow_run", &["completed", "requested", "in_progress"]),
            _ => {
                self.report.manual(
                    rel,
                    format!("hook `{hook}`"),
                    "agentkit's GitHub pack has no such hook",
                    "write a `[[rules]]` entry for its webhook event (docs/guides/github.md)",
                );
                return None;
            }
        };
        if source.contains("task") {
            self.report.manual(
                rel,
                format!("hook `{hook}` (host task)"),
                "its `task` runs TypeScript in the framework's process",
                format!("write a rule for `{event}` with `task = {{ command = [...] }}` or `task = {{ tool = \"...\" }}` (docs/guides/github.md#host-task-commands)"),
            );
            return None;
        }
        let actions: Vec<&str> = known
            .iter()
            .copied()
            .filter(|a| source.contains(&format!("\"{a}\"")) || source.contains(&format!("'{a}'")))
            .collect();
        let mut rule = Map::new();
        rule.insert("event".into(), json!(event));
        if !actions.is_empty() {
            rule.insert("actions".into(), json!(actions));
        }
        if event == "pull_request" && source.contains("draft") {
            rule.insert("when".into(), json!({"pull_request.draft": false}));
        }
        rule.insert("turn".into(), json!({"admission": "coalesce"}));
        self.report.manual(
            rel,
            format!("hook `{hook}`"),
            format!(
                "it is code; it became a rule for `{event}`{}{}, whose turn has the pack's default message",
                if actions.is_empty() { String::new() } else { format!(" with actions {}", actions.join(", ")) },
                if rule.contains_key("when") { ", skipping drafts" } else { "" }
            ),
            "check the rule's conditions against the hook's body; write `turn.message`, `title` or `continuation` templates for what it returned",
        );
        Some(Value::Object(rule))
    }

    fn schedules(&mut self) -> Result<()> {
        for rel in self.files_under("agent/schedules/") {
            if rel.ends_with(".md") {
                self.copy(&rel, &rel)?;
                continue;
            }
            if !is_code(&rel) {
                continue;
            }
            let id = stem(&rel);
            let Some(cfg) = self.defined(
                &rel,
                "defineSchedule",
                format!("schedule `{id}`"),
                format!("write agent/schedules/{id}.toml"),
            ) else {
                continue;
            };
            let Some(Value::String(cron)) = cfg.get("cron") else {
                self.report.manual(
                    &rel,
                    format!("schedule `{id}`"),
                    "its cron is computed by code",
                    format!("write agent/schedules/{id}.toml"),
                );
                continue;
            };
            let description = cfg.get("description").and_then(Value::as_str);
            if let Some(Value::String(markdown)) = cfg.get("markdown") {
                let mut text = format!("---\ncron: {}\n", json!(cron));
                if let Some(d) = description {
                    text.push_str(&format!("description: {}\n", json!(d)));
                }
                text.push_str(&format!("---\n\n{}\n", markdown.trim_end()));
                let target = format!("agent/schedules/{id}.md");
                self.write(&target, &text)?;
                let how = self.how(&rel);
                self.report.converted(&rel, &target, how);
                continue;
            }
            if cfg.get("run").and_then(|r| r.get("$function")).is_none() {
                self.report.manual(
                    &rel,
                    format!("schedule `{id}`"),
                    "it has neither `markdown` nor a `run` function",
                    format!("write agent/schedules/{id}.toml"),
                );
                continue;
            }
            if !self.node {
                self.report.manual(
                    &rel,
                    format!("schedule `{id}`"),
                    "its `run` handler is TypeScript, which runs only under Node (none was used)",
                    format!("migrate again with Node on PATH, or write agent/schedules/{id}.toml with `cron` and a `command` that uses the host bridge's /v1/send"),
                );
                continue;
            }
            let mut out = Map::new();
            if let Some(d) = description {
                out.insert("description".into(), json!(d));
            }
            out.insert("cron".into(), json!(cron));
            let command = self.shim_command(false, "schedule", &rel, &[]);
            out.insert("command".into(), command);
            out.insert("timeout".into(), json!("5m"));
            let env = self.env_of(&rel);
            if !env.is_empty() {
                out.insert("env".into(), json!(env));
            }
            self.write_toml(
                &rel,
                &format!("agent/schedules/{id}.toml"),
                &Value::Object(out),
            )?;
        }
        Ok(())
    }

    /// With Node, `defineHook({ events })` becomes a command hook that
    /// calls the original handler with the event (without Node, hooks are
    /// reported by `leftovers`).
    fn hooks(&mut self) -> Result<()> {
        if !self.node {
            return Ok(());
        }
        for rel in self.files_under("agent/hooks/") {
            if rel.matches('/').count() != 2 || !is_code(&rel) {
                continue;
            }
            let name = stem(&rel);
            let target = format!("agent/hooks/{name}.toml");
            let events: Vec<String> = self
                .values
                .get(&rel)
                .and_then(|v| config(v, &["defineHook"]))
                .and_then(|c| c.get("events"))
                .and_then(Value::as_object)
                .map(|e| e.keys().cloned().collect())
                .unwrap_or_default();
            if events.is_empty() {
                self.report.manual(
                    &rel,
                    format!("hook `{name}`"),
                    "its default export is not a `defineHook({ events })` with handlers",
                    format!(
                        "write {target} with `events` and a `command` (docs/reference/hooks.md)"
                    ),
                );
                continue;
            }
            let command = self.shim_command(true, "hook", &rel, &[]);
            // Hooks run in the agent's sandbox, like route handlers.
            self.shim_outside_tools = true;
            let out = json!({"events": events, "command": command, "timeout": "30s"});
            self.write_toml(&rel, &target, &out)?;
        }
        Ok(())
    }

    fn evals(&mut self) -> Result<()> {
        for rel in self.files_under("evals/") {
            if !is_code(&rel) {
                if rel.ends_with(".toml") || rel.ends_with(".json") || rel.ends_with(".md") {
                    self.copy(&rel, &rel)?;
                }
                continue;
            }
            let value = self.values.get(&rel).cloned();
            let file = rel.rsplit('/').next().unwrap_or(&rel);
            if file.starts_with("evals.config.") {
                self.eval_config(&rel, value.as_ref())?;
                continue;
            }
            let Some(base) = file.split_once(".eval.").map(|(b, _)| b) else {
                self.report.manual(
                    &rel,
                    "a script in evals/",
                    "only `*.eval.ts` files define evals",
                    "nothing, or move it out of evals/",
                );
                continue;
            };
            let dir = rel.rsplit_once('/').map_or("", |(d, _)| d);
            let target = format!("{dir}/{base}.eval.toml");
            let Some(cfg) = value
                .as_ref()
                .and_then(|v| config(v, &["defineEval"]))
                .cloned()
            else {
                self.report.manual(
                    &rel,
                    "the eval",
                    "its default export is not a `defineEval({...})` this migration can read",
                    format!("write {target} (docs/reference/evals.md)"),
                );
                continue;
            };
            let mut out = Map::new();
            for key in ["description", "tags", "iterations"] {
                if let Some(v) = cfg.get(key).filter(|v| is_plain(v)) {
                    out.insert(key.into(), v.clone());
                }
            }
            if let Some(ms) = cfg.get("timeoutMs").and_then(Value::as_u64) {
                out.insert("timeout".into(), json!(format!("{ms}ms")));
            }
            if let Some(test) = cfg.get("test") {
                let Some(turns) = eval_turns(&rel, "test", test, &mut self.report) else {
                    continue;
                };
                apply_turns(&mut out, turns);
            } else if let Some(Value::Array(cases)) = cfg.get("cases") {
                let mut converted = Vec::new();
                for case in cases {
                    let Some(case) = case.as_object() else {
                        continue;
                    };
                    let Some(id) = case.get("id").and_then(Value::as_str) else {
                        self.report.manual(
                            &rel,
                            "a case",
                            "it has no literal id",
                            format!("write it in {target}"),
                        );
                        continue;
                    };
                    let mut c = Map::new();
                    c.insert("id".into(), json!(id));
                    for key in ["description", "tags"] {
                        if let Some(v) = case.get(key).filter(|v| is_plain(v)) {
                            c.insert(key.into(), v.clone());
                        }
                    }
                    let Some(test) = case.get("test") else {
                        continue;
                    };
                    let Some(turns) =
                        eval_turns(&rel, &format!("case `{id}`"), test, &mut self.report)
                    else {
                        continue;
                    };
                    apply_turns(&mut c, turns);
                    converted.push(Value::Object(c));
                }
                if converted.is_empty() {
                    self.report.manual(
                        &rel,
                        "the eval's cases",
                        "none converted",
                        format!("write {target}"),
                    );
                    continue;
                }
                out.insert("cases".into(), Value::Array(converted));
            } else {
                self.report.manual(
                    &rel,
                    "the eval",
                    "it has neither `test` nor `cases`",
                    format!("write {target}"),
                );
                continue;
            }
            self.write_toml(&rel, &target, &Value::Object(out))?;
        }
        Ok(())
    }

    fn eval_config(&mut self, rel: &str, value: Option<&Value>) -> Result<()> {
        let cfg = value
            .and_then(|v| config(v, &["defineEvalConfig"]))
            .cloned()
            .unwrap_or_default();
        let mut out = Map::new();
        match cfg.get("maxConcurrency").and_then(Value::as_u64) {
            Some(n) => {
                out.insert("max_concurrency".into(), json!(n.clamp(1, 200)));
            }
            None => {
                self.report.manual(
                    rel,
                    "`maxConcurrency`",
                    "it is missing or computed by code",
                    "set `max_concurrency` in evals/evals.toml (it was set to 4)",
                );
                out.insert("max_concurrency".into(), json!(4));
            }
        }
        if let Some(n) = cfg.get("maxPlaygroundRuns").and_then(Value::as_u64) {
            out.insert("max_playground_runs".into(), json!(n));
        }
        if cfg.contains_key("persistRuns") {
            out.insert("persist_runs".into(), json!(true));
        }
        self.write_toml(rel, "evals/evals.toml", &Value::Object(out))
    }

    /// Files of `agent/lib/` that are not code (data, scripts in other
    /// languages) are kept; code goes with the original sources.
    fn lib_files(&mut self) -> Result<()> {
        for rel in self.files_under("agent/lib/") {
            if !is_code(&rel) {
                self.copy(&rel, &rel)?;
            }
        }
        Ok(())
    }

    /// Entries of `agent/` no converter reads.
    fn leftovers(&mut self) {
        let known_dirs = [
            "tools",
            "skills",
            "mcp-connections",
            "host-connections",
            "subagents",
            "channels",
            "schedules",
            "sandbox",
            "lib",
            "instructions",
        ];
        for rel in self.files.clone() {
            let parts: Vec<&str> = rel.split('/').collect();
            match parts.as_slice() {
                ["agent", file] => match stem(file).as_str() {
                    "agent" | "instructions" => {}
                    "ab" => self.report.manual(
                        &rel,
                        "the A/B experiment",
                        "experiments are code-defined in the framework",
                        "write agent/ab.toml (docs/reference/ab.md)",
                    ),
                    "sandbox" => self.report.manual(
                        &rel,
                        "a custom sandbox backend",
                        "agentkit's sandbox is Landlock on the host",
                        "see [harness.sandbox] in docs/reference/agent-toml.md",
                    ),
                    _ => self.report.manual(
                        &rel,
                        "an entry of agent/",
                        "the framework defines nothing by this name",
                        "nothing, or move it to agent/lib/",
                    ),
                },
                ["agent", "hooks", _] if is_code(&rel) && self.node => {
                    // Converted by `hooks()`.
                }
                ["agent", "hooks", ..] if is_code(&rel) => {
                    let name = stem(&rel);
                    self.report.manual(
                        &rel,
                        format!("hook `{name}`"),
                        "hooks are TypeScript handlers run in the framework's process",
                        format!("write agent/hooks/{name}.toml with `events` and a `command` (the event arrives as JSON on stdin) or a `url` (docs/reference/hooks.md)"),
                    );
                }
                ["agent", "ab", ..] => self.report.manual(
                    &rel,
                    "an A/B experiment",
                    "experiments are code-defined in the framework",
                    "write agent/ab/<id>.toml (docs/reference/ab.md)",
                ),
                ["agent", dir, ..] if !known_dirs.contains(dir) && *dir != "hooks" => {
                    self.report.manual(
                        &rel,
                        format!("`agent/{dir}/`"),
                        "agentkit does not read this folder",
                        "nothing, or move what it needs to agent/lib/",
                    );
                }
                _ => {}
            }
        }
    }
}

/// Header names a handler reads (`req.headers.get("x-grafana-org")`).
fn header_names(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find("headers.get(") {
        rest = &rest[at + "headers.get(".len()..];
        let quote = rest.chars().next();
        if let Some(q @ ('"' | '\'')) = quote
            && let Some(end) = rest[1..].find(q)
        {
            let name = rest[1..=end].to_ascii_lowercase();
            if name != "authorization" && !out.contains(&name) {
                out.push(name);
            }
        }
    }
    out
}

/// One eval turn: what is sent and what is expected after it.
struct Turn {
    send: String,
    workspace_files: Option<Value>,
    expect: Map<String, Value>,
}

fn apply_turns(out: &mut Map<String, Value>, turns: Vec<Turn>) {
    if turns.len() == 1 {
        let Some(turn) = turns.into_iter().next() else {
            return;
        };
        out.insert("send".into(), json!(turn.send));
        if let Some(files) = turn.workspace_files {
            out.insert("workspace_files".into(), files);
        }
        if !turn.expect.is_empty() {
            out.insert("expect".into(), Value::Object(turn.expect));
        }
        return;
    }
    let turns: Vec<Value> = turns
        .into_iter()
        .map(|t| {
            let mut m = Map::new();
            m.insert("send".into(), json!(t.send));
            if let Some(files) = t.workspace_files {
                m.insert("workspace_files".into(), files);
            }
            if !t.expect.is_empty() {
                m.insert("expect".into(), Value::Object(t.expect));
            }
            Value::Object(m)
        })
        .collect();
    out.insert("turns".into(), Value::Array(turns));
}

/// The turns of an eval's `test(t)` body: each `t.send(...)` starts one;
/// `t.succeeded()`, `t.calledTool(...)`, `t.notCalledTool(...)` and
/// `t.check(t.reply, includes(...))` become its expectations. Any other
/// statement on `t` is reported; `None` when nothing converts.
fn eval_turns(
    rel: &str,
    what: &str,
    test: &Value,
    report: &mut ProjectReport,
) -> Option<Vec<Turn>> {
    let Some(source) = test.get("$function").and_then(Value::as_str) else {
        report.manual(
            rel,
            format!("the eval's {what}"),
            "it is not a function",
            "write the eval's turns in TOML (docs/reference/evals.md)",
        );
        return None;
    };
    let param = source
        .find('(')
        .map(|at| {
            source[at + 1..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '$')
                .collect::<String>()
        })
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "t".to_owned());
    let mut turns: Vec<Turn> = Vec::new();
    let needle = format!("{param}.");
    let mut rest = source;
    let mut skipped = Vec::new();
    while let Some(at) = rest.find(&needle) {
        let boundary = at == 0
            || !rest[..at]
                .chars()
                .last()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
        rest = &rest[at + needle.len()..];
        if !boundary {
            continue;
        }
        let method: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let after = &rest[method.len()..];
        if !after.starts_with('(') {
            continue; // a property such as `t.reply`
        }
        let call = literal::default_export(&format!("export default f{after}"));
        let args: Vec<Value> = call
            .as_ref()
            .and_then(|c| c.get("args"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let statement = format!("{param}.{method}(…)");
        match method.as_str() {
            "send" => match args.first() {
                Some(Value::String(message)) => {
                    let workspace_files = args
                        .get(1)
                        .and_then(|o| o.get("workspaceFiles"))
                        .filter(|w| w.is_object() && is_plain(w))
                        .cloned();
                    turns.push(Turn {
                        send: message.clone(),
                        workspace_files,
                        expect: Map::new(),
                    });
                }
                _ => skipped.push(format!("{statement}: the message is computed")),
            },
            _ if turns.is_empty() => skipped.push(format!("{statement} before any send")),
            "succeeded" | "failed" => {
                if let Some(turn) = turns.last_mut() {
                    turn.expect
                        .insert("succeeded".into(), json!(method == "succeeded"));
                }
            }
            "calledTool" | "notCalledTool" => match args.first() {
                Some(Value::String(tool)) => {
                    let key = if method == "calledTool" {
                        "called_tool"
                    } else {
                        "not_called_tool"
                    };
                    let entry = match args
                        .get(1)
                        .and_then(|o| o.get("input"))
                        .and_then(Value::as_object)
                    {
                        Some(input) if method == "calledTool" => {
                            let mut fields = Map::new();
                            for (k, v) in input {
                                let re = match v {
                                    Value::String(s) => Some(format!("^{}$", regex_escape(s))),
                                    Value::Number(n) => {
                                        Some(format!("^{}$", regex_escape(&n.to_string())))
                                    }
                                    Value::Bool(b) => Some(format!("^{b}$")),
                                    other => other
                                        .get("$regex")
                                        .and_then(Value::as_str)
                                        .map(ToOwned::to_owned),
                                };
                                match re {
                                    Some(re) => {
                                        fields.insert(k.clone(), json!(re));
                                    }
                                    None => skipped.push(format!("{statement}: input field `{k}`")),
                                }
                            }
                            json!({"name": tool, "input": fields})
                        }
                        _ => json!(tool),
                    };
                    if let Some(turn) = turns.last_mut() {
                        let list = turn.expect.entry(key).or_insert_with(|| json!([]));
                        if let Some(items) = list.as_array_mut() {
                            items.push(entry);
                        }
                    }
                }
                _ => skipped.push(format!("{statement}: the tool name is computed")),
            },
            "check" => {
                let on_reply = args
                    .first()
                    .and_then(|a| a.get("$code"))
                    .and_then(Value::as_str)
                    == Some(&format!("{param}.reply"));
                let check = args.get(1);
                let reply = match (
                    on_reply,
                    check.and_then(callee),
                    check.and_then(|c| c.get("args")).and_then(|a| a.get(0)),
                ) {
                    (true, Some("includes"), Some(Value::String(s))) => {
                        Some(("contains", json!(s)))
                    }
                    (true, Some("includes"), Some(re)) if re.get("$regex").is_some() => {
                        let body = re.get("$regex").and_then(Value::as_str).unwrap_or("");
                        let flags = re.get("flags").and_then(Value::as_str).unwrap_or("");
                        let inline: String = flags
                            .chars()
                            .filter(|f| matches!(f, 'i' | 'm' | 's'))
                            .collect();
                        let pattern = if inline.is_empty() {
                            body.to_owned()
                        } else {
                            format!("(?{inline}){body}")
                        };
                        Some(("matches", json!(pattern)))
                    }
                    _ => None,
                };
                match (reply, turns.last_mut()) {
                    (Some((key, v)), Some(turn)) => {
                        let entry = turn.expect.entry("reply").or_insert_with(|| json!({}));
                        if let Some(m) = entry.as_object_mut() {
                            m.insert(key.into(), v);
                        }
                    }
                    _ => skipped.push(format!("{statement}: {}", short(&json!({"$code": format!("check{}", after.split(';').next().unwrap_or(""))})))),
                }
            }
            _ => skipped.push(statement),
        }
    }
    for s in &skipped {
        report.manual(
            rel,
            format!("{what}: `{s}`"),
            "this assertion has no TOML form this migration knows",
            "write it as an `expect` field (called_tool, reply.contains / matches / json_schema / judge, files; docs/reference/evals.md)",
        );
    }
    if turns.is_empty() {
        report.manual(
            rel,
            format!("the eval's {what}"),
            "it sends no literal message",
            "write the eval in TOML (docs/reference/evals.md)",
        );
        return None;
    }
    Some(turns)
}

fn regex_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn env_names_and_headers() {
        assert_eq!(
            env_names("a(process.env.A_B) + process.env[\"C\"] + process.env.A_B"),
            vec!["A_B", "C"]
        );
        assert_eq!(
            header_names("req.headers.get('X-Org') ?? req.headers.get(\"authorization\")"),
            vec!["x-org"]
        );
    }

    #[test]
    fn models_map_to_providers() {
        assert_eq!(
            model("claude-sonnet-4-5").as_deref(),
            Some("anthropic:claude-sonnet-4-5")
        );
        assert_eq!(
            model("gpt-4.1-mini").as_deref(),
            Some("openai:gpt-4.1-mini")
        );
        assert_eq!(model("grok-4.5"), None);
    }

    #[test]
    fn eval_bodies_become_turns() {
        let mut report = ProjectReport::default();
        let test = json!({"$function": "async test(t) {\n await t.send(\"What's up in NYC?\");\n t.succeeded();\n t.calledTool(\"get_weather\", { input: { city: \"NYC\" } });\n t.check(t.reply, includes(/nyc/i));\n t.check(t.reply, satisfies((r) => r.length < 9, \"short\"));\n await t.send('again');\n t.notCalledTool('post_alert');\n}"});
        let turns = eval_turns("evals/x.eval.ts", "test", &test, &mut report).expect("turns");
        let mut out = Map::new();
        apply_turns(&mut out, turns);
        let text = toml_out::document("x", &Value::Object(out)).expect("a TOML document");
        expect_test::expect![[r##"
            # x
            [[turns]]
            send = "What's up in NYC?"

            [turns.expect]
            succeeded = true

            [[turns.expect.called_tool]]
            name = "get_weather"

            [turns.expect.called_tool.input]
            city = "^NYC$"

            [turns.expect.reply]
            matches = "(?i)nyc"

            [[turns]]
            send = "again"

            [turns.expect]
            not_called_tool = ["post_alert"]
        "##]]
        .assert_eq(&text);
        assert_eq!(report.manual.len(), 1, "{:?}", report.manual);
        assert!(
            report.manual[0].what.contains("t.check"),
            "{:?}",
            report.manual
        );
    }
}
