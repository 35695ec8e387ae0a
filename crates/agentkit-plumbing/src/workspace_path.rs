//! The one workspace path guard: a path from a model or a request joins
//! onto a workspace only when it provably stays inside, and anything that
//! cannot be resolved is refused, never waved through.
//!
//! The built-in workspace tools and the runtime's per-send
//! `workspaceFiles` both go through [`confine_path`]; the runtime checks a
//! request's paths up front with [`check_relative_path`], which needs no
//! disk.

use std::path::{Component, Path, PathBuf};

/// Why a workspace path was refused.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("workspace path is empty")]
    Empty,
    #[error("workspace path `{path}` has a NUL byte")]
    Nul { path: String },
    #[error(
        "workspace path `{path}` must be relative and stay inside the workspace (no absolute path, no `..`)"
    )]
    Outside { path: String },
    #[error("workspace path `{path}` leaves the workspace through a symbolic link")]
    SymlinkOut { path: String },
    #[error("workspace path `{path}` cannot be resolved: {source}")]
    Unresolvable {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the workspace {} is unavailable: {source}", root.display())]
    WorkspaceUnavailable {
        root: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Checks `rel` without touching the disk: not empty, no NUL byte, and
/// only plain components (no root, no prefix, no `..`).
pub fn check_relative_path(rel: &str) -> Result<(), PathError> {
    if rel.is_empty() {
        return Err(PathError::Empty);
    }
    if rel.contains('\0') {
        return Err(PathError::Nul {
            path: rel.to_owned(),
        });
    }
    if Path::new(rel)
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(PathError::Outside {
            path: rel.to_owned(),
        });
    }
    Ok(())
}

/// `root` joined with `rel`, when [`check_relative_path`] holds and the
/// deepest part of the result that exists (a symbolic link itself, even a
/// dangling one) resolves inside the resolved `root`. A root that cannot
/// be resolved, an entry that cannot be read, a dangling or looping link
/// and a file used as a folder are all refused.
pub fn confine_path(root: &Path, rel: &str) -> Result<PathBuf, PathError> {
    check_relative_path(rel)?;
    let real_root = root
        .canonicalize()
        .map_err(|source| PathError::WorkspaceUnavailable {
            root: root.to_path_buf(),
            source,
        })?;
    let joined = root.join(rel);
    let unresolvable = |source| PathError::Unresolvable {
        path: rel.to_owned(),
        source,
    };
    // The parts below the deepest existing entry do not exist, so no link
    // hides there; that entry decides.
    let mut probe = joined.clone();
    loop {
        match std::fs::symlink_metadata(&probe) {
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !probe.pop() {
                    return Err(unresolvable(e));
                }
            }
            Err(e) => return Err(unresolvable(e)),
        }
    }
    let real = probe.canonicalize().map_err(unresolvable)?;
    if !real.starts_with(&real_root) {
        return Err(PathError::SymlinkOut {
            path: rel.to_owned(),
        });
    }
    Ok(joined)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_inside_pass_and_dot_dot_or_absolute_ones_do_not() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("a")).unwrap();
        assert_eq!(confine_path(root, "a/b.txt").unwrap(), root.join("a/b.txt"));
        assert_eq!(
            confine_path(root, "new/deep/c.md").unwrap(),
            root.join("new/deep/c.md")
        );
        assert!(confine_path(root, ".").is_ok());
        for bad in ["../x", "a/../../x", "a/..", "/etc/passwd", "/"] {
            assert!(
                matches!(confine_path(root, bad), Err(PathError::Outside { .. })),
                "{bad}"
            );
            assert!(check_relative_path(bad).is_err(), "{bad}");
        }
        assert!(matches!(confine_path(root, ""), Err(PathError::Empty)));
        assert!(matches!(
            check_relative_path("a\0b"),
            Err(PathError::Nul { .. })
        ));
        assert!(check_relative_path("a/./b").is_ok());
    }

    #[cfg(unix)]
    #[test]
    fn symbolic_links_out_are_refused_and_links_inside_are_fine() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("inner")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("out")).unwrap();
        std::os::unix::fs::symlink(root.join("inner"), root.join("in")).unwrap();
        for bad in ["out", "out/passwd", "out/new/deep.txt"] {
            assert!(
                matches!(confine_path(root, bad), Err(PathError::SymlinkOut { .. })),
                "{bad}"
            );
        }
        assert!(confine_path(root, "in/x.txt").is_ok());
    }

    #[cfg(unix)]
    #[test]
    fn paths_that_cannot_be_resolved_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        // A dangling link would let a write create its target anywhere.
        std::os::unix::fs::symlink("/nonexistent-agentkit/dir", root.join("dangling")).unwrap();
        std::os::unix::fs::symlink(root.join("loop"), root.join("loop")).unwrap();
        std::fs::write(root.join("file.txt"), "x").unwrap();
        for bad in ["dangling", "dangling/x.txt", "loop/x", "file.txt/x"] {
            assert!(
                matches!(confine_path(root, bad), Err(PathError::Unresolvable { .. })),
                "{bad}: {:?}",
                confine_path(root, bad)
            );
        }
        // A workspace that is gone admits nothing.
        let gone = root.join("missing-root");
        assert!(matches!(
            confine_path(&gone, "a.txt"),
            Err(PathError::WorkspaceUnavailable { .. })
        ));
    }
}
