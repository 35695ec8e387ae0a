//! What a project ported by hand from the TypeScript framework meets:
//! every unknown field reported at once, Cursor-only settings warned about
//! (with what agentkit does instead) rather than stopping validation,
//! `${…}` in comments ignored, and JSON Schema `format` asserted.

use agentkit_manifest::{Code, Severity, schema_errors};
use expect_test::expect;
use serde_json::json;

use super::*;

/// A project with `agent/instructions.md` and the given files.
fn project(files: &[(&str, &str)]) -> (tempfile::TempDir, Discovery) {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("ported");
    write(&dir.join("agent/instructions.md"), "You help.\n");
    for (rel, text) in files {
        write(&dir.join(rel), text);
    }
    let d = discover_ok(&dir);
    (t, d)
}

#[test]
fn every_unknown_field_of_a_file_is_reported() {
    let (_t, d) = project(&[(
        "agent/tools/lookup.toml",
        r#"description = "Look a word up."
command = ["python3", "lookup.py"]
executor = "server"
timout = "10s"
[input_schema]
type = "object"
[input_shema.properties]
word = { type = "string" }
"#,
    )]);
    expect![[r#"
        agent/tools/lookup.toml:3:1: error[unknown-field]: unknown field `executor` (hint: did you mean `execution`?)
        agent/tools/lookup.toml:4:1: error[unknown-field]: unknown field `timout` (hint: did you mean `timeout`?)
        agent/tools/lookup.toml:7:2: error[unknown-field]: unknown field `input_shema` (hint: did you mean `input_schema`?)
    "#]]
    .assert_eq(&render(&d));
}

#[test]
fn unknown_fields_inside_tables_and_arrays_of_tables_are_all_reported() {
    let (_t, d) = project(&[
        (
            "agent/agent.toml",
            "model = \"test\"\n[harness]\nmax_step = 3\nturn_timout = \"1m\"\n",
        ),
        (
            "agent/channels/intake.toml",
            r#"[[routes]]
method = "POST"
path = "/a"
bodySchema = { type = "object" }
[routes.send]
message = "hi"
[[routes]]
method = "GET"
path = "/b"
querySchema = { type = "object" }
"#,
        ),
    ]);
    let codes: Vec<(&str, Code, Option<u32>, &str)> = d
        .diagnostics
        .iter()
        .map(|d| (d.path.as_str(), d.code, d.line, d.message.as_str()))
        .collect();
    assert_eq!(
        codes,
        [
            (
                "agent/agent.toml",
                Code::UnknownField,
                Some(3),
                "unknown field `max_step`"
            ),
            (
                "agent/agent.toml",
                Code::UnknownField,
                Some(4),
                "unknown field `turn_timout`"
            ),
            (
                "agent/channels/intake.toml",
                Code::UnknownField,
                Some(4),
                "unknown field `bodySchema`"
            ),
            (
                "agent/channels/intake.toml",
                Code::UnknownField,
                Some(10),
                "unknown field `querySchema`"
            ),
        ]
    );
}

#[test]
fn cursor_only_settings_warn_and_say_what_agentkit_does_instead() {
    let (_t, d) = project(&[(
        "agent/agent.toml",
        r#"architecture = "v2"
persistent = true
model = { provider = "openai", id = "gpt-4.1-mini", params = [{ id = "effort", value = "high" }] }
[hosting]
egressDomains = ["api.example.com"]
secretNames = ["API_KEY"]
"#,
    )]);
    expect![[r#"
        agent/agent.toml:1:1: warning[unsupported]: `architecture` picks a Cursor SDK project format; agentkit has one format (this folder), so it is ignored (hint: remove it)
        agent/agent.toml:2:1: warning[unsupported]: `persistent` asks Cursor hosting for a long-lived runtime; `agentkit serve` is one long-lived process already, so it is ignored (hint: remove it; sessions and their state survive restarts under the state root)
        agent/agent.toml:3:1: warning[unsupported]: `model.params` as a list of `{ id, value }` is the Cursor SDK's form; those Cursor model parameters are ignored (hint: agentkit passes `params` to the provider as a table, e.g. `params = { temperature = 0.2, reasoning_effort = "high" }`)
        agent/agent.toml:4:1: warning[unsupported]: `hosting` configures Cursor's managed deployment; agentkit does not deploy for you, so it is ignored (hint: run `agentkit serve` (or the `agentkit-serve` container) where the agent should live; egress is that machine's, and secrets are its environment variables, read as `${VAR}`)
    "#]]
    .assert_eq(&render(&d));
    assert!(d.is_ok(), "warnings only: validation goes on");
    let model = d.host.agents[0].agent.config.model.as_ref().unwrap();
    assert_eq!((model.id.as_str(), model.params.len()), ("gpt-4.1-mini", 0));
}

#[test]
fn variables_in_toml_comments_are_not_references() {
    let (_t, d) = project(&[(
        "agent/mcp-connections/docs.toml",
        "# Set ${DOCS_TOKEN} first; ${OLD_URL} was the old endpoint.\n\
         url = \"https://docs.example/mcp#${DOCS_TEAM:-all}\" # not ${HERE}\n\
         headers = { Authorization = \"Bearer ${DOCS_TOKEN}\" } # ${NOR_HERE}\n",
    )]);
    assert_eq!(render(&d), "");
    let refs: Vec<(&str, u32)> = d.host.agents[0]
        .agent
        .env_refs
        .iter()
        .map(|r| (r.name.as_str(), r.line))
        .collect();
    assert_eq!(refs, [("DOCS_TEAM", 2), ("DOCS_TOKEN", 3)]);
}

#[test]
fn json_schema_formats_are_asserted() {
    let schema = json!({
        "type": "object",
        "properties": {
            "email": {"type": "string", "format": "email"},
            "site": {"type": "string", "format": "uri"},
            "at": {"type": "string", "format": "date-time"},
            "id": {"type": "string", "format": "uuid"},
            "day": {"type": "string", "format": "date"},
            "ip": {"type": "string", "format": "ipv4"},
            "other": {"type": "string", "format": "made-up"}
        }
    });
    let good = json!({
        "email": "ada@example.com",
        "site": "https://example.com/a?b=c",
        "at": "2026-12-01T15:30:00Z",
        "id": "0193a8b2-7c4e-7d2a-9f1e-3b5c6d7e8f90",
        "day": "2026-12-01",
        "ip": "127.0.0.1",
        "other": "anything"
    });
    assert_eq!(schema_errors(&schema, &good), Ok(vec![]));
    let bad = json!({
        "email": "not an address",
        "site": "no scheme",
        "at": "yesterday",
        "id": "1234",
        "day": "2026-13-01",
        "ip": "300.1.1.1",
        "other": "anything"
    });
    let mut paths: Vec<String> = schema_errors(&schema, &bad)
        .unwrap()
        .into_iter()
        .map(|(at, _)| at)
        .collect();
    paths.sort();
    assert_eq!(paths, ["/at", "/day", "/email", "/id", "/ip", "/site"]);
}

#[test]
fn severities_of_the_rough_edges() {
    // Unknown fields stay errors; Cursor-only settings stay warnings.
    let (_t, d) = project(&[("agent/agent.toml", "hosting = {}\nhostname = \"x\"\n")]);
    let got: Vec<(Code, Severity)> = d.diagnostics.iter().map(|d| (d.code, d.severity)).collect();
    assert_eq!(got, [(Code::UnknownField, Severity::Error)]);
}

#[test]
fn oauth_is_for_url_connections_without_an_authorization_header() {
    let (_t, d) = project(&[
        (
            "agent/mcp-connections/linear.toml",
            "url = \"https://mcp.linear.app/mcp\"\noauth = true\n",
        ),
        (
            "agent/mcp-connections/both.toml",
            "url = \"https://x.example/mcp\"\noauth = true\nheaders = { Authorization = \"Bearer ${X}\" }\n",
        ),
        (
            "agent/mcp-connections/local.toml",
            "command = \"server\"\noauth = true\n",
        ),
    ]);
    expect![[r#"
        agent/mcp-connections/both.toml:2:1: error[conflicting-fields]: `oauth = true` and an `Authorization` header both authorize the connection; keep one
        agent/mcp-connections/local.toml:2:1: error[conflicting-fields]: `oauth = true` is for `url` connections (streamable HTTP)
    "#]]
    .assert_eq(&render(&d));
    let conns = &d.host.agents[0].agent.mcp_connections;
    assert_eq!(
        conns
            .iter()
            .map(|c| (c.name.as_str(), c.oauth))
            .collect::<Vec<_>>(),
        [("linear", true)]
    );
}

#[test]
fn agent_identity_is_for_url_and_a2a_connections_with_no_other_credential() {
    let (_t, d) = project(&[
        (
            "agent/mcp-connections/billing.toml",
            "url = \"https://billing.example/mcp\"\nauth = \"agent-identity\"\naudience = \"${BILLING_AUD:-billing}\"\n",
        ),
        (
            "agent/mcp-connections/plain.toml",
            "url = \"https://plain.example/mcp\"\nauth = \"agent-identity\"\n",
        ),
        (
            "agent/mcp-connections/peer.toml",
            "a2a = \"https://peer.example/.well-known/agent-card.json\"\nauth = \"agent-identity\"\n",
        ),
        (
            "agent/mcp-connections/stdio.toml",
            "command = \"server\"\nauth = \"agent-identity\"\n",
        ),
        (
            "agent/mcp-connections/both.toml",
            "url = \"https://x.example/mcp\"\nauth = \"agent-identity\"\nheaders = { Authorization = \"Bearer ${X}\" }\n",
        ),
        (
            "agent/mcp-connections/oauth.toml",
            "url = \"https://x.example/mcp\"\nauth = \"agent-identity\"\noauth = true\n",
        ),
        (
            "agent/mcp-connections/basic.toml",
            "url = \"https://x.example/mcp\"\nauth = \"basic\"\n",
        ),
        (
            "agent/mcp-connections/stray.toml",
            "url = \"https://x.example/mcp\"\naudience = \"x\"\n",
        ),
    ]);
    expect![[r#"
        agent/mcp-connections/basic.toml:2:1: error[invalid-value]: `auth` must be "agent-identity", not `basic` (hint: `auth = "agent-identity"` sends a short-lived token the host signs (see the auth reference); static credentials go in `headers`)
        agent/mcp-connections/both.toml:2:1: error[conflicting-fields]: `auth = "agent-identity"` and an `Authorization` header both authorize the connection; keep one
        agent/mcp-connections/oauth.toml:2:1: error[conflicting-fields]: `auth = "agent-identity"` and `oauth = true` both authorize the connection; keep one
        agent/mcp-connections/stdio.toml:2:1: error[conflicting-fields]: `auth = "agent-identity"` is for `url` and `a2a` connections (a stdio child or a peer on this host needs no token)
        agent/mcp-connections/stray.toml:2:1: error[conflicting-fields]: `audience` is for connections with `auth = "agent-identity"`
    "#]]
    .assert_eq(&render(&d));
    let conns = &d.host.agents[0].agent.mcp_connections;
    let mut identities: Vec<(&str, Option<&str>)> = conns
        .iter()
        .map(|c| (c.name.as_str(), c.agent_identity.as_deref()))
        .collect();
    identities.sort_unstable();
    assert_eq!(
        identities,
        [
            ("billing", Some("${BILLING_AUD:-billing}")),
            (
                "peer",
                Some("https://peer.example/.well-known/agent-card.json")
            ),
            ("plain", Some("https://plain.example/mcp")),
        ]
    );
}

#[test]
fn oauth_clients_are_pre_registered_or_metadata_documents() {
    let (_t, d) = project(&[
        (
            "agent/mcp-connections/jira.toml",
            "url = \"https://mcp.example/mcp\"\noauth = true\noauth_client_id = \"agentkit-prod\"\noauth_client_secret = \"${JIRA_CLIENT_SECRET}\"\n",
        ),
        (
            "agent/mcp-connections/cimd.toml",
            "url = \"https://mcp.example/mcp\"\noauth = true\noauth_client_metadata_url = \"https://agents.example/client.json\"\n",
        ),
        (
            "agent/mcp-connections/plain.toml",
            "url = \"https://mcp.example/mcp\"\noauth_client_id = \"x\"\n",
        ),
        (
            "agent/mcp-connections/secret.toml",
            "url = \"https://mcp.example/mcp\"\noauth = true\noauth_client_secret = \"s\"\n",
        ),
        (
            "agent/mcp-connections/http.toml",
            "url = \"https://mcp.example/mcp\"\noauth = true\noauth_client_metadata_url = \"http://agents.example/client.json\"\n",
        ),
    ]);
    expect![[r#"
        agent/mcp-connections/http.toml:3:1: error[invalid-value]: `oauth_client_metadata_url` must be an https URL (the authorization server fetches it), not `http://agents.example/client.json`
        agent/mcp-connections/plain.toml:2:1: error[conflicting-fields]: `oauth_client_id` is for connections with `oauth = true`
        agent/mcp-connections/secret.toml:3:1: error[missing-field]: `oauth_client_secret` needs the `oauth_client_id` it belongs to
    "#]]
    .assert_eq(&render(&d));
    let conns = &d.host.agents[0].agent.mcp_connections;
    let jira = conns.iter().find(|c| c.name == "jira").unwrap();
    assert_eq!(
        jira.oauth_client.client_id.as_deref(),
        Some("agentkit-prod")
    );
    assert_eq!(
        jira.oauth_client.client_secret.as_deref(),
        Some("${JIRA_CLIENT_SECRET}")
    );
    let cimd = conns.iter().find(|c| c.name == "cimd").unwrap();
    assert_eq!(
        cimd.oauth_client.metadata_url.as_deref(),
        Some("https://agents.example/client.json")
    );
    // The secret never shows in `info`.
    let json = serde_json::to_string(&d.host.agents[0].agent.mcp_connections).unwrap();
    assert!(
        !json.contains("JIRA_CLIENT_SECRET") && !json.contains("agentkit-prod"),
        "{json}"
    );
}
