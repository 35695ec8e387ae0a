//! The loaded sessions: the table by id, the continuation keys of the
//! loaded ones, the least-recently-used order that decides which idle
//! sessions are unloaded, and the per-key locks of create-or-continue.
//!
//! The registry holds only what is loaded; the session index in
//! `agentkit.sqlite` (`db.rs`) knows every stored session, and
//! `AgentRuntime::get` loads one from it when it is addressed. Every lock
//! here is short and never held across an `.await`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hashlink::LinkedHashMap;

use crate::session::Session;
use crate::util::lock;

/// `(channel, continuation key)`.
pub(crate) type ChannelKey = (String, String);

/// How many sessions stay loaded (with their fold cache) while idle.
pub(crate) const LOADED_SESSIONS: usize = 512;

/// How long a session stays loaded unused: past it, an idle session is
/// unloaded (its fold cache with it) by the next sweep, so a host's memory
/// follows what it serves now, not what it served at its busiest. The
/// next message loads it again from its snapshot and log.
pub(crate) const UNLOAD_IDLE_AFTER: Duration = Duration::from_secs(20);

/// How many of the least recently used sessions one touch looks at for
/// unloading.
const EVICT_LOOKS: usize = 16;

type KeyLocks = Mutex<HashMap<ChannelKey, Arc<tokio::sync::Mutex<()>>>>;

#[derive(Debug, Default)]
pub(crate) struct Registry {
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// `(channel, key)` → session id, for channels that bring their own
    /// keys, and the current token of HTTP sessions.
    keys: Mutex<HashMap<ChannelKey, String>>,
    /// Loaded sessions, least recently used first, keyed by the address
    /// of their `Arc` (a session unloaded and loaded again is a new
    /// entry): a touch and a removal are O(1), not a scan of the order.
    hot: Mutex<LinkedHashMap<usize, Hot>>,
    /// Serialises create-or-continue per `(channel, key)`, so two first
    /// deliveries with one new key make one session.
    key_locks: Arc<KeyLocks>,
}

impl Registry {
    /// The loaded session `id`.
    pub(crate) fn peek(&self, id: &str) -> Option<Arc<Session>> {
        lock(&self.sessions).get(id).cloned()
    }

    /// Every loaded session.
    pub(crate) fn loaded(&self) -> Vec<Arc<Session>> {
        lock(&self.sessions).values().cloned().collect()
    }

    /// Makes `fresh` the loaded session under its id, or returns the one
    /// already loaded (two callers may load one session at once).
    pub(crate) fn insert(&self, fresh: Arc<Session>) -> Arc<Session> {
        let key = {
            let meta = fresh.meta();
            (meta.channel.clone(), meta.continuation_token.clone())
        };
        {
            let mut sessions = lock(&self.sessions);
            if let Some(loaded) = sessions.get(fresh.id.as_str()) {
                return loaded.clone();
            }
            sessions.insert(fresh.id.as_str().to_owned(), fresh.clone());
        }
        lock(&self.keys).insert(key, fresh.id.as_str().to_owned());
        fresh
    }

    /// Removes `session` if it is the one loaded under its id, with its
    /// key and its place in the LRU order. Returns whether it was.
    pub(crate) fn remove(&self, session: &Arc<Session>) -> bool {
        let removed = {
            let mut sessions = lock(&self.sessions);
            match sessions.get(session.id.as_str()) {
                Some(s) if Arc::ptr_eq(s, session) => {
                    sessions.remove(session.id.as_str());
                    true
                }
                _ => false,
            }
        };
        if removed {
            self.drop_key(session);
            lock(&self.hot).remove(&slot(session));
        }
        removed
    }

    /// Removes `session` if it is loaded and nobody but the registry holds
    /// it (`extra` references allowed: the caller's own). The idle check
    /// runs under the table's lock, so no lookup can take it meanwhile.
    fn remove_unused(&self, session: &Arc<Session>, extra: usize) -> Unload {
        let mut sessions = lock(&self.sessions);
        let ours = sessions
            .get(session.id.as_str())
            .is_some_and(|s| Arc::ptr_eq(s, session));
        if !ours {
            return Unload::NotLoaded;
        }
        if session.state().is_active() || Arc::strong_count(session) > 1 + extra {
            return Unload::InUse;
        }
        sessions.remove(session.id.as_str());
        drop(sessions);
        self.drop_key(session);
        Unload::Removed
    }

    /// How many sessions are loaded (for `/metrics`).
    pub(crate) fn loaded_count(&self) -> usize {
        lock(&self.sessions).len()
    }

    /// The loaded session a key maps to.
    pub(crate) fn by_key(&self, channel: &str, key: &str) -> Option<String> {
        lock(&self.keys)
            .get(&(channel.to_owned(), key.to_owned()))
            .cloned()
    }

    /// Moves `id` from `old` to `new` (an HTTP token rotated).
    pub(crate) fn rekey(&self, channel: &str, old: &str, new: &str, id: &str) {
        let mut keys = lock(&self.keys);
        keys.remove(&(channel.to_owned(), old.to_owned()));
        keys.insert((channel.to_owned(), new.to_owned()), id.to_owned());
    }

    /// Removes the session's current key, if it still names this session.
    fn drop_key(&self, session: &Session) {
        let key = {
            let meta = session.meta();
            (meta.channel.clone(), meta.continuation_token.clone())
        };
        let mut keys = lock(&self.keys);
        if keys.get(&key).map(String::as_str) == Some(session.id.as_str()) {
            keys.remove(&key);
        }
    }

    /// Records that `session` was used. Past [`LOADED_SESSIONS`], the
    /// least recently used idle sessions are unloaded (their fold cache
    /// with them): a stored session costs memory only while it is used.
    /// Busy and parked sessions (whose approval timers need their state)
    /// stay.
    pub(crate) fn touch(&self, session: &Arc<Session>) {
        let now = Instant::now();
        let evict: Vec<Arc<Session>> = {
            let mut hot = lock(&self.hot);
            let key = slot(session);
            match hot.to_back(&key) {
                Some(entry) => entry.used = now,
                None => {
                    hot.insert(
                        key,
                        Hot {
                            session: session.clone(),
                            used: now,
                        },
                    );
                }
            }
            // A few looks a touch, so a touch stays O(1) however many of
            // the oldest are busy; the excess goes over the next touches.
            take_oldest(&mut hot, EVICT_LOOKS, |hot| hot.len() > LOADED_SESSIONS)
        };
        self.unload(evict, now);
    }

    /// Unloads the sessions nobody used for `idle` or longer, but busy
    /// and parked ones and those still held; answers how many it
    /// unloaded.
    pub(crate) fn unload_idle(&self, idle: Duration) -> usize {
        let now = Instant::now();
        let Some(cutoff) = now.checked_sub(idle) else {
            return 0;
        };
        let candidates = {
            let mut hot = lock(&self.hot);
            // Each entry is looked at once at most.
            let looks = hot.len();
            take_oldest(&mut hot, looks, |hot| {
                hot.front().is_some_and(|(_, h)| h.used <= cutoff)
            })
        };
        let count = candidates.len();
        count - self.unload(candidates, now)
    }

    /// Unloads `sessions`, taken out of the LRU order. A session still
    /// held (a stream being written, a worker letting go of it) goes back
    /// to the end of the order rather than out of it: dropped from the
    /// order but kept in the table, it would stay loaded for good (past
    /// saturation, most sessions at the front are still held, and the
    /// table grew with every session served). Answers how many went back.
    fn unload(&self, sessions: Vec<Arc<Session>>, now: Instant) -> usize {
        let mut held = Vec::new();
        for session in sessions {
            // The vector's reference (the order's, popped) is the extra
            // one.
            if self.remove_unused(&session, 1) == Unload::InUse {
                held.push(session);
            }
        }
        let kept = held.len();
        if !held.is_empty() {
            let mut hot = lock(&self.hot);
            for session in held {
                let key = slot(&session);
                if hot.get(&key).is_none() {
                    hot.insert(key, Hot { session, used: now });
                }
            }
        }
        kept
    }

    /// Holds `(channel, key)`'s create-or-continue lock until dropped.
    pub(crate) async fn lock_key(&self, channel: &str, key: &str) -> KeyGuard {
        let slot = (channel.to_owned(), key.to_owned());
        let mutex = Arc::clone(lock(&self.key_locks).entry(slot.clone()).or_default());
        let guard = mutex.clone().lock_owned().await;
        KeyGuard {
            locks: Arc::clone(&self.key_locks),
            slot,
            mutex,
            _guard: Some(guard),
        }
    }
}

/// A loaded session in the LRU order, and when it was last used.
#[derive(Debug)]
struct Hot {
    session: Arc<Session>,
    used: Instant,
}

/// What [`Registry::remove_unused`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unload {
    Removed,
    /// Active, or held besides the registry: kept.
    InUse,
    /// Not the session loaded under its id (already unloaded).
    NotLoaded,
}

/// Takes sessions off the front of the LRU order while `due` says so, at
/// most `looks` of them, and answers them; pinned ones go to the back.
fn take_oldest(
    hot: &mut LinkedHashMap<usize, Hot>,
    looks: usize,
    due: impl Fn(&LinkedHashMap<usize, Hot>) -> bool,
) -> Vec<Arc<Session>> {
    let mut out = Vec::new();
    for _ in 0..looks {
        if !due(hot) {
            break;
        }
        let Some((key, oldest)) = hot.pop_front() else {
            break;
        };
        if pinned(&oldest.session) {
            hot.insert(key, oldest);
        } else {
            out.push(oldest.session);
        }
    }
    out
}

/// Busy and parked sessions (whose approval timers need their state)
/// stay loaded however long unused.
fn pinned(session: &Session) -> bool {
    session.state().is_active() || session.meta().parked
}

/// A loaded session's key in the LRU order: the address of its `Arc`,
/// unique while the order holds a clone of it.
fn slot(session: &Arc<Session>) -> usize {
    Arc::as_ptr(session) as usize
}

/// A held create-or-continue lock; the last holder removes the entry.
pub(crate) struct KeyGuard {
    locks: Arc<KeyLocks>,
    slot: ChannelKey,
    mutex: Arc<tokio::sync::Mutex<()>>,
    _guard: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Drop for KeyGuard {
    fn drop(&mut self) {
        self._guard = None;
        let mut locks = lock(&self.locks);
        // The table's Arc and ours: nobody else waits on this key.
        if Arc::strong_count(&self.mutex) <= 2 {
            locks.remove(&self.slot);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::meta::SessionMeta;
    use agentkit_protocol::SessionId;

    fn session(n: usize) -> Arc<Session> {
        let id = format!("ses_{n:06}");
        let meta: SessionMeta = serde_json::from_value(serde_json::json!({
            "id": id,
            "channel": "http",
            "mode": "chat",
            "owner": {"principalId": "alice", "principalType": "user", "authenticator": "test"},
            "continuationToken": format!("http:{n}"),
            "createdAt": "2026-12-01T00:00:00.000Z",
        }))
        .unwrap();
        Arc::new(Session::new(
            SessionId::parse(&id).unwrap(),
            meta,
            std::path::PathBuf::from("/nonexistent"),
            false,
        ))
    }

    fn load(registry: &Registry, n: usize) -> Arc<Session> {
        let s = registry.insert(session(n));
        registry.touch(&s);
        s
    }

    #[test]
    fn a_session_still_held_when_it_leaves_the_lru_is_unloaded_once_let_go() {
        let registry = Registry::default();
        // Past saturation the oldest sessions are still held (a stream
        // being written) when newer ones push them out of the order.
        let held: Vec<Arc<Session>> = (0..200).map(|n| load(&registry, n)).collect();
        for n in 200..LOADED_SESSIONS + 200 {
            load(&registry, n);
        }
        assert!(registry.peek("ses_000000").is_some());
        drop(held);
        for n in LOADED_SESSIONS + 200..2 * LOADED_SESSIONS + 400 {
            load(&registry, n);
        }
        assert!(
            registry.loaded_count() <= LOADED_SESSIONS + 1,
            "{} sessions loaded",
            registry.loaded_count()
        );
        assert!(registry.peek("ses_000000").is_none());
        assert!(lock(&registry.keys).len() <= LOADED_SESSIONS + 1);
    }

    #[test]
    fn sessions_unused_for_the_idle_time_are_unloaded_but_held_ones_stay() {
        let registry = Registry::default();
        let sessions: Vec<Arc<Session>> = (0..10).map(|n| load(&registry, n)).collect();
        // Just used: nothing is idle for a minute.
        assert_eq!(registry.unload_idle(Duration::from_secs(60)), 0);
        assert_eq!(registry.loaded_count(), 10);
        // One still held (a stream being written); the rest let go.
        let held = sessions[3].clone();
        drop(sessions);
        assert_eq!(registry.unload_idle(Duration::ZERO), 9);
        assert_eq!(registry.loaded_count(), 1);
        assert!(registry.peek("ses_000003").is_some());
        assert_eq!(lock(&registry.keys).len(), 1);
        // Let go, it is unloaded by the next sweep.
        drop(held);
        assert_eq!(registry.unload_idle(Duration::ZERO), 1);
        assert_eq!(registry.loaded_count(), 0);
        assert!(lock(&registry.hot).is_empty());
    }
}
