//! `tools/<name>.toml`: server tools (a subprocess on the host) and agent
//! tools (a script the model runs in its workspace).

use std::fs;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::checks;
use crate::diagnostic::{Code, Diagnostic};
use crate::model::{
    Approval, Execution, Expose, MAX_WORKER_CONCURRENCY, Sandbox, Tool, ToolAnnotations, Worker,
    WorkerScope,
};
use crate::source::{Ctx, SourceText};

/// The default time a server tool may run.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(30);
/// The default cap on what a server tool may print.
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 1024 * 1024;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTool {
    description: Option<String>,
    #[serde(default)]
    execution: Execution,
    command: Option<Vec<String>>,
    script: Option<String>,
    script_file: Option<String>,
    timeout: Option<String>,
    max_output_bytes: Option<u64>,
    #[serde(default)]
    env: Vec<String>,
    needs_approval: Option<toml::Value>,
    #[serde(default)]
    read_only: bool,
    #[serde(default)]
    destructive: bool,
    #[serde(default)]
    idempotent: bool,
    #[serde(default)]
    open_world: bool,
    input_schema: Option<toml::Value>,
    input_schema_file: Option<String>,
    sandbox: Option<toml::Value>,
    #[serde(default)]
    expose: Expose,
    worker: Option<toml::Value>,
}

/// Parses one tool file. `name` has already been checked; `sandbox` is
/// the agent's `[harness.sandbox]`, which the tool's own starts from.
pub(crate) fn read_tool(ctx: &mut Ctx, path: &Path, name: &str, sandbox: &Sandbox) -> Option<Tool> {
    let src = ctx.read_text(path)?;
    let raw: RawTool = ctx.parse_toml(&src)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let errors_at_start = ctx.diagnostics.error_count();
    let mut ok = true;
    let err = |ctx: &mut Ctx, code: Code, key: &str, msg: String, hint: Option<&str>| {
        let d = Diagnostic::error(code, src.rel.clone(), msg)
            .at(src.key_pos(key))
            .with_opt_hint(hint.map(str::to_owned));
        ctx.push(d);
    };

    let description = raw.description.unwrap_or_default();
    if description.trim().is_empty() {
        err(
            ctx,
            Code::MissingField,
            "description",
            format!("tool `{name}` needs a `description`"),
            Some("the model reads it to decide when to call the tool"),
        );
    }

    let mut command = Vec::new();
    let mut script = None;
    match raw.execution {
        Execution::Server => {
            if raw.script.is_some() || raw.script_file.is_some() {
                err(
                    ctx,
                    Code::ConflictingFields,
                    "script",
                    "`script` and `script_file` are for `execution = \"agent\"` tools".into(),
                    Some("a server tool runs `command`"),
                );
            }
            match raw.command {
                Some(c) if !c.is_empty() && !c[0].trim().is_empty() => {
                    let program = &c[0];
                    if (program.starts_with("./") || program.starts_with("../"))
                        && !dir.join(program).is_file()
                    {
                        err(
                            ctx,
                            Code::MissingFile,
                            "command",
                            format!("program `{program}` does not exist"),
                            Some("relative commands resolve from the tool file's folder"),
                        );
                    }
                    command = c;
                }
                Some(_) => err(
                    ctx,
                    Code::InvalidValue,
                    "command",
                    "`command` must name a program".into(),
                    None,
                ),
                None => err(
                    ctx,
                    Code::MissingField,
                    "execution",
                    format!("server tool `{name}` needs a `command`"),
                    Some(
                        "e.g. command = [\"python3\", \"get_weather.py\"], relative to this file's folder",
                    ),
                ),
            }
        }
        Execution::Agent => {
            if raw.command.is_some() {
                err(
                    ctx,
                    Code::ConflictingFields,
                    "command",
                    "`command` is for server tools; agent tools have a `script`".into(),
                    None,
                );
            }
            match (raw.script, raw.script_file) {
                (Some(s), None) => script = Some(s),
                (None, Some(f)) => match read_beside(dir, &f) {
                    Ok(s) => script = Some(s),
                    Err(e) => err(
                        ctx,
                        Code::MissingFile,
                        "script_file",
                        format!("`script_file`: {e}"),
                        None,
                    ),
                },
                (Some(_), Some(_)) => err(
                    ctx,
                    Code::ConflictingFields,
                    "script_file",
                    "set `script` or `script_file`, not both".into(),
                    None,
                ),
                (None, None) => err(
                    ctx,
                    Code::MissingField,
                    "execution",
                    format!("agent tool `{name}` needs a `script` or `script_file`"),
                    None,
                ),
            }
        }
    }

    let timeout = match raw.timeout.as_deref().map(checks::parse_duration) {
        None => DEFAULT_TOOL_TIMEOUT,
        Some(Ok(d)) => d,
        Some(Err(e)) => {
            err(
                ctx,
                Code::InvalidDuration,
                "timeout",
                format!("`timeout`: {e}"),
                None,
            );
            DEFAULT_TOOL_TIMEOUT
        }
    };
    for var in &raw.env {
        if var.is_empty() || !var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            err(
                ctx,
                Code::InvalidValue,
                "env",
                format!("`env` entry `{var}` is not an environment variable name"),
                None,
            );
        }
    }

    let input_schema = read_input_schema(
        ctx,
        &src,
        dir,
        raw.input_schema,
        raw.input_schema_file.as_deref(),
        &mut ok,
    );

    let needs_approval = match raw.needs_approval {
        None | Some(toml::Value::Boolean(false)) => Approval::Never,
        Some(toml::Value::Boolean(true)) => Approval::Always,
        Some(toml::Value::Table(t)) => {
            let schema = toml_to_json(&toml::Value::Table(t));
            match checks::check_json_schema(&schema) {
                Ok(()) => Approval::When(schema),
                Err(e) => {
                    err(
                        ctx,
                        Code::InvalidSchema,
                        "needs_approval",
                        format!("`needs_approval` schema is invalid: {e}"),
                        None,
                    );
                    Approval::Never
                }
            }
        }
        Some(other) => {
            err(
                ctx,
                Code::InvalidValue,
                "needs_approval",
                format!(
                    "`needs_approval` must be a boolean or a JSON Schema table, not a {}",
                    other.type_str()
                ),
                None,
            );
            Approval::Never
        }
    };
    if raw.execution == Execution::Agent && needs_approval != Approval::Never {
        err(
            ctx,
            Code::ConflictingFields,
            "needs_approval",
            "approvals apply to server tools only; the model runs agent tools itself".into(),
            None,
        );
    }

    // Server tools call APIs: network is on unless the tool says otherwise.
    // The project folder is the one above `agent/tools/`.
    let base = Sandbox {
        network: true,
        ..sandbox.clone()
    };
    let project_dir = dir.parent().and_then(Path::parent).unwrap_or(dir);
    let sandbox = if raw.execution == Execution::Agent && raw.sandbox.is_some() {
        err(
            ctx,
            Code::ConflictingFields,
            "sandbox",
            "`sandbox` is for server tools; agent tools run through the `shell` built-in and its `[harness.sandbox]`".into(),
            None,
        );
        base
    } else {
        crate::sandbox::read_tool_sandbox(ctx, &src, name, raw.sandbox, &base, project_dir)
    };

    if raw.execution == Execution::Agent && raw.expose == Expose::Host {
        err(
            ctx,
            Code::ConflictingFields,
            "expose",
            "`expose = \"host\"` is for server tools; the model runs agent tools itself".into(),
            None,
        );
    }

    let worker = read_worker(raw.worker, raw.execution, &mut |code, msg, hint| {
        err(ctx, code, "worker", msg, hint)
    });

    let ok = ok && ctx.diagnostics.error_count() == errors_at_start;
    ok.then(|| Tool {
        name: name.to_owned(),
        path: src.rel.clone(),
        description,
        execution: raw.execution,
        command,
        cwd: dir.to_path_buf(),
        script,
        timeout,
        max_output_bytes: raw.max_output_bytes.unwrap_or(DEFAULT_MAX_OUTPUT_BYTES),
        env: raw.env,
        needs_approval,
        annotations: ToolAnnotations {
            read_only: raw.read_only,
            destructive: raw.destructive,
            idempotent: raw.idempotent,
            open_world: raw.open_world,
        },
        input_schema: input_schema
            .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}})),
        sandbox,
        expose: raw.expose,
        worker,
    })
}

/// `worker = true | false` or a `[worker]` table (`concurrency`, 1 to
/// [`MAX_WORKER_CONCURRENCY`]; `idle_timeout`, at least a second;
/// `scope`, `"agent"` or `"session"`);
/// server tools only. Problems go to
/// `report(code, message, hint)`.
fn read_worker(
    value: Option<toml::Value>,
    execution: Execution,
    report: &mut dyn FnMut(Code, String, Option<&str>),
) -> Option<Worker> {
    let worker = match value? {
        toml::Value::Boolean(false) => return None,
        toml::Value::Boolean(true) => Worker::default(),
        toml::Value::Table(table) => {
            let mut worker = Worker::default();
            for (key, value) in table {
                match (key.as_str(), value) {
                    ("concurrency", toml::Value::Integer(n))
                        if (1..=i64::from(MAX_WORKER_CONCURRENCY)).contains(&n) =>
                    {
                        worker.concurrency = n as u32;
                    }
                    ("concurrency", other) => report(
                        Code::InvalidValue,
                        format!(
                            "`worker.concurrency` must be a whole number from 1 to {MAX_WORKER_CONCURRENCY}, not {other}"
                        ),
                        Some(
                            "how many calls one worker process takes at once; more wait their turn",
                        ),
                    ),
                    ("idle_timeout", toml::Value::String(text)) => {
                        match crate::checks::parse_duration(&text) {
                            Ok(d) if d >= std::time::Duration::from_secs(1) => {
                                worker.idle_timeout = d;
                            }
                            Ok(_) => report(
                                Code::InvalidDuration,
                                format!(
                                    "`worker.idle_timeout` is `{text}`; it is at least one second"
                                ),
                                Some(
                                    "how long a worker with no call in flight lives, e.g. `10m` (the default)",
                                ),
                            ),
                            Err(e) => report(
                                Code::InvalidDuration,
                                format!("`worker.idle_timeout`: {e}"),
                                Some(
                                    "how long a worker with no call in flight lives, e.g. `10m` (the default)",
                                ),
                            ),
                        }
                    }
                    ("scope", toml::Value::String(text))
                        if text == "agent" || text == "session" =>
                    {
                        worker.scope = if text == "session" {
                            WorkerScope::Session
                        } else {
                            WorkerScope::Agent
                        };
                    }
                    ("scope", other) => report(
                        Code::InvalidValue,
                        format!("`worker.scope` must be \"agent\" or \"session\", not {other}"),
                        Some(
                            "\"agent\" (the default): one worker for every session; \"session\": one per session, which may keep its state",
                        ),
                    ),
                    ("idle_timeout", other) => report(
                        Code::InvalidDuration,
                        format!("`worker.idle_timeout` must be a duration string, not {other}"),
                        Some("e.g. `idle_timeout = \"10m\"`"),
                    ),
                    (other, _) => report(
                        Code::InvalidValue,
                        format!("`worker` has no field `{other}`"),
                        Some(
                            "the `[worker]` table takes `concurrency`, `idle_timeout` and `scope`",
                        ),
                    ),
                }
            }
            worker
        }
        other => {
            report(
                Code::InvalidValue,
                format!(
                    "`worker` must be a boolean or a table, not a {}",
                    other.type_str()
                ),
                Some("`worker = true`, or a `[worker]` table with `concurrency`"),
            );
            return None;
        }
    };
    if execution == Execution::Agent {
        report(
            Code::ConflictingFields,
            "`worker` is for server tools; the model runs agent tools itself".into(),
            None,
        );
        return None;
    }
    Some(worker)
}

fn read_input_schema(
    ctx: &mut Ctx,
    src: &SourceText,
    dir: &Path,
    inline: Option<toml::Value>,
    file: Option<&str>,
    ok: &mut bool,
) -> Option<Value> {
    let (schema, key) = match (inline, file) {
        (Some(_), Some(_)) => {
            *ok = false;
            ctx.push(
                Diagnostic::error(
                    Code::ConflictingFields,
                    src.rel.clone(),
                    "set `input_schema` or `input_schema_file`, not both",
                )
                .at(src.key_pos("input_schema_file")),
            );
            return None;
        }
        (None, None) => return None,
        (Some(v), None) => (toml_to_json(&v), "[input_schema]"),
        (None, Some(f)) => {
            let path = dir.join(f);
            let text = match read_beside(dir, f) {
                Ok(t) => t,
                Err(e) => {
                    *ok = false;
                    ctx.push(
                        Diagnostic::error(
                            Code::MissingFile,
                            src.rel.clone(),
                            format!("`input_schema_file`: {e}"),
                        )
                        .at(src.key_pos("input_schema_file")),
                    );
                    return None;
                }
            };
            match serde_json::from_str::<Value>(&text) {
                Ok(v) => (v, "input_schema_file"),
                Err(e) => {
                    *ok = false;
                    let rel = ctx.rel(&path);
                    ctx.push(
                        Diagnostic::error(
                            Code::InvalidSchema,
                            rel,
                            format!(
                                "not valid JSON: {}",
                                crate::source::strip_location(&e.to_string())
                            ),
                        )
                        .at(Some(crate::diagnostic::Position {
                            line: e.line() as u32,
                            column: e.column() as u32,
                        })),
                    );
                    return None;
                }
            }
        }
    };
    let pos = src.key_pos(key).or_else(|| src.key_pos("input_schema"));
    if let Err(e) =
        checks::check_json_schema(&schema).and_then(|()| checks::check_object_schema(&schema))
    {
        *ok = false;
        ctx.push(
            Diagnostic::error(
                Code::InvalidSchema,
                src.rel.clone(),
                format!("invalid input schema: {e}"),
            )
            .at(pos),
        );
        return None;
    }
    Some(schema)
}

/// Reads a file that a tool definition names, relative to its folder. The
/// file must stay inside the agent folder (no absolute paths, no `..` out
/// of it, no symlink out of it), be UTF-8 and at most
/// [`crate::source::MAX_FILE_BYTES`] long: a script file is copied into
/// every session workspace, so it must not be a way to read the host.
fn read_beside(dir: &Path, rel: &str) -> Result<String, String> {
    let agent_dir = dir.parent().unwrap_or(dir);
    if Path::new(rel).is_absolute() {
        return Err(format!(
            "`{rel}` must be a path relative to the tool file's folder"
        ));
    }
    let path = dir.join(rel);
    let real = path
        .canonicalize()
        .map_err(|e| format!("cannot read `{rel}`: {e}"))?;
    let root = agent_dir
        .canonicalize()
        .map_err(|e| format!("cannot read `{rel}`: {e}"))?;
    if !real.starts_with(&root) {
        return Err(format!("`{rel}` is outside the `agent/` folder"));
    }
    let meta = fs::metadata(&real).map_err(|e| format!("cannot read `{rel}`: {e}"))?;
    if !meta.is_file() {
        return Err(format!("`{rel}` is not a file"));
    }
    if meta.len() > crate::source::MAX_FILE_BYTES {
        return Err(format!(
            "`{rel}` is {} bytes; the limit is {}",
            meta.len(),
            crate::source::MAX_FILE_BYTES
        ));
    }
    let bytes = fs::read(&real).map_err(|e| format!("cannot read `{rel}`: {e}"))?;
    String::from_utf8(bytes).map_err(|_| format!("`{rel}` is not valid UTF-8 text"))
}

/// Converts TOML to JSON. TOML datetimes become their string form.
pub(crate) fn toml_to_json(v: &toml::Value) -> Value {
    match v {
        toml::Value::String(s) => Value::String(s.clone()),
        toml::Value::Integer(i) => Value::from(*i),
        toml::Value::Float(f) => {
            serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number)
        }
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(a) => Value::Array(a.iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => Value::Object(
            t.iter()
                .map(|(k, v)| (k.clone(), toml_to_json(v)))
                .collect(),
        ),
    }
}
