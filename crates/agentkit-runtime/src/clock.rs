//! The time schedules and reminders run on: the system clock in
//! production, a [`ManualClock`] that tests move by hand, so no test waits
//! for wall time.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};

/// A boxed, sendable future (what [`Clock::sleep_until`] returns).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where "now" comes from, and how to wait for a later instant.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current instant, UTC.
    fn now(&self) -> DateTime<Utc>;
    /// Resolves at `deadline` by this clock, or earlier (callers check
    /// [`Clock::now`] again and sleep once more if it is not time yet).
    fn sleep_until(&self, deadline: DateTime<Utc>) -> BoxFuture<'static, ()>;
}

/// The system clock. Sleeps are capped at a minute, so a wall clock that
/// jumps (NTP, suspend) is noticed within a minute.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    fn sleep_until(&self, deadline: DateTime<Utc>) -> BoxFuture<'static, ()> {
        let wait = (deadline - Utc::now())
            .to_std()
            .unwrap_or(Duration::ZERO)
            .min(Duration::from_secs(60));
        Box::pin(tokio::time::sleep(wait))
    }
}

/// A clock that only moves when told to ([`ManualClock::advance`],
/// [`ManualClock::set`]); every sleeper wakes on each move and checks the
/// time again.
#[derive(Debug, Clone)]
pub struct ManualClock {
    inner: Arc<ManualInner>,
}

#[derive(Debug)]
struct ManualInner {
    now: Mutex<DateTime<Utc>>,
    moved: tokio::sync::watch::Sender<u64>,
}

impl ManualClock {
    pub fn new(start: DateTime<Utc>) -> ManualClock {
        ManualClock {
            inner: Arc::new(ManualInner {
                now: Mutex::new(start),
                moved: tokio::sync::watch::channel(0).0,
            }),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let by = chrono::Duration::from_std(by).unwrap_or(chrono::Duration::zero());
        {
            let mut now = self.inner.now.lock().unwrap_or_else(|e| e.into_inner());
            *now += by;
        }
        self.inner.moved.send_modify(|n| *n += 1);
    }

    /// Sets the clock to `to` (forward or back).
    pub fn set(&self, to: DateTime<Utc>) {
        *self.inner.now.lock().unwrap_or_else(|e| e.into_inner()) = to;
        self.inner.moved.send_modify(|n| *n += 1);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.inner.now.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn sleep_until(&self, deadline: DateTime<Utc>) -> BoxFuture<'static, ()> {
        let mut moved = self.inner.moved.subscribe();
        let this = self.clone();
        Box::pin(async move {
            while this.now() < deadline {
                if moved.changed().await.is_err() {
                    return;
                }
            }
        })
    }
}
