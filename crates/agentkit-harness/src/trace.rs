//! The trace context of the work in hand, for outgoing requests: the
//! `traceparent` of the request that is being served ([`incoming`], set
//! by the facade around a handler) and of the model step or tool call that
//! is running ([`current`], set by the runtime around a turn and narrowed
//! here per step). Task-locals, so the providers' HTTP layer and the MCP
//! client read it without every signature carrying it; nothing is set
//! while tracing is off, and then nothing is sent.

use std::future::Future;

use agentkit_protocol::trace::{TraceParent, child_span_id};

tokio::task_local! {
    static INCOMING: TraceParent;
    static CURRENT: TraceParent;
}

/// Runs `f` with `traceparent` as the request being served.
pub fn with_incoming<F: Future>(traceparent: TraceParent, f: F) -> impl Future<Output = F::Output> {
    INCOMING.scope(traceparent, f)
}

/// The `traceparent` of the request being served, if tracing is on.
pub fn incoming() -> Option<TraceParent> {
    INCOMING.try_with(Clone::clone).ok()
}

/// Runs `f` with `traceparent` as the caller of what it sends.
pub fn with_current<F: Future>(traceparent: TraceParent, f: F) -> impl Future<Output = F::Output> {
    CURRENT.scope(traceparent, f)
}

/// The `traceparent` outgoing requests carry, if tracing is on.
pub fn current() -> Option<TraceParent> {
    CURRENT.try_with(Clone::clone).ok()
}

/// The current context narrowed to the child span `kind`/`key` of its
/// span (a step's `chat` span, a call's `execute_tool` span).
pub(crate) fn child(kind: &str, key: &str) -> Option<TraceParent> {
    current().map(|tp| {
        let span = child_span_id(&tp.span_id, kind, key);
        tp.with_span(span)
    })
}

/// Runs `f` under the child span `kind`/`key` of the current one, when
/// there is a current one (the child is chosen now, not when polled).
/// An `Either`, not an `async` block: a block would hold `f` twice (its
/// capture and the scope built from it), doubling a turn's future.
pub(crate) fn in_child<F: Future>(
    kind: &str,
    key: &str,
    f: F,
) -> impl Future<Output = F::Output> + use<F> {
    use futures_util::future::Either;
    match child(kind, key) {
        Some(tp) => Either::Left(CURRENT.scope(tp, f)),
        None => Either::Right(f),
    }
}
