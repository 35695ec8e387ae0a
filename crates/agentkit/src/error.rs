//! The facade's error type.

use std::path::PathBuf;

/// What can go wrong in the facade's own operations.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Discovery(#[from] agentkit_manifest::Error),
    #[error("the project has {} error(s); run `agentkit validate` for details", .diagnostics.error_count())]
    Invalid {
        diagnostics: agentkit_manifest::Diagnostics,
    },
    /// The host configuration file (`--config`) has errors.
    #[error("the host configuration `{path}` has {} error(s)", .diagnostics.error_count())]
    HostConfig {
        path: String,
        diagnostics: agentkit_manifest::Diagnostics,
    },
    #[error("{message}")]
    Config { message: String },
    /// An `agentkit mcp login` step failed.
    #[error(transparent)]
    OAuth(#[from] agentkit_mcp::OAuthError),
    #[error("cannot listen on {addr}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Runtime(#[from] agentkit_runtime::Error),
    /// The shared database (`--database-url`, `agentkit db`).
    #[error(transparent)]
    Database(#[from] agentkit_pg::Error),
    #[error("refusing to overwrite existing files: {}", .paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
    WouldOverwrite { paths: Vec<PathBuf> },
    #[error(
        "`{name}` cannot be an agent slug: use letters, digits, `-` and `_`, starting with a letter or digit, and not `v1`, `playground` or `docs`"
    )]
    InvalidSlug { name: String },
    #[error("cannot write `{path}`")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
