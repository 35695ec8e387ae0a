//! The errors discovery can fail with. Bad project files are never errors
//! here: they are diagnostics. Only a root that cannot be used at all is.

use std::path::PathBuf;

/// Why discovery could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("`{path}` does not exist")]
    NotFound { path: PathBuf },
    #[error("`{path}` is not a folder")]
    NotADirectory { path: PathBuf },
    #[error("cannot read `{path}`")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
