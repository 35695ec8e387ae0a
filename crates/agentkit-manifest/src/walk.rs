//! Listing folders safely: sorted entries, hidden files skipped, non-UTF-8
//! names reported, symbolic links to folders and loops never followed,
//! nesting bounded.

use std::fs;
use std::path::{Path, PathBuf};

use crate::diagnostic::Code;
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
