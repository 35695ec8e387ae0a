//! Fuzzes `agentkit_manifest::discover` with arbitrary definition files.
//!
//! The input is split on NUL bytes into the files of one project (in the
//! order of `FILES`), written into a temporary folder that is reused for
//! the whole process, and discovered. Any input may produce diagnostics;
//! only a panic (or `discover` failing on a readable folder) is a bug.

#![no_main]

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

/// The files one input fills, relative to the project folder. A missing
/// segment leaves its file out of the project.
const FILES: &[&str] = &[
    "agent/agent.toml",
    "agent/instructions.md",
    "agent/tools/t.toml",
    "agent/skills/s.md",
    "agent/schedules/x.md",
    "agent/schedules/y.toml",
    "agent/channels/c.toml",
    "evals/evals.toml",
    "evals/e.eval.toml",
    "agent/hooks/h.toml",
    "agent/mcp-connections/m.toml",
    "agent/ab.toml",
    "agent/subagents/r/agent.toml",
    "agent/skills/p/SKILL.md",
];

/// One project folder per process, kept for the process's lifetime.
fn project() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("agentkit-fuzz-")
            .tempdir()
            .expect("create a temporary folder")
            .keep();
        for f in FILES {
            fs::create_dir_all(dir.join(f).parent().expect("a parent folder"))
                .expect("create the project folders");
        }
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let root = project();
    let mut parts = data.split(|&b| b == 0);
    for f in FILES {
        let path = root.join(f);
        match parts.next() {
            Some(bytes) => fs::write(&path, bytes).expect("write a project file"),
            None => match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => panic!("cannot remove {}: {e}", path.display()),
            },
        }
    }
    let found = match agentkit_manifest::discover(root) {
        Ok(found) => found,
        Err(e) => panic!("discover failed on a readable folder: {e}"),
    };
    // Rendering diagnostics and resolving `${VAR}`s must not panic either.
    for d in &found.diagnostics {
        std::hint::black_box(d.to_string());
    }
    std::hint::black_box(agentkit_manifest::unset_env_refs(&found.host, |_| false));
});
