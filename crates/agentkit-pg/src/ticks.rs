//! Once across hosts: a unique row per (schedule, tick) for cron, per
//! delivery id for channel deliveries; and the channels' per-session
//! state, which every host reads and replaces; the day's token usage.

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

/// What `agent`'s turns cost on `day` (`YYYY-MM-DD`, UTC), on every
/// host, in billionths of a US dollar.
pub async fn day_cost(db: &Database, agent: &str, day: &str) -> Result<i64> {
    let client = db.client().await?;
    Ok(client
        .query_opt(
            "SELECT cost_nano_usd FROM agentkit_cost_daily WHERE agent = $1 AND day = $2",
            &[&agent, &day],
        )
        .await
        .map_err(Error::query("read the day's cost"))?
        .map_or(0, |r| r.get(0)))
}

/// Adds a turn's cost (billionths of a US dollar) to `day`'s.
pub async fn add_day_cost(db: &Database, agent: &str, day: &str, nano_usd: i64) -> Result<()> {
    let client = db.client().await?;
    client
        .execute(
            "INSERT INTO agentkit_cost_daily (agent, day, cost_nano_usd) VALUES ($1, $2, $3)
             ON CONFLICT (agent, day) DO UPDATE SET
                 cost_nano_usd = agentkit_cost_daily.cost_nano_usd + EXCLUDED.cost_nano_usd",
            &[&agent, &day, &nano_usd],
        )
        .await
        .map_err(Error::query("add to the day's cost"))?;
    Ok(())
}

/// `(input, output)` tokens `agent`'s turns used on `day` (`YYYY-MM-DD`,
/// UTC), on every host.
pub async fn day_usage(db: &Database, agent: &str, day: &str) -> Result<(i64, i64)> {
    let client = db.client().await?;
    Ok(client
        .query_opt(
            "SELECT input_tokens, output_tokens FROM agentkit_usage_daily WHERE agent = $1 AND day = $2",
            &[&agent, &day],
        )
        .await
        .map_err(Error::query("read the day's usage"))?
        .map_or((0, 0), |r| (r.get(0), r.get(1))))
}

/// Adds a turn's tokens to `day`'s.
pub async fn add_day_usage(
    db: &Database,
    agent: &str,
    day: &str,
    input: i64,
    output: i64,
) -> Result<()> {
    let client = db.client().await?;
    client
        .execute(
            "INSERT INTO agentkit_usage_daily (agent, day, input_tokens, output_tokens) VALUES ($1, $2, $3, $4)
             ON CONFLICT (agent, day) DO UPDATE SET
                 input_tokens = agentkit_usage_daily.input_tokens + EXCLUDED.input_tokens,
                 output_tokens = agentkit_usage_daily.output_tokens + EXCLUDED.output_tokens",
            &[&agent, &day, &input, &output],
        )
        .await
        .map_err(Error::query("add to the day's usage"))?;
    Ok(())
}
