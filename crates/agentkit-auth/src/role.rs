//! Roles: what an admitted principal may do on an agent's built-in API.
//!
//! ```text
//! viewer < user < operator < admin
//! ```
//!
//! - `viewer` reads the sessions it may see (its own) and nothing more;
//! - `user` is today's principal: it starts sessions and acts on its own;
//! - `operator` acts on every session of the agent (approvals, dev routes);
//! - `admin` is an operator on every agent of the host.
//!
//! A [`RoleMap`] (an agent's `[auth.roles]`) names the role of a principal
//! from its token's claims or its principal id; the chain applies it after
//! a policy admits. The operator token and the `--dev` loopback caller are
//! `admin`, whatever the map says.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::AuthContext;

/// A role, ordered by reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Viewer,
    User,
    Operator,
    Admin,
}

impl Role {
    /// Every role, lowest first.
    pub const ALL: [Role; 4] = [Role::Viewer, Role::User, Role::Operator, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::User => "user",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    pub fn parse(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == name)
    }

    /// Operators and admins pass the ownership checks of sessions.
    pub fn is_operator(self) -> bool {
        self >= Role::Operator
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One rule of a role map: `"<claim>:<value>"` holds when the token's
/// claim (a dotted path into nested objects, `realm_access.roles`) is the
/// value or an array containing it; `"principal:<id>"` holds for that
/// principal id, whichever policy admitted it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleRule {
    claim: String,
    value: String,
}

impl RoleRule {
    /// Parses `"<claim>:<value>"` (split at the first `:`).
    pub fn parse(text: &str) -> Result<RoleRule, String> {
        match text.split_once(':') {
            Some((claim, value)) if !claim.is_empty() && !value.is_empty() => Ok(RoleRule {
                claim: claim.to_owned(),
                value: value.to_owned(),
            }),
            _ => Err(format!(
                "`{text}` is not `<claim>:<value>` (for example `groups:agents-ops` or `principal:jwt:alice`)"
            )),
        }
    }

    fn holds(&self, ctx: &AuthContext) -> bool {
        if self.claim == "principal" {
            return ctx.principal_id == self.value;
        }
        match claim_at(ctx, &self.claim) {
            Some(Value::String(s)) => *s == self.value,
            Some(Value::Array(items)) => items
                .iter()
                .any(|i| i.as_str() == Some(self.value.as_str())),
            Some(Value::Bool(b)) => b.to_string() == self.value,
            Some(Value::Number(n)) => n.to_string() == self.value,
            _ => false,
        }
    }
}

/// The value of a token's claim by its dotted path into nested objects
/// (`realm_access.roles`), when the admitted principal has claims.
pub(crate) fn claim_at<'a>(ctx: &'a AuthContext, path: &str) -> Option<&'a Value> {
    let claims = ctx.claims.as_deref()?;
    let mut parts = path.split('.');
    let mut at = claims.get(parts.next()?);
    for part in parts {
        at = at.and_then(|v| v.get(part));
    }
    at
}

/// The tenant a claim names: a non-empty string or a number.
pub(crate) fn tenant_of(ctx: &AuthContext, claim: &str) -> Option<String> {
    match claim_at(ctx, claim)? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// An agent's `[auth.roles]`: the role of each admitted principal. The
/// highest role whose rules hold wins; when none holds, `default` (`user`
/// unless set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleMap {
    pub default: Role,
    pub rules: Vec<(Role, RoleRule)>,
}

impl Default for RoleMap {
    fn default() -> Self {
        RoleMap {
            default: Role::User,
            rules: Vec::new(),
        }
    }
}

impl RoleMap {
    /// The role of a principal a policy admitted (not the operator token).
    pub fn role_of(&self, ctx: &AuthContext) -> Role {
        self.rules
            .iter()
            .filter(|(_, rule)| rule.holds(ctx))
            .map(|(role, _)| *role)
            .max()
            .unwrap_or(self.default)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::PrincipalType;

    fn ctx(claims: Value) -> AuthContext {
        let mut ctx = AuthContext::new("jwt", "jwt:alice", PrincipalType::User);
        ctx.claims = claims.as_object().cloned().map(Arc::new);
        ctx
    }

    fn map(rules: &[(Role, &str)]) -> RoleMap {
        RoleMap {
            default: Role::User,
            rules: rules
                .iter()
                .map(|(r, t)| (*r, RoleRule::parse(t).unwrap()))
                .collect(),
        }
    }

    #[test]
    fn the_highest_matching_role_wins_else_the_default() {
        let m = map(&[
            (Role::Viewer, "groups:auditors"),
            (Role::Operator, "groups:agents-ops"),
            (Role::Admin, "realm_access.roles:platform"),
        ]);
        assert_eq!(m.role_of(&ctx(json!({"groups": ["x"]}))), Role::User);
        assert_eq!(m.role_of(&ctx(json!({"groups": "auditors"}))), Role::Viewer);
        assert_eq!(
            m.role_of(&ctx(json!({"groups": ["auditors", "agents-ops"]}))),
            Role::Operator
        );
        assert_eq!(
            m.role_of(&ctx(json!({"realm_access": {"roles": ["platform"]}}))),
            Role::Admin
        );
        // No claims at all (a bearer token): only principal rules apply.
        let mut plain = AuthContext::new("bearer", "ops-bot", PrincipalType::User);
        assert_eq!(m.role_of(&plain), Role::User);
        let m = map(&[(Role::Operator, "principal:ops-bot")]);
        assert_eq!(m.role_of(&plain), Role::Operator);
        plain.principal_id = "other".into();
        assert_eq!(m.role_of(&plain), Role::User);
    }

    #[test]
    fn a_tenant_is_a_non_empty_string_or_a_number() {
        let c = ctx(json!({"org_id": "acme", "org": {"id": 42}, "empty": "", "list": ["a"]}));
        assert_eq!(tenant_of(&c, "org_id").as_deref(), Some("acme"));
        assert_eq!(tenant_of(&c, "org.id").as_deref(), Some("42"));
        for none in ["empty", "list", "missing", "org.missing"] {
            assert_eq!(tenant_of(&c, none), None, "{none}");
        }
        let plain = AuthContext::new("bearer", "ops-bot", PrincipalType::User);
        assert_eq!(tenant_of(&plain, "org_id"), None);
    }

    #[test]
    fn rules_need_a_claim_and_a_value() {
        for bad in ["groups", ":x", "groups:", ""] {
            assert!(RoleRule::parse(bad).is_err(), "{bad}");
        }
        assert!(RoleRule::parse("principal:jwt:alice").is_ok());
    }

    #[test]
    fn roles_are_ordered_and_named() {
        assert!(Role::Viewer < Role::User && Role::User < Role::Operator);
        assert!(Role::Admin.is_operator() && !Role::User.is_operator());
        for r in Role::ALL {
            assert_eq!(Role::parse(r.as_str()), Some(r));
        }
    }
}
