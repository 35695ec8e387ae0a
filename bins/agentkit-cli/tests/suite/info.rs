//! `agentkit info`: the discovered surface as text and JSON.

use super::{agentkit, fixtures};

#[test]
fn info_json_describes_every_folder_kind() {
    let run = agentkit(&fixtures(), &["info", "--dir", "agents", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["layout"], "folder");
    let slugs: Vec<&str> = doc["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["slug"].as_str().unwrap())
        .collect();
    assert_eq!(slugs, ["concierge", "weather-agent"]);
    let weather = &doc["agents"][1];
    let agent = &weather["agent"];
    for key in [
        "tools",
        "skills",
        "subagents",
        "channels",
        "hooks",
        "schedules",
        "experiments",
        "sandboxFiles",
    ] {
        assert!(!agent[key].as_array().unwrap().is_empty(), "{key} is empty");
    }
    assert!(
        weather["evals"]["files"]
            .as_array()
            .is_some_and(|f| !f.is_empty())
    );
    // Tool schemas are part of the surface.
    let get_weather = agent["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "get_weather")
        .unwrap();
    assert_eq!(get_weather["inputSchema"]["type"], "object");
    // Every schedule has its next fire time in UTC, in the future.
    let now = chrono::Utc::now();
    for s in agent["schedules"].as_array().unwrap() {
        let next = s["nextFireAt"].as_str().unwrap();
        assert!(next.ends_with('Z'), "{next}");
        let at = chrono::DateTime::parse_from_rfc3339(next).unwrap();
        assert!(at > now, "{next}");
    }
    // Secrets never reach the document; `${VAR}` names may.
    assert!(!run.stdout.contains("test-token"));
    assert_eq!(doc["diagnostics"]["errors"], 0);
    // The peer connection is visible on the concierge.
    assert_eq!(
        doc["agents"][0]["agent"]["mcpConnections"][0]["transport"]["agent"],
        "weather-agent"
    );
}

#[test]
fn info_text_lists_routes_and_schedules() {
    let run = agentkit(&fixtures(), &["info", "--dir", "agents/weather-agent"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for needle in [
        "/weather-agent",
        "get_weather(city)",
        "/weather-agent/v1/channels/alerts/",
        "schedules (",
        "next 20",
    ] {
        assert!(
            run.stdout.contains(needle),
            "missing {needle:?} in:\n{}",
            run.stdout
        );
    }
}

/// `info --url` at a host that serves several agents names them and the
/// flag that picks one.
#[test]
fn info_url_on_a_multi_agent_host_names_the_agent_flag() {
    let tmp = tempfile::tempdir().unwrap();
    let server = super::serve_bundled_agents(tmp.path());
    let url = format!("http://{}", server.addr);
    let run = super::agentkit(tmp.path(), &["info", "--url", &url]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains(
            "serves several agents (concierge, weather-agent); choose one with --agent SLUG"
        ),
        "{}",
        run.stderr
    );
    let run = super::agentkit(
        tmp.path(),
        &["info", "--url", &url, "--agent", "weather-agent"],
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("weather-agent (live)"),
        "{}",
        run.stdout
    );
}
