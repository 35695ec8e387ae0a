//! `cargo xtask ci` and `cargo xtask bench`: the commands CI runs, in one place.
//!
//! The test suite runs last so that the test runner's summary is the last
//! thing CI prints.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::Context as _;

/// One external command of the pipeline.
struct Step {
    program: &'static str,
    args: Vec<&'static str>,
    env: Vec<(&'static str, &'static str)>,
}

impl Step {
    fn cargo(args: &[&'static str]) -> Step {
        Step {
            program: "cargo",
            args: args.to_vec(),
            env: Vec::new(),
        }
    }

    fn with_env(mut self, key: &'static str, value: &'static str) -> Step {
        self.env.push((key, value));
        self
    }

    /// The command as a shell user would type it, for the log.
    fn display(&self) -> String {
        let mut words: Vec<String> = self
            .env
            .iter()
            .map(|(k, v)| format!("{k}=\"{v}\""))
            .collect();
        words.push(self.program.to_owned());
        words.extend(self.args.iter().map(|arg| (*arg).to_owned()));
        words.join(" ")
    }

    /// Runs the step from `root`, echoing it first; `Ok(false)` when it fails.
    ///
    /// Nothing is printed after a successful step, so the last step's own
    /// closing lines (the test summary) end the log.
    fn run(&self, root: &Path) -> anyhow::Result<bool> {
        let shown = self.display();
        println!("\n==> {shown}");
        let status = Command::new(self.program)
            .args(&self.args)
            .envs(self.env.iter().copied())
            .current_dir(root)
            .status()
            .with_context(|| format!("failed to start `{shown}`"))?;
        if !status.success() {
            eprintln!("==> FAILED ({status}): {shown}");
        }
        Ok(status.success())
    }
}

/// Whether `cargo <subcommand> --version` works, i.e. the tool is installed.
fn cargo_subcommand_available(root: &Path, subcommand: &str) -> bool {
    Command::new("cargo")
        .args([subcommand, "--version"])
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// Runs every check CI runs, stopping at the first failure.
pub(crate) fn run_ci(root: &Path) -> anyhow::Result<bool> {
    let in_ci =
        std::env::var("CI").is_ok_and(|value| !matches!(value.as_str(), "" | "0" | "false"));

    let checks = [
        Step::cargo(&["fmt", "--all", "--", "--check"]),
        Step::cargo(&[
            "clippy",
            "--workspace",
            "--all-targets",
            "--locked",
            "--",
            "-D",
            "warnings",
        ]),
    ];
    for step in &checks {
        if !step.run(root)? {
            return Ok(false);
        }
    }

    // The advisory database cannot be fetched on these machines, so only the
    // offline checks run (see deny.toml).
    let deny = Step::cargo(&["deny", "check", "licenses", "bans", "sources"]);
    if cargo_subcommand_available(root, "deny") {
        if !deny.run(root)? {
            return Ok(false);
        }
    } else if in_ci {
        eprintln!(
            "\n==> FAILED: cargo-deny is not installed and CI is set (`cargo install cargo-deny --locked`)"
        );
        return Ok(false);
    } else {
        println!(
            "\n==> skipped (cargo-deny not installed; `cargo install cargo-deny --locked`): {}",
            deny.display()
        );
    }

    let doc = Step::cargo(&["doc", "--workspace", "--no-deps", "--locked"])
        .with_env("RUSTDOCFLAGS", "-D warnings");
    if !doc.run(root)? {
        return Ok(false);
    }

    println!("\n==> cargo xtask tidy");
    if !crate::run_tidy(root)? {
        return Ok(false);
    }

    if !run_web(root, in_ci)? {
        return Ok(false);
    }

    // nextest does not run doctests, so they get their own step, before the
    // main suite so that its summary closes the log.
    let mut tests = vec![Step::cargo(&["test", "--workspace", "--doc", "--locked"])];
    if cargo_subcommand_available(root, "nextest") {
        tests.push(Step::cargo(&[
            "nextest",
            "run",
            "--workspace",
            "--locked",
            "--no-fail-fast",
        ]));
    } else {
        println!("\n==> cargo-nextest not installed: falling back to cargo test");
        tests.push(Step::cargo(&["test", "--workspace", "--locked"]));
    }
    for step in &tests {
        if !step.run(root)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The playground's own checks, in `crates/agentkit-playground/web`: the
/// type check, the unit tests (vitest), and a rebuild that must reproduce
/// the committed bundle byte for byte. They need Node and `npm ci` (which
/// `.ci/run` does); without them they are skipped, except under CI.
fn run_web(root: &Path, in_ci: bool) -> anyhow::Result<bool> {
    let web = root.join(crate::bundle::CRATE).join("web");
    let node = Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !node || !web.join("node_modules").is_dir() {
        let why = "Node and `npm ci` in crates/agentkit-playground/web";
        if in_ci {
            eprintln!("\n==> FAILED: the playground checks need {why}, and CI is set");
            return Ok(false);
        }
        println!(
            "\n==> skipped (needs {why}): the playground's type check, unit tests and bundle rebuild"
        );
        return Ok(true);
    }
    for script in ["check", "test", "build"] {
        println!("\n==> (cd crates/agentkit-playground/web && npm run {script})");
        let status = Command::new("npm")
            .args(["run", "--silent", script])
            .current_dir(&web)
            .status()
            .with_context(|| format!("failed to start `npm run {script}`"))?;
        if !status.success() {
            eprintln!("==> FAILED ({status}): npm run {script}");
            return Ok(false);
        }
    }
    let dist = format!("{}/dist", crate::bundle::CRATE);
    println!("\n==> git status --porcelain -- {dist}");
    let out = Command::new("git")
        .args(["status", "--porcelain", "--", &dist])
        .current_dir(root)
        .output()
        .context("failed to start `git status`")?;
    let changed = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !changed.trim().is_empty() {
        eprintln!(
            "==> FAILED: rebuilding the playground changed the committed bundle (not reproducible, or not rebuilt):\n{changed}"
        );
        return Ok(false);
    }
    Ok(true)
}

/// Runs a benchmark: `core` (the session-core bench, see
/// `crates/agentkit/benches/core.rs`) with the arguments after it,
/// `sandbox` (the harness's overhead bench: per step, and per tool call
/// sandboxed and not, with their ratio), else the discovery benchmark with
/// `extra` forwarded to `cargo bench`.
pub(crate) fn run_bench(root: &Path, extra: &[String]) -> anyhow::Result<bool> {
    if let Some((first, rest)) = extra.split_first() {
        if first == "core" {
            return run_core_bench(root, rest);
        }
        if first == "sandbox" {
            return Step::cargo(&["bench", "-p", "agentkit-harness", "--bench", "overhead"])
                .run(root);
        }
    }
    let mut command = Command::new("cargo");
    command
        .args(["bench", "-p", "agentkit-manifest", "--bench", "discover"])
        .args(extra);
    println!(
        "==> cargo bench -p agentkit-manifest --bench discover {}",
        extra.join(" ")
    );
    let status = command
        .current_dir(root)
        .status()
        .context("failed to start `cargo bench`")?;
    Ok(status.success())
}

/// The session-core bench drives a release `agentkit-serve` as a child
/// process: build it first unless `AGENTKIT_SERVE_BIN` names another one,
/// then run the bench with `args`.
fn run_core_bench(root: &Path, args: &[String]) -> anyhow::Result<bool> {
    if std::env::var_os("AGENTKIT_SERVE_BIN").is_none()
        && !Step::cargo(&["build", "--release", "-p", "agentkit-serve"]).run(root)?
    {
        return Ok(false);
    }
    println!(
        "\n==> cargo bench -p agentkit --bench core -- {}",
        args.join(" ")
    );
    let status = Command::new("cargo")
        .args(["bench", "-p", "agentkit", "--bench", "core", "--"])
        .args(args)
        .current_dir(root)
        .status()
        .context("failed to start `cargo bench`")?;
    Ok(status.success())
}
