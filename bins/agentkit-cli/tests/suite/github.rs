//! `agentkit github`: the channels and events of a project, and replaying
//! signed deliveries (a saved payload, or one synthesised from a pull
//! request read through a mock GitHub API) at an in-process server.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::Arc;

use serde_json::{Value, json};

use super::{agentkit_with, fixtures};

const SECRET: &str = "replay-secret";

fn reviewer() -> std::path::PathBuf {
    fixtures().join("channels/pr-reviewer")
}

#[test]
fn events_lists_each_github_channel_with_its_events() {
    let dir = reviewer();
    let run = agentkit_with(&dir, &["github", "events", "--dir", ".", "--json"], |_| {});
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(
        doc["channels"],
        json!([{"slug": "pr-reviewer", "channel": "github", "path": "/pr-reviewer/v1/channels/github", "events": ["pull_request", "issue_comment"]}])
    );
    let text = agentkit_with(&dir, &["github", "events"], |_| {});
    assert_eq!(
        text.stdout.trim(),
        "/pr-reviewer/v1/channels/github  pull_request,issue_comment"
    );
}

/// Answers every request with the `pull_request` object of GitHub's
/// example payload, recording the request line.
fn mock_api() -> (String, std::sync::mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let pr = serde_json::from_slice::<Value>(
        &std::fs::read(fixtures().join("github/pull_request.opened.json")).unwrap(),
    )
    .unwrap()["pull_request"]
        .to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut first = String::new();
            reader.read_line(&mut first).unwrap();
            let mut len = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if line.trim().is_empty() {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; len];
            reader.read_exact(&mut body).unwrap();
            tx.send(first.trim().to_owned()).unwrap();
            let resp = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{pr}",
                pr.len()
            );
            stream.write_all(resp.as_bytes()).unwrap();
        }
    });
    (format!("http://{addr}"), rx)
}

#[test]
fn replay_signs_saved_and_synthesised_deliveries() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let state = tempfile::tempdir().unwrap();
    let env = agentkit::EnvLookup(Arc::new(|name| {
        (name == "GITHUB_WEBHOOK_SECRET").then(|| SECRET.to_owned())
    }));
    let handle = rt
        .block_on(agentkit::serve(
            &reviewer(),
            agentkit::ServeOptions {
                port: 0,
                state_root: Some(state.path().to_path_buf()),
                env,
                ..Default::default()
            },
        ))
        .unwrap();
    let url = handle.url();
    let payload = fixtures().join("github/pull_request.opened.json");
    let payload = payload.to_str().unwrap();

    // A wrong secret is refused by the channel, and replay says so (exit 1).
    let bad = agentkit_with(
        &reviewer(),
        &[
            "github",
            "replay",
            "--payload",
            payload,
            "--dir",
            ".",
            "--url",
            &url,
            "--secret",
            "nope",
            "--json",
        ],
        |c| {
            c.env_remove("GITHUB_WEBHOOK_SECRET");
        },
    );
    assert_eq!(bad.code, 1, "{}", bad.stdout);
    assert_eq!(
        serde_json::from_str::<Value>(&bad.stdout).unwrap()[0]["status"],
        401
    );

    let ok = agentkit_with(
        &reviewer(),
        &[
            "github",
            "replay",
            "--payload",
            payload,
            "--dir",
            ".",
            "--url",
            &url,
            "--json",
        ],
        |c| {
            c.env("GITHUB_WEBHOOK_SECRET", SECRET);
        },
    );
    assert_eq!(ok.code, 0, "{}\n{}", ok.stdout, ok.stderr);
    let out: Value = serde_json::from_str(&ok.stdout).unwrap();
    assert_eq!(
        (out[0]["event"].clone(), out[0]["status"].clone()),
        (json!("pull_request"), json!(202))
    );
    assert_eq!(
        out[0]["response"]["continuationToken"],
        "pr:Codertocat/Hello-World#2"
    );

    // The PR form reads the pull request through the API and synthesises
    // a `synchronize` delivery on the same PR: the same session.
    let (api, requests) = mock_api();
    let synth = agentkit_with(
        &reviewer(),
        &[
            "github",
            "replay",
            "https://github.com/Codertocat/Hello-World/pull/2",
            "--dir",
            ".",
            "--url",
            &url,
            "--action",
            "synchronize",
            "--api-url",
            &api,
            "--json",
        ],
        |c| {
            c.env("GITHUB_WEBHOOK_SECRET", SECRET);
        },
    );
    assert_eq!(synth.code, 0, "{}\n{}", synth.stdout, synth.stderr);
    assert_eq!(
        requests.recv().unwrap(),
        "GET /repos/Codertocat/Hello-World/pulls/2 HTTP/1.1"
    );
    let out2: Value = serde_json::from_str(&synth.stdout).unwrap();
    assert_eq!(out2[0]["status"], 202, "{out2}");
    assert_eq!(
        out2[0]["response"]["sessionId"],
        out[0]["response"]["sessionId"]
    );
    assert_eq!(out2[0]["response"]["isNew"], false);

    // A dry run writes the payloads instead.
    let dir = tempfile::tempdir().unwrap();
    let dry = agentkit_with(
        &reviewer(),
        &[
            "github",
            "replay",
            "Codertocat/Hello-World#2",
            "--dir",
            ".",
            "--events",
            "*",
            "--dry-run",
            "--out",
            dir.path().to_str().unwrap(),
            "--api-url",
            &api,
        ],
        |_| {},
    );
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    let mut files: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        ["issue_comment.created.json", "pull_request.opened.json"]
    );
    rt.block_on(handle.close());
}

#[test]
fn forward_without_gh_says_what_is_missing() {
    let run = agentkit_with(
        &reviewer(),
        &["github", "forward", "--dir", ".", "--repo", "o/r"],
        |c| {
            c.env("PATH", "/nonexistent");
        },
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("`gh` is not installed"),
        "{}",
        run.stderr
    );
}

/// Several GitHub channels match: `forward` runs one `gh webhook forward`
/// pointed at a local relay, which POSTs each delivery unchanged (body,
/// event, delivery id, signature) to every channel. `gh` here is a stand-in
/// script on PATH that sends one delivery to the `--url` it is given, as
/// the real extension does, and records the relay's answer.
#[test]
fn forward_fans_out_to_every_matching_channel_through_a_local_relay() {
    use agentkit_test_support::mock::{MockResponse, MockServer};
    let host = tempfile::tempdir().unwrap();
    for (slug, event) in [("alpha", "pull_request"), ("beta", "issue_comment")] {
        let agent = host.path().join(slug).join("agent");
        std::fs::create_dir_all(agent.join("channels")).unwrap();
        std::fs::write(agent.join("agent.toml"), "model = \"test\"\n").unwrap();
        std::fs::write(agent.join("instructions.md"), "Review.\n").unwrap();
        std::fs::write(
            agent.join("channels/github.toml"),
            format!(
                "kind = \"github\"\nwebhook_secret = \"s3cret\"\n[[rules]]\nevent = \"{event}\"\n[rules.turn]\nmessage = \"x\"\n"
            ),
        )
        .unwrap();
    }
    // Stands in for the agentkit server: records what the relay delivers.
    let server = MockServer::start(|_| MockResponse::json(202, &json!({"ok": true})));
    let bin = tempfile::tempdir().unwrap();
    let out = bin.path().join("relay-answer.json");
    let gh = bin.path().join("gh");
    std::fs::write(
        &gh,
        r#"#!/usr/bin/env python3
import hashlib, hmac, json, os, sys, urllib.request
args = dict(a[2:].split("=", 1) for a in sys.argv[3:] if a.startswith("--"))
body = json.dumps({"action": "opened", "number": 7}).encode()
sig = "sha256=" + hmac.new(args["secret"].encode(), body, hashlib.sha256).hexdigest()
req = urllib.request.Request(args["url"], data=body, method="POST", headers={
    "Content-Type": "application/json", "X-GitHub-Event": "pull_request",
    "X-GitHub-Delivery": "d-123", "X-Hub-Signature-256": sig})
with urllib.request.urlopen(req) as r:
    answer = {"status": r.status, "body": json.load(r), "argv": sys.argv[1:]}
open(os.environ["FAKE_GH_OUT"], "w").write(json.dumps(answer))
"#,
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&gh, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let url = server.url();
    let run = agentkit_with(
        host.path(),
        &[
            "github", "forward", "--dir", ".", "--repo", "o/r", "--url", &url, "--secret", "s3cret",
        ],
        |c| {
            c.env("PATH", &path).env("FAKE_GH_OUT", &out);
        },
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("relaying to 2 channels"),
        "{}",
        run.stderr
    );
    let answer: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(answer["status"], 200, "{answer}");
    assert_eq!(answer["body"]["ok"], true, "{answer}");
    // One subscription for the union of the channels' events.
    let argv: Vec<&str> = answer["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        argv.contains(&"--events=pull_request,issue_comment"),
        "{argv:?}"
    );
    assert!(argv.contains(&"--repo=o/r"), "{argv:?}");
    let mut paths: Vec<String> = server.requests().iter().map(|r| r.path.clone()).collect();
    paths.sort();
    assert_eq!(
        paths,
        ["/alpha/v1/channels/github", "/beta/v1/channels/github"]
    );
    for r in server.requests() {
        assert_eq!(r.header("x-github-event"), Some("pull_request"));
        assert_eq!(r.header("x-github-delivery"), Some("d-123"));
        assert!(
            r.header("x-hub-signature-256")
                .unwrap()
                .starts_with("sha256=")
        );
        assert_eq!(r.json(), json!({"action": "opened", "number": 7}));
    }
}

/// `replay --context` synthesises a commit `status` delivery on the pull
/// request's head commit, named by the context, its state from
/// `--conclusion`.
#[test]
fn replay_context_synthesises_a_commit_status_delivery() {
    let (api, requests) = mock_api();
    let run = agentkit_with(
        &reviewer(),
        &[
            "github",
            "replay",
            "Codertocat/Hello-World#2",
            "--dir",
            ".",
            "--context",
            "ci/build",
            "--conclusion",
            "failure",
            "--dry-run",
            "--api-url",
            &api,
            "--json",
        ],
        |_| {},
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(
        requests.recv().unwrap(),
        "GET /repos/Codertocat/Hello-World/pulls/2 HTTP/1.1"
    );
    let out: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(out.as_array().unwrap().len(), 1, "{out}");
    assert_eq!(out[0]["event"], "status");
    let status = &out[0]["response"];
    let pr = &serde_json::from_slice::<Value>(
        &std::fs::read(fixtures().join("github/pull_request.opened.json")).unwrap(),
    )
    .unwrap()["pull_request"];
    assert_eq!(status["context"], "ci/build");
    assert_eq!(status["state"], "failure");
    assert_eq!(status["sha"], pr["head"]["sha"]);
    assert_eq!(status["repository"]["full_name"], "Codertocat/Hello-World");
}

/// A `gh` stand-in that records its arguments and exits 0.
fn recording_gh() -> (tempfile::TempDir, String, std::path::PathBuf) {
    let bin = tempfile::tempdir().unwrap();
    let out = bin.path().join("argv.json");
    let gh = bin.path().join("gh");
    std::fs::write(
        &gh,
        "#!/usr/bin/env python3\nimport json, os, sys\nopen(os.environ['FAKE_GH_OUT'], 'w').write(json.dumps(sys.argv[1:]))\n",
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&gh, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    (bin, path, out)
}

/// `forward --org` subscribes to an organisation's deliveries, `--slug`
/// picks one agent of several, `--events` narrows the subscription (and
/// an event no matching channel publishes is refused).
#[test]
fn forward_takes_an_org_a_slug_and_a_narrower_event_list() {
    let host = tempfile::tempdir().unwrap();
    for (slug, events) in [
        ("alpha", "[\"pull_request\", \"issue_comment\"]"),
        ("beta", "[\"push\"]"),
    ] {
        let agent = host.path().join(slug).join("agent");
        std::fs::create_dir_all(agent.join("channels")).unwrap();
        std::fs::write(agent.join("agent.toml"), "model = \"test\"\n").unwrap();
        std::fs::write(agent.join("instructions.md"), "Review.\n").unwrap();
        std::fs::write(
            agent.join("channels/github.toml"),
            format!(
                "kind = \"github\"\nevents = {events}\n[[rules]]\nevent = \"*\"\n[rules.turn]\nmessage = \"x\"\n"
            ),
        )
        .unwrap();
    }
    let (_bin, path, out) = recording_gh();
    let forward = |extra: &[&str]| {
        let mut args = vec![
            "github",
            "forward",
            "--dir",
            ".",
            "--url",
            "http://127.0.0.1:9/",
        ];
        args.extend_from_slice(extra);
        agentkit_with(host.path(), &args, |c| {
            c.env("PATH", &path).env("FAKE_GH_OUT", &out);
        })
    };
    let run = forward(&[
        "--org",
        "acme",
        "--slug",
        "alpha",
        "--events",
        "pull_request",
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let argv: Vec<String> = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(
        argv,
        [
            "webhook",
            "forward",
            "--org=acme",
            "--events=pull_request",
            "--url=http://127.0.0.1:9/alpha/v1/channels/github"
        ]
    );

    // Without --events, the slug's channel's own events.
    let run = forward(&["--org", "acme", "--slug", "beta"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let argv: Vec<String> = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert!(argv.contains(&"--events=push".to_owned()), "{argv:?}");
    assert!(
        argv.contains(&"--url=http://127.0.0.1:9/beta/v1/channels/github".to_owned()),
        "{argv:?}"
    );

    // An event only another agent publishes; an unknown slug.
    let run = forward(&["--repo", "o/r", "--slug", "alpha", "--events", "push"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("publishes `push`"), "{}", run.stderr);
    let run = forward(&["--repo", "o/r", "--slug", "gamma"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("agent `gamma`"), "{}", run.stderr);
    // --repo and --org are exclusive.
    let run = forward(&["--repo", "o/r", "--org", "acme"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
}

/// A mock GitHub REST API keeping a repository's hooks: `GET /repos/o/r`,
/// `GET`/`POST /repos/o/r/hooks`, `PATCH /repos/o/r/hooks/{id}`, answered
/// in GitHub's documented shapes (a set secret reads `********`).
fn mock_hooks_api(
    hooks: Vec<Value>,
) -> (
    agentkit_test_support::mock::MockServer,
    Arc<std::sync::Mutex<Vec<Value>>>,
) {
    use agentkit_test_support::mock::{MockResponse, MockServer};
    let state = Arc::new(std::sync::Mutex::new(hooks));
    let shared = state.clone();
    let masked = |h: &Value| {
        let mut h = h.clone();
        if h["config"].get("secret").is_some() {
            h["config"]["secret"] = json!("********");
        }
        h
    };
    let server = MockServer::start(move |r| {
        if r.header("authorization") != Some("Bearer ghp-test") {
            return MockResponse::json(401, &json!({"message": "Bad credentials"}));
        }
        let mut hooks = shared.lock().unwrap();
        match (r.method.as_str(), r.path.as_str()) {
            ("GET", "/repos/o/r") => MockResponse::json(
                200,
                &json!({"full_name": "o/r", "permissions": {"admin": true, "push": true, "pull": true}}),
            ),
            ("GET", "/repos/o/r/hooks") => {
                MockResponse::json(200, &Value::Array(hooks.iter().map(masked).collect()))
            }
            ("POST", "/repos/o/r/hooks") => {
                let mut h = r.json();
                h["id"] = json!(100 + hooks.len());
                h["type"] = json!("Repository");
                hooks.push(h.clone());
                MockResponse::json(201, &masked(&h))
            }
            ("PATCH", p) if p.starts_with("/repos/o/r/hooks/") => {
                let id: u64 = p.rsplit('/').next().unwrap().parse().unwrap();
                let patch = r.json();
                let Some(h) = hooks.iter_mut().find(|h| h["id"] == id) else {
                    return MockResponse::json(404, &json!({"message": "Not Found"}));
                };
                for (k, v) in patch.as_object().unwrap() {
                    h[k] = v.clone();
                }
                MockResponse::json(200, &masked(h))
            }
            _ => MockResponse::json(404, &json!({"message": "Not Found"})),
        }
    });
    (server, state)
}

/// `github doctor` reads the channel's credentials and the repository's
/// hooks through the API at the channel's `api_url` and says what is
/// wrong (a form-encoded hook without the secret or the events the
/// channel needs); `--install` repairs it, and a repository without a
/// hook gets one created.
#[test]
fn doctor_checks_the_webhook_against_the_channel_and_install_fixes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("reviewer");
    let agent = project.join("agent");
    std::fs::create_dir_all(agent.join("channels")).unwrap();
    std::fs::write(agent.join("agent.toml"), "model = \"test\"\n").unwrap();
    std::fs::write(agent.join("instructions.md"), "Review.\n").unwrap();
    std::fs::write(
        agent.join("channels/github.toml"),
        "kind = \"github\"\napi_url = \"${TEST_GITHUB_API}\"\nwebhook_secret = \"${GITHUB_WEBHOOK_SECRET}\"\nevents = [\"pull_request\", \"issue_comment\"]\n[[rules]]\nevent = \"*\"\n[rules.turn]\nmessage = \"x\"\n",
    )
    .unwrap();
    let hook_url = "https://bot.example.com/reviewer/v1/channels/github";
    let (server, hooks) = mock_hooks_api(vec![json!({
        "id": 7, "type": "Repository", "name": "web", "active": true,
        "events": ["pull_request"],
        "config": {"url": hook_url, "content_type": "form", "insecure_ssl": "0"},
    })]);
    let api = server.url();
    let doctor = |extra: &[&str]| {
        let mut args = vec!["github", "doctor", "--dir", ".", "--repo", "o/r"];
        args.extend_from_slice(extra);
        agentkit_with(&project, &args, |c| {
            c.env("TEST_GITHUB_API", &api)
                .env("GITHUB_TOKEN", "ghp-test")
                .env_remove("GH_TOKEN")
                .env("GITHUB_WEBHOOK_SECRET", SECRET);
        })
    };
    let run = doctor(&["--json"]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    let check = |report: &Value, name: &str| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("{name}: {report}"))
            .clone()
    };
    assert_eq!(check(&report, "credentials")["ok"], true);
    assert_eq!(check(&report, "webhook")["ok"], true, "{report}");
    assert_eq!(check(&report, "content type")["ok"], false);
    assert_eq!(check(&report, "secret")["ok"], false);
    let events = check(&report, "events");
    assert_eq!(events["ok"], false);
    assert!(
        events["detail"].as_str().unwrap().contains("issue_comment"),
        "{events}"
    );
    // The readable report says what to fix.
    let text = doctor(&[]);
    assert_eq!(text.code, 1);
    assert!(text.stdout.contains("FIX content type"), "{}", text.stdout);
    assert!(text.stdout.contains("--install"), "{}", text.stdout);
    assert!(!text.stdout.contains(SECRET) && !text.stderr.contains(SECRET));

    // --install repairs hook 7 in place: json, the secret, every event.
    let run = doctor(&["--install", "--url", "https://bot.example.com/", "--json"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    assert!(
        report["installed"][0]
            .as_str()
            .unwrap()
            .starts_with("updated hook 7"),
        "{report}"
    );
    {
        let hooks = hooks.lock().unwrap();
        assert_eq!(hooks.len(), 1);
        assert_eq!(hooks[0]["config"]["content_type"], "json");
        assert_eq!(hooks[0]["config"]["secret"], SECRET);
        assert_eq!(hooks[0]["events"], json!(["pull_request", "issue_comment"]));
    }
    assert!(!run.stdout.contains(SECRET));
    assert_eq!(doctor(&[]).code, 0);

    // No hook at all: reported, then created.
    hooks.lock().unwrap().clear();
    let run = doctor(&["--json"]);
    assert_eq!(run.code, 1);
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(check(&report, "webhook")["ok"], false);
    let run = doctor(&["--install", "--url", "https://bot.example.com"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("created hook"), "{}", run.stdout);
    let hooks = hooks.lock().unwrap();
    assert_eq!(hooks[0]["config"]["url"], hook_url);
    assert_eq!(hooks[0]["config"]["content_type"], "json");
    assert_eq!(hooks[0]["active"], true);

    // A refused token says so.
    drop(hooks);
    let run = agentkit_with(
        &project,
        &["github", "doctor", "--dir", ".", "--repo", "o/r"],
        |c| {
            c.env("TEST_GITHUB_API", &api)
                .env("GITHUB_TOKEN", "wrong")
                .env("GITHUB_WEBHOOK_SECRET", SECRET);
        },
    );
    assert_eq!(run.code, 1);
    assert!(run.stdout.contains("FIX credentials"), "{}", run.stdout);
}

/// With GitHub App credentials, `doctor` mints an installation token
/// (the App JWT signed with the committed test key) and checks that the
/// installation covers the repository before reading its hooks with it.
#[test]
fn doctor_checks_a_github_app_installation() {
    use agentkit_test_support::mock::{MockResponse, MockServer};
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("reviewer");
    let agent = project.join("agent");
    std::fs::create_dir_all(agent.join("channels")).unwrap();
    std::fs::write(agent.join("agent.toml"), "model = \"test\"\n").unwrap();
    std::fs::write(agent.join("instructions.md"), "Review.\n").unwrap();
    std::fs::write(
        agent.join("channels/github.toml"),
        "kind = \"github\"\napi_url = \"${TEST_GITHUB_API}\"\napp_id = 12345\ninstallation_id = 777\nprivate_key = \"${GITHUB_APP_PRIVATE_KEY}\"\nwebhook_secret = \"${GITHUB_WEBHOOK_SECRET}\"\nevents = [\"pull_request\"]\n[[rules]]\nevent = \"*\"\n[rules.turn]\nmessage = \"x\"\n",
    )
    .unwrap();
    let repos = Arc::new(std::sync::Mutex::new(json!(["o/other"])));
    let shared = repos.clone();
    let server = MockServer::start(move |r| match (r.method.as_str(), r.path.as_str()) {
        ("POST", "/app/installations/777/access_tokens") => {
            if !r
                .header("authorization")
                .is_some_and(|a| a.starts_with("Bearer ey"))
            {
                return MockResponse::json(
                    401,
                    &json!({"message": "A JSON web token could not be decoded"}),
                );
            }
            MockResponse::json(
                201,
                &json!({"token": "ghs-installation", "expires_at": "2099-01-01T00:00:00Z"}),
            )
        }
        (_, _) if r.header("authorization") != Some("token ghs-installation") => {
            MockResponse::json(401, &json!({"message": "Bad credentials"}))
        }
        ("GET", "/installation/repositories") => {
            let names = shared.lock().unwrap().clone();
            let list: Vec<Value> = names
                .as_array()
                .unwrap()
                .iter()
                .map(|n| json!({"full_name": n}))
                .collect();
            MockResponse::json(
                200,
                &json!({"total_count": list.len(), "repositories": list}),
            )
        }
        ("GET", "/repos/o/r/hooks") => MockResponse::json(
            200,
            &json!([{"id": 9, "active": true, "events": ["pull_request"], "config": {
                "url": "https://bot.example.com/reviewer/v1/channels/github",
                "content_type": "json", "secret": "********", "insecure_ssl": "0"}}]),
        ),
        _ => MockResponse::json(404, &json!({"message": "Not Found"})),
    });
    let key = std::fs::read_to_string(fixtures().join("github/test-app/private-key.pem")).unwrap();
    let api = server.url();
    let doctor = || {
        agentkit_with(
            &project,
            &["github", "doctor", "--dir", ".", "--repo", "o/r", "--json"],
            |c| {
                c.env("TEST_GITHUB_API", &api)
                    .env("GITHUB_APP_PRIVATE_KEY", &key)
                    .env("GITHUB_WEBHOOK_SECRET", SECRET)
                    .env_remove("GITHUB_TOKEN")
                    .env_remove("GH_TOKEN");
            },
        )
    };
    let run = doctor();
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(report["checks"][0]["name"], "credentials", "{report}");
    assert_eq!(report["checks"][0]["ok"], true, "{report}");
    assert_eq!(report["checks"][1]["name"], "installation");
    assert_eq!(report["checks"][1]["ok"], false);
    assert!(
        report["checks"][1]["fix"]
            .as_str()
            .unwrap()
            .contains("install the App on o/r"),
        "{report}"
    );

    *repos.lock().unwrap() = json!(["o/other", "o/r"]);
    let run = doctor();
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    let names: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "credentials",
            "installation",
            "webhook",
            "content type",
            "secret",
            "events"
        ]
    );
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.path == "/app/installations/777/access_tokens")
    );
}
