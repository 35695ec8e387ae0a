//! GitHub App installation tokens against a mock GitHub API: the mock
//! verifies the App JWT with the public key of the committed test key
//! pair and checks its claims before handing out an installation token;
//! commit statuses then carry `token <installation token>`; tokens are
//! cached per installation and minted again after a 401.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use agentkit::{EnvLookup, ServeOptions};
use agentkit_test_support::http::Request;
use agentkit_test_support::mock::{MockResponse, MockServer, Recorded};
use aws_lc_rs::signature::{RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

const SECRET: &str = "It's a Secret to Everybody";
const SHA: &str = "ec26c3e57ca3a959ca5aad62de7213c562f8c821";

const CHANNEL: &str = r#"kind = "github"
webhook_secret = "${GITHUB_WEBHOOK_SECRET}"
api_url = "${GITHUB_API_URL}"
app_id = 12345
private_key = "${GITHUB_APP_PRIVATE_KEY}"
[progress]
commit_status = true
[[rules]]
event = "pull_request"
actions = ["opened"]
turn = {}
"#;

fn app_fixture(name: &str) -> String {
    std::fs::read_to_string(
        agentkit_test_support::fixtures_dir()
            .join("github/test-app")
            .join(name),
    )
    .unwrap()
}

/// The DER body of a PEM block.
fn pem_der(pem: &str) -> Vec<u8> {
    let b64: String = pem
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect::<Vec<_>>()
        .join("");
    STANDARD.decode(b64).unwrap()
}

/// The claims of an App JWT whose RS256 signature verifies with the test
/// App's public key; `None` otherwise.
fn verified_claims(jwt: &str) -> Option<Value> {
    let public = pem_der(&app_fixture("public-key.pem"));
    let (signed, signature) = jwt.rsplit_once('.')?;
    let signature = URL_SAFE_NO_PAD.decode(signature).ok()?;
    UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, &public)
        .verify(signed.as_bytes(), &signature)
        .ok()?;
    let (header, claims) = signed.split_once('.')?;
    let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).ok()?).ok()?;
    if header["alg"] != "RS256" {
        return None;
    }
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).ok()?).ok()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn project(dir: &Path, channel: &str) -> std::path::PathBuf {
    let root = dir.join("app-bot");
    write(&root.join("agent/agent.toml"), "model = \"test\"\n");
    write(&root.join("agent/instructions.md"), "You review.\n");
    write(&root.join("agent/channels/github.toml"), channel);
    root
}

fn env(vars: Vec<(&'static str, String)>) -> EnvLookup {
    EnvLookup(Arc::new(move |name| {
        vars.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.clone())
    }))
}

/// `pull_request.opened` for PR `number`, as installation 777's App
/// webhook delivers it.
fn opened(number: u64) -> Vec<u8> {
    let mut p: Value = serde_json::from_slice(
        &std::fs::read(
            agentkit_test_support::fixtures_dir().join("github/pull_request.opened.json"),
        )
        .unwrap(),
    )
    .unwrap();
    p["pull_request"]["number"] = json!(number);
    p["installation"] = json!({"id": 777, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uNzc3"});
    serde_json::to_vec(&p).unwrap()
}

fn deliver(
    addr: std::net::SocketAddr,
    id: &str,
    body: &[u8],
) -> agentkit_test_support::http::Response {
    Request::post("/app-bot/v1/channels/github")
        .header("x-github-event", "pull_request")
        .header("x-github-delivery", id)
        .header(
            "x-hub-signature-256",
            &format!("sha256={}", agentkit_channels::sign(SECRET, body)),
        )
        .header("content-type", "application/json")
        .raw_body(body)
        .send(addr)
        .unwrap()
}

#[test]
fn app_installation_tokens_are_minted_cached_and_refreshed_after_a_401() {
    let minted = Arc::new(AtomicUsize::new(0));
    let revoked = Arc::new(AtomicBool::new(false));
    let (m, r) = (minted.clone(), revoked.clone());
    let api = MockServer::start(move |req: &Recorded| {
        match (req.method.as_str(), req.path.as_str()) {
            ("POST", "/app/installations/777/access_tokens") => {
                let jwt = req
                    .header("authorization")
                    .and_then(|a| a.strip_prefix("Bearer "))
                    .unwrap_or("");
                if verified_claims(jwt).is_none() {
                    return MockResponse::json(
                        401,
                        &json!({"message": "A JSON web token could not be decoded"}),
                    );
                }
                let n = m.fetch_add(1, Ordering::SeqCst) + 1;
                let expires = chrono::Utc::now() + chrono::Duration::hours(1);
                MockResponse::json(
                    201,
                    &json!({
                        "token": format!("ghs_installation{n}"),
                        "expires_at": expires.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                        "permissions": {"statuses": "write"},
                        "repository_selection": "all",
                    }),
                )
            }
            ("POST", p) if p.starts_with("/repos/") => {
                let auth = req.header("authorization").unwrap_or("");
                if !auth.starts_with("token ghs_")
                    || (r.load(Ordering::SeqCst) && auth == "token ghs_installation1")
                {
                    return MockResponse::json(401, &json!({"message": "Bad credentials"}));
                }
                MockResponse::json(201, &json!({"state": "ok"}))
            }
            _ => MockResponse::json(404, &json!({"message": "Not Found"})),
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let root = project(dir.path(), CHANNEL);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let handle = rt
        .block_on(agentkit::serve(
            &root,
            ServeOptions {
                port: 0,
                state_root: Some(dir.path().join("state")),
                env: env(vec![
                    ("GITHUB_WEBHOOK_SECRET", SECRET.into()),
                    ("GITHUB_API_URL", api.url()),
                    ("GITHUB_APP_PRIVATE_KEY", app_fixture("private-key.pem")),
                ]),
                ..ServeOptions::default()
            },
        ))
        .unwrap();
    let addr = handle.local_addr();
    let statuses = |n: usize| -> Vec<Recorded> {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let s: Vec<Recorded> = api
                .requests()
                .into_iter()
                .filter(|q| q.path == format!("/repos/Codertocat/Hello-World/statuses/{SHA}"))
                .collect();
            let done = s.iter().filter(|q| q.json()["state"] != "pending").count();
            if done >= n || std::time::Instant::now() > deadline {
                return s;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };

    // The first delivery mints a token for its installation; both status
    // updates of its turn carry it.
    let r = deliver(addr, "d-1", &opened(1));
    assert_eq!(r.status, 202, "{}", r.body);
    let s = statuses(1);
    let seen: Vec<(String, String)> = s
        .iter()
        .map(|q| {
            (
                q.json()["state"].as_str().unwrap().to_owned(),
                q.header("authorization").unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            ("pending".into(), "token ghs_installation1".into()),
            ("success".into(), "token ghs_installation1".into()),
        ]
    );
    let token_requests: Vec<Recorded> = api
        .requests()
        .into_iter()
        .filter(|q| q.path.ends_with("/access_tokens"))
        .collect();
    assert_eq!(token_requests.len(), 1);
    let jwt = token_requests[0]
        .header("authorization")
        .unwrap()
        .strip_prefix("Bearer ")
        .unwrap();
    let claims = verified_claims(jwt).expect("the JWT verifies with the App's public key");
    assert_eq!(claims["iss"], 12345);
    let (iat, exp) = (
        claims["iat"].as_i64().unwrap(),
        claims["exp"].as_i64().unwrap(),
    );
    assert_eq!(exp - iat, 600, "{claims}");
    let now = chrono::Utc::now().timestamp();
    // iat a minute back for clock drift; exp within GitHub's ten minutes.
    assert!(iat <= now - 59 && iat > now - 600, "{claims}");
    assert!(exp > now && exp <= now + 541, "{claims}");

    // A second delivery of the same installation reuses the cached token.
    let r = deliver(addr, "d-2", &opened(2));
    assert_eq!(r.status, 202, "{}", r.body);
    let s = statuses(2);
    assert!(
        s.iter()
            .all(|q| q.header("authorization") == Some("token ghs_installation1"))
    );
    assert_eq!(minted.load(Ordering::SeqCst), 1);

    // GitHub revokes it: the 401 makes the client mint a new token once
    // and retry, and the turn's statuses go through.
    revoked.store(true, Ordering::SeqCst);
    let r = deliver(addr, "d-3", &opened(3));
    assert_eq!(r.status, 202, "{}", r.body);
    let s = statuses(3);
    let after: Vec<String> = s[4..]
        .iter()
        .map(|q| {
            format!(
                "{} {}",
                q.json()["state"].as_str().unwrap(),
                q.header("authorization").unwrap()
            )
        })
        .collect();
    assert_eq!(
        after,
        vec![
            "pending token ghs_installation1",
            "pending token ghs_installation2",
            "success token ghs_installation2",
        ]
    );
    assert_eq!(minted.load(Ordering::SeqCst), 2);
    rt.block_on(handle.close());
}

#[test]
fn half_set_or_unusable_app_credentials_are_refused_without_echoing_the_key() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let serve = |channel: &str, vars: Vec<(&'static str, String)>| -> String {
        let dir = tempfile::tempdir().unwrap();
        let root = project(dir.path(), channel);
        match rt.block_on(agentkit::serve(
            &root,
            ServeOptions {
                port: 0,
                state_root: Some(dir.path().join("state")),
                env: env(vars),
                ..ServeOptions::default()
            },
        )) {
            Ok(_) => panic!("served {channel}"),
            Err(e) => e.to_string(),
        }
    };
    let e = serve("kind = \"github\"\napp_id = 12345\n", vec![]);
    assert!(e.contains("half set") && e.contains("private_key"), "{e}");
    let e = serve(
        "kind = \"github\"\nprivate_key = \"${GITHUB_APP_PRIVATE_KEY}\"\n",
        vec![],
    );
    assert!(e.contains("half set") && e.contains("app_id"), "{e}");
    let e = serve(CHANNEL, vec![]);
    assert!(e.contains("resolves to nothing"), "{e}");
    let e = serve(
        CHANNEL,
        vec![(
            "GITHUB_APP_PRIVATE_KEY",
            "-----BEGIN RSA PRIVATE KEY-----\nU0VDUkVUU1RVRkY=\n-----END RSA PRIVATE KEY-----"
                .into(),
        )],
    );
    assert!(
        e.contains("not a usable RSA key") && !e.contains("U0VDUkVU"),
        "{e}"
    );
    let e = serve(
        "kind = \"github\"\napp_id = 1\nprivate_key_path = \"missing.pem\"\n",
        vec![],
    );
    assert!(
        e.contains("private_key_path") && e.contains("missing.pem"),
        "{e}"
    );
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Comment {
    number: u64,
    text: String,
}

const BRIDGE_TOOL: &str = r#"description = "Reads a pull request through the host bridge"
command = ["python3", "pr.py"]
[input_schema]
type = "object"
"#;

const BRIDGE_PY: &str = r#"import json, os, sys, urllib.request
req = urllib.request.Request(
    os.environ["AGENTKIT_HOST_URL"] + "/v1/github",
    data=json.dumps({"method": "GET", "path": "/repos/Codertocat/Hello-World/pulls/2"}).encode(),
    headers={"Authorization": "Bearer " + os.environ["AGENTKIT_HOST_TOKEN"],
             "Content-Type": "application/json"},
    method="POST")
with urllib.request.urlopen(req) as r:
    print(json.dumps(json.load(r)["result"]))
"#;

#[test]
fn host_github_serves_rust_tools_and_the_bridge_with_the_channels_credentials() {
    let api = MockServer::start(|req: &Recorded| {
        if req.header("authorization") != Some("Bearer ghp_channel") {
            return MockResponse::json(401, &json!({"message": "Bad credentials"}));
        }
        match (req.method.as_str(), req.path.as_str()) {
            ("POST", "/repos/Codertocat/Hello-World/issues/2/comments") => {
                MockResponse::json(201, &json!({"id": 991, "body": req.json()["body"]}))
            }
            ("GET", "/repos/Codertocat/Hello-World/pulls/2") => MockResponse::json(
                200,
                &json!({"number": 2, "head": {"sha": SHA}, "state": "open"}),
            ),
            _ => MockResponse::json(404, &json!({"message": "Not Found"})),
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let root = project(
        dir.path(),
        "kind = \"github\"\napi_url = \"${GITHUB_API_URL}\"\ntoken = \"${CHANNEL_TOKEN}\"\n",
    );
    write(&root.join("agent/tools/pr.toml"), BRIDGE_TOOL);
    write(&root.join("agent/tools/pr.py"), BRIDGE_PY);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let options = ServeOptions {
        port: 0,
        state_root: Some(dir.path().join("state")),
        env: env(vec![
            ("GITHUB_API_URL", api.url()),
            ("CHANNEL_TOKEN", "ghp_channel".into()),
        ]),
        ..ServeOptions::default()
    }
    .tool(agentkit::RustTool::new(
        "comment",
        "Comments on a pull request.",
        |input: Comment, ctx: agentkit::ToolContext| async move {
            let host = ctx
                .services::<agentkit::HostServices>()
                .ok_or("no services")?;
            let github = host.github.client(None).map_err(|e| e.to_string())?;
            let id = github
                .create_comment("Codertocat/Hello-World", input.number, &input.text)
                .await
                .map_err(|e| e.to_string())?;
            let other = host.github.client(Some("nope")).map(|_| ()).unwrap_err();
            Ok(json!({"commentId": id, "names": host.github.names(), "other": other.to_string()}))
        },
    ));
    let handle = rt.block_on(agentkit::serve(&root, options)).unwrap();
    let call = |tool: &str, input: Value| {
        let r = Request::post(&format!("/app-bot/v1/tools/{tool}"))
            .json(&json!({"input": input}))
            .send(handle.local_addr())
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        let body = r.json();
        assert_eq!(body["isError"], false, "{body}");
        body["result"].clone()
    };
    let out = call("comment", json!({"number": 2, "text": "Looks good"}));
    assert_eq!(out["commentId"], 991);
    assert_eq!(out["names"], json!(["github"]));
    assert!(
        out["other"]
            .as_str()
            .unwrap()
            .contains("no github channel `nope`"),
        "{out}"
    );
    let out = call("pr", json!({}));
    assert_eq!(
        out,
        json!({"number": 2, "head": {"sha": SHA}, "state": "open"})
    );
    let seen: Vec<String> = api
        .requests()
        .iter()
        .map(|q| format!("{} {} {}", q.method, q.path, q.text()))
        .collect();
    assert_eq!(
        seen,
        vec![
            r#"POST /repos/Codertocat/Hello-World/issues/2/comments {"body":"Looks good"}"#,
            "GET /repos/Codertocat/Hello-World/pulls/2 ",
        ]
    );
    rt.block_on(handle.close());
}
