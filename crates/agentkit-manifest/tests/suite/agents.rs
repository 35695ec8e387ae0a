//! The bundled example projects under `fixtures/agents/`.

use std::io::Write;
use std::process::{Command, Stdio};

use agentkit_manifest::{Approval, Execution, Layout, ScheduleAction, Transport};
use expect_test::expect_file;

use super::*;

#[test]
fn bundled_agents_discover_without_diagnostics() {
    let d = discover_ok(&fixtures().join("agents"));
    assert_eq!(render(&d), "");
    assert_eq!(d.host.layout, Layout::Folder);
    let slugs: Vec<&str> = d.host.agents.iter().map(|p| p.slug.as_str()).collect();
    assert_eq!(slugs, ["concierge", "weather-agent"]);

    let weather = &d.host.project("weather-agent").unwrap().agent;
    let tools: Vec<(&str, Execution)> = weather
        .tools
        .iter()
        .map(|t| (t.name.as_str(), t.execution))
        .collect();
    assert_eq!(
        tools,
        [
            ("convert_units", Execution::Server),
            ("forecast_note", Execution::Agent),
            ("get_weather", Execution::Server),
            ("post_alert", Execution::Server),
        ]
    );
    assert_eq!(
        weather.tool("post_alert").unwrap().needs_approval,
        Approval::Always
    );
    assert!(weather.tool("get_weather").unwrap().annotations.read_only);
    assert!(
        weather
            .tool("forecast_note")
            .unwrap()
            .script
            .as_deref()
            .unwrap()
            .contains("notes/forecasts.md")
    );
    assert!(matches!(
        &weather.schedules[1].action,
        ScheduleAction::Tool { name, .. } if name == "get_weather"
    ));
    let env: Vec<(&str, &str, u32)> = weather
        .env_refs
        .iter()
        .map(|r| (r.name.as_str(), r.path.as_str(), r.line))
        .collect();
    assert_eq!(
        env,
        [(
            "ALERTS_TOKEN",
            "weather-agent/agent/channels/alerts.toml",
            4
        )]
    );

    let concierge = &d.host.project("concierge").unwrap().agent;
    assert_eq!(
        concierge.mcp_connections[0].transport,
        Transport::Peer {
            agent: "weather-agent".into()
        }
    );
}

/// `agentkit info --json fixtures/agents/weather-agent`: the project
/// discovered on its own, as the host serializes it.
#[test]
fn weather_agent_info_json() {
    let d = discover_ok(&fixtures().join("agents/weather-agent"));
    assert_eq!(render(&d), "");
    let json = serde_json::to_string_pretty(&d.host).unwrap();
    // Stable across machines: no absolute file system path in it.
    let root = d.host.root.to_string_lossy().into_owned();
    assert!(!json.contains(&root), "{json}");
    assert!(!json.contains(env!("CARGO_MANIFEST_DIR")), "{json}");
    // Bearer tokens are redacted unless they are `${VAR}` references.
    assert!(json.contains("${ALERTS_TOKEN:-}"), "{json}");
    expect_file!["snapshots/weather-agent.json"].assert_eq(&format!("{json}\n"));
}

/// Runs a bundled tool program the way a server tool runs: JSON on stdin,
/// JSON on stdout.
fn run_tool(script: &str, input: &str) -> serde_json::Value {
    let path = fixtures().join("agents").join(script);
    let mut child = Command::new("python3")
        .arg(&path)
        .current_dir(path.parent().unwrap())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn bundled_tool_programs_run() {
    let nyc = run_tool(
        "weather-agent/agent/tools/get_weather.py",
        r#"{"city":"NYC"}"#,
    );
    assert_eq!(
        nyc,
        serde_json::json!({"city": "NYC", "condition": "partly cloudy", "temperatureF": 74})
    );
    // Deterministic: the same city, the same answer.
    assert_eq!(
        run_tool(
            "weather-agent/agent/tools/get_weather.py",
            r#"{"city":"NYC"}"#
        ),
        nyc
    );
    assert_eq!(
        run_tool(
            "weather-agent/agent/tools/convert_units.py",
            r#"{"value":212,"from":"F","to":"C"}"#
        ),
        serde_json::json!({"value": 100.0, "unit": "C"})
    );
    assert_eq!(
        run_tool(
            "weather-agent/agent/tools/post_alert.py",
            r#"{"city":"NYC","message":"Storm tonight"}"#
        )["posted"],
        true
    );
    assert_eq!(
        run_tool("concierge/agent/tools/echo.py", r#"{"text":"hello"}"#),
        serde_json::json!({"text": "hello"})
    );
}

/// The audit hook's program appends one line per event to `audit.log` in
/// the state folder it is given (through the child's environment only).
#[test]
fn audit_hook_appends_to_the_state_folder() {
    let state = tempfile::tempdir().unwrap();
    let script = fixtures().join("agents/weather-agent/agent/lib/audit.py");
    for event in [
        r#"{"type":"turn.completed","sessionId":"s1","at":"2026-11-27T10:00:00Z"}"#,
        r#"{"type":"turn.failed","sessionId":"s1","at":"2026-11-27T10:01:00Z"}"#,
    ] {
        let mut child = Command::new("python3")
            .arg(&script)
            .env("AGENTKIT_STATE_DIR", state.path())
            .stdin(Stdio::piped())
            .spawn()
            .expect("python3 runs");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(event.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success());
    }
    let log = std::fs::read_to_string(state.path().join("audit.log")).unwrap();
    assert_eq!(
        log,
        "{\"type\": \"turn.completed\", \"sessionId\": \"s1\", \"at\": \"2026-11-27T10:00:00Z\"}\n\
         {\"type\": \"turn.failed\", \"sessionId\": \"s1\", \"at\": \"2026-11-27T10:01:00Z\"}\n"
    );
}

/// The agent tool's inline script, as discovery read it, runs in a
/// workspace and writes its note there.
#[test]
fn agent_tool_script_runs_in_a_workspace() {
    let d = discover_ok(&fixtures().join("agents/weather-agent"));
    let tool = d.host.agents[0].agent.tool("forecast_note").unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("forecast_note"),
        tool.script.as_deref().unwrap(),
    )
    .unwrap();
    let out = Command::new("sh")
        .args(["forecast_note", "NYC", "sunny,", "74°F"])
        .current_dir(ws.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "saved a note for NYC in notes/forecasts.md\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes/forecasts.md")).unwrap(),
        "- NYC: sunny, 74°F\n"
    );
}

/// `[worker] scope` of a tool file: `"session"` gives one worker per session, the default one per agent.
#[test]
fn a_worker_scope_is_read_from_the_tool_file() {
    use agentkit_manifest::WorkerScope;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("bot");
    write(&root.join("agent/agent.toml"), "model = \"test\"\n");
    write(&root.join("agent/instructions.md"), "Test.\n");
    for (name, table) in [
        ("per_session", "[worker]\nscope = \"session\"\n"),
        ("per_agent", "worker = true\n"),
    ] {
        write(
            &root.join(format!("agent/tools/{name}.py")),
            "print('{}')\n",
        );
        write(
            &root.join(format!("agent/tools/{name}.toml")),
            format!("description = \"d\"\ncommand = [\"python3\", \"{name}.py\"]\n{table}"),
        );
    }
    let d = discover_ok(&root);
    assert_eq!(render(&d), "");
    let tools = &d.host.agents[0].agent.tools;
    let scope = |name: &str| {
        tools
            .iter()
            .find(|t| t.name == name)
            .and_then(|t| t.worker)
            .map(|w| w.scope)
    };
    assert_eq!(scope("per_session"), Some(WorkerScope::Session));
    assert_eq!(scope("per_agent"), Some(WorkerScope::Agent));
}
