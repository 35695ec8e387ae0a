//! OIDC sign-in against a provider stand-in written here that speaks the
//! documented protocol: discovery (`/.well-known/openid-configuration`),
//! a JWKS, an authorization endpoint that redirects back with a code, and
//! a token endpoint that checks the client's Basic credentials, the
//! redirect URI, single use of the code and the PKCE S256 verifier
//! (RFC 7636) before it signs an ID token with the nonce. Over HTTP: the
//! playground sends a browser without a session to `/login`, the redirect
//! flow sets the session cookie, the cookie authenticates reads and, with
//! CSRF proof only, changes; the provider's access tokens are bearer
//! tokens on the API; roles come from the provider's groups; and the
//! client secret, the cookies and the tokens stay out of `/v1/info`.

use agentkit::channels::Env;
use agentkit::{OidcOptions, ServeOptions};
use agentkit_test_support::http::{Request, Response};
use agentkit_test_support::jwt::{TestKey, now};
use agentkit_test_support::oidc::{CLIENT_ID, CLIENT_SECRET, Provider};
use serde_json::json;

use super::http::{Server, server};

const AGENT_TOML: &str = r#"model = "scripted:script.json"
[auth.roles]
operator = ["groups:agents-ops"]
"#;

fn host(idp: &Provider) -> Server {
    let mut oidc = OidcOptions::new(idp.issuer(), CLIENT_ID);
    oidc.client_secret = Some("${OIDC_CLIENT_SECRET}".into());
    oidc.audiences = vec!["agentkit-api".into()];
    server(
        &[("agent.toml", AGENT_TOML)],
        ServeOptions {
            oidc: Some(oidc),
            env: Env::new(|name| (name == "OIDC_CLIENT_SECRET").then(|| CLIENT_SECRET.to_owned())),
            ..ServeOptions::default()
        },
    )
}

/// A request from a browser elsewhere (never the loopback developer).
fn remote(method: &str, path: &str) -> Request {
    Request::new(method, path)
        .host("agents.example")
        .header("x-forwarded-for", "203.0.113.9")
}

fn set_cookies(r: &Response) -> Vec<String> {
    r.headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("set-cookie"))
        .map(|(_, v)| v.clone())
        .collect()
}

/// `name=value` of the cookie `name` a response sets.
fn cookie(r: &Response, name: &str) -> String {
    set_cookies(r)
        .into_iter()
        .find(|c| c.starts_with(&format!("{name}=")))
        .map(|c| c.split(';').next().unwrap().to_owned())
        .unwrap_or_else(|| panic!("no {name} cookie in {:?}", r.headers))
}

/// Path and query of an absolute URL.
fn path_of(url: &str) -> String {
    let rest = url.split_once("://").unwrap().1;
    format!("/{}", rest.split_once('/').unwrap().1)
}

/// The whole redirect flow as a browser runs it; answers the cookies of
/// the session (`agentkit_session=…; agentkit_csrf=…`) and the CSRF token.
fn sign_in(s: &Server, idp: &Provider, next: &str) -> (String, String, Response) {
    let login = remote(
        "GET",
        &format!("/login?next={}", agentkit::auth::form_encode(next)),
    )
    .send(s.addr())
    .unwrap();
    assert_eq!(login.status, 303, "{}", login.body);
    let pending = cookie(&login, "agentkit_login");
    let authorize = login.header("location").unwrap().to_owned();
    assert!(
        authorize.starts_with(&format!("{}/authorize?", idp.issuer())),
        "{authorize}"
    );
    assert!(
        authorize.contains("code_challenge_method=S256"),
        "{authorize}"
    );
    let at_idp = Request::get(&path_of(&authorize))
        .send(idp.server.addr())
        .unwrap();
    assert_eq!(at_idp.status, 302, "{}", at_idp.body);
    let back = at_idp.header("location").unwrap().to_owned();
    assert!(back.contains("/login/callback?code="), "{back}");
    let done = remote("GET", &path_of(&back))
        .header("cookie", &pending)
        .send(s.addr())
        .unwrap();
    assert_eq!(done.status, 303, "{}", done.body);
    assert_eq!(done.header("location"), Some(next));
    let session = cookie(&done, "agentkit_session");
    let csrf = cookie(&done, "agentkit_csrf");
    (
        format!("{session}; {csrf}"),
        csrf.split_once('=').unwrap().1.to_owned(),
        done,
    )
}

#[test]
fn a_person_signs_in_with_pkce_and_the_cookie_authenticates() {
    // A provider without an end-session endpoint: logout stays local.
    let idp = Provider::start_with(false);
    let s = host(&idp);

    // The playground sends a browser without a session to sign in.
    let page = remote("GET", "/bot/playground").send(s.addr()).unwrap();
    assert_eq!(page.status, 303, "{}", page.body);
    assert_eq!(
        page.header("location"),
        Some("/login?next=%2Fbot%2Fplayground")
    );
    // The loopback developer is not sent away.
    assert_eq!(
        Request::get("/bot/playground")
            .send(s.addr())
            .unwrap()
            .status,
        200
    );
    // Without a session the API refuses.
    assert_eq!(
        remote("GET", "/bot/v1/info").send(s.addr()).unwrap().status,
        401
    );

    let (cookies, csrf, done) = sign_in(&s, &idp, "/bot/playground");
    assert!(idp.refusals().is_empty(), "{:?}", idp.refusals());
    for c in set_cookies(&done) {
        assert!(c.contains("SameSite=Lax") && c.contains("Path=/"), "{c}");
        if !c.starts_with("agentkit_csrf=") {
            assert!(c.contains("HttpOnly"), "{c}");
        }
        // Served over plain http (no https public URL): not Secure.
        assert!(!c.contains("Secure"), "{c}");
    }
    let max_age = set_cookies(&done)
        .into_iter()
        .find(|c| c.starts_with("agentkit_session="))
        .unwrap();
    assert!(
        max_age.contains("Max-Age=28800"),
        "bounded lifetime: {max_age}"
    );

    // The page now loads, and the cookie reads the API.
    let page = remote("GET", "/bot/playground")
        .header("cookie", &cookies)
        .send(s.addr())
        .unwrap();
    assert_eq!(page.status, 200);
    let info = remote("GET", "/bot/v1/info")
        .header("cookie", &cookies)
        .send(s.addr())
        .unwrap();
    assert_eq!(info.status, 200, "{}", info.body);
    let caller = &info.json()["caller"];
    assert_eq!(caller["principalId"], "oidc:alice");
    assert_eq!(caller["authenticator"], "oidcSession");
    assert_eq!(caller["role"], "user");
    // No secret reaches /v1/info: not the client secret, not the cookie.
    let session_value = cookies
        .split(';')
        .next()
        .unwrap()
        .split_once('=')
        .unwrap()
        .1;
    for secret in [CLIENT_SECRET, session_value, csrf.as_str()] {
        assert!(!info.body.contains(secret), "a secret in /v1/info");
    }

    // A change needs CSRF proof: the header, or this host's Origin.
    let post = |extra: &[(&str, &str)]| {
        let mut r = remote("POST", "/bot/v1/session")
            .header("cookie", &cookies)
            .json(&json!({"message": "hi"}));
        for (n, v) in extra {
            r = r.header(n, v);
        }
        r.send(s.addr()).unwrap()
    };
    assert_eq!(post(&[]).status, 401, "no CSRF proof");
    assert_eq!(post(&[("origin", "https://evil.example")]).status, 401);
    assert_eq!(post(&[("x-agentkit-csrf", "forged")]).status, 401);
    let ok = post(&[("x-agentkit-csrf", &csrf)]);
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(post(&[("origin", "http://agents.example")]).status, 200);
    let id = ok.json()["sessionId"].as_str().unwrap().to_owned();
    let meta = remote("GET", &format!("/bot/v1/session/{id}"))
        .header("cookie", &cookies)
        .send(s.addr())
        .unwrap();
    assert_eq!(meta.json()["principalId"], "oidc:alice");

    // A tampered or foreign cookie is nobody.
    let tampered = cookies.replacen("agentkit_session=", "agentkit_session=x", 1);
    let r = remote("GET", "/bot/v1/info")
        .header("cookie", &tampered)
        .send(s.addr())
        .unwrap();
    assert_eq!(r.status, 401);

    // Logout clears the cookies; without an end-session endpoint it
    // stays here, and no ID token was kept for it.
    assert!(
        !set_cookies(&done)
            .iter()
            .any(|c| c.starts_with("agentkit_idt=")),
        "{:?}",
        set_cookies(&done)
    );
    let out = remote("GET", "/logout")
        .header("cookie", &cookies)
        .send(s.addr())
        .unwrap();
    assert_eq!(out.status, 303);
    assert_eq!(out.header("location"), Some("/"));
    for c in set_cookies(&out) {
        assert!(c.contains("Max-Age=0"), "{c}");
    }
}

#[test]
fn logout_ends_the_session_at_the_provider_when_it_has_an_end_session_endpoint() {
    let idp = Provider::start();
    let s = host(&idp);
    let (cookies, _, done) = sign_in(&s, &idp, "/bot/playground");
    let kept = set_cookies(&done)
        .into_iter()
        .find(|c| c.starts_with("agentkit_idt="))
        .expect("the ID token kept for the logout");
    assert!(kept.contains("HttpOnly"), "{kept}");
    let cookies = format!("{cookies}; {}", cookie(&done, "agentkit_idt"));

    let out = remote("GET", "/logout?next=%2Fbot%2Fplayground")
        .header("cookie", &cookies)
        .send(s.addr())
        .unwrap();
    assert_eq!(out.status, 303, "{}", out.body);
    let to = out.header("location").unwrap().to_owned();
    assert!(to.starts_with(&format!("{}/logout?", idp.issuer())), "{to}");
    // The local session ends at once, whatever the provider does.
    for name in ["agentkit_session", "agentkit_csrf", "agentkit_idt"] {
        let c = set_cookies(&out)
            .into_iter()
            .find(|c| c.starts_with(&format!("{name}=")))
            .unwrap_or_else(|| panic!("{name} is not cleared"));
        assert!(c.contains("Max-Age=0"), "{c}");
    }
    let pending = cookie(&out, "agentkit_logout");

    let at_idp = Request::get(&path_of(&to)).send(idp.server.addr()).unwrap();
    assert_eq!(at_idp.status, 302, "{}", at_idp.body);
    let calls = idp.logouts();
    assert_eq!(calls.len(), 1, "{calls:?}");
    let call = &calls[0];
    assert_eq!(call["client_id"], CLIENT_ID);
    assert_eq!(
        call["post_logout_redirect_uri"],
        format!("http://{}/logout/callback", s.addr())
    );
    assert!(
        idp.issued().contains(&call["id_token_hint"]),
        "the hint is the ID token the provider issued"
    );
    assert!(call["state"].len() >= 32, "{call:?}");

    // Back from the provider: on to where the logout started.
    let back = at_idp.header("location").unwrap().to_owned();
    let done = remote("GET", &path_of(&back))
        .header("cookie", &pending)
        .send(s.addr())
        .unwrap();
    assert_eq!(done.status, 303, "{}", done.body);
    assert_eq!(done.header("location"), Some("/bot/playground"));
    assert!(cookie(&done, "agentkit_logout").ends_with('='));
    // A forged state goes nowhere in particular.
    let forged = remote("GET", "/logout/callback?state=forged")
        .header("cookie", &pending)
        .send(s.addr())
        .unwrap();
    assert_eq!(forged.header("location"), Some("/"));

    // Without the kept ID token (an older sign-in) the provider is still
    // asked, without a hint.
    let out = remote("GET", "/logout").send(s.addr()).unwrap();
    let to = out.header("location").unwrap();
    assert!(
        to.contains("client_id=") && !to.contains("id_token_hint"),
        "{to}"
    );
}

#[test]
fn the_providers_groups_make_roles_and_its_access_tokens_are_bearer_tokens() {
    let idp = Provider::start();
    let s = host(&idp);
    let alice = sign_in(&s, &idp, "/").0;
    let started = remote("POST", "/bot/v1/session")
        .header("cookie", &alice)
        .header("origin", "http://agents.example")
        .json(&json!({"message": "hi"}))
        .send(s.addr())
        .unwrap();
    let id = started.json()["sessionId"].as_str().unwrap().to_owned();

    // Bob is in agents-ops: an operator, who reads Alice's session.
    idp.sign_in_as("bob", json!({"groups": ["staff", "agents-ops"]}));
    let bob = sign_in(&s, &idp, "/").0;
    let info = remote("GET", "/bot/v1/info")
        .header("cookie", &bob)
        .send(s.addr())
        .unwrap();
    assert_eq!(info.json()["caller"]["role"], "operator", "{}", info.body);
    let r = remote("GET", &format!("/bot/v1/session/{id}/events"))
        .header("cookie", &bob)
        .send(s.addr())
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    // Carol is not: Alice's session is not hers.
    idp.sign_in_as("carol", json!({"groups": ["staff"]}));
    let carol = sign_in(&s, &idp, "/").0;
    let r = remote("GET", &format!("/bot/v1/session/{id}/events"))
        .header("cookie", &carol)
        .send(s.addr())
        .unwrap();
    assert_eq!(r.status, 403, "{}", r.body);

    // The provider's access token (aud = the API) is a bearer token.
    let base = idp.issuer();
    let access = |aud: &str, sub: &str| {
        idp.key
            .sign(&json!({"iss": base, "aud": aud, "sub": sub, "iat": now(), "exp": now() + 300}))
    };
    let r = remote("GET", &format!("/bot/v1/session/{id}"))
        .bearer(&access("agentkit-api", "alice"))
        .send(s.addr())
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let r = remote("GET", "/bot/v1/info")
        .bearer(&access("agentkit-api", "alice"))
        .send(s.addr())
        .unwrap();
    assert_eq!(r.json()["caller"]["authenticator"], "oidc");
    // Another audience, another issuer, another key: refused.
    let other_key = TestKey::rsa("idp-1");
    for bad in [
        access("someone-else", "alice"),
        idp.key.sign(&json!({"iss": "https://evil.example", "aud": "agentkit-api", "sub": "alice", "exp": now() + 300})),
        other_key.sign(&json!({"iss": base, "aud": "agentkit-api", "sub": "alice", "exp": now() + 300})),
        idp.key.sign(&json!({"iss": base, "aud": "agentkit-api", "sub": "alice", "exp": now() - 3600})),
    ] {
        let r = remote("GET", "/bot/v1/info").bearer(&bad).send(s.addr()).unwrap();
        assert_eq!(r.status, 401, "{}", r.body);
    }
    // A bearer token needs no CSRF proof (a browser never sends one by itself).
    let r = remote("POST", "/bot/v1/session")
        .bearer(&access("agentkit-api", "alice"))
        .json(&json!({"message": "hi"}))
        .send(s.addr())
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn a_callback_needs_its_own_pending_login_and_a_fresh_code() {
    let idp = Provider::start();
    let s = host(&idp);
    let login = remote("GET", "/login?next=https://evil.example/")
        .send(s.addr())
        .unwrap();
    let pending = cookie(&login, "agentkit_login");
    let authorize = login.header("location").unwrap().to_owned();
    let back = Request::get(&path_of(&authorize))
        .send(idp.server.addr())
        .unwrap();
    let callback = path_of(back.header("location").unwrap());

    // Without the pending-login cookie (another browser): refused.
    let r = remote("GET", &callback).send(s.addr()).unwrap();
    assert_eq!(r.status, 400);
    assert!(set_cookies(&r).is_empty());
    // Another state: refused.
    let forged = callback.replace("state=", "state=x");
    let r = remote("GET", &forged)
        .header("cookie", &pending)
        .send(s.addr())
        .unwrap();
    assert_eq!(r.status, 400);
    // The real one signs in, and an outside `next` becomes `/`.
    let r = remote("GET", &callback)
        .header("cookie", &pending)
        .send(s.addr())
        .unwrap();
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(r.header("location"), Some("/"));
    // The same code again: the provider refuses it, so does the host.
    let r = remote("GET", &callback)
        .header("cookie", &pending)
        .send(s.addr())
        .unwrap();
    assert_eq!(r.status, 400);
    assert_eq!(idp.refusals(), ["unknown or used code"]);
    // The provider's error is shown as a failure, nothing set.
    let r = remote("GET", "/login/callback?error=access_denied&state=x")
        .send(s.addr())
        .unwrap();
    assert_eq!(r.status, 400);
    assert!(!r.body.contains(CLIENT_SECRET));
}

#[test]
fn the_host_refuses_to_start_without_a_usable_provider_or_secret() {
    let idp = Provider::start();
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("bot/agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(agent.join("instructions.md"), "You are a test agent.\n").unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let start = |oidc: OidcOptions| {
        rt.block_on(agentkit::serve(
            dir.path(),
            ServeOptions {
                port: 0,
                state_root: Some(dir.path().join("state")),
                dev: true,
                oidc: Some(oidc),
                ..ServeOptions::default()
            },
        ))
        .map(|_| ())
        .unwrap_err()
        .to_string()
    };
    // A literal secret is refused: it must be a reference.
    let mut o = OidcOptions::new(idp.issuer(), CLIENT_ID);
    o.client_secret = Some(CLIENT_SECRET.into());
    let e = start(o);
    assert!(
        e.contains("must be a reference") && !e.contains(CLIENT_SECRET),
        "{e}"
    );
    // An unset variable.
    let mut o = OidcOptions::new(idp.issuer(), CLIENT_ID);
    o.client_secret = Some("${NOPE}".into());
    assert!(start(o).contains("empty or unset"));
    // An issuer whose discovery names another issuer.
    let o = OidcOptions::new(format!("{}/", idp.issuer()), CLIENT_ID);
    assert!(
        start(o).contains("names the issuer"),
        "trailing slash is another issuer"
    );
    // A missing secret file.
    let mut o = OidcOptions::new(idp.issuer(), CLIENT_ID);
    o.client_secret = Some("${file:/nonexistent/oidc-secret}".into());
    assert!(start(o).contains("cannot read"));
    // A clock skew past five minutes.
    let mut o = OidcOptions::new(idp.issuer(), CLIENT_ID);
    o.clock_skew = std::time::Duration::from_secs(3600);
    assert!(start(o).contains("at most 300 seconds"));
    // A secret from a file (the Docker and Kubernetes convention) starts it.
    let file = dir.path().join("oidc-secret");
    std::fs::write(&file, format!("{CLIENT_SECRET}\n")).unwrap();
    let mut o = OidcOptions::new(idp.issuer(), CLIENT_ID);
    o.client_secret = Some(format!("${{file:{}}}", file.display()));
    let handle = rt
        .block_on(agentkit::serve(
            dir.path(),
            ServeOptions {
                port: 0,
                state_root: Some(dir.path().join("state")),
                dev: true,
                oidc: Some(o),
                ..ServeOptions::default()
            },
        ))
        .unwrap();
    let login = Request::get("/login").send(handle.local_addr()).unwrap();
    assert_eq!(login.status, 303);
    rt.block_on(handle.close());
    // Nothing listening.
    let o = OidcOptions::new("http://127.0.0.1:9", CLIENT_ID);
    assert!(start(o).contains("discovery"));
}

#[test]
fn behind_an_https_public_url_the_cookies_are_secure_and_origin_is_that_url() {
    let idp = Provider::start();
    let mut oidc = OidcOptions::new(idp.issuer(), CLIENT_ID);
    oidc.client_secret = Some("${OIDC_CLIENT_SECRET}".into());
    let s = server(
        &[],
        ServeOptions {
            oidc: Some(oidc),
            public_url: Some("https://agents.example.com".into()),
            env: Env::new(|name| (name == "OIDC_CLIENT_SECRET").then(|| CLIENT_SECRET.to_owned())),
            ..ServeOptions::default()
        },
    );
    let login = remote("GET", "/login").send(s.addr()).unwrap();
    let pending = cookie(&login, "agentkit_login");
    let authorize = login.header("location").unwrap().to_owned();
    assert!(
        authorize.contains("redirect_uri=https%3A%2F%2Fagents.example.com%2Flogin%2Fcallback"),
        "{authorize}"
    );
    let back = Request::get(&path_of(&authorize))
        .send(idp.server.addr())
        .unwrap();
    let to = back.header("location").unwrap().to_owned();
    assert!(
        to.starts_with("https://agents.example.com/login/callback?"),
        "{to}"
    );
    // The proxy forwards the callback to the host.
    let done = remote("GET", &path_of(&to))
        .header("cookie", &pending)
        .send(s.addr())
        .unwrap();
    assert_eq!(done.status, 303, "{}", done.body);
    let all = set_cookies(&done);
    assert!(!all.is_empty());
    for c in &all {
        assert!(c.contains("; Secure"), "{c}");
    }
    let cookies = format!(
        "{}; {}",
        cookie(&done, "agentkit_session"),
        cookie(&done, "agentkit_csrf")
    );
    let post = |origin: &str| {
        remote("POST", "/bot/v1/session")
            .header("cookie", &cookies)
            .header("origin", origin)
            .json(&json!({"message": "hi"}))
            .send(s.addr())
            .unwrap()
            .status
    };
    assert_eq!(post("https://agents.example.com"), 200);
    // The request's own Host does not count when a public URL is set.
    assert_eq!(post("http://agents.example"), 401);
}

/// The host configuration file fills `ServeOptions`: its secrets by
/// reference resolved (a file, a variable, the secret command), the
/// OIDC client secret kept as a reference for sign-in to resolve; one it
/// cannot resolve is an error at its line that holds no value.
#[test]
fn the_host_configuration_file_fills_the_options_with_its_secrets_resolved() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("database-url"),
        "postgres://agentkit@db/agentkit\n",
    )
    .unwrap();
    let path = dir.path().join("agentkit.toml");
    let text = format!(
        r#"[server]
listen = "0.0.0.0:8080"
public_url = "https://agents.example.com"
state_root = "state"
database_url = "${{file:{dir}/database-url}}"
metrics_public = true

[auth]
operator_token = "${{secret:ops-token}}"
bearer_token = "${{BEARER}}"

[auth.oidc]
issuer = "https://login.example.com/realms/acme"
client_id = "agentkit"
client_secret = "${{file:/run/secrets/oidc-client-secret}}"
clock_skew = "30s"
"#,
        dir = dir.path().display()
    );
    std::fs::write(&path, &text).unwrap();
    let config = agentkit::read_host_config(&path).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let options = |bearer: Option<&'static str>| ServeOptions {
        env: Env::new(move |name| {
            (name == "BEARER")
                .then(|| bearer.map(str::to_owned))
                .flatten()
        }),
        // Prints the secret's name: `${secret:ops-token}` is `ops-token`.
        secret_command: agentkit::secrets::SecretCommand::parse("echo"),
        ..ServeOptions::default()
    };
    let mut o = options(Some("b-token"));
    rt.block_on(agentkit::apply_host_config(&config, &mut o))
        .unwrap();
    assert_eq!((o.host.to_string(), o.port), ("0.0.0.0".to_owned(), 8080));
    assert_eq!(o.public_url.as_deref(), Some("https://agents.example.com"));
    assert_eq!(o.state_root, Some(dir.path().join("state")));
    assert_eq!(
        o.database_url.as_deref(),
        Some("postgres://agentkit@db/agentkit")
    );
    assert!(o.telemetry.metrics_public);
    assert_eq!(o.operator_token.as_deref(), Some("ops-token"));
    assert_eq!(o.bearer_token.as_deref(), Some("b-token"));
    let oidc = o.oidc.unwrap();
    assert_eq!(
        oidc.client_secret.as_deref(),
        Some("${file:/run/secrets/oidc-client-secret}")
    );
    assert_eq!(oidc.clock_skew, std::time::Duration::from_secs(30));
    assert_eq!(oidc.scopes, ["profile", "email"]);

    // An unset variable: the file, the line, the field.
    let mut o = options(None);
    let e = rt
        .block_on(agentkit::apply_host_config(&config, &mut o))
        .unwrap_err();
    let agentkit::Error::HostConfig { diagnostics, .. } = e else {
        panic!("{e}");
    };
    let shown: Vec<String> = diagnostics.iter().map(ToString::to_string).collect();
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(
        shown[0].starts_with(&format!(
            "{}:10:16: error[secret-unavailable]: `auth.bearer_token`",
            path.display()
        )),
        "{shown:?}"
    );
}
