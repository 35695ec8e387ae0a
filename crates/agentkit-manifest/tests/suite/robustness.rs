//! Discovery never panics and never fails on malformed input: whatever a
//! definition file holds, the answer is `Ok` with diagnostics.

use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use agentkit_manifest::{Code, Discovery};

use super::*;

/// A xorshift64 generator: deterministic, so a failure names its seed.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// One of each kind of definition file, relative to the project folder.
const DEFINITION_FILES: &[&str] = &[
    "agent/agent.toml",
    "agent/instructions.md",
    "agent/tools/get_weather.toml",
    "agent/skills/forecast.md",
    "agent/skills/climate-research/SKILL.md",
    "agent/subagents/researcher/agent.toml",
    "agent/schedules/morning-report.md",
    "agent/schedules/refresh.toml",
    "agent/channels/alerts.toml",
    "agent/hooks/audit.toml",
    "agent/ab.toml",
    "evals/evals.toml",
    "evals/weather/nyc.eval.toml",
    "evals/smoke.eval.toml",
];

/// Characters that make the parsers take their interesting paths.
const SYNTAX: &[u8] = b"[]{}=\"'\n\n:,.-#*${}%|<>\\ \tabcxyz019_---\r\x00\xc3\xa9";

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// Discovers `dir`, turning a panic into a failure that says how to
/// reproduce it.
fn discover_no_panic(dir: &Path, what: &str) -> Discovery {
    match catch_unwind(AssertUnwindSafe(|| discover(dir))) {
        Ok(Ok(d)) => d,
        Ok(Err(e)) => panic!("{what}: discovery failed: {e}"),
        Err(_) => panic!("{what}: discovery panicked"),
    }
}

/// Mangles one text: random bytes, random syntax characters, or the
/// original with bytes flipped, inserted, deleted or duplicated.
fn mangle(rng: &mut XorShift, original: &[u8]) -> Vec<u8> {
    match rng.below(4) {
        0 => {
            let len = rng.below(512);
            rng.bytes(len)
        }
        1 => (0..rng.below(512))
            .map(|_| SYNTAX[rng.below(SYNTAX.len())])
            .collect(),
        2 => {
            let mut v = original.to_vec();
            for _ in 0..=rng.below(8) {
                if v.is_empty() {
                    break;
                }
                let i = rng.below(v.len());
                match rng.below(4) {
                    0 => v[i] = rng.next() as u8,
                    1 => v.insert(i, SYNTAX[rng.below(SYNTAX.len())]),
                    2 => {
                        v.remove(i);
                    }
                    _ => {
                        let end = (i + rng.below(64)).min(v.len());
                        let dup = v[i..end].to_vec();
                        v.splice(i..i, dup);
                    }
                }
            }
            v
        }
        _ => {
            // Truncated at a random point: unterminated strings and tables.
            let cut = rng.below(original.len() + 1);
            original[..cut].to_vec()
        }
    }
}

#[test]
fn mangled_definition_files_never_panic() {
    let t = tempfile::tempdir().unwrap();
    let project = t.path().join("weather");
    copy_dir(&fixtures().join("agents/weather-agent"), &project);
    let originals: Vec<Vec<u8>> = DEFINITION_FILES
        .iter()
        .map(|f| fs::read(project.join(f)).unwrap())
        .collect();
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let mut reported = 0;
    for iteration in 0..300 {
        let seed = rng.0;
        // Mangle a few files at a time, so cross-file checks see broken
        // neighbours too.
        let mut mangled = Vec::new();
        for _ in 0..=rng.below(3) {
            let i = rng.below(DEFINITION_FILES.len());
            fs::write(
                project.join(DEFINITION_FILES[i]),
                mangle(&mut rng, &originals[i]),
            )
            .unwrap();
            mangled.push(i);
        }
        let what = format!("iteration {iteration} (xorshift state {seed:#x})");
        let d = discover_no_panic(&project, &what);
        assert_eq!(d.host.agents.len(), 1, "{what}");
        if !d.diagnostics.is_empty() {
            reported += 1;
        }
        for i in mangled {
            fs::write(project.join(DEFINITION_FILES[i]), &originals[i]).unwrap();
        }
    }
    // Most mangled files are reported; a mutation inside a comment or a
    // prompt is a valid file.
    assert!(
        reported > 200,
        "only {reported} of 300 runs had diagnostics"
    );
    // Restored, the project is clean again.
    assert_eq!(render(&discover_ok(&project)), "");
}

#[test]
fn binary_garbage_in_every_definition_file_is_reported_per_file() {
    let t = tempfile::tempdir().unwrap();
    let project = t.path().join("weather");
    copy_dir(&fixtures().join("agents/weather-agent"), &project);
    let mut rng = XorShift(42);
    for f in DEFINITION_FILES {
        let mut garbage = rng.bytes(256);
        garbage[7] = 0xff; // never valid UTF-8
        fs::write(project.join(f), garbage).unwrap();
    }
    let d = discover_no_panic(&project, "binary garbage");
    for f in DEFINITION_FILES {
        assert!(
            d.diagnostics
                .iter()
                .any(|d| d.path == *f && d.code == Code::NotUtf8 && d.line == Some(1)),
            "{f}: {}",
            render(&d)
        );
    }
}

fn minimal_project(t: &tempfile::TempDir) -> std::path::PathBuf {
    let project = t.path().join("deep");
    fs::create_dir_all(project.join("agent")).unwrap();
    fs::write(project.join("agent/instructions.md"), "Hi.").unwrap();
    project
}

#[test]
fn deeply_nested_values_are_errors_not_stack_overflows() {
    let t = tempfile::tempdir().unwrap();
    let project = minimal_project(&t);
    let n = 10_000;
    let arrays = format!("a = {}1{}\n", "[".repeat(n), "]".repeat(n));
    let tables = format!("a = {}1{}\n", "{ a = ".repeat(n), " }".repeat(n));
    let headers: String = (1..200)
        .map(|i| {
            let path: Vec<String> = (0..i).map(|j| format!("t{j}")).collect();
            format!("[{}]\n", path.join("."))
        })
        .collect();
    let agent = project.join("agent");
    write(&agent.join("agent.toml"), &arrays);
    write(&agent.join("tools/arrays.toml"), &arrays);
    write(&agent.join("tools/tables.toml"), &tables);
    write(
        &agent.join("tools/schema.toml"),
        format!(
            "description = \"x\"\ncommand = [\"true\"]\n[input_schema]\ntype = \"object\"\n{arrays}"
        ),
    );
    write(&agent.join("channels/headers.toml"), &headers);
    write(&agent.join("schedules/deep.toml"), &tables);
    write(
        &agent.join("tools/json_schema.toml"),
        "description = \"x\"\ncommand = [\"true\"]\ninput_schema_file = \"deep.json\"\n",
    );
    write(
        &agent.join("tools/deep.json"),
        format!(
            "{{\"type\": \"object\", \"x\": {}1{}}}",
            "[".repeat(n),
            "]".repeat(n)
        ),
    );
    // YAML frontmatter, in a typed field and in an ignored one.
    write(
        &agent.join("skills/typed.md"),
        format!(
            "---\ndescription: {}1{}\n---\nBody.\n",
            "[".repeat(n),
            "]".repeat(n)
        ),
    );
    write(
        &agent.join("skills/ignored.md"),
        format!(
            "---\ndescription: x\nother: {}1{}\n---\nBody.\n",
            "{a: ".repeat(n),
            "}".repeat(n)
        ),
    );
    write(
        &agent.join("schedules/yaml.md"),
        format!(
            "---\ncron: {}1{}\n---\nBody.\n",
            "[".repeat(n),
            "]".repeat(n)
        ),
    );
    let d = discover_no_panic(&project, "deep nesting");
    let codes: Vec<(&str, Code)> = d
        .diagnostics
        .iter()
        .map(|d| (d.path.as_str(), d.code))
        .collect();
    assert_eq!(
        codes,
        [
            ("agent/agent.toml", Code::TomlInvalid),
            ("agent/channels/headers.toml", Code::TomlInvalid),
            ("agent/schedules/deep.toml", Code::TomlInvalid),
            ("agent/schedules/yaml.md", Code::FrontmatterInvalid),
            ("agent/skills/typed.md", Code::FrontmatterInvalid),
            ("agent/tools/arrays.toml", Code::TomlInvalid),
            ("agent/tools/deep.json", Code::InvalidSchema),
            ("agent/tools/schema.toml", Code::TomlInvalid),
            ("agent/tools/tables.toml", Code::TomlInvalid),
        ],
        "{}",
        render(&d)
    );
    let agent = &d.host.agents[0].agent;
    assert!(agent.tools.is_empty() && agent.schedules.is_empty() && agent.skills.len() == 1);
}

#[test]
fn large_files_are_refused_unless_they_are_workspace_data() {
    let t = tempfile::tempdir().unwrap();
    let project = minimal_project(&t);
    let agent = project.join("agent");
    let big = "x".repeat(5 * 1024 * 1024);
    write(&agent.join("instructions.md"), &big);
    write(&agent.join("tools/big.toml"), format!("# {big}"));
    // Seeded as-is, never read by discovery.
    write(&agent.join("sandbox/workspace/data/big.csv"), &big);
    let d = discover_no_panic(&project, "large files");
    let codes: Vec<(&str, Code)> = d
        .diagnostics
        .iter()
        .map(|d| (d.path.as_str(), d.code))
        .collect();
    assert_eq!(
        codes,
        [
            ("agent/instructions.md", Code::FileTooLarge),
            ("agent/tools/big.toml", Code::FileTooLarge),
        ]
    );
    assert_eq!(d.host.agents[0].agent.sandbox_files, ["data/big.csv"]);
}

#[cfg(unix)]
mod unix {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn non_utf8_names_are_skipped_everywhere() {
        let t = tempfile::tempdir().unwrap();
        let project = minimal_project(&t);
        let bad = OsStr::from_bytes(b"\xff\xfe");
        let agent = project.join("agent");
        write(&agent.join("tools").join(bad), "x");
        write(&agent.join("skills").join(bad).join("SKILL.md"), "x");
        write(&agent.join("sandbox/workspace").join(bad), "x");
        write(&agent.join("sandbox/workspace/ok.txt"), "x");
        write(&t.path().join(bad).join("agent/instructions.md"), "x");
        let d = discover_no_panic(t.path(), "non-UTF-8 names");
        let codes: Vec<(String, Code)> = d
            .diagnostics
            .iter()
            .map(|d| (d.path.clone(), d.code))
            .collect();
        assert_eq!(
            codes,
            [
                (
                    "deep/agent/sandbox/workspace/\u{fffd}\u{fffd}".to_owned(),
                    Code::NonUtf8Name
                ),
                (
                    "deep/agent/skills/\u{fffd}\u{fffd}".to_owned(),
                    Code::NonUtf8Name
                ),
                (
                    "deep/agent/tools/\u{fffd}\u{fffd}".to_owned(),
                    Code::NonUtf8Name
                ),
                ("\u{fffd}\u{fffd}".to_owned(), Code::NonUtf8Name),
            ]
        );
        assert_eq!(d.host.agents.len(), 1);
        assert_eq!(d.host.agents[0].agent.sandbox_files, ["ok.txt"]);
    }

    #[test]
    fn symlinks_never_loop_or_escape() {
        let t = tempfile::tempdir().unwrap();
        let project = minimal_project(&t);
        let agent = project.join("agent");
        let ws = agent.join("sandbox/workspace");
        fs::create_dir_all(ws.join("data")).unwrap();
        write(&ws.join("data/cities.csv"), "city\nNYC\n");
        // A loop of two links, a link to a folder (the workspace itself,
        // which would recurse forever if followed), and a link to a file.
        symlink("b", ws.join("a")).unwrap();
        symlink("a", ws.join("b")).unwrap();
        symlink(".", ws.join("self")).unwrap();
        symlink("data", ws.join("data-link")).unwrap();
        symlink("data/cities.csv", ws.join("cities.csv")).unwrap();
        // A link to the parent agent folder from a skill package.
        write(
            &agent.join("skills/pkg/SKILL.md"),
            "---\ndescription: x\n---\n",
        );
        symlink("../..", agent.join("skills/pkg/up")).unwrap();
        let d = discover_no_panic(&project, "symlinks");
        let codes: Vec<(&str, Code)> = d
            .diagnostics
            .iter()
            .map(|d| (d.path.as_str(), d.code))
            .collect();
        assert_eq!(
            codes,
            [
                ("agent/sandbox/workspace/a", Code::SymlinkSkipped),
                ("agent/sandbox/workspace/b", Code::SymlinkSkipped),
                ("agent/sandbox/workspace/data-link", Code::SymlinkSkipped),
                ("agent/sandbox/workspace/self", Code::SymlinkSkipped),
                ("agent/skills/pkg/up", Code::SymlinkSkipped),
            ]
        );
        assert_eq!(
            d.host.agents[0].agent.sandbox_files,
            ["cities.csv", "data/cities.csv"]
        );
    }

    #[test]
    fn nesting_is_bounded() {
        let t = tempfile::tempdir().unwrap();
        let project = minimal_project(&t);
        let ws = project.join("agent/sandbox/workspace");
        let mut deep = ws.clone();
        for i in 0..40 {
            deep = deep.join(format!("{i}"));
            write(&deep.join("f.txt"), "x");
        }
        let d = discover_no_panic(&project, "nesting");
        let codes: Vec<Code> = d.diagnostics.iter().map(|d| d.code).collect();
        assert_eq!(codes, [Code::TooDeep], "{}", render(&d));
        // Levels 1 to 31 are seeded; deeper ones are not.
        assert_eq!(d.host.agents[0].agent.sandbox_files.len(), 31);
    }

    /// A FIFO named like a definition file used to block discovery
    /// forever on `open`.
    #[test]
    fn fifos_and_sockets_are_not_read() {
        let t = tempfile::tempdir().unwrap();
        let project = minimal_project(&t);
        let tools = project.join("agent/tools");
        fs::create_dir_all(&tools).unwrap();
        let status = std::process::Command::new("mkfifo")
            .arg(tools.join("fifo.toml"))
            .status()
            .expect("mkfifo runs");
        assert!(status.success());
        drop(std::os::unix::net::UnixListener::bind(tools.join("socket.toml")).unwrap());
        let d = discover_no_panic(&project, "fifo");
        let codes: Vec<(&str, Code)> = d
            .diagnostics
            .iter()
            .map(|d| (d.path.as_str(), d.code))
            .collect();
        assert_eq!(
            codes,
            [
                ("agent/tools/fifo.toml", Code::Io),
                ("agent/tools/socket.toml", Code::Io),
            ]
        );
    }
}
