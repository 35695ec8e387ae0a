//! `agentkit init`: scaffolds a project that validates and is ready to
//! serve.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The setup guide `agentkit init` prints when given no folder.
pub const SETUP_GUIDE: &str = concat!(
    "\
agentkit — build and serve AI agents from a folder of files

Start a project:
  agentkit init my-agent            scaffold agent.toml, instructions.md and an echo tool
  agentkit validate --dir my-agent  check every file (exit 1 on errors; --json for CI)
  agentkit info --dir my-agent      list what was discovered (--json for scripts)
  agentkit eval --dir my-agent      run its evals (evals/*.eval.toml) on an ephemeral server

Grow it folder by folder under my-agent/agent/:
  instructions.md      the always-on system prompt
  tools/<name>.toml    a tool: description, command, [input_schema]
  skills/<name>.md     an on-demand procedure with a `description`
  mcp-connections/     MCP servers: url, command, or agent = \"<peer slug>\"
  subagents/<id>/      specialist child agents (agent.toml needs `description`)
  channels/<id>.toml   webhook routes, or kind = \"github\" | \"slack\" | …
  hooks/ schedules/    observe events; run on a cron cadence
and evals beside it in my-agent/evals/.

Docs: docs/getting-started.md in the agentkit repository (",
    env!("CARGO_PKG_REPOSITORY"),
    ").
"
);

const AGENT_TOML: &str = r#"# Runtime settings. Every field has a default; see docs/reference/agent-toml.md.
description = "A starter agent"
# model = "openai:gpt-4.1-mini"   # or "anthropic:claude-sonnet-4-5"; "test" runs offline

[harness]
max_steps = 20
turn_timeout = "5m"
"#;

const INSTRUCTIONS_MD: &str = "\
You are a helpful assistant.

- When the user asks you to repeat or echo something, call the `echo` tool
  with their text and reply with what it returned.
- Otherwise answer briefly and plainly.
";

const ECHO_TOML: &str = r#"description = "Echo a message back. Use it when the user asks you to repeat something."
command = ["python3", "echo.py"]
timeout = "10s"
read_only = true
# One Python process answers every call (see docs/reference/tools.md#workers);
# remove this line to start the program once per call instead.
worker = true

[input_schema]
type = "object"
required = ["message"]
properties.message = { type = "string", description = "The text to echo" }
"#;

const ECHO_PY: &str = r#"#!/usr/bin/env python3
"""The echo tool, as a worker: `handle` answers each call's input."""
from agentkit_worker import serve


def handle(input, context):
    return {"echo": input["message"]}


serve(handle)
"#;

/// The worker protocol's Python helper (the same file as
/// `fixtures/workers/agentkit_worker.py`, which a test keeps equal).
pub const WORKER_PY: &str = include_str!("init/agentkit_worker.py");

const EVALS_TOML: &str = "# Eval settings; see docs/reference/evals.md. Run them with `agentkit eval`.\nmax_concurrency = 4\n";

const ECHO_EVAL: &str = r#"# `agentkit eval` runs this (id "echo"); it passes offline on the `test` model.
description = "Repeats the user's text with the echo tool"
tags = ["smoke"]
send = "Please echo: hello"

[expect]
succeeded = true
called_tool = [{ name = "echo", input = { message = ".+" } }]
"#;

const GITIGNORE: &str = "# agentkit state: sessions, traces, the SQLite store\n.agentkit/\n";

/// The files a new project gets, relative to its folder.
pub const SCAFFOLD: &[(&str, &str)] = &[
    ("agent/agent.toml", AGENT_TOML),
    ("agent/instructions.md", INSTRUCTIONS_MD),
    ("agent/tools/echo.toml", ECHO_TOML),
    ("agent/tools/echo.py", ECHO_PY),
    ("agent/tools/agentkit_worker.py", WORKER_PY),
    ("evals/evals.toml", EVALS_TOML),
    ("evals/echo.eval.toml", ECHO_EVAL),
    (".gitignore", GITIGNORE),
];

/// Writes a new project into `dir` (created if missing). Writes nothing
/// when any scaffold file already exists, and returns the files written.
pub fn init(dir: &Path) -> Result<Vec<PathBuf>> {
    let name = dir
        .canonicalize()
        .ok()
        .as_deref()
        .unwrap_or(dir)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !agentkit_manifest::is_valid_slug(&name)
        || agentkit_manifest::RESERVED_SLUGS.contains(&name.as_str())
    {
        return Err(Error::InvalidSlug { name });
    }
    let existing: Vec<PathBuf> = SCAFFOLD
        .iter()
        .map(|(rel, _)| dir.join(rel))
        .filter(|p| p.exists())
        .collect();
    if !existing.is_empty() {
        return Err(Error::WouldOverwrite { paths: existing });
    }
    let mut written = Vec::new();
    for (rel, content) in SCAFFOLD {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|source| Error::Write {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        // `create_new` so that a file appearing between the check and the
        // write is still never overwritten.
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, content.as_bytes()))
            .map_err(|source| Error::Write {
                path: path.clone(),
                source,
            })?;
        written.push(path);
    }
    make_executable(&dir.join("agent/tools/echo.py"));
    Ok(written)
}

#[cfg(unix)]
fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = fs::metadata(path) {
        let mut perms = meta.permissions();
        perms.set_mode(perms.mode() | 0o111);
        let _ = fs::set_permissions(path, perms);
    }
}

#[cfg(not(unix))]
fn make_executable(_: &Path) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaffold_validates_clean_and_is_never_overwritten() -> Result<(), Box<dyn std::error::Error>>
    {
        let tmp = tempfile::tempdir()?;
        let dir = tmp.path().join("my-agent");
        let written = init(&dir)?;
        assert_eq!(written.len(), SCAFFOLD.len());
        let found = agentkit_manifest::discover(&dir)?;
        assert!(found.diagnostics.is_empty(), "{:?}", found.diagnostics);
        let echo = &found.host.agents[0].agent.tools[0];
        assert_eq!(echo.name, "echo");
        assert_eq!(echo.worker, Some(agentkit_manifest::Worker::default()));

        fs::write(dir.join("agent/instructions.md"), "mine")?;
        let err = init(&dir).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.starts_with("refusing to overwrite"), "{err}");
        assert_eq!(
            fs::read_to_string(dir.join("agent/instructions.md"))?,
            "mine"
        );
        Ok(())
    }

    #[test]
    fn the_worker_helper_is_the_shipped_one() -> Result<(), Box<dyn std::error::Error>> {
        let shipped =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/workers/agentkit_worker.py");
        assert_eq!(WORKER_PY, fs::read_to_string(shipped)?);
        Ok(())
    }

    #[test]
    fn refuses_folder_names_that_cannot_be_slugs() -> Result<(), Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        for bad in ["my agent", "v1"] {
            assert!(
                matches!(init(&tmp.path().join(bad)), Err(Error::InvalidSlug { .. })),
                "{bad}"
            );
        }
        Ok(())
    }
}
