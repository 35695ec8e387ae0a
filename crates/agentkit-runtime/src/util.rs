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

/// Per-send workspace files as a routed mailbox row stores them: path and
/// base64 bytes (a file may be binary, an upload's image).
pub(crate) mod b64_files {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(crate) fn serialize<S: Serializer>(
        files: &[(String, Vec<u8>)],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        files
            .iter()
            .map(|(p, b)| (p.as_str(), STANDARD.encode(b)))
            .collect::<Vec<_>>()
            .serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<(String, Vec<u8>)>, D::Error> {
        Vec::<(String, String)>::deserialize(d)?
            .into_iter()
            .map(|(p, b)| {
                STANDARD
                    .decode(b)
                    .map(|bytes| (p, bytes))
                    .map_err(serde::de::Error::custom)
            })
            .collect()
    }
}
