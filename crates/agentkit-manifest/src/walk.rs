//! Listing folders safely: sorted entries, hidden files skipped, non-UTF-8
//! names reported, symbolic links to folders and loops never followed,
//! nesting bounded.

use std::fs;
use std::path::{Path, PathBuf};

use crate::diagnostic::{Code, Diagnostic};
use crate::source::{Ctx, MAX_DEPTH};

/// One entry of a folder.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) path: PathBuf,
    pub(crate) name: String,
    pub(crate) is_dir: bool,
}

impl Entry {
    /// The name without its last extension.
    pub(crate) fn stem(&self) -> &str {
        self.name
            .rsplit_once('.')
            .map_or(self.name.as_str(), |(s, _)| s)
    }

    pub(crate) fn ext(&self) -> Option<&str> {
        self.name.rsplit_once('.').map(|(_, e)| e)
    }
}

/// The entries of `dir`, sorted by name. Hidden entries (`.gitkeep`,
/// `.DS_Store`) are skipped. A symbolic link to a file counts as that
/// file; a link to a folder, a broken link or a loop is reported and
/// skipped.
pub(crate) fn list_dir(ctx: &mut Ctx, dir: &Path) -> Vec<Entry> {
    let read = match fs::read_dir(dir) {
        Ok(r) => r,
        Err(e) => {
            ctx.error(Code::Io, dir, format!("cannot read folder: {e}"));
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for item in read {
        let item = match item {
            Ok(i) => i,
            Err(e) => {
                ctx.error(Code::Io, dir, format!("cannot read folder entry: {e}"));
                continue;
            }
        };
        let path = item.path();
        let Some(name) = item.file_name().to_str().map(str::to_owned) else {
            ctx.warning(
                Code::NonUtf8Name,
                &path,
                format!(
                    "name `{}` is not valid UTF-8; skipped",
                    item.file_name().to_string_lossy()
                ),
            );
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        let Ok(file_type) = item.file_type() else {
            ctx.error(Code::Io, &path, "cannot read file type");
            continue;
        };
        let is_dir = if file_type.is_symlink() {
            match fs::metadata(&path) {
                Ok(m) if m.is_file() => false,
                Ok(_) => {
                    ctx.warning(
                        Code::SymlinkSkipped,
                        &path,
                        "symbolic link to a folder is not followed",
                    );
                    continue;
                }
                Err(e) => {
                    ctx.warning(
                        Code::SymlinkSkipped,
                        &path,
                        format!("symbolic link cannot be followed: {e}"),
                    );
                    continue;
                }
            }
        } else {
            file_type.is_dir()
        };
        out.push(Entry { path, name, is_dir });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Every file under `dir`, relative to it with `/` separators, sorted.
pub(crate) fn walk_files(ctx: &mut Ctx, dir: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    walk_into(ctx, dir, "", 0, &mut out);
    out
}

fn walk_into(
    ctx: &mut Ctx,
    dir: &Path,
    prefix: &str,
    depth: usize,
    out: &mut Vec<(String, PathBuf)>,
) {
    if depth >= MAX_DEPTH {
        ctx.error(
            Code::TooDeep,
            dir,
            format!("folder is nested more than {MAX_DEPTH} levels deep; its contents are skipped"),
        );
        return;
    }
    for e in list_dir(ctx, dir) {
        let rel = if prefix.is_empty() {
            e.name.clone()
        } else {
            format!("{prefix}/{}", e.name)
        };
        if e.is_dir {
            walk_into(ctx, &e.path, &rel, depth + 1, out);
        } else {
            out.push((rel, e.path));
        }
    }
}

/// Is this a TypeScript or JavaScript source file, which this host cannot
/// load?
pub(crate) fn is_script_source(name: &str) -> bool {
    [".ts", ".mts", ".cts", ".js", ".mjs", ".cjs", ".tsx", ".jsx"]
        .iter()
        .any(|ext| name.ends_with(ext))
        && !name.ends_with(".d.ts")
}

/// The name a TypeScript-era definition file defines: its stem without
/// the script extension or a kind suffix (`get_weather.tool.ts` →
/// `get_weather`).
pub(crate) fn definition_stem(name: &str) -> &str {
    let stem = name.rsplit_once('.').map_or(name, |(s, _)| s);
    [
        ".tool",
        ".channel",
        ".hook",
        ".schedule",
        ".skill",
        ".connection",
        ".agent",
    ]
    .iter()
    .find_map(|suffix| stem.strip_suffix(suffix))
    .filter(|s| !s.is_empty())
    .unwrap_or(stem)
}

/// The packages and `define*` functions of the original TypeScript
/// framework: a script that names one is a definition written for it.
const FRAMEWORK_MARKERS: &[&str] = &[
    "@cursor/july",
    "@cursor/bdk",
    "@cursor/agent-sdk",
    "@grok/agent-sdk",
    "defineAgent",
    "defineTool",
    "defineChannel",
    "defineHook",
    "defineSchedule",
    "defineSkill",
    "defineConnection",
    "defineMcpConnection",
    "defineInstructions",
    "defineAB",
    "defineEval",
    "httpChannel(",
];

/// How much of a script is read to recognise it.
const SNIFF_BYTES: u64 = 64 * 1024;

/// Whether the script at `path` is written for the original framework
/// (imports one of its packages or calls one of its `define*` functions).
fn is_framework_definition(path: &Path) -> bool {
    use std::io::Read;
    let mut head = Vec::new();
    let read = fs::File::open(path).and_then(|f| f.take(SNIFF_BYTES).read_to_end(&mut head));
    if read.is_err() {
        return false;
    }
    let text = String::from_utf8_lossy(&head);
    FRAMEWORK_MARKERS.iter().any(|m| text.contains(m))
}

/// The diagnostic for a TypeScript/JavaScript file where agentkit expects
/// a definition. An error when the file is an untranslated definition (it
/// imports the original framework or calls its `define*` functions) that
/// no TOML or Markdown file replaces (`replaced`): serving would silently
/// drop what it defines, so `validate` must not say "ok". A warning
/// otherwise (a helper script, or a leftover beside its translation).
pub(crate) fn script_definition(
    ctx: &Ctx,
    path: &Path,
    replaced: bool,
    message: String,
    hint: String,
) -> Diagnostic {
    if !replaced && is_framework_definition(path) {
        Diagnostic::error(
            Code::TypescriptDefinition,
            ctx.rel(path),
            format!("{message}; it was written for the TypeScript framework and nothing here translates it"),
        )
        .with_hint(hint)
    } else {
        Diagnostic::warning(Code::TypescriptDefinition, ctx.rel(path), message).with_hint(hint)
    }
}
