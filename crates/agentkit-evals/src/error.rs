//! What can keep an eval run from starting or a baseline from being read.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Selectors that name no case, file or folder of evals.
    #[error("no eval matches {}; known ids: {}", quote(.selectors), .known.join(", "))]
    UnknownSelectors {
        selectors: Vec<String>,
        known: Vec<String>,
    },
    /// The project has no evals to run.
    #[error("`{agent}` has no evals (write `evals/evals.toml` and `evals/*.eval.toml`)")]
    NoEvals { agent: String },
    /// A baseline file could not be read or is not an eval report.
    #[error("baseline `{}` is not an eval report: {message}", .path.display())]
    Baseline { path: PathBuf, message: String },
}

fn quote(items: &[String]) -> String {
    items
        .iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
