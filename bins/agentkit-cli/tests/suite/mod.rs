//! Shared helpers: running the binary and capturing what it printed.

mod chat;
mod client_tools;
mod commands;
mod core;
mod deploy;
mod edge;
mod eval;
mod github;
mod info;
mod init;
mod mcp;
mod migrate;
mod observability;
mod packs;
mod playground;
mod readme;
mod reminders;
mod replay;
mod run;
mod scale_out;
mod serve;
mod slack;
mod sso;
mod trajectory;
mod validate;
mod variables;

use std::path::Path;
use std::process::Command;

/// What one run of `agentkit` printed and how it exited.
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Runs `agentkit` with `args` in `cwd`, without colours and with
/// `ALERTS_TOKEN` set so the bundled fixtures have no env warnings unless a
/// test removes it.
pub(crate) fn agentkit(cwd: &Path, args: &[&str]) -> Run {
    agentkit_with(cwd, args, |_| {})
}

pub(crate) fn agentkit_with(
    cwd: &Path,
    args: &[&str],
    configure: impl FnOnce(&mut Command),
) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentkit"));
    cmd.args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .env("ALERTS_TOKEN", "test-token")
        .env_remove("AGENTKIT_LOG");
    configure(&mut cmd);
    let out = cmd.output().expect("spawn agentkit");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub(crate) fn fixtures() -> std::path::PathBuf {
    agentkit_test_support::fixtures_dir()
}

/// `agentkit serve --dir fixtures/agents --dev` on a free port, its state
/// under `state`, without `ALERTS_TOKEN` (as a new user runs it).
pub(crate) fn serve_bundled_agents(state: &Path) -> agentkit_test_support::process::ServerProcess {
    let port = agentkit_test_support::process::free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_agentkit"))
        .args([
            "serve",
            "--dir",
            "agents",
            "--dev",
            "--port",
            &port.to_string(),
        ])
        .arg("--state-root")
        .arg(state)
        .current_dir(fixtures())
        .env("NO_COLOR", "1")
        .env_remove("ALERTS_TOKEN")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn agentkit serve");
    agentkit_test_support::process::ServerProcess::healthy(
        child,
        port,
        std::time::Duration::from_secs(30),
    )
}
