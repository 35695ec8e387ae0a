//! How long `discover` takes on a large generated project, and whether it
//! grows linearly with the number of definition files.
//!
//! The project is written once per size into a temporary folder, outside
//! the timed loop: `agent.toml`, `instructions.md`, N tools with an inline
//! `[input_schema]`, M flat skills and K subagents. Run it with
//! `cargo xtask bench` (or `cargo bench -p agentkit-manifest --bench
//! discover`); the target is under 50 ms for 1,000 tools, 200 skills and
//! 50 subagents. A plain run ends with a table of the time per file at
//! each size (`summary`), to read linearity at a glance.

// A benchmark is a test program: a failed setup should stop it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::fs;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use tempfile::TempDir;

/// The size of one generated project.
#[derive(Clone, Copy)]
struct Size {
    tools: usize,
    skills: usize,
    subagents: usize,
}

impl Size {
    const fn new(tools: usize, skills: usize, subagents: usize) -> Self {
        Size {
            tools,
            skills,
            subagents,
        }
    }

    /// Definition files discovery reads: `agent.toml`, `instructions.md`,
    /// one per tool and skill, two per subagent.
    fn files(self) -> usize {
        2 + self.tools + self.skills + 2 * self.subagents
    }

    fn label(self) -> String {
        format!("{}t-{}s-{}a", self.tools, self.skills, self.subagents)
    }
}

/// The size the target applies to.
const TARGET: Size = Size::new(1000, 200, 50);

/// Points for the linearity check: each doubles the one before.
const SCALING: [Size; 4] = [
    Size::new(250, 50, 12),
    Size::new(500, 100, 25),
    Size::new(1000, 200, 50),
    Size::new(2000, 400, 100),
];

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn tool_toml(i: usize) -> String {
    let mut t = String::new();
    writeln!(
        t,
        "description = \"Tool number {i}: looks up record {i} in the inventory and returns its fields as JSON.\""
    )
    .unwrap();
    writeln!(t, "command = [\"python3\", \"tool_{i:05}.py\"]").unwrap();
    writeln!(t, "timeout = \"{}s\"", 5 + i % 25).unwrap();
    if i.is_multiple_of(3) {
        t.push_str("read_only = true\nidempotent = true\n");
    }
    t.push_str("\n[input_schema]\ntype = \"object\"\n");
    t.push_str("required = [\"id\", \"mode\"]\nadditionalProperties = false\n");
    t.push_str(
        "properties.id = { type = \"string\", description = \"The record id\", minLength = 1 }\n",
    );
    t.push_str(
        "properties.mode = { type = \"string\", enum = [\"full\", \"summary\", \"keys\"] }\n",
    );
    if i.is_multiple_of(2) {
        t.push_str(
            "properties.limit = { type = \"integer\", minimum = 1, maximum = 100, default = 10 }\n",
        );
    }
    t
}

fn skill_md(i: usize) -> String {
    format!(
        "---\ndescription: Use when the user asks about topic {i} or anything close to it.\n---\n\n\
         # Topic {i}\n\n\
         1. Find the records about topic {i} with the lookup tools.\n\
         2. Summarise them in three bullet points, with their ids.\n\
         3. Say plainly when nothing is found.\n"
    )
}

/// A generated project: its folder (named as a valid slug) inside a
/// temporary folder that is removed on drop.
struct Project {
    _tmp: TempDir,
    dir: PathBuf,
}

/// Writes a project of `size` into a new temporary folder.
fn generate(size: Size) -> Project {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bench-agent");
    let agent = dir.join("agent");
    write(
        &agent.join("agent.toml"),
        "description = \"A large generated agent for the discovery benchmark\"\n\
         model = \"test\"\n\n[harness]\nmax_steps = 12\nturn_timeout = \"2m\"\n",
    );
    write(
        &agent.join("instructions.md"),
        &"You are a benchmark agent. Use the tools to look things up, and the skills to phrase answers.\n"
            .repeat(20),
    );
    for i in 0..size.tools {
        write(
            &agent.join(format!("tools/tool_{i:05}.toml")),
            &tool_toml(i),
        );
    }
    for i in 0..size.skills {
        write(&agent.join(format!("skills/skill-{i:05}.md")), &skill_md(i));
    }
    for i in 0..size.subagents {
        let dir = agent.join(format!("subagents/helper-{i:04}"));
        write(
            &dir.join("agent.toml"),
            &format!(
                "description = \"Background research on area {i}; returns a short sourced summary.\"\n\n[harness]\nmax_steps = 6\n"
            ),
        );
        write(
            &dir.join("instructions.md"),
            &format!(
                "You research area {i} for the parent agent. Answer in at most five bullet points.\n"
            ),
        );
    }
    Project { _tmp: tmp, dir }
}

/// Generates a project and checks, once, that it discovers cleanly.
fn prepare(size: Size) -> Project {
    let project = generate(size);
    let found = agentkit_manifest::discover(&project.dir).unwrap();
    let errors: Vec<String> = found
        .diagnostics
        .iter()
        .filter(|d| d.severity == agentkit_manifest::Severity::Error)
        .map(ToString::to_string)
        .collect();
    assert!(
        errors.is_empty(),
        "generated project has errors: {errors:#?}"
    );
    let agent = &found.host.agents[0].agent;
    assert_eq!(agent.tools.len(), size.tools);
    assert_eq!(agent.skills.len(), size.skills);
    assert_eq!(agent.subagents.len(), size.subagents);
    project
}

fn bench_target(c: &mut Criterion) {
    let project = prepare(TARGET);
    let mut group = c.benchmark_group("discover_target");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Elements(TARGET.files() as u64));
    group.bench_function(TARGET.label(), |b| {
        b.iter(|| agentkit_manifest::discover(black_box(&project.dir)).unwrap());
    });
    group.finish();
}

fn bench_scaling(c: &mut Criterion) {
    let mut group = c.benchmark_group("discover_scaling");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for size in SCALING {
        let project = prepare(size);
        group.throughput(Throughput::Elements(size.files() as u64));
        group.bench_with_input(
            BenchmarkId::from_parameter(size.label()),
            &project,
            |b, p| {
                b.iter(|| agentkit_manifest::discover(black_box(&p.dir)).unwrap());
            },
        );
    }
    group.finish();
}

/// Whether to print the per-file summary: on a plain `cargo bench` run
/// (only `--` flags, no filter), or when the filter is `summary`. It is
/// skipped in `--test` mode, where benches run once as a smoke test.
fn want_summary() -> bool {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--test" || a == "--list") {
        return false;
    }
    args.iter().all(|a| a.starts_with("--")) || args.iter().any(|a| a == "summary")
}

/// Prints, for each linearity point, the fastest and the median of a few
/// timed runs and the time per definition file. On a shared machine the
/// fastest run is the best estimate of the uncontended cost; criterion's
/// estimates above are means and include the noise.
#[allow(clippy::print_stdout)] // a benchmark reports on stdout
fn summary(_: &mut Criterion) {
    if !want_summary() {
        return;
    }
    const RUNS: usize = 25;
    println!("\nsummary: {RUNS} timed runs per size after 3 warm-up runs");
    println!(
        "{:>16} {:>6} {:>10} {:>10} {:>12} {:>15}",
        "size", "files", "min ms", "median ms", "min us/file", "median us/file"
    );
    for size in SCALING {
        let project = prepare(size);
        for _ in 0..3 {
            black_box(agentkit_manifest::discover(&project.dir).unwrap());
        }
        let mut times: Vec<Duration> = (0..RUNS)
            .map(|_| {
                let start = Instant::now();
                black_box(agentkit_manifest::discover(black_box(&project.dir)).unwrap());
                start.elapsed()
            })
            .collect();
        times.sort();
        let (min, median) = (times[0], times[RUNS / 2]);
        let files = size.files() as f64;
        println!(
            "{:>16} {:>6} {:>10.2} {:>10.2} {:>12.1} {:>15.1}",
            size.label(),
            size.files(),
            min.as_secs_f64() * 1e3,
            median.as_secs_f64() * 1e3,
            min.as_secs_f64() * 1e6 / files,
            median.as_secs_f64() * 1e6 / files,
        );
    }
}

criterion_group!(benches, bench_target, bench_scaling, summary);
criterion_main!(benches);
