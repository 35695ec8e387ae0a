//! Saying what the sandbox denied when a sandboxed child fails: the path,
//! and the one line of configuration that grants it.
//!
//! Landlock tells an unprivileged process nothing per denial (the audit
//! log of Linux 6.15 needs privileges to read), so this reads what the
//! child wrote: the messages programs print on `EACCES` (`cat: /x:
//! Permission denied`, Python's `PermissionError: [Errno 13] Permission
//! denied: '/x'`, Node's `EACCES: permission denied, open '/x'`, Ruby's
//! `Permission denied @ rb_sysopen - /x`, Python's `No module named
//! 'encodings'` with its `sys.base_prefix`), and keeps the paths the
//! ruleset does not cover (a denial inside a granted folder is the file's
//! own permissions, not the sandbox). When the child said only "permission
//! denied" without a path, the files `exec` had to open (the program and
//! its `#!` interpreters) are checked instead. A program that swallows the
//! error, or words it otherwise, gets no hint.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use regex::Regex;

use super::resolve::{self, Launch, Resolved};
use super::{DEV_FILES, ETC_HIDDEN, SandboxSpec};

/// A sentence for the error result when `output` (the child's stderr, or
/// its stdout when stderr was empty) shows a denial of a path the sandbox
/// did not grant; `None` otherwise.
pub(crate) fn explain(spec: &SandboxSpec, launch: &Launch<'_>, output: &str) -> Option<String> {
    let resolved = resolve::resolve(launch);
    let mut denied: Vec<PathBuf> = denied_paths(output)
        .into_iter()
        .map(|p| match launch.cwd {
            Some(cwd) if p.is_relative() => cwd.join(p),
            _ => p,
        })
        .collect();
    if denied.is_empty() && looks_denied(output) {
        denied.extend(resolved.chain.iter().cloned());
    }
    let path = denied.into_iter().find(|p| !readable(spec, &resolved, p))?;
    Some(hint(launch, &path))
}

/// The files `launch`'s program needs (itself, its `#!` interpreters)
/// and the `files` it is given that the sandbox of `spec` cannot read,
/// after the automatic grants.
pub(crate) fn gaps(spec: &SandboxSpec, launch: &Launch<'_>, files: &[PathBuf]) -> Vec<SandboxGap> {
    let resolved = resolve::resolve(launch);
    let mut out: Vec<SandboxGap> = Vec::new();
    for path in resolved.chain.iter().chain(files) {
        if readable(spec, &resolved, path) || out.iter().any(|g| &g.path == path) {
            continue;
        }
        let grant = (!resolve::is_protected(launch, path)).then(|| path.clone());
        out.push(SandboxGap {
            path: path.clone(),
            grant,
        });
    }
    out
}

/// A file a sandboxed tool needs and its sandbox cannot read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxGap {
    pub path: PathBuf,
    /// The path a `read` entry should name to grant it; `None` when it
    /// lies in a place the sandbox keeps out on purpose (the home folder,
    /// a secret, a project, the state root).
    pub grant: Option<PathBuf>,
}

/// How the hint reads: the denied path, and either the `read` line that
/// grants it (the path itself: a folder around it may be a place kept
/// out on purpose) or why it stays out.
pub(crate) fn hint(launch: &Launch<'_>, path: &Path) -> String {
    let shown = path.display();
    if resolve::is_protected(launch, path) {
        return format!(
            "the sandbox denied `{shown}`, which is kept out of every sandbox on purpose (the home folder, a secret, a project or the state root)"
        );
    }
    let line = format!(
        "read = [{}]",
        serde_json::Value::String(path.display().to_string())
    );
    format!(
        "the sandbox denied `{shown}`; to grant it, add `{line}` under `[harness.sandbox]` in agent/agent.toml (or in this tool's `sandbox` table)"
    )
}

/// Whether the ruleset of `spec` (with `resolved`'s grants) lets a child
/// read `path`.
pub(crate) fn readable(spec: &SandboxSpec, resolved: &Resolved, path: &Path) -> bool {
    let path = canonical(path);
    if resolve::is_system(&path) {
        return match path.strip_prefix("/etc") {
            Ok(rel) => !etc_hidden(&rel.to_string_lossy()),
            Err(_) => true,
        };
    }
    if DEV_FILES.iter().any(|(d, _)| path == Path::new(d)) {
        return true;
    }
    let private_tmp = path
        .strip_prefix(canonical(&std::env::temp_dir()))
        .ok()
        .and_then(|rel| rel.components().next())
        .is_some_and(|first| {
            first
                .as_os_str()
                .to_string_lossy()
                .starts_with("agentkit-sandbox-")
        });
    private_tmp
        || spec
            .read
            .iter()
            .chain(&spec.write)
            .any(|g| path.starts_with(canonical(g)))
        || resolved
            .grants_for(&spec.write)
            .any(|g| path.starts_with(g))
}

fn etc_hidden(rel: &str) -> bool {
    let mut prefix = String::new();
    for part in rel.split('/') {
        if !prefix.is_empty() {
            prefix.push('/');
        }
        prefix.push_str(part);
        if ETC_HIDDEN.iter().any(|h| super::matches(h, &prefix)) {
            return true;
        }
    }
    false
}

/// `path` with its symlinks resolved as far as it exists.
fn canonical(path: &Path) -> PathBuf {
    if let Ok(real) = path.canonicalize() {
        return real;
    }
    let mut rest = Vec::new();
    let mut at = path;
    while let Some(parent) = at.parent() {
        if let Some(name) = at.file_name() {
            rest.push(name.to_owned());
        }
        if let Ok(real) = parent.canonicalize() {
            let mut out = real;
            out.extend(rest.iter().rev());
            return out;
        }
        at = parent;
    }
    path.to_path_buf()
}

/// The child said permission was denied, with or without a path.
fn looks_denied(output: &str) -> bool {
    let lower = output.to_lowercase();
    ["permission denied", "eacces", "errno 13", "os error 13"]
        .iter()
        .any(|m| lower.contains(m))
        || output.contains("No module named 'encodings'")
}

/// The paths named in denial messages, in the order they appear.
fn denied_paths(output: &str) -> Vec<PathBuf> {
    static PATTERNS: OnceLock<Vec<Regex>> = OnceLock::new();
    let patterns = PATTERNS.get_or_init(|| {
        [
            // Python: PermissionError: [Errno 13] Permission denied: '/x'
            r"\[Errno 13\] Permission denied: '([^']+)'",
            // Node: EACCES: permission denied, open '/x'
            r"EACCES: permission denied, \w+ '([^']+)'",
            // Ruby: Permission denied @ rb_sysopen - /x (Errno::EACCES)
            r"Permission denied @ \w+ - (\S+)",
            // Shells and coreutils: `cat: /x: Permission denied`,
            // `ls: cannot open directory '/x': Permission denied`.
            r"(?:^|: )(?:[a-z ]+ )?'([^']+)': Permission denied",
            r"(?:^|: )([^\s:']+): Permission denied",
        ]
        .iter()
        .filter_map(|p| Regex::new(&format!("(?m){p}")).ok())
        .collect()
    });
    let mut found: Vec<(usize, PathBuf)> = Vec::new();
    for re in patterns {
        for c in re.captures_iter(output) {
            if let Some(m) = c.get(1) {
                found.push((m.start(), PathBuf::from(m.as_str())));
            }
        }
    }
    if output.contains("No module named 'encodings'") {
        // Python could not read its standard library: the install is
        // its base prefix.
        for key in ["sys.base_prefix = '", "stdlib dir = '"] {
            if let Some(at) = output.find(key) {
                let rest = &output[at + key.len()..];
                if let Some(end) = rest.find('\'') {
                    found.push((at, PathBuf::from(&rest[..end])));
                    break;
                }
            }
        }
    }
    found.sort_by_key(|(at, _)| *at);
    let mut out: Vec<PathBuf> = Vec::new();
    for (_, p) in found {
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn denial_messages_name_their_paths() {
        let cases = [
            ("cat: /opt/data/x.txt: Permission denied", "/opt/data/x.txt"),
            (
                "sh: 1: /srv/venv/bin/python: Permission denied",
                "/srv/venv/bin/python",
            ),
            (
                "ls: cannot open directory '/root': Permission denied",
                "/root",
            ),
            ("cat: '/a b/c': Permission denied", "/a b/c"),
            (
                "Traceback (most recent call last):\n  File \"t.py\", line 1\nPermissionError: [Errno 13] Permission denied: '/home/u/.aws/credentials'",
                "/home/u/.aws/credentials",
            ),
            (
                "Error: EACCES: permission denied, open '/home/u/.nvm/x.js'\n    at Object.openSync",
                "/home/u/.nvm/x.js",
            ),
            (
                "t.rb:1:in `read': Permission denied @ rb_sysopen - /opt/r/secret (Errno::EACCES)",
                "/opt/r/secret",
            ),
            (
                "python3: can't open file 'data.py': [Errno 13] Permission denied: 'data.py'",
                "data.py",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(denied_paths(text), [PathBuf::from(want)], "{text}");
        }
        assert!(denied_paths("exited: no such file").is_empty());
    }

    #[test]
    fn a_python_without_its_standard_library_names_its_prefix() {
        let text = "Python path configuration:\n  PYTHONHOME = (not set)\n  program name = '/tmp/v/bin/python'\n  stdlib dir = '/root/.pyenv/versions/3.11.7/lib/python3.11'\n  sys.base_prefix = '/root/.pyenv/versions/3.11.7'\nFatal Python error: init_fs_encoding: failed to get the Python codec of the filesystem encoding\nModuleNotFoundError: No module named 'encodings'\n";
        assert_eq!(
            denied_paths(text),
            [PathBuf::from("/root/.pyenv/versions/3.11.7")]
        );
        assert!(looks_denied(text));
    }

    #[test]
    fn etc_secrets_are_not_readable_and_the_rest_of_etc_is() {
        let spec = SandboxSpec::new();
        let none = Resolved::default();
        assert!(readable(&spec, &none, Path::new("/etc/hostname")));
        assert!(readable(&spec, &none, Path::new("/usr/lib/python3")));
        assert!(!readable(&spec, &none, Path::new("/etc/shadow")));
        assert!(!readable(
            &spec,
            &none,
            Path::new("/etc/ssl/private/key.pem")
        ));
        assert!(!readable(&spec, &none, Path::new("/opt/thing")));
        let spec = SandboxSpec::new().read("/opt");
        assert!(readable(&spec, &none, Path::new("/opt/thing")));
    }
}
