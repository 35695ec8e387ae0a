//! OAuth for HTTP MCP connections (`oauth = true`), as the MCP
//! specification's authorization section describes it: the authorization
//! server is discovered from the MCP server's protected-resource metadata
//! (RFC 9728, found through the `WWW-Authenticate` challenge or the
//! well-known URL) and its own metadata (RFC 8414, or OpenID discovery);
//! the client registers dynamically (RFC 7591); the user authorizes in a
//! browser (authorization code with PKCE S256, a loopback redirect on
//! 127.0.0.1); the tokens are kept in one file per connection, mode 0600,
//! and refreshed before they expire or when the server answers 401.
//!
//! Tokens never reach logs or error messages.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use reqwest::Url;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Digest as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Tokens this close to expiry are refreshed before use.
pub const REFRESH_MARGIN: Duration = Duration::from_secs(60);

/// How long `login` waits for the browser to come back.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

/// Why an OAuth step failed. Messages name the URL and the step, never a
/// token or secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OAuthError {
    #[error("{0}")]
    Discovery(String),
    #[error("client registration failed: {0}")]
    Registration(String),
    #[error("authorization failed: {0}")]
    Authorization(String),
    #[error("the token request failed: {0}")]
    Token(String),
    #[error("not logged in: run `agentkit mcp login {connection}` first")]
    NotLoggedIn { connection: String },
    #[error("`{path}`: {message}")]
    Store { path: PathBuf, message: String },
}

/// What is kept for one connection (`<stateRoot>/<slug>/mcp-oauth/<name>.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredTokens {
    /// The MCP server's canonical resource URI (RFC 8707 `resource`).
    pub resource: String,
    pub issuer: String,
    pub token_endpoint: String,
    pub client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// `none`, `client_secret_post` or `client_secret_basic`.
    pub token_endpoint_auth_method: String,
    pub access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// Unix seconds; `None` when the server gave no lifetime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

impl StoredTokens {
    fn expires_within(&self, margin: Duration) -> bool {
        self.expires_at
            .is_some_and(|at| at <= now_secs().saturating_add(margin.as_secs()))
    }
}

/// A connection's login state, for `agentkit mcp status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenState {
    /// `logged-out`, `valid`, `expiring` (refreshed on next use), or
    /// `expired` (no refresh token: log in again), or `unreadable`.
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// Seconds until the access token expires (negative once it has).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_in: Option<i64>,
    pub refreshable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

/// The login state in `file`.
pub fn token_state(file: &Path) -> TokenState {
    let logged_out = TokenState {
        state: "logged-out",
        issuer: None,
        expires_in: None,
        refreshable: false,
        scope: None,
    };
    match read_tokens(file) {
        Ok(None) => logged_out,
        Err(_) => TokenState {
            state: "unreadable",
            ..logged_out
        },
        Ok(Some(t)) => {
            let refreshable = t.refresh_token.is_some();
            let state = if !t.expires_within(REFRESH_MARGIN) {
                "valid"
            } else if refreshable {
                "expiring"
            } else if t.expires_within(Duration::ZERO) {
                "expired"
            } else {
                "valid" // usable a little longer, and nothing to refresh it with
            };
            TokenState {
                state,
                issuer: Some(t.issuer.clone()),
                expires_in: t.expires_at.map(|at| {
                    i64::try_from(at).unwrap_or(i64::MAX) - i64::try_from(now_secs()).unwrap_or(0)
                }),
                refreshable,
                scope: t.scope.clone(),
            }
        }
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn store_error(path: &Path, message: impl std::fmt::Display) -> OAuthError {
    OAuthError::Store {
        path: path.to_path_buf(),
        message: message.to_string(),
    }
}

/// Reads a token file; `None` when there is none.
pub fn read_tokens(file: &Path) -> Result<Option<StoredTokens>, OAuthError> {
    match std::fs::read(file) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| store_error(file, format!("not a token file: {e}"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(store_error(file, e)),
    }
}

/// Writes a token file readable by its owner only (0600, its folder 0700),
/// replacing the old one atomically.
pub fn write_tokens(file: &Path, tokens: &StoredTokens) -> Result<(), OAuthError> {
    use std::io::Write as _;
    #[cfg(unix)]
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
    let dir = file
        .parent()
        .ok_or_else(|| store_error(file, "has no folder"))?;
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    builder.mode(0o700);
    builder.create(dir).map_err(|e| store_error(dir, e))?;
    let tmp = file.with_extension("json.tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    options.mode(0o600);
    let body = serde_json::to_vec_pretty(tokens).map_err(|e| store_error(file, e))?;
    let mut f = options.open(&tmp).map_err(|e| store_error(&tmp, e))?;
    f.write_all(&body)
        .and_then(|()| f.sync_all())
        .map_err(|e| store_error(&tmp, e))?;
    std::fs::rename(&tmp, file).map_err(|e| store_error(file, e))
}

/// What login needs.
#[derive(Debug, Clone)]
pub struct LoginOptions {
    /// The connection's name, for messages.
    pub connection: String,
    /// The MCP server's URL (`${VAR}` resolved).
    pub url: String,
    /// Where the tokens go.
    pub token_file: PathBuf,
    /// The client name sent when registering.
    pub client_name: String,
    /// Who the client is when it does not register dynamically.
    pub client: OAuthClient,
    /// Scopes to ask for on top of the discovered ones: what a server's
    /// `403 insufficient_scope` challenge named (scope step-up).
    pub extra_scope: Option<String>,
}

/// `a` and `b`'s space-separated scopes, each once, in order.
fn union_scopes(a: Option<&str>, b: Option<&str>) -> Option<String> {
    let mut out: Vec<&str> = Vec::new();
    for s in a.into_iter().chain(b).flat_map(str::split_whitespace) {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    (!out.is_empty()).then(|| out.join(" "))
}

/// How the client identifies itself, in this order: a client registered
/// with the authorization server beforehand (`client_id`, with its
/// `client_secret` for a confidential client); else, where the server
/// advertises `client_id_metadata_document_supported`, the HTTPS URL of
/// this client's metadata document as its client id; else dynamic
/// registration (RFC 7591).
#[derive(Debug, Clone, Default)]
pub struct OAuthClient {
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    pub metadata_url: Option<String>,
}

/// The HTTP client of every OAuth request: no redirects followed (a
/// redirect from a token endpoint is an error, not a hop), bounded time.
fn http() -> Result<reqwest::Client, OAuthError> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| OAuthError::Discovery(format!("cannot build an HTTP client: {e}")))
}

/// What discovery found.
#[derive(Debug, Clone)]
struct Discovered {
    resource: String,
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    registration_endpoint: Option<String>,
    scope: Option<String>,
    /// `token_endpoint_auth_methods_supported` (empty when not advertised).
    token_auth_methods: Vec<String>,
    /// `client_id_metadata_document_supported`.
    client_id_metadata_documents: bool,
    /// `authorization_response_iss_parameter_supported` (RFC 9207): the
    /// redirect must then carry `iss`.
    iss_in_response: bool,
}

/// One `key="value"` parameter of a `WWW-Authenticate: Bearer …` challenge.
pub(crate) fn challenge_param(header: &str, key: &str) -> Option<String> {
    let mut rest = header;
    while let Some(at) = rest.find(key) {
        let before = rest[..at].chars().next_back();
        let after = &rest[at + key.len()..];
        rest = after;
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let Some(value) = after.trim_start().strip_prefix('=') else {
            continue;
        };
        let value = value.trim_start();
        return Some(match value.strip_prefix('"') {
            Some(quoted) => quoted.split('"').next().unwrap_or_default().to_owned(),
            None => value
                .split([',', ' '])
                .next()
                .unwrap_or_default()
                .to_owned(),
        });
    }
    None
}

/// `{origin}/.well-known/{name}{path}` (the RFC 8414 / 9728 insertion).
fn well_known(url: &Url, name: &str) -> String {
    let path = url.path().trim_end_matches('/');
    format!("{}/.well-known/{name}{path}", origin(url))
}

fn origin(url: &Url) -> String {
    url.origin().ascii_serialization()
}

async fn get_json(http: &reqwest::Client, url: &str) -> Result<Value, String> {
    let r = http
        .get(url)
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| format!("{url}: {}", e.without_url()))?;
    if !r.status().is_success() {
        return Err(format!("{url}: HTTP {}", r.status().as_u16()));
    }
    r.json::<Value>()
        .await
        .map_err(|e| format!("{url}: not JSON: {}", e.without_url()))
}

async fn discover(http: &reqwest::Client, mcp_url: &str) -> Result<Discovered, OAuthError> {
    let url = Url::parse(mcp_url)
        .map_err(|e| OAuthError::Discovery(format!("`{mcp_url}` is not a URL: {e}")))?;
    // An unauthenticated request: the 401's challenge names the resource
    // metadata (and perhaps the scope). First 2026-07-28's
    // `server/discover` (the first request of a client of that revision),
    // then, if that is let through unchallenged, 2025-11-25's `initialize`.
    let discover = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "agentkit", "version": env!("CARGO_PKG_VERSION")},
        "io.modelcontextprotocol/clientCapabilities": {}}}});
    let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "agentkit", "version": env!("CARGO_PKG_VERSION")}}});
    let challenged = |r: &reqwest::Response| {
        r.status() == reqwest::StatusCode::UNAUTHORIZED
            || r.headers().contains_key("www-authenticate")
    };
    let first = http
        .post(url.clone())
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "server/discover")
        .json(&discover)
        .send()
        .await;
    let probe = match first {
        Ok(r) if challenged(&r) => r,
        _ => http
            .post(url.clone())
            .header("accept", "application/json, text/event-stream")
            .json(&initialize)
            .send()
            .await
            .map_err(|e| OAuthError::Discovery(format!("{mcp_url}: {}", e.without_url())))?,
    };
    let challenge = probe
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    // A server may let `initialize` through and ask for a token only on
    // later requests; its protected-resource metadata says it is protected.
    let unchallenged = (probe.status() != reqwest::StatusCode::UNAUTHORIZED && challenge.is_none())
        .then(|| probe.status().as_u16());
    let mut candidates = Vec::new();
    if let Some(meta) = challenge
        .as_deref()
        .and_then(|c| challenge_param(c, "resource_metadata"))
    {
        candidates.push(meta);
    }
    candidates.push(well_known(&url, "oauth-protected-resource"));
    candidates.push(format!(
        "{}/.well-known/oauth-protected-resource",
        origin(&url)
    ));
    let mut tried = Vec::new();
    let mut prm = None;
    for c in candidates {
        match get_json(http, &c).await {
            Ok(v) => {
                prm = Some(v);
                break;
            }
            Err(e) => tried.push(e),
        }
    }
    if let (Some(status), None) = (unchallenged, &prm) {
        return Err(OAuthError::Discovery(format!(
            "{mcp_url} answered HTTP {status} without asking for authorization and publishes no protected-resource metadata; it may not need `oauth = true`"
        )));
    }
    // Without protected-resource metadata, the 2025-03-26 revision of the
    // specification applies: the MCP server's origin is the authorization
    // server, with default endpoints when it has no metadata either.
    let legacy = prm.is_none();
    if legacy {
        tracing::info!(url = %mcp_url, tried = %tried.join("; "), "no protected-resource metadata; using the server's origin as the authorization server");
    }
    let prm = prm.unwrap_or_else(|| serde_json::json!({"authorization_servers": [origin(&url)]}));
    if let Some(resource) = prm["resource"].as_str()
        && !resource_covers(resource, &url)
    {
        return Err(OAuthError::Discovery(format!(
            "the protected-resource metadata of {mcp_url} is for `{resource}`, not for this server; refusing to authorize"
        )));
    }
    let issuer = prm["authorization_servers"]
        .get(0)
        .and_then(Value::as_str)
        .ok_or_else(|| {
            OAuthError::Discovery(format!(
                "the protected-resource metadata of {mcp_url} names no `authorization_servers`"
            ))
        })?
        .to_owned();
    let resource = prm["resource"]
        .as_str()
        .map_or_else(|| mcp_url.to_owned(), str::to_owned);
    let scope = challenge
        .as_deref()
        .and_then(|c| challenge_param(c, "scope"))
        .or_else(|| {
            let scopes: Vec<&str> = prm["scopes_supported"]
                .as_array()?
                .iter()
                .filter_map(Value::as_str)
                .collect();
            (!scopes.is_empty()).then(|| scopes.join(" "))
        });
    let as_url = Url::parse(&issuer).map_err(|e| {
        OAuthError::Discovery(format!("authorization server `{issuer}` is not a URL: {e}"))
    })?;
    let path = as_url.path().trim_end_matches('/').to_owned();
    let mut candidates = vec![
        well_known(&as_url, "oauth-authorization-server"),
        well_known(&as_url, "openid-configuration"),
    ];
    if !path.is_empty() {
        candidates.push(format!(
            "{}{path}/.well-known/openid-configuration",
            origin(&as_url)
        ));
    }
    let mut tried = Vec::new();
    let mut meta = None;
    for c in candidates {
        match get_json(http, &c).await {
            Ok(v) => {
                meta = Some(v);
                break;
            }
            Err(e) => tried.push(e),
        }
    }
    let meta = match meta {
        Some(meta) => meta,
        // 2025-03-26: the default endpoints at the server's origin.
        None if legacy => serde_json::json!({
            "authorization_endpoint": format!("{issuer}/authorize"),
            "token_endpoint": format!("{issuer}/token"),
            "registration_endpoint": format!("{issuer}/register"),
        }),
        None => {
            return Err(OAuthError::Discovery(format!(
                "no authorization-server metadata (RFC 8414) for `{issuer}`: {}",
                tried.join("; ")
            )));
        }
    };
    // Metadata is the issuer's only when it says so, exactly (RFC 8414
    // §3.3, no normalization): another issuer's endpoints are not used.
    if let Some(named) = meta["issuer"].as_str()
        && named != issuer
    {
        return Err(OAuthError::Discovery(format!(
            "the authorization-server metadata fetched for `{issuer}` names the issuer `{named}`; refusing to use it"
        )));
    }
    let endpoint = |key: &str| meta[key].as_str().map(str::to_owned);
    let methods = meta["code_challenge_methods_supported"].as_array();
    let pkce = methods.is_some_and(|m| m.iter().any(|v| v == "S256"));
    // Metadata that lists its PKCE methods must list S256; a legacy server
    // without that list still gets PKCE S256 (the client always sends it).
    let unadvertised_legacy = legacy && methods.is_none();
    if !(pkce || unadvertised_legacy) {
        return Err(OAuthError::Discovery(format!(
            "`{issuer}` does not advertise PKCE with S256 (`code_challenge_methods_supported`); agentkit does not authorize without it"
        )));
    }
    Ok(Discovered {
        resource,
        issuer,
        authorization_endpoint: endpoint("authorization_endpoint").ok_or_else(|| {
            OAuthError::Discovery("the metadata has no `authorization_endpoint`".into())
        })?,
        token_endpoint: endpoint("token_endpoint")
            .ok_or_else(|| OAuthError::Discovery("the metadata has no `token_endpoint`".into()))?,
        registration_endpoint: endpoint("registration_endpoint"),
        scope,
        token_auth_methods: meta["token_endpoint_auth_methods_supported"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        iss_in_response: meta["authorization_response_iss_parameter_supported"].as_bool()
            == Some(true),
        client_id_metadata_documents: meta["client_id_metadata_document_supported"]
            .as_bool()
            .unwrap_or(false),
    })
}

/// Whether the resource a protected-resource metadata document names
/// covers `server`: the same origin, and the server's path equal to or
/// under the resource's path (RFC 9728 section 3.3; a document for another
/// resource is refused, so a server cannot send its tokens elsewhere).
fn resource_covers(resource: &str, server: &Url) -> bool {
    let Ok(resource) = Url::parse(resource) else {
        return false;
    };
    if resource.origin() != server.origin() {
        return false;
    }
    let base = resource.path().trim_end_matches('/');
    let path = server.path().trim_end_matches('/');
    path == base || path.starts_with(&format!("{base}/"))
}

/// A client registered with RFC 7591.
struct Registered {
    client_id: String,
    client_secret: Option<String>,
    auth_method: String,
}

/// The client this login uses: pre-registered, a client ID metadata
/// document, or dynamically registered (see [`OAuthClient`]).
async fn client_for(
    http: &reqwest::Client,
    found: &Discovered,
    redirect_uri: &str,
    options: &LoginOptions,
) -> Result<Registered, OAuthError> {
    if let Some(client_id) = options.client.client_id.clone().filter(|c| !c.is_empty()) {
        let client_secret = options
            .client
            .client_secret
            .clone()
            .filter(|c| !c.is_empty());
        let supports = |m: &str| {
            found.token_auth_methods.is_empty() || found.token_auth_methods.iter().any(|x| x == m)
        };
        let auth_method = match &client_secret {
            None => "none",
            Some(_) if supports("client_secret_basic") => "client_secret_basic",
            Some(_) if supports("client_secret_post") => "client_secret_post",
            Some(_) => {
                return Err(OAuthError::Registration(format!(
                    "`{}` accepts none of the token endpoint auth methods a client secret needs (client_secret_basic, client_secret_post); it lists {}",
                    found.issuer,
                    found.token_auth_methods.join(", ")
                )));
            }
        };
        return Ok(Registered {
            client_id,
            client_secret,
            auth_method: auth_method.to_owned(),
        });
    }
    if let Some(url) = options
        .client
        .metadata_url
        .clone()
        .filter(|u| !u.is_empty())
        && found.client_id_metadata_documents
    {
        return Ok(Registered {
            client_id: url,
            client_secret: None,
            auth_method: "none".into(),
        });
    }
    register(http, found, redirect_uri, &options.client_name).await
}

async fn register(
    http: &reqwest::Client,
    found: &Discovered,
    redirect_uri: &str,
    client_name: &str,
) -> Result<Registered, OAuthError> {
    let Some(endpoint) = &found.registration_endpoint else {
        return Err(OAuthError::Registration(format!(
            "`{}` offers no dynamic client registration (`registration_endpoint`); set `oauth_client_id` (and `oauth_client_secret`) of a client registered with it, or `oauth_client_metadata_url` if it accepts client ID metadata documents",
            found.issuer
        )));
    };
    let mut body = serde_json::json!({
        "client_name": client_name,
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        // A client whose redirect is a loopback listener (SEP-837).
        "application_type": "native",
    });
    if let Some(scope) = &found.scope {
        body["scope"] = Value::String(scope.clone());
    }
    let r = http
        .post(endpoint)
        .json(&body)
        .send()
        .await
        .map_err(|e| OAuthError::Registration(format!("{endpoint}: {}", e.without_url())))?;
    let status = r.status();
    let v: Value = r.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        return Err(OAuthError::Registration(format!(
            "{endpoint}: HTTP {}: {}",
            status.as_u16(),
            v["error_description"]
                .as_str()
                .or(v["error"].as_str())
                .unwrap_or("")
        )));
    }
    let client_id = v["client_id"]
        .as_str()
        .ok_or_else(|| OAuthError::Registration(format!("{endpoint} returned no `client_id`")))?
        .to_owned();
    let client_secret = v["client_secret"].as_str().map(str::to_owned);
    let auth_method = v["token_endpoint_auth_method"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| {
            if client_secret.is_some() {
                "client_secret_basic".into()
            } else {
                "none".into()
            }
        });
    Ok(Registered {
        client_id,
        client_secret,
        auth_method,
    })
}

/// A random URL-safe string of 43 characters (256 bits).
fn random_token() -> String {
    let mut bytes = [0u8; 32];
    bytes[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    bytes[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The PKCE S256 challenge of `verifier`.
fn challenge_of(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier))
}

/// `application/x-www-form-urlencoded` of `pairs`.
fn form(pairs: &[(&str, &str)]) -> String {
    // The URL's query serializer is the form encoder (WHATWG); the URL
    // itself is a constant and always parses.
    match Url::parse("http://form.invalid/") {
        Ok(mut url) => {
            url.query_pairs_mut().extend_pairs(pairs);
            url.query().unwrap_or_default().to_owned()
        }
        Err(_) => String::new(),
    }
}

/// The token endpoint's answer.
#[derive(Debug, Deserialize)]
struct TokenResponse {
    access_token: String,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    expires_in: Option<u64>,
    #[serde(default)]
    scope: Option<String>,
}

async fn token_request(
    http: &reqwest::Client,
    endpoint: &str,
    client_id: &str,
    client_secret: Option<&str>,
    auth_method: &str,
    params: &[(&str, &str)],
) -> Result<TokenResponse, OAuthError> {
    let mut pairs: Vec<(&str, &str)> = params.to_vec();
    let mut req = http
        .post(endpoint)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "application/json");
    match (auth_method, client_secret) {
        ("client_secret_basic", Some(secret)) => req = req.basic_auth(client_id, Some(secret)),
        ("client_secret_post", Some(secret)) => {
            pairs.push(("client_id", client_id));
            pairs.push(("client_secret", secret));
        }
        _ => pairs.push(("client_id", client_id)),
    }
    let r = req
        .body(form(&pairs))
        .send()
        .await
        .map_err(|e| OAuthError::Token(format!("{endpoint}: {}", e.without_url())))?;
    let status = r.status();
    let text = r.text().await.unwrap_or_default();
    if !status.is_success() {
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        return Err(OAuthError::Token(format!(
            "{endpoint}: HTTP {}: {}",
            status.as_u16(),
            v["error_description"]
                .as_str()
                .or(v["error"].as_str())
                .unwrap_or("")
        )));
    }
    serde_json::from_str(&text)
        .map_err(|e| OAuthError::Token(format!("{endpoint}: not a token response: {e}")))
}

/// What the loopback redirect received.
struct Callback {
    code: String,
    state: String,
    /// The authorization server that answered (RFC 9207), when it said.
    iss: Option<String>,
}

/// Answers one browser request on the loopback listener and returns its
/// `code` and `state` (or the authorization server's `error`).
async fn await_callback(listener: tokio::net::TcpListener) -> Result<Callback, OAuthError> {
    loop {
        let (mut stream, _) = listener
            .accept()
            .await
            .map_err(|e| OAuthError::Authorization(format!("the redirect listener failed: {e}")))?;
        let mut buf = vec![0u8; 8192];
        let mut len = 0;
        while len < buf.len() {
            let n = stream.read(&mut buf[len..]).await.unwrap_or(0);
            if n == 0 {
                break;
            }
            len += n;
            if buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
        }
        let head = String::from_utf8_lossy(&buf[..len]);
        let target = head
            .lines()
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or("/");
        let Ok(url) = Url::parse(&format!("http://127.0.0.1{target}")) else {
            continue;
        };
        if url.path() != "/callback" {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
            continue;
        }
        let get = |k: &str| {
            url.query_pairs()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.into_owned())
        };
        let (status, text, result) = match (get("code"), get("state"), get("error")) {
            (Some(code), Some(state), None) => (
                "200 OK",
                "agentkit is logged in. You can close this tab.",
                Ok(Callback {
                    code,
                    state,
                    iss: get("iss"),
                }),
            ),
            (_, _, Some(error)) => (
                "400 Bad Request",
                "The authorization was refused.",
                Err(OAuthError::Authorization(format!(
                    "the authorization server answered `{error}`: {}",
                    get("error_description").unwrap_or_default()
                ))),
            ),
            _ => (
                "400 Bad Request",
                "The redirect carried no code.",
                Err(OAuthError::Authorization(
                    "the redirect carried no `code` and `state`".into(),
                )),
            ),
        };
        let reply = format!(
            "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
            text.len()
        );
        let _ = stream.write_all(reply.as_bytes()).await;
        let _ = stream.shutdown().await;
        return result;
    }
}

/// Runs the whole login: discovery, registration, the browser step
/// (`open` receives the authorization URL to show or open), the code
/// exchange, and stores the tokens. Returns what was stored.
pub async fn login(
    options: &LoginOptions,
    open: impl FnOnce(&str),
) -> Result<StoredTokens, OAuthError> {
    let http = http()?;
    let mut found = discover(&http, &options.url).await?;
    if options.extra_scope.is_some() {
        found.scope = union_scopes(found.scope.as_deref(), options.extra_scope.as_deref());
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| OAuthError::Authorization(format!("cannot listen on 127.0.0.1: {e}")))?;
    let port = listener
        .local_addr()
        .map_err(|e| OAuthError::Authorization(e.to_string()))?
        .port();
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");
    let client = client_for(&http, &found, &redirect_uri, options).await?;
    let verifier = random_token();
    let state = random_token();
    let mut auth_url = Url::parse(&found.authorization_endpoint).map_err(|e| {
        OAuthError::Discovery(format!("`authorization_endpoint` is not a URL: {e}"))
    })?;
    {
        let mut q = auth_url.query_pairs_mut();
        q.append_pair("response_type", "code")
            .append_pair("client_id", &client.client_id)
            .append_pair("redirect_uri", &redirect_uri)
            .append_pair("code_challenge", &challenge_of(&verifier))
            .append_pair("code_challenge_method", "S256")
            .append_pair("state", &state)
            .append_pair("resource", &found.resource);
        if let Some(scope) = &found.scope {
            q.append_pair("scope", scope);
        }
    }
    open(auth_url.as_str());
    let callback = tokio::time::timeout(LOGIN_TIMEOUT, await_callback(listener))
        .await
        .map_err(|_| {
            OAuthError::Authorization(format!(
                "no answer from the browser within {}s",
                LOGIN_TIMEOUT.as_secs()
            ))
        })??;
    let state_matches: bool =
        subtle::ConstantTimeEq::ct_eq(callback.state.as_bytes(), state.as_bytes()).into();
    if !state_matches {
        return Err(OAuthError::Authorization(
            "the redirect's `state` does not match this login (a stale or forged redirect)".into(),
        ));
    }
    // The redirect says which authorization server answered (RFC 9207,
    // compared exactly): one that advertises it must say it, and whatever
    // says it must be the one this login went to.
    match &callback.iss {
        Some(iss) if *iss != found.issuer => {
            return Err(OAuthError::Authorization(format!(
                "the redirect comes from the issuer `{iss}`, not `{}` (a mix-up); refusing it",
                found.issuer
            )));
        }
        None if found.iss_in_response => {
            return Err(OAuthError::Authorization(format!(
                "`{}` says its redirects carry `iss`, and this one does not; refusing it",
                found.issuer
            )));
        }
        _ => {}
    }
    let answer = token_request(
        &http,
        &found.token_endpoint,
        &client.client_id,
        client.client_secret.as_deref(),
        &client.auth_method,
        &[
            ("grant_type", "authorization_code"),
            ("code", &callback.code),
            ("redirect_uri", &redirect_uri),
            ("code_verifier", &verifier),
            ("resource", &found.resource),
        ],
    )
    .await?;
    let tokens = StoredTokens {
        resource: found.resource,
        issuer: found.issuer,
        token_endpoint: found.token_endpoint,
        client_id: client.client_id,
        client_secret: client.client_secret,
        token_endpoint_auth_method: client.auth_method,
        access_token: answer.access_token,
        refresh_token: answer.refresh_token,
        expires_at: answer.expires_in.map(|s| now_secs().saturating_add(s)),
        scope: answer.scope.or(found.scope),
    };
    write_tokens(&options.token_file, &tokens)?;
    Ok(tokens)
}

/// Exchanges the refresh token for new tokens and stores them.
async fn refresh(file: &Path, old: StoredTokens) -> Result<StoredTokens, OAuthError> {
    let Some(refresh_token) = old.refresh_token.clone() else {
        return Err(OAuthError::Token(
            "the access token expired and there is no refresh token; log in again".into(),
        ));
    };
    let http = http()?;
    let answer = token_request(
        &http,
        &old.token_endpoint,
        &old.client_id,
        old.client_secret.as_deref(),
        &old.token_endpoint_auth_method,
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", &refresh_token),
            ("resource", &old.resource),
        ],
    )
    .await?;
    let tokens = StoredTokens {
        access_token: answer.access_token,
        // A server that does not rotate refresh tokens sends none back.
        refresh_token: answer.refresh_token.or(Some(refresh_token)),
        expires_at: answer.expires_in.map(|s| now_secs().saturating_add(s)),
        scope: answer.scope.or(old.scope.clone()),
        ..old
    };
    write_tokens(file, &tokens)?;
    tracing::info!(issuer = %tokens.issuer, "MCP OAuth tokens refreshed");
    Ok(tokens)
}

/// The access tokens of one connection, refreshed one at a time.
#[derive(Debug)]
pub struct TokenSource {
    connection: String,
    file: PathBuf,
    lock: tokio::sync::Mutex<()>,
}

impl TokenSource {
    pub fn new(connection: impl Into<String>, file: PathBuf) -> TokenSource {
        TokenSource {
            connection: connection.into(),
            file,
            lock: tokio::sync::Mutex::new(()),
        }
    }

    /// A usable access token: the stored one, or a refreshed one when it
    /// expires within [`REFRESH_MARGIN`] or `stale` (the server refused
    /// it) is that very token.
    pub async fn access_token(&self, stale: Option<&str>) -> Result<String, OAuthError> {
        let _one_at_a_time = self.lock.lock().await;
        let tokens = read_tokens(&self.file)?.ok_or_else(|| OAuthError::NotLoggedIn {
            connection: self.connection.clone(),
        })?;
        let refused = stale.is_some_and(|s| s == tokens.access_token);
        let due = tokens.expires_within(REFRESH_MARGIN)
            && (tokens.refresh_token.is_some() || tokens.expires_within(Duration::ZERO));
        if refused || due {
            return Ok(refresh(&self.file, tokens).await?.access_token);
        }
        Ok(tokens.access_token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_and_well_known_urls() {
        let h = r#"Bearer error="invalid_token", resource_metadata="https://mcp.example/.well-known/oauth-protected-resource/mcp", scope="read write""#;
        assert_eq!(
            challenge_param(h, "resource_metadata").as_deref(),
            Some("https://mcp.example/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(challenge_param(h, "scope").as_deref(), Some("read write"));
        assert_eq!(challenge_param("Bearer realm=x", "scope"), None);
        let url = Url::parse("https://mcp.example/tenant/mcp").ok();
        assert_eq!(
            url.map(|u| well_known(&u, "oauth-protected-resource"))
                .as_deref(),
            Some("https://mcp.example/.well-known/oauth-protected-resource/tenant/mcp")
        );
    }

    #[test]
    fn metadata_for_another_resource_is_refused() {
        let server = Url::parse("https://mcp.example/tenant/mcp").ok();
        let covers = |r: &str| server.as_ref().is_some_and(|s| resource_covers(r, s));
        assert!(covers("https://mcp.example/tenant/mcp"));
        assert!(covers("https://mcp.example/tenant/mcp/"));
        assert!(covers("https://mcp.example/tenant"));
        assert!(covers("https://mcp.example"));
        assert!(!covers("https://evil.example/tenant/mcp"));
        assert!(!covers("https://mcp.example/other"));
        assert!(!covers("https://mcp.example/ten"));
        assert!(!covers("http://mcp.example/tenant/mcp"));
        assert!(!covers("not a url"));
    }

    #[test]
    fn pkce_challenge_is_base64url_sha256_of_the_verifier() {
        // Known answer, computed independently:
        // base64.urlsafe_b64encode(hashlib.sha256(v).digest()).rstrip(b"=")
        assert_eq!(
            challenge_of("dBjftJeZ4CVP-mB92K27uhbUJU1p1r7wW1gFWFOEjXk"),
            "bwWFMyPfdG9qreDhH2lmftFx_dFeLDalzcT1gb_j68g"
        );
        let a = random_token();
        assert_eq!(a.len(), 43);
        assert_ne!(a, random_token());
        assert_eq!(form(&[("a", "x y&z"), ("b", "é")]), "a=x+y%26z&b=%C3%A9");
    }

    #[cfg(unix)]
    #[test]
    fn token_files_are_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = dir.path().join("oauth/linear.json");
        let tokens = StoredTokens {
            resource: "r".into(),
            issuer: "i".into(),
            token_endpoint: "t".into(),
            client_id: "c".into(),
            client_secret: None,
            token_endpoint_auth_method: "none".into(),
            access_token: "a".into(),
            refresh_token: None,
            expires_at: Some(now_secs() + 3600),
            scope: None,
        };
        assert!(write_tokens(&file, &tokens).is_ok());
        let mode = std::fs::metadata(&file).map(|m| m.permissions().mode() & 0o777);
        assert_eq!(mode.ok(), Some(0o600));
        assert_eq!(read_tokens(&file), Ok(Some(tokens)));
        assert_eq!(token_state(&file).state, "valid");
        assert_eq!(
            token_state(&dir.path().join("none.json")).state,
            "logged-out"
        );
    }
}
