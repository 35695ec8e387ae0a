//! The runtime form of one auth policy, with its secrets already resolved.

use crate::{
    AuthContext, CustomPolicy, JwtPolicy, PrincipalType, Refusal, RequestParts, Secret, Surface,
    credential::{admit_bearer, admit_hmac_signature, admit_shared_secret, admit_slack_signature},
    local::{LoopbackCheck, admit_loopback},
};

/// The principal `allowAll` and `publicEndpoint` admit.
const ANONYMOUS_PRINCIPAL: &str = "anonymous";

/// One link of a [`Chain`](crate::Chain). Mirrors the manifest's
/// `AuthPolicy`, but every `${VAR}` is already replaced by its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Policy {
    /// A direct loopback peer, a loopback `Host`, no forwarding headers.
    LocalDevStrict,
    /// A direct loopback peer, no forwarding headers; any `Host`.
    LocalDev,
    /// Any loopback peer, forwarding headers allowed.
    LoopbackOnly,
    /// Everyone, as the anonymous principal.
    AllowAll,
    /// Everyone, as the anonymous principal, but only on custom channel
    /// routes; never on the built-in API.
    PublicEndpoint,
    /// `Authorization: Bearer <token>`; each token maps to a principal.
    Bearer { tokens: Vec<BearerToken> },
    /// The header `header` must equal `secret`.
    SharedSecret { header: String, secret: Secret },
    /// The header `header` holds the hex HMAC-SHA256 of the raw body keyed
    /// with `secret`, after `prefix` (for example `sha256=`) when set.
    HmacSignature {
        header: String,
        secret: Secret,
        prefix: Option<String>,
    },
    /// `Authorization: Bearer <JWT>` verified against an identity
    /// provider's published keys.
    Jwt(JwtPolicy),
    /// A verifier written in Rust by an embedder.
    Custom(CustomPolicy),
    /// Slack's request signing (`X-Slack-Signature`, `v0`, over the
    /// timestamp and the raw body; the timestamp within five minutes).
    SlackSignature { secret: Secret },
}

/// A bearer token and the principal it authenticates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BearerToken {
    pub token: Secret,
    pub principal: String,
}

impl BearerToken {
    pub fn new(token: impl Into<Secret>, principal: impl Into<String>) -> Self {
        BearerToken {
            token: token.into(),
            principal: principal.into(),
        }
    }
}

impl Policy {
    /// The policy's manifest name, used as the `authenticator` of the
    /// contexts it produces.
    pub fn name(&self) -> &'static str {
        match self {
            Policy::LocalDevStrict => "localDevStrict",
            Policy::LocalDev => "localDev",
            Policy::LoopbackOnly => "loopbackOnly",
            Policy::AllowAll => "allowAll",
            Policy::PublicEndpoint => "publicEndpoint",
            Policy::Bearer { .. } => "bearer",
            Policy::SharedSecret { .. } => "sharedSecret",
            Policy::HmacSignature { .. } => "hmacSignature",
            Policy::Jwt(_) => "jwt",
            Policy::Custom(custom) => custom.name(),
            Policy::SlackSignature { .. } => "slackSignature",
        }
    }

    /// Whether this policy alone admits `req` on `surface`.
    pub async fn admit(
        &self,
        req: &RequestParts<'_>,
        surface: Surface,
    ) -> Result<AuthContext, Refusal> {
        let name = self.name();
        match self {
            Policy::LocalDevStrict => admit_loopback(name, LoopbackCheck::Strict, req),
            Policy::LocalDev => admit_loopback(name, LoopbackCheck::Direct, req),
            Policy::LoopbackOnly => admit_loopback(name, LoopbackCheck::PeerOnly, req),
            Policy::AllowAll => Ok(anonymous(name)),
            Policy::PublicEndpoint => match surface {
                Surface::CustomChannel => Ok(anonymous(name)),
                Surface::BuiltinApi => Err(Refusal::NotCustomChannel),
            },
            Policy::Bearer { tokens } => admit_bearer(name, tokens, req),
            Policy::SharedSecret { header, secret } => {
                admit_shared_secret(name, header, secret, req)
            }
            Policy::HmacSignature {
                header,
                secret,
                prefix,
            } => admit_hmac_signature(name, header, secret, prefix.as_deref(), req),
            Policy::Jwt(jwt) => jwt.admit(name, req).await,
            Policy::Custom(custom) => custom.admit(req).await,
            Policy::SlackSignature { secret } => admit_slack_signature(name, secret, req),
        }
    }
}

fn anonymous(authenticator: &'static str) -> AuthContext {
    AuthContext::new(authenticator, ANONYMOUS_PRINCIPAL, PrincipalType::Anonymous)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::net::{IpAddr, Ipv4Addr};

    use futures_util::FutureExt;

    use super::*;

    #[test]
    fn names_match_the_manifest_spelling() {
        let names: Vec<_> = [
            Policy::LocalDevStrict,
            Policy::LocalDev,
            Policy::LoopbackOnly,
            Policy::AllowAll,
            Policy::PublicEndpoint,
            Policy::Bearer { tokens: vec![] },
            Policy::SharedSecret {
                header: "h".into(),
                secret: "s".into(),
            },
            Policy::HmacSignature {
                header: "h".into(),
                secret: "s".into(),
                prefix: None,
            },
        ]
        .iter()
        .map(Policy::name)
        .collect();
        assert_eq!(
            names,
            [
                "localDevStrict",
                "localDev",
                "loopbackOnly",
                "allowAll",
                "publicEndpoint",
                "bearer",
                "sharedSecret",
                "hmacSignature"
            ]
        );
    }

    #[test]
    fn allow_all_admits_a_remote_peer_anonymously() {
        let req = RequestParts::new(Some(IpAddr::V4(Ipv4Addr::new(203, 0, 113, 1))));
        let ctx = Policy::AllowAll
            .admit(&req, Surface::BuiltinApi)
            .now_or_never()
            .unwrap()
            .unwrap();
        assert_eq!(
            ctx,
            AuthContext::new("allowAll", "anonymous", PrincipalType::Anonymous)
        );
    }

    #[test]
    fn public_endpoint_only_on_custom_channels() {
        let req = RequestParts::new(None);
        assert!(
            Policy::PublicEndpoint
                .admit(&req, Surface::CustomChannel)
                .now_or_never()
                .unwrap()
                .is_ok()
        );
        assert_eq!(
            Policy::PublicEndpoint
                .admit(&req, Surface::BuiltinApi)
                .now_or_never()
                .unwrap(),
            Err(Refusal::NotCustomChannel)
        );
    }

    #[test]
    fn debug_output_redacts_secrets() {
        let p = Policy::Bearer {
            tokens: vec![BearerToken::new("hunter2", "alice")],
        };
        let debug = format!("{p:?}");
        assert!(!debug.contains("hunter2"), "{debug}");
        assert!(debug.contains("alice"), "{debug}");
    }
}
