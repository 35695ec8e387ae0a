//! Small helpers every module of the runtime uses: a lock that survives a
//! poisoned mutex, new ids, and a database call from synchronous code.
//! A leaf: it imports only the error type.

use std::sync::{Mutex, MutexGuard};

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these short locks leaves plain data
    // behind; keep serving rather than poisoning every later request.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A new id: `prefix` and a time-ordered UUID (`ses_…`, `turn_…`).
pub(crate) fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
}

/// Now, as session metadata stores it (RFC 3339, UTC, milliseconds).
pub(crate) fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// An opaque, unguessable HTTP continuation token.
pub(crate) fn mint_token() -> String {
    format!("http:{}", uuid::Uuid::new_v4().simple())
}
