//! `agentkit migrate`: converts a project written for the TypeScript
//! framework (`agent/agent.ts`, `defineTool`, `defineChannel`, …) into
//! agentkit's file format, and reports what it could not convert.
//!
//! What is mechanical converts everywhere: instructions, skills,
//! subagents, agent settings, MCP connections, the GitHub pack's options,
//! agent tools, markdown schedules, workspace seeds and eval cases. Their
//! values are read from the modules' source by a small literal reader
//! (`literal.rs`) or, when Node is available, from the modules themselves,
//! loaded under a stand-in of the original package (`shim/`) that also
//! turns zod schemas into JSON Schema with zod's own converter. With Node,
//! server tools, route handlers, `run` schedules and hooks convert too:
//! their command runs the original code under Node (`shim/run.mjs`),
//! talking to agentkit through the host bridge.
//!
//! *Must not know:* the rest of agentkit. It reads and writes files and
//! runs Node; the facade validates what it wrote.

mod convert;
mod error;
mod literal;
mod node;
mod report;
mod toml_out;

use std::path::{Path, PathBuf};

pub use error::{Error, Result};
pub use node::{NodeStatus, node_on_path};
pub use report::{Converted, Manual, ProjectReport, Report};

/// What to migrate and how.
#[derive(Debug, Clone, Default)]
pub struct MigrateOptions {
    /// The TypeScript project (the folder holding `agent/`), or a folder of
    /// such projects.
    pub from: PathBuf,
    /// Where the agentkit project (or folder of projects) is written.
    pub to: PathBuf,
    /// Write into a non-empty `to`.
    pub force: bool,
    /// The `node` program; `None` converts only what needs no Node.
    pub node: Option<PathBuf>,
    /// Extra `node_modules` folders where the shim finds `zod` and
    /// `typescript` when the project has none of its own.
    pub node_modules: Vec<PathBuf>,
}

/// Converts `options.from` into `options.to`.
///
/// Errors only when nothing can be done (`from` is no project, `to` is not
/// empty without `force`, a file cannot be written); whatever one file
/// gets wrong is a [`Manual`] entry of the report.
pub fn migrate(options: &MigrateOptions) -> Result<Report> {
    let from = &options.from;
    let projects = projects(from)?;
    check_target(options)?;
    let node = match &options.node {
        Some(program) => node::probe(program),
        None => NodeStatus::NotUsed,
    };
    let mut report = Report {
        from: from.clone(),
        to: options.to.clone(),
        node: node.clone(),
        projects: Vec::new(),
    };
    let single = projects.len() == 1 && projects[0] == *from;
    for project in projects {
        let folder = |p: &Path| {
            absolute(p)
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or_else(|| "agent".to_owned())
        };
        // The name is the slug the output is served under.
        let (name, to) = if single {
            (folder(&options.to), options.to.clone())
        } else {
            let name = folder(&project);
            let to = options.to.join(&name);
            (name, to)
        };
        let converted = convert::project(&project, &to, &name, options, &node)?;
        report.projects.push(converted);
    }
    Ok(report)
}

/// `from` itself when it holds `agent/`, else its children that do.
fn projects(from: &Path) -> Result<Vec<PathBuf>> {
    if from.join("agent").is_dir() {
        return Ok(vec![from.to_path_buf()]);
    }
    let entries = std::fs::read_dir(from).map_err(error::io("read", from))?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("agent").is_dir())
        .collect();
    found.sort();
    if found.is_empty() {
        return Err(Error::NotAProject {
            path: from.to_path_buf(),
        });
    }
    Ok(found)
}

fn check_target(options: &MigrateOptions) -> Result<()> {
    let to = &options.to;
    if let (Ok(from), Ok(target)) = (options.from.canonicalize(), absolute(to))
        && target.starts_with(&from)
    {
        return Err(Error::TargetInsideSource { path: to.clone() });
    }
    if to.exists() && !options.force {
        let mut entries = std::fs::read_dir(to).map_err(error::io("read", to))?;
        if entries.next().is_some() {
            return Err(Error::TargetNotEmpty { path: to.clone() });
        }
    }
    Ok(())
}

/// `path` made absolute without requiring it to exist (its nearest
/// existing ancestor is canonicalized).
fn absolute(path: &Path) -> std::io::Result<PathBuf> {
    let mut rest = Vec::new();
    let mut at = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()?.join(path)
    };
    loop {
        if let Ok(real) = at.canonicalize() {
            let mut out = real;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return Ok(out);
        }
        match (at.file_name().map(ToOwned::to_owned), at.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                at = parent.to_path_buf();
            }
            _ => return Ok(at),
        }
    }
}
