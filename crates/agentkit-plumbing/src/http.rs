//! The process's one outgoing HTTP client and its one retry policy: every
//! request agentkit sends (model providers, hooks, channel deliveries,
//! the packs' API clients, the public API's client, the facade's) goes
//! through [`http_client`], and everything that retries waits as
//! [`Backoff`] says. Messages about a request come from
//! [`http_error_text`], which keeps its URL and credentials out.

use std::hash::BuildHasher;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;

use crate::redact::redact_credentials;

/// How long establishing a connection may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The `User-Agent` of every request the shared client sends (a request
/// may set its own).
const USER_AGENT: &str = concat!("agentkit/", env!("CARGO_PKG_VERSION"));

static CLIENT: OnceLock<Result<reqwest::Client, HttpClientError>> = OnceLock::new();
/// How many clients this process built (one, or none yet).
static CLIENTS_BUILT: AtomicUsize = AtomicUsize::new(0);

/// The process's one outgoing HTTP client (the model providers', shared
/// by hooks, channel deliveries, the packs' API clients, the public API's
/// client and the facade's clients), so every caller reuses one
/// connection pool and one TLS setup. Built once, lazily. It has a
/// connect timeout ([`CONNECT_TIMEOUT`]) and the `agentkit/<version>`
/// user agent and no other timeout: callers bound each request with
/// `RequestBuilder::timeout`, since some answers are streams that last
/// minutes. Messages about its errors should come from
/// [`http_error_text`], which keeps URLs (and the credentials they may
/// carry) out.
pub fn http_client() -> Result<&'static reqwest::Client, HttpClientError> {
    CLIENT
        .get_or_init(|| {
            CLIENTS_BUILT.fetch_add(1, Ordering::Relaxed);
            reqwest::Client::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .user_agent(USER_AGENT)
                .build()
                .map_err(|e| {
                    HttpClientError(format!(
                        "cannot build the HTTP client: {}",
                        http_error_text(e)
                    ))
                })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The shared HTTP client could not be built (for example, no TLS
/// configuration could be loaded).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HttpClientError(String);

/// A reqwest error as text for a message or a log: its causes joined by
/// `: `, without the request URL, and with any URL user and password or
/// `Basic`/`Bearer` credential in the text removed.
pub fn http_error_text(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        let part = cause.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = cause.source();
    }
    redact_credentials(&text)
}

/// The delay a server asked for in a `429` or `503` answer:
/// `retry-after-ms`, else `retry-after` in seconds or as an HTTP date.
pub fn retry_after_header(headers: &HeaderMap) -> Option<Duration> {
    retry_after(headers, SystemTime::now())
}

/// The server's delay: `retry-after-ms` (OpenAI), else `retry-after` in
/// seconds or as an HTTP date (a date in the past is no wait).
fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let number = |name: &str| {
        header(name)
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    if let Some(ms) = number("retry-after-ms") {
        return Some(Duration::from_secs_f64(ms.min(1e9) / 1000.0));
    }
    if let Some(seconds) = number("retry-after") {
        return Some(Duration::from_secs_f64(seconds.min(1e9)));
    }
    let date = httpdate::parse_http_date(header("retry-after")?).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

// --- Retries ----------------------------------------------------------------

/// How often and how long a failed request is tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// The shortest wait, and the unit the waits grow from.
    pub base_delay: Duration,
    /// The longest wait the policy picks by itself.
    pub max_delay: Duration,
    /// The longest server-given `Retry-After` honoured; a longer one is
    /// cut to this.
    pub max_retry_after: Duration,
    /// The most time spent waiting over all retries: a retry whose wait
    /// would pass it is not made.
    pub max_total_wait: Duration,
}

impl Default for RetryPolicy {
    /// Three retries, waits of 0.5–1 s, 1–2 s and 2–4 s (at most 8 s),
    /// `Retry-After` up to 30 s, at most 60 s of waiting in all.
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(30),
            max_total_wait: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The wait the policy picks by itself before retry `retry` (from 0),
    /// ignoring `max_retries` and `max_total_wait`: a uniformly random time
    /// between half the ceiling and the ceiling
    /// `min(max_delay, base_delay · 2^(retry+1))`, and never less than
    /// `base_delay`. For callers that count their own failures (a
    /// supervisor restarting a child for as long as it runs).
    pub fn delay(&self, retry: u32) -> Duration {
        let ceiling = self
            .base_delay
            .saturating_mul(2u32.saturating_pow(retry.saturating_add(1)))
            .min(self.max_delay)
            .max(self.base_delay);
        let floor = (ceiling / 2).max(self.base_delay).min(ceiling);
        floor + (ceiling - floor).mul_f64(random_fraction())
    }
}

/// The waits between the attempts of one operation: bounded exponential
/// backoff with jitter.
///
/// Retry `n` (from 0) waits [`RetryPolicy::delay`]`(n)`: a uniformly
/// random time between half of and all of
/// `min(max_delay, base_delay · 2^(n+1))` (at least `base_delay`), or the
/// server's `Retry-After` (cut to `max_retry_after`) when it gave one.
/// [`Backoff::next_delay`] says `None` once `max_retries` were made or
/// the wait would take the total past `max_total_wait`. The jitter keeps
/// a crowd of clients (or children that died together) from retrying at
/// once after a shared failure; its floor keeps the waits growing. Not
/// tied to HTTP: anything that retries can use it.
///
/// ```
/// # use agentkit_plumbing::{Backoff, RetryPolicy};
/// # use std::time::Duration;
/// let mut backoff = Backoff::new(RetryPolicy::default());
/// let first = backoff.next_delay(None).unwrap();
/// assert!(first >= Duration::from_millis(500) && first <= Duration::from_secs(1));
/// assert_eq!(backoff.next_delay(Some(Duration::from_secs(2))), Some(Duration::from_secs(2)));
/// ```
#[derive(Debug, Clone)]
pub struct Backoff {
    policy: RetryPolicy,
    retries: u32,
    waited: Duration,
}

impl Backoff {
    pub fn new(policy: RetryPolicy) -> Backoff {
        Backoff {
            policy,
            retries: 0,
            waited: Duration::ZERO,
        }
    }

    /// The wait before the next retry, or `None` when there is none left.
    /// `retry_after` is the server's own delay, if it gave one.
    pub fn next_delay(&mut self, retry_after: Option<Duration>) -> Option<Duration> {
        let p = self.policy;
        if self.retries >= p.max_retries {
            return None;
        }
        let delay = match retry_after {
            Some(d) => d.min(p.max_retry_after),
            None => p.delay(self.retries),
        };
        let waited = self.waited.saturating_add(delay);
        if waited > p.max_total_wait {
            return None;
        }
        self.retries += 1;
        self.waited = waited;
        Some(delay)
    }

    /// The attempts made so far, counting the first.
    pub fn attempts(&self) -> u32 {
        self.retries + 1
    }
}

/// A number in `[0, 1)`: a randomly keyed hasher is random enough for
/// jitter.
fn random_fraction() -> f64 {
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let random = std::collections::hash_map::RandomState::new()
        .hash_one(CALLS.fetch_add(1, Ordering::Relaxed));
    (random >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn retry_after_reads_seconds_milliseconds_and_dates() {
        let now = httpdate::parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT").unwrap();
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h, now), None);
        h.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(2)));
        h.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:07 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(7)));
        h.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:27:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h, now), Some(Duration::ZERO));
        h.insert("retry-after", "soon".parse().unwrap());
        assert_eq!(retry_after(&h, now), None);
        h.insert("retry-after-ms", "250".parse().unwrap());
        assert_eq!(retry_after(&h, now), Some(Duration::from_millis(250)));
    }

    #[test]
    fn policy_delays_grow_to_the_cap_without_state() {
        let policy = RetryPolicy {
            base_delay: Duration::from_millis(50),
            max_delay: Duration::from_millis(1000),
            ..RetryPolicy::default()
        };
        for (retry, ceiling) in [(0, 100), (1, 200), (3, 800), (4, 1000), (40, 1000)] {
            let d = policy.delay(retry).as_millis();
            assert!(
                d >= ceiling / 2 && d <= ceiling,
                "{retry}: {d} not in [{}, {ceiling}]",
                ceiling / 2
            );
        }
    }

    #[test]
    fn backoff_is_jittered_bounded_and_capped_in_total() {
        let policy = RetryPolicy::default();
        for _ in 0..50 {
            let mut b = Backoff::new(policy);
            for n in 0..3 {
                let d = b.next_delay(None).unwrap();
                let ceiling = (policy.base_delay * 2u32.pow(n + 1)).min(policy.max_delay);
                assert!(d >= policy.base_delay && d <= ceiling, "retry {n}: {d:?}");
                assert!(
                    d >= ceiling / 2,
                    "retry {n}: {d:?} below half of {ceiling:?}"
                );
            }
            assert_eq!(b.next_delay(None), None);
            assert_eq!(b.attempts(), 4);
        }
        // The server's delay wins, cut to its cap; the total is capped.
        let mut b = Backoff::new(RetryPolicy {
            max_retries: 10,
            ..policy
        });
        assert_eq!(
            b.next_delay(Some(Duration::from_secs(3600))),
            Some(policy.max_retry_after)
        );
        assert_eq!(
            b.next_delay(Some(Duration::from_secs(30))),
            Some(Duration::from_secs(30))
        );
        assert_eq!(b.next_delay(Some(Duration::from_millis(1))), None);
        assert_eq!(b.attempts(), 3);
        // Not every wait is the same.
        let waits: std::collections::HashSet<Duration> = (0..20)
            .map(|_| Backoff::new(policy).next_delay(None).unwrap())
            .collect();
        assert!(waits.len() > 1);
    }

    #[test]
    fn one_client_per_process() {
        let a = http_client().unwrap();
        let b = http_client().unwrap();
        assert!(std::ptr::eq(a, b));
        assert_eq!(CLIENTS_BUILT.load(Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn error_text_names_the_failure_and_never_the_url_or_its_credentials() {
        // A port nothing listens on.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://agent:s3cret@127.0.0.1:{port}/hook?token=t0ps3cret");
        let e = http_client().unwrap().get(&url).send().await.unwrap_err();
        let text = http_error_text(e);
        for leak in ["s3cret", "agent:", "t0ps3cret", "/hook"] {
            assert!(!text.contains(leak), "{leak} in {text}");
        }
        assert!(text.contains("error sending request"), "{text}");
        assert!(text.to_lowercase().contains("connect"), "{text}");
    }
}
