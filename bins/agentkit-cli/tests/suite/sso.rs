//! `agentkit serve --oidc-*` as a process, against the OpenID provider
//! stand-in: the sign-in flow over HTTP, then (when Chromium, Node and
//! playwright-core are here) the same in a real browser
//! (`crates/agentkit-playground/web/e2e/sso.mjs`): the playground sends a
//! remote browser through the provider, a turn and an approval run on the
//! session cookie, logout ends it. The server logs at `debug` throughout,
//! and its log never holds the client secret, a code, a token or a cookie.
//!
//! Under `CI=true` a missing browser or Node package fails the test;
//! elsewhere the browser part says what is missing and is skipped.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use agentkit_test_support::http::{Request, Response};
use agentkit_test_support::oidc::{CLIENT_ID, CLIENT_SECRET, Provider};
use agentkit_test_support::process::{ServerProcess, free_port};

const CHROMIUM: &str = "/usr/bin/chromium";

fn web_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crates/agentkit-playground/web")
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.as_str(), "" | "0" | "false"))
}

fn browser_missing() -> Vec<String> {
    let mut missing = Vec::new();
    if !Path::new(CHROMIUM).is_file() {
        missing.push(CHROMIUM.to_owned());
    }
    if !Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
    {
        missing.push("node".into());
    }
    if !web_dir().join("node_modules/playwright-core").is_dir() {
        missing.push("playwright-core (npm ci in crates/agentkit-playground/web)".into());
    }
    missing
}

fn remote(method: &str, path: &str) -> Request {
    Request::new(method, path)
        .host("agents.example")
        .header("x-forwarded-for", "203.0.113.9")
}

fn cookie(r: &Response, name: &str) -> String {
    r.headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("set-cookie"))
        .map(|(_, v)| v.split(';').next().unwrap().to_owned())
        .find(|c| c.starts_with(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} cookie: {:?}", r.headers))
}

fn path_of(url: &str) -> String {
    let rest = url.split_once("://").unwrap().1;
    format!("/{}", rest.split_once('/').unwrap().1)
}

#[test]
// The skip message is for the person running the tests.
#[allow(clippy::print_stderr)]
fn oidc_sign_in_works_from_the_cli_and_in_a_browser_and_logs_no_secret() {
    let idp = Provider::start();
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("server.log");
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_agentkit"))
        .args([
            "serve",
            "--dev",
            "--port",
            &port.to_string(),
            "--state-root",
        ])
        .arg(tmp.path().join("state"))
        .arg("--dir")
        .arg(super::fixtures().join("agents/weather-agent"))
        .args([
            "--oidc-issuer",
            &idp.issuer(),
            "--oidc-client-id",
            CLIENT_ID,
        ])
        .args(["--oidc-client-secret", "${OIDC_CLIENT_SECRET}"])
        .args(["--oidc-audiences", "agentkit-api"])
        .env("OIDC_CLIENT_SECRET", CLIENT_SECRET)
        .env("AGENTKIT_LOG", "debug")
        .env("NO_COLOR", "1")
        .env("ALERTS_TOKEN", "test-token")
        .env_remove("AGENTKIT_MODEL")
        .env_remove("AGENTKIT_BEARER_TOKEN")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("spawn agentkit serve");
    let server = ServerProcess::healthy(child, port, Duration::from_secs(30));

    // Over HTTP, as a browser would.
    let login = remote("GET", "/login?next=%2Fweather-agent%2Fplayground")
        .send(server.addr)
        .unwrap();
    assert_eq!(login.status, 303, "{}", login.body);
    let pending = cookie(&login, "agentkit_login");
    let at_idp = Request::get(&path_of(login.header("location").unwrap()))
        .send(idp.server.addr())
        .unwrap();
    assert_eq!(at_idp.status, 302, "{}", at_idp.body);
    let done = remote("GET", &path_of(at_idp.header("location").unwrap()))
        .header("cookie", &pending)
        .send(server.addr)
        .unwrap();
    assert_eq!(done.status, 303, "{}", done.body);
    let session = cookie(&done, "agentkit_session");
    let csrf = cookie(&done, "agentkit_csrf");
    let info = remote("GET", "/weather-agent/v1/info")
        .header("cookie", &session)
        .send(server.addr)
        .unwrap();
    assert_eq!(info.status, 200, "{}", info.body);
    assert_eq!(info.json()["caller"]["principalId"], "oidc:alice");
    assert!(!info.body.contains(CLIENT_SECRET));

    // In a real browser.
    let missing = browser_missing();
    if missing.is_empty() {
        let out = Command::new("node")
            .arg("e2e/sso.mjs")
            .args(["--url", &format!("http://{}", server.addr)])
            .args(["--slug", "weather-agent", "--principal", "oidc:alice"])
            .args(["--chromium", CHROMIUM])
            .current_dir(web_dir())
            .output()
            .expect("run node");
        assert!(
            out.status.success(),
            "the browser sign-in failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    } else {
        assert!(
            !in_ci(),
            "CI is set and the browser sign-in cannot run; missing: {}",
            missing.join(", ")
        );
        eprintln!(
            "skipping the browser sign-in; missing: {}",
            missing.join(", ")
        );
    }
    drop(server);

    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("signed in"), "the log was captured: {text}");
    let mut secrets = idp.issued();
    assert!(secrets.len() >= 3, "{secrets:?}");
    secrets.push(CLIENT_SECRET.to_owned());
    for c in [&session, &csrf, &pending] {
        secrets.push(c.split_once('=').unwrap().1.to_owned());
    }
    for secret in secrets {
        assert!(!text.contains(&secret), "a secret in the server log");
    }
}
