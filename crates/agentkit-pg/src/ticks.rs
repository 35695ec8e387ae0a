//! Once across hosts: a unique row per (schedule, tick) for cron, per
//! delivery id for channel deliveries; and the channels' per-session
//! state, which every host reads and replaces.

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

/// Records delivery `id` of `agent`'s channel `channel` (pack `pack`):
/// true for the one host whose insert made the row.
pub async fn first_delivery(
    db: &Database,
    agent: &str,
    channel: &str,
    pack: &str,
    id: &str,
) -> Result<bool> {
    let client = db.client().await?;
    let n = client
        .execute(
            "INSERT INTO agentkit_deliveries (agent, channel, pack, delivery_id)
             VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
            &[&agent, &channel, &pack, &id],
        )
        .await
        .map_err(Error::query("record a delivery"))?;
    Ok(n == 1)
}

/// The state of `agent`'s channel `channel` for `session`, as JSON text.
pub async fn channel_state(
    db: &Database,
    agent: &str,
    channel: &str,
    session: &str,
) -> Result<Option<String>> {
    let client = db.client().await?;
    Ok(client
        .query_opt(
            "SELECT value FROM agentkit_channel_state WHERE agent = $1 AND channel = $2 AND session_id = $3",
            &[&agent, &channel, &session],
        )
        .await
        .map_err(Error::query("read channel state"))?
        .map(|r| r.get(0)))
}

/// Replaces that state.
pub async fn set_channel_state(
    db: &Database,
    agent: &str,
    channel: &str,
    session: &str,
    value: &str,
) -> Result<()> {
    let client = db.client().await?;
    client
        .execute(
            "INSERT INTO agentkit_channel_state (agent, channel, session_id, value) VALUES ($1, $2, $3, $4)
             ON CONFLICT (agent, channel, session_id) DO UPDATE SET value = EXCLUDED.value",
            &[&agent, &channel, &session, &value],
        )
        .await
        .map_err(Error::query("write channel state"))?;
    Ok(())
}
