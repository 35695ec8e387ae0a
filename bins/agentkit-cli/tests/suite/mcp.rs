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

/// The client auth scenarios of the official MCP conformance suite that
/// agentkit supports, with `agentkit mcp conformance-client` as the client
/// under test (given the suite's client metadata document URL, and the
/// pre-registered client of `pre-registration` through the suite's
/// context): all 19.
const AUTH_SCENARIOS: &[&str] = &[
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/basic-cimd",
    "auth/pre-registration",
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
];

#[test]
#[allow(clippy::print_stderr)]
fn the_official_conformance_suite_passes_the_client_auth_scenarios() {
    let suite = match agentkit_test_support::conformance::conformance(
        "the_official_conformance_suite_passes_the_client_auth_scenarios",
    ) {
        Ok(s) => s,
        Err(why) => {
            eprintln!("{why}");
            return;
        }
    };
    let t = tempfile::tempdir().unwrap();
    // The URL the suite expects as the client id of a client ID metadata
    // document (it is never fetched in these scenarios).
    let client = format!(
        "{} mcp conformance-client --client-metadata-url https://conformance-test.local/client-metadata.json",
        env!("CARGO_BIN_EXE_agentkit")
    );
    let mut failed = Vec::new();
    for scenario in AUTH_SCENARIOS {
        let out = std::process::Command::new(&suite.node)
            .arg(&suite.suite)
            .args(["client", "--command", &client, "--scenario", scenario])
            .current_dir(t.path())
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        // The report goes to stdout or stderr, depending on the terminal.
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if !out.status.success() || !text.contains("OVERALL: PASSED") {
            let summary: Vec<&str> = text
                .lines()
                .filter(|l| {
                    l.contains("FAILURE") || l.starts_with("Passed:") || l.starts_with("error")
                })
                .collect();
            failed.push(format!("{scenario}: {}", summary.join(" | ")));
        }
    }
    assert!(
        failed.is_empty(),
        "failed scenarios:\n{}",
        failed.join("\n")
    );
}

/// The official MCP conformance suite's client requirements of both
/// revisions, with `agentkit mcp conformance-client` as the client (a
/// login for the `auth/` scenarios; tools listed and called for the
/// others): every scenario passes or is in that revision's baseline
/// (`tests/mcp-conformance/client-<revision>.yml`, explained in
/// docs/reference/mcp-server.md#conformance). The suite fails the run on a
/// failure the baseline does not name and on a baseline entry that passes.
#[test]
#[allow(clippy::print_stderr)]
fn the_official_conformance_suite_passes_the_client_requirements_of_both_revisions() {
    let suite = match agentkit_test_support::conformance::conformance(
        "the_official_conformance_suite_passes_the_client_requirements_of_both_revisions",
    ) {
        Ok(s) => s,
        Err(why) => {
            eprintln!("{why}");
            return;
        }
    };
    let t = tempfile::tempdir().unwrap();
    let client = format!(
        "{} mcp conformance-client --client-metadata-url https://conformance-test.local/client-metadata.json",
        env!("CARGO_BIN_EXE_agentkit")
    );
    let mut failed = Vec::new();
    for revision in ["2025-11-25", "2026-07-28"] {
        let baseline = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join(format!("tests/mcp-conformance/client-{revision}.yml"));
        let out = std::process::Command::new(&suite.node)
            .arg(&suite.suite)
            .args(["client", "--command", &client, "--requirements", revision])
            .arg("--expected-failures")
            .arg(&baseline)
            .arg("-o")
            .arg(t.path().join(revision))
            .current_dir(t.path())
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        if !out.status.success() {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let summary = text
                .split("=== SUITE SUMMARY ===")
                .nth(1)
                .unwrap_or(&text)
                .to_owned();
            failed.push(format!("{revision}:{summary}"));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
