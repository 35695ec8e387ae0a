//! The private temporary folder of one sandboxed child: created empty
//! (mode 0700) under the host's temporary folder, removed with everything
//! in it when the call ends.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug)]
pub(crate) struct PrivateTmp {
    path: PathBuf,
}

impl PrivateTmp {
    pub(crate) fn create() -> std::io::Result<PrivateTmp> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let base = std::env::temp_dir();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = base.join(format!(
                "agentkit-sandbox-{}-{n}-{nanos:x}",
                std::process::id()
            ));
            let mut builder = std::fs::DirBuilder::new();
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            match builder.create(&path) {
                Ok(()) => return Ok(PrivateTmp { path }),
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

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        let path = std::mem::take(&mut self.path);
        let remove = move || {
            let _ = std::fs::remove_dir_all(&path);
        };
        // A child may have filled it: remove it off the async workers.
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn_blocking(remove);
            }
            Err(_) => remove(),
        }
    }
}
