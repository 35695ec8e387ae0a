//! The principal a policy admits a request as; it travels with the request.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Role;

/// Who made an admitted request, and which policy vouched for them.
///
/// Serialises as `{ authenticator, principalId, principalType, attributes }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthContext {
    /// The policy that admitted the request, by its manifest name
    /// (`localDevStrict`, `bearer`, `hmacSignature`, ...).
    pub authenticator: String,
    /// The principal; sessions belong to it.
    pub principal_id: String,
    pub principal_type: PrincipalType,
    /// Extra facts from the policy, for example the header it checked.
    #[serde(default)]
    pub attributes: BTreeMap<String, String>,
    /// The role the chain gave the principal (`None` until a chain
    /// admits: then [`AuthContext::role`] derives it from the type).
    /// Not part of the JSON shape (`/v1/info` names it separately).
    #[serde(skip)]
    pub role: Option<Role>,
    /// The verified token's claims (the `jwt` policy, OIDC), which role
    /// rules read. Never serialised: a token's claims stay in memory.
    #[serde(skip)]
    pub claims: Option<Arc<Map<String, Value>>>,
    /// The tenant the chain's tenant claim names (`[auth] tenant_claim`):
    /// the principal sees the sessions of this tenant only (`None`: the
    /// tenant-less ones), unless it is `admin`. Not part of the JSON shape.
    #[serde(skip)]
    pub tenant: Option<String>,
}

/// The kind of principal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrincipalType {
    /// A person: the local developer or the holder of a bearer token.
    User,
    /// Nobody in particular (`allowAll`, `publicEndpoint`).
    Anonymous,
    /// A third-party application proving itself with a signature.
    App,
    /// Another service holding a shared secret.
    Service,
    /// An operator: may act on every session of the agent (the operator
    /// token's holder, or the loopback caller under `--dev`).
    Operator,
}

impl AuthContext {
    /// A context without attributes.
    pub fn new(
        authenticator: impl Into<String>,
        principal_id: impl Into<String>,
        principal_type: PrincipalType,
    ) -> Self {
        AuthContext {
            authenticator: authenticator.into(),
            principal_id: principal_id.into(),
            principal_type,
            attributes: BTreeMap::new(),
            role: None,
            claims: None,
            tenant: None,
        }
    }

    /// The caller's role: the one the chain gave, else `operator` for an
    /// operator and `user` for anyone else.
    pub fn role(&self) -> Role {
        self.role.unwrap_or(if self.is_operator() {
            Role::Operator
        } else {
            Role::User
        })
    }

    /// The context with `role`; an operator or admin role makes the
    /// principal an operator (past the ownership checks).
    pub fn with_role(mut self, role: Role) -> Self {
        self.role = Some(role);
        if role.is_operator() {
            self.principal_type = PrincipalType::Operator;
        }
        self
    }

    /// Whether the caller is an operator.
    pub fn is_operator(&self) -> bool {
        self.principal_type == PrincipalType::Operator
    }

    /// Adds one attribute.
    pub fn with_attribute(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.attributes.insert(key.into(), value.into());
        self
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn serialises_with_camel_case_keys_and_lowercase_type() {
        let ctx = AuthContext::new("bearer", "alice", PrincipalType::User).with_attribute("k", "v");
        let json = serde_json::to_string(&ctx).unwrap();
        assert_eq!(
            json,
            r#"{"authenticator":"bearer","principalId":"alice","principalType":"user","attributes":{"k":"v"}}"#
        );
        let back: AuthContext = serde_json::from_str(&json).unwrap();
        assert_eq!(back, ctx);
    }

    #[test]
    fn principal_types_are_lowercase_on_the_wire() {
        let all = [
            PrincipalType::User,
            PrincipalType::Anonymous,
            PrincipalType::App,
            PrincipalType::Service,
            PrincipalType::Operator,
        ];
        let json = serde_json::to_string(&all).unwrap();
        assert_eq!(json, r#"["user","anonymous","app","service","operator"]"#);
    }

    #[test]
    fn attributes_default_to_empty_when_absent() {
        let ctx: AuthContext = serde_json::from_str(
            r#"{"authenticator":"allowAll","principalId":"anonymous","principalType":"anonymous"}"#,
        )
        .unwrap();
        assert!(ctx.attributes.is_empty());
    }
}
