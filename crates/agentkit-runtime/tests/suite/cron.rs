//! Our cron semantics (croner via the manifest's `CronSchedule`, which the
//! schedule and reminder timers fire on) against an independent
//! implementation: vectors computed by Python's `croniter`, committed with
//! the script that made them (`fixtures/cron/gen.py`). The script also
//! finds each answer by brute force; the two vectors where croniter 6.0.0
//! itself is wrong (it skips 1 March after a leap-year February for `*/3`
//! day-of-month steps) are flagged there, and we are held to the brute
//! force on those.

use std::collections::BTreeSet;

use agentkit_manifest::CronSchedule;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::Value;

#[test]
fn next_fire_times_match_croniter() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/cron/vectors.json"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let vectors = doc["vectors"].as_array().unwrap();
    let exprs: BTreeSet<&str> = vectors
        .iter()
        .map(|v| v["expr"].as_str().unwrap())
        .collect();
    assert!(exprs.len() >= 50, "only {} expressions", exprs.len());
    let mut mismatches = Vec::new();
    for v in vectors {
        let expr = v["expr"].as_str().unwrap();
        let cron = CronSchedule::parse(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
        let mut at: DateTime<Utc> = v["start"].as_str().unwrap().parse().unwrap();
        let mut ours = Vec::new();
        for _ in v["reference"].as_array().unwrap() {
            at = cron.next_after(at).unwrap();
            ours.push(at.to_rfc3339_opts(SecondsFormat::Secs, true));
        }
        let list = |k: &str| -> Vec<String> {
            v[k].as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap().to_owned())
                .collect()
        };
        let diverges = v["croniterDiverges"] == true;
        assert_eq!(diverges, list("croniter") != list("reference"), "{v}");
        let theirs = if diverges {
            list("reference")
        } else {
            list("croniter")
        };
        if ours != theirs {
            mismatches.push(format!(
                "`{expr}` from {}: ours {ours:?}, croniter {theirs:?}",
                v["start"]
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} vectors differ:\n{}",
        mismatches.len(),
        vectors.len(),
        mismatches.join("\n")
    );
}
