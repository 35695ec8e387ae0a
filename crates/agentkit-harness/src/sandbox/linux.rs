//! Landlock and resource limits on Linux.
//!
//! Everything that allocates, opens files or can fail in interesting ways
//! happens in the parent, before the fork: the `landlock` crate builds the
//! ruleset (it opens an `O_PATH` descriptor per rule and adds the rules
//! with `landlock_add_rule`), and the limits are computed against the
//! current ones. What crosses into the child is one owned descriptor (the
//! ruleset, close-on-exec) and a list of plain numbers. Between fork and
//! exec the child then makes only raw system calls: `prctl(NO_NEW_PRIVS)`,
//! `prlimit64` per limit, and `landlock_restrict_self`.
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

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use agentkit_manifest::SandboxLimits;
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetError, Scope, path_beneath_rules,
};

use super::{DEV_FILES, ETC_HIDDEN, SYSTEM_READ, SandboxSpec, SandboxStatus, matches};

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

/// Sets `cmd` up so the child confines itself before exec: Landlock when
/// `status` has it, `no_new_privs` and the limits always.
pub(super) fn confine(
    spec: &SandboxSpec,
    installs: &[PathBuf],
    tmp: &Path,
    status: &SandboxStatus,
    cmd: &mut tokio::process::Command,
) -> std::io::Result<()> {
    let ruleset = if status.available {
        build_ruleset(spec, installs, tmp).map_err(|e| {
            std::io::Error::other(format!("the sandbox's rules could not be built: {e}"))
        })?
    } else {
        None
    };
    let limits = spec.limits.map(|l| limits(&l)).unwrap_or_default();
    let child = move || -> std::io::Result<()> {
        // Runs in the forked child, before exec (see the SAFETY comment at
        // `pre_exec` below): raw system calls only, on data prepared by
        // the parent; nothing here allocates, locks, or touches the heap.
        //
        // SAFETY (each call): the arguments are plain integers, or a
        // pointer to `RLimit64` values owned by this closure that live
        // for the whole call; `prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)`,
        // `prlimit64(0, resource, new, NULL)` (0 is this process) and
        // `landlock_restrict_self(fd, 0)` read nothing else.
        if unsafe {
            libc::syscall(
                libc::SYS_prctl,
                libc::PR_SET_NO_NEW_PRIVS as libc::c_long,
                1 as libc::c_long,
                0 as libc::c_long,
                0 as libc::c_long,
                0 as libc::c_long,
            )
        } != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        for (resource, value) in &limits {
            if unsafe {
                libc::syscall(
                    libc::SYS_prlimit64,
                    0 as libc::c_long,
                    *resource,
                    value as *const RLimit64,
                    std::ptr::null_mut::<RLimit64>(),
                )
            } != 0
            {
                return Err(std::io::Error::last_os_error());
            }
        }
        if let Some(fd) = &ruleset
            && unsafe {
                libc::syscall(
                    libc::SYS_landlock_restrict_self,
                    fd.as_raw_fd() as libc::c_long,
                    0 as libc::c_long,
                )
            } != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    };
    // SAFETY: `pre_exec` closures run in the child between fork and exec,
    // where only async-signal-safe operations are sound (another thread of
    // the parent may have held the allocator's or any other lock at the
    // fork). The closure above:
    // - makes only raw `syscall(2)`s (`prctl`, `prlimit64`,
    //   `landlock_restrict_self`), which take no lock and allocate nothing;
    // - reads only what it owns: an `OwnedFd` and a `Vec` built before the
    //   fork, iterated by reference (no allocation, no drop in the child);
    // - on failure builds an `io::Error` from errno (`last_os_error` stores
    //   the code inline, no allocation); std then writes that code to its
    //   status pipe and the child `_exit`s, so the spawn fails with it.
    // The closure is never dropped in the child (exec replaces the image,
    // or the child exits), and in the parent dropping it closes the
    // ruleset descriptor after the spawn. The descriptor is close-on-exec
    // (the kernel opens rulesets so), so the program never inherits it.
    // Landlock restricts only the calling thread: after fork the child has
    // one thread, so the whole child, and everything it execs or forks, is
    // confined.
    unsafe {
        cmd.pre_exec(child);
    }
    Ok(())
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

/// The ruleset of one child, as its descriptor (`None` when the kernel
/// took none of it). `installs` are the interpreter installs its program
/// needs (`resolve.rs`), read and execute like `read` paths.
fn build_ruleset(
    spec: &SandboxSpec,
    installs: &[PathBuf],
    tmp: &Path,
) -> Result<Option<OwnedFd>, RulesetError> {
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(TARGET))?;
    let mut scopes: BitFlags<Scope> = Scope::Signal.into();
    if !spec.network {
        ruleset = ruleset.handle_access(AccessNet::from_all(TARGET))?;
        scopes |= Scope::AbstractUnixSocket;
    }
    let ruleset = ruleset.scope(scopes)?;
    let read = SYSTEM_READ
        .iter()
        .map(PathBuf::from)
        .chain(etc_entries().iter().cloned())
        .chain(spec.read.iter().cloned())
        .chain(installs.iter().cloned());
    let write = spec.write.iter().cloned().chain([tmp.to_path_buf()]);
    let mut created = ruleset
        .create()?
        .add_rules(path_beneath_rules(read, AccessFs::from_read(TARGET)))?
        .add_rules(path_beneath_rules(write, AccessFs::from_all(TARGET)))?;
    for (path, writable) in DEV_FILES {
        let Ok(fd) = PathFd::new(path) else { continue };
        let access = if *writable {
            AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev
        } else {
            AccessFs::ReadFile.into()
        };
        created = created.add_rule(PathBeneath::new(fd, access))?;
    }
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
