//! Session workspaces: the folder a session's turns work in, materialised
//! from the agent's files before the first turn.
//!
//! | source | lands as |
//! |---|---|
//! | instructions | `AGENTS.md` (with the agent-tools catalog appended) |
//! | `skills/*` | `.agentkit/skills/<name>/SKILL.md` (+ a packaged skill's files) |
//! | agent tools | `.agentkit/tools/<name>` scripts |
//! | `sandbox/workspace/**` | copied in as seed files |
//! | per-send `workspace_files` | written before the turn |

use std::fs;
use std::path::{Path, PathBuf};

use agentkit_manifest::{Agent, Execution};

use crate::error::{Error, Result};

/// Writes the agent's files into `dir` (created if missing). Existing
/// files are overwritten: a workspace is materialised once per session,
/// before its first turn.
pub fn materialize(agent: &Agent, dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).map_err(|e| Error::io("create", dir, e))?;
    let mut agents_md = agent
        .instructions
        .as_ref()
        .map(|i| i.text.clone())
        .unwrap_or_default();
    let agent_tools: Vec<_> = agent
        .tools
        .iter()
        .filter(|t| t.execution == Execution::Agent)
        .collect();
    if !agent_tools.is_empty() {
        agents_md.push_str("\n\n## Workspace tools\n\nRun these scripts with the JSON input on stdin; they print the result.\n\n");
        for t in &agent_tools {
            let schema = serde_json::to_string(&t.input_schema).unwrap_or_default();
            agents_md.push_str(&format!(
                "- `.agentkit/tools/{}`: {} Input schema: `{schema}`\n",
                t.name, t.description
            ));
            if let Some(script) = &t.script {
                write(
                    dir,
                    &format!(".agentkit/tools/{}", t.name),
                    script.as_bytes(),
                )?;
                make_executable(&dir.join(".agentkit/tools").join(&t.name));
            }
        }
    }
    write(dir, "AGENTS.md", agents_md.as_bytes())?;
    for skill in &agent.skills {
        let base = format!(".agentkit/skills/{}", skill.name);
        let mut text = format!(
            "---\nname: {}\ndescription: {}\n---\n\n",
            skill.name,
            yaml_scalar(&skill.description)
        );
        text.push_str(&skill.body);
        write(dir, &format!("{base}/SKILL.md"), text.as_bytes())?;
        if let Some(src) = &skill.dir {
            for rel in &skill.files {
                copy(&src.join(rel), dir, &format!("{base}/{rel}"))?;
            }
        }
    }
    let seeds = agent.dir.join("sandbox/workspace");
    for rel in &agent.sandbox_files {
        copy(&seeds.join(rel), dir, rel)?;
    }
    Ok(())
}

/// Writes per-send files. Paths come from requests, so each must be a
/// relative path that stays inside the workspace.
pub(crate) fn write_files(dir: &Path, files: &[(String, Vec<u8>)]) -> Result<()> {
    // Check every path before writing any, so a bad one writes nothing.
    for (rel, _) in files {
        safe_join(dir, rel)?;
    }
    for (rel, content) in files {
        write(dir, rel, content)?;
    }
    Ok(())
}

/// Checks request-supplied paths without touching the disk: each must be
/// relative and stay inside the workspace (the harness's one guard;
/// symbolic links are checked again when the files are written).
pub(crate) fn check_relative_paths(files: &[(String, Vec<u8>)]) -> Result<()> {
    for (rel, _) in files {
        agentkit_harness::check_relative_path(rel).map_err(path_error)?;
    }
    Ok(())
}

/// Joins a request-supplied relative path onto `root` through the
/// harness's one strict guard ([`agentkit_harness::confine_path`]):
/// absolute paths, `..`, symbolic links that resolve outside and paths
/// that cannot be resolved are refused.
pub fn safe_join(root: &Path, rel: &str) -> Result<PathBuf> {
    agentkit_harness::confine_path(root, rel).map_err(path_error)
}

/// A refused path is the request's fault; a workspace that cannot be
/// resolved is the host's.
fn path_error(e: agentkit_harness::PathError) -> Error {
    match e {
        agentkit_harness::PathError::WorkspaceUnavailable { root, source } => {
            Error::io("resolve", &root, source)
        }
        other => Error::BadRequest {
            message: other.to_string(),
        },
    }
}

fn write(root: &Path, rel: &str, bytes: &[u8]) -> Result<()> {
    let path = safe_join(root, rel)?;
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(|e| Error::io("create", parent, e))?;
    }
    fs::write(&path, bytes).map_err(|e| Error::io("write", &path, e))
}

fn copy(from: &Path, root: &Path, rel: &str) -> Result<()> {
    let bytes = fs::read(from).map_err(|e| Error::io("read", from, e))?;
    write(root, rel, &bytes)
}

fn yaml_scalar(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

#[cfg(unix)]
fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = fs::metadata(path) {
        let mut perms = meta.permissions();
        perms.set_mode(perms.mode() | 0o755);
        let _ = fs::set_permissions(path, perms);
    }
}

#[cfg(not(unix))]
fn make_executable(_: &Path) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_paths_never_leave_the_workspace() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = tmp.path();
        assert!(safe_join(root, "notes/a.md").is_ok());
        for bad in ["../x", "/etc/passwd", "a/../../x", "", "a\0b"] {
            assert!(safe_join(root, bad).is_err(), "{bad}");
        }
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("/tmp", root.join("out")).unwrap_or_else(|e| panic!("{e}"));
            assert!(safe_join(root, "out/x").is_err());
        }
    }
}
