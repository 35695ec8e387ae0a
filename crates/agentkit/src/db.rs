//! `agentkit db`: the shared database's schema for operators, applied
//! (`migrate`) or reported (`status`) without serving.

pub use agentkit_pg::{MigrationStatus, SchemaStatus, redacted};

use crate::error::Result;

/// Applies every pending migration of the database at `url` (under the
/// migration lock: safe while hosts start). Returns the versions applied.
pub async fn migrate(url: &str) -> Result<Vec<i32>> {
    let db = agentkit_pg::Database::connect(url).await?;
    Ok(db.migrate().await?)
}

/// Which migrations the database at `url` has.
pub async fn status(url: &str) -> Result<SchemaStatus> {
    let db = agentkit_pg::Database::connect(url).await?;
    Ok(db.status().await?)
}
