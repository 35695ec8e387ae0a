//! `${VAR:?message}` through the binary: `validate` fails on it and
//! `serve` does not start, both naming the file, line and message.

use super::agentkit_with;

#[test]
fn a_required_variable_fails_validate_and_keeps_serve_from_starting() {
    let t = tempfile::tempdir().unwrap();
    let agent = t.path().join("desk/agent");
    std::fs::create_dir_all(agent.join("mcp-connections")).unwrap();
    std::fs::write(agent.join("instructions.md"), "Desk.\n").unwrap();
    std::fs::write(
        agent.join("mcp-connections/linear.toml"),
        "url = \"${LINEAR_URL:-https://mcp.linear.app/mcp}\"\nheaders = { Authorization = \"Bearer ${LINEAR_TOKEN:?create a key in Linear}\" }\n",
    )
    .unwrap();
    let unset = |c: &mut std::process::Command| {
        c.env_remove("LINEAR_TOKEN").env_remove("LINEAR_URL");
    };
    let r = agentkit_with(t.path(), &["validate", "--dir", "desk"], unset);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(r.stdout.contains("error[env-required]"), "{}", r.stdout);
    assert!(
        r.stdout
            .contains("`LINEAR_TOKEN` must be set: create a key in Linear"),
        "{}",
        r.stdout
    );
    let r = agentkit_with(t.path(), &["serve", "--dir", "desk", "--port", "0"], unset);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("agent/mcp-connections/linear.toml:2:1: error[env-required]"),
        "{}",
        r.stderr
    );
    let r = agentkit_with(t.path(), &["validate", "--dir", "desk"], |c| {
        c.env("LINEAR_TOKEN", "lin_api_x").env_remove("LINEAR_URL");
    });
    assert_eq!(r.code, 0, "{}", r.stdout);
}
