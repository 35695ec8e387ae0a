//! Starting a child without copying the host's page tables (Linux).
//!
//! `std::process::Command` with a `pre_exec` hook forks: the kernel copies
//! the page tables of the whole host (tens to hundreds of MiB mapped), and
//! the cost of every tool call grows with the server's memory. This module
//! starts a child the way `posix_spawn` does inside glibc: `clone` with
//! `CLONE_VM | CLONE_VFORK`, so the child runs on a small stack of its own
//! inside the parent's memory, and the calling thread is suspended until
//! the child has called `execve` (or exited). What `posix_spawn` cannot do,
//! and a sandboxed child needs (its [`PreExec`]: `no_new_privs`, the
//! resource limits, `landlock_restrict_self`), the child does between the
//! clone and the exec, with raw system calls only.
//!
//! The child gets a pidfd (`CLONE_PIDFD`), which the parent waits on with
//! tokio's reactor; a kernel without it (before 5.2) answers
//! `Unsupported` and the runner falls back to `Command`.
//!
//! Everything that allocates happens in the parent before the clone: the
//! argument and environment arrays, the candidate paths of a bare program
//! name (the child tries them in `PATH` order as `execvp` does), the
//! descriptors. The child reads that memory and writes one integer (the
//! error, when no exec succeeded).

#![allow(unsafe_code)]

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicI32, Ordering};

use tokio::io::unix::AsyncFd;

use crate::process::PreExec;

/// The child's stack: it makes a few system calls and never recurses.
const STACK: usize = 64 * 1024;

/// The shell `execvp` hands a script without a `#!` line to.
const SH: &std::ffi::CStr = c"/bin/sh";

/// Where a bare program name is looked up when the child has no `PATH`
/// (what glibc's `execvp` uses).
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// A child started by [`spawn`]: its pid and pidfd, and the parent's ends
/// of its pipes. Dropping it kills the child (SIGKILL) unless it has been
/// reaped, and reaps it.
#[derive(Debug)]
pub(crate) struct Spawned {
    pid: libc::pid_t,
    pidfd: Option<AsyncFd<OwnedFd>>,
    status: Option<ExitStatus>,
    pub(crate) stdin: Option<tokio::net::unix::pipe::Sender>,
    pub(crate) stdout: Option<tokio::net::unix::pipe::Receiver>,
    pub(crate) stderr: Option<tokio::net::unix::pipe::Receiver>,
    /// Handed to a reaper task by a drop: reaped there, never handed on.
    detached: bool,
}

/// What [`spawn`] starts.
pub(crate) struct Start<'a> {
    pub(crate) program: &'a Path,
    pub(crate) args: &'a [OsString],
    /// The whole environment, later entries winning.
    pub(crate) env: &'a [(OsString, OsString)],
    pub(crate) cwd: Option<&'a Path>,
    /// A pipe on stdin (else `/dev/null`).
    pub(crate) stdin: bool,
    pub(crate) pre_exec: &'a PreExec,
}

fn cstring(bytes: &[u8]) -> std::io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "a program, argument, variable or folder holds a NUL byte",
        )
    })
}

fn cvt(rc: libc::c_int) -> std::io::Result<libc::c_int> {
    if rc == -1 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// A close-on-exec pipe whose ends are both above 2 (so moving them onto
/// the child's 0, 1 and 2 never overwrites one another): `(read, write)`.
fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `pipe2` writes two descriptors into `fds`, which outlives the
    // call; on success both are new and owned by nobody else.
    cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: both descriptors were just created by `pipe2` and are owned
    // here alone.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((above_stdio(r)?, above_stdio(w)?))
}

fn above_stdio(fd: OwnedFd) -> std::io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: `F_DUPFD_CLOEXEC` duplicates a descriptor this function owns
    // onto a new one (at 3 or above) that the returned `OwnedFd` owns.
    let new = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) })?;
    // SAFETY: `new` was just created and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

fn dev_null() -> std::io::Result<OwnedFd> {
    let file = std::fs::File::open("/dev/null")?;
    above_stdio(OwnedFd::from(file))
}

/// The paths the child tries, in order: the program itself when it names
/// a path, else each folder of the child's `PATH` joined with it.
fn candidates(program: &Path, env: &[(OsString, OsString)]) -> std::io::Result<Vec<CString>> {
    let bytes = program.as_os_str().as_bytes();
    if bytes.is_empty() {
        return Err(std::io::Error::from_raw_os_error(libc::ENOENT));
    }
    if bytes.contains(&b'/') {
        return Ok(vec![cstring(bytes)?]);
    }
    let path = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map_or(OsStr::new(DEFAULT_PATH), |(_, v)| v.as_os_str());
    path.as_bytes()
        .split(|&b| b == b':')
        .map(|dir| {
            let dir = if dir.is_empty() { b".".as_slice() } else { dir };
            let mut full = dir.to_vec();
            full.push(b'/');
            full.extend_from_slice(bytes);
            cstring(&full)
        })
        .collect()
}

/// The environment as `NAME=value` strings, one per name (the last value
/// given wins, as with `Command::env`).
fn environ(env: &[(OsString, OsString)]) -> std::io::Result<Vec<CString>> {
    let mut out: Vec<CString> = Vec::with_capacity(env.len());
    let mut seen: Vec<&OsStr> = Vec::with_capacity(env.len());
    for (k, v) in env.iter().rev() {
        if seen.contains(&k.as_os_str()) {
            continue;
        }
        seen.push(k);
        let mut entry = k.as_bytes().to_vec();
        entry.push(b'=');
        entry.extend_from_slice(v.as_bytes());
        out.push(cstring(&entry)?);
    }
    out.reverse();
    Ok(out)
}

/// `struct rlimit64` of `prlimit64(2)`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct RLimit64 {
    pub(crate) cur: u64,
    pub(crate) max: u64,
}

/// What the child reads: built by the parent before the clone, never
/// changed while the child runs (except `error`, written by the child).
struct ChildArgs {
    candidates: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    /// Per candidate, `/bin/sh <candidate> <args>`: what `execvp` runs
    /// when the candidate is a script without a `#!` line (`ENOEXEC`).
    sh_argv: Vec<Vec<*const libc::c_char>>,
    envp: Vec<*const libc::c_char>,
    cwd: Option<CString>,
    /// The descriptors that become the child's 0, 1 and 2.
    stdio: [RawFd; 3],
    no_new_privs: bool,
    limits: Vec<(libc::c_long, RLimit64)>,
    landlock: Option<RawFd>,
    /// The signal mask the exec'd program starts with (the caller's).
    mask: libc::sigset_t,
    /// The errno that kept the child from its program; 0 when it exec'd.
    error: AtomicI32,
}

/// The child's side of a [`PreExec`]: `no_new_privs`, the limits, the
/// Landlock ruleset. Raw system calls only, on memory prepared by the
/// parent: no allocation, no lock. The errno of the first failure.
///
/// # Safety
///
/// Only for a child between its clone (or fork) and its exec: it confines
/// the calling process for good.
pub(crate) unsafe fn apply_pre_exec(
    no_new_privs: bool,
    limits: &[(libc::c_long, RLimit64)],
    landlock: Option<RawFd>,
) -> Result<(), libc::c_int> {
    let errno = || {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL)
    };
    // SAFETY (each call): the arguments are plain integers, or a pointer to
    // an `RLimit64` the caller owns and that lives for the whole call;
    // `prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)`, `prlimit64(0, resource,
    // new, NULL)` (0 is this process) and `landlock_restrict_self(fd, 0)`
    // read nothing else. `last_os_error` reads errno, allocating nothing.
    if no_new_privs
        && unsafe {
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
        return Err(errno());
    }
    for (resource, value) in limits {
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
            return Err(errno());
        }
    }
    if let Some(fd) = landlock
        && unsafe {
            libc::syscall(
                libc::SYS_landlock_restrict_self,
                fd as libc::c_long,
                0 as libc::c_long,
            )
        } != 0
    {
        return Err(errno());
    }
    Ok(())
}

/// The child, from the clone to the exec.
///
/// It shares the parent's memory (`CLONE_VM`) while the parent's calling
/// thread is suspended (`CLONE_VFORK`), and it runs with the parent
/// thread's thread-local storage: it must not allocate, lock, unwind or
/// touch anything but `ChildArgs` and its own stack. It makes only
/// async-signal-safe libc calls and raw system calls.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `ChildArgs` the parent passed to `clone`; it
    // lives in the parent's frame, which cannot return before this child
    // has exec'd or exited (`CLONE_VFORK`), and nobody else writes to it.
    let args = unsafe { &*(arg as *const ChildArgs) };
    let errno = || {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL)
    };
    let fail = |code: libc::c_int| -> libc::c_int {
        args.error.store(code, Ordering::Relaxed);
        // SAFETY: `_exit` ends this child at once, running nothing of the
        // parent's (no atexit handlers, no destructors, no flush).
        unsafe { libc::_exit(127) }
    };

    // SAFETY (the block): every call is async-signal-safe and reads or
    // writes only `args` (owned by the suspended parent thread, see above)
    // or locals on this child's stack.
    unsafe {
        // The handlers the parent installed must not run in this child,
        // which shares the parent's memory: back to the default action
        // (the handler table is the child's own copy, no `CLONE_SIGHAND`).
        // Ignored signals stay ignored, as across a fork, except SIGPIPE,
        // which Rust ignores in the host and `Command` restores.
        for signal in 1..=64 {
            if signal == libc::SIGKILL || signal == libc::SIGSTOP {
                continue;
            }
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            let reset = if signal == libc::SIGPIPE {
                old.sa_sigaction != libc::SIG_DFL
            } else {
                old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN
            };
            if reset {
                let mut new: libc::sigaction = std::mem::zeroed();
                new.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(signal, &new, std::ptr::null_mut());
            }
        }
        // Its own process group, so the runner can kill all it starts.
        if libc::setpgid(0, 0) != 0 {
            return fail(errno());
        }
        for (target, &fd) in args.stdio.iter().enumerate() {
            // Every source is above 2 (see `pipe`), so none is overwritten
            // before it is moved; `dup2` clears close-on-exec on the copy.
            if libc::dup2(fd, target as libc::c_int) == -1 {
                return fail(errno());
            }
        }
        if let Some(cwd) = &args.cwd
            && libc::chdir(cwd.as_ptr()) != 0
        {
            return fail(errno());
        }
        if let Err(code) = apply_pre_exec(args.no_new_privs, &args.limits, args.landlock) {
            return fail(code);
        }
        if libc::pthread_sigmask(libc::SIG_SETMASK, &args.mask, std::ptr::null_mut()) != 0 {
            return fail(libc::EINVAL);
        }
        // `execvp`'s search: a missing candidate moves on, a refused one
        // is remembered, anything else stops.
        let mut error = libc::ENOENT;
        let mut refused = false;
        for (candidate, sh_argv) in args.candidates.iter().zip(&args.sh_argv) {
            libc::execve(candidate.as_ptr(), args.argv.as_ptr(), args.envp.as_ptr());
            match errno() {
                libc::ENOEXEC => {
                    libc::execve(SH.as_ptr(), sh_argv.as_ptr(), args.envp.as_ptr());
                    error = errno();
                    refused = false;
                    break;
                }
                libc::EACCES => refused = true,
                libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT => {}
                other => {
                    error = other;
                    refused = false;
                    break;
                }
            }
        }
        fail(if refused { libc::EACCES } else { error })
    }
}

/// Starts `start` (see the module's header). `Unsupported` when the
/// kernel has no `CLONE_PIDFD`: the caller then uses `Command`.
pub(crate) fn spawn(start: &Start<'_>) -> std::io::Result<Spawned> {
    let env = environ(start.env)?;
    let candidates = candidates(start.program, start.env)?;
    let program_name = start.program.as_os_str().as_bytes();
    let argv_owned: Vec<CString> = std::iter::once(Ok(cstring(program_name)?))
        .chain(start.args.iter().map(|a| cstring(a.as_bytes())))
        .collect::<std::io::Result<_>>()?;
    let cwd = start
        .cwd
        .map(|c| cstring(c.as_os_str().as_bytes()))
        .transpose()?;

    let (stdin_parent, stdin_child) = if start.stdin {
        let (r, w) = pipe()?;
        (Some(w), r)
    } else {
        (None, dev_null()?)
    };
    let (stdout_parent, stdout_child) = pipe()?;
    let (stderr_parent, stderr_child) = pipe()?;

    let mut argv: Vec<*const libc::c_char> = argv_owned.iter().map(|c| c.as_ptr()).collect();
    argv.push(std::ptr::null());
    let sh_argv: Vec<Vec<*const libc::c_char>> = candidates
        .iter()
        .map(|candidate| {
            [SH.as_ptr(), candidate.as_ptr()]
                .into_iter()
                .chain(argv_owned[1..].iter().map(|c| c.as_ptr()))
                .chain([std::ptr::null()])
                .collect()
        })
        .collect();
    let mut envp: Vec<*const libc::c_char> = env.iter().map(|c| c.as_ptr()).collect();
    envp.push(std::ptr::null());
    let pre = start.pre_exec;
    let mut args = ChildArgs {
        candidates,
        argv,
        sh_argv,
        envp,
        cwd,
        stdio: [
            stdin_child.as_raw_fd(),
            stdout_child.as_raw_fd(),
            stderr_child.as_raw_fd(),
        ],
        no_new_privs: pre.no_new_privs,
        limits: pre
            .limits
            .iter()
            .map(|l| {
                (
                    l.resource as libc::c_long,
                    RLimit64 {
                        cur: l.soft,
                        max: l.hard,
                    },
                )
            })
            .collect(),
        landlock: pre.landlock.as_ref().map(|fd| fd.as_raw_fd()),
        // SAFETY: an all-zero `sigset_t` is a valid (empty) set; it is
        // overwritten below before the child reads it.
        mask: unsafe { std::mem::zeroed() },
        error: AtomicI32::new(0),
    };
    let mut stack: Vec<u8> = Vec::with_capacity(STACK);

    // SAFETY: `sigfillset` fills a set this frame owns; `pthread_sigmask`
    // blocks every signal in this thread (the child starts with them
    // blocked, so no handler of the parent's runs in it before it resets
    // them) and stores the previous mask in `args.mask`, restored below on
    // every path.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut args.mask);
    }
    let mut pidfd: libc::c_int = -1;
    // The top of the stack, 16-byte aligned (stacks grow down on every
    // architecture Linux runs this on but PA-RISC, which Rust lacks).
    let top = (stack.as_mut_ptr() as usize + STACK) & !15;
    // SAFETY: `clone(CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD)` runs
    // `child_main(&args)` in a new process on `stack` (allocated above,
    // `STACK` bytes, alive until this function returns) and suspends this
    // thread until the child execs or exits; only then does `clone` return
    // here, so `args`, `argv`, `envp`, the descriptors and the stack all
    // outlive the child's use of them. `child_main` upholds the rules of a
    // vfork child (see its comment). `CLONE_PIDFD` writes the child's
    // pidfd (close-on-exec) into `pidfd`.
    let pid = unsafe {
        libc::clone(
            child_main,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD,
            &mut args as *mut ChildArgs as *mut libc::c_void,
            &mut pidfd as *mut libc::c_int,
        )
    };
    let clone_error = std::io::Error::last_os_error();
    // SAFETY: restores this thread's mask saved above.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &args.mask, std::ptr::null_mut());
    }
    drop(stack);
    if pid == -1 {
        return Err(match clone_error.raw_os_error() {
            Some(libc::EINVAL | libc::ENOSYS) => std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                format!("clone with CLONE_PIDFD: {clone_error}"),
            ),
            _ => clone_error,
        });
    }
    // SAFETY: `clone` succeeded, so `pidfd` is a new descriptor owned here.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    drop((stdin_child, stdout_child, stderr_child));
    let mut spawned = Spawned {
        pid,
        pidfd: None,
        status: None,
        stdin: None,
        stdout: None,
        stderr: None,
        detached: false,
    };
    let error = args.error.load(Ordering::Relaxed);
    if error != 0 {
        // The child has exited (it never exec'd): reap it.
        spawned.reap_blocking();
        return Err(std::io::Error::from_raw_os_error(error));
    }
    // SAFETY: the `OwnedFd` owns the pidfd, always answers that same
    // descriptor, and closes it only when the `AsyncFd` drops it.
    spawned.pidfd =
        Some(unsafe { AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE) }?);
    spawned.stdin = stdin_parent
        .map(tokio::net::unix::pipe::Sender::from_owned_fd)
        .transpose()?;
    spawned.stdout = Some(tokio::net::unix::pipe::Receiver::from_owned_fd(
        stdout_parent,
    )?);
    spawned.stderr = Some(tokio::net::unix::pipe::Receiver::from_owned_fd(
        stderr_parent,
    )?);
    Ok(spawned)
}

impl Spawned {
    pub(crate) fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// Reaps the child if it has exited.
    fn try_reap(&mut self) -> std::io::Result<Option<ExitStatus>> {
        if let Some(status) = self.status {
            return Ok(Some(status));
        }
        let mut raw: libc::c_int = 0;
        // SAFETY: `waitpid` on this child (ours, not yet reaped) writes its
        // status into `raw`, which outlives the call.
        let rc = unsafe { libc::waitpid(self.pid, &mut raw, libc::WNOHANG) };
        match rc {
            -1 => Err(std::io::Error::last_os_error()),
            0 => Ok(None),
            _ => {
                let status = ExitStatus::from_raw(raw);
                self.status = Some(status);
                Ok(Some(status))
            }
        }
    }

    fn reap_blocking(&mut self) {
        if self.status.is_some() {
            return;
        }
        let mut raw: libc::c_int = 0;
        // SAFETY: as in `try_reap`, without WNOHANG: the child has exited
        // or has been sent SIGKILL, so this returns promptly.
        let rc = unsafe { libc::waitpid(self.pid, &mut raw, 0) };
        if rc > 0 {
            self.status = Some(ExitStatus::from_raw(raw));
        }
    }

    /// Waits for the child to exit and reaps it.
    pub(crate) async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.try_reap()? {
                return Ok(status);
            }
            let Some(pidfd) = &self.pidfd else {
                self.reap_blocking();
                return self
                    .status
                    .ok_or_else(|| std::io::Error::other("the child could not be reaped"));
            };
            let mut ready = pidfd.readable().await?;
            ready.clear_ready();
        }
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if self.status.is_some() {
            return;
        }
        // SAFETY: `kill` sends a signal to our own unreaped child: its pid
        // cannot have been reused while it is unreaped.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
        }
        if matches!(self.try_reap(), Ok(Some(_))) {
            return;
        }
        if self.detached {
            self.reap_blocking();
            return;
        }
        // Killed but not yet gone: reap it off this thread.
        let pid = self.pid;
        let pidfd = self.pidfd.take();
        let mut orphan = Spawned {
            pid,
            pidfd,
            status: None,
            stdin: None,
            stdout: None,
            stderr: None,
            detached: true,
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move {
                    let _ = orphan.wait().await;
                });
            }
            Err(_) => orphan.reap_blocking(),
        }
    }
}

/// `pre`'s setup as a `pre_exec` hook of `cmd` (the `Command` path:
/// [`crate::spawn_child`], and a kernel without `CLONE_PIDFD`).
pub(crate) fn install_pre_exec(cmd: &mut tokio::process::Command, pre: &PreExec) {
    let no_new_privs = pre.no_new_privs;
    let limits: Vec<(libc::c_long, RLimit64)> = pre
        .limits
        .iter()
        .map(|l| {
            (
                l.resource as libc::c_long,
                RLimit64 {
                    cur: l.soft,
                    max: l.hard,
                },
            )
        })
        .collect();
    let ruleset = pre.landlock.clone();
    let child = move || -> std::io::Result<()> {
        let landlock = ruleset.as_ref().map(|fd| fd.as_raw_fd());
        // SAFETY: this runs in the forked child before exec (see below).
        unsafe { apply_pre_exec(no_new_privs, &limits, landlock) }
            .map_err(std::io::Error::from_raw_os_error)
    };
    // SAFETY: `pre_exec` closures run in the child between fork and exec,
    // where only async-signal-safe operations are sound (another thread of
    // the parent may have held the allocator's or any other lock at the
    // fork). The closure above:
    // - makes only raw `syscall(2)`s (`prctl`, `prlimit64`,
    //   `landlock_restrict_self`, in `apply_pre_exec`), which take no lock
    //   and allocate nothing;
    // - reads only what it owns: an `Arc<OwnedFd>` and a `Vec` built
    //   before the fork, read by reference (no allocation, no drop in the
    //   child);
    // - on failure builds an `io::Error` from errno (`from_raw_os_error`
    //   stores the code inline, no allocation); std then writes that code
    //   to its status pipe and the child `_exit`s, so the spawn fails with
    //   it.
    // The closure is never dropped in the child (exec replaces the image,
    // or the child exits). The ruleset descriptor is close-on-exec (the
    // kernel opens rulesets so), so the program never inherits it.
    // Landlock restricts only the calling thread: after fork the child has
    // one thread, so the whole child, and everything it execs or forks, is
    // confined.
    unsafe {
        cmd.pre_exec(child);
    }
}
