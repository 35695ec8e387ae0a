//! The private temporary folder of one sandboxed child: created empty
//! (mode 0700), removed with everything in it when the call ends. Where
//! the host can sandbox, it is made inside its configuration's
//! [`TmpRoot`] (the folder that configuration's shared ruleset grants),
//! else under the host's temporary folder.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug)]
pub(crate) struct PrivateTmp {
    path: PathBuf,
}

impl PrivateTmp {
    /// A new folder under the host's temporary folder.
    pub(crate) fn create() -> std::io::Result<PrivateTmp> {
        Ok(PrivateTmp {
            path: unique_dir(&std::env::temp_dir(), "agentkit-sandbox-")?,
        })
    }

    /// A new folder inside `root` (a configuration's [`TmpRoot`]).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn create_in(root: &Path) -> std::io::Result<PrivateTmp> {
        Ok(PrivateTmp {
            path: unique_dir(root, "agentkit-sandbox-")?,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        remove(std::mem::take(&mut self.path));
    }
}

/// The folder one sandbox configuration's children make their private
/// folders in, removed with everything in it when dropped.
#[derive(Debug)]
pub(crate) struct TmpRoot {
    path: PathBuf,
}

impl TmpRoot {
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn create() -> std::io::Result<TmpRoot> {
        Ok(TmpRoot {
            path: unique_dir(&std::env::temp_dir(), "agentkit-sandboxes-")?,
        })
    }

    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TmpRoot {
    fn drop(&mut self) {
        remove(std::mem::take(&mut self.path));
    }
}

/// Removes `path`: at once when it is empty (what most children leave),
/// else off the async workers (a child may have filled it).
fn remove(path: PathBuf) {
    if path.as_os_str().is_empty() || std::fs::remove_dir(&path).is_ok() {
        return;
    }
    let remove = move || {
        let _ = std::fs::remove_dir_all(&path);
    };
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => {
            rt.spawn_blocking(remove);
        }
        Err(_) => remove(),
    }
}

/// A new empty folder (0700) in `base`, named `prefix` and a name no
/// other folder of this process has.
fn unique_dir(base: &Path, prefix: &str) -> std::io::Result<PathBuf> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = base.join(format!("{prefix}{}-{n}-{nanos:x}", std::process::id()));
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        match builder.create(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!(
                        "cannot create the sandbox's temporary folder in {}: {e}",
                        base.display()
                    ),
                ));
            }
        }
    }
}
