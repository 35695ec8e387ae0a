//! Where model providers are reached and with which key. The host builds
//! this once (flags, then the environment, then a stored key) and every
//! turn borrows it; the harness never reads the environment itself.

use std::fmt;

/// One provider's endpoint.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Endpoint {
    /// `None`: the provider is not configured; a turn that needs it fails
    /// with a message naming the variable to set.
    pub api_key: Option<String>,
    /// The API base, such as `https://api.openai.com/v1` (or a compatible
    /// server: Ollama, vLLM, llama.cpp, LM Studio, OpenRouter …).
    pub base_url: String,
}

impl fmt::Debug for Endpoint {
    // Keys never reach logs, events or errors, nor does a password in the
    // base URL.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field(
                "base_url",
                &agentkit_plumbing::redact_credentials(&self.base_url),
            )
            .finish()
    }
}

/// The endpoints of every remote provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderConfig {
    pub openai: Endpoint,
    pub anthropic: Endpoint,
    /// Record every model exchange to a cassette folder, or answer from
    /// one instead of the providers.
    pub cassette: Option<crate::Cassette>,
}

/// The public APIs, without keys.
impl Default for ProviderConfig {
    fn default() -> Self {
        ProviderConfig {
            openai: Endpoint {
                api_key: None,
                base_url: "https://api.openai.com/v1".to_owned(),
            },
            anthropic: Endpoint {
                api_key: None,
                base_url: "https://api.anthropic.com".to_owned(),
            },
            cassette: None,
        }
    }
}

impl ProviderConfig {
    /// Builds the configuration from an environment lookup:
    /// `OPENAI_API_KEY`, `OPENAI_BASE_URL`, `ANTHROPIC_API_KEY`,
    /// `ANTHROPIC_BASE_URL`. Empty values count as unset.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> ProviderConfig {
        let get = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        let mut config = ProviderConfig::default();
        config.openai.api_key = get("OPENAI_API_KEY");
        if let Some(url) = get("OPENAI_BASE_URL") {
            config.openai.base_url = url.trim_end_matches('/').to_owned();
        }
        config.anthropic.api_key = get("ANTHROPIC_API_KEY");
        if let Some(url) = get("ANTHROPIC_BASE_URL") {
            config.anthropic.base_url = url.trim_end_matches('/').to_owned();
        }
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_never_print() {
        let c = ProviderConfig::from_lookup(|k| {
            (k == "OPENAI_API_KEY").then(|| "sk-secret".to_owned())
        });
        assert!(!format!("{c:?}").contains("sk-secret"));
        assert_eq!(c.openai.api_key.as_deref(), Some("sk-secret"));
        assert_eq!(c.anthropic.base_url, "https://api.anthropic.com");
    }
}
