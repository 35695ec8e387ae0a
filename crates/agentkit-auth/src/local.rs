//! The loopback policies (`localDevStrict`, `localDev`, `loopbackOnly`):
//! they trust the network position of the peer instead of a credential.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::{AuthContext, PrincipalType, Refusal, RequestParts};

/// The principal every loopback policy admits.
pub(crate) const LOCAL_PRINCIPAL: &str = "local";

/// How much of the request a loopback policy checks besides the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LoopbackCheck {
    /// `localDevStrict`: no forwarding headers and a loopback `Host`. The
    /// `Host` check defeats DNS rebinding, where a hostile page's name
    /// resolves to 127.0.0.1 and the browser sends its own name as `Host`.
    Strict,
    /// `localDev`: no forwarding headers.
    Direct,
    /// `loopbackOnly`: the peer alone, so local relays may forward.
    PeerOnly,
}

pub(crate) fn admit_loopback(
    authenticator: &'static str,
    check: LoopbackCheck,
    req: &RequestParts<'_>,
) -> Result<AuthContext, Refusal> {
    let peer = req.peer.ok_or(Refusal::NoPeer)?;
    if !is_loopback_ip(peer) {
        return Err(Refusal::PeerNotLoopback);
    }
    if check != LoopbackCheck::PeerOnly
        && let Some(header) = req.forwarding_header()
    {
        return Err(Refusal::Forwarded { header });
    }
    if check == LoopbackCheck::Strict {
        let host = req.host.ok_or(Refusal::HostMissing)?;
        if !is_loopback_host(host) {
            return Err(Refusal::HostNotLoopback);
        }
    }
    Ok(AuthContext::new(
        authenticator,
        LOCAL_PRINCIPAL,
        PrincipalType::User,
    ))
}

/// 127.0.0.0/8, `::1`, and IPv4-mapped loopback (`::ffff:127.0.0.1`, which
/// a dual-stack listener reports for an IPv4 loopback client).
pub(crate) fn is_loopback_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Whether a `Host` value names a loopback host: `localhost` (any case),
/// an IPv4 address in 127.0.0.0/8, or a bracketed IPv6 loopback, each with
/// an optional numeric port. Anything unusual is not loopback.
pub(crate) fn is_loopback_host(host: &str) -> bool {
    if let Some(rest) = host.strip_prefix('[') {
        let Some((addr, after)) = rest.split_once(']') else {
            return false;
        };
        let port_ok = after.is_empty() || after.strip_prefix(':').is_some_and(is_port);
        return port_ok
            && addr
                .parse::<Ipv6Addr>()
                .is_ok_and(|v6| is_loopback_ip(IpAddr::V6(v6)));
    }
    let name = match host.split_once(':') {
        None => host,
        Some((name, port)) if is_port(port) => name,
        Some(_) => return false,
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<Ipv4Addr>().is_ok_and(|v4| v4.is_loopback())
}

fn is_port(s: &str) -> bool {
    (1..=5).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for host in [
            "localhost",
            "LocalHost:3000",
            "127.0.0.1",
            "127.0.0.1:8080",
            "127.1.2.3:1",
            "[::1]",
            "[::1]:8080",
            "[::ffff:127.0.0.1]:80",
        ] {
            assert!(is_loopback_host(host), "{host} should be loopback");
        }
    }

    #[test]
    fn non_loopback_hosts() {
        for host in [
            "",
            "evil.example",
            "localhost.evil.example",
            "evil.example:3000",
            "localhost:",
            "localhost:http",
            "localhost:123456",
            "128.0.0.1",
            "0.0.0.0",
            "127.1",
            "::1",
            "[::1",
            "[::1]x",
            "[::2]:80",
            "[localhost]",
            "localhost:80:80",
        ] {
            assert!(!is_loopback_host(host), "{host:?} should not be loopback");
        }
    }

    #[test]
    fn loopback_peers() {
        let yes = ["127.0.0.1", "127.255.0.9", "::1", "::ffff:127.0.0.1"];
        let no = [
            "10.0.0.1",
            "0.0.0.0",
            "::",
            "::ffff:10.0.0.1",
            "192.168.1.1",
        ];
        for ip in yes {
            assert!(
                is_loopback_ip(ip.parse().unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))),
                "{ip}"
            );
        }
        for ip in no {
            assert!(
                !is_loopback_ip(ip.parse().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))),
                "{ip}"
            );
        }
    }

    #[test]
    fn strict_checks_peer_then_forwarding_then_host() {
        let lo = Some(IpAddr::V4(Ipv4Addr::LOCALHOST));
        let remote = Some(IpAddr::V4(Ipv4Addr::new(203, 0, 113, 7)));
        let strict =
            |req: &RequestParts<'_>| admit_loopback("localDevStrict", LoopbackCheck::Strict, req);

        assert_eq!(strict(&RequestParts::new(None)), Err(Refusal::NoPeer));
        assert_eq!(
            strict(&RequestParts::new(remote).with_host("localhost")),
            Err(Refusal::PeerNotLoopback)
        );
        assert_eq!(
            strict(
                &RequestParts::new(lo)
                    .with_host("localhost")
                    .with_header("via", "1.1 proxy")
            ),
            Err(Refusal::Forwarded { header: "via" })
        );
        assert_eq!(strict(&RequestParts::new(lo)), Err(Refusal::HostMissing));
        assert_eq!(
            strict(&RequestParts::new(lo).with_host("evil.example")),
            Err(Refusal::HostNotLoopback)
        );
        let ctx = strict(&RequestParts::new(lo).with_host("localhost:3000"));
        assert_eq!(
            ctx,
            Ok(AuthContext::new(
                "localDevStrict",
                "local",
                PrincipalType::User
            ))
        );
    }

    #[test]
    fn direct_ignores_host_but_not_forwarding() {
        let lo = Some(IpAddr::V6(Ipv6Addr::LOCALHOST));
        let direct =
            |req: &RequestParts<'_>| admit_loopback("localDev", LoopbackCheck::Direct, req);
        assert!(direct(&RequestParts::new(lo).with_host("evil.example")).is_ok());
        assert!(direct(&RequestParts::new(lo)).is_ok());
        assert_eq!(
            direct(&RequestParts::new(lo).with_header("X-Real-IP", "1.2.3.4")),
            Err(Refusal::Forwarded {
                header: "x-real-ip"
            })
        );
    }

    #[test]
    fn peer_only_allows_forwarding_headers() {
        let lo = Some(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)));
        let req = RequestParts::new(lo)
            .with_host("evil.example")
            .with_header("x-forwarded-for", "203.0.113.7");
        assert!(admit_loopback("loopbackOnly", LoopbackCheck::PeerOnly, &req).is_ok());
    }
}
