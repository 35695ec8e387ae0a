//! Reading definition files: size and encoding checks, TOML and YAML
//! frontmatter parsing, and byte offsets turned into lines and columns.

use std::fs;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use crate::checks;
use crate::diagnostic::{Code, Diagnostic, Diagnostics, Position};
use crate::model::EnvRef;
use crate::names;

/// The largest definition file discovery reads. Prompts and schemas are
/// far smaller; anything bigger is a mistake (a data file in the wrong
/// place) and reading it would make `validate` slow.
pub(crate) const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// The largest YAML frontmatter discovery parses.
pub(crate) const MAX_FRONTMATTER_BYTES: usize = 64 * 1024;

/// The deepest folder nesting discovery follows.
pub(crate) const MAX_DEPTH: usize = 32;

/// The state of one discovery: where paths are relative to, and the
/// diagnostics found so far.
#[derive(Debug)]
pub(crate) struct Ctx {
    root: PathBuf,
    pub(crate) diagnostics: Diagnostics,
    env_refs: Vec<EnvRef>,
}

impl Ctx {
    pub(crate) fn new(root: &Path) -> Self {
        Ctx {
            root: root.to_path_buf(),
            diagnostics: Diagnostics::default(),
            env_refs: Vec::new(),
        }
    }

    /// `path` relative to the discovered root, with `/` separators, for
    /// diagnostics and JSON output.
    pub(crate) fn rel(&self, path: &Path) -> String {
        let rel = path.strip_prefix(&self.root).unwrap_or(path);
        let s = rel.to_string_lossy().replace('\\', "/");
        if s.is_empty() { ".".to_owned() } else { s }
    }

    /// A fresh context with the same root, for reading files on another
    /// thread; [`Ctx::absorb`] merges it back.
    pub(crate) fn fork(&self) -> Ctx {
        Ctx::new(&self.root)
    }

    /// Takes over what a forked context found.
    pub(crate) fn absorb(&mut self, other: Ctx) {
        self.diagnostics.extend(other.diagnostics.into_vec());
        self.env_refs.extend(other.env_refs);
    }

    /// The `${VAR}` references read since the last call.
    pub(crate) fn take_env_refs(&mut self) -> Vec<EnvRef> {
        std::mem::take(&mut self.env_refs)
    }

    pub(crate) fn push(&mut self, d: Diagnostic) {
        self.diagnostics.push(d);
    }

    pub(crate) fn error(&mut self, code: Code, path: &Path, message: impl Into<String>) {
        let d = Diagnostic::error(code, self.rel(path), message);
        self.push(d);
    }

    pub(crate) fn warning(&mut self, code: Code, path: &Path, message: impl Into<String>) {
        let d = Diagnostic::warning(code, self.rel(path), message);
        self.push(d);
    }

    /// Reads a definition file as text, or records why it could not be read.
    pub(crate) fn read_text(&mut self, path: &Path) -> Option<SourceText> {
        let meta = match fs::metadata(path) {
            Ok(m) => m,
            Err(e) => {
                self.error(Code::Io, path, format!("cannot read file: {e}"));
                return None;
            }
        };
        if !meta.is_file() {
            self.error(
                Code::Io,
                path,
                "not a regular file (a FIFO, socket or device); it is not read",
            );
            return None;
        }
        if meta.len() > MAX_FILE_BYTES {
            let d = Diagnostic::error(
                Code::FileTooLarge,
                self.rel(path),
                format!(
                    "file is {} bytes; definition files are read up to {MAX_FILE_BYTES} bytes",
                    meta.len()
                ),
            )
            .with_hint(
                "large data belongs under `sandbox/workspace/` or `lib/`, not in a definition file",
            );
            self.push(d);
            return None;
        }
        let bytes = match fs::read(path) {
            Ok(b) => b,
            Err(e) => {
                self.error(Code::Io, path, format!("cannot read file: {e}"));
                return None;
            }
        };
        match String::from_utf8(bytes) {
            Ok(text) => {
                let src = SourceText::new(self.rel(path), text);
                if path.extension().is_some_and(|e| e == "toml") {
                    self.env_refs.extend(checks::scan_env_refs(&src));
                }
                Some(src)
            }
            Err(e) => {
                let offset = e.utf8_error().valid_up_to();
                let valid = String::from_utf8_lossy(&e.as_bytes()[..offset]).into_owned();
                let pos = SourceText::new(String::new(), valid).position(offset);
                let d = Diagnostic::error(
                    Code::NotUtf8,
                    self.rel(path),
                    "file is not valid UTF-8 text",
                )
                .at(Some(pos));
                self.push(d);
                None
            }
        }
    }

    /// Parses a TOML document into `T`, recording syntax and shape errors
    /// with their positions.
    pub(crate) fn parse_toml<T: DeserializeOwned>(&mut self, src: &SourceText) -> Option<T> {
        match toml::from_str::<T>(&src.text) {
            Ok(v) => Some(v),
            Err(e) if is_unknown_field(&e) => {
                self.report_unknown_fields::<T>(src, e);
                None
            }
            Err(e) => {
                self.push_toml_error(src, &e);
                None
            }
        }
    }

    fn push_toml_error(&mut self, src: &SourceText, e: &toml::de::Error) {
        let pos = e.span().map(|s| src.position(s.start));
        let key = e.span().and_then(|s| key_of_value_at(&src.text, s.start));
        let d = toml_error_diagnostic(&src.rel, e.message(), key).at(pos);
        self.push(d);
    }

    /// Reports `first` and every other unknown field of the file: serde
    /// stops at the first, so each one found is taken out of the parsed
    /// document (spans kept, so positions stay those of the file) and the
    /// rest deserialized again. Whatever else is wrong is reported too.
    fn report_unknown_fields<T: DeserializeOwned>(
        &mut self,
        src: &SourceText,
        first: toml::de::Error,
    ) {
        /// A bound on the retries, each a deserialization of the file.
        const MAX_REPORTED: usize = 64;
        self.push_toml_error(src, &first);
        let Ok(mut doc) = toml::de::DeTable::parse(&src.text) else {
            return;
        };
        let mut err = first;
        for _ in 1..MAX_REPORTED {
            let Some(span) = err.span() else { return };
            if !remove_key_at(doc.get_mut(), &span) {
                return; // not a key of the document (a buffered value): stop
            }
            match T::deserialize(toml::de::Deserializer::from(doc.clone())) {
                Ok(_) => return,
                Err(e) => {
                    self.push_toml_error(src, &e);
                    if !is_unknown_field(&e) {
                        return;
                    }
                    err = e;
                }
            }
        }
    }

    /// Splits Markdown into YAML frontmatter and body, and parses the
    /// frontmatter into `T` (the default when there is none).
    pub(crate) fn parse_markdown<T: DeserializeOwned + Default>(
        &mut self,
        src: &SourceText,
    ) -> Option<(T, String)> {
        let Some(fm) = split_frontmatter(&src.text) else {
            return Some((T::default(), src.text.clone()));
        };
        let Frontmatter {
            yaml,
            yaml_line,
            body,
        } = fm;
        if yaml.trim().is_empty() {
            return Some((T::default(), body.to_owned()));
        }
        if yaml.len() > MAX_FRONTMATTER_BYTES {
            // The YAML parser's time grows with the square of nesting depth;
            // frontmatter is a few keys, so a cap keeps `validate` fast on
            // hostile input.
            let d = Diagnostic::error(
                Code::FrontmatterInvalid,
                src.rel.clone(),
                format!("frontmatter is {} bytes; it is read up to {MAX_FRONTMATTER_BYTES} bytes", yaml.len()),
            )
            .at(Some(Position { line: 1, column: 1 }))
            .with_hint("frontmatter holds a few keys such as `description` or `cron`; put long text in the body");
            self.push(d);
            return None;
        }
        match yaml_serde::from_str::<T>(yaml) {
            Ok(v) => Some((v, body.to_owned())),
            Err(e) => {
                let pos = e.location().map(|l| Position {
                    line: yaml_line + l.line() as u32 - 1,
                    column: l.column() as u32,
                });
                // The parser's own "at line N column M" counts from the
                // frontmatter, not the file; the diagnostic has the file's.
                let message = strip_location(&first_line(&e.to_string())).to_owned();
                let d = Diagnostic::error(
                    Code::FrontmatterInvalid,
                    src.rel.clone(),
                    format!("invalid frontmatter: {message}"),
                )
                .at(pos);
                self.push(d);
                None
            }
        }
    }
}

fn is_unknown_field(e: &toml::de::Error) -> bool {
    e.message().trim_start().starts_with("unknown field `")
}

/// Removes the entry whose key is at `span` from `table` or any table
/// inside it; whether one was found.
fn remove_key_at(table: &mut toml::de::DeTable<'_>, span: &std::ops::Range<usize>) -> bool {
    if let Some(key) = table.keys().find(|k| k.span() == *span).cloned() {
        return table.remove(&key).is_some();
    }
    table
        .iter_mut()
        .any(|(_, v)| remove_in_value(v.get_mut(), span))
}

fn remove_in_value(value: &mut toml::de::DeValue<'_>, span: &std::ops::Range<usize>) -> bool {
    match value {
        toml::de::DeValue::Table(t) => remove_key_at(t, span),
        toml::de::DeValue::Array(items) => items
            .iter_mut()
            .any(|item| remove_in_value(item.get_mut(), span)),
        _ => false,
    }
}

/// Drops a trailing " at line N column M", which parsers append to their
/// messages.
pub(crate) fn strip_location(message: &str) -> &str {
    if let Some((head, tail)) = message.rsplit_once(" at line ")
        && let Some((line, column)) = tail.split_once(" column ")
        && !line.is_empty()
        && line.bytes().all(|b| b.is_ascii_digit())
        && !column.is_empty()
        && column.bytes().all(|b| b.is_ascii_digit())
    {
        return head;
    }
    message
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_owned()
}

/// Maps a toml error message to a diagnostic, with a "did you mean" hint
/// for unknown fields.
/// The key of a `key = value` line when `offset` falls in its value, so a
/// type error can name the field it is about.
fn key_of_value_at(text: &str, offset: usize) -> Option<&str> {
    let start = text.get(..offset)?.rfind('\n').map_or(0, |i| i + 1);
    let line = &text[start..];
    let eq = line.find('=')?;
    let key = line[..eq].trim().trim_matches('"');
    (offset > start + eq
        && !key.is_empty()
        && !key.starts_with('[')
        && !key.contains(char::is_whitespace))
    .then_some(key)
}

fn toml_error_diagnostic(rel: &str, message: &str, key: Option<&str>) -> Diagnostic {
    let message = message.trim();
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let field = rest.split('`').next().unwrap_or_default();
        let expected: Vec<&str> = rest
            .split_once("expected")
            .map(|(_, list)| list.split('`').skip(1).step_by(2).collect())
            .unwrap_or_default();
        let hint = names::did_you_mean(field, expected.iter().copied())
            .map(|s| format!("did you mean `{s}`?"))
            .or_else(|| {
                (!expected.is_empty()).then(|| format!("known fields: {}", expected.join(", ")))
            });
        return Diagnostic::error(
            Code::UnknownField,
            rel.to_owned(),
            format!("unknown field `{field}`"),
        )
        .with_opt_hint(hint);
    }
    let message = message.replace('\n', " ");
    let message = match key {
        Some(key)
            if message.starts_with("invalid type") || message.starts_with("invalid value") =>
        {
            format!("`{key}`: {message}")
        }
        _ => message,
    };
    Diagnostic::error(Code::TomlInvalid, rel.to_owned(), message)
}

/// A definition file's text and how to name it.
#[derive(Debug, Clone)]
pub(crate) struct SourceText {
    pub(crate) rel: String,
    pub(crate) text: String,
}

impl SourceText {
    pub(crate) fn new(rel: String, text: String) -> Self {
        SourceText { rel, text }
    }

    /// The 1-based line and column of a byte offset.
    pub(crate) fn position(&self, offset: usize) -> Position {
        let offset = offset.min(self.text.len());
        let before = &self.text.as_bytes()[..offset];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let column = String::from_utf8_lossy(&before[line_start..])
            .chars()
            .count()
            + 1;
        Position {
            line: line as u32,
            column: column as u32,
        }
    }

    /// The position of the first line that starts with `key` (a top-level
    /// TOML key or YAML frontmatter key) or is the header of table `key`
    /// (`[key]`, `[key.sub]`, `[[key]]`), for fields not parsed with spans.
    /// A `key` that is itself a header (`[[routes]]`) matches that header.
    pub(crate) fn key_pos(&self, key: &str) -> Option<Position> {
        let mut offset = 0;
        for line in self.text.split_inclusive('\n') {
            let trimmed = line.trim_start();
            let header = trimmed
                .trim_start_matches('[')
                .strip_prefix(key)
                .is_some_and(|rest| rest.starts_with([']', '.']))
                && trimmed.starts_with('[');
            let is_key = trimmed.strip_prefix(key).is_some_and(|rest| {
                rest.trim_start().starts_with(['=', ':'])
                    || (key.starts_with('[') && key.ends_with(']'))
            });
            if header || is_key {
                return Some(self.position(offset + (line.len() - trimmed.len())));
            }
            offset += line.len();
        }
        None
    }
}

/// YAML frontmatter and the Markdown after it.
#[derive(Debug)]
pub(crate) struct Frontmatter<'a> {
    pub(crate) yaml: &'a str,
    /// The 1-based line the YAML starts on.
    pub(crate) yaml_line: u32,
    pub(crate) body: &'a str,
}

/// Splits `---` fenced frontmatter from the start of a Markdown document.
pub(crate) fn split_frontmatter(text: &str) -> Option<Frontmatter<'_>> {
    let text_nobom = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text_nobom.strip_prefix("---")?;
    let rest = rest
        .strip_prefix("\r\n")
        .or_else(|| rest.strip_prefix('\n'))?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            let yaml = &rest[..offset];
            let body = &rest[offset + line.len()..];
            return Some(Frontmatter {
                yaml,
                yaml_line: 2,
                body,
            });
        }
        offset += line.len();
    }
    // An opening fence with no closing one: the whole rest is YAML.
    Some(Frontmatter {
        yaml: rest,
        yaml_line: 2,
        body: "",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(text: &str) -> SourceText {
        SourceText::new("x".into(), text.into())
    }

    #[test]
    fn positions_count_lines_and_characters() {
        let s = src("a = 1\nbé = 2\n");
        assert_eq!(s.position(0), Position { line: 1, column: 1 });
        assert_eq!(s.position(6), Position { line: 2, column: 1 });
        assert_eq!(s.position(9), Position { line: 2, column: 3 });
        assert_eq!(s.position(1000), Position { line: 3, column: 1 });
    }

    #[test]
    fn frontmatter_splits_and_tolerates_missing_fences() {
        let fm =
            split_frontmatter("---\ncron: \"* * * * *\"\n---\nbody\n").map(|f| (f.yaml, f.body));
        assert_eq!(fm, Some(("cron: \"* * * * *\"\n", "body\n")));
        assert!(split_frontmatter("# title\n---\n").is_none());
        let open = split_frontmatter("---\na: 1\n").map(|f| (f.yaml, f.body));
        assert_eq!(open, Some(("a: 1\n", "")));
    }

    #[test]
    fn locations_are_stripped_from_parser_messages() {
        assert_eq!(strip_location("bad thing at line 3 column 18"), "bad thing");
        assert_eq!(strip_location("at line 3 is fine"), "at line 3 is fine");
        assert_eq!(strip_location("no position"), "no position");
    }

    #[test]
    fn key_pos_finds_top_level_keys() {
        let s = src("# c\ncron = \"x\"\n  tool = 1\n");
        assert_eq!(s.key_pos("cron"), Some(Position { line: 2, column: 1 }));
        assert_eq!(s.key_pos("tool"), Some(Position { line: 3, column: 3 }));
        assert_eq!(s.key_pos("nope"), None);
        let s = src("a = 1\n[model]\nid = \"x\"\n[[variants]]\n[tool.input]\n[models]\n");
        assert_eq!(s.key_pos("model"), Some(Position { line: 2, column: 1 }));
        assert_eq!(s.key_pos("variants"), Some(Position { line: 4, column: 1 }));
        assert_eq!(
            s.key_pos("[[variants]]"),
            Some(Position { line: 4, column: 1 })
        );
        assert_eq!(s.key_pos("tool"), Some(Position { line: 5, column: 1 }));
        assert_eq!(s.key_pos("input"), None);
    }
}
