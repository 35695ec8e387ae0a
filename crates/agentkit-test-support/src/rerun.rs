//! Re-running a test in a child process of its own test binary with extra
//! environment variables, so a test can prove what a spawned process sees
//! of its parent's environment (a secret there must not reach it) without
//! changing the test process's own environment.

use std::process::Command;

/// Set in the child run, so the test knows to run its body.
pub const RERUN_MARK: &str = "AGENTKIT_TEST_RERUN";

/// A secret put in the child run's environment: no spawned process may
/// see it.
pub const SECRET: (&str, &str) = ("AGENTKIT_TEST_SECRET", "hunter2-never-passed");

/// A variable put in the child run's environment for a spawned process to
/// pass through by name.
pub const PASSED: (&str, &str) = ("AGENTKIT_TEST_PASS", "visible-by-name");

/// In the test process: runs test `name` of module `module` (pass
/// `module_path!()`) again in a child process of this test binary with
/// [`SECRET`], [`PASSED`] and `env` added to its environment, asserts that
/// it ran and passed, and answers false. In that child: answers true, and
/// the test runs its body.
///
/// ```text
/// #[tokio::test]
/// async fn tools_do_not_see_the_hosts_secrets() {
///     if !rerun_with_env(module_path!(), "tools_do_not_see_the_hosts_secrets", &[]) {
///         return;
///     }
///     // ... spawn, and assert SECRET is absent and PASSED present ...
/// }
/// ```
pub fn rerun_with_env(module: &str, name: &str, env: &[(&str, &str)]) -> bool {
    if std::env::var_os(RERUN_MARK).is_some() {
        return true;
    }
    // `module_path!()` starts with the crate's name; test names do not.
    let test = match module.split_once("::") {
        Some((_, inside)) => format!("{inside}::{name}"),
        None => name.to_owned(),
    };
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("no test binary: {e}"));
    let out = Command::new(exe)
        .args([
            test.as_str(),
            "--exact",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(RERUN_MARK, "1")
        .env(SECRET.0, SECRET.1)
        .env(PASSED.0, PASSED.1)
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("cannot rerun {test}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "the rerun of {test} failed or did not run:\n{stdout}\n{stderr}"
    );
    false
}
