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
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| sweep_stale(&std::env::temp_dir()));
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

/// The prefixes of the folders [`unique_dir`] makes in the host's
/// temporary folder; the process id follows each.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
const PREFIXES: [&str; 2] = ["agentkit-sandboxes-", "agentkit-sandbox-"];

/// Removes the temporary folders that processes no longer running left in
/// `base`: a configuration's root lives as long as its cached ruleset,
/// which a process holds until it exits (statics are not dropped), and a
/// `kill -9` leaves whatever its children had. Once per process, before
/// its first root; a folder whose process still runs (or whose name says
/// no process) is left alone.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn sweep_stale(base: &Path) {
    // Without /proc nothing says a process is gone.
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    let me = std::process::id();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(stale_pid) else {
            continue;
        };
        if pid == me || Path::new("/proc").join(pid.to_string()).exists() {
            continue;
        }
        let _ = std::fs::remove_dir_all(entry.path());
    }
}

/// The process id in the name of a folder [`unique_dir`] made.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn stale_pid(name: &str) -> Option<u32> {
    let rest = PREFIXES.iter().find_map(|p| name.strip_prefix(p))?;
    rest.split('-').next()?.parse().ok()
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn folders_of_processes_gone_are_swept_and_the_others_kept() {
        let base = tempfile::tempdir().unwrap();
        // A process id that no process has: above the kernel's maximum.
        let gone = base.path().join("agentkit-sandboxes-4294967-0-1f");
        std::fs::create_dir_all(gone.join("agentkit-sandbox-4294967-1-2f")).unwrap();
        let loose = base.path().join("agentkit-sandbox-4294967-3-4f");
        std::fs::create_dir(&loose).unwrap();
        let mine = base
            .path()
            .join(format!("agentkit-sandboxes-{}-0-1f", std::process::id()));
        std::fs::create_dir(&mine).unwrap();
        let other = base.path().join("something-else-4294967");
        std::fs::create_dir(&other).unwrap();
        sweep_stale(base.path());
        assert!(!gone.exists() && !loose.exists());
        assert!(mine.exists() && other.exists());
        assert_eq!(stale_pid("agentkit-sandboxes-12-0-ff"), Some(12));
        assert_eq!(stale_pid("agentkit-sandbox-x-0-ff"), None);
    }
}
