//! Built-in workspace tools (`[harness] builtin_tools`): `read`, `write`,
//! `edit`, `list`, `grep`, `glob` and `shell`, confined to the session workspace.
//!
//! Paths are relative to the workspace; absolute paths, `..` and symbolic
//! links that lead outside are refused. Outputs are capped. `shell` runs
//! `sh -c` in the workspace through the same subprocess runner as server
//! tools (scrubbed environment, timeout, output cap, own process group).
//! `glob` finds workspace files by pattern (`**/*.rs`, `src/{a,b}/*.md`).

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agentkit_manifest::{Agent, Approval, Execution, Tool, ToolAnnotations};
use serde_json::{Value, json};

use crate::tools::{ToolContext, ToolOutput, run_server_tool};

/// The most a `read` returns, and the cap on `shell` output.
const OUTPUT_CAP: usize = 256 * 1024;
/// The most lines `grep` and entries `list` return.
const LINE_CAP: usize = 500;
/// `shell`'s default and largest timeouts.
const SHELL_TIMEOUT: Duration = Duration::from_secs(60);
const SHELL_TIMEOUT_MAX: Duration = Duration::from_secs(600);

/// A built-in tool as the model sees it.
#[derive(Debug, Clone)]
pub(crate) struct Builtin {
    pub(crate) name: &'static str,
    pub(crate) description: Cow<'static, str>,
    pub(crate) schema: Value,
}

fn all() -> Vec<Builtin> {
    vec![
        Builtin {
            name: "read",
            description: Cow::Borrowed(
                "Read a text file of the workspace. Paths are relative to the workspace.",
            ),
            schema: json!({"type": "object", "required": ["path"], "additionalProperties": false, "properties": {
                "path": {"type": "string"},
                "offset": {"type": "integer", "minimum": 0, "description": "first line (0-based)"},
                "limit": {"type": "integer", "minimum": 1, "description": "number of lines"}
            }}),
        },
        Builtin {
            name: "write",
            description: Cow::Borrowed(
                "Create or overwrite a file of the workspace (parent folders are created).",
            ),
            schema: json!({"type": "object", "required": ["path", "content"], "additionalProperties": false, "properties": {
                "path": {"type": "string"}, "content": {"type": "string"}
            }}),
        },
        Builtin {
            name: "edit",
            description: Cow::Borrowed(
                "Replace an exact piece of text in a workspace file. `old` must occur exactly once unless `replace_all` is true.",
            ),
            schema: json!({"type": "object", "required": ["path", "old", "new"], "additionalProperties": false, "properties": {
                "path": {"type": "string"}, "old": {"type": "string", "minLength": 1}, "new": {"type": "string"},
                "replace_all": {"type": "boolean"}
            }}),
        },
        Builtin {
            name: "list",
            description: Cow::Borrowed("List a workspace folder (default: the workspace root)."),
            schema: json!({"type": "object", "additionalProperties": false, "properties": {"path": {"type": "string"}}}),
        },
        Builtin {
            name: "grep",
            description: Cow::Borrowed(
                "Search workspace files for a regular expression; answers `file:line: text` lines.",
            ),
            schema: json!({"type": "object", "required": ["pattern"], "additionalProperties": false, "properties": {
                "pattern": {"type": "string"}, "path": {"type": "string", "description": "a file or folder (default: everything)"}
            }}),
        },
        Builtin {
            name: "glob",
            description: Cow::Borrowed(
                "Find workspace files whose path matches a glob pattern: `*` and `?` within one path segment, `**` across segments, `{a,b}` alternatives. Answers the matching paths, one per line.",
            ),
            schema: json!({"type": "object", "required": ["pattern"], "additionalProperties": false, "properties": {
                "pattern": {"type": "string", "minLength": 1, "description": "such as **/*.md"}
            }}),
        },
        Builtin {
            name: "shell",
            description: Cow::Borrowed(
                "Run a shell command (sh -c) in the workspace; answers stdout, or an error with stderr and the exit code.",
            ),
            schema: json!({"type": "object", "required": ["command"], "additionalProperties": false, "properties": {
                "command": {"type": "string"},
                "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 600000}
            }}),
        },
        Builtin {
            name: "remind_me",
            description: Cow::Borrowed(
                "Schedule a reminder in this conversation: when it fires, `prompt` comes back to you as a new message. Give exactly one of `delay` (such as 20m or 2h), `every` (repeats) or `cron` (5-field, UTC).",
            ),
            schema: json!({"type": "object", "required": ["prompt"], "additionalProperties": false, "properties": {
                "delay": {"type": "string", "description": "when to wake the conversation, such as 20m or 2h"},
                "every": {"type": "string", "description": "wake repeatedly at this interval"},
                "cron": {"type": "string", "description": "wake on this 5-field cron cadence (UTC)"},
                "prompt": {"type": "string", "minLength": 1, "description": "what you should do when you wake"},
                "until": {"type": "string", "description": "the condition under which the reminder is no longer needed"},
                "purpose": {"type": "string", "description": "a short label, such as ci_recheck"}
            }}),
        },
    ]
}

/// The built-ins this agent enables, minus any name an authored tool
/// takes; `load_skill` whenever the agent has skills.
pub(crate) fn enabled(agent: &Agent) -> Vec<Builtin> {
    let wanted = |name: &str| agent.config.harness.builtin_tools.iter().any(|n| n == name);
    let mut out: Vec<Builtin> = all()
        .into_iter()
        .filter(|b| wanted(b.name) && agent.tool(b.name).is_none())
        .collect();
    if !agent.subagents.is_empty() && agent.tool("task").is_none() {
        let ids: Vec<&str> = agent.subagents.iter().map(|s| s.id.as_str()).collect();
        let catalog: Vec<String> = agent
            .subagents
            .iter()
            .map(|s| format!("`{}`: {}", s.id, s.description.trim()))
            .collect();
        out.push(Builtin {
            name: "task",
            description: Cow::Owned(format!(
                "Delegate a self-contained task to a subagent and get its answer. Subagents: {}",
                catalog.join("; ")
            )),
            schema: json!({"type": "object", "required": ["subagent", "prompt"], "additionalProperties": false, "properties": {
                "subagent": {"type": "string", "enum": ids},
                "prompt": {"type": "string", "minLength": 1, "description": "everything the subagent needs to know"}
            }}),
        });
    }
    if !agent.skills.is_empty() && agent.tool("load_skill").is_none() {
        let names: Vec<&str> = agent.skills.iter().map(|s| s.name.as_str()).collect();
        out.push(Builtin {
            name: "load_skill",
            description: Cow::Borrowed("Load a skill's full procedure by name (the skills catalog in your instructions lists them)."),
            schema: json!({"type": "object", "required": ["name"], "additionalProperties": false, "properties": {
                "name": {"type": "string", "enum": names}
            }}),
        });
    }
    out
}

/// Runs built-in `name` (its input already validated against its schema).
pub(crate) async fn run(agent: &Agent, name: &str, input: &Value, ctx: &ToolContext) -> ToolOutput {
    if name == "load_skill" {
        return load_skill(agent, input);
    }
    let root = ctx.workspace_dir.clone();
    let str_arg = |k: &str| {
        input
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    if name == "shell" {
        return shell(
            agent,
            &str_arg("command"),
            input.get("timeout_ms").and_then(Value::as_u64),
            ctx,
        )
        .await;
    }
    let name = name.to_owned();
    let input = input.clone();
    let result = tokio::task::spawn_blocking(move || match name.as_str() {
        "read" => read(&root, &input),
        "write" => write(&root, &input),
        "edit" => edit(&root, &input),
        "list" => list(&root, &input),
        "grep" => grep(&root, &input),
        "glob" => glob(&root, &input),
        other => Err(format!("unknown built-in `{other}`")),
    })
    .await
    .unwrap_or_else(|e| Err(format!("built-in tool failed: {e}")));
    match result {
        Ok(output) => ToolOutput {
            output,
            is_error: false,
        },
        Err(message) => ToolOutput {
            output: Value::String(message),
            is_error: true,
        },
    }
}

/// The skill's procedure, from the discovered project (the workspace copy
/// at `.agentkit/skills/<name>/SKILL.md` holds the same text).
fn load_skill(agent: &Agent, input: &Value) -> ToolOutput {
    let name = input
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match agent.skills.iter().find(|s| s.name == name) {
        Some(skill) => ToolOutput {
            output: json!({
                "name": skill.name,
                "description": skill.description,
                "path": format!(".agentkit/skills/{}/SKILL.md", skill.name),
                "content": skill.body.trim(),
                "files": skill.files.iter().map(|f| format!(".agentkit/skills/{}/{f}", skill.name)).collect::<Vec<_>>(),
            }),
            is_error: false,
        },
        None => ToolOutput {
            output: Value::String(format!("no skill `{name}`")),
            is_error: true,
        },
    }
}

/// Resolves a model-supplied path inside `root` through the one strict
/// guard (an empty path is the workspace itself).
fn confine(root: &Path, rel: &str) -> Result<PathBuf, String> {
    let rel = if rel.is_empty() { "." } else { rel };
    crate::confine_path(root, rel).map_err(|e| e.to_string())
}

fn arg<'a>(input: &'a Value, key: &str) -> &'a str {
    input.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn read(root: &Path, input: &Value) -> Result<Value, String> {
    let rel = arg(input, "path");
    let path = confine(root, rel)?;
    let bytes = std::fs::read(&path).map_err(|e| format!("cannot read `{rel}`: {e}"))?;
    let text = String::from_utf8_lossy(&bytes);
    let offset = input.get("offset").and_then(Value::as_u64).unwrap_or(0) as usize;
    let limit = input
        .get("limit")
        .and_then(Value::as_u64)
        .map(|l| l as usize);
    let mut out: String = if offset == 0 && limit.is_none() {
        text.into_owned()
    } else {
        text.lines()
            .skip(offset)
            .take(limit.unwrap_or(usize::MAX))
            .collect::<Vec<_>>()
            .join("\n")
    };
    if out.len() > OUTPUT_CAP {
        let mut cut = OUTPUT_CAP;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push_str("\n… (truncated: use offset and limit)");
    }
    Ok(Value::String(out))
}

fn write(root: &Path, input: &Value) -> Result<Value, String> {
    let rel = arg(input, "path");
    let path = confine(root, rel)?;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create the folders of `{rel}`: {e}"))?;
    }
    let content = arg(input, "content");
    std::fs::write(&path, content).map_err(|e| format!("cannot write `{rel}`: {e}"))?;
    Ok(json!({"path": rel, "bytes": content.len()}))
}

fn edit(root: &Path, input: &Value) -> Result<Value, String> {
    let rel = arg(input, "path");
    let path = confine(root, rel)?;
    let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read `{rel}`: {e}"))?;
    let (old, new) = (arg(input, "old"), arg(input, "new"));
    let count = text.matches(old).count();
    let all = input
        .get("replace_all")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    match (count, all) {
        (0, _) => return Err(format!("`old` does not occur in `{rel}`")),
        (n, false) if n > 1 => {
            return Err(format!(
                "`old` occurs {n} times in `{rel}`; make it unique or set replace_all"
            ));
        }
        _ => {}
    }
    let replaced = if all {
        text.replace(old, new)
    } else {
        text.replacen(old, new, 1)
    };
    std::fs::write(&path, replaced).map_err(|e| format!("cannot write `{rel}`: {e}"))?;
    Ok(json!({"path": rel, "replacements": if all { count } else { 1 }}))
}

fn list(root: &Path, input: &Value) -> Result<Value, String> {
    let rel = arg(input, "path");
    let path = confine(root, rel)?;
    let mut entries: Vec<Value> = std::fs::read_dir(&path)
        .map_err(|e| format!("cannot list `{rel}`: {e}"))?
        .filter_map(Result::ok)
        .map(|e| {
            let meta = e.metadata().ok();
            let kind = match e.file_type() {
                Ok(t) if t.is_symlink() => "symlink",
                Ok(t) if t.is_dir() => "dir",
                _ => "file",
            };
            json!({"name": e.file_name().to_string_lossy(), "type": kind, "size": meta.map_or(0, |m| m.len())})
        })
        .collect();
    entries.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    entries.truncate(LINE_CAP);
    Ok(Value::Array(entries))
}

fn grep(root: &Path, input: &Value) -> Result<Value, String> {
    let pattern = arg(input, "pattern");
    let re = regex::Regex::new(pattern).map_err(|e| format!("bad pattern: {e}"))?;
    let start = confine(root, arg(input, "path"))?;
    let real_root = root.canonicalize().map_err(|e| e.to_string())?;
    let mut hits = Vec::new();
    let mut stack = vec![start];
    while let Some(p) = stack.pop() {
        if hits.len() >= LINE_CAP {
            break;
        }
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if meta.is_dir() {
            if let Ok(read) = std::fs::read_dir(&p) {
                let mut children: Vec<PathBuf> =
                    read.filter_map(Result::ok).map(|e| e.path()).collect();
                children.sort();
                stack.extend(children.into_iter().rev());
            }
        } else if meta.is_file() && meta.len() <= 4 * 1024 * 1024 {
            let Ok(bytes) = std::fs::read(&p) else {
                continue;
            };
            let text = String::from_utf8_lossy(&bytes);
            let shown = p
                .strip_prefix(root)
                .or_else(|_| p.strip_prefix(&real_root))
                .unwrap_or(&p)
                .display()
                .to_string();
            for (i, line) in text.lines().enumerate() {
                if re.is_match(line) {
                    hits.push(format!("{shown}:{}: {line}", i + 1));
                    if hits.len() >= LINE_CAP {
                        break;
                    }
                }
            }
        }
    }
    Ok(Value::String(hits.join("\n")))
}

/// A glob pattern as an anchored regular expression over `/`-separated
/// relative paths.
fn glob_regex(pattern: &str) -> Result<regex::Regex, String> {
    let mut re = String::from("^");
    let mut chars = pattern.chars().peekable();
    let mut in_braces = false;
    while let Some(c) = chars.next() {
        match c {
            '*' if chars.peek() == Some(&'*') => {
                chars.next();
                if chars.peek() == Some(&'/') {
                    chars.next();
                    re.push_str("(?:.*/)?");
                } else {
                    re.push_str(".*");
                }
            }
            '*' => re.push_str("[^/]*"),
            '?' => re.push_str("[^/]"),
            '{' if !in_braces => {
                in_braces = true;
                re.push_str("(?:");
            }
            '}' if in_braces => {
                in_braces = false;
                re.push(')');
            }
            ',' if in_braces => re.push('|'),
            c => re.push_str(&regex::escape(&c.to_string())),
        }
    }
    if in_braces {
        return Err(format!("unclosed `{{` in `{pattern}`"));
    }
    re.push('$');
    regex::Regex::new(&re).map_err(|e| format!("bad pattern: {e}"))
}

fn glob(root: &Path, input: &Value) -> Result<Value, String> {
    let pattern = arg(input, "pattern").trim_start_matches("./");
    if pattern.starts_with('/') || pattern.split('/').any(|seg| seg == "..") {
        return Err("the pattern must be relative to the workspace, without `..`".to_owned());
    }
    let re = glob_regex(pattern)?;
    let mut hits = Vec::new();
    // Symbolic links are listed, never followed: the walk cannot leave
    // the workspace.
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let Ok(read) = std::fs::read_dir(root.join(&rel)) else {
            continue;
        };
        let mut children: Vec<(PathBuf, bool)> = read
            .filter_map(Result::ok)
            .map(|e| {
                let dir = e.file_type().is_ok_and(|t| t.is_dir());
                (rel.join(e.file_name()), dir)
            })
            .collect();
        children.sort();
        for (path, dir) in children.into_iter().rev() {
            let shown = path.to_string_lossy().replace('\\', "/");
            if re.is_match(&shown) {
                hits.push(shown);
            }
            if dir {
                stack.push(path);
            }
        }
        if hits.len() >= LINE_CAP {
            break;
        }
    }
    hits.sort();
    hits.truncate(LINE_CAP);
    Ok(Value::String(hits.join("\n")))
}

/// `sh -c command` in the workspace, in `[harness.sandbox]`: no network
/// unless it says `network = true`.
async fn shell(
    agent: &Agent,
    command: &str,
    timeout_ms: Option<u64>,
    ctx: &ToolContext,
) -> ToolOutput {
    let timeout = timeout_ms
        .map_or(SHELL_TIMEOUT, Duration::from_millis)
        .min(SHELL_TIMEOUT_MAX);
    let tool = Tool {
        name: "shell".to_owned(),
        path: String::new(),
        description: String::new(),
        execution: Execution::Server,
        command: vec!["sh".to_owned(), "-c".to_owned(), command.to_owned()],
        cwd: ctx.workspace_dir.clone(),
        script: None,
        timeout,
        max_output_bytes: OUTPUT_CAP as u64,
        env: Vec::new(),
        needs_approval: Approval::Never,
        annotations: ToolAnnotations::default(),
        input_schema: json!({"type": "object"}),
        sandbox: agent.config.harness.sandbox.clone(),
        expose: agentkit_manifest::Expose::Host,
        worker: None,
    };
    run_server_tool(&tool, &json!({}), ctx).await
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn glob_patterns_match_like_a_shell() {
        let cases = [
            ("**/*.md", "a/b/c.md", true),
            ("**/*.md", "c.md", true),
            ("*.md", "a/c.md", false),
            ("src/{a,b}/*.rs", "src/b/x.rs", true),
            ("src/{a,b}/*.rs", "src/c/x.rs", false),
            ("?.txt", "ab.txt", false),
            ("a.*", "a.b.c", true),
        ];
        for (pattern, path, want) in cases {
            let re = glob_regex(pattern).unwrap();
            assert_eq!(re.is_match(path), want, "{pattern} vs {path}");
        }
        assert!(glob_regex("{a,b").is_err());
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("docs/deep")).unwrap();
        std::fs::write(dir.path().join("docs/deep/x.md"), "").unwrap();
        std::fs::write(dir.path().join("top.md"), "").unwrap();
        std::fs::write(dir.path().join("skip.txt"), "").unwrap();
        let found = glob(dir.path(), &json!({"pattern": "**/*.md"})).unwrap();
        assert_eq!(found, json!("docs/deep/x.md\ntop.md"));
        assert!(glob(dir.path(), &json!({"pattern": "../*"})).is_err());
    }

    #[test]
    fn paths_stay_in_the_workspace() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = tmp.path();
        assert!(confine(root, "a/b.txt").is_ok());
        assert!(confine(root, "").is_ok());
        for bad in ["../x", "/etc/passwd", "a/../../x"] {
            assert!(confine(root, bad).is_err(), "{bad}");
        }
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("/etc", root.join("out")).unwrap_or_else(|e| panic!("{e}"));
            assert!(confine(root, "out/passwd").is_err());
        }
    }

    #[tokio::test]
    async fn shell_commands_do_not_see_the_hosts_secrets() {
        use agentkit_test_support::rerun::{SECRET, rerun_with_env};
        if !rerun_with_env(
            module_path!(),
            "shell_commands_do_not_see_the_hosts_secrets",
            &[],
        ) {
            return;
        }
        assert_eq!(std::env::var(SECRET.0).as_deref(), Ok(SECRET.1));
        let ws = tempfile::tempdir().unwrap();
        let ctx = ToolContext {
            progress: Default::default(),
            call_id: "c".into(),
            session_id: "s".into(),
            workspace_dir: ws.path().to_path_buf(),
            cancel: tokio_util::sync::CancellationToken::new(),
            host: None,
            services: None,
            as_of: None,
            origin: Default::default(),
        };
        let project = tempfile::tempdir().unwrap();
        let root = project.path().join("proj");
        std::fs::create_dir_all(root.join("agent")).unwrap();
        std::fs::write(root.join("agent/instructions.md"), "Test.\n").unwrap();
        let found = agentkit_manifest::discover(&root).unwrap();
        let agent = &found.host.agents[0].agent;
        let out = shell(
            agent,
            "env; echo \"secret=${AGENTKIT_TEST_SECRET:-unset}\"",
            None,
            &ctx,
        )
        .await;
        assert!(!out.is_error, "{out:?}");
        let text = out.output.as_str().unwrap();
        assert!(text.contains("secret=unset"), "{text}");
        assert!(!text.contains(SECRET.1), "{text}");
        assert!(text.contains("AGENTKIT_WORKSPACE_DIR="), "{text}");
    }
}
