//! `[harness.sandbox]` in `agent.toml` and a tool's `sandbox`: what the
//! children the model can steer (the `shell` built-in, server tools) may
//! read, write and reach. The harness applies it; this reads it.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::diagnostic::{Code, Diagnostic};
use crate::model::{Sandbox, SandboxMode};
use crate::names;
use crate::source::{Ctx, SourceText};

/// The keys of a sandbox table, in `[harness.sandbox]` and in a tool's.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSandbox {
    mode: Option<String>,
    network: Option<bool>,
    read: Option<Vec<String>>,
    write: Option<Vec<String>>,
    limits: Option<RawLimits>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    cpu_seconds: Option<u64>,
    memory_mb: Option<u64>,
    processes: Option<u64>,
    open_files: Option<u64>,
}

const WHY_IT_MATTERS: &str = "without the sandbox, what the model runs (and what a prompt injected through a channel talks it into) can read the host's stored provider keys, every session's workspace and the project's files, and reach any address";

/// `[harness.sandbox]`, over the defaults. Relative paths resolve against
/// `project_dir`.
pub(crate) fn read_harness_sandbox(
    ctx: &mut Ctx,
    src: &SourceText,
    raw: RawSandbox,
    project_dir: &Path,
) -> Sandbox {
    let sandbox = apply(
        ctx,
        src,
        "[harness.sandbox]",
        raw,
        Sandbox::default(),
        project_dir,
    );
    if sandbox.mode == SandboxMode::Off {
        ctx.push(
            Diagnostic::warning(
                Code::SandboxOff,
                src.rel.clone(),
                "`[harness.sandbox] mode = \"off\"` runs the `shell` built-in and every server tool unsandboxed",
            )
            .at(src.key_pos("mode").or_else(|| src.key_pos("harness.sandbox")))
            .with_hint(format!(
                "{WHY_IT_MATTERS}; keep the sandbox on and widen it with `read`, `write` or `network` instead (docs/reference/sandbox.md)"
            )),
        );
    }
    sandbox
}

/// A tool's `sandbox` (`"off"`, another mode, or a table), over `base`:
/// `[harness.sandbox]` with network on. Relative paths resolve against
/// `project_dir`.
pub(crate) fn read_tool_sandbox(
    ctx: &mut Ctx,
    src: &SourceText,
    tool: &str,
    value: Option<toml::Value>,
    base: &Sandbox,
    project_dir: &Path,
) -> Sandbox {
    let raw = match value {
        None => return base.clone(),
        Some(toml::Value::String(mode)) => RawSandbox {
            mode: Some(mode),
            ..RawSandbox::default()
        },
        Some(table @ toml::Value::Table(_)) => match table.try_into::<RawSandbox>() {
            Ok(raw) => raw,
            Err(e) => {
                ctx.push(
                    Diagnostic::error(
                        Code::InvalidValue,
                        src.rel.clone(),
                        format!("`sandbox`: {}", e.message().trim()),
                    )
                    .at(src.key_pos("sandbox"))
                    .with_hint("keys: mode, network, read, write, [sandbox.limits]"),
                );
                return base.clone();
            }
        },
        Some(other) => {
            ctx.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    src.rel.clone(),
                    format!(
                        "`sandbox` must be \"off\" or a table, not a {}",
                        other.type_str()
                    ),
                )
                .at(src.key_pos("sandbox")),
            );
            return base.clone();
        }
    };
    let sandbox = apply(ctx, src, "sandbox", raw, base.clone(), project_dir);
    if sandbox.mode == SandboxMode::Off && base.mode != SandboxMode::Off {
        ctx.push(
            Diagnostic::warning(
                Code::SandboxOff,
                src.rel.clone(),
                format!("tool `{tool}` turns the sandbox off"),
            )
            .at(src.key_pos("sandbox"))
            .with_hint(format!(
                "{WHY_IT_MATTERS}; keep it off only for a program you trust that never runs what a model or a message wrote, or widen the sandbox with `read`, `write` or `network` instead"
            )),
        );
    }
    sandbox
}

/// `raw` over `sandbox`: scalars replace, paths add.
fn apply(
    ctx: &mut Ctx,
    src: &SourceText,
    key: &str,
    raw: RawSandbox,
    mut sandbox: Sandbox,
    project_dir: &Path,
) -> Sandbox {
    if let Some(mode) = raw.mode {
        match SandboxMode::ALL.iter().find(|m| m.as_str() == mode) {
            Some(m) => sandbox.mode = *m,
            None => {
                let modes = SandboxMode::ALL.map(SandboxMode::as_str);
                let hint = names::did_you_mean(&mode, modes)
                    .map(|s| format!("did you mean `{s}`?"))
                    .unwrap_or_else(|| format!("modes: {}", modes.join(", ")));
                ctx.push(
                    Diagnostic::error(
                        Code::InvalidValue,
                        src.rel.clone(),
                        format!("unknown sandbox mode `{mode}` in `{key}`"),
                    )
                    .at(src.key_pos("mode").or_else(|| src.key_pos(key)))
                    .with_hint(hint),
                );
            }
        }
    }
    if let Some(network) = raw.network {
        sandbox.network = network;
    }
    for (list, out, field) in [
        (raw.read, &mut sandbox.read, "read"),
        (raw.write, &mut sandbox.write, "write"),
    ] {
        for path in list.unwrap_or_default() {
            if path.trim().is_empty() {
                ctx.push(
                    Diagnostic::error(
                        Code::InvalidValue,
                        src.rel.clone(),
                        format!("`{field}` has an empty path"),
                    )
                    .at(src.key_pos(field)),
                );
                continue;
            }
            out.push(resolve(project_dir, &path));
        }
    }
    if let Some(l) = raw.limits {
        let limits = &mut sandbox.limits;
        for (value, slot) in [
            (l.cpu_seconds, &mut limits.cpu_seconds),
            (l.memory_mb, &mut limits.memory_mb),
            (l.processes, &mut limits.processes),
            (l.open_files, &mut limits.open_files),
        ] {
            if let Some(v) = value {
                *slot = v;
            }
        }
    }
    sandbox
}

/// An absolute path as written; a relative one under the project folder.
fn resolve(project_dir: &Path, path: &str) -> PathBuf {
    let p = Path::new(path);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        project_dir.join(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_resolve_in_the_project() {
        let project = Path::new("/p");
        assert_eq!(resolve(project, "data"), PathBuf::from("/p/data"));
        assert_eq!(resolve(project, "/opt/x"), PathBuf::from("/opt/x"));
    }
}
