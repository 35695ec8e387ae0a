//! Who follows an A2A task for its push notifications, across hosts: one
//! row per task naming the host that follows it (renewed while it does)
//! and how far its changes were pushed. A host that registers a webhook
//! claims the task; a host that finds a row whose holder died (expired,
//! or its liveness lock free: a kill -9 included) claims it and pushes on
//! from where the dead one stopped.

use std::time::Duration;

use crate::database::Database;
use crate::error::{Error, Result};

// A new row, this host's own, an expired one, or one whose holder died;
// nothing when another live host follows the task.
const CLAIM: &str = concat!(
    "INSERT INTO agentkit_a2a_push_follows (agent, task_id, holder, expires_at)
VALUES ($1, $2, $3, now() + make_interval(secs => $4))
ON CONFLICT (agent, task_id) DO UPDATE SET
    holder = EXCLUDED.holder,
    expires_at = EXCLUDED.expires_at
WHERE agentkit_a2a_push_follows.holder = EXCLUDED.holder
   OR agentkit_a2a_push_follows.expires_at < now()
   OR ",
    holder_gone!("agentkit_a2a_push_follows.holder"),
    "
RETURNING pushed_through"
);

const ORPHANED: &str = concat!(
    "SELECT task_id FROM agentkit_a2a_push_follows f
WHERE agent = $1 AND (expires_at < now() OR ",
    holder_gone!("f.holder"),
    ")
ORDER BY expires_at LIMIT $2"
);

fn secs(ttl: Duration) -> f64 {
    ttl.as_secs_f64()
}

/// Claims task `task` of `agent` for `holder` for `ttl`: how far its
/// changes were pushed (0: none yet) when this host follows it now,
/// `None` while another live host does.
pub async fn claim_push_follow(
    db: &Database,
    agent: &str,
    task: &str,
    holder: &str,
    ttl: Duration,
) -> Result<Option<u64>> {
    let client = db.client().await?;
    let row = client
        .query_opt(CLAIM, &[&agent, &task, &holder, &secs(ttl)])
        .await
        .map_err(Error::query("claim an A2A task to push"))?;
    Ok(row.map(|r| u64::try_from(r.get::<_, i64>(0)).unwrap_or(0)))
}

/// Renews `holder`'s claims on `tasks` of `agent` (the ones it follows)
/// for `ttl` more; answers how many it still holds.
pub async fn renew_push_follows(
    db: &Database,
    agent: &str,
    holder: &str,
    tasks: &[String],
    ttl: Duration,
) -> Result<u64> {
    if tasks.is_empty() {
        return Ok(0);
    }
    let client = db.client().await?;
    client
        .execute(
            "UPDATE agentkit_a2a_push_follows SET expires_at = now() + make_interval(secs => $4)
             WHERE agent = $1 AND holder = $2 AND task_id = ANY($3)",
            &[&agent, &holder, &tasks, &secs(ttl)],
        )
        .await
        .map_err(Error::query("renew the A2A tasks this host pushes"))
}

/// Records that `task`'s changes were pushed up to log index `through`
/// (exclusive): false when `holder` no longer follows it (another host
/// took it over).
pub async fn pushed_through(
    db: &Database,
    agent: &str,
    task: &str,
    holder: &str,
    through: u64,
) -> Result<bool> {
    let through = i64::try_from(through).unwrap_or(i64::MAX);
    let client = db.client().await?;
    let n = client
        .execute(
            "UPDATE agentkit_a2a_push_follows SET pushed_through = greatest(pushed_through, $4)
             WHERE agent = $1 AND task_id = $2 AND holder = $3",
            &[&agent, &task, &holder, &through],
        )
        .await
        .map_err(Error::query("record how far an A2A task was pushed"))?;
    Ok(n == 1)
}

/// Up to `limit` tasks of `agent` whose follower died (or stopped
/// renewing its claim).
pub async fn orphaned_push_follows(db: &Database, agent: &str, limit: i64) -> Result<Vec<String>> {
    let client = db.client().await?;
    let rows = client
        .query(ORPHANED, &[&agent, &limit])
        .await
        .map_err(Error::query("look for A2A tasks no host pushes"))?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// `task` needs no follower any more (it ended, or has no webhook).
pub async fn end_push_follow(db: &Database, agent: &str, task: &str, holder: &str) -> Result<()> {
    let client = db.client().await?;
    client
        .execute(
            "DELETE FROM agentkit_a2a_push_follows WHERE agent = $1 AND task_id = $2 AND holder = $3",
            &[&agent, &task, &holder],
        )
        .await
        .map_err(Error::query("end following an A2A task"))?;
    Ok(())
}
