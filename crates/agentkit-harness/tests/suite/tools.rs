//! `run_server_tool`: a real child process per call, with its input on
//! stdin, a scrubbed environment, a timeout, an output cap and a process
//! group that dies with the call.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use agentkit_harness::{ToolContext, ToolOutput, run_server_tool};
use agentkit_manifest::{Approval, Execution, Tool, ToolAnnotations};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::*;

/// A tool running `command` in `dir`.
fn tool(dir: &Path, command: &[&str]) -> Tool {
    Tool {
        name: "t".into(),
        path: "tools/t.toml".into(),
        description: "test tool".into(),
        execution: Execution::Server,
        command: command.iter().map(|s| s.to_string()).collect(),
        cwd: dir.to_path_buf(),
        script: None,
        timeout: Duration::from_secs(10),
        max_output_bytes: 1024 * 1024,
        env: Vec::new(),
        needs_approval: Approval::Never,
        annotations: ToolAnnotations::default(),
        input_schema: json!({"type": "object"}),
        // A server tool's default: sandboxed, network on.
        sandbox: agentkit_manifest::Sandbox {
            network: true,
            ..Default::default()
        },
        expose: Default::default(),
        worker: None,
    }
}

fn ctx(workspace: &Path) -> ToolContext {
    ToolContext {
        progress: Default::default(),
        call_id: "call-1".into(),
        session_id: "sess-1".into(),
        workspace_dir: workspace.to_path_buf(),
        cancel: CancellationToken::new(),
        host: None,
        services: None,
        as_of: None,
        origin: Default::default(),
    }
}

fn sh(dir: &Path, name: &str, body: &str) {
    let path = dir.join(name);
    write(&path, &format!("#!/bin/sh\n{body}\n"));
    make_executable(&path);
}

#[tokio::test]
async fn input_on_stdin_json_out_and_relative_programs_resolve_in_the_tool_folder() {
    let dir = tempfile::tempdir().unwrap();
    sh(dir.path(), "echo.sh", "cat");
    let t = tool(dir.path(), &["./echo.sh"]);
    let out = run_server_tool(&t, &json!({"a": [1, 2]}), &ctx(dir.path())).await;
    assert_eq!(
        out,
        ToolOutput {
            output: json!({"a": [1, 2]}),
            is_error: false
        }
    );

    sh(dir.path(), "text.sh", "echo 'plain words'");
    let out = run_server_tool(
        &tool(dir.path(), &["./text.sh"]),
        &json!({}),
        &ctx(dir.path()),
    )
    .await;
    assert_eq!(out.output, json!("plain words"));
    assert!(!out.is_error);

    sh(
        dir.path(),
        "env.sh",
        r#"echo '{"content":[{"type":"text","text":"bad"}],"isError":true}'"#,
    );
    let out = run_server_tool(
        &tool(dir.path(), &["./env.sh"]),
        &json!({}),
        &ctx(dir.path()),
    )
    .await;
    assert!(out.is_error);
    assert_eq!(out.output["content"][0]["text"], "bad");
}

#[tokio::test]
async fn non_zero_exit_is_an_error_carrying_stderr_and_the_code() {
    let dir = tempfile::tempdir().unwrap();
    sh(dir.path(), "fail.sh", "echo 'city is required' >&2\nexit 3");
    let out = run_server_tool(
        &tool(dir.path(), &["./fail.sh"]),
        &json!({}),
        &ctx(dir.path()),
    )
    .await;
    assert_eq!(
        out,
        ToolOutput {
            output: json!("tool exited with code 3: city is required"),
            is_error: true
        }
    );
}

#[tokio::test]
async fn a_missing_program_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_server_tool(
        &tool(dir.path(), &["agentkit-no-such-program"]),
        &json!({}),
        &ctx(dir.path()),
    )
    .await;
    assert!(out.is_error);
    let message = out.output.as_str().unwrap();
    assert!(
        message.starts_with("could not start `agentkit-no-such-program` for tool `t`"),
        "{message}"
    );
}

#[tokio::test]
async fn output_over_the_cap_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = tool(dir.path(), &["python3", "-c", "print('x' * 100000)"]);
    t.max_output_bytes = 100;
    let started = Instant::now();
    let out = run_server_tool(&t, &json!({}), &ctx(dir.path())).await;
    assert_eq!(
        out,
        ToolOutput {
            output: json!("output exceeded 100 bytes"),
            is_error: true
        }
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn timeout_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    sh(
        dir.path(),
        "spawn.sh",
        "sleep 30 &\necho $! > child.pid\necho $$ > self.pid\nsleep 30",
    );
    let mut t = tool(dir.path(), &["./spawn.sh"]);
    t.timeout = Duration::from_millis(500);
    let started = Instant::now();
    let out = run_server_tool(&t, &json!({}), &ctx(dir.path())).await;
    assert_eq!(
        out,
        ToolOutput {
            output: json!("tool timed out after 500ms"),
            is_error: true
        }
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    let child = read_pid(&dir.path().join("child.pid")).await;
    let parent = read_pid(&dir.path().join("self.pid")).await;
    assert!(
        gone(parent, Duration::from_secs(2)).await,
        "tool {parent} survived"
    );
    assert!(
        gone(child, Duration::from_secs(2)).await,
        "grandchild {child} survived"
    );
}

#[tokio::test]
async fn background_processes_do_not_outlive_a_finished_call() {
    let dir = tempfile::tempdir().unwrap();
    // The background sleep keeps stdout open; the call must still end.
    sh(
        dir.path(),
        "bg.sh",
        "sleep 30 &\necho $! > child.pid\necho done",
    );
    let started = Instant::now();
    let out = run_server_tool(
        &tool(dir.path(), &["./bg.sh"]),
        &json!({}),
        &ctx(dir.path()),
    )
    .await;
    assert_eq!(out.output, json!("done"));
    assert!(started.elapsed() < Duration::from_secs(5));
    let child = read_pid(&dir.path().join("child.pid")).await;
    assert!(gone(child, Duration::from_secs(2)).await);
}

#[tokio::test]
async fn cancel_kills_the_call() {
    let dir = tempfile::tempdir().unwrap();
    sh(dir.path(), "hang.sh", "echo $$ > self.pid\nexec sleep 30");
    let t = tool(dir.path(), &["./hang.sh"]);
    let c = ctx(dir.path());
    let cancel = c.cancel.clone();
    let pid_file = dir.path().join("self.pid");
    let call = tokio::spawn(async move { run_server_tool(&t, &json!({}), &c).await });
    let pid = read_pid(&pid_file).await;
    cancel.cancel();
    let out = tokio::time::timeout(Duration::from_secs(2), call)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.output, json!("tool call cancelled"));
    assert!(out.is_error);
    assert!(gone(pid, Duration::from_secs(2)).await);
}

#[tokio::test]
async fn the_environment_is_scrubbed() {
    let dir = tempfile::tempdir().unwrap();
    // `env` prints the environment it was started with (an interpreter
    // found on PATH may be a shim that adds variables of its own).
    let mut t = tool(dir.path(), &["env"]);
    t.env = vec!["CARGO_MANIFEST_DIR".into(), "AGENTKIT_SURELY_UNSET".into()];
    let ws = tempfile::tempdir().unwrap();
    let out = run_server_tool(&t, &json!({}), &ctx(ws.path())).await;
    assert!(!out.is_error, "{out:?}");
    let text = out.output.as_str().unwrap();
    let env: std::collections::BTreeMap<&str, Value> = text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k, Value::String(v.to_owned())))
        .collect();
    let names: BTreeSet<&str> = env.keys().copied().collect();

    let allowed: BTreeSet<&str> = [
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "TMPDIR",
        "SYSTEMROOT",
        "CARGO_MANIFEST_DIR",
        "AGENTKIT_TOOL_CALL_ID",
        "AGENTKIT_SESSION_ID",
        "AGENTKIT_WORKSPACE_DIR",
        "AGENTKIT_IDEMPOTENCY_KEY",
    ]
    .into();
    assert!(
        names.is_subset(&allowed),
        "unexpected: {:?}",
        names.difference(&allowed)
    );
    assert_eq!(env["AGENTKIT_TOOL_CALL_ID"], "call-1");
    assert_eq!(env["AGENTKIT_SESSION_ID"], "sess-1");
    assert_eq!(
        env["AGENTKIT_WORKSPACE_DIR"],
        Value::String(ws.path().display().to_string())
    );
    assert_eq!(env["AGENTKIT_IDEMPOTENCY_KEY"].as_str().unwrap().len(), 32);
    // Whatever the host has beyond the allowed names stays behind.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if !allowed.contains(name.as_ref()) {
            assert!(!names.contains(name.as_ref()), "{name} leaked");
        }
    }
    // Names listed in `env` pass through when the host has them.
    if let Some(v) = std::env::var_os("CARGO_MANIFEST_DIR") {
        assert_eq!(
            env["CARGO_MANIFEST_DIR"],
            Value::String(v.to_string_lossy().into())
        );
    }
    if let Some(v) = std::env::var_os("PATH") {
        assert_eq!(env["PATH"], Value::String(v.to_string_lossy().into()));
    }
}

/// The names and values `env` printed.
fn printed_env(out: &ToolOutput) -> std::collections::BTreeMap<String, String> {
    out.output
        .as_str()
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

#[tokio::test]
async fn a_secret_in_the_hosts_environment_never_reaches_a_tool() {
    use agentkit_test_support::rerun::{PASSED, SECRET, rerun_with_env};
    if !rerun_with_env(
        module_path!(),
        "a_secret_in_the_hosts_environment_never_reaches_a_tool",
        &[],
    ) {
        return;
    }
    // This body runs in a child of the test binary whose environment has
    // the secret and the pass-through variable.
    assert_eq!(std::env::var(SECRET.0).as_deref(), Ok(SECRET.1));
    let dir = tempfile::tempdir().unwrap();
    let mut t = tool(dir.path(), &["env"]);
    t.env = vec![PASSED.0.into()];
    let out = run_server_tool(&t, &json!({}), &ctx(dir.path())).await;
    assert!(!out.is_error, "{out:?}");
    let env = printed_env(&out);
    assert_eq!(env.get(PASSED.0).map(String::as_str), Some(PASSED.1));
    assert!(!env.contains_key(SECRET.0), "{env:?}");
    assert!(!env.values().any(|v| v.contains(SECRET.1)), "{env:?}");
}
