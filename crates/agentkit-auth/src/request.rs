//! The borrowed, framework-free view of a request that policies inspect.

use std::net::IpAddr;

/// Headers whose presence means a proxy or relay handled the request, so
/// the TCP peer is not the real client. `localDevStrict` and `localDev`
/// refuse a request carrying any of them, whatever their value.
pub const FORWARDING_HEADERS: [&str; 6] = [
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-real-ip",
    "via",
];

/// What the policies may look at: the TCP peer, the `Host` (or HTTP/2
/// `:authority`), the headers and the raw body, all borrowed from the
/// caller's request.
///
/// Header names are matched without regard to ASCII case; values are raw
/// bytes because HTTP does not promise UTF-8.
#[derive(Debug, Clone, Default)]
pub struct RequestParts<'a> {
    /// The address of the directly connected peer; `None` when unknown,
    /// which no loopback policy admits.
    pub peer: Option<IpAddr>,
    /// The `Host` header (`localhost:3000`, `[::1]:8080`, ...).
    pub host: Option<&'a str>,
    /// Every header, in order, repeated names included.
    pub headers: Vec<(&'a str, &'a [u8])>,
    /// The raw body exactly as received, before any parsing.
    pub body: &'a [u8],
    /// The HTTP method (`GET`, `POST`, …); `None` when unknown, which a
    /// CSRF check treats as state-changing.
    pub method: Option<&'a str>,
}

impl<'a> RequestParts<'a> {
    /// A request from `peer` with no host, headers or body.
    pub fn new(peer: Option<IpAddr>) -> Self {
        RequestParts {
            peer,
            ..RequestParts::default()
        }
    }

    /// Sets the `Host` value.
    pub fn with_host(mut self, host: &'a str) -> Self {
        self.host = Some(host);
        self
    }

    /// Appends a header.
    pub fn with_header<V>(mut self, name: &'a str, value: &'a V) -> Self
    where
        V: AsRef<[u8]> + ?Sized,
    {
        self.headers.push((name, value.as_ref()));
        self
    }

    /// Sets the method.
    pub fn with_method(mut self, method: &'a str) -> Self {
        self.method = Some(method);
        self
    }

    /// Sets the raw body.
    pub fn with_body(mut self, body: &'a [u8]) -> Self {
        self.body = body;
        self
    }

    /// Every value of the header `name`, in order.
    pub fn header_values<'s>(&'s self, name: &'s str) -> impl Iterator<Item = &'a [u8]> + 's {
        self.headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    }

    /// The first forwarding header present, if any.
    pub(crate) fn forwarding_header(&self) -> Option<&'static str> {
        FORWARDING_HEADERS
            .iter()
            .copied()
            .find(|name| self.header_values(name).next().is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_lookup_ignores_ascii_case() {
        let req = RequestParts::new(None).with_header("X-Api-Key", "k");
        assert_eq!(req.header_values("x-api-key").collect::<Vec<_>>(), [b"k"]);
        assert_eq!(req.header_values("X-API-KEY").collect::<Vec<_>>(), [b"k"]);
    }

    #[test]
    fn repeated_headers_keep_their_order() {
        let req = RequestParts::new(None)
            .with_header("authorization", "a")
            .with_header("Authorization", "b");
        let values: Vec<_> = req.header_values("authorization").collect();
        assert_eq!(values, [b"a", b"b"]);
    }

    #[test]
    fn forwarding_header_found_whatever_its_case_and_value() {
        let req = RequestParts::new(None).with_header("X-Forwarded-For", "");
        assert_eq!(req.forwarding_header(), Some("x-forwarded-for"));
        assert_eq!(RequestParts::new(None).forwarding_header(), None);
    }
}
