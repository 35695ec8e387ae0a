//! An OpenID provider stand-in that speaks the documented protocol
//! (OpenID Connect Core 1.0, Discovery 1.0, RFC 7636): discovery, a JWKS,
//! an authorization endpoint that redirects back with a code (checking
//! `response_type`, `client_id`, `scope` with `openid`, a `state`, a
//! `nonce` and an S256 `code_challenge`), and a token endpoint that checks
//! the client's Basic credentials, the redirect URI, single use of the
//! code and the PKCE verifier before it signs an ID token (with the nonce)
//! and an access token (`aud` = `agentkit-api`), and an end-session
//! endpoint (RP-Initiated Logout 1.0) that records each call and sends
//! the browser back to its `post_logout_redirect_uri` with the `state`.

// A test's stand-in: a broken invariant here should fail the test loudly.
#![allow(clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

use crate::jwt::{TestKey, jwks, now};
use crate::mock::{MockResponse, MockServer, Recorded};

pub const CLIENT_ID: &str = "agentkit-web";
pub const CLIENT_SECRET: &str = "s3cret-never-shown";

/// An authorization request the provider granted, by its code.
struct Grant {
    challenge: String,
    nonce: String,
    redirect_uri: String,
}

#[derive(Default)]
struct ProviderState {
    grants: HashMap<String, Grant>,
    /// Who signs in at the authorization endpoint, and their extra claims.
    user: (String, Value),
    /// Token requests refused, with why.
    refusals: Vec<String>,
    /// Every code and token handed out.
    issued: Vec<String>,
    codes: u64,
    /// The query of each call to the end-session endpoint.
    logouts: Vec<HashMap<String, String>>,
}

/// The provider stand-in.
pub struct Provider {
    pub server: MockServer,
    state: Arc<Mutex<ProviderState>>,
    /// The key its tokens are signed with.
    pub key: Arc<TestKey>,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Provider({})", self.server.url())
    }
}

/// A form or query string, decoded.
pub fn form(text: &str) -> HashMap<String, String> {
    text.split('&')
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}

/// `%xx` and `+` decoded.
pub fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                out.push(u8::from_str_radix(s.get(i + 1..i + 3).unwrap_or("00"), 16).unwrap_or(0));
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Provider {
    /// Starts the provider on loopback, with an end-session endpoint;
    /// `alice` signs in until told otherwise.
    pub fn start() -> Provider {
        Provider::start_with(true)
    }

    /// Starts the provider; `end_session`: discovery names the
    /// end-session endpoint (`/logout`).
    pub fn start_with(end_session: bool) -> Provider {
        let key = Arc::new(TestKey::rsa("idp-1"));
        let state = Arc::new(Mutex::new(ProviderState {
            user: ("alice".into(), json!({})),
            ..ProviderState::default()
        }));
        let base: Arc<OnceLock<String>> = Arc::new(OnceLock::new());
        let (k, st, b) = (key.clone(), state.clone(), base.clone());
        let server = MockServer::start(move |req: &Recorded| {
            let base = b.get().expect("the provider stand-in").clone();
            match (req.method.as_str(), req.path.as_str()) {
                ("GET", "/.well-known/openid-configuration") => {
                    let mut doc = json!({
                        "issuer": base,
                        "authorization_endpoint": format!("{base}/authorize"),
                        "token_endpoint": format!("{base}/token"),
                        "jwks_uri": format!("{base}/jwks"),
                        "response_types_supported": ["code"],
                        "subject_types_supported": ["public"],
                        "id_token_signing_alg_values_supported": ["RS256"],
                        "code_challenge_methods_supported": ["S256"],
                    });
                    if end_session {
                        doc["end_session_endpoint"] = json!(format!("{base}/logout"));
                    }
                    MockResponse::json(200, &doc)
                }
                ("GET", "/logout") if end_session => {
                    let q = form(req.query.as_deref().unwrap_or(""));
                    let mut st = st.lock().expect("the provider stand-in");
                    st.logouts.push(q.clone());
                    // A hint must be an ID token this provider issued.
                    let hint_ok = q.get("id_token_hint").is_none_or(|h| st.issued.contains(h));
                    match q.get("post_logout_redirect_uri") {
                        Some(to) if hint_ok => {
                            let state = q.get("state").map(|s| encode(s)).unwrap_or_default();
                            MockResponse::text(302, "")
                                .header("location", &format!("{to}?state={state}"))
                        }
                        _ => MockResponse::text(200, "signed out at the provider"),
                    }
                }
                ("GET", "/jwks") => MockResponse::json(200, &jwks(&[&k])),
                ("GET", "/authorize") => {
                    let q = form(req.query.as_deref().unwrap_or(""));
                    let ok = q.get("response_type").map(String::as_str) == Some("code")
                        && q.get("client_id").map(String::as_str) == Some(CLIENT_ID)
                        && q.get("code_challenge_method").map(String::as_str) == Some("S256")
                        && q.get("scope")
                            .is_some_and(|s| s.split(' ').any(|x| x == "openid"))
                        && q.contains_key("code_challenge")
                        && q.contains_key("state")
                        && q.contains_key("nonce");
                    if !ok {
                        return MockResponse::text(400, "invalid_request");
                    }
                    let mut st = st.lock().expect("the provider stand-in");
                    st.codes += 1;
                    let code = format!("code-{}", st.codes);
                    st.grants.insert(
                        code.clone(),
                        Grant {
                            challenge: q["code_challenge"].clone(),
                            nonce: q["nonce"].clone(),
                            redirect_uri: q["redirect_uri"].clone(),
                        },
                    );
                    st.issued.push(code.clone());
                    let to = format!(
                        "{}?code={code}&state={}",
                        q["redirect_uri"],
                        encode(&q["state"])
                    );
                    MockResponse::text(302, "").header("location", &to)
                }
                ("POST", "/token") => {
                    let f = form(&req.text());
                    let mut st = st.lock().expect("the provider stand-in");
                    let basic = format!(
                        "Basic {}",
                        STANDARD.encode(format!("{CLIENT_ID}:{CLIENT_SECRET}"))
                    );
                    let refuse = |st: &mut ProviderState, why: &str| {
                        st.refusals.push(why.to_owned());
                        MockResponse::json(400, &json!({"error": "invalid_grant"}))
                    };
                    if req.header("authorization") != Some(basic.as_str()) {
                        return refuse(&mut st, "client authentication");
                    }
                    if f.get("grant_type").map(String::as_str) != Some("authorization_code") {
                        return refuse(&mut st, "grant_type");
                    }
                    // A code is good once.
                    let Some(grant) = f.get("code").and_then(|c| st.grants.remove(c)) else {
                        return refuse(&mut st, "unknown or used code");
                    };
                    if f.get("redirect_uri") != Some(&grant.redirect_uri) {
                        return refuse(&mut st, "redirect_uri");
                    }
                    let verifier = f.get("code_verifier").cloned().unwrap_or_default();
                    if URL_SAFE_NO_PAD.encode(aws_lc_rs::digest::digest(
                        &aws_lc_rs::digest::SHA256,
                        verifier.as_bytes(),
                    )) != grant.challenge
                    {
                        return refuse(&mut st, "PKCE verifier");
                    }
                    let (sub, extra) = st.user.clone();
                    let mut id = json!({"iss": base, "aud": CLIENT_ID, "sub": sub, "nonce": grant.nonce,
                                        "iat": now(), "exp": now() + 300, "email": format!("{sub}@example.test")});
                    id.as_object_mut()
                        .expect("the provider stand-in")
                        .extend(extra.as_object().expect("the provider stand-in").clone());
                    let access = k.sign(&json!({"iss": base, "aud": "agentkit-api", "sub": sub,
                                                "iat": now(), "exp": now() + 300}));
                    let id_token = k.sign(&id);
                    st.issued.extend([access.clone(), id_token.clone()]);
                    MockResponse::json(
                        200,
                        &json!({
                            "access_token": access,
                            "id_token": id_token,
                            "token_type": "Bearer",
                            "expires_in": 300,
                        }),
                    )
                }
                _ => MockResponse::text(404, "not found"),
            }
        });
        base.set(server.url()).expect("the provider stand-in");
        Provider { server, state, key }
    }

    /// The issuer (the server's base URL).
    pub fn issuer(&self) -> String {
        self.server.url()
    }

    /// Who signs in next, with extra claims in the ID token.
    pub fn sign_in_as(&self, sub: &str, claims: Value) {
        self.state.lock().expect("the provider stand-in").user = (sub.to_owned(), claims);
    }

    /// Every authorization code and token handed out so far.
    pub fn issued(&self) -> Vec<String> {
        self.state
            .lock()
            .expect("the provider stand-in")
            .issued
            .clone()
    }

    /// The query of each call to the end-session endpoint so far.
    pub fn logouts(&self) -> Vec<HashMap<String, String>> {
        self.state
            .lock()
            .expect("the provider stand-in")
            .logouts
            .clone()
    }

    /// Token requests refused so far, with why.
    pub fn refusals(&self) -> Vec<String> {
        self.state
            .lock()
            .expect("the provider stand-in")
            .refusals
            .clone()
    }
}

/// Form-encodes one value.
pub fn encode(value: &str) -> String {
    let mut out = String::new();
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
