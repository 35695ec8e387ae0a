//! Node, when the machine has it: the shim written into a migrated project
//! (`agent/lib/agentkit-node/`), and the extraction run that loads the
//! project's modules under it to read their real values.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

use crate::error::{self, Result};

/// The shim's files, written beside each other.
pub(crate) const SHIM: &[(&str, &str)] = &[
    ("register.mjs", include_str!("shim/register.mjs")),
    ("hooks.mjs", include_str!("shim/hooks.mjs")),
    ("transpile.mjs", include_str!("shim/transpile.mjs")),
    ("july.mjs", include_str!("shim/july.mjs")),
    ("extract.mjs", include_str!("shim/extract.mjs")),
    ("run.mjs", include_str!("shim/run.mjs")),
];

/// How long loading every module of one project may take.
const EXTRACT_TIMEOUT: Duration = Duration::from_secs(120);

/// The variables the Node child keeps: where programs and the home folder
/// are, the locale and the temporary folder; nothing else of the host's.
const PASSED_ENV: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ"];
/// The most the extraction may print.
const MAX_OUTPUT: u64 = 32 << 20;

/// Whether Node took part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "camelCase")]
pub enum NodeStatus {
    /// No `node` was given (none on `PATH`, or `--no-node`).
    NotUsed,
    /// `node` ran; its version.
    Available { program: PathBuf, version: String },
    /// `node` was found but cannot host the shim.
    Unusable { program: PathBuf, reason: String },
}

impl NodeStatus {
    pub(crate) fn program(&self) -> Option<&Path> {
        match self {
            NodeStatus::Available { program, .. } => Some(program),
            _ => None,
        }
    }
}

/// `node` on `path` (a `PATH`-style list), if any.
pub fn node_on_path(path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    let path = path?;
    std::env::split_paths(path)
        .map(|dir| dir.join("node"))
        .find(|candidate| candidate.is_file())
}

/// Runs `node --version`; the shim needs `module.register` (Node 20.6).
pub(crate) fn probe(program: &Path) -> NodeStatus {
    let out = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .output();
    let out = match out {
        Ok(out) if out.status.success() => out,
        Ok(out) => {
            return NodeStatus::Unusable {
                program: program.to_path_buf(),
                reason: format!("`node --version` exited with {}", out.status),
            };
        }
        Err(e) => {
            return NodeStatus::Unusable {
                program: program.to_path_buf(),
                reason: format!("cannot run it: {e}"),
            };
        }
    };
    let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let numbers: Vec<u32> = version
        .trim_start_matches('v')
        .split('.')
        .map(|n| n.parse().unwrap_or(0))
        .collect();
    let (major, minor) = (
        numbers.first().copied().unwrap_or(0),
        numbers.get(1).copied().unwrap_or(0),
    );
    if major < 20 || (major == 20 && minor < 6) {
        return NodeStatus::Unusable {
            program: program.to_path_buf(),
            reason: format!(
                "{version} is too old: the shim needs Node 20.6 or later (module hooks)"
            ),
        };
    }
    NodeStatus::Available {
        program: program.to_path_buf(),
        version,
    }
}

/// Writes the shim into `dir` with its `config.json`.
pub(crate) fn write_shim(dir: &Path, project_root: &str, node_modules: &[PathBuf]) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(error::io("create", dir))?;
    for (name, text) in SHIM {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(error::io("write", &path))?;
    }
    let config = serde_json::json!({
        "projectRoot": project_root,
        "compiledDir": "compiled",
        "nodeModules": node_modules,
    });
    let path = dir.join("config.json");
    let text = serde_json::to_string_pretty(&config).unwrap_or_default();
    std::fs::write(&path, text + "\n").map_err(error::io("write", &path))?;
    Ok(())
}

/// What loading one module gave.
pub(crate) type Extracted = HashMap<PathBuf, Result<Value, String>>;

/// Loads each of `files` under the shim in `shim_dir` and answers their
/// default exports; an error of the run as a whole is the `Err`.
pub(crate) fn extract(
    node: &Path,
    shim_dir: &Path,
    cwd: &Path,
    files: &[PathBuf],
) -> Result<Extracted, String> {
    if files.is_empty() {
        return Ok(HashMap::new());
    }
    let mut cmd = Command::new(node);
    // The project's modules run with a scrubbed environment: their
    // `process.env` reads answer `${NAME}` anyway, and nothing of the
    // migrating machine's secrets should reach code being converted.
    cmd.env_clear();
    for name in PASSED_ENV {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    cmd.arg("--import")
        .arg(shim_dir.join("register.mjs"))
        .arg(shim_dir.join("extract.mjs"))
        .args(files)
        .current_dir(cwd)
        .env("AGENTKIT_SHIM_EXTRACT", "1")
        .env("AGENTKIT_SHIM_COMPILE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", node.display()))?;
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let out_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(s) = stdout {
            let _ = s.take(MAX_OUTPUT).read_to_end(&mut buf);
        }
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(s) = stderr {
            let _ = s.take(64 << 10).read_to_end(&mut buf);
        }
        buf
    });
    let deadline = Instant::now() + EXTRACT_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "loading the modules under Node took longer than {}s",
                    EXTRACT_TIMEOUT.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("waiting for node: {e}")),
        }
    };
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    let mut found = HashMap::new();
    for line in String::from_utf8_lossy(&stdout).lines() {
        let Ok(entry) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let Some(file) = entry.get("file").and_then(Value::as_str) else {
            continue;
        };
        let result = match entry.get("error").and_then(Value::as_str) {
            Some(message) => Err(message.to_owned()),
            None => Ok(entry.get("value").cloned().unwrap_or(Value::Null)),
        };
        found.insert(PathBuf::from(file), result);
    }
    if found.is_empty() && !status.success() {
        let text = String::from_utf8_lossy(&stderr);
        let first = text
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no output");
        return Err(format!("node exited with {status}: {first}"));
    }
    Ok(found)
}
