//! The agent's journal in PostgreSQL (`agentkit_memory_journal`): every
//! host of the agent appends to, and reads, the same lines.

use crate::database::Database;
use crate::error::{Error, Result};

/// The newest lines whose bytes (each with its newline) add up to at most
/// `$2`, and always the newest one: the lines `RECENT` reads and the ones
/// `TRIM` keeps.
const WITHIN: &str = "
SELECT seq, line FROM (
    SELECT seq, line,
        sum(octet_length(line) + 1) OVER (ORDER BY seq DESC) AS total,
        row_number() OVER (ORDER BY seq DESC) AS n
    FROM agentkit_memory_journal WHERE agent = $1
) newest WHERE total <= $2 OR n = 1";

/// One agent's journal. Cheap to clone.
#[derive(Debug, Clone)]
pub struct JournalTable {
    db: Database,
    agent: String,
}

impl JournalTable {
    pub fn new(db: Database, agent: &str) -> JournalTable {
        JournalTable {
            db,
            agent: agent.to_owned(),
        }
    }

    /// Appends `lines` in order in one statement; with `keep_bytes`, then
    /// deletes the lines older than the newest that fit in it.
    pub async fn append(&self, lines: Vec<String>, keep_bytes: Option<u64>) -> Result<()> {
        let client = self.db.client().await?;
        client
            .execute(
                "INSERT INTO agentkit_memory_journal (agent, line)
                 SELECT $1, line FROM unnest($2::text[]) WITH ORDINALITY AS t(line, ord)
                 ORDER BY ord",
                &[&self.agent, &lines],
            )
            .await
            .map_err(Error::query("append to the journal"))?;
        if let Some(keep) = keep_bytes {
            let keep = i64::try_from(keep).unwrap_or(i64::MAX);
            client
                .execute(
                    &format!(
                        "DELETE FROM agentkit_memory_journal WHERE agent = $1
                         AND seq < (SELECT min(seq) FROM ({WITHIN}) kept)"
                    ),
                    &[&self.agent, &keep],
                )
                .await
                .map_err(Error::query("trim the journal"))?;
        }
        Ok(())
    }

    /// The newest lines, oldest first, that fit in `max_bytes` (the
    /// newest one always).
    pub async fn recent(&self, max_bytes: u64) -> Result<Vec<String>> {
        let client = self.db.client().await?;
        let max = i64::try_from(max_bytes).unwrap_or(i64::MAX);
        let rows = client
            .query(&format!("{WITHIN} ORDER BY seq"), &[&self.agent, &max])
            .await
            .map_err(Error::query("read the journal"))?;
        Ok(rows.iter().map(|r| r.get(1)).collect())
    }
}
