//! The official MCP conformance suite (`@modelcontextprotocol/conformance`)
//! against an agent's MCP endpoint, for both revisions: the suite runs
//! exactly what each revision requires (`--requirements`), plus the Tasks
//! extension's scenarios, and every scenario passes or is in that
//! revision's baseline (`tests/mcp-conformance/server-<revision>.yml`),
//! which `docs/reference/mcp-server.md#conformance` lists with why it does
//! not apply. The suite fails the run on a failure the baseline does not
//! name and on a baseline entry that passes, so the list cannot rot.

use std::path::PathBuf;

use agentkit::ServeOptions;

use super::mcp::host;

const SCRIPT: &str = r#"{"turns": [{"steps": [{"text": "Hello from the suite."}]}]}"#;

fn baseline(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp-conformance")
        .join(name)
}

/// The suite's verdict for one run: its exit status and the lines that
/// say what failed.
fn run(suite: &agentkit_test_support::conformance::Conformance, args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(&suite.node)
        .arg(&suite.suite)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
#[allow(clippy::print_stderr)]
fn the_official_conformance_suite_passes_the_server_scenarios_of_both_revisions() {
    let suite = match agentkit_test_support::conformance::conformance(
        "the_official_conformance_suite_passes_the_server_scenarios_of_both_revisions",
    ) {
        Ok(s) => s,
        Err(why) => {
            eprintln!("{why}");
            return;
        }
    };
    let files = vec![
        ("agent.toml", "model = \"scripted:script.json\"\n"),
        ("script.json", SCRIPT),
        ("instructions.md", "You are a test agent.\n"),
    ];
    let h = host(&[("bot", &files)], ServeOptions::default());
    let url = format!("http://{}/bot/v1/mcp", h.addr());
    // Each check's verdict stays under target/ to read when one fails.
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mcp-conformance-server");
    let _ = std::fs::remove_dir_all(&out);
    let mut failed = Vec::new();
    for revision in ["2025-11-25", "2026-07-28"] {
        let expected = baseline(&format!("server-{revision}.yml"));
        let dir = out.join(revision);
        let (ok, text) = run(
            &suite,
            &[
                "server",
                "--url",
                &url,
                "--requirements",
                revision,
                "--expected-failures",
                &expected.display().to_string(),
                "-o",
                &dir.display().to_string(),
            ],
        );
        if !ok {
            failed.push(format!("{revision}:\n{text}"));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}
