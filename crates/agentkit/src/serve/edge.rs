//! The HTTP edge: the accept loop and what bounds each connection, so that
//! slow, idle or many clients cannot make the server unreachable.
//!
//! hyper serves each connection (HTTP/1.1) with a header-read timeout that
//! also bounds how long an idle keep-alive connection waits for its next
//! request; a request's body must arrive within the body timeout plus one
//! second per `body_min_rate` bytes received, else it is answered `408`
//! and the connection closed; a semaphore caps the connections open at
//! once, and at the cap a new connection is admitted by closing the oldest
//! one that has not completed a request (half-sent head or body), else the
//! longest-idle keep-alive one (a connection busy with a request, a
//! stream follower included, is never closed for room); a write-stall
//! bound on the socket drops a follower that stopped reading; a middleware
//! bounds how long a request may take to produce its answer; another
//! bounds the turns in flight, answering `503` `overloaded` with
//! `Retry-After` past it, or while the process holds more descriptors
//! than its limit less a headroom (sampled every 50 ms), and `429`
//! `rate_limited` past a principal's own bound.
//!
//! The edge has a runtime and threads of its own ([`spawn`],
//! `--edge-threads`); each request is routed on the main runtime, where
//! the turns run. While the host sheds turns, the accept loop and new
//! connections run on the edge's runtime, so a busy turn runtime does not
//! delay reading a request or answering a refusal; while it is calm they
//! run on the main runtime, which saves a handoff between threads per
//! request and per streamed frame ([`Pressure`]). A request that would
//! start a turn (`POST /v1/session`, `POST /v1/session/:id`) is handled
//! on its connection before routing ([`EarlyRefusal`]): refused while the
//! gate is full, else its body is read and its slot reserved
//! ([`EarlySlot`]), so at saturation every refusal of those routes is
//! answered on the edge's thread, waiting neither for the turns' tasks
//! nor for its handler or auth.

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper::body::{Body as _, Bytes, Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::every::Every;
use super::http::ApiError;
use super::limits::{LimitStats, Rate, limited};

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
    /// How long a request's body may take to arrive, counted from the end
    /// of its headers, beyond what [`body_min_rate`](Self::body_min_rate)
    /// earns: past it the request is answered `408` `request_timeout` and
    /// the connection closed. A body that never comes (a lying
    /// `Content-Length`) or trickles in is cut here.
    pub body_read_timeout: Duration,
    /// The slowest body upload kept: each `body_min_rate` bytes received
    /// extend the body's deadline by one second (as Apache's
    /// `mod_reqtimeout` `MinRate`); 0 makes the body timeout a bound on the
    /// whole upload.
    pub body_min_rate: u64,
    /// The most connections open at once; `None` derives it from the
    /// soft `RLIMIT_NOFILE` (three quarters of it, leaving the rest for
    /// logs, SQLite and child processes). At the cap, a new connection is
    /// admitted by closing the oldest connection that has not completed a
    /// request, else the longest-idle keep-alive one; when every
    /// connection is busy with a request, it waits for one to end. A
    /// warning is logged (at most every 10 s).
    pub max_connections: Option<usize>,
    /// The most turns in flight on the host at once (admitted by
    /// `POST /v1/session` or a follow-up and not yet settled); past it a
    /// new one is answered `503` `overloaded` with `Retry-After` at once.
    /// `None` derives it from the soft `RLIMIT_NOFILE`: a twentieth of it
    /// (of the quarter the connection cap leaves, four fifths at four
    /// descriptors a turn, for its log, a provider connection and a
    /// child's pipes), so an admitted turn does not run out of descriptors.
    pub max_turns: Option<usize>,
    /// The most turns in flight per principal of each agent (fair shares);
    /// past it the principal's next turn is answered `429`
    /// `rate_limited` with `Retry-After`, while other principals are
    /// served. `None`: no per-principal bound. Operators are not counted.
    pub max_turns_per_principal: Option<usize>,
    /// The request rate of each principal of each agent (on every route
    /// that runs the agent's auth chain), and of each client address on
    /// the routes that run none; past it `429` `rate_limited` with
    /// `Retry-After`. `None`: no rate limit. Operators are not counted.
    pub rate_limit: Option<Rate>,
    /// The delivery rate of each webhook channel (`/v1/channels/<id>`),
    /// counted apart from the principals' so that a flood on one channel
    /// does not use the API's budget; past it `429` `rate_limited`.
    /// `None`: no channel rate limit.
    pub channel_rate_limit: Option<Rate>,
    /// How many file descriptors below the soft `RLIMIT_NOFILE` a new turn
    /// is still admitted: when the process holds more than the limit less
    /// this (sampled every 50 ms), a new turn is answered `503`
    /// `overloaded` with `Retry-After` at once, so an admitted turn does
    /// not fail for want of a descriptor (its log, a provider connection,
    /// a child's pipes). `None`: a sixteenth of the limit, at least 32;
    /// `Some(0)`: no check.
    pub fd_headroom: Option<u64>,
    /// The threads of the edge's own runtime, where the accept loop and
    /// new connections run while the host sheds turns (requests are
    /// routed on the main runtime), so a refusal is answered without
    /// waiting behind the turns; while the host is calm they run on the
    /// main runtime. `None`: a quarter of the cores, at least one.
    /// `Some(0)`: the edge always runs on the main runtime (past
    /// saturation refusals then wait behind the turns and fewer turns are
    /// admitted: see the serving guide).
    pub edge_threads: Option<usize>,
}

impl Default for EdgeOptions {
    fn default() -> Self {
        EdgeOptions {
            header_read_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(120),
            write_stall_timeout: Duration::from_secs(60),
            body_read_timeout: Duration::from_secs(10),
            body_min_rate: 500,
            max_connections: None,
            max_turns: None,
            max_turns_per_principal: None,
            rate_limit: None,
            channel_rate_limit: None,
            fd_headroom: None,
            edge_threads: None,
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

/// The turn bound: the configured one, else a twentieth of the soft
/// file-descriptor limit (of the quarter the connection cap leaves, four
/// fifths at four descriptors a turn, the rest for logs, databases and
/// listeners; at least 16), else 4,096.
pub(crate) fn turn_cap(options: &EdgeOptions) -> usize {
    if let Some(n) = options.max_turns {
        return n.max(1);
    }
    match soft_fd_limit() {
        Some(soft) if soft < 1 << 24 => usize::try_from(soft / 20).unwrap_or(4096).max(16),
        _ => 4096,
    }
}

/// The host-wide bound on turns in flight, and the optional bound per
/// principal of each agent. A turn handler reserves a slot once the body
/// is read and before the runtime admits the turn (so a burst cannot pass
/// the check together), then turns the reservation into the admitted
/// session, which holds the slot until the runtime says it is no longer
/// busy (a reaper looks every 20 ms while any is admitted, and sleeps
/// while none is); a request that admits nothing gives it back.
#[derive(Debug)]
pub(crate) struct TurnGate {
    max: usize,
    /// `--max-turns-per-principal`.
    per_principal: Option<usize>,
    /// `--fd-headroom`, as configured (`None`: derived from the limit).
    fd_headroom: Option<u64>,
    state: Mutex<GateState>,
    stats: Arc<EdgeStats>,
    /// Wakes the reaper from its sleep when a session is admitted into an
    /// empty gate.
    first_admitted: tokio::sync::Notify,
}

/// A principal of one agent, as the per-principal bound counts it.
type PrincipalKey = (String, String);

#[derive(Debug, Default)]
struct GateState {
    reserved: usize,
    admitted: Vec<Admitted>,
    /// Slots (reserved or admitted) per principal, when the per-principal
    /// bound is on; a principal with none has no entry.
    by_principal: HashMap<PrincipalKey, usize>,
}

/// A session holding a slot.
#[derive(Debug)]
struct Admitted {
    runtime: agentkit_runtime::AgentRuntime,
    id: String,
    principal: Option<PrincipalKey>,
}

/// Gives back one slot of `principal`.
fn release(by_principal: &mut HashMap<PrincipalKey, usize>, principal: Option<&PrincipalKey>) {
    let Some(key) = principal else { return };
    if let Some(n) = by_principal.get_mut(key) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            by_principal.remove(key);
        }
    }
}

impl TurnGate {
    pub(crate) fn new(options: &EdgeOptions, stats: Arc<EdgeStats>) -> Arc<TurnGate> {
        Arc::new(TurnGate {
            max: turn_cap(options),
            per_principal: options.max_turns_per_principal.map(|n| n.max(1)),
            fd_headroom: options.fd_headroom,
            state: Mutex::new(GateState::default()),
            stats,
            first_admitted: tokio::sync::Notify::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn publish(&self, state: &GateState) {
        self.stats.turns_in_flight.store(
            (state.reserved + state.admitted.len()) as u64,
            Ordering::Relaxed,
        );
    }

    /// A slot for a turn of `owner` on agent `agent`: `503` `overloaded`
    /// at the host's bound, `429` `rate_limited` at the principal's (each
    /// with `Retry-After`, at once).
    pub(crate) fn admit(
        self: &Arc<Self>,
        agent: &str,
        owner: &agentkit_runtime::Owner,
    ) -> Result<TurnSlot, ApiError> {
        let reserved = self.reserve_early()?;
        self.admit_reserved(reserved, agent, owner)
    }

    /// A slot for a turn whose caller is not known yet: the edge reserves
    /// it once the request's body is read, before routing, and the handler
    /// completes it with [`admit_reserved`](Self::admit_reserved). `503`
    /// `overloaded` at the host's bound or short of descriptors, as
    /// [`admit`](Self::admit) would answer.
    pub(crate) fn reserve_early(self: &Arc<Self>) -> Result<TurnSlot, ApiError> {
        if let Some(refused) = self.short_of_descriptors() {
            return Err(refused);
        }
        let mut state = self.lock();
        if let Some(refused) = self.full(&mut state) {
            drop(state);
            return Err(refused);
        }
        state.reserved += 1;
        // Half full: refusals may come; new connections go to the edge
        // before they do (the slow answer is the first one a connection
        // on the main runtime gives under load).
        if (state.reserved + state.admitted.len()) * 2 >= self.max {
            self.stats.pressure.pressed();
        }
        self.publish(&state);
        Ok(TurnSlot(Arc::new(SlotInner {
            gate: self.clone(),
            held: AtomicBool::new(true),
            principal: None,
        })))
    }

    /// Completes a slot the edge reserved ([`reserve_early`](Self::reserve_early))
    /// for `owner` on agent `agent`: only the principal's bound is left to
    /// check (`429` `rate_limited`, and the slot is given back). A slot
    /// already given back is taken again as by [`admit`](Self::admit).
    pub(crate) fn admit_reserved(
        self: &Arc<Self>,
        reserved: TurnSlot,
        agent: &str,
        owner: &agentkit_runtime::Owner,
    ) -> Result<TurnSlot, ApiError> {
        let (Some(max), false) = (self.per_principal, owner.is_operator()) else {
            return Ok(reserved);
        };
        let key = (agent.to_owned(), owner.principal_id.clone());
        let mut state = self.lock();
        if !reserved.0.held.load(Ordering::Acquire) {
            drop(state);
            return self.admit(agent, owner);
        }
        if state.by_principal.get(&key).copied().unwrap_or(0) >= max {
            drop(state);
            // Dropped unlocked: giving the slot back takes the lock.
            drop(reserved);
            self.stats.limited.turns.fetch_add(1, Ordering::Relaxed);
            return Err(ApiError::from(limited(
                format!(
                    "principal `{}` has its most turns in flight ({max}, --max-turns-per-principal); retry after 1 s",
                    owner.principal_id
                ),
                1,
            )));
        }
        // The reservation passes to a slot that names the principal.
        reserved.0.held.store(false, Ordering::Release);
        *state.by_principal.entry(key.clone()).or_default() += 1;
        drop(state);
        Ok(TurnSlot(Arc::new(SlotInner {
            gate: self.clone(),
            held: AtomicBool::new(true),
            principal: Some(key),
        })))
    }

    /// The `503` a new turn gets now, before its request is routed (its
    /// body read, its caller authenticated): at the host's turn bound or
    /// short of descriptors, as [`admit`](Self::admit) would answer it.
    /// Reserves nothing: a request let through takes its slot in `admit`.
    pub(crate) fn refuse_early(&self) -> Option<ApiError> {
        if let Some(refused) = self.short_of_descriptors() {
            return Some(refused);
        }
        let mut state = self.lock();
        self.full(&mut state)
    }

    /// The `503` for a turn at the host's bound (counted as shed).
    fn full(&self, state: &mut GateState) -> Option<ApiError> {
        if state.reserved + state.admitted.len() >= self.max {
            // The reaper may be behind (a loaded machine starves it):
            // sessions that settled since its last look free their slots
            // now rather than turning this turn away.
            self.reap_settled(state);
        }
        if state.reserved + state.admitted.len() < self.max {
            return None;
        }
        self.stats.turns_shed.fetch_add(1, Ordering::Relaxed);
        self.stats.pressure.pressed();
        Some(
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                agentkit_protocol::ErrorCode::Overloaded,
                format!(
                    "the host is running its most turns at once ({}); retry after 1 s",
                    self.max
                ),
            )
            .retry_after(1),
        )
    }

    /// The `503` for a turn when the process holds more descriptors than
    /// its limit less the headroom (as last sampled).
    fn short_of_descriptors(&self) -> Option<ApiError> {
        let limit = self.stats.fds_limit.load(Ordering::Relaxed);
        let open = self.stats.fds_open.load(Ordering::Relaxed);
        let headroom = fd_headroom(self.fd_headroom, limit);
        if limit == 0 || headroom == 0 || open.saturating_add(headroom) <= limit {
            return None;
        }
        self.stats.turns_shed.fetch_add(1, Ordering::Relaxed);
        self.stats.turns_shed_fds.fetch_add(1, Ordering::Relaxed);
        self.stats.pressure.pressed();
        Some(
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                agentkit_protocol::ErrorCode::Overloaded,
                format!(
                    "the host holds {open} of its {limit} file descriptors, within the {headroom} kept for running turns (--fd-headroom); retry after 1 s"
                ),
            )
            .retry_after(1),
        )
    }

    /// Lets go of the sessions that are no longer busy, until `shutdown`:
    /// every 20 ms while any is admitted; an idle host's reaper sleeps
    /// until the next admission wakes it.
    pub(crate) async fn reap(self: Arc<Self>, shutdown: CancellationToken) {
        loop {
            let idle = self.lock().admitted.is_empty();
            tokio::select! {
                // `notify_one` keeps a permit: an admission between the
                // look and this wait is not missed.
                () = self.first_admitted.notified(), if idle => {}
                () = tokio::time::sleep(Duration::from_millis(20)), if !idle => {}
                () = shutdown.cancelled() => return,
            }
            let mut state = self.lock();
            if state.admitted.is_empty() {
                continue;
            }
            self.reap_settled(&mut state);
        }
    }

    /// Gives back the slots of the admitted sessions whose turns ended
    /// (no turn running or waiting to run).
    fn reap_settled(&self, state: &mut GateState) {
        let GateState {
            admitted,
            by_principal,
            ..
        } = state;
        admitted.retain(|a| {
            // Busy, not active: a session whose turn ended holds no slot
            // while its worker makes the settled log durable (its client
            // has seen `session.waiting` and may start the next turn).
            let active = a.runtime.is_busy(&a.id);
            if !active {
                release(by_principal, a.principal.as_ref());
            }
            active
        });
        self.publish(state);
    }
}

/// A reserved turn slot; given back when dropped unless
/// [`admitted`](Self::admitted).
#[derive(Debug)]
pub(crate) struct TurnSlot(Arc<SlotInner>);

/// The slot the edge reserved for a turn request before routing it
/// ([`TurnGate::reserve_early`]), as a request extension: the turn's
/// handler [`take`](Self::take)s it; unclaimed, it is given back when the
/// request is dropped.
#[derive(Debug, Clone)]
pub(crate) struct EarlySlot(Arc<Mutex<Option<TurnSlot>>>);

impl EarlySlot {
    /// The reserved slot, once.
    pub(crate) fn take(&self) -> Option<TurnSlot> {
        self.0.lock().ok().and_then(|mut s| s.take())
    }

    /// The slot reserved for `request`, if the edge reserved one.
    pub(crate) fn of(request: &Request) -> Option<TurnSlot> {
        request
            .extensions()
            .get::<EarlySlot>()
            .and_then(EarlySlot::take)
    }
}

#[derive(Debug)]
struct SlotInner {
    gate: Arc<TurnGate>,
    held: AtomicBool,
    principal: Option<PrincipalKey>,
}

impl TurnSlot {
    /// The turn was admitted into session `id`: it holds the slot while
    /// a turn of the session runs or waits to run (a session already holding one gives this
    /// one back).
    pub(crate) fn admitted(&self, runtime: &agentkit_runtime::AgentRuntime, id: &str) {
        if !self.0.held.swap(false, Ordering::AcqRel) {
            return;
        }
        let gate = &self.0.gate;
        let mut state = gate.lock();
        state.reserved = state.reserved.saturating_sub(1);
        if state.admitted.iter().any(|a| a.id == id) {
            release(&mut state.by_principal, self.0.principal.as_ref());
        } else {
            if state.admitted.is_empty() {
                gate.first_admitted.notify_one();
            }
            state.admitted.push(Admitted {
                runtime: runtime.clone(),
                id: id.to_owned(),
                principal: self.0.principal.clone(),
            });
        }
        gate.publish(&state);
    }
}

impl Drop for SlotInner {
    fn drop(&mut self) {
        if self.held.swap(false, Ordering::AcqRel) {
            let mut state = self.gate.lock();
            state.reserved = state.reserved.saturating_sub(1);
            release(&mut state.by_principal, self.principal.as_ref());
            self.gate.publish(&state);
        }
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
    /// What the edge counts, read by `/metrics`.
    pub(crate) stats: Arc<EdgeStats>,
    /// The runtime the router (handlers, turns) runs on; the edge runs
    /// on its own (see [`spawn`]).
    pub(crate) main: tokio::runtime::Handle,
    /// Refuses new turns before routing while the gate is full.
    pub(crate) early: Option<EarlyRefusal>,
}

/// The turn routes the edge refuses itself, before routing, while the
/// turn gate is full: `POST /v1/session` and `POST /v1/session/:id` under
/// each agent's prefix. The router's handlers still admit (or refuse)
/// what is let through, and refuse the other turn routes (AG-UI, OpenAI,
/// A2A, forks) and the per-principal bounds, which need the caller.
#[derive(Clone)]
pub(crate) struct EarlyRefusal {
    pub(crate) gate: Arc<TurnGate>,
    /// Each agent's route prefix: `""` in single mode, `/<slug>` each.
    pub(crate) prefixes: Vec<String>,
    /// Counts an answered request as the HTTP layer does (route, status,
    /// seconds), for the requests that never reach it.
    pub(crate) count: CountHttp,
    /// The largest body the edge reads itself before reserving the turn's
    /// slot (the JSON body limit); a longer or unsized one (a multipart
    /// upload, a chunked body) is routed as it comes and its handler
    /// takes the slot.
    pub(crate) body_cap: u64,
}

/// What the edge does with a request before routing it.
enum Early<'a> {
    /// Not a turn the edge handles: routed as it is.
    Route,
    /// A turn refused now (the answer).
    Refused(Response),
    /// A turn with room now, whose body (at most `body_cap`) the edge reads
    /// before reserving its slot; the refusal that said so and the route
    /// template.
    Reserve(&'a EarlyRefusal, String),
}

/// Counts an answered HTTP request: route, status, seconds.
pub(crate) type CountHttp = Arc<dyn Fn(&str, u16, f64) + Send + Sync>;

impl std::fmt::Debug for EarlyRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EarlyRefusal")
            .field("prefixes", &self.prefixes)
            .finish_non_exhaustive()
    }
}

impl EarlyRefusal {
    /// The route template of a turn-starting request (as the HTTP
    /// metrics name it), else `None`.
    fn route_of(&self, method: &axum::http::Method, path: &str) -> Option<String> {
        if method != axum::http::Method::POST {
            return None;
        }
        self.prefixes.iter().find_map(|prefix| {
            let rest = path.strip_prefix(prefix.as_str())?;
            if rest == "/v1/session" {
                return Some(format!("{prefix}/v1/session"));
            }
            let id = rest.strip_prefix("/v1/session/")?;
            (!id.is_empty() && !id.contains('/')).then(|| format!("{prefix}/v1/session/{{id}}"))
        })
    }

    /// What to do with `req` ([`Early`]): a turn is refused at once while
    /// the gate is full (counted in `/metrics` as shed and as an HTTP
    /// answer), else its body is read here when it is sized and small.
    fn check<B: hyper::body::Body>(&self, req: &hyper::Request<B>, head: Instant) -> Early<'_> {
        let Some(route) = self.route_of(req.method(), req.uri().path()) else {
            return Early::Route;
        };
        if let Some(refused) = self.gate.refuse_early() {
            return Early::Refused(self.answer(&route, refused, head));
        }
        match req.body().size_hint().exact() {
            Some(n) if n <= self.body_cap => Early::Reserve(self, route),
            _ => Early::Route,
        }
    }

    /// `refused` as answered on the edge, counted as an HTTP answer.
    fn answer(&self, route: &str, refused: ApiError, head: Instant) -> Response {
        let response = refused.into_response();
        (self.count)(
            route,
            response.status().as_u16(),
            head.elapsed().as_secs_f64(),
        );
        response
    }
}

/// What the edge counts since start.
#[derive(Debug, Default)]
pub(crate) struct EdgeStats {
    /// Connections open now.
    pub(crate) open: AtomicU64,
    /// Of those, the connections served on the main runtime while an
    /// edge runtime exists ([`Pressure`]).
    pub(crate) open_on_main: AtomicU64,
    /// Connections closed after an answer to be served on the other
    /// runtime ([`Pressure`]).
    pub(crate) moved: AtomicU64,
    /// Whether the main runtime is calm enough to serve new connections.
    pub(crate) pressure: Pressure,
    /// Connections closed at the cap to admit a new one, that had not
    /// completed a request (a half-sent head or body).
    pub(crate) evicted_incomplete: AtomicU64,
    /// Connections closed at the cap to admit a new one, idle between
    /// requests.
    pub(crate) evicted_idle: AtomicU64,
    /// Requests answered `408` because their body did not arrive in time.
    pub(crate) body_timeouts: AtomicU64,
    /// Turns in flight (reserved or admitted and still active).
    pub(crate) turns_in_flight: AtomicU64,
    /// Turn requests answered `503` `overloaded`.
    pub(crate) turns_shed: AtomicU64,
    /// Requests answered `429` past a fair share.
    pub(crate) limited: Arc<LimitStats>,
    /// File descriptors the process holds (sampled; 0 where they cannot be
    /// counted).
    pub(crate) fds_open: AtomicU64,
    /// The soft `RLIMIT_NOFILE` when sampled (0 where there is none).
    pub(crate) fds_limit: AtomicU64,
    /// Turn requests answered `503` `overloaded` for want of descriptor
    /// headroom (also counted in `turns_shed`).
    pub(crate) turns_shed_fds: AtomicU64,
    /// The histograms of `/metrics` the edge observes into (set when the
    /// telemetry reads these stats).
    pub(crate) timings: std::sync::OnceLock<EdgeTimings>,
    /// The edge's own runtime, once it runs (its tasks count in
    /// `agentkit_tasks_alive`).
    pub(crate) runtime: std::sync::OnceLock<tokio::runtime::Handle>,
}

/// The edge's timings in `/metrics`, observed where they happen (the
/// connections and the runtimes).
#[derive(Debug, Clone)]
pub(crate) struct EdgeTimings {
    /// From a request's head read to its `503`/`429` handed to the
    /// connection.
    pub(crate) shed_answer: Histogram,
    /// How late a task woken by a timer is polled, by runtime.
    pub(crate) wake_delay: Family<Vec<(String, String)>, Histogram>,
}

impl EdgeTimings {
    /// The wake delay of runtime `name` (`main`, `edge`).
    fn wake_delay(&self, name: &str) -> Histogram {
        self.wake_delay
            .get_or_create(&vec![("runtime".to_owned(), name.to_owned())])
            .clone()
    }
}

impl EdgeStats {
    /// A request answered `503`/`429`, `since` its head was read.
    fn shed_answered(&self, since: Instant) {
        if let Some(t) = self.timings.get() {
            t.shed_answer.observe(since.elapsed().as_secs_f64());
        }
    }
}

/// Samples how late a task woken by a timer is polled on the runtime this
/// runs on (named `name` in `/metrics`), until `shutdown`: the wait in the
/// runtime's queue that any woken task (a connection with a request to
/// read) has too. Every 10 ms while the host has a connection open or a
/// turn in flight; every second while it has neither, so that an idle
/// host's threads sleep ([`idle`]).
pub(crate) async fn sample_wake_delay(
    stats: Arc<EdgeStats>,
    name: &'static str,
    shutdown: CancellationToken,
) {
    loop {
        let period = if idle(&stats) {
            IDLE_PERIOD
        } else {
            Duration::from_millis(10)
        };
        let asked = tokio::time::Instant::now() + period;
        tokio::select! {
            () = tokio::time::sleep_until(asked) => {}
            () = shutdown.cancelled() => return,
        }
        let late = tokio::time::Instant::now().saturating_duration_since(asked);
        if let Some(t) = stats.timings.get() {
            t.wake_delay(name).observe(late.as_secs_f64());
        }
    }
}

/// How often the samplers look while the host is [`idle`].
const IDLE_PERIOD: Duration = Duration::from_secs(1);

/// No connection open and no turn in flight: the samplers slow down, and
/// the idle host wakes a few times a second, not hundreds (measured before:
/// 157 wake-ups a second on the main runtime's worker and 106 on the
/// edge's, and the blocking pool's threads kept alive for good by the
/// descriptor count's four hand-offs a second, each thread keeping its
/// allocator cache).
fn idle(stats: &EdgeStats) -> bool {
    stats.open.load(Ordering::Relaxed) == 0 && stats.turns_in_flight.load(Ordering::Relaxed) == 0
}

/// Below this many open descriptors, [`open_fds`] lists them on the
/// calling worker (a few microseconds); from it on, on the blocking pool.
const FDS_LISTED_INLINE: u64 = 256;

/// The file descriptors this process holds: the entries of
/// `/proc/self/fd` (`/dev/fd` elsewhere), less the one the listing opens;
/// `None` where neither can be read.
fn open_fds() -> Option<u64> {
    let dir = std::fs::read_dir("/proc/self/fd")
        .or_else(|_| std::fs::read_dir("/dev/fd"))
        .ok()?;
    Some((dir.count() as u64).saturating_sub(1))
}

/// The descriptor headroom: the configured one, else a sixteenth of
/// `limit`, at least 32.
fn fd_headroom(configured: Option<u64>, limit: u64) -> u64 {
    configured.unwrap_or((limit / 16).max(32))
}

/// Counts the process's open descriptors and reads its limit until
/// `shutdown`, for the turn gate and `/metrics`: every 50 ms once the
/// count is past a quarter of the limit, every 250 ms below it (listing
/// `/proc/self/fd` costs in proportion to what is open). Past
/// [`FDS_LISTED_INLINE`] descriptors the listing runs on the blocking pool
/// so a long one never holds up a worker; below, on the worker, so that
/// the pool's threads are not woken four times a second and an idle
/// host's retire (tokio lets one go after 10 s without work).
pub(crate) async fn sample_descriptors(stats: Arc<EdgeStats>, shutdown: CancellationToken) {
    let mut open = 0;
    loop {
        let limit = soft_fd_limit().filter(|l| *l < 1 << 40).unwrap_or(0);
        open = if open < FDS_LISTED_INLINE {
            open_fds()
        } else {
            tokio::task::spawn_blocking(open_fds).await.ok().flatten()
        }
        .unwrap_or(0);
        stats.fds_limit.store(limit, Ordering::Relaxed);
        stats.fds_open.store(open, Ordering::Relaxed);
        let every = if limit > 0 && open.saturating_mul(4) > limit {
            Duration::from_millis(50)
        } else {
            Duration::from_millis(250)
        };
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = shutdown.cancelled() => return,
        }
    }
}

/// The threads of the edge's own runtime: as configured, else a quarter
/// of the cores the process may use, at least one (0: the edge runs on
/// the main runtime). One core too: the operating system then shares it
/// between the edge's thread and the turns', so past saturation a
/// refusal is still answered at once (measured on one core: shed answers'
/// p99 5 ms as the client saw it, against 73–79 ms with the edge on the
/// main runtime, and a third more turns admitted); below it the edge's
/// thread is idle, its connections served on the main runtime
/// ([`Pressure`]).
fn edge_threads(configured: Option<usize>) -> usize {
    configured.unwrap_or_else(|| {
        (std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get) / 4).max(1)
    })
}

/// Runs the edge ([`run`]) with a runtime of its own, on threads of its
/// own (`agentkit-edge`), so that while the host sheds turns the operating
/// system schedules the accept loop and the connections beside the busy
/// runtime of the turns: a request is read, and a refusal answered,
/// without waiting behind the turns' tasks ([`Pressure`]: while the host
/// is calm they run on `edge.main`). Each request is handed to
/// `edge.main` to be routed.
/// Answers a task on the calling runtime that ends with the edge; should
/// that runtime go away first (it is dropped without
/// [`ServeHandle::close`](crate::ServeHandle::close)), the edge closes its
/// connections and ends.
pub(crate) fn spawn(
    listener: TcpListener,
    edge: Edge,
) -> io::Result<tokio::task::JoinHandle<io::Result<()>>> {
    let threads = edge_threads(edge.options.edge_threads);
    if threads == 0 {
        // On the calling (main) runtime: requests are still routed as
        // tasks of their own, so a panicking handler gets its `500`.
        let listener = listener.into_std()?;
        return Ok(tokio::spawn(run(listener, edge, CancellationToken::new())));
    }
    let listener = listener.into_std()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("agentkit-edge")
        .enable_all()
        .build()?;
    let _ = edge.stats.runtime.set(runtime.handle().clone());
    let (done, ended) = tokio::sync::oneshot::channel();
    let orphaned = CancellationToken::new();
    let watched = orphaned.clone();
    std::thread::Builder::new()
        .name("agentkit-edge".to_owned())
        .spawn(move || {
            let result = runtime.block_on(run(listener, edge, watched));
            // Connections still open (forced closed) end with the runtime.
            runtime.shutdown_timeout(Duration::from_secs(1));
            let _ = done.send(result);
        })?;
    Ok(tokio::spawn(async move {
        // Dropped with the calling runtime: the edge then ends.
        let _orphaned = orphaned.drop_guard();
        ended.await.unwrap_or_else(|_| {
            Err(io::Error::other(
                "the edge's thread ended without an answer",
            ))
        })
    }))
}

/// Accepts connections until `shutdown`, then lets open ones finish their
/// current request (streams end on shutdown) within the grace period, and
/// drops the rest; at once when `orphaned` (the main runtime is gone).
async fn run(
    listener: std::net::TcpListener,
    edge: Edge,
    orphaned: CancellationToken,
) -> io::Result<()> {
    let Edge {
        router,
        options,
        max_connections,
        shutdown,
        grace,
        stats,
        main,
        early: refusal,
    } = edge;
    if stats.runtime.get().is_some() {
        tokio::spawn(sample_wake_delay(stats.clone(), "edge", shutdown.clone()));
    }
    // Shutdown, or the main runtime gone.
    let stop = {
        let stop = CancellationToken::new();
        let (shutdown, orphaned, token) = (shutdown.clone(), orphaned.clone(), stop.clone());
        tokio::spawn(async move {
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = orphaned.cancelled() => {}
            }
            token.cancel();
        });
        stop
    };
    let graceful = Arc::new(hyper_util::server::graceful::GracefulShutdown::new());
    let force_close = CancellationToken::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout)
        .keep_alive(true);
    let body_bounds = BodyBounds {
        timeout: options.body_read_timeout,
        min_rate: options.body_min_rate,
    };
    let edge_runtime = stats.runtime.get().cloned();
    let acceptor = Arc::new(Acceptor {
        serving: Arc::new(Serving {
            router,
            stats: stats.clone(),
            main: main.clone(),
            refusal,
            http,
            body_bounds,
            write_stall_timeout: options.write_stall_timeout,
            force_close: force_close.clone(),
        }),
        permits: Arc::new(Semaphore::new(max_connections)),
        conns: Arc::new(Conns::default()),
        graceful: graceful.clone(),
        stop,
        max_connections,
        stats,
        main,
        edge: edge_runtime,
    });
    let (ended, loop_ended) = tokio::sync::oneshot::channel();
    let side = acceptor.side_for_new();
    acceptor.accept_on(side, listener, Warnings::default(), ended);
    drop(acceptor);
    // The loop ended at `stop`, or went with a runtime that was dropped.
    let _ = loop_ended.await;
    if orphaned.is_cancelled() {
        force_close.cancel();
        return Ok(());
    }
    // Every watcher is made by the loop, which has ended: none is made
    // after the shutdown starts.
    let Ok(graceful) = Arc::try_unwrap(graceful) else {
        force_close.cancel();
        return Ok(());
    };
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

/// The accept loop's warnings, each logged at most every 10 s.
struct Warnings {
    cap: Every,
    accept: Every,
}

impl Default for Warnings {
    fn default() -> Self {
        Warnings {
            cap: Every::new(Duration::from_secs(10)),
            accept: Every::new(Duration::from_secs(10)),
        }
    }
}

/// What the accept loop needs. The loop runs where new connections are
/// served ([`Pressure`]): on the main runtime while the host is calm, so
/// that accepting a connection costs no handoff between threads either,
/// and on the edge's while it sheds turns; it moves (its listener with it)
/// after the first connection it places on the other side.
struct Acceptor {
    serving: Arc<Serving>,
    permits: Arc<Semaphore>,
    conns: Arc<Conns>,
    /// Taken back by [`run`] once the loop has ended, to shut down.
    graceful: Arc<hyper_util::server::graceful::GracefulShutdown>,
    /// Shutdown, or the main runtime gone.
    stop: CancellationToken,
    max_connections: usize,
    stats: Arc<EdgeStats>,
    main: tokio::runtime::Handle,
    /// The edge's own runtime; `None` with `--edge-threads 0`.
    edge: Option<tokio::runtime::Handle>,
}

/// The accept loop's end, sent when it stops.
type LoopEnded = tokio::sync::oneshot::Sender<()>;

impl Acceptor {
    /// Where a new connection is served.
    fn side_for_new(&self) -> Side {
        if self.edge.is_none() {
            Side::Only
        } else if self.stats.pressure.calm() {
            Side::Main
        } else {
            Side::Edge
        }
    }

    fn runtime(&self, side: Side) -> &tokio::runtime::Handle {
        match (side, &self.edge) {
            (Side::Edge, Some(edge)) => edge,
            _ => &self.main,
        }
    }

    /// Runs the accept loop on `side`'s runtime, `listener` registered
    /// with it.
    fn accept_on(
        self: &Arc<Self>,
        side: Side,
        listener: std::net::TcpListener,
        warnings: Warnings,
        ended: LoopEnded,
    ) {
        let acceptor = self.clone();
        let accepting: Pin<Box<dyn std::future::Future<Output = ()> + Send>> = Box::pin(
            async move {
                match TcpListener::from_std(listener) {
                    Ok(listener) => acceptor.accept(side, listener, warnings, ended).await,
                    Err(e) => {
                        tracing::error!(error = %e, "cannot accept connections on this runtime; the edge stops")
                    }
                }
            },
        );
        drop(self.runtime(side).spawn(accepting));
    }

    /// Serves the connection on `side`'s runtime, its socket registered
    /// with it; `here`: the runtime this runs on.
    fn serve_on(
        &self,
        here: Side,
        side: Side,
        tcp: tokio::net::TcpStream,
        peer: std::net::SocketAddr,
        slot: Arc<Slot>,
        held: Held,
    ) {
        let serving = self.serving.clone();
        let watcher = self.graceful.watcher();
        if side == here {
            tokio::spawn(serving.serve(tcp, peer, slot, side, watcher, held));
            return;
        }
        match tcp.into_std() {
            Ok(tcp) => drop(self.runtime(side).spawn(async move {
                match tokio::net::TcpStream::from_std(tcp) {
                    Ok(tcp) => serving.serve(tcp, peer, slot, side, watcher, held).await,
                    Err(e) => {
                        tracing::debug!(%peer, error = %e, "cannot serve a connection on this runtime");
                    }
                }
            })),
            Err(e) => {
                tracing::debug!(%peer, error = %e, "cannot move a connection to another runtime");
            }
        }
    }

    /// Accepts connections on `side` until `stop`, or until it has placed
    /// one on the other side, where it goes on.
    async fn accept(
        self: Arc<Self>,
        side: Side,
        listener: TcpListener,
        mut warnings: Warnings,
        ended: LoopEnded,
    ) {
        let Acceptor {
            permits,
            conns,
            stop,
            max_connections,
            stats,
            ..
        } = &*self;
        let max_connections = *max_connections;
        'accept: loop {
            // Taken before accepting when there is one, so that below the cap
            // a connection is never held without its slot.
            let early = permits.clone().try_acquire_owned().ok();
            let (tcp, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(c) => c,
                    Err(e) if is_connection_error(&e) => continue,
                    Err(e) => {
                        // EMFILE, ENFILE, ENOBUFS: retrying at once would spin.
                        // A connection is waiting: make room for it as at the cap.
                        let evicted = conns.evict_one(stats);
                        if let Some(suppressed) = warnings.accept.due() {
                            tracing::warn!(error = %e, suppressed, evicted = evicted.is_some(), "cannot accept connections; retrying in 100 ms");
                        }
                        drop(early);
                        tokio::select! {
                            () = tokio::time::sleep(Duration::from_millis(100)) => continue,
                            () = stop.cancelled() => break,
                        }
                    }
                },
                () = stop.cancelled() => break,
            };
            let permit = match early.or_else(|| permits.clone().try_acquire_owned().ok()) {
                Some(p) => p,
                // At the cap with a connection to admit: close one that holds
                // its slot without using it, and take the slot it gives back.
                None => {
                    let mut warned = false;
                    loop {
                        let evicted = conns.evict_one(stats);
                        if !warned {
                            warned = true;
                            if let Some(suppressed) = warnings.cap.due() {
                                match evicted {
                                    Some(kind) => tracing::warn!(
                                        max_connections,
                                        suppressed,
                                        closed = kind.as_str(),
                                        "connection limit reached: closing the oldest connection that has not completed a request, else the longest idle, to admit a new one (raise the file-descriptor limit or the connection cap)"
                                    ),
                                    None => tracing::warn!(
                                        max_connections,
                                        suppressed,
                                        "connection limit reached and every connection is busy with a request: new connections wait until one ends (raise the file-descriptor limit or the connection cap)"
                                    ),
                                }
                            }
                        }
                        // An evicted connection gives its slot back as soon as
                        // its task sees the eviction; without one, a busy
                        // connection may turn idle and be evicted next time.
                        let recheck = match evicted {
                            Some(_) => Duration::from_secs(1),
                            None => Duration::from_millis(100),
                        };
                        tokio::select! {
                            p = permits.clone().acquire_owned() => match p {
                                Ok(p) => break p,
                                Err(_) => break 'accept,
                            },
                            () = tokio::time::sleep(recheck) => {}
                            () = stop.cancelled() => break 'accept,
                        }
                    }
                }
            };
            // Events are small writes that must leave at once: without NODELAY,
            // Nagle's algorithm holds the first streamed line until the client's
            // delayed ACK (about 40 ms on a keep-alive connection).
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!(error = %e, "cannot set TCP_NODELAY");
            }
            let slot = conns.open();
            let target = self.side_for_new();
            let held = Held::new(conns, stats, slot.id, permit, target);
            self.serve_on(side, target, tcp, peer, slot, held);
            // The loop follows the connections to the other side.
            if target != side {
                match listener.into_std() {
                    Ok(listener) => {
                        self.accept_on(target, listener, warnings, ended);
                        return;
                    }
                    Err(e) => {
                        // The listener went with the failure: the edge
                        // stops, and `run` shuts it down.
                        tracing::error!(error = %e, "cannot move the accept loop to another runtime; the edge stops");
                        return;
                    }
                }
            }
        }
        drop(listener);
        // The graceful shutdown is `run`'s alone again before it hears.
        drop(self);
        let _ = ended.send(());
    }
}

/// When the host last shed a turn (its gate full, or short of
/// descriptors) or admitted one into a gate then half full. Until then,
/// and again once neither has happened for [`CALM_AFTER`], new
/// connections are served on the main runtime, which
/// saves the handoff between threads that each request and each streamed
/// frame otherwise costs (on a host confined to one core, about a tenth of
/// a text turn's CPU); while it sheds they are served on the edge's
/// runtime, so that a refusal is answered without waiting behind the
/// turns. Only refusals need that: an admitted request is handled on the
/// main runtime wherever its connection is read. A connection left on the
/// other side is closed after its next answer (`Connection: close`), and
/// the client's next connection is placed anew.
#[derive(Debug, Default)]
pub(crate) struct Pressure {
    /// Milliseconds since [`EPOCH`] plus one at the last sign of pressure;
    /// 0: none yet.
    last: AtomicU64,
}

/// How long the host must shed no turn (nor fill half its gate) for new
/// connections to be served
/// on the main runtime again: long enough that a host shedding in bursts
/// keeps its connections on the edge rather than moving them at each.
const CALM_AFTER: Duration = Duration::from_secs(10);

/// The origin of [`Pressure`]'s clock.
static EPOCH: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);

impl Pressure {
    fn now() -> u64 {
        u64::try_from(EPOCH.elapsed().as_millis())
            .unwrap_or(u64::MAX - 1)
            .saturating_add(1)
    }

    /// A turn was shed now, or the gate is half full.
    pub(crate) fn pressed(&self) {
        self.last.store(Self::now(), Ordering::Relaxed);
    }

    /// No turn shed, nor the gate half full, for [`CALM_AFTER`].
    pub(crate) fn calm(&self) -> bool {
        let last = self.last.load(Ordering::Relaxed);
        last == 0 || Self::now().saturating_sub(last) >= CALM_AFTER.as_millis() as u64
    }
}

/// Which runtime serves a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// The edge's own: the host was shedding turns (or near it) when it
    /// came.
    Edge,
    /// The main runtime: the host was calm when it came.
    Main,
    /// The main runtime, the edge having none of its own
    /// (`--edge-threads 0`): connections never move.
    Only,
}

impl Side {
    /// Whether a connection here should move (be closed after its answer).
    fn should_move(self, stats: &EdgeStats) -> bool {
        match self {
            Side::Only => false,
            Side::Main => !stats.pressure.calm(),
            Side::Edge => stats.pressure.calm(),
        }
    }
}

/// What serving a connection needs, shared by the edge's connections.
struct Serving {
    router: Router,
    stats: Arc<EdgeStats>,
    main: tokio::runtime::Handle,
    refusal: Option<EarlyRefusal>,
    http: hyper::server::conn::http1::Builder,
    body_bounds: BodyBounds,
    write_stall_timeout: Duration,
    force_close: CancellationToken,
}

/// An open connection's place at the edge, given back when it is dropped
/// (its task ended, or was dropped with its runtime).
struct Held {
    conns: Arc<Conns>,
    stats: Arc<EdgeStats>,
    id: u64,
    side: Side,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Held {
    fn new(
        conns: &Arc<Conns>,
        stats: &Arc<EdgeStats>,
        id: u64,
        permit: tokio::sync::OwnedSemaphorePermit,
        side: Side,
    ) -> Held {
        stats.open.fetch_add(1, Ordering::Relaxed);
        if side == Side::Main {
            stats.open_on_main.fetch_add(1, Ordering::Relaxed);
        }
        Held {
            conns: conns.clone(),
            stats: stats.clone(),
            id,
            side,
            _permit: permit,
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.conns.close(self.id);
        self.stats.open.fetch_sub(1, Ordering::Relaxed);
        if self.side == Side::Main {
            self.stats.open_on_main.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Serving {
    /// Serves one connection until it ends, is closed for room or forced
    /// closed at shutdown.
    async fn serve(
        self: Arc<Self>,
        tcp: tokio::net::TcpStream,
        peer: std::net::SocketAddr,
        slot: Arc<Slot>,
        side: Side,
        watcher: hyper_util::server::graceful::Watcher,
        held: Held,
    ) {
        let socket = Socket {
            tcp,
            evicted: slot.evict.clone(),
        };
        let io = TokioIo::new(StallBound::new(socket, self.write_stall_timeout));
        let service = {
            let slot = slot.clone();
            let serving = self.clone();
            hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                let slot = slot.clone();
                let serving = serving.clone();
                async move {
                    Ok::<_, std::convert::Infallible>(serving.answer(req, peer, slot, side).await)
                }
            })
        };
        let conn = watcher.watch(self.http.serve_connection(io, service));
        tokio::select! {
            result = conn => {
                if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
            }
            () = slot.evict.cancelled() => {
                tracing::debug!(%peer, "connection closed to admit a new one at the cap");
            }
            () = self.force_close.cancelled() => {}
        }
        drop(held);
    }

    /// The answer to one request on a connection served on `side`.
    async fn answer(
        &self,
        req: hyper::Request<Incoming>,
        peer: std::net::SocketAddr,
        slot: Arc<Slot>,
        side: Side,
    ) -> Response {
        let (stats, body_bounds) = (&self.stats, self.body_bounds);
        let head = Instant::now();
        let has_body = !req.body().is_end_stream();
        slot.request_started(has_body);
        // A turn the gate has no room for is refused here, before its body
        // is read or its caller authenticated (an unread body that arrived
        // with the head is drained; a longer one closes the connection
        // after the answer).
        let early = self
            .refusal
            .as_ref()
            .map_or(Early::Route, |r| r.check(&req, head));
        let mut req = match early {
            Early::Refused(response) => {
                drop(req);
                stats.shed_answered(head);
                return self.answered(response, side, slot);
            }
            // A turn with room: its body is read here, under the same
            // bounds, and then its slot reserved, so the excess of a burst
            // is refused here too (reserving before the body would let a
            // slow body hold a slot).
            Early::Reserve(early, route) => {
                match read_and_reserve(early, &route, req, body_bounds, &slot, stats, head).await {
                    Ok(req) => req,
                    Err(response) => return self.answered(response, side, slot),
                }
            }
            Early::Route => req.map(|body| {
                if has_body {
                    axum::body::Body::new(TimedBody::new(body, body_bounds, slot.clone()))
                } else {
                    axum::body::Body::new(body)
                }
            }),
        };
        req.extensions_mut().insert(ConnectInfo(peer));
        // Routed as a task of its own on the main runtime (a panicking
        // handler gets its `500`); dropped (the client gone, the
        // connection closed) it is cancelled there.
        let router = self.router.clone();
        let routed = AbortOnDrop(self.main.spawn(async move {
            let mut router = router;
            tower_service::Service::call(&mut router, req).await
        }));
        let response = match routed.await {
            Ok(Ok(r)) => r,
            Ok(Err(never)) => match never {},
            Err(e) => not_routed(&e),
        };
        if slot.body_timed_out.load(Ordering::Relaxed) {
            stats.body_timeouts.fetch_add(1, Ordering::Relaxed);
            return body_timeout(body_bounds, &slot);
        }
        if matches!(
            response.status(),
            StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS
        ) {
            stats.shed_answered(head);
        }
        self.answered(response, side, slot)
    }

    /// `response` as handed to the connection: its head is out, so a
    /// handler that answers without reading the body is serving it now;
    /// a connection on the side the pressure no longer calls for is closed
    /// after it, to be placed anew by the client's next one.
    fn answered(&self, mut response: Response, side: Side, slot: Arc<Slot>) -> Response {
        if side.should_move(&self.stats) {
            self.stats.moved.fetch_add(1, Ordering::Relaxed);
            response.headers_mut().insert(
                axum::http::header::CONNECTION,
                axum::http::HeaderValue::from_static("close"),
            );
        }
        slot.set(Phase::Busy);
        response.map(|body| axum::body::Body::new(Answer { body, slot }))
    }
}

/// Reads a turn request's body on the edge (under `bounds`), then
/// reserves its slot and passes it on as an [`EarlySlot`]; else the
/// answer: `408` when the body did not arrive in time, `400` when it could
/// not be read, `503` when the gate filled meanwhile.
async fn read_and_reserve(
    early: &EarlyRefusal,
    route: &str,
    req: hyper::Request<Incoming>,
    bounds: BodyBounds,
    slot: &Arc<Slot>,
    stats: &EdgeStats,
    head: Instant,
) -> Result<hyper::Request<axum::body::Body>, Response> {
    let (parts, body) = req.into_parts();
    let timed = TimedBody::new(body, bounds, slot.clone());
    let bytes = match http_body_util::BodyExt::collect(timed).await {
        Ok(collected) => collected.to_bytes(),
        Err(_) if slot.body_timed_out.load(Ordering::Relaxed) => {
            stats.body_timeouts.fetch_add(1, Ordering::Relaxed);
            return Err(body_timeout(bounds, slot));
        }
        Err(e) => {
            return Err(
                ApiError::bad_request(format!("the request body could not be read: {e}"))
                    .into_response(),
            );
        }
    };
    let reserved = match early.gate.reserve_early() {
        Ok(reserved) => reserved,
        Err(refused) => {
            let response = early.answer(route, refused, head);
            stats.shed_answered(head);
            return Err(response);
        }
    };
    let mut req = hyper::Request::from_parts(parts, axum::body::Body::from(bytes));
    req.extensions_mut()
        .insert(EarlySlot(Arc::new(Mutex::new(Some(reserved)))));
    Ok(req)
}

/// A task on another runtime, aborted when this is dropped.
#[derive(Debug)]
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<T> std::future::Future for AbortOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.get_mut().0).poll(cx)
    }
}

/// The answer to a request whose routing task ended without one: its
/// handler panicked (`500`), or the main runtime is shutting down (`503`).
fn not_routed(e: &tokio::task::JoinError) -> Response {
    if e.is_panic() {
        tracing::error!(error = %e, "a request's handler panicked");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            agentkit_protocol::ErrorCode::Internal,
            "the request's handler failed",
        )
        .into_response()
    } else {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            agentkit_protocol::ErrorCode::Overloaded,
            "the server is shutting down",
        )
        .into_response()
    }
}

/// The `408` answered for a body that did not arrive in time; the
/// connection closes after it (the rest of the body is not read).
fn body_timeout(bounds: BodyBounds, slot: &Slot) -> Response {
    let received = slot.body_received.load(Ordering::Relaxed);
    let mut response = ApiError::new(
        StatusCode::REQUEST_TIMEOUT,
        agentkit_protocol::ErrorCode::RequestTimeout,
        format!(
            "the request body did not arrive within {} s plus 1 s per {} bytes ({received} bytes received)",
            bounds.timeout.as_secs_f64(),
            bounds.min_rate
        ),
    )
    .into_response();
    response.headers_mut().insert(
        axum::http::header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    response
}

/// What a connection is doing, for choosing which to close at the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for a request to complete: its head (the first request on
    /// the connection) or its body. First to be closed, oldest first.
    Incomplete,
    /// Serving a request whose head and body arrived (its answer may be a
    /// long stream). Never closed for room.
    Busy,
    /// Between requests on a keep-alive connection. Closed when no
    /// incomplete one is left, longest idle first.
    Idle,
}

/// Why a connection was closed at the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Evicted {
    Incomplete,
    Idle,
}

impl Evicted {
    fn as_str(self) -> &'static str {
        match self {
            Evicted::Incomplete => "incomplete",
            Evicted::Idle => "idle",
        }
    }
}

/// One open connection as the accept loop sees it.
#[derive(Debug)]
struct Slot {
    id: u64,
    /// The phase and when it began.
    phase: Mutex<(Phase, Instant)>,
    /// Cancelled to close the connection for room.
    evict: CancellationToken,
    /// Set when the current request's body ran out of time.
    body_timed_out: AtomicBool,
    /// Bytes of the current request's body received so far.
    body_received: AtomicU64,
}

impl Slot {
    fn set(&self, phase: Phase) {
        if let Ok(mut p) = self.phase.lock() {
            *p = (phase, Instant::now());
        }
    }

    /// A request's head arrived; `has_body`: its body is still to come.
    /// A connection incomplete since it was accepted stays as old as it
    /// is: were its age reset when its head arrives, an attacker's
    /// connection that sent a quick head and then trickles its body would
    /// look younger than a normal client's connection accepted before it
    /// whose head the server has not read yet, and outlive it at the cap.
    fn request_started(&self, has_body: bool) {
        self.body_timed_out.store(false, Ordering::Relaxed);
        self.body_received.store(0, Ordering::Relaxed);
        if has_body {
            if let Ok(mut p) = self.phase.lock()
                && p.0 != Phase::Incomplete
            {
                *p = (Phase::Incomplete, Instant::now());
            }
        } else {
            self.set(Phase::Busy);
        }
    }
}

/// The open connections, for choosing which to close at the cap.
#[derive(Debug, Default)]
struct Conns {
    next_id: AtomicU64,
    open: Mutex<HashMap<u64, Arc<Slot>>>,
}

impl Conns {
    fn open(&self) -> Arc<Slot> {
        let slot = Arc::new(Slot {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            phase: Mutex::new((Phase::Incomplete, Instant::now())),
            evict: CancellationToken::new(),
            body_timed_out: AtomicBool::new(false),
            body_received: AtomicU64::new(0),
        });
        if let Ok(mut open) = self.open.lock() {
            open.insert(slot.id, slot.clone());
        }
        slot
    }

    fn close(&self, id: u64) {
        if let Ok(mut open) = self.open.lock() {
            open.remove(&id);
        }
    }

    /// Closes the oldest incomplete connection, else the longest idle
    /// one; `None` when every connection is busy (or already closing).
    fn evict_one(&self, stats: &EdgeStats) -> Option<Evicted> {
        let open = self.open.lock().ok()?;
        let mut incomplete: Option<(Instant, &Arc<Slot>)> = None;
        let mut idle: Option<(Instant, &Arc<Slot>)> = None;
        for slot in open.values() {
            if slot.evict.is_cancelled() {
                continue;
            }
            let Ok(phase) = slot.phase.lock().map(|p| *p) else {
                continue;
            };
            let oldest = match phase.0 {
                Phase::Incomplete => &mut incomplete,
                Phase::Idle => &mut idle,
                Phase::Busy => continue,
            };
            if oldest.is_none_or(|(since, _)| phase.1 < since) {
                *oldest = Some((phase.1, slot));
            }
        }
        let (kind, slot, counter) = match (incomplete, idle) {
            (Some((_, slot)), _) => (Evicted::Incomplete, slot, &stats.evicted_incomplete),
            (None, Some((_, slot))) => (Evicted::Idle, slot, &stats.evicted_idle),
            (None, None) => return None,
        };
        slot.evict.cancel();
        counter.fetch_add(1, Ordering::Relaxed);
        Some(kind)
    }
}

/// How long a request body may take: `timeout` plus one second per
/// `min_rate` bytes received.
#[derive(Debug, Clone, Copy)]
struct BodyBounds {
    timeout: Duration,
    min_rate: u64,
}

impl BodyBounds {
    fn allowed(self, received: u64) -> Duration {
        match self.min_rate {
            0 => self.timeout,
            rate => self.timeout + Duration::from_secs_f64(received as f64 / rate as f64),
        }
    }
}

/// A request body that fails once it has not arrived within its
/// [`BodyBounds`], and moves its connection to [`Phase::Busy`] when it
/// has.
#[derive(Debug)]
struct TimedBody {
    body: Incoming,
    bounds: BodyBounds,
    start: tokio::time::Instant,
    received: u64,
    deadline: Pin<Box<tokio::time::Sleep>>,
    slot: Arc<Slot>,
    done: bool,
}

impl TimedBody {
    fn new(body: Incoming, bounds: BodyBounds, slot: Arc<Slot>) -> TimedBody {
        let start = tokio::time::Instant::now();
        TimedBody {
            body,
            bounds,
            start,
            received: 0,
            deadline: Box::pin(tokio::time::sleep_until(start + bounds.allowed(0))),
            slot,
            done: false,
        }
    }

    fn finish(&mut self) {
        if !self.done {
            self.done = true;
            self.slot.set(Phase::Busy);
        }
    }
}

/// The error a [`TimedBody`] fails with.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive in time")]
struct BodyTimedOut;

impl hyper::body::Body for TimedBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.received += data.len() as u64;
                    this.slot
                        .body_received
                        .store(this.received, Ordering::Relaxed);
                    if this.bounds.min_rate > 0 {
                        let deadline = this.start + this.bounds.allowed(this.received);
                        this.deadline.as_mut().reset(deadline);
                    }
                }
                if this.body.is_end_stream() {
                    this.finish();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(None) => {
                this.finish();
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    this.slot.body_timed_out.store(true, Ordering::Relaxed);
                    this.done = true;
                    Poll::Ready(Some(Err(BodyTimedOut.into())))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// An answer's body that moves its connection to [`Phase::Idle`] once it
/// is sent (or dropped).
#[derive(Debug)]
struct Answer {
    body: axum::body::Body,
    slot: Arc<Slot>,
}

impl Drop for Answer {
    fn drop(&mut self) {
        self.slot.set(Phase::Idle);
    }
}

impl hyper::body::Body for Answer {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
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

/// A connection's socket: closed with a reset (`SO_LINGER` 0, so no FIN
/// exchange and no TIME_WAIT entry) when the edge closed it for room, as
/// nginx's `reset_timedout_connection` does. Such a connection owes its
/// client nothing (its request was incomplete, or it idled between
/// requests); a slowloris attacker reconnecting thousands of times a
/// second otherwise leaves as many sockets in TIME_WAIT for a minute.
#[derive(Debug)]
struct Socket {
    tcp: tokio::net::TcpStream,
    evicted: CancellationToken,
}

impl Drop for Socket {
    fn drop(&mut self) {
        if self.evicted.is_cancelled()
            && let Err(e) = self.tcp.set_zero_linger()
        {
            tracing::debug!(error = %e, "cannot reset an evicted connection");
        }
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
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

    fn user(id: &str) -> agentkit_runtime::Owner {
        agentkit_runtime::Owner {
            principal_id: id.to_owned(),
            principal_type: "user".to_owned(),
            ..agentkit_runtime::Owner::default()
        }
    }

    fn in_flight(gate: &TurnGate) -> usize {
        let state = gate.lock();
        state.reserved + state.admitted.len()
    }

    #[test]
    fn a_slot_the_edge_reserved_counts_once_and_takes_its_principal_in_the_handler()
    -> Result<(), String> {
        let options = EdgeOptions {
            max_turns: Some(2),
            max_turns_per_principal: Some(1),
            ..EdgeOptions::default()
        };
        let gate = TurnGate::new(&options, Arc::new(EdgeStats::default()));
        let first = gate.reserve_early().map_err(|e| e.message)?;
        let second = gate.reserve_early().map_err(|e| e.message)?;
        assert_eq!(in_flight(&gate), 2);
        // Full: the edge refuses the third before its caller is known.
        assert!(gate.reserve_early().is_err());
        assert!(gate.refuse_early().is_some());
        // The handler completes the first for `ann`: still one slot.
        let first = gate
            .admit_reserved(first, "a", &user("ann"))
            .map_err(|e| e.message)?;
        assert_eq!(in_flight(&gate), 2);
        assert_eq!(
            gate.lock()
                .by_principal
                .get(&("a".to_owned(), "ann".to_owned())),
            Some(&1)
        );
        // `ann` again, past her bound: 429, and the reservation is given back.
        let Err(refused) = gate.admit_reserved(second, "a", &user("ann")) else {
            return Err("ann's second turn was admitted past her bound".to_owned());
        };
        assert_eq!(
            refused.into_response().status(),
            StatusCode::TOO_MANY_REQUESTS
        );
        assert_eq!(in_flight(&gate), 1);
        // Dropping a completed slot gives back the slot and the principal's.
        drop(first);
        assert_eq!(in_flight(&gate), 0);
        assert!(gate.lock().by_principal.is_empty());
        // An unclaimed reservation (the request refused before its
        // handler took it) is given back when its extension goes.
        let early = EarlySlot(Arc::new(Mutex::new(Some(
            gate.reserve_early().map_err(|e| e.message)?,
        ))));
        let copy = early.clone();
        assert_eq!(in_flight(&gate), 1);
        drop(early);
        drop(copy);
        assert_eq!(in_flight(&gate), 0);
        Ok(())
    }
}
