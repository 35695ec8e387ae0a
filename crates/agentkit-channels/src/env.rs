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
        let mut out = String::new();
        let mut rest = s;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            match after.find('}') {
                Some(end) => {
                    out.push_str(&self.get(&after[..end]).unwrap_or_default());
                    rest = &after[end + 1..];
                }
                None => {
                    out.push_str(&rest[start..]);
                    rest = "";
                }
            }
        }
        out.push_str(rest);
        out
    }
}
