//! Cron once per tick across hosts: a unique row per (schedule, tick).

use crate::database::Database;
use crate::error::{Error, Result};

/// Claims tick `tick_ms` of `agent`'s schedule `schedule` for `host`:
/// true for the one host whose insert made the row, false for all others.
pub async fn claim_tick(
    db: &Database,
    agent: &str,
    schedule: &str,
    tick_ms: i64,
    host: &str,
) -> Result<bool> {
    let client = db.client().await?;
    let n = client
        .execute(
            "INSERT INTO agentkit_schedule_ticks (agent, schedule_id, tick_ms, fired_by)
             VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
            &[&agent, &schedule, &tick_ms, &host],
        )
        .await
        .map_err(Error::query("claim a schedule tick"))?;
    Ok(n == 1)
}
