//! The sandbox of model-steered children, with real processes and real
//! files: a scripted model's `shell` cannot read, write or reach what it
//! was not given (canaries beside its workspace, another session's
//! workspace, a credentials file, the project, the state root, a loopback
//! port, the host's own process), and can still do its work in the
//! workspace; a server tool with `sandbox = "off"` can do what the
//! sandbox forbids; `enforce` on a host without Landlock refuses.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agentkit_harness::{SIMULATE_UNAVAILABLE_ENV, sandbox_status};
use agentkit_test_support::rerun::rerun_with_env;
use serde_json::{Value, json};

use super::{discover_agent, results, run, scripted, turn_input, write};

/// Landlock is here (the kernels this project runs on have it); under CI
/// a host without it fails the test instead of skipping it.
#[allow(clippy::print_stderr)]
fn landlock_or_skip(test: &str) -> bool {
    let status = sandbox_status();
    if status.available {
        return true;
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    assert!(!ci, "{test}: this CI host cannot sandbox: {status:?}");
    eprintln!("skipping {test}: {status:?}");
    false
}

/// A host laid out as agentkit lays it out, with a canary in every place
/// a session's shell must not reach.
struct Host {
    _dir: tempfile::TempDir,
    project: PathBuf,
    workspace: PathBuf,
    other_workspace: PathBuf,
    state: PathBuf,
    credentials: PathBuf,
    outside: PathBuf,
}

impl Host {
    fn new() -> Host {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let project = root.join("proj");
        let state = root.join("state");
        let workspace = state.join("sessions/s1/workspace");
        let other_workspace = state.join("sessions/s2/workspace");
        let credentials = root.join("home/.config/agentkit/credentials.json");
        let outside = root.join("outside/canary.txt");
        write(&project.join(".env"), "PROJECT-SECRET\n");
        write(&project.join("agent/instructions.md"), "Test agent.\n");
        write(&other_workspace.join("notes.txt"), "OTHER-SESSION\n");
        write(&state.join("agentkit.sqlite"), "STATE-DB\n");
        write(&credentials, "{\"openai\": \"PROVIDER-KEY\"}\n");
        write(&outside, "OUTSIDE-CANARY\n");
        std::fs::create_dir_all(&workspace).unwrap();
        Host {
            _dir: dir,
            project,
            workspace,
            other_workspace,
            state,
            credentials,
            outside,
        }
    }

    /// Writes the agent's files (`agent/…`) and a script of one `shell`
    /// call per step, then runs one turn in the session workspace and
    /// answers each call's `(output, is_error)`.
    async fn run(&self, files: &[(&str, &str)], calls: &[(&str, Value)]) -> Vec<(Value, bool)> {
        let mut steps: Vec<Value> = calls
            .iter()
            .map(|(name, input)| json!({"toolCalls": [{"name": name, "input": input}]}))
            .collect();
        steps.push(json!({"text": "done"}));
        let agent_dir = self.project.join("agent");
        write(
            &agent_dir.join("script.json"),
            &json!({"turns": [{"steps": steps}]}).to_string(),
        );
        for (rel, text) in files {
            let path = agent_dir.join(rel);
            write(&path, text);
            if rel.ends_with(".sh") {
                super::make_executable(&path);
            }
        }
        let agent = discover_agent(&self.project);
        let input = turn_input(agent, scripted("script.json"), &self.workspace, "go");
        let (_, events) = run(input).await;
        let out: Vec<(Value, bool)> = results(&events)
            .into_iter()
            .map(|(_, output, is_error)| (output, is_error))
            .collect();
        assert_eq!(out.len(), calls.len(), "{out:?}");
        out
    }
}

fn shell(command: String) -> (&'static str, Value) {
    ("shell", json!({"command": command}))
}

/// A loopback listener that counts the connections it accepts.
async fn listener() -> (u16, Arc<AtomicUsize>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((_conn, _)) = l.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
        }
    });
    (port, accepted)
}

fn connect(port: u16) -> String {
    format!(
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 3); print('connected')\""
    )
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Refused, and the canary's text is nowhere in what came back.
fn denied(out: &(Value, bool), canary: &str, what: &str) {
    assert!(out.1, "{what} was allowed: {:?}", out.0);
    assert!(!text(&out.0).contains(canary), "{what} leaked: {:?}", out.0);
}

fn p(path: &Path) -> String {
    path.display().to_string()
}

#[tokio::test]
async fn the_shell_cannot_read_write_or_reach_beyond_its_workspace() {
    if !landlock_or_skip("the_shell_cannot_read_write_or_reach_beyond_its_workspace") {
        return;
    }
    let host = Host::new();
    let (port, accepted) = listener().await;
    let out = host
        .run(
            &[],
            &[
                shell(format!("cat {}", p(&host.outside))),
                shell(format!("cat {}/notes.txt", p(&host.other_workspace))),
                shell(format!("ls {}", p(&host.other_workspace))),
                shell(format!("cat {}", p(&host.credentials))),
                shell(format!("cat {}/.env", p(&host.project))),
                shell(format!("cat {}/agentkit.sqlite", p(&host.state))),
                shell(format!("echo x > {}/agent/pwned", p(&host.project))),
                shell(format!("echo x > {}/pwned", p(&host.state))),
                shell(format!("echo x > {}/pwned", p(&host.other_workspace))),
                shell(connect(port)),
                shell("cat /etc/shadow".into()),
                shell(format!("kill -0 {}", std::process::id())),
            ],
        )
        .await;
    denied(&out[0], "OUTSIDE-CANARY", "a file outside the workspace");
    denied(&out[1], "OTHER-SESSION", "another session's workspace");
    denied(&out[2], "notes.txt", "listing another session's workspace");
    denied(&out[3], "PROVIDER-KEY", "the credentials file");
    denied(&out[4], "PROJECT-SECRET", "the project's .env");
    denied(&out[5], "STATE-DB", "the state root's database");
    for (i, what) in [
        (6, "the project folder"),
        (7, "the state root"),
        (8, "another session's workspace"),
    ] {
        assert!(out[i].1, "writing into {what} was allowed: {:?}", out[i]);
        assert!(
            text(&out[i].0).contains("Permission denied"),
            "{what}: {:?}",
            out[i]
        );
    }
    assert!(!host.project.join("agent/pwned").exists());
    assert!(!host.state.join("pwned").exists());
    assert!(!host.other_workspace.join("pwned").exists());
    assert!(out[9].1, "connected to a loopback port: {:?}", out[9]);
    assert!(text(&out[9].0).contains("PermissionError"), "{:?}", out[9]);
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        0,
        "a connection got through"
    );
    // As root (CI), only the sandbox keeps /etc/shadow out of reach.
    assert!(out[10].1, "/etc/shadow was readable: {:?}", out[10]);
    // No signals to processes outside the sandbox (Landlock ABI 6).
    if sandbox_status().abi.is_some_and(|abi| abi >= 6) {
        assert!(out[11].1, "signalled the host process: {:?}", out[11]);
    }
}

#[tokio::test]
async fn the_shell_still_works_in_its_workspace_and_temp_folder() {
    if !landlock_or_skip("the_shell_still_works_in_its_workspace_and_temp_folder") {
        return;
    }
    let host = Host::new();
    write(
        &host.workspace.join("data/cities.csv"),
        "city\nOslo\nLima\n",
    );
    let out = host
        .run(
            &[],
            &[
                shell("ls data && cat data/cities.csv | tail -n +2 | sort | head -1".into()),
                shell("mkdir -p out && echo hello > out/a.txt && cat out/a.txt && rm out/a.txt && ls out | wc -l".into()),
                shell("python3 -c 'import json, sys; print(json.dumps({\"n\": 6 * 7}))'".into()),
                shell("python3 -c 'import tempfile; f = tempfile.NamedTemporaryFile(delete=False); f.write(b\"x\"); print(f.name)'".into()),
                shell("echo scratch > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && echo \"$TMPDIR\" && echo \"$HOME\"".into()),
                shell("echo to-null > /dev/null && head -c 4 /dev/urandom | wc -c && date +%Y >/dev/null && echo ok".into()),
                shell("git --version && git init -q repo && cd repo && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m m && git log --oneline | wc -l".into()),
            ],
        )
        .await;
    for (i, (output, is_error)) in out.iter().enumerate() {
        assert!(!is_error, "call {i} failed: {output:?}");
    }
    assert_eq!(text(&out[0].0), "cities.csv\nLima");
    assert_eq!(text(&out[1].0), "hello\n0");
    assert_eq!(out[2].0, json!({"n": 42}));
    // Python's temporary files land in the private folder, not /tmp.
    let py_tmp = text(&out[3].0);
    assert!(py_tmp.contains("agentkit-sandbox-"), "{py_tmp}");
    let lines: Vec<String> = text(&out[4].0).lines().map(str::to_owned).collect();
    assert_eq!(lines[0], "scratch");
    let tmp = Path::new(&lines[1]);
    assert!(
        tmp.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("agentkit-sandbox-"),
        "{lines:?}"
    );
    assert_eq!(lines[2], lines[1], "HOME is the private folder too");
    assert_ne!(tmp, std::env::temp_dir());
    assert!(text(&out[5].0).ends_with("4\nok"), "{:?}", out[5]);
    assert!(text(&out[6].0).ends_with('1'), "{:?}", out[6]);
    // The private folder goes with the call.
    for _ in 0..100 {
        if !tmp.exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(!tmp.exists(), "{} outlived its call", tmp.display());
}

/// `open` turns the sandbox off; `fetch` keeps it with a server tool's
/// default (network on); `quiet` keeps it and turns network off. Each
/// runs `probe.sh`: cat the canary, then connect to the port.
fn tools(canary: &Path, port: u16) -> Vec<(&'static str, String)> {
    let probe = format!(
        "#!/bin/sh\ncat '{}'\npython3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 3); print('connected')\"\n",
        canary.display()
    );
    let tool = |desc: &str, extra: &str| {
        format!("description = \"{desc}\"\ncommand = [\"./probe.sh\"]\n{extra}")
    };
    vec![
        ("tools/probe.sh", probe),
        ("tools/open.toml", tool("Trusted", "sandbox = \"off\"\n")),
        ("tools/fetch.toml", tool("Sandboxed, network on", "")),
        (
            "tools/quiet.toml",
            tool("Sandboxed, network off", "sandbox = { network = false }\n"),
        ),
    ]
}

#[tokio::test]
async fn a_server_tool_with_the_sandbox_off_can_do_what_it_forbids() {
    if !landlock_or_skip("a_server_tool_with_the_sandbox_off_can_do_what_it_forbids") {
        return;
    }
    let host = Host::new();
    let (port, accepted) = listener().await;
    let files = tools(&host.outside, port);
    let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let out = host
        .run(
            &files,
            &[
                ("open", json!({})),
                ("fetch", json!({})),
                ("quiet", json!({})),
            ],
        )
        .await;
    let open = text(&out[0].0);
    assert!(!out[0].1, "{open}");
    assert!(
        open.contains("OUTSIDE-CANARY") && open.contains("connected"),
        "{open}"
    );
    // Sandboxed with network: the canary is out of reach, the port is not
    // (and the tool's own folder is readable: it ran `./probe.sh`).
    let fetch = text(&out[1].0);
    assert!(!fetch.contains("OUTSIDE-CANARY"), "{fetch}");
    assert!(fetch.contains("connected"), "{fetch}");
    let quiet = text(&out[2].0);
    assert!(!quiet.contains("OUTSIDE-CANARY"), "{quiet}");
    assert!(out[2].1 && quiet.contains("PermissionError"), "{quiet}");
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn enforce_on_a_host_without_landlock_refuses_clearly() {
    let name = "enforce_on_a_host_without_landlock_refuses_clearly";
    if !rerun_with_env(module_path!(), name, &[(SIMULATE_UNAVAILABLE_ENV, "1")]) {
        return;
    }
    let status = sandbox_status();
    assert!(!status.available, "{status:?}");
    assert!(
        status
            .reason
            .as_deref()
            .unwrap()
            .contains(SIMULATE_UNAVAILABLE_ENV),
        "{status:?}"
    );
    let host = Host::new();
    let marker = host.workspace.join("ran");
    let out = host
        .run(
            &[
                ("agent.toml", "[harness.sandbox]\nmode = \"enforce\"\n"),
                (
                    "tools/touch.toml",
                    "description = \"Touches\"\ncommand = [\"sh\", \"-c\", \"touch \\\"$AGENTKIT_WORKSPACE_DIR/tool-ran\\\"\"]\n",
                ),
                (
                    "tools/trusted.toml",
                    "description = \"Trusted\"\ncommand = [\"sh\", \"-c\", \"touch \\\"$AGENTKIT_WORKSPACE_DIR/trusted-ran\\\"\"]\nsandbox = \"off\"\n",
                ),
            ],
            &[
                shell(format!("touch {}", p(&marker))),
                ("touch", json!({})),
                ("trusted", json!({})),
            ],
        )
        .await;
    for (i, tool) in [(0, "shell"), (1, "touch")] {
        let message = text(&out[i].0);
        assert!(out[i].1, "{tool} ran: {message}");
        assert!(
            message.contains(&format!("`{tool}` was not run"))
                && message.contains("mode = \"enforce\"")
                && message.contains("Landlock is unavailable"),
            "{message}"
        );
    }
    assert!(!marker.exists());
    assert!(!host.workspace.join("tool-ran").exists());
    // A tool with the sandbox off is the operator's choice, and runs.
    assert!(!out[2].1, "{:?}", out[2]);
    assert!(host.workspace.join("trusted-ran").exists());
}

#[tokio::test]
async fn warn_on_a_host_without_landlock_runs_with_the_limits_alone() {
    let name = "warn_on_a_host_without_landlock_runs_with_the_limits_alone";
    if !rerun_with_env(module_path!(), name, &[(SIMULATE_UNAVAILABLE_ENV, "1")]) {
        return;
    }
    let host = Host::new();
    let out = host
        .run(
            &[],
            &[
                shell(format!("cat {}", p(&host.outside))),
                shell("ulimit -c; echo \"$TMPDIR\"".into()),
            ],
        )
        .await;
    // Unsandboxed (the startup log and /v1/info say so), but still with
    // its limits and private folder.
    assert!(!out[0].1, "{:?}", out[0]);
    assert!(text(&out[0].0).contains("OUTSIDE-CANARY"));
    let limits = text(&out[1].0);
    assert!(limits.starts_with('0'), "no core dumps: {limits}");
    assert!(limits.contains("agentkit-sandbox-"), "{limits}");
}
