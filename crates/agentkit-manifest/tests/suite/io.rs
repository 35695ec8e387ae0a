//! Diagnostics about the file system itself (names, links, sizes,
//! encodings, nesting), made at test time in a temporary folder: these
//! cannot be committed to git portably.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::os::unix::net::UnixListener;

use expect_test::expect;

use super::*;

/// A folder of two projects: `my agent` (not a slug) and `io`, whose
/// files cannot be read as definitions.
pub(crate) fn io_fixture() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    write(&t.path().join("my agent/agent/instructions.md"), "Hi.");

    let agent = t.path().join("io/agent");
    write(&agent.join("instructions.md"), "You are a test agent.");
    // Binary garbage where TOML is expected.
    write(
        &agent.join("agent.toml"),
        b"model = \"test\"\n\xff\xfe\x00garbage",
    );
    // More than 4 MiB.
    write(
        &agent.join("skills/huge.md"),
        format!(
            "---\ndescription: huge\n---\n{}",
            "x".repeat(4 * 1024 * 1024)
        ),
    );
    // A name that is not UTF-8.
    write(
        &agent.join("tools").join(OsStr::from_bytes(b"caf\xe9.toml")),
        "description = \"x\"\ncommand = [\"true\"]\n",
    );
    // A loop, a dangling link and a link to a folder.
    symlink("b.toml", agent.join("tools/a.toml")).unwrap();
    symlink("a.toml", agent.join("tools/b.toml")).unwrap();
    symlink("missing.toml", agent.join("tools/dangling.toml")).unwrap();
    fs::create_dir_all(agent.join("sandbox/workspace/data")).unwrap();
    symlink("data", agent.join("sandbox/workspace/data-link")).unwrap();
    // A socket where a definition file is expected: not a regular file.
    drop(UnixListener::bind(agent.join("tools/socket.toml")).unwrap());
    // Nesting deeper than discovery follows.
    let mut deep = agent.join("sandbox/workspace/deep");
    for i in 0..40 {
        deep = deep.join(format!("d{i}"));
    }
    write(&deep.join("leaf.txt"), "leaf");
    t
}

#[test]
fn file_system_problems_are_diagnostics() {
    let t = io_fixture();
    let d = discover_ok(t.path());
    let slugs: Vec<&str> = d.host.agents.iter().map(|p| p.slug.as_str()).collect();
    assert_eq!(slugs, ["io"]);
    let io = &d.host.agents[0].agent;
    assert!(io.tools.is_empty());
    assert!(io.skills.is_empty());
    assert_eq!(io.sandbox_files, Vec::<String>::new());
    expect![[r#"
        io/agent/agent.toml:2:1: error[not-utf8]: file is not valid UTF-8 text
        io/agent/sandbox/workspace/data-link: warning[symlink-skipped]: symbolic link to a folder is not followed
        io/agent/sandbox/workspace/deep/d0/d1/d2/d3/d4/d5/d6/d7/d8/d9/d10/d11/d12/d13/d14/d15/d16/d17/d18/d19/d20/d21/d22/d23/d24/d25/d26/d27/d28/d29/d30: error[too-deep]: folder is nested more than 32 levels deep; its contents are skipped
        io/agent/skills/huge.md: error[file-too-large]: file is 4194330 bytes; definition files are read up to 4194304 bytes (hint: large data belongs under `sandbox/workspace/` or `lib/`, not in a definition file)
        io/agent/tools/a.toml: warning[symlink-skipped]: symbolic link cannot be followed: Too many levels of symbolic links (os error 40)
        io/agent/tools/b.toml: warning[symlink-skipped]: symbolic link cannot be followed: Too many levels of symbolic links (os error 40)
        io/agent/tools/caf�.toml: warning[non-utf8-name]: name `caf�.toml` is not valid UTF-8; skipped
        io/agent/tools/dangling.toml: warning[symlink-skipped]: symbolic link cannot be followed: No such file or directory (os error 2)
        io/agent/tools/socket.toml: error[io]: not a regular file (a FIFO, socket or device); it is not read
        my agent: error[invalid-slug]: folder name `my agent` cannot be a URL slug (hint: rename the folder to letters, digits, `-` and `_`, starting with a letter or digit)
    "#]].assert_eq(&render(&d));
}

#[test]
fn a_project_folder_named_with_a_space_is_not_a_slug() {
    let t = tempfile::tempdir().unwrap();
    let project = t.path().join("my agent");
    write(&project.join("agent/instructions.md"), "Hi.");
    let d = discover_ok(&project);
    assert!(d.host.agents.is_empty());
    expect![[r#"
        .: error[invalid-slug]: folder name `my agent` cannot be a URL slug (hint: rename the folder to letters, digits, `-` and `_`, starting with a letter or digit)
    "#]].assert_eq(&render(&d));
}
