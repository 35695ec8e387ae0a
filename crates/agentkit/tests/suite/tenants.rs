//! Tenants over HTTP: an agent whose `jwt` chain reads `org_id` as the
//! tenant (`[auth] tenant_claim`). Two tenants, a user and an operator in
//! each, a tenant-less user and operator, and an admin: the sessions of
//! one tenant (reading, listing, streaming, events, approvals, follow-ups,
//! stopping, deleting) answer `404` to every principal of another, the
//! operator included, and work within it; only the admin crosses.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use agentkit::ServeOptions;
use agentkit::channels::Env;
use agentkit_test_support::http::{Request, Response};
use agentkit_test_support::jwt::{JwksServer, TestKey, now};
use serde_json::{Value, json};

use super::http::{Server, server};

const ISSUER: &str = "https://idp.example.test/";

const HTTP_TOML: &str = r#"kind = "http"
auth = [{ jwt = { jwks_url = "${IDP_JWKS}", issuer = "https://idp.example.test/", audience = "agentkit", refetch_floor_seconds = 0 } }]
"#;

const AGENT_TOML: &str = r#"model = "scripted:script.json"
[harness]
builtin_tools = ["remember", "recall", "forget"]
[auth]
tenant_claim = "org.id"
[auth.roles]
operator = ["groups:agents-ops"]
admin = ["groups:platform"]
"#;

/// A custom channel whose route runs the same `jwt` chain.
const INTAKE: &str = r#"kind = "webhook"
auth = [{ jwt = { jwks_url = "${IDP_JWKS}", issuer = "https://idp.example.test/", audience = "agentkit", refetch_floor_seconds = 0 } }]

[[routes]]
method = "POST"
path = "/ask"
[routes.body_schema]
type = "object"
[routes.send]
message = "from the intake"
"#;

const ECHO_TOOL: &str = r#"description = "Echo, after a human agrees"
command = ["python3", "echo.py"]
needs_approval = true
[input_schema]
type = "object"
required = ["text"]
properties.text = { type = "string" }
"#;

const ECHO_PY: &str = r#"import json, sys
args = json.load(sys.stdin)
print(json.dumps({"echo": args["text"]}))
"#;

const ARTIFACTS: &str = r#"agent_tool = true
[kinds.note]
description = "A note"
schema = { type = "object" }
"#;

/// Every session's first turn tags an artifact, remembers for the whole
/// agent (its tenant), then parks a call for approval.
const SCRIPT: &str = r#"{"turns": [
  {"steps": [
    {"toolCalls": [{"name": "tag_artifact", "input": {"kind": "note", "data": {"n": 1}}}]},
    {"toolCalls": [{"name": "remember", "input": {"text": "the office closes at six", "scope": "agent"}}]},
    {"toolCalls": [{"name": "echo", "input": {"text": "hi"}}]},
    {"text": "after approval"}]},
  {"steps": [{"text": "again"}]}
]}"#;

fn host(idp: &JwksServer, database_url: Option<&str>) -> Server {
    let url = idp.url();
    server(
        &[
            ("channels/http.toml", HTTP_TOML),
            ("agent.toml", AGENT_TOML),
            ("script.json", SCRIPT),
            ("tools/echo.toml", ECHO_TOOL),
            ("tools/echo.py", ECHO_PY),
            ("artifacts.toml", ARTIFACTS),
            ("channels/intake.toml", INTAKE),
        ],
        ServeOptions {
            env: Env::new(move |name| (name == "IDP_JWKS").then(|| url.clone())),
            database_url: database_url.map(str::to_owned),
            ..ServeOptions::default()
        },
    )
}

/// A token for `sub` in tenant `org` (none: no claim) with `groups`.
fn token(key: &TestKey, sub: &str, org: Option<&str>, groups: &[&str]) -> String {
    let mut claims = json!({"iss": ISSUER, "aud": "agentkit", "sub": sub,
                            "iat": now(), "exp": now() + 600, "groups": groups});
    if let Some(org) = org {
        claims["org"] = json!({"id": org});
    }
    key.sign(&claims)
}

fn send(s: SocketAddr, method: &str, path: &str, token: &str, body: Option<Value>) -> Response {
    let mut r = Request::new(method, path)
        .host("agents.example")
        .header("x-forwarded-for", "203.0.113.9")
        .bearer(token);
    if let Some(b) = body {
        r = r.json(&b);
    }
    r.send(s).unwrap()
}

fn get(s: SocketAddr, path: &str, token: &str) -> Response {
    send(s, "GET", path, token, None)
}

/// The status of a stream's head (the stream itself never ends).
fn stream_status(s: SocketAddr, id: &str, token: &str) -> u16 {
    Request::get(&format!("/bot/v1/session/{id}/stream?startIndex=0"))
        .host("agents.example")
        .header("x-forwarded-for", "203.0.113.9")
        .bearer(token)
        .stream(s)
        .unwrap()
        .status
}

fn start_session(s: SocketAddr, token: &str) -> String {
    let r = send(
        s,
        "POST",
        "/bot/v1/session",
        token,
        Some(json!({"message": "go"})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["sessionId"].as_str().unwrap().to_owned()
}

/// The parked call of session `id`, as its owner sees it.
fn parked_call(s: SocketAddr, id: &str, token: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = get(s, &format!("/bot/v1/session/{id}/approvals"), token);
        assert_eq!(r.status, 200, "{}", r.body);
        if let Some(call) = r.json()["approvals"][0]["callId"].as_str() {
            return call.to_owned();
        }
        assert!(Instant::now() < deadline, "no parked call on {id}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn listed(s: SocketAddr, token: &str) -> Vec<String> {
    let r = get(s, "/bot/v1/sessions?limit=100", token);
    assert_eq!(r.status, 200, "{}", r.body);
    let mut ids: Vec<String> = r.json()["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

/// Every way of reaching session `id` answers `want` to `token`.
fn reach(s: SocketAddr, id: &str, call: &str, token: &str, want: u16, who: &str) {
    let base = format!("/bot/v1/session/{id}");
    for path in [
        base.clone(),
        format!("{base}/events"),
        format!("{base}/approvals"),
        format!("{base}/artifacts"),
        format!("{base}/files"),
    ] {
        let r = get(s, &path, token);
        assert_eq!(r.status, want, "{who} GET {path}: {}", r.body);
        if want == 404 {
            // The answer is the one of a session that does not exist.
            assert_eq!(r.json()["error"]["code"], "session_not_found", "{}", r.body);
        }
    }
    assert_eq!(stream_status(s, id, token), want, "{who} stream {id}");
    if want == 404 {
        for (method, path, body) in [
            (
                "POST",
                format!("{base}/approvals/{call}"),
                json!({"decision": "deny"}),
            ),
            ("POST", base.clone(), json!({"message": "hello"})),
            ("POST", format!("{base}/stop"), json!({})),
            ("POST", format!("{base}/fork"), json!({"atIndex": 1})),
            ("DELETE", base.clone(), json!({})),
        ] {
            let r = send(s, method, &path, token, Some(body));
            assert_eq!(r.status, 404, "{who} {method} {path}: {}", r.body);
        }
    }
}

/// The ids of `/v1/artifacts` or `/v1/memory` (`key`) for `token`.
fn ids_of(s: SocketAddr, path: &str, key: &str, token: &str) -> Vec<String> {
    let r = get(s, path, token);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_tenant_s_sessions_are_invisible_to_other_tenants_operators_included() {
    let key = TestKey::rsa("k1");
    let idp = JwksServer::start(&[&key]);
    let s = host(&idp, None);
    walk(&key, s.addr(), s.addr());
}

/// A session a custom channel's route starts belongs to the tenant of
/// the principal its chain admitted.
#[test]
fn a_custom_channel_route_s_session_is_in_its_principal_s_tenant() {
    let key = TestKey::rsa("k1");
    let idp = JwksServer::start(&[&key]);
    let s = host(&idp, None);
    let user_a = token(&key, "ann", Some("acme"), &[]);
    let r = send(
        s.addr(),
        "POST",
        "/bot/v1/channels/intake/ask",
        &user_a,
        Some(json!({})),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let ops_a = token(&key, "otto", Some("acme"), &["agents-ops"]);
    let ops_b = token(&key, "olga", Some("globex"), &["agents-ops"]);
    let ops_none = token(&key, "ned", None, &["agents-ops"]);
    let r = get(s.addr(), &format!("/bot/v1/session/{id}"), &ops_a);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["principalId"], "jwt:ann", "{}", r.body);
    for t in [&ops_b, &ops_none] {
        let r = get(s.addr(), &format!("/bot/v1/session/{id}"), t);
        assert_eq!(r.status, 404, "{}", r.body);
    }
    assert_eq!(listed(s.addr(), &ops_a), vec![id.clone()]);
    assert!(listed(s.addr(), &ops_b).is_empty());
}

/// Two hosts on one PostgreSQL database: sessions started on one are
/// scoped on the other exactly as on one host (the tenant travels in the
/// shared index's metadata).
#[test]
fn tenants_hold_across_two_hosts_on_postgres() {
    let Some(db) = agentkit_test_support::pg::throwaway_database() else {
        return;
    };
    let key = TestKey::rsa("k1");
    let idp = JwksServer::start(&[&key]);
    let a = host(&idp, Some(&db.url));
    let b = host(&idp, Some(&db.url));
    walk(&key, a.addr(), b.addr());
}

/// Starts the sessions on host `made`, then checks every boundary on
/// host `s`.
fn walk(key: &TestKey, made: SocketAddr, s: SocketAddr) {
    let user_a = token(key, "ann", Some("acme"), &[]);
    let user_a2 = token(key, "abe", Some("acme"), &[]);
    let ops_a = token(key, "otto", Some("acme"), &["agents-ops"]);
    let user_b = token(key, "bob", Some("globex"), &[]);
    let ops_b = token(key, "olga", Some("globex"), &["agents-ops"]);
    let user_none = token(key, "nina", None, &[]);
    let ops_none = token(key, "ned", None, &["agents-ops"]);
    let admin = token(key, "ada", None, &["platform"]);

    let a = start_session(made, &user_a);
    let b = start_session(made, &user_b);
    let none = start_session(made, &user_none);
    let call_a = parked_call(s, &a, &user_a);
    let call_b = parked_call(s, &b, &user_b);
    let call_none = parked_call(s, &none, &user_none);

    // Listings: each operator its own tenant's, the admin every one.
    assert_eq!(listed(s, &ops_a), vec![a.clone()]);
    assert_eq!(listed(s, &ops_b), vec![b.clone()]);
    assert_eq!(listed(s, &ops_none), vec![none.clone()]);
    assert_eq!(listed(s, &user_a2), Vec::<String>::new());
    let mut all = vec![a.clone(), b.clone(), none.clone()];
    all.sort();
    assert_eq!(listed(s, &admin), all);
    // The status filter's path (running sessions, from memory) too.
    for t in [&ops_b, &user_b, &user_none] {
        let r = get(s, "/bot/v1/sessions?status=waiting_approval", t);
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(!r.body.contains(&a), "{}", r.body);
    }

    // Artifacts and memories: one of each per session, seen within its
    // tenant only.
    let artifacts = |t: &str| ids_of(s, "/bot/v1/artifacts", "artifacts", t);
    let memories = |t: &str| ids_of(s, "/bot/v1/memory", "memories", t);
    let art_a = artifacts(&user_a);
    let mem_a = memories(&user_a);
    assert_eq!((art_a.len(), mem_a.len()), (1, 1), "{art_a:?} {mem_a:?}");
    assert_eq!(artifacts(&ops_a), art_a);
    assert_eq!(memories(&ops_a), mem_a);
    // Another user of the tenant sees the agent-scoped memory, not the
    // artifact of a session it does not own.
    assert_eq!(memories(&user_a2), mem_a);
    assert_eq!(artifacts(&user_a2), Vec::<String>::new());
    let art_b = artifacts(&ops_b);
    let mem_b = memories(&ops_b);
    assert_eq!((art_b.len(), mem_b.len()), (1, 1));
    assert_ne!(art_a, art_b);
    assert_ne!(mem_a, mem_b);
    assert_eq!(memories(&user_b), mem_b);
    assert_eq!(artifacts(&ops_none).len(), 1);
    assert!(!artifacts(&ops_none).contains(&art_a[0]));
    assert_eq!(memories(&admin).len(), 3);
    assert_eq!(artifacts(&admin).len(), 3);
    for (who, t) in [
        ("globex operator", &ops_b),
        ("tenant-less user", &user_none),
    ] {
        let path = format!("/bot/v1/memory/{}", mem_a[0]);
        let r = get(s, &path, t);
        assert_eq!(r.status, 404, "{who} GET {path}: {}", r.body);
        let r = send(s, "PUT", &path, t, Some(json!({"text": "changed"})));
        assert_eq!(r.status, 404, "{who} PUT {path}: {}", r.body);
        let r = send(s, "DELETE", &path, t, None);
        assert_eq!(r.status, 404, "{who} DELETE {path}: {}", r.body);
    }
    let r = get(s, &format!("/bot/v1/memory/{}", mem_a[0]), &ops_a);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json()["memory"]["text"],
        "the office closes at six",
        "{}",
        r.body
    );

    // Across the boundary: 404 (not 403), to users and operators alike,
    // and to the tenant-less ones.
    for (who, t) in [
        ("globex user", &user_b),
        ("globex operator", &ops_b),
        ("tenant-less user", &user_none),
        ("tenant-less operator", &ops_none),
    ] {
        reach(s, &a, &call_a, t, 404, who);
    }
    reach(s, &b, &call_b, &ops_a, 404, "acme operator");
    reach(s, &none, &call_none, &ops_a, 404, "acme operator");
    // Within: another user of the tenant is refused as before (403), its
    // operator acts.
    let r = get(s, &format!("/bot/v1/session/{a}"), &user_a2);
    assert_eq!(r.status, 403, "{}", r.body);
    reach(s, &a, &call_a, &ops_a, 200, "acme operator");
    reach(s, &a, &call_a, &user_a, 200, "acme owner");
    reach(s, &b, &call_b, &admin, 200, "admin");

    // The A/B totals count every tenant's sessions (their rows carry no
    // tenant): the admin's only on an agent with tenants.
    for (who, t) in [("acme operator", &ops_a), ("acme user", &user_a)] {
        let r = get(s, "/bot/v1/ab", t);
        assert_eq!(r.status, 403, "{who}: {}", r.body);
        assert!(r.body.contains("`admin`"), "{}", r.body);
    }
    let r = get(s, "/bot/v1/ab", &admin);
    assert_eq!(r.status, 200, "{}", r.body);

    // The approvals are still parked: the refused decisions did nothing.
    let approve = |id: &str, call: &str, t: &str| {
        send(
            s,
            "POST",
            &format!("/bot/v1/session/{id}/approvals/{call}"),
            t,
            Some(json!({"decision": "approve"})),
        )
    };
    let r = approve(&a, &call_a, &ops_a);
    assert_eq!(r.status, 200, "{}", r.body);
    let r = approve(&b, &call_b, &admin);
    assert_eq!(r.status, 200, "{}", r.body);
    let r = approve(&none, &call_none, &ops_none);
    assert_eq!(r.status, 200, "{}", r.body);
}
