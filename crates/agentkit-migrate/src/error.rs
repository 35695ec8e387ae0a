//! The one error type of the crate: what stops a migration as a whole
//! (anything one file gets wrong is a report entry instead).

use std::path::PathBuf;

/// Why a migration could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a file failed.
    #[error("cannot {action} `{}`", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `--from` holds no `agent/` folder.
    #[error("`{}` is not a project of the TypeScript framework (it has no `agent/` folder)", path.display())]
    NotAProject { path: PathBuf },
    /// `--to` exists and is not empty, and `force` was not given.
    #[error("`{}` is not empty; pass --force to write into it anyway", path.display())]
    TargetNotEmpty { path: PathBuf },
    /// `--to` is `--from`, or inside it.
    #[error("`{}` is inside the project being migrated; choose a folder outside it", path.display())]
    TargetInsideSource { path: PathBuf },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) fn io(
    action: &'static str,
    path: &std::path::Path,
) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.to_path_buf();
    move |source| Error::Io {
        action,
        path,
        source,
    }
}
