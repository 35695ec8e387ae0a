//! The one way agentkit starts a child process: server tools, the `shell`
//! built-in, hook commands, pack host tasks and stdio MCP servers all go
//! through a [`ChildSpec`].
//!
//! Every child gets a scrubbed environment ([`PASSED_ENV`], the names the
//! spec passes through, and the variables it sets; nothing else of the
//! host's), leads its own process group, and that whole group is killed
//! (SIGKILL) on every way out: the child's exit (so background processes
//! die with it and no pipe a grandchild holds keeps the call open), a
//! timeout, a cancel, or the future or handle being dropped.
//!
//! Two forms: [`run_child`] runs a child to the end with its input on
//! stdin and its output read up to a cap; [`spawn_child`] starts a
//! long-lived child with piped stdio and hands back a [`LiveChild`] whose
//! pipes the caller takes (an MCP transport, say).
//!
//! A spec may carry a [`Confinement`]: what readies the child before the
//! spawn (the harness's sandbox implements it): variables, and a
//! [`PreExec`] of plain data the child applies to itself between its
//! spawn and its exec (`no_new_privs`, resource limits, a Landlock
//! ruleset descriptor); what it returns lives as long as the child. The
//! runner knows no more of it, so the sandbox's rules stay with the
//! harness that reads them from the agent's configuration.
//!
//! On Linux, [`run_child`] starts its child without forking the host
//! (`spawn.rs`: a `CLONE_VM | CLONE_VFORK` clone, as `posix_spawn` does,
//! with the [`PreExec`] done in the child): the cost of a call does not
//! grow with the host's memory. [`spawn_child`] (long-lived children,
//! started rarely) and other platforms use tokio's `Command`, with the
//! same [`PreExec`] in a `pre_exec` hook.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

/// What confines a child: it readies the child before the spawn (rules
/// the child applies to itself before `exec`, a private folder, the
/// variables that name it), and what it returns is kept until the child's
/// group is killed and the run is over (the [`LiveChild`] dropped).
///
/// Implemented by the harness's sandbox; the runner calls it once per
/// spawn, with the spec's own settings in `launch`.
pub trait Confinement: fmt::Debug + Send + Sync {
    /// Readies `cmd`, what the child `launch` describes gets on top of the
    /// spec: variables, and what it does to itself before `exec`. An `Err`
    /// means the child must not start (a confinement that cannot be met),
    /// and is what [`run_child`] and [`spawn_child`] answer.
    fn prepare(&self, launch: &Launch<'_>, cmd: &mut PreExec) -> std::io::Result<Confined>;
}

/// What a [`Confinement`] adds to one child: variables set for it (they
/// win over the spec's), and plain data the child applies to itself
/// between its spawn and its `exec`, with raw system calls on Linux, in
/// this order: `no_new_privs`, each resource limit, then
/// `landlock_restrict_self` on the ruleset descriptor. Elsewhere only the
/// variables apply.
#[derive(Debug, Default)]
pub struct PreExec {
    pub(crate) env: Vec<(OsString, OsString)>,
    pub(crate) no_new_privs: bool,
    pub(crate) limits: Vec<Limit>,
    #[cfg(unix)]
    pub(crate) landlock: Option<Arc<std::os::fd::OwnedFd>>,
}

/// One resource limit of a [`PreExec`]: `RLIMIT_*` number, soft and hard
/// values (set with `prlimit64`; lowering needs no privilege).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub resource: i32,
    pub soft: u64,
    pub hard: u64,
}

impl PreExec {
    /// A variable set for the child (it wins over the spec's).
    pub fn env(&mut self, name: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut PreExec {
        self.env
            .push((name.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// `prctl(PR_SET_NO_NEW_PRIVS)` in the child: no setuid escalation.
    pub fn no_new_privs(&mut self) -> &mut PreExec {
        self.no_new_privs = true;
        self
    }

    /// A resource limit set in the child.
    pub fn limit(&mut self, limit: Limit) -> &mut PreExec {
        self.limits.push(limit);
        self
    }

    /// `landlock_restrict_self(ruleset)` in the child, last. The ruleset
    /// is the caller's (built once, shared by many children: the kernel
    /// copies it into each child's domain); it must be close-on-exec, as
    /// the kernel opens rulesets.
    #[cfg(unix)]
    pub fn landlock(&mut self, ruleset: Arc<std::os::fd::OwnedFd>) -> &mut PreExec {
        self.landlock = Some(ruleset);
        self
    }

    /// Anything for the child to do before `exec`?
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn has_setup(&self) -> bool {
        #[cfg(unix)]
        let landlock = self.landlock.is_some();
        #[cfg(not(unix))]
        let landlock = false;
        self.no_new_privs || !self.limits.is_empty() || landlock
    }
}

/// What a [`Confinement`] keeps alive while its child runs (a ruleset
/// descriptor, a temporary folder removed on drop).
pub type Confined = Box<dyn fmt::Debug + Send + Sync>;

/// The child a spec starts, as a [`Confinement`] sees it: the program as
/// given, the folder it starts in, and its whole environment (later
/// entries win).
#[derive(Debug, Clone, Copy)]
pub struct Launch<'a> {
    pub program: &'a Path,
    pub cwd: Option<&'a Path>,
    pub env: &'a [(OsString, OsString)],
}

impl Launch<'_> {
    /// The value the child gets for variable `name`, if any.
    pub fn var(&self, name: &str) -> Option<&OsStr> {
        self.env
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_os_str())
    }
}

/// Host variables every child sees when the host has them; everything else
/// of the host's environment is scrubbed unless the spec passes it through.
pub const PASSED_ENV: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT"];

/// The default cap on each of stdout and stderr.
pub const DEFAULT_OUTPUT_CAP: usize = 1024 * 1024;

/// What to start and how: program, arguments, folder, stdin, environment,
/// timeout and output caps. Built with chained setters:
///
/// ```
/// # use agentkit_plumbing::ChildSpec;
/// # use std::time::Duration;
/// let spec = ChildSpec::new("sh")
///     .args(["-c", "cat"])
///     .stdin(b"hello".to_vec())
///     .pass_env(["GITHUB_TOKEN"])
///     .env("AGENTKIT_HOOK", "audit")
///     .timeout(Duration::from_secs(10));
/// ```
#[derive(Clone)]
pub struct ChildSpec {
    program: PathBuf,
    args: Vec<OsString>,
    cwd: Option<PathBuf>,
    stdin: Option<Vec<u8>>,
    pass_env: Vec<String>,
    vars: Vec<(OsString, OsString)>,
    host_env: Option<Vec<(OsString, OsString)>>,
    timeout: Option<Duration>,
    stdout_cap: usize,
    stderr_cap: usize,
    end_on_overflow: bool,
    cancel: Option<CancellationToken>,
    confinement: Option<Arc<dyn Confinement>>,
}

impl std::fmt::Debug for ChildSpec {
    // Variables carry secrets (bridge tokens, MCP servers' keys): only
    // their names are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildSpec")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("cwd", &self.cwd)
            .field("pass_env", &self.pass_env)
            .field(
                "vars",
                &self.vars.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("timeout", &self.timeout)
            .field("stdout_cap", &self.stdout_cap)
            .field("stderr_cap", &self.stderr_cap)
            .field("confinement", &self.confinement)
            .finish_non_exhaustive()
    }
}

impl ChildSpec {
    /// `program`, looked up on the child's `PATH` when it is a bare name.
    pub fn new(program: impl Into<PathBuf>) -> ChildSpec {
        ChildSpec {
            program: program.into(),
            args: Vec::new(),
            cwd: None,
            stdin: None,
            pass_env: Vec::new(),
            vars: Vec::new(),
            host_env: None,
            timeout: None,
            stdout_cap: DEFAULT_OUTPUT_CAP,
            stderr_cap: DEFAULT_OUTPUT_CAP,
            end_on_overflow: false,
            cancel: None,
            confinement: None,
        }
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> ChildSpec {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> ChildSpec
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// The folder the child starts in (the host's current one otherwise).
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> ChildSpec {
        self.cwd = Some(cwd.into());
        self
    }

    /// Bytes written to the child's stdin, which is then closed
    /// ([`run_child`]; without it stdin is empty). A child that exits
    /// without reading them is fine.
    pub fn stdin(mut self, bytes: Vec<u8>) -> ChildSpec {
        self.stdin = Some(bytes);
        self
    }

    /// Host variables passed through by name, beyond [`PASSED_ENV`], when
    /// the host has them.
    pub fn pass_env<I, S>(mut self, names: I) -> ChildSpec
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.pass_env.extend(names.into_iter().map(Into::into));
        self
    }

    /// A variable set for the child (it wins over a passed-through one).
    pub fn env(mut self, name: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> ChildSpec {
        self.vars
            .push((name.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Variables set for the child, in order.
    pub fn envs<I, K, V>(mut self, vars: I) -> ChildSpec
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.vars.extend(
            vars.into_iter()
                .map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_owned())),
        );
        self
    }

    /// The host environment pass-through names are read from, instead of
    /// this process's (tests, and embedders that keep their own).
    pub fn host_env<I, K, V>(mut self, vars: I) -> ChildSpec
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.host_env = Some(
            vars.into_iter()
                .map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_owned()))
                .collect(),
        );
        self
    }

    /// How long [`run_child`] lets the child (and reading its output) run
    /// before it kills the group. No limit by default.
    pub fn timeout(mut self, timeout: Duration) -> ChildSpec {
        self.timeout = Some(timeout);
        self
    }

    /// How much of stdout [`run_child`] keeps; the rest is read and
    /// dropped (the output is marked truncated).
    pub fn stdout_cap(mut self, bytes: usize) -> ChildSpec {
        self.stdout_cap = bytes;
        self
    }

    /// How much of stderr [`run_child`] keeps.
    pub fn stderr_cap(mut self, bytes: usize) -> ChildSpec {
        self.stderr_cap = bytes;
        self
    }

    /// Stdout past its cap ends the run at once ([`ChildExit::OutputOverflow`])
    /// instead of being dropped while the child goes on.
    pub fn end_on_overflow(mut self) -> ChildSpec {
        self.end_on_overflow = true;
        self
    }

    /// Cancelling `token` ends [`run_child`] and kills the group.
    pub fn cancel_on(mut self, token: CancellationToken) -> ChildSpec {
        self.cancel = Some(token);
        self
    }

    /// Confines the child: `confinement` readies its command before the
    /// spawn, and what it returns lives until the run ends or the
    /// [`LiveChild`] is dropped.
    pub fn confine(mut self, confinement: Arc<dyn Confinement>) -> ChildSpec {
        self.confinement = Some(confinement);
        self
    }

    /// The program as given.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// The folder the child starts in, when the spec sets one.
    pub fn current_dir(&self) -> Option<&Path> {
        self.cwd.as_deref()
    }

    /// The variables the child starts with: the passed-through host ones
    /// it has, then the spec's own (later wins).
    pub fn environment(&self) -> Vec<(OsString, OsString)> {
        let host = |name: &str| -> Option<OsString> {
            match &self.host_env {
                Some(vars) => vars
                    .iter()
                    .find(|(k, _)| k == OsStr::new(name))
                    .map(|(_, v)| v.clone()),
                None => std::env::var_os(name),
            }
        };
        let mut env: Vec<(OsString, OsString)> = PASSED_ENV
            .iter()
            .copied()
            .chain(self.pass_env.iter().map(String::as_str))
            .filter_map(|name| host(name).map(|v| (OsString::from(name), v)))
            .collect();
        env.extend(self.vars.iter().cloned());
        env
    }

    /// The child's whole environment (the confinement's variables last),
    /// what it does before `exec`, and what its confinement keeps alive
    /// while it runs.
    fn prepared(&self) -> std::io::Result<(Environment, PreExec, Option<Confined>)> {
        let mut env = self.environment();
        let mut pre = PreExec::default();
        let confined = match &self.confinement {
            Some(confinement) => {
                let launch = Launch {
                    program: &self.program,
                    cwd: self.cwd.as_deref(),
                    env: &env,
                };
                Some(confinement.prepare(&launch, &mut pre)?)
            }
            None => None,
        };
        env.append(&mut pre.env);
        Ok((env, pre, confined))
    }

    /// The `Command` of this spec (the path of [`spawn_child`] and of
    /// platforms without `spawn.rs`). Drop it right after the spawn: its
    /// `pre_exec` hook holds the ruleset descriptor.
    fn command(
        &self,
        env: &[(OsString, OsString)],
        pre: &PreExec,
        stdin: Stdio,
    ) -> std::io::Result<Command> {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(cwd) = &self.cwd {
            cmd.current_dir(cwd);
        }
        #[cfg(unix)]
        cmd.process_group(0);
        #[cfg(target_os = "linux")]
        if pre.has_setup() {
            crate::spawn::install_pre_exec(&mut cmd, pre);
        }
        #[cfg(not(target_os = "linux"))]
        let _ = pre;
        Ok(cmd)
    }
}

/// A child's whole environment, in order (later entries win).
type Environment = Vec<(OsString, OsString)>;

/// What a child wrote on one stream, up to its cap.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    pub bytes: Vec<u8>,
    /// The child wrote more than the cap; the rest was dropped.
    pub truncated: bool,
}

impl Captured {
    /// The bytes as text (lossy), trimmed.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).trim().to_owned()
    }
}

/// How a [`run_child`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildExit {
    /// The child exited (or was killed by a signal from elsewhere).
    Exited(ExitStatus),
    /// The timeout passed; the group was killed.
    TimedOut,
    /// The spec's cancel token fired; the group was killed.
    Cancelled,
    /// Stdout passed its cap under [`ChildSpec::end_on_overflow`]; the
    /// group was killed.
    OutputOverflow,
}

/// A finished [`run_child`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildOutcome {
    pub exit: ChildExit,
    pub stdout: Captured,
    pub stderr: Captured,
}

impl ChildOutcome {
    /// Exited with status 0.
    pub fn success(&self) -> bool {
        matches!(self.exit, ChildExit::Exited(s) if s.success())
    }

    /// The timeout ended it.
    pub fn timed_out(&self) -> bool {
        self.exit == ChildExit::TimedOut
    }

    /// How it ended, with what it wrote on stderr when there is any, for
    /// a log line: `exited with status 3: city is required`.
    pub fn describe(&self) -> String {
        let stderr = self.stderr.text();
        if stderr.is_empty() {
            self.exit.to_string()
        } else {
            format!("{}: {stderr}", self.exit)
        }
    }
}

/// `exited with status 3`, `killed by signal 9`, `timed out`.
impl std::fmt::Display for ChildExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChildExit::Exited(status) => match status.code() {
                Some(code) => write!(f, "exited with status {code}"),
                None => match signal_of(*status) {
                    Some(signal) => write!(f, "killed by signal {signal}"),
                    None => write!(f, "exited ({status})"),
                },
            },
            ChildExit::TimedOut => f.write_str("timed out"),
            ChildExit::Cancelled => f.write_str("cancelled"),
            ChildExit::OutputOverflow => f.write_str("output exceeded its cap"),
        }
    }
}

/// The signal that ended `status`, where the platform has signals.
pub fn signal_of(status: ExitStatus) -> Option<i32> {
    #[cfg(unix)]
    {
        std::os::unix::process::ExitStatusExt::signal(&status)
    }
    #[cfg(not(unix))]
    {
        let _ = status;
        None
    }
}

/// Runs `spec` to the end: writes its stdin, reads stdout and stderr up to
/// their caps, waits for the exit, and kills the process group however it
/// ends (also when this future is dropped). `Err` only when the program
/// cannot be started or waited for.
pub async fn run_child(spec: &ChildSpec) -> std::io::Result<ChildOutcome> {
    let (env, pre, _confined) = spec.prepared()?;
    let mut child = Running::start(spec, &env, &pre)?;
    drop(pre);
    let group = ProcessGroup::of_pid(child.id());

    let stdin = child.take_stdin();
    let stdout = child.take_stdout();
    let stderr = child.take_stderr();
    let input = spec.stdin.as_deref().unwrap_or_default();
    let (stdout_cap, stderr_cap) = (spec.stdout_cap, spec.stderr_cap);
    let end_on_overflow = spec.end_on_overflow;

    let work = async {
        let feed = async {
            if let Some(mut stdin) = stdin {
                let _ = stdin.write_all(input).await;
                let _ = stdin.shutdown().await;
            }
            Ok::<(), Overflow>(())
        };
        let out = async {
            let captured = match stdout {
                Some(s) => read_capped(s, stdout_cap, end_on_overflow).await,
                None => Captured::default(),
            };
            if end_on_overflow && captured.truncated {
                Err(Overflow)
            } else {
                Ok(captured)
            }
        };
        let err = async {
            Ok::<_, Overflow>(match stderr {
                Some(s) => read_capped(s, stderr_cap, false).await,
                None => Captured::default(),
            })
        };
        let wait = async {
            let status = child.wait().await;
            // Stragglers (background processes of the child) die with it;
            // that also closes the pipes they inherited.
            group.kill();
            Ok::<_, Overflow>(status)
        };
        tokio::try_join!(feed, out, err, wait).map(|((), out, err, status)| (out, err, status))
    };
    let cancelled = async {
        match &spec.cancel {
            Some(token) => token.cancelled().await,
            None => std::future::pending().await,
        }
    };
    let deadline = async {
        match spec.timeout {
            Some(timeout) => tokio::time::sleep(timeout).await,
            None => std::future::pending().await,
        }
    };

    let ended = tokio::select! {
        biased;
        () = cancelled => Err(ChildExit::Cancelled),
        () = deadline => Err(ChildExit::TimedOut),
        r = work => r.map_err(|Overflow| ChildExit::OutputOverflow),
    };
    group.kill();
    match ended {
        Ok((stdout, stderr, status)) => Ok(ChildOutcome {
            exit: ChildExit::Exited(status?),
            stdout,
            stderr,
        }),
        Err(exit) => Ok(ChildOutcome {
            exit,
            stdout: Captured::default(),
            stderr: Captured::default(),
        }),
    }
}

/// Starts `spec` as a long-lived child with stdin, stdout and stderr piped
/// (the spec's stdin bytes, timeout and caps do not apply: the caller owns
/// the pipes and the lifetime). Dropping the [`LiveChild`] kills its group.
pub fn spawn_child(spec: &ChildSpec) -> std::io::Result<LiveChild> {
    let (env, pre, confined) = spec.prepared()?;
    let mut cmd = spec.command(&env, &pre, Stdio::piped())?;
    let child = cmd.spawn()?;
    drop(cmd);
    let group = ProcessGroup::of_pid(child.id());
    Ok(LiveChild {
        child,
        group,
        _confined: confined,
    })
}

/// A running child from [`spawn_child`]. Its process group is killed when
/// it is dropped, on [`LiveChild::kill`] and at the end of
/// [`LiveChild::close`].
#[derive(Debug)]
pub struct LiveChild {
    child: tokio::process::Child,
    group: ProcessGroup,
    // Last: what it keeps (a temporary folder) goes once the group is
    // killed.
    _confined: Option<Confined>,
}

impl LiveChild {
    /// The child's process id, while it runs.
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    pub fn take_stdin(&mut self) -> Option<tokio::process::ChildStdin> {
        self.child.stdin.take()
    }

    pub fn take_stdout(&mut self) -> Option<tokio::process::ChildStdout> {
        self.child.stdout.take()
    }

    pub fn take_stderr(&mut self) -> Option<tokio::process::ChildStderr> {
        self.child.stderr.take()
    }

    /// Waits for the child to exit (its group lives on until killed).
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// Kills the whole process group (SIGKILL).
    pub fn kill(&self) {
        self.group.kill();
    }

    /// Gives the child `grace` to exit by itself (the caller has asked it
    /// to, by closing its stdin, say), then kills the group and reaps the
    /// child. True when it exited within the grace.
    pub async fn close(mut self, grace: Duration) -> bool {
        let exited = tokio::time::timeout(grace, self.child.wait()).await.is_ok();
        self.group.kill();
        let _ = self.child.wait().await;
        exited
    }
}

/// The child of a [`run_child`]: started by `spawn.rs` (Linux), or by
/// tokio's `Command` (elsewhere, or a kernel without `CLONE_PIDFD`).
enum Running {
    Command(tokio::process::Child),
    #[cfg(target_os = "linux")]
    Cloned(crate::spawn::Spawned),
}

type Reader = Box<dyn AsyncRead + Unpin + Send>;
type Writer = Box<dyn tokio::io::AsyncWrite + Unpin + Send>;

impl Running {
    fn start(
        spec: &ChildSpec,
        env: &[(OsString, OsString)],
        pre: &PreExec,
    ) -> std::io::Result<Running> {
        #[cfg(target_os = "linux")]
        {
            let start = crate::spawn::Start {
                program: &spec.program,
                args: &spec.args,
                env,
                cwd: spec.cwd.as_deref(),
                stdin: spec.stdin.is_some(),
                pre_exec: pre,
            };
            match crate::spawn::spawn(&start) {
                Ok(child) => return Ok(Running::Cloned(child)),
                Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {}
                Err(e) => return Err(e),
            }
        }
        let stdin = if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        };
        let mut cmd = spec.command(env, pre, stdin)?;
        let child = cmd.spawn()?;
        drop(cmd);
        Ok(Running::Command(child))
    }

    fn id(&self) -> Option<u32> {
        match self {
            Running::Command(child) => child.id(),
            #[cfg(target_os = "linux")]
            Running::Cloned(child) => u32::try_from(child.pid()).ok(),
        }
    }

    fn take_stdin(&mut self) -> Option<Writer> {
        match self {
            Running::Command(child) => child.stdin.take().map(|s| Box::new(s) as Writer),
            #[cfg(target_os = "linux")]
            Running::Cloned(child) => child.stdin.take().map(|s| Box::new(s) as Writer),
        }
    }

    fn take_stdout(&mut self) -> Option<Reader> {
        match self {
            Running::Command(child) => child.stdout.take().map(|s| Box::new(s) as Reader),
            #[cfg(target_os = "linux")]
            Running::Cloned(child) => child.stdout.take().map(|s| Box::new(s) as Reader),
        }
    }

    fn take_stderr(&mut self) -> Option<Reader> {
        match self {
            Running::Command(child) => child.stderr.take().map(|s| Box::new(s) as Reader),
            #[cfg(target_os = "linux")]
            Running::Cloned(child) => child.stderr.take().map(|s| Box::new(s) as Reader),
        }
    }

    async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        match self {
            Running::Command(child) => child.wait().await,
            #[cfg(target_os = "linux")]
            Running::Cloned(child) => child.wait().await,
        }
    }
}

/// Stdout went past its cap under `end_on_overflow`.
#[derive(Debug)]
struct Overflow;

/// Reads `r` to its end keeping the first `cap` bytes, so the child never
/// blocks on a full pipe; with `stop`, returns as soon as the cap is
/// passed.
async fn read_capped(mut r: impl AsyncRead + Unpin, cap: usize, stop: bool) -> Captured {
    let mut out = Captured::default();
    let mut buf = [0u8; 8192];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => return out,
            Ok(n) => {
                let room = cap.saturating_sub(out.bytes.len());
                out.bytes.extend_from_slice(&buf[..n.min(room)]);
                if n > room {
                    out.truncated = true;
                    if stop {
                        return out;
                    }
                }
            }
        }
    }
}

/// A child's process group (it leads its own), killed on every way out.
#[derive(Debug)]
struct ProcessGroup {
    #[cfg(unix)]
    pgid: Option<nix::unistd::Pid>,
}

impl ProcessGroup {
    /// The group `id` leads (the child's pid: it called `setpgid(0, 0)`).
    #[cfg(unix)]
    fn of_pid(id: Option<u32>) -> ProcessGroup {
        let pgid = id
            .and_then(|id| i32::try_from(id).ok())
            .map(nix::unistd::Pid::from_raw);
        ProcessGroup { pgid }
    }

    #[cfg(not(unix))]
    fn of_pid(_id: Option<u32>) -> ProcessGroup {
        ProcessGroup {}
    }

    fn kill(&self) {
        #[cfg(unix)]
        if let Some(pgid) = self.pgid {
            // ESRCH (the group is already gone) is the common case.
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(all(test, unix))]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn sh(script: &str) -> ChildSpec {
        ChildSpec::new("sh").args(["-c", script])
    }

    /// The host environment the tests pretend to run in.
    fn host() -> Vec<(&'static str, String)> {
        vec![
            ("PATH", std::env::var("PATH").unwrap_or_default()),
            ("AGENTKIT_TEST_SECRET", "hunter2".to_owned()),
            ("AGENTKIT_TEST_PASS", "visible".to_owned()),
            ("HOME", "/nowhere".to_owned()),
        ]
    }

    fn env_of(outcome: &ChildOutcome) -> Vec<String> {
        let mut names: Vec<String> = String::from_utf8_lossy(&outcome.stdout.bytes)
            .lines()
            .filter_map(|l| l.split_once('=').map(|(k, _)| k.to_owned()))
            .collect();
        names.sort();
        names
    }

    #[tokio::test]
    async fn the_environment_is_scrubbed_to_the_passed_names_and_the_set_vars() {
        let spec = ChildSpec::new("env")
            .host_env(host())
            .pass_env(["AGENTKIT_TEST_PASS", "AGENTKIT_TEST_UNSET"])
            .env("AGENTKIT_HOOK", "h");
        let out = run_child(&spec).await.unwrap();
        assert!(out.success(), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout.bytes).into_owned();
        assert_eq!(
            env_of(&out),
            ["AGENTKIT_HOOK", "AGENTKIT_TEST_PASS", "HOME", "PATH"],
            "{text}"
        );
        assert!(text.contains("AGENTKIT_TEST_PASS=visible"));
        assert!(text.contains("HOME=/nowhere"));
        assert!(!text.contains("hunter2"));
    }

    #[tokio::test]
    async fn a_live_child_gets_the_same_environment() {
        let spec = ChildSpec::new("env")
            .host_env(host())
            .pass_env(["AGENTKIT_TEST_PASS"]);
        let mut child = spawn_child(&spec).unwrap();
        let mut stdout = child.take_stdout().unwrap();
        let mut text = String::new();
        stdout.read_to_string(&mut text).await.unwrap();
        assert!(child.wait().await.unwrap().success());
        assert!(text.contains("AGENTKIT_TEST_PASS=visible"), "{text}");
        assert!(!text.contains("AGENTKIT_TEST_SECRET"), "{text}");
    }

    #[tokio::test]
    async fn stdin_goes_in_and_output_is_capped_with_a_truncated_flag() {
        let out = run_child(
            &sh("cat; echo oops >&2")
                .stdin(b"0123456789".to_vec())
                .stdout_cap(4),
        )
        .await
        .unwrap();
        assert!(out.success());
        assert_eq!(
            out.stdout,
            Captured {
                bytes: b"0123".to_vec(),
                truncated: true
            }
        );
        assert_eq!(out.stderr.text(), "oops");
        assert!(!out.stderr.truncated);

        // A flood ends the run at once under `end_on_overflow`.
        let started = std::time::Instant::now();
        let out = run_child(
            &sh("yes")
                .stdout_cap(100)
                .end_on_overflow()
                .timeout(Duration::from_secs(20)),
        )
        .await
        .unwrap();
        assert_eq!(out.exit, ChildExit::OutputOverflow);
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    /// True once `pid` is gone or a zombie waiting for its new parent.
    async fn gone(pid: i32) -> bool {
        for _ in 0..100 {
            match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
                Err(_) => return true,
                Ok(stat)
                    if stat
                        .rsplit(')')
                        .next()
                        .is_some_and(|s| s.trim_start().starts_with('Z')) =>
                {
                    return true;
                }
                Ok(_) => {}
            }
            if nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_err() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    async fn read_pid(path: &Path) -> i32 {
        for _ in 0..100 {
            if let Ok(text) = std::fs::read_to_string(path)
                && let Ok(pid) = text.trim().parse()
            {
                return pid;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("no pid in {}", path.display());
    }

    #[tokio::test]
    async fn a_timeout_kills_the_whole_group_grandchildren_included() {
        let dir = tempfile::tempdir().unwrap();
        let spec = sh("sleep 30 & echo $! > grandchild.pid; sleep 30")
            .cwd(dir.path())
            .timeout(Duration::from_millis(300));
        let started = std::time::Instant::now();
        let out = run_child(&spec).await.unwrap();
        assert!(out.timed_out(), "{out:?}");
        assert!(started.elapsed() < Duration::from_secs(3));
        let grandchild = read_pid(&dir.path().join("grandchild.pid")).await;
        assert!(gone(grandchild).await, "grandchild {grandchild} survived");
    }

    #[tokio::test]
    async fn cancel_and_drop_kill_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let token = CancellationToken::new();
        let spec = sh("sleep 30 & echo $! > a.pid; sleep 30")
            .cwd(dir.path())
            .cancel_on(token.clone());
        let run = tokio::spawn(async move { run_child(&spec).await });
        let a = read_pid(&dir.path().join("a.pid")).await;
        token.cancel();
        assert_eq!(run.await.unwrap().unwrap().exit, ChildExit::Cancelled);
        assert!(gone(a).await, "{a} survived a cancel");

        let spec = sh("sleep 30 & echo $! > b.pid; sleep 30").cwd(dir.path());
        let run = tokio::spawn(async move { run_child(&spec).await });
        let b = read_pid(&dir.path().join("b.pid")).await;
        run.abort();
        let _ = run.await;
        assert!(gone(b).await, "{b} survived the call being dropped");

        let live =
            spawn_child(&sh("sleep 30 & echo $! > c.pid; sleep 30").cwd(dir.path())).unwrap();
        let c = read_pid(&dir.path().join("c.pid")).await;
        drop(live);
        assert!(gone(c).await, "{c} survived its handle");
    }

    #[tokio::test]
    async fn close_waits_the_grace_then_kills_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let mut live =
            spawn_child(&sh("sleep 30 & echo $! > d.pid; read line; exit 0").cwd(dir.path()))
                .unwrap();
        let d = read_pid(&dir.path().join("d.pid")).await;
        drop(live.take_stdin());
        assert!(
            live.close(Duration::from_secs(5)).await,
            "exits once stdin closes"
        );
        assert!(gone(d).await, "{d} outlived close");

        let live = spawn_child(&sh("exec sleep 30")).unwrap();
        let started = std::time::Instant::now();
        assert!(!live.close(Duration::from_millis(100)).await);
        assert!(started.elapsed() < Duration::from_secs(3));
    }

    #[tokio::test]
    async fn a_missing_program_is_an_error_and_exits_read_plainly() {
        let err = run_child(&ChildSpec::new("agentkit-no-such-program"))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
        let out = run_child(&sh("exit 3")).await.unwrap();
        assert_eq!(out.exit.to_string(), "exited with status 3");
        assert_eq!(out.describe(), "exited with status 3");
        let out = run_child(&sh("echo no >&2; exit 3")).await.unwrap();
        assert_eq!(out.describe(), "exited with status 3: no");
        let out = run_child(&sh("kill -9 $$")).await.unwrap();
        assert_eq!(out.exit.to_string(), "killed by signal 9");
    }

    /// A confinement that gives the child a folder of its own (named in
    /// `PRIVATE_DIR`), records what it was shown, and refuses when asked.
    #[derive(Debug, Default)]
    struct PrivateDir {
        refuse: bool,
        seen: std::sync::Mutex<Vec<String>>,
    }

    impl Confinement for PrivateDir {
        fn prepare(&self, launch: &Launch<'_>, cmd: &mut PreExec) -> std::io::Result<Confined> {
            if self.refuse {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::Unsupported,
                    "this host cannot confine the child",
                ));
            }
            let home = launch.var("HOME").map(|v| v.to_string_lossy().into_owned());
            self.seen.lock().unwrap().push(format!(
                "{} in {:?}, HOME={home:?}",
                launch.program.display(),
                launch.cwd
            ));
            let dir = tempfile::tempdir()?;
            cmd.env("PRIVATE_DIR", dir.path());
            Ok(Box::new(dir))
        }
    }

    #[tokio::test]
    async fn a_confinement_readies_the_command_and_what_it_keeps_lives_as_long_as_the_child() {
        let confinement = Arc::new(PrivateDir::default());
        let cwd = tempfile::tempdir().unwrap();
        let spec = sh("test -d \"$PRIVATE_DIR\" && echo \"$PRIVATE_DIR\"")
            .host_env(host())
            .cwd(cwd.path())
            .confine(confinement.clone());
        let out = run_child(&spec).await.unwrap();
        assert!(out.success(), "{out:?}");
        let dir = PathBuf::from(out.stdout.text());
        assert!(!dir.as_os_str().is_empty());
        // Kept for the run, released once it is over.
        assert!(!dir.exists(), "{} outlived the run", dir.display());
        assert_eq!(
            *confinement.seen.lock().unwrap(),
            [format!(
                "sh in {:?}, HOME=Some(\"/nowhere\")",
                Some(cwd.path())
            )]
        );

        // A live child keeps it until the handle is dropped.
        let mut child = spawn_child(&sh("echo \"$PRIVATE_DIR\"").confine(confinement)).unwrap();
        let mut text = String::new();
        child
            .take_stdout()
            .unwrap()
            .read_to_string(&mut text)
            .await
            .unwrap();
        assert!(child.wait().await.unwrap().success());
        let dir = PathBuf::from(text.trim());
        assert!(
            dir.is_dir(),
            "{} gone while the child is held",
            dir.display()
        );
        drop(child);
        assert!(!dir.exists(), "{} outlived the live child", dir.display());
    }

    /// A confinement that only asks for `no_new_privs` and a limit.
    #[derive(Debug)]
    struct Hardened;

    impl Confinement for Hardened {
        fn prepare(&self, _: &Launch<'_>, cmd: &mut PreExec) -> std::io::Result<Confined> {
            cmd.no_new_privs().limit(Limit {
                resource: nix::libc::RLIMIT_NOFILE as i32,
                soft: 64,
                hard: 64,
            });
            cmd.env("HARDENED", "yes");
            Ok(Box::new(()))
        }
    }

    /// What the child reports of its own state: `NoNewPrivs`, the open
    /// files limit, the blocked and ignored signals (hex masks), its
    /// process group, and a variable the confinement set.
    const REPORT: &str = "grep -E '^(NoNewPrivs|SigBlk|SigIgn):' /proc/self/status; \
         echo nofile=$(ulimit -n); echo pgid=$(ps -o pgid= -p $$ | tr -d ' ') pid=$$; \
         echo hardened=$HARDENED";

    fn field<'a>(text: &'a str, name: &str) -> &'a str {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
            .unwrap_or_else(|| panic!("no {name} in {text}"))
    }

    #[tokio::test]
    async fn the_pre_exec_is_applied_and_the_child_starts_clean_on_both_paths() {
        let spec = sh(REPORT).confine(Arc::new(Hardened));
        let out = run_child(&spec).await.unwrap();
        assert!(out.success(), "{out:?}");
        let ran = String::from_utf8_lossy(&out.stdout.bytes).into_owned();
        let mut live = spawn_child(&spec).unwrap();
        let mut spawned = String::new();
        live.take_stdout()
            .unwrap()
            .read_to_string(&mut spawned)
            .await
            .unwrap();
        assert!(live.wait().await.unwrap().success());
        for text in [&ran, &spawned] {
            assert_eq!(field(text, "NoNewPrivs:"), "1", "{text}");
            assert_eq!(field(text, "nofile="), "64", "{text}");
            assert_eq!(field(text, "hardened="), "yes", "{text}");
            // No signal blocked (the runner blocks them all around its
            // clone), SIGPIPE (13) not ignored as it is in this process.
            let blocked = u64::from_str_radix(field(text, "SigBlk:"), 16).unwrap();
            assert_eq!(blocked, 0, "{text}");
            let ignored = u64::from_str_radix(field(text, "SigIgn:"), 16).unwrap();
            assert_eq!(ignored & (1 << 12), 0, "{text}");
            // It leads its own process group.
            let ids = field(text, "pgid=");
            let (pgid, pid) = ids.split_once(" pid=").unwrap();
            assert_eq!(pgid, pid, "{text}");
        }
    }

    #[tokio::test]
    async fn programs_are_found_as_execvp_finds_them() {
        let dir = tempfile::tempdir().unwrap();
        // A script without a `#!` line runs under /bin/sh, as with execvp.
        let script = dir.path().join("plain");
        std::fs::write(&script, "echo from-sh \"$1\"\n").unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let out = run_child(&ChildSpec::new("./plain").arg("x").cwd(dir.path()))
            .await
            .unwrap();
        assert!(out.success(), "{out:?}");
        assert_eq!(out.stdout.text(), "from-sh x");
        // A bare name is looked up on the child's PATH, in order.
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::copy(&script, bin.join("agentkit-test-tool")).unwrap();
        let path = format!("/nonexistent:{}:/usr/bin:/bin", bin.display());
        let spec = ChildSpec::new("agentkit-test-tool")
            .arg("y")
            .host_env([("PATH", path.as_str())]);
        let out = run_child(&spec).await.unwrap();
        assert_eq!(out.stdout.text(), "from-sh y", "{out:?}");
        // Not executable: refused, as execvp refuses it.
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .unwrap();
        let err = run_child(&ChildSpec::new("./plain").cwd(dir.path()))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
    }

    #[tokio::test]
    async fn a_confinement_that_refuses_keeps_the_child_from_starting() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let spec = sh(&format!("touch {}", marker.display())).confine(Arc::new(PrivateDir {
            refuse: true,
            ..PrivateDir::default()
        }));
        let err = run_child(&spec).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::Unsupported);
        assert_eq!(err.to_string(), "this host cannot confine the child");
        let err = spawn_child(&spec).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::Unsupported);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!marker.exists());
    }
}
