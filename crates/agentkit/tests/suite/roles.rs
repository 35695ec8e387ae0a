//! Roles over HTTP: an agent whose `jwt` chain maps token groups to
//! roles (`[auth.roles]` in `agent.toml`); every route of the code's role
//! table is called by every role, and each answers `401`/`403` exactly
//! when the table says the role falls short (the host's `/metrics` and
//! `/v1/logs` too, with the agent's roles as the host's). A viewer reads its own
//! sessions only; `/v1/info` names the caller's role.

use agentkit::ServeOptions;
use agentkit::auth::{AuthContext, CustomPolicy, Policy, PrincipalType};
use agentkit::channels::Env;
use agentkit_test_support::http::Request;
use agentkit_test_support::jwt::{JwksServer, TestKey, now};
use serde_json::{Value, json};

use super::http::{Server, server};

const ISSUER: &str = "https://idp.example.test/";

const HTTP_TOML: &str = r#"kind = "http"
auth = [{ jwt = { jwks_url = "${IDP_JWKS}", issuer = "https://idp.example.test/", audience = "agentkit", refetch_floor_seconds = 0 } }]
"#;

const AGENT_TOML: &str = r#"model = "scripted:script.json"
[auth.roles]
viewer = ["groups:auditors"]
operator = ["groups:agents-ops", "principal:jwt:ops-bot"]
admin = ["realm_access.roles:platform"]
"#;

fn host(idp: &JwksServer) -> Server {
    let url = idp.url();
    server(
        &[
            ("channels/http.toml", HTTP_TOML),
            ("agent.toml", AGENT_TOML),
        ],
        ServeOptions {
            dev: true,
            env: Env::new(move |name| (name == "IDP_JWKS").then(|| url.clone())),
            // The host routes run the host chain: here one that reads the
            // same tokens' claims (their signatures are the agent
            // chain's to check), so the agent's roles apply there too.
            auth: Some(vec![Policy::Custom(claims_of_token())]),
            ..ServeOptions::default()
        },
    )
}

/// A verifier that admits any JWT-shaped bearer token as `jwt:<sub>`
/// with its claims.
fn claims_of_token() -> CustomPolicy {
    use base64::Engine;
    CustomPolicy::bearer("claims", |token: String| async move {
        let payload = token.split('.').nth(1)?;
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .ok()?;
        let claims: serde_json::Map<String, Value> = serde_json::from_slice(&bytes).ok()?;
        let sub = claims.get("sub")?.as_str()?.to_owned();
        let mut ctx = AuthContext::new("claims", format!("jwt:{sub}"), PrincipalType::User);
        ctx.claims = Some(std::sync::Arc::new(claims));
        Some(ctx)
    })
}

fn token(key: &TestKey, sub: &str, extra: Value) -> String {
    let mut claims = json!({"iss": ISSUER, "aud": "agentkit", "sub": sub,
                            "iat": now(), "exp": now() + 600});
    if let (Some(c), Some(e)) = (claims.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    key.sign(&claims)
}

/// A request from afar (never the `--dev` loopback operator).
fn call(s: &Server, method: &str, path: &str, token: Option<&str>) -> u16 {
    call_at(s.addr(), method, path, token)
}

fn call_at(addr: std::net::SocketAddr, method: &str, path: &str, token: Option<&str>) -> u16 {
    let mut r = Request::new(method, path)
        .host("agents.example")
        .header("x-forwarded-for", "203.0.113.9");
    if let Some(t) = token {
        r = r.bearer(t);
    }
    if method != "GET" && method != "DELETE" {
        r = r.json(&json!({}));
    }
    // The head is enough (a stream never ends by itself).
    r.stream(addr).unwrap().status
}

fn start_session(s: &Server, token: &str) -> String {
    let r = Request::post("/bot/v1/session")
        .host("agents.example")
        .header("x-forwarded-for", "203.0.113.9")
        .bearer(token)
        .json(&json!({"message": "hi"}))
        .send(s.addr())
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["sessionId"].as_str().unwrap().to_owned()
}

/// The rows of the code's table: (method, path, needed role or `public`).
fn rows() -> Vec<(String, String, String)> {
    agentkit::role_table_markdown()
        .lines()
        .skip(2)
        .map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            (
                cells[1].to_owned(),
                cells[2].trim_matches('`').to_owned(),
                cells[3].trim_matches('`').to_owned(),
            )
        })
        .collect()
}

const ROLES: [&str; 4] = ["viewer", "user", "operator", "admin"];

fn rank(role: &str) -> usize {
    ROLES.iter().position(|r| *r == role).unwrap()
}

#[test]
fn every_route_answers_every_role_as_the_table_says() {
    let key = TestKey::rsa("k1");
    let idp = JwksServer::start(&[&key]);
    let s = host(&idp);
    // The viewer's own session, started while it was a plain user.
    let viewer_sessions = start_session(&s, &token(&key, "vera", json!({})));
    let user_session = start_session(&s, &token(&key, "uma", json!({})));
    let tokens = [
        (
            "viewer",
            token(&key, "vera", json!({"groups": ["auditors"]})),
        ),
        ("user", token(&key, "uma", json!({"groups": ["staff"]}))),
        (
            "operator",
            token(&key, "otto", json!({"groups": "agents-ops"})),
        ),
        (
            "admin",
            token(
                &key,
                "ada",
                json!({"realm_access": {"roles": ["platform"]}}),
            ),
        ),
    ];
    for (role, t) in &tokens {
        let r = Request::get("/bot/v1/info")
            .host("agents.example")
            .header("x-forwarded-for", "203.0.113.9")
            .bearer(t)
            .send(s.addr())
            .unwrap();
        assert_eq!(r.json()["caller"]["role"], *role, "{}", r.body);
        assert_eq!(r.json()["caller"]["operator"], rank(role) >= 2);
    }

    let rows = rows();
    assert!(rows.len() > 50, "{rows:?}");
    let mut walked = 0;
    for (method, path, need) in &rows {
        let Some(rest) = path.strip_prefix("/<slug>") else {
            // A host route (the agent prefix does not apply).
            if need == "public" {
                continue;
            }
            for (role, t) in &tokens {
                let status = call(&s, method, path, Some(t));
                if rank(role) >= rank(need) {
                    assert_eq!(status, 200, "{role} {method} {path}: the table says {need}");
                } else {
                    assert_eq!(status, 403, "{role} {method} {path}: the table says {need}");
                }
                walked += 1;
            }
            assert_eq!(call(&s, method, path, None), 401, "anonymous {path}");
            continue;
        };
        let method = if method == "any" {
            "POST"
        } else {
            method.as_str()
        };
        for (role, t) in &tokens {
            // Viewers and users act on their own session, operators and
            // admins on someone else's.
            let id = match *role {
                "viewer" | "operator" => &viewer_sessions,
                _ => &user_session,
            };
            let url = format!("/bot{rest}")
                .replace("{id}", id)
                .replace("{call}", "call-none")
                .replace("{name}", "no-such-tool")
                .replace("{step}", "0")
                .replace("{*path}", "notes.txt")
                .replace("{config}", "c1")
                .replace("{run}", "r1");
            let status = call(&s, method, &url, Some(t));
            let allowed = need == "public" || rank(role) >= rank(need);
            if allowed {
                assert!(
                    status != 401 && status != 403,
                    "{role} {method} {url}: {status}, but the table says {need}"
                );
            } else {
                assert_eq!(status, 403, "{role} {method} {url}: the table says {need}");
            }
            walked += 1;
        }
        // No credentials: 401 unless public.
        let url = format!("/bot{rest}").replace("{id}", &user_session);
        let status = call(&s, method, &url, None);
        if need == "public" {
            assert!(status != 401 && status != 403, "{method} {url}: {status}");
        } else {
            assert_eq!(status, 401, "anonymous {method} {url}");
        }
    }
    assert!(walked >= 200, "{walked}");
}

#[test]
fn a_viewer_reads_only_its_own_sessions() {
    let key = TestKey::ec("k1");
    let idp = JwksServer::start(&[&key]);
    let s = host(&idp);
    let mine = start_session(&s, &token(&key, "vera", json!({})));
    let theirs = start_session(&s, &token(&key, "uma", json!({})));
    let viewer = token(&key, "vera", json!({"groups": ["auditors"]}));
    let get = |path: &str| {
        Request::get(path)
            .host("agents.example")
            .header("x-forwarded-for", "203.0.113.9")
            .bearer(&viewer)
            .send(s.addr())
            .unwrap()
    };
    assert_eq!(get(&format!("/bot/v1/session/{mine}/events")).status, 200);
    let r = get(&format!("/bot/v1/session/{theirs}/events"));
    assert_eq!((r.status, r.error_code()), (403, "forbidden".to_owned()));
    let list = get("/bot/v1/sessions").json();
    let ids: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [mine.as_str()], "{list}");
    // Writes are refused even on its own session, saying which role.
    let r = Request::post(&format!("/bot/v1/session/{mine}"))
        .host("agents.example")
        .header("x-forwarded-for", "203.0.113.9")
        .bearer(&viewer)
        .json(&json!({"message": "more"}))
        .send(s.addr())
        .unwrap();
    assert_eq!(r.status, 403, "{}", r.body);
    assert!(
        r.body.contains("`user`") && r.body.contains("`viewer`"),
        "{}",
        r.body
    );
    // A principal rule works without claims too (here a JWT subject).
    let bot = token(&key, "ops-bot", json!({}));
    let r = Request::get(&format!("/bot/v1/session/{theirs}/events"))
        .host("agents.example")
        .header("x-forwarded-for", "203.0.113.9")
        .bearer(&bot)
        .send(s.addr())
        .unwrap();
    assert_eq!(r.status, 200, "an operator by principal: {}", r.body);
}

/// On a host of several agents the host's figures need the role on every
/// agent: an operator of one agent only is no operator of the host.
#[test]
fn the_host_routes_need_the_role_on_every_agent() {
    let key = TestKey::rsa("k1");
    let ops_everywhere = r#"model = "scripted:script.json"
[auth.roles]
operator = ["groups:agents-ops"]
admin = ["groups:platform"]
"#;
    let ops_on_billing_only = r#"model = "scripted:script.json"
[auth.roles]
operator = ["groups:agents-ops", "groups:billing-ops"]
admin = ["groups:platform"]
"#;
    let agent = |toml: &'static str| -> Vec<(&'static str, &'static str)> {
        vec![
            ("agent.toml", toml),
            ("script.json", r#"{"turns": []}"#),
            ("instructions.md", "A test agent.\n"),
        ]
    };
    let (billing, support) = (agent(ops_on_billing_only), agent(ops_everywhere));
    let h = super::mcp::host(
        &[("billing", &billing), ("support", &support)],
        ServeOptions {
            auth: Some(vec![Policy::Custom(claims_of_token())]),
            ..ServeOptions::default()
        },
    );
    let status = |path: &str, groups: &[&str]| {
        let t = token(&key, "pat", json!({ "groups": groups }));
        call_at(h.addr(), "GET", path, Some(&t))
    };
    // An operator of billing only: a user of the host.
    assert_eq!(status("/metrics", &["billing-ops"]), 403);
    assert_eq!(status("/metrics", &["agents-ops"]), 200);
    assert_eq!(status("/v1/logs", &["agents-ops"]), 403);
    assert_eq!(status("/v1/logs", &["platform"]), 200);
    // The operator token (the suite's scraper) is admin everywhere.
    assert_eq!(
        call_at(h.addr(), "GET", "/v1/logs", Some(super::http::SCRAPER)),
        200
    );
}
