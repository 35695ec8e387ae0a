//! The session core's seams, checked: events are written typed, the
//! runtime's composition root does not grow back into a god object, and
//! raw benchmark runs stay out of the embedded docs.
//!
//! Part of `cargo xtask tidy`. Each check is a plain function over text so
//! its unit tests can feed it bad input.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::tidy::{find_cycle, read, relative, rust_files};

/// The crates whose own code may build a `NewEvent` field by field: the
/// stores, which own the line format. Everyone else writes an
/// `EventData` through `NewEvent::new`, so what is written is what
/// readers read.
const RAW_EVENT_WRITERS: [&str; 2] = ["crates/agentkit-events/src", "crates/agentkit-pg/src"];

/// The most methods `impl AgentRuntime` blocks may define (outside
/// tests), however the type is spelled. A ratchet: lower it when a method
/// goes; never raise it. A new capability is a part (a struct holding the
/// runtime by reference, reached through one accessor, as `reminders()`),
/// not more methods here. (It was 154 before the features became parts.)
pub(crate) const RUNTIME_METHOD_BOUND: usize = 40;

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
        for line in blocking_waits(&text) {
            problems.push(format!(
                "{}:{line}: the runtime blocks a thread on a future: a lookup that may reach a store is `async` (make the caller async instead)",
                relative(root, &file)
            ));
        }
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
    let runtime_src = root.join("crates/agentkit-runtime/src");
    let mut modules = BTreeMap::new();
    for file in rust_files(&runtime_src)? {
        let Some(name) = file.file_stem().map(|s| s.to_string_lossy().into_owned()) else {
            continue;
        };
        modules.insert(name, read(&file)?);
    }
    if let Some(cycle) = module_cycle(&modules) {
        problems.push(format!(
            "crates/agentkit-runtime/src: its modules import each other in a circle ({}): move the shared data into a leaf module (as `requests.rs`, `session_command.rs` and `schedule_state.rs` are), or reach the runtime through a trait the leaf defines (as `reminder_types::FollowupTarget`)",
            cycle.join(" -> ")
        ));
    }
    let cli_src = root.join("bins/agentkit-cli/src");
    if cli_src.is_dir() {
        let mut modules = BTreeMap::new();
        for file in rust_files(&cli_src)? {
            let Some(name) = file.file_stem().map(|s| s.to_string_lossy().into_owned()) else {
                continue;
            };
            if name != "main" {
                modules.insert(name, read(&file)?);
            }
        }
        if let Some(cycle) = module_cycle(&modules) {
            problems.push(format!(
                "bins/agentkit-cli/src: its modules import each other in a circle ({}): move what they share into a leaf module (as `boot.rs`)",
                cycle.join(" -> ")
            ));
        }
    }
    let serve_src = root.join("crates/agentkit/src/serve");
    if serve_src.is_dir() {
        let mut files = Vec::new();
        for file in rust_files(&serve_src)? {
            let Ok(inner) = file.strip_prefix(&serve_src) else {
                continue;
            };
            files.push((inner.to_string_lossy().into_owned(), read(&file)?));
        }
        let files: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .collect();
        if let Some(cycle) = serve_cycle(&files) {
            problems.push(format!(
                "crates/agentkit/src/serve: its modules import each other in a circle ({}): move the shared state into a leaf module (as `agent.rs` holds `AgentState`)",
                cycle.join(" -> ")
            ));
        }
    }
    if methods > RUNTIME_METHOD_BOUND {
        problems.push(format!(
            "crates/agentkit-runtime: `impl AgentRuntime` defines {methods} methods, over the bound of {RUNTIME_METHOD_BOUND}: give the feature its own part (a struct holding the runtime by reference, reached through one accessor) instead"
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

/// The lines (1-based), before the test module, that block a thread on
/// a future (`block_on`, `block_in_place`): every lookup that may reach a
/// store is `async`.
fn blocking_waits(text: &str) -> Vec<usize> {
    before_tests(text)
        .lines()
        .enumerate()
        .filter(|(_, l)| {
            let code = l.split("//").next().unwrap_or_default();
            code.contains("block_on(") || code.contains("block_in_place(")
        })
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

/// A circle among the modules of one crate (file stem to source; `lib`
/// is the table of contents and is left out), if there is one. A module
/// imports another when its code (outside comments and its test module)
/// names `crate::other::…`, `crate::{other::…}`, or a type `crate::Name`
/// that `lib.rs` re-exports from `other`.
fn module_cycle(modules: &BTreeMap<String, String>) -> Option<Vec<String>> {
    let reexports = modules
        .get("lib")
        .map(|lib| reexported(lib))
        .unwrap_or_default();
    let names: BTreeSet<&str> = modules.keys().map(String::as_str).collect();
    let mut graph: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (name, text) in modules {
        if name == "lib" {
            continue;
        }
        let mut deps = BTreeSet::new();
        for path in crate_paths(&code_of(before_tests(text))) {
            let first = path.split("::").next().unwrap_or_default();
            let target = if names.contains(first) {
                Some(first)
            } else {
                reexports.get(first).map(String::as_str)
            };
            if let Some(target) = target.filter(|t| *t != name && *t != "lib")
                && let Some(known) = names.get(target)
            {
                deps.insert(*known);
            }
        }
        graph.insert(name.as_str(), deps.into_iter().collect());
    }
    find_cycle(&graph).map(|c| c.into_iter().map(str::to_owned).collect())
}

/// A circle among the modules of `serve/` (a file, or a folder with its
/// files), given each file's path inside `serve/` and its source. A
/// module imports another when its code (outside comments and tests)
/// names `super::other` (from a file directly in `serve/`, or a folder's
/// `mod.rs`), `super::super::other` (from another file in a folder) or
/// `crate::serve::other`.
fn serve_cycle(files: &[(&str, &str)]) -> Option<Vec<String>> {
    let top = |path: &str| -> String {
        let first = path.split('/').next().unwrap_or_default();
        first.strip_suffix(".rs").unwrap_or(first).to_owned()
    };
    let names: BTreeSet<String> = files
        .iter()
        .map(|(p, _)| top(p))
        .filter(|n| n != "mod")
        .collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in files {
        let from = top(path);
        if from == "mod" {
            continue;
        }
        // A folder's `mod.rs` sits at the folder's own level: its
        // `super::` is `serve`'s.
        let nested = path.contains('/') && !path.ends_with("/mod.rs");
        let code = code_of(before_tests(text));
        let mut found = Vec::new();
        for prefix in [
            "crate::serve::",
            if nested { "super::super::" } else { "super::" },
        ] {
            let mut rest = code.as_str();
            while let Some(at) = rest.find(prefix) {
                // `super::super::x` also contains `super::x`: only a
                // match that starts a path counts.
                let before = rest[..at].chars().last();
                rest = &rest[at + prefix.len()..];
                if before.is_some_and(|c| c == ':' || c.is_alphanumeric() || c == '_') {
                    continue;
                }
                if let Some(group) = rest.strip_prefix('{') {
                    let end = group.find('}').unwrap_or(group.len());
                    for item in group[..end].split(',') {
                        found.push(
                            item.trim()
                                .split("::")
                                .next()
                                .unwrap_or_default()
                                .to_owned(),
                        );
                    }
                } else {
                    let end = rest
                        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .unwrap_or(rest.len());
                    found.push(rest[..end].to_owned());
                }
            }
        }
        let deps = edges.entry(from.clone()).or_default();
        for name in found {
            if name != from && names.contains(&name) {
                deps.insert(name);
            }
        }
    }
    let graph: BTreeMap<&str, Vec<&str>> = edges
        .iter()
        .map(|(k, v)| (k.as_str(), v.iter().map(String::as_str).collect()))
        .collect();
    find_cycle(&graph).map(|c| c.into_iter().map(str::to_owned).collect())
}

/// `text` without its comments (line comments and doc comments).
fn code_of(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(at) => &l[..at],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path `code` names below `crate::`, with grouped imports
/// (`crate::{a::X, b::{Y, Z}}`) spread into one path per top-level item.
fn crate_paths(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut item = String::new();
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                if depth == 0 {
                    rest = &group[i..];
                    break;
                }
                if depth == 1 && c == ',' {
                    paths.push(std::mem::take(&mut item).trim().to_owned());
                } else {
                    item.push(c);
                }
            }
            paths.push(item.trim().to_owned());
        } else {
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            paths.push(rest[..end].to_owned());
        }
    }
    paths.retain(|p| !p.is_empty());
    paths
}

/// The names `lib.rs` re-exports (`pub use module::{A, B};`), each to
/// the module it comes from.
fn reexported(lib: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let code = code_of(lib);
    for stmt in code.split(';') {
        let Some(rest) = stmt.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, items)) = rest.split_once("::") else {
            continue;
        };
        let items = items.trim().trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let item = item.trim();
            let name = item.rsplit(" as ").next().unwrap_or(item);
            let name = name.rsplit("::").next().unwrap_or(name).trim();
            if !name.is_empty() {
                map.insert(name.to_owned(), module.trim().to_owned());
            }
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modules(files: &[(&str, &str)]) -> BTreeMap<String, String> {
        files
            .iter()
            .map(|(n, t)| ((*n).to_owned(), (*t).to_owned()))
            .collect()
    }

    #[test]
    fn module_circles_are_found_through_paths_groups_and_reexports() {
        let layered = modules(&[
            ("lib", "mod a;\nmod b;\npub use b::{Thing, other::Deep};\n"),
            ("a", "use crate::b::Thing;\nuse crate::{util::lock, b};\n"),
            (
                "b",
                "// crate::a::X in a comment\nfn f() {}\n#[cfg(test)]\nmod tests { use crate::a::X; }\n",
            ),
            ("util", "fn lock() {}\n"),
        ]);
        assert_eq!(module_cycle(&layered), None);
        let direct = modules(&[
            ("a", "use crate::b::X;\n"),
            ("b", "fn g(_: crate::a::Y) {}\n"),
        ]);
        assert_eq!(
            module_cycle(&direct),
            Some(vec!["a".into(), "b".into(), "a".into()])
        );
        let grouped = modules(&[
            ("a", "use crate::{b::{X, Y}, util};\n"),
            (
                "b",
                "use crate::util;\nfn f() -> crate::Thing { todo!() }\n",
            ),
            ("lib", "pub use a::{Other, Thing};\n"),
            ("util", ""),
        ]);
        assert_eq!(
            module_cycle(&grouped),
            Some(vec!["a".into(), "b".into(), "a".into()])
        );
    }

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
    fn serve_circles_are_found_through_super_paths_of_files_and_folders() {
        let files = [
            ("mount.rs", "use super::a2a::Remote;\n"),
            (
                "a2a/ops.rs",
                "use super::super::mount::Mounted;\nuse super::wire::X;\n",
            ),
            ("a2a/wire.rs", "pub struct X;\n"),
            ("agent.rs", "use super::{mcp, http::Guarded};\n"),
            ("mcp.rs", "// super::mount in a comment\n"),
        ];
        let cycle = serve_cycle(&files).unwrap_or_default();
        assert!(cycle.contains(&"mount".to_owned()) && cycle.contains(&"a2a".to_owned()));
        let cut = [
            (
                "mount.rs",
                "use super::a2a::Remote;\nuse super::agent::Mounted;\n",
            ),
            ("a2a/ops.rs", "use super::super::agent::Mounted;\n"),
            ("agent.rs", "use super::{mcp, http::Guarded};\n"),
            ("mcp.rs", "// super::mount in a comment\n"),
        ];
        assert_eq!(serve_cycle(&cut), None);
        // A folder's `mod.rs` imports at `serve`'s level.
        let through_mod = [
            ("agent.rs", "use super::mcp::Endpoint;\n"),
            ("mcp.rs", "use super::a2a::TaskState;\n"),
            ("a2a/mod.rs", "use super::agent::AgentState;\n"),
        ];
        assert!(serve_cycle(&through_mod).is_some());
    }

    #[test]
    fn blocking_waits_are_found_before_the_tests_only() {
        let text = "fn a() {\n    tokio::task::block_in_place(|| h.block_on(f))\n}\n// block_on( in a comment\n#[cfg(test)]\nmod tests { fn b() { rt.block_on(f); } }\n";
        assert_eq!(blocking_waits(text), vec![2]);
    }

    #[test]
    fn the_runtime_may_not_name_the_postgresql_backend() {
        let text =
            "use agentkit_store::SharedLog;\nlet t = agentkit_pg::ReminderTable::new(db, a);\n";
        assert_eq!(backend_names(text), vec![2]);
        assert!(backend_names("use agentkit_store::SharedLog;\n").is_empty());
    }
}
