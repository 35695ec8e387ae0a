//! What a sandboxed child's interpreter needs to read, found before the
//! fork: its program as `exec` finds it (`PATH`, symlinks, `#!` lines) and
//! the install each step belongs to (a virtualenv and the base named in
//! its `pyvenv.cfg`, a pyenv / rbenv / asdf / mise root behind a shim, an
//! nvm / uv / conda / Homebrew install), plus the version managers on the
//! child's `PATH` (what a shell's `python3` or a script's `node` will
//! find). Each is granted read and execute at its narrowest root, never
//! the home folder, never a folder that holds a secret ([`Guard`]).
//!
//! Resolving walks the file system (a few dozen `stat`s), so the answer is
//! cached per program, folder and the variables that steer it, for
//! [`FRESH_FOR`]: a tool call then costs one map lookup.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::SYSTEM_READ;

/// How long a resolution is reused before the file system is walked
/// again (an interpreter installed or switched meanwhile is then seen).
const FRESH_FOR: Duration = Duration::from_secs(10);

/// Resolutions kept at most; the cache starts over past it.
const CACHE_CAP: usize = 256;

/// `#!` interpreters followed at most (a script run by a script...).
const MAX_HOPS: usize = 4;

/// Variables that change what a program resolves to, beyond `PATH` and
/// `HOME`: the version managers' selections and roots.
const STEERING: &[&str] = &[
    "PATH",
    "HOME",
    "XDG_CONFIG_HOME",
    "PYENV_VERSION",
    "PYENV_ROOT",
    "RBENV_VERSION",
    "RBENV_ROOT",
    "ASDF_DATA_DIR",
];

/// Places under a home folder that hold secrets: never granted, nor any
/// folder holding them.
pub(crate) const HOME_SECRETS: &[&str] = &[
    ".ssh",
    ".aws",
    ".config/agentkit",
    ".netrc",
    ".gnupg",
    ".docker",
    ".kube",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".local/share/keyrings",
    ".password-store",
    ".env",
];

/// Folders under a home folder that hold too much to grant whole.
const HOME_BROAD: &[&str] = &[
    ".local",
    ".local/share",
    ".local/state",
    ".config",
    ".cache",
];

/// Entries that mark a folder as a project or a state root, not an
/// install: such a folder is never granted whole.
const NOT_AN_INSTALL: &[&str] = &[".env", ".agentkit", "agent/agent.toml", ".git"];

/// One child about to start, as the resolution sees it.
pub(crate) use agentkit_plumbing::Launch;

/// What one program needs, and what was found but kept out.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Resolved {
    /// The files `exec` opens, in order: the program as found, then each
    /// `#!` interpreter (canonical paths). Empty when it was not found.
    pub(crate) chain: Vec<PathBuf>,
    /// Granted read and execute (canonical, none inside another).
    pub(crate) read: Vec<PathBuf>,
    /// Install roots found but not granted because they are or hold a
    /// protected place (the home folder, a secret, a project, the state).
    pub(crate) withheld: Vec<PathBuf>,
}

impl Resolved {
    /// The grants for a child that writes `writable`: none that holds one
    /// of them (a folder holding a workspace holds other sessions' too).
    /// Applied per child, so the cache need not be per workspace.
    pub(crate) fn grants_for<'a>(
        &'a self,
        writable: &'a [PathBuf],
    ) -> impl Iterator<Item = &'a PathBuf> + 'a {
        self.read
            .iter()
            .filter(move |g| !writable.iter().any(|w| w.starts_with(g)))
    }
}

type Key = Vec<OsString>;

/// Resolutions by program, folder and steering variables, with when each
/// was made.
type Cache = Mutex<HashMap<Key, (Instant, Arc<Resolved>)>>;

fn cache() -> &'static Cache {
    static CACHE: std::sync::OnceLock<Cache> = std::sync::OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// What `launch` needs, from the cache when it was resolved in the last
/// [`FRESH_FOR`].
pub(crate) fn resolve(launch: &Launch<'_>) -> Arc<Resolved> {
    let mut key: Key = Vec::with_capacity(STEERING.len() + 2);
    key.push(launch.program.as_os_str().to_owned());
    key.push(
        launch
            .cwd
            .map(|c| c.as_os_str().to_owned())
            .unwrap_or_default(),
    );
    for name in STEERING {
        key.push(launch.var(name).map(OsStr::to_owned).unwrap_or_default());
    }
    let now = Instant::now();
    {
        let map = cache().lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((at, found)) = map.get(&key)
            && now.duration_since(*at) < FRESH_FOR
        {
            return found.clone();
        }
    }
    let found = Arc::new(resolve_uncached(launch));
    let mut map = cache().lock().unwrap_or_else(PoisonError::into_inner);
    if map.len() >= CACHE_CAP {
        map.clear();
    }
    map.insert(key, (now, found.clone()));
    found
}

/// The walk itself.
pub(crate) fn resolve_uncached(launch: &Launch<'_>) -> Resolved {
    let mut walk = Walk {
        launch,
        guard: Guard::new(launch),
        out: Resolved::default(),
    };
    if let Some(program) = walk.find_program(launch.program) {
        walk.follow(&program, 0);
    }
    if let Some(path) = launch.var("PATH") {
        for dir in std::env::split_paths(path) {
            if dir.is_absolute() && !is_system(&dir) {
                walk.install_of(&dir, false);
            }
        }
    }
    walk.finish()
}

/// True when `path` is, holds or sits in a place no grant may give: the
/// home folder, a secret, a project, the state root.
pub(crate) fn is_protected(launch: &Launch<'_>, path: &Path) -> bool {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    !Guard::new(launch).allows(&path)
}

/// True for paths the ruleset grants anyway (the system folders and
/// `/etc`): nothing to add for them.
pub(crate) fn is_system(path: &Path) -> bool {
    SYSTEM_READ
        .iter()
        .chain(&["/etc"])
        .any(|s| path.starts_with(s))
}

struct Walk<'a, 'b> {
    launch: &'a Launch<'b>,
    guard: Guard,
    out: Resolved,
}

impl Walk<'_, '_> {
    /// `program` as `execvp` finds it: a path with a separator as is
    /// (against the child's folder when relative), a bare name on the
    /// child's `PATH` (the first executable file).
    fn find_program(&self, program: &Path) -> Option<PathBuf> {
        if program.components().count() > 1 || program.is_absolute() {
            let path = match self.launch.cwd {
                Some(cwd) if program.is_relative() => cwd.join(program),
                _ => program.to_path_buf(),
            };
            return path.is_file().then_some(path);
        }
        let path = self.launch.var("PATH")?;
        std::env::split_paths(path)
            .map(|dir| dir.join(program))
            .find(|p| is_executable(p))
    }

    /// Grants what running `file` needs: the install it belongs to (as
    /// named and after its symlinks), then its `#!` interpreter's.
    fn follow(&mut self, file: &Path, hops: usize) {
        let Ok(real) = file.canonicalize() else {
            return;
        };
        if self.out.chain.contains(&real) {
            return;
        }
        self.out.chain.push(real.clone());
        for path in [file, real.as_path()] {
            if is_system(path) {
                continue;
            }
            if let Some(dir) = path.parent()
                && !self.install_of(dir, true)
            {
                // Not in a known install (or its install is withheld): the
                // file alone.
                self.grant(path.to_path_buf());
            }
        }
        if is_in_shims(file) || is_in_shims(&real) {
            for target in shim_targets(&real) {
                self.follow(&target, hops + 1);
            }
        }
        if hops < MAX_HOPS
            && let Some(interpreter) = self.shebang(&real)
        {
            self.follow(&interpreter, hops + 1);
        }
    }

    /// The interpreter of a `#!` script, found as `exec` would (through
    /// `env`'s `PATH` lookup for `#!/usr/bin/env python3`).
    fn shebang(&self, file: &Path) -> Option<PathBuf> {
        let mut head = [0u8; 256];
        let n = std::fs::File::open(file).ok()?.read(&mut head).ok()?;
        let line = head[..n].strip_prefix(b"#!")?;
        let line = line.split(|b| *b == b'\n').next()?;
        let line = std::str::from_utf8(line).ok()?;
        let mut words = line.split_whitespace();
        let interpreter = Path::new(words.next()?);
        if interpreter.file_name() != Some(OsStr::new("env")) {
            return Some(interpreter.to_path_buf());
        }
        // `env [-S] [-i] [NAME=value...] program`: the first word that is
        // neither an option nor an assignment.
        let name = words.find(|w| !w.starts_with('-') && !w.contains('='))?;
        self.find_program(Path::new(name))
    }

    /// Grants the install `dir` lies in, if it is a known kind (or, for a
    /// program's own folder with `generic`, a `<prefix>/bin` whose prefix
    /// has a `lib`). False when `dir` is in no install.
    fn install_of(&mut self, dir: &Path, generic: bool) -> bool {
        let home = self.guard.homes.first().cloned();
        for (depth, at) in dir.ancestors().enumerate() {
            if depth > 6 || at.parent().is_none() || Some(at) == home.as_deref() {
                break;
            }
            if at.join("pyvenv.cfg").is_file() {
                let granted = self.grant(at.to_path_buf());
                if let Some(base) = venv_home(at) {
                    self.install_of(&base, true);
                }
                return granted;
            }
            let homebrew = || at.join("Cellar").is_dir() && at.join("bin/brew").exists();
            if at.join("conda-meta").is_dir() || homebrew() || is_version_folder(at) {
                return self.grant(at.to_path_buf());
            }
            if let Some(kind) = Manager::of(at) {
                self.manager(at, kind);
                return true;
            }
        }
        if generic
            && dir.file_name().is_some_and(|n| n == "bin" || n == "sbin")
            && let Some(prefix) = dir.parent()
            && prefix.join("lib").is_dir()
            && !is_system(prefix)
        {
            return self.grant(prefix.to_path_buf());
        }
        false
    }

    /// A version manager at `root`: its own code, and the versions the
    /// child will select (its variable, a version file from the child's
    /// folder up, the global one), or every version when none is found.
    fn manager(&mut self, root: &Path, kind: Manager) {
        for part in kind.code() {
            let path = root.join(part);
            if path.exists() {
                self.grant(path);
            }
        }
        let mut selected: Vec<String> = Vec::new();
        let files = self.version_files(kind);
        if let Some(v) = kind.variable().and_then(|v| self.launch.var(v)) {
            selected.extend(v.to_string_lossy().split(':').map(str::to_owned));
        } else if let Some(file) = files.first() {
            selected.extend(read_versions(file));
        } else if kind != Manager::Asdf {
            selected.extend(read_versions(&root.join("version")));
        }
        for file in files {
            self.grant(file);
        }
        let versions = root.join(kind.versions());
        let mut found = false;
        for v in selected.iter().filter(|v| *v != "system") {
            let named = versions.join(v);
            // A version is a name, never a path out of the root.
            let plain = Path::new(v)
                .components()
                .all(|c| matches!(c, Component::Normal(_)));
            if plain && let Ok(real) = named.canonicalize() {
                found = true;
                self.grant(real.clone());
                if let Some(base) = venv_home(&real) {
                    self.install_of(&base, true);
                }
            }
        }
        if !found && versions.is_dir() && selected.iter().all(|v| v != "system") {
            self.grant(versions);
        }
    }

    /// The version files the manager reads, the one that decides first:
    /// `.python-version` (or `.ruby-version`, `.tool-versions`) from the
    /// child's folder up, then the global one.
    fn version_files(&self, kind: Manager) -> Vec<PathBuf> {
        let mut out = Vec::new();
        if let Some(cwd) = self.launch.cwd {
            for dir in cwd.ancestors() {
                let file = dir.join(kind.local_file());
                if file.is_file() {
                    out.push(file);
                    if kind != Manager::Asdf {
                        break;
                    }
                }
            }
        }
        if let Some(home) = self.guard.homes.first()
            && kind == Manager::Asdf
        {
            let file = home.join(".tool-versions");
            if file.is_file() && !out.contains(&file) {
                out.push(file);
            }
        }
        out
    }

    /// Grants `path` unless the guard refuses it (then it is withheld);
    /// true when it is granted (or readable anyway).
    fn grant(&mut self, path: PathBuf) -> bool {
        let path = path.canonicalize().unwrap_or(path);
        if is_system(&path) {
            return true;
        }
        if self.guard.allows(&path) {
            if !self.out.read.contains(&path) {
                self.out.read.push(path);
            }
            true
        } else {
            if !self.out.withheld.contains(&path) {
                tracing::debug!(path = %path.display(), "sandbox: not granting a protected place an interpreter seems to live in");
                self.out.withheld.push(path);
            }
            false
        }
    }

    /// The grants, with any inside another dropped.
    fn finish(mut self) -> Resolved {
        let read = std::mem::take(&mut self.out.read);
        self.out.read = read
            .iter()
            .filter(|p| !read.iter().any(|q| q != *p && p.starts_with(q)))
            .cloned()
            .collect();
        self.out
    }
}

/// The version managers recognised by their root's layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Manager {
    Pyenv,
    Rbenv,
    /// asdf and mise: `shims/` and `installs/<tool>/<version>`.
    Asdf,
}

impl Manager {
    fn of(root: &Path) -> Option<Manager> {
        if root.join("libexec/pyenv").is_file() {
            Some(Manager::Pyenv)
        } else if root.join("libexec/rbenv").is_file() {
            Some(Manager::Rbenv)
        } else if root.join("shims").is_dir() && root.join("installs").is_dir() {
            Some(Manager::Asdf)
        } else {
            None
        }
    }

    /// The manager's own code and settings, what its shims run.
    fn code(self) -> &'static [&'static str] {
        match self {
            Manager::Pyenv => &["bin", "libexec", "shims", "plugins", "pyenv.d", "version"],
            Manager::Rbenv => &["bin", "libexec", "shims", "plugins", "rbenv.d", "version"],
            Manager::Asdf => &["bin", "lib", "libexec", "shims", "plugins"],
        }
    }

    fn versions(self) -> &'static str {
        match self {
            Manager::Pyenv | Manager::Rbenv => "versions",
            Manager::Asdf => "installs",
        }
    }

    fn variable(self) -> Option<&'static str> {
        match self {
            Manager::Pyenv => Some("PYENV_VERSION"),
            Manager::Rbenv => Some("RBENV_VERSION"),
            Manager::Asdf => None,
        }
    }

    fn local_file(self) -> &'static str {
        match self {
            Manager::Pyenv => ".python-version",
            Manager::Rbenv => ".ruby-version",
            Manager::Asdf => ".tool-versions",
        }
    }
}

/// One install of a language, by where it sits: `<root>/versions/<v>`
/// (pyenv, rbenv), `<root>/versions/node/<v>` (nvm),
/// `<root>/installs/<tool>/<v>` (asdf, mise), `…/uv/python/<v>` (uv).
fn is_version_folder(at: &Path) -> bool {
    let name = |p: Option<&Path>| {
        p.and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let parent = at.parent();
    let grand = parent.and_then(Path::parent);
    let p = name(parent);
    let g = name(grand);
    (p == "versions" && grand.is_some_and(|g| Manager::of(g).is_some()))
        || (p == "node" && g == "versions")
        || g == "installs"
        || (p == "python" && g == "uv")
}

/// The base interpreter's folder named by a virtualenv's `pyvenv.cfg`
/// (`home = /…/bin`).
fn venv_home(venv: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(venv.join("pyvenv.cfg")).ok()?;
    text.lines().find_map(|line| {
        let (k, v) = line.split_once('=')?;
        (k.trim() == "home").then(|| PathBuf::from(v.trim()))
    })
}

fn read_versions(file: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(file) else {
        return Vec::new();
    };
    let tool_versions = file.file_name() == Some(OsStr::new(".tool-versions"));
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .flat_map(|l| {
            // `.tool-versions` lines are `tool version...`: the installs
            // are `<tool>/<version>`.
            if tool_versions {
                let mut words = l.split_whitespace();
                let tool = words.next().unwrap_or("").to_owned();
                words.map(|v| format!("{tool}/{v}")).collect::<Vec<_>>()
            } else {
                l.split_whitespace().map(str::to_owned).collect()
            }
        })
        .collect()
}

fn is_in_shims(path: &Path) -> bool {
    path.ancestors()
        .skip(1)
        .take(3)
        .any(|a| a.file_name() == Some(OsStr::new("shims")))
}

/// The absolute programs a shim script `exec`s (`exec "/root/.pyenv/libexec/pyenv" exec …`).
fn shim_targets(shim: &Path) -> Vec<PathBuf> {
    let mut head = [0u8; 2048];
    let Ok(n) = std::fs::File::open(shim).and_then(|mut f| f.read(&mut head)) else {
        return Vec::new();
    };
    if !head[..n].starts_with(b"#!") {
        return Vec::new();
    }
    String::from_utf8_lossy(&head[..n])
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("exec "))
        .filter_map(|rest| {
            let word = rest.split_whitespace().next()?.trim_matches('"');
            let path = Path::new(word);
            (path.is_absolute() && path.is_file()).then(|| path.to_path_buf())
        })
        .collect()
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// What no grant may be, hold or sit in.
struct Guard {
    /// The home folders (agentkit's and the child's), canonical.
    homes: Vec<PathBuf>,
    /// Never granted, nor anything inside them.
    secrets: Vec<PathBuf>,
    /// Never granted, nor any folder holding them.
    whole: Vec<PathBuf>,
}

impl Guard {
    fn new(launch: &Launch<'_>) -> Guard {
        let mut homes: Vec<PathBuf> = Vec::new();
        for home in [
            std::env::var_os("HOME"),
            launch.var("HOME").map(OsStr::to_owned),
        ]
        .into_iter()
        .flatten()
        .filter(|h| !h.is_empty())
        {
            let home = PathBuf::from(home);
            let home = home.canonicalize().unwrap_or(home);
            if !homes.contains(&home) {
                homes.push(home);
            }
        }
        let mut secrets = Vec::new();
        let mut whole = Vec::new();
        for home in &homes {
            secrets.extend(HOME_SECRETS.iter().map(|s| home.join(s)));
            whole.push(home.clone());
            whole.extend(HOME_BROAD.iter().map(|s| home.join(s)));
        }
        for config in [
            std::env::var_os("XDG_CONFIG_HOME"),
            launch.var("XDG_CONFIG_HOME").map(OsStr::to_owned),
        ]
        .into_iter()
        .flatten()
        .filter(|c| !c.is_empty())
        {
            secrets.push(PathBuf::from(config).join("agentkit"));
        }
        // The child's writable folders are checked per child
        // ([`Resolved::grants_for`]), not here: the answer is cached
        // across workspaces.
        if let Some(cwd) = launch.cwd {
            whole.push(cwd.canonicalize().unwrap_or_else(|_| cwd.to_path_buf()));
        }
        whole.extend(secrets.iter().cloned());
        Guard {
            homes,
            secrets,
            whole,
        }
    }

    /// May `path` (canonical) be granted read and execute?
    fn allows(&self, path: &Path) -> bool {
        if path.parent().is_none() {
            return false;
        }
        if self.secrets.iter().any(|s| path.starts_with(s))
            || self.whole.iter().any(|w| w.starts_with(path))
        {
            return false;
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        if name == ".env" || name.starts_with(".env.") {
            return false;
        }
        !(path.is_dir() && NOT_AN_INSTALL.iter().any(|e| path.join(e).exists()))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn exe(path: &Path, text: &str) {
        write(path, text);
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// Resolves `program` in `cwd` with `HOME` and `PATH` as given, and
    /// shows the grants, the withheld roots and the chain relative to
    /// `root` (`~` for the home folder), one per line.
    fn check(
        root: &Path,
        program: &str,
        path: &[&str],
        cwd: &Path,
        vars: &[(&str, &str)],
    ) -> String {
        let home = root.join("home");
        let path = std::env::join_paths(path.iter().map(|p| root.join(p))).unwrap();
        let mut env: Vec<(OsString, OsString)> =
            vec![("HOME".into(), home.clone().into()), ("PATH".into(), path)];
        env.extend(
            vars.iter()
                .map(|(k, v)| (OsString::from(k), OsString::from(v))),
        );
        let launch = Launch {
            program: Path::new(program),
            cwd: Some(cwd),
            env: &env,
        };
        let r = resolve_uncached(&launch);
        let root = root.canonicalize().unwrap();
        let show = |p: &PathBuf| {
            p.strip_prefix(root.join("home"))
                .map(|r| format!("~/{}", r.display()))
                .or_else(|_| p.strip_prefix(&root).map(|r| r.display().to_string()))
                .unwrap_or_else(|_| p.display().to_string())
        };
        let mut out = String::new();
        for (what, list) in [
            ("read", &r.read),
            ("withheld", &r.withheld),
            ("chain", &r.chain),
        ] {
            for p in list.iter().filter(|p| !is_system(p)) {
                out.push_str(&format!("{what} {}\n", show(p)));
            }
        }
        out
    }

    #[test]
    fn a_pyenv_shim_grants_the_manager_and_the_selected_version_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let pyenv = root.join("home/.pyenv");
        exe(&pyenv.join("libexec/pyenv"), "#!/bin/sh\n");
        exe(
            &pyenv.join("shims/python3"),
            &format!(
                "#!/bin/sh\nexec \"{}/libexec/pyenv\" exec python3 \"$@\"\n",
                pyenv.display()
            ),
        );
        exe(&pyenv.join("versions/3.11.7/bin/python3"), "");
        std::fs::create_dir_all(pyenv.join("versions/3.11.7/lib")).unwrap();
        exe(&pyenv.join("versions/3.12.1/bin/python3"), "");
        write(&pyenv.join("version"), "3.11.7\n");
        write(&root.join("home/.ssh/id_rsa"), "KEY");
        let cwd = root.join("work");
        std::fs::create_dir_all(&cwd).unwrap();
        let got = check(root, "python3", &["home/.pyenv/shims"], &cwd, &[]);
        expect_test::expect![[r#"
            read ~/.pyenv/libexec
            read ~/.pyenv/shims
            read ~/.pyenv/version
            read ~/.pyenv/versions/3.11.7
            chain ~/.pyenv/shims/python3
            chain ~/.pyenv/libexec/pyenv
        "#]]
        .assert_eq(&got);

        // A local version file wins over the global one, and PYENV_VERSION
        // over both.
        write(&cwd.join(".python-version"), "3.12.1\n");
        let got = check(root, "python3", &["home/.pyenv/shims"], &cwd, &[]);
        assert!(got.contains("read ~/.pyenv/versions/3.12.1\n"), "{got}");
        assert!(got.contains("read work/.python-version\n"), "{got}");
        assert!(!got.contains("3.11.7"), "{got}");
        let got = check(
            root,
            "python3",
            &["home/.pyenv/shims"],
            &cwd,
            &[("PYENV_VERSION", "3.11.7")],
        );
        assert!(got.contains("read ~/.pyenv/versions/3.11.7\n"), "{got}");
        assert!(!got.contains("versions/3.12.1"), "{got}");
        // A version that names a path out of the root is no version.
        let got = check(
            root,
            "python3",
            &["home/.pyenv/shims"],
            &cwd,
            &[("PYENV_VERSION", "../../.ssh")],
        );
        assert!(!got.contains(".ssh"), "{got}");
    }

    #[test]
    fn a_venv_grants_itself_and_its_base_and_never_the_home_folder() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let base = root.join("home/.local/share/uv/python/cpython-3.12.1");
        exe(&base.join("bin/python3.12"), "");
        std::fs::create_dir_all(base.join("lib/python3.12")).unwrap();
        let venv = root.join("proj/.venv");
        write(
            &venv.join("pyvenv.cfg"),
            &format!("home = {}\nversion = 3.12.1\n", base.join("bin").display()),
        );
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::os::unix::fs::symlink(base.join("bin/python3.12"), venv.join("bin/python")).unwrap();
        write(&root.join("proj/.env"), "SECRET=1");
        let got = check(root, "python", &["proj/.venv/bin"], root, &[]);
        expect_test::expect![[r#"
            read proj/.venv
            read ~/.local/share/uv/python/cpython-3.12.1
            chain ~/.local/share/uv/python/cpython-3.12.1/bin/python3.12
        "#]]
        .assert_eq(&got);
    }

    #[test]
    fn nvm_conda_and_plain_programs_get_their_narrowest_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let node = root.join("home/.nvm/versions/node/v20.11.0");
        exe(&node.join("bin/node"), "");
        std::fs::create_dir_all(node.join("lib/node_modules/tsx")).unwrap();
        exe(
            &node.join("lib/node_modules/tsx/cli.js"),
            "#!/usr/bin/env node\n",
        );
        std::os::unix::fs::symlink("../lib/node_modules/tsx/cli.js", node.join("bin/tsx")).unwrap();
        let conda = root.join("home/miniconda3");
        std::fs::create_dir_all(conda.join("conda-meta")).unwrap();
        exe(&conda.join("bin/python"), "");
        exe(&root.join("home/.cargo/bin/rg"), "");
        write(&root.join("home/.cargo/credentials.toml"), "token");
        let got = check(
            root,
            "tsx",
            &["home/.nvm/versions/node/v20.11.0/bin"],
            root,
            &[],
        );
        expect_test::expect![[r#"
            read ~/.nvm/versions/node/v20.11.0
            chain ~/.nvm/versions/node/v20.11.0/lib/node_modules/tsx/cli.js
            chain ~/.nvm/versions/node/v20.11.0/bin/node
        "#]]
        .assert_eq(&got);
        let got = check(root, "python", &["home/miniconda3/bin"], root, &[]);
        expect_test::expect![[r#"
            read ~/miniconda3
            chain ~/miniconda3/bin/python
        "#]]
        .assert_eq(&got);
        // A program in no known install: the file alone; the folder it
        // sits in on PATH is not granted.
        let got = check(root, "rg", &["home/.cargo/bin"], root, &[]);
        expect_test::expect![[r#"
            read ~/.cargo/bin/rg
            chain ~/.cargo/bin/rg
        "#]]
        .assert_eq(&got);
    }

    #[test]
    fn protected_places_are_withheld_however_they_are_reached() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // An "install" whose prefix is the home folder, or a project.
        exe(&root.join("home/bin/tool"), "");
        std::fs::create_dir_all(root.join("home/lib")).unwrap();
        exe(&root.join("proj/bin/tool2"), "");
        std::fs::create_dir_all(root.join("proj/lib")).unwrap();
        write(&root.join("proj/.env"), "SECRET=1");
        exe(&root.join("home/.ssh/run"), "");
        let got = check(root, "tool", &["home/bin"], root, &[]);
        expect_test::expect![[r#"
            read ~/bin/tool
            withheld ~/
            chain ~/bin/tool
        "#]]
        .assert_eq(&got);
        let got = check(root, "tool2", &["proj/bin"], root, &[]);
        expect_test::expect![[r#"
            read proj/bin/tool2
            withheld proj
            chain proj/bin/tool2
        "#]]
        .assert_eq(&got);
        let got = check(root, "run", &["home/.ssh"], root, &[]);
        assert!(!got.contains("read"), "{got}");
        assert!(got.contains("withheld ~/.ssh/run"), "{got}");
    }
}
