//! The Prometheus families of `GET /metrics`, fed from the same events
//! the spans come from (turns, steps, tokens, tools, approvals, active
//! sessions) and from the HTTP layer (requests by route and status); the
//! open log handles are read at scrape time. Counters count since the process started.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use agentkit_protocol::{Event, EventData, Usage};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::spans::nanos;
use crate::serve::edge::EdgeTimings;

type Labels = Vec<(String, String)>;

/// The most turns and parked calls remembered per agent (for their
/// latencies); beyond it new ones are counted but not timed.
const MAX_IN_FLIGHT: usize = 10_000;

/// Latency buckets, in seconds: 5 ms to about 5 min.
const BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

fn histograms() -> Family<Labels, Histogram> {
    Family::new_with_constructor(|| Histogram::new(BUCKETS.iter().copied()))
}

/// Short-latency buckets, in seconds: 100 µs to 2.5 s, for the edge's
/// refusals and the runtimes' wake delay (whose targets are milliseconds).
const FINE_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

fn fine_histogram() -> Histogram {
    Histogram::new(FINE_BUCKETS.iter().copied())
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// The event types [`Metrics::observe`] reads.
fn counted(t: agentkit_protocol::EventType) -> bool {
    use agentkit_protocol::EventType as T;
    matches!(
        t,
        T::TurnStarted
            | T::TurnCompleted
            | T::TurnFailed
            | T::SessionWaiting
            | T::SessionCompleted
            | T::SessionFailed
            | T::StepCompleted
            | T::ActionResult
            | T::ActionApprovalRequested
            | T::ActionApprovalResolved
    )
}

/// Every family, and what the event readers remember between events.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    turns_started: Family<Labels, Counter>,
    turns_completed: Family<Labels, Counter>,
    turns_failed: Family<Labels, Counter>,
    turn_duration: Family<Labels, Histogram>,
    step_duration: Family<Labels, Histogram>,
    tokens: Family<Labels, Counter>,
    cost: Family<Labels, Counter<f64>>,
    tool_calls: Family<Labels, Counter>,
    tool_errors: Family<Labels, Counter>,
    approvals_pending: Family<Labels, Gauge>,
    approval_wait: Family<Labels, Histogram>,
    sessions_active: Family<Labels, Gauge>,
    sessions_stored: Family<Labels, Gauge>,
    open_logs: Family<Labels, Gauge>,
    sessions_loaded: Family<Labels, Gauge>,
    index_writes_queued: Family<Labels, Gauge>,
    index_commits: Family<Labels, Counter>,
    mcp_connections: Family<Labels, Gauge>,
    appends: Family<Labels, Counter>,
    append_seconds: Family<Labels, Counter<f64>>,
    fsyncs: Family<Labels, Counter>,
    fsync_seconds: Family<Labels, Counter<f64>>,
    sync_batches: Family<Labels, Counter>,
    journaled_syncs: Family<Labels, Counter>,
    journal_checkpoints: Family<Labels, Counter>,
    schedule_fired: Family<Labels, Counter>,
    schedule_skipped: Family<Labels, Counter>,
    schedule_late: Family<Labels, Counter<f64>>,
    reminder_fired: Family<Labels, Counter>,
    sessions_deleted: Family<Labels, Counter>,
    reminder_late: Family<Labels, Counter<f64>>,
    deliveries: Family<Labels, Counter>,
    duplicates: Family<Labels, Counter>,
    http_requests: Family<Labels, Counter>,
    http_duration: Family<Labels, Histogram>,
    connections_open: Gauge,
    connections_on_main: Gauge,
    connections_moved: Counter,
    connections_evicted: Family<Labels, Counter>,
    body_timeouts: Counter,
    turns_in_flight: Gauge,
    turns_shed: Counter,
    edge_timings: EdgeTimings,
    requests_limited: Family<Labels, Counter>,
    open_fds: Gauge,
    max_fds: Gauge,
    turns_shed_fds: Counter,
    tasks_alive: Gauge,
    /// Per agent: open turns (start time), parked calls (park time), and
    /// sessions with a turn running. Bounded by what is in flight.
    state: Mutex<HashMap<String, Flight>>,
}

#[derive(Debug, Default)]
struct Flight {
    turns: HashMap<(String, String), u64>,
    parked: HashMap<(String, String), u64>,
    active: HashSet<String>,
}

impl Metrics {
    pub(crate) fn new() -> Metrics {
        let mut registry = Registry::with_prefix("agentkit");
        let m = Metrics {
            turns_started: Family::default(),
            turns_completed: Family::default(),
            turns_failed: Family::default(),
            turn_duration: histograms(),
            step_duration: histograms(),
            tokens: Family::default(),
            cost: Family::default(),
            tool_calls: Family::default(),
            tool_errors: Family::default(),
            approvals_pending: Family::default(),
            approval_wait: histograms(),
            sessions_active: Family::default(),
            sessions_stored: Family::default(),
            open_logs: Family::default(),
            sessions_loaded: Family::default(),
            index_writes_queued: Family::default(),
            index_commits: Family::default(),
            mcp_connections: Family::default(),
            appends: Family::default(),
            append_seconds: Family::default(),
            fsyncs: Family::default(),
            fsync_seconds: Family::default(),
            sync_batches: Family::default(),
            journaled_syncs: Family::default(),
            journal_checkpoints: Family::default(),
            schedule_fired: Family::default(),
            schedule_skipped: Family::default(),
            schedule_late: Family::default(),
            reminder_fired: Family::default(),
            sessions_deleted: Family::default(),
            reminder_late: Family::default(),
            deliveries: Family::default(),
            duplicates: Family::default(),
            http_requests: Family::default(),
            http_duration: histograms(),
            connections_open: Gauge::default(),
            connections_on_main: Gauge::default(),
            connections_moved: Counter::default(),
            connections_evicted: Family::default(),
            body_timeouts: Counter::default(),
            turns_in_flight: Gauge::default(),
            turns_shed: Counter::default(),
            edge_timings: EdgeTimings {
                shed_answer: fine_histogram(),
                wake_delay: Family::new_with_constructor(fine_histogram),
            },
            requests_limited: Family::default(),
            open_fds: Gauge::default(),
            max_fds: Gauge::default(),
            turns_shed_fds: Counter::default(),
            tasks_alive: Gauge::default(),
            state: Mutex::default(),
            registry: Registry::default(),
        };
        registry.register(
            "turns_started",
            "Turns started, by agent",
            m.turns_started.clone(),
        );
        registry.register(
            "turns_completed",
            "Turns completed, by agent",
            m.turns_completed.clone(),
        );
        registry.register(
            "turns_failed",
            "Turns failed or interrupted, by agent and reason",
            m.turns_failed.clone(),
        );
        registry.register(
            "turn_duration_seconds",
            "Turn latency, turn.started to its end, by agent",
            m.turn_duration.clone(),
        );
        registry.register(
            "step_duration_seconds",
            "Model step latency (tool calls included), by agent",
            m.step_duration.clone(),
        );
        registry.register(
            "tokens",
            "Tokens used by turns, by agent, model and kind (input, output, cache_read, cache_write)",
            m.tokens.clone(),
        );
        registry.register(
            "cost_usd",
            "What turns cost in US dollars (their steps, compactions and subagents, at the models' prices), by agent and model; turns of a model with no known price add nothing",
            m.cost.clone(),
        );
        registry.register(
            "tool_calls",
            "Tool calls, by agent and tool",
            m.tool_calls.clone(),
        );
        registry.register(
            "tool_errors",
            "Tool calls that answered an error, by agent and tool",
            m.tool_errors.clone(),
        );
        registry.register(
            "approvals_pending",
            "Calls parked for approval since this process started, by agent",
            m.approvals_pending.clone(),
        );
        registry.register(
            "approval_wait_seconds",
            "How long parked calls waited for a decision, by agent",
            m.approval_wait.clone(),
        );
        registry.register(
            "sessions_active",
            "Sessions with a turn running, by agent",
            m.sessions_active.clone(),
        );
        registry.register(
            "sessions_stored",
            "Sessions the agent's session index holds (this host's, or the shared database's), by agent",
            m.sessions_stored.clone(),
        );
        registry.register(
            "open_log_handles",
            "Session logs the event store holds open, by agent",
            m.open_logs.clone(),
        );
        registry.register(
            "sessions_loaded",
            "Sessions held in memory, by agent: the most recently used idle ones (512 at most) and those in use",
            m.sessions_loaded.clone(),
        );
        registry.register(
            "index_writes_queued",
            "Writes queued for the state database's writer thread still waiting to run (index rows, bookkeeping), by agent",
            m.index_writes_queued.clone(),
        );
        registry.register(
            "index_commits",
            "Transactions the state database's writer thread committed, each a batch of the writes queued at the time (index rows, bookkeeping), by agent",
            m.index_commits.clone(),
        );
        registry.register(
            "mcp_connections",
            "MCP client connections by agent, connection, transport and state (1 for the current state)",
            m.mcp_connections.clone(),
        );
        registry.register(
            "event_appends",
            "Event log appends (one write of a batch of events), by agent",
            m.appends.clone(),
        );
        registry.register(
            "event_append_seconds",
            "Time spent in event log appends, by agent (divide by the appends for the mean)",
            m.append_seconds.clone(),
        );
        registry.register(
            "event_fsyncs",
            "Event log syncs (durable points), by agent",
            m.fsyncs.clone(),
        );
        registry.register(
            "event_fsync_seconds",
            "Time spent in event log syncs, batching wait included, by agent",
            m.fsync_seconds.clone(),
        );
        registry.register(
            "event_sync_batches",
            "Batches the event log's syncs were served in (group commit across sessions), by agent",
            m.sync_batches.clone(),
        );
        registry.register(
            "event_journaled_syncs",
            "Event log syncs made durable through the journal (one fdatasync per batch), by agent",
            m.journaled_syncs.clone(),
        );
        registry.register(
            "event_journal_checkpoints",
            "Journal segments checkpointed (synced to disk and deleted), by agent",
            m.journal_checkpoints.clone(),
        );
        registry.register(
            "schedule_ticks_fired",
            "Cron ticks fired, by agent",
            m.schedule_fired.clone(),
        );
        registry.register(
            "schedule_ticks_skipped",
            "Cron ticks skipped because the previous run was still going, by agent",
            m.schedule_skipped.clone(),
        );
        registry.register(
            "schedule_lateness_seconds",
            "Summed lateness of fired ticks (tick time to firing), by agent",
            m.schedule_late.clone(),
        );
        registry.register(
            "reminders_fired",
            "Reminders fired, by agent",
            m.reminder_fired.clone(),
        );
        registry.register(
            "sessions_deleted",
            "Sessions deleted, by agent and reason (request, retention, max_sessions)",
            m.sessions_deleted.clone(),
        );
        registry.register(
            "reminder_lateness_seconds",
            "Summed lateness of fired reminders (due time to firing), by agent",
            m.reminder_late.clone(),
        );
        registry.register(
            "channel_deliveries",
            "Requests answered by custom and pack channels, by agent, channel and kind",
            m.deliveries.clone(),
        );
        registry.register(
            "channel_duplicates",
            "Redeliveries a pack recognised and ignored, by agent, channel and kind",
            m.duplicates.clone(),
        );
        registry.register(
            "http_requests",
            "HTTP requests, by route and status",
            m.http_requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "HTTP request latency to the response head, by route",
            m.http_duration.clone(),
        );
        registry.register(
            "http_connections_open",
            "HTTP connections open",
            m.connections_open.clone(),
        );
        registry.register(
            "http_connections_on_main_runtime",
            "HTTP connections open that are served on the turns' runtime, which serves new connections while it is calm (the rest on the edge's own runtime)",
            m.connections_on_main.clone(),
        );
        registry.register(
            "http_connections_moved",
            "HTTP connections closed after an answer to be served on the other runtime (the turns' runtime turned busy, or calm again)",
            m.connections_moved.clone(),
        );
        registry.register(
            "http_connections_evicted",
            "HTTP connections closed at the connection cap to admit a new one, by reason (incomplete: a request head or body still coming; idle: between requests)",
            m.connections_evicted.clone(),
        );
        registry.register(
            "http_body_timeouts",
            "Requests answered 408 because their body did not arrive within the body timeout and rate",
            m.body_timeouts.clone(),
        );
        registry.register(
            "turns_in_flight",
            "Turns in flight on the host (admitted and still active), against the turn bound",
            m.turns_in_flight.clone(),
        );
        registry.register(
            "turns_shed",
            "Turn requests answered 503 overloaded at the turn bound",
            m.turns_shed.clone(),
        );
        registry.register(
            "shed_answer_seconds",
            "Requests answered 503 overloaded or 429 rate_limited: from the request's head read by the edge to the answer handed to its connection",
            m.edge_timings.shed_answer.clone(),
        );
        registry.register(
            "runtime_wake_delay_seconds",
            "How late a task woken by a timer is polled, by runtime (main: turns and handlers; edge: connections): the wait of a woken task in its runtime's queue (sampled every 10 ms; includes up to 1 ms of timer granularity)",
            m.edge_timings.wake_delay.clone(),
        );
        registry.register(
            "process_open_fds",
            "File descriptors the process holds (sampled every 50 ms)",
            m.open_fds.clone(),
        );
        registry.register(
            "process_max_fds",
            "The process's soft file-descriptor limit (RLIMIT_NOFILE)",
            m.max_fds.clone(),
        );
        registry.register(
            "turns_shed_descriptors",
            "Turn requests answered 503 overloaded because the process held more descriptors than its limit less the headroom (--fd-headroom); also in turns_shed",
            m.turns_shed_fds.clone(),
        );
        registry.register(
            "tasks_alive",
            "Tasks alive on the server's async runtimes (the edge's: connections; the main one: turns, handlers, streams, timers)",
            m.tasks_alive.clone(),
        );
        registry.register(
            "requests_limited",
            "Requests answered 429 rate_limited past a fair share, by what was limited (principal, address and channel: a request rate; turns: a principal's turns in flight)",
            m.requests_limited.clone(),
        );
        Metrics { registry, ..m }
    }

    /// The histograms the edge observes into.
    pub(crate) fn edge_timings(&self) -> EdgeTimings {
        self.edge_timings.clone()
    }

    /// The HTTP edge's gauges and counters, read at scrape time.
    pub(crate) fn set_edge(&self, edge: &crate::serve::edge::EdgeStats) {
        use std::sync::atomic::Ordering::Relaxed;
        self.connections_open
            .set(i64::try_from(edge.open.load(Relaxed)).unwrap_or(i64::MAX));
        self.connections_on_main
            .set(i64::try_from(edge.open_on_main.load(Relaxed)).unwrap_or(i64::MAX));
        let moved = edge.moved.load(Relaxed);
        self.connections_moved
            .inc_by(moved.saturating_sub(self.connections_moved.get()));
        for (reason, total) in [
            ("incomplete", edge.evicted_incomplete.load(Relaxed)),
            ("idle", edge.evicted_idle.load(Relaxed)),
        ] {
            let c = self
                .connections_evicted
                .get_or_create(&labels(&[("reason", reason)]));
            c.inc_by(total.saturating_sub(c.get()));
        }
        self.turns_in_flight
            .set(i64::try_from(edge.turns_in_flight.load(Relaxed)).unwrap_or(i64::MAX));
        let shed = edge.turns_shed.load(Relaxed);
        self.turns_shed
            .inc_by(shed.saturating_sub(self.turns_shed.get()));
        self.open_fds
            .set(i64::try_from(edge.fds_open.load(Relaxed)).unwrap_or(i64::MAX));
        self.max_fds
            .set(i64::try_from(edge.fds_limit.load(Relaxed)).unwrap_or(i64::MAX));
        let shed = edge.turns_shed_fds.load(Relaxed);
        self.turns_shed_fds
            .inc_by(shed.saturating_sub(self.turns_shed_fds.get()));
        let limited = &edge.limited;
        for (scope, total) in [
            ("principal", limited.principal.load(Relaxed)),
            ("address", limited.address.load(Relaxed)),
            ("channel", limited.channel.load(Relaxed)),
            ("turns", limited.turns.load(Relaxed)),
        ] {
            let c = self
                .requests_limited
                .get_or_create(&labels(&[("scope", scope)]));
            c.inc_by(total.saturating_sub(c.get()));
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            // The edge's runtime (connections) and this one (the rest).
            let edge_tasks = edge
                .runtime
                .get()
                .map_or(0, |h| h.metrics().num_alive_tasks());
            self.tasks_alive.set(
                i64::try_from(rt.metrics().num_alive_tasks() + edge_tasks).unwrap_or(i64::MAX),
            );
        }
        let total = edge.body_timeouts.load(Relaxed);
        self.body_timeouts
            .inc_by(total.saturating_sub(self.body_timeouts.get()));
    }

    /// Reads one event of agent `agent` (running model `model`).
    pub(crate) fn observe(&self, agent: &str, model: &str, e: &Event) {
        // Deltas are most events and count for nothing here: not parsed.
        if !counted(e.event_type) {
            return;
        }
        let session = e.session_id.as_str().to_owned();
        let at = nanos(&e.at);
        let a = labels(&[("agent", agent)]);
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        let flight = state.entry(agent.to_owned()).or_default();
        let turn = e.turn_id.clone().map(|t| (session.clone(), t));
        match e.payload() {
            EventData::TurnStarted(_) => {
                self.turns_started.get_or_create(&a).inc();
                if let Some(turn) = turn
                    && flight.turns.len() < MAX_IN_FLIGHT
                {
                    flight.turns.insert(turn, at);
                }
                if flight.active.len() < MAX_IN_FLIGHT && flight.active.insert(session) {
                    self.sessions_active.get_or_create(&a).inc();
                }
            }
            EventData::TurnCompleted(c) => {
                self.turns_completed.get_or_create(&a).inc();
                self.turn_ended(flight, &a, turn, at);
                self.count_tokens(agent, model, &c.usage);
                self.count_cost(agent, model, c.cost_usd);
            }
            EventData::TurnFailed(f) => {
                let reason = f.reason.as_deref().unwrap_or("error");
                self.turns_failed
                    .get_or_create(&labels(&[("agent", agent), ("reason", reason)]))
                    .inc();
                self.turn_ended(flight, &a, turn, at);
                if let Some(usage) = &f.usage {
                    self.count_tokens(agent, model, usage);
                }
                self.count_cost(agent, model, f.cost_usd);
            }
            EventData::SessionWaiting
            | EventData::SessionCompleted
            | EventData::SessionFailed(_) => {
                let was_active = flight.active.remove(&session);
                if was_active {
                    self.sessions_active.get_or_create(&a).dec();
                }
            }
            EventData::StepCompleted(s) => {
                self.step_duration
                    .get_or_create(&a)
                    .observe(s.duration_ms as f64 / 1000.0);
            }
            EventData::ActionResult(r) => {
                let l = labels(&[("agent", agent), ("tool", &r.tool_name)]);
                self.tool_calls.get_or_create(&l).inc();
                if r.is_error {
                    self.tool_errors.get_or_create(&l).inc();
                }
            }
            EventData::ApprovalRequested(r) => {
                let new = flight.parked.len() < MAX_IN_FLIGHT
                    && flight.parked.insert((session, r.call_id), at).is_none();
                if new {
                    self.approvals_pending.get_or_create(&a).inc();
                }
            }
            EventData::ApprovalResolved(r) => {
                let parked = flight.parked.remove(&(session, r.call_id));
                if parked.is_some() {
                    self.approvals_pending.get_or_create(&a).dec();
                }
                if let Some(start) = parked.or_else(|| r.requested_at.as_deref().map(nanos)) {
                    self.approval_wait
                        .get_or_create(&a)
                        .observe(at.saturating_sub(start) as f64 / 1e9);
                }
            }
            _ => {}
        }
    }

    fn turn_ended(&self, flight: &mut Flight, a: &Labels, turn: Option<(String, String)>, at: u64) {
        if let Some(start) = turn.and_then(|t| flight.turns.remove(&t)) {
            self.turn_duration
                .get_or_create(a)
                .observe(at.saturating_sub(start) as f64 / 1e9);
        }
    }

    fn count_tokens(&self, agent: &str, model: &str, usage: &Usage) {
        for (kind, n) in [
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
            ("cache_read", usage.cache_read_tokens),
            ("cache_write", usage.cache_write_tokens),
        ] {
            self.tokens
                .get_or_create(&labels(&[
                    ("agent", agent),
                    ("model", model),
                    ("kind", kind),
                ]))
                .inc_by(n);
        }
    }

    fn count_cost(&self, agent: &str, model: &str, cost: Option<f64>) {
        if let Some(usd) = cost.filter(|c| *c > 0.0) {
            self.cost
                .get_or_create(&labels(&[("agent", agent), ("model", model)]))
                .inc_by(usd);
        }
    }

    /// One request a channel answered.
    pub(crate) fn delivery(&self, agent: &str, channel: &str, kind: &str, duplicate: bool) {
        let l = labels(&[("agent", agent), ("channel", channel), ("kind", kind)]);
        self.deliveries.get_or_create(&l).inc();
        if duplicate {
            self.duplicates.get_or_create(&l).inc();
        }
    }

    /// One answered HTTP request.
    pub(crate) fn http(&self, route: &str, status: u16, seconds: f64) {
        self.http_requests
            .get_or_create(&labels(&[
                ("route", route),
                ("status", &status.to_string()),
            ]))
            .inc();
        self.http_duration
            .get_or_create(&labels(&[("route", route)]))
            .observe(seconds);
    }

    /// The state gauges of agent `agent`, read at scrape time.
    pub(crate) fn set_state(
        &self,
        agent: &str,
        stored: Option<u64>,
        log: &agentkit_runtime::EventLog,
        stats: agentkit_runtime::RuntimeStats,
        connections: &[agentkit_mcp::ConnectionStatus],
    ) {
        const STATES: &[&str] = &[
            "idle",
            "starting",
            "connected",
            "restarting",
            "error",
            "closed",
        ];
        for c in connections {
            for state in STATES {
                self.mcp_connections
                    .get_or_create(&labels(&[
                        ("agent", agent),
                        ("connection", &c.name),
                        ("transport", c.transport),
                        ("state", state),
                    ]))
                    .set(i64::from(c.state == *state));
            }
        }
        let (open_logs, store, syncs) = (log.open_logs(), log.latency(), log.sync_stats());
        let a = labels(&[("agent", agent)]);
        if let Some(stored) = stored {
            self.sessions_stored
                .get_or_create(&a)
                .set(i64::try_from(stored).unwrap_or(i64::MAX));
        }
        // The store keeps the totals; the counters catch up to them.
        let appends = self.appends.get_or_create(&a);
        appends.inc_by(store.appends.saturating_sub(appends.get()));
        let fsyncs = self.fsyncs.get_or_create(&a);
        fsyncs.inc_by(store.syncs.saturating_sub(fsyncs.get()));
        let seconds = self.append_seconds.get_or_create(&a);
        seconds.inc_by((store.append_seconds - seconds.get()).max(0.0));
        let seconds = self.fsync_seconds.get_or_create(&a);
        seconds.inc_by((store.sync_seconds - seconds.get()).max(0.0));
        let catch_up = |c: &Family<Labels, Counter>, total: u64| {
            let c = c.get_or_create(&a);
            c.inc_by(total.saturating_sub(c.get()));
        };
        catch_up(&self.sync_batches, syncs.batches);
        catch_up(&self.journaled_syncs, syncs.journaled);
        catch_up(&self.journal_checkpoints, syncs.checkpoints);
        catch_up(&self.schedule_fired, stats.schedule_ticks_fired);
        catch_up(&self.schedule_skipped, stats.schedule_ticks_skipped);
        catch_up(&self.reminder_fired, stats.reminders_fired);
        catch_up(&self.index_commits, stats.index_commits);
        for (reason, n) in stats.sessions_deleted.by_reason() {
            let c = self
                .sessions_deleted
                .get_or_create(&labels(&[("agent", agent), ("reason", reason.as_str())]));
            c.inc_by(n.saturating_sub(c.get()));
        }
        let catch_up_seconds = |c: &Family<Labels, Counter<f64>>, ms: u64| {
            let c = c.get_or_create(&a);
            c.inc_by((ms as f64 / 1000.0 - c.get()).max(0.0));
        };
        catch_up_seconds(&self.schedule_late, stats.schedule_lateness_ms);
        catch_up_seconds(&self.reminder_late, stats.reminder_lateness_ms);
        self.open_logs
            .get_or_create(&a)
            .set(i64::try_from(open_logs).unwrap_or(i64::MAX));
        self.sessions_loaded
            .get_or_create(&a)
            .set(i64::try_from(stats.loaded_sessions).unwrap_or(i64::MAX));
        self.index_writes_queued
            .get_or_create(&a)
            .set(i64::try_from(stats.index_writes_queued).unwrap_or(i64::MAX));
    }

    /// The OpenMetrics text of every family.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            tracing::warn!("cannot encode the metrics");
        }
        out
    }
}

/// OpenMetrics text (what [`Metrics::render`] writes) in the Prometheus
/// text format 0.0.4, for scrapers that do not ask for OpenMetrics: no
/// `# EOF`, `# UNIT` or exemplars, a counter family's `HELP` and `TYPE`
/// named like its `_total` samples (its `_created` samples dropped),
/// `unknown` as `untyped`, and `HELP` text without OpenMetrics' `\"`
/// escape.
pub(crate) fn prometheus_text(openmetrics: &str) -> String {
    let counters: HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            let name = prometheus_name(name, &counters);
            out.push_str(&format!("# HELP {name} {}\n", help.replace("\\\"", "\"")));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let kind = if kind == "unknown" { "untyped" } else { kind };
            out.push_str(&format!(
                "# TYPE {} {kind}\n",
                prometheus_name(name, &counters)
            ));
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        if let Some(family) = line[..name_end].strip_suffix("_created")
            && counters.contains(family)
        {
            continue;
        }
        // An exemplar follows ` # ` after the labels and the value.
        let after_labels = labels_end(line, name_end);
        let sample = match line[after_labels..].find(" # ") {
            Some(i) => &line[..after_labels + i],
            None => line,
        };
        out.push_str(sample);
        out.push('\n');
    }
    out
}

/// A counter family is named like its samples (`_total`) in 0.0.4.
fn prometheus_name(name: &str, counters: &HashSet<&str>) -> String {
    if counters.contains(name) && !name.ends_with("_total") {
        format!("{name}_total")
    } else {
        name.to_owned()
    }
}

/// Where a sample's label set ends (past its `}`), or `name_end` when it
/// has none; label values may hold `}`, `#` and escaped quotes.
fn labels_end(line: &str, name_end: usize) -> usize {
    if !line[name_end..].starts_with('{') {
        return name_end;
    }
    let (mut quoted, mut escaped) = (false, false);
    for (i, c) in line[name_end..].char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '}' if !quoted => return name_end + i + 1,
            _ => {}
        }
    }
    line.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openmetrics_becomes_prometheus_text() {
        let om = r#"# HELP agentkit_turns_started Turns "started".
# TYPE agentkit_turns_started counter
agentkit_turns_started_total{agent="a"} 3
agentkit_turns_started_created{agent="a"} 1700000000.0
# HELP agentkit_turn_duration_seconds Turn latency.
# TYPE agentkit_turn_duration_seconds histogram
# UNIT agentkit_turn_duration_seconds seconds
agentkit_turn_duration_seconds_bucket{agent="a",le="+Inf"} 1 # {trace_id="x"} 0.5
agentkit_turn_duration_seconds_sum{agent="a"} 0.5
agentkit_turn_duration_seconds_count{agent="a"} 1
# HELP agentkit_mcp_connections States.
# TYPE agentkit_mcp_connections gauge
agentkit_mcp_connections{connection="a # }b",state="idle"} 1
# TYPE agentkit_other unknown
agentkit_other 2
# EOF
"#;
        let want = r#"# HELP agentkit_turns_started_total Turns "started".
# TYPE agentkit_turns_started_total counter
agentkit_turns_started_total{agent="a"} 3
# HELP agentkit_turn_duration_seconds Turn latency.
# TYPE agentkit_turn_duration_seconds histogram
agentkit_turn_duration_seconds_bucket{agent="a",le="+Inf"} 1
agentkit_turn_duration_seconds_sum{agent="a"} 0.5
agentkit_turn_duration_seconds_count{agent="a"} 1
# HELP agentkit_mcp_connections States.
# TYPE agentkit_mcp_connections gauge
agentkit_mcp_connections{connection="a # }b",state="idle"} 1
# TYPE agentkit_other untyped
agentkit_other 2
"#;
        assert_eq!(
            prometheus_text(&om.replace("\"started\"", "\\\"started\\\"")),
            want
        );
    }
}
