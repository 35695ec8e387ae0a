//! `agentkit info`: the discovered surface as a JSON document, with what
//! discovery alone cannot say (each schedule's next fire time).

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

use agentkit_manifest::{CronSchedule, Discovery};

/// The `info --json` document: the host, each schedule's `nextFireAt`
/// (ISO-8601 UTC, after `now`), and the diagnostics.
pub fn info_json(found: &Discovery, now: DateTime<Utc>) -> Value {
    let mut host = serde_json::to_value(&found.host).unwrap_or(Value::Null);
    if let Some(agents) = host.get_mut("agents").and_then(Value::as_array_mut) {
        for (project, value) in found.host.agents.iter().zip(agents) {
            let Some(schedules) = value
                .pointer_mut("/agent/schedules")
                .and_then(Value::as_array_mut)
            else {
                continue;
            };
            for (schedule, v) in project.agent.schedules.iter().zip(schedules) {
                let next = next_fire(&schedule.cron, now);
                if let Some(obj) = v.as_object_mut() {
                    obj.insert(
                        "nextFireAt".to_owned(),
                        next.map_or(Value::Null, Value::String),
                    );
                }
            }
        }
    }
    if let Some(obj) = host.as_object_mut() {
        obj.insert(
            "diagnostics".to_owned(),
            json!({
                "errors": found.diagnostics.error_count(),
                "warnings": found.diagnostics.warning_count(),
                "items": found.diagnostics,
            }),
        );
    }
    host
}

/// The next fire time of a cron expression after `now`, as ISO-8601 UTC.
pub fn next_fire(cron: &str, now: DateTime<Utc>) -> Option<String> {
    CronSchedule::parse(cron)
        .ok()?
        .next_after(now)
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
}
