//! The harness's own cost: per model step (a scripted model, no tools, so
//! the model costs nothing) and per subprocess tool call (spawn to result,
//! with `true`-like programs).
//!
//! `cargo bench -p agentkit-harness --bench overhead`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentkit_harness::{ToolContext, TurnInput, TurnOutcome, run_server_tool, run_turn};
use agentkit_manifest::{ModelSpec, Provider};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("bench");
    // A turn of 201 steps: 200 that call a tool the loop refuses at once
    // (unknown name, so no process runs), then an answer.
    let steps: Vec<_> = (0..200)
        .map(|_| json!({"toolCalls": [{"name": "nope", "input": {}}]}))
        .chain([json!({"text": "done"})])
        .collect();
    write(
        &root.join("agent/script.json"),
        &json!({"turns": [{"steps": steps}]}).to_string(),
    );
    write(
        &root.join("agent/agent.toml"),
        "[harness]\nmax_steps = 1000\nbuiltin_tools = []\n",
    );
    write(&root.join("agent/instructions.md"), "Bench.\n");
    write(
        &root.join("agent/tools/noop.toml"),
        "description = \"No-op\"\ncommand = [\"true\"]\n",
    );
    let found = agentkit_manifest::discover(&root).unwrap();
    assert!(found.is_ok(), "{:?}", found.diagnostics);
    let agent = Arc::new(found.host.agents[0].agent.clone());
    let model = ModelSpec {
        provider: Provider::Scripted,
        id: "script.json".into(),
        params: Default::default(),
    };

    let mut per_step = Vec::new();
    for _ in 0..20 {
        let input = TurnInput {
            agent: agent.clone(),
            model: model.clone(),
            history: Vec::new(),
            user_messages: vec!["go".into()],
            workspace: tmp.path().to_path_buf(),
            prepare_workspace: None,
            session_id: "bench".into(),
            turn_id: "turn".into(),
            cancel: CancellationToken::new(),
            providers: Default::default(),
            dry_run: false,
            host: None,
            reminders: None,
            tools: Vec::new(),
            services: None,
            approvals: None,
            as_of: None,
        };
        let (tx, mut rx) = tokio::sync::mpsc::channel(4096);
        let started = Instant::now();
        let outcome = rt.block_on(async {
            let drain = tokio::spawn(async move { while rx.recv().await.is_some() {} });
            let outcome = run_turn(input, tx).await;
            drain.await.unwrap();
            outcome
        });
        assert!(
            matches!(outcome, TurnOutcome::Completed { .. }),
            "{outcome:?}"
        );
        per_step.push(started.elapsed() / 201);
    }

    let tool = agent.tool("noop").unwrap().clone();
    let ctx = ToolContext {
        call_id: "c".into(),
        session_id: "bench".into(),
        workspace_dir: tmp.path().to_path_buf(),
        cancel: CancellationToken::new(),
        host: None,
        services: None,
        as_of: None,
    };
    let mut per_call = Vec::new();
    for _ in 0..200 {
        let started = Instant::now();
        let out = rt.block_on(run_server_tool(&tool, &json!({}), &ctx));
        per_call.push(started.elapsed());
        assert!(!out.is_error, "{:?}", out.output);
    }

    report("per step (scripted model, loop + events)", &mut per_step);
    report(
        "per subprocess tool call (spawn `true` to result)",
        &mut per_call,
    );
}

fn report(what: &str, samples: &mut [Duration]) {
    samples.sort();
    let p = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
    println!(
        "{what}: p50 {:?}  p90 {:?}  min {:?}  (n={})",
        p(0.5),
        p(0.9),
        samples[0],
        samples.len()
    );
}
