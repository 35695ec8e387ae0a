//! Landlock and resource limits on Linux.
//!
//! Everything that allocates, opens files or can fail in interesting ways
//! happens in the parent, before the spawn: the `landlock` crate builds the
//! ruleset (an `O_PATH` descriptor per rule, added with
//! `landlock_add_rule`), and the limits are computed against the current
//! ones. What crosses into the child is the runner's [`PreExec`]: one
//! ruleset descriptor (close-on-exec) and a list of plain numbers, which
//! the runner applies with three kinds of raw system call between the
//! spawn and the exec (`prctl(NO_NEW_PRIVS)`, `prlimit64` per limit,
//! `landlock_restrict_self`; see `agentkit-plumbing`'s `spawn.rs`).
//!
//! A ruleset is built once per sandbox configuration (its `read` and
//! `write` paths, network, and the interpreter installs its program
//! needs) and shared by every child of that configuration for
//! [`FRESH_FOR`] ([`rules`]): the kernel copies a ruleset into each child's
//! domain at `landlock_restrict_self`, so one descriptor serves any number
//! of children. Each configuration has its own temporary root, granted
//! read-write in its ruleset; each call's private temporary folder is
//! made inside it (children of one configuration share its workspace
//! already). The descriptors of the system folders, `/etc` entries and
//! device files are opened once for [`FRESH_FOR`] too ([`static_rules`]).
//! A configuration path that changes (a workspace deleted and made again:
//! another inode) builds a new ruleset at once; a system file replaced
//! (an `/etc/resolv.conf` rewritten by rename) is seen within
//! [`FRESH_FOR`].
//!
//! Why not the crate's `RulesetCreated::restrict_self` in the child: it
//! does the same two system calls today and allocates nothing on its
//! success path, but nothing in its API promises that it stays free of
//! allocation, locks or logging (its status and error types are built
//! there, and a future version may add work). Taking the descriptor out of
//! the built ruleset (`Option<OwnedFd>::from(RulesetCreated)`, a documented
//! conversion) and calling the kernel directly keeps the child's side to
//! three system calls whose safety does not depend on another crate's
//! internals.

#![allow(unsafe_code)]

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use agentkit_manifest::SandboxLimits;
use agentkit_plumbing::{Limit, PreExec};
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetError, Scope, path_beneath_rules,
};

use super::tmp::TmpRoot;
use super::{DEV_FILES, ETC_HIDDEN, SYSTEM_READ, SandboxSpec, SandboxStatus, matches};

/// How long a built ruleset, and the descriptors of the system paths, are
/// reused.
const FRESH_FOR: Duration = Duration::from_secs(5);

/// Configurations whose rulesets are kept at most; stale ones go first,
/// and past it the cache starts over.
const CACHE_CAP: usize = 256;

/// The Landlock rights the rules are written for. Rights of later ABIs
/// than the kernel's are dropped by the crate (best effort), so a newer
/// kernel confines more (ABI 9: connecting to UNIX sockets by path, such
/// as a Docker socket) and an older one less, never an error.
const TARGET: ABI = ABI::V9;

/// `LANDLOCK_CREATE_RULESET_VERSION`: asks `landlock_create_ruleset` for
/// the ABI version instead of creating a ruleset.
const CREATE_RULESET_VERSION: libc::c_uint = 1;

/// Asks the kernel for its Landlock ABI, then checks with the crate that a
/// ruleset can be created.
pub(super) fn probe() -> SandboxStatus {
    // SAFETY: `landlock_create_ruleset(NULL, 0, VERSION)` reads no memory
    // and creates nothing; it answers the ABI version or -1 with errno.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0 as libc::size_t,
            CREATE_RULESET_VERSION,
        )
    };
    if version <= 0 {
        let err = std::io::Error::last_os_error();
        let reason = match err.raw_os_error() {
            Some(libc::ENOSYS) => {
                "this kernel has no Landlock (Linux 5.13 or later built with CONFIG_SECURITY_LANDLOCK is needed)".to_owned()
            }
            Some(libc::EOPNOTSUPP) => {
                "Landlock is built into this kernel but not enabled (add `landlock` to the `lsm=` boot parameter)".to_owned()
            }
            _ => format!("Landlock is unavailable: {err}"),
        };
        return SandboxStatus::unavailable(reason);
    }
    let abi = u32::try_from(version).unwrap_or(0);
    let usable = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::V1))
        .and_then(|r| r.create());
    match usable {
        Ok(_) => SandboxStatus {
            available: true,
            abi: Some(abi),
            network_rules: abi >= 4,
            reason: None,
        },
        Err(e) => SandboxStatus::unavailable(format!(
            "the kernel reports Landlock ABI {abi} but a ruleset cannot be created: {e}"
        )),
    }
}

/// The ruleset of one sandbox configuration, shared by its children, and
/// the temporary root their private folders are made in (removed when the
/// last child of the configuration is done and the cache has let it go).
#[derive(Debug)]
pub(super) struct Rules {
    /// `None` when the kernel took none of it.
    ruleset: Option<Arc<OwnedFd>>,
    tmp_root: TmpRoot,
    built: Instant,
    /// `(device, inode)` of each configuration path when it was built.
    identity: Vec<Option<(u64, u64)>>,
}

impl Rules {
    pub(super) fn tmp_root(&self) -> &Path {
        self.tmp_root.path()
    }
}

/// What a ruleset is built from, beyond the system paths.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    read: Vec<PathBuf>,
    write: Vec<PathBuf>,
    network: bool,
    installs: Vec<PathBuf>,
}

impl Key {
    fn paths(&self) -> impl Iterator<Item = &PathBuf> {
        self.read.iter().chain(&self.write).chain(&self.installs)
    }
}

fn identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// The ruleset of `spec` with `installs` (the interpreter installs its
/// program needs, `resolve.rs`): the cached one while it is fresh and its
/// paths are the same files, else a new one.
pub(super) fn rules(spec: &SandboxSpec, installs: Vec<PathBuf>) -> std::io::Result<Arc<Rules>> {
    type Cache = Mutex<HashMap<Key, Arc<Rules>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let key = Key {
        read: spec.read.clone(),
        write: spec.write.clone(),
        network: spec.network,
        installs,
    };
    let ids: Vec<Option<(u64, u64)>> = key.paths().map(|p| identity(p)).collect();
    if let Some(rules) = cache
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
        && rules.built.elapsed() < FRESH_FOR
        && rules.identity == ids
    {
        return Ok(rules.clone());
    }
    // Built outside the lock: other configurations' children go on.
    let tmp_root = TmpRoot::create()?;
    let ruleset = build_ruleset(&key, tmp_root.path()).map_err(|e| {
        std::io::Error::other(format!("the sandbox's rules could not be built: {e}"))
    })?;
    let rules = Arc::new(Rules {
        ruleset: ruleset.map(Arc::new),
        tmp_root,
        built: Instant::now(),
        identity: ids,
    });
    let mut cache = cache.lock().unwrap_or_else(PoisonError::into_inner);
    if cache.len() >= CACHE_CAP {
        cache.retain(|_, r| r.built.elapsed() < FRESH_FOR);
        if cache.len() >= CACHE_CAP {
            cache.clear();
        }
    }
    cache.insert(key, rules.clone());
    Ok(rules)
}

/// Readies `pre` so the child confines itself before exec: `no_new_privs`
/// and the limits always, Landlock when `rules` has a ruleset.
pub(super) fn confine(spec: &SandboxSpec, rules: Option<&Rules>, pre: &mut PreExec) {
    pre.no_new_privs();
    for (resource, value) in spec.limits.map(|l| limits(&l)).unwrap_or_default() {
        pre.limit(Limit {
            resource: resource as i32,
            soft: value.cur,
            hard: value.max,
        });
    }
    if let Some(ruleset) = rules.and_then(|r| r.ruleset.clone()) {
        pre.landlock(ruleset);
    }
}

/// `struct rlimit64` of `prlimit64(2)`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct RLimit64 {
    cur: u64,
    max: u64,
}

/// The limits to set, as `(resource, value)`, each no higher than the
/// current hard limit (lowering needs no privilege; raising would).
fn limits(l: &SandboxLimits) -> Vec<(libc::c_long, RLimit64)> {
    let mut out = Vec::new();
    let mut set = |resource: libc::c_long, cur: u64, max: u64| {
        let hard = current_hard(resource);
        out.push((
            resource,
            RLimit64 {
                cur: cur.min(hard),
                max: max.min(hard),
            },
        ));
    };
    set(libc::RLIMIT_CORE as libc::c_long, 0, 0);
    if l.cpu_seconds > 0 {
        // SIGXCPU at the soft limit, SIGKILL a second later.
        set(
            libc::RLIMIT_CPU as libc::c_long,
            l.cpu_seconds,
            l.cpu_seconds.saturating_add(1),
        );
    }
    if l.memory_mb > 0 {
        let bytes = l.memory_mb.saturating_mul(1024 * 1024);
        set(libc::RLIMIT_AS as libc::c_long, bytes, bytes);
    }
    if l.processes > 0 {
        // RLIMIT_NPROC counts every process and thread of the user, not of
        // the child: the budget comes on top of what runs already (the
        // host-wide count, which bounds the user's).
        let n = tasks_now().saturating_add(l.processes);
        set(libc::RLIMIT_NPROC as libc::c_long, n, n);
    }
    if l.open_files > 0 {
        set(
            libc::RLIMIT_NOFILE as libc::c_long,
            l.open_files,
            l.open_files,
        );
    }
    out
}

fn current_hard(resource: libc::c_long) -> u64 {
    let mut now = RLimit64 { cur: 0, max: 0 };
    // SAFETY: `prlimit64(0, resource, NULL, &now)` only writes the current
    // limits of this process into `now`, which outlives the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_prlimit64,
            0 as libc::c_long,
            resource,
            std::ptr::null::<RLimit64>(),
            &mut now as *mut RLimit64,
        )
    };
    if rc == 0 { now.max } else { u64::MAX }
}

/// How many tasks (processes and threads) the host runs now, from the
/// fourth field of `/proc/loadavg` (`running/total`).
fn tasks_now() -> u64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().nth(3)?.split_once('/')?.1.parse().ok())
        .unwrap_or(0)
}

/// The rules every ruleset starts with: the system folders and the
/// readable `/etc` entries (read), the device files; their descriptors
/// opened once for [`FRESH_FOR`]. A path that cannot be opened is left
/// out, as `path_beneath_rules` does.
fn static_rules() -> Arc<Vec<(PathFd, BitFlags<AccessFs>)>> {
    type Opened = Mutex<Option<(Instant, Arc<Vec<(PathFd, BitFlags<AccessFs>)>>)>>;
    static OPENED: OnceLock<Opened> = OnceLock::new();
    let opened = OPENED.get_or_init(|| Mutex::new(None));
    if let Some((at, rules)) = &*opened.lock().unwrap_or_else(PoisonError::into_inner)
        && at.elapsed() < FRESH_FOR
    {
        return rules.clone();
    }
    let mut rules = Vec::new();
    let read = AccessFs::from_read(TARGET);
    for path in SYSTEM_READ
        .iter()
        .map(PathBuf::from)
        .chain(etc_entries().iter().cloned())
    {
        if let Some(rule) = open_rule(&path, read) {
            rules.push(rule);
        }
    }
    for (path, writable) in DEV_FILES {
        let Ok(fd) = PathFd::new(path) else { continue };
        let access = if *writable {
            AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev
        } else {
            AccessFs::ReadFile.into()
        };
        rules.push((fd, access));
    }
    let rules = Arc::new(rules);
    *opened.lock().unwrap_or_else(PoisonError::into_inner) = Some((Instant::now(), rules.clone()));
    rules
}

/// `path` opened for a rule granting `access` (the file rights only, for
/// a file), as `path_beneath_rules` makes it.
fn open_rule(path: &Path, access: BitFlags<AccessFs>) -> Option<(PathFd, BitFlags<AccessFs>)> {
    let fd = PathFd::new(path).ok()?;
    let is_dir = std::fs::metadata(path).map_or(true, |m| m.is_dir());
    let access = if is_dir {
        access
    } else {
        access & AccessFs::from_file(TARGET)
    };
    Some((fd, access))
}

/// The ruleset of one configuration, as its descriptor (`None` when the
/// kernel took none of it): the static rules, the `read` paths and
/// installs read and execute, the `write` paths and `tmp_root` everything.
fn build_ruleset(key: &Key, tmp_root: &Path) -> Result<Option<OwnedFd>, RulesetError> {
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(TARGET))?;
    let mut scopes: BitFlags<Scope> = Scope::Signal.into();
    if !key.network {
        ruleset = ruleset.handle_access(AccessNet::from_all(TARGET))?;
        scopes |= Scope::AbstractUnixSocket;
    }
    let mut created = ruleset.scope(scopes)?.create()?;
    for (fd, access) in static_rules().iter() {
        created = created.add_rule(PathBeneath::new(fd, *access))?;
    }
    let read = key.read.iter().chain(&key.installs);
    let write = key.write.iter().map(PathBuf::as_path).chain([tmp_root]);
    created = created
        .add_rules(path_beneath_rules(read, AccessFs::from_read(TARGET)))?
        .add_rules(path_beneath_rules(write, AccessFs::from_all(TARGET)))?;
    Ok(created.into())
}

/// The readable entries of `/etc`: everything but [`ETC_HIDDEN`] (folders
/// that hold a hidden entry are listed one level down), and no link into
/// `/proc` (a rule on it would name the host's own process). Listed once
/// per process: entries added later are not readable.
fn etc_entries() -> &'static [PathBuf] {
    static ENTRIES: OnceLock<Vec<PathBuf>> = OnceLock::new();
    ENTRIES.get_or_init(|| {
        let mut out = Vec::new();
        list_visible(Path::new("/etc"), "", ETC_HIDDEN, &mut out);
        out
    })
}

fn list_visible(root: &Path, rel: &str, hidden: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(root.join(rel)) else {
        return;
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    for name in names {
        let entry = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        if hidden.iter().any(|h| matches(h, &entry)) {
            continue;
        }
        let path = root.join(&entry);
        let holds_hidden = hidden
            .iter()
            .any(|h| h.starts_with(&entry) && h[entry.len()..].starts_with('/'));
        if holds_hidden && path.is_dir() {
            list_visible(root, &entry, hidden, out);
            continue;
        }
        let into_proc = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_symlink())
            && path
                .canonicalize()
                .is_ok_and(|real| real.starts_with("/proc"));
        if !into_proc {
            out.push(path);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn hidden_patterns_match_names_within_their_folder() {
        assert!(matches("shadow", "shadow"));
        assert!(!matches("shadow", "shadow-"));
        assert!(matches("ssh/ssh_host_*_key", "ssh/ssh_host_ed25519_key"));
        assert!(!matches(
            "ssh/ssh_host_*_key",
            "ssh/ssh_host_ed25519_key.pub"
        ));
        assert!(!matches("ssh/ssh_host_*_key", "ssh_host_rsa_key"));
        assert!(!matches("ssl/private", "ssl/certs"));
    }

    #[test]
    fn etc_is_listed_without_its_secrets() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for d in ["ssh", "ssl/private", "ssl/certs", "default"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        for f in [
            "passwd",
            "shadow",
            "ssh/ssh_config",
            "ssh/ssh_host_rsa_key",
            "ssh/ssh_host_rsa_key.pub",
            "ssl/openssl.cnf",
        ] {
            std::fs::write(root.join(f), "").unwrap();
        }
        std::os::unix::fs::symlink("/proc/self/mounts", root.join("mtab")).unwrap();
        let mut out = Vec::new();
        list_visible(root, "", ETC_HIDDEN, &mut out);
        let shown: Vec<String> = out
            .iter()
            .map(|p| p.strip_prefix(root).unwrap().display().to_string())
            .collect();
        assert_eq!(
            shown,
            [
                "passwd",
                "ssh/ssh_config",
                "ssh/ssh_host_rsa_key.pub",
                "ssl/certs",
                "ssl/openssl.cnf"
            ]
        );
    }

    #[test]
    fn limits_never_exceed_the_current_hard_limits() {
        let l = limits(&SandboxLimits {
            cpu_seconds: u64::MAX,
            memory_mb: 1,
            processes: 0,
            open_files: 64,
        });
        for (resource, value) in &l {
            assert!(value.cur <= value.max, "{resource}: {value:?}");
            assert!(value.max <= current_hard(*resource));
        }
        let nofile = l
            .iter()
            .find(|(r, _)| *r == libc::RLIMIT_NOFILE as libc::c_long)
            .unwrap();
        assert_eq!(nofile.1.cur, 64.min(current_hard(nofile.0)));
        assert!(
            !l.iter()
                .any(|(r, _)| *r == libc::RLIMIT_NPROC as libc::c_long)
        );
    }
}
