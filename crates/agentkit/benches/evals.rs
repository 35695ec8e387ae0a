//! Eval replay benchmark: a suite of 1,000 cases served from cassettes.
//!
//! Writes a throwaway project whose scripted model reads a workspace file
//! with the built-in `read` tool and then answers (two model steps per
//! case), records one run of the suite (`Cassette::Record`), then serves
//! it again from the recordings alone (`Cassette::Replay`: no model is
//! built) and runs the 1,000 cases through `agentkit::evals::run` at the
//! suite's `max_concurrency` (200). Reports the wall time of the replayed
//! run and cases per second; every case must pass.
//!
//! `cargo bench -p agentkit --bench evals`; `-- --cases N` for another
//! size.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::Path;
use std::time::Instant;

use agentkit::client::Client;
use agentkit::evals::{self, RunOptions};

fn main() {
    let mut args = std::env::args();
    let mut cases = 1_000;
    while let Some(a) = args.next() {
        if a == "--cases" {
            cases = args.next().and_then(|n| n.parse().ok()).unwrap_or(cases);
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench(cases));
}

async fn bench(cases: usize) {
    let project = tempfile::tempdir().unwrap();
    let tape = tempfile::tempdir().unwrap();
    write_project(project.path(), cases);
    let found = agentkit::discover(project.path()).unwrap();
    assert!(!found.diagnostics.has_errors(), "{:?}", found.diagnostics);
    let suite = found.host.agents[0].evals.clone().unwrap();
    let selected = evals::select(&suite, &[], &[]).unwrap();
    assert_eq!(selected.len(), cases);

    let record = run(
        project.path(),
        agentkit::Cassette::Record(tape.path().into()),
        &selected,
    )
    .await;
    assert!(record.0.ok, "the recorded run failed");
    let files = std::fs::read_dir(tape.path()).unwrap().count();
    let replay = run(
        project.path(),
        agentkit::Cassette::Replay(tape.path().into()),
        &selected,
    )
    .await;
    let failed: Vec<&str> = replay
        .0
        .cases
        .iter()
        .filter(|c| !c.outcome.passed())
        .map(|c| c.id.as_str())
        .collect();
    assert!(failed.is_empty(), "replayed cases failed: {failed:?}");
    println!("agentkit eval replay benchmark ({cases} cases, 2 model steps each, concurrency 200)");
    println!(
        "  recorded run: {:>8.2} s ({files} cassette files)",
        record.1
    );
    println!(
        "  replayed run: {:>8.2} s  ({:.0} cases/s)",
        replay.1,
        cases as f64 / replay.1
    );
}

async fn run(
    dir: &Path,
    cassette: agentkit::Cassette,
    cases: &[&agentkit::manifest::EvalCase],
) -> (evals::Report, f64) {
    let state = tempfile::tempdir().unwrap();
    let providers = agentkit::ProviderConfig {
        cassette: Some(cassette),
        ..Default::default()
    };
    let options = agentkit::ServeOptions {
        port: 0,
        dev: true,
        state_root: Some(state.path().to_path_buf()),
        providers: providers.clone(),
        ..Default::default()
    };
    let handle = agentkit::serve(dir, options).await.unwrap();
    let client = Client::new(&handle.agent_url("bench"), None);
    let options = RunOptions {
        agent: "bench".into(),
        concurrency: 200,
        judge: evals::JudgeOptions {
            providers,
            ..Default::default()
        },
        ..RunOptions::default()
    };
    let started = Instant::now();
    let report = evals::run(&client, cases, &options, &evals::NoProgress).await;
    let secs = started.elapsed().as_secs_f64();
    handle.close().await;
    (report, secs)
}

fn write_project(dir: &Path, cases: usize) {
    let root = dir.join("bench");
    let agent = root.join("agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("agent.toml"),
        "description = \"eval replay benchmark\"\nmodel = \"scripted:script.json\"\n[harness]\nbuiltin_tools = [\"read\"]\n",
    )
    .unwrap();
    std::fs::write(
        agent.join("instructions.md"),
        "Read the note, then answer.\n",
    )
    .unwrap();
    std::fs::write(
        agent.join("script.json"),
        r#"{"turns":[{"steps":[
            {"toolCalls":[{"name":"read","input":{"path":"note.txt"}}]},
            {"text":"The note says hello."}
        ]}]}"#,
    )
    .unwrap();
    let evals = root.join("evals");
    std::fs::create_dir_all(&evals).unwrap();
    std::fs::write(evals.join("evals.toml"), "max_concurrency = 200\n").unwrap();
    let mut suite = String::new();
    for i in 0..cases {
        suite.push_str(&format!(
            "[[cases]]\nid = \"c{i:04}\"\nsend = \"Case {i}: what does the note say?\"\nworkspace_files = {{ \"note.txt\" = \"hello {i}\" }}\n[cases.expect]\nsucceeded = true\ncalled_tool = [\"read\"]\nreply = {{ contains = \"note\" }}\n"
        ));
    }
    std::fs::write(evals.join("suite.eval.toml"), suite).unwrap();
}
