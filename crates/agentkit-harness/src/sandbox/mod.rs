//! The sandbox of every child process the model can steer: the `shell`
//! built-in and server tools (also when a deterministic call or MCP
//! `call_tool` runs them: they go through [`crate::run_server_tool`] too).
//!
//! A sandboxed child gets, on top of the runner's scrubbed environment and
//! process group:
//!
//! - a Landlock ruleset (Linux 5.13+): the system folders read-only
//!   ([`SYSTEM_READ`], `/etc` minus [`ETC_HIDDEN`], a few `/dev` files),
//!   its workspace and a private temporary folder read-write, the tool's
//!   own folder and the configured `read` paths read-only, the install of
//!   its interpreter (and of the version managers on its `PATH`) read-only
//!   at its narrowest root (`resolve.rs`), `write` paths read-write,
//!   nothing else; no TCP connect or bind unless `network`;
//!   no signals to processes outside the sandbox;
//! - `no_new_privs` (no setuid escalation) and resource limits
//!   (`setrlimit`: CPU time, address space, processes, open files, no
//!   core dumps);
//! - `TMPDIR` (and `HOME`, unless the tool passes `HOME` through) pointed
//!   at its private temporary folder, removed when the call ends.
//!
//! The ruleset is built in the parent, before the spawn, once per sandbox
//! configuration (shared by its children for a few seconds); the child
//! only makes three kinds of raw system call between its spawn and its
//! exec (see `linux.rs`).
//! Where the kernel cannot sandbox, `mode = "enforce"` refuses to run the
//! tool and `mode = "warn"` (the default) runs it unsandboxed and says so:
//! at startup ([`log_sandbox_status`]), in `/v1/info` ([`sandbox_info`])
//! and once in the log when such a call runs. When a sandboxed child
//! fails on a path the sandbox does not grant, its error result names the
//! path and the `read` line that grants it (`denial.rs`).

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use agentkit_manifest::{Agent, Sandbox, SandboxLimits, SandboxMode, Tool};
use agentkit_plumbing::{ChildSpec, Confined, Confinement, PreExec};
use serde_json::{Value, json};

mod denial;
pub use denial::SandboxGap;
#[cfg(target_os = "linux")]
mod linux;
mod resolve;
mod tmp;

pub(crate) use resolve::Launch;
pub(crate) use tmp::PrivateTmp;

/// Set (to anything but `0` or empty) in agentkit's environment, the host
/// behaves as if the kernel had no Landlock: the test switch for
/// `mode = "enforce"` refusals and the loud `warn` fallback.
pub const SIMULATE_UNAVAILABLE_ENV: &str = "AGENTKIT_SANDBOX_SIMULATE_UNAVAILABLE";

/// System folders a sandboxed child may read and execute from (those that
/// exist).
pub const SYSTEM_READ: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// Entries of `/etc` a sandboxed child may not read (relative to `/etc`;
/// `*` matches within one name). The rest of `/etc`, as it was when the
/// host first sandboxed a child, is readable: name lookups, time zones,
/// certificates, the loader's cache.
pub const ETC_HIDDEN: &[&str] = &[
    // Password hashes and privilege rules.
    "shadow",
    "shadow-",
    "gshadow",
    "gshadow-",
    "sudoers",
    "sudoers.d",
    "security/opasswd",
    // Private keys.
    "ssh/ssh_host_*_key",
    "ssl/private",
    "pki/tls/private",
    "letsencrypt",
    "krb5.keytab",
    "ipsec.secrets",
    "ipsec.d/private",
    "wireguard",
    "openvpn",
    "NetworkManager/system-connections",
    "ppp/chap-secrets",
    "ppp/pap-secrets",
    // Where services keep their environment and credentials.
    "environment",
    "default",
    "sysconfig",
    "systemd",
    "credstore",
    "credstore.encrypted",
    "agentkit",
    "docker",
    "containerd",
    "rancher",
    "kubernetes",
    "mysql",
    "redis",
    "rabbitmq",
    "mosquitto",
    "npmrc",
    "netrc",
];

/// Device files a sandboxed child may use: `(path, writable)`.
pub const DEV_FILES: &[(&str, bool)] = &[
    ("/dev/null", true),
    ("/dev/zero", true),
    ("/dev/full", true),
    ("/dev/random", false),
    ("/dev/urandom", false),
];

/// What this host can do for a sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxStatus {
    /// Landlock rules can be applied.
    pub available: bool,
    /// The kernel's Landlock ABI version.
    pub abi: Option<u32>,
    /// TCP connect and bind can be denied (ABI 4 and later).
    pub network_rules: bool,
    /// Why the host cannot sandbox, when it cannot.
    pub reason: Option<String>,
}

impl SandboxStatus {
    fn unavailable(reason: impl Into<String>) -> SandboxStatus {
        SandboxStatus {
            available: false,
            abi: None,
            network_rules: false,
            reason: Some(reason.into()),
        }
    }
}

/// This host's sandbox support, probed once per process.
pub fn sandbox_status() -> &'static SandboxStatus {
    static STATUS: OnceLock<SandboxStatus> = OnceLock::new();
    STATUS.get_or_init(|| {
        let simulated =
            std::env::var_os(SIMULATE_UNAVAILABLE_ENV).is_some_and(|v| !v.is_empty() && v != "0");
        if simulated {
            return SandboxStatus::unavailable(format!(
                "Landlock is unavailable (simulated by {SIMULATE_UNAVAILABLE_ENV})"
            ));
        }
        #[cfg(target_os = "linux")]
        {
            linux::probe()
        }
        #[cfg(not(target_os = "linux"))]
        {
            SandboxStatus::unavailable(format!(
                "Landlock is a Linux feature and this host runs {}",
                std::env::consts::OS
            ))
        }
    })
}

/// The `sandbox` entry of `/v1/info`: `{available, abi, mode, networkRules}`,
/// with `reason` when the host cannot sandbox.
pub fn sandbox_info(mode: SandboxMode) -> Value {
    let status = sandbox_status();
    let mut info = json!({
        "available": status.available,
        "abi": status.abi,
        "mode": mode.as_str(),
        "networkRules": status.network_rules,
    });
    if let (Some(reason), Some(obj)) = (&status.reason, info.as_object_mut()) {
        obj.insert("reason".into(), Value::String(reason.clone()));
    }
    info
}

/// Says at startup how `agent`'s children will run: sandboxed (with the
/// ABI), refused (`enforce` on a host that cannot), or unsandboxed, and
/// which tools turn the sandbox off.
pub fn log_sandbox_status(agent: &Agent) {
    let mode = agent.config.harness.sandbox.mode;
    let status = sandbox_status();
    let reason = status.reason.as_deref().unwrap_or("");
    match (mode, status.available) {
        (SandboxMode::Off, _) => tracing::warn!(
            "SANDBOX OFF: `[harness.sandbox] mode = \"off\"`: the shell built-in and server tools run with agentkit's full access to this host"
        ),
        (SandboxMode::Enforce, false) => tracing::error!(
            reason,
            "SANDBOX UNAVAILABLE: `mode = \"enforce\"`: the shell built-in and every sandboxed server tool will be REFUSED on this host"
        ),
        (SandboxMode::Warn, false) => tracing::warn!(
            reason,
            "SANDBOX UNAVAILABLE: the shell built-in and server tools will run UNSANDBOXED, with agentkit's full access to this host; set `[harness.sandbox] mode = \"enforce\"` to refuse them instead"
        ),
        (_, true) => tracing::info!(
            abi = status.abi,
            mode = mode.as_str(),
            network_rules = status.network_rules,
            "sandbox: Landlock"
        ),
    }
    if mode != SandboxMode::Off {
        for tool in agent
            .tools
            .iter()
            .filter(|t| t.sandbox.mode == SandboxMode::Off)
        {
            tracing::warn!(tool = %tool.name, "tool `{}` runs UNSANDBOXED (`sandbox = \"off\"`)", tool.name);
        }
    }
}

/// How one sandboxed child is confined: given to
/// [`crate::ChildSpec::confine`] (it is the runner's [`Confinement`]).
#[derive(Debug, Clone, Default)]
// Only Linux reads the rules and limits; elsewhere only `required` and
// `network` matter (for the refusal).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub struct SandboxSpec {
    read: Vec<PathBuf>,
    write: Vec<PathBuf>,
    network: bool,
    limits: Option<SandboxLimits>,
    required: bool,
    private_home: bool,
}

impl SandboxSpec {
    /// The system folders only; no network; the default limits.
    pub fn new() -> SandboxSpec {
        SandboxSpec {
            limits: Some(SandboxLimits::default()),
            ..SandboxSpec::default()
        }
    }

    /// `path` (a folder and everything below it, or a file) readable and
    /// executable.
    pub fn read(mut self, path: impl Into<PathBuf>) -> SandboxSpec {
        self.read.push(path.into());
        self
    }

    /// `path` readable, writable and executable.
    pub fn write(mut self, path: impl Into<PathBuf>) -> SandboxSpec {
        self.write.push(path.into());
        self
    }

    /// TCP connect and bind allowed.
    pub fn network(mut self, on: bool) -> SandboxSpec {
        self.network = on;
        self
    }

    pub fn limits(mut self, limits: SandboxLimits) -> SandboxSpec {
        self.limits = Some(limits);
        self
    }

    /// Refuse to start the child where Landlock cannot confine it as asked
    /// (`mode = "enforce"`), instead of running it with the limits alone.
    pub fn required(mut self, on: bool) -> SandboxSpec {
        self.required = on;
        self
    }

    /// `HOME` points at the private temporary folder too.
    pub fn private_home(mut self, on: bool) -> SandboxSpec {
        self.private_home = on;
        self
    }

    /// Why this host cannot confine the child as asked, if it cannot.
    fn shortfall(&self) -> Option<String> {
        let status = sandbox_status();
        if !status.available {
            return Some(
                status
                    .reason
                    .clone()
                    .unwrap_or_else(|| "Landlock is unavailable".into()),
            );
        }
        if !self.network && !status.network_rules {
            return Some(format!(
                "denying network access needs Landlock ABI 4 (Linux 6.7); this kernel has ABI {}",
                status.abi.unwrap_or(0)
            ));
        }
        None
    }
}

/// The runner's side of the sandbox: each spawn is readied by `prepare`.
impl Confinement for SandboxSpec {
    fn prepare(&self, launch: &Launch<'_>, cmd: &mut PreExec) -> std::io::Result<Confined> {
        Ok(Box::new(prepare(self, launch, cmd)?))
    }
}

/// What the spawn of a sandboxed child keeps alive until the child ends:
/// its private folder, then the shared ruleset and the root that folder
/// is in.
#[derive(Debug)]
pub(crate) struct Prepared {
    _tmp: PrivateTmp,
    #[cfg(target_os = "linux")]
    _rules: Option<std::sync::Arc<linux::Rules>>,
}

/// Readies the child `launch` describes to start sandboxed: the private
/// temporary folder and its variables, then the ruleset (with the
/// installs its interpreter needs, [`resolve`]; shared by the children of
/// one configuration, `linux.rs::rules`) and limits the child applies to
/// itself before exec. Errors when the spec is required and the host
/// falls short.
pub(crate) fn prepare(
    spec: &SandboxSpec,
    launch: &Launch<'_>,
    pre: &mut PreExec,
) -> std::io::Result<Prepared> {
    let shortfall = spec.shortfall();
    if spec.required
        && let Some(why) = &shortfall
    {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            format!("the sandbox is required and this host cannot provide it: {why}"),
        ));
    }
    #[cfg(target_os = "linux")]
    let rules = if sandbox_status().available {
        let installs = resolve::resolve(launch);
        let installs: Vec<PathBuf> = installs.grants_for(&spec.write).cloned().collect();
        Some(linux::rules(spec, installs)?)
    } else {
        None
    };
    #[cfg(target_os = "linux")]
    let tmp = match &rules {
        Some(rules) => PrivateTmp::create_in(rules.tmp_root())?,
        None => PrivateTmp::create()?,
    };
    #[cfg(not(target_os = "linux"))]
    let tmp = PrivateTmp::create()?;
    pre.env("TMPDIR", tmp.path());
    if spec.private_home {
        pre.env("HOME", tmp.path());
    }
    #[cfg(target_os = "linux")]
    {
        linux::confine(spec, rules.as_deref(), pre);
        Ok(Prepared {
            _tmp: tmp,
            _rules: rules,
        })
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = launch;
        Ok(Prepared { _tmp: tmp })
    }
}

/// A sentence naming the path the sandbox denied `child` and the line of
/// configuration that grants it, when its `output` shows one (see
/// `denial.rs` for what this can and cannot tell).
pub(crate) fn explain(spec: &SandboxSpec, child: &ChildSpec, output: &str) -> Option<String> {
    if !sandbox_status().available {
        return None;
    }
    let env = child.environment();
    denial::explain(spec, &launch_of(child, &env), output)
}

/// `child` as the resolution of its interpreter sees it.
fn launch_of<'a>(child: &'a ChildSpec, env: &'a [(OsString, OsString)]) -> Launch<'a> {
    Launch {
        program: child.program(),
        cwd: child.current_dir(),
        env,
    }
}

/// The files `launch`'s program needs (itself, its `#!` interpreters)
/// and the `files` it is given that `spec`'s sandbox cannot read after
/// the automatic grants.
pub(crate) fn gaps(spec: &SandboxSpec, child: &ChildSpec, files: &[PathBuf]) -> Vec<SandboxGap> {
    let env = child.environment();
    denial::gaps(spec, &launch_of(child, &env), files)
}

/// The sandbox of one call of `tool` in `workspace`, from its effective
/// `sandbox` settings: `Ok(None)` when it is off; `Err` with the message
/// the model reads when `enforce` cannot be met on this host. Under
/// `warn`, a call that must run with less than asked says so once.
pub(crate) fn for_tool(
    tool: &Tool,
    workspace: &std::path::Path,
) -> Result<Option<SandboxSpec>, String> {
    for_child(tool, Some(workspace))
}

/// The sandbox of `tool`'s worker (`worker.rs`): a call's, but with no
/// session's workspace (the worker serves them all).
pub(crate) fn for_worker(tool: &Tool) -> Result<Option<SandboxSpec>, String> {
    for_child(tool, None)
}

fn for_child(
    tool: &Tool,
    workspace: Option<&std::path::Path>,
) -> Result<Option<SandboxSpec>, String> {
    let settings: &Sandbox = &tool.sandbox;
    if settings.mode == SandboxMode::Off {
        return Ok(None);
    }
    let mut spec = SandboxSpec::new()
        .network(settings.network)
        .limits(settings.limits)
        .required(settings.mode == SandboxMode::Enforce)
        .private_home(!tool.env.iter().any(|v| v == "HOME"));
    if let Some(workspace) = workspace {
        spec = spec.write(workspace);
    }
    if workspace != Some(tool.cwd.as_path()) {
        spec = spec.read(&tool.cwd);
    }
    for p in &settings.read {
        spec = spec.read(p);
    }
    for p in &settings.write {
        spec = spec.write(p);
    }
    if let Some(why) = spec.shortfall() {
        if spec.required {
            return Err(format!(
                "`{}` was not run: the sandbox is required (`mode = \"enforce\"`) and this host cannot sandbox it: {why}. Run agentkit on Linux with Landlock enabled, or set `[harness.sandbox] mode = \"warn\"` to run tools unsandboxed where the kernel cannot sandbox them",
                tool.name
            ));
        }
        static WARNED: AtomicBool = AtomicBool::new(false);
        if !WARNED.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                tool = %tool.name,
                reason = %why,
                "RUNNING UNSANDBOXED: this host cannot sandbox tool calls (said once; `mode = \"enforce\"` refuses them instead)"
            );
        }
    }
    Ok(Some(spec))
}

/// `pattern` against a `/`-separated relative path; `*` matches within one
/// name.
pub(crate) fn matches(pattern: &str, path: &str) -> bool {
    let (p_dir, p_name) = pattern.rsplit_once('/').unwrap_or(("", pattern));
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    if p_dir != dir {
        return false;
    }
    match p_name.split_once('*') {
        None => p_name == name,
        Some((prefix, suffix)) => {
            name.len() >= prefix.len() + suffix.len()
                && name.starts_with(prefix)
                && name.ends_with(suffix)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_is_consistent() {
        let s = sandbox_status();
        assert_eq!(s.available, s.reason.is_none(), "{s:?}");
        assert_eq!(s.available, s.abi.is_some(), "{s:?}");
        assert!(!s.network_rules || s.available);
        let info = sandbox_info(SandboxMode::Warn);
        assert_eq!(info["mode"], "warn");
        assert_eq!(info["available"], s.available);
    }
}
