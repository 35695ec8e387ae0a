//! The OpenAPI document of an agent (`GET /v1/openapi.json`): it names
//! every route the agent's router mounts (read from the router's source)
//! and every path it names answers; a third-party validator accepts it,
//! and `schemathesis` fuzzes a served agent from it with no server error
//! and no answer that breaks it.

use std::path::{Path, PathBuf};

use agentkit::ServeOptions;
use agentkit_test_support::http::Request;
use serde_json::Value;

use super::mcp::{Host, host};

const ECHO_TOOL: &str = r#"description = "Echo the input back."
command = ["python3", "-c", "import json,sys; print(json.dumps({'echo': json.load(sys.stdin)}))"]
[input_schema]
type = "object"
required = ["text"]
properties.text = { type = "string" }
"#;

/// A custom channel route with a body schema.
const INTAKE: &str = r#"kind = "webhook"
auth = [{ bearer = { token = "sk-t" } }]

[[routes]]
method = "POST"
path = "/tickets/:team"
description = "File a ticket."
[routes.body_schema]
type = "object"
required = ["title"]
properties.title = { type = "string" }
[routes.send]
message = "Ticket for {{ params.team }}: {{ body.title }}"
"#;

fn served() -> Host {
    host(
        &[(
            "bot",
            &[
                (
                    "agent.toml",
                    "model = \"test\"\ndescription = \"A test agent.\"\n",
                ),
                ("instructions.md", "You are a test agent.\n"),
                ("tools/echo.toml", ECHO_TOOL),
                ("channels/intake.toml", INTAKE),
            ],
        )],
        ServeOptions {
            bearer_token: Some("sk-t".to_owned()),
            ..ServeOptions::default()
        },
    )
}

fn document(h: &Host) -> Value {
    let r = h.send(Request::get("/bot/v1/openapi.json").bearer("sk-t"));
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
}

/// `{id}`, `{sessionId}` and `{*path}` alike become `{}`.
fn shape(path: &str) -> String {
    path.split('/')
        .map(|seg| if seg.starts_with('{') { "{}" } else { seg })
        .collect::<Vec<_>>()
        .join("/")
}

/// The path of every `.route("…", …)` in `text`.
fn routes_in(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(".route(") {
        rest = &rest[at + ".route(".len()..];
        let Some(open) = rest.find('"') else { break };
        let tail = &rest[open + 1..];
        let Some(close) = tail.find('"') else { break };
        out.push(tail[..close].to_owned());
    }
    out
}

fn sources(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            out.push((path, text));
        }
    }
}

#[test]
fn every_route_of_the_agent_router_is_in_the_document_and_every_path_answers() {
    let h = served();
    let doc = document(&h);
    let paths = doc["paths"].as_object().unwrap();
    let documented: Vec<String> = paths.keys().map(|p| shape(p)).collect();

    // The agent's routes: `agent_router` in router.rs and every module
    // whose routes are mounted on an agent's state.
    let serve = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/serve");
    let mut files = Vec::new();
    sources(&serve, &mut files);
    let mut mounted = Vec::new();
    for (path, text) in &files {
        if path.ends_with("router.rs") {
            let start = text.find("fn agent_router").unwrap();
            let end = start + text[start..].find("\nfn index_page").unwrap();
            mounted.extend(routes_in(&text[start..end]));
        } else if text.contains("Router<AgentState>") {
            mounted.extend(routes_in(text));
        }
    }
    assert!(mounted.len() > 20, "{mounted:?}");
    let missing: Vec<&String> = mounted
        .iter()
        .filter(|p| !documented.contains(&shape(p)))
        .collect();
    assert!(
        missing.is_empty(),
        "routes missing from the document: {missing:?}"
    );
    // The custom channel's route, with the schema its file declares.
    let tickets = &paths["/v1/channels/intake/tickets/{team}"]["post"];
    assert_eq!(
        tickets["requestBody"]["content"]["application/json"]["schema"]["required"][0],
        "title"
    );
    assert_eq!(tickets["parameters"][0]["name"], "team");
    assert_eq!(tickets["summary"], "File a ticket.");

    // Every documented operation is routed: neither the fallback's `no
    // such route` nor `405`.
    for (path, ops) in paths {
        let concrete = path
            .split('/')
            .map(|seg| if seg.starts_with('{') { "x" } else { seg })
            .collect::<Vec<_>>()
            .join("/");
        for method in ops.as_object().unwrap().keys() {
            if path.ends_with("/stream") {
                continue; // it stays open; `x` is no session, so it is 404 either way
            }
            let url = format!("/bot{concrete}");
            let req = match method.as_str() {
                "get" => Request::get(&url),
                "post" => Request::post(&url).header("content-type", "application/json"),
                "delete" => Request::new("DELETE", &url),
                "put" => Request::new("PUT", &url),
                other => panic!("unexpected method {other}"),
            };
            let r = h.send(req.bearer("sk-t"));
            assert_ne!(r.status, 405, "{method} {path}: {}", r.body);
            let fallback = r.status == 404
                && serde_json::from_str::<Value>(&r.body)
                    .is_ok_and(|v| v["error"]["message"] == "no such route");
            assert!(!fallback, "{method} {path} is documented but not routed");
        }
    }
}

#[test]
#[allow(clippy::print_stderr)]
fn third_party_tools_accept_the_document_and_fuzz_the_agent_without_a_violation() {
    let bin = match agentkit_test_support::pyenv::pyenv_bin("schemathesis") {
        Ok(bin) => bin,
        Err(skip) => return eprintln!("{skip}"),
    };
    let h = served();
    let doc = document(&h);
    let file = h.dir.path().join("openapi.json");
    std::fs::write(&file, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();

    let valid = std::process::Command::new(bin.join("python"))
        .args([
            "-c",
            "import json,sys\nfrom openapi_spec_validator import validate\nvalidate(json.load(open(sys.argv[1])))",
        ])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        valid.status.success(),
        "openapi-spec-validator refused the document: {}",
        String::from_utf8_lossy(&valid.stderr)
    );

    // Server errors and answers that break the document; the MCP route is
    // rmcp's (its own conformance suite covers it), the A2A routes' bodies
    // are A2A's (the official SDKs' tests cover them) and a live stream
    // never ends.
    let out = std::process::Command::new(bin.join("schemathesis"))
        .arg("run")
        .arg(&file)
        .args([
            "--url",
            &format!("http://{}/bot", h.addr()),
            "-H",
            "Authorization: Bearer sk-t",
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
            "--exclude-path",
            "/v1/mcp",
            "--exclude-path-regex",
            "^/(a2a|\\.well-known)",
            "--exclude-path",
            "/v1/session/{sessionId}/stream",
            "--phases",
            "examples,coverage,fuzzing",
            "--max-examples",
            "8",
            "--workers",
            "1",
            "--seed",
            "34",
        ])
        .env("NO_COLOR", "1")
        // Its cache of crashes goes with the temporary folder.
        .current_dir(h.dir.path())
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "schemathesis found failures:\n{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(report.contains("Tested:"), "{report}");
}
