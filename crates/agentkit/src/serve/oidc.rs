//! OIDC sign-in at the host (`ServeOptions::oidc`, `--oidc-issuer`): the
//! provider's discovery document fetched at start, its keys through the
//! `jwt` policy's fetcher, and the routes of the authorization-code flow
//! with PKCE: `GET /login?next=…` (to the provider), `GET
//! /login/callback` (the code exchanged at the token endpoint, the ID
//! token checked, the session cookie set), `GET|POST /logout` (the
//! cookies cleared; on to the provider's end-session endpoint when it
//! has one) and `GET /logout/callback` (back from there). Every
//! fetch has a timeout and a size cap; no message carries the client
//! secret, a code, a token or a cookie. The cookie and token checks are
//! `agentkit_auth::Oidc`'s; every agent's built-in chain takes its policy
//! first (`auth.rs`).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use agentkit_auth::{Oidc, OidcConfig, OidcMetadata, Secret, form_encode};
use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;

use crate::error::{Error, Result};
use agentkit_channels::Env as EnvLookup;

/// How one fetch from the provider may take at most.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest discovery or token response read.
const MAX_RESPONSE_BYTES: usize = 256 * 1024;

/// `[auth.oidc]` of the host: who signs people in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidcOptions {
    /// The issuer URL (`https://login.example.com/realms/acme`): its
    /// `/.well-known/openid-configuration` is fetched at start.
    pub issuer: String,
    pub client_id: String,
    /// The client secret **by reference**: `${VAR}`, `${file:/path}` or
    /// `${secret:name}` (never the value itself, which would sit in a
    /// process list or a file). `None`: a public client (PKCE only).
    pub client_secret: Option<String>,
    /// Scopes besides `openid` (default `profile`, `email`).
    pub scopes: Vec<String>,
    /// Accepted `aud` of the provider's access tokens sent as bearer
    /// tokens, besides the client id.
    pub audiences: Vec<String>,
    /// How long a session cookie lasts (default 8 hours).
    pub session_ttl: Duration,
    /// Tolerance for `exp`/`nbf` (default 60 s, at most 300 s).
    pub clock_skew: Duration,
    /// The claim naming the principal, after `oidc:` (default `sub`).
    pub principal_claim: String,
}

impl OidcOptions {
    /// Options with the defaults for `issuer` and `client_id`.
    pub fn new(issuer: impl Into<String>, client_id: impl Into<String>) -> OidcOptions {
        OidcOptions {
            issuer: issuer.into(),
            client_id: client_id.into(),
            client_secret: None,
            scopes: vec!["profile".to_owned(), "email".to_owned()],
            audiences: Vec::new(),
            session_ttl: Duration::from_secs(8 * 3600),
            clock_skew: Duration::from_secs(60),
            principal_claim: "sub".to_owned(),
        }
    }
}

/// What the host needs besides the options to start the client.
pub(crate) struct Start<'a> {
    pub(crate) env: &'a EnvLookup,
    pub(crate) secret_command: Option<&'a crate::secrets::SecretCommand>,
    /// The host's public origin (`--public-url`, else the bound address).
    pub(crate) origin: &'a str,
    /// Claims the agents' role rules read (kept in the session cookie).
    pub(crate) keep_claims: BTreeSet<String>,
    /// `--public-url` was given: CSRF compares `Origin` with it.
    pub(crate) public: bool,
}

/// Resolves the client secret, fetches the discovery document and makes
/// the client. Any failure keeps the host from starting.
pub(crate) async fn start(options: &OidcOptions, start: Start<'_>) -> Result<Oidc> {
    let config_error = |message: String| Error::Config {
        message: format!("OIDC ({}): {message}", options.issuer),
    };
    if options.clock_skew > Duration::from_secs(300) {
        return Err(config_error(
            "the clock skew is at most 300 seconds".to_owned(),
        ));
    }
    let secret = match &options.client_secret {
        Some(reference) => Some(
            crate::secrets::resolve_reference(reference, start.env, start.secret_command)
                .await
                .map_err(|e| config_error(format!("the client secret: {e}")))?,
        ),
        None => None,
    };
    let issuer = options.issuer.trim_end_matches('/');
    let url = format!("{issuer}/.well-known/openid-configuration");
    let doc = fetch(&url)
        .await
        .map_err(|e| config_error(format!("discovery: {e}")))?;
    let metadata = OidcMetadata::parse(&doc, &options.issuer).map_err(config_error)?;
    let config = OidcConfig {
        issuer: options.issuer.clone(),
        client_id: options.client_id.clone(),
        client_secret: secret.map(Secret::new),
        scopes: options.scopes.clone(),
        audiences: options.audiences.clone(),
        session_ttl: options.session_ttl,
        clock_skew: options.clock_skew,
        principal_claim: options.principal_claim.clone(),
        keep_claims: start.keep_claims,
        public_origin: start.public.then(|| start.origin.to_owned()),
    };
    let oidc = Oidc::new(config, metadata, super::jwks::fetcher()).map_err(config_error)?;
    tracing::info!(issuer = %options.issuer, client = %options.client_id, "OIDC sign-in at /login");
    Ok(oidc)
}

/// GETs `url` (200 only, capped, with a timeout).
async fn fetch(url: &str) -> std::result::Result<Vec<u8>, String> {
    super::jwks::get_json_capped(url, FETCH_TIMEOUT, MAX_RESPONSE_BYTES).await
}

#[derive(Clone)]
struct Login {
    oidc: Oidc,
    /// `<origin>/login/callback`, registered at the provider.
    redirect_uri: Arc<str>,
    /// `<origin>/logout/callback`, registered at the provider as the
    /// post-logout redirect URI (when it has an end-session endpoint).
    post_logout_uri: Arc<str>,
}

/// The sign-in routes, at the host's root.
pub(crate) fn routes(oidc: Oidc, origin: &str) -> Router {
    let origin = origin.trim_end_matches('/');
    let state = Login {
        oidc,
        redirect_uri: format!("{origin}/login/callback").into(),
        post_logout_uri: format!("{origin}/logout/callback").into(),
    };
    Router::new()
        .route("/login", get(login))
        .route("/login/callback", get(callback))
        .route("/logout", get(logout).post(logout))
        .route("/logout/callback", get(logout_callback))
        .with_state(state)
}

#[derive(Deserialize)]
struct Next {
    next: Option<String>,
}

async fn login(State(login): State<Login>, Query(q): Query<Next>) -> Response {
    let next = q.next.as_deref().unwrap_or("/");
    match login.oidc.begin_login(&login.redirect_uri, next) {
        Ok(start) => redirect(&start.location, &[start.set_cookie]),
        Err(e) => failed(&e),
    }
}

#[derive(Deserialize)]
struct Callback {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
}

#[derive(Deserialize)]
struct TokenResponse {
    id_token: Option<String>,
}

async fn callback(
    State(login): State<Login>,
    Query(q): Query<Callback>,
    headers: HeaderMap,
) -> Response {
    if let Some(error) = q.error {
        // The provider's error code (`access_denied`), not a secret.
        return failed(&format!("the provider answered `{error}`"));
    }
    let (Some(code), Some(state)) = (q.code, q.state) else {
        return failed("the callback has no code or state");
    };
    let pending = match login.oidc.pending_login(&cookie_header(&headers), &state) {
        Ok(p) => p,
        Err(e) => return failed(&e),
    };
    let id_token = match exchange(&login, &code, pending.code_verifier()).await {
        Ok(t) => t,
        Err(e) => return failed(&format!("the token request: {e}")),
    };
    match login.oidc.finish_login(&id_token, &pending).await {
        Ok((set_cookies, principal)) => {
            tracing::info!(%principal, "signed in");
            redirect(&pending.next, &set_cookies)
        }
        Err(e) => failed(&e),
    }
}

/// The authorization code for an ID token at the token endpoint
/// (`client_secret_basic` when the client has a secret).
async fn exchange(
    login: &Login,
    code: &str,
    verifier: &str,
) -> std::result::Result<String, String> {
    let config = login.oidc.config();
    let mut form = vec![
        ("grant_type", "authorization_code"),
        ("code", code),
        ("redirect_uri", &login.redirect_uri),
        ("code_verifier", verifier),
    ];
    if config.client_secret.is_none() {
        form.push(("client_id", &config.client_id));
    }
    let body = form
        .iter()
        .map(|(k, v)| format!("{k}={}", form_encode(v)))
        .collect::<Vec<_>>()
        .join("&");
    let client = agentkit_harness::http_client().map_err(|e| e.to_string())?;
    let mut req = client
        .post(&login.oidc.metadata().token_endpoint)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "application/json")
        .timeout(FETCH_TIMEOUT)
        .body(body);
    if let Some(secret) = &config.client_secret {
        // RFC 6749 §2.3.1: both parts form-encoded before Basic.
        req = req.basic_auth(
            form_encode(&config.client_id),
            Some(form_encode(secret.expose())),
        );
    }
    let resp = req
        .send()
        .await
        .map_err(|e| format!("request failed: {}", e.without_url()))?;
    let bytes = super::jwks::read_capped(resp, MAX_RESPONSE_BYTES).await?;
    let parsed: TokenResponse =
        serde_json::from_slice(&bytes).map_err(|_| "the token response is not JSON".to_owned())?;
    parsed
        .id_token
        .ok_or_else(|| "the token response has no id_token".to_owned())
}

/// The request's `Cookie` headers, as one.
fn cookie_header(headers: &HeaderMap) -> String {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Clears the local cookies; with an end-session endpoint, sends the
/// browser on to the provider (RP-initiated logout), else to `next`.
async fn logout(State(login): State<Login>, Query(q): Query<Next>, headers: HeaderMap) -> Response {
    let next = q
        .next
        .filter(|n| n.starts_with('/') && !n.starts_with("//"))
        .unwrap_or_else(|| "/".to_owned());
    match login
        .oidc
        .begin_logout(&cookie_header(&headers), &login.post_logout_uri, &next)
    {
        Ok(Some(start)) => {
            tracing::info!("signed out here; on to the provider's end-session endpoint");
            redirect(&start.location, &start.set_cookies)
        }
        Ok(None) => redirect(&next, &login.oidc.logout_cookies()),
        Err(e) => {
            // The local session ends either way.
            tracing::warn!("logout at the provider cannot start: {e}");
            redirect(&next, &login.oidc.logout_cookies())
        }
    }
}

#[derive(Deserialize)]
struct LogoutCallback {
    state: Option<String>,
}

/// Back from the provider's end-session endpoint: on to where the logout
/// started when its `state` matches, else to `/`.
async fn logout_callback(
    State(login): State<Login>,
    Query(q): Query<LogoutCallback>,
    headers: HeaderMap,
) -> Response {
    let state = q.state.unwrap_or_default();
    let (next, clear) = login.oidc.finish_logout(&cookie_header(&headers), &state);
    let next = next.unwrap_or_else(|e| {
        tracing::warn!("the logout callback: {e}");
        "/".to_owned()
    });
    redirect(&next, &[clear])
}

fn redirect(location: &str, cookies: &[String]) -> Response {
    let mut resp = StatusCode::SEE_OTHER.into_response();
    let headers = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(location) {
        headers.insert(header::LOCATION, v);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    for c in cookies {
        if let Ok(v) = HeaderValue::from_str(c) {
            headers.append(header::SET_COOKIE, v);
        }
    }
    resp
}

/// A failed sign-in: the reason to the log, a plain page to the browser.
fn failed(reason: &str) -> Response {
    tracing::warn!("sign-in failed: {reason}");
    (
        StatusCode::BAD_REQUEST,
        [(header::CACHE_CONTROL, "no-store")],
        "Sign-in failed; the server log says why. Try again at /login.\n",
    )
        .into_response()
}
