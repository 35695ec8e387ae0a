//! The sandbox of model-steered children, with real processes and real
//! files: a scripted model's `shell` cannot read, write or reach what it
//! was not given (canaries beside its workspace, another session's
//! workspace, a credentials file, the project, the state root, a loopback
//! port, the host's own process), and can still do its work in the
//! workspace; a server tool with `sandbox = "off"` can do what the
//! sandbox forbids; `enforce` on a host without Landlock refuses.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agentkit_harness::{SIMULATE_UNAVAILABLE_ENV, sandbox_status};
use agentkit_test_support::rerun::rerun_with_env;
use serde_json::{Value, json};

use super::{discover_agent, results, run, scripted, turn_input, write};

/// Landlock is here (the kernels this project runs on have it); under CI
/// a host without it fails the test instead of skipping it.
#[allow(clippy::print_stderr)]
fn landlock_or_skip(test: &str) -> bool {
    let status = sandbox_status();
    if status.available {
        return true;
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    assert!(!ci, "{test}: this CI host cannot sandbox: {status:?}");
    eprintln!("skipping {test}: {status:?}");
    false
}

/// A host laid out as agentkit lays it out, with a canary in every place
/// a session's shell must not reach.
struct Host {
    _dir: tempfile::TempDir,
    project: PathBuf,
    workspace: PathBuf,
    other_workspace: PathBuf,
    state: PathBuf,
    credentials: PathBuf,
    outside: PathBuf,
}

impl Host {
    fn new() -> Host {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let project = root.join("proj");
        let state = root.join("state");
        let workspace = state.join("sessions/s1/workspace");
        let other_workspace = state.join("sessions/s2/workspace");
        let credentials = root.join("home/.config/agentkit/credentials.json");
        let outside = root.join("outside/canary.txt");
        write(&project.join(".env"), "PROJECT-SECRET\n");
        write(&project.join("agent/instructions.md"), "Test agent.\n");
        write(&other_workspace.join("notes.txt"), "OTHER-SESSION\n");
        write(&state.join("agentkit.sqlite"), "STATE-DB\n");
        write(&credentials, "{\"openai\": \"PROVIDER-KEY\"}\n");
        write(&outside, "OUTSIDE-CANARY\n");
        std::fs::create_dir_all(&workspace).unwrap();
        Host {
            _dir: dir,
            project,
            workspace,
            other_workspace,
            state,
            credentials,
            outside,
        }
    }

    /// Writes the agent's files (`agent/…`) and a script of one `shell`
    /// call per step, then runs one turn in the session workspace and
    /// answers each call's `(output, is_error)`.
    async fn run(&self, files: &[(&str, &str)], calls: &[(&str, Value)]) -> Vec<(Value, bool)> {
        let mut steps: Vec<Value> = calls
            .iter()
            .map(|(name, input)| json!({"toolCalls": [{"name": name, "input": input}]}))
            .collect();
        steps.push(json!({"text": "done"}));
        let agent_dir = self.project.join("agent");
        write(
            &agent_dir.join("script.json"),
            &json!({"turns": [{"steps": steps}]}).to_string(),
        );
        for (rel, text) in files {
            let path = agent_dir.join(rel);
            write(&path, text);
            if rel.ends_with(".sh") {
                super::make_executable(&path);
            }
        }
        let agent = discover_agent(&self.project);
        let input = turn_input(agent, scripted("script.json"), &self.workspace, "go");
        let (_, events) = run(input).await;
        let out: Vec<(Value, bool)> = results(&events)
            .into_iter()
            .map(|(_, output, is_error)| (output, is_error))
            .collect();
        assert_eq!(out.len(), calls.len(), "{out:?}");
        out
    }
}

fn shell(command: String) -> (&'static str, Value) {
    ("shell", json!({"command": command}))
}

/// A loopback listener that counts the connections it accepts.
async fn listener() -> (u16, Arc<AtomicUsize>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((_conn, _)) = l.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
        }
    });
    (port, accepted)
}

fn connect(port: u16) -> String {
    format!(
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 3); print('connected')\""
    )
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Refused, and the canary's text is nowhere in what came back.
fn denied(out: &(Value, bool), canary: &str, what: &str) {
    assert!(out.1, "{what} was allowed: {:?}", out.0);
    assert!(!text(&out.0).contains(canary), "{what} leaked: {:?}", out.0);
}

fn p(path: &Path) -> String {
    path.display().to_string()
}

#[tokio::test]
async fn the_shell_cannot_read_write_or_reach_beyond_its_workspace() {
    if !landlock_or_skip("the_shell_cannot_read_write_or_reach_beyond_its_workspace") {
        return;
    }
    let host = Host::new();
    let (port, accepted) = listener().await;
    let out = host
        .run(
            &[],
            &[
                shell(format!("cat {}", p(&host.outside))),
                shell(format!("cat {}/notes.txt", p(&host.other_workspace))),
                shell(format!("ls {}", p(&host.other_workspace))),
                shell(format!("cat {}", p(&host.credentials))),
                shell(format!("cat {}/.env", p(&host.project))),
                shell(format!("cat {}/agentkit.sqlite", p(&host.state))),
                shell(format!("echo x > {}/agent/pwned", p(&host.project))),
                shell(format!("echo x > {}/pwned", p(&host.state))),
                shell(format!("echo x > {}/pwned", p(&host.other_workspace))),
                shell(connect(port)),
                shell("cat /etc/shadow".into()),
                shell(format!("kill -0 {}", std::process::id())),
            ],
        )
        .await;
    denied(&out[0], "OUTSIDE-CANARY", "a file outside the workspace");
    denied(&out[1], "OTHER-SESSION", "another session's workspace");
    denied(&out[2], "notes.txt", "listing another session's workspace");
    denied(&out[3], "PROVIDER-KEY", "the credentials file");
    denied(&out[4], "PROJECT-SECRET", "the project's .env");
    denied(&out[5], "STATE-DB", "the state root's database");
    for (i, what) in [
        (6, "the project folder"),
        (7, "the state root"),
        (8, "another session's workspace"),
    ] {
        assert!(out[i].1, "writing into {what} was allowed: {:?}", out[i]);
        assert!(
            text(&out[i].0).contains("Permission denied"),
            "{what}: {:?}",
            out[i]
        );
    }
    assert!(!host.project.join("agent/pwned").exists());
    assert!(!host.state.join("pwned").exists());
    assert!(!host.other_workspace.join("pwned").exists());
    assert!(out[9].1, "connected to a loopback port: {:?}", out[9]);
    assert!(text(&out[9].0).contains("PermissionError"), "{:?}", out[9]);
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        0,
        "a connection got through"
    );
    // As root (CI), only the sandbox keeps /etc/shadow out of reach.
    assert!(out[10].1, "/etc/shadow was readable: {:?}", out[10]);
    // No signals to processes outside the sandbox (Landlock ABI 6).
    if sandbox_status().abi.is_some_and(|abi| abi >= 6) {
        assert!(out[11].1, "signalled the host process: {:?}", out[11]);
    }
}

#[tokio::test]
async fn the_shell_still_works_in_its_workspace_and_temp_folder() {
    if !landlock_or_skip("the_shell_still_works_in_its_workspace_and_temp_folder") {
        return;
    }
    let host = Host::new();
    write(
        &host.workspace.join("data/cities.csv"),
        "city\nOslo\nLima\n",
    );
    let out = host
        .run(
            &[],
            &[
                shell("ls data && cat data/cities.csv | tail -n +2 | sort | head -1".into()),
                shell("mkdir -p out && echo hello > out/a.txt && cat out/a.txt && rm out/a.txt && ls out | wc -l".into()),
                shell("python3 -c 'import json, sys; print(json.dumps({\"n\": 6 * 7}))'".into()),
                shell("python3 -c 'import tempfile; f = tempfile.NamedTemporaryFile(delete=False); f.write(b\"x\"); print(f.name)'".into()),
                shell("echo scratch > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && echo \"$TMPDIR\" && echo \"$HOME\"".into()),
                shell("echo to-null > /dev/null && head -c 4 /dev/urandom | wc -c && date +%Y >/dev/null && echo ok".into()),
                shell("git --version && git init -q repo && cd repo && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m m && git log --oneline | wc -l".into()),
            ],
        )
        .await;
    for (i, (output, is_error)) in out.iter().enumerate() {
        assert!(!is_error, "call {i} failed: {output:?}");
    }
    assert_eq!(text(&out[0].0), "cities.csv\nLima");
    assert_eq!(text(&out[1].0), "hello\n0");
    assert_eq!(out[2].0, json!({"n": 42}));
    // Python's temporary files land in the private folder, not /tmp.
    let py_tmp = text(&out[3].0);
    assert!(py_tmp.contains("agentkit-sandbox-"), "{py_tmp}");
    let lines: Vec<String> = text(&out[4].0).lines().map(str::to_owned).collect();
    assert_eq!(lines[0], "scratch");
    let tmp = Path::new(&lines[1]);
    assert!(
        tmp.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("agentkit-sandbox-"),
        "{lines:?}"
    );
    assert_eq!(lines[2], lines[1], "HOME is the private folder too");
    assert_ne!(tmp, std::env::temp_dir());
    assert!(text(&out[5].0).ends_with("4\nok"), "{:?}", out[5]);
    assert!(text(&out[6].0).ends_with('1'), "{:?}", out[6]);
    // The private folder goes with the call.
    for _ in 0..100 {
        if !tmp.exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(!tmp.exists(), "{} outlived its call", tmp.display());
}

/// `open` turns the sandbox off; `fetch` keeps it with a server tool's
/// default (network on); `quiet` keeps it and turns network off. Each
/// runs `probe.sh`: cat the canary, then connect to the port.
fn tools(canary: &Path, port: u16) -> Vec<(&'static str, String)> {
    let probe = format!(
        "#!/bin/sh\ncat '{}'\npython3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 3); print('connected')\"\n",
        canary.display()
    );
    let tool = |desc: &str, extra: &str| {
        format!("description = \"{desc}\"\ncommand = [\"./probe.sh\"]\n{extra}")
    };
    vec![
        ("tools/probe.sh", probe),
        ("tools/open.toml", tool("Trusted", "sandbox = \"off\"\n")),
        ("tools/fetch.toml", tool("Sandboxed, network on", "")),
        (
            "tools/quiet.toml",
            tool("Sandboxed, network off", "sandbox = { network = false }\n"),
        ),
    ]
}

#[tokio::test]
async fn a_server_tool_with_the_sandbox_off_can_do_what_it_forbids() {
    if !landlock_or_skip("a_server_tool_with_the_sandbox_off_can_do_what_it_forbids") {
        return;
    }
    let host = Host::new();
    let (port, accepted) = listener().await;
    let files = tools(&host.outside, port);
    let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let out = host
        .run(
            &files,
            &[
                ("open", json!({})),
                ("fetch", json!({})),
                ("quiet", json!({})),
            ],
        )
        .await;
    let open = text(&out[0].0);
    assert!(!out[0].1, "{open}");
    assert!(
        open.contains("OUTSIDE-CANARY") && open.contains("connected"),
        "{open}"
    );
    // Sandboxed with network: the canary is out of reach, the port is not
    // (and the tool's own folder is readable: it ran `./probe.sh`).
    let fetch = text(&out[1].0);
    assert!(!fetch.contains("OUTSIDE-CANARY"), "{fetch}");
    assert!(fetch.contains("connected"), "{fetch}");
    let quiet = text(&out[2].0);
    assert!(!quiet.contains("OUTSIDE-CANARY"), "{quiet}");
    assert!(out[2].1 && quiet.contains("PermissionError"), "{quiet}");
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn enforce_on_a_host_without_landlock_refuses_clearly() {
    let name = "enforce_on_a_host_without_landlock_refuses_clearly";
    if !rerun_with_env(module_path!(), name, &[(SIMULATE_UNAVAILABLE_ENV, "1")]) {
        return;
    }
    let status = sandbox_status();
    assert!(!status.available, "{status:?}");
    assert!(
        status
            .reason
            .as_deref()
            .unwrap()
            .contains(SIMULATE_UNAVAILABLE_ENV),
        "{status:?}"
    );
    let host = Host::new();
    let marker = host.workspace.join("ran");
    let out = host
        .run(
            &[
                ("agent.toml", "[harness.sandbox]\nmode = \"enforce\"\n"),
                (
                    "tools/touch.toml",
                    "description = \"Touches\"\ncommand = [\"sh\", \"-c\", \"touch \\\"$AGENTKIT_WORKSPACE_DIR/tool-ran\\\"\"]\n",
                ),
                (
                    "tools/trusted.toml",
                    "description = \"Trusted\"\ncommand = [\"sh\", \"-c\", \"touch \\\"$AGENTKIT_WORKSPACE_DIR/trusted-ran\\\"\"]\nsandbox = \"off\"\n",
                ),
            ],
            &[
                shell(format!("touch {}", p(&marker))),
                ("touch", json!({})),
                ("trusted", json!({})),
            ],
        )
        .await;
    for (i, tool) in [(0, "shell"), (1, "touch")] {
        let message = text(&out[i].0);
        assert!(out[i].1, "{tool} ran: {message}");
        assert!(
            message.contains(&format!("`{tool}` was not run"))
                && message.contains("mode = \"enforce\"")
                && message.contains("Landlock is unavailable"),
            "{message}"
        );
    }
    assert!(!marker.exists());
    assert!(!host.workspace.join("tool-ran").exists());
    // A tool with the sandbox off is the operator's choice, and runs.
    assert!(!out[2].1, "{:?}", out[2]);
    assert!(host.workspace.join("trusted-ran").exists());
}

#[tokio::test]
async fn warn_on_a_host_without_landlock_runs_with_the_limits_alone() {
    let name = "warn_on_a_host_without_landlock_runs_with_the_limits_alone";
    if !rerun_with_env(module_path!(), name, &[(SIMULATE_UNAVAILABLE_ENV, "1")]) {
        return;
    }
    let host = Host::new();
    let out = host
        .run(
            &[],
            &[
                shell(format!("cat {}", p(&host.outside))),
                shell("ulimit -c; echo \"$TMPDIR\"".into()),
            ],
        )
        .await;
    // Unsandboxed (the startup log and /v1/info say so), but still with
    // its limits and private folder.
    assert!(!out[0].1, "{:?}", out[0]);
    assert!(text(&out[0].0).contains("OUTSIDE-CANARY"));
    let limits = text(&out[1].0);
    assert!(limits.starts_with('0'), "no core dumps: {limits}");
    assert!(limits.contains("agentkit-sandbox-"), "{limits}");
}

/// The real `python3` on this process's `PATH` makes a virtualenv at
/// `dir` (no pip: nothing to download) with `module.py` in its
/// site-packages saying `NAME = "<module>"`; `None` (and a message) when
/// this host has no `python3` with `venv`.
#[allow(clippy::print_stderr)]
fn make_venv(dir: &Path, module: &str) -> Option<()> {
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(dir)
        .output();
    match made {
        Ok(out) if out.status.success() => {}
        other => {
            eprintln!("no virtualenv could be made with python3: {other:?}");
            return None;
        }
    }
    let site = std::process::Command::new(dir.join("bin/python"))
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ])
        .output()
        .unwrap();
    let site = PathBuf::from(String::from_utf8(site.stdout).unwrap().trim());
    write(
        &site.join(format!("{module}.py")),
        &format!("NAME = \"{module}\"\n"),
    );
    Some(())
}

/// A Python tool: imports stdlib modules and `module` (from the
/// interpreter's own install), then tries to read each path of its input's
/// `canaries`, and prints what it got.
fn python_probe(module: &str) -> String {
    format!(
        "import decimal, json, sys\nimport {module}\nargs = json.load(sys.stdin)\nseen = {{}}\nfor path in args.get('canaries', []):\n    try:\n        seen[path] = open(path).read()\n    except OSError as e:\n        seen[path] = 'denied: ' + type(e).__name__\nprint(json.dumps({{'module': {module}.NAME, 'sum': str(decimal.Decimal('0.1') + decimal.Decimal('0.2')), 'seen': seen}}))\n"
    )
}

#[tokio::test]
async fn a_virtualenv_python_runs_a_tool_without_configuration() {
    if !landlock_or_skip("a_virtualenv_python_runs_a_tool_without_configuration") {
        return;
    }
    let host = Host::new();
    let venv = host.project.parent().unwrap().join("envs/venv");
    if make_venv(&venv, "venv_canary_mod").is_none() {
        return;
    }
    let tool = format!(
        "description = \"A venv tool\"\ncommand = [\"{}\", \"probe.py\"]\n",
        venv.join("bin/python").display()
    );
    let out = host
        .run(
            &[
                ("tools/probe.py", &python_probe("venv_canary_mod")),
                ("tools/venvtool.toml", &tool),
            ],
            &[(
                "venvtool",
                json!({"canaries": [p(&host.outside), p(&host.credentials)]}),
            )],
        )
        .await;
    assert!(!out[0].1, "the venv's python failed: {:?}", out[0].0);
    assert_eq!(out[0].0["module"], "venv_canary_mod", "{:?}", out[0].0);
    assert_eq!(out[0].0["sum"], "0.3");
    // The venv is readable; what is beside it is not.
    for canary in [&host.outside, &host.credentials] {
        let seen = text(&out[0].0["seen"][p(canary)]);
        assert_eq!(seen, "denied: PermissionError", "{}", canary.display());
    }
}

/// `~/.pyenv` as pyenv lays it out (a shim that runs `libexec/pyenv`,
/// which runs the version named in `~/.pyenv/version`: a virtualenv of
/// the real `python3`), `~/.nvm` as nvm does (`versions/node/v20.0.0`
/// with `bin/node` a link to the real `node` and `bin/nvmtool` a link to
/// a `#!/usr/bin/env node` script in its `lib/node_modules`), and the
/// secrets a home folder holds. `None` without `python3` (with `venv`)
/// or `node` on this host.
#[allow(clippy::print_stderr)]
fn fake_home(home: &Path) -> Option<()> {
    let which = |name: &str| {
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    };
    let Some(node) = which("node") else {
        eprintln!("no node on PATH");
        return None;
    };
    let pyenv = home.join(".pyenv");
    write(
        &pyenv.join("libexec/pyenv"),
        "#!/bin/sh\n# pyenv exec NAME ARGS...: NAME of the selected version.\n[ \"$1\" = exec ] || exit 2\nshift; name=$1; shift\nversion=${PYENV_VERSION:-$(cat \"$PYENV_ROOT/version\")}\nexec \"$PYENV_ROOT/versions/$version/bin/$name\" \"$@\"\n",
    );
    super::make_executable(&pyenv.join("libexec/pyenv"));
    write(
        &pyenv.join("shims/python3"),
        &format!(
            "#!/bin/sh\nexport PYENV_ROOT=\"{root}\"\nexec \"{root}/libexec/pyenv\" exec \"${{0##*/}}\" \"$@\"\n",
            root = pyenv.display()
        ),
    );
    super::make_executable(&pyenv.join("shims/python3"));
    write(&pyenv.join("version"), "3.99.0\n");
    make_venv(&pyenv.join("versions/3.99.0"), "pyenv_canary_mod")?;
    std::fs::create_dir_all(pyenv.join("versions/3.98.0/bin")).unwrap();

    let nvm = home.join(".nvm");
    write(&nvm.join("nvm.sh"), "# nvm\n");
    let v20 = nvm.join("versions/node/v20.0.0");
    std::fs::create_dir_all(v20.join("bin")).unwrap();
    std::os::unix::fs::symlink(&node, v20.join("bin/node")).unwrap();
    let cli = v20.join("lib/node_modules/nvmtool/cli.js");
    write(
        &cli,
        "#!/usr/bin/env node\nconst fs = require('fs');\nconst name = require('./name.js');\nconst args = JSON.parse(fs.readFileSync(0, 'utf8'));\nconst seen = {};\nfor (const p of args.canaries || []) {\n  try { seen[p] = fs.readFileSync(p, 'utf8'); } catch (e) { seen[p] = 'denied: ' + e.code; }\n}\nconsole.log(JSON.stringify({module: name, seen}));\n",
    );
    super::make_executable(&cli);
    write(
        &cli.with_file_name("name.js"),
        "module.exports = 'nvmtool';\n",
    );
    std::os::unix::fs::symlink(
        "../lib/node_modules/nvmtool/cli.js",
        v20.join("bin/nvmtool"),
    )
    .unwrap();

    write(&home.join(".ssh/id_rsa"), "SSH-CANARY\n");
    write(&home.join(".aws/credentials"), "AWS-CANARY\n");
    write(&home.join(".netrc"), "NETRC-CANARY\n");
    write(
        &home.join(".config/agentkit/credentials.json"),
        "AGENTKIT-CANARY\n",
    );
    write(&home.join("notes.txt"), "HOME-CANARY\n");
    Some(())
}

/// The canaries of [`fake_home`].
fn home_canaries(home: &Path) -> Vec<String> {
    [
        ".ssh/id_rsa",
        ".aws/credentials",
        ".netrc",
        ".config/agentkit/credentials.json",
        "notes.txt",
    ]
    .iter()
    .map(|c| p(&home.join(c)))
    .collect()
}

#[tokio::test]
async fn pyenv_and_nvm_interpreters_under_home_run_and_its_secrets_stay_out() {
    let name = "pyenv_and_nvm_interpreters_under_home_run_and_its_secrets_stay_out";
    if std::env::var_os(agentkit_test_support::rerun::RERUN_MARK).is_none() {
        // Laid out here, then run in a process whose HOME and PATH are
        // the fake ones (as agentkit's would be for a user of pyenv and
        // nvm).
        if !landlock_or_skip(name) {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        if fake_home(&home).is_none() {
            return;
        }
        let path = format!(
            "{}:{}:/usr/local/bin:/usr/bin:/bin",
            p(&home.join(".pyenv/shims")),
            p(&home.join(".nvm/versions/node/v20.0.0/bin")),
        );
        rerun_with_env(
            module_path!(),
            name,
            &[("HOME", &p(&home)), ("PATH", &path)],
        );
        return;
    }
    let home = PathBuf::from(std::env::var_os("HOME").unwrap());
    let canaries = home_canaries(&home);
    let host = Host::new();
    let out = host
        .run(
            &[
                ("tools/probe.py", &python_probe("pyenv_canary_mod")),
                (
                    "tools/py.toml",
                    "description = \"pyenv's python3\"\ncommand = [\"python3\", \"probe.py\"]\n",
                ),
                (
                    "tools/js.toml",
                    "description = \"A CLI installed with nvm's npm\"\ncommand = [\"nvmtool\"]\n",
                ),
            ],
            &[
                ("py", json!({"canaries": canaries})),
                ("js", json!({"canaries": canaries})),
                shell("python3 -c 'import pyenv_canary_mod; print(pyenv_canary_mod.NAME)'".into()),
                shell("node -e 'console.log(require(\"fs\").existsSync(process.execPath))'".into()),
                shell(format!("cat {}", canaries[0])),
                shell(format!("ls {}", p(&home))),
                shell(format!("ls {}", p(&home.join(".pyenv/versions/3.98.0")))),
            ],
        )
        .await;
    let (py, js) = (&out[0], &out[1]);
    assert!(!py.1, "pyenv's python3 failed: {:?}", py.0);
    assert_eq!(py.0["module"], "pyenv_canary_mod", "{:?}", py.0);
    assert_eq!(py.0["sum"], "0.3");
    assert!(!js.1, "nvm's node failed: {:?}", js.0);
    assert_eq!(js.0["module"], "nvmtool", "{:?}", js.0);
    for canary in &canaries {
        assert_eq!(
            text(&py.0["seen"][canary]),
            "denied: PermissionError",
            "{canary}"
        );
        assert_eq!(text(&js.0["seen"][canary]), "denied: EACCES", "{canary}");
    }
    assert_eq!(
        out[2],
        (json!("pyenv_canary_mod"), false),
        "the shell's python3"
    );
    assert_eq!(out[3], (json!(true), false), "the shell's node");
    // The home folder and its secrets stay out, and so do the versions
    // not in use.
    denied(&out[4], "SSH-CANARY", "~/.ssh/id_rsa");
    let message = text(&out[4].0);
    assert!(
        message.contains("kept out of every sandbox on purpose"),
        "{message}"
    );
    assert!(!message.contains("read = ["), "{message}");
    denied(&out[5], "notes.txt", "listing the home folder");
    assert!(out[6].1, "a version not in use was readable: {:?}", out[6]);
}

#[tokio::test]
async fn a_denied_path_is_named_with_the_line_that_grants_it() {
    if !landlock_or_skip("a_denied_path_is_named_with_the_line_that_grants_it") {
        return;
    }
    let host = Host::new();
    let data = host.project.parent().unwrap().join("opt/data");
    write(&data.join("table.csv"), "DATA-CANARY\n");
    let table = p(&data.join("table.csv"));
    let reader =
        |extra: &str| format!("description = \"Reads\"\ncommand = [\"cat\", \"{table}\"]\n{extra}");
    let out = host
        .run(
            &[
                ("tools/cat.toml", &reader("")),
                ("tools/py.toml", &format!("description = \"Reads\"\ncommand = [\"python3\", \"-c\", \"open('{table}')\"]\n")),
                (
                    "tools/granted.toml",
                    &reader(&format!("sandbox = {{ read = [\"{}\"] }}\n", p(&data))),
                ),
            ],
            &[
                ("cat", json!({})),
                ("py", json!({})),
                ("granted", json!({})),
                shell(format!("cat {table}")),
            ],
        )
        .await;
    let line = format!("read = [\"{table}\"]");
    for (i, what) in [(0, "cat"), (1, "python"), (3, "the shell")] {
        denied(&out[i], "DATA-CANARY", what);
        let message = text(&out[i].0);
        assert!(
            message.contains(&format!("the sandbox denied `{table}`"))
                && message.contains(&line)
                && message.contains("[harness.sandbox]"),
            "{what}: {message}"
        );
    }
    // The line, as given, grants it.
    assert_eq!(out[2], (json!("DATA-CANARY"), false));
}
