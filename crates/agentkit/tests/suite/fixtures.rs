//! The bundled example agents through the facade: `validate` adds the
//! environment-dependent warnings that discovery alone leaves out (unset
//! variables, files a tool's sandbox cannot read).

use std::path::PathBuf;

fn agents() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/agents")
}

#[test]
fn validate_reports_unset_variables_only_when_unset() {
    // The bundled agents' secrets are optional (`${ALERTS_TOKEN:-}`): no
    // warning whether they are set or not.
    for set in [true, false] {
        let found = agentkit::validate(&agents(), |_| set).unwrap();
        assert!(found.diagnostics.is_empty(), "{:?}", found.diagnostics);
    }
    // A plain reference warns while unset, and only then.
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("greeter");
    let agent = project.join("agent");
    std::fs::create_dir_all(agent.join("tools")).unwrap();
    std::fs::write(agent.join("instructions.md"), "Greet.\n").unwrap();
    std::fs::write(
        agent.join("tools/greet.toml"),
        "description = \"Greet\"\ncommand = [\"echo\", \"${GREETING}\"]\n\n[input_schema]\ntype = \"object\"\n",
    )
    .unwrap();
    let found = agentkit::validate(&project, |_| true).unwrap();
    assert!(found.diagnostics.is_empty(), "{:?}", found.diagnostics);
    let found = agentkit::validate(&project, |_| false).unwrap();
    let codes: Vec<_> = found.diagnostics.iter().map(|d| d.code.as_str()).collect();
    assert_eq!(codes, ["env-unset"]);
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

#[test]
fn validate_warns_for_a_tool_whose_command_its_sandbox_cannot_read() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let write = |rel: &str, text: &str| {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("opt/app/main.py", "print(1)\n");
    let main = root.join("opt/app/main.py").display().to_string();
    write("proj/agent/instructions.md", "Test.\n");
    write("proj/agent/tools/ok.py", "print(1)\n");
    write(
        "proj/agent/tools/outside.toml",
        &format!(
            "description = \"Runs a script outside the project\"\n\ncommand = [\"python3\", \"{main}\"]\n"
        ),
    );
    write(
        "proj/agent/tools/granted.toml",
        &format!(
            "description = \"The same, granted\"\ncommand = [\"python3\", \"{main}\"]\nsandbox = {{ read = [\"{}\"] }}\n",
            root.join("opt/app").display()
        ),
    );
    write(
        "proj/agent/tools/inside.toml",
        "description = \"Its own folder\"\ncommand = [\"python3\", \"./ok.py\"]\n",
    );
    let found = agentkit::validate(&root.join("proj"), |_| true).unwrap();
    let shown: Vec<String> = found
        .diagnostics
        .iter()
        .filter(|d| d.code.as_str() == "sandbox-unreadable")
        .map(|d| {
            format!(
                "{}:{}: {} (hint: {})",
                d.path,
                d.line.unwrap_or(0),
                d.message,
                d.hint.as_deref().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        shown,
        [format!(
            "agent/tools/outside.toml:3: tool `outside` needs `{main}`, which its sandbox cannot read (hint: add `read = [\"{main}\"]` to the tool's `sandbox` table (or under `[harness.sandbox]` in agent/agent.toml); see docs/reference/sandbox.md)"
        )],
        "{:?}",
        found.diagnostics
    );
    assert!(found.is_ok(), "a warning");
}
