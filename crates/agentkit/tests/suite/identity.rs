//! Agent identity against a verifier nobody here wrote: an MCP server
//! (the official Python SDK) that admits only calls whose bearer token
//! PyJWT verifies with the keys the host publishes at
//! `/.well-known/jwks.json` (EdDSA, issuer and audience checked). The
//! token names the agent, the calling session and its owner; a token for
//! another audience is refused.

use std::path::PathBuf;
use std::time::Duration;

use agentkit::ServeOptions;
use agentkit_test_support::http::Request;
use serde_json::{Value, json};

use super::mcp::host;

// Says why it skips when the environment is missing (never under CI).
#[allow(clippy::print_stderr)]
fn python() -> Option<PathBuf> {
    match agentkit_test_support::pyenv::pyenv_with("agent identity (PyJWT)", "jwt, mcp") {
        Ok(bin) => Some(bin),
        Err(skip) => {
            eprintln!("{skip}");
            None
        }
    }
}

/// A child process killed (and reaped) when the test ends, however.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for_port(port: u16) {
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the Python MCP server did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_third_party_verifies_the_agent_identity_token_with_the_published_keys() {
    let Some(bin) = python() else { return };
    let port = agentkit_test_support::process::free_port();
    let audience = format!("http://127.0.0.1:{port}");
    let good = format!(
        "url = \"http://127.0.0.1:{port}/mcp\"\nauth = \"agent-identity\"\naudience = \"{audience}\"\n"
    );
    // The default audience is the URL, which this server does not accept.
    let wrong = format!("url = \"http://127.0.0.1:{port}/mcp\"\nauth = \"agent-identity\"\n");
    let script = r#"{"turns": [{"steps": [
        {"toolCalls": [{"name": "good__whoami", "input": {}}, {"name": "wrong__whoami", "input": {}}]},
        {"text": "checked"}
    ]}]}"#;
    let files = vec![
        ("agent.toml", "model = \"scripted:script.json\"\n"),
        ("script.json", script),
        ("instructions.md", "Check who you are.\n"),
        ("mcp-connections/good.toml", good.as_str()),
        ("mcp-connections/wrong.toml", wrong.as_str()),
    ];
    let h = host(&[("bot", &files)], ServeOptions::default());
    let base = format!("http://{}", h.addr());

    // The published keys: public Ed25519 keys only.
    let jwks = h.send(Request::get("/.well-known/jwks.json"));
    assert_eq!(jwks.status, 200, "{}", jwks.body);
    let keys = jwks.json()["keys"].clone();
    assert_eq!(keys.as_array().unwrap().len(), 1, "{keys}");
    assert_eq!(keys[0]["kty"], "OKP");
    assert_eq!(keys[0]["crv"], "Ed25519");
    assert_eq!(keys[0]["alg"], "EdDSA");
    assert!(keys[0].get("d").is_none(), "{keys}");

    let stderr = tempfile::NamedTempFile::new().unwrap();
    let _server = Killed(
        std::process::Command::new(bin.join("python"))
            .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/identity_server.py"))
            .arg(port.to_string())
            .arg(format!("{base}/.well-known/jwks.json"))
            .arg(&base)
            .arg(&audience)
            .stdout(std::process::Stdio::null())
            .stderr(stderr.reopen().unwrap())
            .spawn()
            .unwrap(),
    );
    wait_for_port(port);

    let r = h.send(
        Request::post("/bot/v1/mcp")
            .header("accept", "application/json, text/event-stream")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "ask", "arguments": {"message": "who am I?"}}})),
    );
    let reply = &r.json()["result"]["structuredContent"];
    assert_eq!(reply["reply"], "checked", "{}", r.body);
    let sid = reply["sessionId"].as_str().unwrap();
    let events: Vec<Value> = h
        .send(Request::get(&format!("/bot/v1/session/{sid}/events")))
        .body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let result = |tool: &str| {
        events
            .iter()
            .find(|e| e["type"] == "action.result" && e["data"]["toolName"] == tool)
            .unwrap_or_else(|| panic!("no result of {tool} in {events:?}"))["data"]
            .clone()
    };
    let good = result("good__whoami");
    assert_eq!(good["isError"], false, "{good}");
    let text = good["output"]["result"]
        .as_str()
        .unwrap_or_else(|| panic!("{good}"));
    let claims: Value = serde_json::from_str(text).unwrap_or_else(|_| panic!("{good}"));
    assert_eq!(claims["iss"], base.as_str(), "{claims}");
    assert_eq!(claims["aud"], audience.as_str(), "{claims}");
    assert_eq!(claims["sub"], "agent:bot", "{claims}");
    assert_eq!(claims["agent"], "bot", "{claims}");
    assert_eq!(claims["session"], sid, "{claims}");
    // The session's owner: the loopback caller of the default chain.
    assert_eq!(claims["principal"], "local", "{claims}");
    let (iat, exp) = (
        claims["iat"].as_u64().unwrap(),
        claims["exp"].as_u64().unwrap(),
    );
    assert_eq!(exp - iat, 300, "{claims}");

    // A token for another audience is refused by the verifier.
    let wrong = result("wrong__whoami");
    assert_eq!(wrong["isError"], true, "{wrong}");
    let info = h.send(Request::get("/bot/v1/info")).json();
    let status = info["mcp"]["connections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "wrong")
        .unwrap()
        .clone();
    assert_eq!(status["state"], "error", "{status}");
    let refusals = std::fs::read_to_string(stderr.path()).unwrap();
    assert!(
        refusals.contains("InvalidAudienceError"),
        "the verifier's refusals: {refusals}"
    );
    // The token never shows in what the host records.
    let log = serde_json::to_string(&events).unwrap();
    assert!(!log.contains("eyJ"), "a JWT in the events: {log}");
}

/// Verifies `token` with PyJWT against `jwks` (the host's published
/// document), for `audience` and `issuer`: the claims, or PyJWT's error.
fn pyjwt_verify(
    bin: &std::path::Path,
    jwks: &str,
    token: &str,
    audience: &str,
    issuer: &str,
) -> Result<Value, String> {
    const VERIFY: &str = r#"import json, sys, jwt
jwks, token, audience, issuer = sys.argv[1:5]
kid = jwt.get_unverified_header(token)["kid"]
key = jwt.PyJWKSet.from_dict(json.loads(jwks))[kid]
print(json.dumps(jwt.decode(token, key.key, algorithms=["EdDSA"], audience=audience, issuer=issuer)))
"#;
    let out = std::process::Command::new(bin.join("python"))
        .args(["-c", VERIFY, jwks, token, audience, issuer])
        .output()
        .unwrap();
    if out.status.success() {
        Ok(serde_json::from_slice(&out.stdout).unwrap())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn an_a2a_peer_gets_a_fresh_identity_token_on_every_request() {
    use agentkit_test_support::mock::{MockResponse, MockServer};
    let Some(bin) = python() else { return };
    let remote = MockServer::start(|req| {
        if req.method == "GET" {
            let host = req.header("host").unwrap_or_default().to_owned();
            return MockResponse::json(
                200,
                &json!({"name": "billing", "description": "Answers billing questions.",
                    "supportedInterfaces": [{"url": format!("http://{host}/rpc"),
                        "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
                    "skills": []}),
            );
        }
        MockResponse::json(
            200,
            &json!({"jsonrpc": "2.0", "id": 1, "result": {"message": {
                "messageId": "m-1", "role": "ROLE_AGENT", "parts": [{"text": "paid"}]}}}),
        )
    });
    let connection = format!(
        "a2a = \"{}/card.json\"\nauth = \"agent-identity\"\naudience = \"urn:billing\"\n",
        remote.url()
    );
    let script = r#"{"turns": [{"steps": [
        {"toolCalls": [{"name": "billing__a2a", "input": {"message": "is it paid?"}}]},
        {"text": "asked"}
    ]}]}"#;
    let files = vec![
        ("agent.toml", "model = \"scripted:script.json\"\n"),
        ("script.json", script),
        ("instructions.md", "Ask billing.\n"),
        ("mcp-connections/billing.toml", connection.as_str()),
    ];
    let h = host(&[("bot", &files)], ServeOptions::default());
    let base = format!("http://{}", h.addr());
    let r = h.send(
        Request::post("/bot/v1/mcp")
            .header("accept", "application/json, text/event-stream")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "ask", "arguments": {"message": "bill"}}})),
    );
    let reply = &r.json()["result"]["structuredContent"];
    assert_eq!(reply["reply"], "asked", "{}", r.body);
    let sid = reply["sessionId"].as_str().unwrap();
    let jwks = h.send(Request::get("/.well-known/jwks.json")).body;
    let requests = remote.requests();
    // The card, then `SendMessage`: each with a token of its own.
    assert!(requests.len() >= 2, "{requests:?}");
    let mut ids = Vec::new();
    for req in &requests {
        let token = req
            .header("authorization")
            .and_then(|a| a.strip_prefix("Bearer "))
            .unwrap_or_else(|| panic!("no bearer on {} {}", req.method, req.path));
        let claims = pyjwt_verify(&bin, &jwks, token, "urn:billing", &base).unwrap();
        assert_eq!(claims["agent"], "bot", "{claims}");
        assert_eq!(claims["session"], sid, "{claims}");
        assert_eq!(claims["principal"], "local", "{claims}");
        ids.push(claims["jti"].as_str().unwrap().to_owned());
        // Another audience's verifier refuses it.
        let refused = pyjwt_verify(&bin, &jwks, token, "urn:other", &base).unwrap_err();
        assert!(refused.contains("InvalidAudienceError"), "{refused}");
    }
    ids.dedup();
    assert_eq!(ids.len(), requests.len(), "a token was reused: {ids:?}");
}

/// Agents on two hosts without a shared secret: the caller's host signs,
/// the callee's `jwt` policy verifies against the caller's JWKS, and the
/// callee's session belongs to the calling agent.
#[test]
fn another_agentkit_host_admits_the_agent_identity_with_its_jwt_policy() {
    let caller_port = agentkit_test_support::process::free_port();
    let caller_base = format!("http://127.0.0.1:{caller_port}");
    let http = format!(
        "kind = \"http\"\nauth = [{{ jwt = {{ jwks_url = \"{caller_base}/.well-known/jwks.json\", issuer = \"{caller_base}\", audience = \"billing\", algorithms = [\"EdDSA\"] }} }}]\n"
    );
    let billing = host(
        &[(
            "billing",
            &[
                ("agent.toml", "model = \"scripted:script.json\"\n"),
                (
                    "script.json",
                    r#"{"turns": [{"steps": [{"text": "paid"}]}, {"steps": [{"text": "paid"}]}]}"#,
                ),
                ("instructions.md", "Billing.\n"),
                ("channels/http.toml", http.as_str()),
            ],
        )],
        ServeOptions {
            operator_token: Some("op-token".into()),
            ..ServeOptions::default()
        },
    );
    let billing_mcp = format!("http://{}/billing/v1/mcp", billing.addr());
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agents/caller/agent");
    let write = super::mcp::write;
    write(
        &agent.join("agent.toml"),
        "model = \"scripted:script.json\"\n",
    );
    write(
        &agent.join("script.json"),
        r#"{"turns": [{"steps": [
            {"toolCalls": [{"name": "billing__ask", "input": {"message": "is it paid?"}}, {"name": "stranger__ask", "input": {"message": "is it paid?"}}]},
            {"text": "done"}
        ]}]}"#,
    );
    write(&agent.join("instructions.md"), "Ask billing.\n");
    write(
        &agent.join("mcp-connections/billing.toml"),
        &format!("url = \"{billing_mcp}\"\nauth = \"agent-identity\"\naudience = \"billing\"\n"),
    );
    // The default audience (the URL) is not one billing accepts.
    write(
        &agent.join("mcp-connections/stranger.toml"),
        &format!("url = \"{billing_mcp}\"\nauth = \"agent-identity\"\n"),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let caller = rt
        .block_on(agentkit::serve(
            &dir.path().join("agents"),
            ServeOptions {
                port: caller_port,
                state_root: Some(dir.path().join("state")),
                ..ServeOptions::default()
            },
        ))
        .unwrap();
    let r = Request::post("/caller/v1/mcp")
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "ask", "arguments": {"message": "bill"}}}))
        .send(caller.local_addr())
        .unwrap();
    let reply = &r.json()["result"]["structuredContent"];
    assert_eq!(reply["reply"], "done", "{}", r.body);
    let sid = reply["sessionId"].as_str().unwrap();
    let events: Vec<Value> = Request::get(&format!("/caller/v1/session/{sid}/events"))
        .send(caller.local_addr())
        .unwrap()
        .body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let result = |tool: &str| {
        events
            .iter()
            .find(|e| e["type"] == "action.result" && e["data"]["toolName"] == tool)
            .unwrap_or_else(|| panic!("no result of {tool} in {events:?}"))["data"]
            .clone()
    };
    let asked = result("billing__ask");
    assert_eq!(asked["isError"], false, "{asked}");
    assert!(asked["output"].to_string().contains("paid"), "{asked}");
    // Billing's session belongs to the calling agent, as its jwt policy
    // names it.
    let listed = billing.send(Request::get("/billing/v1/sessions").bearer("op-token"));
    let owners: Vec<String> = listed.json()["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["principalId"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(owners, ["jwt:agent:caller"], "{}", listed.body);
    let stranger = result("stranger__ask");
    assert_eq!(stranger["isError"], true, "{stranger}");

    rt.block_on(caller.close());
}
