//! `agentkit init`: the scaffold validates, is never overwritten, and the
//! guide prints without a path.

use std::fs;
use std::process::Command;

use super::agentkit;

#[test]
fn init_then_validate_then_run_the_echo_tool() {
    let tmp = tempfile::tempdir().unwrap();
    let run = agentkit(tmp.path(), &["init", "my-agent"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("agent/tools/echo.toml"),
        "{}",
        run.stdout
    );

    // The docs show what it writes: getting started its output as is,
    // the CLI reference a row per file.
    let docs = super::fixtures().join("../docs");
    let guide = fs::read_to_string(docs.join("getting-started.md")).unwrap();
    assert!(
        guide.contains(&format!("```text\n{}```", run.stdout)),
        "docs/getting-started.md does not show this output:\n{}",
        run.stdout
    );
    let reference = fs::read_to_string(docs.join("reference/cli.md")).unwrap();
    let written: Vec<&str> = run
        .stdout
        .lines()
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(str::trim)
        .collect();
    assert_eq!(written.len(), 8, "{}", run.stdout);
    for file in written {
        assert!(
            reference.contains(&format!("| `{file}` |")),
            "docs/reference/cli.md does not list `{file}`"
        );
    }

    let run = agentkit(tmp.path(), &["validate", "--dir", "my-agent"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(run.stdout.contains("no diagnostics"), "{}", run.stdout);

    // The scaffolded eval passes offline.
    let run = agentkit(tmp.path(), &["eval", "--dir", "my-agent", "--no-stream"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("PASS echo"), "{}", run.stdout);
    assert!(run.stdout.contains("1 passed, 0 failed"), "{}", run.stdout);

    // The scaffolded tool really works under the worker protocol: a call
    // per line on stdin, an answer per line on stdout, until stdin ends.
    let out = Command::new("python3")
        .arg("echo.py")
        .current_dir(tmp.path().join("my-agent/agent/tools"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(
                b"{\"id\":1,\"input\":{\"message\":\"hello\"},\"context\":{}}\n\
                      {\"id\":2,\"input\":{},\"context\":{}}\n",
            )?;
            child.wait_with_output()
        })
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "{\"id\": 1, \"output\": {\"echo\": \"hello\"}}\n\
         {\"id\": 2, \"error\": \"KeyError: 'message'\"}\n"
    );

    assert_eq!(
        fs::read_to_string(tmp.path().join("my-agent/.gitignore"))
            .unwrap()
            .lines()
            .last(),
        Some(".agentkit/")
    );
}

#[test]
fn init_refuses_to_overwrite() {
    let tmp = tempfile::tempdir().unwrap();
    fs::create_dir_all(tmp.path().join("mine/agent")).unwrap();
    fs::write(tmp.path().join("mine/agent/instructions.md"), "keep me").unwrap();
    let run = agentkit(tmp.path(), &["init", "mine"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("refusing to overwrite"),
        "{}",
        run.stderr
    );
    assert_eq!(
        fs::read_to_string(tmp.path().join("mine/agent/instructions.md")).unwrap(),
        "keep me"
    );
    assert!(
        !tmp.path().join("mine/agent/agent.toml").exists(),
        "nothing is written when anything would be overwritten"
    );
}

#[test]
fn init_without_path_prints_the_guide() {
    let tmp = tempfile::tempdir().unwrap();
    let run = agentkit(tmp.path(), &["init"]);
    assert_eq!(run.code, 0);
    assert!(
        run.stdout.contains("agentkit init my-agent"),
        "{}",
        run.stdout
    );
    assert_eq!(
        fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "the guide writes nothing"
    );
}

#[test]
fn version_help_and_unavailable_commands() {
    let tmp = tempfile::tempdir().unwrap();
    let run = agentkit(tmp.path(), &["--version"]);
    assert_eq!(run.code, 0);
    assert_eq!(
        run.stdout.trim(),
        format!("agentkit {}", env!("CARGO_PKG_VERSION"))
    );
    for cmd in [
        "validate",
        "info",
        "init",
        "serve",
        "run",
        "chat",
        "call",
        "trajectory",
        "eval",
    ] {
        let run = agentkit(tmp.path(), &[cmd, "--help"]);
        assert_eq!(run.code, 0, "{cmd} --help: {}", run.stderr);
        assert!(
            run.stdout.contains("Usage: agentkit"),
            "{cmd}: {}",
            run.stdout
        );
    }
    for cmd in ["manifest", "doctor"] {
        let run = agentkit(tmp.path(), &["slack", cmd, "--help"]);
        assert_eq!(run.code, 0, "slack {cmd} --help: {}", run.stderr);
    }
}

#[test]
fn serve_refuses_an_invalid_folder_with_exit_1() {
    let tmp = tempfile::tempdir().unwrap();
    let run = agentkit(tmp.path(), &["serve", "--dir", ".", "--port", "0"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("no-agents"), "{}", run.stderr);
    assert!(run.stderr.contains("not serving"), "{}", run.stderr);
}

#[test]
fn call_runs_a_tool_without_a_model() {
    let tmp = tempfile::tempdir().unwrap();
    assert_eq!(agentkit(tmp.path(), &["init", "my-agent"]).code, 0);
    let run = agentkit(
        tmp.path(),
        &[
            "call",
            "echo",
            "--dir",
            "my-agent",
            "--input",
            r#"{"message":"hi there"}"#,
        ],
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["ok"], true);
    assert_eq!(doc["result"]["echo"], "hi there");
    // Schema-invalid input is refused before the tool runs (exit 2).
    let run = agentkit(
        tmp.path(),
        &[
            "call",
            "echo",
            "--dir",
            "my-agent",
            "--input",
            r#"{"message":5}"#,
        ],
    );
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(run.stderr.contains("invalid input"), "{}", run.stderr);
    let run = agentkit(tmp.path(), &["call", "nope", "--dir", "my-agent"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("echo"),
        "lists the available tools: {}",
        run.stderr
    );
}

#[test]
fn login_whoami_logout_never_show_the_key() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config");
    let with_config = |args: &[&str]| {
        super::agentkit_with(tmp.path(), args, |c| {
            c.env("XDG_CONFIG_HOME", &config)
                .env_remove("OPENAI_API_KEY")
                .env_remove("ANTHROPIC_API_KEY");
        })
    };
    let run = with_config(&["whoami", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc[0]["source"], "none");
    let run = with_config(&[
        "login",
        "--provider",
        "openai",
        "--api-key",
        "sk-very-secret",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stdout.contains("sk-very-secret"));
    let stored = config.join("agentkit/credentials.json");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            fs::metadata(&stored).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    let run = with_config(&["whoami"]);
    assert!(run.stdout.contains("openai: stored"), "{}", run.stdout);
    assert!(run.stdout.contains("anthropic: none"), "{}", run.stdout);
    assert!(!run.stdout.contains("sk-very-secret"));
    // The environment wins over the stored key.
    let run = super::agentkit_with(tmp.path(), &["whoami"], |c| {
        c.env("XDG_CONFIG_HOME", &config)
            .env("OPENAI_API_KEY", "sk-env");
    });
    assert!(
        run.stdout.contains("openai: env (OPENAI_API_KEY)"),
        "{}",
        run.stdout
    );
    assert_eq!(with_config(&["logout", "--provider", "openai"]).code, 0);
    assert!(with_config(&["whoami"]).stdout.contains("openai: none"));
    assert_eq!(
        with_config(&["login", "--provider", "nope", "--api-key", "x"]).code,
        2
    );
}
