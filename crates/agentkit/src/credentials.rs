//! Stored model-provider keys: `agentkit login` writes them, `logout`
//! removes them, `whoami` says which source is active. Keys resolve in one
//! order everywhere: the environment first, then the stored key.
//!
//! The store is `<config dir>/agentkit/credentials.json`, created with mode
//! 0600 (owner read/write only) in a folder of mode 0700. The library
//! never reads the environment itself: callers pass a lookup.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, Result};
use agentkit_harness::ProviderConfig;

/// The providers that take keys, with the variables they read.
pub const PROVIDERS: &[(&str, &str)] = &[
    ("openai", "OPENAI_API_KEY"),
    ("anthropic", "ANTHROPIC_API_KEY"),
];

/// Where the key of one provider comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeySource {
    pub provider: String,
    /// `env` (with `variable`), `stored` (with `path`), or `none`.
    pub source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variable: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// The credential store in `dir` (the `agentkit` folder of the user's
/// config directory).
#[derive(Debug, Clone)]
pub struct CredentialStore {
    dir: PathBuf,
}

impl CredentialStore {
    pub fn new(dir: impl Into<PathBuf>) -> CredentialStore {
        CredentialStore { dir: dir.into() }
    }

    /// `$XDG_CONFIG_HOME/agentkit`, else `$HOME/.config/agentkit`, from a
    /// lookup of the environment.
    pub fn default_dir(get: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
        let base = get("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| get("HOME").map(|h| Path::new(&h).join(".config")))?;
        Some(base.join("agentkit"))
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join("credentials.json")
    }

    fn read(&self) -> BTreeMap<String, String> {
        fs::read(self.path())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    fn write(&self, keys: &BTreeMap<String, String>) -> Result<()> {
        let path = self.path();
        let io = |source| Error::Write {
            path: path.clone(),
            source,
        };
        create_private_dir(&self.dir).map_err(io)?;
        let tmp = self.dir.join("credentials.json.tmp");
        let _ = fs::remove_file(&tmp);
        let mut file = private_file(&tmp).map_err(|source| Error::Write {
            path: tmp.clone(),
            source,
        })?;
        let json = serde_json::to_vec_pretty(keys).unwrap_or_default();
        file.write_all(&json)
            .and_then(|()| file.sync_all())
            .map_err(|source| Error::Write {
                path: tmp.clone(),
                source,
            })?;
        fs::rename(&tmp, &path).map_err(io)
    }

    /// Stores `key` for `provider`.
    pub fn login(&self, provider: &str, key: &str) -> Result<()> {
        check_provider(provider)?;
        if key.trim().is_empty() {
            return Err(Error::Config {
                message: "the key is empty".into(),
            });
        }
        let mut keys = self.read();
        keys.insert(provider.to_owned(), key.trim().to_owned());
        self.write(&keys)
    }

    /// Removes the stored key of `provider`; returns whether there was one.
    pub fn logout(&self, provider: &str) -> Result<bool> {
        check_provider(provider)?;
        let mut keys = self.read();
        let had = keys.remove(provider).is_some();
        if had {
            self.write(&keys)?;
        }
        Ok(had)
    }

    /// Which source is active for each provider, without the keys.
    pub fn whoami(&self, get: impl Fn(&str) -> Option<String>) -> Vec<KeySource> {
        let stored = self.read();
        PROVIDERS
            .iter()
            .map(|(provider, var)| {
                let (source, variable, path) = if get(var).is_some_and(|v| !v.trim().is_empty()) {
                    ("env", Some((*var).to_owned()), None)
                } else if stored.contains_key(*provider) {
                    ("stored", None, Some(self.path().display().to_string()))
                } else {
                    ("none", None, None)
                };
                KeySource {
                    provider: (*provider).to_owned(),
                    source: source.to_owned(),
                    variable,
                    path,
                }
            })
            .collect()
    }

    /// The provider endpoints from the environment, with stored keys
    /// filling in keys the environment does not set.
    pub fn provider_config(&self, get: impl Fn(&str) -> Option<String>) -> ProviderConfig {
        let mut config = ProviderConfig::from_lookup(&get);
        let stored = self.read();
        if config.openai.api_key.is_none() {
            config.openai.api_key = stored.get("openai").cloned();
        }
        if config.anthropic.api_key.is_none() {
            config.anthropic.api_key = stored.get("anthropic").cloned();
        }
        config
    }
}

/// Applies `--api-key PROVIDER=KEY` values over `config`: they win over
/// the environment and the stored keys. Unknown providers and empty keys
/// are errors (the key itself never appears in one).
pub fn apply_api_keys(config: &mut ProviderConfig, keys: &[String]) -> Result<()> {
    for entry in keys {
        let Some((provider, key)) = entry.split_once('=') else {
            return Err(Error::Config {
                message: "`--api-key` takes PROVIDER=KEY, such as openai=sk-…".to_owned(),
            });
        };
        let provider = provider.trim();
        check_provider(provider)?;
        if key.trim().is_empty() {
            return Err(Error::Config {
                message: format!("`--api-key {provider}=…` has an empty key"),
            });
        }
        let endpoint = match provider {
            "anthropic" => &mut config.anthropic,
            _ => &mut config.openai,
        };
        endpoint.api_key = Some(key.trim().to_owned());
    }
    Ok(())
}

/// The provider endpoints every command uses: the environment, then the
/// keys stored in the default store (when a config directory exists).
pub fn resolve_providers(get: impl Fn(&str) -> Option<String>) -> ProviderConfig {
    match CredentialStore::default_dir(&get) {
        Some(dir) => CredentialStore::new(dir).provider_config(get),
        None => ProviderConfig::from_lookup(get),
    }
}

fn check_provider(provider: &str) -> Result<()> {
    if PROVIDERS.iter().any(|(p, _)| *p == provider) {
        Ok(())
    } else {
        let known: Vec<&str> = PROVIDERS.iter().map(|(p, _)| *p).collect();
        Err(Error::Config {
            message: format!(
                "unknown provider `{provider}`; providers with keys: {}",
                known.join(", ")
            ),
        })
    }
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    fs::create_dir_all(dir)
}

#[cfg(unix)]
fn private_file(path: &Path) -> std::io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn private_file(path: &Path) -> std::io::Result<fs::File> {
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_key_flags_win_over_the_environment_and_the_store()
    -> Result<(), Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        let store = CredentialStore::new(tmp.path().join("agentkit"));
        store.login("anthropic", "sk-stored")?;
        let env = |k: &str| (k == "OPENAI_API_KEY").then(|| "sk-env".to_owned());
        let mut config = store.provider_config(env);
        assert_eq!(config.openai.api_key.as_deref(), Some("sk-env"));
        assert_eq!(config.anthropic.api_key.as_deref(), Some("sk-stored"));
        apply_api_keys(
            &mut config,
            &[
                "openai=sk-flag".to_owned(),
                "anthropic=sk-flag-2".to_owned(),
            ],
        )?;
        assert_eq!(config.openai.api_key.as_deref(), Some("sk-flag"));
        assert_eq!(config.anthropic.api_key.as_deref(), Some("sk-flag-2"));
        for bad in ["sk-secret-0", "nope=sk-secret-1", "openai= "] {
            let err = apply_api_keys(&mut config, &[bad.to_owned()])
                .err()
                .ok_or("accepted a bad --api-key")?
                .to_string();
            assert!(!err.contains("sk-secret"), "the key leaks into: {err}");
        }
        Ok(())
    }

    #[test]
    fn login_whoami_logout_and_resolution_order() -> Result<(), Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        let store = CredentialStore::new(tmp.path().join("agentkit"));
        let none = |_: &str| None;
        assert!(store.whoami(none).iter().all(|s| s.source == "none"));
        store.login("openai", "sk-stored")?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                fs::metadata(store.path())?.permissions().mode() & 0o777,
                0o600
            );
        }
        let env = |k: &str| (k == "ANTHROPIC_API_KEY").then(|| "sk-env".to_owned());
        let who = store.whoami(env);
        assert_eq!(who[0].source, "stored");
        assert_eq!(who[1].source, "env");
        assert!(
            !serde_json::to_string(&who)?.contains("sk-"),
            "whoami never shows a key"
        );
        let config = store.provider_config(env);
        assert_eq!(config.openai.api_key.as_deref(), Some("sk-stored"));
        assert_eq!(config.anthropic.api_key.as_deref(), Some("sk-env"));
        // The environment wins over the stored key.
        let both = |k: &str| (k == "OPENAI_API_KEY").then(|| "sk-env-openai".to_owned());
        assert_eq!(
            store.provider_config(both).openai.api_key.as_deref(),
            Some("sk-env-openai")
        );
        assert!(store.logout("openai")?);
        assert!(!store.logout("openai")?);
        assert!(store.login("mistral", "x").is_err());
        Ok(())
    }
}
