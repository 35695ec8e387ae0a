//! `${VAR}`, `${VAR:-default}` and `${VAR:?message}`: the one reference
//! syntax, parsed here for both discovery's scan and the host's expansion,
//! so what `validate` reports is what `serve` resolves. Secrets by
//! reference share it: `${file:/run/secrets/name}` (a file's contents) and
//! `${secret:name}` (what the host's secret command prints for `name`),
//! with the same fallbacks. The lookup sees them by their key
//! (`file:/run/secrets/name`, `secret:name`, [`Reference::key`]); only the
//! host resolves them.
//!
//! A variable that is unset or empty counts as unset (the host's rule, see
//! `agentkit_channels::Env`): `${VAR:-default}` then reads `default` (which
//! may be empty), `${VAR:?message}` is an error that names `message`, and a
//! plain `${VAR}` reads as the empty string. Text between `${` and `}` that
//! is not a reference (`${bad-name}`, `${}`) stays as written.

/// What a reference does when its variable is unset or empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fallback<'a> {
    /// `${VAR}`: the empty string.
    Empty,
    /// `${VAR:-default}`: `default`.
    Default(&'a str),
    /// `${VAR:?message}`: an error carrying `message` (may be empty).
    Required(&'a str),
}

/// Where a reference's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RefKind {
    /// `${VAR}`: an environment variable.
    Env,
    /// `${file:/path}`: the contents of a file (one trailing line end
    /// dropped).
    File,
    /// `${secret:name}`: what the host's secret command prints for `name`.
    Secret,
}

impl RefKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RefKind::Env => "env",
            RefKind::File => "file",
            RefKind::Secret => "secret",
        }
    }

    /// The key a lookup sees for `name` of this kind: the name itself for
    /// a variable, `file:<path>` or `secret:<name>` otherwise (never a
    /// variable's name, which has no `:`).
    pub fn key(self, name: &str) -> std::borrow::Cow<'_, str> {
        match self {
            RefKind::Env => std::borrow::Cow::Borrowed(name),
            other => std::borrow::Cow::Owned(format!("{}:{name}", other.as_str())),
        }
    }
}

/// One reference: its kind, the variable's name (a file's path, a
/// secret's name) and its fallback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reference<'a> {
    pub(crate) kind: RefKind,
    pub(crate) name: &'a str,
    pub(crate) fallback: Fallback<'a>,
}

impl Reference<'_> {
    /// What the lookup is asked for ([`RefKind::key`]).
    pub(crate) fn key(&self) -> std::borrow::Cow<'_, str> {
        self.kind.key(self.name)
    }
}

/// Parses the text between `${` and `}`; `None` when it is not a
/// reference. A name is ASCII letters, digits and `_`; after `file:`, a
/// path (any text up to a fallback); after `secret:`, ASCII letters,
/// digits and `_ - . /`.
pub(crate) fn parse_reference(inner: &str) -> Option<Reference<'_>> {
    if let Some(rest) = inner.strip_prefix("file:") {
        let end = [rest.find(":-"), rest.find(":?")]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(rest.len());
        return with_fallback(RefKind::File, rest.split_at(end));
    }
    if let Some(rest) = inner.strip_prefix("secret:") {
        let end = rest
            .bytes()
            .position(|b| !(b.is_ascii_alphanumeric() || b"_-./".contains(&b)))
            .unwrap_or(rest.len());
        return with_fallback(RefKind::Secret, rest.split_at(end));
    }
    let end = inner
        .bytes()
        .position(|b| !(b.is_ascii_alphanumeric() || b == b'_'))
        .unwrap_or(inner.len());
    with_fallback(RefKind::Env, inner.split_at(end))
}

/// A reference of `kind` named `name`, whose fallback is `rest`.
fn with_fallback<'a>(kind: RefKind, (name, rest): (&'a str, &'a str)) -> Option<Reference<'a>> {
    if name.is_empty() {
        return None;
    }
    let fallback = if rest.is_empty() {
        Fallback::Empty
    } else if let Some(default) = rest.strip_prefix(":-") {
        Fallback::Default(default)
    } else if let Some(message) = rest.strip_prefix(":?") {
        Fallback::Required(message)
    } else {
        return None;
    };
    Some(Reference {
        kind,
        name,
        fallback,
    })
}

/// Every `${…}` in `s`: the byte range of the whole `${…}` and what it
/// holds (`None` when it is not a reference). An unclosed `${` ends the
/// scan.
pub(crate) fn references(
    s: &str,
) -> impl Iterator<Item = (std::ops::Range<usize>, Option<Reference<'_>>)> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let start = at + s.get(at..)?.find("${")?;
        let inner_start = start + 2;
        let len = s[inner_start..].find('}')?;
        let end = inner_start + len + 1;
        at = end;
        Some((start..end, parse_reference(&s[inner_start..end - 1])))
    })
}

/// A `${VAR:?message}` whose variable is unset or empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingVariable {
    /// The variable's name, or a secret's key (`file:/path`, `secret:name`).
    pub name: String,
    /// The reference's own message; empty when it gave none.
    pub message: String,
}

impl std::fmt::Display for MissingVariable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.message.is_empty() {
            write!(f, "`{}` must be set", self.name)
        } else {
            write!(f, "`{}` must be set: {}", self.name, self.message)
        }
    }
}

impl std::error::Error for MissingVariable {}

/// Expands every reference in `s` with `lookup` (whose `None` means unset;
/// an empty value counts as unset too), failing on the first
/// `${VAR:?message}` whose variable is unset.
///
/// ```
/// let env = |n: &str| (n == "A").then(|| "x".to_owned());
/// let out = agentkit_manifest::try_expand_env("${A}/${B:-b}/${C:-}", env);
/// assert_eq!(out.as_deref(), Ok("x/b/"));
/// let err = agentkit_manifest::try_expand_env("${B:?set B to the API key}", env);
/// assert_eq!(err.unwrap_err().to_string(), "`B` must be set: set B to the API key");
/// ```
pub fn try_expand_env(
    s: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, MissingVariable> {
    expand(s, lookup, true)
}

/// The expansion behind [`try_expand_env`] and `expand_env`: when not
/// `strict`, an unset `${VAR:?message}` reads as empty instead of failing.
pub(crate) fn expand(
    s: &str,
    lookup: impl Fn(&str) -> Option<String>,
    strict: bool,
) -> Result<String, MissingVariable> {
    let mut out = String::with_capacity(s.len());
    let mut copied = 0;
    for (range, reference) in references(s) {
        let Some(r) = reference else { continue };
        out.push_str(&s[copied..range.start]);
        copied = range.end;
        match lookup(&r.key()).filter(|v| !v.is_empty()) {
            Some(value) => out.push_str(&value),
            None => match r.fallback {
                Fallback::Empty => {}
                Fallback::Default(default) => out.push_str(default),
                Fallback::Required(_) if !strict => {}
                Fallback::Required(message) => {
                    return Err(MissingVariable {
                        name: r.key().into_owned(),
                        message: message.trim().to_owned(),
                    });
                }
            },
        }
    }
    out.push_str(&s[copied..]);
    Ok(out)
}

/// The `${…}` references of a TOML document that are outside comments,
/// with the 1-based line each starts on. TOML strings (basic, literal and
/// their multi-line forms) may hold `#`; only a `#` outside a string
/// starts a comment.
pub(crate) fn toml_references(text: &str) -> Vec<(u32, Reference<'_>)> {
    let mut out = Vec::new();
    for (line, code) in toml_code_spans(text) {
        for (_, reference) in references(code) {
            if let Some(r) = reference {
                out.push((line, r));
            }
        }
    }
    out
}

/// The parts of each line of a TOML document that are not comments, as
/// (1-based line, text) pairs. A multi-line string continues across lines.
fn toml_code_spans(text: &str) -> Vec<(u32, &str)> {
    #[derive(Clone, Copy, PartialEq)]
    enum In {
        Code,
        Basic,
        Literal,
        MultiBasic,
        MultiLiteral,
    }
    let mut state = In::Code;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let bytes = line.as_bytes();
        let mut end = bytes.len();
        let mut j = 0;
        while j < bytes.len() {
            let rest = &bytes[j..];
            match state {
                In::Code => match bytes[j] {
                    b'#' => {
                        end = j;
                        break;
                    }
                    b'"' if rest.starts_with(b"\"\"\"") => {
                        state = In::MultiBasic;
                        j += 3;
                        continue;
                    }
                    b'\'' if rest.starts_with(b"'''") => {
                        state = In::MultiLiteral;
                        j += 3;
                        continue;
                    }
                    b'"' => state = In::Basic,
                    b'\'' => state = In::Literal,
                    _ => {}
                },
                In::Basic | In::MultiBasic if bytes[j] == b'\\' => {
                    j += 2;
                    continue;
                }
                In::Basic if bytes[j] == b'"' => state = In::Code,
                In::Literal if bytes[j] == b'\'' => state = In::Code,
                In::MultiBasic if rest.starts_with(b"\"\"\"") => {
                    state = In::Code;
                    j += 3;
                    continue;
                }
                In::MultiLiteral if rest.starts_with(b"'''") => {
                    state = In::Code;
                    j += 3;
                    continue;
                }
                _ => {}
            }
            j += 1;
        }
        // A single-line string never spans a line end (TOML forbids it);
        // recover at the next line rather than reading the file as string.
        if matches!(state, In::Basic | In::Literal) {
            state = In::Code;
        }
        out.push((i as u32 + 1, &line[..end]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "A" => Some("x".to_owned()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn references_parse_their_fallback() {
        let r = |s| parse_reference(s).map(|r| (r.name, r.fallback));
        let kind = |s| parse_reference(s).map(|r| r.kind);
        assert_eq!(r("A"), Some(("A", Fallback::Empty)));
        assert_eq!(kind("A"), Some(RefKind::Env));
        assert_eq!(
            r("file:/run/secrets/db"),
            Some(("/run/secrets/db", Fallback::Empty))
        );
        assert_eq!(kind("file:/run/secrets/db"), Some(RefKind::File));
        assert_eq!(
            r("file:/a b/c:-dev"),
            Some(("/a b/c", Fallback::Default("dev")))
        );
        assert_eq!(
            r("secret:kv/prod.db-token:?ask ops"),
            Some(("kv/prod.db-token", Fallback::Required("ask ops")))
        );
        assert_eq!(kind("secret:x"), Some(RefKind::Secret));
        assert_eq!(r("file:"), None);
        assert_eq!(r("secret:"), None);
        assert_eq!(r("secret:a b"), None);
        assert_eq!(r("A:-b c"), Some(("A", Fallback::Default("b c"))));
        assert_eq!(r("A:-"), Some(("A", Fallback::Default(""))));
        assert_eq!(r("A:?need A"), Some(("A", Fallback::Required("need A"))));
        assert_eq!(r("A:?"), Some(("A", Fallback::Required(""))));
        assert_eq!(r(""), None);
        assert_eq!(r("bad-name"), None);
        assert_eq!(r("A-b"), None);
        assert_eq!(r(":-x"), None);
    }

    #[test]
    fn expansion_applies_defaults_and_requirements() {
        let x = |s| try_expand_env(s, env);
        assert_eq!(x("a${A}b${B}c${D").as_deref(), Ok("axbc${D"));
        assert_eq!(
            x("${B:-https://x.example}/v1").as_deref(),
            Ok("https://x.example/v1")
        );
        assert_eq!(x("${A:-unused}").as_deref(), Ok("x"));
        // An empty value counts as unset, so the default applies.
        assert_eq!(x("${EMPTY:-d}").as_deref(), Ok("d"));
        assert_eq!(x("[${B:-}]").as_deref(), Ok("[]"));
        assert_eq!(x("${A:?unused}").as_deref(), Ok("x"));
        assert_eq!(
            x("t=${EMPTY:?set EMPTY}"),
            Err(MissingVariable {
                name: "EMPTY".into(),
                message: "set EMPTY".into()
            })
        );
        assert_eq!(
            x("${B:?}").map_err(|e| e.to_string()),
            Err("`B` must be set".to_owned())
        );
        // Secrets by reference reach the lookup by their key.
        let secrets = |n: &str| match n {
            "file:/run/secrets/db" => Some("pw".to_owned()),
            "secret:api" => Some("k".to_owned()),
            _ => None,
        };
        assert_eq!(
            try_expand_env(
                "${file:/run/secrets/db}|${secret:api}|${file:/x:-d}",
                secrets
            )
            .as_deref(),
            Ok("pw|k|d")
        );
        assert_eq!(
            try_expand_env("${secret:gone:?ask ops}", secrets).map_err(|e| e.to_string()),
            Err("`secret:gone` must be set: ask ops".to_owned())
        );
        // Not references: left as written.
        assert_eq!(x("${bad-name} ${} $A").as_deref(), Ok("${bad-name} ${} $A"));
    }

    #[test]
    fn comments_are_not_scanned() {
        let text = "a = \"${A}\" # ${IN_COMMENT}\n\
                    # ${WHOLE_LINE}\n\
                    b = 'lit # ${B:-d}' # ${C}\n\
                    c = \"esc \\\" # ${D:?m}\"\n\
                    d = \"\"\"\n# ${E} is in a string\n\"\"\" # ${F}\n\
                    e = '''\n# ${G}\n''' # ${H}\n";
        let found: Vec<(u32, &str)> = toml_references(text)
            .into_iter()
            .map(|(l, r)| (l, r.name))
            .collect();
        assert_eq!(found, [(1, "A"), (3, "B"), (4, "D"), (6, "E"), (9, "G")]);
    }
}
