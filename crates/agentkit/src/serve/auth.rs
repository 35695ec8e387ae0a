//! Builds each agent's auth chains: an authored chain (its `${VAR}`s
//! already resolved) wins; otherwise `--bearer-token` or
//! `--allow-anonymous` replace the `local_dev_strict` default. Who is an
//! operator on the built-in API: the `--operator-token` holder, and the
//! direct loopback caller under `--dev`.

use agentkit_auth::{Chain, Operators, Policy, Secret, Surface};

use super::options::AuthDefaults;
use crate::error::{Error, Result};

/// The chain of the built-in HTTP channel of agent `slug`: its authored
/// `channels/http.toml` chain, else the default.
pub(crate) fn http_chain(
    slug: &str,
    authored: Option<Vec<Policy>>,
    defaults: &AuthDefaults,
) -> Result<Chain> {
    let chain = match authored {
        Some(policies) => Chain::new(policies, Surface::BuiltinApi),
        None => default_chain(defaults, Surface::BuiltinApi),
    };
    // A secret from an unset `${VAR}` disables its policy (it never admits;
    // `validate` warns about the variable); other problems are errors.
    let disabled = chain.check_for_serving().map_err(|message| Error::Config {
        message: format!("/{slug}: the HTTP channel's auth chain: {message}"),
    })?;
    for e in disabled {
        tracing::warn!(agent = %slug, "the HTTP channel's auth chain: {e}: is its `${{VAR}}` set?");
    }
    Ok(chain)
}

/// The chain for channels that author none.
pub(crate) fn default_chain(defaults: &AuthDefaults, surface: Surface) -> Chain {
    if let Some(policies) = &defaults.policies {
        Chain::new(policies.clone(), surface)
    } else if let Some(token) = &defaults.bearer_token {
        Chain::bearer_token(token.clone(), surface)
    } else if defaults.allow_anonymous {
        Chain::allow_anonymous(surface)
    } else {
        Chain::local_dev_strict(surface)
    }
}

/// The operators of every agent's built-in API (sessions, approvals,
/// MCP, dev routes): never on custom channel routes.
pub(crate) fn operators(defaults: &AuthDefaults, dev: bool) -> Operators {
    let token = defaults.operator_token.clone().map(Secret::new);
    if token.as_ref().is_some_and(Secret::is_empty) {
        tracing::warn!("the operator token is empty: nobody is admitted with it");
    }
    Operators {
        token,
        loopback: dev,
    }
}

/// The chain of the host routes (`/metrics`, `/v1/logs`): the default
/// chain of channels that author none, with the operators.
pub(crate) fn host_chain(auth: &AuthDefaults, dev: bool) -> Chain {
    default_chain(auth, Surface::BuiltinApi).with_operators(operators(auth, dev))
}
