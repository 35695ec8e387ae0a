//! Auth chain tests through the public API: the loopback matrix, bearer
//! tokens, shared secrets, HMAC signatures and chain ordering.

use futures_util::FutureExt;

use std::net::{IpAddr, Ipv4Addr};

use agentkit_auth::{Chain, Policy, Refusal, RequestParts, Surface};

mod bearer;
mod chain;
mod hmac;
mod jwt;
mod matrix;

pub(crate) const LOOPBACK: Option<IpAddr> = Some(IpAddr::V4(Ipv4Addr::LOCALHOST));
pub(crate) const REMOTE: Option<IpAddr> = Some(IpAddr::V4(Ipv4Addr::new(203, 0, 113, 7)));

/// A short, stable rendering of a refusal for snapshot tables.
pub(crate) fn short(refusal: &Refusal) -> &'static str {
    match refusal {
        Refusal::NoPeer => "no-peer",
        Refusal::PeerNotLoopback => "peer",
        Refusal::HostMissing => "no-host",
        Refusal::HostNotLoopback => "host",
        Refusal::Forwarded { .. } => "forwarded",
        Refusal::HeaderMissing { .. } => "no-header",
        Refusal::HeaderRepeated { .. } => "repeated",
        Refusal::NotBearer => "not-bearer",
        Refusal::Mismatch => "mismatch",
        Refusal::WrongPrefix => "prefix",
        Refusal::MalformedSignature => "malformed",
        Refusal::EmptySecret => "empty-secret",
        Refusal::NotCustomChannel => "surface",
        _ => "other",
    }
}

/// Runs `policies` on `surface` and renders the outcome: the admitting
/// `authenticator/principal`, or `denied(` each refusal `)`.
pub(crate) fn outcome(policies: &[Policy], surface: Surface, req: &RequestParts<'_>) -> String {
    let chain = Chain::new(policies.to_vec(), surface);
    match chain.admit(req).now_or_never().unwrap() {
        Ok(ctx) => format!("{}/{}", ctx.authenticator, ctx.principal_id),
        Err(denied) => {
            let reasons: Vec<&str> = denied.refusals().iter().map(|(_, r)| short(r)).collect();
            format!("denied({})", reasons.join(","))
        }
    }
}
