//! Built-in workspace tools driven by a scripted model: they work inside
//! the workspace, and every way out of it is refused.

use serde_json::{Value, json};

use super::{TestProject, results as outputs, run, scripted};

/// One step per call, so results come back in order.
fn script(calls: &[(&str, Value)]) -> String {
    let mut steps: Vec<Value> = calls
        .iter()
        .map(|(name, input)| json!({"toolCalls": [{"name": name, "input": input}]}))
        .collect();
    steps.push(json!({"text": "done"}));
    json!({"turns": [{"steps": steps}]}).to_string()
}

#[tokio::test]
async fn write_read_edit_list_grep_and_shell_in_the_workspace() {
    let s = script(&[
        (
            "write",
            json!({"path": "notes/a.txt", "content": "alpha\nbeta\n"}),
        ),
        (
            "edit",
            json!({"path": "notes/a.txt", "old": "beta", "new": "gamma"}),
        ),
        ("read", json!({"path": "notes/a.txt"})),
        ("list", json!({"path": "notes"})),
        ("grep", json!({"pattern": "^gam"})),
        ("shell", json!({"command": "cat notes/a.txt | wc -l"})),
        (
            "edit",
            json!({"path": "notes/a.txt", "old": "missing", "new": "x"}),
        ),
        ("shell", json!({"command": "echo oops >&2; exit 3"})),
    ]);
    let project = TestProject::new(&[
        ("s.json", &s),
        ("agent.toml", "[harness]\nmax_steps = 20\n"),
    ]);
    let (outcome, events) = run(project.input(scripted("s.json"), "go")).await;
    assert!(
        matches!(outcome, agentkit_harness::TurnOutcome::Completed { .. }),
        "{outcome:?}"
    );
    let out = outputs(&events);
    assert_eq!(
        out[0],
        (
            "write".into(),
            json!({"path": "notes/a.txt", "bytes": 11}),
            false
        )
    );
    assert!(!out[1].2, "{:?}", out[1]);
    assert_eq!(out[2], ("read".into(), json!("alpha\ngamma\n"), false));
    assert_eq!(out[3].1[0]["name"], "a.txt");
    assert_eq!(out[4].1, json!("notes/a.txt:2: gamma"));
    assert_eq!(
        out[5].1,
        json!(2),
        "wc -l printed 2, which parses as JSON: {:?}",
        out[5]
    );
    assert!(
        out[6].2 && out[6].1.as_str().unwrap().contains("does not occur"),
        "{:?}",
        out[6]
    );
    assert!(
        out[7].2 && out[7].1.to_string().contains("oops"),
        "{:?}",
        out[7]
    );
    assert_eq!(
        std::fs::read_to_string(project.dir.path().join("notes/a.txt")).unwrap(),
        "alpha\ngamma\n"
    );
}

#[tokio::test]
async fn escapes_are_refused_and_nothing_is_written_outside() {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("pwned.txt");
    let s = script(&[
        ("write", json!({"path": "../pwned.txt", "content": "x"})),
        (
            "write",
            json!({"path": target.display().to_string(), "content": "x"}),
        ),
        ("read", json!({"path": "/etc/hostname"})),
        ("write", json!({"path": "link/pwned.txt", "content": "x"})),
        ("list", json!({"path": "link"})),
        ("read", json!({"path": "nope", "extra": 1})),
    ]);
    let project = TestProject::new(&[
        ("s.json", &s),
        ("agent.toml", "[harness]\nmax_steps = 20\n"),
    ]);
    std::os::unix::fs::symlink(outside.path(), project.dir.path().join("link")).unwrap();
    let (_, events) = run(project.input(scripted("s.json"), "go")).await;
    let out = outputs(&events);
    assert_eq!(out.len(), 6);
    for (name, output, is_error) in &out {
        assert!(is_error, "{name} was allowed: {output}");
    }
    assert!(
        out[5].1.as_str().unwrap().contains("invalid input"),
        "schema-checked: {:?}",
        out[5]
    );
    assert!(!target.exists());
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
}

#[tokio::test]
async fn only_enabled_builtins_are_callable() {
    let s = script(&[
        ("shell", json!({"command": "echo hi"})),
        ("read", json!({"path": "hello.txt"})),
    ]);
    let project = TestProject::new(&[
        ("s.json", &s),
        ("agent.toml", "[harness]\nbuiltin_tools = [\"read\"]\n"),
    ]);
    std::fs::write(project.dir.path().join("hello.txt"), "hi").unwrap();
    let (_, events) = run(project.input(scripted("s.json"), "go")).await;
    let out = outputs(&events);
    assert_eq!(
        out[0],
        ("shell".into(), json!("unknown tool `shell`"), true)
    );
    assert!(!out[1].2, "{:?}", out[1]);
}

#[tokio::test]
async fn load_skill_returns_the_procedure_when_the_agent_has_skills() {
    let s = script(&[
        ("load_skill", json!({"name": "greet"})),
        ("load_skill", json!({"name": "nope"})),
    ]);
    let project = TestProject::new(&[
        ("s.json", &s),
        ("agent.toml", "[harness]\nbuiltin_tools = []\n"),
        (
            "skills/greet.md",
            "---\ndescription: Use when greeting someone.\n---\n\nSay hello warmly.\n",
        ),
    ]);
    let (_, events) = run(project.input(scripted("s.json"), "go")).await;
    let out = outputs(&events);
    assert_eq!(out[0].1["content"], "Say hello warmly.");
    assert_eq!(out[0].1["path"], ".agentkit/skills/greet/SKILL.md");
    assert!(
        out[1].2,
        "an unknown skill is refused by the schema's enum: {:?}",
        out[1]
    );
}

#[tokio::test]
async fn task_delegates_to_a_subagent_and_counts_its_usage() {
    let parent = json!({"turns": [{"steps": [
        {"toolCalls": [{"name": "task", "input": {"subagent": "researcher", "prompt": "Find the record high in NYC"}}]},
        {"text": "The researcher says so.", "usage": {"inputTokens": 10, "outputTokens": 5}}
    ]}]});
    let child = json!({"turns": [{"steps": [
        {"text": "106°F in 1936.", "usage": {"inputTokens": 100, "outputTokens": 50}}
    ]}]});
    let project = TestProject::new(&[
        ("s.json", &parent.to_string()),
        ("agent.toml", "[harness]\nbuiltin_tools = []\n"),
        (
            "subagents/researcher/agent.toml",
            "description = \"Background research\"\nmodel = \"scripted:sub.json\"\n",
        ),
        ("subagents/researcher/instructions.md", "You research.\n"),
        ("subagents/researcher/sub.json", &child.to_string()),
    ]);
    let (outcome, events) = run(project.input(scripted("s.json"), "go")).await;
    let agentkit_harness::TurnOutcome::Completed { result, usage, .. } = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(result, "The researcher says so.");
    let out = outputs(&events);
    assert_eq!(out[0], ("task".into(), json!("106°F in 1936."), false));
    let called: Vec<_> = events
        .iter()
        .filter(|e| e.event_type().as_str().starts_with("subagent."))
        .map(|e| (e.event_type().as_str(), e.payload().to_value()))
        .collect();
    // Called, its one model step, completed.
    let types: Vec<&str> = called.iter().map(|(t, _)| *t).collect();
    assert_eq!(
        types,
        ["subagent.called", "subagent.step", "subagent.completed"]
    );
    assert_eq!(called[0].1["subagent"], "researcher");
    let step = &called[1].1;
    assert_eq!(
        (
            &step["step"],
            &step["provider"],
            &step["model"],
            &step["finishReason"]
        ),
        (
            &json!(1),
            &json!("scripted"),
            &json!("sub.json"),
            &json!("stop")
        )
    );
    assert_eq!(step["usage"]["outputTokens"], 50);
    assert_eq!(called[2].1["result"], "106°F in 1936.");
    assert_eq!(called[2].1["usage"]["outputTokens"], 50);
    // The child's tokens are part of the turn's usage.
    assert!(
        usage.input_tokens >= 110 && usage.output_tokens >= 55,
        "{usage:?}"
    );
}

#[tokio::test]
async fn dry_run_stubs_every_tool_that_is_not_read_only() {
    let s = script(&[
        ("write", json!({"path": "out.txt", "content": "x"})),
        ("shell", json!({"command": "touch touched"})),
        ("list", json!({})),
        ("marker", json!({})),
    ]);
    let project = TestProject::new(&[
        ("s.json", &s),
        ("agent.toml", "[harness]\nmax_steps = 20\n"),
        (
            "tools/marker.toml",
            "description = \"Writes a marker\"\ncommand = [\"sh\", \"-c\", \"touch \\\"$AGENTKIT_WORKSPACE_DIR/marked\\\"\"]\n",
        ),
    ]);
    let mut input = project.input(scripted("s.json"), "go");
    input.dry_run = true;
    let (_, events) = run(input).await;
    let out = outputs(&events);
    for i in [0, 1, 3] {
        assert_eq!(out[i].1["dryRun"], true, "{:?}", out[i]);
        assert!(!out[i].2);
    }
    assert!(
        out[2].1.is_array(),
        "read-only built-ins still run: {:?}",
        out[2]
    );
    for file in ["out.txt", "touched", "marked"] {
        assert!(
            !project.dir.path().join(file).exists(),
            "{file} was created in a dry run"
        );
    }
}
