//! `cargo xtask tidy`: the repository conventions of STYLE.md, checked by a
//! program instead of by review.
//!
//! It also runs as the `tidy` test, so `cargo test` alone catches a missing
//! `//!` header or a forbidden dependency (after rust-analyzer's
//! `xtask/src/tidy.rs`). Each checker is a plain function over text so that
//! its unit tests can feed it bad input.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context as _;
use serde::Deserialize;

/// Runs every check on the workspace at `root`; each problem is one
/// `path: message` line.
pub(crate) fn run(root: &Path) -> anyhow::Result<Vec<String>> {
    let mut problems = Vec::new();

    for dir in ["crates", "bins", "xtask"] {
        for file in rust_files(&root.join(dir))? {
            let text = read(&file)?;
            let shown = relative(root, &file);
            if let Some(problem) = check_module_header(&text) {
                problems.push(format!("{shown}: {problem}"));
            }
            if dir == "crates" && !print_check_exempt(root, &file) {
                for (line, problem) in check_no_print(&text) {
                    problems.push(format!("{shown}:{line}: {problem}"));
                }
            }
        }
    }

    for (manifest, is_library) in manifests(root)? {
        let text = read(&manifest)?;
        let shown = relative(root, &manifest);
        for problem in check_manifest(&text, is_library) {
            problems.push(format!("{shown}: {problem}"));
        }
    }

    let metadata = cargo_metadata(root)?;
    problems.extend(check_dependency_directions(root, &metadata));

    problems.extend(crate::bundle::check(root)?);
    problems.extend(crate::seams::check(root)?);

    problems.extend(check_docs(root)?);

    let names: Vec<&str> = metadata.packages.iter().map(|p| p.name.as_str()).collect();
    let architecture = root.join("ARCHITECTURE.md");
    if architecture.is_file() {
        let text = read(&architecture)?;
        for problem in check_architecture(&text, &names) {
            problems.push(format!("ARCHITECTURE.md: {problem}"));
        }
        let paths = workspace_paths(root)?;
        let source = |path: &str| std::fs::read_to_string(root.join(path)).ok();
        for problem in check_architecture_paths(&text, &paths, &source) {
            problems.push(format!("ARCHITECTURE.md: {problem}"));
        }
    } else {
        problems.push(
            "ARCHITECTURE.md: missing; its code map must name every workspace package".to_owned(),
        );
    }

    Ok(problems)
}

// ---------------------------------------------------------------------------
// a. `//!` headers

/// Every module starts with a `//!` line saying why it exists (STYLE.md).
fn check_module_header(text: &str) -> Option<&'static str> {
    if text.starts_with("//!") {
        None
    } else {
        Some("must start with a `//!` line saying why the module exists (no blank lines before it)")
    }
}

// ---------------------------------------------------------------------------
// b, c. Cargo.toml conventions

const DEPENDENCY_TABLES: [&str; 5] = [
    "dependencies",
    "dev-dependencies",
    "build-dependencies",
    // Old spellings cargo still accepts; a dependency hidden here must not
    // escape the checks.
    "dev_dependencies",
    "build_dependencies",
];

/// Checks one crate manifest: dependencies come from `[workspace.dependencies]`,
/// lints from `[workspace.lints]`, and library crates (`is_library`) keep
/// `anyhow` out of their normal dependencies.
fn check_manifest(text: &str, is_library: bool) -> Vec<String> {
    let manifest: toml::Table = match text.parse() {
        Ok(manifest) => manifest,
        Err(err) => return vec![format!("invalid TOML: {err}")],
    };
    let mut problems = Vec::new();

    let lints_from_workspace = manifest
        .get("lints")
        .and_then(|lints| lints.get("workspace"))
        .and_then(toml::Value::as_bool)
        == Some(true);
    if !lints_from_workspace {
        problems.push("missing `[lints] workspace = true`".to_owned());
    }

    // (table name for messages, whether it holds normal dependencies, table)
    let mut tables: Vec<(String, bool, &toml::Table)> = Vec::new();
    for kind in DEPENDENCY_TABLES {
        if let Some(table) = manifest.get(kind).and_then(toml::Value::as_table) {
            tables.push((kind.to_owned(), kind == "dependencies", table));
        }
    }
    if let Some(targets) = manifest.get("target").and_then(toml::Value::as_table) {
        for (cfg, target) in targets {
            for kind in DEPENDENCY_TABLES {
                if let Some(table) = target.get(kind).and_then(toml::Value::as_table) {
                    tables.push((
                        format!("target.{cfg}.{kind}"),
                        kind == "dependencies",
                        table,
                    ));
                }
            }
        }
    }

    for (section, normal, table) in tables {
        for (name, spec) in table {
            let from_workspace = spec.get("workspace").and_then(toml::Value::as_bool) == Some(true);
            if !from_workspace {
                problems.push(format!(
                    "[{section}] `{name}` must use `workspace = true`; versions live in the root Cargo.toml"
                ));
            }
            let package = spec
                .get("package")
                .and_then(toml::Value::as_str)
                .unwrap_or(name);
            if is_library && normal && package == "anyhow" {
                problems.push(format!(
                    "[{section}] library crates must not depend on `anyhow`; use the crate's thiserror enum"
                ));
            }
        }
    }
    problems
}

// ---------------------------------------------------------------------------
// d. dependency directions

const TEST_SUPPORT: &str = "agentkit-test-support";

/// The library crates below the facade, in layer order.
const BELOW_FACADE: &[&str] = &[
    // Static files only: it depends on nothing.
    "agentkit-playground",
    "agentkit-protocol",
    "agentkit-manifest",
    "agentkit-events",
    "agentkit-store",
    "agentkit-pg",
    "agentkit-auth",
    "agentkit-plumbing",
    "agentkit-harness",
    "agentkit-mcp",
    "agentkit-channels",
    "agentkit-runtime",
    "agentkit-client",
    "agentkit-evals",
    "agentkit-migrate",
];

/// Every workspace package and the internal crates it may use as normal (or
/// build) dependencies. A new crate must be added here deliberately: tidy
/// reports any package missing from this table.
///
/// The facade may use every crate below it, and the test support crate may use
/// the facade and everything below (the unit tests check both rows against
/// `BELOW_FACADE`, so a new library crate is added there too). Binaries see
/// only the facade, except that `agentkit-serve` uses the serve library of
/// `agentkit-cli` (one flag struct, banner and exit codes for both servers).
const ALLOWED_DEPENDENCIES: &[(&str, &[&str])] = &[
    ("agentkit-playground", &[]),
    ("agentkit-protocol", &[]),
    ("agentkit-manifest", &["agentkit-protocol"]),
    ("agentkit-events", &["agentkit-protocol"]),
    // The storage seam: what the runtime needs from a store several hosts
    // share, as traits over plain rows (and an in-memory store).
    ("agentkit-store", &["agentkit-protocol", "agentkit-events"]),
    // The PostgreSQL backend stores the event log's lines as the file
    // backend does and rebuilds them through its `Rebuild`; it implements
    // the seam's traits.
    (
        "agentkit-pg",
        &["agentkit-protocol", "agentkit-events", "agentkit-store"],
    ),
    ("agentkit-auth", &["agentkit-protocol"]),
    // The one child-process runner, HTTP client and retry policy,
    // redaction and path guard: below everything that spawns or sends,
    // knowing no agentkit crate.
    ("agentkit-plumbing", &[]),
    (
        "agentkit-harness",
        &[
            "agentkit-protocol",
            "agentkit-manifest",
            "agentkit-plumbing",
        ],
    ),
    // Stdio MCP servers run through the harness's re-export of the
    // plumbing's runner; the MCP client puts the harness's trace context
    // on what it sends.
    (
        "agentkit-mcp",
        &["agentkit-protocol", "agentkit-manifest", "agentkit-harness"],
    ),
    // Pack host tasks, deliveries and the packs' API clients use the
    // plumbing; the channels know nothing of the agent loop.
    (
        "agentkit-channels",
        &[
            "agentkit-protocol",
            "agentkit-manifest",
            "agentkit-auth",
            "agentkit-plumbing",
        ],
    ),
    (
        "agentkit-runtime",
        &[
            "agentkit-protocol",
            "agentkit-manifest",
            "agentkit-events",
            "agentkit-store",
            "agentkit-auth",
            "agentkit-harness",
        ],
    ),
    // The client half: the public API's client knows the protocol and the
    // process's one HTTP client (the plumbing's), never the server half.
    (
        "agentkit-client",
        &["agentkit-protocol", "agentkit-plumbing"],
    ),
    // The eval runner drives a server through the client; judges and
    // cassettes use the harness's providers.
    (
        "agentkit-evals",
        &[
            "agentkit-protocol",
            "agentkit-manifest",
            "agentkit-harness",
            "agentkit-client",
        ],
    ),
    // Reads and writes project files and runs Node; knows no other crate.
    ("agentkit-migrate", &[]),
    ("agentkit", BELOW_FACADE),
    (
        TEST_SUPPORT,
        &[
            "agentkit",
            "agentkit-playground",
            "agentkit-protocol",
            "agentkit-manifest",
            "agentkit-events",
            "agentkit-store",
            "agentkit-pg",
            "agentkit-auth",
            "agentkit-plumbing",
            "agentkit-harness",
            "agentkit-mcp",
            "agentkit-channels",
            "agentkit-runtime",
            "agentkit-client",
            "agentkit-evals",
            "agentkit-migrate",
        ],
    ),
    ("agentkit-cli", &["agentkit"]),
    ("agentkit-serve", &["agentkit", "agentkit-cli"]),
    ("xtask", &[]),
];

/// Packages that may not even dev-depend on the test support crate.
const NO_TEST_SUPPORT: &[&str] = &[TEST_SUPPORT, "xtask"];

fn allowed_dependencies(package: &str) -> Option<&'static [&'static str]> {
    ALLOWED_DEPENDENCIES
        .iter()
        .find(|(name, _)| *name == package)
        .map(|(_, allowed)| *allowed)
}

/// The parts of `cargo metadata --format-version 1 --no-deps` tidy reads.
#[derive(Debug, Deserialize)]
struct Metadata {
    packages: Vec<Package>,
}

#[derive(Debug, Deserialize)]
struct Package {
    name: String,
    manifest_path: PathBuf,
    dependencies: Vec<Dependency>,
}

#[derive(Debug, Deserialize)]
struct Dependency {
    /// The package name, even when the dependency is renamed.
    name: String,
    /// `None` for normal dependencies, else `"dev"` or `"build"`.
    kind: Option<String>,
}

fn cargo_metadata(root: &Path) -> anyhow::Result<Metadata> {
    let output = Command::new("cargo")
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--manifest-path",
        ])
        .arg(root.join("Cargo.toml"))
        .current_dir(root)
        .output()
        .context("failed to run `cargo metadata`")?;
    if !output.status.success() {
        anyhow::bail!(
            "`cargo metadata` failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    serde_json::from_slice(&output.stdout).context("failed to parse `cargo metadata` output")
}

/// Checks every internal dependency edge against `ALLOWED_DEPENDENCIES` and
/// that the internal graph has no cycle.
fn check_dependency_directions(root: &Path, metadata: &Metadata) -> Vec<String> {
    let mut problems = Vec::new();
    let workspace: BTreeSet<&str> = metadata.packages.iter().map(|p| p.name.as_str()).collect();
    // Normal and build edges, for the cycle check.
    let mut graph: BTreeMap<&str, Vec<&str>> = BTreeMap::new();

    for package in &metadata.packages {
        let shown = relative(root, &package.manifest_path);
        let name = package.name.as_str();
        let Some(allowed) = allowed_dependencies(name) else {
            problems.push(format!(
                "{shown}: workspace package `{name}` is not in the dependency table (ALLOWED_DEPENDENCIES in xtask/src/tidy.rs); add it deliberately"
            ));
            continue;
        };
        for dependency in &package.dependencies {
            let target = dependency.name.as_str();
            if !workspace.contains(target) {
                continue;
            }
            let kind = dependency.kind.as_deref().unwrap_or("normal");
            let dev = kind == "dev";
            if !dev {
                graph.entry(name).or_default().push(target);
            }
            let ok = allowed.contains(&target)
                || (dev && target == TEST_SUPPORT && !NO_TEST_SUPPORT.contains(&name));
            if !ok {
                let allowed = if allowed.is_empty() {
                    "none".to_owned()
                } else {
                    allowed.join(", ")
                };
                problems.push(format!(
                    "{shown}: `{name}` must not depend on `{target}` ({kind} dependency); allowed internal dependencies: {allowed}"
                ));
            }
        }
    }

    for (name, _) in ALLOWED_DEPENDENCIES {
        if !workspace.contains(name) {
            problems.push(format!(
                "xtask/src/tidy.rs: the dependency table names `{name}`, which is not a workspace package"
            ));
        }
    }

    if let Some(cycle) = find_cycle(&graph) {
        problems.push(format!(
            "Cargo.toml: dependency cycle: {}",
            cycle.join(" -> ")
        ));
    }
    problems
}

/// A cycle in `graph`, as the path that closes it (`a -> b -> a`), if any.
pub(crate) fn find_cycle<'a>(graph: &BTreeMap<&'a str, Vec<&'a str>>) -> Option<Vec<&'a str>> {
    fn visit<'a>(
        node: &'a str,
        graph: &BTreeMap<&'a str, Vec<&'a str>>,
        done: &mut BTreeSet<&'a str>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<&'a str>> {
        if let Some(start) = path.iter().position(|n| *n == node) {
            let mut cycle = path[start..].to_vec();
            cycle.push(node);
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node);
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, done, path) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node);
        None
    }

    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut done, &mut Vec::new()))
}

// ---------------------------------------------------------------------------
// e. ARCHITECTURE.md

/// The code map names every package, in backticks.
fn check_architecture(text: &str, packages: &[&str]) -> Vec<String> {
    packages
        .iter()
        .filter(|name| !text.contains(&format!("`{name}`")))
        .map(|name| format!("does not name workspace package `{name}` (add it to the code map)"))
        .collect()
}

/// The top-level folders a path in ARCHITECTURE.md may start with.
const PATH_ROOTS: [&str; 5] = ["crates", "bins", "xtask", "docs", "fixtures"];

/// Every path ARCHITECTURE.md names in backticks exists in `paths` (the
/// workspace's files and folders, relative, `/`-separated), and every
/// function a `file.rs::function` (or `file.rs::Type::method`) reference
/// names is defined (`fn function`) in that file, read through `source`.
///
/// A span counts as a path when it is one word that ends in `.rs` (a
/// `file.rs::function` reference counts by its file) or starts with one of
/// `PATH_ROOTS` and a `/`. Spans with placeholders (`<slug>/…`), routes
/// (`/v1/info`) and project files (`agent.toml`) are not workspace paths and
/// are skipped. See [`resolved_paths`] for the short forms accepted; a short
/// form that several files end with passes when one of them defines the
/// function.
fn check_architecture_paths(
    text: &str,
    paths: &BTreeSet<String>,
    source: &dyn Fn(&str) -> Option<String>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    let mut missing = BTreeSet::new();
    for span in inline_code_spans(text) {
        let Some(path) = named_path(span) else {
            continue;
        };
        let function = named_function(span);
        if !seen.insert((path, function)) {
            continue;
        }
        let files = resolved_paths(path, paths);
        if files.is_empty() {
            if missing.insert(path) {
                problems.push(format!(
                    "names `{path}`, which is not a file or folder of the workspace (fix the path or drop the backticks)"
                ));
            }
            continue;
        }
        if let Some(function) = function
            && !files
                .iter()
                .any(|f| source(f).is_some_and(|code| defines_fn(&code, function)))
        {
            problems.push(format!(
                "names `{span}`, but `{}` defines no `fn {function}` (fix the reference)",
                files.join("` or `")
            ));
        }
    }
    problems
}

/// The function a `file.rs::function` or `file.rs::Type::method` span
/// names: its last segment, when that is an identifier.
fn named_function(span: &str) -> Option<&str> {
    let (_, rest) = span.split_once(".rs::")?;
    let name = rest.rsplit("::").next()?;
    let ident = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    ident.then_some(name)
}

/// Whether `code` defines a function `name` (`fn name(` or `fn name<`).
fn defines_fn(code: &str, name: &str) -> bool {
    let head = format!("fn {name}");
    code.match_indices(&head).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + head.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            && matches!(after, Some('(' | '<'))
    })
}

/// The contents of the inline code spans of a Markdown text, outside fenced
/// code blocks. A span may run across lines.
fn inline_code_spans(text: &str) -> Vec<&str> {
    let mut spans = Vec::new();
    let mut fenced = false;
    let mut open: Option<usize> = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            open = None;
            continue;
        }
        if fenced {
            continue;
        }
        for (at, _) in line.match_indices('`') {
            let at = start + at;
            match open.take() {
                Some(from) => spans.push(&text[from..at]),
                None => open = Some(at + 1),
            }
        }
    }
    spans
}

/// The workspace path a code span names, if it names one.
fn named_path(span: &str) -> Option<&str> {
    let path = match span.split_once(".rs::") {
        Some((file, _)) => &span[..file.len() + 3],
        None => span,
    };
    let plain = !path.is_empty()
        && !path.starts_with(['/', '.'])
        && !path.contains("//")
        && !path
            .chars()
            .any(|c| c.is_whitespace() || "<>*{}()[]|,:;'\"$=".contains(c));
    let first = path.split('/').next().unwrap_or_default();
    let is_path = path.ends_with(".rs") || (PATH_ROOTS.contains(&first) && path.contains('/'));
    (plain && is_path).then_some(path)
}

/// The entries of `paths` that `path` names: as written from the workspace
/// root (`crates/agentkit/src/serve/bridge.rs`, `docs/`); from a crate's or
/// binary's folder, with or without the `agentkit-` prefix
/// (`agentkit-runtime/src/kv.rs`, `harness/src/tools.rs`); or as the end of
/// exactly such a path (`serve/api.rs`, `sign.rs`).
/// A written-out form wins over path ends.
fn resolved_paths<'a>(path: &str, paths: &'a BTreeSet<String>) -> Vec<&'a str> {
    let path = path.trim_end_matches('/');
    let candidates = [
        path.to_owned(),
        format!("crates/{path}"),
        format!("crates/agentkit-{path}"),
        format!("bins/{path}"),
        format!("bins/agentkit-{path}"),
    ];
    let written: Vec<&str> = candidates
        .iter()
        .filter_map(|c| paths.get(c).map(String::as_str))
        .collect();
    if !written.is_empty() {
        return written;
    }
    let suffix = format!("/{path}");
    paths
        .iter()
        .filter(|p| p.ends_with(&suffix))
        .map(String::as_str)
        .collect()
}

/// Every file and folder under `PATH_ROOTS`, relative to `root` with `/`
/// separators, skipping `target/` and hidden entries.
fn workspace_paths(root: &Path) -> anyhow::Result<BTreeSet<String>> {
    let mut paths = BTreeSet::new();
    let mut pending: Vec<PathBuf> = PATH_ROOTS.iter().map(|dir| root.join(dir)).collect();
    while let Some(dir) = pending.pop() {
        if !dir.is_dir() {
            continue;
        }
        paths.insert(relative(root, &dir));
        let entries =
            std::fs::read_dir(&dir).with_context(|| format!("failed to list {}", dir.display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("failed to list {}", dir.display()))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name == "target" || name == "node_modules" || name.starts_with('.') {
                continue;
            }
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                paths.insert(relative(root, &path));
            }
        }
    }
    Ok(paths)
}

// ---------------------------------------------------------------------------
// f. libraries never print

const PRINT_MACROS: [&str; 4] = ["print!", "println!", "eprint!", "eprintln!"];

/// Test code, benches, examples and build scripts may print; library code
/// may not.
fn print_check_exempt(root: &Path, file: &Path) -> bool {
    let relative = file.strip_prefix(root).unwrap_or(file);
    relative.file_name().is_some_and(|name| name == "build.rs")
        || relative.components().any(|component| {
            let part = component.as_os_str();
            part == "tests" || part == "benches" || part == "examples"
        })
}

/// Lines (1-based) of non-test code that use a print macro. Everything after
/// the first `#[cfg(test)]` counts as test code, and comment lines (doc
/// examples included) are skipped.
fn check_no_print(text: &str) -> Vec<(usize, String)> {
    let mut problems = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.contains("#[cfg(test)]") {
            break;
        }
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        if let Some(name) = PRINT_MACROS.iter().find(|name| uses_macro(code, name)) {
            problems.push((
                index + 1,
                format!("`{name}` in library code; libraries never print, emit a `tracing` event instead"),
            ));
        }
    }
    problems
}

/// Whether `line` invokes `name` (like `println!`) and not a longer macro
/// that ends with it (like `eprintln!` or `my_println!`).
fn uses_macro(line: &str, name: &str) -> bool {
    line.match_indices(name).any(|(at, _)| {
        !line[..at]
            .chars()
            .next_back()
            .is_some_and(|before| before.is_alphanumeric() || before == '_')
    })
}

// ---------------------------------------------------------------------------
// g. the docs tell the truth

/// Where the CLI's command list lives: written from clap by the
/// agentkit-cli test `cli::commands_file_is_fresh` (which fails when it is
/// stale), read here without building the CLI.
const COMMANDS_FILE: &str = "bins/agentkit-cli/commands.txt";

/// Checks the user docs against the product: every command of the CLI is
/// in `docs/reference/cli.md` and in README's status table, and no page
/// says a capability is missing or comes later.
fn check_docs(root: &Path) -> anyhow::Result<Vec<String>> {
    let mut problems = Vec::new();
    let commands_text = read(&root.join(COMMANDS_FILE))?;
    let commands = parse_commands(&commands_text);
    if commands.is_empty() {
        problems.push(format!("{COMMANDS_FILE}: lists no command"));
    }
    let cli = read(&root.join("docs/reference/cli.md"))?;
    for problem in check_cli_reference(&cli, &commands) {
        problems.push(format!("docs/reference/cli.md: {problem}"));
    }
    let readme = read(&root.join("README.md"))?;
    let guides: Vec<String> = markdown_files(&root.join("docs/guides"))?
        .iter()
        .map(|p| relative(root, p))
        .collect();
    for problem in check_readme_status(&readme, &commands, &guides) {
        problems.push(format!("README.md: {problem}"));
    }

    let mut pages = vec![root.join("README.md")];
    pages.extend(markdown_files(&root.join("docs"))?);
    let mut allowed_used = vec![false; TRUE_CLAIMS.len()];
    for page in pages {
        let shown = relative(root, &page);
        let text = read(&page)?;
        for (line, problem) in check_missing_claims(&shown, &text, &mut allowed_used) {
            problems.push(format!("{shown}:{line}: {problem}"));
        }
    }
    for ((path, excerpt, _), used) in TRUE_CLAIMS.iter().zip(allowed_used) {
        if !used {
            problems.push(format!(
                "xtask/src/tidy.rs: TRUE_CLAIMS entry ({path}, {excerpt:?}) matches nothing; delete it"
            ));
        }
    }
    Ok(problems)
}

/// The command paths of a commands file (`github events`), skipping `#`
/// comments and blank lines.
fn parse_commands(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// Every command has a section in cli.md (a `## agentkit …` heading names
/// it, or its parent's section shows its usage as `agentkit <path>`) and
/// every top-level command a row in the summary table above the sections.
fn check_cli_reference(text: &str, commands: &[String]) -> Vec<String> {
    let mut headed: BTreeSet<String> = BTreeSet::new();
    for line in text.lines() {
        let Some(heading) = line.strip_prefix("## ") else {
            continue;
        };
        // `agentkit login, logout, whoami` names three commands and
        // `agentkit mcp login, status` two: a part without `agentkit`
        // replaces the last word of the first part.
        let mut parts = heading.split(", ");
        let Some(first) = parts.next().and_then(|p| p.strip_prefix("agentkit ")) else {
            continue;
        };
        let first = first.trim().to_owned();
        let parent = first.rsplit_once(' ').map(|(p, _)| p.to_owned());
        headed.insert(first);
        for part in parts {
            let part = part.trim();
            if let Some(path) = part.strip_prefix("agentkit ") {
                headed.insert(path.trim().to_owned());
            } else if let Some(parent) = &parent {
                headed.insert(format!("{parent} {part}"));
            } else {
                headed.insert(part.to_owned());
            }
        }
    }
    let table: String = text
        .lines()
        .take_while(|l| !l.starts_with("## "))
        .filter(|l| l.starts_with('|'))
        .collect::<Vec<_>>()
        .join("\n");
    // Usage lines align their columns (`agentkit gitlab    events`).
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut problems = Vec::new();
    for command in commands {
        let top = command.split(' ').next().unwrap_or(command);
        let is_top = top == command;
        let documented = headed.contains(command)
            || (!is_top && headed.contains(top) && flat.contains(&format!("agentkit {command}")))
            || (is_top && headed.iter().any(|h| h.starts_with(&format!("{command} "))));
        if !documented {
            problems.push(format!(
                "`agentkit {command}` has no section: add a `## agentkit {command}` heading (or show `agentkit {command}` in its parent's section)"
            ));
        }
        if is_top && !names_command(&table, command) {
            problems.push(format!(
                "`agentkit {command}` is missing from the table of commands at the top"
            ));
        }
    }
    problems
}

/// README's status table names every top-level command and every guide
/// (`docs/guides/<name>.md`): a capability has one or the other.
fn check_readme_status(text: &str, commands: &[String], guides: &[String]) -> Vec<String> {
    let Some(start) = text.find("## Status") else {
        return vec!["has no `## Status` section with the table of capabilities".to_owned()];
    };
    let table: String = text[start..]
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .filter(|l| l.starts_with('|'))
        .collect::<Vec<_>>()
        .join("\n");
    let mut problems: Vec<String> = commands
        .iter()
        .filter(|c| !c.contains(' '))
        .filter(|c| !names_command(&table, c))
        .map(|c| format!("the status table does not name `agentkit {c}`: add its capability"))
        .collect();
    for guide in guides {
        if !table.contains(&format!("`{guide}`")) {
            problems.push(format!(
                "the status table does not name `{guide}`: add its capability with \"see `{guide}`\""
            ));
        }
    }
    problems
}

/// Whether `text` names the command: `` `agentkit name`` followed by a
/// backtick, space or `/`, or `` `name` `` alone (`login`/`logout`).
fn names_command(text: &str, command: &str) -> bool {
    if text.contains(&format!("`{command}`")) {
        return true;
    }
    let long = format!("`agentkit {command}");
    text.match_indices(&long).any(|(at, _)| {
        matches!(
            text[at + long.len()..].chars().next(),
            Some('`' | ' ' | '/')
        )
    })
}

/// Phrases that say a capability is missing or arrives later. The word
/// `yet` is checked too (`no bridge route … yet`). Matched in lowercase
/// with line breaks read as spaces.
const MISSING_PHRASES: &[&str] = &[
    "later release",
    "arrive later",
    "arrives later",
    "arrive in a later",
    "arrives in a later",
    "come later",
    "comes later",
    "coming soon",
    "future release",
    "(planned)",
    "not served yet",
    "not supported yet",
    "not yet supported",
    "not implemented",
];

/// Sentences that match [`MISSING_PHRASES`] or `yet` and are true, each
/// with why: (page, an excerpt of the sentence in lowercase, the reason).
/// An entry that matches nothing is a problem, so the list cannot rot.
const TRUE_CLAIMS: &[(&str, &str, &str)] = &[
    (
        "docs/reference/mcp-connections.md",
        "`idle` (not opened yet)",
        "a connection's state, not a capability",
    ),
    (
        "docs/guides/slack.md",
        "agents that are not configured yet",
        "a channel whose credentials are missing, not a capability",
    ),
    (
        "docs/benchmarks/session-core.md",
        "the folders are not yet in the",
        "the page cache in a benchmark run",
    ),
    (
        "docs/guides/scale-out.md",
        "not yet shared",
        "the two things hosts do not share through the database (a section and its link)",
    ),
    (
        "docs/guides/observability.md",
        "not yet exported (planned)",
        "latency histograms and Slack's redeliveries are not exported",
    ),
    (
        "docs/guides/gitlab.md",
        "not available yet: synthesising deliveries",
        "`agentkit gitlab replay` takes saved payloads only",
    ),
    (
        "docs/guides/bitbucket.md",
        "not available yet: synthesising deliveries",
        "`agentkit bitbucket replay` takes saved payloads only",
    ),
    (
        "docs/reference/events.md",
        "not emitted yet: `agent.bound`",
        "the vocabulary names `agent.bound` and nothing emits it",
    ),
];

/// Each place in `text` (the page at `path`) that says a capability is
/// missing or comes later, as (line, problem), unless a [`TRUE_CLAIMS`]
/// entry for the page covers it (marked in `used`).
fn check_missing_claims(path: &str, text: &str, used: &mut [bool]) -> Vec<(usize, String)> {
    // The text in lowercase with each run of whitespace one space, and
    // the line each of its bytes came from.
    let mut flat = String::with_capacity(text.len());
    let mut lines: Vec<usize> = Vec::with_capacity(text.len());
    let mut line = 1;
    let mut space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            if !space && !flat.is_empty() {
                flat.push(' ');
                lines.push(line);
            }
            space = true;
        } else {
            space = false;
            for lower in c.to_lowercase() {
                let before = flat.len();
                flat.push(lower);
                lines.resize(lines.len() + flat.len() - before, line);
            }
        }
        if c == '\n' {
            line += 1;
        }
    }

    let mut hits: Vec<(usize, usize, String)> = Vec::new();
    for phrase in MISSING_PHRASES {
        for (at, _) in flat.match_indices(phrase) {
            hits.push((at, phrase.len(), format!("says {phrase:?}")));
        }
    }
    for (at, _) in flat.match_indices("yet") {
        // `-` and `_` join words: `#not-yet-shared` is an anchor.
        let word = |c: char| c.is_alphanumeric() || c == '-' || c == '_';
        let before = flat[..at].chars().next_back();
        let after = flat[at + 3..].chars().next();
        if !before.is_some_and(word) && !after.is_some_and(word) {
            hits.push((at, 3, "says \"yet\"".to_owned()));
        }
    }
    hits.sort();

    let mut problems = Vec::new();
    for (at, len, what) in hits {
        let mut covered = false;
        for (i, (page, excerpt, _)) in TRUE_CLAIMS.iter().enumerate() {
            if *page != path {
                continue;
            }
            if flat
                .match_indices(excerpt)
                .any(|(start, _)| start <= at && at + len <= start + excerpt.len())
            {
                used[i] = true;
                covered = true;
            }
        }
        if !covered {
            problems.push((
                lines.get(at).copied().unwrap_or(line),
                format!(
                    "{what}: a shipped capability must not be called missing or later; delete the sentence, or if it is true add it to TRUE_CLAIMS in xtask/src/tidy.rs with the reason"
                ),
            ));
        }
    }
    problems
}

/// Every `.md` file under `dir`, sorted.
fn markdown_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        if !dir.is_dir() {
            continue;
        }
        let entries =
            std::fs::read_dir(&dir).with_context(|| format!("failed to list {}", dir.display()))?;
        for entry in entries {
            let path = entry
                .with_context(|| format!("failed to list {}", dir.display()))?
                .path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

// ---------------------------------------------------------------------------
// files

pub(crate) fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("failed to read {}", path.display()))
}

/// `path` relative to `root`, with `/` separators, for messages.
pub(crate) fn relative(root: &Path, path: &Path) -> String {
    let relative = path.strip_prefix(root).unwrap_or(path);
    relative
        .components()
        .map(|component| component.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// Every `.rs` file under `dir`, sorted, skipping `target/` and hidden
/// directories. A missing `dir` has no files.
pub(crate) fn rust_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        if !dir.is_dir() {
            continue;
        }
        let entries =
            std::fs::read_dir(&dir).with_context(|| format!("failed to list {}", dir.display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("failed to list {}", dir.display()))?;
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let file_type = entry
                .file_type()
                .with_context(|| format!("failed to stat {}", path.display()))?;
            if file_type.is_dir() {
                if name != "target" && name != "node_modules" && !name.starts_with('.') {
                    pending.push(path);
                }
            } else if name.ends_with(".rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The crate manifests tidy checks, each with whether it is a library crate
/// (under `crates/`).
fn manifests(root: &Path) -> anyhow::Result<Vec<(PathBuf, bool)>> {
    let mut manifests = Vec::new();
    for (dir, is_library) in [("crates", true), ("bins", false)] {
        let dir = root.join(dir);
        if !dir.is_dir() {
            continue;
        }
        let entries =
            std::fs::read_dir(&dir).with_context(|| format!("failed to list {}", dir.display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("failed to list {}", dir.display()))?;
            let manifest = entry.path().join("Cargo.toml");
            if manifest.is_file() {
                manifests.push((manifest, is_library));
            }
        }
    }
    manifests.push((root.join("xtask").join("Cargo.toml"), false));
    manifests.sort();
    Ok(manifests)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole workspace passes tidy.
    #[test]
    fn tidy() -> anyhow::Result<()> {
        let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        let root = manifest_dir
            .parent()
            .context("xtask has no parent directory")?;
        let problems = run(root)?;
        assert!(
            problems.is_empty(),
            "cargo xtask tidy found {} problem(s):\n{}",
            problems.len(),
            problems.join("\n")
        );
        Ok(())
    }

    fn commands(list: &[&str]) -> Vec<String> {
        list.iter().map(|c| (*c).to_owned()).collect()
    }

    #[test]
    fn commands_file_is_parsed() {
        assert_eq!(
            parse_commands("# header\n\nvalidate\ndb  migrate\n"),
            ["validate", "db migrate"]
        );
    }

    #[test]
    fn cli_reference_names_every_command() {
        let cli = "\
# Command line

| command | does |
|---|---|
| [`agentkit validate`](#agentkit-validate) | check |
| [`agentkit login`, `logout`](#agentkit-login-logout) | keys |
| [`agentkit db migrate`, `status`](#agentkit-db-migrate-status) | schema |
| [`agentkit gitlab`](#agentkit-gitlab) | hooks |

## agentkit validate

## agentkit login, logout

## agentkit db migrate, status

## agentkit gitlab

```text
agentkit gitlab    events [--dir PATH]
```
";
        let all = commands(&[
            "validate",
            "login",
            "logout",
            "db",
            "db migrate",
            "db status",
            "gitlab",
            "gitlab events",
        ]);
        assert_eq!(check_cli_reference(cli, &all), Vec::<String>::new());
        let more = commands(&["eval", "gitlab replay"]);
        assert_eq!(
            check_cli_reference(cli, &more),
            [
                "`agentkit eval` has no section: add a `## agentkit eval` heading (or show `agentkit eval` in its parent's section)",
                "`agentkit eval` is missing from the table of commands at the top",
                "`agentkit gitlab replay` has no section: add a `## agentkit gitlab replay` heading (or show `agentkit gitlab replay` in its parent's section)",
            ]
        );
        // A section alone is not enough: the table must name it too.
        let untabled = cli.replace(
            "| [`agentkit validate`](#agentkit-validate) | check |\n",
            "",
        );
        assert_eq!(
            check_cli_reference(&untabled, &commands(&["validate"])),
            ["`agentkit validate` is missing from the table of commands at the top"]
        );
    }

    #[test]
    fn readme_status_names_every_command() {
        let readme = "\
# x

## Status

| capability | state |
| --- | --- |
| `validate`, `agentkit eval` (cases), `agentkit db migrate/status` | done |

## Use it

agentkit migrate
";
        let all = commands(&[
            "validate",
            "eval",
            "db",
            "db migrate",
            "migrate",
            "evaluate",
        ]);
        let guides = ["docs/guides/serving.md".to_owned()];
        assert_eq!(
            check_readme_status(readme, &all, &guides),
            [
                "the status table does not name `agentkit migrate`: add its capability",
                "the status table does not name `agentkit evaluate`: add its capability",
                "the status table does not name `docs/guides/serving.md`: add its capability with \"see `docs/guides/serving.md`\"",
            ]
        );
        let with_guide = readme.replace("| done |", "| done; see `docs/guides/serving.md` |");
        assert_eq!(check_readme_status(&with_guide, &all, &guides).len(), 2);
        assert_eq!(
            check_readme_status("# x\n", &all, &guides),
            ["has no `## Status` section with the table of capabilities"]
        );
    }

    #[test]
    fn missing_or_later_claims_are_found() {
        let page = "\
# Evals

Evals and A/B experiments arrive in a later
release. Per-variant metrics are not served yet.

No bridge route for subprocess tools yet. See [Not yet](#not-yet-shared).
Yesterday, eyetracking and `yet_another` are fine; so is \"as of yet\" in
no page.
";
        let mut used = vec![false; TRUE_CLAIMS.len()];
        let found: Vec<(usize, String)> = check_missing_claims("docs/x.md", page, &mut used)
            .into_iter()
            .map(|(line, problem)| (line, problem.split(':').next().unwrap_or("").to_owned()))
            .collect();
        assert_eq!(
            found,
            [
                (3, "says \"arrive in a later\"".to_owned()),
                (3, "says \"later release\"".to_owned()),
                (4, "says \"not served yet\"".to_owned()),
                (4, "says \"yet\"".to_owned()),
                (6, "says \"yet\"".to_owned()),
                (6, "says \"yet\"".to_owned()),
                (7, "says \"yet\"".to_owned()),
            ]
        );
        assert!(used.iter().all(|u| !u));
    }

    #[test]
    fn true_claims_are_allowed_on_their_page_only() -> anyhow::Result<()> {
        let page = "A connection is `idle` (not opened yet) at first.\n";
        let index = TRUE_CLAIMS
            .iter()
            .position(|(path, _, _)| *path == "docs/reference/mcp-connections.md")
            .context("an entry for mcp-connections.md")?;
        let mut used = vec![false; TRUE_CLAIMS.len()];
        assert!(
            check_missing_claims("docs/reference/mcp-connections.md", page, &mut used).is_empty()
        );
        assert!(used[index]);
        let mut used = vec![false; TRUE_CLAIMS.len()];
        assert_eq!(
            check_missing_claims("docs/other.md", page, &mut used).len(),
            1
        );
        Ok(())
    }

    #[test]
    fn module_header() {
        assert_eq!(
            check_module_header("//! Why this exists.\nfn f() {}\n"),
            None
        );
        assert!(check_module_header("\n//! Too late.\n").is_some());
        assert!(check_module_header("// Not a doc comment.\n").is_some());
        assert!(check_module_header("/// Item doc, not module doc.\n").is_some());
        assert!(check_module_header("#![allow(dead_code)]\n//! After an attribute.\n").is_some());
        assert!(check_module_header("").is_some());
    }

    const GOOD_MANIFEST: &str = r#"
[package]
name = "agentkit-example"
version.workspace = true

[lints]
workspace = true

[dependencies]
agentkit-protocol.workspace = true
serde = { workspace = true, features = ["rc"] }

[dev-dependencies]
anyhow.workspace = true
"#;

    #[test]
    fn manifest_accepts_workspace_dependencies() {
        assert_eq!(check_manifest(GOOD_MANIFEST, true), Vec::<String>::new());
    }

    #[test]
    fn manifest_rejects_own_versions() {
        let text = r#"
[lints]
workspace = true

[dependencies]
serde = "1"
regex = { version = "1", features = ["std"] }
local = { path = "../local" }
off = { workspace = false }

[dev-dependencies]
tempfile = "3"

[build-dependencies]
cc = "1"

[target.'cfg(unix)'.dependencies]
libc = "0.2"
"#;
        let problems = check_manifest(text, false);
        let names = ["serde", "regex", "local", "off", "tempfile", "cc", "libc"];
        assert_eq!(problems.len(), names.len(), "{problems:#?}");
        for name in names {
            let message = format!("`{name}` must use `workspace = true`");
            assert!(
                problems.iter().any(|p| p.contains(&message)),
                "no `{message}` in {problems:#?}"
            );
        }
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with("[target.cfg(unix).dependencies] `libc`")),
            "{problems:#?}"
        );
    }

    #[test]
    fn manifest_requires_workspace_lints() {
        let missing = "[dependencies]\nserde.workspace = true\n";
        assert_eq!(
            check_manifest(missing, true),
            ["missing `[lints] workspace = true`"]
        );
        let own = "[lints.clippy]\nunwrap_used = \"deny\"\n";
        assert_eq!(
            check_manifest(own, true),
            ["missing `[lints] workspace = true`"]
        );
    }

    #[test]
    fn manifest_keeps_anyhow_out_of_libraries() {
        let text = "[lints]\nworkspace = true\n[dependencies]\nanyhow.workspace = true\n";
        let problems = check_manifest(text, true);
        assert_eq!(problems.len(), 1, "{problems:#?}");
        assert!(
            problems[0].contains("must not depend on `anyhow`"),
            "{}",
            problems[0]
        );

        let renamed = "[lints]\nworkspace = true\n[dependencies]\nerr = { workspace = true, package = \"anyhow\" }\n";
        assert_eq!(check_manifest(renamed, true).len(), 1);

        // Binaries and xtask may use it; libraries may in their tests.
        assert_eq!(check_manifest(text, false), Vec::<String>::new());
        assert_eq!(check_manifest(GOOD_MANIFEST, true), Vec::<String>::new());
    }

    #[test]
    fn manifest_reports_invalid_toml() {
        let problems = check_manifest("[dependencies\n", true);
        assert_eq!(problems.len(), 1);
        assert!(problems[0].starts_with("invalid TOML"), "{}", problems[0]);
    }

    fn metadata(packages: serde_json::Value) -> anyhow::Result<Metadata> {
        Ok(serde_json::from_value(
            serde_json::json!({ "packages": packages }),
        )?)
    }

    fn package(name: &str, deps: &[(&str, Option<&str>)]) -> serde_json::Value {
        let dependencies: Vec<serde_json::Value> = deps
            .iter()
            .map(|(dep, kind)| serde_json::json!({ "name": dep, "kind": kind, "req": "*" }))
            .collect();
        serde_json::json!({
            "name": name,
            "manifest_path": format!("/ws/crates/{name}/Cargo.toml"),
            "dependencies": dependencies,
        })
    }

    /// The real workspace's packages with the allowed edges, plus `extra`.
    fn workspace_with(extra: Vec<serde_json::Value>) -> anyhow::Result<Metadata> {
        let mut packages: Vec<serde_json::Value> = ALLOWED_DEPENDENCIES
            .iter()
            .filter(|(name, _)| !extra.iter().any(|p| p["name"] == *name))
            .map(|(name, allowed)| {
                let deps: Vec<(&str, Option<&str>)> =
                    allowed.iter().map(|dep| (*dep, None)).collect();
                package(name, &deps)
            })
            .collect();
        packages.extend(extra);
        metadata(serde_json::Value::Array(packages))
    }

    #[test]
    fn directions_accept_the_table() -> anyhow::Result<()> {
        let metadata = workspace_with(vec![
            package(
                "agentkit-cli",
                &[
                    ("agentkit", None),
                    ("serde", None),
                    (TEST_SUPPORT, Some("dev")),
                    ("agentkit", Some("dev")),
                ],
            ),
            package("agentkit-protocol", &[(TEST_SUPPORT, Some("dev"))]),
        ])?;
        assert_eq!(
            check_dependency_directions(Path::new("/ws"), &metadata),
            Vec::<String>::new()
        );
        Ok(())
    }

    #[test]
    fn directions_reject_other_edges() -> anyhow::Result<()> {
        let metadata = workspace_with(vec![
            package(
                "agentkit-manifest",
                &[("agentkit-protocol", None), ("agentkit-events", None)],
            ),
            package(
                "agentkit-cli",
                &[("agentkit", None), ("agentkit-protocol", Some("dev"))],
            ),
            package(
                "agentkit-serve",
                &[("agentkit", None), ("agentkit-runtime", Some("build"))],
            ),
            package(
                "agentkit",
                &[("agentkit-runtime", None), (TEST_SUPPORT, None)],
            ),
            package("xtask", &[(TEST_SUPPORT, Some("dev"))]),
        ])?;
        let problems = check_dependency_directions(Path::new("/ws"), &metadata);
        let expected = [
            "crates/agentkit-manifest/Cargo.toml: `agentkit-manifest` must not depend on `agentkit-events` (normal dependency)",
            "crates/agentkit-cli/Cargo.toml: `agentkit-cli` must not depend on `agentkit-protocol` (dev dependency)",
            "crates/agentkit-serve/Cargo.toml: `agentkit-serve` must not depend on `agentkit-runtime` (build dependency)",
            "crates/agentkit/Cargo.toml: `agentkit` must not depend on `agentkit-test-support` (normal dependency)",
            "crates/xtask/Cargo.toml: `xtask` must not depend on `agentkit-test-support` (dev dependency)",
        ];
        for prefix in expected {
            assert!(
                problems.iter().any(|problem| problem.starts_with(prefix)),
                "expected `{prefix}` in {problems:#?}"
            );
        }
        // agentkit -> test-support -> agentkit closes a cycle.
        assert!(
            problems.iter().any(|problem| problem
                .contains("dependency cycle: agentkit -> agentkit-test-support -> agentkit")),
            "{problems:#?}"
        );
        assert_eq!(problems.len(), expected.len() + 1, "{problems:#?}");
        Ok(())
    }

    #[test]
    fn directions_reject_unknown_packages() -> anyhow::Result<()> {
        let metadata = workspace_with(vec![package(
            "agentkit-new",
            &[("agentkit-protocol", None)],
        )])?;
        let problems = check_dependency_directions(Path::new("/ws"), &metadata);
        assert_eq!(problems.len(), 1, "{problems:#?}");
        assert!(
            problems[0].contains("`agentkit-new` is not in the dependency table"),
            "{}",
            problems[0]
        );
        Ok(())
    }

    #[test]
    fn directions_report_stale_table_entries() -> anyhow::Result<()> {
        let metadata = metadata(serde_json::json!([package("agentkit-protocol", &[])]))?;
        let problems = check_dependency_directions(Path::new("/ws"), &metadata);
        assert_eq!(
            problems.len(),
            ALLOWED_DEPENDENCIES.len() - 1,
            "{problems:#?}"
        );
        Ok(())
    }

    #[test]
    fn cycles_are_found() {
        let mut graph = BTreeMap::new();
        graph.insert("a", vec!["b"]);
        graph.insert("b", vec!["c"]);
        graph.insert("c", vec!["a"]);
        assert_eq!(find_cycle(&graph), Some(vec!["a", "b", "c", "a"]));
        graph.insert("c", vec![]);
        assert_eq!(find_cycle(&graph), None);
    }

    /// The table itself is layered: each library crate only uses crates
    /// listed before it, the facade uses everything below it, and the test
    /// support crate uses the facade and everything below.
    #[test]
    fn dependency_table_is_layered() {
        for (index, name) in BELOW_FACADE.iter().enumerate() {
            let allowed = allowed_dependencies(name).unwrap_or_default();
            for dep in allowed {
                assert!(
                    BELOW_FACADE[..index].contains(dep),
                    "`{name}` may use `{dep}`, which is not below it"
                );
            }
        }
        assert_eq!(allowed_dependencies("agentkit"), Some(BELOW_FACADE));
        let mut expected = vec!["agentkit"];
        expected.extend(BELOW_FACADE);
        assert_eq!(allowed_dependencies(TEST_SUPPORT), Some(&expected[..]));
        let graph: BTreeMap<&str, Vec<&str>> = ALLOWED_DEPENDENCIES
            .iter()
            .map(|(name, allowed)| (*name, allowed.to_vec()))
            .collect();
        assert_eq!(find_cycle(&graph), None);
    }

    #[test]
    fn architecture_names_every_package() {
        let text = "## Code map\n\n### `agentkit-protocol`\n\nThe agentkit-manifest crate.\n";
        let problems = check_architecture(text, &["agentkit-protocol", "agentkit-manifest"]);
        assert_eq!(
            problems,
            ["does not name workspace package `agentkit-manifest` (add it to the code map)"]
        );
    }

    #[test]
    fn architecture_paths_exist() {
        let paths: BTreeSet<String> = [
            "crates",
            "crates/agentkit",
            "crates/agentkit/src",
            "crates/agentkit/src/serve",
            "crates/agentkit/src/serve/bridge.rs",
            "crates/agentkit/src/serve/api.rs",
            "crates/agentkit-runtime/src/kv.rs",
            "crates/agentkit-harness/src/tools.rs",
            "docs",
            "docs/reference/cli.md",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        let good = "\
The bridge (`crates/agentkit/src/serve/bridge.rs`) and `serve/api.rs`;
`harness/src/tools.rs::run_server_tool`, `agentkit-runtime/src/kv.rs`,
`runtime/src/kv.rs`, `bridge.rs`, `docs/` and `docs/reference/cli.md`.
Not paths: `<stateRoot>/<slug>/agentkit.sqlite`, `/v1/info`,
`channels/http.toml`, `agentkit::info::info_json`, `a
multi-line span.rs`.

```text
crates/agentkit/src/gone.rs is in a fence, `fenced/gone.rs` too
```
";
        let source = |path: &str| {
            (path == "crates/agentkit-harness/src/tools.rs").then(|| {
                "pub(crate) async fn run_server_tool<'a>(x: u8) {}\nfn spec() {}".to_owned()
            })
        };
        assert_eq!(
            check_architecture_paths(good, &paths, &source),
            Vec::<String>::new()
        );

        let bad = "See `crates/agentkit/src/serve/router.rs`, `serve/router.rs` \
                   twice (`serve/router.rs`), `harness/src/tool.rs::run` and `docs/guides/`; \
                   `tools.rs::run_server` and `harness/src/tools.rs::Tool::gone` name no function, \
                   `tools.rs::spec` does.";
        assert_eq!(
            check_architecture_paths(bad, &paths, &source),
            [
                "names `crates/agentkit/src/serve/router.rs`, which is not a file or folder of the workspace (fix the path or drop the backticks)",
                "names `serve/router.rs`, which is not a file or folder of the workspace (fix the path or drop the backticks)",
                "names `harness/src/tool.rs`, which is not a file or folder of the workspace (fix the path or drop the backticks)",
                "names `docs/guides/`, which is not a file or folder of the workspace (fix the path or drop the backticks)",
                "names `tools.rs::run_server`, but `crates/agentkit-harness/src/tools.rs` defines no `fn run_server` (fix the reference)",
                "names `harness/src/tools.rs::Tool::gone`, but `crates/agentkit-harness/src/tools.rs` defines no `fn gone` (fix the reference)",
            ]
        );
    }

    #[test]
    fn libraries_do_not_print() {
        let text = r#"//! A library.
/// ```
/// println!("doc examples may print");
/// ```
pub fn a() {
    println!("flagged");
    eprintln!("flagged once");
    std::print!("flagged");
    my_println!("not a print macro");
    tracing::info!("fine");
}

#[cfg(test)]
mod tests {
    fn f() { println!("tests may print"); }
}
"#;
        let problems = check_no_print(text);
        let lines: Vec<usize> = problems.iter().map(|(line, _)| *line).collect();
        assert_eq!(lines, [6, 7, 8], "{problems:#?}");
        assert!(
            problems[1].1.starts_with("`eprintln!`"),
            "{}",
            problems[1].1
        );
    }

    #[test]
    fn print_exemptions() {
        let root = Path::new("/ws");
        assert!(print_check_exempt(
            root,
            Path::new("/ws/crates/a/tests/suite/x.rs")
        ));
        assert!(print_check_exempt(
            root,
            Path::new("/ws/crates/a/benches/discover.rs")
        ));
        assert!(print_check_exempt(root, Path::new("/ws/crates/a/build.rs")));
        assert!(!print_check_exempt(
            root,
            Path::new("/ws/crates/a/src/lib.rs")
        ));
    }
}
