//! What turns cost, kept where the money budgets and the session list
//! read it: the agent's day (`max_cost_usd_per_day`, every host's turns
//! on a shared database) and the session's running total in its index
//! row (`costUsd` of the sessions list), updated as each turn ends so no
//! listing reads a log.

use std::sync::Arc;

use agentkit_harness::TurnOutcome;
use agentkit_harness::pricing::{add_cost, round};
use agentkit_manifest::Agent;

use crate::error::Result;
use crate::fold;
use crate::runtime::AgentRuntime;
use crate::session::Session;

/// What the agent's turns cost on `day` (`YYYY-MM-DD`, UTC), read only
/// while `agent` has a daily money budget (0 otherwise).
pub(crate) async fn day_cost(rt: &AgentRuntime, agent: &Agent, day: &str) -> Result<f64> {
    if agent.config.harness.max_cost_usd_per_day.is_none() {
        return Ok(0.0);
    }
    let nano = rt.inner.ticks.day_cost(day).await?;
    Ok(nano as f64 / 1e9)
}

/// Counts an ended turn's cost: in the day's (while a daily money budget
/// is set) and in the session's total. Called before the turn's end is
/// appended; a failed write is logged, never the turn's failure. Every
/// ended turn writes the session's index row (its last activity).
pub(crate) async fn turn_ended(rt: &AgentRuntime, session: &Arc<Session>, outcome: &TurnOutcome) {
    let (usage, cost) = match outcome {
        TurnOutcome::Completed {
            usage, cost_usd, ..
        }
        | TurnOutcome::OverBudget {
            usage, cost_usd, ..
        } => (*usage, *cost_usd),
        // The row is written all the same: its last activity moves.
        TurnOutcome::Failed { .. } | TurnOutcome::Interrupted => {
            rt.sessions().index_touch(&session.meta());
            return;
        }
    };
    if rt.inner.agent.config.harness.max_cost_usd_per_day.is_some()
        && let Some(c) = cost
        && c > 0.0
    {
        let day = chrono::Utc::now().format("%Y-%m-%d").to_string();
        let nano = (c * 1e9).round() as i64;
        if let Err(e) = rt.inner.ticks.add_day_cost(&day, nano).await {
            tracing::warn!(session = %session.id, error = %e, "cannot count the turn's cost in the day's");
        }
    }
    // The session's total: its stored one plus this turn's, or, the first
    // time (a session from before costs were kept, a fork), its ended
    // turns' folded once.
    let (stored, unknown) = {
        let meta = session.meta();
        (meta.cost_usd, meta.cost_unknown)
    };
    if unknown {
        rt.sessions().index_touch(&session.meta());
        return;
    }
    let before = match stored {
        Some(total) => Some(total),
        None => match rt.turns().with_history(session, fold::cost).await {
            Ok((known, true)) => Some(known),
            Ok((_, false)) => None,
            Err(e) => {
                tracing::warn!(session = %session.id, error = %e, "cannot total the session's cost");
                rt.sessions().index_touch(&session.meta());
                return;
            }
        },
    };
    let this = match cost {
        Some(c) => Some(c),
        None if usage == agentkit_protocol::Usage::default() => Some(0.0),
        None => None,
    };
    let total = add_cost(before, this);
    let mut meta = session.meta();
    meta.cost_usd = total.map(round);
    meta.cost_unknown = total.is_none();
    rt.sessions().index_touch(&meta);
}
