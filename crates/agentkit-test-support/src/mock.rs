//! A recording HTTP server on loopback for the third parties agentkit
//! talks to (model providers, GitHub, GitLab, Bitbucket, webhook
//! receivers): every request is kept (method, path, headers, raw body)
//! for the test to assert, and a handler decides each answer, streamed or
//! whole.
//!
//! The server runs on its own thread and runtime, so synchronous tests
//! (which drive a server over [`crate::http`]) and `#[tokio::test]`s use it
//! alike. Dropping it stops it.

// Test support: a mock that cannot bind or start has no useful way to go
// on, so setup failures panic with what failed.
#![allow(clippy::expect_used)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, Uri};
use axum::response::Response;
use serde_json::Value;

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// The path, without the query.
    pub path: String,
    pub query: Option<String>,
    /// Header names in lower case, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The raw body, as signed by whoever sent it.
    pub body: Vec<u8>,
}

impl Recorded {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON (`Value::Null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// How a streamed body ends after its chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEnd {
    /// The body ends cleanly.
    Close,
    /// The connection is cut mid-body.
    Cut,
    /// Nothing more arrives, but the connection stays open.
    Stall,
}

/// The body of an answer.
#[derive(Debug, Clone)]
pub enum MockBody {
    Full(Vec<u8>),
    /// Chunks sent `pace` apart (each in its own write), then `end`.
    Stream {
        chunks: Vec<String>,
        pace: Duration,
        end: StreamEnd,
    },
}

/// One answer.
#[derive(Debug, Clone)]
pub struct MockResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: MockBody,
}

impl MockResponse {
    /// A JSON body.
    pub fn json(status: u16, body: &Value) -> MockResponse {
        MockResponse {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: MockBody::Full(body.to_string().into_bytes()),
        }
    }

    /// A plain-text body.
    pub fn text(status: u16, body: &str) -> MockResponse {
        MockResponse {
            status,
            headers: vec![("content-type".into(), "text/plain".into())],
            body: MockBody::Full(body.as_bytes().to_vec()),
        }
    }

    /// A `text/event-stream` of already framed events (`data: ...\n\n`).
    pub fn sse(events: Vec<String>, end: StreamEnd) -> MockResponse {
        MockResponse {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            body: MockBody::Stream {
                chunks: events,
                pace: Duration::from_millis(2),
                end,
            },
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> MockResponse {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
}

type Handler = dyn Fn(&Recorded) -> MockResponse + Send + Sync;

struct Shared {
    handler: Box<Handler>,
    requests: Mutex<Vec<Recorded>>,
    arrived: Condvar,
    /// Streamed bodies dropped before they ended: the client went away.
    streams_dropped: AtomicUsize,
}

/// A running mock server.
pub struct MockServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for MockServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockServer")
            .field("addr", &self.addr)
            .finish()
    }
}

impl MockServer {
    /// Starts a server on `127.0.0.1:0` answering every request with
    /// `handler` (which sees the request already recorded).
    pub fn start(
        handler: impl Fn(&Recorded) -> MockResponse + Send + Sync + 'static,
    ) -> MockServer {
        let shared = Arc::new(Shared {
            handler: Box::new(handler),
            requests: Mutex::new(Vec::new()),
            arrived: Condvar::new(),
            streams_dropped: AtomicUsize::new(0),
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let addr = listener.local_addr().expect("the listener's address");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let state = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("mock-server-{}", addr.port()))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime for the mock server");
                rt.block_on(async move {
                    let listener =
                        tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
                    let app = axum::Router::new().fallback(answer).with_state(state);
                    tokio::select! {
                        _ = axum::serve(listener, app) => {}
                        _ = stopped => {}
                    }
                });
            })
            .expect("spawn the mock server thread");
        MockServer {
            addr,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.shared.requests).clone()
    }

    /// The requests from the `from`th on (a long benchmark reads only the
    /// new ones).
    pub fn requests_from(&self, from: usize) -> Vec<Recorded> {
        let all = lock(&self.shared.requests);
        all.get(from..)
            .map(<[Recorded]>::to_vec)
            .unwrap_or_default()
    }

    /// How many requests arrived so far.
    pub fn request_count(&self) -> usize {
        lock(&self.shared.requests).len()
    }

    /// Waits until at least `n` requests arrived (or `timeout` passed) and
    /// returns them all.
    pub fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Recorded> {
        let deadline = Instant::now() + timeout;
        let mut requests = lock(&self.shared.requests);
        while requests.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            requests = self
                .shared
                .arrived
                .wait_timeout(requests, left)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
        requests.clone()
    }

    /// How many streamed bodies the client dropped before they ended.
    pub fn streams_dropped(&self) -> usize {
        self.shared.streams_dropped.load(Ordering::SeqCst)
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Counts a streamed body dropped before its end.
struct DropGuard {
    shared: Arc<Shared>,
    finished: bool,
}

impl DropGuard {
    fn finish(&mut self) {
        self.finished = true;
    }
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        if !self.finished {
            self.shared.streams_dropped.fetch_add(1, Ordering::SeqCst);
        }
    }
}

async fn answer(
    axum::extract::State(shared): axum::extract::State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let recorded = Recorded {
        method: method.to_string(),
        path: uri.path().to_owned(),
        query: uri.query().map(str::to_owned),
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: body.to_vec(),
    };
    lock(&shared.requests).push(recorded.clone());
    shared.arrived.notify_all();
    let reply = (shared.handler)(&recorded);
    let mut response = Response::builder().status(reply.status);
    for (k, v) in &reply.headers {
        response = response.header(k, v);
    }
    let body = match reply.body {
        MockBody::Full(bytes) => Body::from(bytes),
        MockBody::Stream { chunks, pace, end } => {
            let guard = DropGuard {
                shared: shared.clone(),
                finished: false,
            };
            let stream = futures_util::stream::unfold(
                (chunks.into_iter(), guard),
                move |(mut chunks, mut guard)| async move {
                    tokio::time::sleep(pace).await;
                    match chunks.next() {
                        Some(chunk) => {
                            Some((Ok::<_, std::io::Error>(Bytes::from(chunk)), (chunks, guard)))
                        }
                        None => match end {
                            StreamEnd::Close => {
                                guard.finish();
                                None
                            }
                            StreamEnd::Cut => {
                                guard.finish();
                                // Let what was sent reach the client first.
                                tokio::time::sleep(Duration::from_millis(30)).await;
                                Some((
                                    Err(std::io::Error::other("connection cut")),
                                    (chunks, guard),
                                ))
                            }
                            StreamEnd::Stall => {
                                std::future::pending::<Infallible>().await;
                                None
                            }
                        },
                    }
                },
            );
            Body::from_stream(stream)
        }
    };
    response
        .body(body)
        .unwrap_or_else(|_| Response::new(Body::from("bad mock response")))
}
