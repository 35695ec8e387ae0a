//! What a migration did: every file it wrote and where from, and every
//! part it could not convert, with the reason and what to do instead.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;

use crate::node::NodeStatus;

/// The whole migration.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub from: PathBuf,
    pub to: PathBuf,
    pub node: NodeStatus,
    pub projects: Vec<ProjectReport>,
}

/// One project of it.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectReport {
    /// The project's folder name (its slug once served).
    pub name: String,
    pub to: PathBuf,
    pub converted: Vec<Converted>,
    pub manual: Vec<Manual>,
    /// What the converted project needs to run.
    pub notes: Vec<String>,
    /// Modules Node loaded, and modules it failed to load (their code was
    /// not converted; each failure is a [`Manual`] entry).
    pub modules_loaded: usize,
    pub modules_failed: usize,
}

/// A file written.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Converted {
    /// The source file, relative to the project.
    pub source: String,
    /// The file written, relative to the output project.
    pub target: String,
    /// `copied`, `converted`, or `converted (values read under Node)`.
    pub how: String,
}

/// A part left for a person.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Manual {
    /// The source file, relative to the project.
    pub source: String,
    /// What in it (a field, a route, a hook).
    pub what: String,
    /// Why it was not converted.
    pub reason: String,
    /// What to write instead.
    pub manual: String,
}

impl Report {
    /// Every manual entry of every project.
    pub fn manual_count(&self) -> usize {
        self.projects.iter().map(|p| p.manual.len()).sum()
    }

    /// Modules Node failed to load, in every project: their tools, route
    /// handlers and schedules were not converted.
    pub fn modules_failed(&self) -> usize {
        self.projects.iter().map(|p| p.modules_failed).sum()
    }

    /// The report as text, as `agentkit migrate` prints it.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let loaded: usize = self.projects.iter().map(|p| p.modules_loaded).sum();
        let failed = self.modules_failed();
        let node = match &self.node {
            NodeStatus::NotUsed => "without Node: values read from the modules' source; code that must run was not converted".to_owned(),
            NodeStatus::Available { version, .. } if failed > 0 && loaded == 0 => format!("with Node {version}, but no module loaded ({failed} failed, see below): values read from the modules' source; code that must run was not converted"),
            NodeStatus::Available { version, .. } if failed > 0 => format!("with Node {version}: values read from {loaded} of the project's modules; {failed} failed to load (see below) and their code was not converted"),
            NodeStatus::Available { version, .. } => format!("with Node {version}: values read from the project's own modules"),
            NodeStatus::Unusable { reason, .. } => format!("without Node ({reason})"),
        };
        let _ = writeln!(
            out,
            "migrated {} → {} ({node})",
            self.from.display(),
            self.to.display()
        );
        for project in &self.projects {
            let _ = writeln!(out, "\n{} → {}", project.name, project.to.display());
            let _ = writeln!(out, "  converted ({}):", project.converted.len());
            for c in &project.converted {
                let _ = writeln!(out, "    {} → {} ({})", c.source, c.target, c.how);
            }
            for note in &project.notes {
                let _ = writeln!(out, "  note: {note}");
            }
            if project.manual.is_empty() {
                let _ = writeln!(out, "  nothing left to do by hand");
                continue;
            }
            let _ = writeln!(out, "  not converted ({}):", project.manual.len());
            for m in &project.manual {
                let _ = writeln!(out, "    {}: {}", m.source, m.what);
                let _ = writeln!(out, "      why: {}", m.reason);
                let _ = writeln!(out, "      instead: {}", m.manual);
            }
        }
        out
    }
}

impl ProjectReport {
    pub(crate) fn converted(&mut self, source: &str, target: &str, how: &str) {
        self.converted.push(Converted {
            source: source.to_owned(),
            target: target.to_owned(),
            how: how.to_owned(),
        });
    }

    pub(crate) fn manual(
        &mut self,
        source: &str,
        what: impl Into<String>,
        reason: impl Into<String>,
        manual: impl Into<String>,
    ) {
        self.manual.push(Manual {
            source: source.to_owned(),
            what: what.into(),
            reason: reason.into(),
            manual: manual.into(),
        });
    }
}
