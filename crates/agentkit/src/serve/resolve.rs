//! `${VAR}` resolved once, at startup: every reference the facade reads
//! (auth chain secrets, hook URLs, headers and secrets, MCP connection
//! targets, the GitHub credentials of `host.github`) becomes a value here,
//! per agent, before anything is mounted. The channels read their own
//! settings with the same lookup (`agentkit_channels::Env`), also once,
//! when `channels.rs` builds them (webhook deliveries, pack secrets).

use std::collections::HashMap;

use std::time::Duration;

use agentkit_auth::{BearerToken, JwtAlgorithm, JwtConfig, Policy, Secret};
use agentkit_manifest::{AuthPolicy, ChannelKind, HookAction, Host, Project, Transport};
use agentkit_mcp::{ConnectionSpec, Target};
use agentkit_runtime::{HookSpec, HookTarget};

use super::options::{AuthDefaults, EnvLookup};
use super::services::{HostGithub, HostSlack};

/// One agent's settings with every `${VAR}` resolved.
#[derive(Debug)]
pub(crate) struct ResolvedAgent {
    /// The authored chain of the built-in HTTP channel (`channels/http.toml`).
    pub(crate) http_auth: Option<Vec<Policy>>,
    /// The authored chains of the custom channels, by channel id.
    pub(crate) channel_auth: HashMap<String, Vec<Policy>>,
    /// The agent's `hooks/*.toml`.
    pub(crate) hooks: Vec<HookSpec>,
    /// The agent's `mcp-connections/`, peers pointed at this host.
    pub(crate) mcp: Vec<ConnectionSpec>,
    /// The remote A2A agents of its `mcp-connections/` (`a2a = "<card>"`).
    pub(crate) a2a: Vec<super::a2a::RemoteAgent>,
    /// GitHub clients with the credentials of the agent's github channels.
    pub(crate) github: HostGithub,
    /// Slack clients with the bot tokens of the agent's slack channels.
    pub(crate) slack: HostSlack,
    /// Where its agent-identity connections find its runtime, once open.
    pub(crate) runtime: super::identity::RuntimeCell,
}

/// What the agent-identity connections of every agent sign with.
#[derive(Debug, Clone)]
pub(crate) struct Identity<'a> {
    pub(crate) issuer: &'a std::sync::Arc<agentkit_auth::IdentityIssuer>,
}

/// Resolves every agent of `host`, in its order. `peer_base` is where
/// peers reach this host (the public URL, else the bound loopback
/// address); peer connections carry `--bearer-token` when there is one.
pub(crate) fn host(
    host: &Host,
    env: &EnvLookup,
    auth: &AuthDefaults,
    peer_base: &str,
    state_root: &std::path::Path,
    identity: &Identity<'_>,
) -> Vec<ResolvedAgent> {
    host.agents
        .iter()
        .map(|project| agent(project, env, auth, peer_base, state_root, identity))
        .collect()
}

fn agent(
    project: &Project,
    env: &EnvLookup,
    auth: &AuthDefaults,
    peer_base: &str,
    state_root: &std::path::Path,
    identity: &Identity<'_>,
) -> ResolvedAgent {
    let channels = &project.agent.channels;
    let runtime = super::identity::RuntimeCell::default();
    // The bearer of a connection with `auth = "agent-identity"`.
    let signer = |c: &agentkit_manifest::Connection| {
        c.agent_identity.as_ref().map(|audience| {
            std::sync::Arc::new(super::identity::AgentIdentity {
                issuer: identity.issuer.clone(),
                agent: project.slug.clone(),
                audience: env.resolve(audience),
                runtime: runtime.clone(),
            })
        })
    };
    ResolvedAgent {
        http_auth: channels
            .iter()
            .find(|c| c.kind == ChannelKind::Http)
            .and_then(|c| c.auth.as_deref())
            .map(|p| policies(p, env)),
        channel_auth: channels
            .iter()
            .filter(|c| c.kind != ChannelKind::Http)
            .filter_map(|c| Some((c.id.clone(), policies(c.auth.as_deref()?, env))))
            .collect(),
        hooks: hooks(project, env),
        mcp: connections(project, env, auth, peer_base, state_root, &signer),
        a2a: remote_agents(project, env, &signer),
        github: HostGithub::of(project, env),
        slack: HostSlack::of(project, env),
        runtime,
    }
}

/// A parsed chain with its secrets resolved (an unset or empty variable
/// gives an empty secret, which never admits). A secret written as
/// `${VAR:-}` alone is optional: while `VAR` is unset, its token (or its
/// policy) is left out of a chain that keeps another policy, so serving
/// warns about nothing the author chose to leave unset.
fn policies(policies: &[AuthPolicy], env: &EnvLookup) -> Vec<Policy> {
    let optional_unset = |raw: &str| {
        let raw = raw.trim();
        raw.starts_with("${")
            && raw.ends_with(":-}")
            && !raw[2..].contains('$')
            && env.resolve(raw).is_empty()
    };
    let kept: Vec<&AuthPolicy> = policies
        .iter()
        .filter(|p| match p {
            // A list with no token at all is a configuration error that
            // serving reports; it is not optional.
            AuthPolicy::Bearer { tokens } => {
                tokens.is_empty() || !tokens.iter().all(|t| optional_unset(&t.token))
            }
            AuthPolicy::SharedSecret { secret, .. } | AuthPolicy::HmacSignature { secret, .. } => {
                !optional_unset(secret)
            }
            _ => true,
        })
        .collect();
    let policies: Vec<&AuthPolicy> = if kept.is_empty() {
        policies.iter().collect()
    } else {
        kept
    };
    policies
        .into_iter()
        .map(|p| match p {
            AuthPolicy::LocalDevStrict => Policy::LocalDevStrict,
            AuthPolicy::LocalDev => Policy::LocalDev,
            AuthPolicy::LoopbackOnly => Policy::LoopbackOnly,
            AuthPolicy::AllowAll => Policy::AllowAll,
            AuthPolicy::PublicEndpoint => Policy::PublicEndpoint,
            AuthPolicy::Bearer { tokens } => Policy::Bearer {
                tokens: tokens
                    .iter()
                    .filter(|t| {
                        !optional_unset(&t.token) || tokens.iter().all(|t| optional_unset(&t.token))
                    })
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
            AuthPolicy::Jwt {
                jwks_url,
                issuer,
                audience,
                algorithms,
                clock_skew_seconds,
                principal_claim,
                principal_prefix,
                claims,
                cache_seconds,
                refetch_floor_seconds,
            } => {
                let mut config = JwtConfig::new(
                    env.resolve(jwks_url),
                    env.resolve(issuer),
                    audience.iter().map(|a| env.resolve(a)).collect(),
                );
                // The manifest admits only the names `JwtAlgorithm` knows.
                config.algorithms = algorithms
                    .iter()
                    .filter_map(|a| JwtAlgorithm::parse(a))
                    .collect();
                config.clock_skew = Duration::from_secs(*clock_skew_seconds);
                config.principal_claim = principal_claim.clone();
                config.principal_prefix = principal_prefix.clone();
                config.attributes = claims.clone();
                config.cache_ttl = Duration::from_secs(*cache_seconds);
                config.refetch_floor = Duration::from_secs(*refetch_floor_seconds);
                super::jwks::jwt_policy(config)
            }
        })
        .collect()
}

/// The agent's `hooks/*.toml` as the runtime runs them.
fn hooks(project: &Project, env: &EnvLookup) -> Vec<HookSpec> {
    let resolve = |s: &str| env.resolve(s);
    project
        .agent
        .hooks
        .iter()
        .map(|h| HookSpec {
            name: h.name.clone(),
            events: h.events.clone(),
            target: match &h.action {
                HookAction::Command { command, cwd } => HookTarget::Command {
                    command: command.clone(),
                    cwd: project.agent.dir.join(cwd),
                },
                HookAction::Url {
                    url,
                    headers,
                    secret,
                } => HookTarget::Url {
                    url: resolve(url),
                    headers: headers
                        .iter()
                        .map(|(k, v)| (k.clone(), resolve(v)))
                        .collect(),
                    secret: secret.as_deref().map(resolve),
                },
            },
            timeout: h.timeout,
        })
        .collect()
}

/// The agent's MCP connections, relative paths anchored in the agent
/// folder, peers pointed at `base`.
fn connections(
    project: &Project,
    env: &EnvLookup,
    auth: &AuthDefaults,
    base: &str,
    state_root: &std::path::Path,
    signer: &dyn Fn(
        &agentkit_manifest::Connection,
    ) -> Option<std::sync::Arc<super::identity::AgentIdentity>>,
) -> Vec<ConnectionSpec> {
    let resolve = |s: &str| env.resolve(s);
    let agent_dir = &project.agent.dir;
    project
        .agent
        .mcp_connections
        .iter()
        .filter_map(|c| {
            let target = match &c.transport {
                Transport::Http { url, headers } => Target::Http {
                    url: resolve(url),
                    headers: headers
                        .iter()
                        .map(|(k, v)| (k.clone(), resolve(v)))
                        .collect(),
                    peer: false,
                    oauth: c
                        .oauth
                        .then(|| crate::mcp_oauth::token_file(state_root, &project.slug, &c.name)),
                    identity: signer(c)
                        .map(|s| s as std::sync::Arc<dyn agentkit_mcp::IdentitySource>),
                },
                Transport::Stdio {
                    command,
                    args,
                    env,
                    cwd,
                } => {
                    let command = resolve(command);
                    let path = std::path::Path::new(&command);
                    // `./server.py` or `bin/server` is the agent's own
                    // file; a bare name is looked up on PATH.
                    let command = if path.is_relative() && path.components().count() > 1 {
                        agent_dir.join(path)
                    } else {
                        path.to_path_buf()
                    };
                    Target::Stdio {
                        command,
                        args: args.iter().map(|a| resolve(a)).collect(),
                        env: env.iter().map(|(k, v)| (k.clone(), resolve(v))).collect(),
                        cwd: Some(
                            cwd.as_ref()
                                .map_or_else(|| agent_dir.clone(), |d| agent_dir.join(resolve(d))),
                        ),
                    }
                }
                // Not MCP: the facade's A2A client (`remote_agents`).
                Transport::A2a { .. } => return None,
                Transport::Peer { agent } => {
                    let mut headers = Vec::new();
                    if let Some(token) = &auth.bearer_token {
                        headers.push(("authorization".to_owned(), format!("Bearer {token}")));
                    }
                    Target::Http {
                        url: format!("{}/{agent}/v1/mcp", base.trim_end_matches('/')),
                        headers,
                        peer: true,
                        oauth: None,
                        identity: None,
                    }
                }
            };
            Some(ConnectionSpec {
                name: c.name.clone(),
                description: c.description.clone(),
                target,
            })
        })
        .collect()
}

/// The agent's remote A2A agents (`a2a = "<card URL>"` connections),
/// their `${VAR}`s resolved.
fn remote_agents(
    project: &Project,
    env: &EnvLookup,
    signer: &dyn Fn(
        &agentkit_manifest::Connection,
    ) -> Option<std::sync::Arc<super::identity::AgentIdentity>>,
) -> Vec<super::a2a::RemoteAgent> {
    let resolve = |s: &str| env.resolve(s);
    project
        .agent
        .mcp_connections
        .iter()
        .filter_map(|c| match &c.transport {
            Transport::A2a { card, headers } => Some(super::a2a::RemoteAgent {
                name: c.name.clone(),
                description: c.description.clone(),
                card: resolve(card),
                headers: headers
                    .iter()
                    .map(|(k, v)| (k.clone(), resolve(v)))
                    .collect(),
                identity: signer(c),
            }),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bearer(tokens: &[&str]) -> AuthPolicy {
        AuthPolicy::Bearer {
            tokens: tokens
                .iter()
                .map(|t| agentkit_manifest::BearerToken {
                    token: (*t).to_owned(),
                    principal: "p".to_owned(),
                })
                .collect(),
        }
    }

    /// The resolved chain as policy names, bearer policies with their
    /// token count.
    fn shape(chain: &[AuthPolicy], set: &'static [(&'static str, &'static str)]) -> Vec<String> {
        let env = EnvLookup::new(move |name| {
            set.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        });
        policies(chain, &env)
            .iter()
            .map(|p| match p {
                Policy::Bearer { tokens } => format!("bearer({})", tokens.len()),
                other => other.name().to_owned(),
            })
            .collect()
    }

    #[test]
    fn optional_secrets_leave_the_chain_while_unset() {
        let chain = [AuthPolicy::LocalDevStrict, bearer(&["${T:-}"])];
        assert_eq!(shape(&chain, &[]), ["localDevStrict"]);
        assert_eq!(
            shape(&chain, &[("T", "s3cret")]),
            ["localDevStrict", "bearer(1)"]
        );
        // One optional token of two: only it goes.
        let two = [bearer(&["${T:-}", "${U}"])];
        assert_eq!(shape(&two, &[]), ["bearer(1)"]);
        // A plain reference, or a reference inside text, is not optional.
        let plain = [
            AuthPolicy::LocalDevStrict,
            bearer(&["${T}"]),
            bearer(&["x${T:-}"]),
        ];
        assert_eq!(
            shape(&plain, &[]),
            ["localDevStrict", "bearer(1)", "bearer(1)"]
        );
        // A chain never loses its last policies (they are warned about),
        // nor a bearer policy without tokens (a configuration error).
        assert_eq!(shape(&[bearer(&["${T:-}"])], &[]), ["bearer(1)"]);
        let empty = [AuthPolicy::LocalDevStrict, bearer(&[])];
        assert_eq!(shape(&empty, &[]), ["localDevStrict", "bearer(0)"]);
        let hmac = [
            AuthPolicy::LocalDevStrict,
            AuthPolicy::HmacSignature {
                header: "x-sig".to_owned(),
                secret: "${S:-}".to_owned(),
                prefix: None,
            },
        ];
        assert_eq!(shape(&hmac, &[]), ["localDevStrict"]);
    }
}
