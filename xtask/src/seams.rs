//! The session core's seams, checked: events are written typed, the
//! runtime's composition root does not grow back into a god object, and
//! raw benchmark runs stay out of the embedded docs.
//!
//! Part of `cargo xtask tidy`. Each check is a plain function over text so
//! its unit tests can feed it bad input.

use std::path::Path;

use crate::tidy::{read, relative, rust_files};

/// The crates whose own code may build a `NewEvent` field by field: the
/// stores, which own the line format. Everyone else writes an
/// `EventData` through `NewEvent::new`, so what is written is what
/// readers read.
const RAW_EVENT_WRITERS: [&str; 2] = ["crates/agentkit-events/src", "crates/agentkit-pg/src"];

/// The most methods `impl AgentRuntime` blocks may define (outside
/// tests), however the type is spelled. A ratchet: lower it as features
/// move into their own parts (the goal is 40); never raise it. (It was
/// 150 while blocks spelled `impl crate::AgentRuntime` went uncounted;
/// counted, there were 154.)
pub(crate) const RUNTIME_METHOD_BOUND: usize = 154;

/// Runs the checks on the workspace at `root`.
pub(crate) fn check(root: &Path) -> anyhow::Result<Vec<String>> {
    let mut problems = Vec::new();
    for file in rust_files(&root.join("crates"))? {
        let shown = relative(root, &file);
        if !shown.contains("/src/") || RAW_EVENT_WRITERS.iter().any(|w| shown.starts_with(w)) {
            continue;
        }
        let text = read(&file)?;
        for line in raw_event_literals(&text) {
            problems.push(format!(
                "{shown}:{line}: a `NewEvent {{ .. }}` built field by field: write `NewEvent::new(turn, EventData::..)` (typed, as readers read it)"
            ));
        }
    }
    let mut methods = 0;
    for file in rust_files(&root.join("crates/agentkit-runtime/src"))? {
        let text = read(&file)?;
        methods += runtime_methods(&text);
        for line in backend_names(&text) {
            problems.push(format!(
                "{}:{line}: the runtime names the PostgreSQL backend: reach shared state through `agentkit_store`'s traits (the facade wires `agentkit_pg::PgBackend` in)",
                relative(root, &file)
            ));
        }
    }
    let bench_docs = root.join("docs/benchmarks");
    if bench_docs.is_dir() {
        for entry in std::fs::read_dir(&bench_docs)? {
            let name = entry?.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".md") {
                problems.push(format!(
                    "docs/benchmarks/{name}: a raw benchmark run in the docs (every binary embeds them): keep it in crates/agentkit/benches/results/ and summarise it in a page"
                ));
            }
        }
    }
    if methods > RUNTIME_METHOD_BOUND {
        problems.push(format!(
            "crates/agentkit-runtime: `impl AgentRuntime` defines {methods} methods, over the bound of {RUNTIME_METHOD_BOUND}: give the feature its own part (a struct holding the core) instead"
        ));
    }
    Ok(problems)
}

/// The lines (1-based) naming `agentkit_pg`: the runtime knows the storage
/// seam's traits, never a backend behind them.
fn backend_names(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.contains("agentkit_pg"))
        .map(|(i, _)| i + 1)
        .collect()
}

/// The code of a file before its test module.
fn before_tests(text: &str) -> &str {
    text.find("#[cfg(test)]").map_or(text, |at| &text[..at])
}

/// The lines (1-based) that open a `NewEvent` struct literal.
fn raw_event_literals(text: &str) -> Vec<usize> {
    before_tests(text)
        .lines()
        .enumerate()
        .filter(|(_, line)| {
            let code = line.split("//").next().unwrap_or_default();
            code.contains("NewEvent {") && !code.contains("struct NewEvent")
        })
        .map(|(i, _)| i + 1)
        .collect()
}

/// How many methods the `impl AgentRuntime` blocks of `text` define
/// (outside its test module).
fn runtime_methods(text: &str) -> usize {
    let mut count = 0;
    let mut depth: Option<i64> = None;
    for line in before_tests(text).lines() {
        if depth.is_none()
            && [
                "impl AgentRuntime {",
                "impl crate::AgentRuntime {",
                "impl crate::runtime::AgentRuntime {",
            ]
            .iter()
            .any(|spelling| line.starts_with(spelling))
        {
            depth = Some(0);
        }
        let Some(d) = depth.as_mut() else {
            continue;
        };
        if *d == 1 && is_fn(line) {
            count += 1;
        }
        let opens = line.matches('{').count() as i64;
        let closes = line.matches('}').count() as i64;
        *d += opens - closes;
        if *d <= 0 && closes > 0 {
            depth = None;
        }
    }
    count
}

fn is_fn(line: &str) -> bool {
    let mut words = line.split_whitespace().peekable();
    while let Some(&w) = words.peek() {
        if w.starts_with("pub") || w == "async" || w == "const" || w == "unsafe" {
            words.next();
        } else {
            break;
        }
    }
    words.next() == Some("fn")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_event_literals_are_found_outside_tests() {
        let text = "fn a() {\n    let e = NewEvent {\n        event_type,\n    };\n}\n// NewEvent { in a comment\n#[cfg(test)]\nmod tests { fn b() { NewEvent { x }; } }\n";
        assert_eq!(raw_event_literals(text), vec![2]);
        assert!(
            raw_event_literals("let e = NewEvent::new(None, EventData::SessionWaiting);")
                .is_empty()
        );
    }

    #[test]
    fn runtime_methods_are_counted_per_impl_block() {
        let text = "impl AgentRuntime {\n    pub async fn a(&self) {\n        fn inner() {}\n    }\n    pub(crate) fn b(&self) {}\n    fn c(&self) {\n    }\n}\n\nimpl Other {\n    fn d() {}\n}\nimpl AgentRuntime {\n    fn e() {}\n}\nimpl crate::AgentRuntime {\n    fn g() {}\n}\n#[cfg(test)]\nimpl AgentRuntime {\n    fn f() {}\n}\n";
        assert_eq!(runtime_methods(text), 5);
    }

    #[test]
    fn the_runtime_may_not_name_the_postgresql_backend() {
        let text =
            "use agentkit_store::SharedLog;\nlet t = agentkit_pg::ReminderTable::new(db, a);\n";
        assert_eq!(backend_names(text), vec![2]);
        assert!(backend_names("use agentkit_store::SharedLog;\n").is_empty());
    }
}
