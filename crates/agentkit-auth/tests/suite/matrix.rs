//! The loopback matrix: peer × `Host` × forwarding header × policy.

use std::fmt::Write as _;
use std::net::IpAddr;

use agentkit_auth::{FORWARDING_HEADERS, Policy, RequestParts, Surface};
use expect_test::{Expect, expect};

use super::{LOOPBACK, REMOTE, outcome};

/// The network-position policies plus the two open ones; `publicEndpoint`
/// is run on both surfaces.
fn columns() -> Vec<(&'static str, Policy, Surface)> {
    vec![
        ("strict", Policy::LocalDevStrict, Surface::BuiltinApi),
        ("dev", Policy::LocalDev, Surface::BuiltinApi),
        ("loop", Policy::LoopbackOnly, Surface::BuiltinApi),
        ("all", Policy::AllowAll, Surface::BuiltinApi),
        ("pub@chan", Policy::PublicEndpoint, Surface::CustomChannel),
        ("pub@api", Policy::PublicEndpoint, Surface::BuiltinApi),
    ]
}

/// One line per request: its description, then each column's outcome
/// (`principal` when admitted, the refusal otherwise).
fn render(requests: &[(String, RequestParts<'_>)]) -> String {
    let mut out = String::new();
    for (label, req) in requests {
        write!(out, "{label:<45}").unwrap();
        for (name, policy, surface) in columns() {
            let result = outcome(&[policy], surface, req);
            let short = match result.split_once('/') {
                Some((_, principal)) => principal.to_owned(),
                None => result,
            };
            write!(out, " {name}={short}").unwrap();
        }
        out.push('\n');
    }
    out
}

fn check(requests: &[(String, RequestParts<'_>)], expected: Expect) {
    expected.assert_eq(&render(requests));
}

fn peer_name(peer: Option<IpAddr>) -> String {
    peer.map_or_else(|| "none".to_owned(), |p| p.to_string())
}

#[test]
fn peer_host_and_forwarding_headers() {
    let mut requests = Vec::new();
    for peer in [LOOPBACK, REMOTE] {
        for host in [Some("localhost:3000"), Some("evil.example"), None] {
            for forwarded in std::iter::once(None).chain(FORWARDING_HEADERS.map(Some)) {
                let mut req = RequestParts::new(peer);
                if let Some(host) = host {
                    req = req.with_host(host);
                }
                if let Some(name) = forwarded {
                    req = req.with_header(name, "203.0.113.9");
                }
                let label = format!(
                    "{} {} {}",
                    peer_name(peer),
                    host.unwrap_or("-"),
                    forwarded.unwrap_or("-")
                );
                requests.push((label, req));
            }
        }
    }
    check(
        &requests,
        expect![[r#"
        127.0.0.1 localhost:3000 -                    strict=local dev=local loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 localhost:3000 forwarded            strict=denied(forwarded) dev=denied(forwarded) loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 localhost:3000 x-forwarded-for      strict=denied(forwarded) dev=denied(forwarded) loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 localhost:3000 x-forwarded-host     strict=denied(forwarded) dev=denied(forwarded) loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 localhost:3000 x-forwarded-proto    strict=denied(forwarded) dev=denied(forwarded) loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 localhost:3000 x-real-ip            strict=denied(forwarded) dev=denied(forwarded) loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 localhost:3000 via                  strict=denied(forwarded) dev=denied(forwarded) loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 evil.example -                      strict=denied(host) dev=local loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 evil.example forwarded              strict=denied(forwarded) dev=denied(forwarded) loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 evil.example x-forwarded-for        strict=denied(forwarded) dev=denied(forwarded) loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 evil.example x-forwarded-host       strict=denied(forwarded) dev=denied(forwarded) loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 evil.example x-forwarded-proto      strict=denied(forwarded) dev=denied(forwarded) loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 evil.example x-real-ip              strict=denied(forwarded) dev=denied(forwarded) loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 evil.example via                    strict=denied(forwarded) dev=denied(forwarded) loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 - -                                 strict=denied(no-host) dev=local loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 - forwarded                         strict=denied(forwarded) dev=denied(forwarded) loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 - x-forwarded-for                   strict=denied(forwarded) dev=denied(forwarded) loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 - x-forwarded-host                  strict=denied(forwarded) dev=denied(forwarded) loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 - x-forwarded-proto                 strict=denied(forwarded) dev=denied(forwarded) loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 - x-real-ip                         strict=denied(forwarded) dev=denied(forwarded) loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 - via                               strict=denied(forwarded) dev=denied(forwarded) loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        203.0.113.7 localhost:3000 -                  strict=denied(peer) dev=denied(peer) loop=denied(peer) all=anonymous pub@chan=anonymous pub@api=denied(surface)
        203.0.113.7 localhost:3000 forwarded          strict=denied(peer) dev=denied(peer) loop=denied(peer) all=anonymous pub@chan=anonymous pub@api=denied(surface)
        203.0.113.7 localhost:3000 x-forwarded-for    strict=denied(peer) dev=denied(peer) loop=denied(peer) all=anonymous pub@chan=anonymous pub@api=denied(surface)
        203.0.113.7 localhost:3000 x-forwarded-host   strict=denied(peer) dev=denied(peer) loop=denied(peer) all=anonymous pub@chan=anonymous pub@api=denied(surface)
        203.0.113.7 localhost:3000 x-forwarded-proto  strict=denied(peer) dev=denied(peer) loop=denied(peer) all=anonymous pub@chan=anonymous pub@api=denied(surface)
        203.0.113.7 localhost:3000 x-real-ip          strict=denied(peer) dev=denied(peer) loop=denied(peer) all=anonymous pub@chan=anonymous pub@api=denied(surface)
        203.0.113.7 localhost:3000 via                strict=denied(peer) dev=denied(peer) loop=denied(peer) all=anonymous pub@chan=anonymous pub@api=denied(surface)
        203.0.113.7 evil.example -                    strict=denied(peer) dev=denied(peer) loop=denied(peer) all=anonymous pub@chan=anonymous pub@api=denied(surface)
        203.0.113.7 evil.example forwarded            strict=denied(peer) dev=denied(peer) loop=denied(peer) all=anonymous pub@chan=anonymous pub@api=denied(surface)
        203.0.113.7 evil.example x-forwarded-for      strict=denied(peer) dev=denied(peer) loop=denied(peer) all=anonymous pub@chan=anonymous pub@api=denied(surface)
        203.0.113.7 evil.example x-forwarded-host     strict=denied(peer) dev=denied(peer) loop=denied(peer) all=anonymous pub@chan=anonymous pub@api=denied(surface)
        203.0.113.7 evil.example x-forwarded-proto    strict=denied(peer) dev=denied(peer) loop=denied(peer) all=anonymous pub@chan=anonymous pub@api=denied(surface)
        203.0.113.7 evil.example x-real-ip            strict=denied(peer) dev=denied(peer) loop=denied(peer) all=anonymous pub@chan=anonymous pub@api=denied(surface)
        203.0.113.7 evil.example via                  strict=denied(peer) dev=denied(peer) loop=denied(peer) all=anonymous pub@chan=anonymous pub@api=denied(surface)
        203.0.113.7 - -                               strict=denied(peer) dev=denied(peer) loop=denied(peer) all=anonymous pub@chan=anonymous pub@api=denied(surface)
        203.0.113.7 - forwarded                       strict=denied(peer) dev=denied(peer) loop=denied(peer) all=anonymous pub@chan=anonymous pub@api=denied(surface)
        203.0.113.7 - x-forwarded-for                 strict=denied(peer) dev=denied(peer) loop=denied(peer) all=anonymous pub@chan=anonymous pub@api=denied(surface)
        203.0.113.7 - x-forwarded-host                strict=denied(peer) dev=denied(peer) loop=denied(peer) all=anonymous pub@chan=anonymous pub@api=denied(surface)
        203.0.113.7 - x-forwarded-proto               strict=denied(peer) dev=denied(peer) loop=denied(peer) all=anonymous pub@chan=anonymous pub@api=denied(surface)
        203.0.113.7 - x-real-ip                       strict=denied(peer) dev=denied(peer) loop=denied(peer) all=anonymous pub@chan=anonymous pub@api=denied(surface)
        203.0.113.7 - via                             strict=denied(peer) dev=denied(peer) loop=denied(peer) all=anonymous pub@chan=anonymous pub@api=denied(surface)
    "#]],
    );
}

#[test]
fn peers_and_hosts_of_every_loopback_shape() {
    let peers = [
        Some("127.0.0.1".parse().unwrap()),
        Some("127.8.9.10".parse().unwrap()),
        Some("::1".parse().unwrap()),
        Some("::ffff:127.0.0.1".parse().unwrap()),
        Some("::ffff:10.0.0.1".parse().unwrap()),
        Some("10.0.0.1".parse().unwrap()),
        Some("0.0.0.0".parse().unwrap()),
        None,
    ];
    let mut requests = Vec::new();
    for peer in peers {
        requests.push((
            format!("{} localhost", peer_name(peer)),
            RequestParts::new(peer).with_host("localhost"),
        ));
    }
    for host in [
        "localhost",
        "LOCALHOST:80",
        "127.0.0.1:3000",
        "127.42.0.1",
        "[::1]:3000",
        "localhost.evil.example",
        "127.0.0.1.nip.io",
        "[::1",
        "10.0.0.1:3000",
    ] {
        requests.push((
            format!("127.0.0.1 {host}"),
            RequestParts::new(LOOPBACK).with_host(host),
        ));
    }
    // A forwarding header named in another case is still a forwarding header.
    requests.push((
        "127.0.0.1 localhost X-Forwarded-For".to_owned(),
        RequestParts::new(LOOPBACK)
            .with_host("localhost")
            .with_header("X-Forwarded-For", "1.2.3.4"),
    ));
    check(
        &requests,
        expect![[r#"
        127.0.0.1 localhost                           strict=local dev=local loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.8.9.10 localhost                          strict=local dev=local loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        ::1 localhost                                 strict=local dev=local loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        ::ffff:127.0.0.1 localhost                    strict=local dev=local loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        ::ffff:10.0.0.1 localhost                     strict=denied(peer) dev=denied(peer) loop=denied(peer) all=anonymous pub@chan=anonymous pub@api=denied(surface)
        10.0.0.1 localhost                            strict=denied(peer) dev=denied(peer) loop=denied(peer) all=anonymous pub@chan=anonymous pub@api=denied(surface)
        0.0.0.0 localhost                             strict=denied(peer) dev=denied(peer) loop=denied(peer) all=anonymous pub@chan=anonymous pub@api=denied(surface)
        none localhost                                strict=denied(no-peer) dev=denied(no-peer) loop=denied(no-peer) all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 localhost                           strict=local dev=local loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 LOCALHOST:80                        strict=local dev=local loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 127.0.0.1:3000                      strict=local dev=local loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 127.42.0.1                          strict=local dev=local loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 [::1]:3000                          strict=local dev=local loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 localhost.evil.example              strict=denied(host) dev=local loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 127.0.0.1.nip.io                    strict=denied(host) dev=local loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 [::1                                strict=denied(host) dev=local loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 10.0.0.1:3000                       strict=denied(host) dev=local loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
        127.0.0.1 localhost X-Forwarded-For           strict=denied(forwarded) dev=denied(forwarded) loop=local all=anonymous pub@chan=anonymous pub@api=denied(surface)
    "#]],
    );
}
