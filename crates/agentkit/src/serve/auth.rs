//! Builds each agent's auth chain for the built-in HTTP channel: an
//! authored `channels/http.toml` chain wins; otherwise `--bearer-token` or
//! `--allow-anonymous` replace the `local_dev_strict` default.

use agentkit_auth::{BearerToken, Chain, Policy, Secret, Surface};
use agentkit_manifest::{AuthPolicy, ChannelKind, Project};

use super::{EnvLookup, ServeOptions};
use crate::error::{Error, Result};

pub(crate) fn http_chain(project: &Project, options: &ServeOptions) -> Result<Chain> {
    let authored = project
        .agent
        .channels
        .iter()
        .find(|c| c.kind == ChannelKind::Http)
        .and_then(|c| c.auth.clone());
    let chain = match authored {
        Some(policies) => Chain::new(convert(&policies, &options.env), Surface::BuiltinApi),
        None => default_chain(options, Surface::BuiltinApi),
    };
    // A secret from an unset `${VAR}` disables its policy (it never admits;
    // `validate` warns about the variable); other problems are errors.
    let disabled = chain.check_for_serving().map_err(|message| Error::Config {
        message: format!(
            "/{}: the HTTP channel's auth chain: {message}",
            project.slug
        ),
    })?;
    for e in disabled {
        tracing::warn!(agent = %project.slug, "the HTTP channel's auth chain: {e}: is its `${{VAR}}` set?");
    }
    Ok(chain)
}

/// The chain for channels that author none.
pub(crate) fn default_chain(options: &ServeOptions, surface: Surface) -> Chain {
    if let Some(token) = &options.bearer_token {
        Chain::bearer_token(token.clone(), surface)
    } else if options.allow_anonymous {
        Chain::allow_anonymous(surface)
    } else {
        Chain::local_dev_strict(surface)
    }
}

/// Converts a parsed chain, resolving `${VAR}` references in secrets (an
/// unset or empty variable gives an empty secret, which never admits).
pub(crate) fn convert(policies: &[AuthPolicy], env: &EnvLookup) -> Vec<Policy> {
    policies
        .iter()
        .map(|p| match p {
            AuthPolicy::LocalDevStrict => Policy::LocalDevStrict,
            AuthPolicy::LocalDev => Policy::LocalDev,
            AuthPolicy::LoopbackOnly => Policy::LoopbackOnly,
            AuthPolicy::AllowAll => Policy::AllowAll,
            AuthPolicy::PublicEndpoint => Policy::PublicEndpoint,
            AuthPolicy::Bearer { tokens } => Policy::Bearer {
                tokens: tokens
                    .iter()
                    .map(|t| BearerToken::new(env.resolve(&t.token), t.principal.clone()))
                    .collect(),
            },
            AuthPolicy::SharedSecret { header, secret } => Policy::SharedSecret {
                header: header.clone(),
                secret: Secret::new(env.resolve(secret)),
            },
            AuthPolicy::HmacSignature {
                header,
                secret,
                prefix,
            } => Policy::HmacSignature {
                header: header.clone(),
                secret: Secret::new(env.resolve(secret)),
                prefix: prefix.clone(),
            },
        })
        .collect()
}
