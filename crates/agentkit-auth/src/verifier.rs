//! Policies an embedder writes in Rust (the original's
//! `bearerAuth(verifyFn)`): a [`Verifier`] looks at the request and
//! answers, possibly after IO of its own, with a context or a refusal.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::credential::{bearer_token, credential_header};
use crate::{AuthContext, Refusal, RequestParts};

/// What a [`Verifier`] answers with: a boxed future, so the trait stays
/// object safe and a verifier may await (a token introspection call, a
/// database lookup).
pub type Verdict<'a> = Pin<Box<dyn Future<Output = Result<AuthContext, Refusal>> + Send + 'a>>;

/// A custom auth policy. It sees the same [`RequestParts`] as the built-in
/// policies (peer, `Host`, headers, raw body) and admits with an
/// [`AuthContext`] or declines with a [`Refusal`]
/// ([`Refusal::Rejected`] carries its own reason, for the server log).
pub trait Verifier: Send + Sync + 'static {
    /// The policy's name: the `authenticator` of the contexts it admits
    /// and the label of its refusals in the server log.
    fn name(&self) -> &'static str;

    /// Admits or declines `req`.
    fn verify<'a>(&'a self, req: &'a RequestParts<'a>) -> Verdict<'a>;
}

/// A [`Verifier`] as a link of a chain: `Policy::Custom`.
#[derive(Clone)]
pub struct CustomPolicy(Arc<dyn Verifier>);

impl CustomPolicy {
    pub fn new(verifier: impl Verifier) -> CustomPolicy {
        CustomPolicy(Arc::new(verifier))
    }

    /// `Authorization: Bearer <token>` checked by `verify`, which answers
    /// the principal (as an [`AuthContext`]) or `None` to decline: the
    /// original's `bearerAuth(verifyFn)`. A missing or non-bearer header
    /// is declined before `verify` runs.
    pub fn bearer<F, Fut>(name: &'static str, verify: F) -> CustomPolicy
    where
        F: Fn(String) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Option<AuthContext>> + Send + 'static,
    {
        CustomPolicy::new(BearerVerifier { name, verify })
    }

    pub fn name(&self) -> &'static str {
        self.0.name()
    }

    pub(crate) async fn admit(&self, req: &RequestParts<'_>) -> Result<AuthContext, Refusal> {
        self.0.verify(req).await
    }
}

impl fmt::Debug for CustomPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CustomPolicy({})", self.0.name())
    }
}

/// Two custom policies are equal when they are the same verifier.
impl PartialEq for CustomPolicy {
    fn eq(&self, other: &CustomPolicy) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&self.0), Arc::as_ptr(&other.0))
    }
}

impl Eq for CustomPolicy {}

struct BearerVerifier<F> {
    name: &'static str,
    verify: F,
}

impl<F, Fut> Verifier for BearerVerifier<F>
where
    F: Fn(String) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Option<AuthContext>> + Send + 'static,
{
    fn name(&self) -> &'static str {
        self.name
    }

    fn verify<'a>(&'a self, req: &'a RequestParts<'a>) -> Verdict<'a> {
        let token = credential_header(req, "authorization").and_then(|value| {
            let token = bearer_token(value).ok_or(Refusal::NotBearer)?;
            String::from_utf8(token.to_vec()).map_err(|_| Refusal::NotBearer)
        });
        Box::pin(async move {
            let answer = (self.verify)(token?).await;
            answer.ok_or(Refusal::Rejected {
                reason: format!("{} declined the token", self.name),
            })
        })
    }
}
