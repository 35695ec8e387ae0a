//! `${VAR}` references, resolved through a lookup the host passes in (the
//! library never reads the process environment unless the host asks for
//! [`Env::process`]). The one lookup type of the workspace: the facade
//! re-exports it as `agentkit::EnvLookup` for auth chains, MCP
//! connections, hooks and channels alike.

use std::sync::Arc;

/// How `${VAR}` references resolve. Cheap to clone.
///
/// **An empty value counts as unset**, everywhere: [`Env::get`] answers
/// `None` for it, [`Env::resolve`] reads it as the empty string (as it
/// reads an unset variable), and `agentkit validate` warns about it
/// (`env-unset`) as about an unset one. A secret from such a variable is
/// empty, so its auth policy never admits anyone.
#[derive(Clone)]
pub struct Env(pub Arc<EnvFn>);

/// The lookup behind an [`Env`]: the raw value of a variable, if any (the
/// empty-value rule is applied on top of it).
pub type EnvFn = dyn Fn(&str) -> Option<String> + Send + Sync;

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Env(..)")
    }
}

impl Env {
    pub fn new(f: impl Fn(&str) -> Option<String> + Send + Sync + 'static) -> Env {
        Env(Arc::new(f))
    }

    /// Reads the process environment (for binaries; libraries and tests
    /// pass their own lookup).
    pub fn process() -> Env {
        Env::new(|name| std::env::var(name).ok())
    }

    /// Resolves nothing (every reference reads as empty).
    pub fn empty() -> Env {
        Env::new(|_| None)
    }

    /// This lookup with secrets by reference resolved: `values` answers the
    /// keys of `${file:…}` and `${secret:…}` references (`file:/path`,
    /// `secret:name`); any other key with a `:` (never a variable's name)
    /// reads as unset rather than reaching this lookup.
    pub fn with_resolved(self, values: std::collections::HashMap<String, String>) -> Env {
        let vars = self.0;
        Env::new(move |name| {
            if name.contains(':') {
                values.get(name).cloned()
            } else {
                vars(name)
            }
        })
    }

    /// The value of `name`; `None` when it is unset or empty.
    pub fn get(&self, name: &str) -> Option<String> {
        (self.0)(name).filter(|v| !v.is_empty())
    }

    /// Whether `name` has a value that is not empty.
    pub fn is_set(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Replaces every `${NAME}` with its value (empty when unset or empty),
    /// `${NAME:-default}` with `default` when unset or empty. An unset
    /// `${NAME:?message}` reads as empty: the host refuses to start before
    /// it resolves one (`agentkit_manifest::unset_env_refs`).
    pub fn resolve(&self, s: &str) -> String {
        agentkit_manifest::expand_env(s, |name| self.get(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_values_count_as_unset() {
        let env = Env::new(|name| match name {
            "A" => Some("x".to_owned()),
            "EMPTY" => Some(String::new()),
            _ => None,
        });
        assert_eq!(env.get("A").as_deref(), Some("x"));
        assert_eq!(env.get("EMPTY"), None);
        assert_eq!(env.get("B"), None);
        assert!(env.is_set("A") && !env.is_set("EMPTY") && !env.is_set("B"));
        assert_eq!(env.resolve("Bearer ${A}-${EMPTY}-${B}"), "Bearer x--");
        assert_eq!(env.resolve("${A"), "${A");
        assert_eq!(env.resolve("${EMPTY:-d}/${B:-}/${A:-no}"), "d//x");
    }

    #[test]
    fn resolved_secrets_answer_their_keys_only() {
        let env = Env::new(|name| Some(format!("var {name}"))).with_resolved(
            [("file:/run/secrets/db".to_owned(), "pw".to_owned())]
                .into_iter()
                .collect(),
        );
        assert_eq!(
            env.resolve("${A}|${file:/run/secrets/db}|${file:/other:-d}|${secret:x}"),
            "var A|pw|d|"
        );
    }
}
