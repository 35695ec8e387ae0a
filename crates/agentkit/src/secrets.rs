//! Secrets by reference, resolved once when the host starts: every
//! `${file:/path}` of the host's definition files is read and every
//! `${secret:name}` asked of the host's secret command
//! ([`SecretCommand`]), and the values join the `${VAR}` lookup
//! (`EnvLookup::with_resolved`) under their keys (`file:/path`,
//! `secret:name`), so each place that expands variables expands these
//! too. A reference that cannot be resolved keeps the host from starting
//! with a `secret-unavailable` diagnostic (file, line, hint); no message
//! ever carries a value: a file's contents, a command's standard output.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use agentkit_harness::{ChildExit, ChildSpec, redact_credentials, run_child};
use agentkit_manifest::{Code, Diagnostic, Diagnostics, EnvRef, Host, Position, RefKind};

/// The largest secret a file or the secret command may give, in bytes.
pub const MAX_SECRET_BYTES: usize = 64 * 1024;

/// How long the secret command may take for one secret by default.
pub const DEFAULT_SECRET_TIMEOUT: Duration = Duration::from_secs(10);

/// The host's secret provider (`--secret-command`): a program that prints
/// the secret named by its last argument on standard output. It runs
/// through the one child-process runner, with a scrubbed environment (the
/// runner's few passed variables plus `pass_env`), its own process group,
/// `timeout`, and its output capped at [`MAX_SECRET_BYTES`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretCommand {
    /// The program, looked up on `PATH` when it is a bare name.
    pub program: PathBuf,
    /// Arguments before the secret's name.
    pub args: Vec<String>,
    /// Host variables the command also receives (a vault's address and
    /// token, say); nothing else of the host's environment reaches it.
    pub pass_env: Vec<String>,
    /// How long one run may take before its process group is killed.
    pub timeout: Duration,
}

impl SecretCommand {
    /// Parses `--secret-command`: a program and its arguments separated by
    /// whitespace (no shell, no quoting). `None` when `line` is blank.
    pub fn parse(line: &str) -> Option<SecretCommand> {
        let mut words = line.split_whitespace();
        let program = PathBuf::from(words.next()?);
        Some(SecretCommand {
            program,
            args: words.map(str::to_owned).collect(),
            pass_env: Vec::new(),
            timeout: DEFAULT_SECRET_TIMEOUT,
        })
    }

    /// Runs the command for `name`: its trimmed output, `Ok(None)` when
    /// it printed nothing, or why it failed (never its output).
    pub(crate) async fn fetch(&self, name: &str) -> Result<Option<String>, String> {
        let spec = ChildSpec::new(&self.program)
            .args(&self.args)
            .arg(name)
            .pass_env(self.pass_env.iter().cloned())
            .timeout(self.timeout)
            .stdout_cap(MAX_SECRET_BYTES)
            .stderr_cap(4096)
            .end_on_overflow();
        let shown = self.program.display();
        let outcome = run_child(&spec)
            .await
            .map_err(|e| format!("cannot start the secret command `{shown}`: {e}"))?;
        match outcome.exit {
            ChildExit::Exited(status) if status.success() => {}
            ChildExit::TimedOut => {
                return Err(format!(
                    "the secret command `{shown}` did not answer within {:?}",
                    self.timeout
                ));
            }
            ChildExit::OutputOverflow => {
                return Err(format!(
                    "the secret command `{shown}` printed more than {MAX_SECRET_BYTES} bytes"
                ));
            }
            exit => {
                // Its standard error may say why; its standard output is
                // the secret (or part of it) and is never shown.
                let stderr = redact_credentials(&outcome.stderr.text());
                let stderr: String = stderr.chars().take(300).collect();
                return Err(if stderr.is_empty() {
                    format!("the secret command `{shown}` {exit}")
                } else {
                    format!("the secret command `{shown}` {exit}: {stderr}")
                });
            }
        }
        if outcome.stdout.truncated {
            return Err(format!(
                "the secret command `{shown}` printed more than {MAX_SECRET_BYTES} bytes"
            ));
        }
        let text = String::from_utf8(outcome.stdout.bytes)
            .map_err(|_| format!("the secret command `{shown}` printed text that is not UTF-8"))?;
        Ok(Some(trim_line_end(text)).filter(|v| !v.is_empty()))
    }
}

/// A value without the one line end a file or a command's output ends
/// with (`echo`, an editor, a Kubernetes secret written by hand).
fn trim_line_end(mut text: String) -> String {
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    text
}

/// One secret's reference from the host's own configuration (a flag,
/// the host configuration file) resolved: `${VAR}` from `env`,
/// `${file:/path}`, `${secret:name}` from `command`. A bare value is
/// refused (it would sit in a process list or a file); no message
/// carries a value.
pub(crate) async fn resolve_reference(
    reference: &str,
    env: &crate::EnvLookup,
    command: Option<&SecretCommand>,
) -> Result<String, String> {
    let inner = reference
        .strip_prefix("${")
        .and_then(|r| r.strip_suffix('}'))
        .ok_or("it must be a reference: `${VAR}`, `${file:/path}` or `${secret:name}`")?;
    let value = if let Some(path) = inner.strip_prefix("file:") {
        read_file(path)?
    } else if let Some(name) = inner.strip_prefix("secret:") {
        match command {
            Some(command) => command.fetch(name).await?,
            None => return Err("`${secret:…}` needs `--secret-command`".to_owned()),
        }
    } else {
        env.get(inner)
    };
    value.ok_or_else(|| format!("`{reference}` is empty or unset"))
}

/// Reads `path` for `${file:…}`: its contents, `Ok(None)` when empty, or
/// why it cannot (never its contents).
pub(crate) fn read_file(path: &str) -> Result<Option<String>, String> {
    if !Path::new(path).is_absolute() {
        return Err(format!("`{path}` is not an absolute path"));
    }
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read `{path}`: {e}"))?;
    let mut bytes = Vec::new();
    use std::io::Read;
    file.take(MAX_SECRET_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read `{path}`: {e}"))?;
    if bytes.len() > MAX_SECRET_BYTES {
        return Err(format!("`{path}` is larger than {MAX_SECRET_BYTES} bytes"));
    }
    let text = String::from_utf8(bytes).map_err(|_| format!("`{path}` is not UTF-8 text"))?;
    Ok(Some(trim_line_end(text)).filter(|v| !v.is_empty()))
}

/// Resolves every `${file:…}` and `${secret:…}` of `host`: the values by
/// key (`file:/path`, `secret:name`), or the diagnostics of those that
/// cannot be resolved. A reference with a default (`:-`) that cannot be
/// resolved reads as its default (and is logged, by key, at `warn`); any
/// other one is a `secret-unavailable` error at its first use in each
/// file. Each file is read once and each secret asked once, however many
/// files name it.
pub async fn resolve(
    host: &Host,
    command: Option<&SecretCommand>,
) -> Result<HashMap<String, String>, Diagnostics> {
    // Every use of each key, in file order.
    let mut uses: BTreeMap<(RefKind, &str), Vec<&EnvRef>> = BTreeMap::new();
    for project in &host.agents {
        for r in &project.agent.env_refs {
            if r.kind != RefKind::Env {
                uses.entry((r.kind, r.name.as_str())).or_default().push(r);
            }
        }
    }
    let mut values = HashMap::new();
    let mut diagnostics = Diagnostics::default();
    for ((kind, name), refs) in uses {
        let key = kind.key(name).into_owned();
        let got = match kind {
            RefKind::File => read_file(name),
            RefKind::Secret => match command {
                Some(command) => command.fetch(name).await,
                None => Err("no secret command is configured".to_owned()),
            },
            RefKind::Env => continue,
        };
        let failure = match got {
            Ok(Some(value)) => {
                values.insert(key, value);
                continue;
            }
            Ok(None) => "it is empty".to_owned(),
            Err(why) => why,
        };
        let mut reported: Vec<&str> = Vec::new();
        for r in refs {
            if r.default.is_some() {
                tracing::warn!(reference = %key, file = %r.path, "a secret by reference is unavailable ({failure}); its default applies");
                continue;
            }
            if reported.contains(&r.path.as_str()) {
                continue;
            }
            reported.push(&r.path);
            let hint = match (&r.required, kind) {
                (Some(message), _) if !message.is_empty() => message.clone(),
                (_, RefKind::Secret) if command.is_none() => {
                    "start the host with `--secret-command PROGRAM` (it prints the secret named by its last argument)".to_owned()
                }
                (_, RefKind::Secret) => format!(
                    "check that the secret command prints `{name}`; `${{secret:{name}:-default}}` gives it a default"
                ),
                _ => format!(
                    "mount the file where the host runs (readable by its user); `${{file:{name}:-default}}` gives it a default"
                ),
            };
            diagnostics.push(
                Diagnostic::error(
                    Code::SecretUnavailable,
                    r.path.clone(),
                    format!("`${{{key}}}`: {failure}"),
                )
                .with_hint(hint)
                .at(Some(Position {
                    line: r.line,
                    column: 1,
                })),
            );
        }
    }
    if diagnostics.has_errors() {
        Err(diagnostics)
    } else {
        Ok(values)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_single_line_end_is_dropped() {
        assert_eq!(trim_line_end("pw\n".into()), "pw");
        assert_eq!(trim_line_end("pw\r\n".into()), "pw");
        assert_eq!(trim_line_end("pw\n\n".into()), "pw\n");
        assert_eq!(trim_line_end(" pw ".into()), " pw ");
    }

    #[test]
    fn commands_split_on_whitespace() {
        let c = SecretCommand::parse("  vault  kv get -field=value ").unwrap();
        assert_eq!(c.program, PathBuf::from("vault"));
        assert_eq!(c.args, ["kv", "get", "-field=value"]);
        assert!(SecretCommand::parse("   ").is_none());
    }
}
