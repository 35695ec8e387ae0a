//! The HTTP edge: the accept loop and what bounds each connection, so that
//! slow, idle or many clients cannot make the server unreachable.
//!
//! hyper serves each connection (HTTP/1.1) with a header-read timeout that
//! also bounds how long an idle keep-alive connection waits for its next
//! request; a semaphore caps the connections open at once (at the cap the
//! loop stops accepting, so new connections wait in the listen backlog); a
//! write-stall bound on the socket drops a follower that stopped reading;
//! a middleware bounds how long a request may take to produce its answer.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::http::ApiError;

/// How the HTTP edge bounds connections and requests
/// ([`ServeOptions::edge`](crate::ServeOptions::edge)).
#[derive(Debug, Clone)]
pub struct EdgeOptions {
    /// How long a client may take to send a request's line and headers,
    /// counted from when the server starts waiting for them: on a new
    /// connection, and after each answer on a keep-alive connection (so
    /// this is also the idle keep-alive timeout). The connection is closed
    /// when it runs out.
    pub header_read_timeout: Duration,
    /// How long a request may take, body upload included, to produce its
    /// answer's head; then it is answered `408` `request_timeout`. An
    /// NDJSON stream's head comes at once and its body is not bounded by
    /// this. `/v1/mcp` may take `mcp_max_wait` longer, `/v1/tools/:name`
    /// the longest tool timeout of the served agents longer.
    pub request_timeout: Duration,
    /// How long a write to a client may make no progress before the
    /// connection is dropped: a stream follower that stopped reading is
    /// let go after this, with at most hyper's write buffer held for it.
    pub write_stall_timeout: Duration,
    /// The most connections open at once; `None` derives it from the
    /// soft `RLIMIT_NOFILE` (three quarters of it, leaving the rest for
    /// logs, SQLite and child processes). At the cap, new connections
    /// wait in the listen backlog and a warning is logged (at most every
    /// 10 s).
    pub max_connections: Option<usize>,
}

impl Default for EdgeOptions {
    fn default() -> Self {
        EdgeOptions {
            header_read_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(120),
            write_stall_timeout: Duration::from_secs(60),
            max_connections: None,
        }
    }
}

/// The file-descriptor limit (`RLIMIT_NOFILE`) of this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdLimit {
    /// The limit in force.
    pub soft: u64,
    /// The ceiling the soft limit may be raised to.
    pub hard: u64,
    /// The soft limit before [`raise_fd_limit`] raised it, if it did.
    pub raised_from: Option<u64>,
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit, so a server holding
/// many connections and session logs is not stopped by a low default
/// (often 1024). Binaries call it at startup; a library embedding the
/// server may leave the process's limit alone.
pub fn raise_fd_limit() -> io::Result<FdLimit> {
    #[cfg(unix)]
    {
        use nix::sys::resource::{Resource, getrlimit, setrlimit};
        let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(io::Error::from)?;
        if soft >= hard {
            return Ok(FdLimit {
                soft,
                hard,
                raised_from: None,
            });
        }
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).map_err(io::Error::from)?;
        Ok(FdLimit {
            soft: hard,
            hard,
            raised_from: Some(soft),
        })
    }
    #[cfg(not(unix))]
    {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "file-descriptor limits are a Unix notion",
        ))
    }
}

/// The soft `RLIMIT_NOFILE`, when the platform has one.
fn soft_fd_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
            .ok()
            .map(|(soft, _)| soft)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The connection cap: the configured one, else three quarters of the
/// soft file-descriptor limit (at least 16), else 16,384.
pub(crate) fn connection_cap(options: &EdgeOptions) -> usize {
    if let Some(n) = options.max_connections {
        return n.max(1);
    }
    match soft_fd_limit() {
        // RLIM_INFINITY reads as u64::MAX.
        Some(soft) if soft < 1 << 24 => usize::try_from(soft / 4 * 3).unwrap_or(16_384).max(16),
        _ => 16_384,
    }
}

/// What the accept loop needs besides the listener.
#[derive(Debug)]
pub(crate) struct Edge {
    pub(crate) router: Router,
    pub(crate) options: EdgeOptions,
    pub(crate) max_connections: usize,
    pub(crate) shutdown: CancellationToken,
    /// How long shutdown waits for open connections to finish.
    pub(crate) grace: Duration,
}

/// Accepts connections until `shutdown`, then lets open ones finish their
/// current request (streams end on shutdown) within the grace period, and
/// drops the rest.
pub(crate) async fn run(listener: TcpListener, edge: Edge) -> io::Result<()> {
    let Edge {
        router,
        options,
        max_connections,
        shutdown,
        grace,
    } = edge;
    let permits = Arc::new(Semaphore::new(max_connections));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let force_close = CancellationToken::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout)
        .keep_alive(true);
    let mut cap_warning = Every::new(Duration::from_secs(10));
    let mut accept_warning = Every::new(Duration::from_secs(10));
    loop {
        let permit = match permits.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                if let Some(suppressed) = cap_warning.due() {
                    tracing::warn!(
                        max_connections,
                        suppressed,
                        "connection limit reached: new connections wait in the listen backlog until one closes (raise the file-descriptor limit or the connection cap)"
                    );
                }
                tokio::select! {
                    p = permits.clone().acquire_owned() => match p {
                        Ok(p) => p,
                        Err(_) => break,
                    },
                    () = shutdown.cancelled() => break,
                }
            }
        };
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(c) => c,
                Err(e) if is_connection_error(&e) => continue,
                Err(e) => {
                    // EMFILE, ENFILE, ENOBUFS: retrying at once would spin.
                    if let Some(suppressed) = accept_warning.due() {
                        tracing::warn!(error = %e, suppressed, "cannot accept connections; retrying in 100 ms");
                    }
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(100)) => continue,
                        () = shutdown.cancelled() => break,
                    }
                }
            },
            () = shutdown.cancelled() => break,
        };
        // Events are small writes that must leave at once: without NODELAY,
        // Nagle's algorithm holds the first streamed line until the client's
        // delayed ACK (about 40 ms on a keep-alive connection).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let io = TokioIo::new(StallBound::new(tcp, options.write_stall_timeout));
        let router = router.clone();
        let service =
            hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let mut req = req.map(axum::body::Body::new);
                req.extensions_mut().insert(ConnectInfo(peer));
                let mut router = router.clone();
                tower_service::Service::call(&mut router, req)
            });
        let conn = graceful.watch(http.serve_connection(io, service));
        let force_close = force_close.clone();
        tokio::spawn(async move {
            tokio::select! {
                result = conn => {
                    if let Err(e) = result {
                        tracing::debug!(%peer, error = %e, "connection ended with an error");
                    }
                }
                () = force_close.cancelled() => {}
            }
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            grace_ms = grace.as_millis() as u64,
            "connections still open after the shutdown grace; closing them"
        );
        force_close.cancel();
    }
    Ok(())
}

/// Errors of one connection that the next accept does not share.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// A rate limit for a log line: due at most once per period, counting the
/// times it was not.
#[derive(Debug)]
struct Every {
    period: Duration,
    last: Option<Instant>,
    suppressed: u64,
}

impl Every {
    fn new(period: Duration) -> Every {
        Every {
            period,
            last: None,
            suppressed: 0,
        }
    }

    /// `Some(times suppressed since the last one)` when the line is due.
    fn due(&mut self) -> Option<u64> {
        let now = Instant::now();
        match self.last {
            Some(last) if now.duration_since(last) < self.period => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }
}

/// A socket whose writes fail with `TimedOut` once one has made no
/// progress for `bound`: hyper then drops the connection, and with it the
/// response body (a stream's subscription).
#[derive(Debug)]
struct StallBound<T> {
    io: T,
    bound: Duration,
    /// Armed while a write is pending; reset on progress.
    timer: Pin<Box<tokio::time::Sleep>>,
    armed: bool,
}

impl<T> StallBound<T> {
    fn new(io: T, bound: Duration) -> StallBound<T> {
        StallBound {
            io,
            bound,
            timer: Box::pin(tokio::time::sleep(bound)),
            armed: false,
        }
    }

    /// After a write returned `Pending`: `Ready(Err)` once the stall
    /// lasted `bound`, else `Pending` with the timer's wakeup registered.
    fn stalled<R>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<R>> {
        if !self.armed {
            self.armed = true;
            let deadline = tokio::time::Instant::now() + self.bound;
            self.timer.as_mut().reset(deadline);
        }
        match self.timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client made no write progress within the write-stall timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn progress<R>(
        &mut self,
        result: Poll<io::Result<R>>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<R>> {
        match result {
            Poll::Pending => self.stalled(cx),
            ready => {
                self.armed = false;
                ready
            }
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for StallBound<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for StallBound<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.io).poll_write(cx, buf);
        this.progress(result, cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.progress(result, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.io).poll_flush(cx);
        this.progress(result, cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.io).poll_shutdown(cx);
        this.progress(result, cx)
    }
}

/// The bounds the request-timeout middleware applies, by route.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestBounds {
    pub(crate) default: Duration,
    /// `/v1/mcp`: `ask` and `check` wait up to `mcp_max_wait` by design.
    pub(crate) mcp: Duration,
    /// `/v1/tools/:name`: a deterministic call runs as long as its tool.
    pub(crate) tools: Duration,
}

/// Answers `408` when the request has not produced its answer's head
/// within its route's bound. Only the head: a stream's body is bounded by
/// the write-stall timeout and the stream's own end, not by this.
pub(crate) async fn request_timeout(
    State(bounds): State<RequestBounds>,
    req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path();
    let bound = if path.ends_with("/v1/mcp") {
        bounds.mcp
    } else if path.contains("/v1/tools/") {
        bounds.tools
    } else {
        bounds.default
    };
    match tokio::time::timeout(bound, next.run(req)).await {
        Ok(response) => response,
        Err(_) => ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            agentkit_protocol::ErrorCode::RequestTimeout,
            format!(
                "the request did not complete within {} s",
                bound.as_secs_f64()
            ),
        )
        .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_limited_line_is_due_once_per_period_and_counts_the_rest() {
        let mut every = Every::new(Duration::from_secs(3600));
        assert_eq!(every.due(), Some(0));
        assert_eq!(every.due(), None);
        assert_eq!(every.due(), None);
        every.last = Some(Instant::now() - Duration::from_secs(7200));
        assert_eq!(every.due(), Some(2));
    }

    #[test]
    fn the_connection_cap_is_the_configured_one_or_below_the_fd_limit() {
        let configured = EdgeOptions {
            max_connections: Some(5),
            ..EdgeOptions::default()
        };
        assert_eq!(connection_cap(&configured), 5);
        let derived = connection_cap(&EdgeOptions::default());
        if let Some(soft) = soft_fd_limit().filter(|s| *s < 1 << 24) {
            assert!((derived as u64) < soft, "{derived} vs {soft}");
        }
        assert!(derived >= 16);
    }
}
