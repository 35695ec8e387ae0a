//! `agentkit validate`: output, JSON document and exit codes.

use std::fs;

use expect_test::expect;

use super::{agentkit, agentkit_with, fixtures};

#[test]
fn bundled_agents_validate_clean() {
    let run = agentkit(&fixtures(), &["validate", "--dir", "agents"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    expect![[r#"
        ok: 2 agents, no diagnostics
    "#]]
    .assert_eq(&run.stdout);
}

/// The bundled example projects (the folder of them, and the weather
/// agent alone; the concierge needs its peer beside it) validate with no
/// diagnostic at all in an environment without `ALERTS_TOKEN`: its
/// bearer token is optional (`${ALERTS_TOKEN:-}`). Running a turn warns
/// about nothing either.
#[test]
fn bundled_agents_validate_and_run_without_warnings() {
    let agents = fixtures().join("agents");
    for dir in [
        agents.clone(),
        agents.join("weather-agent"),
        fixtures().join("triage"),
    ] {
        let run = agentkit_with(
            &fixtures(),
            &["validate", "--dir", dir.to_str().unwrap()],
            |c| {
                c.env_remove("ALERTS_TOKEN")
                    .env_remove("GRAFANA_TOKEN")
                    .env_remove("ONCALL_TOKEN");
            },
        );
        assert_eq!(
            run.code,
            0,
            "{}: {}{}",
            dir.display(),
            run.stdout,
            run.stderr
        );
        assert!(
            run.stdout.contains("no diagnostics") && !run.stdout.contains("warning"),
            "{}: {}",
            dir.display(),
            run.stdout
        );
        assert_eq!(run.stderr, "", "{}", dir.display());
    }

    let run = agentkit_with(
        &fixtures(),
        &[
            "run",
            "--dir",
            "agents",
            "--agent",
            "weather-agent",
            "--approvals",
            "approve",
            "--message",
            "What's the weather in NYC?",
        ],
        |c| {
            c.env_remove("ALERTS_TOKEN");
        },
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        !run.stderr.to_lowercase().contains("warn"),
        "{}",
        run.stderr
    );
}

/// A copy of the weather agent whose alerts token is a plain
/// `${ALERTS_TOKEN}`, which `validate` warns about while it is unset.
fn weather_agent_with_plain_reference() -> tempfile::TempDir {
    fn copy(from: &std::path::Path, to: &std::path::Path) {
        fs::create_dir_all(to).unwrap();
        for entry in fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy(&entry.path(), &target);
            } else {
                fs::copy(entry.path(), target).unwrap();
            }
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("weather-agent");
    copy(
        &fixtures().join("agents/weather-agent/agent"),
        &project.join("agent"),
    );
    let alerts = project.join("agent/channels/alerts.toml");
    let text = fs::read_to_string(&alerts).unwrap();
    assert!(text.contains("${ALERTS_TOKEN:-}"), "{text}");
    fs::write(
        &alerts,
        text.replace("${ALERTS_TOKEN:-}", "${ALERTS_TOKEN}"),
    )
    .unwrap();
    tmp
}

#[test]
fn unset_env_references_are_warnings_not_errors() {
    let tmp = weather_agent_with_plain_reference();
    let run = agentkit_with(
        tmp.path(),
        &["validate", "--dir", "weather-agent", "--json"],
        |c| {
            c.env_remove("ALERTS_TOKEN");
        },
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["ok"], true);
    assert_eq!(doc["errors"], 0);
    let codes: Vec<&str> = doc["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["env-unset"]);
    assert!(
        doc["diagnostics"][0]["message"]
            .as_str()
            .unwrap()
            .contains("${ALERTS_TOKEN}")
    );
}

/// An empty variable counts as unset, as it does when serving; a set one
/// is not reported.
#[test]
fn empty_env_references_warn_like_unset_ones() {
    let tmp = weather_agent_with_plain_reference();
    let codes = |value: &str| {
        let run = agentkit_with(
            tmp.path(),
            &["validate", "--dir", "weather-agent", "--json"],
            |c| {
                c.env("ALERTS_TOKEN", value);
            },
        );
        assert_eq!(run.code, 0, "{}", run.stderr);
        let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        doc["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["code"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(codes(""), ["env-unset"]);
    assert_eq!(codes("t0ken"), Vec::<String>::new());
}

/// A project with several problems in several files: every one is
/// reported, grouped by file, and the exit code is 1.
fn broken_project() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let agent = tmp.path().join("broken").join("agent");
    fs::create_dir_all(agent.join("tools")).unwrap();
    fs::create_dir_all(agent.join("schedules")).unwrap();
    fs::create_dir_all(agent.join("tool")).unwrap();
    fs::write(agent.join("agent.toml"), "model = \"gpt-4.1\"\n").unwrap();
    fs::write(
        agent.join("tools/get_weather.toml"),
        "description = \"Weather\"\ncommand = [\"python3\", \"w.py\"]\nneeds_aproval = true\n",
    )
    .unwrap();
    fs::write(
        agent.join("schedules/nightly.md"),
        "---\ncron: \"0 25 * * *\"\n---\nSummarise the day.\n",
    )
    .unwrap();
    tmp
}

#[test]
fn broken_project_text_output_groups_by_file_with_hints() {
    let tmp = broken_project();
    let run = agentkit(tmp.path(), &["validate", "--dir", "broken"]);
    assert_eq!(run.code, 1);
    expect![[r#"
        agent
          error[missing-instructions] the agent has no instructions
            hint: create `agent/instructions.md` with the always-on system prompt

        agent/agent.toml
          1:1: error[invalid-model] model `gpt-4.1` names no provider
            hint: write `provider:model`, e.g. "openai:gpt-4.1" or "anthropic:gpt-4.1"

        agent/schedules/nightly.md
          2:1: error[invalid-cron] `0 25 * * *`: hour value 25 is out of range 0–23
            hint: standard 5-field cron in UTC, e.g. "*/30 * * * *"

        agent/tool
          warning[unknown-entry] unknown folder `tool`; agentkit does not discover it
            hint: did you mean `tools`?

        agent/tools/get_weather.toml
          3:1: error[unknown-field] unknown field `needs_aproval`
            hint: did you mean `needs_approval`?

        invalid: 1 agent, 4 errors, 1 warning
    "#]]
    .assert_eq(&run.stdout);
}

#[test]
fn broken_project_json_document() {
    let tmp = broken_project();
    let run = agentkit(tmp.path(), &["validate", "--dir", "broken", "--json"]);
    assert_eq!(run.code, 1);
    expect_test::expect_file!["snapshots/validate-broken.json"].assert_eq(&run.stdout);
}

#[test]
fn usage_errors_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let run = agentkit(tmp.path(), &["validate", "--dir", "does-not-exist"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("does-not-exist` does not exist"),
        "{}",
        run.stderr
    );
    assert_eq!(
        agentkit(tmp.path(), &["validate", "--no-such-flag"]).code,
        2
    );
    assert_eq!(agentkit(tmp.path(), &["frobnicate"]).code, 2);
    // An empty folder is not a usage error: it is a project with no agents.
    let run = agentkit(tmp.path(), &["validate", "--dir", "."]);
    assert_eq!(run.code, 1);
    assert!(run.stdout.contains("error[no-agents]"), "{}", run.stdout);
}

/// Pack settings are checked by `validate` with the packs' own parsers:
/// every problem has its file, line and a hint, and errors fail the run.
#[test]
fn pack_settings_are_reported_with_file_line_and_hint() {
    let run = agentkit_with(
        &fixtures(),
        &["validate", "--dir", "channels/broken-packs", "--json"],
        |c| {
            c.env("GITHUB_WEBHOOK_SECRET", "s")
                .env("GITHUB_TOKEN", "t")
                .env("BITBUCKET_WEBHOOK_SECRET", "s");
        },
    );
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["ok"], false);
    let found: Vec<(String, String, String, u64, bool)> = doc["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["path"].as_str().unwrap().to_owned(),
                d["severity"].as_str().unwrap().to_owned(),
                d["code"].as_str().unwrap().to_owned(),
                d["line"].as_u64().unwrap(),
                d["hint"].as_str().is_some_and(|h| !h.is_empty()),
            )
        })
        .collect();
    let row = |path: &str, severity: &str, code: &str, line: u64| {
        (
            format!("agent/channels/{path}"),
            severity.to_owned(),
            code.to_owned(),
            line,
            true,
        )
    };
    assert_eq!(
        found,
        [
            row("bitbucket.toml", "error", "unknown-field", 8),
            row("github.toml", "error", "unknown-field", 3),
            row("github.toml", "warning", "unknown-event", 6),
            row("github.toml", "error", "invalid-template", 13),
            row("gitlab.toml", "warning", "missing-field", 1),
            row("gitlab.toml", "error", "conflicting-fields", 3),
        ]
    );
    let messages: Vec<&str> = doc["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["message"].as_str().unwrap())
        .collect();
    assert!(messages[0].contains("`mesage`"), "{messages:?}");
    assert!(messages[1].contains("`tokn`"), "{messages:?}");
    assert_eq!(
        doc["diagnostics"][2]["hint"],
        "did you mean `pull_request`?"
    );
    assert!(
        messages[3].starts_with("rules[1].turn.continuation"),
        "{messages:?}"
    );

    // The bundled pack channels are clean.
    let run = agentkit_with(
        &fixtures(),
        &["validate", "--dir", "channels/pr-reviewer", "--json"],
        |c| {
            c.env("GITHUB_WEBHOOK_SECRET", "s")
                .env("GITHUB_API_URL", "http://127.0.0.1:9")
                .env("GITHUB_TOKEN", "t");
        },
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["diagnostics"], serde_json::json!([]));
}

/// Host-only tools (`expose = "host"`) are listed, in text and JSON, so a
/// reader sees what the model is never offered.
#[test]
fn host_only_tools_are_listed() {
    let run = agentkit_with(&fixtures(), &["validate", "--dir", "triage"], |c| {
        c.env("GRAFANA_TOKEN", "g").env("ONCALL_TOKEN", "o");
    });
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    expect![[r#"
        triage: host-only tools (never offered to the model): approve_fix
        ok: 1 agent, no diagnostics
    "#]]
    .assert_eq(&run.stdout);
    let run = agentkit_with(
        &fixtures(),
        &["validate", "--dir", "triage", "--json"],
        |c| {
            c.env("GRAFANA_TOKEN", "g").env("ONCALL_TOKEN", "o");
        },
    );
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(
        doc["hostOnlyTools"],
        serde_json::json!({"triage": ["approve_fix"]})
    );
}
