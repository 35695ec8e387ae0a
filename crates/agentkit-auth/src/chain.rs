//! The ordered list of policies a route runs: the first to admit wins.

use crate::{
    AuthContext, BearerToken, Denied, Error, Operators, Policy, RequestParts, Role, RoleMap, Secret,
};

/// Which kind of route a chain guards. `publicEndpoint` opens custom
/// channel routes only, never the built-in session and tool API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Surface {
    /// The built-in HTTP channel, MCP and dev routes.
    BuiltinApi,
    /// A custom channel route under `/v1/channels/<id>/...`.
    CustomChannel,
}

/// A route's auth chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    pub policies: Vec<Policy>,
    pub surface: Surface,
    /// Who is an operator on this chain (nobody unless set with
    /// [`Chain::with_operators`]).
    pub operators: Operators,
    /// The role of each principal a policy admits (the agent's
    /// `[auth.roles]`; everyone is a `user` by default).
    pub roles: RoleMap,
    /// The claim naming the tenant of each principal a policy admits
    /// (`[auth] tenant_claim`; none by default: every principal is
    /// tenant-less).
    pub tenant_claim: Option<String>,
}

/// The principal `--bearer-token` authenticates.
const BEARER_FLAG_PRINCIPAL: &str = "bearer";

impl Chain {
    pub fn new(policies: Vec<Policy>, surface: Surface) -> Self {
        Chain {
            policies,
            surface,
            operators: Operators::none(),
            roles: RoleMap::default(),
            tenant_claim: None,
        }
    }

    /// The chain with each admitted principal's tenant read from `claim`.
    pub fn with_tenant_claim(mut self, claim: Option<String>) -> Self {
        self.tenant_claim = claim;
        self
    }

    /// The chain with `roles` applied to the principals it admits.
    pub fn with_roles(mut self, roles: RoleMap) -> Self {
        self.roles = roles;
        self
    }

    /// The chain with `operators` recognised: the operator token admits
    /// before any policy, and a loopback operator's context is marked.
    pub fn with_operators(mut self, operators: Operators) -> Self {
        self.operators = operators;
        self
    }

    /// The default chain, `[localDevStrict]`, for routes whose channel
    /// authors none and when no server flag replaces it.
    pub fn local_dev_strict(surface: Surface) -> Self {
        Chain::new(vec![Policy::LocalDevStrict], surface)
    }

    /// The chain `--bearer-token <token>` puts in place of the default:
    /// one bearer token for the principal `bearer`.
    pub fn bearer_token(token: impl Into<Secret>, surface: Surface) -> Self {
        let tokens = vec![BearerToken::new(token, BEARER_FLAG_PRINCIPAL)];
        Chain::new(vec![Policy::Bearer { tokens }], surface)
    }

    /// The chain `--allow-anonymous` puts in place of the default.
    pub fn allow_anonymous(surface: Surface) -> Self {
        Chain::new(vec![Policy::AllowAll], surface)
    }

    /// The context of the first policy that admits `req`, or [`Denied`]
    /// with every policy's reason when none does.
    pub async fn admit(&self, req: &RequestParts<'_>) -> Result<AuthContext, Denied> {
        if let Some(ctx) = self.operators.by_token(req) {
            return Ok(ctx);
        }
        let mut refusals = Vec::with_capacity(self.policies.len());
        for policy in &self.policies {
            match policy.admit(req, self.surface).await {
                Ok(mut ctx) => {
                    ctx.tenant = self
                        .tenant_claim
                        .as_deref()
                        .and_then(|claim| crate::role::tenant_of(&ctx, claim));
                    let mapped = self.roles.role_of(&ctx);
                    // A verifier that answers an operator stays one.
                    let role = if ctx.is_operator() {
                        mapped.max(Role::Operator)
                    } else {
                        mapped
                    };
                    return Ok(self.operators.promote(req, ctx.with_role(role)));
                }
                Err(refusal) => refusals.push((policy.name(), refusal)),
            }
        }
        Err(Denied::new(refusals))
    }

    /// [`Chain::validate`] as a server reads it: a secret left empty (an
    /// unset `${VAR}`) only disables its policy, which never admits, so
    /// those come back to be warned about; any other problem is a
    /// configuration error, answered as one message.
    pub fn check_for_serving(&self) -> std::result::Result<Vec<Error>, String> {
        let (disabled, problems): (Vec<_>, Vec<_>) = self
            .validate()
            .into_iter()
            .partition(|e| matches!(e, Error::EmptySecret { .. }));
        if problems.is_empty() {
            return Ok(disabled);
        }
        Err(problems
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; "))
    }

    /// Configuration that makes a policy (or the whole chain) unable to
    /// admit anything, for the caller to report. The chain stays usable:
    /// such policies just never admit.
    pub fn validate(&self) -> Vec<Error> {
        let mut errors = Vec::new();
        if self.policies.is_empty() {
            errors.push(Error::EmptyChain);
        }
        for (index, policy) in self.policies.iter().enumerate() {
            let name = policy.name();
            match policy {
                Policy::LocalDevStrict
                | Policy::LocalDev
                | Policy::LoopbackOnly
                | Policy::AllowAll => {}
                Policy::PublicEndpoint => {
                    if self.surface == Surface::BuiltinApi {
                        errors.push(Error::PublicEndpointOnBuiltinApi { index });
                    }
                }
                Policy::Bearer { tokens } => validate_bearer(index, tokens, &mut errors),
                Policy::Jwt(jwt) => {
                    for problem in jwt.config().problems() {
                        errors.push(Error::JwtConfig { index, problem });
                    }
                }
                Policy::Custom(_) => {}
                Policy::SlackSignature { secret } => {
                    if secret.is_empty() {
                        errors.push(Error::EmptySecret {
                            index,
                            policy: name,
                        });
                    }
                }
                Policy::SharedSecret { header, secret }
                | Policy::HmacSignature { header, secret, .. } => {
                    if header.is_empty() {
                        errors.push(Error::EmptyHeader {
                            index,
                            policy: name,
                        });
                    }
                    if secret.is_empty() {
                        errors.push(Error::EmptySecret {
                            index,
                            policy: name,
                        });
                    }
                }
            }
        }
        errors
    }
}

fn validate_bearer(index: usize, tokens: &[BearerToken], errors: &mut Vec<Error>) {
    if tokens.is_empty() {
        errors.push(Error::NoBearerTokens { index });
        return;
    }
    let mut seen: Vec<&BearerToken> = Vec::new();
    let mut empty_reported = false;
    for token in tokens {
        if token.token.is_empty() {
            if !empty_reported {
                empty_reported = true;
                errors.push(Error::EmptySecret {
                    index,
                    policy: "bearer",
                });
            }
            continue;
        }
        // Configuration time, not request time: a plain comparison is fine.
        if let Some(first) = seen
            .iter()
            .find(|t| t.token.expose() == token.token.expose())
        {
            errors.push(Error::DuplicateBearerToken {
                index,
                first: first.principal.clone(),
                second: token.principal.clone(),
            });
        } else {
            seen.push(token);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::net::{IpAddr, Ipv4Addr};

    use futures_util::FutureExt;

    use super::*;
    use crate::Refusal;

    #[test]
    fn empty_chain_denies_with_no_refusals() {
        let chain = Chain::new(vec![], Surface::CustomChannel);
        let denied = chain
            .admit(&RequestParts::new(None))
            .now_or_never()
            .unwrap()
            .unwrap_err();
        assert!(denied.refusals().is_empty());
        assert_eq!(denied.to_string(), "no auth policy admitted the request");
        assert_eq!(chain.validate(), [Error::EmptyChain]);
    }

    #[test]
    fn denied_lists_every_policy_in_order() {
        let chain = Chain::new(
            vec![Policy::LocalDevStrict, Policy::PublicEndpoint],
            Surface::BuiltinApi,
        );
        let remote = RequestParts::new(Some(IpAddr::V4(Ipv4Addr::new(198, 51, 100, 2))));
        let denied = chain.admit(&remote).now_or_never().unwrap().unwrap_err();
        assert_eq!(
            denied.refusals(),
            [
                ("localDevStrict", Refusal::PeerNotLoopback),
                ("publicEndpoint", Refusal::NotCustomChannel)
            ]
        );
    }

    #[test]
    fn flag_constructors() {
        assert_eq!(
            Chain::local_dev_strict(Surface::BuiltinApi).policies,
            [Policy::LocalDevStrict]
        );
        assert_eq!(
            Chain::allow_anonymous(Surface::BuiltinApi).policies,
            [Policy::AllowAll]
        );
        let chain = Chain::bearer_token("tok", Surface::BuiltinApi);
        let req = RequestParts::new(None).with_header("authorization", "Bearer tok");
        let ctx = chain.admit(&req).now_or_never().unwrap().unwrap();
        assert_eq!(
            (ctx.authenticator.as_str(), ctx.principal_id.as_str()),
            ("bearer", "bearer")
        );
    }

    #[test]
    fn validate_reports_configurations_that_never_admit() {
        let chain = Chain::new(
            vec![
                Policy::LocalDevStrict,
                Policy::PublicEndpoint,
                Policy::Bearer { tokens: vec![] },
                Policy::Bearer {
                    tokens: vec![
                        BearerToken::new("", "a"),
                        BearerToken::new("", "b"),
                        BearerToken::new("t", "c"),
                        BearerToken::new("t", "d"),
                    ],
                },
                Policy::SharedSecret {
                    header: String::new(),
                    secret: "".into(),
                },
                Policy::HmacSignature {
                    header: "x-sig".into(),
                    secret: "".into(),
                    prefix: None,
                },
            ],
            Surface::BuiltinApi,
        );
        let messages: Vec<String> = chain.validate().iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            [
                "auth policy 1 (publicEndpoint) applies only to custom channel routes and never admits on the built-in API",
                "auth policy 2 (bearer) has no tokens and never admits a request",
                "auth policy 3 (bearer) has an empty secret and never admits a request",
                "auth policy 3 (bearer) gives one token to principals `c` and `d`; only `c` is ever admitted",
                "auth policy 4 (sharedSecret) names no header and never admits a request",
                "auth policy 4 (sharedSecret) has an empty secret and never admits a request",
                "auth policy 5 (hmacSignature) has an empty secret and never admits a request",
            ]
        );
        assert!(
            Chain::local_dev_strict(Surface::BuiltinApi)
                .validate()
                .is_empty()
        );
        // Serving: empty secrets only disable their policy; the rest refuse.
        let refused = chain.check_for_serving().unwrap_err();
        assert!(
            refused.starts_with("auth policy 1 (publicEndpoint)"),
            "{refused}"
        );
        assert!(!refused.contains("empty secret"), "{refused}");
        let unset = Chain::new(
            vec![
                Policy::LocalDevStrict,
                Policy::SharedSecret {
                    header: "x-token".into(),
                    secret: "".into(),
                },
            ],
            Surface::CustomChannel,
        );
        let disabled = unset.check_for_serving().unwrap();
        assert_eq!(disabled.len(), 1);
    }
}
