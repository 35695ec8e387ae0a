//! Builds each agent's auth chains: an authored chain (its `${VAR}`s
//! already resolved) wins; otherwise `--bearer-token` or
//! `--allow-anonymous` replace the `local_dev_strict` default. Who is an
//! operator on the built-in API: the `--operator-token` holder, and the
//! direct loopback caller under `--dev`. The role of everyone else: the
//! agent's `[auth.roles]`.

use agentkit_auth::{Chain, Operators, Policy, Role, RoleMap, RoleRule, Secret, Surface};

use super::options::AuthDefaults;
use crate::error::{Error, Result};

/// The chain of the built-in HTTP channel of agent `slug`: its authored
/// `channels/http.toml` chain, else the default.
pub(crate) fn http_chain(
    slug: &str,
    authored: Option<Vec<Policy>>,
    defaults: &AuthDefaults,
) -> Result<Chain> {
    let mut chain = match authored {
        Some(policies) => Chain::new(policies, Surface::BuiltinApi),
        None => default_chain(defaults, Surface::BuiltinApi),
    };
    with_oidc(&mut chain, defaults);
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
    let mut chain = default_chain(auth, Surface::BuiltinApi);
    with_oidc(&mut chain, auth);
    chain.with_operators(operators(auth, dev))
}

/// The OIDC client's policy (its bearer tokens, its session cookie)
/// before the chain's own, when sign-in is configured.
fn with_oidc(chain: &mut Chain, defaults: &AuthDefaults) {
    if let Some(oidc) = &defaults.oidc {
        chain.policies.insert(0, oidc.policy());
    }
}

/// Agent `slug`'s `[auth]` (checked by the manifest) as the chain's role
/// map.
pub(crate) fn role_map(slug: &str, config: &agentkit_manifest::AuthConfig) -> Result<RoleMap> {
    let bad = |message: String| Error::Config {
        message: format!("/{slug}: agent.toml [auth]: {message}"),
    };
    let mut map = RoleMap::default();
    if let Some(name) = &config.default_role {
        map.default = Role::parse(name).ok_or_else(|| bad(format!("unknown role `{name}`")))?;
    }
    for (name, rules) in &config.roles {
        let role = Role::parse(name).ok_or_else(|| bad(format!("unknown role `{name}`")))?;
        for rule in rules {
            map.rules.push((role, RoleRule::parse(rule).map_err(bad)?));
        }
    }
    Ok(map)
}
