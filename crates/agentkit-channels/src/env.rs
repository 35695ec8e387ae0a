//! `${VAR}` references in channel settings, resolved through a lookup the
//! host passes in (the library never reads the process environment).

use std::sync::Arc;

/// How `${VAR}` references resolve. Cheap to clone.
#[derive(Clone)]
pub struct Env(Arc<EnvFn>);

/// The lookup behind an [`Env`].
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

    /// Resolves nothing.
    pub fn empty() -> Env {
        Env::new(|_| None)
    }

    pub fn get(&self, name: &str) -> Option<String> {
        (self.0)(name).filter(|v| !v.is_empty())
    }

    /// Replaces every `${NAME}` (empty when unset).
    pub fn resolve(&self, s: &str) -> String {
        agentkit_manifest::expand_env(s, |name| self.get(name))
    }
}
