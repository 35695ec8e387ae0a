//! The provider HTTP layer: one process-wide client, one retry policy, the
//! body of a streamed answer, and error text that never carries a URL, a
//! password or a key. `openai` and `anthropic` only map requests and
//! stream events on top of it.
//!
//! - [`client`]: built once, lazily, with a connect timeout; every turn of
//!   every provider shares its connection pool, and so does every other
//!   outgoing request of the process ([`http_client`]: hooks, deliveries,
//!   pack API clients, the facade's clients).
//! - [`open`]: sends a request and retries connection errors, 429 and 5xx
//!   with a [`Backoff`] (honouring `Retry-After`), and a body that fails
//!   before its first byte. Once a byte has arrived the answer is the
//!   caller's: nothing after it is retried, since the model may already
//!   have streamed text to the client. The turn's cancellation token stops
//!   a request, a wait or a retry at once.
//! - [`Events`]: the body as server-sent events, failing when the server
//!   stays silent for the idle timeout between two chunks.
//! - [`Target`]: the request URL and the secrets no message may show; its
//!   [`Target::redact`] scrubs the key, the URL's user and password, and
//!   any `Authorization` value a server echoes back.

use std::collections::VecDeque;
use std::fmt;
use std::hash::BuildHasher;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{LazyLock, OnceLock};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use percent_encoding::percent_decode_str;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, HeaderMap};
use tokio_util::sync::CancellationToken;

use super::sse::{SseEvent, SseParser};

/// How long establishing a connection may take.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

// --- The client -------------------------------------------------------------

static CLIENT: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
/// How many clients this process built (one, or none yet).
static CLIENTS_BUILT: AtomicUsize = AtomicUsize::new(0);

/// The one HTTP client of every provider, so connections are reused across
/// turns and providers. Timeouts other than connecting are per request
/// (see [`Call::idle_timeout`]), since a stream may last minutes.
pub(crate) fn client() -> Result<&'static reqwest::Client, String> {
    CLIENT
        .get_or_init(|| {
            CLIENTS_BUILT.fetch_add(1, Ordering::Relaxed);
            reqwest::Client::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .user_agent(USER_AGENT)
                .build()
                .map_err(|e| format!("cannot build the HTTP client: {}", error_chain(e)))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The `User-Agent` of every request the shared client sends (a request
/// may set its own).
const USER_AGENT: &str = concat!("agentkit/", env!("CARGO_PKG_VERSION"));

/// The process's one outgoing HTTP client (the providers', shared by
/// hooks, channel deliveries, the packs' API clients and the facade's
/// clients), so every caller reuses one connection pool and one TLS setup.
/// It has a connect timeout and the `agentkit/<version>` user agent and no
/// other timeout: callers bound each request with
/// `RequestBuilder::timeout`, since some answers are streams that last
/// minutes. Messages about its errors should come from
/// [`http_error_text`], which keeps URLs (and the credentials they may
/// carry) out.
pub fn http_client() -> Result<&'static reqwest::Client, HttpClientError> {
    client().map_err(HttpClientError)
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
    error_chain(e)
}

/// `text` without the user and password of any URL in it and without the
/// value of any `Basic` or `Bearer` credential: for messages and logs that
/// show a URL a user configured (it may carry credentials).
pub fn redact_credentials(text: &str) -> String {
    redact_text(text)
}

/// The delay a server asked for in a `429` or `503` answer:
/// `retry-after-ms`, else `retry-after` in seconds or as an HTTP date.
pub fn retry_after_header(headers: &HeaderMap) -> Option<Duration> {
    retry_after(headers, SystemTime::now())
}

/// How many times [`client`] built a client in this process.
#[cfg(test)]
pub(crate) fn clients_built() -> usize {
    CLIENTS_BUILT.load(Ordering::Relaxed)
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
/// # use agentkit_harness::{Backoff, RetryPolicy};
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

/// The server's delay: `retry-after-ms` (OpenAI), else `retry-after` in
/// seconds or as an HTTP date (a date in the past is no wait).
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
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

// --- Where a request goes, and what no message may show ----------------------

/// A provider's request URL with its key, and the secrets that must
/// never reach a message: the key, the URL's user and password, and any
/// `Authorization` value. `Debug` shows neither.
pub(crate) struct Target {
    url: reqwest::Url,
    api_key: Option<String>,
    /// Longest first, so a `user:password` goes before its `password`.
    secrets: Vec<String>,
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("url", &redacted_url(&self.url))
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl Target {
    /// `{base_url}{path}` (a trailing `/` of the base is dropped) with an
    /// optional key; an empty key counts as none. The error names `what`
    /// and never the URL, which may carry a password.
    pub(crate) fn new(
        base_url: &str,
        path: &str,
        api_key: Option<&str>,
        what: &str,
    ) -> Result<Target, String> {
        let base = base_url.trim().trim_end_matches('/');
        let api_key = api_key
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(str::to_owned);
        let url = reqwest::Url::parse(&format!("{base}{path}"))
            .map_err(|e| format!("invalid {what} base URL: {e}"))?;
        let mut secrets: Vec<String> = api_key.iter().cloned().collect();
        let user = url.username();
        if let Some(password) = url.password() {
            secrets.push(format!("{user}:{password}"));
            for p in [
                password.to_owned(),
                percent_decode_str(password)
                    .decode_utf8_lossy()
                    .into_owned(),
                percent_decode_str(&format!("{user}:{password}"))
                    .decode_utf8_lossy()
                    .into_owned(),
            ] {
                // A two-letter password would blank out words, and guards
                // nothing anyway.
                if p.len() >= 3 {
                    secrets.push(p);
                }
            }
        }
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Ok(Target {
            url,
            api_key,
            secrets,
        })
    }

    pub(crate) fn url(&self) -> &reqwest::Url {
        &self.url
    }

    pub(crate) fn api_key(&self) -> Option<&str> {
        self.api_key.as_deref()
    }

    /// `text` without any of the secrets, without the user and password of
    /// any URL in it, and without `Basic …` / `Bearer …` credentials.
    pub(crate) fn redact(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for secret in &self.secrets {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), "<redacted>");
            }
        }
        redact_text(&text)
    }
}

/// Drops the user and password of every URL in `text` and the value of
/// every `Basic` or `Bearer` credential.
pub(crate) fn redact_text(text: &str) -> String {
    static USERINFO: LazyLock<Option<regex::Regex>> =
        LazyLock::new(|| regex::Regex::new(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^\s/?#@]*@").ok());
    static CREDENTIAL: LazyLock<Option<regex::Regex>> =
        LazyLock::new(|| regex::Regex::new(r"(?i)\b(basic|bearer)(\s+)[a-z0-9+/=._~\-]{6,}").ok());
    let mut text = std::borrow::Cow::Borrowed(text);
    if let Some(re) = USERINFO.as_ref() {
        text = std::borrow::Cow::Owned(re.replace_all(&text, "${1}").into_owned());
    }
    if let Some(re) = CREDENTIAL.as_ref() {
        text = std::borrow::Cow::Owned(re.replace_all(&text, "${1}${2}<redacted>").into_owned());
    }
    text.into_owned()
}

/// The URL as logs may show it: its origin only (no user, password,
/// path or query, any of which may carry a credential).
fn redacted_url(url: &reqwest::Url) -> String {
    url.origin().ascii_serialization()
}

/// A reqwest error with its causes, joined by `: `, without the URL.
pub(crate) fn error_chain(e: reqwest::Error) -> String {
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
    redact_text(&text)
}

// --- Sending ------------------------------------------------------------------

/// One provider request: where it goes and how it is retried.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Call<'a> {
    /// For logs: `openai`, `anthropic`.
    pub(crate) provider: &'static str,
    /// The shared [`client`].
    pub(crate) client: &'static reqwest::Client,
    pub(crate) target: &'a Target,
    pub(crate) policy: RetryPolicy,
    /// How long the server may stay silent: before the response headers,
    /// before the first byte of the body, and between two chunks.
    pub(crate) idle_timeout: Duration,
    /// The turn's interrupt.
    pub(crate) cancel: &'a CancellationToken,
}

/// Why a request failed. Every text in it is already free of URLs and
/// secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HttpError {
    Cancelled,
    /// The request could not be built (not retried).
    Request(String),
    /// No response headers within the idle timeout (not retried).
    NoResponse(Duration),
    /// No connection, or it broke before a response (retried).
    Unreachable(String),
    /// An error status and its body (429 and 5xx are retried, after the
    /// server's `Retry-After` when it gave one).
    Status {
        status: StatusCode,
        body: String,
        retry_after: Option<Duration>,
    },
    /// A success whose body failed before its first byte (retried).
    BodyFailed(String),
    /// Silence after the headers, before the first byte (not retried).
    Idle(Duration),
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpError::Cancelled => f.write_str("request cancelled"),
            HttpError::Request(m) => write!(f, "cannot build the request: {m}"),
            HttpError::NoResponse(d) => write!(f, "no response for {}", duration_text(*d)),
            HttpError::Unreachable(m) => write!(f, "cannot reach the server: {m}"),
            HttpError::Status { status, body, .. } => {
                let excerpt: String = body.trim().chars().take(300).collect();
                write!(f, "{status}: {excerpt}")
            }
            HttpError::BodyFailed(m) => write!(f, "stream ended early: {m}"),
            HttpError::Idle(d) => write!(f, "stream idle for {}", duration_text(*d)),
        }
    }
}

impl HttpError {
    /// Worth another attempt: the server may answer next time.
    pub(crate) fn retryable(&self) -> bool {
        match self {
            HttpError::Unreachable(_) | HttpError::BodyFailed(_) => true,
            HttpError::Status { status, .. } => {
                *status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error()
            }
            HttpError::Cancelled
            | HttpError::Request(_)
            | HttpError::NoResponse(_)
            | HttpError::Idle(_) => false,
        }
    }

    /// The server's own delay.
    fn retry_after(&self) -> Option<Duration> {
        match self {
            HttpError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// The last error of a request that [`open`] gave up on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failed {
    pub(crate) error: HttpError,
    /// Attempts made, counting the first.
    pub(crate) attempts: u32,
    /// The error was worth retrying, but the retries or the time ran out.
    pub(crate) exhausted: bool,
}

/// `60s` or `250ms`.
pub(crate) fn duration_text(d: Duration) -> String {
    if d.subsec_millis() == 0 && d.as_secs() > 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// Sends the request `build` makes (once per attempt, from the shared
/// client and the target's URL) until a success whose body has begun, or
/// an error not worth retrying, or the policy's end.
pub(crate) async fn open<F>(call: &Call<'_>, build: F) -> Result<Body, Failed>
where
    F: Fn(&reqwest::Client, &reqwest::Url) -> reqwest::RequestBuilder,
{
    let client = call.client;
    let mut backoff = Backoff::new(call.policy);
    loop {
        let attempt = tokio::select! {
            biased;
            _ = call.cancel.cancelled() => Err(HttpError::Cancelled),
            r = attempt(call, build(client, call.target.url())) => r,
        };
        let error = match attempt {
            Ok(body) => return Ok(body),
            Err(e) => e,
        };
        if !error.retryable() {
            return Err(Failed {
                error,
                attempts: backoff.attempts(),
                exhausted: false,
            });
        }
        let Some(delay) = backoff.next_delay(error.retry_after()) else {
            return Err(Failed {
                error,
                attempts: backoff.attempts(),
                exhausted: true,
            });
        };
        tracing::warn!(
            provider = call.provider,
            origin = %redacted_url(call.target.url()),
            attempt = backoff.attempts() - 1,
            retry_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            error = %error,
            "provider request failed; retrying"
        );
        tokio::select! {
            biased;
            _ = call.cancel.cancelled() => {
                return Err(Failed {
                    error: HttpError::Cancelled,
                    attempts: backoff.attempts() - 1,
                    exhausted: false,
                });
            }
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

/// One attempt: a success whose body has begun, or why not.
async fn attempt(call: &Call<'_>, request: reqwest::RequestBuilder) -> Result<Body, HttpError> {
    let idle = call.idle_timeout;
    // The step's span is the provider's caller, when tracing is on.
    let request = match crate::trace::current() {
        Some(tp) => request.header("traceparent", tp.to_string()),
        None => request,
    };
    let mut response = match tokio::time::timeout(idle, request.send()).await {
        Err(_) => return Err(HttpError::NoResponse(idle)),
        Ok(Err(e)) if e.is_builder() => return Err(HttpError::Request(error_chain(e))),
        Ok(Err(e)) => return Err(HttpError::Unreachable(error_chain(e))),
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    if !status.is_success() {
        let retry_after = retry_after(response.headers(), SystemTime::now());
        let body = match tokio::time::timeout(idle, response.text()).await {
            Ok(Ok(text)) => call.target.redact(&text),
            _ => String::new(),
        };
        return Err(HttpError::Status {
            status,
            body,
            retry_after,
        });
    }
    let json = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"));
    // Wait for the first byte here, so a body that breaks before it is
    // retried like a connection that did.
    let first = match tokio::time::timeout(idle, response.chunk()).await {
        Err(_) => return Err(HttpError::Idle(idle)),
        Ok(Err(e)) => return Err(HttpError::BodyFailed(error_chain(e))),
        Ok(Ok(first)) => first,
    };
    Ok(Body {
        first,
        response,
        idle,
        json,
    })
}

// --- Reading ------------------------------------------------------------------

/// Why a body stopped before its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StreamError {
    /// No byte for this long.
    Idle(Duration),
    /// The connection broke (the error chain, without the URL).
    Cut(String),
}

/// A success response whose body has begun.
#[derive(Debug)]
pub(crate) struct Body {
    /// `None`: the body was empty.
    first: Option<Bytes>,
    response: reqwest::Response,
    idle: Duration,
    json: bool,
}

impl Body {
    /// The server answered `application/json` (not a stream).
    pub(crate) fn is_json(&self) -> bool {
        self.json
    }

    /// The whole body as text.
    pub(crate) async fn text(self) -> Result<String, StreamError> {
        let idle = self.idle;
        let mut chunks = std::pin::pin!(self.chunks());
        let mut bytes = Vec::new();
        loop {
            match tokio::time::timeout(idle, chunks.next()).await {
                Err(_) => return Err(StreamError::Idle(idle)),
                Ok(None) => break,
                Ok(Some(Err(m))) => return Err(StreamError::Cut(m)),
                Ok(Some(Ok(chunk))) => bytes.extend_from_slice(&chunk),
            }
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The body as server-sent events.
    pub(crate) fn events(self) -> Events {
        let idle = self.idle;
        Events::new(self.chunks(), idle)
    }

    fn chunks(self) -> impl Stream<Item = Result<Bytes, String>> + Send + 'static {
        let rest = self.response.bytes_stream().map(|r| r.map_err(error_chain));
        match self.first {
            Some(first) => futures_util::stream::once(async { Ok(first) })
                .chain(rest)
                .left_stream(),
            None => futures_util::stream::empty().right_stream(),
        }
    }
}

type Chunks = Pin<Box<dyn Stream<Item = Result<Bytes, String>> + Send>>;

/// A body read as server-sent events, with an idle timeout between
/// chunks.
pub(crate) struct Events {
    chunks: Chunks,
    idle: Duration,
    parser: SseParser,
    ready: VecDeque<SseEvent>,
    ended: bool,
}

impl fmt::Debug for Events {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Events")
            .field("idle", &self.idle)
            .field("ready", &self.ready.len())
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl Events {
    /// Events from any byte stream (a response body, or a test's chunks).
    pub(crate) fn new(
        chunks: impl Stream<Item = Result<Bytes, String>> + Send + 'static,
        idle: Duration,
    ) -> Events {
        Events {
            chunks: Box::pin(chunks),
            idle,
            parser: SseParser::default(),
            ready: VecDeque::new(),
            ended: false,
        }
    }

    /// The next event; `None` at the end of the body. A last event that
    /// the body ended before its blank line still comes, for the caller
    /// to judge.
    pub(crate) async fn next(&mut self) -> Result<Option<SseEvent>, StreamError> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Ok(Some(event));
            }
            if self.ended {
                return Ok(None);
            }
            match tokio::time::timeout(self.idle, self.chunks.next()).await {
                Err(_) => {
                    self.ended = true;
                    return Err(StreamError::Idle(self.idle));
                }
                Ok(Some(Err(message))) => {
                    self.ended = true;
                    return Err(StreamError::Cut(message));
                }
                Ok(Some(Ok(chunk))) => self.ready.extend(self.parser.push(&chunk)),
                Ok(None) => {
                    self.ended = true;
                    self.ready.extend(self.parser.finish());
                }
            }
        }
    }
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
    fn targets_scrub_keys_passwords_and_echoed_credentials() {
        let t = Target::new(
            "http://user:s3cr%65t@127.0.0.1:9/v1/",
            "/chat/completions",
            Some(" sk-live-1234 "),
            "OpenAI",
        )
        .unwrap();
        assert_eq!(t.api_key(), Some("sk-live-1234"));
        assert_eq!(t.url().path(), "/v1/chat/completions");
        let echoed = "key sk-live-1234 from http://user:s3cr%65t@127.0.0.1:9/v1 as user:s3cret, Authorization: Basic dXNlcjpzM2NyZXQ= or bearer abcdefgh";
        let clean = t.redact(echoed);
        for leak in ["sk-live", "s3cr", "user:", "dXNlcjpz", "abcdefgh"] {
            assert!(!clean.contains(leak), "{leak} in {clean}");
        }
        assert!(clean.contains("http://127.0.0.1:9/v1"), "{clean}");
        let debug = format!("{t:?}");
        assert!(
            !debug.contains("s3cr") && !debug.contains("sk-live"),
            "{debug}"
        );

        let err = Target::new("http://user:s3cret@[::1", "/v1", None, "OpenAI").unwrap_err();
        assert!(!err.contains("s3cret"), "{err}");
    }

    #[tokio::test]
    async fn events_time_out_when_the_server_goes_quiet() {
        let first: Result<Bytes, String> = Ok(Bytes::from_static(b"data: a\n\ndata: b"));
        let chunks = futures_util::stream::iter([first]).chain(futures_util::stream::pending());
        let mut events = Events::new(chunks, Duration::from_millis(50));
        assert_eq!(events.next().await.unwrap().unwrap().data, "a");
        assert_eq!(
            events.next().await,
            Err(StreamError::Idle(Duration::from_millis(50)))
        );
        assert_eq!(events.next().await, Ok(None));
    }

    #[test]
    fn one_client_per_process() {
        let a = client().unwrap();
        let b = client().unwrap();
        assert!(std::ptr::eq(a, b));
        assert_eq!(clients_built(), 1);
    }
}
