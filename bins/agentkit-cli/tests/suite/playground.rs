//! The playground and `/docs` in a real browser: `agentkit serve --dev`
//! on loopback (the weather fixture, the offline `test` model), driven by
//! headless Chromium through playwright-core
//! (`crates/agentkit-playground/web/e2e/playground.mjs`): load, send,
//! stream, approve, deny, reload and replay, the inbox, a deterministic
//! tool call, a schedule dispatch, the API view of the OpenAPI document,
//! `/docs`, and a `--bearer-token` host
//! used through the token field (files uploaded, previewed and downloaded
//! with the token). A third server runs the `keeper` project (a priced
//! scripted model) for the views of what an agent keeps: costs, the
//! Artifacts, Files and Memory views page by page, attachments and images.
//!
//! Under `CI=true` a missing browser or Node package fails the test (`.ci/run`
//! installs them); elsewhere the test says what is missing and passes.
//! Screenshots go to `$CARGO_TARGET_TMPDIR/playground-screenshots`.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use agentkit_test_support::http::Request;
use agentkit_test_support::process::{ServerProcess, free_port};

const CHROMIUM: &str = "/usr/bin/chromium";

fn web_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crates/agentkit-playground/web")
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.as_str(), "" | "0" | "false"))
}

/// What the browser test needs and does not find here.
fn missing() -> Vec<String> {
    let mut missing = Vec::new();
    if !Path::new(CHROMIUM).is_file() {
        missing.push(format!("{CHROMIUM} (apt-get install -y chromium)"));
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

/// Serves the weather fixture with `extra` flags; returns the server and
/// its banner (the lines printed before it was healthy).
fn serve(state: &Path, extra: &[&str]) -> (ServerProcess, String) {
    serve_dir(
        state,
        &super::fixtures().join("agents/weather-agent"),
        extra,
    )
}

/// A 2×2 red PNG, as the keeper's `snapshot` tool returns it.
const PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEElEQVR4nGP4z8AARAwQCgAf7gP9i18U1AAAAABJRU5ErkJggg==";

/// How many artifacts, memories and note files the keeper's first turn
/// makes: more than one page of the playground's views (50).
const KEPT: usize = 55;

/// A project at `root/keeper` whose scripted model, in its first turn, tags
/// `KEPT` artifacts, remembers `KEPT` notes and writes `KEPT` files: what
/// the playground's Artifacts, Memory and Files views show, page by page.
/// Its second turn calls `snapshot`, a tool returning an image.
/// The model has a price, so its steps and turn carry costs.
fn keeper(root: &Path) -> PathBuf {
    let dir = root.join("keeper");
    let agent = dir.join("agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("agent.toml"),
        "description = \"Keeps findings, notes and files\"\n\n\
         [model]\nprovider = \"scripted\"\nid = \"script.json\"\n\
         [model.pricing]\ninput = 2.0\noutput = 8.0\n\n\
         [harness]\nbuiltin_tools = [\"write\", \"remember\", \"recall\", \"forget\"]\n",
    )
    .unwrap();
    std::fs::write(agent.join("instructions.md"), "Keep what you find.\n").unwrap();
    std::fs::write(
        agent.join("artifacts.toml"),
        "agent_tool = true\n\n[kinds.finding]\ndescription = \"A finding\"\n\
         schema = { type = \"object\", required = [\"file\", \"line\", \"severity\"], properties = { \
         file = { type = \"string\" }, line = { type = \"integer\" }, severity = { enum = [\"low\", \"high\"] } } }\n",
    )
    .unwrap();
    let calls = |f: &dyn Fn(usize) -> serde_json::Value| -> Vec<serde_json::Value> {
        (0..KEPT).map(f).collect()
    };
    let script = serde_json::json!({"turns": [{"steps": [
        {"toolCalls": calls(&|i| serde_json::json!({"name": "tag_artifact", "input": {
            "kind": "finding", "key": format!("src/f{i:02}.rs"),
            "data": {"file": format!("src/f{i:02}.rs"), "line": i, "severity": if i % 2 == 0 { "high" } else { "low" }}}}))},
        {"toolCalls": calls(&|i| serde_json::json!({"name": "remember", "input": {
            "text": format!("note {i:02}: prefers answers in French"), "scope": if i == 0 { "agent" } else { "principal" }}}))},
        {"toolCalls": calls(&|i| serde_json::json!({"name": "write", "input": {
            "path": format!("notes/n{i:02}.txt"), "content": format!("note {i}")}}))},
        {"text": "Kept them all."}
    ]}, {"steps": [
        {"toolCalls": [{"name": "snapshot", "input": {}}]},
        {"text": "Here is a snapshot."}
    ]}]});
    // A tool returning an image inline, as a content item.
    std::fs::create_dir_all(agent.join("tools")).unwrap();
    std::fs::write(
        agent.join("tools/snapshot.toml"),
        "description = \"Takes a snapshot\"\ncommand = [\"python3\", \"snapshot.py\"]\n\
         timeout = \"10s\"\n\n[input_schema]\ntype = \"object\"\n",
    )
    .unwrap();
    std::fs::write(
        agent.join("tools/snapshot.py"),
        format!(
            "import json\nprint(json.dumps([{{\"type\": \"text\", \"text\": \"a red dot\"}}, \
             {{\"type\": \"image\", \"mediaType\": \"image/png\", \"data\": \"{PNG_BASE64}\"}}]))\n"
        ),
    )
    .unwrap();
    std::fs::write(agent.join("script.json"), script.to_string()).unwrap();
    dir
}

/// Serves the project at `dir` with `extra` flags, as `serve` does.
fn serve_dir(state: &Path, dir: &Path, extra: &[&str]) -> (ServerProcess, String) {
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentkit"))
        .args([
            "serve",
            "--dev",
            "--port",
            &port.to_string(),
            "--state-root",
        ])
        .arg(state)
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .env("NO_COLOR", "1")
        .env("ALERTS_TOKEN", "test-token")
        .env_remove("AGENTKIT_LOG")
        .env_remove("AGENTKIT_MODEL")
        .env_remove("AGENTKIT_BEARER_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn agentkit serve");
    // The banner ends with the docs line.
    let mut banner = String::new();
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    for line in lines.by_ref() {
        let line = line.unwrap_or_default();
        banner.push_str(&line);
        banner.push('\n');
        if line.trim_start().starts_with("docs:") {
            break;
        }
    }
    // Keep draining, so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (
        ServerProcess::healthy(child, port, Duration::from_secs(30)),
        banner,
    )
}

#[test]
// The skip message is for the person running the tests.
#[allow(clippy::print_stderr)]
fn the_playground_works_in_a_real_browser() {
    let missing = missing();
    if !missing.is_empty() {
        assert!(
            !in_ci(),
            "CI is set and the browser test cannot run; missing: {}",
            missing.join(", ")
        );
        eprintln!(
            "skipping the browser test of the playground; missing: {}",
            missing.join(", ")
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (server, banner) = serve(&tmp.path().join("open"), &[]);
    let url = format!("http://{}", server.addr);
    assert!(
        banner.contains(&format!("playground: {url}/weather-agent/playground")),
        "{banner}"
    );
    assert!(banner.contains(&format!("docs: {url}/docs/")), "{banner}");
    let token = "pg-secret-token";
    let (locked, _) = serve(&tmp.path().join("locked"), &["--bearer-token", token]);
    // The page itself is public; the API behind it is not.
    assert_eq!(
        Request::get("/weather-agent/playground")
            .send(locked.addr)
            .unwrap()
            .status,
        200
    );
    assert_eq!(
        Request::get("/weather-agent/v1/sessions")
            .send(locked.addr)
            .unwrap()
            .status,
        401
    );

    // The views of what an agent keeps, against a scripted model.
    let keeper_dir = keeper(tmp.path());
    let (kept, _) = serve_dir(&tmp.path().join("kept"), &keeper_dir, &[]);

    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("playground-screenshots");
    let out = Command::new("node")
        .arg("e2e/playground.mjs")
        .args(["--url", &url, "--slug", "weather-agent"])
        .args(["--bearer-url", &format!("http://{}", locked.addr)])
        .args(["--token", token, "--chromium", CHROMIUM])
        .args(["--keeper-url", &format!("http://{}", kept.addr)])
        .args(["--kept", &KEPT.to_string()])
        .arg("--shots")
        .arg(&shots)
        .current_dir(web_dir())
        .output()
        .expect("run node");
    assert!(
        out.status.success(),
        "the browser test failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The page's "save as eval case" wrote the keeper's session into its
    // project.
    let case = std::fs::read_to_string(keeper_dir.join("evals/from-playground.eval.toml"))
        .expect("the eval case the page saved");
    assert!(case.contains("Keep what you find"), "{case}");
    assert!(keeper_dir.join("evals/cassettes").is_dir());
    drop(kept);
    drop(locked);
    drop(server);
}

#[test]
fn no_playground_turns_the_playground_off_but_not_the_docs() {
    let tmp = tempfile::tempdir().unwrap();
    let (server, banner) = serve(tmp.path(), &["--no-playground"]);
    assert!(!banner.contains("playground:"), "{banner}");
    let status = |path: &str| Request::get(path).send(server.addr).unwrap().status;
    assert_eq!(status("/weather-agent/playground"), 404);
    assert_eq!(status("/docs/"), 200);
}
