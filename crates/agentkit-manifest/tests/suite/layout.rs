//! What discovery takes for a project: the folder itself, or its children.

use std::fs;

use agentkit_manifest::{Error, Layout};

use super::*;

#[test]
fn a_project_folder_is_one_project_named_after_the_folder() {
    let d = discover_ok(&fixtures().join("agents/concierge"));
    assert_eq!(d.host.layout, Layout::Project);
    let p = &d.host.agents[..];
    assert_eq!(p.len(), 1);
    assert_eq!((p[0].slug.as_str(), p[0].path.as_str()), ("concierge", "."));
    assert_eq!(p[0].agent.tools[0].path, "agent/tools/echo.toml");
    // Alone, the concierge's peer is not on the host.
    assert_eq!(
        render(&d),
        "agent/mcp-connections/weather.toml: error[unknown-reference]: connection `weather` names unknown peer agent `weather-agent` (hint: serve the folder that holds both projects, so the peer is on the same host)\n"
    );
}

#[test]
fn a_folder_of_projects_names_each_after_its_folder() {
    let d = discover_ok(&fixtures().join("agents"));
    assert_eq!(d.host.layout, Layout::Folder);
    let p: Vec<(&str, &str)> = d
        .host
        .agents
        .iter()
        .map(|p| (p.slug.as_str(), p.path.as_str()))
        .collect();
    assert_eq!(
        p,
        [
            ("concierge", "concierge"),
            ("weather-agent", "weather-agent")
        ]
    );
    let tool = &d.host.project("concierge").unwrap().agent.tools[0];
    assert_eq!(tool.path, "concierge/agent/tools/echo.toml");
    assert!(tool.cwd.ends_with("concierge/agent/tools"));
}

#[test]
fn children_without_an_agent_folder_are_not_projects() {
    let t = tempfile::tempdir().unwrap();
    fs::create_dir_all(t.path().join("one/agent")).unwrap();
    fs::write(t.path().join("one/agent/instructions.md"), "Hi.").unwrap();
    fs::create_dir_all(t.path().join("docs-folder")).unwrap();
    fs::create_dir_all(t.path().join("file-not-folder")).unwrap();
    fs::write(t.path().join("file-not-folder/agent"), "not a folder").unwrap();
    fs::write(t.path().join("README.md"), "# Agents").unwrap();
    fs::create_dir_all(t.path().join(".hidden/agent")).unwrap();
    let d = discover_ok(t.path());
    assert_eq!(render(&d), "");
    let slugs: Vec<&str> = d.host.agents.iter().map(|p| p.slug.as_str()).collect();
    assert_eq!(slugs, ["one"]);
}

#[test]
fn only_an_unusable_root_is_an_error() {
    let t = tempfile::tempdir().unwrap();
    assert!(matches!(
        discover(&t.path().join("missing")),
        Err(Error::NotFound { .. })
    ));
    fs::write(t.path().join("file"), "x").unwrap();
    assert!(matches!(
        discover(&t.path().join("file")),
        Err(Error::NotADirectory { .. })
    ));
    // An empty folder is a diagnostic, not an error.
    let d = discover_ok(t.path());
    assert!(
        d.diagnostics
            .iter()
            .any(|d| d.code == agentkit_manifest::Code::NoAgents)
    );
    assert!(!d.is_ok());
}

/// A `scripted:` model's file (or the folder holding it), named by
/// agent.toml, an experiment's variant or an eval's judge, is used: no
/// `unknown-entry` warning. A file nothing names still gets one.
#[test]
fn scripted_model_files_are_not_unknown_entries() {
    let t = tempfile::tempdir().unwrap();
    let agent = t.path().join("bot/agent");
    write(
        &agent.join("agent.toml"),
        "model = \"scripted:./script.json\"\n",
    );
    write(&agent.join("instructions.md"), "Hi.");
    write(&agent.join("script.json"), r#"{"turns": []}"#);
    write(
        &agent.join("ab.toml"),
        "[[variants]]\nid = \"control\"\n[[variants]]\nid = \"other\"\nmodel = \"scripted:scripts/other.json\"\n",
    );
    write(&agent.join("scripts/other.json"), r#"{"turns": []}"#);
    write(&agent.join("stray.json"), "{}");
    // An eval judge's script, relative to `agent/` as well.
    write(&agent.join("judge.json"), r#"{"turns": []}"#);
    write(
        &t.path().join("bot/evals/evals.toml"),
        "max_concurrency = 1\n",
    );
    write(
        &t.path().join("bot/evals/polite.eval.toml"),
        "send = \"hi\"\nexpect = { reply = { judge = \"is polite\", model = \"scripted:judge.json\" } }\n",
    );
    let d = discover_ok(&t.path().join("bot"));
    assert_eq!(
        render(&d),
        "agent/stray.json: warning[unknown-entry]: unknown file `stray.json`; agentkit does not discover it (hint: known here: agent.toml, instructions.md, instructions, tools, skills, mcp-connections, subagents, channels, hooks, schedules, ab.toml, ab, artifacts.toml, sandbox, lib; put shared files in `lib/`)\n"
    );
}
