//! The guard that every diagnostic code has a fixture.

use std::collections::BTreeSet;

use agentkit_manifest::Code;

use super::*;

/// Every folder under `fixtures/invalid/` that the tests discover.
pub(crate) const INVALID_AREAS: &[&str] = &[
    "ab",
    "artifacts",
    "channels",
    "config",
    "connections",
    "evals",
    "handlers",
    "hooks",
    "instructions",
    "layout/typescript",
    "layout/unknown",
    "no-agents",
    "schedules",
    "skills",
    "slugs",
    "subagents",
    "tools",
];

#[test]
fn every_area_folder_is_tested() {
    let invalid = fixtures().join("invalid");
    let mut found = BTreeSet::new();
    for e in std::fs::read_dir(&invalid).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if name == "layout" {
            for sub in std::fs::read_dir(e.path()).unwrap() {
                found.insert(format!(
                    "layout/{}",
                    sub.unwrap().file_name().to_string_lossy()
                ));
            }
        } else {
            found.insert(name);
        }
    }
    let listed: BTreeSet<String> = INVALID_AREAS.iter().map(|s| s.to_string()).collect();
    assert_eq!(found, listed);
}

/// Every code but `env-unset` and `env-required` (which `unset_env_refs`
/// makes, tested in `env.rs`) and `sandbox-unreadable` (which the
/// facade's `validate` makes with the harness, tested there) and
/// `secret-unavailable` (the host's, tested in the facade's suite) comes out of at least one fixture: the committed ones under
/// `fixtures/invalid/` and the file-system ones made in `io.rs`.
#[test]
fn every_code_has_a_fixture() {
    let mut seen = BTreeSet::new();
    for area in INVALID_AREAS {
        let d = discover_ok(&fixtures().join("invalid").join(area));
        seen.extend(d.diagnostics.iter().map(|d| d.code));
    }
    let io = super::io::io_fixture();
    seen.extend(discover_ok(io.path()).diagnostics.iter().map(|d| d.code));

    let expected: BTreeSet<Code> = Code::ALL
        .iter()
        .copied()
        .filter(|c| {
            !matches!(
                c,
                Code::EnvUnset
                    | Code::EnvRequired
                    | Code::SandboxUnreadable
                    | Code::SecretUnavailable
            )
        })
        .collect();
    let missing: Vec<&str> = expected.difference(&seen).map(|c| c.as_str()).collect();
    assert!(missing.is_empty(), "codes without a fixture: {missing:?}");
    assert!(
        !seen.contains(&Code::EnvUnset) && !seen.contains(&Code::EnvRequired),
        "discovery never reports env-unset or env-required"
    );
}
