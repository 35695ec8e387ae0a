//! Diagnostics: what discovery found wrong, as data, never as a failure.

use std::fmt;

use serde::Serialize;

/// How serious a diagnostic is. Errors fail `agentkit validate` and keep
/// `serve` from starting; warnings are reported and then ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        })
    }
}

macro_rules! codes {
    ($($variant:ident => $name:literal, $doc:literal;)*) => {
        /// A stable diagnostic code. Scripts match on its string form, so a
        /// code is never renamed or reused once released.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Code {
            $(#[doc = $doc] $variant,)*
        }

        impl Code {
            /// Every code, in catalogue order.
            pub const ALL: &'static [Code] = &[$(Code::$variant),*];

            /// The stable string form, such as `missing-instructions`.
            pub fn as_str(self) -> &'static str {
                match self { $(Code::$variant => $name,)* }
            }

            /// What the code means, for the diagnostics reference.
            pub fn summary(self) -> &'static str {
                match self { $(Code::$variant => $doc,)* }
            }
        }
    };
}

codes! {
    // Reading files.
    Io => "io", "A file or folder could not be read.";
    FileTooLarge => "file-too-large", "A definition file is larger than discovery reads (4 MiB).";
    NotUtf8 => "not-utf8", "A definition file is not valid UTF-8 text.";
    NonUtf8Name => "non-utf8-name", "A file or folder name is not valid UTF-8; it is skipped.";
    TooDeep => "too-deep", "A folder is nested deeper than discovery follows (32 levels).";
    SymlinkSkipped => "symlink-skipped", "A symbolic link is broken, loops, or points at a folder; it is skipped.";
    // Syntax.
    TomlInvalid => "toml-invalid", "A TOML file does not parse, or a value has the wrong type.";
    UnknownField => "unknown-field", "A TOML file sets a field that the format does not have.";
    FrontmatterInvalid => "frontmatter-invalid", "The YAML frontmatter of a Markdown file does not parse or has the wrong shape.";
    // Project shape.
    NoAgents => "no-agents", "The folder holds no agent project (no `agent/` folder here or in any child folder).";
    InvalidSlug => "invalid-slug", "A project folder name cannot be used as a URL slug.";
    MissingInstructions => "missing-instructions", "The root agent has no `instructions.md` or `instructions/` folder.";
    AmbiguousInstructions => "ambiguous-instructions", "Both `instructions.md` and `instructions/` exist.";
    EmptyInstructions => "empty-instructions", "The instructions are empty.";
    UnknownEntry => "unknown-entry", "A file or folder that agentkit does not discover.";
    TypescriptDefinition => "typescript-definition", "A TypeScript or JavaScript definition file, which this host cannot load.";
    Unsupported => "unsupported", "A setting this host does not support; it is ignored.";
    SubagentIgnored => "subagent-ignored", "A capability folder inside a subagent, which subagents do not have; it is ignored.";
    // Fields.
    InvalidName => "invalid-name", "A file name cannot be used as the name of what it defines.";
    DuplicateName => "duplicate-name", "Two definitions have the same name.";
    MissingField => "missing-field", "A required field is missing.";
    ConflictingFields => "conflicting-fields", "Fields that exclude each other are set together.";
    InvalidValue => "invalid-value", "A field has a value outside what it accepts.";
    MissingDescription => "missing-description", "A skill package or subagent has no description.";
    MissingFile => "missing-file", "A file that a definition names or needs does not exist.";
    InvalidModel => "invalid-model", "A model string or table names no known provider or is malformed.";
    InvalidDuration => "invalid-duration", "A duration is not like `30s`, `10m` or `2h`.";
    InvalidSchema => "invalid-schema", "A JSON Schema is not valid (draft 2020-12), or a tool input schema is not an object schema.";
    InvalidCron => "invalid-cron", "A cron expression is not standard 5-field cron.";
    ScheduleActions => "schedule-actions", "A TOML schedule does not have exactly one action (`markdown`, `message`, `tool`, `handler` or `command`).";
    InvalidRoute => "invalid-route", "A channel route has a bad method or path, or repeats another route.";
    RouteSchemaRequired => "route-schema-required", "A route lacks the schema its verb requires (GET: `query_schema`; POST/PUT/PATCH: `body_schema`).";
    InvalidTemplate => "invalid-template", "A template does not compile.";
    InvalidAuth => "invalid-auth", "An auth chain names an unknown policy or misconfigures one.";
    UnknownEvent => "unknown-event", "An event name that is not in the event vocabulary.";
    UnknownReference => "unknown-reference", "A reference to a tool, channel or agent that does not exist.";
    PeerSelf => "peer-self", "An MCP connection names its own agent as a peer.";
    InvalidRegex => "invalid-regex", "A regular expression does not compile.";
    EvalsConfigMissing => "evals-config-missing", "Eval files exist but `evals/evals.toml` does not.";
    InvalidEval => "invalid-eval", "An eval file has neither or several of `send`, `turns` and `cases`, or repeats a case id.";
    InvalidExperiment => "invalid-experiment", "An A/B experiment has too few variants, repeated ids, or bad weights.";
    SandboxOff => "sandbox-off", "The sandbox is turned off for the `shell` built-in and server tools, or for one tool: what it runs can read, write and reach everything agentkit's user can.";
    SandboxUnreadable => "sandbox-unreadable", "A sandboxed tool's command needs a file its sandbox cannot read, after the interpreter installs granted automatically (reported by `validate`).";
    EnvUnset => "env-unset", "A `${VAR}` reference names an environment variable that is not set (reported by `validate`).";
    EnvRequired => "env-required", "A `${VAR:?message}` reference names an environment variable that is not set: `validate` fails and `serve` does not start.";
    SecretUnavailable => "secret-unavailable", "A `${file:…}` or `${secret:…}` reference could not be resolved (the file unreadable, the secret command missing, failing or silent): `serve` does not start.";
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One finding about one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub code: Code,
    pub severity: Severity,
    /// The file or folder, relative to the discovered root, with `/`
    /// separators.
    pub path: String,
    /// 1-based line, where the file format gives one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// 1-based column (in characters), where the file format gives one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
    pub message: String,
    /// What to do about it, where there is something to say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl Diagnostic {
    pub fn new(
        code: Code,
        severity: Severity,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            code,
            severity,
            path: path.into(),
            line: None,
            column: None,
            message: message.into(),
            hint: None,
        }
    }

    pub fn error(code: Code, path: impl Into<String>, message: impl Into<String>) -> Self {
        Diagnostic::new(code, Severity::Error, path, message)
    }

    pub fn warning(code: Code, path: impl Into<String>, message: impl Into<String>) -> Self {
        Diagnostic::new(code, Severity::Warning, path, message)
    }

    /// Attaches a position.
    pub fn at(mut self, pos: Option<Position>) -> Self {
        if let Some(pos) = pos {
            self.line = Some(pos.line);
            self.column = Some(pos.column);
        }
        self
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Attaches a hint when there is one.
    pub fn with_opt_hint(mut self, hint: Option<String>) -> Self {
        if hint.is_some() {
            self.hint = hint;
        }
        self
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        write!(f, ": {}[{}]: {}", self.severity, self.code, self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, " (hint: {hint})")?;
        }
        Ok(())
    }
}

/// A 1-based line and column in a text file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub line: u32,
    pub column: u32,
}

/// The diagnostics of one discovery, in a stable order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Diagnostics(Vec<Diagnostic>);

impl Diagnostics {
    pub fn push(&mut self, d: Diagnostic) {
        self.0.push(d);
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Diagnostic> {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn error_count(&self) -> usize {
        self.0
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count()
    }

    pub fn warning_count(&self) -> usize {
        self.0
            .iter()
            .filter(|d| d.severity == Severity::Warning)
            .count()
    }

    pub fn has_errors(&self) -> bool {
        self.error_count() > 0
    }

    /// Sorts by path, then position, then code, so output is the same
    /// whatever order the file system listed entries in.
    /// Keeps the diagnostics `keep` accepts.
    pub(crate) fn retain(&mut self, keep: impl FnMut(&Diagnostic) -> bool) {
        self.0.retain(keep);
    }

    pub(crate) fn sort(&mut self) {
        self.0.sort_by(|a, b| {
            (&a.path, a.line, a.column, a.code, &a.message)
                .cmp(&(&b.path, b.line, b.column, b.code, &b.message))
        });
        self.0.dedup();
    }

    pub fn into_vec(self) -> Vec<Diagnostic> {
        self.0
    }
}

impl Extend<Diagnostic> for Diagnostics {
    fn extend<T: IntoIterator<Item = Diagnostic>>(&mut self, iter: T) {
        self.0.extend(iter);
    }
}

impl<'a> IntoIterator for &'a Diagnostics {
    type Item = &'a Diagnostic;
    type IntoIter = std::slice::Iter<'a, Diagnostic>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_kebab_case() {
        let mut seen = std::collections::BTreeSet::new();
        for code in Code::ALL {
            let s = code.as_str();
            assert!(seen.insert(s), "duplicate code {s}");
            assert!(
                s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
                "{s}"
            );
            assert!(!code.summary().is_empty());
        }
    }

    #[test]
    fn display_names_file_position_code_and_hint() {
        let d = Diagnostic::error(Code::InvalidCron, "agent/schedules/x.md", "bad cron `* *`")
            .at(Some(Position { line: 2, column: 7 }))
            .with_hint("write five fields");
        assert_eq!(
            d.to_string(),
            "agent/schedules/x.md:2:7: error[invalid-cron]: bad cron `* *` (hint: write five fields)"
        );
    }
}
