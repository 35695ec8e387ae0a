//! OIDC sign-in for people: the host is a confidential (or public, PKCE
//! only) client of one OpenID provider. This module is the part without
//! IO: the provider's metadata as discovered, the authorization request
//! (state, nonce, PKCE S256), the ID token's check (through a
//! [`JwtPolicy`] on the provider's JWKS), and the cookies: a sealed
//! pending-login cookie and the session cookie, both HMAC-SHA256 signed
//! and bounded in time. The facade fetches discovery and exchanges the
//! code; [`Oidc::policy`] is the chain link that admits either the
//! provider's access tokens (`Authorization: Bearer`) or the session
//! cookie, the latter only with CSRF proof on state-changing methods.
//!
//! Cookies (no secret ever in them but their own signature):
//!
//! ```text
//! agentkit_login    HttpOnly, SameSite=Lax, 10 min: state, nonce, PKCE verifier, where to go next
//! agentkit_session  HttpOnly, SameSite=Lax, session_ttl: principal, the claims roles read, expiry, CSRF token
//! agentkit_csrf     readable by the page, SameSite=Lax: the same CSRF token, for `X-Agentkit-Csrf`
//! agentkit_idt      HttpOnly, SameSite=Lax, session_ttl: the ID token, for `id_token_hint` at logout
//!                   (only when the provider has an `end_session_endpoint`)
//! agentkit_logout   HttpOnly, SameSite=Lax, 10 min: the logout's state and where to go next
//! ```
//!
//! Logout is local (the cookies cleared) and, when discovery names an
//! `end_session_endpoint`, RP-initiated at the provider too (OpenID
//! Connect RP-Initiated Logout 1.0): [`Oidc::begin_logout`] sends the
//! browser there with `id_token_hint`, `client_id`,
//! `post_logout_redirect_uri` and a `state` that
//! [`Oidc::finish_logout`] checks when it comes back.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::Mac;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::credential::credential_header;
use crate::sign::keyed;
use crate::{
    AuthContext, CustomPolicy, JwksFetcher, JwtConfig, JwtPolicy, Policy, PrincipalType, Refusal,
    RequestParts, Secret, Verdict, Verifier,
};

/// The session cookie.
pub const SESSION_COOKIE: &str = "agentkit_session";
/// The CSRF cookie the page reads (its value goes in [`CSRF_HEADER`]).
pub const CSRF_COOKIE: &str = "agentkit_csrf";
/// The pending-login cookie (between `/login` and its callback).
pub const LOGIN_COOKIE: &str = "agentkit_login";
/// The ID token kept for `id_token_hint` (with an end-session endpoint).
pub const ID_TOKEN_COOKIE: &str = "agentkit_idt";
/// The pending-logout cookie (between `/logout` and its callback).
pub const LOGOUT_COOKIE: &str = "agentkit_logout";
/// The header a cookie-authenticated state-changing request carries.
pub const CSRF_HEADER: &str = "x-agentkit-csrf";

/// How long a login may take at the provider.
const LOGIN_TTL: Duration = Duration::from_secs(600);

/// The `authenticator` of a context the session cookie admitted.
const COOKIE_AUTHENTICATOR: &str = "oidcSession";
/// The `authenticator` of a context a provider's bearer token admitted.
const BEARER_AUTHENTICATOR: &str = "oidc";

/// The provider's metadata (`/.well-known/openid-configuration`), the
/// fields this client uses.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct OidcMetadata {
    pub issuer: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub jwks_uri: String,
    #[serde(default)]
    pub end_session_endpoint: Option<String>,
    #[serde(default)]
    pub code_challenge_methods_supported: Option<Vec<String>>,
}

impl OidcMetadata {
    /// Parses a discovery document and checks it is the configured
    /// issuer's (OpenID Connect Discovery 1.0 §4.3: `issuer` must be
    /// identical) and that every endpoint is http(s).
    pub fn parse(bytes: &[u8], issuer: &str) -> Result<OidcMetadata, String> {
        let meta: OidcMetadata = serde_json::from_slice(bytes)
            .map_err(|e| format!("the discovery document is not usable: {e}"))?;
        if meta.issuer != issuer {
            return Err(format!(
                "the discovery document names the issuer `{}`, not `{issuer}`",
                meta.issuer
            ));
        }
        for (name, url) in [
            ("authorization_endpoint", &meta.authorization_endpoint),
            ("token_endpoint", &meta.token_endpoint),
            ("jwks_uri", &meta.jwks_uri),
        ] {
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return Err(format!("`{name}` is not an http(s) URL"));
            }
        }
        if let Some(methods) = &meta.code_challenge_methods_supported
            && !methods.iter().any(|m| m == "S256")
        {
            return Err("the provider does not support PKCE with S256".to_owned());
        }
        Ok(meta)
    }
}

/// How the host signs people in.
#[derive(Clone, PartialEq, Eq)]
pub struct OidcConfig {
    pub issuer: String,
    pub client_id: String,
    /// `None` for a public client (PKCE alone).
    pub client_secret: Option<Secret>,
    /// Requested at the authorization endpoint (`openid` is always sent).
    pub scopes: Vec<String>,
    /// Accepted `aud` of bearer access tokens, besides the client id.
    pub audiences: Vec<String>,
    /// How long a session cookie lasts.
    pub session_ttl: Duration,
    /// Tolerance for `exp`, `nbf` and `iat` against this host's clock.
    pub clock_skew: Duration,
    /// The claim naming the principal (`sub`), put after `oidc:`.
    pub principal_claim: String,
    /// Claims kept in the session cookie besides the principal's (those
    /// the role rules read: `groups`, `realm_access`, …).
    pub keep_claims: BTreeSet<String>,
    /// The host's public origin (`https://agents.example.com`): cookies
    /// are `Secure` when it is https, and a cookie-authenticated
    /// state-changing request must come from it (`Origin`), unless it
    /// proves itself with the CSRF header. `None`: the request's `Host`.
    pub public_origin: Option<String>,
}

impl fmt::Debug for OidcConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OidcConfig")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("scopes", &self.scopes)
            .field("audiences", &self.audiences)
            .field("session_ttl", &self.session_ttl)
            .finish_non_exhaustive()
    }
}

impl OidcConfig {
    /// The scopes sent: `openid` first, then the configured ones.
    fn scope(&self) -> String {
        let mut scopes = vec!["openid"];
        scopes.extend(
            self.scopes
                .iter()
                .map(String::as_str)
                .filter(|s| *s != "openid"),
        );
        scopes.join(" ")
    }

    fn secure(&self) -> bool {
        self.public_origin
            .as_deref()
            .is_some_and(|o| o.starts_with("https://"))
    }
}

/// The host's OIDC client: metadata, keys and cookie key. Clones share
/// the key cache.
#[derive(Clone)]
pub struct Oidc {
    inner: Arc<Inner>,
}

struct Inner {
    config: OidcConfig,
    metadata: OidcMetadata,
    jwt: JwtPolicy,
    /// Signs the cookies: derived from the client secret (so every host
    /// of a deployment shares it, and it survives restarts), or random
    /// for a public client (sessions end with the process).
    cookie_key: [u8; 32],
}

impl fmt::Debug for Oidc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Oidc")
            .field("config", &self.inner.config)
            .field("metadata", &self.inner.metadata)
            .finish_non_exhaustive()
    }
}

impl PartialEq for Oidc {
    fn eq(&self, other: &Oidc) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

/// What `/login` answers: where to send the browser, and the
/// pending-login cookie to set.
#[derive(Debug)]
pub struct LoginStart {
    pub location: String,
    pub set_cookie: String,
}

/// A login the callback may complete (from the pending-login cookie).
#[derive(Debug)]
pub struct PendingLogin {
    verifier: String,
    nonce: String,
    /// Where to send the browser afterwards (a path of this host).
    pub next: String,
}

impl PendingLogin {
    /// The PKCE `code_verifier` for the token request.
    pub fn code_verifier(&self) -> &str {
        &self.verifier
    }
}

#[derive(Serialize, Deserialize)]
struct LoginPayload {
    s: String,
    v: String,
    n: String,
    next: String,
    exp: u64,
}

#[derive(Serialize, Deserialize)]
struct IdTokenPayload {
    t: String,
}

#[derive(Serialize, Deserialize)]
struct LogoutPayload {
    s: String,
    next: String,
    exp: u64,
}

/// What `/logout` answers when the provider ends its session too: where
/// to send the browser (the provider's end-session endpoint) and the
/// `Set-Cookie` values (the session's cleared, the pending logout set).
#[derive(Debug)]
pub struct LogoutStart {
    pub location: String,
    pub set_cookies: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct SessionPayload {
    /// The principal id.
    p: String,
    /// The claims kept.
    c: Map<String, Value>,
    exp: u64,
    /// The CSRF token.
    x: String,
}

/// A signed-in person, from a valid session cookie.
#[derive(Debug, Clone)]
pub struct SignedIn {
    pub principal: String,
    pub expires_at: u64,
}

impl Oidc {
    /// The client for `config`, with the provider's `metadata`; its keys
    /// come through `fetcher` (cached, refetched on an unknown `kid`).
    pub fn new(
        config: OidcConfig,
        metadata: OidcMetadata,
        fetcher: Arc<dyn JwksFetcher>,
    ) -> Result<Oidc, String> {
        if config.client_id.is_empty() {
            return Err("the client id is empty".to_owned());
        }
        let mut audience = vec![config.client_id.clone()];
        audience.extend(config.audiences.iter().cloned());
        let mut jwt = JwtConfig::new(metadata.jwks_uri.clone(), config.issuer.clone(), audience);
        jwt.clock_skew = config.clock_skew;
        jwt.principal_claim = config.principal_claim.clone();
        jwt.principal_prefix = "oidc:".to_owned();
        let cookie_key = match &config.client_secret {
            Some(secret) if !secret.is_empty() => {
                let mut mac = keyed(secret.expose().as_bytes());
                mac.update(b"agentkit oidc cookie key v1");
                mac.finalize().into_bytes().into()
            }
            _ => random_bytes()?,
        };
        Ok(Oidc {
            inner: Arc::new(Inner {
                jwt: JwtPolicy::new(jwt, fetcher),
                config,
                metadata,
                cookie_key,
            }),
        })
    }

    pub fn config(&self) -> &OidcConfig {
        &self.inner.config
    }

    pub fn metadata(&self) -> &OidcMetadata {
        &self.inner.metadata
    }

    /// The chain link: the provider's bearer tokens, or the session
    /// cookie (with CSRF proof on state-changing methods).
    pub fn policy(&self) -> Policy {
        Policy::Custom(CustomPolicy::new(OidcVerifier(self.clone())))
    }

    /// Starts a login: a fresh state, nonce and PKCE verifier, sealed in
    /// the pending-login cookie; the browser goes to the provider.
    pub fn begin_login(&self, redirect_uri: &str, next: &str) -> Result<LoginStart, String> {
        let state = random_token()?;
        let nonce = random_token()?;
        let verifier = random_token()? + &random_token()?;
        let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
        let payload = LoginPayload {
            s: state.clone(),
            v: verifier,
            n: nonce.clone(),
            next: safe_next(next).to_owned(),
            exp: unix_now() + LOGIN_TTL.as_secs(),
        };
        let config = &self.inner.config;
        let query = [
            ("response_type", "code"),
            ("client_id", config.client_id.as_str()),
            ("redirect_uri", redirect_uri),
            ("scope", config.scope().as_str()),
            ("state", state.as_str()),
            ("nonce", nonce.as_str()),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
        ]
        .iter()
        .map(|(k, v)| format!("{k}={}", form_encode(v)))
        .collect::<Vec<_>>()
        .join("&");
        let endpoint = &self.inner.metadata.authorization_endpoint;
        let sep = if endpoint.contains('?') { '&' } else { '?' };
        Ok(LoginStart {
            location: format!("{endpoint}{sep}{query}"),
            set_cookie: self.cookie(
                LOGIN_COOKIE,
                &self.seal(LOGIN_COOKIE, &payload)?,
                LOGIN_TTL,
                true,
            ),
        })
    }

    /// The pending login the callback's `state` completes, from the
    /// request's `Cookie` header; why not, in words for the log.
    pub fn pending_login(&self, cookie_header: &str, state: &str) -> Result<PendingLogin, String> {
        let sealed = cookie_value(cookie_header, LOGIN_COOKIE)
            .ok_or("no pending login (the login cookie is missing)")?;
        let payload: LoginPayload = self.open(LOGIN_COOKIE, sealed)?;
        if payload.exp < unix_now() {
            return Err("the login took too long".to_owned());
        }
        if !bool::from(subtle::ConstantTimeEq::ct_eq(
            payload.s.as_bytes(),
            state.as_bytes(),
        )) {
            return Err("the state does not match the pending login".to_owned());
        }
        Ok(PendingLogin {
            verifier: payload.v,
            nonce: payload.n,
            next: payload.next,
        })
    }

    /// Checks the ID token of a finished login (signature, issuer,
    /// audience = the client id, expiry, nonce) and answers the cookies
    /// of the new session (`Set-Cookie` values) and its principal.
    pub async fn finish_login(
        &self,
        id_token: &str,
        pending: &PendingLogin,
    ) -> Result<(Vec<String>, String), String> {
        let header = format!("Bearer {id_token}");
        let req = RequestParts::new(None).with_header("authorization", &header);
        let ctx = self
            .inner
            .jwt
            .admit(BEARER_AUTHENTICATOR, &req)
            .await
            .map_err(|r| format!("the ID token does not verify: {r}"))?;
        let claims = ctx.claims.clone().unwrap_or_default();
        let aud_ok = match claims.get("aud") {
            Some(Value::String(a)) => *a == self.inner.config.client_id,
            Some(Value::Array(a)) => a
                .iter()
                .any(|v| v.as_str() == Some(self.inner.config.client_id.as_str())),
            _ => false,
        };
        if !aud_ok {
            return Err("the ID token is not for this client".to_owned());
        }
        let nonce_ok = claims
            .get("nonce")
            .and_then(Value::as_str)
            .is_some_and(|n| {
                bool::from(subtle::ConstantTimeEq::ct_eq(
                    n.as_bytes(),
                    pending.nonce.as_bytes(),
                ))
            });
        if !nonce_ok {
            return Err("the ID token's nonce does not match the login".to_owned());
        }
        let config = &self.inner.config;
        let kept: Map<String, Value> = claims
            .iter()
            .filter(|(k, _)| {
                config.keep_claims.contains(k.as_str())
                    || **k == config.principal_claim
                    || ["iss", "email", "name"].contains(&k.as_str())
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let csrf = random_token()?;
        let payload = SessionPayload {
            p: ctx.principal_id.clone(),
            c: kept,
            exp: unix_now() + config.session_ttl.as_secs(),
            x: csrf.clone(),
        };
        let sealed = self.seal(SESSION_COOKIE, &payload)?;
        if sealed.len() > 3800 {
            return Err(
                "the session would not fit a cookie: keep fewer claims (the role rules name them)"
                    .to_owned(),
            );
        }
        let mut cookies = vec![
            self.cookie(SESSION_COOKIE, &sealed, config.session_ttl, true),
            self.cookie(CSRF_COOKIE, &csrf, config.session_ttl, false),
            self.clear(LOGIN_COOKIE, true),
        ];
        if self.inner.metadata.end_session_endpoint.is_some() {
            let kept = self.seal(
                ID_TOKEN_COOKIE,
                &IdTokenPayload {
                    t: id_token.to_owned(),
                },
            )?;
            // A token too large for a cookie: logout goes without the hint.
            if kept.len() <= 3800 {
                cookies.push(self.cookie(ID_TOKEN_COOKIE, &kept, config.session_ttl, true));
            }
        }
        Ok((cookies, ctx.principal_id))
    }

    /// Starts a logout at the provider when discovery named an
    /// `end_session_endpoint` (`None`: logout stays local): the local
    /// cookies cleared, a fresh `state` sealed with `next` in the
    /// pending-logout cookie, and the endpoint with `id_token_hint` (the
    /// kept ID token, when the request carries it), `client_id`,
    /// `post_logout_redirect_uri` and `state`.
    pub fn begin_logout(
        &self,
        cookie_header: &str,
        post_logout_redirect_uri: &str,
        next: &str,
    ) -> Result<Option<LogoutStart>, String> {
        let Some(endpoint) = &self.inner.metadata.end_session_endpoint else {
            return Ok(None);
        };
        let hint = cookie_value(cookie_header, ID_TOKEN_COOKIE)
            .and_then(|sealed| self.open::<IdTokenPayload>(ID_TOKEN_COOKIE, sealed).ok())
            .map(|p| p.t);
        let state = random_token()?;
        let payload = LogoutPayload {
            s: state.clone(),
            next: safe_next(next).to_owned(),
            exp: unix_now() + LOGIN_TTL.as_secs(),
        };
        let mut query = Vec::new();
        if let Some(hint) = &hint {
            query.push(("id_token_hint", hint.as_str()));
        }
        query.extend([
            ("client_id", self.inner.config.client_id.as_str()),
            ("post_logout_redirect_uri", post_logout_redirect_uri),
            ("state", state.as_str()),
        ]);
        let query = query
            .iter()
            .map(|(k, v)| format!("{k}={}", form_encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        let sep = if endpoint.contains('?') { '&' } else { '?' };
        let mut set_cookies = self.logout_cookies();
        set_cookies.push(self.cookie(
            LOGOUT_COOKIE,
            &self.seal(LOGOUT_COOKIE, &payload)?,
            LOGIN_TTL,
            true,
        ));
        Ok(Some(LogoutStart {
            location: format!("{endpoint}{sep}{query}"),
            set_cookies,
        }))
    }

    /// The provider sent the browser back from its end-session endpoint:
    /// where to go next when `state` matches the pending logout (why
    /// not, in words for the log), and the cookie that clears it.
    pub fn finish_logout(
        &self,
        cookie_header: &str,
        state: &str,
    ) -> (Result<String, String>, String) {
        let clear = self.clear(LOGOUT_COOKIE, true);
        let next = cookie_value(cookie_header, LOGOUT_COOKIE)
            .ok_or_else(|| "no pending logout (the logout cookie is missing)".to_owned())
            .and_then(|sealed| self.open::<LogoutPayload>(LOGOUT_COOKIE, sealed))
            .and_then(|p| {
                if p.exp < unix_now() {
                    Err("the logout took too long".to_owned())
                } else if bool::from(subtle::ConstantTimeEq::ct_eq(
                    p.s.as_bytes(),
                    state.as_bytes(),
                )) {
                    Ok(p.next)
                } else {
                    Err("the state does not match the pending logout".to_owned())
                }
            });
        (next, clear)
    }

    /// The `Set-Cookie` values that end a session.
    pub fn logout_cookies(&self) -> Vec<String> {
        vec![
            self.clear(SESSION_COOKIE, true),
            self.clear(CSRF_COOKIE, false),
            self.clear(LOGIN_COOKIE, true),
            self.clear(ID_TOKEN_COOKIE, true),
        ]
    }

    /// The signed-in person of a `Cookie` header, if its session is valid.
    pub fn signed_in(&self, cookie_header: &str) -> Option<SignedIn> {
        let payload = self.session(cookie_header).ok()?;
        Some(SignedIn {
            principal: payload.p,
            expires_at: payload.exp,
        })
    }

    fn session(&self, cookie_header: &str) -> Result<SessionPayload, Refusal> {
        let sealed = cookie_value(cookie_header, SESSION_COOKIE).ok_or(Refusal::HeaderMissing {
            header: "cookie".to_owned(),
        })?;
        let payload: SessionPayload = self
            .open(SESSION_COOKIE, sealed)
            .map_err(|reason| Refusal::InvalidToken { reason })?;
        if payload.exp < unix_now() {
            return Err(Refusal::InvalidToken {
                reason: "the session has expired".to_owned(),
            });
        }
        Ok(payload)
    }

    async fn admit(&self, req: &RequestParts<'_>) -> Result<AuthContext, Refusal> {
        if req.header_values("authorization").next().is_some() {
            return self.inner.jwt.admit(BEARER_AUTHENTICATOR, req).await;
        }
        let cookies = req
            .header_values("cookie")
            .filter_map(|v| std::str::from_utf8(v).ok())
            .collect::<Vec<_>>()
            .join("; ");
        let payload = self.session(&cookies)?;
        if !req.method.is_some_and(is_safe_method) {
            self.check_csrf(req, &payload.x)?;
        }
        let mut ctx = AuthContext::new(COOKIE_AUTHENTICATOR, payload.p, PrincipalType::User)
            .with_attribute("issuer", self.inner.config.issuer.clone());
        ctx.claims = Some(Arc::new(payload.c));
        Ok(ctx)
    }

    /// A cookie-authenticated state-changing request: the CSRF header
    /// matches the session's token, or `Origin` is this host's.
    fn check_csrf(&self, req: &RequestParts<'_>, token: &str) -> Result<(), Refusal> {
        if let Ok(sent) = credential_header(req, CSRF_HEADER)
            && bool::from(subtle::ConstantTimeEq::ct_eq(sent, token.as_bytes()))
        {
            return Ok(());
        }
        let origin = req
            .header_values("origin")
            .next()
            .and_then(|o| std::str::from_utf8(o).ok());
        let expected = match (&self.inner.config.public_origin, req.host) {
            (Some(o), _) => Some(origin_of(o).to_owned()),
            (None, Some(host)) => Some(format!("http://{host}")),
            (None, None) => None,
        };
        if let (Some(origin), Some(expected)) = (origin, expected)
            && (origin == expected
                || (self.inner.config.public_origin.is_none()
                    && origin == expected.replacen("http://", "https://", 1)))
        {
            return Ok(());
        }
        Err(Refusal::Rejected {
            reason: "a cookie-authenticated change without CSRF proof (no X-Agentkit-Csrf, and Origin is not this host)".to_owned(),
        })
    }

    fn seal<T: Serialize>(&self, kind: &str, payload: &T) -> Result<String, String> {
        let json = serde_json::to_vec(payload).map_err(|e| e.to_string())?;
        let body = URL_SAFE_NO_PAD.encode(json);
        let mut mac = keyed(&self.inner.cookie_key);
        mac.update(kind.as_bytes());
        mac.update(b".");
        mac.update(body.as_bytes());
        let tag = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        Ok(format!("{body}.{tag}"))
    }

    fn open<T: for<'de> Deserialize<'de>>(&self, kind: &str, sealed: &str) -> Result<T, String> {
        let (body, tag) = sealed.split_once('.').ok_or("a malformed cookie")?;
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| "a malformed cookie signature")?;
        let mut mac = keyed(&self.inner.cookie_key);
        mac.update(kind.as_bytes());
        mac.update(b".");
        mac.update(body.as_bytes());
        mac.verify_slice(&tag)
            .map_err(|_| "the cookie's signature does not verify")?;
        let json = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| "a malformed cookie body")?;
        serde_json::from_slice(&json).map_err(|_| "a malformed cookie body".to_owned())
    }

    fn cookie(&self, name: &str, value: &str, ttl: Duration, http_only: bool) -> String {
        let mut c = format!(
            "{name}={value}; Path=/; Max-Age={}; SameSite=Lax",
            ttl.as_secs()
        );
        if http_only {
            c.push_str("; HttpOnly");
        }
        if self.inner.config.secure() {
            c.push_str("; Secure");
        }
        c
    }

    fn clear(&self, name: &str, http_only: bool) -> String {
        self.cookie(name, "", Duration::ZERO, http_only)
    }
}

struct OidcVerifier(Oidc);

impl Verifier for OidcVerifier {
    fn name(&self) -> &'static str {
        "oidc"
    }

    fn verify<'a>(&'a self, req: &'a RequestParts<'a>) -> Verdict<'a> {
        Box::pin(self.0.admit(req))
    }
}

/// `scheme://host[:port]` of a URL (what a browser sends as `Origin`).
fn origin_of(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find('/') {
        Some(i) => &url[..after_scheme + i],
        None => url,
    }
}

fn is_safe_method(method: &str) -> bool {
    matches!(method, "GET" | "HEAD" | "OPTIONS")
}

/// A path of this host to go to after login: anything else (another
/// origin, `//evil`, a scheme) becomes `/`.
fn safe_next(next: &str) -> &str {
    let ok = next.starts_with('/')
        && !next.starts_with("//")
        && !next.starts_with("/\\")
        && !next.contains(['\r', '\n']);
    if ok { next } else { "/" }
}

/// The value of cookie `name` in a `Cookie` header.
pub fn cookie_value<'h>(header: &'h str, name: &str) -> Option<&'h str> {
    header.split(';').find_map(|pair| {
        let (k, v) = pair.trim().split_once('=')?;
        (k == name).then_some(v)
    })
}

/// `application/x-www-form-urlencoded` for one value.
pub fn form_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn random_bytes() -> Result<[u8; 32], String> {
    let mut bytes = [0u8; 32];
    aws_lc_rs::rand::fill(&mut bytes).map_err(|_| "the random source failed".to_owned())?;
    Ok(bytes)
}

fn random_token() -> Result<String, String> {
    Ok(URL_SAFE_NO_PAD.encode(random_bytes()?))
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn next_stays_on_this_host() {
        for (given, kept) in [
            ("/bot/playground", "/bot/playground"),
            ("//evil.example/x", "/"),
            ("https://evil.example/", "/"),
            ("/\\evil", "/"),
            ("/a\r\nSet-Cookie: x", "/"),
        ] {
            assert_eq!(safe_next(given), kept);
        }
    }

    #[test]
    fn discovery_must_name_the_issuer_and_pkce() {
        let doc = |iss: &str, methods: &str| {
            format!(
                r#"{{"issuer":"{iss}","authorization_endpoint":"https://i/a","token_endpoint":"https://i/t","jwks_uri":"https://i/k","code_challenge_methods_supported":{methods}}}"#
            )
        };
        assert!(
            OidcMetadata::parse(doc("https://i", r#"["S256"]"#).as_bytes(), "https://i").is_ok()
        );
        assert!(
            OidcMetadata::parse(doc("https://j", r#"["S256"]"#).as_bytes(), "https://i").is_err()
        );
        assert!(
            OidcMetadata::parse(doc("https://i", r#"["plain"]"#).as_bytes(), "https://i").is_err()
        );
    }

    #[test]
    fn the_origin_of_a_public_url_drops_its_path() {
        assert_eq!(origin_of("https://a.example/agents/"), "https://a.example");
        assert_eq!(
            origin_of("https://a.example:8443"),
            "https://a.example:8443"
        );
        assert_eq!(origin_of("http://a.example/"), "http://a.example");
    }

    #[test]
    fn cookies_parse_by_name() {
        let h = "a=1; agentkit_session=x.y; agentkit_csrf=z";
        assert_eq!(cookie_value(h, SESSION_COOKIE), Some("x.y"));
        assert_eq!(cookie_value(h, "b"), None);
        assert_eq!(form_encode("a b/c"), "a%20b%2Fc");
    }
}
