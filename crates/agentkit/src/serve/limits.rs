//! Fair shares: optional budgets per caller, so that one principal, one
//! client address or one webhook channel cannot take the host from the
//! others. A request rate per principal of each agent (per client address
//! on the routes that run no auth chain) and one per webhook channel, each
//! kept by a keyed GCRA limiter (`governor`); the turns in flight per
//! principal are counted by the turn gate (`edge.rs`). A caller past its
//! share is answered `429` `rate_limited` with `Retry-After` (a
//! [`Limited`], which `http.rs` turns into the answer). Operators pass
//! every share: they run the host. A leaf: it imports no other module of
//! `serve/`.

use std::fmt;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agentkit_runtime::Owner;
use governor::clock::Clock as _;
use tokio_util::sync::CancellationToken;

/// What the fair shares refused since start, read by `/metrics`.
#[derive(Debug, Default)]
pub(crate) struct LimitStats {
    /// Requests past a principal's request rate.
    pub(crate) principal: AtomicU64,
    /// Requests past a client address's request rate.
    pub(crate) address: AtomicU64,
    /// Deliveries past their channel's rate.
    pub(crate) channel: AtomicU64,
    /// Turns past their principal's turns in flight.
    pub(crate) turns: AtomicU64,
}

/// A request rate: at most `count` requests per `per`, `count` of them at
/// once (a burst), refilled evenly (one every `per / count`). Written
/// `N/s`, `N/min` or `N/h` (`20/s`, `600/min`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    count: NonZeroU32,
    per: Duration,
}

impl Rate {
    /// `count` requests per `per`; `None` when either is zero.
    pub fn new(count: u32, per: Duration) -> Option<Rate> {
        let count = NonZeroU32::new(count)?;
        (!per.is_zero()).then_some(Rate { count, per })
    }

    /// The requests allowed per period, and at once.
    pub fn count(&self) -> u32 {
        self.count.get()
    }

    /// The period.
    pub fn per(&self) -> Duration {
        self.per
    }

    fn quota(&self) -> governor::Quota {
        let every = self.per / self.count.get();
        governor::Quota::with_period(every.max(Duration::from_nanos(1)))
            .unwrap_or_else(|| governor::Quota::per_second(self.count))
            .allow_burst(self.count)
    }
}

impl FromStr for Rate {
    type Err = String;

    fn from_str(s: &str) -> Result<Rate, String> {
        let wrong = || format!("`{s}` is not a rate: write N/s, N/min or N/h (such as 20/s)");
        let (count, unit) = s.trim().split_once('/').ok_or_else(wrong)?;
        let count: u32 = count.trim().parse().map_err(|_| wrong())?;
        let per = match unit.trim() {
            "s" | "sec" | "second" => Duration::from_secs(1),
            "m" | "min" | "minute" => Duration::from_secs(60),
            "h" | "hour" => Duration::from_secs(3600),
            _ => return Err(wrong()),
        };
        Rate::new(count, per).ok_or_else(|| format!("`{s}`: the count must be at least 1"))
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.per.as_secs() {
            1 => "s",
            60 => "min",
            3600 => "h",
            _ => return write!(f, "{} per {} s", self.count, self.per.as_secs_f64()),
        };
        write!(f, "{}/{unit}", self.count)
    }
}

/// Whose budget a request is counted against.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    /// A principal of one agent (principals are per agent: each agent has
    /// its own chain).
    Principal { agent: String, principal: String },
    /// A client address, on the routes that run no auth chain.
    Address(IpAddr),
    /// One webhook channel of one agent, whoever delivers.
    Channel { agent: String, channel: String },
}

type Limiter = governor::DefaultKeyedRateLimiter<Key>;

/// One keyed rate and its limiter.
struct Budget {
    rate: Rate,
    limiter: Limiter,
}

impl Budget {
    fn new(rate: Rate) -> Budget {
        Budget {
            rate,
            limiter: Limiter::keyed(rate.quota()),
        }
    }

    /// `Err(seconds to wait)` when `key` is past the rate.
    fn check(&self, key: &Key) -> Result<(), u64> {
        self.limiter.check_key(key).map_err(|not_until| {
            let wait = not_until.wait_time_from(self.limiter.clock().now());
            wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
        })
    }
}

/// The host's fair shares (`--rate-limit`, `--channel-rate-limit`); the
/// per-principal turn bound lives in the turn gate.
pub(crate) struct FairShares {
    /// Per principal of each agent, and per client address on the routes
    /// without an auth chain.
    requests: Option<Budget>,
    /// Per webhook channel of each agent: deliveries have their own
    /// budget, so a flood on one channel leaves the API its own.
    channels: Option<Budget>,
    stats: Arc<LimitStats>,
}

impl fmt::Debug for FairShares {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FairShares")
            .field("requests", &self.requests.as_ref().map(|b| b.rate))
            .field("channels", &self.channels.as_ref().map(|b| b.rate))
            .finish()
    }
}

impl FairShares {
    /// `requests`: `--rate-limit`; `channels`: `--channel-rate-limit`.
    pub(crate) fn new(
        requests: Option<Rate>,
        channels: Option<Rate>,
        stats: Arc<LimitStats>,
    ) -> Arc<FairShares> {
        Arc::new(FairShares {
            requests: requests.map(Budget::new),
            channels: channels.map(Budget::new),
            stats,
        })
    }

    /// Counts a request of `owner` on agent `agent`; `429` past its rate.
    pub(crate) fn principal(&self, agent: &str, owner: &Owner) -> Result<(), Limited> {
        let Some(budget) = &self.requests else {
            return Ok(());
        };
        if owner.is_operator() {
            return Ok(());
        }
        let key = Key::Principal {
            agent: agent.to_owned(),
            principal: owner.principal_id.clone(),
        };
        budget.check(&key).map_err(|wait| {
            self.stats.principal.fetch_add(1, Ordering::Relaxed);
            limited(
                format!(
                    "principal `{}` is past its request rate ({}, --rate-limit); retry after {wait} s",
                    owner.principal_id, budget.rate
                ),
                wait,
            )
        })
    }

    /// Counts a request from `address` on a route without an auth chain;
    /// `429` past its rate.
    pub(crate) fn address(&self, address: IpAddr) -> Result<(), Limited> {
        let Some(budget) = &self.requests else {
            return Ok(());
        };
        budget.check(&Key::Address(address)).map_err(|wait| {
            self.stats.address.fetch_add(1, Ordering::Relaxed);
            limited(
                format!(
                    "this client address is past its request rate ({}, --rate-limit); retry after {wait} s",
                    budget.rate
                ),
                wait,
            )
        })
    }

    /// Counts a delivery to channel `channel` of agent `agent`; `429` past
    /// the channel's rate.
    pub(crate) fn channel(&self, agent: &str, channel: &str) -> Result<(), Limited> {
        let Some(budget) = &self.channels else {
            return Ok(());
        };
        let key = Key::Channel {
            agent: agent.to_owned(),
            channel: channel.to_owned(),
        };
        budget.check(&key).map_err(|wait| {
            self.stats.channel.fetch_add(1, Ordering::Relaxed);
            limited(
                format!(
                    "channel `{channel}` is past its delivery rate ({}, --channel-rate-limit); retry after {wait} s",
                    budget.rate
                ),
                wait,
            )
        })
    }

    /// Forgets, every 10 s until `shutdown`, the callers whose budget is
    /// full again (they would be counted from scratch anyway), so the
    /// tables hold only recent callers.
    pub(crate) async fn prune(self: Arc<Self>, shutdown: CancellationToken) {
        if self.requests.is_none() && self.channels.is_none() {
            return;
        }
        loop {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(10)) => {}
                () = shutdown.cancelled() => return,
            }
            for budget in [&self.requests, &self.channels].into_iter().flatten() {
                budget.limiter.retain_recent();
                budget.limiter.shrink_to_fit();
            }
        }
    }
}

/// A refusal past a fair share: answered `429` `rate_limited` with
/// `Retry-After: wait` (seconds, at least 1).
#[derive(Debug)]
pub(crate) struct Limited {
    pub(crate) message: String,
    pub(crate) wait: u64,
}

pub(crate) fn limited(message: String, wait: u64) -> Limited {
    Limited {
        message,
        wait: wait.max(1),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn rates_are_written_count_slash_unit() {
        let r: Rate = "20/s".parse().unwrap();
        assert_eq!((r.count(), r.per()), (20, Duration::from_secs(1)));
        assert_eq!(r.to_string(), "20/s");
        let r: Rate = "600/min".parse().unwrap();
        assert_eq!((r.count(), r.per()), (600, Duration::from_secs(60)));
        assert_eq!("5/h".parse::<Rate>().unwrap().to_string(), "5/h");
        for bad in ["20", "0/s", "x/s", "20/d", "/s"] {
            assert!(bad.parse::<Rate>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_budget_allows_its_burst_then_says_how_long_to_wait() {
        let budget = Budget::new("3/min".parse().unwrap());
        let key = Key::Address(IpAddr::from([127, 0, 0, 1]));
        for _ in 0..3 {
            assert_eq!(budget.check(&key), Ok(()));
        }
        // One request comes back every 20 s.
        let wait = budget.check(&key).unwrap_err();
        assert!((19..=20).contains(&wait), "{wait}");
        // Another caller has its own budget.
        assert_eq!(
            budget.check(&Key::Address(IpAddr::from([10, 0, 0, 1]))),
            Ok(())
        );
    }
}
