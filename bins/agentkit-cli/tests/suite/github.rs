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
