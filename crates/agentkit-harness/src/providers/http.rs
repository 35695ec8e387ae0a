//! The provider HTTP layer: requests on the process's one client and
//! retry policy (`agentkit_plumbing`), the body of a streamed answer, and
//! error text that never carries a URL, a password or a key. `openai` and
//! `anthropic` only map requests and stream events on top of it.
//!
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
use std::pin::Pin;
use std::time::Duration;

use agentkit_plumbing::{
    Backoff, RetryPolicy, http_client, http_error_text, redact_credentials, retry_after_header,
};
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use percent_encoding::percent_decode_str;
use reqwest::StatusCode;
use reqwest::header::CONTENT_TYPE;
use tokio_util::sync::CancellationToken;

use super::sse::{SseEvent, SseParser};

/// The process's one HTTP client (`agentkit_plumbing::http_client`), its
/// failure as the text a provider error carries.
pub(crate) fn client() -> Result<&'static reqwest::Client, String> {
    http_client().map_err(|e| e.to_string())
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
        redact_credentials(&text)
    }
}

/// The URL as logs may show it: its origin only (no user, password,
/// path or query, any of which may carry a credential).
fn redacted_url(url: &reqwest::Url) -> String {
    url.origin().ascii_serialization()
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
        Ok(Err(e)) if e.is_builder() => return Err(HttpError::Request(http_error_text(e))),
        Ok(Err(e)) => return Err(HttpError::Unreachable(http_error_text(e))),
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    if !status.is_success() {
        let retry_after = retry_after_header(response.headers());
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
        Ok(Err(e)) => return Err(HttpError::BodyFailed(http_error_text(e))),
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
        let rest = self
            .response
            .bytes_stream()
            .map(|r| r.map_err(http_error_text));
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
}
