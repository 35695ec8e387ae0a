//! The crate's errors: [`Denied`] when no policy admits a request, and
//! [`Error`] for a chain that is configured so it can never admit.

use std::fmt;

/// `Result` with this crate's configuration [`Error`] as the default.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A problem with a configured chain, found by
/// [`Chain::validate`](crate::Chain::validate). None of them opens the
/// door: the affected policy simply never admits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("the auth chain is empty, so every request is denied")]
    EmptyChain,
    #[error("auth policy {index} ({policy}) has an empty secret and never admits a request")]
    EmptySecret { index: usize, policy: &'static str },
    #[error("auth policy {index} ({policy}) names no header and never admits a request")]
    EmptyHeader { index: usize, policy: &'static str },
    #[error("auth policy {index} (bearer) has no tokens and never admits a request")]
    NoBearerTokens { index: usize },
    #[error(
        "auth policy {index} (bearer) gives one token to principals `{first}` and `{second}`; only `{first}` is ever admitted"
    )]
    DuplicateBearerToken {
        index: usize,
        first: String,
        second: String,
    },
    #[error(
        "auth policy {index} (publicEndpoint) applies only to custom channel routes and never admits on the built-in API"
    )]
    PublicEndpointOnBuiltinApi { index: usize },
    #[error("auth policy {index} (jwt) {problem} and never admits a request")]
    JwtConfig { index: usize, problem: String },
}

/// No policy in the chain admitted the request; the caller answers `401`.
///
/// `Display` says only that; the per-policy [`refusals`](Denied::refusals)
/// are for server-side logs, not for the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no auth policy admitted the request")]
pub struct Denied {
    refusals: Vec<(&'static str, Refusal)>,
}

impl Denied {
    pub(crate) fn new(refusals: Vec<(&'static str, Refusal)>) -> Self {
        Denied { refusals }
    }

    /// Why each policy declined, as `(policy name, reason)` in chain order.
    pub fn refusals(&self) -> &[(&'static str, Refusal)] {
        &self.refusals
    }
}

/// Why one policy declined a request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// The peer address is unknown.
    NoPeer,
    /// The peer is not a loopback address.
    PeerNotLoopback,
    /// The request has no `Host`.
    HostMissing,
    /// The `Host` does not name a loopback host.
    HostNotLoopback,
    /// A proxy-forwarding header is present.
    Forwarded { header: &'static str },
    /// The credential header is absent.
    HeaderMissing { header: String },
    /// The credential header appears more than once.
    HeaderRepeated { header: String },
    /// `Authorization` does not use the `Bearer` scheme.
    NotBearer,
    /// The token, secret or signature does not match.
    Mismatch,
    /// The signature lacks the configured prefix.
    WrongPrefix,
    /// The signature is not hex.
    MalformedSignature,
    /// The policy's secret (or every token) is empty, so it admits nothing.
    EmptySecret,
    /// `publicEndpoint` on the built-in API.
    NotCustomChannel,
    /// A JWT that does not verify (expired, wrong issuer or audience, an
    /// unknown key, a refused algorithm), in words for the server log.
    InvalidToken { reason: String },
    /// A custom verifier declined, with its reason.
    Rejected { reason: String },
    /// A signed timestamp outside the accepted window (a replay).
    Stale,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NoPeer => f.write_str("peer address unknown"),
            Refusal::PeerNotLoopback => f.write_str("peer is not a loopback address"),
            Refusal::HostMissing => f.write_str("no host header"),
            Refusal::HostNotLoopback => f.write_str("host is not a loopback name"),
            Refusal::Forwarded { header } => write!(f, "forwarding header `{header}` present"),
            Refusal::HeaderMissing { header } => write!(f, "header `{header}` missing"),
            Refusal::HeaderRepeated { header } => write!(f, "header `{header}` repeated"),
            Refusal::NotBearer => f.write_str("authorization is not a bearer token"),
            Refusal::Mismatch => f.write_str("credential does not match"),
            Refusal::WrongPrefix => f.write_str("signature lacks the configured prefix"),
            Refusal::MalformedSignature => f.write_str("signature is not hex"),
            Refusal::EmptySecret => f.write_str("policy secret is empty"),
            Refusal::NotCustomChannel => f.write_str("public endpoint on the built-in api"),
            Refusal::InvalidToken { reason } => write!(f, "invalid token: {reason}"),
            Refusal::Rejected { reason } => f.write_str(reason),
            Refusal::Stale => f.write_str("signed timestamp outside the accepted window"),
        }
    }
}
