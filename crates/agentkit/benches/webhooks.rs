//! Webhook benchmark: signed GitHub deliveries accepted per second, and
//! the ACK latency (request sent → `202` received) at p50 and p99.
//!
//! Boots `agentkit::serve` in process on the `fixtures/channels/pr-reviewer`
//! agent (the offline `test` model; no GitHub token, so no progress calls)
//! with a webhook secret, then sends N `pull_request.opened` deliveries
//! (GitHub's example payload, the PR number varied over 100 pull requests so
//! deliveries start and continue sessions) from C concurrent keep-alive
//! clients, each body signed with HMAC-SHA256 as GitHub signs it. Turns run
//! on the same cores while deliveries arrive, as they would in production.
//!
//! `cargo bench -p agentkit --bench webhooks`; `-- --quick` sends fewer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::sync::Arc;
use std::time::{Duration, Instant};

const SECRET: &str = "bench-secret";
/// (concurrency, deliveries) per level.
const LEVELS: &[(usize, usize)] = &[(1, 300), (4, 1_000), (16, 2_000)];

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench(quick));
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn bench(quick: bool) {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let state = tempfile::tempdir().unwrap();
    let env = agentkit::EnvLookup(Arc::new(|name| {
        (name == "GITHUB_WEBHOOK_SECRET").then(|| SECRET.to_owned())
    }));
    let handle = agentkit::serve(
        &root.join("channels/pr-reviewer"),
        agentkit::ServeOptions {
            port: 0,
            state_root: Some(state.path().to_path_buf()),
            env,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let url = format!("{}/pr-reviewer/v1/channels/github", handle.url());
    let template: serde_json::Value = serde_json::from_slice(
        &std::fs::read(root.join("github/pull_request.opened.json")).unwrap(),
    )
    .unwrap();
    println!("signed GitHub deliveries to an in-process server (pull_request.opened, 100 PRs)");
    println!(
        "{:>5} {:>7} {:>12} {:>10} {:>10} {:>10}",
        "conc", "n", "accepted/s", "p50 ms", "p99 ms", "max ms"
    );
    let mut serial = 0usize;
    for &(conc, n) in LEVELS {
        let n = if quick { n / 10 } else { n };
        // Bodies are built and signed before the clock starts: the client's
        // own signing is not the server's cost.
        let mut bodies = Vec::with_capacity(n);
        for i in 0..n {
            let mut p = template.clone();
            p["pull_request"]["number"] = serde_json::json!(1000 + (serial + i) % 100);
            let body = serde_json::to_vec(&p).unwrap();
            let sig = format!("sha256={}", agentkit::channels::sign(SECRET, &body));
            bodies.push((format!("bench-{}", serial + i), body, sig));
        }
        serial += n;
        let queue = Arc::new(std::sync::Mutex::new(bodies));
        // Clients are built before the clock starts too: building one
        // loads the system's root certificates, which is the client's cost
        // (and at 16 clients it used to eat the first second of the run).
        let clients: Vec<reqwest::Client> = (0..conc).map(|_| reqwest::Client::new()).collect();
        let start = Instant::now();
        let mut tasks = Vec::new();
        for client in clients {
            let (queue, url) = (queue.clone(), url.clone());
            tasks.push(tokio::spawn(async move {
                let mut lat = Vec::new();
                loop {
                    let Some((id, body, sig)) = queue.lock().unwrap().pop() else {
                        break;
                    };
                    let t = Instant::now();
                    let r = client
                        .post(&url)
                        .header("content-type", "application/json")
                        .header("x-github-event", "pull_request")
                        .header("x-github-delivery", id)
                        .header("x-hub-signature-256", sig)
                        .body(body)
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(r.status().as_u16(), 202);
                    let _ = r.bytes().await;
                    lat.push(t.elapsed());
                }
                lat
            }));
        }
        let mut lat = Vec::new();
        for t in tasks {
            lat.extend(t.await.unwrap());
        }
        let elapsed = start.elapsed();
        lat.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "{conc:>5} {n:>7} {:>12.0} {:>10.2} {:>10.2} {:>10.2}",
            n as f64 / elapsed.as_secs_f64(),
            ms(percentile(&lat, 0.5)),
            ms(percentile(&lat, 0.99)),
            ms(*lat.last().unwrap()),
        );
    }
    handle.close().await;
}
