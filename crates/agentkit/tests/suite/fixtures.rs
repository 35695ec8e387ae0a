//! The bundled example agents through the facade: `validate` adds the
//! environment-dependent warnings that discovery alone leaves out.

use std::path::PathBuf;

fn agents() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/agents")
}

#[test]
fn validate_reports_unset_variables_only_when_unset() {
    let found = agentkit::validate(&agents(), |_| true).unwrap();
    assert!(found.diagnostics.is_empty(), "{:?}", found.diagnostics);
    let found = agentkit::validate(&agents(), |_| false).unwrap();
    let codes: Vec<_> = found.diagnostics.iter().map(|d| d.code.as_str()).collect();
    assert!(
        !codes.is_empty() && codes.iter().all(|c| *c == "env-unset"),
        "{codes:?}"
    );
    assert!(found.is_ok(), "unset variables are warnings");
}

#[test]
fn info_json_has_next_fire_times_after_now() {
    use chrono::TimeZone;
    let found = agentkit::discover(&agents()).unwrap();
    let now = chrono::Utc
        .with_ymd_and_hms(2026, 11, 27, 10, 0, 0)
        .unwrap();
    let doc = agentkit::info::info_json(&found, now);
    let schedules = doc
        .pointer("/agents/1/agent/schedules")
        .and_then(|s| s.as_array())
        .unwrap();
    assert!(!schedules.is_empty());
    for s in schedules {
        let next = s["nextFireAt"].as_str().unwrap();
        assert!(next > "2026-11-27T10:00:00Z", "{next}");
    }
}
