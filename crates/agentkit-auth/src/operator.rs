//! Operators: the principals who may act on every session of an agent,
//! whoever owns it. Two ways to be one: the holder of the configured
//! operator token (`Authorization: Bearer <token>`, compared in constant
//! time), and, when serving with `--dev`, the direct loopback caller (the
//! `localDevStrict` checks: loopback peer, loopback `Host`, no forwarding
//! headers). The chain marks them with [`PrincipalType::Operator`]; the
//! runtime lets that type past its ownership checks. Both are `admin`
//! (see [`Role`]): the token and `--dev` reach every agent of the host.

use crate::credential::admit_bearer;
use crate::local::{LoopbackCheck, admit_loopback};
use crate::{AuthContext, BearerToken, PrincipalType, RequestParts, Role, Secret};

/// The principal the operator token authenticates.
pub const OPERATOR_PRINCIPAL: &str = "operator";

/// The `authenticator` of a context the operator token admitted.
const OPERATOR_TOKEN: &str = "operatorToken";

/// Who counts as an operator on a chain. The default: nobody.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Operators {
    /// `--operator-token`: its holder is admitted as `operator`, before
    /// the chain's own policies run. An empty token admits nobody.
    pub token: Option<Secret>,
    /// `--dev`: a strictly local caller the chain admitted is an operator.
    pub loopback: bool,
}

impl Operators {
    /// Nobody is an operator.
    pub fn none() -> Operators {
        Operators::default()
    }

    pub fn is_none(&self) -> bool {
        self.token.as_ref().is_none_or(Secret::is_empty) && !self.loopback
    }

    /// The operator context when `req` carries the operator token.
    pub(crate) fn by_token(&self, req: &RequestParts<'_>) -> Option<AuthContext> {
        let token = self.token.as_ref().filter(|t| !t.is_empty())?;
        let tokens = [BearerToken::new(token.clone(), OPERATOR_PRINCIPAL)];
        let mut ctx = admit_bearer(OPERATOR_TOKEN, &tokens, req).ok()?;
        ctx.principal_type = PrincipalType::Operator;
        Some(ctx.with_role(Role::Admin))
    }

    /// `ctx` (what the chain admitted) raised to an operator when the
    /// caller is strictly local and loopback operators are on.
    pub(crate) fn promote(&self, req: &RequestParts<'_>, mut ctx: AuthContext) -> AuthContext {
        if self.loopback && admit_loopback("", LoopbackCheck::Strict, req).is_ok() {
            ctx = ctx
                .with_role(Role::Admin)
                .with_attribute("operator", "loopback");
        }
        ctx
    }
}
