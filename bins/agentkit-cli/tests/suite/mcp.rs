//! `agentkit mcp status` (and `login`'s refusals) through the binary: the
//! state of each connection read from the token files `login` writes.

use serde_json::{Value, json};

use super::agentkit;

fn project(root: &std::path::Path) {
    let agent = root.join("desk/agent");
    std::fs::create_dir_all(agent.join("mcp-connections")).unwrap();
    std::fs::write(agent.join("instructions.md"), "Desk.\n").unwrap();
    std::fs::write(
        agent.join("mcp-connections/linear.toml"),
        "url = \"https://mcp.linear.app/mcp\"\noauth = true\n",
    )
    .unwrap();
    std::fs::write(
        agent.join("mcp-connections/files.toml"),
        "command = \"server\"\n",
    )
    .unwrap();
}

#[test]
fn status_shows_each_connection_and_its_login() {
    let t = tempfile::tempdir().unwrap();
    project(t.path());
    let r = agentkit(t.path(), &["mcp", "status", "--dir", "desk"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stdout,
        "desk/files (stdio): no OAuth\ndesk/linear (http): not logged in: run `agentkit mcp login linear`\n"
    );

    // A stored login (the file `agentkit mcp login` writes).
    let expires = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 3600;
    let dir = t.path().join("desk/.agentkit/desk/mcp-oauth");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("linear.json"),
        serde_json::to_vec(&json!({
            "resource": "https://mcp.linear.app/mcp", "issuer": "https://mcp.linear.app",
            "tokenEndpoint": "https://mcp.linear.app/token", "clientId": "c",
            "tokenEndpointAuthMethod": "none", "accessToken": "secret-access",
            "refreshToken": "secret-refresh", "expiresAt": expires, "scope": "read"
        }))
        .unwrap(),
    )
    .unwrap();
    let r = agentkit(t.path(), &["mcp", "status", "--dir", "desk", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        !r.stdout.contains("secret-"),
        "tokens never printed: {}",
        r.stdout
    );
    let doc: Value = serde_json::from_str(&r.stdout).unwrap();
    let linear = &doc["connections"][1];
    assert_eq!(
        (
            linear["connection"].clone(),
            linear["oauth"].clone(),
            linear["login"]["state"].clone(),
            linear["login"]["refreshable"].clone()
        ),
        (json!("linear"), json!(true), json!("valid"), json!(true))
    );
    assert!(linear["login"]["expiresIn"].as_i64().unwrap() > 3500);
    assert_eq!(doc["connections"][0]["oauth"], false);
}

#[test]
fn login_refuses_connections_without_oauth() {
    let t = tempfile::tempdir().unwrap();
    project(t.path());
    let r = agentkit(t.path(), &["mcp", "login", "files", "--dir", "desk"]);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr
            .contains("connection `files` is not an HTTP connection"),
        "{}",
        r.stderr
    );
    let r = agentkit(t.path(), &["mcp", "login", "nope", "--dir", "desk"]);
    assert!(
        r.stderr.contains("no MCP connection `nope`"),
        "{}",
        r.stderr
    );
}
