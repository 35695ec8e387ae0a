//! `agentkit serve --oidc-*` as a process, against the OpenID provider
//! stand-in: the sign-in flow over HTTP, then (when Chromium, Node and
//! playwright-core are here) the same in a real browser
//! (`crates/agentkit-playground/web/e2e/sso.mjs`): the playground sends a
//! remote browser through the provider, a turn and an approval run on the
//! session cookie, logout ends it here and at the provider. The server
//! logs at `debug` throughout, and its log never holds the client secret,
//! a code, a token or a cookie. A host configuration file (`--config`)
//! configures the same sign-in; a bad one names its file and line.
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
        // The browser's logout went on to the provider's end-session
        // endpoint with the sign-in's ID token, and came back.
        let logouts = idp.logouts();
        assert!(
            logouts.iter().any(|q| q
                .get("id_token_hint")
                .is_some_and(|h| idp.issued().contains(h))
                && q["post_logout_redirect_uri"].ends_with("/logout/callback")),
            "{logouts:?}"
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

/// `agentkit serve` for the weather agent with `args`, its stderr to `log`.
fn serve_command(tmp: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentkit"));
    command
        .args(["serve", "--dev", "--dir"])
        .arg(super::fixtures().join("agents/weather-agent"))
        .args(args)
        .current_dir(tmp)
        .env("NO_COLOR", "1")
        .env("ALERTS_TOKEN", "test-token")
        .env_remove("AGENTKIT_MODEL")
        .env_remove("AGENTKIT_BEARER_TOKEN")
        .env_remove("AGENTKIT_OPERATOR_TOKEN")
        .env_remove("AGENTKIT_CONFIG")
        .env_remove("AGENTKIT_OIDC_ISSUER")
        .env_remove("AGENTKIT_DATABASE_URL");
    command
}

/// The host configuration file: `[server]`, `[auth]` and `[auth.oidc]`
/// with the secrets as files (as a container's secret mounts are); a
/// flag wins over the file. People sign in over HTTP against the
/// provider stand-in, and the operator token read from its file is the
/// one that reads `/metrics`.
#[test]
fn a_host_configuration_file_configures_sign_in_and_flags_win_over_it() {
    let idp = Provider::start();
    let tmp = tempfile::tempdir().unwrap();
    let secrets = tmp.path().join("secrets");
    std::fs::create_dir(&secrets).unwrap();
    std::fs::write(
        secrets.join("oidc-client-secret"),
        format!("{CLIENT_SECRET}\n"),
    )
    .unwrap();
    std::fs::write(secrets.join("operator-token"), "ops-token-from-a-file\n").unwrap();
    let port = free_port();
    let config = tmp.path().join("agentkit.toml");
    std::fs::write(
        &config,
        format!(
            r#"# The host's own settings.
[server]
listen = "127.0.0.1:{port}"
state_root = "state"

[auth]
operator_token = "${{file:{secrets}/operator-token}}"

[auth.oidc]
issuer = "{issuer}"
client_id = "{CLIENT_ID}"
client_secret = "${{file:{secrets}/oidc-client-secret}}"
scopes = ["profile", "email", "groups"]
audiences = ["agentkit-api"]
session_ttl = "2h"
"#,
            secrets = secrets.display(),
            issuer = idp.issuer(),
        ),
    )
    .unwrap();
    let log = tmp.path().join("server.log");
    let child = serve_command(tmp.path(), &["--oidc-session-ttl", "1h"])
        .env("AGENTKIT_CONFIG", &config)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("spawn agentkit serve");
    // The port is the file's: no --port was given.
    let server = ServerProcess::healthy(child, port, Duration::from_secs(30));
    assert!(tmp.path().join("state").is_dir(), "the file's state root");

    let login = remote("GET", "/login?next=%2Fweather-agent%2Fplayground")
        .send(server.addr)
        .unwrap();
    assert_eq!(login.status, 303, "{}", login.body);
    let to = login.header("location").unwrap();
    assert!(
        to.contains("scope=openid+profile+email+groups")
            || to.contains("scope=openid%20profile%20email%20groups"),
        "{to}"
    );
    let pending = cookie(&login, "agentkit_login");
    let at_idp = Request::get(&path_of(login.header("location").unwrap()))
        .send(idp.server.addr())
        .unwrap();
    let done = remote("GET", &path_of(at_idp.header("location").unwrap()))
        .header("cookie", &pending)
        .send(server.addr)
        .unwrap();
    assert_eq!(done.status, 303, "{}", done.body);
    assert!(
        idp.refusals().is_empty(),
        "the file's client secret: {:?}",
        idp.refusals()
    );
    let set = done
        .headers
        .iter()
        .find(|(n, v)| n.eq_ignore_ascii_case("set-cookie") && v.starts_with("agentkit_session="))
        .map(|(_, v)| v.clone())
        .unwrap();
    // `--oidc-session-ttl 1h` wins over the file's `2h`.
    assert!(set.contains("Max-Age=3600"), "{set}");
    let session = cookie(&done, "agentkit_session");
    let info = remote("GET", "/weather-agent/v1/info")
        .header("cookie", &session)
        .send(server.addr)
        .unwrap();
    assert_eq!(info.status, 200, "{}", info.body);
    assert_eq!(info.json()["caller"]["principalId"], "oidc:alice");

    // The operator token from its file reads the host's figures; a
    // signed-in user does not.
    let metrics = remote("GET", "/metrics")
        .bearer("ops-token-from-a-file")
        .send(server.addr)
        .unwrap();
    assert_eq!(metrics.status, 200, "{}", metrics.body);
    let as_user = remote("GET", "/metrics")
        .header("cookie", &session)
        .send(server.addr)
        .unwrap();
    assert_eq!(as_user.status, 403, "{}", as_user.body);
    drop(server);
    let text = std::fs::read_to_string(&log).unwrap();
    for secret in [CLIENT_SECRET, "ops-token-from-a-file"] {
        assert!(!text.contains(secret), "a secret in the server log");
    }
}

/// A bad host configuration file keeps the host from starting, with each
/// problem at its file and line, a hint, and no secret in the output.
#[test]
fn a_bad_host_configuration_file_says_where_and_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let check = |text: &str| {
        let config = tmp.path().join("host.toml");
        std::fs::write(&config, text).unwrap();
        let out = serve_command(tmp.path(), &["--port", "0", "--config", "host.toml"])
            .output()
            .expect("run agentkit serve");
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        String::from_utf8(out.stderr)
            .unwrap()
            .lines()
            .filter(|l| l.contains(": error[") || l.starts_with("error:"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    expect_test::expect![[r#"
        host.toml:2:1: error[unknown-field]: unknown field `listn` (hint: did you mean `listen`?)
        error: not serving: the host configuration `host.toml` has 1 error(s)"#]]
    .assert_eq(&check("[server]\nlistn = \"0.0.0.0:3000\"\n"));
    let shown = check(
        r#"[server]
listen = "0.0.0.0"
database_url = "postgres://agentkit:hunter2@db/agentkit"

[auth.oidc]
issuer = "https://login.example.com"
client_id = "agentkit"
session_ttl = "forever"
"#,
    );
    assert!(!shown.contains("hunter2"), "{shown}");
    expect_test::expect![[r#"
        host.toml:2:10: error[invalid-value]: `server.listen`: `0.0.0.0` is not an address and port (hint: write e.g. `listen = "0.0.0.0:3000"` or `"[::]:3000"`)
        host.toml:3:16: error[invalid-value]: `server.database_url` must be a reference to the secret, not the secret itself (hint: write `"${file:/run/secrets/database-url}"`, `"${VARIABLE}"` or `"${secret:database-url}"`: a value in a file is read by whoever reads the file)
        host.toml:8:15: error[invalid-duration]: `auth.oidc.session_ttl`: `forever` is not a duration (expected number at 0); write e.g. `30s`, `10m` or `2h`
        error: not serving: the host configuration `host.toml` has 3 error(s)"#]]
    .assert_eq(&shown);
    // A reference that cannot be resolved, at its line.
    expect_test::expect![[r#"
        host.toml:3:18: error[secret-unavailable]: `auth.operator_token`: cannot read `/nonexistent/operator-token`: No such file or directory (os error 2) (hint: mount the file where the host runs, readable by its user)
        error: not serving: the host configuration `host.toml` has 1 error(s)"#]]
    .assert_eq(&check(
        "# secrets are files\n[auth]\noperator_token = \"${file:/nonexistent/operator-token}\"\n",
    ));
    // A file that does not exist.
    let out = serve_command(tmp.path(), &["--config", "missing.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("missing.toml: error[io]: cannot read file"),
        "{err}"
    );
}
