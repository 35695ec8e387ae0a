//! OAuth for an `oauth = true` MCP connection, end to end over loopback:
//! a local authorization server speaking the documented wire formats
//! (RFC 9728 protected-resource metadata, RFC 8414 server metadata,
//! RFC 7591 registration, the authorization-code flow with PKCE S256,
//! refresh-token grants) guards a real agentkit MCP endpoint through a
//! resource proxy that answers 401 with a `WWW-Authenticate` challenge.
//! `agentkit::mcp_oauth::login` runs the flow with a scripted browser; the
//! served agent then uses the stored tokens, refreshes one that nears
//! expiry before using it, and refreshes again when the server refuses a
//! revoked one; a `403 insufficient_scope` is reported with the scopes to
//! log in for, and `--scope` asks for them.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use agentkit::ServeOptions;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde_json::{Value, json};
use sha2::Digest as _;

use super::mcp::{Host, host};

const ECHO_TOOL: &str = r#"description = "Echo the input back."
command = ["python3", "-c", "import json,sys; print(json.dumps({'echo': json.load(sys.stdin)}))"]
[input_schema]
type = "object"
properties.text = { type = "string" }
"#;

/// What the authorization server and the resource saw and hold.
#[derive(Default)]
struct Auth {
    base: String,
    upstream: String,
    clients: HashMap<String, Vec<String>>,
    /// code → (client, redirect URI, PKCE challenge, resource)
    codes: HashMap<String, (String, String, String, String)>,
    access: HashSet<String>,
    refresh: HashSet<String>,
    issued: u32,
    /// The lifetime of the next access token.
    lifetime: u64,
    /// Every grant, in order.
    grants: Vec<String>,
    /// The bearer tokens the resource admitted, in order.
    admitted: Vec<String>,
    refused: u32,
    /// The scope an authorization request must ask for (`mcp:tools` when
    /// unset).
    scope: Option<String>,
    /// Answer `tools/call` with `403 insufficient_scope` (scope step-up).
    insufficient: bool,
}

type Shared = Arc<Mutex<Auth>>;

fn form(body: &[u8]) -> HashMap<String, String> {
    reqwest::Url::parse(&format!("http://f/?{}", String::from_utf8_lossy(body)))
        .map(|u| u.query_pairs().into_owned().collect())
        .unwrap_or_default()
}

fn oauth_error(status: StatusCode, error: &str) -> Response {
    (status, axum::Json(json!({"error": error}))).into_response()
}

fn issue(a: &mut Auth) -> Value {
    a.issued += 1;
    let (at, rt) = (format!("at-{}", a.issued), format!("rt-{}", a.issued));
    a.access.insert(at.clone());
    a.refresh.insert(rt.clone());
    json!({"access_token": at, "token_type": "Bearer", "expires_in": a.lifetime, "refresh_token": rt, "scope": a.scope.clone().unwrap_or_else(|| "mcp:tools".into())})
}

async fn prm(State(s): State<Shared>) -> impl IntoResponse {
    let base = s.lock().unwrap().base.clone();
    axum::Json(json!({
        "resource": format!("{base}/mcp"),
        "authorization_servers": [format!("{base}/auth")],
        "scopes_supported": ["mcp:tools"],
        "bearer_methods_supported": ["header"]
    }))
}

async fn as_metadata(State(s): State<Shared>) -> impl IntoResponse {
    let base = s.lock().unwrap().base.clone();
    axum::Json(json!({
        "issuer": format!("{base}/auth"),
        "authorization_endpoint": format!("{base}/auth/authorize"),
        "token_endpoint": format!("{base}/auth/token"),
        "registration_endpoint": format!("{base}/auth/register"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"]
    }))
}

async fn register(State(s): State<Shared>, body: Bytes) -> Response {
    let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let uris: Vec<String> = req["redirect_uris"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if uris.is_empty() || req["token_endpoint_auth_method"] != "none" {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_client_metadata");
    }
    let mut a = s.lock().unwrap();
    let id = format!("client-{}", a.clients.len() + 1);
    a.clients.insert(id.clone(), uris.clone());
    (
        StatusCode::CREATED,
        axum::Json(
            json!({"client_id": id, "redirect_uris": uris, "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"]}),
        ),
    )
        .into_response()
}

async fn authorize(State(s): State<Shared>, Query(q): Query<HashMap<String, String>>) -> Response {
    let mut a = s.lock().unwrap();
    let get = |k: &str| q.get(k).cloned().unwrap_or_default();
    let client = get("client_id");
    let redirect = get("redirect_uri");
    let registered = a
        .clients
        .get(&client)
        .is_some_and(|u| u.contains(&redirect));
    if get("response_type") != "code"
        || get("code_challenge_method") != "S256"
        || get("code_challenge").len() != 43
        || !registered
        || get("resource") != format!("{}/mcp", a.base)
        || get("scope") != a.scope.clone().unwrap_or_else(|| "mcp:tools".into())
        || !redirect.starts_with("http://127.0.0.1:")
    {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_request");
    }
    let code = format!("code-{}", a.codes.len() + 1);
    a.codes.insert(
        code.clone(),
        (
            client,
            redirect.clone(),
            get("code_challenge"),
            get("resource"),
        ),
    );
    let location = format!("{redirect}?code={code}&state={}", get("state"));
    (StatusCode::FOUND, [("location", location)]).into_response()
}

async fn token(State(s): State<Shared>, body: Bytes) -> Response {
    let f = form(&body);
    let get = |k: &str| f.get(k).cloned().unwrap_or_default();
    let mut a = s.lock().unwrap();
    match get("grant_type").as_str() {
        "authorization_code" => {
            let Some((client, redirect, challenge, resource)) = a.codes.remove(&get("code")) else {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
            };
            let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(sha2::Sha256::digest(get("code_verifier").as_bytes()));
            if client != get("client_id")
                || redirect != get("redirect_uri")
                || computed != challenge
                || resource != get("resource")
            {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
            }
            a.grants.push("authorization_code".into());
            axum::Json(issue(&mut a)).into_response()
        }
        "refresh_token" => {
            if !a.refresh.remove(&get("refresh_token"))
                || !a.clients.contains_key(&get("client_id"))
            {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
            }
            a.grants.push("refresh_token".into());
            axum::Json(issue(&mut a)).into_response()
        }
        _ => oauth_error(StatusCode::BAD_REQUEST, "unsupported_grant_type"),
    }
}

/// The protected resource: admits a current access token and forwards to
/// the agentkit MCP endpoint; anything else gets 401 and the challenge.
async fn resource(
    State(s): State<Shared>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let (upstream, base) = {
        let mut a = s.lock().unwrap();
        match bearer {
            Some(_)
                if a.insufficient && String::from_utf8_lossy(&body).contains("\"tools/call\"") =>
            {
                let challenge = format!(
                    "Bearer error=\"insufficient_scope\", scope=\"mcp:tools mcp:write\", resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"",
                    a.base
                );
                return (StatusCode::FORBIDDEN, [("www-authenticate", challenge)]).into_response();
            }
            Some(t) if a.access.contains(&t) => a.admitted.push(t),
            _ => {
                a.refused += 1;
                let challenge = format!(
                    "Bearer error=\"invalid_token\", resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\", scope=\"mcp:tools\"",
                    a.base
                );
                return (StatusCode::UNAUTHORIZED, [("www-authenticate", challenge)])
                    .into_response();
            }
        }
        (a.upstream.clone(), a.base.clone())
    };
    let _ = base;
    let mut req = reqwest::Client::new()
        .request(method, &upstream)
        .body(body.to_vec());
    for name in [
        "content-type",
        "accept",
        "mcp-session-id",
        "mcp-protocol-version",
    ] {
        if let Some(v) = headers.get(name).and_then(|v| v.to_str().ok()) {
            req = req.header(name, v);
        }
    }
    let Ok(r) = req.send().await else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let status = StatusCode::from_u16(r.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut out = axum::http::HeaderMap::new();
    for name in ["content-type", "mcp-session-id"] {
        if let Some(v) = r.headers().get(name).and_then(|v| v.to_str().ok())
            && let Ok(v) = v.parse()
        {
            out.insert(name, v);
        }
    }
    let bytes = r.bytes().await.unwrap_or_default();
    (status, out, bytes.to_vec()).into_response()
}

/// Starts the authorization server and resource on `remote`'s runtime.
fn start(remote: &Host, lifetime: u64) -> (String, Shared) {
    let shared: Shared = Arc::default();
    let app = axum::Router::new()
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            axum::routing::get(prm),
        )
        .route(
            "/.well-known/oauth-authorization-server/auth",
            axum::routing::get(as_metadata),
        )
        .route("/auth/register", axum::routing::post(register))
        .route("/auth/authorize", axum::routing::get(authorize))
        .route("/auth/token", axum::routing::post(token))
        .route("/mcp", axum::routing::any(resource))
        .with_state(shared.clone());
    let listener = remote
        .rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    {
        let mut a = shared.lock().unwrap();
        a.base = base.clone();
        a.upstream = format!("http://{}/remote/v1/mcp", remote.addr());
        a.lifetime = lifetime;
    }
    remote
        .rt
        .spawn(async move { axum::serve(listener, app).await });
    (base, shared)
}

/// A browser that follows the authorization redirect to the loopback
/// listener, as a user clicking "allow" would.
fn browse(url: &str) {
    let url = url.to_owned();
    tokio::spawn(async move {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let r = http.get(&url).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 302, "{:?}", r.text().await);
        let location = r.headers()["location"].to_str().unwrap().to_owned();
        let page = http.get(&location).send().await.unwrap();
        assert_eq!(page.status().as_u16(), 200);
    });
}

fn remote() -> Host {
    host(
        &[(
            "remote",
            &[
                ("agent.toml", "model = \"test\"\n"),
                ("instructions.md", "Remote.\n"),
                ("tools/echo.toml", ECHO_TOOL),
            ],
        )],
        ServeOptions::default(),
    )
}

#[test]
fn login_stores_tokens_and_serving_refreshes_them_before_expiry_and_on_401() {
    let remote = remote();
    // 30 s tokens: inside the refresh margin, so each is refreshed before use.
    let (base, auth) = start(&remote, 30);
    let project = tempfile::tempdir().unwrap();
    let agent = project.path().join("desk/agent");
    super::mcp::write(&agent.join("instructions.md"), "Desk.\n");
    super::mcp::write(
        &agent.join("mcp-connections/far.toml"),
        &format!("url = \"${{FAR_URL:-{base}/mcp}}\"\noauth = true\n"),
    );
    let state = project.path().join("state");
    let dir = project.path().join("desk");
    let status = || agentkit::mcp_oauth::status(&dir, Some(&state)).unwrap();
    assert_eq!(status()[0].login.as_ref().unwrap().state, "logged-out");

    let request = agentkit::mcp_oauth::LoginRequest {
        dir: dir.clone(),
        agent: None,
        connection: "far".into(),
        state_root: Some(state.clone()),
        env: agentkit::EnvLookup::empty(),
        extra_scope: None,
    };
    let outcome = remote
        .rt
        .block_on(agentkit::mcp_oauth::login(&request, browse))
        .unwrap();
    assert_eq!(outcome.issuer, format!("{base}/auth"));
    assert_eq!(outcome.scope.as_deref(), Some("mcp:tools"));
    let file = state.join("desk/mcp-oauth/far.json");
    assert_eq!(outcome.token_file, file);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    let stored: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(
        (
            stored["accessToken"].clone(),
            stored["refreshToken"].clone()
        ),
        (json!("at-1"), json!("rt-1"))
    );
    let login = status()[0].login.clone().unwrap();
    assert_eq!((login.state, login.refreshable), ("expiring", true));

    // Serving: the token nears expiry, so it is refreshed before the first
    // request; the resource only ever sees the fresh one.
    auth.lock().unwrap().lifetime = 3600;
    let served = agentkit::ServeOptions {
        port: 0,
        state_root: Some(state.clone()),
        env: agentkit::EnvLookup::empty(),
        ..ServeOptions::default()
    };
    let handle = remote.rt.block_on(agentkit::serve(&dir, served)).unwrap();
    let mcp = handle.mcp("desk").unwrap();
    let call = || {
        remote.rt.block_on(mcp.call_tool(
            "far",
            "call_tool",
            json!({"name": "echo", "input": {"text": "far"}}),
            0,
        ))
    };
    let out = call().unwrap();
    assert!(!out.is_error, "{out:?}");
    assert_eq!(
        out.model_output()["result"],
        json!({"echo": {"text": "far"}})
    );
    {
        let a = auth.lock().unwrap();
        assert_eq!(a.grants, ["authorization_code", "refresh_token"]);
        assert!(a.admitted.iter().all(|t| t == "at-2"), "{:?}", a.admitted);
        assert_eq!(a.refused, 1, "only discovery's unauthenticated probe");
    }
    assert_eq!(status()[0].login.as_ref().unwrap().state, "valid");

    // The server revokes the token: the next call is refused with 401,
    // refreshed once, and retried.
    auth.lock().unwrap().access.remove("at-2");
    let out = call().unwrap();
    assert!(!out.is_error, "{out:?}");
    {
        let a = auth.lock().unwrap();
        assert_eq!(
            a.grants,
            ["authorization_code", "refresh_token", "refresh_token"]
        );
        assert_eq!(a.admitted.last().map(String::as_str), Some("at-3"));
        assert!(a.refused >= 2, "the revoked token was refused");
    }
    let stored: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(stored["accessToken"], "at-3");

    // The server wants more scopes for calls (403 insufficient_scope): the
    // call fails saying how to log in for them, and nothing is refreshed.
    auth.lock().unwrap().insufficient = true;
    let grants = auth.lock().unwrap().grants.len();
    let err = call().unwrap_err();
    let agentkit::mcp::ClientError::InsufficientScope { scope, .. } = &err else {
        panic!("not an insufficient scope: {err}");
    };
    assert_eq!(scope.as_deref(), Some("mcp:tools mcp:write"));
    assert!(
        err.to_string()
            .contains("agentkit mcp login far --scope 'mcp:tools mcp:write'"),
        "{err}"
    );
    assert_eq!(auth.lock().unwrap().grants.len(), grants);
    // `--scope` asks for the extra scopes on top of the advertised one.
    auth.lock().unwrap().scope = Some("mcp:tools mcp:write".into());
    let stepped = agentkit::mcp_oauth::LoginRequest {
        extra_scope: Some("mcp:write".into()),
        ..request
    };
    let outcome = remote
        .rt
        .block_on(agentkit::mcp_oauth::login(&stepped, browse))
        .unwrap();
    assert_eq!(outcome.scope.as_deref(), Some("mcp:tools mcp:write"));
    remote.rt.block_on(handle.close());
}

#[test]
fn a_connection_that_is_not_logged_in_says_how_to_log_in() {
    let remote = remote();
    let (base, _auth) = start(&remote, 3600);
    let project = tempfile::tempdir().unwrap();
    let dir = project.path().join("desk");
    super::mcp::write(&dir.join("agent/instructions.md"), "Desk.\n");
    super::mcp::write(
        &dir.join("agent/mcp-connections/far.toml"),
        &format!("url = \"{base}/mcp\"\noauth = true\n"),
    );
    let handle = remote
        .rt
        .block_on(agentkit::serve(
            &dir,
            ServeOptions {
                port: 0,
                state_root: Some(project.path().join("state")),
                ..ServeOptions::default()
            },
        ))
        .unwrap();
    let mcp = handle.mcp("desk").unwrap();
    let err = remote.rt.block_on(mcp.list_tools("far", 0)).unwrap_err();
    assert!(
        err.to_string().contains("run `agentkit mcp login far`"),
        "{err}"
    );
    remote.rt.block_on(handle.close());
}
