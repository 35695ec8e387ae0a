//! `${VAR}` references: recorded by discovery, reported by
//! `unset_env_refs` against a lookup (never the process environment).

use std::fs;

use agentkit_manifest::{Code, unset_env_refs};
use expect_test::expect;

use super::*;

#[test]
fn unset_env_refs_reports_each_missing_variable_once_per_file() {
    let d = discover_ok(&fixtures().join("agents"));
    let unset = |set: &[&str]| -> String {
        unset_env_refs(&d.host, |name| set.contains(&name))
            .iter()
            .map(|d| format!("{d}\n"))
            .collect()
    };
    // The bundled agents' one reference, `${ALERTS_TOKEN:-}`, has a
    // default (empty): nothing to report, set or not.
    assert_eq!(unset(&[]), "");
    assert_eq!(unset(&["ALERTS_TOKEN"]), "");

    let d = discover_ok(&fixtures().join("invalid/connections"));
    let diags = unset_env_refs(&d.host, |_| false);
    assert!(diags.iter().all(|d| d.code == Code::EnvUnset));
    expect![[r#"
        beta/agent/mcp-connections/linear.toml:1:1: warning[env-unset]: `${TEAM}` is not set in this environment (hint: export TEAM before serving, or the value stays empty; `${TEAM:-default}` gives it a default)
        beta/agent/mcp-connections/linear.toml:2:1: warning[env-unset]: `${LINEAR_TOKEN}` is not set in this environment (hint: export LINEAR_TOKEN before serving, or the value stays empty; `${LINEAR_TOKEN:-default}` gives it a default)
    "#]]
    .assert_eq(&diags.iter().map(|d| format!("{d}\n")).collect::<String>());
}

#[test]
fn env_refs_are_recorded_per_file_and_deduplicated_per_variable() {
    let t = tempfile::tempdir().unwrap();
    let project = t.path().join("demo");
    let agent = project.join("agent");
    fs::create_dir_all(agent.join("mcp-connections")).unwrap();
    fs::write(agent.join("instructions.md"), "Hi.").unwrap();
    fs::write(
        agent.join("mcp-connections/a.toml"),
        "url = \"https://x.example/${HOST_PART}\"\n\nheaders = { A = \"${TOKEN}\", B = \"${TOKEN}\" }\n",
    )
    .unwrap();
    fs::write(
        agent.join("mcp-connections/b.toml"),
        "# ${NOT_A_REF is not closed\nurl = \"https://${TOKEN}.example\"\n",
    )
    .unwrap();
    let d = discover_ok(&project);
    assert_eq!(render(&d), "");
    let refs: Vec<(&str, &str, u32)> = d.host.agents[0]
        .agent
        .env_refs
        .iter()
        .map(|r| (r.name.as_str(), r.path.as_str(), r.line))
        .collect();
    assert_eq!(
        refs,
        [
            ("HOST_PART", "agent/mcp-connections/a.toml", 1),
            ("TOKEN", "agent/mcp-connections/a.toml", 3),
            ("TOKEN", "agent/mcp-connections/a.toml", 3),
            ("TOKEN", "agent/mcp-connections/b.toml", 2),
        ]
    );
    let unset: Vec<String> = unset_env_refs(&d.host, |n| n == "HOST_PART")
        .iter()
        .map(|d| format!("{}:{}", d.path, d.line.unwrap_or(0)))
        .collect();
    assert_eq!(
        unset,
        [
            "agent/mcp-connections/a.toml:3",
            "agent/mcp-connections/b.toml:2"
        ]
    );
}

/// References in one project's files belong to that project, whatever
/// order the projects are read in: eval files are not agent definitions
/// and their `${…}` text is not resolved.
#[test]
fn env_refs_stay_with_their_project() {
    let t = tempfile::tempdir().unwrap();
    for (slug, conn) in [("a", "${A_TOKEN}"), ("b", "${B_TOKEN}")] {
        let agent = t.path().join(slug).join("agent");
        fs::create_dir_all(agent.join("mcp-connections")).unwrap();
        fs::create_dir_all(t.path().join(slug).join("evals")).unwrap();
        fs::write(agent.join("instructions.md"), "Hi.").unwrap();
        fs::write(
            agent.join("mcp-connections/x.toml"),
            format!("url = \"https://x.example\"\nheaders = {{ A = \"{conn}\" }}\n"),
        )
        .unwrap();
        fs::write(
            t.path().join(slug).join("evals/evals.toml"),
            "max_concurrency = 1\n",
        )
        .unwrap();
        fs::write(
            t.path().join(slug).join("evals/e.eval.toml"),
            "send = \"Print ${HOME} literally\"\n",
        )
        .unwrap();
    }
    let d = discover_ok(t.path());
    assert_eq!(render(&d), "");
    let refs: Vec<(&str, Vec<&str>)> = d
        .host
        .agents
        .iter()
        .map(|p| {
            (
                p.slug.as_str(),
                p.agent.env_refs.iter().map(|r| r.name.as_str()).collect(),
            )
        })
        .collect();
    assert_eq!(refs, [("a", vec!["A_TOKEN"]), ("b", vec!["B_TOKEN"])]);
}

/// `${VAR:-default}` never warns; `${VAR:?message}` unset is an error
/// that names the file, the line and the reference's own message.
#[test]
fn defaults_and_requirements_are_recorded_and_reported() {
    let t = tempfile::tempdir().unwrap();
    let agent = t.path().join("demo/agent");
    fs::create_dir_all(agent.join("mcp-connections")).unwrap();
    fs::write(agent.join("instructions.md"), "Hi.").unwrap();
    fs::write(
        agent.join("mcp-connections/a.toml"),
        "url = \"${A_URL:-https://a.example/mcp}\"\n\
         headers = { Authorization = \"Bearer ${A_TOKEN:?create one at https://a.example/settings}\", X = \"${A_TEAM:-}\", Y = \"${PLAIN}\" }\n",
    )
    .unwrap();
    let d = discover_ok(&t.path().join("demo"));
    assert_eq!(render(&d), "");
    let refs: Vec<(&str, Option<&str>, Option<&str>)> = d.host.agents[0]
        .agent
        .env_refs
        .iter()
        .map(|r| (r.name.as_str(), r.default.as_deref(), r.required.as_deref()))
        .collect();
    assert_eq!(
        refs,
        [
            ("A_URL", Some("https://a.example/mcp"), None),
            (
                "A_TOKEN",
                None,
                Some("create one at https://a.example/settings")
            ),
            ("A_TEAM", Some(""), None),
            ("PLAIN", None, None),
        ]
    );
    let report = |set: &[&str]| -> String {
        unset_env_refs(&d.host, |n| set.contains(&n))
            .iter()
            .map(|d| format!("{d}\n"))
            .collect()
    };
    expect![[r#"
        agent/mcp-connections/a.toml:2:1: error[env-required]: `${A_TOKEN:?…}`: `A_TOKEN` must be set: create one at https://a.example/settings (hint: export A_TOKEN before serving; the host does not start without it)
        agent/mcp-connections/a.toml:2:1: warning[env-unset]: `${PLAIN}` is not set in this environment (hint: export PLAIN before serving, or the value stays empty; `${PLAIN:-default}` gives it a default)
    "#]]
    .assert_eq(&report(&[]));
    assert_eq!(report(&["A_TOKEN", "PLAIN"]), "");
}
