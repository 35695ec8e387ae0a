//! The harness's own cost: per model step (a scripted model, no tools, so
//! the model costs nothing) and per subprocess tool call (spawn to result,
//! with `true`-like programs), sandboxed and not, with their ratio.
//!
//! `cargo bench -p agentkit-harness --bench overhead` (or `cargo xtask bench
//! sandbox`)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentkit_harness::{ToolContext, TurnInput, TurnOutcome, run_server_tool, run_turn};
use agentkit_manifest::{ModelSpec, Provider, SandboxMode};
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
        context_window: None,
        max_output_tokens: None,
        pricing: None,
    };

    let mut per_step = Vec::new();
    for _ in 0..20 {
        let input = TurnInput {
            agent: agent.clone(),
            model: model.clone(),
            history: Vec::new(),
            user_messages: vec!["go".into()],
            user_images: Vec::new(),
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
            client_tools: Vec::new(),
            services: None,
            approvals: None,
            as_of: None,
            origin: Default::default(),
            prior_usage: Default::default(),
            day_usage: Default::default(),
            prior_cost_usd: 0.0,
            day_cost_usd: 0.0,
            prior_sizing: Default::default(),
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
        progress: Default::default(),
        call_id: "c".into(),
        session_id: "bench".into(),
        workspace_dir: tmp.path().to_path_buf(),
        cancel: CancellationToken::new(),
        host: None,
        services: None,
        as_of: None,
        origin: Default::default(),
    };
    let mut open = tool.clone();
    open.sandbox.mode = SandboxMode::Off;
    let status = agentkit_harness::sandbox_status();
    let (mut sandboxed, mut unsandboxed) = (Vec::new(), Vec::new());
    // Interleaved, so drift (caches, other load) hits both alike.
    for _ in 0..300 {
        for (t, samples) in [(&tool, &mut sandboxed), (&open, &mut unsandboxed)] {
            let started = Instant::now();
            let out = rt.block_on(run_server_tool(t, &json!({}), &ctx));
            samples.push(started.elapsed());
            assert!(!out.is_error, "{:?}", out.output);
        }
    }

    report("per step (scripted model, loop + events)", &mut per_step);
    let on = report(
        &format!(
            "per tool call, sandboxed (Landlock {}, spawn `true` to result)",
            match status.abi {
                Some(abi) => format!("ABI {abi}"),
                None => format!("unavailable: {}", status.reason.as_deref().unwrap_or("")),
            }
        ),
        &mut sandboxed,
    );
    let off = report(
        "per tool call, sandbox off (spawn `true` to result)",
        &mut unsandboxed,
    );
    println!(
        "sandbox cost per tool call: ratio {:.2} (p50 sandboxed / p50 off), +{:?}",
        on.as_secs_f64() / off.as_secs_f64(),
        on.saturating_sub(off)
    );
}

/// Prints the percentiles and answers the median.
fn report(what: &str, samples: &mut [Duration]) -> Duration {
    samples.sort();
    let p = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
    println!(
        "{what}: p50 {:?}  p90 {:?}  min {:?}  (n={})",
        p(0.5),
        p(0.9),
        samples[0],
        samples.len()
    );
    p(0.5)
}
